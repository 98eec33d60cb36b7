"""The ontology catalogue inside prompt files: find the marked sections, regenerate them, tell when they are stale.

A prompt (``src/pcm/prompts/**/*.md``) includes the catalogue between two marker lines::

    <!-- catalogue:begin -->
    ... generated, do not edit ...
    <!-- catalogue:end -->

The begin marker takes optional arguments: ``areas=people,family`` restricts the listing to those areas (names
the ontology declares in ``areas.toml``), and ``compact`` asks for the compact notation (properties grouped by domain, no
comments) that fits the NL→SPARQL prompt's token budget, e.g. ``<!-- catalogue:begin areas=pets,plants compact -->``.
``pcm ontology catalog --write`` regenerates every marked section; ``--check`` (and CI, and ``pcm ontology check``)
fails when a committed prompt's section differs from what the current ontology generates.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pcm import prompts
from pcm.errors import InputError
from pcm.ontology import Ontology

BEGIN, END = prompts.CATALOGUE_BEGIN, prompts.CATALOGUE_END


@dataclass(frozen=True)
class Section:
    """One marked catalogue section of a prompt file."""

    areas: tuple[str, ...] | None
    compact: bool
    start: int
    """Offset of the first character after the begin marker line's newline."""
    end: int
    """Offset of the end marker (the generated text is ``text[start:end]``)."""
    line: int


def prompt_files(root: Path | None = None) -> list[Path]:
    """Every prompt file: the package's (:func:`pcm.prompts.prompt_files`), or under ``root`` every ``*.md`` inside
    a ``prompts`` folder, at any depth (an author's checkout keeps the package's ``prompts/<pipeline>/`` layout)."""
    if root is None:
        return prompts.prompt_files()
    return sorted(p for p in root.rglob("*.md") if p.is_file() and "prompts" in p.relative_to(root).parts[:-1])


def sections(text: str, name: str = "prompt") -> list[Section]:
    """The marked sections of a prompt, in order; :class:`InputError` for unbalanced or malformed markers."""
    found: list[Section] = []
    position = 0
    while True:
        begin = BEGIN.search(text, position)
        stray_end = END.search(text, position)
        if begin is None:
            if stray_end is not None:
                raise InputError(f"{name}:{_line(text, stray_end.start())}: catalogue:end without catalogue:begin")
            return found
        if stray_end is not None and stray_end.start() < begin.start():
            raise InputError(f"{name}:{_line(text, stray_end.start())}: catalogue:end without catalogue:begin")
        end = END.search(text, begin.end())
        nested = BEGIN.search(text, begin.end())
        if end is None or (nested is not None and nested.start() < end.start()):
            raise InputError(f"{name}:{_line(text, begin.start())}: catalogue:begin without its catalogue:end")
        areas, compact = _arguments(begin.group("args"), f"{name}:{_line(text, begin.start())}")
        start = begin.end() + 1 if text[begin.end() : begin.end() + 1] == "\n" else begin.end()
        found.append(Section(areas, compact, start, end.start(), _line(text, begin.start())))
        position = end.end()


def _arguments(raw: str, where: str) -> tuple[tuple[str, ...] | None, bool]:
    areas: tuple[str, ...] | None = None
    compact = False
    for word in raw.split():
        key, _, value = word.partition("=")
        if key == "areas" and value:
            areas = tuple(a.strip() for a in value.split(",") if a.strip())
        elif word == "compact":
            compact = True
        else:
            raise InputError(f"{where}: unknown catalogue marker argument {word!r} (use areas=a,b and/or compact)")
    return areas, compact


def render(ontology: Ontology, section: Section, name: str = "prompt") -> str:
    """What a section should contain: the catalogue, with a trailing newline before the end marker. An area the
    ontology does not declare is an :class:`InputError` (it would silently select nothing)."""
    unknown = [a for a in section.areas or () if a not in ontology.areas]
    if unknown:
        raise InputError(f"{name}:{section.line}: unknown catalogue area(s) {', '.join(unknown)}; known: "
                         f"{', '.join(ontology.areas)}")
    return ontology.catalogue(section.areas, compact=section.compact)


def refreshed(text: str, ontology: Ontology, name: str = "prompt") -> str:
    """``text`` with every marked section regenerated from ``ontology``."""
    out: list[str] = []
    position = 0
    for section in sections(text, name):
        out.append(text[position : section.start])
        out.append(render(ontology, section, name))
        position = section.end
    out.append(text[position:])
    return "".join(out)


def stale_prompts(ontology: Ontology, files: Iterable[Path]) -> list[Path]:
    """The prompt files whose marked sections differ from what ``ontology`` generates."""
    return [path for path in files if _differs(path, ontology)]


def write_prompts(ontology: Ontology, files: Iterable[Path]) -> list[Path]:
    """Regenerate the marked sections in place; returns the files that changed."""
    changed = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        new = refreshed(text, ontology, str(path))
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(path)
    return changed


def section_spans(text: str, name: str = "prompt") -> list[tuple[int, int]]:
    """Character ranges of the generated parts (a term check skips them: they are checked for staleness)."""
    return [(s.start, s.end) for s in sections(text, name)]


def approx_tokens(text: str) -> int:
    """A rough token count for budgeting (CURIE-dense text runs near 3.5 characters per token)."""
    return round(len(text) / 3.5)


def _differs(path: Path, ontology: Ontology) -> bool:
    text = path.read_text(encoding="utf-8")
    return refreshed(text, ontology, str(path)) != text


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1

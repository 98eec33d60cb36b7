"""Every prompt pcm sends to a language model: versioned Markdown files in this folder, one loader, one renderer.

Why files: a prompt is part of what an output *was* (an extraction, a summary, an answer, a judge's verdict), so it
is reviewed and versioned like code, not assembled from Python strings. One subfolder per pipeline::

    extraction/   extract.vN.md, repair.vN.md        (pcm.extraction.prompts assembles them)
    retrieval/    nl2sparql, answer, decompose, plan_check, combine
    summaries/    summary.vN.md
    evaluation/   judge_*.vN.md                       (the benchmarks' own grading prompts)

A file starts with ``<!-- prompt: NAME.vN -->`` (the version, equal to the file name's stem) and is cut into named
parts by ``<!-- part: NAME -->`` lines (``system``, ``user``, ...). :meth:`PromptFile.render` fills ``{{name}}``
placeholders; :func:`around_catalogue` cuts out the generated vocabulary block (between the catalogue markers,
kept equal to ``pcm_ontology/`` by ``pcm ontology catalog --write``) so a call puts the areas it needs there.

Whatever records which prompt shaped an output records :attr:`PromptFile.ref` (``name.vN@digest``): the digest
changes with any edit of the file, including a regenerated catalogue that nobody renamed the file for.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

PROMPTS_DIR = Path(__file__).resolve().parent

#: The marker lines around a generated catalogue block; the begin marker may carry ``areas=a,b`` and ``compact``.
CATALOGUE_BEGIN = re.compile(r"^<!--\s*catalogue:begin(?P<args>[^>]*?)\s*-->[ \t]*$", re.MULTILINE)
CATALOGUE_END = re.compile(r"^<!--\s*catalogue:end\s*-->[ \t]*$", re.MULTILINE)

_HEADER = re.compile(r"^<!-- prompt: (?P<version>[\w.-]+) -->\s*$")
_PART = re.compile(r"^<!-- part: (?P<name>\w+) -->\s*$", re.MULTILINE)
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


@dataclass(frozen=True)
class PromptFile:
    """One prompt file: its version (from the header line) and its named parts (``system``, ``user``)."""

    path: Path
    version: str
    parts: dict[str, str]
    digest: str = ""
    """First 8 hex digits of the file's SHA-256: changes with any edit, including a regenerated catalogue."""

    @property
    def ref(self) -> str:
        """What an output records about the prompt that shaped it: ``name.vN@digest``."""
        return f"{self.version}@{self.digest}"

    def render(self, part: str, **values: str) -> str:
        """Fill ``{{name}}`` placeholders of one part; a missing value is a programming error, so it raises."""
        text = self.parts[part]
        missing = sorted(set(_PLACEHOLDER.findall(text)) - values.keys())
        if missing:
            raise KeyError(f"prompt {self.path.name} part {part!r} needs values for {missing}")
        return _PLACEHOLDER.sub(lambda m: values[m.group(1)], text)


def read_prompt(path: Path) -> PromptFile:
    """Parse a prompt file: first line ``<!-- prompt: NAME.vN -->``, then ``<!-- part: NAME -->`` sections."""
    text = path.read_text(encoding="utf-8")
    first, _, rest = text.partition("\n")
    header = _HEADER.match(first)
    if header is None:
        raise ValueError(f"{path.name}: first line must be '<!-- prompt: NAME.vN -->'")
    version = header.group("version")
    if not path.name.startswith(version + "."):
        raise ValueError(f"{path.name}: header version {version!r} does not match the file name")
    pieces = _PART.split(rest)
    parts = {pieces[i]: pieces[i + 1].strip("\n") + "\n" for i in range(1, len(pieces) - 1, 2)}
    return PromptFile(path, version, parts, hashlib.sha256(text.encode("utf-8")).hexdigest()[:8])


@cache
def load(name: str) -> PromptFile:
    """A shipped prompt by its path under this folder (``"retrieval/answer.v2.md"``), read once per process.

    The files are part of the installed package and do not change while it runs; the one writer,
    :func:`pcm.extraction.prompts.refresh_catalogue`, clears this cache."""
    return read_prompt(PROMPTS_DIR / name)


def refs(*prompts: PromptFile) -> str:
    """Several prompts that shaped one output, as one recorded value: ``a.v1@1a2b3c4d+b.v1@5e6f7a8b``."""
    return "+".join(p.ref for p in prompts)


def prompt_files() -> list[Path]:
    """Every shipped prompt file, in path order."""
    return sorted(p for p in PROMPTS_DIR.rglob("*.md") if p.is_file())


def catalogue_span(text: str, name: str = "prompt") -> tuple[int, int, int, int]:
    """Offsets of the catalogue block: ``(begin marker start, block start, block end, end marker end)``."""
    begin = CATALOGUE_BEGIN.search(text)
    end = CATALOGUE_END.search(text, begin.end()) if begin else None
    if begin is None or end is None:
        raise ValueError(f"{name} has no '<!-- catalogue:begin -->' ... '<!-- catalogue:end -->' block")
    block = begin.end() + 1 if text[begin.end() : begin.end() + 1] == "\n" else begin.end()
    return begin.start(), block, end.start(), end.end()


def around_catalogue(text: str, name: str = "prompt") -> tuple[str, str]:
    """The text before the catalogue block's begin marker and after its end marker, markers dropped: a call puts
    the catalogue of the areas it chose between them."""
    start, _, _, stop = catalogue_span(text, name)
    return text[:start], text[stop:]


__all__ = [
    "CATALOGUE_BEGIN",
    "CATALOGUE_END",
    "PROMPTS_DIR",
    "PromptFile",
    "around_catalogue",
    "catalogue_span",
    "load",
    "prompt_files",
    "read_prompt",
    "refs",
]

"""The extraction prompts: versioned Markdown files beside this module, with the vocabulary catalogue generated.

Why files: a prompt is part of what an extraction *was* (its version is recorded on every extraction activity, and
a re-run skips posts extracted with the same prompt and ontology versions), so it is reviewed and versioned like
code, not assembled from Python strings. The vocabulary catalogue inside ``extract.v2.md`` is generated from
``pcm_ontology/`` by :func:`refresh_catalogue` and never typed by hand; a test keeps the committed copy equal to
the generated one. Each call sends only what the utterance needs: the compact catalogue of the areas relevant to it
(see :func:`pcm.extraction.areas.select_areas`; the full catalogue is ~10k tokens), core areas first so that
consecutive prompts share the longest prefix a prompt cache can reuse, and the topic notes (``part: hints``) of the
selected areas only.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

PROMPTS_DIR = Path(__file__).resolve().parent
EXTRACT_FILE = "extract.v2.md"
REPAIR_FILE = "repair.v1.md"
CATALOGUE_BEGIN = "<!-- catalogue:begin compact -->"
CATALOGUE_END = "<!-- catalogue:end -->"

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
def extract_prompt() -> PromptFile:
    return read_prompt(PROMPTS_DIR / EXTRACT_FILE)


@cache
def repair_prompt() -> PromptFile:
    return read_prompt(PROMPTS_DIR / REPAIR_FILE)


def prompt_version() -> str:
    """What an extraction activity records as ``pcm:promptVersion``: both prompts that may shape its output.

    Each name carries its file's digest (``extract.v1@1a2b3c4d``) because the catalogue inside the extraction prompt
    is regenerated whenever the ontology or the shapes change, without anyone renaming the file: a resumed run must
    then re-extract, not skip, the posts the older text produced."""
    return "+".join(f"{p.version}@{p.digest}" for p in (extract_prompt(), repair_prompt()))


def generated_catalogue() -> str:
    """The full catalogue as :meth:`pcm.ontology.Ontology.catalogue` writes it (what the committed prompt must hold)."""
    from pcm.ontology import load_ontology

    return load_ontology().catalogue(compact=True)


def committed_catalogue(path: Path | None = None) -> str:
    """The text between the catalogue markers of the committed prompt file."""
    text = (path or PROMPTS_DIR / EXTRACT_FILE).read_text(encoding="utf-8")
    return _split_catalogue(text)[1]


def refresh_catalogue(path: Path | None = None) -> bool:
    """Rewrite the catalogue block of ``extract.v1.md`` from the ontology; True when the file changed."""
    path = path or PROMPTS_DIR / EXTRACT_FILE
    text = path.read_text(encoding="utf-8")
    before, current, after = _split_catalogue(text)
    fresh = generated_catalogue()
    if current == fresh:
        return False
    path.write_text(before + fresh + after, encoding="utf-8")
    extract_prompt.cache_clear()
    return True


#: Output formats of an extraction answer: free-form Turtle, or JSON held to a schema (see pcm.extraction.jsonld).
OUTPUTS = ("turtle", "json")
_SECTION = "\n# {name}\n"


def system_prompt(catalogue: str, output: str = "turtle", areas: tuple[str, ...] = ()) -> str:
    """The extraction system prompt with the catalogue block replaced by the given (selected) catalogue.

    For ``output="json"`` the Turtle-specific sections (``# Output`` and ``# Example``) are replaced by the prompt
    file's ``json_output`` and ``json_example`` parts; the rules and the catalogue are the same text. The topic
    notes of ``areas`` come last (they vary with the utterance).
    """
    prompt = extract_prompt()
    before, _, after = _split_catalogue(prompt.parts["system"])
    head, tail = before[: -len(CATALOGUE_BEGIN) - 1], after[len(CATALOGUE_END) :]
    if output == "json":
        head = _replace_section(head, "Output", "What to extract", prompt.parts["json_output"])
        head = _replace_section(head, "Example", "Vocabulary", prompt.parts["json_example"])
    notes = topic_hints(areas)
    if notes:
        tail = tail.rstrip("\n") + "\n\n# Notes on these topics\n" + notes
    return head + catalogue + tail


def topic_hints(areas: tuple[str, ...]) -> str:
    """The lines of the prompt file's ``hints`` part for the given areas (``area: note``), in ``areas`` order."""
    notes: dict[str, str] = {}
    for line in extract_prompt().parts.get("hints", "").splitlines():
        area, sep, note = line.partition(":")
        if sep and note.strip():
            notes[area.strip()] = note.strip()
    return "".join(f"- {notes[a]}\n" for a in areas if a in notes)


def task_line(output: str) -> str:
    """The last line of the user message: what to write."""
    return "Write the JSON answer for the current utterance." if output == "json" else (
        "Write the Turtle for the current utterance.")


def _replace_section(text: str, name: str, following: str, replacement: str) -> str:
    start = text.index(_SECTION.format(name=name)) + 1
    end = text.index(_SECTION.format(name=following)) + 1
    return text[:start] + replacement.rstrip("\n") + "\n\n" + text[end:]


def _split_catalogue(text: str) -> tuple[str, str, str]:
    """``(text up to and including the begin marker + newline, the block, the end marker and the rest)``."""
    start = text.find(CATALOGUE_BEGIN)
    end = text.find(CATALOGUE_END)
    if start < 0 or end < start:
        raise ValueError(f"prompt has no '{CATALOGUE_BEGIN}' ... '{CATALOGUE_END}' block")
    head = start + len(CATALOGUE_BEGIN) + 1
    return text[:head], text[head:end], text[end:]

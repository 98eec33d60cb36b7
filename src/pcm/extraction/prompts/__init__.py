"""The extraction prompts (``pcm/prompts/extraction/``), assembled per utterance, with the vocabulary catalogue generated.

The files are loaded like every prompt (:mod:`pcm.prompts`); this module knows how an extraction uses them. Both
prompts are part of what an extraction *was* (their versions and digests are recorded on every extraction activity,
and a re-run skips posts extracted with the same prompt and ontology versions). The vocabulary catalogue inside
``extract.v3.md`` is generated from ``pcm_ontology/`` by :func:`refresh_catalogue` and never typed by hand; a test
keeps the committed copy equal to the generated one. Each call sends only what the utterance needs: the compact
catalogue of the areas relevant to it (see :func:`pcm.catalogue_areas.select_areas`; the full catalogue is ~10k
tokens) and the topic notes (``part: hints``) of the selected areas only.

The layout is for prompt caches (a server's, or llama.cpp's reuse of the longest common token prefix): the system
prompt is the same for every utterance of a memory (rules, example, the core areas' catalogue, see
:func:`system_prompt`), and everything that depends on the utterance is in the user message, ordered by how often
consecutive utterances share it: the dates around the message's day, the topic vocabulary (see
:func:`topic_vocabulary`), the message time, speaker, known entities and previous turns, the utterance last.
"""

from __future__ import annotations

from pathlib import Path

from pcm.prompts import PROMPTS_DIR as _ALL_PROMPTS
from pcm.prompts import PromptFile, around_catalogue, catalogue_span, load, read_prompt, refs

PROMPTS_DIR = _ALL_PROMPTS / "extraction"
EXTRACT_FILE = "extract.v3.md"
REPAIR_FILE = "repair.v1.md"
#: The compact line form's own sections (output, example, repair); its rules and catalogue are ``extract.v3.md``'s.
COMPACT_FILE = "extract_compact.v5.md"
#: The catalogue marker lines as ``extract.v3.md`` writes them (the full compact catalogue, every area).
CATALOGUE_BEGIN = "<!-- catalogue:begin compact -->"
CATALOGUE_END = "<!-- catalogue:end -->"


def extract_prompt() -> PromptFile:
    return load(f"extraction/{EXTRACT_FILE}")


def repair_prompt() -> PromptFile:
    return load(f"extraction/{REPAIR_FILE}")


def compact_prompt() -> PromptFile:
    return load(f"extraction/{COMPACT_FILE}")


def prompt_version(output: str = "turtle") -> str:
    """What an extraction activity records as ``pcm:promptVersion``: the prompts that may shape its output.

    Each name carries its file's digest (``extract.v1@1a2b3c4d``) because the catalogue inside the extraction prompt
    is regenerated whenever the ontology or the shapes change, without anyone renaming the file: a resumed run must
    then re-extract, not skip, the posts the older text produced. The compact form (``output="compact"``) adds its
    own file, which holds its output, example and repair sections."""
    if output == "compact":
        return refs(extract_prompt(), compact_prompt(), repair_prompt())
    return refs(extract_prompt(), repair_prompt())


def repair_message(output: str, report: str) -> str:
    """The user turn of a repair round for an answer in ``output`` form, with the problem ``report``."""
    if output == "compact":
        return compact_prompt().render("repair", report=report)
    return repair_prompt().render("json" if output == "json" else "user", report=report)


def generated_catalogue() -> str:
    """The full catalogue as :meth:`pcm.ontology.Ontology.catalogue` writes it (what the committed prompt must hold)."""
    from pcm.ontology import load_ontology

    return load_ontology().catalogue(compact=True)


def committed_catalogue(path: Path | None = None) -> str:
    """The text between the catalogue markers of the committed prompt file."""
    text = (path or PROMPTS_DIR / EXTRACT_FILE).read_text(encoding="utf-8")
    _, start, end, _ = catalogue_span(text, EXTRACT_FILE)
    return text[start:end]


def refresh_catalogue(path: Path | None = None) -> bool:
    """Rewrite the catalogue block of ``extract.v3.md`` from the ontology; True when the file changed."""
    path = path or PROMPTS_DIR / EXTRACT_FILE
    text = path.read_text(encoding="utf-8")
    _, start, end, _ = catalogue_span(text, path.name)
    fresh = generated_catalogue()
    if text[start:end] == fresh:
        return False
    path.write_text(text[:start] + fresh + text[end:], encoding="utf-8")
    load.cache_clear()
    return True


#: Heading of the compact form's examples in the user message (see :func:`compact_examples`).
EXAMPLES_HEADING = "EXAMPLES (the form only: their names, values and dates are not this memory's):\n"
#: Examples one compact call is shown at most, the example of an assistant's turn, and the one shown when the
#: utterance's areas have none.
MAX_EXAMPLES = 2
ASSISTANT_EXAMPLE = "recommendation"
DEFAULT_EXAMPLE = "events"


def compact_examples(areas: tuple[str, ...], role: str) -> str:
    """The user message's examples for a compact call: one or two of the compact prompt's ``examples`` part (``##
    kind`` blocks, a kind being a catalogue area or ``recommendation``), chosen by the utterance's ``areas`` and
    ``role``; empty when the prompt has no such part.

    Why per utterance: Qwen2.5-Coder-1.5B copies the example it is shown, lines, names and all. With one purchase
    in the system prompt it wrote a purchase for a promotion; with six examples of different kinds there it copied
    whichever came first or looked closest, a brother into a job's answer. Shown only examples of the utterance's
    own kinds, what it copies is the right shape, and a copied name that was not said is left out by the grounding
    check. The blocks' order in the file is their priority; an assistant's turn gets the recommendation first.
    """
    library = _example_blocks(compact_prompt())
    if not library:
        return ""
    kinds = [ASSISTANT_EXAMPLE] if role == "assistant" and ASSISTANT_EXAMPLE in library else []
    kinds += [k for k in library if k in areas and k not in kinds]
    kinds = kinds[:MAX_EXAMPLES] or [DEFAULT_EXAMPLE]
    return EXAMPLES_HEADING + "\n\n".join(library[k] for k in kinds if k in library) + "\n\n"


def _example_blocks(prompt: PromptFile) -> dict[str, str]:
    """The ``## kind`` blocks of a prompt's ``examples`` part, in file order, without their heading lines."""
    blocks: dict[str, str] = {}
    for chunk in prompt.parts.get("examples", "").split("## ")[1:]:
        kind, _, body = chunk.partition("\n")
        blocks[kind.strip()] = body.strip("\n")
    return blocks


#: Output formats of an extraction answer: free-form Turtle, JSON held to a schema (see pcm.extraction.jsonld), or
#: compact lines held to a grammar (see pcm.extraction.compact).
OUTPUTS = ("turtle", "json", "compact")
_SECTION = "\n# {name}\n"


def system_prompt(catalogue: str, output: str = "turtle") -> str:
    """The extraction system prompt with the catalogue block replaced by the given (core) catalogue.

    For ``output="json"`` the Turtle-specific sections (``# Output`` and ``# Example``) are replaced by the prompt
    file's ``json_output`` and ``json_example`` parts, for ``output="compact"`` by ``extract_compact.v1.md``'s
    ``output`` and ``example``; the rules and the catalogue are the same text. Nothing here
    depends on the utterance: the extractor passes the core areas' catalogue, so every call of a memory sends the
    same system prompt and a prompt cache keeps it.
    """
    prompt = extract_prompt()
    head, tail = around_catalogue(prompt.parts["system"], EXTRACT_FILE)
    if output == "json":
        head = _replace_section(head, "Output", "What to extract", prompt.parts["json_output"])
        head = _replace_section(head, "Example", "Vocabulary", prompt.parts["json_example"])
    elif output == "compact":
        compact = compact_prompt()
        head = _replace_section(head, "Output", "What to extract", compact.parts["output"])
        head = _replace_section(head, "Example", "Vocabulary", compact.parts["example"])
    return head + catalogue + tail


#: What the user message's topic vocabulary says when the utterance needs no area beyond the core.
NO_TOPIC_VOCABULARY = "(none)"
#: Headings of the user message's topic section: the areas layout's further vocabulary, or the whole layout's
#: topic notes (its system prompt holds every area's vocabulary).
VOCABULARY_HEADING = "MORE VOCABULARY (this utterance's topics):\n"
NOTES_HEADING = "NOTES ON THIS UTTERANCE'S TOPICS:\n"


def topic_section(vocabulary: str) -> str:
    """The user message's topic section in the areas layout: the heading and :func:`topic_vocabulary`'s text."""
    return f"{VOCABULARY_HEADING}{vocabulary or NO_TOPIC_VOCABULARY}\n\n"


def notes_section(areas: tuple[str, ...]) -> str:
    """The user message's topic section in the whole layout: the topic notes of the utterance's own areas (a line
    or two; they vary with the utterance, so they stay out of the fixed system prompt), or nothing."""
    notes = topic_hints(areas)
    return f"{NOTES_HEADING}{notes}\n" if notes else ""


def topic_vocabulary(blocks: str, areas: tuple[str, ...]) -> str:
    """The user message's topic vocabulary: the catalogue blocks of the utterance's own areas (``## area`` blocks
    without the legend, which the system prompt's catalogue carries), then the topic notes of those areas."""
    notes = topic_hints(areas)
    text = blocks.strip("\n")
    if notes:
        text = (text + "\n\n" if text else "") + "Notes on these topics:\n" + notes.rstrip("\n")
    return text or NO_TOPIC_VOCABULARY


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
    if output == "compact":
        return "Write the lines for the current utterance."
    return "Write the JSON answer for the current utterance." if output == "json" else (
        "Write the Turtle for the current utterance.")


def _replace_section(text: str, name: str, following: str, replacement: str) -> str:
    start = text.index(_SECTION.format(name=name)) + 1
    end = text.index(_SECTION.format(name=following)) + 1
    return text[:start] + replacement.rstrip("\n") + "\n\n" + text[end:]



__all__ = [
    "CATALOGUE_BEGIN",
    "CATALOGUE_END",
    "COMPACT_FILE",
    "EXAMPLES_HEADING",
    "EXTRACT_FILE",
    "NOTES_HEADING",
    "NO_TOPIC_VOCABULARY",
    "OUTPUTS",
    "PROMPTS_DIR",
    "REPAIR_FILE",
    "PromptFile",
    "committed_catalogue",
    "compact_examples",
    "compact_prompt",
    "extract_prompt",
    "generated_catalogue",
    "prompt_version",
    "read_prompt",
    "refresh_catalogue",
    "notes_section",
    "repair_message",
    "repair_prompt",
    "system_prompt",
    "task_line",
    "topic_hints",
    "topic_section",
    "topic_vocabulary",
    "VOCABULARY_HEADING",
]

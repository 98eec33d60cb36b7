"""A question read as a typed frame: what operation it asks, about whom, of which class or property, relative to
what, within which time window. The model fills the frame under constrained decoding; code answers it
(:mod:`pcm.retrieval.operations`).

Why a frame, not a query and not patterns over the wording: a 1.5B model writes a working SPARQL query for few
questions, and regular expressions over English only catch the wordings they list (the same 25 questions asked in
other words: 15 right against 21). Reading a question into a dozen fields is what a small model does well, in any
language, in a few dozen output tokens; the latest, the total, a relative or an interval is then worked out
deterministically on the graph. The class and property fields are enums of the terms in use in the memory, so the
model can only name a real term; the schema goes to llama.cpp as a grammar, to OpenAI-compatible servers as
``json_schema`` and to Anthropic as a forced tool (:class:`pcm.llm.base.JsonSchema`).

The prompt's system part depends only on the memory's terms in use, so an in-process model keeps it as a cached
prefix from one question to the next; each call reads the question and writes the frame.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime
from functools import cache
from typing import TYPE_CHECKING

from pcm.errors import LLMError
from pcm.llm.base import JsonSchema, LLMClient, Message, Request, constrains
from pcm.prompts import PromptFile, load
from pcm.retrieval.grounding import BOOKKEEPING, HIDDEN_AREAS

if TYPE_CHECKING:
    from pcm.ontology import Ontology
    from pcm.retrieval.grounding import GroundedEntity, Usage

PROMPT_FILE = "retrieval/frame.v3.md"
#: What a question can ask; :mod:`pcm.retrieval.operations` answers the computed ones, the others go on to the
#: fact context and the graph query (``value``, ``list``, ``yesno``, ``other``), event chains (``cause``,
#: ``consequence``) or session summaries (``conversation``).
OPERATIONS = (
    "value", "list", "count", "total", "latest", "earliest", "current", "before", "after", "window", "interval",
    "relatives", "yesno", "cause", "consequence", "conversation", "other",
)
UNITS = ("days", "weeks", "months", "years")
RELATIVES = (
    "brother", "sister", "sibling", "son", "daughter", "child", "mother", "father", "parent", "husband", "wife",
    "spouse", "aunt", "uncle", "cousin", "grandparent", "grandchild",
)
#: The ask pipeline's kind (:data:`pcm.retrieval.plan.DIRECTIONS`, summaries) for the operations that have one.
KINDS = {"cause": "why", "consequence": "after", "conversation": "conversation"}
MAX_TERMS = 120
"""Classes and properties each offered in the enums, most used first: the frame's grammar and prompt stay small."""
FRAME_TOKENS = 160
"""Output budget of the frame call: ten short fields."""
TEXT_CHARS = 80
_FIELDS = ("op", "subject", "class", "property", "anchor", "anchor2", "from", "to", "unit", "relative")
_DATE = r"^([0-9]{4}-[0-9]{2}-[0-9]{2})?$"
_TIMED = ("interval", "before", "after")
"""The operations that count time between two dates (``unit``)."""


class FrameReplyError(LLMError):
    """The model's frame did not parse or named something outside the schema (the question goes on unframed)."""


@dataclass(frozen=True)
class Frame:
    """One question, read. Terms are full IRIs; empty strings and None where a field does not apply."""

    op: str
    subject: str = ""
    cls: str = ""
    prop: str = ""
    anchor: str = ""
    anchor2: str = ""
    start: date | None = None
    end: date | None = None
    unit: str = ""
    relative: str = ""

    @property
    def kind(self) -> str:
        """The ask pipeline's kind for this operation (``factual`` unless it is a cause, consequence or
        conversation question)."""
        return KINDS.get(self.op, "factual")

    def as_json(self, ontology: Ontology | None = None) -> dict[str, object]:
        def term(iri: str) -> str:
            return ontology.curie(iri) if ontology is not None and iri else iri

        return {"op": self.op, "subject": self.subject, "class": term(self.cls), "property": term(self.prop),
                "anchor": self.anchor, "anchor2": self.anchor2,
                "from": self.start.isoformat() if self.start else "", "to": self.end.isoformat() if self.end else "",
                "unit": self.unit, "relative": self.relative}


@dataclass(frozen=True)
class Terms:
    """The classes and properties a frame may name (the memory's terms in use), by their prefixed names."""

    classes: dict[str, str]
    properties: dict[str, str]
    counts: dict[str, int]

    @classmethod
    def of(cls, usage: Usage, ontology: Ontology) -> Terms:
        def kept(pairs: Sequence[tuple[str, int]], wanted: Callable[[str], bool]) -> dict[str, str]:
            out: dict[str, str] = {}
            for iri, _ in pairs:
                term = ontology.terms.get(iri)
                if term is None or not wanted(iri) or iri in BOOKKEEPING or term.area in HIDDEN_AREAS:
                    continue
                out.setdefault(ontology.curie(iri), iri)
                if len(out) >= MAX_TERMS:
                    break
            return out

        counts = {ontology.curie(i): n for i, n in (*usage.classes, *usage.properties)}
        return cls(kept(usage.classes, ontology.is_class), kept(usage.properties, ontology.is_property), counts)

    def listing(self, names: dict[str, str]) -> str:
        return ", ".join(f"{n} {self.counts.get(n, 0)}" for n in names) or "(none yet)"


def frame_schema(terms: Terms) -> JsonSchema:
    """The JSON Schema of a frame over ``terms``: every field required, fixed order, enums for the terms."""
    text = {"type": "string", "maxLength": TEXT_CHARS}
    day = {"type": "string", "pattern": _DATE}
    schema: dict[str, object] = {
        "type": "object",
        "properties": {
            "op": {"type": "string", "enum": list(OPERATIONS)},
            "subject": text,
            "class": {"type": "string", "enum": ["", *terms.classes]},
            "property": {"type": "string", "enum": ["", *terms.properties]},
            "anchor": text,
            "anchor2": text,
            "from": day,
            "to": day,
            "unit": {"type": "string", "enum": ["", *UNITS]},
            "relative": {"type": "string", "enum": ["", *RELATIVES]},
        },
        "required": list(_FIELDS),
        "additionalProperties": False,
    }
    return JsonSchema("question_frame", schema, "What the question asks, read into typed fields.")


@cache
def prompt() -> PromptFile:
    return load(PROMPT_FILE)


def system_prompt(terms: Terms) -> str:
    return prompt().render("system", classes=terms.listing(terms.classes), properties=terms.listing(terms.properties))


def user_message(question: str, *, as_of: datetime, owner_name: str, entities: Sequence[GroundedEntity]) -> str:
    names = "; ".join(dict.fromkeys(" ".join(e.label.split()) for e in entities if e.label)) or "(none matched)"
    return prompt().render("user", date=as_of.date().isoformat(), owner_name=owner_name, names=names,
                           question=question)


def frames_questions(setting: str, client: object) -> bool:
    """Whether ask reads questions into frames (``PCM_ASK_FRAME``): ``on``, ``off``, or ``auto`` (a client that
    holds its output to a schema: llama.cpp, OpenAI-compatible servers, Anthropic; not a scripted double, whose
    replies were written for the other steps)."""
    if setting in ("on", "off"):
        return setting == "on"
    return constrains(client)


def read_frame(client: LLMClient, question: str, terms: Terms, *, as_of: datetime, owner_name: str,
               entities: Sequence[GroundedEntity]) -> Frame:
    """One constrained call (operation ``frame``): the question's frame, or :class:`FrameReplyError`."""
    reply = client.complete(Request(system=system_prompt(terms), messages=[Message.user(user_message(
        question, as_of=as_of, owner_name=owner_name, entities=entities))], operation="frame",
        max_tokens=FRAME_TOKENS, schema=frame_schema(terms)))
    return parse_frame(reply.text or "", terms)


def parse_frame(text: str, terms: Terms) -> Frame:
    """The frame in ``text`` (a JSON object, possibly inside a code fence); unknown terms are an error, missing
    optional fields are empty."""
    match = re.search(r"\{.*\}", text, re.DOTALL)
    if match is None:
        raise FrameReplyError("the frame reply holds no JSON object")
    try:
        data = json.loads(match.group(0))
    except ValueError as error:
        raise FrameReplyError(f"the frame reply is not JSON ({error})") from error
    if not isinstance(data, dict):
        raise FrameReplyError("the frame reply is not a JSON object")

    def field(name: str, choices: Sequence[str] | None = None) -> str:
        value = data.get(name, "")
        if not isinstance(value, str):
            raise FrameReplyError(f"frame field {name!r} is not a string")
        value = " ".join(value.split())[:TEXT_CHARS]
        if choices is not None and value not in choices:
            raise FrameReplyError(f"frame field {name!r}: {value!r} is not one of the schema's values")
        return value

    op = field("op", OPERATIONS)
    cls = field("class", ["", *terms.classes])
    prop = field("property", ["", *terms.properties])
    return Frame(
        op=op, subject=field("subject"), cls=terms.classes.get(cls, ""), prop=terms.properties.get(prop, ""),
        anchor=field("anchor"), anchor2=field("anchor2"), start=_day(field("from")), end=_day(field("to")),
        unit=field("unit", ["", *UNITS]), relative=field("relative", ["", *RELATIVES]),
    )


def checked(frame: Frame, question: str, *, as_of: date, owner_name: str) -> Frame:
    """The frame less the fields the question does not give.

    A small model fills every field (the grammar makes it write them all): an anchor copied from the prompt's
    examples ("the guitar") or made of the question's own clause ("the last thing she bought" is no thing), a time
    window that is the question date, a unit on a question that counts no time. Each of these would steer an
    operation: an anchor picks one node among many, a window keeps only what lies in it. So an anchor whose words
    are not the question's is dropped (compared as words, in any language; the owner's name and function words
    aside), a window that starts on the question date or ends before it starts is dropped, and a unit is kept only
    where an operation counts time. A kind of relative the model wrote as the anchor moves to the relative field.
    """
    asked = _words(question)
    owner = _words(owner_name)

    def said(anchor: str) -> str:
        own = _words(anchor) - owner
        return anchor if own and own & asked else ""

    start, end = frame.start, frame.end
    if (start is not None and start == as_of) or (start is not None and end is not None and end < start):
        start = end = None
    if end is not None and start is None and end == as_of:
        end = None
    unit = frame.unit if frame.op in _TIMED else ""
    anchor, anchor2 = said(frame.anchor), said(frame.anchor2)
    if start is None and end is None:
        # "where did she travel in June 2025" read with the month as the anchor: a time, not a thing
        for text in (anchor, anchor2):
            window = named_window(text)
            if window is not None:
                start, end = window
                anchor, anchor2 = (anchor2, "") if text == anchor else (anchor, "")
                break
    if not anchor:
        anchor, anchor2 = anchor2, ""
    if anchor2 and _words(anchor2) <= _words(anchor):
        anchor2 = ""
    relative = frame.relative
    kinds = {r for r in RELATIVES if {r, r + "s"} & _words(anchor)}
    if frame.op in ("value", "list", "count", "current", "relatives") and len(kinds) == 1 and relative in ("", *kinds):
        # a kind of relative written as the anchor ("sister") is the relative field's own term, not a thing
        relative = kinds.pop()
        anchor = anchor2 = ""
    return replace(frame, anchor=anchor, anchor2=anchor2, start=start, end=end, unit=unit, relative=relative)


def named_window(text: str) -> tuple[date, date] | None:
    """The month or the year ``text`` is made of ("June 2025", "junio de 2025", "2024"), as its first and last
    day; None when it says anything else (words of two letters, as "de" or "im", aside)."""
    from pcm.words import MONTH_NUMBERS, STOPWORDS

    tokens = [t for t in re.findall(r"\w+", text.casefold()) if len(t) > 2 and t not in STOPWORDS]
    years = [int(t) for t in tokens if re.fullmatch(r"(?:19|20)\d\d", t)]
    months = [MONTH_NUMBERS[t] for t in tokens if t in MONTH_NUMBERS]
    if len(years) != 1 or len(months) > 1 or len(tokens) != 1 + len(months):
        return None
    year = years[0]
    if not months:
        return date(year, 1, 1), date(year, 12, 31)
    month = months[0]
    following = date(year + 1, 1, 1) if month == 12 else date(year, month + 1, 1)
    return date(year, month, 1), date.fromordinal(following.toordinal() - 1)


def _words(text: str) -> set[str]:
    """Lower-case words of three letters or more (any script), function words aside."""
    from pcm.words import STOPWORDS

    return {w for w in re.findall(r"\w+", text.casefold()) if len(w) > 2 and w not in STOPWORDS}


def _day(text: str) -> date | None:
    if not text:
        return None
    try:
        return date.fromisoformat(text)
    except ValueError as error:
        raise FrameReplyError(f"frame date {text!r} is not a calendar date") from error


__all__ = ["FRAME_TOKENS", "OPERATIONS", "Frame", "FrameReplyError", "Terms", "checked", "frame_schema", "frames_questions",
           "named_window", "parse_frame", "read_frame"]

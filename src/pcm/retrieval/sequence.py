"""What came just before or after a thing of the same kind: "Where did Dana work before Cascade Health?" answered
from the stored facts by ordering the dated lines of the anchor's kind.

Why: over the ask gold set a 1.5B model given both jobs' lines ("job at Cascade Health (WorkHistory): ... start date
Monday 22 September 2025", "job at Harbor Analytics (WorkHistory): ... end date Friday 12 September 2025") answered
"not in memory", and the question then spent 140 s on a query the model could not write. Which line the question
names is a matter of words, and which line of the same kind comes just before it is a matter of dates; neither
needs the model. The anchor is the one dated line of a typed node that holds every word of what follows "before" or
"after"; its siblings are the other dated lines with the same types; the answer is the nearest sibling on the asked
side, with both dates, so a wrong pick shows. Anything less clear (no anchor, two anchors, no sibling, a date or a
time of day after "before") is left to the model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

from pcm.retrieval.intervals import asked_parts, line_date
from pcm.retrieval.postprocess import MONTHS, format_date
from pcm.retrieval.worked import content_words

_ASKED = re.compile(
    r"^(?:what|where|who|which|whom)\b(?P<middle>.*?) (?P<side>before|after|prior to|previous to|following) "
    r"(?P<anchor>.+?)[?.!\s]*$",
    re.IGNORECASE,
)
_HEAD = re.compile(r"^(?P<name>.+?) \((?P<types>[^()]+)\): ")
#: What follows "before" when it is a time, not a thing: left to the model (it is not a sibling's name).
_TIME_WORDS = frozenset([m.lower() for m in MONTHS] + [
    "today", "yesterday", "tomorrow", "noon", "midnight", "morning", "evening", "night", "lunch", "dinner",
    "breakfast", "week", "month", "year", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday",
    "sunday", "that", "then", "this", "now",
])


@dataclass(frozen=True)
class Neighbour:
    text: str
    """``job at Harbor Analytics: employed in Harbor Analytics; end date Friday 12 September 2025 (before job at
    Cascade Health: Monday 22 September 2025).``"""
    lines: tuple[int, int]
    """Indexes of the answer's line and the anchor's line."""


def asked_side(question: str) -> tuple[str, str] | None:
    """``(side, anchor)`` when the question asks what came just before or after a named thing, else None."""
    text = " ".join(question.split())
    if asked_parts(text) is not None or re.match(r"^how\b", text, re.IGNORECASE):
        return None
    match = _ASKED.match(text)
    if match is None:
        return None
    anchor = match.group("anchor")
    words = content_words(anchor)
    if not words or words & _TIME_WORDS or re.search(r"\d", anchor):
        return None
    side = match.group("side").lower()
    return ("after" if side in {"after", "following"} else "before"), anchor


def neighbour_answer(question: str, lines: Sequence[str]) -> Neighbour | None:
    """The sibling line just before or after the anchor, or None when the lines do not settle it."""
    asked = asked_side(question)
    if asked is None:
        return None
    side, anchor = asked
    wanted = content_words(anchor)
    typed: list[tuple[int, str, date]] = []
    for i, line in enumerate(lines):
        head = _HEAD.match(line)
        day = line_date(line)
        if head is not None and day is not None:
            typed.append((i, head.group("types"), day))
    # the line named for the anchor ("job at Cascade Health"), else the one line that mentions it
    anchors = [(i, types, day) for i, types, day in typed if wanted <= content_words(_name(lines[i]))]
    if not anchors:
        anchors = [(i, types, day) for i, types, day in typed if wanted <= content_words(lines[i])]
    if len(anchors) != 1:
        return None
    at, types, day = anchors[0]
    siblings = [(i, d) for i, t, d in typed if t == types and i != at and (d < day if side == "before" else d > day)]
    if not siblings:
        return None
    chosen, when = max(siblings, key=lambda s: s[1]) if side == "before" else min(siblings, key=lambda s: s[1])
    if sum(1 for _, d in siblings if d == when) > 1:
        return None
    return Neighbour(
        f"{_without_types(lines[chosen])} ({side} {_name(lines[at])}: {format_date(day)}).", (chosen, at)
    )


def _name(line: str) -> str:
    match = _HEAD.match(line)
    return match.group("name") if match else line


def _without_types(line: str) -> str:
    match = _HEAD.match(line)
    return f"{match.group('name')}: {line[match.end():]}" if match else line


__all__ = ["Neighbour", "asked_side", "neighbour_answer"]

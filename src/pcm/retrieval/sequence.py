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

from pcm.retrieval.intervals import line_date
from pcm.retrieval.postprocess import format_date
from pcm.retrieval.wording import asked_side
from pcm.retrieval.worked import content_words

_HEAD = re.compile(r"^(?P<name>.+?) \((?P<types>[^()]+)\): ")
@dataclass(frozen=True)
class Neighbour:
    text: str
    """``job at Harbor Analytics: employed in Harbor Analytics; end date Friday 12 September 2025 (before job at
    Cascade Health: Monday 22 September 2025).``"""
    lines: tuple[int, int]
    """Indexes of the answer's line and the anchor's line."""


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


__all__ = ["Neighbour", "neighbour_answer"]

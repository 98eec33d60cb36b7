"""How long lay between two things said: "How many days after buying the espresso machine did my car break down?"
answered from the stored facts by matching each event to a dated fact line and counting in code.

Why: over the ask gold set a 1.5B model given the two dated lines (the purchase, the breakdown) still answered "not
in memory" where the prompt asked it for both dates; which event is which is a matter of similarity, and the count
is arithmetic, neither of which needs the model. The question is split at its grammar ("how many days after A did
B", "how many weeks between A and B"), each part is matched against the fact lines that carry a full date, and the
answer is given only when each part's line is clearly the best (:data:`MIN_MATCH`, :data:`MARGIN`); otherwise the
model reads the facts as for any question. The answer names both events and their dates, so a wrong match shows.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING

from pcm.index.text import vector_query
from pcm.retrieval.postprocess import difference, format_date, format_duration, written_dates
from pcm.retrieval.wording import asked_parts

if TYPE_CHECKING:
    from pcm.retrieval.traversal.vectors import TextVectors

MIN_MATCH = 0.3
"""Least cosine between a part of the question and its fact line (MiniLM): the gold questions' events match their
lines at 0.39-0.64; "did Dana's boat sink", which nothing stored tells, matched a dated line at 0.36 but no better
than another line."""
MARGIN = 0.1
"""How much better a part's line must match than the next dated line (the gold questions' margins were 0.20-0.32;
"did Dana's boat sink" had 0.02)."""

#: The date a fact line is about: its start date, else a date, else the first it writes.
_ABOUT = (re.compile(r"(?:: |; )start date $"), re.compile(r"(?:: |; )date $"))


@dataclass(frozen=True)
class Interval:
    text: str
    """``26 days (buying the Breville Barista Express: Tuesday 4 February 2025; car breakdown on I-5: Sunday 2 March
    2025).``"""
    lines: tuple[int, int]
    """Indexes of the two fact lines, earlier event first."""


def line_date(line: str) -> date | None:
    """The date a fact line is about (``start date Sunday 2 March 2025``), None when it writes no full date."""
    found = written_dates(line)
    for about in _ABOUT:
        for start, value in found:
            if about.search(line[:start]):
                return value
    return found[0][1] if found else None


def interval_answer(question: str, lines: Sequence[str], vectors: TextVectors) -> Interval | None:
    """The counted answer, or None when the question is not of this kind or its events are not both clearly among
    the dated ``lines``."""
    asked = asked_parts(question)
    if asked is None:
        return None
    unit, first, second = asked
    dated = [(i, d) for i, line in enumerate(lines) if (d := line_date(line)) is not None]
    if len(dated) < 2:
        return None
    matrix = vectors.get([lines[i] for i, _ in dated])
    chosen: list[int] = []
    for part in (first, second):
        scores = (matrix @ vectors.query(vector_query(part))).tolist()
        order = sorted((k for k in range(len(dated)) if k not in chosen), key=lambda k: -scores[k])
        best = order[0]
        rival = max((scores[k] for k in range(len(dated)) if k != best), default=-1.0)
        if scores[best] < MIN_MATCH or scores[best] - rival < MARGIN:
            return None
        chosen.append(best)
    (i, start), (j, end) = sorted((dated[k] for k in chosen), key=lambda pair: pair[1])
    return Interval(between(_head(lines[i]), start, _head(lines[j]), end, unit), (i, j))


def between(first: str, start: date, second: str, end: date, unit: str) -> str:
    """``26 days (buying the espresso machine: Tuesday 4 February 2025; car breakdown: Sunday 2 March 2025).``:
    the interval with both events and their dates, so a wrong match shows."""
    count = difference(start, end, unit)
    return f"{format_duration(count, unit)} ({first}: {format_date(start)}; {second}: {format_date(end)})."


def _head(line: str) -> str:
    """The event a fact line is about: its label, before the types or the colon."""
    return re.split(r" \(|: ", line, maxsplit=1)[0]


__all__ = ["Interval", "between", "interval_answer", "line_date"]

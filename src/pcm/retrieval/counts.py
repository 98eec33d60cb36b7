"""How many of something a person has ("How many pets does Dana have?"), counted from the stored facts.

Why: over the ask gold set a 1.5B model answered "4" with "Dana Whitfield: has pet Biscuit, Mochi (2)" in front of
it, counting other people's pets on nearby lines. The fact lines already gather a person's values of one predicate
and count them; this reads that count when the question names the person and the thing (its singular is the last
word of the predicate, "pets" for "has pet"). Anything less clear is left to the model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pcm.retrieval.wording import asked_count

_GATHERED = re.compile(r"^(?P<values>.*) \((?P<n>\d+)\)$")


@dataclass(frozen=True)
class Count:
    text: str
    """``2 (Biscuit, Mochi)``."""
    line: int
    """Index of the fact line counted."""


def count_answer(question: str, lines: Sequence[str], *, owner_name: str = "") -> Count | None:
    """The count read from the person's line for the thing, or None when no line says it plainly (or two do).
    "I" and "me" are ``owner_name``."""
    asked = asked_count(question)
    if asked is None:
        return None
    thing, who = asked
    if who.lower() in {"i", "me", "we"}:
        who = owner_name
    wanted = {w.lower() for w in re.findall(r"[\w'-]+", who)}
    found: list[Count] = []
    for i, line in enumerate(lines):
        head, _, body = line.partition(": ")
        name = re.split(r" \(", head, maxsplit=1)[0]
        if not wanted or not wanted <= {w.lower() for w in re.findall(r"[\w'-]+", name)}:
            continue
        values: list[str] = []
        total = 0
        for fact in body.split("; "):
            words = fact.split()
            cut = _phrase_end(words, thing)
            if cut is None:
                continue
            shown = " ".join(words[cut:])
            gathered = _GATHERED.match(shown)
            values.append(gathered.group("values") if gathered else shown)
            total += int(gathered.group("n")) if gathered else 1
        if values:
            found.append(Count(f"{total} ({', '.join(values)})", i))
    return found[0] if len(found) == 1 else None


def _phrase_end(words: Sequence[str], thing: str) -> int | None:
    """Where the values start when the fact's predicate is "has <thing>" (``has pet Biscuit, Mochi (2)``)."""
    parts = thing.split()
    if len(words) > len(parts) + 1 and words[0] == "has" and [w.lower() for w in words[1:1 + len(parts)]] == parts:
        return 1 + len(parts)
    return None


__all__ = ["Count", "count_answer"]

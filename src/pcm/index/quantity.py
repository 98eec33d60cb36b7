"""The answer type of a quantity question, and which utterances state a quantity of that kind.

"How many hours have I spent playing games in total?" is answered by every turn that says "N hours" of a game, each
in its own session; the turns between them talk of the same games without a number, and word or meaning overlap
ranks them alike. A question that asks for an amount of some unit ("how many hours", "how much money", "how long")
therefore names what its evidence must contain: a number next to that unit. This is the expected-answer-type match
of classic question answering, done with a few patterns and no model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pcm.index.text import stem

_NUMBER_WORDS = frozenset(
    {
        "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "thirteen",
        "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty", "thirty", "forty", "fifty",
        "sixty", "seventy", "eighty", "ninety", "hundred", "thousand", "dozen", "couple", "few", "several", "half"
    }
)
"""Words that state a number, beside numbers in digits."""
_TIME_UNITS = frozenset(map(stem, ("minute", "hour", "day", "week", "month", "year", "night", "weekend", "session")))
"""Stems of the units of a span of time."""
_MONEY = re.compile(
    r"[$€£¥]\s?\d|\d(?:[.,]\d+)*\s?(?:k\b|dollars?|bucks|euros?|pounds|usd|eur|gbp|cents?)", re.IGNORECASE
)
_PRICE = re.compile(
    r"\b(?:cost|costs|spen[dt]|spending|pa(?:y|id)|price[ds]?|worth|earn(?:ed)?|sav(?:e|ed)|charge[ds]?)\b", re.IGNORECASE
)
_ASK = re.compile(r"\bhow\s+(many|much|long)\b((?:\s+[\w'-]+){0,4})", re.IGNORECASE)
_STOP = frozenset(
    {
        "have", "has", "had", "do", "does", "did", "is", "are", "was", "were", "will", "would", "can", "could",
        "should", "i", "we", "you", "he", "she", "they", "it", "my", "our", "your", "his", "her", "their", "the", "a",
        "an", "of", "in", "on", "at", "for", "to", "from", "with", "by", "about", "been", "being", "this", "that",
        "these", "those"
    }
)
_MEASURES = frozenset(
    map(
        stem,
        (
            "mile", "kilometer", "kilometre", "km", "meter", "metre", "foot", "feet", "pound", "lb", "lbs", "kilogram", "kg",
            "gram", "ounce", "liter", "litre", "gallon", "page", "step", "calorie", "point", "degree",
        ),
    )
)
"""Stems of the units of measure other than time whose amounts are told as numbers ("I ran 5 miles")."""
_WORD = re.compile(r"[A-Za-z][A-Za-z']*")
_TOKEN = re.compile(r"\d+(?:[.,:]\d+)*|[A-Za-z][A-Za-z']*")
"""A number in digits ("1,250", "6:30") or a word: "a 25-hour game" reads "a", "25", "hour", "game"."""


@dataclass(frozen=True)
class Unit:
    """What a quantity question asks an amount of: money, a span of time (in ``noun`` units, or any), or a measure."""

    kind: str
    """``money``, ``time`` or ``measure``."""
    noun: str = ""
    """The stem of the unit asked for ("hour"), empty for money and for "how long"."""


def asked_unit(question: str) -> Unit | None:
    """The unit a question asks an amount of, or ``None`` when it asks for none, or for a count of things or
    events (told one by one, rarely as a number)."""
    match = _ASK.search(question)
    if match is None:
        return None
    how, rest = match.group(1).casefold(), [w.casefold() for w in _WORD.findall(match.group(2))]
    if how == "long":
        return Unit("time")
    head = ""
    for word in rest:
        if word in _STOP:
            break
        head = word
    if how == "much":
        if head in ("money", "cash") or (not head and _PRICE.search(question)):
            return Unit("money")
        if head == "time":
            return Unit("time")
        return None  # "how much weight", "how much of it": no fixed pattern
    unit = stem(head)
    if unit in _TIME_UNITS:
        return Unit("time", unit)
    if unit in _MEASURES:
        return Unit("measure", unit)
    return None  # "how many weddings": a count of events, each told on its own, rarely as a number


def states(text: str, unit: Unit) -> bool:
    """Whether ``text`` states an amount of ``unit``: a currency amount, or a number at most three words before
    the unit's noun (any time unit for "how long"; "a"/"an" count before a time unit: "an hour")."""
    if unit.kind == "money":
        return _MONEY.search(text) is not None
    nouns = {unit.noun} if unit.noun else _TIME_UNITS
    numbers = _NUMBER_WORDS | {"a", "an"} if unit.kind == "time" else _NUMBER_WORDS
    since_number = 4  # tokens since the last number, past the window
    for token in _TOKEN.findall(text):
        word = token.casefold()
        if token[0].isdigit() or word in numbers:
            since_number = 0
            continue
        since_number += 1
        if since_number <= 3 and stem(word) in nouns:
            return True
    return False

"""The English wording of questions, read by patterns: the routes ask takes when it does not read a question into a
typed frame (:mod:`pcm.retrieval.frame`), that is with no model that constrains its output, or with
``PCM_ASK_FRAME=off``.

Why one module: these patterns only know the wordings they list (the same 25 questions asked in other words were
15 right against 21), so nothing that reads a frame may depend on them; kept together, what depends on English
wording is one import to check. Each function returns what a question asks (a kind, a person, an anchor) or None;
the code that answers it on the graph or the fact lines lives in :mod:`pcm.retrieval.actions`, ``kinship``,
``counts``, ``sequence`` and ``intervals``, and :mod:`pcm.retrieval.plan` for the keyword kind and the
decomposition filter.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from pcm.retrieval.postprocess import MONTHS
from pcm.retrieval.worked import content_words, words

# ------------------------------------------------------------------------------------------------ kinds and plans

_WHY = re.compile(r"\bwhy\b|\bbecause\b|\bwhat (?:caused|led to|made)\b|\bthe reasons?\b|\bhow come\b", re.IGNORECASE)
_AFTER = re.compile(
    r"\bwhat (?:happened|came|followed|did \w+ do) (?:next|after|afterwards|then)\b|\bafter that\b"
    r"|\bwhat happened (?:to \w+ )?(?:after|since)\b|\bwhat (?:was|is) the outcome\b",
    re.IGNORECASE,
)
_SAY = r"(?:talk(?:ed|ing)?|chat(?:ted|ting)?|discuss(?:ed|ing)?|spoke|speak|mention(?:ed)?|cover(?:ed)?)"
_CONVERSATION = re.compile(
    rf"\b(?:we|us|you and i)\b(?:\s+\w+){{0,3}}?\s+{_SAY}\b|\b{_SAY} about\b"
    r"|\b(?:our|the|last|previous|first|latest|these|those)\s+(?:\w+\s+)?(?:conversations?|chats?|sessions?)\b",
    re.IGNORECASE,
)
_WH = r"(?:what|which|who|whom|whose|where|when|how|why)"
_AUX = r"(?:did|does|do|is|was|were|are|has|have|had|can|could|will|would|should)"
_SECOND_CLAUSE = re.compile(rf"(?:,|;|\band\b|\bthen\b)\s+(?:then\s+)?{_WH}\b(?:\s+\w+){{0,2}}?\s+{_AUX}\b", re.IGNORECASE)
_RELATIVE = re.compile(r"\b(?:the|my|a|an)\s+\w+(?:\s+\w+)?\s+(?:who|that|whom|which)\s+(?!is\b|are\b)\w+", re.IGNORECASE)


def route(question: str) -> str:
    """The question's kind from keywords alone: ``why``, ``after``, ``conversation`` or ``factual``.

    Deterministic and free, so ``--no-plan`` costs no model call; the decomposition reply may still name a kind
    for questions the keywords miss.
    """
    if _WHY.search(question):
        return "why"
    if _AFTER.search(question):
        return "after"
    if _CONVERSATION.search(question):
        return "conversation"
    return "factual"


def may_decompose(question: str) -> bool:
    """Whether the question might have several parts: two question marks, a second wh-clause with its own verb
    (", and where does she live"), or a relative clause naming a bridge entity ("the friend who gave me ...").

    A single-clause question (most questions) is answered by one pipeline run without asking the model first,
    which keeps simple questions at their old cost; ``--plan`` asks the model regardless.
    """
    return question.count("?") >= 2 or bool(_SECOND_CLAUSE.search(question) or _RELATIVE.search(question))


# ------------------------------------------------------------------------------------------------ a person's actions

_END = r"[?.!\s]*$"
_LATEST = (
    re.compile(r"^what (?:did|has|have) (?P<rest>.+?) (?P<when>most recently|most lately|lately|last|first|earliest)"
               + _END, re.IGNORECASE),
    re.compile(r"^what (?:was|is) the (?P<when>last|latest|most recent|first|earliest) (?:thing |item |one )?"
               r"(?:that |which )?(?P<rest>.+?)" + _END, re.IGNORECASE),
)
_TOTAL = re.compile(
    r"^how much (?:money )?(?:has|have|did|do|does) (?P<who>.+?) (?:spent|spend|paid|pay)(?: in total| altogether| so far)?"
    r" (?:on|for) (?:all )?(?:the things|everything|what|the stuff|the items)(?: that| which)? (?P<rest>.+?)"
    r"(?: in total| altogether| so far)?" + _END,
    re.IGNORECASE,
)
_WHEN = re.compile(
    r"^(?:when|on what (?:date|day)|on which (?:date|day)|what (?:date|day)|which (?:date|day)) "
    r"(?:did|has|have) (?P<rest>.+?)" + _END,
    re.IGNORECASE,
)
_PRONOUNS = frozenset({"i", "we", "she", "he", "they", "you"})
#: Past forms that no suffix rule undoes; the rest ("ordered", "moved", "tried", "shopped") are undone by rule.
_IRREGULAR = {
    "bought": "buy", "paid": "pay", "sold": "sell", "ate": "eat", "eaten": "eat", "drank": "drink", "drunk": "drink",
    "went": "go", "took": "take", "taken": "take", "gave": "give", "given": "give", "got": "get", "made": "make",
    "wrote": "write", "written": "write", "saw": "see", "seen": "see", "ran": "run", "won": "win", "lost": "lose",
    "left": "leave", "met": "meet", "sent": "send", "lent": "lend", "flew": "fly", "flown": "fly", "drove": "drive",
    "driven": "drive", "rode": "ride", "brought": "bring", "found": "find", "told": "tell", "built": "build",
    "spent": "spend", "chose": "choose", "chosen": "choose", "began": "begin", "begun": "begin", "wore": "wear",
    "worn": "wear", "read": "read", "rented": "rent", "cooked": "cook", "played": "play", "joined": "join",
}


def action_classes(classes: Iterable[str]) -> dict[str, str]:
    """The verb each action class is named for, lower case, to the class IRI (``buy`` -> ``schema:BuyAction``)."""
    out: dict[str, str] = {}
    for iri in sorted(classes):
        local = re.split(r"[/#]", iri)[-1]
        if local.endswith("Action") and len(local) > len("Action"):
            out.setdefault(local[: -len("Action")].lower(), iri)
    return out


def verb_class(word: str, verbs: dict[str, str]) -> str | None:
    """The action class a verb of the question names, in any tense (``bought``, ``ordered``, ``moved``), or None."""
    word = word.lower()
    candidates = [word, _IRREGULAR.get(word, "")]
    if word.endswith("ied"):
        candidates.append(word[:-3] + "y")
    if word.endswith("ed"):
        candidates += [word[:-2], word[:-1]]
        if len(word) > 4 and word[-3] == word[-4]:
            candidates.append(word[:-3])
    if word.endswith("ing"):
        candidates += [word[:-3], word[:-3] + "e"]
    for candidate in candidates:
        if candidate and candidate in verbs:
            return verbs[candidate]
    return None


@dataclass(frozen=True)
class AskedAction:
    kind: str
    """``latest``, ``earliest``, ``total`` or ``when``."""
    who: str
    action_class: str
    verb: str
    what: str = ""


def asked_action(question: str, verbs: dict[str, str]) -> AskedAction | None:
    """What the question asks of which person's actions, or None when it is not of these kinds or its verb names
    no action class."""
    text = " ".join(question.split())
    for pattern in _LATEST:
        match = pattern.match(text)
        if match is not None:
            split = _subject_verb(match.group("rest").split(), verbs, tail=False)
            if split is None:
                return None
            who, cls, verb, _ = split
            when = match.group("when").lower()
            return AskedAction("earliest" if when in {"first", "earliest"} else "latest", who, cls, verb)
    match = _TOTAL.match(text)
    if match is not None:
        split = _subject_verb(match.group("rest").split(), verbs, tail=False)
        if split is None:
            return None
        who2, cls, verb, _ = split
        who = match.group("who")
        if who2.lower() not in _PRONOUNS and words(who2) != words(who):
            return None
        return AskedAction("total", who, cls, verb)
    match = _WHEN.match(text)
    if match is not None:
        split = _subject_verb(match.group("rest").split(), verbs, tail=True)
        if split is None:
            return None
        who, cls, verb, what = split
        return AskedAction("when", who, cls, verb, what)
    return None


def _subject_verb(tokens: Sequence[str], verbs: dict[str, str], *, tail: bool) -> tuple[str, str, str, str] | None:
    """``(subject, class, verb, rest)``: the first word after a subject that names an action class. Without
    ``tail`` the verb must be the last word ("what did Dana buy"); with it, something must follow ("when did Dana
    buy the espresso machine")."""
    for i in range(1, len(tokens)):
        if (i == len(tokens) - 1) == tail:
            continue
        cls = verb_class(tokens[i], verbs)
        if cls is not None:
            return " ".join(tokens[:i]), cls, tokens[i].lower(), " ".join(tokens[i + 1:])
    return None


# ------------------------------------------------------------------------------------------------ relatives

_PLURAL = {"children": "child", "brothers": "brother", "sisters": "sister", "sons": "son", "daughters": "daughter",
           "cousins": "cousin", "aunts": "aunt", "uncles": "uncle", "grandchildren": "grandchild",
           "grandparents": "grandparent", "siblings": "sibling", "parents": "parent"}
_WHOSE = r"(?P<who>my|our|.+?['’]s?)"
_KIN_ASKED = (
    re.compile(rf"^what(?:['’]s| is| was| are| were) (?:the )?names? of {_WHOSE} (?P<kin>[a-z]+)(?P<rest>.*)$", re.IGNORECASE),
    re.compile(rf"^(?:who|what)(?:['’]s| is| was| are| were) {_WHOSE} (?P<kin>[a-z]+)(?: called| named)?(?P<rest>.*)$",
               re.IGNORECASE),
)


@dataclass(frozen=True)
class AskedKin:
    who: str
    kind: str
    alone: bool
    """Nothing else is asked ("..., and where does she live?" is not alone)."""


def asked_kin(question: str, kinds: Collection[str]) -> AskedKin | None:
    """Whose relative of which of ``kinds`` the question asks, or None."""
    text = " ".join(question.split())
    for pattern in _KIN_ASKED:
        match = pattern.match(text)
        if match is None:
            continue
        word = match.group("kin").lower()
        kind = _PLURAL.get(word, word)
        if kind not in kinds:
            return None
        who = re.sub(r"['’]s?$", "", match.group("who"))
        rest = re.sub(r"^['’]s names?\b", "", match.group("rest"))  # "my daughter's name"
        return AskedKin(who, kind, not re.sub(r"[?.!\s]", "", rest))
    return None


# ------------------------------------------------------------------------------------------------ counts

_COUNT_ASKED = re.compile(
    r"^how many (?P<noun>[a-z][a-z -]*?) (?:does|do|did) (?P<who>.+?) (?:have|own|keep|look after)[?.!\s]*$",
    re.IGNORECASE,
)


def asked_count(question: str) -> tuple[str, str] | None:
    """``(thing, person)`` when the question asks how many of a thing a person has, the thing in the singular."""
    match = _COUNT_ASKED.match(" ".join(question.split()))
    if match is None:
        return None
    return _singular(match.group("noun").lower()), re.sub(r"'s?$", "", match.group("who").strip())


def _singular(noun: str) -> str:
    if noun.endswith("children"):
        return noun[: -len("children")] + "child"
    if noun.endswith("ies"):
        return noun[:-3] + "y"
    if noun.endswith(("ses", "xes", "ches", "shes")):
        return noun[:-2]
    return noun[:-1] if noun.endswith("s") and not noun.endswith("ss") else noun


# ------------------------------------------------------------------------------------------------ intervals, before and after

_UNIT = r"(?P<unit>days|weeks|months|years)"
_INTERVAL_ASKED = (
    re.compile(rf"^how many {_UNIT} (?:after|before|since|until|following|prior to) (?P<a>.+?) "
               r"(?:did|does|do|was|were|had|has|have|is|are|will|would) (?P<b>.+?)[?.!\s]*$", re.IGNORECASE),
    re.compile(rf"^how many {_UNIT} (?:(?:had |have )?(?:passed|went by|elapsed|were there|are there|lay|lie) )?"
               r"between (?P<a>.+?) and (?P<b>.+?)[?.!\s]*$", re.IGNORECASE),
)


def asked_parts(question: str) -> tuple[str, str, str] | None:
    """``(unit, first part, second part)`` when the question asks how long lay between two things, else None."""
    text = " ".join(question.split())
    for pattern in _INTERVAL_ASKED:
        match = pattern.match(text)
        if match is not None:
            return match.group("unit").lower(), match.group("a"), match.group("b")
    return None


_SIDE_ASKED = re.compile(
    r"^(?:what|where|who|which|whom)\b(?P<middle>.*?) (?P<side>before|after|prior to|previous to|following) "
    r"(?P<anchor>.+?)[?.!\s]*$",
    re.IGNORECASE,
)
#: What follows "before" when it is a time, not a thing: left to the model (it is not a sibling's name).
_TIME_WORDS = frozenset([m.lower() for m in MONTHS] + [
    "today", "yesterday", "tomorrow", "noon", "midnight", "morning", "evening", "night", "lunch", "dinner",
    "breakfast", "week", "month", "year", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday",
    "sunday", "that", "then", "this", "now",
])


def asked_side(question: str) -> tuple[str, str] | None:
    """``(side, anchor)`` when the question asks what came just before or after a named thing, else None."""
    text = " ".join(question.split())
    if asked_parts(text) is not None or re.match(r"^how\b", text, re.IGNORECASE):
        return None
    match = _SIDE_ASKED.match(text)
    if match is None:
        return None
    anchor = match.group("anchor")
    words = content_words(anchor)
    if not words or words & _TIME_WORDS or re.search(r"\d", anchor):
        return None
    side = match.group("side").lower()
    return ("after" if side in {"after", "following"} else "before"), anchor


__all__ = ["AskedAction", "AskedKin", "action_classes", "asked_action", "asked_count", "asked_kin", "asked_parts",
           "asked_side", "may_decompose", "route", "verb_class"]

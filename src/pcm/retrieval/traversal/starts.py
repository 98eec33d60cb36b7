"""From a question to start vertices: cheap mention spotting, then the side index's entity-to-vertex matching.

No language model: mentions are quoted phrases, runs of capitalised words ("Rosewood Auto Repair") and the
content-word n-grams of the question, longest first. A mention keeps a vertex when the index matched it by label
(exact or normalised: score >= 0.8 on the index's tiered scale); proper-noun mentions and, as a last resort, the
whole question may also keep a vertex found by full-text or vector search alone, above ``fuzzy_score``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from pcm.words import CONTENT_STOPWORDS

LABEL_SCORE = 0.8
"""The index's floor for a label match (exact >= 0.9, normalised >= 0.8): see ``pcm.index.entities``."""

_WORD = re.compile(r"[A-Za-z0-9À-ÿ][\w'’&.-]*")
_QUOTED = re.compile(r'"([^"]{2,80})"|“([^”]{2,80})”|\'([^\']{2,80})\'')
_QUESTION_START = frozenset({"what", "which", "who", "whom", "whose", "when", "where", "why", "how", "did", "do",
                             "does", "is", "are", "was", "were", "can", "could", "should", "would", "tell", "i"})


class EntityMatcher(Protocol):
    """What :class:`pcm.index.SideIndex` offers for entity-to-vertex matching."""

    def match_entities(self, mention: str, k: int = 10) -> list: ...


@dataclass(frozen=True)
class StartMatch:
    mention: str
    iri: str
    label: str
    score: float
    how: str

    def as_json(self) -> dict[str, object]:
        return dict(self.__dict__)


def mentions(question: str, max_words: int = 4) -> list[tuple[str, bool]]:
    """Candidate mentions, longest and most specific first; the flag marks proper-noun (or quoted) mentions."""
    found: dict[str, bool] = {}
    for groups in _QUOTED.findall(question):
        phrase = next(g for g in groups if g).strip()
        found.setdefault(phrase, True)
    tokens = _WORD.findall(question)
    for run in _capitalised_runs(tokens):
        found.setdefault(" ".join(run), True)
    content = [t for t in tokens if t.lower().strip(".'’") not in CONTENT_STOPWORDS]
    for n in range(min(max_words, len(content)), 0, -1):
        for i in range(len(content) - n + 1):
            gram = " ".join(content[i : i + n]).strip(".")
            if gram and gram in question:
                found.setdefault(gram, False)
    return sorted(found.items(), key=lambda item: (not item[1], -len(item[0].split())))


def _capitalised_runs(tokens: list[str]) -> list[list[str]]:
    runs: list[list[str]] = []
    current: list[str] = []
    for position, token in enumerate(tokens):
        capital = token[:1].isupper() or (token[:1].isdigit() and bool(current))
        if capital and not (position == 0 and token.lower() in _QUESTION_START) and token.lower() != "i":
            current.append(token.rstrip(".,?!"))
            continue
        if current:
            runs.append(current)
        current = []
    if current:
        runs.append(current)
    return runs


def find_starts(
    index: EntityMatcher,
    question: str,
    *,
    per_mention: int = 3,
    max_starts: int = 5,
    fuzzy_score: float = 0.55,
) -> list[StartMatch]:
    """Start vertices for ``question``, one per vertex: the best ``max_starts``, in the order the question
    mentions them (A* walks from the first to the others)."""
    chosen: dict[str, StartMatch] = {}
    covered: list[str] = []
    for mention, proper in mentions(question):
        if any(_inside(mention, longer) for longer in covered):
            continue
        floor = fuzzy_score if proper else LABEL_SCORE
        kept = False
        for match in index.match_entities(mention, per_mention):
            if match.score < floor:
                continue
            kept = True
            if match.iri not in chosen or chosen[match.iri].score < match.score:
                chosen[match.iri] = StartMatch(mention, match.iri, match.label, float(match.score), match.how)
        if kept:
            covered.append(mention)
    if not chosen:
        for match in index.match_entities(question, per_mention):
            if match.score >= fuzzy_score:
                chosen[match.iri] = StartMatch(question, match.iri, match.label, float(match.score), match.how)
    best = sorted(chosen.values(), key=lambda m: (-m.score, m.iri))[:max_starts]
    lowered = question.lower()
    return sorted(best, key=lambda m: (_position(lowered, m.mention), -m.score, m.iri))  # in the question's order


def _position(question: str, mention: str) -> int:
    at = question.find(mention.lower())
    return at if at >= 0 else len(question)


def _inside(short: str, long: str) -> bool:
    return short != long and re.search(rf"(?<!\w){re.escape(short)}(?!\w)", long, re.IGNORECASE) is not None

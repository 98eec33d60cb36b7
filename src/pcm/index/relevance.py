"""Whether recall found something relevant to a question about one person, or only what someone else said.

Recall always returns its nearest posts. For a question that names one speaker ("what did Caroline realise after
the race?"), the memory answers it only if that speaker said (or was told about themselves) what the question
asks; when the words of the question belong to another person's story, the nearest posts are about someone else
and the honest answer is "not in memory".

The decision is a graded attribution, not a rank count. Each post is read as a unit *about its speaker*: its own
statements (first-person or neutral sentences), plus the sentences of the neighbouring turns that are addressed to
that speaker (questions and second-person sentences by someone else: "what motivated you to pursue counselling?"
is about the listener, not the asker). A unit covers the question by the IDF-weighted share of the question's
content words (stemmed; stop words and speakers' names removed) it contains, so a rare word ("clarinet") counts
far more than a common one ("feel"). The attribution margin is the named speaker's coverage (the mean over their
``UNITS_PER_SPEAKER`` best units) minus the same for everyone else's units; the vector margin is the named speaker's best cosine to the question's
content minus anyone else's. The question is declined when ``margin + VECTOR_MARGIN_WEIGHT * vector margin`` is
below ``ATTRIBUTION_MARGIN``.

Questions that name no speaker or several, and memories with a single speaker, have nothing to attribute: they
are always relevant here (a plain similarity or coverage threshold separated nothing on either benchmark).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from pcm.index.records import PostRecord
from pcm.index.text import WORD_TOKEN, stem
from pcm.words import STOPWORDS

ATTRIBUTION_MARGIN = -0.15
"""Decline when ``coverage - others + VECTOR_MARGIN_WEIGHT * vector margin`` (coverages are IDF-weighted shares
of the question's content words, 0-1) is below this. 0 would decline on any deficit; the slack keeps answerable
questions whose words both sides used. On LoCoMo conv-26 (``benchmarks/bench_recall_memories.py`` prints the curve,
overall and per half) -0.15 declines 0.79 of the adversarial questions and 0.05 of the answerable ones (even-
numbered questions 0.83/0.05, odd-numbered 0.74/0.04); -0.2 gives 0.68/0.03, -0.1 0.83/0.08, 0 0.87/0.16. Fitted
on one half alone (most adversarial declines with at most 5% answerable ones), the odd half picks -0.15 (0.83/0.05
on the even half) and the even half picks -0.2 (0.52/0.01 on the odd half): the halves (23-24 adversarial
questions each) disagree by one step, and -0.15 sits where both stay near 5%."""
UNITS_PER_SPEAKER = 3
"""A side's coverage is the mean over its this many best units (missing ones count 0): what a person said about
themselves usually comes up more than once, and one post that happens to share the words weighs less. At the
chosen threshold on conv-26, 1 (the best unit alone) gives 0.77/0.06 (adversarial/answerable declined; even half
0.83/0.09, odd 0.70/0.03), 3 gives 0.79/0.05."""
VECTOR_MARGIN_WEIGHT = 0.5
"""Weight of the vector margin (named speaker's best cosine minus the others' best, question content only)
beside the word attribution margin: it separates two sides whose units share the same words. At the chosen
threshold on conv-26, 0 gives 0.66/0.05 (adversarial/answerable declined), 0.5 0.79/0.05, 1.0 0.81/0.06."""

_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")
_TOKEN = WORD_TOKEN
_SECOND_PERSON = re.compile(r"\b(?:you|your|yours|yourself|yourselves|ya|u)\b|\byou['’]", re.IGNORECASE)
_FIRST_PERSON = re.compile(r"\b(?:i|me|my|mine|myself|we|our|us)\b|\bi['’]", re.IGNORECASE)
_STOPWORDS = STOPWORDS | frozenset(["kinds", "likely", "recent", "recently", "type", "types"])


def content_terms(text: str, ignore: frozenset[str] = frozenset()) -> set[str]:
    """Stemmed content words of ``text``: stop words, words of two letters and the ``ignore`` words dropped."""
    out = set()
    for word in _TOKEN.findall(text):
        term = _TERMS.get(word, _UNSEEN)
        if term is _UNSEEN:
            term = _TERMS[word] = _term(word)
        if term is not None and term[0] not in ignore:
            out.add(term[1])
    return out


def name_words(speakers: Iterable[str]) -> frozenset[str]:
    """The words of the speakers' names (lower case): they never count as content (every post carries one)."""
    return frozenset(w.casefold() for name in speakers for w in _TOKEN.findall(name))


_UNSEEN = ("", "")
_TERMS: dict[str, tuple[str, str] | None] = {}
"""Token as written -> (folded word, stem), or ``None`` for a stop word or a short one: tokenising every post of a
large memory (the first decision after opening) meets the same words again and again."""


def _term(word: str) -> tuple[str, str] | None:
    folded = word.casefold().replace("’", "'").split("'", 1)[0]
    if len(folded) <= 2 or folded in _STOPWORDS:
        return None
    return folded, stem(folded)


def split_turn(text: str) -> tuple[str, str]:
    """A turn's sentences about its speaker and those addressed to the listener.

    A question, or a sentence in the second person with no first person in it, is about the listener ("how long
    have you been creating art?", "that's great you went to the parade"); every other sentence is the speaker's
    own (first-person or neutral).
    """
    own: list[str] = []
    addressed: list[str] = []
    for sentence in _SENTENCE.findall(text):
        stripped = sentence.strip()
        if not stripped:
            continue
        if stripped.endswith("?") or (_SECOND_PERSON.search(stripped) and not _FIRST_PERSON.search(stripped)):
            addressed.append(stripped)
        else:
            own.append(stripped)
    return " ".join(own), " ".join(addressed)


@dataclass
class TermStats:
    """Per post: the content terms of the unit about its speaker; over all posts: document frequencies.

    Built from the posts mirror and rebuilt when the mirror changes (its ``generation``). A rebuild tokenises only
    the posts whose digest changed since the previous build (the rest reuse their terms), then recomputes the units
    and postings, which are cheap next to the tokenising.
    """

    units: dict[int, frozenset[str]] = field(default_factory=dict)
    """slot -> the stemmed terms of the post's own sentences and of the neighbours' sentences addressed to it."""
    postings: dict[str, np.ndarray] = field(default_factory=dict)
    """term -> slots whose unit holds it (ascending, each once): a question's scores are summed over them in
    numpy, since a common word's postings run to a large share of the posts."""
    df: dict[str, int] = field(default_factory=dict)
    """term -> number of posts whose text holds it (for IDF)."""
    posts: int = 0
    parts: dict[str, tuple[str, frozenset[str], frozenset[str]]] = field(default_factory=dict)
    """post IRI -> (digest, terms of its own sentences, terms of its sentences addressed to the listener)."""

    @classmethod
    def build(
        cls,
        records: Iterable[tuple[int, PostRecord, str]],
        at: Callable[[str, int], int | None],
        previous: TermStats | None = None,
    ) -> TermStats:
        """From ``(slot, record, digest)`` triples and ``at(session, position) -> slot`` (``None`` for no such
        post); ``previous`` lends the terms of posts whose digest it saw."""
        chosen = list(records)
        by_slot = {slot: record for slot, record, _ in chosen}
        known = previous.parts if previous is not None else {}
        parts: dict[str, tuple[str, frozenset[str], frozenset[str]]] = {}
        df: dict[str, int] = {}
        for _, record, digest in chosen:
            entry = known.get(record.iri)
            if entry is None or entry[0] != digest:
                own, addressed = split_turn(record.text)
                entry = (digest, frozenset(content_terms(own)), frozenset(content_terms(addressed)))
            parts[record.iri] = entry
            for term in entry[1] | entry[2]:
                df[term] = df.get(term, 0) + 1
        units: dict[int, frozenset[str]] = {}
        postings: dict[str, list[int]] = {}
        for slot, record, _ in chosen:
            unit = set(parts[record.iri][1])
            for position in (record.position - 1, record.position + 1):
                other = at(record.session, position)
                neighbour = by_slot.get(other) if other is not None else None
                if neighbour is not None and neighbour.speaker != record.speaker:
                    unit |= parts[neighbour.iri][2]
            units[slot] = frozenset(unit)
            for term in unit:
                postings.setdefault(term, []).append(slot)
        arrays = {term: np.array(sorted(slots), dtype=np.int64) for term, slots in postings.items()}
        return cls(units, arrays, df, len(chosen), parts)

    def idf(self, term: str) -> float:
        """``log((N + 1) / (df + 0.5))``: a term no post holds gets the highest weight."""
        return math.log((self.posts + 1) / (self.df.get(term, 0) + 0.5))


@dataclass(frozen=True)
class Relevance:
    """The decision and the figures behind it (all 0 when there was nothing to attribute)."""

    relevant: bool
    speaker: str | None = None
    """The one speaker the question names (``None``: the decision did not apply)."""
    coverage: float = 0.0
    """The IDF-weighted share of the question's content words in the named speaker's units (mean of the
    ``UNITS_PER_SPEAKER`` best)."""
    others: float = 0.0
    """The same over everyone else's units."""
    other_speaker: str | None = None
    """Who said the best of those other units."""
    vector_margin: float = 0.0
    """Named speaker's best cosine to the question's content minus the others' best."""

    @property
    def score(self) -> float:
        return self.coverage - self.others + VECTOR_MARGIN_WEIGHT * self.vector_margin

    @property
    def reason(self) -> str:
        """One line for the answer: why it was declined (empty when relevant)."""
        if self.relevant or self.speaker is None:
            return ""
        return (
            f"What the question asks about {self.speaker} matches what {self.other_speaker or 'someone else'} "
            f"said ({self.others:.0%} of its words, weighted by rarity) more than what {self.speaker} said "
            f"({self.coverage:.0%})."
        )


def assess(
    stats: TermStats,
    question_content: str,
    ignore: frozenset[str],
    speaker_of: Callable[[int], str | None],
    named: str,
    nearest: Callable[[np.ndarray], float],
    named_mask: np.ndarray,
    alive: np.ndarray,
) -> Relevance:
    """The decision for a question naming ``named``.

    ``question_content`` is the question without the speaker's name; ``ignore`` holds every speaker's name
    words (lower case), which never count as content; ``nearest(mask)`` is the best cosine to the content's
    vector among the live slots of ``mask``; ``named_mask`` marks the named speaker's slots and ``alive`` the
    live ones.
    """
    weights = {term: stats.idf(term) for term in content_terms(question_content, ignore)}
    total = sum(weights.values())
    coverage = others = 0.0
    other_speaker: str | None = None
    if total > 0:
        scores = np.zeros(len(named_mask))
        for term, weight in weights.items():
            slots = stats.postings.get(term)
            if slots is not None:
                scores[slots] += weight  # a term's postings hold each slot once
        theirs = np.where(named_mask, 0.0, scores)
        coverage = _best_sum(scores[named_mask]) / total / UNITS_PER_SPEAKER
        others = _best_sum(theirs) / total / UNITS_PER_SPEAKER
        best = int(np.argmax(theirs))  # the first of equal bests: the lowest slot
        other_speaker = speaker_of(best) if theirs[best] > 0 else None
    own = alive & named_mask
    rest = alive & ~named_mask
    vector_margin = 0.0
    if own.any() and rest.any():
        vector_margin = nearest(named_mask) - nearest(~named_mask)
    found = Relevance(True, named, coverage, others, other_speaker, vector_margin)
    if found.score < ATTRIBUTION_MARGIN:
        return Relevance(False, named, coverage, others, other_speaker, vector_margin)
    return found


def _best_sum(scores: np.ndarray) -> float:
    """The sum of the ``UNITS_PER_SPEAKER`` highest scores (all of them when there are fewer)."""
    if len(scores) <= UNITS_PER_SPEAKER:
        return float(scores.sum())
    return float(np.partition(scores, len(scores) - UNITS_PER_SPEAKER)[-UNITS_PER_SPEAKER:].sum())

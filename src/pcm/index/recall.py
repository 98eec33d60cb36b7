"""Ranking for episodic recall: reciprocal rank fusion, the named-speaker prior and Memoria-style recency.

The constants were chosen on LoCoMo conv-26 as broad plateaus, not peaks: R@10 stays within 0.01 for
``RRF_C`` 5-20, ``VECTOR_WEIGHT`` 0.35-0.5 and ``OTHER_SPEAKER_FACTOR`` 0.5-0.7 (see the benchmark), so they are
not fitted to that conversation's questions.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MODES = ("hybrid", "fts", "vector")
RRF_C = 10
"""Rank offset of reciprocal rank fusion; smaller than the usual 60 because the lists are short and their heads
carry most of the signal."""
FTS_WEIGHT = 1.0
VECTOR_WEIGHT = 0.35
"""The full-text leg carries neighbour context and dates, and finds more; vectors rescue paraphrases."""
OTHER_SPEAKER_FACTOR = 0.5
"""When the question names exactly one speaker, posts by anyone else have their leg scores multiplied by this:
"what did Caroline research?" is answered by Caroline's own words far more often than by her friend's."""
OWNER_ROLE = "user"
"""The role of the memory owner's own posts (LoCoMo ``speaker_a``, a LongMemEval user)."""
OTHER_ROLE_FACTOR = 0.3
"""When a question speaks in the first person and names no one ("how many weddings have I attended?"), posts not
by the owner have their leg scores multiplied by this: the asker is the owner, and what they did is in their own
words. Chosen on LongMemEval dev48 (0.3-0.5 help, 0.7 barely); neutral on LoCoMo, whose questions name people."""
_FIRST_PERSON = re.compile(r"\b(?:i|me|my|mine|myself)\b|\bi['’](?:m|ve|d|ll)\b", re.IGNORECASE)
_SECOND_PERSON = re.compile(r"\b(?:you|your|yours|yourself)\b|\byou['’](?:re|ve|d|ll)\b", re.IGNORECASE)
DEPTH = 100
"""Candidates taken from each leg before fusion (at least 4k)."""
GRAPH_WEIGHT = 0.0
"""Weight in the fusion of the term-graph leg (personalised PageRank from the question's terms and the best fused
posts, :mod:`pcm.index.graph`); 0 switches the leg off, and then no graph file is kept. Off by default: at 1.0 it
raised R@10 on LoCoMo conv-26 (0.727 -> 0.740) and the LongMemEval dev slice (0.870 -> 0.891) but lowered the S-like
haystack (0.783 -> 0.739, preference questions 0.750 -> 0.500) and single-hop R@5 (0.814 -> 0.757), and its first
recall after an open loads the graph (3.7 s at 100k posts). ``bench_recall_memories.py --set GRAPH_WEIGHT=1``
measures it."""
GRAPH_SEEDS = 10
"""Best fused posts the graph walk restarts from."""
"""Candidates taken from each leg before fusion (at least 4k)."""


@dataclass(frozen=True)
class Leg:
    """One ranked list: slots best first, their scores, and the leg's weight in the fusion."""

    slots: np.ndarray
    scores: np.ndarray
    weight: float


def rank_leg(slots: np.ndarray, scores: np.ndarray, weight: float, factors: np.ndarray | None = None) -> Leg:
    """Order one leg by score after the speaker prior (a factor per slot), best first."""
    scores = np.asarray(scores, dtype=np.float64)
    if factors is not None and len(slots):
        scores = np.maximum(scores, 0.0) * factors[slots]
    order = np.argsort(-scores, kind="stable")
    return Leg(np.asarray(slots, dtype=np.int64)[order], scores[order], weight)


def rrf(legs: Sequence[Leg], c: float = RRF_C) -> dict[int, float]:
    """Weighted reciprocal rank fusion: each leg adds ``weight / (c + rank)`` (rank from 1) to each slot it ranks."""
    fused: dict[int, float] = {}
    for leg in legs:
        for rank, slot in enumerate(leg.slots.tolist(), start=1):
            fused[slot] = fused.get(slot, 0.0) + leg.weight / (c + rank)
    return fused


def recency_weights(ts: np.ndarray, decay: float) -> np.ndarray:
    """Memoria-style recency: ``exp(-decay * age)`` with ages min-max normalised over the candidates (newest 0,
    oldest 1). Candidates without a time count as the oldest; with one distinct time every weight is 1."""
    ts = np.asarray(ts, dtype=np.float64)
    known = ~np.isnan(ts)
    if not known.any():
        return np.ones(len(ts))
    newest, oldest = ts[known].max(), ts[known].min()
    span = newest - oldest
    age = np.ones(len(ts))
    if span > 0:
        age[known] = (newest - ts[known]) / span
    else:
        age[known] = 0.0
    return np.exp(-decay * age)


def speaker_factors(size: int, named: np.ndarray | None) -> np.ndarray | None:
    """Per-slot multipliers for the named-speaker prior (``None`` when the query names no single speaker)."""
    if named is None:
        return None
    factors = np.full(size, OTHER_SPEAKER_FACTOR, dtype=np.float32)
    factors[named[:size]] = 1.0
    return factors


def asks_about_owner(query: str) -> bool:
    """Whether a question is about the asker alone: first person, and no ``you`` (which may mean the assistant:
    "what did you recommend me?" is answered by the other side)."""
    return bool(_FIRST_PERSON.search(query)) and not _SECOND_PERSON.search(query)


def role_factors(owner: np.ndarray) -> np.ndarray:
    """Per-slot multipliers for the owner prior: 1 for the owner's posts, ``OTHER_ROLE_FACTOR`` for the rest."""
    factors = np.full(len(owner), OTHER_ROLE_FACTOR, dtype=np.float32)
    factors[owner] = 1.0
    return factors


ATTRIBUTION_DEPTH = DEPTH
"""Candidates of each leg the attribution check (:meth:`SideIndex.said_by_others`) ranks."""
ATTRIBUTION_RANK = 2
"""The check finds a question's words said by someone else when at least this many posts by others outrank the
named speaker's best post (content words only, no speaker prior) and the nearest post in meaning is also not
theirs. Chosen on LoCoMo conv-26 as the point where answerable questions almost never trip it (3% there); one
rank declines more adversarial questions and about one answerable question in five."""


def first_rank(ranked: Sequence[int], chosen: np.ndarray) -> int:
    """The 0-based rank of the first slot in ``ranked`` for which ``chosen`` is true (``len(ranked)`` if none)."""
    return next((i for i, slot in enumerate(ranked) if chosen[slot]), len(ranked))

"""Ranking for episodic recall: reciprocal rank fusion, the named-speaker prior and Memoria-style recency.

The weights, depths and priors a recall uses are a :class:`pcm.settings.RecallConfig` the index is opened with.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

MODES = ("hybrid", "fts", "vector")
RRF_C = 10
"""Rank offset of reciprocal rank fusion; smaller than the usual 60 because the lists are short and their heads
carry most of the signal."""
OWNER_ROLE = "user"
"""The role of the memory owner's own posts (LoCoMo ``speaker_a``, a LongMemEval user)."""
_FIRST_PERSON = re.compile(r"\b(?:i|me|my|mine|myself)\b|\bi['’](?:m|ve|d|ll)\b", re.IGNORECASE)
_SECOND_PERSON = re.compile(r"\b(?:you|your|yours|yourself)\b|\byou['’](?:re|ve|d|ll)\b", re.IGNORECASE)


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


def ranked(fused: Mapping[int, float]) -> list[int]:
    """The slots of a fusion best first, equal scores by slot: one order whatever the legs' order."""
    return sorted(fused, key=lambda slot: (-fused[slot], slot))


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


def speaker_factors(size: int, named: np.ndarray | None, other: float) -> np.ndarray | None:
    """Per-slot multipliers for the named-speaker prior: 1 for the named speaker's posts, ``other`` for the rest
    (``None`` when the query names no single speaker)."""
    if named is None:
        return None
    factors = np.full(size, other, dtype=np.float32)
    factors[named[:size]] = 1.0
    return factors


def asks_about_owner(query: str) -> bool:
    """Whether a question is about the asker alone: first person, and no ``you`` (which may mean the assistant:
    "what did you recommend me?" is answered by the other side)."""
    return bool(_FIRST_PERSON.search(query)) and not _SECOND_PERSON.search(query)


def role_factors(owner: np.ndarray, other: float) -> np.ndarray:
    """Per-slot multipliers for the owner prior: 1 for the owner's posts, ``other`` for the rest."""
    factors = np.full(len(owner), other, dtype=np.float32)
    factors[owner] = 1.0
    return factors


def first_rank(ranked: Sequence[int], chosen: np.ndarray) -> int:
    """The 0-based rank of the first slot in ``ranked`` for which ``chosen`` is true (``len(ranked)`` if none)."""
    return next((i for i, slot in enumerate(ranked) if chosen[slot]), len(ranked))


def diversify(scores: np.ndarray, vectors: np.ndarray, lam: float, fixed: int = 0) -> list[int]:
    """Greedy maximal marginal relevance: the positions ``0..n-1`` of ``n`` candidates (``scores`` their fused
    scores, ``vectors`` their unit vectors, one row each) in the order that picks, at each step, the candidate with
    the highest ``score / max(scores) - lam * max(0, cosine with the candidates picked so far)``. The first ``fixed``
    candidates are picked first, in their order. Ties go to the earlier position, so ``lam = 0`` keeps the fused
    order (by falling score) and the result is deterministic."""
    n = len(scores)
    fixed = min(max(fixed, 0), n)
    if n == 0:
        return []
    top = float(np.max(scores))
    relative = np.asarray(scores, dtype=np.float64) / top if top > 0 else np.zeros(n)
    unit = np.asarray(vectors, dtype=np.float64)
    similar = np.maximum(np.einsum("id,jd->ij", unit, unit, optimize=False), 0.0)
    picked = list(range(fixed))
    nearest = similar[:, :fixed].max(axis=1) if fixed else np.zeros(n)
    left = np.ones(n, dtype=bool)
    left[:fixed] = False
    while left.any():
        gain = np.where(left, relative - lam * nearest, -np.inf)
        best = int(np.argmax(gain))  # the first maximum: ties keep the earlier position
        picked.append(best)
        left[best] = False
        nearest = np.maximum(nearest, similar[:, best])
    return picked

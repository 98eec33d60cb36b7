"""Ranking for episodic recall: reciprocal rank fusion, the named-speaker prior and Memoria-style recency.

The constants were chosen on LoCoMo conv-26 as broad plateaus, not peaks: R@10 stays within 0.01 for
``RRF_C`` 5-20, ``VECTOR_WEIGHT`` 0.35-0.8 and ``OTHER_SPEAKER_FACTOR`` 0.5-0.7 (see the benchmark), so they are
not fitted to that conversation's questions.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

MODES = ("hybrid", "fts", "vector")
RRF_C = 10
"""Rank offset of reciprocal rank fusion; smaller than the usual 60 because the lists are short and their heads
carry most of the signal."""
FTS_WEIGHT = 1.0
VECTOR_WEIGHT = 0.5
"""The full-text leg carries neighbour context and dates, and finds more; vectors rescue paraphrases. Raised from
0.35 once the vector query lost the named speaker (``NAMED_SPEAKER_IN_VECTOR``): LoCoMo conv-26 R@10 stays 0.740
for 0.5-0.8 (R@5 0.653 -> 0.667 at 0.5), the LongMemEval dev slice rises 0.870 -> 0.891 (multi-session 0.429 ->
0.571; 0.935 at 0.65-0.8) and the S-like haystack 0.783 -> 0.848 (multi-session 0.429 -> 0.714; 0.826 at 0.65),
no category lower; 0.5 keeps single-hop R@5 (0.843, 0.771 at 0.8)."""
OTHER_SPEAKER_FACTOR = 0.5
"""When the question names exactly one speaker, posts by anyone else have their leg scores multiplied by this:
"what did Caroline research?" is answered by Caroline's own words far more often than by her friend's."""
OWNER_ROLE = "user"
"""The role of the memory owner's own posts (LoCoMo ``speaker_a``, a LongMemEval user)."""
OTHER_ROLE_FACTOR = 0.3
"""When a question speaks in the first person and names no one ("how many weddings have I attended?"), posts not
by the owner have their leg scores multiplied by this: the asker is the owner, and what they did is in their own
words. Chosen on LongMemEval dev48 (0.3-0.5 help, 0.7 barely); neutral on LoCoMo, whose questions name people."""
NAMED_SPEAKER_IN_VECTOR = False
"""Whether the vector leg embeds the name of the one speaker a question names. Not by default: every post of that
speaker is embedded as ``NAME said: ...`` and many posts by others address them by name, so the name pulls short
chatter ("Wow, NAME, that's great!") above the posts that carry the question's content; the speaker prior does
the name's job. Dropping it raised LoCoMo conv-26 R@10 0.733 -> 0.740 (R@5 0.633 -> 0.653, multi-hop 0.219 ->
0.250, open-domain R@20 0.364 -> 0.455, no category lower); LongMemEval questions name no speaker."""
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
COOCCURRENCE_WEIGHT = 0.0
"""Weight in the fusion of the entity co-occurrence leg (personalised PageRank over posts and the names, index
entities and two-word phrases they share, restarting at the question's nodes and the best fused posts,
:mod:`pcm.index.cooccurrence`); 0 switches it off. Off because it does not reach multi-hop: on LoCoMo conv-26 at
0.5, 1.0 or 2.0 (and damping 0.8, 5 seeds, seeds or question nodes alone, hub share 0.05) R@10 stays 0.767 and
multi-hop 0.312, open-domain 0.455 -> 0.545 but single-hop 0.943 -> 0.929 (0.914 with 5 seeds), R@20 0.833 ->
0.820 (multi-hop R@20 0.375 -> 0.406 at 2.0); R@5 cannot move while the feedback head is kept. The LongMemEval dev
slice is unchanged in every type (0.913). Without a tagger or a model the graph is sparse (conv-26: 774 nodes,
967 edges over 419 posts, 2.3 a post) and most missed multi-hop turns share no node with the question's or the
first posts; a question's own nodes are rare (its names are mostly the speakers', which are not nodes)."""
SESSION_TURNS = 0
"""Two-stage retrieval: after the ``SESSION_HEAD`` best posts overall come the ``SESSION_TURNS`` best posts of each
of the ``SESSIONS`` best sessions (a session scored by the sum of its ``SESSION_POOL`` best posts' fused scores),
then the rest in fused order, so a question whose evidence spans sessions gets turns from each. 0 switches it
off. Off because it did not help: on LoCoMo conv-26 (R@10 0.733, multi-hop 0.219) one turn each of 5 sessions after
a head of 2 gave 0.727 (multi-hop 0.219) and cut single-hop R@5 0.814 -> 0.629; 2 turns each 0.600; a head of 5
0.727, with 8 sessions 0.687 (multi-hop 0.250); the LongMemEval dev slice stayed at 0.870 (multi-session 0.429)
in every setting, and the S-like haystack fell 0.783 -> 0.761 (multi-session 0.429 -> 0.571). The evidence a
multi-hop question misses is mostly not the best turn of its session, nor in the best sessions by fused score.
Figures before the vector leg lost the named speaker; after it (weight 0.5), a head of 5 changes nothing: conv-26
0.740, dev slice 0.891."""
SESSIONS = 5
"""Sessions the two-stage order takes turns from."""
SESSION_POOL = 3
"""Best posts of a session whose fused scores add up to the session's score."""
SESSION_HEAD = 2
"""Best posts overall kept at the top before the per-session turns."""
NEIGHBOUR_SHARE = 0.0
"""Fraction of a post's fused score its previous and next turns in the session inherit (the answer often sits in
the reply to the turn the question's words match). 0 switches it off. Off because it lowered recall: LoCoMo
conv-26 R@10 0.733 -> 0.720 / 0.713 / 0.693 at 0.05 / 0.1 / 0.3, the LongMemEval dev slice 0.870 -> 0.826 /
0.804 / 0.804 (multi-session 0.429 -> 0.286); with the vector weight at 0.5, 0.05 keeps conv-26 at 0.740 and
lowers the dev slice 0.891 -> 0.870. The full-text leg already reads each turn with the one before it."""

PRF_DOCS = 5
"""Pseudo-relevance feedback: the best fused posts that a second round of retrieval starts from (0 switches it
off). A question whose evidence is spread over several turns ("what activities does Melanie partake in?") finds
one or two of them by its own words; the vector of those first finds brings up their siblings, which share the
topic but not the question's words. On LoCoMo conv-26 (5 posts, vector leg at 0.5, beta 0.25, head kept) R@10
0.740 -> 0.767 (multi-hop 0.250 -> 0.312, open-domain 0.364 -> 0.455, single-hop 0.929 -> 0.943, temporal 0.919;
R@5 0.667 and R@20 0.793 -> 0.833), the LongMemEval dev slice 0.891 -> 0.913 (temporal 0.875 -> 1.0; multi-session
0.571 unchanged) and the S-like haystack 0.848 unchanged in every type (R@20 0.870 -> 0.913). With beta 0.5 and the head
not kept, 2, 3 or 5 posts give the same conv-26 and dev-slice R@10 (0.767, 0.913). Cost: a second vector search
(:meth:`~pcm.index.mirror.PostMirror.top_by_vector`, a bfloat16 pass of 3-4 ms at 100k posts on two cores)."""
QUANTITY_WEIGHT = 1.0
"""Weight in the fusion of the quantity leg: when a question asks an amount of a unit ("how many hours", "how much
money", "how long", :mod:`pcm.index.quantity`), the fused candidates that state such an amount, in fused order. 0
switches it off. At 0.5, 1.0 and 2.0 LoCoMo conv-26 is unchanged in every figure (R@10 0.767); at 1.0 and 2.0 the
LongMemEval dev slice rises 0.935 -> 0.957 (multi-session 0.714 -> 0.857) and the S-like haystack 0.848 -> 0.870
(multi-session 0.714 -> 0.857), no type lower; at 0.5 neither moves at R@10. A leg for counts of things ("how many
weddings") lowered the dev slice's multi-session R@20 (1.0 -> 0.857): such counts are told one event a turn, and
turns that say "a few weddings" are not the evidence."""
PRF_VECTOR_WEIGHT = 0.5
"""Weight in the fusion of the vector leg run with the query vector moved towards the feedback posts' (0: not
run). 0.3 gives conv-26 0.747 (open-domain 0.455, multi-hop 0.250); 0.8 (3 posts, beta 0.5) 0.753 with single-hop
0.929 -> 0.886."""
PRF_VECTOR_BETA = 0.25
"""How far the feedback query vector moves: ``query + beta * mean(feedback posts)``, renormalised. At 0.5 (and 1.0)
conv-26 and the dev slice stay as at 0.25 (0.767 / 0.913; 0.753 at 1.0) but the S-like haystack falls 0.848 ->
0.826 (temporal 0.750 -> 0.625): the further the query moves, the more distractor sessions it reaches."""
PRF_KEEP_HEAD = True
"""The feedback posts keep the first places, in their first-round order, after the second round: the third leg
otherwise pushes exact answers down (conv-26 single-hop R@5 0.843 -> 0.729-0.757, R@10 unchanged)."""

MMR_LAMBDA = 0.1
"""Content diversity (maximal marginal relevance) among the best hybrid candidates: the first ``MMR_POOL`` posts
are re-ordered greedily by ``score / best score - MMR_LAMBDA * max cosine with the posts already placed``, so a
near-duplicate of a post above it yields its place to a post that says something else (a question whose evidence is
several different turns). 0 switches it off. The feedback head (``PRF_KEEP_HEAD``) keeps its places and counts as
placed, so R@5 cannot move. Relevance scores are divided by the pool's best, so ``MMR_LAMBDA`` does not depend on
the fusion's scale (top fused scores are about 0.1-0.2).

Measured with ``bench_recall_memories.py`` / ``bench_recall_haystack.py --set MMR_LAMBDA=...``: at 0.1 the
LongMemEval dev slice gains, R@10 0.913 -> 0.935 (multi-session 0.571 -> 0.714, no type lower), R@20 0.978 ->
1.000; LoCoMo conv-26 keeps R@10 0.767 in every category (multi-hop 0.312; its session recall@10 0.688 -> 0.719)
but R@20 falls 0.833 -> 0.827 (open-domain 0.818 -> 0.727); the S-like haystack keeps R@10 0.848 in every type,
R@20 0.913 -> 0.891 (temporal 0.875 -> 0.750). 0.05 lowers conv-26 R@10 to 0.760 (single-hop 0.943 -> 0.929),
0.2 cuts open-domain R@20 to 0.636, 0.5 lowers R@10 to 0.740 (multi-hop 0.281). Without the head
(``PRF_KEEP_HEAD`` false) 0.1 gives conv-26 R@10 0.773 (open-domain 0.455 -> 0.545) but single-hop R@5 0.843 ->
0.729."""
MMR_POOL = 30
"""Best fused posts the diversity re-ordering may move; the rest keep their fused order after them."""


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


ATTRIBUTION_VECTOR_WEIGHT = 0.35
"""Weight of the vector leg in the attribution check's fusion: the value ``ATTRIBUTION_RANK`` was chosen with."""
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


def two_stage(
    slots: Sequence[int] | np.ndarray,
    scores: Sequence[float] | np.ndarray,
    session_of: np.ndarray,
    *,
    sessions: int,
    turns: int,
    head: int,
    pool: int,
) -> list[int]:
    """Re-order ranked posts (``slots`` best first, ``scores`` falling, ``session_of`` a session code per slot) so
    the best ``turns`` posts of each of the ``sessions`` best sessions follow the ``head`` best posts overall,
    sessions in their score order and one turn of each per round, then everything else in its order.

    A session's score is the sum of its ``pool`` best posts' scores: a session where several posts match beats one
    lucky post. Posts already placed (in the head or by an earlier round) count towards their session's turns.
    The order is the same whatever prefix the caller keeps, so ``k`` only cuts it.
    """
    order = [int(slot) for slot in slots]
    by_session: dict[int, list[int]] = {}
    totals: dict[int, float] = {}
    for slot, score in zip(order, scores, strict=True):
        session = int(session_of[slot])
        posts = by_session.setdefault(session, [])
        if len(posts) < pool:
            totals[session] = totals.get(session, 0.0) + float(score)
        posts.append(slot)
    chosen = sorted(totals, key=lambda s: -totals[s])[:sessions]  # stable: ties keep first appearance
    out = order[:head]
    placed = set(out)
    count = dict.fromkeys(chosen, 0)
    for slot in out:
        session = int(session_of[slot])
        if session in count:
            count[session] += 1
    for round_ in range(1, turns + 1):
        for session in chosen:
            if count[session] >= round_:
                continue
            nxt = next((slot for slot in by_session[session] if slot not in placed), None)
            if nxt is not None:
                out.append(nxt)
                placed.add(nxt)
                count[session] += 1
    out.extend(slot for slot in order if slot not in placed)
    return out


def spread_to_neighbours(
    fused: dict[int, float], neighbours: Callable[[int], Sequence[int]], share: float
) -> dict[int, float]:
    """Fused scores where each post also adds ``share`` of each neighbour's fused score (``neighbours(slot)``:
    the previous and next turn of its session that the filters allow); a neighbour no leg found joins the
    candidates with its inherited score alone."""
    if share <= 0:
        return fused
    out = dict(fused)
    for slot, score in fused.items():
        for other in neighbours(slot):
            out[other] = out.get(other, 0.0) + share * score
    return out


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

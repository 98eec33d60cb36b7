"""Entity-to-vertex matching: fuse label lookups, label-word (full-text) and vector candidates into one score.

Scores fall in tiers so a caller can threshold them: an exact label (case and spacing aside) scores in
[0.9, 1.0], a normalised label (accents, punctuation, possessive, leading article) in [0.8, 0.9), anything found
only by full-text or vectors below 0.8. An exact name therefore always outranks a neighbour in embedding space,
whatever its vector says.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pcm.index.records import EntityMatch

EXACT_FLOOR = 0.9
NORMALISED_FLOOR = 0.8
VECTOR_SHARE = 0.6
FTS_SHARE = 0.4


@dataclass
class _Candidate:
    exact: bool = False
    normalised: bool = False
    fts: float | None = None
    vector: float | None = None


def combine(
    *,
    exact: Iterable[str],
    normalised: Iterable[str],
    fts: Iterable[tuple[str, float]],
    vector: Iterable[tuple[str, float]],
    label_of: Callable[[str], str],
    similarity: Callable[[str], float],
    k: int,
) -> list[EntityMatch]:
    """Rank candidate IRIs from every leg. ``fts`` scores are shares in [0, 1] (how much of the mention a
    label's words cover); ``similarity`` gives the cosine of an IRI the vector leg did not return (0.0 when the
    caller skipped that leg)."""
    candidates: dict[str, _Candidate] = {}
    for iri in exact:
        candidates.setdefault(iri, _Candidate()).exact = True
    for iri in normalised:
        candidates.setdefault(iri, _Candidate()).normalised = True
    for iri, share in fts:
        candidates.setdefault(iri, _Candidate()).fts = min(max(share, 0.0), 1.0)
    for iri, cosine in vector:
        candidates.setdefault(iri, _Candidate()).vector = cosine
    matches = [_score(iri, c, label_of, similarity) for iri, c in candidates.items()]
    matches.sort(key=lambda m: (-m.score, m.label, m.iri))
    return matches[:k]


def _score(
    iri: str, c: _Candidate, label_of: Callable[[str], str], similarity: Callable[[str], float]
) -> EntityMatch:
    cosine = c.vector if c.vector is not None else similarity(iri)
    evidence = VECTOR_SHARE * max(cosine, 0.0) + FTS_SHARE * (c.fts or 0.0)
    if c.exact:
        score = EXACT_FLOOR + (1.0 - EXACT_FLOOR) * evidence
    elif c.normalised:
        score = NORMALISED_FLOOR + (EXACT_FLOOR - NORMALISED_FLOOR) * evidence * 0.999
    else:
        score = NORMALISED_FLOOR * evidence * 0.999
    how = [
        name
        for name, found in (
            ("exact", c.exact),
            ("normalised", c.normalised and not c.exact),
            ("fts", c.fts is not None),
            ("vector", c.vector is not None),
        )
        if found
    ]
    return EntityMatch(iri=iri, label=label_of(iri), score=round(float(score), 6), how="+".join(how))

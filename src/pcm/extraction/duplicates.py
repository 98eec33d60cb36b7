"""``pcm duplicates``: entities that may be the same thing, listed for a person to decide, never merged silently.

Extraction merges only the certain case (equal normalised label and a shared type, see
:mod:`pcm.extraction.resolve`). What is left here: equal labels with unrelated types ("Jordan" the person and
"Jordan" the country), labels that are close ("Sellwood Animal Clinic" / "Sellwood Animal Hospital"), and labels
where one contains the other ("Dana" / "Dana Whitfield"), when the two share a specific type.
Candidate pairs come from shared label words, so the cost grows with the memory, not with its square.
"""

from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher
from itertools import combinations
from typing import TYPE_CHECKING

from pcm.extraction.resolve import GENERIC_TYPES, normalise_label

if TYPE_CHECKING:
    from pcm.context import MemoryContext

#: Label similarity (difflib ratio on normalised labels) from which two entities of a shared type are listed.
SIMILARITY = 0.85
#: Words shared by more entities than this are too common to pair on (every "the ... clinic").
_MAX_BUCKET = 200


@dataclass(frozen=True)
class DuplicatePair:
    a: str
    b: str
    label_a: str
    label_b: str
    types_a: tuple[str, ...]
    types_b: tuple[str, ...]
    score: float
    reason: str

    def as_json(self) -> dict[str, object]:
        return {**self.__dict__, "types_a": list(self.types_a), "types_b": list(self.types_b)}


@dataclass(frozen=True)
class _Node:
    iri: str
    label: str
    keys: frozenset[str]
    types: tuple[str, ...]

    @property
    def specific(self) -> frozenset[str]:
        return frozenset(self.types) - GENERIC_TYPES


def find_duplicates(memory: MemoryContext) -> list[DuplicatePair]:
    """Candidate duplicate entities, most similar first."""
    nodes = [
        _Node(iri, label, frozenset(k for k in (normalise_label(x) for x in (label, *alts)) if k), types)
        for iri, label, types, alts in memory.store.entities()
    ]
    buckets: dict[str, list[_Node]] = {}
    for node in nodes:
        for word in {w for key in node.keys for w in key.split() if len(w) >= 3 or key == w}:
            buckets.setdefault(word, []).append(node)
    seen: set[tuple[str, str]] = set()
    found: list[DuplicatePair] = []
    for bucket in buckets.values():
        if len(bucket) > _MAX_BUCKET:
            continue
        for x, y in combinations(sorted(bucket, key=lambda n: n.iri), 2):
            if (x.iri, y.iri) in seen:
                continue
            seen.add((x.iri, y.iri))
            pair = _compare(x, y)
            if pair is not None:
                found.append(pair)
    return sorted(found, key=lambda p: (-p.score, p.a, p.b))


def _compare(x: _Node, y: _Node) -> DuplicatePair | None:
    shared = bool(x.specific & y.specific)
    score = max(SequenceMatcher(None, a, b).ratio() for a in x.keys for b in y.keys)
    if x.keys & y.keys:
        reason = "same label, same type (not merged: it predates the merge rule or has other labels)" if shared \
            else "same label, different types"
        return _pair(x, y, 1.0, reason)
    if not shared:
        return None
    if score >= SIMILARITY:
        return _pair(x, y, score, "similar labels, same type")
    if any(_contains(a, b) for a in x.keys for b in y.keys):
        return _pair(x, y, score, "one label contains the other, same type")
    return None


def _contains(a: str, b: str) -> bool:
    wa, wb = set(a.split()), set(b.split())
    return bool(wa and wb) and (wa < wb or wb < wa)


def _pair(x: _Node, y: _Node, score: float, reason: str) -> DuplicatePair:
    return DuplicatePair(x.iri, y.iri, x.label, y.label, x.types, y.types, round(score, 3), reason)

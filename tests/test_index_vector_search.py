"""The in-memory vector search, and the feedback search that reads only the rows that can make its cut.

``top_by_moved`` must return exactly what a full search with the moved vector returns (same slots, same order,
same scores), while scoring fewer rows; the reference here is ``top_by_vector`` over the whole matrix.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.test_index_attribution import _records
from tests.test_index_side import HashEmbedder

from pcm.index import PostRecord, SideIndex
from pcm.index import recall as ranking
from pcm.index.mirror import PostMirror

DIM = 48
SIZE = 5000


def _mirror(vectors: np.ndarray) -> PostMirror:
    records = [
        PostRecord(f"urn:v:{i}", f"s{i % 7}", "user", "Ann" if i % 3 else "Bob", None, "text", None, i // 7)
        for i in range(len(vectors))
    ]
    mirror = PostMirror(vectors.shape[1])
    mirror.load(records, [""] * len(records), [""] * len(records), vectors, np.full(len(records), np.nan))
    return mirror


def _unit_rows(rng: np.random.Generator, n: int) -> np.ndarray:
    rows = rng.standard_normal((n, DIM)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _moved(mirror: PostMirror, query: np.ndarray, rng: np.random.Generator, beta: float = 0.25) -> np.ndarray:
    top = rng.choice(np.flatnonzero(mirror.alive), 5, replace=False)
    moved = query + beta * mirror.vectors[top].mean(axis=0)
    return (moved / np.linalg.norm(moved)).astype(np.float32)


def _assert_same(
    mirror: PostMirror, query: np.ndarray, moved: np.ndarray, n: int, **kw: np.ndarray | None
) -> None:
    expected = mirror.top_by_vector(moved, n, kw.get("mask"), kw.get("weights"))
    got = mirror.top_by_moved(query, mirror.cosines(query), moved, n, kw.get("mask"), kw.get("weights"))
    assert got[0].tolist() == expected[0].tolist()
    assert got[1].tobytes() == expected[1].tobytes()


@pytest.mark.parametrize("seed", range(6))
def test_the_moved_search_equals_a_full_search(seed: int) -> None:
    rng = np.random.default_rng(seed)
    mirror = _mirror(_unit_rows(rng, SIZE))
    query = _unit_rows(rng, 1)[0]
    moved = _moved(mirror, query, rng, beta=(0.25, 0.5, 1.0)[seed % 3])
    for n in (1, 20, 100):
        _assert_same(mirror, query, moved, n)
    weights = np.where(np.arange(SIZE) % 3 == 0, 1.0, 0.5).astype(np.float32)
    mask = mirror.mask(session="s2")
    _assert_same(mirror, query, moved, 20, weights=weights)
    _assert_same(mirror, query, moved, 20, mask=mask)
    _assert_same(mirror, query, moved, 20, mask=mask, weights=weights)


def test_the_moved_search_reads_a_fraction_of_the_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(11)
    mirror = _mirror(_unit_rows(rng, SIZE))
    query = _unit_rows(rng, 1)[0]
    moved = _moved(mirror, query, rng)
    read: list[int] = []
    scores_at = PostMirror._scores_at

    def counting(self: PostMirror, rows: np.ndarray, q: np.ndarray, w: np.ndarray | None) -> np.ndarray:
        read.append(len(rows))
        return scores_at(self, rows, q, w)

    monkeypatch.setattr(PostMirror, "_scores_at", counting)
    mirror.top_by_moved(query, mirror.cosines(query), moved, 20)
    assert 0 < sum(read) < SIZE // 2


def test_rows_that_are_not_unit_vectors_keep_their_place() -> None:
    """The bound uses each row's own length: rows twice as long as the rest still rank as a full search ranks
    them (a bound that took every row for a unit vector would miss them)."""
    rng = np.random.default_rng(3)
    vectors = _unit_rows(rng, SIZE)
    vectors[::2] *= 2.0
    mirror = _mirror(vectors)
    query = _unit_rows(rng, 1)[0]
    moved = _moved(mirror, query, rng, beta=0.5)
    _assert_same(mirror, query, moved, 50)


def test_equal_scores_rank_by_slot_in_both_searches() -> None:
    rng = np.random.default_rng(5)
    vectors = _unit_rows(rng, SIZE)
    vectors[1::2] = vectors[0::2]  # every row twice
    mirror = _mirror(vectors)
    query = _unit_rows(rng, 1)[0]
    slots, scores = mirror.top_by_vector(query, 40)
    assert slots[0::2].tolist() == [s - 1 for s in slots[1::2].tolist()]
    assert scores[0::2].tobytes() == scores[1::2].tobytes()
    _assert_same(mirror, query, _moved(mirror, query, rng), 40)


def test_freed_and_reused_slots_are_searched_as_a_full_search_does() -> None:
    rng = np.random.default_rng(9)
    mirror = _mirror(_unit_rows(rng, SIZE))
    for i in range(0, SIZE, 4):
        mirror.remove(f"urn:v:{i}")
    fresh = _unit_rows(rng, 300)
    for i, vector in enumerate(fresh):
        mirror.put(PostRecord(f"urn:w:{i}", "s9", "user", "Ann", None, "t", None, i), "", "", vector)
    assert not mirror.alive[: mirror.capacity()].all()
    query = _unit_rows(rng, 1)[0]
    _assert_same(mirror, query, _moved(mirror, query, rng), 30)


WORDS = [
    "violin",
    "garden",
    "trip",
    "museum",
    "camping",
    "school",
    "coffee",
    "dinner",
    "guitar",
    "doctor",
    "holiday",
    "movie",
    "book",
    "hike",
]


def test_recall_with_feedback_is_the_same_as_with_a_full_second_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(2)
    turns = [
        (
            f"s{i // 10}",
            "Alice" if i % 2 else "Bob",
            " ".join(rng.choice(WORDS, size=int(rng.integers(3, 9)))),
        )
        for i in range(400)
    ]
    index = SideIndex.open(tmp_path / "index", embedder=HashEmbedder())
    index.upsert_posts(_records(turns))
    index.optimize()
    monkeypatch.setattr(ranking, "DEPTH", 10)  # deep legs would read every row of a small index anyway
    questions = ["Which violin did Bob play?", "coffee and dinner", "museum trip in the holiday", "guitar"]

    def hits() -> list[list[tuple[str, float]]]:
        return [[(h.post, h.score) for h in index.recall(q, 5)] for q in questions]

    pruned = hits()

    def full(
        self: PostMirror,
        query: np.ndarray,
        cosines: np.ndarray,
        moved: np.ndarray,
        n: int,
        mask: np.ndarray | None = None,
        weights: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        return self.top_by_vector(moved, n, mask, weights)

    monkeypatch.setattr(PostMirror, "top_by_moved", full)
    assert hits() == pruned
    index.close()

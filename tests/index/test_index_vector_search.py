"""The in-memory vector search: a near pass (float16 or bfloat16, whichever is faster on the CPU) chooses the rows,
exact products score them, and the result must be what exact products of every row give (same slots, same order,
same scores), whichever half-precision type the near pass used.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pcm.index import PostRecord, SideIndex
from pcm.index import mirror as mirror_module
from pcm.index.mirror import PostMirror
from tests.index.test_index_attribution import _records
from tests.index.test_index_side import HashEmbedder

DIM = 48
SIZE = 5000
HALVES = ["float16", "bfloat16"]


@pytest.fixture(params=HALVES)
def half(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The near pass in each half-precision type, whichever this CPU would pick."""
    import torch

    monkeypatch.setattr(mirror_module, "near_dtype", lambda: getattr(torch, request.param))
    return str(request.param)


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


def _exact_top(
    mirror: PostMirror,
    query: np.ndarray,
    n: int,
    mask: np.ndarray | None = None,
    weights: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The reference search: exact products of every live row, one by one, then the same cut and order."""
    size = mirror.capacity()
    rows = np.flatnonzero(mirror.alive[:size] & (True if mask is None else mask[:size]))
    scores = np.array([np.einsum("j,j->", mirror.vectors[r], query) for r in rows], dtype=np.float32)
    if weights is not None:
        scores = np.maximum(scores, 0.0) * weights[rows]
    order = np.lexsort((rows, -scores))[:n]
    return rows[order], scores[order].astype(np.float32)


def _assert_exact(mirror: PostMirror, query: np.ndarray, n: int, **kw: np.ndarray | None) -> None:
    slots, scores = mirror.top_by_vector(query, n, kw.get("mask"), kw.get("weights"))
    expected_slots, expected_scores = _exact_top(mirror, query, n, kw.get("mask"), kw.get("weights"))
    assert slots.tolist() == expected_slots.tolist()
    assert scores.tobytes() == expected_scores.tobytes()


@pytest.mark.parametrize("seed", range(4))
def test_the_vector_search_equals_exact_products_of_every_row(seed: int) -> None:
    rng = np.random.default_rng(seed)
    vectors = _unit_rows(rng, SIZE)
    vectors[::5] *= 2.0  # rows that are not unit vectors keep their place
    mirror = _mirror(vectors)
    query = _unit_rows(rng, 1)[0]
    weights = np.where(np.arange(SIZE) % 3 == 0, 1.0, 0.5).astype(np.float32)
    mask = mirror.mask(session="s2")
    for n in (1, 20, 100, SIZE + 5):
        _assert_exact(mirror, query, n)
    _assert_exact(mirror, query, 20, weights=weights)
    _assert_exact(mirror, query, 20, mask=mask)
    _assert_exact(mirror, query, 20, mask=mask, weights=weights)


@pytest.mark.parametrize("share", [0.0, 0.9])
def test_near_products_off_by_almost_their_error_still_give_the_exact_result(
    share: float, half: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The near pass only chooses which rows are scored exactly: with every near product moved by up to 0.9 of
    its stated error, up or down at random, the search still returns the exact top rows with their exact scores."""
    rng = np.random.default_rng(21)
    near_products = PostMirror.near_products

    def off(self: PostMirror, query: np.ndarray) -> tuple[np.ndarray, float]:
        near, error = near_products(self, query)
        return near + np.float32(share * error) * np.sign(rng.standard_normal(len(near))), error

    monkeypatch.setattr(PostMirror, "near_products", off)
    vectors = _unit_rows(rng, SIZE)
    vectors[1:200:2] = vectors[0:200:2]  # equal scores, ranked by slot
    mirror = _mirror(vectors)
    weights = np.where(np.arange(SIZE) % 3 == 0, 1.0, 0.5).astype(np.float32)
    mask = mirror.mask(session="s2")
    for seed in range(4):
        query = _unit_rows(np.random.default_rng(seed), 1)[0] if seed else vectors[0]
        _assert_exact(mirror, query, 1)
        _assert_exact(mirror, query, 25)
        _assert_exact(mirror, query, 25, mask=mask, weights=weights)


@pytest.mark.parametrize("scale", [1.0, 1e-3, 1e3])
def test_near_products_are_within_their_stated_error(scale: float, half: str) -> None:
    """Rows of the lengths the embedder writes go through the half-precision copy, far shorter or longer ones (which
    float16 would lose or overflow) through float32: either way each product is within the stated error, and a
    search over them is exact."""
    rng = np.random.default_rng(4)
    vectors = _unit_rows(rng, SIZE) * np.float32(scale)
    vectors[::3] *= 3.0
    vectors[1::7] *= 0.01
    mirror = _mirror(vectors)
    for _ in range(5):
        query = _unit_rows(rng, 1)[0] * 0.5
        near, error = mirror.near_products(query)
        exact = np.einsum("ij,j->i", vectors.astype(np.float64), query.astype(np.float64))
        assert near.dtype == np.float32 and len(near) == SIZE
        assert float(np.max(np.abs(near - exact))) <= error
        _assert_exact(mirror, query, 20)
    stated = mirror_module.NEAR_ERROR_BF16 if half == "bfloat16" else mirror_module.NEAR_ERROR_F16
    bound = stated if scale == 1.0 else mirror_module.NEAR_ERROR_FLOAT32
    assert error <= bound * 3.0 * scale * 0.5 * 1.0001


def test_the_near_copy_follows_writes_removals_and_growth() -> None:
    """Rows put, freed and reused after the first search are found as exact products find them: a stale near
    copy (a zero row for a new vector, an old vector for a freed slot) would miss or misplace them."""
    rng = np.random.default_rng(9)
    mirror = _mirror(_unit_rows(rng, SIZE))
    first = _unit_rows(rng, 1)[0]
    _assert_exact(mirror, first, 10)  # the near copy now exists
    for i in range(0, SIZE, 4):
        mirror.remove(f"urn:v:{i}")
    fresh = _unit_rows(rng, 300)
    for i, vector in enumerate(fresh):
        mirror.put(PostRecord(f"urn:w:{i}", "s9", "user", "Ann", None, "t", None, i), "", "", vector)
    assert not mirror.alive[: mirror.capacity()].all()
    for i in (0, 150, 299):
        slots, _ = mirror.top_by_vector(fresh[i], 1)
        assert slots.tolist() == [mirror.slot_of[f"urn:w:{i}"]]
    _assert_exact(mirror, first, 30)
    grown = _unit_rows(rng, SIZE)  # past the capacity: the matrix is replaced
    for i, vector in enumerate(grown):
        mirror.put(PostRecord(f"urn:g:{i}", "s8", "user", "Ann", None, "t", None, i), "", "", vector)
    slots, _ = mirror.top_by_vector(grown[SIZE - 1], 1)
    assert slots.tolist() == [mirror.slot_of[f"urn:g:{SIZE - 1}"]]
    _assert_exact(mirror, first, 30)


def test_equal_scores_rank_by_slot() -> None:
    rng = np.random.default_rng(5)
    vectors = _unit_rows(rng, SIZE)
    vectors[1::2] = vectors[0::2]  # every row twice
    mirror = _mirror(vectors)
    query = _unit_rows(rng, 1)[0]
    slots, scores = mirror.top_by_vector(query, 40)
    assert slots[0::2].tolist() == [s - 1 for s in slots[1::2].tolist()]
    assert scores[0::2].tobytes() == scores[1::2].tobytes()


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


def test_recall_is_the_same_as_with_exact_products_of_every_post(
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
    monkeypatch.setattr(index, "recall_config", index.recall_config.with_(depth=10))  # deep legs read every row
    questions = ["Which violin did Bob play?", "coffee and dinner", "museum trip in the holiday", "guitar"]

    def hits() -> list[list[tuple[str, float]]]:
        return [[(h.post, h.score) for h in index.recall(q, 5)] for q in questions]

    found = hits()
    monkeypatch.setattr(PostMirror, "top_by_vector", _exact_top)
    assert hits() == found
    index.close()


def test_searches_sharing_one_near_pass_give_what_each_gives_alone() -> None:
    rng = np.random.default_rng(17)
    mirror = _mirror(_unit_rows(rng, SIZE))
    query = _unit_rows(rng, 1)[0]
    near = mirror.near_products(query)
    kept = near[0].copy()
    bob = mirror.speaker_mask("Bob")
    for mask in (bob, ~bob, None):
        shared = mirror.top_by_vector(query, 3, mask, near=near)
        alone = mirror.top_by_vector(query, 3, mask)
        assert shared[0].tolist() == alone[0].tolist() and shared[1].tobytes() == alone[1].tobytes()
    assert near[0].tobytes() == kept.tobytes()  # the shared pass is not changed by a search


def test_the_near_pass_uses_a_half_precision_type() -> None:
    """The type measured fastest here is one of the two whose error the near pass states."""
    import torch

    assert mirror_module.near_dtype() in (torch.float16, torch.bfloat16)
    mirror = _mirror(_unit_rows(np.random.default_rng(5), 100))
    mirror.near_products(_unit_rows(np.random.default_rng(6), 1)[0])
    assert mirror._near.dtype == mirror_module.near_dtype()

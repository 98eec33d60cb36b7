"""Content diversity (maximal marginal relevance) among the best hybrid recall candidates.

The memory holds two near-duplicate answers (the same sentence said twice) and a different one that ranks third:
with ``MMR_LAMBDA`` above 0 the duplicate yields its place to the different answer. The hash embedder's vectors are
bags of words, so near-duplicates share almost all their words.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pcm.index import SideIndex
from pcm.index import recall as ranking
from tests.index.test_index_attribution import _records
from tests.index.test_index_feedback import _ids
from tests.index.test_index_side import HashEmbedder

TURNS = [
    ("s1", "Alice", "Any news?"),
    ("s1", "Bob", "I play the violin in the city orchestra every week."),
    ("s2", "Alice", "How was the weekend?"),
    ("s2", "Bob", "I play the violin in the city orchestra every week, as usual."),
    ("s3", "Alice", "The weather was sunny and warm."),
    ("s3", "Bob", "I also play the piano."),
    ("s4", "Alice", "We cooked pasta for dinner."),
    ("s4", "Bob", "The garden needs rain soon."),
]
QUESTION = "What does Bob play every week in the city?"
FIRST, DUPLICATE, DIFFERENT = "s1:1", "s2:1", "s3:1"


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> SideIndex:
    idx = SideIndex.open(Path(tmp_path_factory.mktemp("diversity")) / "index", embedder=HashEmbedder())
    idx.upsert_posts(_records(TURNS))
    idx.optimize()
    return idx


def test_a_near_duplicate_yields_its_place_to_a_different_post(
    index: SideIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index, "recall_config", index.recall_config.with_(feedback_posts=0))
    monkeypatch.setattr(index, "recall_config", index.recall_config.with_(diversity=0.0))
    assert _ids(index, QUESTION, 3) == [FIRST, DUPLICATE, DIFFERENT]
    monkeypatch.setattr(index, "recall_config", index.recall_config.with_(diversity=0.5))
    assert _ids(index, QUESTION, 3) == [FIRST, DIFFERENT, DUPLICATE]


def test_posts_beyond_the_pool_keep_their_fused_order(index: SideIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index, "recall_config", index.recall_config.with_(feedback_posts=0))
    monkeypatch.setattr(index, "recall_config", index.recall_config.with_(diversity=0.5))
    monkeypatch.setattr(index, "recall_config", index.recall_config.with_(diversity_pool=1))
    assert _ids(index, QUESTION, 3) == [FIRST, DUPLICATE, DIFFERENT]


def test_the_feedback_head_keeps_its_places(index: SideIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index, "recall_config", index.recall_config.with_(feedback_posts=2))
    monkeypatch.setattr(index, "recall_config", index.recall_config.with_(diversity=0.0))
    plain = _ids(index, QUESTION, 2)
    monkeypatch.setattr(index, "recall_config", index.recall_config.with_(diversity=5.0))
    assert _ids(index, QUESTION, 2) == plain


def test_only_hybrid_recall_is_diversified(index: SideIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index, "recall_config", index.recall_config.with_(diversity=0.0))
    plain = _ids(index, QUESTION, 3, mode="fts")
    monkeypatch.setattr(index, "recall_config", index.recall_config.with_(diversity=5.0))
    assert _ids(index, QUESTION, 3, mode="fts") == plain


def test_diversify_penalises_similarity_to_what_is_already_picked() -> None:
    vectors = np.array([[1.0, 0.0], [0.99, 0.141], [0.0, 1.0]])
    scores = np.array([1.0, 0.9, 0.8])
    assert ranking.diversify(scores, vectors, 0.0) == [0, 1, 2]
    # the duplicate loses 0.5 * 0.99; the orthogonal post loses nothing
    assert ranking.diversify(scores, vectors, 0.5) == [0, 2, 1]
    # the first ``fixed`` are placed first, in their order, and count as picked
    assert ranking.diversify(scores, vectors, 0.5, fixed=2) == [0, 1, 2]


def test_diversify_is_a_permutation_that_ignores_the_scores_scale() -> None:
    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(30, 8))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    scores = np.sort(rng.random(30))[::-1]
    order = ranking.diversify(scores, vectors, 0.2, fixed=3)
    assert sorted(order) == list(range(30)) and order[:3] == [0, 1, 2]
    assert ranking.diversify(scores * 1000, vectors, 0.2, fixed=3) == order
    assert ranking.diversify(np.array([]), np.zeros((0, 8)), 0.2) == []

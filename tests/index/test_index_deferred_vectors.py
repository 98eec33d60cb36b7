"""Opening an index whose searches go through the vector index leaves the vector matrix unread: recall scores the
rows its searches bring back, and a write keeps the rows it writes beside the matrix. The answers must be the ones
the loaded matrix gives (the same posts, the same scores), and an exact scan must read the matrix, with the rows
written since, and go on as before."""

from __future__ import annotations

import threading
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pcm.index import SideIndex
from pcm.index import mirror as mirror_module
from tests.index.test_index_ann import POSTS, QUERIES, THRESHOLD, TopicEmbedder, entity, post

ASKS: list[tuple[str, dict[str, Any]]] = [
    *((q, {}) for q in QUERIES[:8]),
    *((q, {"mode": "vector"}) for q in QUERIES[8:12]),
    (QUERIES[12], {"role": "user"}),
    (QUERIES[13], {"since": datetime(2020, 1, 20)}),
    (f"what did I say about {QUERIES[14].split()[-1]}", {}),  # the owner prior: two searches
    (f"what did Ann say about {QUERIES[15].split()[-1]}", {}),  # a named speaker
    (QUERIES[16], {"session": "urn:ann:s3"}),  # a filter leaving few rows: scored exactly
]


def _answers(idx: SideIndex) -> list[list[tuple[str, float]]]:
    return [[(h.post, h.score) for h in idx.recall(q, k=10, **kw)] for q, kw in ASKS[:-1]]


@pytest.fixture
def built(tmp_path: Path) -> Path:
    with SideIndex.open(tmp_path / "index", embedder=TopicEmbedder(), ann_min_rows=THRESHOLD) as idx:
        idx.upsert_posts([post(i) for i in range(POSTS)])
        idx.upsert_entities([entity(i) for i in range(50)])
        idx.wait_for_vector_index()
    return tmp_path / "index"


def test_recall_through_the_index_needs_no_matrix_and_answers_as_with_it(built: Path) -> None:
    with SideIndex.open(built, embedder=TopicEmbedder(), ann_min_rows=THRESHOLD) as idx:
        deferred = _answers(idx)
        relevance = [idx.relevance(f"what did Ann say about {q.split()[-1]}") for q in QUERIES[:3]]
        assert idx._posts.deferred(), "a recall through the vector index read the whole matrix"
    with SideIndex.open(built, embedder=TopicEmbedder(), ann_min_rows=THRESHOLD) as idx:
        assert idx._posts.vectors.shape == (POSTS, TopicEmbedder.dim)  # read now
        assert not idx._posts.deferred()
        assert _answers(idx) == deferred
        assert [idx.relevance(f"what did Ann say about {q.split()[-1]}") for q in QUERIES[:3]] == relevance


def test_an_exact_scan_reads_the_matrix_and_goes_on_as_before(built: Path) -> None:
    q, kw = ASKS[-1]
    with SideIndex.open(built, embedder=TopicEmbedder(), ann_min_rows=THRESHOLD) as idx:
        scanned = [(h.post, h.score) for h in idx.recall(q, k=10, **kw)]
        assert scanned and all(h.startswith("urn:ann:p") for h, _ in scanned)
    with SideIndex.open(built, embedder=TopicEmbedder(), ann_min_rows=THRESHOLD) as idx:
        idx._posts.vectors  # noqa: B018 - the matrix as an eager load reads it
        assert [(h.post, h.score) for h in idx.recall(q, k=10, **kw)] == scanned


def test_a_write_leaves_the_matrix_unread_and_it_reads_as_written(built: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """New, changed and deleted posts (a deletion rewrites the context of the turn after it, whose vector is
    then read from the table alone) and enough new ones to widen the mirror: the matrix stays unread, and so do the
    records of the sessions not written to; recall finds the new rows through the index, and the matrix read
    afterwards is the one the writes give."""
    with SideIndex.open(built, embedder=TopicEmbedder(), ann_min_rows=THRESHOLD) as idx:
        stored = {iri: idx._posts.vectors[slot].copy() for iri, slot in idx._posts.slot_of.items()}
    added = [post(POSTS + i) for i in range(POSTS // 2 + 65)]  # past the mirror's capacity: it grows
    with SideIndex.open(built, embedder=TopicEmbedder(), ann_min_rows=THRESHOLD) as idx:
        idx.recall(QUERIES[0], k=10)  # some rows remembered, the matrix still unread
        fetched: list[list[str]] = []
        vectors_of = idx._open_tables().vectors_of
        monkeypatch.setattr(idx._open_tables(), "vectors_of", lambda t, iris: fetched.append(list(iris)) or vectors_of(t, iris))
        idx.upsert_posts([*added, post(3, topic=7)])  # new posts and a changed one
        idx.delete_posts([post(5).iri])
        mirror = idx._posts
        assert mirror.deferred(), "a write read the whole matrix"
        assert mirror.records._all is None, "a write made every post's record (the turns of its sessions suffice)"
        assert [post(6).iri] in fetched  # the turn after the deleted one: its context rewritten, its vector kept
        assert idx.recall("note t7x3", k=1, mode="vector")[0].post == post(3).iri
        assert idx.recall(added[-1].text, k=1, mode="vector")[0].post == added[-1].iri
        written = {r.iri: mirror.vector(r.iri) for r in [*added, post(3, topic=7)]}
        matrix = mirror.vectors  # read now, the rows written laid over it
        assert not mirror.deferred() and len(matrix) >= len(mirror)
        for iri, vector in stored.items():
            if iri not in (post(3).iri, post(5).iri):
                np.testing.assert_array_equal(matrix[mirror.slot_of[iri]], vector)
        for iri, vector in written.items():
            np.testing.assert_array_equal(matrix[mirror.slot_of[iri]], vector)
        assert post(5).iri not in mirror.slot_of
        np.testing.assert_allclose(mirror.norms[: len(matrix)], np.linalg.norm(matrix, axis=1), rtol=1e-6)


def test_the_remembered_rows_are_bounded(built: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mirror_module, "REMEMBERED_ROWS", 50)
    with SideIndex.open(built, embedder=TopicEmbedder(), ann_min_rows=THRESHOLD) as idx:
        first = [[(h.post, h.score) for h in idx.recall(q, k=10)] for q in QUERIES[:6]]
        assert idx._posts.deferred()
        assert len(idx._posts._known) <= 50 + 4 * 200  # one recall's rows at most beyond the bound
        again = [[(h.post, h.score) for h in idx.recall(q, k=10)] for q in QUERIES[:6]]
        assert again == first and idx._posts.deferred()


def test_the_first_recall_has_the_vector_index_loaded_beside_the_mirror(
    built: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []
    for threshold, expected in ((THRESHOLD, ["vector_idx"]), (POSTS + 1, [])):  # below the threshold: no index
        asked.clear()
        with SideIndex.open(built, embedder=TopicEmbedder(), ann_min_rows=threshold) as idx:
            posts = idx._open_tables().posts
            prewarm = posts.prewarm_index

            def counted(name: str, prewarm: Any = prewarm) -> None:
                asked.append(name)
                prewarm(name)

            monkeypatch.setattr(posts, "prewarm_index", counted)
            first = idx.recall(QUERIES[0], k=10)
            idx.recall(QUERIES[1], k=10)
            assert first and idx._warming is None  # the vector search waited for the load
        assert asked == expected


def _resident_now(idx: SideIndex) -> None:
    """Wait for the matrix being read beside the recalls, then recall once so that it is adopted."""
    if idx._residing is not None:
        idx._residing.result()
    idx.recall(QUERIES[0], k=10)


def test_a_process_that_keeps_recalling_reads_the_matrix_beside_and_answers_the_same(built: Path) -> None:
    with SideIndex.open(built, embedder=TopicEmbedder(), ann_min_rows=THRESHOLD) as idx:
        deferred = _answers(idx)
        assert idx._posts.deferred() and idx._residing is None, "fewer recalls than the default started the read"
    with SideIndex.open(built, embedder=TopicEmbedder(), ann_min_rows=THRESHOLD, resident_after=3) as idx:
        assert _answers(idx) == deferred  # the read starts at the third recall; some of these may use it
        _resident_now(idx)
        assert not idx._posts.deferred()
        assert _answers(idx) == deferred
    with SideIndex.open(built, embedder=TopicEmbedder(), ann_min_rows=THRESHOLD, resident_mb=0, resident_after=3) as idx:
        _answers(idx)  # a matrix larger than the budget is never read
        assert idx._posts.deferred() and idx._residing is None


def test_rows_written_while_the_matrix_is_read_are_laid_over_it(built: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The side read takes its snapshot of the table, then new, changed and deleted posts (enough new ones to
    widen the mirror) are written before it is adopted: the adopted matrix is the one a fresh open reads."""
    snapshot, release = threading.Event(), threading.Event()
    added = [post(POSTS + i) for i in range(POSTS // 2 + 65)]
    with SideIndex.open(built, embedder=TopicEmbedder(), ann_min_rows=THRESHOLD, resident_after=1) as idx:
        read = idx._read_post_vectors

        def held(*args: Any) -> np.ndarray:
            matrix = read(*args)
            snapshot.set()
            assert release.wait(60), "the test never released the read"
            return matrix

        monkeypatch.setattr(idx, "_read_post_vectors", held)
        idx.recall(QUERIES[0], k=10)  # loads the mirror deferred and starts the read
        assert snapshot.wait(60), "the side read never started"
        idx.upsert_posts([*added, post(3, topic=7)])
        idx.delete_posts([post(5).iri])
        assert idx._posts.deferred()
        release.set()
        _resident_now(idx)
        mirror = idx._posts
        assert not mirror.deferred()
        adopted = {iri: mirror.vectors[slot].copy() for iri, slot in mirror.slot_of.items()}
        norms = mirror.norms[: len(mirror.vectors)].copy()
        np.testing.assert_allclose(norms, np.linalg.norm(mirror.vectors, axis=1), rtol=1e-6)
    with SideIndex.open(built, embedder=TopicEmbedder(), ann_min_rows=THRESHOLD) as idx:
        fresh = {iri: idx._posts.vectors[slot] for iri, slot in idx._posts.slot_of.items()}
    assert adopted.keys() == fresh.keys() and post(5).iri not in adopted
    for iri, vector in fresh.items():
        np.testing.assert_array_equal(adopted[iri], vector)

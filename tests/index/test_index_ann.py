"""LanceDB's vector index behind the vector legs: the same neighbours as the exact scan (recall@10 >= 0.99 of it on
a clustered corpus), and kept up to date through ingest, forgetting and reindexing.

The threshold (``ann_min_rows``) is set low so a corpus of a few thousand posts goes through the index; the
vectors are clustered (a centre per topic plus noise), so the nearest ten of a query are a real neighbourhood and
an index that searched the wrong partitions would show.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from pcm.index import EntityRecord, PostRecord, SideIndex, ann, sideindex
from pcm.index.embedder import Embedder
from pcm.index.tables import ENTITIES_TABLE, POSTS_TABLE

DIM = 64
TOPICS = 40
POSTS = 1500
THRESHOLD = 300
_TAG = re.compile(r"\bt(\d+)x(\d+)\b")


class TopicEmbedder(Embedder):
    """A text holding ``t<topic>x<item>`` gets its topic's centre plus noise seeded by the item: deterministic,
    clustered, without a model. Any other text gets a vector seeded by its characters."""

    name = "test/topics"
    dim = DIM

    def __init__(self) -> None:
        super().__init__()
        centres = np.random.default_rng(0).standard_normal((TOPICS, DIM)).astype(np.float32)
        self.centres = centres / np.linalg.norm(centres, axis=1, keepdims=True)

    def vector(self, topic: int, item: int) -> np.ndarray:
        noise = np.random.default_rng(1000 + item).standard_normal(DIM).astype(np.float32)
        row = self.centres[topic % TOPICS] + 0.8 * noise / np.sqrt(DIM)
        return row / np.linalg.norm(row)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for i, text in enumerate(texts):
            found = _TAG.search(text)
            if found:
                out[i] = self.vector(int(found.group(1)), int(found.group(2)))
            else:
                seed = sum(ord(c) * (j + 1) for j, c in enumerate(text))
                row = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
                out[i] = row / np.linalg.norm(row)
        return out


def post(i: int, topic: int | None = None) -> PostRecord:
    return PostRecord(
        f"urn:ann:p{i}",
        f"urn:ann:s{i // 20}",
        "user" if i % 2 else "assistant",
        "Ann" if i % 2 else "Bob",
        datetime(2020, 1, 1) + timedelta(hours=i),
        f"note t{i % TOPICS if topic is None else topic}x{i}",
        None,
        i % 20,
    )


def entity(i: int) -> EntityRecord:
    return EntityRecord(f"urn:ann:e{i}", f"Thing {i}", (), ("schema:Thing",), f"thing t{i % TOPICS}x{i}")


QUERIES = [f"what about t{q % TOPICS}x{100_000 + q}" for q in range(30)]


@pytest.fixture
def index(tmp_path: Path) -> Iterator[SideIndex]:
    idx = SideIndex.open(tmp_path / "index", embedder=TopicEmbedder(), ann_min_rows=THRESHOLD)
    idx.upsert_posts([post(i) for i in range(POSTS)])
    idx.upsert_entities([entity(i) for i in range(POSTS)])
    idx.wait_for_vector_index()
    yield idx
    idx.close()


def exact(idx: SideIndex, fn: callable) -> object:  # type: ignore[valid-type]
    """``fn()`` with the index's searches forced onto the exact scan."""
    saved = idx.ann_min_rows
    idx.ann_min_rows = 10**9
    try:
        return fn()  # type: ignore[operator]
    finally:
        idx.ann_min_rows = saved


def top(hits: Sequence[object]) -> list[str]:
    return [h.post for h in hits]  # type: ignore[attr-defined]


def overlap(found: Sequence[str], expected: Sequence[str]) -> float:
    return len(set(found) & set(expected)) / max(len(expected), 1)


def test_the_index_is_built_when_a_table_reaches_the_threshold(tmp_path: Path) -> None:
    idx = SideIndex.open(tmp_path / "index", embedder=TopicEmbedder(), ann_min_rows=THRESHOLD)
    idx.upsert_posts([post(i) for i in range(THRESHOLD - 1)])
    assert idx._tables is not None
    assert not idx._tables.vector_indexed[POSTS_TABLE]
    assert not idx._vector_ready(POSTS_TABLE)
    idx.upsert_posts([post(THRESHOLD)])
    idx.wait_for_vector_index()  # built off the write path
    assert idx._tables.vector_indexed[POSTS_TABLE]
    assert idx._vector_ready(POSTS_TABLE)
    idx.close()
    with SideIndex.open(tmp_path / "index", embedder=TopicEmbedder(), ann_min_rows=THRESHOLD) as again:
        assert again._vector_ready(POSTS_TABLE)  # found on disk, not rebuilt


def test_vector_recall_through_the_index_keeps_the_exact_neighbours(index: SideIndex) -> None:
    assert index._vector_ready(POSTS_TABLE)
    shares = []
    for q in QUERIES:
        found = top(index.recall(q, k=10, mode="vector"))
        expected = top(exact(index, lambda q=q: index.recall(q, k=10, mode="vector")))  # type: ignore[misc]
        assert len(expected) == 10
        shares.append(overlap(found, expected))
    assert float(np.mean(shares)) >= 0.99


def test_hybrid_recall_with_filters_and_a_named_speaker_keeps_the_exact_neighbours(index: SideIndex) -> None:
    shares = []
    for q in QUERIES[:8]:
        for kw in ({}, {"role": "user"}, {"since": datetime(2020, 2, 1)}, {"session": "urn:ann:s3"}):
            asked = f"{q} Ann said" if not kw else q
            found = top(index.recall(asked, k=10, **kw))  # type: ignore[arg-type]
            expected = top(exact(index, lambda a=asked, kw=kw: index.recall(a, k=10, **kw)))  # type: ignore[misc]
            shares.append(overlap(found, expected))
    assert float(np.mean(shares)) >= 0.99


def test_a_speaker_prior_through_the_index_gives_the_exact_weighted_best(index: SideIndex) -> None:
    posts = index._posts
    weights = np.where(posts.speaker_mask("Ann"), 1.0, 0.5).astype(np.float32)
    shares = []
    for q in QUERIES:
        vector = index.embedder.encode([q])[0]
        slots, _ = index._nearest(POSTS_TABLE, vector, 40, None, weights, favoured="speaker = 'Ann'")
        expected, _ = posts.top_by_vector(vector, 40, None, weights)
        shares.append(overlap(slots[:10].tolist(), expected[:10].tolist()))
    assert float(np.mean(shares)) >= 0.99


def test_the_filtered_search_runs_only_when_the_plain_nearest_lack_favoured_rows(
    index: SideIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A topic's posts are all Ann's or all Bob's: near Ann's topics the plain search already holds the weighted
    best and the filtered search is skipped; near Bob's it runs. The answer is the exact weighted best both ways."""
    filters: list[str | None] = []
    real = ann.search_rows

    def spy(table: object, query: np.ndarray, k: int, **kwargs: object) -> object:
        filters.append(kwargs.get("where"))  # type: ignore[arg-type]
        return real(table, query, k, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ann, "search_rows", spy)
    posts = index._posts
    ann_rows = posts.speaker_mask("Ann")
    weights = np.where(ann_rows, 1.0, 0.5).astype(np.float32)
    skipped = ran = 0
    for q in QUERIES:
        vector = index.embedder.encode([q])[0]
        filters.clear()
        slots, _ = index._nearest(POSTS_TABLE, vector, 40, None, weights, favoured="speaker = 'Ann'")
        expected, _ = posts.top_by_vector(vector, 40, None, weights)
        assert overlap(slots[:10].tolist(), expected[:10].tolist()) == 1.0
        plain, _ = posts.top_by_vector(vector, 40 * sideindex.FAVOURED_DEPTH)
        needed = int(np.count_nonzero(ann_rows[plain])) < 40
        assert filters == ([None, "speaker = 'Ann'"] if needed else [None])
        ran += needed
        skipped += not needed
    assert ran and skipped


def test_entity_matching_through_the_index_keeps_the_exact_neighbours(index: SideIndex) -> None:
    assert index._vector_ready(ENTITIES_TABLE)
    shares = []
    for q in QUERIES:
        found = [m.iri for m in index.match_entities(q, k=10)]
        expected = [m.iri for m in exact(index, lambda q=q: index.match_entities(q, k=10))]  # type: ignore[attr-defined,misc]
        shares.append(overlap(found, expected))
    assert float(np.mean(shares)) >= 0.99


def test_a_new_post_is_found_at_once_and_the_index_takes_it_in_later(index: SideIndex) -> None:
    index.upsert_posts([post(50_000, topic=7)])
    query = "t7x50000"  # the new post's own vector
    assert index.recall(query, k=1, mode="vector")[0].post == "urn:ann:p50000"
    assert index._tables is not None
    _, unindexed = index._tables.vector_index_rows(POSTS_TABLE)
    assert unindexed >= 1  # found by LanceDB's flat scan beside the index
    more = int(ann.STALE_SHARE * POSTS * 1.2) + 10
    index.upsert_posts([post(60_000 + i) for i in range(more)])
    _, unindexed = index._tables.vector_index_rows(POSTS_TABLE)
    assert unindexed == 0
    assert index.recall(query, k=1, mode="vector")[0].post == "urn:ann:p50000"


def test_a_forgotten_post_is_never_returned(index: SideIndex, tmp_path: Path) -> None:
    victims = [post(i) for i in range(0, POSTS, 7)]
    queries = [r.text.split()[-1] for r in victims[:30]]  # each victim's own vector
    assert index.recall(queries[0], k=1, mode="vector")[0].post == victims[0].iri
    index.delete_posts([r.iri for r in victims])
    gone = {r.iri for r in victims}
    for q in queries:
        assert not gone & set(top(index.recall(q, k=10, mode="vector")))
        assert not gone & set(top(index.recall(q, k=10)))
    index.close()
    with SideIndex.open(tmp_path / "index", embedder=TopicEmbedder(), ann_min_rows=THRESHOLD) as again:
        assert again._vector_ready(POSTS_TABLE)
        for q in queries:
            assert not gone & set(top(again.recall(q, k=10, mode="vector")))


def test_reindex_rebuilds_the_index_and_forgotten_entities_stay_gone(index: SideIndex) -> None:
    index.delete_entities(["urn:ann:e5"])
    assert "urn:ann:e5" not in [m.iri for m in index.match_entities("t5x5", k=10)]
    index.clear()
    assert index._tables is not None
    assert not index._tables.vector_indexed[POSTS_TABLE]
    posts = [post(i) for i in range(POSTS) if i != 11]
    index.reconcile(posts, [entity(i) for i in range(POSTS) if i != 5])
    index.wait_for_vector_index()
    assert index._vector_ready(POSTS_TABLE) and index._vector_ready(ENTITIES_TABLE)
    assert "urn:ann:e5" not in [m.iri for m in index.match_entities("t5x5", k=10)]
    assert "urn:ann:p11" not in top(index.recall("t11x11", k=10, mode="vector"))
    assert index.recall("t12x12", k=1, mode="vector")[0].post == "urn:ann:p12"


def test_reads_and_writes_go_on_while_the_index_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The build runs off the write path: held half-way, it lets a recall, an entity match and a write through
    (under the index lock they would wait for it, and the held build would never be released); once released,
    the index is used and the post written during the build is found."""
    started, release = threading.Event(), threading.Event()
    build = ann.build

    def held(table: object, rows: int, kind: str = ann.KIND) -> None:
        started.set()
        assert release.wait(timeout=300), "the test never released the build"
        build(table, rows, kind)

    monkeypatch.setattr(ann, "build", held)
    idx = SideIndex.open(tmp_path / "index", embedder=TopicEmbedder(), ann_min_rows=THRESHOLD)
    try:
        idx.upsert_posts([post(i) for i in range(POSTS)])
        assert started.wait(timeout=300)
        expected = top(exact(idx, lambda: idx.recall(QUERIES[0], k=10)))
        assert top(idx.recall(QUERIES[0], k=10)) == expected  # the exact scan answers meanwhile
        assert not idx._vector_ready(POSTS_TABLE)
        idx.upsert_posts([post(70_000, topic=9)])
        idx.upsert_entities([entity(i) for i in range(20)])
        assert [m.iri for m in idx.match_entities("t3x3", k=1)] == ["urn:ann:e3"]
        release.set()
        idx.wait_for_vector_index()
        assert idx._vector_ready(POSTS_TABLE)
        assert idx.recall("t9x70000", k=1, mode="vector")[0].post == "urn:ann:p70000"
        assert idx._tables is not None
        indexed, unindexed = idx._tables.vector_index_rows(POSTS_TABLE)
        assert indexed >= POSTS and unindexed >= 1  # the build saw the table as it was when it began
    finally:
        release.set()
        idx.close()


def test_the_feedback_leg_rescores_the_first_search_instead_of_searching_again(
    index: SideIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the index a hybrid recall searches it once (the vector leg): the feedback leg's moved query is
    scored exactly over the candidates already found, and the hits stay the exact ones."""
    calls: list[int] = []
    real = ann.search_rows

    def spy(table: object, query: np.ndarray, k: int, **kwargs: object) -> object:
        calls.append(k)
        return real(table, query, k, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ann, "search_rows", spy)
    shares = []
    for q in QUERIES:
        calls.clear()
        found = top(index.recall(q, k=10))
        assert len(calls) == 1
        expected = top(exact(index, lambda q=q: index.recall(q, k=10)))  # type: ignore[misc]
        shares.append(overlap(found, expected))
    assert float(np.mean(shares)) >= 0.99

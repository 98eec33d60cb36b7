"""The scalar indexes on the utterance columns recall filters on: made with the table (and on the open of a table
made without them), kept up to date through ingest, forgetting and reindexing, and never changing a filtered
result: a prefiltered search returns what the unfiltered one returns, filtered afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import lancedb
import pytest

from pcm.index import SideIndex, ann
from pcm.index.tables import POSTS_TABLE, SCALAR_INDEXES
from tests.index.test_index_ann import TopicEmbedder, post

POSTS = 300

FILTERS = (
    "role = 'user'",
    "speaker = 'Bob'",
    "session = 'urn:ann:s3'",
    "ts >= 1577923200.0 AND ts <= 1578268800.0",
)
"""One condition per indexed column (the last: 2 to 6 January 2020, as ``since``/``until`` write it)."""


@pytest.fixture
def index(tmp_path: Path) -> Iterator[SideIndex]:
    idx = SideIndex.open(tmp_path / "index", embedder=TopicEmbedder(), ann_min_rows=10**9)
    yield idx
    idx.close()


def scalar_indexes(idx: SideIndex) -> dict[str, tuple[int, int]]:
    """Indexed column -> (rows in its index, rows written since that it has not taken in)."""
    assert idx._tables is not None
    table = idx._tables.table(POSTS_TABLE)
    out = {}
    for found in table.list_indices():
        if found.columns[0] in SCALAR_INDEXES:
            stats = table.index_stats(found.name)
            out[found.columns[0]] = (stats.num_indexed_rows, stats.num_unindexed_rows)
    return out


def test_the_indexes_come_with_the_table_and_take_in_what_is_written(index: SideIndex) -> None:
    assert set(scalar_indexes(index)) == set(SCALAR_INDEXES)  # on the empty table already
    index.upsert_posts([post(i) for i in range(POSTS)])
    index.optimize()
    assert set(scalar_indexes(index).values()) == {(POSTS, 0)}
    index.delete_posts([f"urn:ann:p{i}" for i in range(0, POSTS, 3)])
    index.upsert_posts([post(i) for i in range(POSTS, POSTS + 50)])
    index.optimize()
    left = POSTS - len(range(0, POSTS, 3)) + 50
    assert set(scalar_indexes(index).values()) == {(left, 0)}


def test_reindex_makes_them_again(index: SideIndex) -> None:
    index.upsert_posts([post(i) for i in range(200)])
    index.clear()
    assert set(scalar_indexes(index)) == set(SCALAR_INDEXES)
    index.reconcile([post(i) for i in range(150)], [])
    index.optimize()
    assert set(scalar_indexes(index).values()) == {(150, 0)}


def test_a_table_made_without_them_gets_them_on_open(tmp_path: Path) -> None:
    with SideIndex.open(tmp_path / "index", embedder=TopicEmbedder()) as idx:
        idx.upsert_posts([post(i) for i in range(100)])
    table = lancedb.connect(str(tmp_path / "index")).open_table(POSTS_TABLE)
    for found in table.list_indices():
        if found.columns[0] in SCALAR_INDEXES:
            table.drop_index(found.name)
    with SideIndex.open(tmp_path / "index", embedder=TopicEmbedder()) as again:
        assert set(scalar_indexes(again)) == set(SCALAR_INDEXES)
        assert len(again.recall("note", k=5, role="user")) == 5


@pytest.mark.parametrize("condition", FILTERS)
def test_a_prefiltered_search_returns_the_unfiltered_rows_filtered(index: SideIndex, condition: str) -> None:
    """Half the rows are in the scalar indexes and half written after them (scanned beside the index): the
    full-text search under each condition finds the rows the condition lets through of the unfiltered results, the
    (flat) vector search the same in the same order."""
    index.upsert_posts([post(i) for i in range(POSTS // 2)])
    index.optimize()
    index.upsert_posts([post(i) for i in range(POSTS // 2, POSTS)])
    assert index._tables is not None
    tables, table = index._tables, index._tables.table(POSTS_TABLE)
    assert any(unindexed for _, unindexed in scalar_indexes(index).values())
    allowed = {row["iri"] for row in table.search().where(condition).limit(POSTS).to_arrow().to_pylist()}
    assert 0 < len(allowed) < POSTS
    for query in ("note t3x", "note t17x"):
        # every row (the words tie); BM25 over rows the full-text index has not taken in scores by other counts
        everything = {iri for iri, _ in tables.fts(table, query, POSTS)}
        assert {iri for iri, _ in tables.fts(table, query, POSTS, condition)} == everything & allowed
        vector = index.embedder.encode([query])[0]
        nearest, _ = ann.search_rows(table, vector, POSTS)
        filtered, _ = ann.search_rows(table, vector, POSTS, where=condition)
        assert filtered == [iri for iri in nearest if iri in allowed]


def test_fully_indexed_full_text_scores_do_not_change_under_a_filter(index: SideIndex) -> None:
    index.upsert_posts([post(i) for i in range(POSTS)])
    index.optimize()
    assert index._tables is not None
    tables, table = index._tables, index._tables.table(POSTS_TABLE)
    everything = dict(tables.fts(table, "note t3x", POSTS))
    for condition in FILTERS:
        allowed = {row["iri"] for row in table.search().where(condition).limit(POSTS).to_arrow().to_pylist()}
        found = dict(tables.fts(table, "note t3x", POSTS, condition))
        assert found == {iri: score for iri, score in everything.items() if iri in allowed}

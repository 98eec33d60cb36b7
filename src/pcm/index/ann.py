"""LanceDB's own approximate nearest-neighbour index on a table's ``vector`` column: build, keep up to date, search.

The index only chooses candidates: :mod:`pcm.index.sideindex` re-scores them exactly against the mirror's
float32 vectors, so a score is the same whichever way a row was found, and only the choice of rows is
approximate. Rows written after the index was built are searched by LanceDB with a flat scan beside it, so a new
post is found at once; :func:`stale` says when enough of them have gathered that the index should take them in
(``table.optimize()`` folds them into the existing partitions). Deleted rows leave the results as soon as they are
deleted (LanceDB's deletion files), whatever the index holds.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
import pyarrow as pa
from lancedb.index import IvfHnswSq, IvfPq

INDEX_NAME = "vector_idx"
KINDS = ("IVF_HNSW_SQ", "IVF_PQ")
KIND = "IVF_HNSW_SQ"
"""The index type built (``bench_ann.py`` compares the two)."""
METRIC: Literal["cosine"] = "cosine"
"""The embedder writes unit vectors, so cosine ranks as the dot products the mirror re-scores with."""
NPROBES = 20
"""IVF partitions searched per query."""
REFINE_FACTOR = 0
"""LanceDB re-ranks ``refine_factor * k`` candidates by their full vectors before cutting to ``k`` (0: it does
not). Off: the mirror re-scores the candidates exactly anyway, and LanceDB's refine reads the rows back from the
table (``tune_ann.py`` on the 100k lifetime memory, ef 1000: p50 7 ms without it, 55 ms with 5, the same R@10)."""
EF = 1500
"""HNSW candidate list per partition (at least ``k``). What decides recall on clustered text vectors: on the 100k
lifetime memory (``tune_ann.py``, k 100, plain, feedback-moved and owner-filtered questions, one partition) the
vector leg's R@10 against the exact scan is 0.970 at ef 500, 0.990 at 800, 0.993 at 1000 and 1.000 at 1500 (R@100
0.994); below 1500 a question now and then finds none of the exact ten (the graph search stays in the wrong topic).
Another build of the same rows gave 1.000 already at 1000: the margin is for the graph's randomness."""
MIN_ROWS = 200_000
"""Rows of a table from which its vector searches use the index (the default of ``Settings.index_ann_min_rows``;
its docstring holds the figures that set it)."""
RETRAIN_GROWTH = 4.0
"""A table this many times larger than when its index was built gets a new index (partitions sized for it)
instead of an update that only appends to the old partitions."""
STALE_SHARE = 0.05
"""Unindexed rows, as a share of the indexed ones, past which :func:`stale` asks for an index update: LanceDB
scans them flat on every query, which costs as the exact scan does over that many rows."""


def partitions(rows: int, kind: str) -> int:
    """IVF partitions for ``rows`` rows: about sqrt(rows) for IVF-PQ (LanceDB's own advice), and one for
    IVF-HNSW-SQ, whose graph searches a partition in logarithmic time. More partitions only cost: on the 100k
    lifetime memory (``tune_ann.py``) ten partitions kept 0.44 / 0.74 / 0.99 of the exact vector top 10 searching
    2 / 4 / all 10 of them (text neighbourhoods straddle the k-means cells), and searching all of them is a graph
    search each."""
    if kind == "IVF_PQ":
        return max(1, int(math.sqrt(rows)))
    return 1


def build(table: Any, rows: int, kind: str = KIND) -> None:
    """(Re)build the vector index of ``table`` (``rows`` its row count), replacing any earlier one."""
    count = min(partitions(rows, kind), max(1, rows // 256))
    config: Any
    if kind == "IVF_HNSW_SQ":
        config = IvfHnswSq(distance_type=METRIC, num_partitions=count)
    elif kind == "IVF_PQ":
        dim = table.schema.field("vector").type.list_size
        config = IvfPq(distance_type=METRIC, num_partitions=count, num_sub_vectors=max(1, dim // 8))
    else:
        raise ValueError(f"unknown vector index {kind!r}")
    table.create_index("vector", config=config, replace=True, name=INDEX_NAME)


def indexed(table: Any) -> bool:
    """Whether ``table`` has a vector index."""
    return any(i.name == INDEX_NAME for i in table.list_indices())


def stale(table: Any) -> bool:
    """Whether rows not yet in the index have grown past :data:`STALE_SHARE` of those in it."""
    stats = table.index_stats(INDEX_NAME)
    if stats is None:
        return False
    return stats.num_unindexed_rows > STALE_SHARE * max(stats.num_indexed_rows, 1)


def search_rows(
    table: Any,
    query: np.ndarray,
    k: int,
    *,
    where: str | None = None,
    nprobes: int = NPROBES,
    refine: int = REFINE_FACTOR,
    vectors: bool = False,
) -> tuple[list[str], np.ndarray | None]:
    """The IRIs of about the ``k`` rows nearest ``query`` among those ``where`` allows (checked before the
    search), nearest first (fewer than ``k`` when a filter leaves fewer in the partitions searched); with
    ``vectors``, the stored vector of each row found (one row each, float32), else None."""
    columns = ["iri", "_distance", "vector"] if vectors else ["iri", "_distance"]
    builder = (
        table.search(np.asarray(query, dtype=np.float32), vector_column_name="vector")
        .distance_type(METRIC)
        .nprobes(nprobes)
        .ef(max(EF, k * max(refine, 1)))
        .limit(k)
        .select(columns)
    )
    if refine > 0:
        builder = builder.refine_factor(refine)
    if where:
        builder = builder.where(where, prefilter=True)
    result = builder.to_arrow()
    iris: list[str] = result.column("iri").to_pylist()
    return iris, vector_matrix(result) if vectors else None


def vector_matrix(data: Any) -> np.ndarray:
    """The ``vector`` column of an Arrow table or record batch as one float32 matrix, a fresh writable copy
    (offsets of sliced chunks respected)."""
    column = data.column("vector")
    dim = column.type.list_size
    arrays = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    chunks = [c.flatten().to_numpy(zero_copy_only=False) for c in arrays]
    if not chunks:
        return np.zeros((0, dim), np.float32)
    return np.concatenate(chunks).astype(np.float32, copy=False).reshape(-1, dim)

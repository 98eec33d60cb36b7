"""The LanceDB side of the index: the directory layout, table schemas, the model record, reads and writes.

``<index dir>/meta.json`` records the embedding model and the layout version; ``utterances`` and ``entities`` are
LanceDB tables keyed by IRI, each with a native full-text index on its ``search`` column. Every write is one
LanceDB commit (atomic), so a crash leaves each table at the previous or the next version, never between.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Generic, TypeVar

import lancedb
import numpy as np
import pyarrow as pa
from lancedb.index import FTS, Bitmap, BTree

from pcm import faults
from pcm.errors import MemoryVersionError
from pcm.index import ann
from pcm.index.records import EntityRecord, PostRecord
from pcm.index.text import label_keys, search_hash, sql_string, timestamp

FORMAT_VERSION = 1
"""Layout of the index directory; a different number means ``pcm reindex``."""
POSTS_TABLE = "utterances"
ENTITIES_TABLE = "entities"
META_FILE = "meta.json"
SYNC_FILE = "synced.json"
"""What the index was last fully reconciled against (see ``SideIndex.record_sync``)."""
_IRIS_PER_FILTER = 500
"""IRIs named in one ``iri IN (...)`` filter (a delete, or a read of some rows' vectors)."""
_READ_BATCH = 8192
"""Rows per batch of :meth:`Tables.batches` (12 MB of 384-d float32 vectors)."""
SCALAR_INDEXES: dict[str, Any] = {"role": Bitmap, "speaker": Bitmap, "session": BTree, "ts": BTree}
"""The utterance columns recall filters on (``_post_filter`` in :mod:`pcm.index.sideindex`, and the rows a prior
favours), each with LanceDB's scalar index: a prefiltered search otherwise evaluates its condition over every row.
At 1M lifetime posts the owner-filtered vector search (``role = 'user'``) took 44 ms CPU against 23 ms with the
bitmap, a full-text search within a session 20 against 5 ms, within a month 12 against 2 ms; the four indexes take
4 s to build there and 20 MB. Bitmaps for the few values of a role or speaker, B-trees for the many sessions and
times. ``table.optimize()`` folds new rows into them; until then LanceDB scans those rows beside the index."""
KEY_SEPARATOR = "\x1f"
"""Joins an entity's label keys in one string column: flat strings load several times faster than lists."""


@dataclass(frozen=True)
class Meta:
    model: str
    dim: int
    format: int = FORMAT_VERSION

    def as_json(self) -> dict[str, Any]:
        return {"model": self.model, "dim": self.dim, "format": self.format}


def read_meta(directory: Path) -> Meta | None:
    path = directory / META_FILE
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Meta(str(data["model"]), int(data["dim"]), int(data.get("format", 0)))
    except (ValueError, KeyError, TypeError) as err:
        raise MemoryVersionError(f"{path} is unreadable ({err}); run `pcm reindex`") from None


def write_meta(directory: Path, meta: Meta) -> None:
    """Write the model record atomically (temporary file, then rename)."""
    write_json(directory / META_FILE, meta.as_json())


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write a small JSON record atomically (temporary file, then rename), so a crash leaves old or new."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    faults.reached("index")


def read_json(path: Path) -> dict[str, Any] | None:
    """A small JSON record, or ``None`` when it is missing or unreadable (the caller then redoes the work)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def check_meta(directory: Path, found: Meta, model: str, dim: int) -> None:
    """Refuse an index built with another model or layout, with the one line that says what to do."""
    if found.model != model or found.dim != dim:
        raise MemoryVersionError(
            f"the index in {directory} was built with {found.model} (dim {found.dim}); "
            f"this pcm uses {model} (dim {dim}); run `pcm reindex`"
        )
    if found.format > FORMAT_VERSION:
        raise MemoryVersionError(
            f"the index in {directory} has layout {found.format}, newer than this pcm ({FORMAT_VERSION}); upgrade pcm"
        )
    if found.format < FORMAT_VERSION:
        raise MemoryVersionError(
            f"the index in {directory} has the older layout {found.format} (this pcm writes {FORMAT_VERSION}); "
            "run `pcm reindex`"
        )


def wipe(directory: Path) -> None:
    """Remove every table and the model record (``pcm reindex`` after a model change)."""
    if not directory.exists():
        return
    for child in directory.iterdir():
        if child.is_dir():
            shutil.rmtree(child)
        else:
            child.unlink()


def post_schema(dim: int) -> pa.Schema:
    return pa.schema(
        [
            pa.field("iri", pa.string(), nullable=False),
            pa.field("session", pa.string()),
            pa.field("role", pa.string()),
            pa.field("speaker", pa.string()),
            pa.field("time", pa.string()),
            pa.field("ts", pa.float64()),
            pa.field("text", pa.string()),
            pa.field("source_id", pa.string()),
            pa.field("position", pa.int64()),
            pa.field("search", pa.string()),
            pa.field("search_hash", pa.string()),
            pa.field("digest", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), dim)),
        ]
    )


def entity_schema(dim: int) -> pa.Schema:
    return pa.schema(
        [
            pa.field("iri", pa.string(), nullable=False),
            pa.field("label", pa.string()),
            pa.field("alt_labels", pa.list_(pa.string())),
            pa.field("types", pa.list_(pa.string())),
            pa.field("text", pa.string()),
            pa.field("search", pa.string()),
            pa.field("search_hash", pa.string()),
            pa.field("exact_keys", pa.string()),
            pa.field("normal_keys", pa.string()),
            pa.field("digest", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), dim)),
        ]
    )


_Record = TypeVar("_Record", PostRecord, EntityRecord)


@dataclass(frozen=True)
class Row(Generic[_Record]):
    """One row of a table: the record, its full-text column and fingerprints, its vector (an entity row also
    stores its label keys, so opening does not recompute them)."""

    record: _Record
    search: str
    digest: str
    vector: np.ndarray

    @property
    def search_hash(self) -> str:
        return search_hash(self.search)


PostRow = Row[PostRecord]
EntityRow = Row[EntityRecord]


def post_rows_table(rows: Sequence[PostRow], dim: int) -> pa.Table:
    records = [r.record for r in rows]
    return pa.table(
        {
            "iri": [r.iri for r in records],
            "session": [r.session for r in records],
            "role": [r.role for r in records],
            "speaker": [r.speaker for r in records],
            "time": [r.time.isoformat() if r.time else None for r in records],
            "ts": [timestamp(r.time) if r.time else None for r in records],
            "text": [r.text for r in records],
            "source_id": [r.source_id for r in records],
            "position": [r.position for r in records],
            "search": [r.search for r in rows],
            "search_hash": [r.search_hash for r in rows],
            "digest": [r.digest for r in rows],
            "vector": _vector_array([r.vector for r in rows], dim),
        },
        schema=post_schema(dim),
    )


def entity_rows_table(rows: Sequence[EntityRow], dim: int) -> pa.Table:
    records = [r.record for r in rows]
    keys = [label_keys(r) for r in records]
    return pa.table(
        {
            "iri": [r.iri for r in records],
            "label": [r.label for r in records],
            "alt_labels": [list(r.alt_labels) for r in records],
            "types": [list(r.types) for r in records],
            "text": [r.text for r in records],
            "search": [r.search for r in rows],
            "search_hash": [r.search_hash for r in rows],
            "exact_keys": [KEY_SEPARATOR.join(exact) for exact, _ in keys],
            "normal_keys": [KEY_SEPARATOR.join(normal) for _, normal in keys],
            "digest": [r.digest for r in rows],
            "vector": _vector_array([r.vector for r in rows], dim),
        },
        schema=entity_schema(dim),
    )


def _vector_array(vectors: Sequence[np.ndarray], dim: int) -> pa.FixedSizeListArray:
    flat = (
        np.ascontiguousarray(np.stack(vectors).astype(np.float32, copy=False)).reshape(-1)
        if vectors
        else np.zeros(0, np.float32)
    )
    return pa.FixedSizeListArray.from_arrays(pa.array(flat, type=pa.float32()), dim)


class Tables:
    """The two LanceDB tables of one index directory."""

    def __init__(self, directory: Path, dim: int) -> None:
        self.directory = directory
        self.dim = dim
        self.db = lancedb.connect(str(directory))
        names = set(_table_names(self.db))
        self.posts = self._open_or_create(POSTS_TABLE, post_schema(dim), names)
        self.entities = self._open_or_create(ENTITIES_TABLE, entity_schema(dim), names)
        self.vector_indexed = {name: ann.indexed(self.table(name)) for name in (POSTS_TABLE, ENTITIES_TABLE)}
        """Which tables have LanceDB's vector index (:mod:`pcm.index.ann`), by table name."""

    def table(self, name: str) -> Any:
        return self.posts if name == POSTS_TABLE else self.entities

    def build_vector_index(self, name: str) -> None:
        """Build (or rebuild over every row) the vector index of one table."""
        table = self.table(name)
        ann.build(table, table.count_rows())
        self.vector_indexed[name] = True
        faults.reached("index")

    def build_vector_index_detached(self, name: str) -> int:
        """Build (or rebuild) the vector index of one table through a handle of its own, and return the rows it
        covers; safe on another thread while this object's handles read and write.

        The build indexes the table as it was when it began; rows appended, deleted or replaced meanwhile commit
        beside it (LanceDB resolves an append, a delete or a merge against an index build), and the new rows are
        searched flat beside the index until an update takes them in. A compaction (:meth:`optimize`) during the
        build would pre-empt it, so the caller runs none until it is over. This object's handle sees the index
        after :meth:`adopt_vector_index`."""
        table = lancedb.connect(str(self.directory)).open_table(name)
        rows = int(table.count_rows())
        ann.build(table, rows)
        return rows

    def adopt_vector_index(self, name: str) -> None:
        """Move this object's handle of one table to its latest version, where a detached build put the index."""
        self.table(name).checkout_latest()
        self.vector_indexed[name] = ann.indexed(self.table(name))
        faults.reached("index")

    def vector_index_rows(self, name: str) -> tuple[int, int]:
        """Rows in the vector index of one table, and rows written since that it has not taken in yet."""
        stats = self.table(name).index_stats(ann.INDEX_NAME)
        return (0, 0) if stats is None else (int(stats.num_indexed_rows), int(stats.num_unindexed_rows))

    def _open_or_create(self, name: str, schema: pa.Schema, names: set[str]) -> Any:
        if name in names:
            table = self.db.open_table(name)
            if table.schema.field("vector").type != schema.field("vector").type:
                raise MemoryVersionError(
                    f"table {name} in {self.directory} has other vectors; run `pcm reindex`"
                )
        else:
            table = self.db.create_table(name, schema=schema)
        indices = table.list_indices()
        if not any(i.index_type == "FTS" and list(i.columns) == ["search"] for i in indices):
            table.create_index("search", config=FTS())  # also repairs a crash between create and index
        if name == POSTS_TABLE:
            covered = {column for i in indices for column in i.columns}
            for column, kind in SCALAR_INDEXES.items():
                if column not in covered:  # a memory made before these indexes gets them on its next open
                    table.create_index(column, config=kind())
        return table

    # ---------------------------------------------------------------------------------------------------------
    def upsert(self, table: Any, data: pa.Table) -> None:
        """Insert or replace rows by IRI, in one commit."""
        if data.num_rows == 0:
            return
        table.merge_insert("iri").when_matched_update_all().when_not_matched_insert_all().execute(data)
        faults.reached("index")

    def append(self, table: Any, data: pa.Table) -> None:
        """Insert rows the caller knows are new, in one commit (no join against the existing IRIs)."""
        if data.num_rows == 0:
            return
        table.add(data)
        faults.reached("index")

    def delete(self, table: Any, iris: Iterable[str]) -> None:
        chosen = list(iris)
        for start in range(0, len(chosen), _IRIS_PER_FILTER):
            chunk = chosen[start : start + _IRIS_PER_FILTER]
            table.delete("iri IN (" + ", ".join(sql_string(i) for i in chunk) + ")")
            faults.reached("index")

    def read(self, table: Any, columns: Sequence[str]) -> dict[str, Any]:
        """Whole columns of ``table`` (python lists; ``vector`` as one float32 matrix)."""
        data = self.read_arrow(table, columns)
        out: dict[str, Any] = {}
        for name in columns:
            if name == "vector":
                out[name] = self.vectors(data)
            elif name == "ts":
                out[name] = data.column(name).to_numpy().astype(np.float64)
            else:
                out[name] = data.column(name).to_pylist()
        return out

    def read_arrow(self, table: Any, columns: Sequence[str]) -> pa.Table:
        """Whole columns of ``table`` as Arrow (empty, with the table's types, for an empty table)."""
        scan = _whole(table, columns)
        return table.schema.empty_table().select(list(columns)) if scan is None else scan.to_arrow()

    def batches(self, table: Any, columns: Sequence[str], size: int = _READ_BATCH) -> Iterator[pa.RecordBatch]:
        """Whole columns of ``table`` as Arrow record batches of at most ``size`` rows, in the order
        :meth:`read_arrow` gives them: a caller that keeps what it needs of each holds one batch at a time, not
        the columns whole beside its copy (at 1M posts the vectors are 1.5 GB)."""
        scan = _whole(table, columns)
        reader: Iterator[pa.RecordBatch] = iter(()) if scan is None else scan.to_batches(size)
        return reader

    def vectors_of(self, table: Any, iris: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored vectors of ``iris`` (those the table holds), read by a filtered scan: a few rows without
        reading every vector (at 1M posts 1.5 GB)."""
        out: dict[str, np.ndarray] = {}
        chosen = list(dict.fromkeys(iris))
        for start in range(0, len(chosen), _IRIS_PER_FILTER):
            chunk = chosen[start : start + _IRIS_PER_FILTER]
            data = (
                table.search().where("iri IN (" + ", ".join(sql_string(i) for i in chunk) + ")")
                .select(["iri", "vector"]).limit(len(chunk)).to_arrow()
            )
            out.update(zip(data.column("iri").to_pylist(), self.vectors(data), strict=True))
        return out

    def vectors(self, data: pa.Table | pa.RecordBatch) -> np.ndarray:
        """The ``vector`` column of ``data`` as one float32 matrix, a fresh writable copy."""
        return ann.vector_matrix(data).reshape(-1, self.dim)

    def fts(self, table: Any, query: str, limit: int, where: str | None = None) -> list[tuple[str, float]]:
        """(iri, BM25 score) of the best ``limit`` rows for ``query``; a query with no indexable word gives none."""
        return self.fts_rows(table, query, limit, where)[0]

    def fts_rows(
        self, table: Any, query: str, limit: int, where: str | None = None, *, vectors: bool = False
    ) -> tuple[list[tuple[str, float]], np.ndarray | None]:
        """:meth:`fts`, and with ``vectors`` the stored vector of each row found (one row each)."""
        if not query.strip() or limit <= 0:
            return [], np.zeros((0, self.dim), np.float32) if vectors else None
        builder = table.search(query, query_type="fts", fts_columns="search")
        if where:
            builder = builder.where(where, prefilter=True)
        columns = ["iri", "_score", "vector"] if vectors else ["iri", "_score"]
        result = builder.limit(limit).select(columns).to_arrow()
        hits = list(zip(result.column("iri").to_pylist(), result.column("_score").to_pylist(), strict=True))
        return hits, self.vectors(result) if vectors else None

    def optimize(self, retain: timedelta, only: str | None = None) -> None:
        """Compact fragments, fold new rows into the full-text and vector indexes, drop versions older than
        ``retain``; of both tables, or of the one named ``only``."""
        for table in (self.posts, self.entities) if only is None else (self.table(only),):
            if table.count_rows() == 0:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "cleanup_older_than=0 removes every version"
                table.optimize(cleanup_older_than=retain, delete_unverified=retain <= timedelta(0))
            faults.reached("index")

    def drop_all(self) -> None:
        for name in (POSTS_TABLE, ENTITIES_TABLE):
            if name in set(_table_names(self.db)):
                self.db.drop_table(name)
            self.vector_indexed[name] = False


def _whole(table: Any, columns: Sequence[str]) -> Any:
    """A scan of every row of ``table`` (LanceDB's plain search stops at 10 rows unless told the count), or
    ``None`` for an empty table."""
    rows = table.count_rows()
    return table.search().select(list(columns)).limit(rows) if rows else None


def _table_names(db: Any) -> list[str]:
    lister = getattr(db, "list_tables", None)
    if lister is not None:
        result = lister()
        names = getattr(result, "tables", result)
        return list(names)
    return list(db.table_names())


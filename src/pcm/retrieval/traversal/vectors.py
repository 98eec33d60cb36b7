"""Embeddings of verbalised triples and vertex names, computed once and cached.

BeamSearch scores every candidate triple by its similarity to the question, A* compares vertex names, and the
triples filter ranks what was found: the same texts come back question after question, and embedding is the one
expensive step (milliseconds per text on a CPU). So vectors are cached by the hash of the text they embed (a label
change gives a new text, hence a new vector, never a stale one), in memory and in a small LanceDB table under
``<memory>/index/traversal/``. That directory sits inside the side index's, so ``pcm reindex`` (which wipes the
index) drops it too; it records its model, and a cache written by another model is discarded, not mixed.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

TABLE = "texts"
META = "meta.json"


class TextEmbedder(Protocol):
    """What :func:`pcm.index.get_embedder` returns: a named model giving L2-normalised float32 rows."""

    name: str
    dim: int

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def text_key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:24]


class TextVectors:
    """Vectors for texts: from memory, else from the LanceDB cache, else embedded (in one batch) and remembered."""

    def __init__(self, embedder: TextEmbedder, directory: Path | None = None, *, read_only: bool = False) -> None:
        self.embedder = embedder
        self.directory = directory
        self.read_only = read_only
        """Use the cache on disk but never write it (a memory opened read-only)."""
        self.embedded = 0
        self._lock = threading.Lock()
        self._slot: dict[str, int] = {}
        self._by_text: dict[str, int] = {}
        """Texts already met in this process (skips hashing them again)."""
        self._matrix = np.zeros((0, embedder.dim), dtype=np.float32)
        self._count = 0
        self._pending: list[tuple[str, int]] = []
        self._loaded = directory is None
        self._table: Any = None

    @property
    def dim(self) -> int:
        return self.embedder.dim

    def get(self, texts: Sequence[str]) -> np.ndarray:
        """One row per text, in order."""
        with self._lock:
            self._load()
            by_text = self._by_text
            missing: dict[str, str] = {}
            for text in texts:
                if text not in by_text:
                    key = text_key(text)
                    if key in self._slot:
                        by_text[text] = self._slot[key]
                    else:
                        missing.setdefault(key, text)
            if missing:
                vectors = np.asarray(self.embedder.encode(list(missing.values())), dtype=np.float32)
                self.embedded += len(missing)
                for (key, text), vector in zip(missing.items(), vectors, strict=True):
                    slot = self._put(key, vector)
                    by_text[text] = slot
                    self._pending.append((key, slot))
            rows = np.fromiter((by_text[t] for t in texts), dtype=np.int64, count=len(texts))
            return self._matrix[rows]

    def query(self, text: str) -> np.ndarray:
        """The vector of a question (not cached on disk: questions rarely repeat)."""
        return np.asarray(self.embedder.encode([text]), dtype=np.float32)[0]

    def flush(self) -> None:
        """Write the vectors embedded since the last flush to the LanceDB cache (one commit)."""
        with self._lock:
            if self.directory is None or self.read_only or not self._pending:
                self._pending.clear()
                return
            import pyarrow as pa

            keys = [k for k, _ in self._pending]
            block = self._matrix[[slot for _, slot in self._pending]]
            data = pa.table(
                {
                    "key": pa.array(keys, type=pa.string()),
                    "vector": pa.FixedSizeListArray.from_arrays(
                        pa.array(np.ascontiguousarray(block).reshape(-1), type=pa.float32()), self.dim
                    ),
                }
            )
            table = self._open_table(create_with=data)
            if table is not None:
                table.add(data)
            self._pending.clear()

    # -- internals ------------------------------------------------------------------------------------------------
    def _put(self, key: str, vector: np.ndarray) -> int:
        if self._count == len(self._matrix):
            grown = np.zeros((max(1024, 2 * len(self._matrix)), self.dim), dtype=np.float32)
            grown[: self._count] = self._matrix[: self._count]
            self._matrix = grown
        slot = self._count
        self._matrix[slot] = vector
        self._slot[key] = slot
        self._count += 1
        return slot

    def _load(self) -> None:
        """Read the whole cache once (it holds what this memory's walks have met, not every triple)."""
        if self._loaded:
            return
        self._loaded = True
        assert self.directory is not None
        meta = self.directory / META
        expected = {"model": self.embedder.name, "dim": self.dim}
        if meta.exists():
            try:
                found = json.loads(meta.read_text(encoding="utf-8"))
            except ValueError:
                found = None
            if found != expected:
                if self.read_only:
                    return  # another model's cache: not ours to use, and not ours to drop
                shutil.rmtree(self.directory, ignore_errors=True)
        if not meta.exists():
            if self.read_only:
                return
            self.directory.mkdir(parents=True, exist_ok=True)
            meta.write_text(json.dumps(expected) + "\n", encoding="utf-8")
            return
        table = self._open_table()
        if table is None or table.count_rows() == 0:
            return
        data = table.to_arrow()
        keys = data.column("key").to_pylist()
        vectors = data.column("vector").combine_chunks().values.to_numpy(zero_copy_only=False).reshape(-1, self.dim)
        for key, vector in zip(keys, vectors, strict=True):
            if key not in self._slot:
                self._put(key, vector)

    def _open_table(self, create_with: Any = None) -> Any:
        """The LanceDB table; created from ``create_with`` (then None is returned: the rows are written)."""
        if self._table is not None:
            return self._table
        from pcm.index.deferred import defer_namespace_client

        defer_namespace_client()
        import lancedb

        assert self.directory is not None
        db = lancedb.connect(str(self.directory))
        if TABLE in _table_names(db):
            self._table = db.open_table(TABLE)
            return self._table
        if create_with is None:
            return None
        self._table = db.create_table(TABLE, data=create_with)
        return None


def _table_names(db: Any) -> list[str]:
    lister = getattr(db, "list_tables", None)
    if lister is not None:
        result = lister()
        return list(getattr(result, "tables", result))
    return list(db.table_names())

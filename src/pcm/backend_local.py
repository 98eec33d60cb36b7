"""Embedded pyoxigraph store on disk: the default backend."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pyoxigraph as ox

from pcm.backend import QueryResult, materialise
from pcm.errors import MemoryLockedError, QueryError


class LocalBackend:
    """pyoxigraph ``Store`` at ``path``; the default graph of every query is the union of all graphs."""

    def __init__(self, path: Path | None, *, read_only: bool = False) -> None:
        self.path = path
        try:
            if path is None:
                self._store = ox.Store()
            elif read_only:
                self._store = ox.Store.read_only(str(path))
            else:
                self._store = ox.Store(str(path))
        except OSError as exc:
            text = str(exc)
            if "lock" in text.lower() or "Resource temporarily unavailable" in text:
                raise MemoryLockedError(
                    f"memory store {path} is locked by another process (a running `pcm serve` or ingest); "
                    "stop it or go through the server"
                ) from exc
            raise
        self.read_only = read_only

    @property
    def store(self) -> ox.Store:
        return self._store

    def query(self, sparql: str, *, timeout: float | None = None, limit: int | None = None) -> QueryResult:
        deadline = time.monotonic() + timeout if timeout else None
        try:
            result = self._store.query(sparql, use_default_graph_as_union=True)
            return materialise(result, deadline=deadline, limit=limit)
        except SyntaxError as exc:
            raise QueryError(f"SPARQL syntax error: {exc}") from exc
        except OSError as exc:
            raise QueryError(f"query failed: {exc}") from exc

    def update(self, sparql: str) -> None:
        try:
            self._store.update(sparql)
        except SyntaxError as exc:
            raise QueryError(f"SPARQL Update syntax error: {exc}") from exc

    def extend(self, quads: Sequence[ox.Quad]) -> None:
        self._store.extend(quads)

    def bulk_load(self, path: str, fmt: ox.RdfFormat, *, graph: str | None = None) -> None:
        to_graph = ox.NamedNode(graph) if graph else None
        self._store.bulk_load(path=path, format=fmt, to_graph=to_graph)

    def quads(self, graph: str | None = None) -> Iterator[ox.Quad]:
        g = ox.NamedNode(graph) if graph else None
        return iter(self._store.quads_for_pattern(None, None, None, g))

    def named_graphs(self) -> list[str]:
        return sorted(g.value for g in self._store.named_graphs() if isinstance(g, ox.NamedNode))

    def dump(self, fmt: ox.RdfFormat, *, graph: str | None = None) -> bytes:
        if graph is not None:
            return self._store.dump(format=fmt, from_graph=ox.NamedNode(graph))
        return self._store.dump(format=fmt)

    def flush(self) -> None:
        self._store.flush()

    def close(self) -> None:
        if not self.read_only:
            self._store.flush()
        del self._store

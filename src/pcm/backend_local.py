"""Embedded pyoxigraph store on disk: the default backend."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pyoxigraph as ox

from pcm import faults
from pcm.backend import Capabilities, PurgeScope, QueryIsolation, QueryResult, materialise
from pcm.errors import MemoryClosedError, MemoryLockedError, QueryError
from pcm.layout import LEGACY_LAYOUT, DatasetLayout
from pcm.oserrors import resource_error, resource_errors


class LocalBackend:
    """pyoxigraph ``Store`` at ``path``; the default graph of every query is the union of all graphs."""

    def __init__(self, path: Path | None, *, read_only: bool = False) -> None:
        self.path = path
        self._handle: ox.Store | None = None
        """The open store; None once closed (dropping the last reference releases RocksDB's lock)."""
        try:
            if path is None:
                self._handle = ox.Store()
            elif read_only:
                path = self.path = completed_store(path)
                self._handle = ox.Store.read_only(str(path))
            else:
                finish_compaction(path)
                self._handle = ox.Store(str(path))
        except OSError as exc:
            text = str(exc)
            if "lock" in text.lower() or "Resource temporarily unavailable" in text:
                raise MemoryLockedError(
                    f"memory store {path} is locked by another process (a running `pcm serve` or ingest); "
                    "stop it or go through the server"
                ) from exc
            raise
        self.read_only = read_only
        self.layout: DatasetLayout | None = None
        """Fills the graph placeholders of the SPARQL sent here (None: the fixed names; an embedded store holds one
        memory, so nothing is scoped)."""

    @property
    def store(self) -> ox.Store:
        return self._store

    @property
    def _store(self) -> ox.Store:
        if self._handle is None:
            raise MemoryClosedError(f"the memory store {self.path or '(in memory)'} is closed; open the memory again")
        return self._handle

    @property
    def capabilities(self) -> Capabilities:
        """On disk: pcm owns the files (worker isolation, compaction, checkpoints); in memory: nothing to isolate."""
        on_disk = self.path is not None
        return Capabilities(
            files=self.path,
            isolation=QueryIsolation.WORKER if on_disk else QueryIsolation.IN_PROCESS,
            purge=PurgeScope.FILES,
            bulk_load="native",
            transactions=True,
        )

    def fingerprint(self) -> str:
        return store_fingerprint(self.path) if self.path is not None else ""

    def checkpoint(self, destination: Path) -> None:
        """A RocksDB checkpoint of the store at ``destination`` (hard links where it can: fast, and consistent)."""
        if self.path is None:
            raise QueryError("an in-memory store has no files to copy")
        self._store.flush()
        self._store.backup(str(destination))

    def query(self, sparql: str, *, timeout: float | None = None, limit: int | None = None) -> QueryResult:
        deadline = time.monotonic() + timeout if timeout else None
        try:
            result = self._store.query((self.layout or LEGACY_LAYOUT).render(sparql), use_default_graph_as_union=True)
            return materialise(result, deadline=deadline, limit=limit)
        except SyntaxError as exc:
            raise QueryError(f"SPARQL syntax error: {exc}") from exc
        except OSError as exc:
            raise resource_error(exc) or QueryError(f"query failed: {exc}") from exc

    def update(self, sparql: str) -> None:
        """Apply a SPARQL Update in one transaction; one that does not parse or fails to run raises QueryError.

        pyoxigraph reports a failed operation (CREATE of a graph that exists, DROP of one that does not) as a
        RuntimeError and a failed LOAD or storage write as an OSError; the update then applied nothing. A write the
        machine refused (a full disk, ...) is a ResourceError, not the query's fault.
        """
        store = self._store
        try:
            store.update((self.layout or LEGACY_LAYOUT).render(sparql))
        except SyntaxError as exc:
            raise QueryError(f"SPARQL Update syntax error: {exc}") from exc
        except (RuntimeError, OSError) as exc:
            raise resource_error(exc) or QueryError(f"SPARQL Update failed: {exc}") from exc
        faults.reached("store")

    def extend(self, quads: Sequence[ox.Quad]) -> None:
        self._store.extend(quads)
        faults.reached("store")

    def bulk_load(self, path: str, fmt: ox.RdfFormat, *, graph: str | None = None) -> None:
        to_graph = ox.NamedNode(graph) if graph else None
        # The loader ingests the files it writes into RocksDB; with writes still in the memtable after a checkpoint
        # (an import's undo point, then its pending mark) that ingestion crashed the process now and then
        # (SIGSEGV in rocksdb::FindFile under IngestExternalFiles: 2 runs of 2 x 250 imports of a small dump, none
        # in 4 x 250 with the memtable flushed first). Flushing first is one small write.
        self._store.flush()
        self._store.bulk_load(path=path, format=fmt, to_graph=to_graph)
        faults.reached("store")

    def quads(self, graph: str | None = None) -> Iterator[ox.Quad]:
        g = ox.NamedNode(graph) if graph else None
        return iter(self._store.quads_for_pattern(None, None, None, g))

    def named_graphs(self) -> list[str]:
        return sorted(g.value for g in self._store.named_graphs() if isinstance(g, ox.NamedNode))

    def dump(self, fmt: ox.RdfFormat, *, graph: str | None = None) -> bytes:
        if graph is not None:
            data = self._store.dump(format=fmt, from_graph=ox.NamedNode(graph))
        else:
            data = self._store.dump(format=fmt)
        assert data is not None, "pyoxigraph returns the bytes when given no output"
        return data

    def flush(self) -> None:
        self._store.flush()

    def compact(self) -> int:
        """Rewrite the store into fresh files holding only its current quads; returns how many it kept.

        Oxigraph never deletes a string it has stored (its dictionary is append-only) and RocksDB keeps deleted
        values in older files and the write-ahead log, so the text of a forgotten post stays on disk until the
        store is rewritten. The copy is checked (same quad count) before it replaces the original; a crash at
        any point leaves either the old store or the new one, completed by :func:`finish_compaction` on open.
        """
        if self.path is None:
            return len(self._store)

        def copy_live_quads(new: Path) -> int:
            self._store.flush()
            copy = ox.Store(str(new))
            try:
                copy.bulk_extend(self._store.quads_for_pattern(None, None, None, None))
                copy.flush()
                copy.optimize()
                kept, expected = len(copy), len(self._store)
            finally:
                del copy
            if kept != expected:
                raise QueryError(f"store compaction copied {kept} quads of {expected}; the store was left as it was")
            return kept

        return self._swap_in(copy_live_quads)

    def replace_with(self, source: Path) -> int:
        """Make the store a copy of the store directory ``source`` (a backup), with the same crash-safe swap as
        :meth:`compact`: a crash leaves either the store as it was or the copy, never a half-restored one."""

        def copy_backup(new: Path) -> int:
            shutil.copytree(source, new)
            copy = ox.Store(str(new))
            try:
                return len(copy)
            finally:
                del copy

        return self._swap_in(copy_backup)

    def _swap_in(self, prepare: Callable[[Path], int]) -> int:
        """Build a store at the copy path with ``prepare``, mark it complete, swap it in and reopen it."""
        if self.path is None or self.read_only:
            raise QueryError("only a writable store on disk can be rewritten")
        new, _, ready = compaction_paths(self.path)
        shutil.rmtree(new, ignore_errors=True)
        try:
            quads = prepare(new)
        except BaseException:
            shutil.rmtree(new, ignore_errors=True)
            raise
        faults.reached("compact")
        _durable_touch(ready)
        faults.reached("compact")
        self._handle = None  # releases the RocksDB lock of the old files
        finish_compaction(self.path)
        self._handle = ox.Store(str(self.path))
        return quads

    def close(self) -> None:
        """Flush and release the store; a second call does nothing.

        The store is released even when the flush is refused (a full disk): every write that returned is in
        RocksDB's write-ahead log, which the next open replays, so the refusal says that nothing was lost."""
        handle, self._handle = self._handle, None
        if handle is not None and not self.read_only:
            with resource_errors(lambda: "the store's writes are kept in its log and replayed at the next open"):
                handle.flush()


def store_fingerprint(path: Path) -> str:
    """Changes whenever the RocksDB directory is written (WAL, SST, MANIFEST), read in well under a millisecond.

    The informational ``LOG`` files and the ``LOCK`` file are left out: they change when a process merely opens
    the store. A compaction changes it without changing any fact; that only costs a cache miss.
    """
    parts: list[str] = []
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                if entry.name.startswith("LOG") or entry.name == "LOCK" or not entry.is_file():
                    continue
                stat = entry.stat()
                parts.append(f"{entry.name}:{stat.st_size}:{stat.st_mtime_ns}")
    except OSError:
        return ""
    return "|".join(sorted(parts))


def compaction_paths(path: Path) -> tuple[Path, Path, Path]:
    """The copy being written, the original being retired, and the marker saying the copy is complete."""
    return (
        path.with_name(path.name + ".compact"),
        path.with_name(path.name + ".retired"),
        path.with_name(path.name + ".compact-ready"),
    )


def completed_store(path: Path) -> Path:
    """Where a reader finds the store: ``path``, or the finished copy of a purge interrupted before its swap.

    A reader may not complete the swap (a writer's job, :func:`finish_compaction`), but the copy marked complete
    already holds every live quad, so reading it is reading the store as the next writable open will leave it.
    """
    new, _, ready = compaction_paths(path)
    return new if ready.exists() and new.exists() else path


def finish_compaction(path: Path) -> None:
    """Complete a compaction whose copy was marked complete, or discard one that was not (run before opening).

    The swap is two renames between the marker's creation and removal, so every crash point has one answer: with
    the marker, the copy is the store; without it, the original is.
    """
    new, old, ready = compaction_paths(path)
    if ready.exists():
        if new.exists():
            if path.exists():
                shutil.rmtree(old, ignore_errors=True)
                path.rename(old)
                faults.reached("compact")
            new.rename(path)
            faults.reached("compact")
        ready.unlink()
    shutil.rmtree(new, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)


def _durable_touch(path: Path) -> None:
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)

"""Running a query someone else wrote (a model, a user) under a hard time limit and a memory bound.

What may run is decided first by :func:`pcm.sparql.check.check_query` (read-only, no federation, anchored paths,
bounded LIMIT); the names of :mod:`pcm.sparql` are re-exported here for the callers that check and run together.

The time limit. pyoxigraph has no timeout of its own, and a query can block inside one step (a big ``ORDER BY``,
``COUNT`` or a join that filters everything out) without yielding a row, so a deadline checked between rows
(:func:`pcm.backend.materialise`) cannot stop it, and neither can a thread. What we chose: generated queries on a
local store run in a **worker process** holding a read-only handle on the same RocksDB directory; the worker is
started once and kept (so a query costs one pipe round trip, not a process start), re-opens its handle when the
store has changed on disk, and is killed when a query overruns: killing a process always works. A person's own
queries (``pcm sparql``, :meth:`pcm.memory.Memory.sparql`) go through the same worker (:meth:`pcm.context.MemoryContext.query_runner`). The
worker's heap is capped too (``RLIMIT_DATA``, ``PCM_QUERY_MEMORY_MB``), so a join that materialises gigabytes
stops with a clear error instead of swapping. Results cross the pipe in the standard formats (SPARQL JSON results,
N-Triples: :mod:`pcm.sparql.results`). Our own fixed queries, a remote store (whose server enforces its own
timeout) and an in-memory store run in-process with the deadline between rows. Which of these applies is the
backend's to say (``capabilities.isolation``, :class:`pcm.backend.QueryIsolation`), for the CLI and ``pcm serve``
alike: behind ``pcm serve`` the engine is a process its watchdog restarts instead.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import resource
import select
import signal
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Any

import pyoxigraph as ox

from pcm.backend import QueryIsolation, QueryResult, Solutions
from pcm.errors import QueryError, QueryTimeout
from pcm.sparql.check import (
    MAX_QUERY_CHARS,
    QueryRefused,
    SafeQuery,
    check_query,
    check_read_only,
    expand_hierarchy,
)
from pcm.sparql.lexer import Token, tokenize
from pcm.sparql.query import FORMS, PathUse, QueryShape, query_shape
from pcm.sparql.results import read_result, result_message
from pcm.sparql.rewrite import bound_limit


class QueryMemoryExceeded(QueryError):
    """A query needed more memory than its bound and was stopped."""

    def __init__(self, memory_mb: int) -> None:
        super().__init__(
            f"query stopped: it needed more than the {memory_mb} MB of memory a query may use (PCM_QUERY_MEMORY_MB)"
        )


# ---------------------------------------------------------------------------------------------------- running


_MISSING_FILE = "No such file or directory"


class QueryRunner:
    """Runs queries under a hard time limit and a memory bound (see the module docstring for how).

    ``memory_mb`` caps the worker's heap (``RLIMIT_DATA``): a query that needs more is stopped with
    :class:`QueryMemoryExceeded` instead of growing until the machine swaps.
    """

    def __init__(self, backend: Any, *, timeout: float, limit: int, memory_mb: int = 1024) -> None:
        self.backend = backend
        self.timeout = timeout
        self.limit = limit
        self.memory_mb = memory_mb
        capabilities = backend.capabilities
        self._path: Path | None = capabilities.files if capabilities.isolation is QueryIsolation.WORKER else None
        self._worker: _Worker | None = None
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _stop_worker, self)

    @property
    def isolated(self) -> bool:
        """True when queries run in the killable worker process."""
        return self._path is not None

    def run(self, query: SafeQuery | str, *, timeout: float | None = None, limit: int | None = None) -> QueryResult:
        """Run ``query`` (a checked query, or text the caller has checked) and return its materialised result.

        The time limit counts from the moment a worker is ready for the query: starting a worker (importing pcm
        and pyoxigraph in a fresh interpreter, a fraction of a second on an idle machine and seconds on a busy one)
        is bounded on its own (:data:`WORKER_START_LIMIT`), so a busy machine does not turn a quick query into a
        timeout.
        """
        text = query.text if isinstance(query, SafeQuery) else query
        limit = limit or self.limit
        seconds = timeout or self.timeout
        if self._path is None:
            return self.backend.query(text, timeout=seconds, limit=limit)
        with self._lock:
            for attempt in (1, 2):
                if self._worker is None or not self._worker.alive:
                    self._worker = _Worker(self._path, self.memory_mb)
                deadline = time.monotonic() + seconds
                try:
                    return self._worker.run(
                        text, limit=limit, timeout=seconds, deadline=deadline, version=self.backend.fingerprint()
                    )
                except QueryError as error:
                    # The writer compacted a file away while the worker's read-only handle opened or read it
                    # (RocksDB reads the manifest, then the files it names): a fresh worker reads the current one.
                    if attempt == 2 or _MISSING_FILE not in str(error):
                        raise
                    self._worker.stop()
                    self._worker = None
            raise AssertionError("unreachable")

    def close(self) -> None:
        with self._lock:
            if self._worker is not None:
                self._worker.stop()
                self._worker = None


def _stop_worker(runner: QueryRunner) -> None:  # pragma: no cover - called by the finalizer
    runner.close()


_LIVE: weakref.WeakSet[_Worker] = weakref.WeakSet()


#: The line a worker writes once it is ready for queries.
READY = b'{"ready": true}\n'
#: Seconds a new worker may take to be ready (an interpreter start and pcm's imports); not part of a query's limit.
WORKER_START_LIMIT = 60.0


class _Worker:
    """One child process holding ``pyoxigraph.Store.read_only(path)``; JSON lines over pipes."""

    def __init__(self, path: Path, memory_mb: int) -> None:
        self.path = path
        self.memory_mb = memory_mb
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from pcm.query_safety import _worker_main; _worker_main()", str(path),
             str(memory_mb)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        _LIVE.add(self)
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], WORKER_START_LIMIT)
        if not ready or self.proc.stdout.readline() != READY:
            self.stop()
            raise QueryError(f"the query worker did not start within {WORKER_START_LIMIT:g} s; run the question again")

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def run(self, text: str, *, limit: int, timeout: float, deadline: float, version: str) -> QueryResult:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        request = json.dumps({"q": text, "limit": limit, "version": version}) + "\n"
        try:
            self.proc.stdin.write(request.encode("utf-8"))
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            self.stop()
            raise QueryError("the query worker stopped unexpectedly; run the question again") from exc
        ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            self.stop()
            raise QueryTimeout(f"query stopped: it ran past the time limit of {timeout:g} s")
        line = self.proc.stdout.readline()
        if not line:
            self.stop()
            if self.proc.returncode in (-signal.SIGABRT, -signal.SIGKILL, -signal.SIGSEGV):
                raise QueryMemoryExceeded(self.memory_mb)  # an allocation failed under RLIMIT_DATA: the engine aborts
            raise QueryError("the query worker stopped unexpectedly; run the question again")
        return _decode_result(json.loads(line), self.memory_mb)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


@atexit.register
def _stop_all() -> None:  # pragma: no cover - interpreter exit
    for worker in list(_LIVE):
        worker.stop()


def _decode_result(message: dict[str, Any], memory_mb: int) -> QueryResult:
    if "error" in message:
        kind = message["error"]
        text = message.get("message", "")
        if kind == "memory":
            raise QueryMemoryExceeded(memory_mb)
        if kind == "syntax":
            raise QueryError(f"SPARQL syntax error: {text}")
        raise QueryError(f"query failed: {text}")
    result = read_result(message)
    return Solutions(*result) if isinstance(result, tuple) else result


def _worker_main() -> None:  # pragma: no cover - runs in the child process (exercised through QueryRunner)
    """The child: one read-only store handle, re-opened when the parent says the store changed.

    Its heap is capped first (``RLIMIT_DATA``, which counts what the engine allocates and not the store's mapped
    files); an allocation past it aborts this process, which the parent reports as :class:`QueryMemoryExceeded`.
    """
    path = sys.argv[1]
    cap = int(sys.argv[2]) * 2**20
    resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))
    sys.stdout.buffer.write(READY)
    sys.stdout.flush()
    store: ox.Store | None = None
    version: str | None = None
    for line in sys.stdin.buffer:
        request = json.loads(line)
        try:
            if store is None or request["version"] != version:
                store = None
                store = ox.Store.read_only(path)
                version = request["version"]
            reply = result_message(store.query(request["q"], use_default_graph_as_union=True), int(request["limit"]))
        except MemoryError:
            reply = {"error": "memory"}
        except SyntaxError as exc:
            reply = {"error": "syntax", "message": str(exc).strip().splitlines()[0] if str(exc).strip() else "invalid"}
        except Exception as exc:
            reply = {"error": "execution", "message": (str(exc).strip().splitlines() or [type(exc).__name__])[0]}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


__all__ = [
    "FORMS",
    "MAX_QUERY_CHARS",
    "PathUse",
    "QueryMemoryExceeded",
    "QueryRefused",
    "QueryRunner",
    "QueryShape",
    "QueryTimeout",
    "SafeQuery",
    "Token",
    "bound_limit",
    "check_query",
    "check_read_only",
    "expand_hierarchy",
    "query_shape",
    "tokenize",
]

"""``pcm serve``: one process that owns the memory: the engine (a child), the front (HTTP), the open Memory.

Start-up order matters: the engine takes the store lock first (so a second server, or a CLI command holding the
store, is reported as a lock, not as a half-started server), then the Memory opens over it, then the front binds
its socket, and only then is ``serve.json`` written, so a command that finds the file finds a server that answers
(connections made before uvicorn runs wait in the socket's backlog).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import socket
import threading
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pyoxigraph as ox
import uvicorn
from starlette.types import ASGIApp

from pcm.backend import Backend, Capabilities, PurgeScope, QueryIsolation, QueryResult
from pcm.backend_remote import RemoteBackend
from pcm.endpoint.app import App
from pcm.endpoint.config import ServeConfig
from pcm.endpoint.connections import protocol_class
from pcm.endpoint.drain import ExtractionWorker
from pcm.endpoint.engine import Engine, Watchdog
from pcm.endpoint.upstream import Upstream, keepalive_expiry
from pcm.endpoint.web import Lifespan, Mounted, create_app
from pcm.errors import LLMError, MemoryLockedError, QueryError, UsageError
from pcm.layout import DatasetLayout
from pcm.manifest import Manifest
from pcm.memory import QUEUED, STORE_DIR, Memory
from pcm.private import Hold, hold
from pcm.serve_file import ServerInfo, discover, remove_info, write_info
from pcm.settings import Settings
from pcm.store_binding import bind

log = logging.getLogger(__name__)

#: Seconds a stopping server waits for requests in flight before closing their connections.
SHUTDOWN_GRACE_S = 5


class GuardedBackend:
    """The Memory's backend inside the server: every engine call is counted by the watchdog.

    The front's own requests and the API's (ask, recall, explorer pages) reach the same engine; the watchdog can
    only tell a runaway from legitimate work if it sees all of them.
    """

    def __init__(self, inner: Backend, watchdog: Watchdog) -> None:
        self.inner = inner
        self.watchdog = watchdog

    @property
    def capabilities(self) -> Capabilities:
        """The engine's, except that a runaway query is the watchdog's to stop (it restarts the engine) and the
        files are held by the engine while the server runs."""
        return dataclasses.replace(
            self.inner.capabilities, isolation=QueryIsolation.ENGINE, purge=PurgeScope.HELD, files=None
        )

    def fingerprint(self) -> str:
        return ""

    def checkpoint(self, destination: Path) -> None:
        raise MemoryLockedError("a served memory's files are held by its engine: stop `pcm serve` first")

    def replace_with(self, source: Path) -> int:
        raise MemoryLockedError("a served memory's files are held by its engine: stop `pcm serve` first")

    @property
    def layout(self) -> DatasetLayout | None:
        return self.inner.layout

    @layout.setter
    def layout(self, layout: DatasetLayout | None) -> None:
        self.inner.layout = layout

    def query(self, sparql: str, *, timeout: float | None = None, limit: int | None = None) -> QueryResult:
        with self.watchdog.request():
            try:
                return self.inner.query(sparql, timeout=timeout, limit=limit)
            except QueryError as exc:
                if "time limit" in str(exc):
                    self.watchdog.abandoned()
                raise

    def update(self, sparql: str) -> None:
        with self.watchdog.request():
            self.inner.update(sparql)

    def extend(self, quads: Sequence[ox.Quad]) -> None:
        with self.watchdog.request():
            self.inner.extend(quads)

    def bulk_load(self, path: str, fmt: ox.RdfFormat, *, graph: str | None = None) -> None:
        with self.watchdog.request():
            self.inner.bulk_load(path, fmt, graph=graph)

    def quads(self, graph: str | None = None) -> Iterator[ox.Quad]:
        with self.watchdog.request():
            yield from self.inner.quads(graph)

    def named_graphs(self) -> list[str]:
        with self.watchdog.request():
            return self.inner.named_graphs()

    def dump(self, fmt: ox.RdfFormat, *, graph: str | None = None) -> bytes:
        with self.watchdog.request():
            return self.inner.dump(fmt, graph=graph)

    def compact(self) -> int:
        """Refused: the server's readers hold the files a compaction would replace."""
        raise MemoryLockedError("a served memory is not purged while the server runs: stop `pcm serve`, then `pcm purge`")

    def close(self) -> None:
        self.inner.close()


class PcmServer:
    """The engine, the open memory and the front, started and stopped together.

    Use :meth:`start` then :meth:`serve_forever` (the CLI), or as a context manager that serves from a thread
    (tests and benchmarks)::

        with PcmServer(settings, ServeConfig(bind="127.0.0.1:0", token="t")) as server:
            httpx.get(server.url + "/api/info")
    """

    def __init__(
        self, settings: Settings, config: ServeConfig, *, mounted: Sequence[Mounted] = (), verbose: bool = False
    ) -> None:
        self.settings = settings
        self.config = config
        self.verbose = verbose
        self.engine: Engine | None = None
        self.watchdog: Watchdog | None = None
        self.memory: Memory | None = None
        self.app: App | None = None
        self.asgi: ASGIApp | None = None
        self._mounted: list[Mounted] = list(mounted)
        self._socket: socket.socket | None = None
        self._uvicorn: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.info: ServerInfo | None = None
        self.extraction: ExtractionWorker | None = None
        """The background extraction worker, when posts are queued for extraction (``PCM_EXTRACTION``)."""
        self._private: Hold | None = None

    def mount(self, path: str, app: ASGIApp, *, lifespan: Lifespan | None = None) -> None:
        """Serve another ASGI application under ``path`` (e.g. the MCP server at ``/mcp``); call before start.

        It sits behind the same Host check, body cap and CORS rule as the front; ``lifespan`` (a function of the
        Starlette app returning an async context manager) runs while the server runs, for applications that
        need one (a session manager, a task group).
        """
        if self.asgi is not None:
            raise UsageError("mount other applications before the server starts")
        self._mounted.append(Mounted(path.rstrip("/") or "/", app, lifespan))

    @property
    def url(self) -> str:
        assert self._socket is not None, "the server is not started"
        host, port = self._socket.getsockname()[:2]
        shown = f"[{host}]" if ":" in str(host) else str(host)
        return f"http://{shown}:{port}"

    def start(self) -> None:
        """Take the store, open the memory, bind the front, then announce the server in ``serve.json``."""
        path = self.settings.memory
        self.config.check_access()  # beyond loopback, reads closed by a token or opened on purpose
        # a clear "no memory" error before anything starts; a memory on a server is served from it, never from an
        # engine over a store made here (pcm.store_binding)
        self.settings = bind(self.settings, Manifest.load(path))
        running = discover(path)
        if running is not None:
            raise MemoryLockedError(f"memory {path} is already served by pid {running.pid} at {running.url}")
        # owner-only files before the engine starts: the child inherits the umask (pcm.private)
        self._private = hold(path)
        try:
            if self.settings.store_url:
                self._open_external()
            else:
                self._start_engine(path)
                self._open_memory()
            self._bind()
        except BaseException:
            self.close()
            raise
        assert self.app is not None
        self.app.public_url = self.url
        if self.watchdog is not None:
            self.watchdog.start()
        self.info = ServerInfo(
            url=self.url,
            pid=os.getpid(),
            token_required=self.config.writable,
            memory=str(path),
            started=datetime.now(UTC).isoformat(timespec="seconds"),
            read_token=self.config.read_token if self.config.reads_need_token else "",
        )
        write_info(path, self.info)
        self._start_extraction()
        if self.settings.index_enabled:
            threading.Thread(target=self._warm_index, name="pcm-index-warmup", daemon=True).start()

    def _start_engine(self, path: Path) -> None:
        self.engine = Engine(path / STORE_DIR, timeout_s=self.config.query_timeout)
        self.engine.start()

    def _open_memory(self) -> None:
        assert self.engine is not None
        engine = self.engine
        watchdog = Watchdog(engine, grace=self.config.grace)
        upstream = Upstream(engine, watchdog)
        settings = self.settings.with_(engine_url=engine.query_url, token="")
        memory = Memory.open(settings)
        # the memory's own client to the engine gets the front's keep-alive rule (see pcm.endpoint.upstream): a
        # connection idle for the engine's timeout gets an unasked 500 and is closed
        memory.backend.close()
        client = RemoteBackend(
            engine.query_url, engine="oxigraph", timeout=max(settings.query_timeout, 30.0),
            keepalive_expiry=keepalive_expiry(engine),
        )
        guarded = GuardedBackend(client, watchdog)
        memory.backend = guarded
        memory.store.backend = guarded
        self.watchdog, self.memory = watchdog, memory
        self.app = App(self.config, memory, upstream, watchdog, public_url="http://" + self.config.bind)

    def _open_external(self) -> None:
        """Over an external store (``PCM_STORE_URL``) no engine is pcm's: the memory talks to the server as every
        command does, its server bounds runaway queries (``QueryIsolation.SERVER``), and the front answers reads
        through the memory. The token guards the front's writes; the store has its own credentials
        (PCM_STORE_USER and PCM_STORE_PASSWORD, or PCM_STORE_TOKEN)."""
        memory = Memory.open(self.settings)
        self.memory = memory
        self.app = App(self.config, memory, None, None, public_url="http://" + self.config.bind)

    def _mount_mcp(self) -> None:
        """MCP over streamable HTTP at ``/mcp``, on the open memory, sharing the front's memory lock and token.

        The front's Guard already checks the Host header against DNS rebinding, so the SDK is told the configured
        host is allowed too (it checks loopback names only by default)."""
        from pcm.mcp_server import streamable_http_app

        assert self.app is not None and self.memory is not None
        hosts = [] if self.config.loopback else [f"{self.config.host}:*"]
        mcp_app = streamable_http_app(
            self.memory, self.config.token, lock=self.app.memory_lock, path="/mcp", allowed_hosts=hosts
        )
        self._mounted.append(Mounted("/mcp", mcp_app, lambda _app: mcp_app.router.lifespan_context(mcp_app), True))

    def _bind(self) -> None:
        """Bind the socket here rather than in uvicorn: a taken port is a clear error before anything is announced,
        and port 0 is known at once."""
        host, port = self.config.host, self.config.port
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.listen(128)
        except OSError as exc:
            sock.close()
            raise UsageError(f"cannot listen on {self.config.bind}: {exc.strerror or exc}") from exc
        self._socket = sock
        assert self.app is not None
        if self.config.mcp:
            self._mount_mcp()
        self.asgi = create_app(self.app, mounted=self._mounted)
        limits = self.config
        config = uvicorn.Config(
            self.asgi,
            http=protocol_class(limits.head_timeout, limits.max_head),  # httptools, with a head deadline and cap
            log_config=None,
            log_level=logging.INFO if self.verbose else logging.WARNING,
            access_log=self.verbose,
            proxy_headers=False,
            server_header=False,
            limit_concurrency=limits.max_connections,
            timeout_keep_alive=limits.idle_timeout,
            timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
            lifespan="on",
        )
        self._uvicorn = uvicorn.Server(config)

    def _start_extraction(self) -> None:
        """Drain the extraction queue in the background when ingest queues posts (``PCM_EXTRACTION`` queued, or
        auto with a model on this machine); inline extraction and episodic mode leave the server as it was."""
        assert self.app is not None and self.memory is not None
        try:
            queued = self.memory.extraction_mode() == QUEUED
        except LLMError as exc:  # the model cannot be set up (no key, no file): serve, and say why nothing drains
            log.warning("no background extraction: %s", exc)
            return
        if queued:
            self.extraction = ExtractionWorker(self.memory, self.app.memory_lock)
            self.app.extraction = self.extraction
            self.extraction.start()

    def _warm_index(self) -> None:
        """Open the side index in the background (model load, outbox replay) so the first search is fast."""
        assert self.app is not None and self.memory is not None
        with contextlib.suppress(Exception), self.app.memory_lock:
            _ = self.memory.index

    def serve_forever(self) -> None:
        """Serve until :meth:`shutdown` (or, in the main thread, SIGINT/SIGTERM, which uvicorn handles)."""
        assert self._uvicorn is not None and self._socket is not None
        if self.verbose:
            _log_to_stderr()
        self._uvicorn.run(sockets=[self._socket])

    def shutdown(self) -> None:
        """Stop serving (callable from another thread)."""
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True

    def close(self) -> None:
        """Stop everything this server started, newest first; safe to call more than once."""
        if self.extraction is not None:  # first: it ends between two posts, while the memory is still open
            self.extraction.stop()
            self.extraction = None
        if self._thread is not None:
            self.shutdown()
            self._thread.join(timeout=10)
            self._thread = None
        self._uvicorn = None
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        if self.info is not None:
            remove_info(self.settings.memory, self.info.pid)
            self.info = None
        if self.watchdog is not None:
            self.watchdog.stop()
        if self.memory is not None:
            with contextlib.suppress(Exception):
                self.memory.close()
            self.memory = None
        if self.engine is not None:
            self.engine.stop()
            self.engine = None
        if self._private is not None:
            self._private.release()
            self._private = None

    def __enter__(self) -> PcmServer:
        self.start()
        self._thread = threading.Thread(target=self.serve_forever, name="pcm-serve", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _log_to_stderr() -> None:
    """``--verbose``: uvicorn's access log, one line per request, on stderr."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("pcm serve: %(message)s"))
    for name in ("uvicorn.access", "uvicorn.error"):
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False

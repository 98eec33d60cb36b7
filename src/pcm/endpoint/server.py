"""``pcm serve``: one process that owns the memory: the engine (a child), the front (HTTP), the open Memory.

Start-up order matters: the engine takes the store lock first (so a second server, or a CLI command holding the
store, is reported as a lock, not as a half-started server), then the Memory opens over it, then the front binds,
and only then is ``serve.json`` written, so a command that finds the file finds a server that answers.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from email.utils import formatdate
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pyoxigraph as ox

from pcm.backend import Backend, QueryResult
from pcm.endpoint.app import App, Request, Response, text_error
from pcm.endpoint.config import ServeConfig
from pcm.endpoint.discovery import ServerInfo, discover, remove_info, write_info
from pcm.endpoint.engine import Engine, Watchdog
from pcm.endpoint.timing import server_timing
from pcm.endpoint.upstream import Upstream
from pcm.errors import MemoryLockedError, QueryError, UsageError
from pcm.manifest import Manifest
from pcm.memory import STORE_DIR, Memory
from pcm.settings import Settings

#: Longest header line and most header fields accepted (the stdlib's limits).
_MAX_LINE, _MAX_HEADERS = 65536, 100
_PHRASES = {status.value: status.phrase for status in HTTPStatus}
#: Headers the handler writes itself (framing is decided by how the body is sent, not by the app).
_FRAMING = ("content-length", "transfer-encoding", "connection")
_date_cache: tuple[int, str] = (0, "")


def _http_date() -> str:
    """The ``Date`` header, formatted once per second rather than per request."""
    global _date_cache
    now = int(time.time())
    if _date_cache[0] != now:
        _date_cache = (now, formatdate(now, usegmt=True))
    return _date_cache[1]


#: Seconds a client connection may sit idle (or trickle its request) before the front closes it.
CLIENT_IDLE_S = 60


class GuardedBackend:
    """The Memory's backend inside the server: every engine call is counted by the watchdog.

    The front's own requests and the API's (ask, recall, explorer pages) reach the same engine; the watchdog can
    only tell a runaway from legitimate work if it sees all of them.
    """

    def __init__(self, inner: Backend, watchdog: Watchdog) -> None:
        self.inner = inner
        self.watchdog = watchdog

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


class _Handler(BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive; everything but framing is decided by :class:`App`."""

    protocol_version = "HTTP/1.1"
    server_version = "pcm"
    sys_version = ""
    timeout = CLIENT_IDLE_S
    #: Headers and body go out in separate writes; with Nagle on, a client's delayed ACK adds 40 ms to each answer.
    disable_nagle_algorithm = True
    server: _FrontServer

    def do_GET(self) -> None:
        self._serve()

    do_POST = do_PUT = do_DELETE = do_HEAD = do_OPTIONS = do_PATCH = do_GET

    def parse_request(self) -> bool:
        """Read the request line and headers; the clock starts here (from now on the time is the front's).

        An ordinary HTTP/1.x request line takes a lean path that reads the header lines into a
        :class:`_CaseInsensitive` dict: the stdlib parses them with the email package, which cost more than the
        rest of the front's work on a query. Anything unusual goes to the stdlib parser unchanged.
        """
        self._started_ns = time.perf_counter_ns()
        words = self.raw_requestline.split()
        if len(words) != 3 or words[2] not in (b"HTTP/1.1", b"HTTP/1.0"):
            return super().parse_request()
        self.requestline = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        self.command, self.path, self.request_version = (str(w, "iso-8859-1") for w in words)
        if self.path.startswith("//"):
            self.path = "/" + self.path.lstrip("/")  # as the stdlib does (gh-87389: no open redirect)
        pairs = self._header_lines()
        if pairs is None:
            return False
        self.headers = _CaseInsensitive(pairs)  # type: ignore[assignment]
        connection = (self.headers.get("Connection") or "").lower()
        self.close_connection = connection == "close" or (self.request_version == "HTTP/1.0" and connection != "keep-alive")
        expect = (self.headers.get("Expect") or "").lower()
        if expect == "100-continue" and self.request_version == "HTTP/1.1":
            return self.handle_expect_100()
        return True

    def _header_lines(self) -> list[tuple[str, str]] | None:
        """The header fields as (name, value); folded lines continue the previous value. None: refused (431)."""
        pairs: list[tuple[str, str]] = []
        while True:
            line = self.rfile.readline(_MAX_LINE + 1)
            if len(line) > _MAX_LINE:
                self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Line too long")
                return None
            if line in (b"\r\n", b"\n", b""):
                return pairs
            if len(pairs) >= _MAX_HEADERS:
                self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Too many headers")
                return None
            text = str(line, "iso-8859-1")
            if text[0] in " \t" and pairs:
                name, value = pairs[-1]
                pairs[-1] = (name, f"{value} {text.strip()}".strip())
                continue
            name, _, value = text.partition(":")
            pairs.append((name.strip(), value.strip()))

    def _serve(self) -> None:
        app = self.server.app
        split = urlsplit(self.path)
        headers_ci = self.headers if isinstance(self.headers, _CaseInsensitive) else _CaseInsensitive(self.headers.items())
        response = app.preflight(self.command, split.path, headers_ci)
        if response is None:
            body = self._read_body(app.config.max_body)
            if isinstance(body, Response):
                response = body
            else:
                params = parse_qsl(split.query, keep_blank_values=True)
                response = app.handle(Request(self.command, split.path, params, headers_ci, body))
        response = app.decorate(headers_ci, response)
        if response.engine_ns:
            front_ns = time.perf_counter_ns() - self._started_ns - response.engine_ns
            response.headers["Server-Timing"] = server_timing(front_ns, response.engine_ns)
        self._send(response)
        if response.engine_ns:
            app.timings.record(time.perf_counter_ns() - self._started_ns - response.engine_ns, response.engine_ns)

    def _read_body(self, limit: int) -> bytes | Response:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            return self._read_chunked(limit)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _read_chunked(self, limit: int) -> bytes | Response:
        parts: list[bytes] = []
        size = 0
        while True:
            line = self.rfile.readline(1024)
            try:
                n = int(line.split(b";")[0].strip(), 16)
            except ValueError:
                return Response(400, {"Content-Type": "text/plain"}, b"malformed chunked body\n", close=True)
            if n == 0:
                while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(parts)
            size += n
            if size > limit:
                return replace_close(text_error(413, f"request body too large: the limit is {limit} bytes"))
            parts.append(self.rfile.read(n))
            self.rfile.readline(1024)

    def _send(self, response: Response) -> None:
        """Write the status line, headers and a complete body in one ``sendall``.

        ``send_response``/``send_header`` would cost a write for the head and another for the body, and every
        socket call gives up the GIL that the other handler threads are waiting for.
        """
        try:
            body = response.body
            streamed = not isinstance(body, bytes)
            lines = [
                f"HTTP/1.1 {response.status} {_PHRASES.get(response.status, '')}",
                f"Server: {self.server_version}",
                f"Date: {_http_date()}",
            ]
            lines += [f"{k}: {v}" for k, v in response.headers.items() if k.lower() not in _FRAMING]
            if response.close:
                lines.append("Connection: close")
                self.close_connection = True
            if streamed:
                lines.append("Transfer-Encoding: chunked")
            else:
                length = len(body) if self.command != "HEAD" or body else 0  # type: ignore[arg-type]
                lines.append(f"Content-Length: {length}")
            head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "strict")
            if self.server.app.verbose:
                self.log_request(response.status, "-" if streamed else len(body))  # type: ignore[arg-type]
            if self.command == "HEAD" or (not streamed and not body):
                self.wfile.write(head)
            elif streamed:
                self.wfile.write(head)
                self._send_chunked(body)  # type: ignore[arg-type]
            else:
                self.wfile.write(head + body)  # type: ignore[operator]
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            self.close_connection = True
        finally:
            if response.on_done is not None:
                response.on_done()

    def _send_chunked(self, pieces: Iterator[bytes]) -> None:
        try:
            for piece in pieces:
                if piece:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
        except Exception:
            self.close_connection = True  # the answer is cut: the client must not read it as complete
            raise

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the stdlib's name)
        if self.server.app.verbose:
            sys.stderr.write(f"pcm serve: {self.address_string()} {format % args}\n")


def replace_close(response: Response) -> Response:
    response.close = True
    return response


class _CaseInsensitive(dict[str, str]):
    """Header lookup by any case (``Content-Type`` / ``content-type``); a repeated header keeps its last value."""

    def __init__(self, headers: Iterable[tuple[str, str]]) -> None:
        super().__init__((k.lower(), v) for k, v in headers)

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        return super().get(key.lower(), default)

    def __getitem__(self, key: str) -> str:
        return super().__getitem__(key.lower())

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and super().__contains__(key.lower())


class _FrontServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], app: App | None) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)
        self.app: App = app  # type: ignore[assignment]


class PcmServer:
    """The engine, the open memory and the front, started and stopped together.

    Use :meth:`start` then :meth:`serve_forever` (the CLI), or as a context manager that serves from a thread
    (tests and benchmarks)::

        with PcmServer(settings, ServeConfig(bind="127.0.0.1:0", token="t")) as server:
            httpx.get(server.url + "/api/info")
    """

    def __init__(self, settings: Settings, config: ServeConfig) -> None:
        if settings.store_url:
            raise UsageError("pcm serve serves a local memory: unset PCM_STORE_URL")
        self.settings = settings
        self.config = config
        self.engine: Engine | None = None
        self.watchdog: Watchdog | None = None
        self.memory: Memory | None = None
        self.app: App | None = None
        self._httpd: _FrontServer | None = None
        self._thread: threading.Thread | None = None
        self.info: ServerInfo | None = None

    @property
    def url(self) -> str:
        assert self._httpd is not None, "the server is not started"
        host, port = self._httpd.server_address[:2]
        shown = f"[{host}]" if ":" in str(host) else str(host)
        return f"http://{shown}:{port}"

    def start(self) -> None:
        """Take the store, open the memory, bind the front, then announce the server in ``serve.json``."""
        path = self.settings.memory
        Manifest.load(path)  # a clear "no memory" error before anything starts
        running = discover(path)
        if running is not None:
            raise MemoryLockedError(f"memory {path} is already served by pid {running.pid} at {running.url}")
        try:
            self._start_engine(path)
            self._open_memory()
            self._bind()
        except BaseException:
            self.close()
            raise
        assert self.app is not None and self.watchdog is not None
        self.app.public_url = self.url
        self.app.explorer.timeout = self.config.query_timeout
        self.watchdog.start()
        self.info = ServerInfo(
            url=self.url,
            pid=os.getpid(),
            token_required=self.config.writable,
            memory=str(path),
            started=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        write_info(path, self.info)
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
        watchdog.on_restart = upstream.reset
        memory = Memory.open(self.settings.with_(store_url=engine.query_url, token=""))
        guarded = GuardedBackend(memory.backend, watchdog)
        memory.backend = guarded  # type: ignore[assignment]
        memory.store.backend = guarded  # type: ignore[assignment]
        self.watchdog, self.memory = watchdog, memory
        self.app = App(self.config, memory, upstream, watchdog, public_url="http://" + self.config.bind)

    def _bind(self) -> None:
        try:
            self._httpd = _FrontServer((self.config.host, self.config.port), self.app)
        except OSError as exc:
            raise UsageError(f"cannot listen on {self.config.bind}: {exc.strerror or exc}") from exc

    def _warm_index(self) -> None:
        """Open the side index in the background (model load, outbox replay) so the first search is fast."""
        assert self.app is not None and self.memory is not None
        with contextlib.suppress(Exception), self.app.memory_lock:
            _ = self.memory.index

    def serve_forever(self) -> None:
        assert self._httpd is not None
        self._httpd.serve_forever(poll_interval=0.2)

    def shutdown(self) -> None:
        """Stop serving (callable from another thread or a signal handler's thread)."""
        if self._httpd is not None:
            self._httpd.shutdown()

    def close(self) -> None:
        """Stop everything this server started, newest first; safe to call more than once."""
        if self._thread is not None:
            self.shutdown()
            self._thread.join(timeout=10)
            self._thread = None
        if self._httpd is not None:
            self._httpd.server_close()
            self._httpd = None
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

    def __enter__(self) -> PcmServer:
        self.start()
        self._thread = threading.Thread(target=self.serve_forever, name="pcm-serve", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""The front's connection to the engine: pooled keep-alive HTTP/1.1 with a deadline on every read.

A small HTTP/1.1 client on plain sockets rather than ``http.client`` or httpx, because this is the hot path of
every query and because the time limit must hold while an answer streams in. Per request it makes one ``sendall``
(head and body together), reads with ``recv`` into its own buffer, and touches the socket timeout only when the
time left has drifted more than :data:`SLACK_S` from the timeout already set: every socket call releases and
retakes the GIL, which under concurrent load costs more than the call itself (``http.client`` made ~15 such
calls per query, two email-parser header parses and a ``settimeout`` per chunk). A query is still dropped at its
deadline (within ``SLACK_S``) even if rows trickle in. Dropping the connection is what makes Oxigraph stop a
streaming query; the :class:`Watchdog` deals with the queries that do not stop.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass

from pcm.endpoint.engine import Engine, Watchdog

#: Largest piece read from the engine at once.
CHUNK = 64 * 1024
#: Stall limit for streamed Graph Store reads, which have no overall deadline (a dump may be large).
STREAM_STALL_S = 120.0
#: How far past its deadline a read may block before the socket timeout is tightened again.
SLACK_S = 0.05
#: Longest status line plus headers accepted from the engine.
MAX_HEAD = 64 * 1024


class TimeLimit(Exception):
    """The engine did not finish within the deadline (the request was dropped)."""


class TooLarge(Exception):
    """The engine's answer grew past the result-size cap (the request was dropped)."""


class EngineUnavailable(Exception):
    """The engine could not be reached (it may be restarting)."""


class _Closed(EngineUnavailable):
    """The engine closed the connection before a byte of the answer came: a stale pooled connection."""


@dataclass
class Answer:
    """A complete answer from the engine."""

    status: int
    headers: dict[str, str]
    body: bytes
    #: Nanoseconds from sending the request to the last byte of the answer (the engine's share of a request).
    engine_ns: int = 0

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")


class _Connection:
    """One keep-alive socket to the engine with its receive buffer and the timeout currently set on it."""

    def __init__(self, port: int, timeout: float) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self.buffer = bytearray()
        self.received = 0  # bytes received for the current answer (0: the engine has not answered yet)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def send(self, data: bytes) -> None:
        self.received = 0
        self.buffer.clear()
        self.sock.sendall(data)

    def fill(self, deadline: float | None) -> None:
        """Receive more bytes into the buffer; TimeoutError at the deadline, _Closed/EngineUnavailable on EOF."""
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            if abs(self.timeout - left) > SLACK_S:
                self.sock.settimeout(left)
                self.timeout = left
        data = self.sock.recv(CHUNK)
        if not data:
            if self.received == 0:
                raise _Closed("the engine closed the connection")
            raise EngineUnavailable("the engine closed the connection mid-answer")
        self.received += len(data)
        self.buffer += data

    def take(self, n: int) -> bytes:
        piece = bytes(self.buffer[:n])
        del self.buffer[:n]
        return piece

    def line(self, deadline: float | None) -> bytes:
        """One CRLF-terminated line (without the CRLF)."""
        while True:
            end = self.buffer.find(b"\r\n")
            if end >= 0:
                line = self.take(end)
                del self.buffer[:2]
                return line
            if len(self.buffer) > MAX_HEAD:
                raise EngineUnavailable("the engine sent an over-long line")
            self.fill(deadline)


@dataclass
class _Head:
    status: int
    headers: dict[str, str]
    will_close: bool


def _read_head(conn: _Connection, deadline: float | None) -> _Head:
    """Status line and headers (interim 1xx answers skipped); header names in lower case."""
    while True:
        while (end := conn.buffer.find(b"\r\n\r\n")) < 0:
            if len(conn.buffer) > MAX_HEAD:
                raise EngineUnavailable("the engine sent an over-long header")
            conn.fill(deadline)
        lines = conn.take(end).decode("latin-1").split("\r\n")
        del conn.buffer[:4]
        version, _, rest = lines[0].partition(" ")
        try:
            status = int(rest[:3])
        except ValueError:
            raise EngineUnavailable(f"the engine sent a malformed status line: {lines[0][:80]!r}") from None
        if 100 <= status < 200:
            continue
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            key = name.strip().lower()
            headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
        connection = headers.get("connection", "").lower()
        will_close = "close" in connection or (version == "HTTP/1.0" and "keep-alive" not in connection)
        return _Head(status, headers, will_close)


class _Body:
    """The body of one answer, read piece by piece: chunked, by Content-Length, or until the engine closes."""

    def __init__(self, conn: _Connection, head: _Head, method: str) -> None:
        self.conn = conn
        headers = head.headers
        self.chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        self.left: int | None = None  # bytes left in the current chunk, or of a Content-Length body
        self.until_close = False
        self.done = method == "HEAD" or head.status in (204, 304)
        if not self.done and not self.chunked:
            if "content-length" in headers:
                self.left = int(headers["content-length"])
                self.done = self.left == 0
            else:
                self.until_close = True
        self.reusable = not head.will_close and not self.until_close

    def pieces(self, deadline: float | None) -> Iterator[bytes]:
        conn = self.conn
        while not self.done:
            if self.chunked and not self.left:
                size = conn.line(deadline).split(b";", 1)[0].strip()
                try:
                    self.left = int(size, 16)
                except ValueError:
                    raise EngineUnavailable("the engine sent a malformed chunk") from None
                if self.left == 0:
                    while conn.line(deadline):  # trailers, up to the empty line
                        pass
                    self.done = True
                    return
            if not conn.buffer:
                try:
                    conn.fill(deadline)
                except EngineUnavailable:
                    if self.until_close:
                        self.done = True
                        return
                    raise
            if self.left is None:  # until close
                yield conn.take(len(conn.buffer))
                continue
            piece = conn.take(min(self.left, len(conn.buffer)))
            self.left -= len(piece)
            if self.left == 0:
                if self.chunked:
                    while len(conn.buffer) < 2:
                        conn.fill(deadline)
                    del conn.buffer[:2]
                else:
                    self.done = True
            if piece:
                yield piece


class Upstream:
    """Requests to the engine at ``127.0.0.1:port``, counted by the watchdog while they run."""

    def __init__(self, engine: Engine, watchdog: Watchdog, *, pool_size: int = 16) -> None:
        self._engine = engine
        self._watchdog = watchdog
        self._pool: queue.LifoQueue[_Connection] = queue.LifoQueue(maxsize=pool_size)

    # -- connections ---------------------------------------------------------------------------------------------

    def _take(self, timeout: float) -> tuple[_Connection, bool]:
        """A pooled connection (reused=True) or a new one."""
        try:
            return self._pool.get_nowait(), True
        except queue.Empty:
            pass
        try:
            return _Connection(self._engine.port, timeout), False
        except TimeoutError as exc:
            raise TimeLimit() from exc
        except OSError as exc:
            raise EngineUnavailable(str(exc) or type(exc).__name__) from exc

    def _give_back(self, conn: _Connection) -> None:
        try:
            self._pool.put_nowait(conn)
        except queue.Full:
            conn.close()

    def reset(self) -> None:
        """Forget every pooled connection (after the engine restarted, they are all dead)."""
        while True:
            try:
                self._pool.get_nowait().close()
            except queue.Empty:
                return

    def _request_bytes(self, method: str, target: str, body: bytes | None, headers: dict[str, str]) -> bytes:
        lines = [f"{method} {target} HTTP/1.1", f"Host: 127.0.0.1:{self._engine.port}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body or b'')}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")

    def _open(
        self, method: str, target: str, body: bytes | None, headers: dict[str, str], deadline: float | None,
        timeout: float,
    ) -> tuple[_Connection, _Head]:
        """Send a request and read the answer's head; a stale pooled connection is replaced once."""
        data = self._request_bytes(method, target, body, headers)
        for attempt in (0, 1):
            conn, reused = self._take(timeout)
            try:
                if deadline is None and conn.timeout != timeout:  # a stall limit instead of a deadline
                    conn.sock.settimeout(timeout)
                    conn.timeout = timeout
                conn.send(data)
                return conn, _read_head(conn, deadline)
            except TimeoutError as exc:
                conn.close()
                raise TimeLimit() from exc
            except (_Closed, ConnectionResetError, BrokenPipeError, ConnectionAbortedError) as exc:
                conn.close()
                if reused and attempt == 0 and conn.received == 0:
                    continue
                raise EngineUnavailable(str(exc) or type(exc).__name__) from exc
            except OSError as exc:
                conn.close()
                raise EngineUnavailable(str(exc) or type(exc).__name__) from exc
            except EngineUnavailable:
                conn.close()
                raise
        raise AssertionError("unreachable")

    # -- requests --------------------------------------------------------------------------------------------

    def fetch(
        self,
        method: str,
        target: str,
        *,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        timeout: float,
        max_bytes: int | None = None,
    ) -> Answer:
        """Send a request and read the whole answer, within ``timeout`` seconds and ``max_bytes`` bytes."""
        started = time.perf_counter_ns()
        deadline = time.monotonic() + timeout
        with self._watchdog.request():
            try:
                conn, head = self._open(method, target, body, headers or {}, deadline, timeout)
            except TimeLimit:
                self._watchdog.abandoned()
                raise
            answer = _Body(conn, head, method)
            try:
                data = self._read_all(answer, deadline, max_bytes)
            except (TimeLimit, TooLarge):
                conn.close()
                self._watchdog.abandoned()
                raise
            except OSError as exc:
                conn.close()
                raise EngineUnavailable(str(exc) or type(exc).__name__) from exc
            except EngineUnavailable:
                conn.close()
                raise
            self._finish(answer)
            return Answer(head.status, head.headers, data, time.perf_counter_ns() - started)

    def _finish(self, body: _Body) -> None:
        """Return a connection whose answer was read to the end to the pool (or close it)."""
        if body.done and body.reusable and not body.conn.buffer:
            self._give_back(body.conn)
        else:
            body.conn.close()

    @staticmethod
    def _read_all(body: _Body, deadline: float, max_bytes: int | None) -> bytes:
        parts: list[bytes] = []
        size = 0
        try:
            for piece in body.pieces(deadline):
                size += len(piece)
                if max_bytes is not None and size > max_bytes:
                    raise TooLarge()
                parts.append(piece)
        except TimeoutError as exc:
            raise TimeLimit() from exc
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def stream(
        self,
        method: str,
        target: str,
        *,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Streamed:
        """Send a request and return its answer while the body is still coming (for large Graph Store reads).

        The request counts as in flight until the :class:`Streamed` is closed. There is no overall deadline (a
        dump may be large), only a stall limit per read.
        """
        counted = self._watchdog.request()
        counted.__enter__()
        try:
            conn, head = self._open(method, target, body, headers or {}, None, STREAM_STALL_S)
        except BaseException:
            counted.__exit__(None, None, None)
            raise
        return Streamed(self, _Body(conn, head, method), head, counted)


class Streamed:
    """An answer from the engine whose body is read piece by piece; close it (or read it all) when done."""

    def __init__(
        self, upstream: Upstream, body: _Body, head: _Head, counted: contextlib.AbstractContextManager[int]
    ) -> None:
        self.status = head.status
        self.headers = head.headers
        self._upstream = upstream
        self._body = body
        self._counted: contextlib.AbstractContextManager[int] | None = counted

    def pieces(self) -> Iterator[bytes]:
        """The body as it arrives; the answer is closed when the iteration ends, however it ends."""
        try:
            try:
                yield from self._body.pieces(None)
            except OSError as exc:
                raise EngineUnavailable(str(exc) or type(exc).__name__) from exc
        finally:
            self.close()

    def read(self) -> bytes:
        return b"".join(self.pieces())

    def close(self) -> None:
        if self._counted is None:
            return
        self._upstream._finish(self._body)
        self._counted.__exit__(None, None, None)
        self._counted = None

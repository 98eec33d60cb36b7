"""The front's connection to the engine: pooled keep-alive HTTP with a deadline on every read.

A plain ``http.client`` pool rather than httpx because the time limit must hold while an answer streams in: the
socket timeout is set to the time left before every read, so a query is dropped at its deadline even if rows
trickle in. Dropping the connection is what makes Oxigraph stop a streaming query; the :class:`Watchdog` deals
with the queries that do not stop.
"""

from __future__ import annotations

import contextlib
import http.client
import queue
import time
from collections.abc import Iterator
from dataclasses import dataclass

from pcm.endpoint.engine import Engine, Watchdog

#: Largest piece read from the engine at once.
CHUNK = 64 * 1024
#: Stall limit for streamed Graph Store reads, which have no overall deadline (a dump may be large).
STREAM_STALL_S = 120.0
_RETRYABLE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


class TimeLimit(Exception):
    """The engine did not finish within the deadline (the request was dropped)."""


class TooLarge(Exception):
    """The engine's answer grew past the result-size cap (the request was dropped)."""


class EngineUnavailable(Exception):
    """The engine could not be reached (it may be restarting)."""


@dataclass
class Answer:
    """A complete answer from the engine."""

    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")


class Upstream:
    """Requests to the engine at ``127.0.0.1:port``, counted by the watchdog while they run."""

    def __init__(self, engine: Engine, watchdog: Watchdog, *, pool_size: int = 16) -> None:
        self._engine = engine
        self._watchdog = watchdog
        self._pool: queue.LifoQueue[http.client.HTTPConnection] = queue.LifoQueue(maxsize=pool_size)

    # -- connections ---------------------------------------------------------------------------------------------

    def _take(self) -> tuple[http.client.HTTPConnection, bool]:
        """A pooled connection (reused=True) or a new one."""
        try:
            return self._pool.get_nowait(), True
        except queue.Empty:
            return http.client.HTTPConnection("127.0.0.1", self._engine.port, timeout=30), False

    def _give_back(self, conn: http.client.HTTPConnection) -> None:
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

    def _open(
        self, method: str, target: str, body: bytes | None, headers: dict[str, str], timeout: float
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Send a request and read the status line; a dead pooled connection is replaced once."""
        for attempt in (0, 1):
            conn, reused = self._take()
            try:
                conn.timeout = max(timeout, 0.001)
                if conn.sock is not None:
                    conn.sock.settimeout(conn.timeout)
                conn.request(method, target, body=body, headers=headers)
                return conn, conn.getresponse()
            except _RETRYABLE as exc:
                conn.close()
                if reused and attempt == 0:
                    continue
                raise EngineUnavailable(str(exc) or type(exc).__name__) from exc
            except TimeoutError as exc:
                conn.close()
                raise TimeLimit() from exc
            except OSError as exc:
                conn.close()
                raise EngineUnavailable(str(exc) or type(exc).__name__) from exc
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
        deadline = time.monotonic() + timeout
        with self._watchdog.request():
            try:
                conn, response = self._open(method, target, body, headers or {}, timeout)
            except TimeLimit:
                self._watchdog.abandoned()
                raise
            try:
                data = self._read_all(conn, response, deadline, max_bytes)
            except (TimeLimit, TooLarge):
                conn.close()
                self._watchdog.abandoned()
                raise
            except OSError as exc:
                conn.close()
                raise EngineUnavailable(str(exc) or type(exc).__name__) from exc
            self._finish(conn, response)
            return Answer(response.status, _headers(response), data)

    def _finish(self, conn: http.client.HTTPConnection, response: http.client.HTTPResponse) -> None:
        """Return a connection whose answer was read to the end to the pool (or close it)."""
        will_close = response.will_close
        response.close()  # marks the answer done, so the connection takes a new request
        if will_close:
            conn.close()
        else:
            self._give_back(conn)

    def _read_all(
        self,
        conn: http.client.HTTPConnection,
        response: http.client.HTTPResponse,
        deadline: float,
        max_bytes: int | None,
    ) -> bytes:
        parts: list[bytes] = []
        size = 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeLimit()
            if conn.sock is not None:
                conn.sock.settimeout(left)
            try:
                chunk = response.read1(CHUNK)
            except TimeoutError as exc:
                raise TimeLimit() from exc
            if not chunk:
                return b"".join(parts)
            size += len(chunk)
            if max_bytes is not None and size > max_bytes:
                raise TooLarge()
            parts.append(chunk)

    def stream(
        self,
        method: str,
        target: str,
        *,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Streamed:
        """Send a request and return its answer while the body is still coming (for large Graph Store reads).

        The request counts as in flight until the :class:`Streamed` is closed.
        """
        counted = self._watchdog.request()
        counted.__enter__()
        try:
            conn, response = self._open(method, target, body, headers or {}, STREAM_STALL_S)
        except BaseException:
            counted.__exit__(None, None, None)
            raise
        return Streamed(self, conn, response, counted)


class Streamed:
    """An answer from the engine whose body is read piece by piece; close it (or read it all) when done."""

    def __init__(
        self,
        upstream: Upstream,
        conn: http.client.HTTPConnection,
        response: http.client.HTTPResponse,
        counted: contextlib.AbstractContextManager[int],
    ) -> None:
        self.status = response.status
        self.headers = _headers(response)
        self._upstream = upstream
        self._conn = conn
        self._response = response
        self._counted: contextlib.AbstractContextManager[int] | None = counted
        self._complete = False

    def pieces(self) -> Iterator[bytes]:
        """The body as it arrives; the answer is closed when the iteration ends, however it ends."""
        try:
            while True:
                try:
                    chunk = self._response.read1(CHUNK)
                except OSError as exc:
                    raise EngineUnavailable(str(exc) or type(exc).__name__) from exc
                if not chunk:
                    self._complete = True
                    return
                yield chunk
        finally:
            self.close()

    def read(self) -> bytes:
        return b"".join(self.pieces())

    def close(self) -> None:
        if self._counted is None:
            return
        if self._complete:
            self._upstream._finish(self._conn, self._response)
        else:
            self._conn.close()
        self._counted.__exit__(None, None, None)
        self._counted = None


def _headers(response: http.client.HTTPResponse) -> dict[str, str]:
    return {k.lower(): v for k, v in response.getheaders()}


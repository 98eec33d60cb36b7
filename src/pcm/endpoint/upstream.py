"""The front's client to the engine (httpx), with the rules that make reusing a connection safe.

Oxigraph's server drops a keep-alive connection that has been idle for its ``--timeout-s``, and it does so by
writing an unasked ``500 Resource temporarily unavailable`` on it and closing. A client that reuses such a
connection reads that 500 as the answer to its own request: a read fails for nothing, and an update is never
applied. So:

* reads (queries, Graph Store reads) share a pool whose keep-alive expiry is half the engine's idle timeout: a
  pooled connection is never one the engine is about to drop (and a connection on which anything arrives while it
  is idle, an unasked answer or an end of stream, is closed at once and never reused). A read that still fails
  before its answer began is sent once more: a read is safe to repeat.
* writes (updates, Graph Store writes) each go on a new connection: a new connection cannot be one the engine
  dropped, so a write that fails after it was sent failed in the engine, and it is reported as not confirmed
  (:class:`WriteUnconfirmed`) instead of being sent again blindly. A write that could not be sent at all (no
  connection) is retried by the transport, since nothing reached the engine.

Queries and other whole reads (:meth:`Upstream.fetch`) go through :class:`_ReadPool`, connections of our own
parsed by h11 (the HTTP/1.1 state machine httpcore itself uses): httpx's pool and request bookkeeping cost more
CPU per query than the front's own rules, and made ``pcm serve`` answer a fraction of the bare engine's queries
per second (figures in docs/benchmarks.md). Writes and streamed reads, rare and large, keep httpx.

Every request is counted by the :class:`~pcm.endpoint.engine.Watchdog` while it runs, and given up at its deadline
(``TimeLimit``, the connection is closed, which stops a streaming query in the engine) or at the result-size cap.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol, cast

import h11
import httpx

#: Stall limit for streamed Graph Store reads, which have no overall deadline (a dump may be large).
STREAM_STALL_S = 120.0
#: Keep-alive expiry when the engine's idle timeout is not known.
DEFAULT_KEEPALIVE_S = 1.0
#: Engine URLs kept parsed (targets differ only by the protocol's dataset parameters).
URL_CACHE = 256
#: Attempts to open a connection before the engine is reported unavailable (nothing was sent).
CONNECT_RETRIES = 2
#: Pause before the second and later attempts to connect.
CONNECT_BACKOFF_S = 0.5


class TimeLimit(Exception):
    """The engine did not finish within the deadline (the request was dropped)."""


class TooLarge(Exception):
    """The engine's answer grew past the result-size cap (the request was dropped)."""


class EngineUnavailable(Exception):
    """The engine could not be reached, or dropped a read (it may be restarting). Nothing was written."""


class WriteUnconfirmed(EngineUnavailable):
    """A write reached the engine but no answer came back: it may or may not have been applied."""


class _Engine(Protocol):
    port: int

    @property
    def idle_timeout_s(self) -> float | None: ...


class _Watchdog(Protocol):
    def arequest(self) -> contextlib.AbstractAsyncContextManager[int]: ...

    def abandoned(self) -> None: ...


@dataclass
class Answer:
    """A complete answer from the engine."""

    status: int
    headers: httpx.Headers
    body: bytes
    #: Nanoseconds from sending the request to the last byte of the answer (the engine's share of a request).
    engine_ns: int = 0

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")


def keepalive_expiry(engine: _Engine) -> float:
    """How long a pooled connection to ``engine`` may stay idle: well inside the engine's own idle timeout."""
    idle = getattr(engine, "idle_timeout_s", None)
    return idle / 2 if idle else DEFAULT_KEEPALIVE_S


class Upstream:
    """Requests to the engine at ``127.0.0.1:port`` from the front's event loop."""

    def __init__(self, engine: _Engine, watchdog: _Watchdog, *, pool_size: int = 16) -> None:
        self._engine = engine
        self._watchdog = watchdog
        self._urls: dict[tuple[int, str], httpx.URL] = {}
        # The transports are used directly: the client layer above them (cookies, redirects, auth, event hooks)
        # has nothing to do between the front and its engine, and it cost more CPU per request than the front's
        # own rules. Deadlines are enforced around the whole exchange (asyncio.timeout), not per socket operation.
        self._reads = httpx.AsyncHTTPTransport(
            limits=httpx.Limits(
                max_connections=4 * pool_size, max_keepalive_connections=pool_size,
                keepalive_expiry=keepalive_expiry(engine),
            ),
            retries=CONNECT_RETRIES,
        )
        self._writes = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_keepalive_connections=0), retries=CONNECT_RETRIES)
        self._pool = _ReadPool(engine, idle=pool_size, most=4 * pool_size)

    async def aclose(self) -> None:
        self._pool.close()
        await self._reads.aclose()
        await self._writes.aclose()

    def _url(self, target: str) -> httpx.URL:
        """The engine URL for ``target``, parsed once per target and port (parsing cost more than the rules)."""
        key = (self._engine.port, target)
        url = self._urls.get(key)
        if url is None:
            if len(self._urls) >= URL_CACHE:
                self._urls.clear()
            url = self._urls[key] = httpx.URL(f"http://127.0.0.1:{key[0]}{target}")
        return url

    async def _send(
        self, method: str, target: str, body: bytes | None, headers: dict[str, str] | None, *, write: bool,
        stall: float | None = None,
    ) -> httpx.Response:
        """Send a request and return the answer as soon as its head arrived (the body is still to be read)."""
        transport = self._writes if write else self._reads
        fields = {"Host": f"127.0.0.1:{self._engine.port}", "Accept-Encoding": "identity", **(headers or {})}
        if write:  # a connection of its own, closed by both sides after the answer
            fields["Connection"] = "close"
        timeout = {"connect": 5.0, "read": stall, "write": stall, "pool": stall}
        for attempt in (0, 1):
            request = httpx.Request(method, self._url(target), content=body, headers=fields, extensions={"timeout": timeout})
            try:
                return await transport.handle_async_request(request)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                raise EngineUnavailable(f"cannot connect to the engine: {exc or type(exc).__name__}") from exc
            except httpx.TimeoutException as exc:  # only a stall limit (streamed reads) gets here
                raise TimeLimit() from exc
            except httpx.TransportError as exc:
                if write:
                    raise WriteUnconfirmed(
                        f"the engine dropped the connection before answering ({type(exc).__name__}): the write was "
                        "sent but not confirmed; check whether it was applied before sending it again"
                    ) from exc
                if attempt == 0:
                    continue  # a read is safe to send again
                raise EngineUnavailable(f"the engine dropped the connection: {exc or type(exc).__name__}") from exc
        raise AssertionError("unreachable")

    async def fetch(
        self,
        method: str,
        target: str,
        *,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        timeout: float,
        max_bytes: int | None = None,
        write: bool = False,
    ) -> Answer:
        """Send a request and read the whole answer, within ``timeout`` seconds and ``max_bytes`` bytes.

        ``write`` says the request changes the store (see the module's rules on what may be sent again).
        """
        started = time.perf_counter_ns()
        if not write:
            return await self._fetch_read(method, target, body, headers, timeout, max_bytes, started)
        async with self._held(timeout):
            response = await self._send(method, target, body, headers, write=write)
            try:
                data = await self._read_all(response, max_bytes, write=write)
            finally:
                await response.aclose()
        return Answer(response.status_code, response.headers, data, time.perf_counter_ns() - started)

    @contextlib.asynccontextmanager
    async def _held(self, timeout: float) -> AsyncIterator[None]:
        """A request counted in flight and held to ``timeout``: past it, or past the size cap, the answer is
        abandoned, which the watchdog hears of (the engine may still be computing it)."""
        async with self._watchdog.arequest():
            try:
                async with asyncio.timeout(timeout):
                    yield
            except (TimeoutError, TimeLimit):
                self._watchdog.abandoned()
                raise TimeLimit() from None
            except TooLarge:
                self._watchdog.abandoned()
                raise

    async def _fetch_read(
        self,
        method: str,
        target: str,
        body: bytes | None,
        headers: dict[str, str] | None,
        timeout: float,
        max_bytes: int | None,
        started: int,
    ) -> Answer:
        """:meth:`fetch` of a read, through the pool of our own connections."""
        fields = [("Host", f"127.0.0.1:{self._engine.port}"), ("Accept-Encoding", "identity")]
        if headers:
            fields += headers.items()
        if body is not None:
            fields.append(("Content-Length", str(len(body))))
        async with self._held(timeout):
            status, head, data = await self._pool.exchange(method, target, fields, body, max_bytes)
        return Answer(status, httpx.Headers(head), data, time.perf_counter_ns() - started)

    @staticmethod
    async def _read_all(response: httpx.Response, max_bytes: int | None, *, write: bool) -> bytes:
        parts: list[bytes] = []
        size = 0
        try:
            async for piece in response.aiter_raw():
                size += len(piece)
                if max_bytes is not None and size > max_bytes:
                    raise TooLarge()
                parts.append(piece)
        except httpx.TransportError as exc:
            if write:  # the status came: the engine said what happened to the write; only its message is cut
                return b"".join(parts)
            raise EngineUnavailable(f"the engine dropped the connection mid-answer: {exc or type(exc).__name__}") from exc
        return parts[0] if len(parts) == 1 else b"".join(parts)

    async def stream(self, method: str, target: str, *, headers: dict[str, str] | None = None) -> Streamed:
        """Send a read and return its answer while the body is still coming (for large Graph Store reads).

        The request counts as in flight until the :class:`Streamed` is closed. There is no overall deadline (a
        dump may be large), only a stall limit per read.
        """
        counted = self._watchdog.arequest()
        await counted.__aenter__()
        try:
            response = await self._send(method, target, None, headers, write=False, stall=STREAM_STALL_S)
        except BaseException:
            await counted.__aexit__(None, None, None)
            raise
        return Streamed(response, counted)


class Streamed:
    """An answer from the engine whose body is read piece by piece; close it (or read it all) when done."""

    def __init__(self, response: httpx.Response, counted: contextlib.AbstractAsyncContextManager[int]) -> None:
        self.status = response.status_code
        self.headers = response.headers
        self._response = response
        self._counted: contextlib.AbstractAsyncContextManager[int] | None = counted

    async def pieces(self) -> AsyncIterator[bytes]:
        """The body as it arrives; the answer is closed when the iteration ends, however it ends."""
        try:
            async for piece in self._response.aiter_raw():
                yield piece
        except httpx.TimeoutException as exc:
            raise TimeLimit() from exc
        except httpx.TransportError as exc:
            raise EngineUnavailable(f"the engine dropped the connection mid-answer: {exc}") from exc
        finally:
            await self.aclose()

    async def read(self) -> bytes:
        return b"".join([piece async for piece in self.pieces()])

    async def aclose(self) -> None:
        if self._counted is None:
            return
        counted, self._counted = self._counted, None
        try:
            await self._response.aclose()
        finally:
            await counted.__aexit__(None, None, None)


class _Dropped(Exception):
    """The connection ended (or broke the protocol) before the answer was complete."""

    def __init__(self, message: str, *, answer_began: bool) -> None:
        super().__init__(message)
        self.answer_began = answer_began


class _Wire(asyncio.Protocol):
    """One keep-alive connection to the engine: h11 parses what arrives; anything arriving while no request is
    out (the engine's unasked idle-timeout 500, or its end of stream) closes the connection for good."""

    def __init__(self) -> None:
        self.h11 = h11.Connection(h11.CLIENT)
        self.transport: asyncio.Transport | None = None
        self.busy = False
        self.closed = False
        self.idle_since = 0.0
        self._wake: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not asyncio's classes

    def data_received(self, data: bytes) -> None:
        if not self.busy:
            self.close()
            return
        self.h11.receive_data(data)
        self._notify()

    def eof_received(self) -> bool:
        if self.busy:
            self.h11.receive_data(b"")
        self.closed = True
        self._notify()
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._notify()

    def _notify(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def send(self, *events: h11.Event) -> None:
        assert self.transport is not None
        self.transport.write(b"".join(self.h11.send(event) or b"" for event in events))

    async def next_event(self, *, answer_began: bool) -> h11.Event:
        """The next piece of the answer, waiting for data as needed."""
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as exc:
                raise _Dropped(f"the engine broke HTTP: {exc}", answer_began=answer_began) from exc
            if event is h11.PAUSED:  # only after a whole answer, which the caller stops at
                raise _Dropped("the engine answered more than was asked", answer_began=answer_began)
            if event is not h11.NEED_DATA:
                assert isinstance(event, h11.Event)
                return event
            if self.closed:
                raise _Dropped("the engine closed the connection", answer_began=answer_began)
            self._wake = asyncio.get_running_loop().create_future()
            await self._wake
            self._wake = None


class _ReadPool:
    """Keep-alive connections to the engine for reads: at most ``idle`` kept between requests, each for at most
    :func:`keepalive_expiry`; at most ``most`` open at once (further requests wait for one)."""

    def __init__(self, engine: _Engine, *, idle: int, most: int) -> None:
        self._engine = engine
        self._expiry = keepalive_expiry(engine)
        self._idle: list[_Wire] = []
        self._keep = idle
        self._slots = asyncio.Semaphore(most)

    def close(self) -> None:
        for wire in self._idle:
            wire.close()
        self._idle.clear()

    async def exchange(
        self, method: str, target: str, fields: list[tuple[str, str]], body: bytes | None, max_bytes: int | None
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """Send one read and return its status, headers and body; sent once more on a new connection if the
        connection dropped before the answer began (a pooled one may have gone stale)."""
        async with self._slots:
            for attempt in (0, 1):
                wire = await self._connection(fresh=attempt > 0)
                try:
                    result = await self._exchange(wire, method, target, fields, body, max_bytes)
                except _Dropped as exc:
                    wire.close()
                    if attempt == 0 and not exc.answer_began:
                        continue  # a read is safe to send again
                    raise EngineUnavailable(f"the engine dropped the connection: {exc}") from None
                except BaseException:  # a deadline, the size cap: the answer is abandoned with its connection
                    wire.close()
                    raise
                self._release(wire)
                return result
        raise AssertionError("unreachable")

    @staticmethod
    async def _exchange(
        wire: _Wire, method: str, target: str, fields: list[tuple[str, str]], body: bytes | None, max_bytes: int | None
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        wire.busy = True
        request = h11.Request(method=method, target=target, headers=fields)
        if body is None:
            wire.send(request, h11.EndOfMessage())
        else:
            wire.send(request, h11.Data(data=body), h11.EndOfMessage())
        event = await wire.next_event(answer_began=False)
        while isinstance(event, h11.InformationalResponse):
            event = await wire.next_event(answer_began=False)
        if not isinstance(event, h11.Response):
            raise _Dropped("the engine closed the connection", answer_began=False)
        parts: list[bytes] = []
        size = 0
        while True:
            piece = await wire.next_event(answer_began=True)
            if isinstance(piece, h11.Data):
                size += len(piece.data)
                if max_bytes is not None and size > max_bytes:
                    raise TooLarge()
                parts.append(bytes(piece.data))
            elif isinstance(piece, h11.EndOfMessage):
                break
            else:
                raise _Dropped("the engine closed the connection mid-answer", answer_began=True)
        wire.busy = False
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        return event.status_code, list(event.headers), data

    async def _connection(self, *, fresh: bool) -> _Wire:
        """A pooled connection still fit for use, or a new one (``fresh``: always new)."""
        now = time.monotonic()
        while self._idle and not fresh:
            wire = self._idle.pop()
            if not wire.closed and now - wire.idle_since < self._expiry:
                return wire
            wire.close()
        loop = asyncio.get_running_loop()
        for attempt in range(1 + CONNECT_RETRIES):
            if attempt:
                await asyncio.sleep(CONNECT_BACKOFF_S * attempt)
            try:
                _, wire = await loop.create_connection(_Wire, "127.0.0.1", self._engine.port)
                return wire
            except OSError as exc:
                failure = exc
        raise EngineUnavailable(f"cannot connect to the engine: {failure or type(failure).__name__}")

    def _release(self, wire: _Wire) -> None:
        """Keep a connection whose exchange ended cleanly, if the engine keeps it open, sent nothing after the
        answer (an unasked answer behind it would be read as the next one's), and the pool has room."""
        h = wire.h11
        trailing, ended = h.trailing_data
        if (
            wire.closed
            or trailing
            or ended
            or h.our_state is not h11.DONE
            or h.their_state is not h11.DONE
            or len(self._idle) >= self._keep
        ):
            wire.close()
            return
        h.start_next_cycle()
        wire.idle_since = time.monotonic()
        self._idle.append(wire)

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
whose answers httptools parses (llhttp, in C; uvicorn parses the front's requests with it too): httpx's pool and
request bookkeeping cost more CPU per query than the front's own rules, and h11, pure Python, still about a
third of the front's CPU per query (figures in docs/benchmarks.md). Writes, streamed reads and HEAD, rare, keep
httpx.

Every request is counted by the :class:`~pcm.endpoint.engine.Watchdog` while it runs, and given up at its deadline
(``TimeLimit``, the connection is closed, which stops a streaming query in the engine) or at the result-size cap.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol, cast

import httptools
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
        if not write and method != "HEAD":  # an answer to HEAD has a length but no body: httpx knows to skip it
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
    """One keep-alive connection to the engine: httptools parses what arrives; anything arriving while no request
    is out (the engine's unasked idle-timeout 500, or its end of stream) closes the connection for good."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.busy = False
        self.closed = False
        self.idle_since = 0.0
        self._wake: asyncio.Future[None] | None = None
        self._start(None)

    def _start(self, max_bytes: int | None) -> None:
        """Ready for the answer to a new request."""
        self._parser = httptools.HttpResponseParser(self)
        self.max_bytes = max_bytes
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.parts: list[bytes] = []
        self.size = 0
        self.began = False  # the status line of a final answer arrived
        self.done = False  # the whole answer arrived
        self.reusable = False  # the engine keeps the connection open after it, and sent nothing behind it
        self.failure = ""  # why the answer cannot be read (the engine broke HTTP, or sent more than was asked)
        self.too_large = False  # the body passed ``max_bytes``: reading stopped there
        self._until_close = False  # the answer has neither a length nor chunks: its end is the connection's

    # -- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not asyncio's classes

    def data_received(self, data: bytes) -> None:
        if not self.busy or self.done:  # unasked: an idle-timeout 500, or bytes behind a whole answer
            self.reusable = False
            self.close()
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:  # a callback's own exception, too, arrives wrapped in one
            if not self.done and not self.too_large:
                self.failure = f"the engine broke HTTP: {exc}"
            self.reusable = False
            self.close()
        self._notify()

    def eof_received(self) -> bool:
        self._ended()
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self._ended()

    def _ended(self) -> None:
        self.closed = True
        self.reusable = False
        if self.busy and self.began and not self.done and self._until_close:
            self.done = True
        self._notify()

    # -- httptools callbacks

    def on_message_begin(self) -> None:
        if self.done:
            raise _Dropped("the engine answered more than was asked", answer_began=True)

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if status < 200:
            return  # an interim answer (100 Continue): the final one follows
        self.status, self.began = status, True
        framed = {name.lower() for name, _ in self.headers} & {b"content-length", b"transfer-encoding"}
        self._until_close = not framed and status not in (204, 304)

    def on_body(self, body: bytes) -> None:
        self.size += len(body)
        if self.max_bytes is not None and self.size > self.max_bytes:
            self.too_large = True
            raise TooLarge()  # stops the parser
        self.parts.append(body)

    def on_message_complete(self) -> None:
        if not self.began:  # the end of an interim answer
            self.headers = []
            return
        self.done = True
        self.reusable = self._parser.should_keep_alive()

    # -- the exchange

    def _notify(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def send(self, request: bytes, max_bytes: int | None) -> None:
        assert self.transport is not None
        self._start(max_bytes)
        self.busy = True
        self.transport.write(request)

    async def answer(self) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """The answer to the request sent, once it is whole (raises :class:`TooLarge` past the size cap)."""
        while not self.done:
            if self.too_large:
                raise TooLarge()
            if self.failure or self.closed:
                raise _Dropped(self.failure or "the engine closed the connection", answer_began=self.began)
            self._wake = asyncio.get_running_loop().create_future()
            try:
                await self._wake
            finally:
                self._wake = None
        self.busy = False
        data = self.parts[0] if len(self.parts) == 1 else b"".join(self.parts)
        return self.status, self.headers, data


def _request(method: str, target: str, fields: list[tuple[str, str]], body: bytes | None) -> bytes:
    """An HTTP/1.1 request's bytes; a field with a line break in it is refused (it would inject a header)."""
    lines = [f"{method} {target} HTTP/1.1"]
    for name, value in fields:
        if _BREAK.search(name) or _BREAK.search(value):
            raise ValueError(f"a line break in the header field {name!r}")
        lines.append(f"{name}: {value}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + body if body else head


#: What may not appear in a request line's parts or a header field.
_BREAK = re.compile(r"[\r\n\x00]")


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
        if _BREAK.search(method) or _BREAK.search(target) or " " in target:
            raise ValueError(f"not a request target: {target!r}")
        request = _request(method, target, fields, body)
        async with self._slots:
            for attempt in (0, 1):
                wire = await self._connection(fresh=attempt > 0)
                try:
                    wire.send(request, max_bytes)
                    result = await wire.answer()
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
        if wire.closed or not wire.reusable or len(self._idle) >= self._keep:
            wire.close()
            return
        wire.idle_since = time.monotonic()
        self._idle.append(wire)

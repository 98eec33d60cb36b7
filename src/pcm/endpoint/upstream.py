"""The front's client to the engine (httpx), with the rules that make reusing a connection safe.

Oxigraph's server drops a keep-alive connection that has been idle for its ``--timeout-s``, and it does so by
writing an unasked ``500 Resource temporarily unavailable`` on it and closing. A client that reuses such a
connection reads that 500 as the answer to its own request: a read fails for nothing, and an update is never
applied. So:

* reads (queries, Graph Store reads) share a pool whose keep-alive expiry is half the engine's idle timeout: a
  pooled connection is never one the engine is about to drop (and httpx discards an idle connection that became
  readable, an unasked answer or an end of stream, before reusing it). A read that still fails before its answer
  began is sent once more: a read is safe to repeat.
* writes (updates, Graph Store writes) each go on a new connection: a new connection cannot be one the engine
  dropped, so a write that fails after it was sent failed in the engine, and it is reported as not confirmed
  (:class:`WriteUnconfirmed`) instead of being sent again blindly. A write that could not be sent at all (no
  connection) is retried by the transport, since nothing reached the engine.

Every request is counted by the :class:`~pcm.endpoint.engine.Watchdog` while it runs, and given up at its deadline
(``TimeLimit``, the connection is closed, which stops a streaming query in the engine) or at the result-size cap.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

import anyio
import httpx

#: Stall limit for streamed Graph Store reads, which have no overall deadline (a dump may be large).
STREAM_STALL_S = 120.0
#: Keep-alive expiry when the engine's idle timeout is not known.
DEFAULT_KEEPALIVE_S = 1.0
#: Attempts to open a connection before the engine is reported unavailable (nothing was sent).
CONNECT_RETRIES = 2


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
        # deadlines are enforced around the whole exchange (anyio.fail_after), not per socket operation
        timeout = httpx.Timeout(None, connect=5.0, pool=None)
        plain = {"Accept-Encoding": "identity"}  # bodies pass through as the engine wrote them
        self._reads = httpx.AsyncClient(
            headers=plain,
            timeout=timeout,
            limits=httpx.Limits(
                max_connections=4 * pool_size, max_keepalive_connections=pool_size,
                keepalive_expiry=keepalive_expiry(engine),
            ),
            transport=httpx.AsyncHTTPTransport(retries=CONNECT_RETRIES),
        )
        self._writes = httpx.AsyncClient(
            headers=plain,
            timeout=timeout,
            limits=httpx.Limits(max_keepalive_connections=0),
            transport=httpx.AsyncHTTPTransport(retries=CONNECT_RETRIES),
        )

    async def aclose(self) -> None:
        await self._reads.aclose()
        await self._writes.aclose()

    def _url(self, target: str) -> str:
        return f"http://127.0.0.1:{self._engine.port}{target}"

    async def _send(
        self, method: str, target: str, body: bytes | None, headers: dict[str, str] | None, *, write: bool,
        timeout: httpx.Timeout | None = None,
    ) -> httpx.Response:
        """Send a request and return the answer as soon as its head arrived (the body is still to be read)."""
        client = self._writes if write else self._reads
        extra = {"timeout": timeout} if timeout is not None else {}
        if write:  # a connection of its own, closed by both sides after the answer
            headers = {**(headers or {}), "Connection": "close"}
        request = client.build_request(method, self._url(target), content=body, headers=headers, **extra)  # type: ignore[arg-type]
        for attempt in (0, 1):
            try:
                return await client.send(request, stream=True)
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
        async with self._watchdog.arequest():
            try:
                with anyio.fail_after(timeout):
                    response = await self._send(method, target, body, headers, write=write)
                    try:
                        data = await self._read_all(response, max_bytes, write=write)
                    finally:
                        await response.aclose()
            except (TimeoutError, TimeLimit):
                self._watchdog.abandoned()
                raise TimeLimit() from None
            except TooLarge:
                self._watchdog.abandoned()
                raise
        return Answer(response.status_code, response.headers, data, time.perf_counter_ns() - started)

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
            response = await self._send(
                method, target, None, headers, write=False, timeout=httpx.Timeout(STREAM_STALL_S, connect=5.0)
            )
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

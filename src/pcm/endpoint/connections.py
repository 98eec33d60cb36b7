"""Bounded connections for ``pcm serve``: uvicorn's own limits, plus the two it lacks with httptools, a deadline
for the request head and a cap on its size.

uvicorn bounds how many connections and requests run at once (``limit_concurrency``: further requests are answered
503) and how long an idle keep-alive connection stays open (``timeout_keep_alive``). It has no deadline for the
head itself: its keep-alive timer starts only after a response, so a connection that sends nothing, or half a head,
is held for as long as the client likes, and a few hundred of them hold every slot ``limit_concurrency`` allows
(slowloris). Nor does its httptools protocol bound a head's size (its h11 one does). :class:`HeadDeadline` is
uvicorn's httptools protocol with both: the deadline is armed when a connection opens and when the first byte of a
later request arrives, disarmed once the head is in, and when it fires the connection is closed without an answer,
as uvicorn closes an idle keep-alive one; a head still incomplete past ``max_head`` bytes, or complete but larger,
is answered 400 and the connection closed, so the parser never holds more than the cap and one read. The body's own
deadline, a stall between two pieces, is the front's (:class:`pcm.endpoint.web.Guard`), where a request can still
be answered 408.

The health check (``GET /api/health``) is answered beyond ``limit_concurrency``. uvicorn counts every open
connection against the limit, idle and half-open ones too, so while a few dozen slow clients hold their sockets
(until the head deadline closes them) every request is answered 503, the supervisor's health check included, and a
server that is only busy would be taken for dead and restarted. The check reads no body, runs on the event loop
(not in a worker thread: :data:`pcm.endpoint.app.App.ON_LOOP`) and is answered in about a millisecond, so exempting
it costs little more than the 503 it replaces; the Guard still applies to it (Host, the read token beyond loopback).
The exemption rests on when uvicorn's protocol reads its limit (see :attr:`HeadDeadline.limit_concurrency`);
``tests/endpoint/test_endpoint_connections.py`` and ``tests/endpoint/test_endpoint_slow_clients.py`` hold it across upgrades.

httptools (llhttp, in C) rather than h11 (pure Python) because parsing the request and writing the answer with h11
cost the front about a third of its CPU per SPARQL query (docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import logging

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger(__name__)

#: (method, path) of the requests answered whatever ``limit_concurrency`` says (see the module's docstring).
UNLIMITED = frozenset({("GET", "/api/health")})
#: What a request line and a header line add to their parts (``: `` and CRLF, spaces and the HTTP version).
_LINE = 4
_REQUEST_LINE = 16


class HeadTooLarge(Exception):
    """The request head passed the cap (answered 400 by uvicorn, as any request the parser refuses)."""


class HeadDeadline(HttpToolsProtocol):
    """uvicorn's httptools protocol, closing a connection whose request head has not arrived within
    ``head_timeout`` and refusing a head over ``max_head`` bytes."""

    #: Seconds from a connection (or the first byte of a request after an idle keep-alive) to a complete head.
    head_timeout: float = 10.0
    #: Bytes a request head may take.
    max_head: int = 64 * 1024

    @property
    def limit_concurrency(self) -> int | None:
        """uvicorn's limit, read once per request right after ``self.scope`` got that request's method and path,
        to decide whether to answer 503 instead: None (no limit) for the requests in :data:`UNLIMITED`."""
        scope = getattr(self, "scope", None)
        if scope is not None and (scope.get("method"), scope.get("path", "").rstrip("/")) in UNLIMITED:
            return None
        return self._limit_concurrency

    @limit_concurrency.setter
    def limit_concurrency(self, value: int | None) -> None:
        self._limit_concurrency = value

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # uvicorn's own signature
        self._head_timer: asyncio.TimerHandle | None = None
        self._in_head = True  # the first request's head is awaited from the start
        self._head_received = 0  # bytes received while a head was incomplete (a bound for the parser's buffer)
        self._head_size = 0  # the head's own size, from its parts
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._in_head:
            self._head_received += len(data)
        super().data_received(data)
        if self._in_head and self._head_received > self.max_head and not self.transport.is_closing():
            # the head is still incomplete past the cap: refused before the rest of it is waited for
            self.send_400_response("Invalid HTTP request received.")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        self._head_size = _REQUEST_LINE
        self._arm()

    def on_url(self, url: bytes) -> None:
        self._grow(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._grow(len(name) + len(value) + _LINE)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._head_received = 0
        self._disarm()
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not None and cycle.scope is self.scope and self.scope.get("method") != "HEAD":
            cycle.transport = HeadWithBody(self.transport)  # type: ignore[assignment]  # the transport's duck type

    def _grow(self, size: int) -> None:
        self._head_size += size
        if self._head_size > self.max_head:
            raise HeadTooLarge()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        """Start the deadline unless it runs already: more bytes of the same head do not push it back."""
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.head_timeout, self._head_timed_out)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self._in_head and not self.transport.is_closing():
            log.debug("closed a connection from %s: no request head within %g s", _peer(self.client),
                      self.head_timeout)
            self.transport.close()


def protocol_class(head_timeout: float, max_head: int) -> type[HeadDeadline]:
    """The protocol class to give uvicorn (``Config(http=...)``) for one server's head deadline and cap."""
    return type("HeadDeadline", (HeadDeadline,), {"head_timeout": head_timeout, "max_head": max_head})


def _peer(client: tuple[str, int] | None) -> str:
    return f"{client[0]}:{client[1]}" if client else "a client"


class HeadWithBody:
    """The connection's transport as one response sees it: the head of an answer with a ``Content-Length`` is held
    back and written with the first piece of its body, one write (one system call, one segment to the client)
    where uvicorn makes two. An answer without a length (streamed, chunked) is not held: its head goes out at once,
    and so does anything else (``100 Continue``); closing writes what is held first."""

    __slots__ = ("_held", "_transport")

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._held = b""

    def write(self, data: bytes) -> None:
        if self._held:
            data, self._held = self._held + data, b""
        elif data.endswith(b"\r\n\r\n") and data.startswith(b"HTTP/1.1 ") and b"\r\ncontent-length: " in data:
            self._held = data
            return
        self._transport.write(data)

    def close(self) -> None:
        if self._held:
            self._transport.write(self._held)
            self._held = b""
        self._transport.close()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

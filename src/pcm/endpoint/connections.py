"""Bounded connections for ``pcm serve``: uvicorn's own limits, plus the one it lacks, a deadline for the request head.

uvicorn bounds how many connections and requests run at once (``limit_concurrency``: further requests are answered
503), how long an idle keep-alive connection stays open (``timeout_keep_alive``) and, with h11, how large a request
head may grow (``h11_max_incomplete_event_size``: a larger one is answered 400). It has no deadline for the head
itself: its keep-alive timer starts only after a response, so a connection that sends nothing, or half a head, is
held for as long as the client likes, and a few hundred of them hold every slot ``limit_concurrency`` allows
(slowloris). :class:`HeadDeadline` is uvicorn's h11 protocol with that deadline: armed when a connection opens and
when the first byte of a later request arrives, disarmed once the head is in; when it fires the connection is
closed without an answer, as uvicorn closes an idle keep-alive one. The body's own deadline, a stall between two
pieces, is the front's (:class:`pcm.endpoint.web.Guard`), where a request can still be answered 408.

The health check (``GET /api/health``) is answered beyond ``limit_concurrency``. uvicorn counts every open
connection against the limit, idle and half-open ones too, so while a few dozen slow clients hold their sockets
(until the head deadline closes them) every request is answered 503, the supervisor's health check included, and a
server that is only busy would be taken for dead and restarted. The check reads no body, runs on the event loop
(not in a worker thread: :data:`pcm.endpoint.app.App.ON_LOOP`) and is answered in about a millisecond, so exempting
it costs little more than the 503 it replaces; the Guard still applies to it (Host, the read token beyond loopback).
The exemption rests on when uvicorn's h11 protocol reads its limit (see :attr:`HeadDeadline.limit_concurrency`);
``tests/endpoint/test_endpoint_connections.py`` and ``tests/endpoint/test_endpoint_slow_clients.py`` hold it across upgrades.

h11 rather than httptools because the head limit is h11's: its parsing costs about 40 µs a request (measured on the
build machine), against the milliseconds the front spends on a request.
"""

from __future__ import annotations

import asyncio
import logging

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)

#: (method, path) of the requests answered whatever ``limit_concurrency`` says (see the module's docstring).
UNLIMITED = frozenset({("GET", "/api/health")})


class HeadDeadline(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request head has not arrived within ``head_timeout``."""

    #: Seconds from a connection (or the first byte of a request after an idle keep-alive) to a complete head.
    head_timeout: float = 10.0

    @property
    def limit_concurrency(self) -> int | None:
        """uvicorn's limit, read once per request right after ``self.scope`` became that request's, to decide
        whether to answer 503 instead: None (no limit) for the requests in :data:`UNLIMITED`."""
        scope = getattr(self, "scope", None)
        if scope is not None and (scope["method"], scope["path"].rstrip("/")) in UNLIMITED:
            return None
        return self._limit_concurrency

    @limit_concurrency.setter
    def limit_concurrency(self, value: int | None) -> None:
        self._limit_concurrency = value

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # uvicorn's own signature
        self._head_timer: asyncio.TimerHandle | None = None
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is h11.IDLE:  # still reading a head (or the first bytes of the next one)
            self._arm()
        else:
            self._disarm()

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
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            log.debug("closed a connection from %s: no request head within %g s", _peer(self.client),
                     self.head_timeout)
            self.transport.close()


def protocol_class(head_timeout: float) -> type[HeadDeadline]:
    """The protocol class to give uvicorn (``Config(http=...)``) for one server's head deadline."""
    return type("HeadDeadline", (HeadDeadline,), {"head_timeout": head_timeout})


def _peer(client: tuple[str, int] | None) -> str:
    return f"{client[0]}:{client[1]}" if client else "a client"

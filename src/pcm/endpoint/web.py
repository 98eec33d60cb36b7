"""The front as an ASGI application: Starlette routes over :class:`pcm.endpoint.app.App`, served by uvicorn.

HTTP framing, request parsing, keep-alive, chunked bodies and routing are Starlette's and uvicorn's; this module
only connects them to the front's rules:

* :class:`Guard` runs first on every request, before a byte of the body is read: the Host check (DNS rebinding),
  CORS preflight, the body cap by ``Content-Length`` and the token where a write is certain. uvicorn sends
  ``100 Continue`` only when the application first asks for the body, so a refusal here means the client is never
  asked to upload it. It also adds the security and CORS headers to every answer, mounted applications included.
* Each route reads the body (up to the cap, for chunked bodies too), calls its handler, and sends its
  :class:`~pcm.endpoint.app.Response`, with ``Server-Timing`` when the engine was involved.
* The SPARQL and Graph Store protocol paths (``/query`` above all, where a client sends many small requests) are
  answered by :class:`ProtocolPaths`, a plain ASGI application inside the Guard, rather than through Starlette's
  exception middleware, router and request and response objects: the same handler, body rule and answer, with less
  of the front's CPU per query. A bug in a handler still reaches Starlette's outermost error middleware (a JSON 500).
* The Guard also bounds how long a body may stall between two pieces (``body_timeout``: answered 408, connection
  closed), and a client that goes away in the middle of its body is one log line, not an ASGI traceback: both are
  the client's doing, for every route and mounted application alike. The head's deadline and the connection
  limits are uvicorn's (:mod:`pcm.endpoint.connections`).
* It holds the sum of the bodies in flight to a budget (:mod:`pcm.endpoint.inflight`): a request whose body would
  pass it is answered 503 before its body is read.

Other ASGI applications (the MCP server's streamable HTTP endpoint, for one) are served beside the front with
:class:`Mounted` entries given to :func:`create_app` (or ``PcmServer.mount``): they get the same Guard, and their
lifespan, if they have one, runs with the server's.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers, MutableHeaders
from starlette.requests import ClientDisconnect
from starlette.requests import Request as StarletteRequest
from starlette.responses import Response as StarletteResponse
from starlette.responses import StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pcm.endpoint.app import (
    SECURITY_HEADERS,
    App,
    AsyncHandler,
    Handler,
    Request,
    Response,
    json_error,
    refused_error,
)
from pcm.endpoint.config import MB
from pcm.endpoint.inflight import BodyBudget, Metered, OverBudget
from pcm.endpoint.timing import server_timing

#: Every route takes every method: which ones a path accepts is the front's rule (its 405s say what to use).
ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]
_STARTED = "pcm.started_ns"

Lifespan = Callable[[Starlette], contextlib.AbstractAsyncContextManager[object]]

log = logging.getLogger(__name__)


class BodyStalled(Exception):
    """No piece of the request body arrived within the body timeout."""


class BodyDeadline:
    """``receive`` with a deadline on each piece of the request body; after its last piece (or for a request
    without one) it waits as long as the application likes, for the disconnect a streamed answer listens for."""

    def __init__(self, receive: Receive, timeout: float) -> None:
        self.receive = receive
        self.timeout = timeout
        self.body_done = False

    async def __call__(self) -> Message:
        if self.body_done:
            return await self.receive()
        try:
            async with asyncio.timeout(self.timeout):
                message = await self.receive()
        except TimeoutError:
            raise BodyStalled from None
        if message["type"] != "http.request" or not message.get("more_body", False):
            self.body_done = True
        return message


@dataclass(frozen=True)
class Mounted:
    """Another ASGI application served under ``path`` (e.g. ``/mcp``), with its lifespan if it needs one."""

    path: str
    app: ASGIApp
    lifespan: Lifespan | None = None
    #: Route exactly ``path`` to the application with the request's path unchanged (the application routes ``path``
    #: itself, as the MCP SDK's app does), instead of mounting it under ``path``.
    exact: bool = False


class Guard:
    """The checks that need no body, and the headers every answer carries (see the module's docstring)."""

    def __init__(self, app: ASGIApp, front: App) -> None:
        self.app = app
        self.front = front
        self.paths = {*front.protocol_routes(), *front.api_routes()}
        # never less than one body of the largest size accepted, which could otherwise never be received
        self.bodies = BodyBudget(max(front.config.max_bodies_in_flight, front.config.max_body))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if path.endswith("/") and path.rstrip("/") in self.paths:  # /query/ is /query
            scope["path"] = path.rstrip("/")
        scope.setdefault("state", {})[_STARTED] = time.perf_counter_ns()
        headers = Headers(scope=scope)
        extra = {**SECURITY_HEADERS, **self.front.cors_headers(headers.get("origin") or "")}

        async def send_decorated(message: Message) -> None:
            if message["type"] == "http.response.start":
                answer = MutableHeaders(scope=message)
                for name, value in extra.items():
                    if name.lower() not in answer:
                        answer[name] = value
                if "Access-Control-Allow-Origin" in extra:
                    answer["Vary"] = ", ".join(v for v in (answer.get("vary"), "Origin") if v)
            await send(message)

        refused = self.front.preflight(scope["method"], scope["path"], headers)
        if refused is not None:
            await answer(refused, scope, receive, send_decorated)
            return
        reserved = _declared_length(headers)
        if not self.bodies.reserve(reserved):
            log.info("%s: %d bytes of bodies in flight already; answered 503", _request_line(scope), self.bodies.held)
            await answer(self._busy(), scope, receive, send_decorated)
            return
        metered = Metered(BodyDeadline(receive, self.front.config.body_timeout), self.bodies, reserved)
        started = False

        async def send_watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send_decorated(message)

        try:
            await self.app(scope, metered, send_watched)
        except OverBudget:
            log.info("%s: a chunked body passed the bodies in flight; answered 503", _request_line(scope))
            if not started:
                await answer(self._busy(), scope, receive, send_decorated)
        except ClientDisconnect:
            log.info("%s: the client went away before sending its whole body", _request_line(scope))
        except BodyStalled:
            limit = self.front.config.body_timeout
            log.info("%s: the body stalled for %g s; answered 408", _request_line(scope), limit)
            if not started:
                stalled = json_error(408, f"the request body stalled: no data for {limit:g} s")
                stalled.close = True
                await answer(stalled, scope, receive, send_decorated)
        finally:
            metered.release()

    def _busy(self) -> Response:
        """503 for a body the budget cannot take now; the body was not read, so the connection is closed."""
        busy = json_error(
            503, f"the server is receiving all the request bodies it holds at once ({self.bodies.limit // MB} MB, "
                 "PCM_SERVE_BODIES_IN_FLIGHT_MB): try again shortly", **{"Retry-After": "1"})
        busy.close = True
        return busy


def _declared_length(headers: Headers) -> int:
    """The body's ``Content-Length`` (the preflight refused one that is not a number); 0 for a chunked body, which is
    charged as it arrives."""
    try:
        return max(0, int(headers.get("content-length") or 0))
    except ValueError:
        return 0


def _request_line(scope: Scope) -> str:
    """``POST /api/ask from 127.0.0.1:53012``: which request a log line is about."""
    client = scope.get("client")
    peer = f"{client[0]}:{client[1]}" if client else "a client"
    return f"{scope['method']} {scope['path']} from {peer}"


def starlette_response(response: Response) -> StarletteResponse:
    headers = dict(response.headers)
    if response.close:
        headers["Connection"] = "close"
    # on_done releases what the answer held (a streamed engine answer) once it was sent or the client went away
    background = BackgroundTask(response.on_done) if response.on_done is not None else None
    if isinstance(response.body, bytes):
        return StarletteResponse(response.body, response.status, headers, background=background)
    return StreamingResponse(response.body, response.status, headers, background=background)


async def answer(response: Response, scope: Scope, receive: Receive, send: Send) -> None:
    """Send ``response``: a whole body as the two ASGI messages Starlette's ``Response`` would send (the same
    headers, ``Content-Length`` added), without building one; a streamed one, or one with work to do once sent,
    through Starlette's."""
    body = response.body
    if not isinstance(body, bytes) or response.on_done is not None:
        await starlette_response(response)(scope, receive, send)
        return
    raw = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in response.headers.items()]
    if response.close:
        raw.append((b"connection", b"close"))
    status = response.status
    if not (status < 200 or status in (204, 304)) and all(name != b"content-length" for name, _ in raw):
        raw.append((b"content-length", str(len(body)).encode("latin-1")))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


async def _receive_body(receive: Receive, headers: Headers, front: App) -> bytes | Response:
    """The whole body, refused at the cap as it arrives (a chunked body has no Content-Length to check first); a
    client that goes away before its end is :class:`ClientDisconnect`, as Starlette's request reports it."""
    if "content-length" not in headers and "transfer-encoding" not in headers:
        return b""  # no body (a GET): nothing to wait for
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        if message["type"] != "http.request":
            continue
        piece = message.get("body", b"")
        size += len(piece)
        if size > front.config.max_body:
            response = front.too_large()
            response.close = True
            return response
        if piece:
            parts.append(piece)
        if not message.get("more_body", False):
            return parts[0] if len(parts) == 1 else b"".join(parts)


class ProtocolPaths:
    """The SPARQL and Graph Store protocol paths as a plain ASGI application (see the module's docstring); every
    other request goes on to Starlette's routes.

    It sits inside the :class:`Guard`, which has already checked the request (Host, token, body cap, bodies in
    flight) and adds the security and CORS headers to the answer, and inside Starlette's error middleware, which
    turns a bug into a JSON 500; each request is served as a route serves it (:func:`_serve`)."""

    def __init__(self, app: ASGIApp, front: App) -> None:
        self.app = app
        self.front = front
        self.handlers = front.protocol_routes()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        handler = self.handlers.get(scope["path"]) if scope["type"] == "http" else None
        if handler is None:
            await self.app(scope, receive, send)
        else:
            await _serve(self.front, handler, False, scope, receive, send)


async def _serve(
    front: App, handler: Handler | AsyncHandler, blocking: bool, scope: Scope, receive: Receive, send: Send
) -> None:
    """One request to one of the front's handlers: read the body, build the front's
    :class:`~pcm.endpoint.app.Request` (the query string as Starlette's ``QueryParams`` reads it), run the handler
    (``blocking``: in a worker thread; otherwise on the event loop, awaited if it is async), and send its answer,
    timed."""
    headers = Headers(scope=scope)
    body = await _receive_body(receive, headers, front)
    if isinstance(body, Response):
        await answer(body, scope, receive, send)
        return
    params = parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True)
    request = Request(scope["method"], scope["path"], params, headers, body)
    if blocking:
        response: Response = await run_in_threadpool(handler, request)  # type: ignore[arg-type]  # blocking: a sync Handler
    else:
        result = handler(request)
        response = await result if inspect.isawaitable(result) else result
    await answer(_timed(front, scope, response), scope, receive, send)


@dataclass(frozen=True)
class _Endpoint:
    """A handler of the front as an ASGI application: a class, so Starlette's ``Route`` calls it as one."""

    front: App
    handler: Handler | AsyncHandler
    blocking: bool

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await _serve(self.front, self.handler, self.blocking, scope, receive, send)


def _route(path: str, front: App, handler: Handler | AsyncHandler, *, blocking: bool) -> Route:
    """``blocking``: the handler runs in a worker thread; otherwise on the event loop (awaited if it is async)."""
    return Route(path, _Endpoint(front, handler, blocking), methods=ALL_METHODS)


def _timed(front: App, scope: Scope, response: Response) -> Response:
    """``Server-Timing`` (front and engine shares) on answers that involved the engine, and the running stats."""
    if response.engine_ns:
        started = scope.get("state", {}).get(_STARTED)
        if started is not None:
            front_ns = time.perf_counter_ns() - started - response.engine_ns
            response.headers["Server-Timing"] = server_timing(front_ns, response.engine_ns)
            front.timings.record(front_ns, response.engine_ns)
    return response


def create_app(front: App, *, mounted: Sequence[Mounted] = ()) -> Starlette:
    """The ASGI application of one ``pcm serve``: the front's routes, then any mounted applications, then the
    explorer's files (and 404) for every other path."""
    # the protocol paths are answered by ProtocolPaths before the router
    routes: list[BaseRoute] = [_route(p, front, h, blocking=p not in front.ON_LOOP) for p, h in front.api_routes().items()]
    routes += [Route(m.path, endpoint=m.app) if m.exact else Mount(m.path, app=m.app) for m in mounted]
    routes.append(_route("/{path:path}", front, front.not_found, blocking=True))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            for m in mounted:
                if m.lifespan is not None:
                    await stack.enter_async_context(m.lifespan(app))
            try:
                yield
            finally:
                if front.upstream is not None:
                    await front.upstream.aclose()

    async def internal_error(request: StarletteRequest, exc: Exception) -> StarletteResponse:
        """One request's bug must not kill the server: a JSON 500 (uvicorn logs the traceback on stderr). A full
        disk (or quota, permissions, memory) is no bug: its own status and one line (:func:`refused_error`)."""
        return starlette_response(refused_error(exc) or json_error(500, f"internal error: {type(exc).__name__}"))

    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={Exception: internal_error})
    app.add_middleware(ProtocolPaths, front=front)
    app.add_middleware(Guard, front=front)  # added last, so it runs first: before ProtocolPaths and the routes
    return app


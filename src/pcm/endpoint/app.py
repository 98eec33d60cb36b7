"""The front of ``pcm serve``: routes, token, limits, and the JSON API over one open memory.

Every rule lives here, as handlers from :class:`Request` to :class:`Response`: which requests need the owner's
token, how big a body or a result may be, how long a query may run, and how errors are answered. HTTP itself
(framing, parsing, keep-alive, routing) is Starlette's and uvicorn's (:mod:`pcm.endpoint.web`).

Errors have two shapes. SPARQL Protocol errors (a syntax error, an unsupported media type, a query stopped at the
time limit) are ``text/plain`` with a 4xx/5xx status, as SPARQL clients expect; every other error, whatever the
path (no token, foreign Host, body too large, no such resource, the JSON API's own), is one JSON shape:
``{"error": "..."}``.
"""

from __future__ import annotations

import hmac
import json
import mimetypes
import os
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel
from pydantic import ValidationError as ModelError

from pcm import __version__
from pcm.backend_remote import CANCELLED_MARKER
from pcm.conversations import check_text
from pcm.endpoint import models
from pcm.endpoint.access import CHALLENGE, may_read
from pcm.endpoint.config import ServeConfig, is_loopback
from pcm.endpoint.drain import ExtractionWorker
from pcm.endpoint.engine import Watchdog
from pcm.endpoint.jobs import AlreadyRunning, BackgroundJob
from pcm.endpoint.protocol import (
    QUERY_TYPE,
    UPDATE_TYPE,
    Operation,
    ProtocolError,
    base_prefix,
    engine_accept,
    parse_operation,
    service_description,
    store_target,
    user_positions,
)
from pcm.endpoint.timing import Timings
from pcm.endpoint.uploads import refuse_upload
from pcm.endpoint.upstream import EngineUnavailable, TimeLimit, TooLarge, Upstream, WriteUnconfirmed
from pcm.errors import InputError, PcmError, QueryError, TokenRefused, write_refusal
from pcm.layout import BY_ID
from pcm.limits import RECALL_K
from pcm.memory import ASK_TEXT, EPISODIC, MESSAGE_TEXT, QUEUED, Memory
from pcm.namespaces import PREFIXES
from pcm.oserrors import refused_in_text, resource_error, resource_errors
from pcm.rdflimits import RdfLimits
from pcm.scope import ScopeError, scope_query

STATIC = Path(__file__).resolve().parent / "static"
SECURITY_HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}
_HTML_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    ),
    "X-Frame-Options": "DENY",
}
_GSP_PARAMS = ("graph", "default")
_TEXT = "text/plain; charset=utf-8"
METHODS = "GET, HEAD, POST, PUT, DELETE, OPTIONS"


@dataclass
class Request:
    method: str
    path: str
    params: list[tuple[str, str]]
    headers: Mapping[str, str]
    body: bytes = b""

    def header(self, name: str) -> str:
        return self.headers.get(name) or ""

    def param(self, name: str, default: str = "") -> str:
        values = [v for k, v in self.params if k == name]
        return values[0] if values else default


@dataclass
class Response:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | AsyncIterator[bytes] = b""
    #: Close the connection after answering (the request body was not read, or the client must not reuse it).
    close: bool = False
    #: Awaited once the answer was sent or abandoned (releases a streamed engine answer).
    on_done: Callable[[], Awaitable[None]] | None = None
    #: Nanoseconds this request spent waiting for the engine (0 when it did not reach the engine).
    engine_ns: int = 0


M = TypeVar("M", bound=BaseModel)
#: An ingest whose body was read and checked, run with a progress callback (posts stored) and a total callback
#: (the messages the body holds), either None when the answer is not streamed.
_IngestWork = Callable[[Callable[[int], None] | None, Callable[[int | None], None] | None], models.IngestResult]

#: A handler of the JSON API or the explorer: blocking work (the memory, the side index), run in a worker thread.
Handler = Callable[[Request], Response]
#: A handler of the SPARQL and Graph Store protocols: it waits on the engine, so it runs on the event loop.
AsyncHandler = Callable[[Request], Awaitable[Response]]


def text_error(status: int, message: str, **headers: str) -> Response:
    """A SPARQL Protocol error: the status says what kind, the one-line body says what to do."""
    return Response(status, {"Content-Type": _TEXT, **headers}, (message.strip() + "\n").encode("utf-8"))


def json_response(data: object, status: int = 200) -> Response:
    body = json.dumps(data, ensure_ascii=False, default=_json_default).encode("utf-8")
    return Response(status, {"Content-Type": "application/json; charset=utf-8", "Cache-Control": "no-store"}, body)


def json_error(status: int, message: str, **headers: str) -> Response:
    """Every error that is not a SPARQL Protocol one: ``{"error": message}`` with the status."""
    response = json_response({"error": message}, status)
    response.headers.update(headers)
    return response


def pcm_error(exc: PcmError) -> Response:
    """Our error as the JSON API answers it: its one line, its HTTP status, and the exit code the CLI gives it (so
    a command that goes through this server fails as it would without one)."""
    response = json_response(models.ErrorBody(error=exc.line, exit_code=exc.exit_code).as_json(), exc.http_status)
    if isinstance(exc, TokenRefused):
        response.headers["WWW-Authenticate"] = "Bearer"
    return response


def refused_error(exc: BaseException) -> Response | None:
    """A refusal of the machine's (:mod:`pcm.oserrors`) as one JSON line: 507 Insufficient Storage for a full disk
    or quota, 500 for the others (permissions, a read-only file system, memory); None for any other error."""
    refused = resource_error(exc)
    if refused is None:
        return None
    return json_error(507 if refused.storage_full else 500, str(refused))


def _engine_status(status: int, message: str) -> int:
    """The engine's status for its refusal, but 507 Insufficient Storage when its 5xx says its disk is full."""
    refused = refused_in_text(message) if status >= 500 else None
    return 507 if refused is not None and refused.storage_full else status


def _json_default(value: object) -> object:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "as_json"):
        return value.as_json()
    if hasattr(value, "__dataclass_fields__"):
        return {k: getattr(value, k) for k in value.__dataclass_fields__}
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


class App:
    """Everything the front decides for one request, over one memory and one engine."""

    #: JSON API paths answered on the event loop rather than in a worker thread: their handler does no blocking
    #: work, and the health check must answer when every worker thread is taken (asks waiting for the memory lock),
    #: which is when a supervisor asks. It is answered beyond the connection limit too (:mod:`.connections`).
    ON_LOOP = frozenset({"/api/health"})

    def __init__(
        self, config: ServeConfig, memory: Memory, upstream: Upstream | None, watchdog: Watchdog | None,
        public_url: str,
    ) -> None:
        """``upstream`` and ``watchdog`` are None over an external store: no engine is pcm's, reads are answered
        through the memory (:mod:`pcm.endpoint.direct`) and writes go to the store's own endpoints."""
        self.config = config
        self.memory = memory
        self.upstream = upstream
        self.watchdog = watchdog
        self.public_url = public_url.rstrip("/")
        #: One writer at a time, and the side index (embedder, LanceDB) used by one request at a time.
        self.memory_lock = threading.RLock()
        self.timings = Timings()
        self.reindex_job = BackgroundJob("reindex")
        #: The background extraction worker (:mod:`pcm.endpoint.drain`), when the server runs one.
        self.extraction: ExtractionWorker | None = None
        self._openapi: dict[str, Any] | None = None

    def protocol_routes(self) -> dict[str, AsyncHandler]:
        """The SPARQL 1.1 Protocol and Graph Store Protocol paths (answered on the event loop)."""
        return {
            "/query": lambda r: self.sparql(r, "query"),
            "/update": lambda r: self.sparql(r, "update"),
            "/sparql": lambda r: self.sparql(r, "sparql"),
            "/store": self.graph_store,
        }

    def api_routes(self) -> dict[str, Handler]:
        """The JSON API (answered in worker threads: they use the memory and the side index)."""
        return {
            "/api/health": self.api_health,
            "/api/info": self.api_info,
            "/api/ingest": self.api_ingest,
            "/api/ask": self.api_ask,
            "/api/recall": self.api_recall,
            "/api/search": self.api_search,
            "/api/entity": self.api_entity,
            "/api/why": self.api_why,
            "/api/history": self.api_history,
            "/api/export": self.api_export,
            "/api/conversation": self.api_conversation,
            "/api/conversations": self.api_conversations,
            "/api/reindex": self.api_reindex,
            "/api/messages": self.api_messages,
            "/api/message": self.api_message,
            "/api/forget": self.api_forget,
            "/api/import": self.api_import,
            "/api/extract": self.api_extract,
            "/api/facts": self.api_facts,
            "/api/fact": self.api_fact,
            "/api/stats": self.api_stats,
            "/api/timings": self.api_timings,
            "/openapi.json": self.api_openapi,
        }

    # -- before the body is read ------------------------------------------------------------------------------

    def preflight(self, method: str, path: str, headers: Mapping[str, str]) -> Response | None:
        """Checks that need no body: Host, CORS preflight, a token for any request beyond loopback
        (:mod:`pcm.endpoint.access`), body size, and the write token where a write is certain.

        Refusing here, before the body is read, means no ``100 Continue`` is sent: a client without the token,
        or with a body over the cap, is not asked to upload it.
        """
        if not self._host_allowed(headers.get("Host") or ""):
            return json_error(403, "this server answers only on its loopback name (Host header refused)")
        if method == "OPTIONS":
            return Response(204, {"Allow": METHODS})
        if not may_read(self.config, headers):
            return replace(json_error(
                401, "this server listens beyond loopback: reads need its read token "
                     "(Authorization: Bearer <token>)", **{"WWW-Authenticate": CHALLENGE}), close=True)
        length = headers.get("Content-Length")
        try:
            size = int(length) if length else 0
        except ValueError:
            return replace(json_error(400, "bad Content-Length"), close=True)
        if size > self.config.max_body:
            return replace(self.too_large(), close=True)
        if self._certain_write(method, path.rstrip("/")):
            refused = self._check_token(headers)
            if refused is not None:
                return replace(refused, close=True)
        return None

    def too_large(self) -> Response:
        return json_error(413, f"request body too large: the limit is {self.config.max_body} bytes")

    def _host_allowed(self, host_header: str) -> bool:
        """On loopback, only loopback Host names: a web page cannot reach the memory by DNS rebinding."""
        if not self.config.loopback or not host_header:
            return True
        host = host_header.rsplit(":", 1)[0] if not host_header.endswith("]") else host_header
        host = host.strip("[]").lower()
        return is_loopback(host) or host == self.config.host.lower()

    @staticmethod
    def _certain_write(method: str, path: str) -> bool:
        if path == "/store":
            return method in ("PUT", "POST", "DELETE", "PATCH")
        if method == "DELETE":
            return path in ("/api/message", "/api/fact")
        return path in ("/update", "/api/ingest", "/api/reindex", "/api/forget", "/api/import",
                        "/api/extract") and method == "POST"

    def _check_token(self, headers: Mapping[str, str]) -> Response | None:
        """The refusal of a write without this server's token (:func:`pcm.errors.write_refusal`, the line every
        face gives), or None."""
        if not self.config.token:
            return pcm_error(write_refusal(takes_writes=False))
        scheme, _, given = (headers.get("Authorization") or "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), self.config.token.encode()):
            return pcm_error(write_refusal(takes_writes=True))
        return None

    def not_found(self, request: Request) -> Response:
        """Paths that are no route: the explorer's files for GET and HEAD, else 404."""
        if request.method in ("GET", "HEAD"):
            return self.static(request.path)
        return json_error(404, f"no such resource: {request.path}")

    # -- SPARQL Protocol --------------------------------------------------------------------------------------------

    async def sparql(self, request: Request, endpoint: str) -> Response:
        try:
            operation = parse_operation(
                endpoint, request.method, request.params, request.header("Content-Type"), request.body
            )
        except ProtocolError as exc:
            headers = {"Allow": exc.allow} if exc.allow else {}
            return text_error(exc.status, str(exc), **headers)
        if operation is None:
            media_type, body = service_description(
                self.public_url + "/" + endpoint,
                writable=self.config.writable and endpoint != "query",  # /query refuses updates: never offer them
                accept=request.header("Accept"),
            )
            return Response(200, {"Content-Type": media_type, "Vary": "Accept"}, body)
        if operation.kind == "update":
            refused = self._check_token(request.headers)
            if refused is None and self.upstream is None:
                refused = self._writes_elsewhere()
            return refused if refused is not None else await self._update(operation, endpoint)
        if self.upstream is None:
            return await self._direct_query(operation)
        return await self._query(operation, endpoint, request.header("Accept"))

    @property
    def engine_restarts(self) -> int:
        return self.watchdog.engine.restarts if self.watchdog is not None else 0

    def _writes_elsewhere(self) -> Response:
        store = self.memory.settings.store_url
        return text_error(501, f"this memory's store is the SPARQL server at {store}: send updates and graph "
                               "store writes there (its own endpoints and credentials); this server answers reads")

    async def _direct_query(self, operation: Operation) -> Response:
        """A read over an external store, run as the memory runs its queries (checked, bounded, scoped)."""
        from starlette.concurrency import run_in_threadpool

        from pcm.endpoint.direct import serialise

        if operation.dataset:
            return text_error(400, "dataset parameters (default-graph-uri, named-graph-uri) are not taken here: "
                                   "the default graph is the union of the memory's graphs")
        limit = self.config.query_timeout
        try:
            result = await run_in_threadpool(self.memory.sparql, operation.text)
        except QueryError as exc:
            if "time limit" in str(exc):
                return text_error(503, f"query stopped: it ran past the time limit of {limit:g} s")
            return text_error(400, str(exc))
        except PcmError as exc:
            return text_error(503, f"the SPARQL server is unavailable: {exc}")
        content_type, body = serialise(result)
        if len(body) > self.config.max_result:
            mb = self.config.max_result / (1024 * 1024)
            return text_error(400, f"the result is larger than this server's {mb:g} MB cap: add a LIMIT")
        return Response(200, {"Content-Type": content_type, "Vary": "Accept"}, body)

    def _engine_error(self, answer_body: bytes, status: int, base: str, engine_ns: int) -> Response:
        """The engine's refusal on one line, with positions in the user's text (not the text sent on)."""
        message = user_positions(_one_line(answer_body), len(base_prefix(base)))
        return replace(text_error(_engine_status(status, message), message), engine_ns=engine_ns)

    async def _query(self, operation: Operation, endpoint: str, accept: str) -> Response:
        assert self.upstream is not None and self.watchdog is not None, "forwarded only to an engine of pcm's"
        base = f"{self.public_url}/{endpoint}"
        text = operation.with_base(base)
        layout = self.memory.naming.layout
        if layout.kind == BY_ID:  # a store other memories may share: the query reads this memory's graphs only
            try:
                text = scope_query(text, layout.prefix)
            except ScopeError as exc:
                return text_error(400, str(exc))
        body = text.encode("utf-8")
        headers = {"Content-Type": QUERY_TYPE + "; charset=utf-8", "Accept": engine_accept(accept)}
        target = operation.engine_target("/query")
        limit = self.config.query_timeout
        for attempt in (0, 1):
            generation = self.watchdog.generation
            try:
                answer = await self.upstream.fetch(
                    "POST", target, body=body, headers=headers, timeout=limit, max_bytes=self.config.max_result
                )
                break
            except TimeLimit:
                return text_error(503, f"query stopped: it ran past the time limit of {limit:g} s")
            except TooLarge:
                mb = self.config.max_result / (1024 * 1024)
                return text_error(400, f"the result is larger than this server's {mb:g} MB cap: add a LIMIT")
            except EngineUnavailable as exc:
                if attempt == 0 and self.watchdog.generation != generation:
                    continue  # the engine was restarted under this query: a read is safe to run again
                return text_error(503, f"the SPARQL engine is unavailable: {exc}")
        if answer.status >= 400:
            return self._engine_error(answer.body, answer.status, base, answer.engine_ns)
        if CANCELLED_MARKER.encode() in answer.body[-(len(CANCELLED_MARKER) + 64) :]:
            return text_error(503, f"query stopped: it ran past the time limit of {limit:g} s")
        headers = {"Content-Type": answer.content_type, "Vary": "Accept"}
        return Response(200, headers, answer.body, engine_ns=answer.engine_ns)

    async def _update(self, operation: Operation, endpoint: str) -> Response:
        assert self.upstream is not None, "forwarded only to an engine of pcm's"
        base = f"{self.public_url}/{endpoint}"
        body = operation.with_base(base).encode("utf-8")
        limit = self.config.update_timeout
        try:
            answer = await self.upstream.fetch(
                "POST",
                operation.engine_target("/update"),
                body=body,
                headers={"Content-Type": UPDATE_TYPE + "; charset=utf-8"},
                timeout=limit,
                write=True,
            )
        except TimeLimit:
            return text_error(503, f"update not confirmed: it ran past the time limit of {limit:g} s")
        except WriteUnconfirmed as exc:
            return text_error(503, str(exc))
        except EngineUnavailable as exc:
            return text_error(503, f"the SPARQL engine is unavailable, nothing was written: {exc}")
        if answer.status >= 400:
            return self._engine_error(answer.body, answer.status, base, answer.engine_ns)
        await self._after_write()
        return Response(204, engine_ns=answer.engine_ns)

    async def _after_write(self) -> None:
        """Bring the side index in step with a write that went straight to the engine (an update, a Graph Store
        write), so ``recall`` finds what was inserted and forgets what was dropped."""
        if self.memory.settings.index_enabled:
            from starlette.concurrency import run_in_threadpool

            await run_in_threadpool(self.sync_index)

    def sync_index(self) -> None:
        with self.memory_lock:
            try:
                with resource_errors():  # LanceDB's full disk too: one line in the log, not a failed write
                    self.memory.sync_index()
            except PcmError as exc:  # the write holds; the index catches up at the next reconcile
                print(f"pcm serve: the side index could not follow a write: {exc}", file=sys.stderr)

    # -- Graph Store Protocol ----------------------------------------------------------------------------------------

    async def graph_store(self, request: Request) -> Response:
        if self.upstream is None:
            return self._writes_elsewhere() if request.method not in ("GET", "HEAD") else text_error(
                501, f"read this memory's graphs from its store at {self.memory.settings.store_url}, "
                     "or with CONSTRUCT queries at /query")
        params = [(k, v) for k, v in request.params if k in _GSP_PARAMS]
        target = store_target(self.public_url + "/store", params)
        if request.method in ("GET", "HEAD"):
            return await self._graph_store_read(request, target)
        if request.method not in ("PUT", "POST", "DELETE"):
            return text_error(405, f"{request.method} is not a Graph Store Protocol method", Allow="GET, HEAD, PUT, POST, DELETE")
        refused = await self._refuse_upload(request)
        if refused is not None:
            return refused
        headers = {"Content-Type": request.header("Content-Type")} if request.header("Content-Type") else {}
        try:
            answer = await self.upstream.fetch(
                request.method, target, body=request.body, headers=headers, timeout=self.config.update_timeout,
                write=True,
            )
        except TimeLimit:
            limit = self.config.update_timeout
            return text_error(503, f"graph store write not confirmed: it ran past the time limit of {limit:g} s")
        except WriteUnconfirmed as exc:
            return text_error(503, str(exc))
        except (TooLarge, EngineUnavailable) as exc:
            return text_error(503, f"the SPARQL engine is unavailable, nothing was written: {exc}")
        if answer.status >= 400:
            message = _one_line(answer.body)
            return text_error(_engine_status(answer.status, message), message)
        await self._after_write()
        return Response(answer.status, {}, answer.body)

    async def _refuse_upload(self, request: Request) -> Response | None:
        """A body over the memory's RDF limits, or declaring DTD entities, never reaches the engine
        (:mod:`pcm.endpoint.uploads`); read in a worker thread, as a body may take a second to parse."""
        from starlette.concurrency import run_in_threadpool

        refused = await run_in_threadpool(
            refuse_upload, request.body, request.header("Content-Type"), RdfLimits.of(self.memory.settings),
            base_iri=self.public_url + "/store",
        )
        return text_error(*refused) if refused is not None else None

    async def _graph_store_read(self, request: Request, target: str) -> Response:
        """Stream the graph (or dataset) through without buffering: a dump may be far larger than a result."""
        assert self.upstream is not None, "forwarded only to an engine of pcm's"
        headers = {"Accept": request.header("Accept") or "application/n-quads"}
        try:
            answer = await self.upstream.stream(request.method, target, headers=headers)
        except (TimeLimit, EngineUnavailable) as exc:
            return text_error(503, f"the SPARQL engine is unavailable: {exc}")
        if answer.status >= 400:
            return text_error(answer.status, _one_line(await answer.read()))
        content_type = {"Content-Type": answer.headers.get("content-type", "")}
        if request.method == "HEAD":
            await answer.read()
            return Response(answer.status, content_type)
        return Response(answer.status, content_type, answer.pieces(), on_done=answer.aclose)

    # -- the JSON API ---------------------------------------------------------------------------------------------

    def api_health(self, request: Request) -> Response:
        return self._api(request, "GET", lambda: models.Health(
            status="ok", pid=os.getpid(), memory=str(self.memory.settings.memory),
            engine_restarts=self.engine_restarts,
        ))

    def api_stats(self, request: Request) -> Response:
        """What the memory holds (``pcm stats``), and the extraction worker's state when one runs."""

        def stats() -> models.MemoryStats:
            data: dict[str, Any] = self.memory.stats().as_json()
            if self.extraction is not None:
                data["extraction_queue"] = self.extraction.status().as_json()
            return models.MemoryStats.model_validate(data)

        return self._api(request, "GET", stats)

    def api_timings(self, request: Request) -> Response:
        """The front's own time per request next to the engine's, over the most recent requests."""
        return self._api(request, "GET", lambda: models.Timings.model_validate(
            {**self.timings.summary(), "engine_restarts": self.engine_restarts}
        ))

    def api_openapi(self, request: Request) -> Response:
        """The JSON API's OpenAPI document, generated once from the models the handlers use."""
        if self._openapi is None:
            from pcm.endpoint.openapi import openapi_document

            self._openapi = openapi_document(__version__)
        document = self._openapi
        return self._api(request, "GET", lambda: document)

    def api_info(self, request: Request) -> Response:
        m = self.memory.manifest
        return self._api(request, "GET", lambda: models.Info.model_validate(
            {
                "memory": str(self.memory.settings.memory),
                "owner": m.owner,
                "owner_iri": self.memory.naming.owner,
                "namespace": m.namespace,
                "prefixes": PREFIXES,  # what the explorer's SPARQL editor completes
                "writable": self.config.writable,
                "index": self.memory.settings.index_enabled,
                "limits": {
                    "query_timeout_s": self.config.query_timeout,
                    "update_timeout_s": self.config.update_timeout,
                    "max_body_bytes": self.config.max_body,
                    "max_result_bytes": self.config.max_result,
                },
                "endpoints": {  # over an external store, writes go to the store itself ("": not here)
                    "query": self.public_url + "/query",
                    "update": self.public_url + "/update" if self.upstream is not None else "",
                    "graph_store": self.public_url + "/store" if self.upstream is not None else "",
                },
            }
        ))

    def _api(self, request: Request, method: str, action: Callable[[], object], status: int = 200) -> Response:
        """Run an API action; PcmError becomes a JSON error with a status that says whose fault it was.

        An action answers with a model (or a list of them), dumped as the JSON its schema describes (or with a
        :class:`Response` of its own, e.g. a dump in its RDF media type); a model that does not hold (a bug, not bad
        input) is an internal error, not a 400."""
        if request.method != method:
            return json_error(405, f"use {method} for {request.path}", Allow=method)
        try:
            answer = action()
            return answer if isinstance(answer, Response) else json_response(_dump(answer), status)
        except ProtocolError as exc:
            return json_error(exc.status, str(exc))
        except PcmError as exc:
            return pcm_error(exc)
        except (OSError, MemoryError, RuntimeError) as exc:  # a full disk is not a bug: one line
            refused = refused_error(exc)
            if refused is None:
                raise
            return refused

    def api_ingest(self, request: Request) -> Response:
        """Store messages. With ``Accept: application/x-ndjson`` the answer is streamed as ``/api/import``'s is
        (progress while the posts are stored, extracted inline and indexed, then the result), so a client shows
        how far a large file got; otherwise it is the result alone, once everything is stored."""
        refused = self._check_token(request.headers)
        if refused is not None:
            return refused
        if request.method == "POST" and "application/x-ndjson" in request.header("Accept").lower():
            try:
                work = self._ingest(request)  # the body is read and checked before the answer starts
            except PcmError as exc:
                return pcm_error(exc)
            return streamed(lambda progress, total: _dump(work(progress, total)))
        return self._api(request, "POST", lambda: self._ingest(request)(None, None))

    def api_reindex(self, request: Request) -> Response:
        """``POST`` starts rebuilding the side index in the background (202); ``GET`` tells how far it got.

        The rebuild holds the memory lock (ask, recall and ingest wait for it, SPARQL reads do not), so it runs
        in a thread while the client polls; a second ``POST`` while it runs is answered 409.
        """
        if request.method == "GET":
            return self._api(request, "GET", lambda: _state(self.reindex_job.status()))
        if request.method != "POST":
            return json_error(405, "use POST to start a reindex, GET to follow it", Allow="GET, POST")
        refused = self._check_token(request.headers)
        if refused is not None:
            return refused
        if not self.memory.settings.index_enabled:
            return json_error(400, "the side index is turned off in this server (PCM_INDEX=off): nothing to rebuild")
        try:
            state = self.reindex_job.start(self._reindex, self._reindex_total)
        except AlreadyRunning as exc:
            running = self.reindex_job.status().as_json()
            busy = models.ReindexBusy.model_validate({**running, "error": f"{exc}: follow it with GET /api/reindex"})
            return json_response(_dump(busy), 409)
        return json_response(_dump(_state(state)), 202)

    def _reindex(self, progress: Callable[[int], None]) -> int:
        with self.memory_lock:
            return self.memory.reindex(progress=progress)

    def _reindex_total(self) -> int:
        """Rows a rebuild writes (progress counts posts, then entities), so a client's bar ends at 100%."""
        return self.memory.post_count() + sum(1 for _ in self.memory.store.entities())

    def _ingest(self, request: Request) -> _IngestWork:
        """The write what the body holds asks for, its body read and checked (a refusal raised here, before any
        write): a message already stored (same id, same key, same chat) is a duplicate.

        One message (``{"text": ...}``) goes through :meth:`Memory.remember`, its key being the body's ``id`` or
        the ``Idempotency-Key`` header; everything else is parsed into conversations first (all of them, before
        the first write) and ingested, which skips the posts already stored.
        """
        from pcm.conversations import parse_file, parse_messages

        key = request.header("Idempotency-Key").strip() or None
        media_type = request.header("Content-Type").split(";")[0].strip().lower()
        if media_type in ("application/x-ndjson", "application/jsonl", "application/x-jsonlines"):
            return self._ingest_conversations(_parse_payload(request.body, "jsonl", parse_file))
        data = _json_body(request.body)
        if isinstance(data, dict) and "text" in data:
            _check_texts(data, text=MESSAGE_TEXT)
            message = validated(models.IngestText, data)
            return lambda progress, total: self._remember(message, key, progress, total)
        if isinstance(data, dict) and "messages" in data and "conversations" not in data:
            validated(models.IngestChat, data)
            chat = parse_messages(data, key=key)
            chat.source = "request body"
            return self._ingest_conversations([chat])
        fmt = None
        if isinstance(data, dict) and "conversations" in data:
            wrapped = validated(models.IngestFile, data)
            fmt, data = wrapped.format, wrapped.conversations
        return self._ingest_conversations(_parse_payload(json.dumps(data).encode("utf-8"), fmt, parse_file))

    def _ingest_conversations(self, conversations: list[Any]) -> _IngestWork:
        return lambda progress, total: self._store_conversations(conversations, progress, total)

    def _store_conversations(
        self, conversations: list[Any], progress: Callable[[int], None] | None, total: Callable[[int | None], None] | None,
    ) -> models.IngestResult:
        if total is not None:
            total(sum(len(c.utterances) for c in conversations))
        with self.memory_lock:
            report = self.memory.ingest(conversations, progress=progress)
        return models.IngestResult(
            stored=report.added, duplicates=report.skipped, conversations=report.conversations,
            utterances=report.utterances, posts=report.posts, mode=report.mode, extraction=report.extraction,
            pending=report.pending,
        )

    def _remember(
        self, message: models.IngestText, key: str | None, progress: Callable[[int], None] | None,
        total: Callable[[int | None], None] | None,
    ) -> models.IngestResult:
        if total is not None:
            total(1)
        with self.memory_lock:
            done = self.memory.remember(
                message.text, at=message.at, speaker=message.speaker, session=message.session, role=message.role,
                key=message.id if message.id is not None else key,
            )
        if progress is not None:
            progress(1)  # stored (or found stored), extracted when inline, indexed: one message is one step
        llm = self.memory.settings.llm
        mode = done.mode or (f"extraction ({llm})" if llm.enabled else EPISODIC)  # a duplicate stored nothing
        return models.IngestResult(
            stored=int(done.stored), duplicates=int(not done.stored), conversations=1, utterances=1,
            posts=[done.post] if done.stored else [], mode=mode, extraction={},
            pending=int(done.stored and mode in (QUEUED, EPISODIC)),
        )

    def api_ask(self, request: Request) -> Response:
        def ask() -> object:
            data = _json_body(request.body)
            _check_texts(data, question=ASK_TEXT)
            body = validated(models.AskBody, data)
            if not body.question.strip():
                raise InputError('give {"question": "..."}')
            with self.memory_lock:
                return self.memory.ask(body.question, k=body.k, plan=body.plan, as_of=body.as_of)

        return self._api(request, "POST", ask)

    def api_recall(self, request: Request) -> Response:
        def recall() -> object:
            query = validated(models.RecallQuery, _params(request))
            if not query.q.strip():
                raise InputError("give the text to recall as ?q=")
            with self.memory_lock:
                hits = self.memory.recall(query.q, query.k, **_recall_filters(query))
            return hits

        return self._api(request, "GET", recall)

    def api_search(self, request: Request) -> Response:
        """The explorer's search box: hybrid recall and entity matching from the side index, or text search."""

        def search() -> object:
            query = validated(models.SearchQuery, _params(request))
            text, k = query.q.strip(), RECALL_K.check(query.k)
            if not text:
                raise InputError("give the text to search for as ?q=")
            if not self.memory.settings.index_enabled:
                return models.SearchResult.model_validate(self._search_text(text, k))
            try:
                with self.memory_lock:
                    hits = self.memory.recall(text, k)
                    matches = self.memory.index.match_entities(text, k)
            except PcmError as exc:  # an unusable index (other model, ...) still leaves text search
                return models.SearchResult.model_validate({**self._search_text(text, k), "note": str(exc)})
            return models.SearchResult(
                mode="hybrid",
                hits=hits,
                entities=[models.EntityMatch(iri=e.iri, label=e.label, score=e.score, how=e.how) for e in matches],
            )

        return self._api(request, "GET", search)

    def api_entity(self, request: Request) -> Response:
        def entity() -> object:
            query = validated(models.EntityQuery, _params(request))
            return self.memory.entity_page(query.iri, timeout=self.config.query_timeout)

        return self._api(request, "GET", entity)

    def api_why(self, request: Request) -> Response:
        """Where a fact, entity or message came from (``Memory.why``, as ``pcm why`` and MCP's ``why``)."""
        return self._api(request, "GET", lambda: self.memory.why(validated(models.WhyQuery, _params(request)).iri))

    def api_history(self, request: Request) -> Response:
        """How the facts about an entity changed (``Memory.history``, as ``pcm history`` and MCP's ``history``)."""
        return self._api(request, "GET",
                         lambda: self.memory.history(validated(models.HistoryQuery, _params(request)).iri))

    def api_export(self, request: Request) -> Response:
        """The memory's dump (``Memory.export``, as ``pcm export`` writes it), answered in its RDF media type."""

        def export() -> Response:
            fmt = validated(models.ExportQuery, _params(request)).format
            media_type = models.EXPORT_MEDIA_TYPES[fmt] + "; charset=utf-8"
            return Response(200, {"Content-Type": media_type, "Cache-Control": "no-store"}, self.memory.export(fmt))

        return self._api(request, "GET", export)

    def api_conversation(self, request: Request) -> Response:
        def conversation() -> object:
            query = validated(models.ConversationQuery, _params(request))
            given = query.iri or query.id
            if not given:
                raise InputError("give ?iri= (the thread IRI) or ?id= (the session id)")
            thread = self.memory.store.find_session(given)
            if thread is None:
                raise InputError(f"no conversation {given!r} in this memory")
            return models.ConversationPage.model_validate(
                self.memory.conversation_page(thread, timeout=self.config.query_timeout))

        return self._api(request, "GET", conversation)

    def api_conversations(self, request: Request) -> Response:
        return self._api(request, "GET", lambda: [
            models.ConversationSummary.model_validate(c)
            for c in self.memory.conversation_list(timeout=self.config.query_timeout)
        ])

    def _search_text(self, text: str, k: int) -> dict[str, object]:
        return self.memory.search_text(text, k, timeout=self.config.query_timeout)

    def api_messages(self, request: Request) -> Response:
        """A page of stored messages, oldest first, narrowed by session and time (``Memory.messages``)."""

        def page() -> object:
            query = validated(models.MessagesQuery, _params(request))
            return self.memory.messages(session=query.session, since=query.since, until=query.until,
                                        limit=query.limit, offset=query.offset)

        return self._api(request, "GET", page)

    def api_message(self, request: Request) -> Response:
        """``GET`` one stored message; ``DELETE`` forgets it (``Memory.delete_messages``, the owner's token)."""
        if request.method == "DELETE":
            refused = self._check_token(request.headers)
            if refused is not None:
                return refused

            def delete() -> object:
                query = validated(models.MessageDelete, _params(request))
                with self.memory_lock:
                    return self.memory.delete_messages(post=query.post, purge=query.purge)

            return self._api(request, "DELETE", delete)
        return self._api(request, "GET", lambda: self.memory.message(
            validated(models.MessageQuery, _params(request)).post))

    def api_forget(self, request: Request) -> Response:
        """Forget one message or a whole session (``pcm forget``; the owner's token)."""
        refused = self._check_token(request.headers)
        if refused is not None:
            return refused

        def forget() -> object:
            body = validated(models.ForgetBody, _json_body(request.body))
            with self.memory_lock:
                return self.memory.delete_messages(post=body.post, session=body.session, purge=body.purge)

        return self._api(request, "POST", forget)

    def _streamed_write(
        self,
        request: Request,
        body_model: type[M],
        what: str,
        run: Callable[[M, Callable[[int], None], Callable[[int | None], None]], object],
    ) -> Response:
        """A long write (the owner's token, ``POST``, a typed JSON body) whose progress is streamed back as JSON
        lines, then its result or its one-line error."""
        refused = self._check_token(request.headers)
        if refused is not None:
            return refused
        if request.method != "POST":
            return json_error(405, f"use POST to {what}", Allow="POST")
        try:
            body = validated(body_model, _json_body(request.body))
        except PcmError as exc:
            return pcm_error(exc)
        return streamed(lambda progress, total: run(body, progress, total))

    def api_import(self, request: Request) -> Response:
        """Import a file of RDF (``pcm import``), written to a private temporary file under its own name (never a
        path on this machine)."""

        def run(body: models.ImportBody, progress: Callable[[int], None], _total: object) -> object:
            with tempfile.TemporaryDirectory(prefix="pcm-import-") as folder:
                path = Path(folder) / (Path(body.name).name or "import")
                path.write_text(body.data, encoding="utf-8")
                with self.memory_lock:
                    return self.memory.import_rdf(path, body.format, base_iri=body.base, progress=progress).as_json()

        return self._streamed_write(request, models.ImportBody, "import", run)

    def api_extract(self, request: Request) -> Response:
        """Extract the facts of stored posts (``pcm extract``) with this server's model; the memory lock is held
        throughout, as a reindex holds it."""

        def run(body: models.ExtractBody, progress: Callable[[int], None], total: Callable[[int | None], None]) -> object:
            with self.memory_lock:
                return self.memory.extract_selection(
                    body.selection, force=body.force, progress=progress, total=total
                ).as_json()

        return self._streamed_write(request, models.ExtractBody, "extract", run)

    def api_facts(self, request: Request) -> Response:
        """A page of facts, those said earliest first, narrowed by session and time (``Memory.facts``)."""

        def page() -> object:
            query = validated(models.FactsQuery, _params(request))
            return self.memory.facts(session=query.session, since=query.since, until=query.until,
                                     limit=query.limit, offset=query.offset)

        return self._api(request, "GET", page)

    def api_fact(self, request: Request) -> Response:
        """``GET`` one fact; ``DELETE`` deletes it, recorded in the history graph (the owner's token)."""
        if request.method == "DELETE":
            refused = self._check_token(request.headers)
            if refused is not None:
                return refused

            def delete() -> object:
                query = validated(models.FactQuery, _params(request))
                with self.memory_lock:
                    return self.memory.delete_fact(query.id)

            return self._api(request, "DELETE", delete)
        return self._api(request, "GET", lambda: self.memory.fact(validated(models.FactQuery, _params(request)).id))

    # -- the explorer's files -----------------------------------------------------------------------------------

    def static(self, path: str) -> Response:
        name = "index.html" if path in ("/", "/index.html") else path.removeprefix("/static/")
        if name != "index.html" and not path.startswith("/static/"):
            return json_error(404, f"no such resource: {path}")
        file = (STATIC / name).resolve()
        if STATIC not in file.parents or not file.is_file():
            return json_error(404, f"no such resource: {path}")
        media_type = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
        if media_type.startswith("text/") or media_type in ("application/javascript", "text/javascript"):
            media_type += "; charset=utf-8"
        headers = {"Content-Type": media_type, "Cache-Control": "no-cache"}
        if file.suffix == ".html":
            headers.update(_HTML_HEADERS)
        return Response(200, headers, file.read_bytes())

    # -- every answer ------------------------------------------------------------------------------------------

    def cors_headers(self, origin: str) -> dict[str, str]:
        """CORS headers for a request from ``origin``: only when the owner allowed that origin (or any)."""
        allowed = self.config.cors
        if not (allowed and origin and (allowed == "*" or origin == allowed)):
            return {}
        return {
            "Access-Control-Allow-Origin": allowed if allowed == "*" else origin,
            "Access-Control-Allow-Headers": "Authorization, Content-Type, Accept",
            "Access-Control-Allow-Methods": METHODS,
            "Access-Control-Max-Age": "600",
        }


def _one_line(body: bytes) -> str:
    line = " ".join(body.decode("utf-8", "replace").split())
    return line[:500] if line else "the SPARQL engine refused the request"


def streamed(work: Callable[[Callable[[int], None], Callable[[int | None], None]], object]) -> Response:
    """Run ``work(progress, total)`` in a thread and answer with JSON lines (``application/x-ndjson``) as it runs:
    a ``progress`` event with the count done (and the total, once known) whenever it moves, then one ``result``
    event with what the work returned, or one ``error`` event with the line and exit code every face gives the
    error. The answer's status is 200 before the work starts, so an error is an event, not a status."""
    import queue

    events: queue.SimpleQueue[dict[str, Any] | None] = queue.SimpleQueue()
    counts: dict[str, int | None] = {"done": 0, "total": None}

    def progress(n: int) -> None:
        counts["done"] = (counts["done"] or 0) + n
        events.put({"event": "progress", **counts})

    def total(n: int | None) -> None:
        counts["total"] = n
        events.put({"event": "progress", **counts})

    def run() -> None:
        try:
            events.put({"event": "result", "result": work(progress, total)})
        except PcmError as exc:
            events.put({"event": "error", **models.ErrorBody(error=exc.line, exit_code=exc.exit_code).as_json()})
        except (OSError, MemoryError) as exc:  # a full disk is not a bug: its one line
            from pcm.oserrors import resource_error

            refused = resource_error(exc)
            if refused is None:
                raise
            events.put({"event": "error", **models.ErrorBody(error=refused.line, exit_code=refused.exit_code).as_json()})
        finally:
            events.put(None)  # the end of the answer, whatever happened (a bug is logged by the thread)

    async def lines() -> AsyncIterator[bytes]:
        import anyio.to_thread

        while (event := await anyio.to_thread.run_sync(events.get)) is not None:
            yield (json.dumps(event, ensure_ascii=False, default=_json_default) + "\n").encode("utf-8")

    threading.Thread(target=run, name="pcm-streamed", daemon=True).start()
    return Response(200, {"Content-Type": "application/x-ndjson; charset=utf-8", "Cache-Control": "no-store"}, lines())


def _json_body(body: bytes) -> Any:
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"the body is not JSON: {exc}") from exc
    except RecursionError:  # thousands of nested brackets: Python's parser gives up before the stack does
        raise InputError("the body is nested too deeply to be read as JSON") from None


def _check_texts(data: object, **names: tuple[str, str]) -> None:
    """Refuse a text of the body the typed model cannot even hold (a lone surrogate) with the facade's own line
    (:data:`pcm.memory.ASK_TEXT`, ...), before the model reads it."""
    if isinstance(data, dict):
        for key, (name, where) in names.items():
            if isinstance(data.get(key), str):
                check_text(data[key], name, where)


def validated(model: type[M], data: object) -> M:
    """``data`` checked against ``model``; what does not hold is one InputError line naming the fields."""
    try:
        return model.model_validate(data)
    except ModelError as exc:
        problems = [f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()[:3]]
        more = f" (and {exc.error_count() - 3} more)" if exc.error_count() > 3 else ""
        where = "the body does" if issubclass(model, models.Body) else "the query parameters do"
        raise InputError(f"{where} not fit {model.__name__}: " + "; ".join(problems) + more) from None


def _params(request: Request) -> dict[str, str]:
    """Query parameters, the first value of each, empty ones left out (``?k=`` means the default)."""
    params: dict[str, str] = {}
    for name, value in request.params:
        if value != "":
            params.setdefault(name, value)
    return params


def _dump(value: object) -> object:
    """Models (and lists of them) as the JSON their schemas describe; absent optional keys stay absent."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_unset=True)
    if isinstance(value, list):
        return [_dump(v) for v in value]
    return value


def _state(state: Any) -> models.ReindexState:
    return models.ReindexState.model_validate(state.as_json())


def _recall_filters(query: models.RecallQuery) -> dict[str, Any]:
    """The filters given, as given: the memory reads the times (in its zone when they have none)."""
    return {name: getattr(query, name) for name in ("role", "speaker", "session", "mode", "since", "until")
            if getattr(query, name)}


def _parse_payload(payload: bytes, fmt: str | None, parse_file: Callable[..., list[Any]]) -> list[Any]:
    """Parse an ingest payload with the file parsers ``pcm ingest`` uses (they read files, so write one)."""
    suffix = ".jsonl" if fmt == "jsonl" else ".json"
    with tempfile.TemporaryDirectory(prefix="pcm-ingest-") as tmp:
        path = Path(tmp) / f"body{suffix}"
        path.write_bytes(payload)
        try:
            conversations = parse_file(path, fmt)
            for conversation in conversations:
                conversation.source = "request body"
            return conversations
        except PcmError as exc:
            raise type(exc)(str(exc).replace(str(path), "request body")) from None

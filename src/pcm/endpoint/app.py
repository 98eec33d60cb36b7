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
from typing import Any

from pcm.backend_remote import CANCELLED_MARKER
from pcm.endpoint.config import ServeConfig, is_loopback
from pcm.endpoint.engine import Watchdog
from pcm.endpoint.explore import Explorer
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
    user_positions,
)
from pcm.endpoint.timing import Timings
from pcm.endpoint.upstream import EngineUnavailable, TimeLimit, TooLarge, Upstream, WriteUnconfirmed
from pcm.errors import InputError, PcmError, QueryError, UsageError, ValidationError
from pcm.memory import Memory

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

    def __init__(
        self, config: ServeConfig, memory: Memory, upstream: Upstream, watchdog: Watchdog, public_url: str
    ) -> None:
        self.config = config
        self.memory = memory
        self.upstream = upstream
        self.watchdog = watchdog
        self.public_url = public_url.rstrip("/")
        self.explorer = Explorer(memory.backend, memory.manifest.namespace, timeout=config.query_timeout)
        #: One writer at a time, and the side index (embedder, LanceDB) used by one request at a time.
        self.memory_lock = threading.RLock()
        self.verbose = False
        self.timings = Timings()
        self.reindex_job = BackgroundJob("reindex")

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
            "/api/conversation": self.api_conversation,
            "/api/conversations": self.api_conversations,
            "/api/reindex": self.api_reindex,
            "/api/stats": self.api_stats,
        }

    # -- before the body is read ------------------------------------------------------------------------------

    def preflight(self, method: str, path: str, headers: Mapping[str, str]) -> Response | None:
        """Checks that need no body: Host, CORS preflight, body size, and the token where a write is certain.

        Refusing here, before the body is read, means no ``100 Continue`` is sent: a client without the token,
        or with a body over the cap, is not asked to upload it.
        """
        if not self._host_allowed(headers.get("Host") or ""):
            return json_error(403, "this server answers only on its loopback name (Host header refused)")
        if method == "OPTIONS":
            return Response(204, {"Allow": METHODS})
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
        return path in ("/update", "/api/ingest", "/api/reindex") and method == "POST"

    def _check_token(self, headers: Mapping[str, str]) -> Response | None:
        if not self.config.token:
            return json_error(
                403, "this server is read-only: start `pcm serve` with --token (or PCM_TOKEN) to allow writes"
            )
        scheme, _, given = (headers.get("Authorization") or "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), self.config.token.encode()):
            return json_error(401, "a valid bearer token is required for writes", **{"WWW-Authenticate": "Bearer"})
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
            return refused if refused is not None else await self._update(operation, endpoint)
        return await self._query(operation, endpoint, request.header("Accept"))

    def _engine_error(self, answer_body: bytes, status: int, base: str, engine_ns: int) -> Response:
        """The engine's refusal on one line, with positions in the user's text (not the text sent on)."""
        message = user_positions(_one_line(answer_body), len(base_prefix(base)))
        return replace(text_error(status, message), engine_ns=engine_ns)

    async def _query(self, operation: Operation, endpoint: str, accept: str) -> Response:
        base = f"{self.public_url}/{endpoint}"
        body = operation.with_base(base).encode("utf-8")
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
                self.memory.sync_index()
            except PcmError as exc:  # the write holds; the index catches up at the next reconcile
                print(f"pcm serve: the side index could not follow a write: {exc}", file=sys.stderr)

    # -- Graph Store Protocol ----------------------------------------------------------------------------------------

    async def graph_store(self, request: Request) -> Response:
        params = [(k, v) for k, v in request.params if k in _GSP_PARAMS]
        target = "/store" + ("?" + "&".join(f"{k}={_quote(v)}" if v else k for k, v in params) if params else "")
        if request.method in ("GET", "HEAD"):
            return await self._graph_store_read(request, target)
        if request.method not in ("PUT", "POST", "DELETE"):
            return text_error(405, f"{request.method} is not a Graph Store Protocol method", Allow="GET, HEAD, PUT, POST, DELETE")
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
            return text_error(answer.status, _one_line(answer.body))
        await self._after_write()
        return Response(answer.status, {}, answer.body)

    async def _graph_store_read(self, request: Request, target: str) -> Response:
        """Stream the graph (or dataset) through without buffering: a dump may be far larger than a result."""
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
        return json_response(
            {"status": "ok", "pid": os.getpid(), "memory": str(self.memory.settings.memory), "engine_restarts": self.watchdog.engine.restarts}
        )

    def api_stats(self, request: Request) -> Response:
        """The front's own time per request next to the engine's, over the most recent requests."""
        return json_response({**self.timings.summary(), "engine_restarts": self.watchdog.engine.restarts})

    def api_info(self, request: Request) -> Response:
        m = self.memory.manifest
        return json_response(
            {
                "memory": str(self.memory.settings.memory),
                "owner": m.owner,
                "owner_iri": self.memory.naming.owner,
                "namespace": m.namespace,
                "writable": self.config.writable,
                "index": self.memory.settings.index_enabled,
                "limits": {
                    "query_timeout_s": self.config.query_timeout,
                    "update_timeout_s": self.config.update_timeout,
                    "max_body_bytes": self.config.max_body,
                    "max_result_bytes": self.config.max_result,
                },
                "endpoints": {
                    "query": self.public_url + "/query",
                    "update": self.public_url + "/update",
                    "graph_store": self.public_url + "/store",
                },
            }
        )

    def _api(self, request: Request, method: str, action: Callable[[], object]) -> Response:
        """Run an API action; PcmError becomes a JSON error with a status that says whose fault it was."""
        if request.method != method:
            return json_error(405, f"use {method} for {request.path}")
        try:
            return json_response(action())
        except ProtocolError as exc:
            return json_error(exc.status, str(exc))
        except (InputError, UsageError, ValidationError) as exc:
            return json_error(400, str(exc))
        except QueryError as exc:
            return json_error(503 if "time limit" in str(exc) else 400, str(exc))
        except PcmError as exc:
            return json_error(500, str(exc))

    def api_ingest(self, request: Request) -> Response:
        refused = self._check_token(request.headers)
        if refused is not None:
            return refused

        def ingest() -> object:
            conversations = self._conversations(request)
            with self.memory_lock:
                report = self.memory.ingest(conversations)
            return {**report.as_json(), "posts": report.posts}

        return self._api(request, "POST", ingest)

    def api_reindex(self, request: Request) -> Response:
        """``POST`` starts rebuilding the side index in the background (202); ``GET`` tells how far it got.

        The rebuild holds the memory lock (ask, recall and ingest wait for it, SPARQL reads do not), so it runs
        in a thread while the client polls; a second ``POST`` while it runs is answered 409.
        """
        if request.method == "GET":
            return json_response(self.reindex_job.status().as_json())
        if request.method != "POST":
            return json_error(405, "use POST to start a reindex, GET to follow it")
        refused = self._check_token(request.headers)
        if refused is not None:
            return refused
        if not self.memory.settings.index_enabled:
            return json_error(400, "the side index is turned off in this server (PCM_INDEX=off): nothing to rebuild")
        try:
            state = self.reindex_job.start(self._reindex, self._reindex_total)
        except AlreadyRunning as exc:
            running = self.reindex_job.status().as_json()
            return json_response({**running, "error": f"{exc}: follow it with GET /api/reindex"}, 409)
        return json_response(state.as_json(), 202)

    def _reindex(self, progress: Callable[[int], None]) -> int:
        with self.memory_lock:
            return self.memory.reindex(progress=progress)

    def _reindex_total(self) -> int:
        """Rows a rebuild writes (progress counts posts, then entities), so a client's bar ends at 100%."""
        return self.memory.post_count() + sum(1 for _ in self.memory.store.entities())

    def _conversations(self, request: Request) -> list[Any]:
        """Conversations from an ingest body: one utterance ``{"text": ...}``, or any format ``pcm ingest`` reads."""
        from pcm.conversations import parse_file

        media_type = request.header("Content-Type").split(";")[0].strip().lower()
        if media_type in ("application/x-ndjson", "application/jsonl", "application/x-jsonlines"):
            return _parse_payload(request.body, "jsonl", parse_file)
        data = _json_body(request.body)
        if isinstance(data, dict) and "text" in data:
            return [self._utterance(data)]
        fmt = None
        if isinstance(data, dict) and "conversations" in data:
            fmt, data = data.get("format"), data["conversations"]
        return _parse_payload(json.dumps(data).encode("utf-8"), fmt, parse_file)

    def _utterance(self, data: dict[str, Any]) -> Any:
        """One utterance as ``pcm ingest --text`` takes it; its position continues the session."""
        from pcm.conversations import Conversation, parse_text_utterance, parse_timestamp

        at = parse_timestamp(data["at"]) if data.get("at") else datetime.now().astimezone().replace(microsecond=0)
        session = data.get("session") or f"cli-{at.date().isoformat()}"
        utterance = parse_text_utterance(
            data["text"], session=session, role=data.get("role") or "user", at=at, speaker=data.get("speaker"),
            where="request body",
        )
        last = self.memory.store.last_post_of_session(self.memory.naming.session(utterance.session))
        if last:
            utterance = replace(utterance, position=last[1] + 1)
        return Conversation(id=utterance.session, utterances=[utterance], source="request body")

    def api_ask(self, request: Request) -> Response:
        def ask() -> object:
            data = _json_body(request.body)
            question = str(data.get("question") or "").strip() if isinstance(data, dict) else ""
            if not question:
                raise InputError('give {"question": "..."}')
            k = _int(data.get("k"), 5, "k")
            plan = data.get("plan")
            if plan is not None and not isinstance(plan, bool):
                raise InputError('"plan" must be true, false or absent')
            with self.memory_lock:
                return self.memory.ask(question, k=k, plan=plan).as_json()

        return self._api(request, "POST", ask)

    def api_recall(self, request: Request) -> Response:
        def recall() -> object:
            text = request.param("q") or request.param("text")
            if not text.strip():
                raise InputError("give the text to recall as ?q=")
            with self.memory_lock:
                hits = self.memory.recall(text, _int(request.param("k"), 10, "k"), **_recall_filters(request))
            return [h.as_json() for h in hits]

        return self._api(request, "GET", recall)

    def api_search(self, request: Request) -> Response:
        """The explorer's search box: hybrid recall and entity matching from the side index, or text search."""

        def search() -> object:
            text = request.param("q").strip()
            if not text:
                raise InputError("give the text to search for as ?q=")
            k = _int(request.param("k"), 10, "k")
            if not self.memory.settings.index_enabled:
                return self.explorer.search_text(text, k)
            try:
                with self.memory_lock:
                    hits = self.memory.recall(text, k)
                    matches = self.memory.index.match_entities(text, k)
            except PcmError as exc:  # an unusable index (other model, ...) still leaves text search
                return {**self.explorer.search_text(text, k), "note": str(exc)}
            return {"mode": "hybrid", "hits": [h.as_json() for h in hits], "entities": matches}

        return self._api(request, "GET", search)

    def api_entity(self, request: Request) -> Response:
        return self._api(request, "GET", lambda: self.explorer.entity(_required(request, "iri")))

    def api_conversation(self, request: Request) -> Response:
        def conversation() -> object:
            given = request.param("iri") or request.param("id")
            if not given:
                raise InputError("give ?iri= (the thread IRI) or ?id= (the session id)")
            thread = self.memory.store.find_session(given)
            if thread is None:
                raise InputError(f"no conversation {given!r} in this memory")
            return self.explorer.conversation(thread)

        return self._api(request, "GET", conversation)

    def api_conversations(self, request: Request) -> Response:
        return self._api(request, "GET", self.explorer.conversations)

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


def _quote(value: str) -> str:
    from urllib.parse import quote

    return quote(value, safe="")


def _json_body(body: bytes) -> Any:
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"the body is not JSON: {exc}") from exc


def _int(value: object, default: int, name: str) -> int:
    if value in (None, ""):
        return default
    try:
        number = int(str(value))
    except ValueError:
        raise InputError(f"{name} must be a whole number, got {value!r}") from None
    if not 1 <= number <= 1000:
        raise InputError(f"{name} must be between 1 and 1000")
    return number


def _required(request: Request, name: str) -> str:
    value = request.param(name)
    if not value:
        raise InputError(f"give ?{name}=")
    return value


def _recall_filters(request: Request) -> dict[str, object]:
    from pcm.conversations import parse_timestamp

    filters: dict[str, object] = {}
    for name in ("role", "speaker", "session", "mode"):
        if request.param(name):
            filters[name] = request.param(name)
    for name in ("since", "until"):
        if request.param(name):
            filters[name] = parse_timestamp(request.param(name))
    return filters


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

"""Fake LLM servers for tests: a threaded ``http.server`` on 127.0.0.1:0 speaking two wire formats.

The real clients (``AnthropicClient`` through the ``anthropic`` SDK, ``OpenAICompatibleClient`` through ``httpx``)
are pointed at this server, so tests exercise the actual HTTP code paths -- status codes, headers, timeouts,
malformed bodies -- without the network. The path picks the dialect:

* ``POST /v1/messages``          -- Anthropic Messages API
* ``POST /v1/chat/completions``  -- OpenAI-compatible chat completions (Ollama, vLLM, llama.cpp, LM Studio)

A *script* of :class:`Reply` objects (or callables computing one from the :class:`Received` request) is replayed in
order, one per request. ``Reply.ok(text)`` and ``Reply.error(...)`` are rendered in whichever dialect the request
used, so one script serves both providers. Every request is recorded in :attr:`FakeLLMServer.requests`.
When the script runs out the server answers 400 ``script exhausted`` (not retried by clients), so a test that
makes more calls than it planned fails loudly instead of hanging.

A request with ``"stream": true`` gets a success as server-sent events in its dialect (``Reply.chunks`` pieces,
``Reply.chunk_delay`` seconds apart), unless ``Reply.stream`` is False (a server that ignores the field). An
Anthropic request that forces a tool (``tool_choice``) gets the reply's text as that tool's JSON input.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANTHROPIC_PATH = "/v1/messages"
OPENAI_PATH = "/v1/chat/completions"

#: HTTP status -> Anthropic error ``type``, used when a Reply.error does not name one.
_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


@dataclass(frozen=True)
class Received:
    """One request as the server saw it."""

    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON, or the raw text when it was not JSON

    @property
    def dialect(self) -> str:
        return "anthropic" if self.path == ANTHROPIC_PATH else "openai"


@dataclass(frozen=True)
class Reply:
    """What the server answers to one request.

    Exactly one of ``text`` (a success in the request's dialect), ``error_message`` (an error in the request's
    dialect), ``json_body`` (this JSON verbatim) or ``raw`` (these bytes verbatim) is used, in that order.
    ``delay`` seconds are slept before answering (to provoke client timeouts).
    """

    status: int = 200
    text: str | None = None
    error_type: str | None = None
    error_message: str | None = None
    json_body: Any = None
    raw: bytes | None = None
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    chunks: int = 1
    chunk_delay: float = 0.0
    stream: bool | None = None
    input_tokens: int = 11
    output_tokens: int = 7
    stop_reason: str = "end_turn"

    @classmethod
    def ok(cls, text: str, *, input_tokens: int = 11, output_tokens: int = 7, **kw: Any) -> Reply:
        return cls(text=text, input_tokens=input_tokens, output_tokens=output_tokens, **kw)

    @classmethod
    def error(cls, status: int, message: str = "boom", *, error_type: str | None = None, **kw: Any) -> Reply:
        return cls(status=status, error_type=error_type, error_message=message, **kw)

    def streams(self, request: Received) -> bool:
        """Whether this reply goes out as server-sent events (a success to a request that asked for a stream)."""
        asked = isinstance(request.body, dict) and request.body.get("stream") is True
        return self.text is not None and self.status < 400 and asked and self.stream is not False

    def events(self, request: Received) -> list[bytes]:
        """The server-sent events of a streamed success, one byte string per event."""
        text = self.text or ""
        size = max(1, -(-len(text) // max(1, self.chunks)))
        pieces = [text[i : i + size] for i in range(0, len(text), size)] or [""]
        body = request.body if isinstance(request.body, dict) else {}
        model = body.get("model", "unknown")
        if request.dialect == "anthropic":
            tool = (body.get("tool_choice") or {}).get("name")
            block = {"type": "tool_use", "id": "toolu_fake", "name": tool, "input": {}} if tool else {
                "type": "text", "text": ""}
            delta_type, key = ("input_json_delta", "partial_json") if tool else ("text_delta", "text")
            stop = "tool_use" if tool and self.stop_reason == "end_turn" else self.stop_reason
            events = [("message_start", {"type": "message_start", "message": {
                "id": "msg_fake", "type": "message", "role": "assistant", "content": [], "model": model,
                "stop_reason": None, "stop_sequence": None,
                "usage": {"input_tokens": self.input_tokens, "output_tokens": 1}}}),
                ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block})]
            events += [("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                 "delta": {"type": delta_type, key: piece}}) for piece in pieces]
            events += [("content_block_stop", {"type": "content_block_stop", "index": 0}),
                       ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop,
                                          "stop_sequence": None}, "usage": {"output_tokens": self.output_tokens}}),
                       ("message_stop", {"type": "message_stop"})]
            return [f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events]
        finish = "stop" if self.stop_reason == "end_turn" else self.stop_reason
        chunks: list[Any] = [{"id": "c", "object": "chat.completion.chunk", "model": model,
                              "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
                             for piece in pieces]
        chunks[-1]["choices"][0]["finish_reason"] = finish
        if (body.get("stream_options") or {}).get("include_usage"):
            chunks.append({"id": "c", "object": "chat.completion.chunk", "model": model, "choices": [],
                           "usage": {"prompt_tokens": self.input_tokens, "completion_tokens": self.output_tokens}})
        out = [f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks]
        return [*out, b"data: [DONE]\n\n"]

    def render(self, request: Received) -> bytes:
        if self.text is not None:
            return _dump(_success(self, request))
        if self.error_message is not None:
            return _dump(_error(self, request))
        if self.json_body is not None:
            return _dump(self.json_body)
        return self.raw or b""


Script = Reply | Callable[[Received], Reply]


def _dump(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def _success(reply: Reply, request: Received) -> dict[str, Any]:
    model = request.body.get("model", "unknown") if isinstance(request.body, dict) else "unknown"
    if request.dialect == "anthropic":
        return {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": reply.text}],
            "model": model,
            "stop_reason": reply.stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens},
        }
    finish = "stop" if reply.stop_reason == "end_turn" else reply.stop_reason
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": reply.text}, "finish_reason": finish}
        ],
        "usage": {
            "prompt_tokens": reply.input_tokens,
            "completion_tokens": reply.output_tokens,
            "total_tokens": reply.input_tokens + reply.output_tokens,
        },
    }


def _error(reply: Reply, request: Received) -> dict[str, Any]:
    if request.dialect == "anthropic":
        kind = reply.error_type or _ANTHROPIC_ERROR_TYPES.get(reply.status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": reply.error_message}}
    return {"error": {"message": reply.error_message, "type": reply.error_type or "error", "code": reply.status}}


class FakeLLMServer:
    """A scripted Anthropic + OpenAI-compatible server on an ephemeral local port; use as a context manager."""

    def __init__(self, script: Iterable[Script] = (), *, models: Any = None) -> None:
        self._script: deque[Script] = deque(script)
        #: The JSON answered to ``GET /v1/models`` (None: 404, as a server without the route).
        self.models = models
        #: Paths of the GET requests (kept apart from :attr:`requests`, the chat calls).
        self.gets: list[str] = []
        self._lock = threading.Lock()
        self.requests: list[Received] = []
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-llm", daemon=True
        )

    @property
    def url(self) -> str:
        """Root URL, e.g. ``http://127.0.0.1:54321`` (Anthropic base URL; append ``/v1`` for OpenAI)."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def openai_url(self) -> str:
        return f"{self.url}/v1"

    def push(self, *replies: Script) -> None:
        with self._lock:
            self._script.extend(replies)

    def start(self) -> FakeLLMServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _next(self, request: Received) -> Reply:
        with self._lock:
            self.requests.append(request)
            if request.path not in (ANTHROPIC_PATH, OPENAI_PATH):
                return Reply.error(404, f"fake server: no route {request.path}")
            step = self._script.popleft() if self._script else None
        if step is None:
            return Reply.error(400, "fake server: script exhausted", error_type="invalid_request_error")
        return step if isinstance(step, Reply) else step(request)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence test output
                pass

            def do_GET(self) -> None:
                server.gets.append(self.path)
                found = self.path == "/v1/models" and server.models is not None
                payload = _dump(server.models if found else {"error": {"message": "not found", "code": 404}})
                self.send_response(200 if found else 404)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length).decode("utf-8", "replace")
                try:
                    body: Any = json.loads(raw)
                except ValueError:
                    body = raw
                request = Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                reply = server._next(request)
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.streams(request):
                    self._stream(reply, request)
                    return
                payload = reply.render(request)
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", reply.content_type)
                    self.send_header("content-length", str(len(payload)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test): nothing to answer

            def _stream(self, reply: Reply, request: Received) -> None:
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("connection", "close")
                    self.end_headers()
                    for index, event in enumerate(reply.events(request)):
                        if index and reply.chunk_delay:
                            time.sleep(reply.chunk_delay)
                        self.wfile.write(event)
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass

        return Handler

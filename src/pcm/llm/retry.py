"""Retries, backoff and HTTP error triage shared by the network clients.

Both providers go through the same loop so that a 429 from Claude and a 503 from a local vLLM behave identically
(and one set of tests covers both). An attempt either returns, raises :class:`Retryable` (rate limit, overload,
an explicit server error, connection refused), or raises :class:`pcm.errors.LLMError` for problems that waiting
cannot fix (bad key, unknown model, malformed reply) and for a request the server may still be working on: a
silence deadline that fired, a connection dropped mid-reply, a gateway timeout (504). Re-sending those would
queue a second copy behind the first on a server that works through one request at a time.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

from pcm.errors import LLMError
from pcm.llm.base import Completion, JsonSchema, Message, Request, Usage
from pcm.llm.manners import gate, idle_timeout, is_local

T = TypeVar("T")

#: Longest single wait, whatever ``retry-after`` asks for: a CLI user should not stare at a silent terminal.
MAX_WAIT = 60.0
#: Statuses worth retrying: request timeout, conflict/lock, rate limit, any server error (incl. 529 overloaded).
_RETRY_STATUSES = frozenset({408, 409, 429})
#: Provider error types that mean "try again later" whatever the status says.
_RETRY_ERROR_TYPES = frozenset({"overloaded_error", "rate_limit_error", "api_error", "timeout_error"})
_MAX_DETAIL = 200
#: A gateway that gave up waiting: the model server behind it may still be working on the request.
_STILL_WORKING_STATUSES = frozenset({504})
#: Seconds to open a connection (a refused or unreachable server is retried; this is not the silence deadline).
CONNECT_TIMEOUT = 30.0


def silence(seconds: float) -> str:
    """The one-line reason for a silence deadline that fired (never retried: the server may still be working)."""
    return (
        f"no reply for {seconds:g} s (silence deadline); not re-sent, the server may still be working on it. "
        "A slow local model may need a larger PCM_LLM_TIMEOUT"
    )


class RequestRejected(LLMError):
    """The server refused the request itself (HTTP 4xx other than auth / unknown model): retrying cannot help."""

    def __init__(self, message: str, detail: str) -> None:
        super().__init__(message)
        self.detail = detail


class Retryable(Exception):
    """A transient failure; ``retry_after`` is the server's requested wait in seconds, when it gave one."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


@dataclass(frozen=True)
class RetryPolicy:
    """How many times to retry and how long to wait; ``backoff`` and ``sleep`` are injectable for fast tests."""

    max_retries: int
    backoff: float = 1.0
    max_wait: float = MAX_WAIT
    jitter: float = 0.1
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=random.Random, compare=False)

    def delay(self, retry_index: int, retry_after: float | None) -> float:
        """Seconds to wait before retry number ``retry_index`` (0-based): the server's word, else exponential."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_wait)
        base = self.backoff * (2**retry_index)
        return min(base * (1.0 + self.rng.uniform(0.0, self.jitter)), self.max_wait)

    def run(self, name: str, attempt: Callable[[], T]) -> T:
        """Call ``attempt`` until it succeeds, fails for good, or ``max_retries`` retries are spent."""
        attempts = max(self.max_retries, 0) + 1
        for index in range(attempts):
            try:
                return attempt()
            except Retryable as exc:
                if index + 1 >= attempts:
                    raise LLMError(f"{name}: {exc.reason} (gave up after {attempts} attempt(s))") from exc
                self.sleep(self.delay(index, exc.retry_after))
        raise AssertionError("unreachable")  # pragma: no cover


def one_line(text: object, limit: int = _MAX_DETAIL) -> str:
    """Collapse whitespace and truncate, so a server's multi-line HTML error cannot break the one-line rule."""
    if isinstance(text, (bytes, bytearray)):
        text = text.decode("utf-8", "replace")
    flat = re.sub(r"\s+", " ", str(text)).strip()
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (delta-seconds or HTTP date); ``None`` when absent/bad."""
    lowered = {k.lower(): v for k, v in headers.items()}
    if "retry-after-ms" in lowered:
        try:
            return float(lowered["retry-after-ms"]) / 1000.0
        except ValueError:
            pass
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    try:
        return float(raw)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def error_detail(body: Any) -> tuple[str | None, str]:
    """``(error type, message)`` from the error bodies Anthropic, OpenAI, Ollama, vLLM and llama.cpp send."""
    if isinstance(body, (bytes, bytearray)):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            return None, one_line(body) or "(empty body)"
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            kind = error.get("type")
            message = error.get("message") or error.get("detail") or json.dumps(error)
            return (str(kind) if kind else None), one_line(message)
        if error is not None:
            return None, one_line(error)
    return None, one_line(json.dumps(body))


def mentions_unknown_model(message: str) -> bool:
    lowered = message.lower()
    return "model" in lowered and ("not found" in lowered or "does not exist" in lowered)


def triage_status(
    name: str,
    status: int,
    body: Any,
    headers: Mapping[str, str],
    *,
    model: str,
    key_hint: str,
    not_found_hint: str = "",
) -> Exception:
    """Turn an HTTP error response into the exception to raise: :class:`Retryable` or a one-line LLMError."""
    kind, message = error_detail(body)
    if status in (401, 403) or kind in ("authentication_error", "permission_error"):
        return LLMError(f"{name}: the API key was refused (HTTP {status}: {message}); check {key_hint}")
    if status == 404 or kind == "not_found_error" or (status == 400 and mentions_unknown_model(message)):
        return LLMError(f"{name}: unknown model {model!r}{not_found_hint} (HTTP {status}: {message})")
    if status in _STILL_WORKING_STATUSES:
        return LLMError(f"{name}: HTTP {status} {kind or 'error'}: {message}; not re-sent, the model server may "
                        "still be working on the request")
    if status in _RETRY_STATUSES or status >= 500 or kind in _RETRY_ERROR_TYPES:
        return Retryable(f"HTTP {status} {kind or 'error'}: {message}", parse_retry_after(headers))
    return RequestRejected(f"{name}: request rejected (HTTP {status}: {message})", message)


def mentions_temperature(exc: BaseException) -> bool:
    """Whether a rejection is about the ``temperature`` field (some newer models refuse sampling parameters)."""
    return isinstance(exc, RequestRejected) and "temperature" in exc.detail.lower()


def as_int(value: object) -> int:
    """A token count from a reply; servers that omit or garble usage count as 0 rather than fail the call."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class RetryingClient:
    """What the clients of a model behind HTTP share: a call is one attempt after another (:meth:`_attempt`) under
    the retry policy, an attempt re-sends without an optional field the server refused, and the call's tokens are
    counted under its operation once it succeeds."""

    name: str
    usage: Usage
    retry: RetryPolicy
    base_url: str
    local: bool
    timeout: float

    def _setup(
        self, base_url: str, *, timeout: float | None, max_retries: int, backoff: float, max_wait: float,
        sleep: Callable[[float], None], progress: Callable[[str], None] | None, progress_after: float,
    ) -> None:
        """Where the client sends, how long it waits for a quiet server, how it retries, and how it takes its turn
        at a local server and reports a long wait (:mod:`pcm.llm.manners`)."""
        self.usage = Usage()
        self.base_url = base_url.rstrip("/")
        self.local = is_local(self.base_url)
        self.timeout = idle_timeout(timeout, local=self.local)
        #: The retry policy in use (public so callers and tests can see what settings produced).
        self.retry = RetryPolicy(max_retries=max_retries, backoff=backoff, max_wait=max_wait, sleep=sleep)
        self._gate = gate(self.base_url, local=self.local)
        self._progress = progress
        self._progress_after = progress_after

    def complete(self, request: Request) -> Completion:
        completion = self.retry.run(
            self.name, lambda: self._attempt(request.system, request.messages, request.max_tokens, request.schema)
        )
        self.usage.record(request.operation, completion)
        return completion

    def _attempt(self, system: str, messages: list[Message], max_tokens: int, schema: JsonSchema | None) -> Completion:
        """One request, sent again without each optional field the server refuses; a :class:`Retryable` error is
        the retry policy's to retry."""
        while True:
            try:
                return self._send(system, messages, max_tokens, schema)
            except RequestRejected as exc:
                if not self._drop_refused_field(exc, schema):
                    raise

    def _send(self, system: str, messages: list[Message], max_tokens: int, schema: JsonSchema | None) -> Completion:
        raise NotImplementedError

    def _drop_refused_field(self, exc: RequestRejected, schema: JsonSchema | None) -> bool:
        """Whether the rejection names an optional field this client can stop sending (then it has stopped)."""
        raise NotImplementedError

"""Claude through the Anthropic Messages API, via the official ``anthropic`` SDK.

The SDK's own retries are switched off (``max_retries=0``): :class:`pcm.llm.retry.RetryPolicy` retries for every
provider alike. Two deliberate deviations from the SDK defaults, both so that ``temperature: 0`` keeps working:

* SDK 2.x removed ``temperature`` from ``messages.create``; it still forwards ``extra_body`` fields, so it is sent
  there.
* SDK 2.x sends ``anthropic-version: 2026-10-21``, which rejects every sampling parameter; we pin ``2023-06-01``.

Some models refuse ``temperature`` under any API version ("temperature is deprecated for this model"). On such a
400 the client drops the field for the rest of its life and re-sends at once: determinism is best effort there,
and a run that cannot be made deterministic is better than one that cannot run at all.
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pcm.errors import LLMError
from pcm.llm.base import Completion, JsonSchema, Message
from pcm.llm.manners import PROGRESS_AFTER, Wait, waiting
from pcm.llm.retry import (
    MAX_WAIT,
    RequestRejected,
    Retryable,
    RetryingClient,
    as_int,
    one_line,
    silence,
    triage_status,
)

if TYPE_CHECKING:
    from anthropic.types import MessageParam

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.anthropic.com"
#: The API version that still accepts ``temperature`` on the models that support it.
API_VERSION = "2023-06-01"
_KEY_HINT = "ANTHROPIC_API_KEY"


class AnthropicClient(RetryingClient):
    """An :class:`pcm.llm.LLMClient` for Claude; thread-safe (the SDK client and the usage counters are).

    Replies are streamed, so ``timeout`` is a deadline on *silence* (see :mod:`pcm.llm.manners`). ``base_url``
    (``ANTHROPIC_BASE_URL``) lets a proxy or gateway stand in for the public API. With a ``schema``, the model is
    made to call one tool whose ``input_schema`` is that schema (forced tool use): its input is the reply's text.
    """

    def __init__(
        self,
        *,
        api_key: str,
        model: str,
        timeout: float | None,
        max_retries: int,
        base_url: str | None = None,
        backoff: float = 1.0,
        max_wait: float = MAX_WAIT,
        sleep: Callable[[float], None] = time.sleep,
        progress: Callable[[str], None] | None = None,
        progress_after: float = PROGRESS_AFTER,
    ) -> None:
        if not api_key:
            raise LLMError("no Anthropic API key: set ANTHROPIC_API_KEY, or use PCM_LLM=none for episodic mode")
        self._setup(
            base_url or DEFAULT_BASE_URL, timeout=timeout, max_retries=max_retries, backoff=backoff,
            max_wait=max_wait, sleep=sleep, progress=progress, progress_after=progress_after,
        )
        self.name = f"anthropic:{model}"
        self.model = model
        self._send_temperature = True
        self._send_tools = True
        import anthropic  # deferred: the SDK takes seconds to import, and most runs never touch it

        # Explicit api_key and base_url keep the SDK from consulting the environment (settings own that).
        # x-api-key is sent alongside the SDK's Bearer header: the API prefers it, and proxies may only know it.
        self._sdk = anthropic.Anthropic(
            api_key=api_key,
            base_url=self.base_url,
            timeout=self.timeout,
            max_retries=0,
            default_headers={"anthropic-version": API_VERSION, "x-api-key": api_key},
        )
        # The HTTP library the SDK itself uses (httpx or a fork of it): its exceptions escape a stream being read.
        base = next(c for c in type(self._sdk._client).__mro__ if c.__name__ == "Client")
        self._http = importlib.import_module(base.__module__.split(".")[0])

    def close(self) -> None:
        self._sdk.close()

    @property
    def constrained(self) -> bool:
        """Whether the server still accepts forced tool use (False once it refused it)."""
        return self._send_tools

    def _drop_refused_field(self, exc: RequestRejected, schema: JsonSchema | None) -> bool:
        """A 400 naming temperature or forced tool use: stop sending it (a rejection is an answer, so re-sending
        is safe)."""
        detail = exc.detail.lower()
        if self._send_temperature and "temperature" in detail:
            log.warning("%s refuses temperature; continuing without it (%s)", self.name, exc)
            self._send_temperature = False
            return True
        if schema is not None and self._send_tools and ("tool" in detail or "input_schema" in detail):
            log.warning("%s rejects forced tool use; the model writes free-form output instead (%s)", self.name, exc)
            self._send_tools = False
            return True
        return False

    def _send(
        self, system: str, messages: list[Message], max_tokens: int, schema: JsonSchema | None
    ) -> Completion:
        import anthropic  # already imported by __init__; cheap here

        extra: dict[str, Any] = {"temperature": 0} if self._send_temperature else {}
        kwargs: dict[str, Any] = {"system": system} if system else {}
        tool = schema is not None and self._send_tools
        if tool:
            assert schema is not None
            kwargs["tools"] = [{
                "name": schema.name,
                "description": schema.description or "Record the answer.",
                "input_schema": schema.schema,
            }]
            kwargs["tool_choice"] = {"type": "tool", "name": schema.name}
        http = self._http
        with self._gate, waiting(self.name, write=self._progress, after=self._progress_after) as wait:
            try:
                stream: Any = self._sdk.messages.create(
                    model=self.model,
                    max_tokens=max_tokens,
                    messages=[_message(m) for m in messages],
                    extra_body=extra,
                    stream=True,
                    **kwargs,
                )
                with stream:
                    return self._read(stream, wait, tool=tool)
            except anthropic.APITimeoutError as exc:
                if isinstance(exc.__cause__, (http.ConnectTimeout, http.PoolTimeout)):
                    raise Retryable(f"cannot reach {self.base_url}: connection timed out") from exc
                raise LLMError(f"{self.name}: {silence(self.timeout)}") from exc
            except anthropic.APIConnectionError as exc:
                if isinstance(exc.__cause__, http.ConnectError):
                    raise Retryable(f"cannot reach {self.base_url}: {one_line(exc)}") from exc
                raise LLMError(f"{self.name}: the connection broke ({one_line(exc)}); not re-sent") from exc
            except anthropic.APIStatusError as exc:
                raise triage_status(
                    self.name, exc.status_code, _body(exc), exc.response.headers,
                    model=self.model, key_hint=_KEY_HINT,
                ) from exc
            except http.TimeoutException as exc:
                raise LLMError(f"{self.name}: {silence(self.timeout)}") from exc
            except http.TransportError as exc:
                raise LLMError(f"{self.name}: the connection broke during the reply "
                               f"({one_line(exc) or type(exc).__name__}); not re-sent") from exc
            except anthropic.AnthropicError as exc:
                raise LLMError(f"{self.name}: {one_line(exc)}") from exc

    def _read(self, stream: Any, wait: Wait, *, tool: bool) -> Completion:
        """Text deltas (or the forced tool's JSON input deltas), the stop reason and usage from the event stream."""
        parts: list[str] = []
        tool_parts: list[str] = []
        input_tokens = output_tokens = 0
        model = self.model
        stop: str | None = None
        started = False
        for event in stream:
            wait.received()
            kind = getattr(event, "type", None)
            if kind == "message_start":
                started = True
                message = event.message
                model = str(getattr(message, "model", None) or model)
                input_tokens = _input_tokens(getattr(message, "usage", None))
                output_tokens = as_int(getattr(getattr(message, "usage", None), "output_tokens", 0))
            elif kind == "content_block_delta":
                delta = event.delta
                if getattr(delta, "type", None) == "text_delta":
                    parts.append(str(delta.text))
                elif getattr(delta, "type", None) == "input_json_delta":
                    tool_parts.append(str(delta.partial_json))
            elif kind == "message_delta":
                stop = getattr(event.delta, "stop_reason", None) or stop
                usage = getattr(event, "usage", None)
                output_tokens = as_int(getattr(usage, "output_tokens", 0)) or output_tokens
                input_tokens = _input_tokens(usage) or input_tokens
        if not started:
            raise LLMError(f"{self.name}: malformed response, not a message event stream")
        text = "".join(tool_parts) if tool and tool_parts else "".join(parts)
        return Completion(
            text=text, model=model, input_tokens=input_tokens, output_tokens=output_tokens, stop_reason=stop
        )


def _message(message: Message) -> MessageParam:
    """One turn in the SDK's shape (a :class:`Message` is made with a user or assistant role only)."""
    if message.role == "assistant":
        return {"role": "assistant", "content": message.content}
    return {"role": "user", "content": message.content}


def _input_tokens(usage: Any) -> int:
    return sum(
        as_int(getattr(usage, key, 0))
        for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )


def _body(exc: Any) -> Any:
    """The error body of a status error (the SDK has parsed it), or its message, for triage."""
    return exc.body if exc.body is not None else exc.message

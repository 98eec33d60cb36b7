"""Any OpenAI-compatible chat-completions server (Ollama, vLLM, llama.cpp server, LM Studio) over plain ``httpx``.

The openai SDK is not a dependency: one POST is all pcm needs, and speaking the wire format directly keeps local
servers' quirks (missing ``usage``, errors as bare strings) in our hands. ``base_url`` is the server's ``/v1``
root, as those servers document it (``http://localhost:11434/v1`` for Ollama).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

import httpx

from pcm.errors import LLMError
from pcm.llm.base import Completion, Message, Usage
from pcm.llm.retry import (
    MAX_WAIT,
    Retryable,
    RetryPolicy,
    as_int,
    mentions_temperature,
    one_line,
    triage_status,
)

log = logging.getLogger(__name__)

_KEY_HINT = "OPENAI_API_KEY (or PCM_OPENAI_API_KEY)"


class OpenAICompatibleClient:
    """An :class:`pcm.llm.LLMClient` for a chat-completions server; thread-safe."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str = "",
        timeout: float,
        max_retries: int,
        backoff: float = 1.0,
        max_wait: float = MAX_WAIT,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not base_url or not model:
            raise LLMError("an OpenAI-compatible server needs a base URL and a model: PCM_LLM=openai:BASE_URL#MODEL")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = f"openai:{self.base_url}#{model}"
        self.usage = Usage()
        self.timeout = timeout
        self._url = f"{self.base_url}/chat/completions"
        #: The retry policy in use (public so callers and tests can see what settings produced).
        self.retry = RetryPolicy(max_retries=max_retries, backoff=backoff, max_wait=max_wait, sleep=sleep)
        self._send_temperature = True
        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(timeout=timeout, headers=headers)

    def complete(
        self, *, system: str, messages: list[Message], operation: str, max_tokens: int = 4096
    ) -> Completion:
        completion = self.retry.run(self.name, lambda: self._attempt(system, messages, max_tokens))
        self.usage.record(operation, completion)
        return completion

    def close(self) -> None:
        self._http.close()

    def _attempt(self, system: str, messages: list[Message], max_tokens: int) -> Completion:
        try:
            return self._send(system, messages, max_tokens)
        except LLMError as exc:
            if not (self._send_temperature and mentions_temperature(exc)):
                raise
            log.warning("%s refuses temperature; continuing without it (%s)", self.name, exc)
            self._send_temperature = False
            return self._send(system, messages, max_tokens)

    def _payload(self, system: str, messages: list[Message], max_tokens: int) -> dict[str, Any]:
        chat = [{"role": "system", "content": system}] if system else []
        chat += [{"role": m.role, "content": m.content} for m in messages]
        payload: dict[str, Any] = {"model": self.model, "messages": chat, "max_tokens": max_tokens, "stream": False}
        if self._send_temperature:
            payload["temperature"] = 0
        return payload

    def _send(self, system: str, messages: list[Message], max_tokens: int) -> Completion:
        try:
            response = self._http.post(self._url, json=self._payload(system, messages, max_tokens))
        except httpx.TimeoutException as exc:
            raise Retryable(f"timed out after {self.timeout:g} s") from exc
        except httpx.TransportError as exc:
            raise Retryable(f"cannot reach {self.base_url}: {one_line(exc) or type(exc).__name__}") from exc
        if response.status_code >= 400:
            raise triage_status(
                self.name, response.status_code, response.content, response.headers,
                model=self.model, key_hint=_KEY_HINT, not_found_hint=f" (or wrong base URL {self.base_url})",
            )
        return self._parse(response.content)

    def _parse(self, body: bytes) -> Completion:
        try:
            data = json.loads(body)
        except ValueError as exc:
            raise LLMError(f"{self.name}: malformed response, not JSON: {one_line(body[:120])}") from exc
        text, finish = _first_choice(data)
        if text is None:
            raise LLMError(f"{self.name}: malformed response, no choices[0].message.content: "
                           f"{one_line(json.dumps(data))}")
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        return Completion(
            text=text,
            model=str(data.get("model") or self.model),
            input_tokens=as_int(usage.get("prompt_tokens")),
            output_tokens=as_int(usage.get("completion_tokens")),
            stop_reason=finish,
        )


def _first_choice(data: Any) -> tuple[str | None, str | None]:
    """``(content, finish_reason)`` of the first choice; content ``None`` when the body does not have one."""
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None, None
    message = choices[0].get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):  # content parts, as some servers return
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    finish = choices[0].get("finish_reason")
    return (content if isinstance(content, str) else None), (str(finish) if finish is not None else None)

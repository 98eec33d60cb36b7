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

import json
import logging
import time
from collections.abc import Callable
from typing import Any

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

DEFAULT_BASE_URL = "https://api.anthropic.com"
#: The API version that still accepts ``temperature`` on the models that support it.
API_VERSION = "2023-06-01"
_KEY_HINT = "ANTHROPIC_API_KEY"


class AnthropicClient:
    """An :class:`pcm.llm.LLMClient` for Claude; thread-safe (the SDK client and the usage counters are)."""

    def __init__(
        self,
        *,
        api_key: str,
        model: str,
        timeout: float,
        max_retries: int,
        base_url: str | None = None,
        backoff: float = 1.0,
        max_wait: float = MAX_WAIT,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not api_key:
            raise LLMError("no Anthropic API key: set ANTHROPIC_API_KEY, or use PCM_LLM=none for episodic mode")
        self.name = f"anthropic:{model}"
        self.model = model
        self.usage = Usage()
        self.timeout = timeout
        #: The retry policy in use (public so callers and tests can see what settings produced).
        self.retry = RetryPolicy(max_retries=max_retries, backoff=backoff, max_wait=max_wait, sleep=sleep)
        self._send_temperature = True
        import anthropic  # deferred: the SDK takes seconds to import, and most runs never touch it

        # Explicit api_key and base_url keep the SDK from consulting the environment (settings own that).
        # x-api-key is sent alongside the SDK's Bearer header: the API prefers it, and proxies may only know it.
        self._sdk = anthropic.Anthropic(
            api_key=api_key,
            base_url=base_url or DEFAULT_BASE_URL,
            timeout=timeout,
            max_retries=0,
            default_headers={"anthropic-version": API_VERSION, "x-api-key": api_key},
        )

    def complete(
        self, *, system: str, messages: list[Message], operation: str, max_tokens: int = 4096
    ) -> Completion:
        completion = self.retry.run(self.name, lambda: self._attempt(system, messages, max_tokens))
        self.usage.record(operation, completion)
        return completion

    def close(self) -> None:
        self._sdk.close()

    def _attempt(self, system: str, messages: list[Message], max_tokens: int) -> Completion:
        try:
            return self._send(system, messages, max_tokens)
        except LLMError as exc:
            if not (self._send_temperature and mentions_temperature(exc)):
                raise
            log.warning("%s refuses temperature; continuing without it (%s)", self.name, exc)
            self._send_temperature = False
            return self._send(system, messages, max_tokens)

    def _send(self, system: str, messages: list[Message], max_tokens: int) -> Completion:
        import anthropic  # already imported by __init__; cheap here

        extra: dict[str, Any] = {"temperature": 0} if self._send_temperature else {}
        kwargs: dict[str, Any] = {"system": system} if system else {}
        try:
            raw = self._sdk.messages.with_raw_response.create(
                model=self.model,
                max_tokens=max_tokens,
                messages=[{"role": m.role, "content": m.content} for m in messages],  # type: ignore[misc]
                extra_body=extra,
                **kwargs,
            )
        except anthropic.APITimeoutError as exc:
            raise Retryable(f"timed out after {self.timeout:g} s") from exc
        except anthropic.APIConnectionError as exc:
            raise Retryable(f"cannot reach {self._sdk.base_url}: {one_line(exc)}") from exc
        except anthropic.APIStatusError as exc:
            raise triage_status(
                self.name, exc.status_code, exc.response.content, exc.response.headers,
                model=self.model, key_hint=_KEY_HINT,
            ) from exc
        except anthropic.AnthropicError as exc:
            raise LLMError(f"{self.name}: {one_line(exc)}") from exc
        return self._parse(raw.http_response.content)

    def _parse(self, body: bytes) -> Completion:
        """Read the reply ourselves so a garbled body gives one clear error instead of an attribute error later."""
        try:
            data = json.loads(body)
        except ValueError as exc:
            raise LLMError(f"{self.name}: malformed response, not JSON: {one_line(body[:120])}") from exc
        content = data.get("content") if isinstance(data, dict) else None
        if not isinstance(content, list):
            raise LLMError(f"{self.name}: malformed response, no 'content' list: {one_line(json.dumps(data))}")
        text = "".join(
            str(block.get("text", "")) for block in content if isinstance(block, dict) and block.get("type") == "text"
        )
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        input_tokens = sum(
            as_int(usage.get(key))
            for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        )
        return Completion(
            text=text,
            model=str(data.get("model") or self.model),
            input_tokens=input_tokens,
            output_tokens=as_int(usage.get("output_tokens")),
            stop_reason=data.get("stop_reason"),
        )

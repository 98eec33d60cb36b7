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
from pcm.llm.base import Completion, JsonSchema, Message
from pcm.llm.manners import PROGRESS_AFTER, Wait, waiting
from pcm.llm.retry import (
    CONNECT_TIMEOUT,
    MAX_WAIT,
    RequestRejected,
    Retryable,
    RetryingClient,
    as_int,
    error_detail,
    one_line,
    silence,
    triage_status,
)

log = logging.getLogger(__name__)

_KEY_HINT = "OPENAI_API_KEY (or PCM_OPENAI_API_KEY)"
#: Optional request fields a server may refuse, and words of its refusal that name each one.
_OPTIONAL_FIELDS = (
    ("stream_options", ("stream_options", "include_usage")),
    ("response_format", ("response_format", "json_schema", "structured output", "grammar")),
)


class OpenAICompatibleClient(RetryingClient):
    """An :class:`pcm.llm.LLMClient` for a chat-completions server; thread-safe.

    Replies are streamed, so ``timeout`` is a deadline on *silence* (see :mod:`pcm.llm.manners`); a server that
    ignores ``stream`` and answers with one JSON body is read as such. ``timeout=None`` picks the default for where
    the server runs (loopback: local).
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str = "",
        timeout: float | None,
        max_retries: int,
        backoff: float = 1.0,
        max_wait: float = MAX_WAIT,
        sleep: Callable[[float], None] = time.sleep,
        progress: Callable[[str], None] | None = None,
        progress_after: float = PROGRESS_AFTER,
    ) -> None:
        if not base_url or not model:
            raise LLMError("an OpenAI-compatible server needs a base URL and a model: PCM_LLM=openai:BASE_URL#MODEL")
        self._setup(
            base_url, timeout=timeout, max_retries=max_retries, backoff=backoff, max_wait=max_wait, sleep=sleep,
            progress=progress, progress_after=progress_after,
        )
        self.model = model
        self.name = f"openai:{self.base_url}#{model}"
        self._url = f"{self.base_url}/chat/completions"
        self._send_temperature = True
        #: Optional request fields this server refused once; never sent again by this client.
        self._refused: set[str] = set()
        #: Whether the server reads a llama.cpp GBNF ``grammar`` field (asked once, on the first bounded schema).
        self._gbnf: bool | None = None
        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        connect = min(self.timeout, CONNECT_TIMEOUT)
        self._http = httpx.Client(timeout=httpx.Timeout(self.timeout, connect=connect), headers=headers)

    def close(self) -> None:
        self._http.close()

    def _drop_refused_field(self, exc: RequestRejected, schema: JsonSchema | None) -> bool:
        """A 400 naming an optional field (temperature, stream_options, response_format): drop it and re-send.

        A rejection is an answer (the server is not working on the request), so sending again is safe.
        """
        detail = exc.detail.lower()
        if self._gbnf and "grammar" not in self._refused and schema is not None and schema.grammar is not None \
                and "grammar" in detail:
            self._refused.add("grammar")
            log.warning("%s rejects the bounded grammar; sending the JSON Schema instead (%s)", self.name, exc)
            return True
        if self._send_temperature and "temperature" in detail:
            log.warning("%s refuses temperature; continuing without it (%s)", self.name, exc)
            self._send_temperature = False
            return True
        for name, words in _OPTIONAL_FIELDS:
            if name in self._refused or (name == "response_format" and schema is None):
                continue
            if any(word in detail for word in words):
                self._refused.add(name)
                if name == "response_format":
                    log.warning("%s rejects constrained output (response_format json_schema); the model writes "
                                "free-form output instead (%s)", self.name, exc)
                else:
                    log.info("%s refuses %s; continuing without it", self.name, name)
                return True
        return False

    @property
    def constrained(self) -> bool:
        """Whether this server still accepts ``response_format`` (False once it refused it)."""
        return "response_format" not in self._refused

    def _payload(
        self, system: str, messages: list[Message], max_tokens: int, schema: JsonSchema | None
    ) -> dict[str, Any]:
        chat = [{"role": "system", "content": system}] if system else []
        chat += [{"role": m.role, "content": m.content} for m in messages]
        payload: dict[str, Any] = {"model": self.model, "messages": chat, "max_tokens": max_tokens, "stream": True}
        if "stream_options" not in self._refused:
            payload["stream_options"] = {"include_usage": True}
        if self._send_temperature:
            payload["temperature"] = 0
        if schema is not None and schema.grammar is not None and "grammar" not in self._refused \
                and self._speaks_gbnf():
            # llama.cpp's server takes a GBNF grammar (and refuses it together with a JSON Schema): the bounded
            # grammar keeps every answer within max_tokens, which a JSON Schema cannot.
            payload["grammar"] = schema.grammar(max_tokens)
        elif schema is not None and self.constrained:
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": schema.name, "strict": True, "schema": schema.schema},
            }
        return payload

    def _speaks_gbnf(self) -> bool:
        """Whether the server is llama.cpp's (its ``/models`` entries say ``owned_by: llamacpp``), asked once.

        Other OpenAI-compatible servers ignore an unknown ``grammar`` field silently, so it is sent only to a server
        that said it is llama.cpp; any failure to tell means no.
        """
        if self._gbnf is None:
            try:
                response = self._http.get(f"{self.base_url}/models", timeout=CONNECT_TIMEOUT)
                listed = response.json().get("data") if response.status_code == 200 else None
            except (httpx.HTTPError, ValueError, AttributeError):
                listed = None
            self._gbnf = isinstance(listed, list) and any(
                isinstance(m, dict) and m.get("owned_by") == "llamacpp" for m in listed)
        return self._gbnf

    def _send(
        self, system: str, messages: list[Message], max_tokens: int, schema: JsonSchema | None
    ) -> Completion:
        payload = self._payload(system, messages, max_tokens, schema)
        with self._gate, waiting(self.name, write=self._progress, after=self._progress_after) as wait:
            try:
                with self._http.stream("POST", self._url, json=payload) as response:
                    if response.status_code >= 400:
                        response.read()
                        raise triage_status(
                            self.name, response.status_code, response.content, response.headers,
                            model=self.model, key_hint=_KEY_HINT,
                            not_found_hint=f" (or wrong base URL {self.base_url})",
                        )
                    if "text/event-stream" not in response.headers.get("content-type", ""):
                        return self._parse(response.read())
                    return self._parse_stream(response, wait)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
                raise Retryable(f"cannot reach {self.base_url}: {one_line(exc) or type(exc).__name__}") from exc
            except httpx.TimeoutException as exc:
                raise LLMError(f"{self.name}: {silence(self.timeout)}") from exc
            except httpx.TransportError as exc:
                raise LLMError(f"{self.name}: the connection broke during the reply "
                               f"({one_line(exc) or type(exc).__name__}); not re-sent") from exc

    def _parse_stream(self, response: httpx.Response, wait: Wait) -> Completion:
        """Server-sent chunks: ``data: {choices: [{delta: {content}}]}`` ... ``data: [DONE]``."""
        parts: list[str] = []
        finish: str | None = None
        usage: dict[str, Any] = {}
        model = self.model
        for line in response.iter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            try:
                chunk = json.loads(data)
            except ValueError as exc:
                raise LLMError(f"{self.name}: malformed stream chunk, not JSON: {one_line(data[:120])}") from exc
            if not isinstance(chunk, dict):
                continue
            if isinstance(chunk.get("error"), (dict, str)):
                raise LLMError(f"{self.name}: the server failed mid-reply: {error_detail(chunk)[1]}")
            wait.received()
            model = str(chunk.get("model") or model)
            if isinstance(chunk.get("usage"), dict):
                usage = chunk["usage"]
            choices = chunk.get("choices")
            if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
                continue
            delta = choices[0].get("delta")
            content = delta.get("content") if isinstance(delta, dict) else None
            if isinstance(content, str):
                parts.append(content)
            if choices[0].get("finish_reason") is not None:
                finish = str(choices[0]["finish_reason"])
        return Completion(
            text="".join(parts),
            model=model,
            input_tokens=as_int(usage.get("prompt_tokens")),
            output_tokens=as_int(usage.get("completion_tokens")),
            stop_reason=finish,
        )

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

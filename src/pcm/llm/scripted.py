"""A scripted LLM: replays canned replies in order and records what it was asked.

Tests of extraction, repair and answering use it to pin the model's behaviour exactly; the CLI exposes it as
``PCM_LLM=scripted:PATH`` (a JSON list of strings) so end-to-end runs need neither network nor key.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path

from pcm.errors import LLMError
from pcm.llm.base import Completion, JsonSchema, Message, Request, Usage

#: A reply, or a function of ``(system, messages, operation)`` computing one.
Response = str | Callable[[str, list[Message], str], str]


class ScriptedClient:
    """Replays canned responses; records every request it got (for assertions). Token counts are always 0."""

    def __init__(self, responses: Iterable[Response] = (), *, name: str = "scripted") -> None:
        self.name = name
        self.usage = Usage()
        self.requests: list[tuple[str, list[Message], str]] = []
        #: The schema each request asked the reply to satisfy (``None``: free-form), in request order.
        self.schemas: list[JsonSchema | None] = []
        self._responses: deque[Response] = deque(responses)
        self._lock = threading.Lock()

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedClient:
        """Load a JSON list of reply strings (the ``PCM_LLM=scripted:PATH`` form)."""
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise LLMError(f"scripted LLM: cannot read {path}: {exc.strerror or exc}") from exc
        except ValueError as exc:
            raise LLMError(f"scripted LLM: {path} is not valid JSON ({exc})") from exc
        if not isinstance(data, list) or not all(isinstance(item, str) for item in data):
            raise LLMError(f"scripted LLM: {path} must hold a JSON list of strings")
        return cls(data, name=f"scripted:{path}")

    @property
    def remaining(self) -> int:
        """Replies not yet used (a test can assert its script was consumed)."""
        with self._lock:
            return len(self._responses)

    def push(self, *responses: Response) -> None:
        with self._lock:
            self._responses.extend(responses)

    def complete(self, request: Request) -> Completion:
        system, messages, operation = request.system, request.messages, request.operation
        with self._lock:
            self.requests.append((system, list(messages), operation))
            self.schemas.append(request.schema)
            calls = len(self.requests)
            response = self._responses.popleft() if self._responses else None
        if response is None:
            raise LLMError(f"{self.name}: ran out of scripted responses at call {calls} (operation {operation!r})")
        text = response if isinstance(response, str) else response(system, list(messages), operation)
        completion = Completion(text=text, model=self.name, input_tokens=0, output_tokens=0, stop_reason="end_turn")
        self.usage.record(operation, completion)
        return completion

"""Record every LLM exchange of a run, and replay a recorded run without any model.

An evaluation made where a model is reachable (and paid for) can then be re-scored anywhere: ``--record DIR``
wraps the real client in :class:`RecordingClient`, ``--replay DIR`` (or ``PCM_LLM=replay:DIR``) answers from the
files with :class:`ReplayClient`. An exchange is keyed by the sha256 of (operation, system prompt, messages), so a
replay gives the same replies, and the same call and token counts, as long as the pipeline asks the same things.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

from pcm.errors import LLMError
from pcm.llm.base import Completion, JsonSchema, LLMClient, Message, Usage


def exchange_key(operation: str, system: str, messages: list[Message], schema: JsonSchema | None = None) -> str:
    """The file name (without ``.json``) of one exchange: independent of the model and of max_tokens.

    A constrained call also keys on its schema, so a free-form and a constrained run never answer for each other.
    """
    parts: list[object] = [operation, system, [[m.role, m.content] for m in messages]]
    if schema is not None:
        parts.append(schema.schema)
    payload = json.dumps(parts, ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class RecordingClient:
    """Forwards every call to ``inner`` and writes the exchange to ``directory/<key>.json`` (atomically)."""

    def __init__(self, inner: LLMClient, directory: str | Path) -> None:
        self.inner = inner
        self.name = inner.name
        self.usage: Usage = inner.usage
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.recorded = 0
        self._lock = threading.Lock()

    def complete(
        self,
        *,
        system: str,
        messages: list[Message],
        operation: str,
        max_tokens: int = 4096,
        schema: JsonSchema | None = None,
    ) -> Completion:
        extra = {"schema": schema} if schema is not None else {}
        completion = self.inner.complete(
            system=system, messages=messages, operation=operation, max_tokens=max_tokens, **extra
        )
        key = exchange_key(operation, system, messages, schema)
        record = {
            "operation": operation,
            "system": system,
            "messages": [[m.role, m.content] for m in messages],
            "text": completion.text,
            "model": completion.model,
            "input_tokens": completion.input_tokens,
            "output_tokens": completion.output_tokens,
            "stop_reason": completion.stop_reason,
        }
        tmp = self.directory / f"{key}.{threading.get_ident()}.tmp"
        tmp.write_text(json.dumps(record, ensure_ascii=False), encoding="utf-8")
        tmp.replace(self.directory / f"{key}.json")
        with self._lock:
            self.recorded += 1
        return completion


class ReplayClient:
    """Answers from a directory a :class:`RecordingClient` wrote; a prompt never recorded is an :class:`LLMError`.

    Replayed completions carry the recorded token counts, so cost figures of a replay equal the recorded run's.
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        if not self.directory.is_dir():
            raise LLMError(f"replay: {self.directory} is not a directory of recorded LLM exchanges")
        self.name = f"replay:{self.directory}"
        self.usage = Usage()
        self.misses: list[str] = []
        self._lock = threading.Lock()

    def complete(
        self,
        *,
        system: str,
        messages: list[Message],
        operation: str,
        max_tokens: int = 4096,
        schema: JsonSchema | None = None,
    ) -> Completion:
        key = exchange_key(operation, system, messages, schema)
        path = self.directory / f"{key}.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            with self._lock:
                self.misses.append(key)
            raise LLMError(f"replay: no recorded {operation!r} exchange {key} in {self.directory}") from exc
        except ValueError as exc:
            raise LLMError(f"replay: {path} is not valid JSON ({exc})") from exc
        completion = Completion(
            text=str(data["text"]),
            model=str(data.get("model") or self.name),
            input_tokens=int(data.get("input_tokens") or 0),
            output_tokens=int(data.get("output_tokens") or 0),
            stop_reason=data.get("stop_reason"),
        )
        self.usage.record(operation, completion)
        return completion


__all__ = ["RecordingClient", "ReplayClient", "exchange_key"]

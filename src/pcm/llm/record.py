"""Record every LLM exchange of a run, and replay a recorded run without any model.

An evaluation made where a model is reachable (and paid for) can then be re-scored anywhere: ``--record DIR``
wraps the real client in :class:`RecordingClient`, ``--replay DIR`` (or ``PCM_LLM=replay:DIR``) answers from the
files with :class:`ReplayClient`. An exchange is keyed by the sha256 of (operation, system prompt, messages), so a
replay gives the same replies, and the same call and token counts, as long as the pipeline asks the same things.

The prompts themselves depend on what the recorded client declared: ``local`` (schema-held JSON extraction under
``PCM_LLM_OUTPUT=auto``), ``in_process`` (compact extraction lines under ``auto``), ``constrained`` (questions read into frames under
``PCM_ASK_FRAME=auto``), ``prefix_cache`` (the whole catalogue in the system prompt under ``PCM_LLM_CATALOGUE=auto``)
and its ``context`` window. The recorder writes those to :data:`METADATA` in the directory and the replay declares
them again, so a run recorded from an in-process model asks the same things on replay. A directory without the
file (an older recording) replays as a hosted client: neither local nor cached, no window.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

from pcm.errors import LLMError
from pcm.llm.base import Completion, LLMClient, Request, Usage

#: In a recording directory: the recorded client's name and the flags that shape its prompts (see the docstring).
#: Exchange files are named by a sha256, so this name never meets one.
METADATA = "recording.json"


def exchange_key(request: Request) -> str:
    """The file name (without ``.json``) of one exchange: independent of the model.

    A constrained call also keys on its schema, so a free-form and a constrained run never answer for each other;
    one held to a grammar keys on that grammar as the client builds it for ``max_tokens`` (the compact form's
    schema is empty, so a changed grammar, e.g. one limited to other catalogue areas, must not replay answers
    drawn from the old one). A call without a grammar is independent of max_tokens.
    """
    parts: list[object] = [request.operation, request.system, [[m.role, m.content] for m in request.messages]]
    schema = request.schema
    if schema is not None:
        parts.append(schema.schema)
        if schema.grammar is not None:
            parts.append(hashlib.sha256(schema.grammar(request.max_tokens).encode("utf-8")).hexdigest())
    payload = json.dumps(parts, ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class RecordingClient:
    """Forwards every call to ``inner`` and writes the exchange to ``directory/<key>.json`` (atomically).

    ``describe`` writes ``inner``'s flags to the directory's :data:`METADATA`; a second recorder sharing the
    directory (the judge of an evaluation, whose prompts the flags do not shape) passes False so it does not
    overwrite the answering model's.
    """

    def __init__(self, inner: LLMClient, directory: str | Path, *, describe: bool = True) -> None:
        self.inner = inner
        self.name = inner.name
        self.usage: Usage = inner.usage
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.recorded = 0
        self._lock = threading.Lock()
        if describe:
            _write_atomically(self.directory / METADATA, json.dumps(client_flags(inner), sort_keys=True))

    def complete(self, request: Request) -> Completion:
        completion = self.inner.complete(request)
        key = exchange_key(request)
        record = {
            "operation": request.operation,
            "system": request.system,
            "messages": [[m.role, m.content] for m in request.messages],
            "text": completion.text,
            "model": completion.model,
            "input_tokens": completion.input_tokens,
            "output_tokens": completion.output_tokens,
            "stop_reason": completion.stop_reason,
        }
        _write_atomically(self.directory / f"{key}.json", json.dumps(record, ensure_ascii=False))
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
        flags = _read_flags(self.directory / METADATA)
        self.local: bool = flags["local"] is True
        self.prefix_cache: bool = flags["prefix_cache"] is True
        self.in_process: bool = flags["in_process"] is True
        context = flags["context"]
        self.context: int | None = context if isinstance(context, int) and not isinstance(context, bool) else None
        if isinstance(flags["constrained"], bool):
            # declared only when the recorded client declared it: its presence alone tells a provider's client
            # (an explicit compact form becomes json for it) from a test double
            self.constrained: bool = flags["constrained"]

    def complete(self, request: Request) -> Completion:
        key = exchange_key(request)
        path = self.directory / f"{key}.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            with self._lock:
                self.misses.append(key)
            raise LLMError(f"replay: no recorded {request.operation!r} exchange {key} in {self.directory}") from exc
        except ValueError as exc:
            raise LLMError(f"replay: {path} is not valid JSON ({exc})") from exc
        completion = Completion(
            text=str(data["text"]),
            model=str(data.get("model") or self.name),
            input_tokens=int(data.get("input_tokens") or 0),
            output_tokens=int(data.get("output_tokens") or 0),
            stop_reason=data.get("stop_reason"),
        )
        self.usage.record(request.operation, completion)
        return completion


def client_flags(client: object) -> dict[str, object]:
    """What ``client`` declares that shapes its prompts (absent attributes: a hosted client's defaults)."""
    context = getattr(client, "context", None)
    return {
        "client": str(getattr(client, "name", "")),
        "local": bool(getattr(client, "local", False)),
        "prefix_cache": bool(getattr(client, "prefix_cache", False)),
        "in_process": bool(getattr(client, "in_process", False)),
        "context": context if isinstance(context, int) and not isinstance(context, bool) else None,
        # whether it holds its output to a schema (ask reads questions into frames only then), None when undeclared
        "constrained": _declared(client, "constrained"),
    }


def _declared(client: object, name: str) -> bool | None:
    """The client's boolean attribute ``name``, None when it has none."""
    return bool(getattr(client, name)) if hasattr(client, name) else None


def _read_flags(path: Path) -> dict[str, object]:
    """The recorded flags, or the defaults for a recording made before they were written."""
    defaults: dict[str, object] = {"local": False, "prefix_cache": False, "in_process": False, "context": None,
                                   "constrained": None}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return defaults
    except (OSError, ValueError) as exc:
        raise LLMError(f"replay: {path} is not readable JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise LLMError(f"replay: {path} is not a JSON object of the recorded client's flags")
    return {key: data.get(key, value) for key, value in defaults.items()}


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f"{path.name}.{threading.get_ident()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


__all__ = ["METADATA", "RecordingClient", "ReplayClient", "client_flags", "exchange_key"]

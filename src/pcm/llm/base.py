"""The small protocol every LLM client speaks, and the value types it exchanges.

Everything downstream (extraction, repair, nl2sparql, answering, judging) talks to a :class:`LLMClient` and never
to a provider SDK, so a local model, Claude or a scripted test double are interchangeable. Token use is counted per
*operation* (a caller-chosen label such as ``"extract"``) because cost and latency questions are always asked per
pipeline stage, not per provider.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

MESSAGE_ROLES = ("user", "assistant")


@dataclass(frozen=True)
class Message:
    """One chat turn sent to the model. The system prompt is not a message: it is passed separately."""

    role: str
    content: str

    def __post_init__(self) -> None:
        if self.role not in MESSAGE_ROLES:
            raise ValueError(f"message role must be one of {MESSAGE_ROLES}, not {self.role!r}")

    @classmethod
    def user(cls, content: str) -> Message:
        return cls("user", content)

    @classmethod
    def assistant(cls, content: str) -> Message:
        return cls("assistant", content)


@dataclass(frozen=True)
class Completion:
    """The model's reply plus what it cost; ``stop_reason`` is the provider's own word (``end_turn``, ``stop``...)."""

    text: str
    model: str
    input_tokens: int
    output_tokens: int
    stop_reason: str | None


@dataclass(frozen=True)
class JsonSchema:
    """A JSON Schema the reply must satisfy (constrained decoding), with the name providers ask for.

    A client that can constrain its model sends it natively (OpenAI-compatible ``response_format``, Anthropic
    forced tool use, a llama.cpp grammar); the reply's ``text`` is then the JSON document. A client that cannot,
    or a server that refused it, returns free-form text: callers check what they got.
    """

    name: str
    schema: dict[str, object]
    description: str = ""
    #: ``max_tokens -> GBNF``: the same language as a llama.cpp grammar whose every answer fits in that many
    #: tokens (a JSON Schema cannot bound an answer's total size), for clients that take a grammar.
    grammar: Callable[[int], str] | None = field(default=None, compare=False, repr=False)


_COUNTERS = ("calls", "input_tokens", "output_tokens")


@dataclass
class Usage:
    """Calls and tokens per operation. Updated from worker threads during batch ingest, hence the lock."""

    _counts: dict[str, dict[str, int]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def record(self, operation: str, completion: Completion) -> None:
        with self._lock:
            counts = self._counts.setdefault(operation, dict.fromkeys(_COUNTERS, 0))
            counts["calls"] += 1
            counts["input_tokens"] += completion.input_tokens
            counts["output_tokens"] += completion.output_tokens

    def as_dict(self) -> dict[str, dict[str, int]]:
        """A snapshot: ``{operation: {"calls", "input_tokens", "output_tokens"}}`` (safe to keep and mutate)."""
        with self._lock:
            return {op: dict(counts) for op, counts in self._counts.items()}

    @property
    def totals(self) -> dict[str, int]:
        """The counters summed over all operations."""
        totals = dict.fromkeys(_COUNTERS, 0)
        for counts in self.as_dict().values():
            for key in _COUNTERS:
                totals[key] += counts[key]
        return totals


@runtime_checkable
class LLMClient(Protocol):
    """What pcm needs from a language model: one blocking, deterministic (temperature 0) completion."""

    name: str
    usage: Usage

    def complete(
        self,
        *,
        system: str,
        messages: list[Message],
        operation: str,
        max_tokens: int = 4096,
        schema: JsonSchema | None = None,
    ) -> Completion: ...


def output_format(setting: str, client: object) -> str:
    """``turtle`` or ``json`` for ``PCM_LLM_OUTPUT`` (``auto``: json for a model on this machine, free-form otherwise).

    Why auto splits that way: small local models break free-form output (Turtle, SPARQL) far more often than
    schema-held JSON, while hosted models write the free forms well and a tool schema costs them prompt tokens.
    A wrapper (a cache, a recorder) is looked through to the client it wraps.
    """
    if setting in ("turtle", "json"):
        return setting
    inner = getattr(client, "inner", None) or getattr(client, "client", None) or client
    return "json" if getattr(inner, "local", False) or getattr(client, "local", False) else "turtle"

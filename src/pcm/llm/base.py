"""The small protocol every LLM client speaks, and the value types it exchanges.

Everything downstream (extraction, repair, nl2sparql, answering, judging) talks to a :class:`LLMClient` and never
to a provider SDK, so a local model, Claude or a scripted test double are interchangeable. Token use is counted per
*operation* (a caller-chosen label such as ``"extract"``) because cost and latency questions are always asked per
pipeline stage, not per provider.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from pcm.errors import UsageError

log = logging.getLogger(__name__)

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
    #: The answer is a set of lines, so a line written twice adds nothing: a client decoding greedily may end the
    #: answer there (a small model that repeats one line goes on repeating to its budget).
    line_set: bool = False


@dataclass(frozen=True)
class Request:
    """One completion asked of a model: what every client takes and every wrapper (recording, replay, the reply
    cache, a retry) passes on whole. ``operation`` names the pipeline stage the usage is counted under
    (``"extract"``, ``"repair"``, ``"nl2sparql"``, ``"answer"``, ``"judge"``); ``schema`` asks for constrained
    output where the client can give it."""

    system: str
    messages: list[Message]
    operation: str
    max_tokens: int = 4096
    schema: JsonSchema | None = None


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

    def complete(self, request: Request) -> Completion: ...


class CallsThrough:
    """A client whose every model call is made through ``around`` (which runs the call it is given and returns its
    completion), for a caller that must do something around each call: ``pcm serve``'s extraction worker lets go
    of the memory lock while the model answers. ``inner`` is what :func:`runs_here` and the prompt-layout choices
    look through to."""

    def __init__(self, inner: LLMClient, around: Callable[[Callable[[], Completion]], Completion]) -> None:
        self.inner = inner
        self.name = inner.name
        self.usage: Usage = inner.usage
        self._around = around

    def complete(self, request: Request) -> Completion:
        return self._around(lambda: self.inner.complete(request))


#: Forms of an extraction answer a caller can read when it does not say (the compact form is extraction's alone).
OUTPUT_FORMS = ("turtle", "json")


def output_format(setting: str, client: object, *, forms: tuple[str, ...] = OUTPUT_FORMS) -> str:
    """``turtle``, ``json`` or ``compact`` for ``PCM_LLM_OUTPUT``, among the ``forms`` the caller reads.

    ``auto``: compact for a model in this process (among the forms the caller reads), json for another model on
    this machine, free-form otherwise. Why compact: with Qwen2.5-Coder-1.5B on the 63 labelled sample utterances it
    stored facts for every utterance (a failing answer written again as json), at a precision of 21% against
    json's 15%, the same recall (74 gold facts against 75 of 335) and about half the time. Why: small local models break
    free-form output (Turtle, SPARQL) far more often than grammar-held output, while hosted models write the free
    forms well and a tool schema costs them prompt tokens. The compact line form (:mod:`pcm.extraction.compact`)
    is meant for a model in this process, which writes ~6-9 tokens a second. The compact form is held to its GBNF
    grammar only by a client that applies a grammar as it is: an OpenAI-compatible server or Anthropic would get a
    JSON Schema it does not have, so for a client that constrains through its provider's own field (one that has a
    ``constrained`` flag and is not ``in_process``) an explicit ``compact`` becomes json; so does it for a caller
    without the form (ask's NL->SPARQL step). A client without such a field (a scripted test double, a replay) is
    given what was asked.
    A wrapper (a cache, a recorder) is looked through to the client it wraps.
    """
    if setting == "compact":
        provider = any(hasattr(c, "constrained") for c in _wrapped(client))
        takes = "compact" in forms and (_declares(client, "in_process") or not provider)
        return "compact" if takes else "json"
    if setting in ("turtle", "json"):
        return setting
    if "compact" in forms and _declares(client, "in_process"):
        return "compact"
    return "json" if _declares(client, "local") else "turtle"


def constrains(client: object) -> bool:
    """Whether the client (or the one a wrapper wraps) holds its output to a JSON Schema or grammar."""
    return _declares(client, "constrained")


def runs_here(client: object) -> bool:
    """Whether the client (or the one a wrapper wraps) is a model on this machine, where every call is slow."""
    return _declares(client, "local")


#: Layouts of the vocabulary catalogue in a prompt (``PCM_LLM_CATALOGUE`` without ``auto``).
AREAS, WHOLE = "areas", "whole"
_warned: set[tuple[str, str, int]] = set()
_warned_lock = threading.Lock()


def catalogue_layout(
    setting: str, client: object, *, whole_tokens: Callable[[], int] = lambda: 0, what: str = "the prompt"
) -> str:
    """``areas`` or ``whole`` for ``PCM_LLM_CATALOGUE`` (``auto``: whole for a client with a prefix cache).

    Why auto splits that way: a model that keeps its previous prompt's tokens (``prefix_cache``, an in-process
    llama.cpp) re-reads only what follows the first token that differs, so a fixed system prompt holding the whole
    catalogue costs it once, and each call pays for its own few hundred tokens; a hosted API or a server bills or
    re-reads every prompt token (or caches only briefly), where the areas layout's smaller prompt is cheaper.

    ``whole_tokens()`` is what a call of the whole layout needs in the client's context window (prompt, room for the
    call's own text and the answer). When the client names its window (``context``) and that does not fit: an
    explicit ``whole`` is a :class:`UsageError` naming ``PCM_LLM_CONTEXT``; ``auto`` falls back to the areas
    layout with one warning per process, because every call would otherwise fail on the window.
    A wrapper (a cache, a recorder) is looked through to the client it wraps.
    """
    if setting == AREAS or (setting != WHOLE and not _declares(client, "prefix_cache")):
        return AREAS
    window = next((w for c in _wrapped(client) if isinstance(w := getattr(c, "context", None), int)), None)
    if not isinstance(window, int) or isinstance(window, bool):
        return WHOLE
    needed = whole_tokens()
    if needed <= window:
        return WHOLE
    problem = (f"{what} with the whole vocabulary catalogue needs about {needed} tokens, more than the "
               f"model's context window of {window} (PCM_LLM_CONTEXT)")
    if setting == WHOLE:
        raise UsageError(f"{problem}: raise PCM_LLM_CONTEXT or set PCM_LLM_CATALOGUE=areas")
    key = (what, getattr(client, "name", ""), window)
    with _warned_lock:
        first = key not in _warned
        _warned.add(key)
    if first:
        log.warning("%s; each call gets its own areas instead (slower: the cached prefix is shorter); raise "
                    "PCM_LLM_CONTEXT to keep the whole catalogue", problem)
    return AREAS


#: Characters per token assumed when checking that a prompt fits a context window: on the catalogue-heavy prompts
#: Qwen2.5's tokenizer gives 3.4-3.6, so this errs towards more tokens.
CHARS_PER_TOKEN = 3.2


def estimate_tokens(text: str) -> int:
    """Tokens of ``text``, estimated from its length on the generous side (see :data:`CHARS_PER_TOKEN`)."""
    return -(-len(text) * 10 // round(CHARS_PER_TOKEN * 10))


def _wrapped(client: object) -> list[object]:
    """The client and every client under it: a wrapper keeps the one it wraps as ``inner`` or ``client`` (a reply
    cache around a recorder around a model is three deep)."""
    chain = [client]
    while len(chain) < 8:
        inner = getattr(chain[-1], "inner", None) or getattr(chain[-1], "client", None)
        if inner is None or any(inner is seen for seen in chain):
            break
        chain.append(inner)
    return chain


def _declares(client: object, attribute: str) -> bool:
    """The client, or a client a wrapper wraps at any depth, declares ``attribute`` true."""
    return any(getattr(c, attribute, False) for c in _wrapped(client))

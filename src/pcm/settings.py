"""One typed settings object. Environment variables ``PCM_*`` give the defaults; CLI flags override them.

No other module reads the environment: they receive a :class:`Settings`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from platformdirs import user_cache_dir, user_data_dir

from pcm.errors import UsageError


def default_memory_path() -> Path:
    return Path(user_data_dir("pcm", appauthor=False)) / "memory"


def default_state_dir() -> Path:
    """Where an in-process model's saved prompt states go (``PCM_LLM_STATE_DIR``): a cache, safe to delete."""
    return Path(user_cache_dir("pcm", appauthor=False)) / "llm-states"


@dataclass(frozen=True)
class LLMSpec:
    """Which model to call: ``none`` (episodic mode), ``anthropic``, ``openai``, ``llamacpp`` (a GGUF file run in
    this process), ``scripted`` or ``replay`` (recorded)."""

    provider: str = "none"
    model: str = ""
    base_url: str = ""

    @classmethod
    def parse(cls, text: str) -> LLMSpec:
        """Parse ``none``, ``anthropic[:MODEL]``, ``openai:BASE_URL#MODEL`` (Ollama, vLLM, llama.cpp, LM Studio)."""
        text = text.strip()
        if not text or text == "none":
            return cls()
        provider, _, rest = text.partition(":")
        if provider == "anthropic":
            return cls("anthropic", rest or DEFAULT_ANTHROPIC_MODEL)
        if provider == "openai":
            base, sep, model = rest.rpartition("#")
            if not sep or not base or not model:
                raise UsageError(f"PCM_LLM={text!r}: expected openai:BASE_URL#MODEL, e.g. openai:http://localhost:11434/v1#llama3.1")
            return cls("openai", model, base)
        if provider == "llamacpp":
            if not rest:
                raise UsageError(f"PCM_LLM={text!r}: expected llamacpp:/path/to/model.gguf")
            return cls("llamacpp", rest)
        if provider == "scripted":
            return cls("scripted", rest)
        if provider == "replay":
            if not rest:
                raise UsageError(f"PCM_LLM={text!r}: expected replay:DIR (a directory written by pcm eval --record)")
            return cls("replay", rest)
        raise UsageError(
            f"PCM_LLM={text!r}: expected none, anthropic:MODEL, openai:BASE_URL#MODEL, llamacpp:PATH.gguf or replay:DIR"
        )

    @property
    def enabled(self) -> bool:
        return self.provider != "none"

    def __str__(self) -> str:
        if self.provider == "none":
            return "none"
        if self.provider == "openai":
            return f"openai:{self.base_url}#{self.model}"
        return f"{self.provider}:{self.model}"


DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-5"
#: Values of ``PCM_LLM_CATALOGUE`` (see :attr:`Settings.llm_catalogue`).
CATALOGUE_LAYOUTS = ("auto", "areas", "whole")
#: Values of ``PCM_ASK_ORDER`` (see :attr:`Settings.ask_order`).
ASK_ORDERS = ("auto", "graph", "facts")
#: Values of ``PCM_ASK_FRAME`` (see :attr:`Settings.ask_frame`).
ASK_FRAMES = ("auto", "on", "off")
#: Values of ``PCM_EXTRACTION`` (see :attr:`Settings.extraction`).
EXTRACTION_MODES = ("auto", "inline", "queued")
#: Settings read from a ``PCM_*`` variable that names one of a few choices, and those choices.
_CHOICES: dict[str, tuple[str, ...]] = {
    "llm_output": ("auto", "turtle", "json", "compact"),
    "llm_catalogue": CATALOGUE_LAYOUTS,
    "ask_order": ASK_ORDERS,
    "ask_frame": ASK_FRAMES,
    "llm_draft": ("none", "prompt-lookup"),
    "extraction": EXTRACTION_MODES,
    "store_engine": ("auto", "oxigraph", "virtuoso", "generic"),
}


def _choice(variable: str, raw: str, choices: tuple[str, ...]) -> str:
    """``raw`` as one of ``choices`` (case and spaces aside), or the one-line error that names them."""
    value = raw.strip().lower()
    if value not in choices:
        raise UsageError(f"{variable}={raw!r}: expected {', '.join(choices[:-1])} or {choices[-1]}")
    return value


@dataclass(frozen=True)
class Settings:
    memory: Path = field(default_factory=default_memory_path)
    llm: LLMSpec = field(default_factory=LLMSpec)
    anthropic_api_key: str = ""
    #: ``ANTHROPIC_BASE_URL``: a proxy or gateway in front of the Anthropic API (empty: the public API).
    anthropic_base_url: str = ""
    openai_api_key: str = ""
    #: Seconds of silence (no byte of the streamed reply) before an LLM call is abandoned; never re-sent then.
    #: ``None``: 120 s for a hosted API, 900 s for a local server (loopback URL), whose prefill can take minutes.
    llm_timeout: float | None = None
    llm_max_retries: int = 4
    #: Extraction answer format: ``turtle`` (free-form), ``json`` (held to a JSON Schema generated from the
    #: ontology, sent natively to the provider), ``compact`` (one fact per line, held to a GBNF grammar: a model in
    #: this process; asked for, never chosen by auto yet), or ``auto`` (json for a model on this machine, turtle
    #: otherwise).
    llm_output: str = "auto"
    #: Where the vocabulary catalogue goes in extraction and NL->SPARQL prompts: ``areas`` (the core areas in the
    #: system prompt, each call's further areas in its user turn: the smallest prompt, best where every call is
    #: paid in full), ``whole`` (every area in the fixed system prompt: a model that keeps its previous prompt's
    #: tokens then re-reads only the call's own few hundred), or ``auto`` (whole for a client with such a prefix
    #: cache, i.e. an in-process model; areas otherwise).
    llm_catalogue: str = "auto"
    #: What ``ask`` tries first with a model: ``graph`` (the model writes a SPARQL query, repaired until it answers;
    #: the stored facts nearest the question only when it does not), ``facts`` (the model first answers from those
    #: facts, one short call; a graph query only when it finds no answer there), or ``auto`` (facts for a model on
    #: this machine, whose query-writing calls take a minute each; graph otherwise).
    ask_order: str = "auto"
    #: Whether ``ask`` first reads a question into a typed frame (one short constrained model call) and answers
    #: counts, totals, latest values, relatives, intervals and the like in code (:mod:`pcm.retrieval.frame`):
    #: ``on``, ``off`` (the pipeline reads the question's wording instead), or ``auto`` (on for a client that
    #: constrains its output: llama.cpp, OpenAI-compatible servers, Anthropic).
    ask_frame: str = "auto"
    #: When ingest extracts facts with the model: ``inline`` (before it returns, as each batch is stored),
    #: ``queued`` (it stores and indexes the posts and returns; ``pcm extract --pending`` or a running
    #: ``pcm serve`` extracts them later), or ``auto`` (queued for a model on this machine, where one utterance
    #: takes a minute or more, so a file would hold ingest for hours; inline for a hosted model).
    extraction: str = "auto"
    #: CPU threads and context window (tokens) of an in-process model (``PCM_LLM=llamacpp:...``). The window holds
    #: the whole-catalogue prompt (~6-7k tokens), the call's own text, an echoed answer in a repair round and the
    #: answer (KV memory at 16k tokens: ~200 MB for a 0.5B Qwen model, ~450 MB for 1.5B).
    llm_threads: int = field(default_factory=lambda: os.cpu_count() or 2)
    llm_context: int = 16384
    #: Memory (MiB) an in-process model may spend keeping the state of its recent prompts, so a prompt that shares
    #: a long beginning with any of them (not only the last one) skips re-reading it: ask alternates the NL→SPARQL
    #: prompt (~7k tokens) with short answer prompts. 0 keeps only the last prompt (llama.cpp's own reuse).
    llm_prompt_cache_mb: int = 2048
    #: Greedy grammar-held decoding of an in-process model checks the grammar on the best token first (the same
    #: answer, about twice as fast); off (``PCM_LLM_FAST_GRAMMAR=0``) uses llama-cpp-python's own sampler chain.
    llm_fast_grammar: bool = True
    #: Folder where an in-process model saves its state after a long system prompt, so a fresh process's first
    #: call loads it instead of reading ~7k tokens (see pcm.llm.state); None (``PCM_LLM_STATE_DIR=off``): never.
    llm_state_dir: Path | None = field(default_factory=default_state_dir)
    #: Draft tokens for an in-process model: ``none`` or ``prompt-lookup`` (copied from the prompt, checked by the
    #: model in one batch).
    llm_draft: str = "none"
    #: Concurrent LLM calls during batch ingest.
    llm_concurrency: int = 4
    #: Rounds of SHACL/parse repair after the first extraction attempt.
    repair_rounds: int = 2
    #: Keep utterances that state nothing (greetings, thanks, "sounds great") from the extraction model
    #: (``pcm.extraction.gate``; they get the status ``gated``, ``pcm extract --gated`` extracts them). Off:
    #: ``PCM_EXTRACTION_GATE=off`` sends every utterance to the model.
    extraction_gate: bool = True
    #: Keep only the extracted values found in the words said (``pcm.extraction.grounding``); off
    #: (``PCM_EXTRACTION_GROUNDING=0``) stores what the model wrote, for measuring what the check removes.
    extraction_grounding: bool = True
    #: Hard time limit for any SPARQL query we run on behalf of a user or a model.
    query_timeout: float = 10.0
    #: Maximum rows returned by a user or generated SELECT.
    query_limit: int = 1000
    #: Heap, in MB, a user or generated query may use before it is stopped (the query worker's RLIMIT_DATA).
    query_memory_mb: int = 1024
    #: Remote SPARQL store instead of the embedded one: its root or its query URL (see pcm.backend_remote). Given at
    #: init, it is recorded in memory.toml; later it need not be set, and must name that server if it is
    #: (pcm.store_binding).
    store_url: str = ""
    #: Update and Graph Store URLs of the remote store, when the engine's layout does not give them.
    store_update_url: str = ""
    store_gsp_url: str = ""
    #: User and password for the remote store (Basic or Digest, as the server asks); or use ``store_token``.
    store_user: str = ""
    store_password: str = ""
    #: Bearer token for the remote store (``PCM_STORE_TOKEN``); never ``pcm serve``'s own token (``token``).
    store_token: str = ""
    #: Seconds pcm waits for the remote store to answer a write (an update, a load) before it gives up; a slow
    #: server needs more. A query keeps its own limit (``query_timeout``).
    store_write_timeout: float = 30.0
    #: The query URL of pcm's own server over this embedded memory's files: a running ``pcm serve`` a command goes
    #: through, or that server's engine. Set by pcm, never read from the environment; unlike ``store_url`` it
    #: does not make the memory a server's.
    engine_url: str = ""
    #: The remote store's engine: auto (detected), oxigraph, virtuoso or generic (the standard protocols alone).
    store_engine: str = "auto"
    #: Most quads one write request to the remote store carries (0: the default, 50,000, or the engine's limit).
    store_batch: int = 0
    #: The token ``pcm serve`` requires for writes, which commands send to a running ``pcm serve``
    #: (``PCM_TOKEN``). A remote store's bearer token is ``store_token``.
    token: str = ""
    #: The token ``pcm serve`` requires for reads when it listens beyond loopback (the write token is taken too);
    #: on loopback reads need none. ``PCM_READ_TOKEN``, flag ``--read-token``.
    read_token: str = ""
    #: Let ``pcm serve`` beyond loopback answer reads without a token, on purpose (``PCM_PUBLIC_READ=1``, flag
    #: ``--public-read``): anyone who reaches the address reads every utterance.
    public_read: bool = False
    #: ``pcm serve``'s connections (uvicorn's own limits, see :mod:`pcm.endpoint.connections`): connections and
    #: requests at once before new requests are answered 503 (``limit_concurrency``), seconds an idle keep-alive
    #: connection is kept (``timeout_keep_alive``), seconds a request head may take from the connection or its first
    #: byte, seconds a request body may stall between two pieces, and the largest request head in bytes (h11's
    #: ``max_incomplete_event_size``).
    serve_max_connections: int = 64
    serve_idle_timeout: int = 60
    serve_head_timeout: float = 10.0
    serve_body_timeout: float = 30.0
    serve_max_head_bytes: int = 64 * 1024
    #: Megabytes of request bodies ``pcm serve`` receives or holds at once, over all requests (flag
    #: ``--bodies-in-flight-mb``); a body that would pass it is answered 503 before it is read, so slow uploads on
    #: every connection cannot add up to the machine's memory (:mod:`pcm.endpoint.inflight`).
    serve_bodies_in_flight_mb: int = 64
    #: Turn on the LanceDB side index (off only for benchmarks of the store alone).
    index_enabled: bool = True
    #: Rows of an index table (utterances, entities) from which its vector searches go through LanceDB's own
    #: approximate index (IVF-HNSW-SQ, built off the write path when the table reaches this size, candidates
    #: re-scored exactly) instead of the exact scan of every vector (``PCM_INDEX_ANN_MIN_ROWS``). On the 100k
    #: lifetime memory (``bench_lifetime.py --posts 100000``, shared 2-core machine) hybrid recall through the
    #: index keeps 0.998 of the exact top 10 but costs 48.4 ms of CPU against the exact scan's 38.1 ms (p50); one
    #: exact scan (k 100, ``tune_ann.py --scan-sizes``) costs 22.4 / 46.2 / 124.8 ms of CPU at 100k / 300k / 1M
    #: rows, about 11.4 ms more per 100k rows, and a hybrid recall runs two, while the graph search grows with the
    #: log of the rows. They cross at about 150-200k rows (docs/benchmarks.md).
    index_ann_min_rows: int = 200_000
    #: Traversal algorithm `ask` falls back to first: wc, bs, astar, wc+bs, bs+astar, astar+wc or all.
    traversal_algorithm: str = "wc"
    #: OpenMP wait policy of the embedding model's threads, applied before torch is first imported. PASSIVE lets
    #: idle workers sleep: spinning ones stall each other on a shared two-core machine. ``OMP_WAIT_POLICY`` wins.
    omp_wait_policy: str = "PASSIVE"
    #: Keep a summary per session, updated at ingest (off: PCM_SUMMARIES=off).
    summaries_enabled: bool = True
    #: Longest utterance ingest accepts, in characters; a longer one is refused before anything is written.
    max_utterance_chars: int = 50_000
    #: Most RDF one import file or one Graph Store upload may hold (pcm.rdflimits): megabytes, triples, and the
    #: characters of one literal. Over a limit it is refused before anything is staged; an RDF/XML document that
    #: declares DTD entities is refused whatever its size. The defaults take a dump of a few million quads, and a
    #: literal twenty times the longest utterance ingest takes by default.
    max_rdf_mb: int = 512
    max_rdf_triples: int = 5_000_000
    max_literal_chars: int = 1_000_000

    def __post_init__(self) -> None:
        # Every way of making settings (the constructor, from_env's overrides, with_) passes here, so a caller that
        # hands the memory's directory as a string still gives every later ``settings.memory / name`` a Path.
        object.__setattr__(self, "memory", Path(self.memory).expanduser())

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        env = os.environ if env is None else env
        kwargs: dict[str, Any] = {}  # values of every field's type, checked by the constructor
        if env.get("PCM_MEMORY"):
            kwargs["memory"] = Path(env["PCM_MEMORY"]).expanduser()
        if env.get("PCM_LLM"):
            kwargs["llm"] = LLMSpec.parse(env["PCM_LLM"])
        kwargs["anthropic_api_key"] = env.get("ANTHROPIC_API_KEY", "")
        kwargs["anthropic_base_url"] = env.get("ANTHROPIC_BASE_URL", "")
        kwargs["openai_api_key"] = env.get("OPENAI_API_KEY", "") or env.get("PCM_OPENAI_API_KEY", "")
        for name, conv in (
            ("llm_timeout", float),
            ("llm_max_retries", int),
            ("llm_threads", int),
            ("llm_context", int),
            ("llm_prompt_cache_mb", int),
            ("llm_concurrency", int),
            ("repair_rounds", int),
            ("query_timeout", float),
            ("query_limit", int),
            ("max_utterance_chars", int),
            ("max_rdf_mb", int),
            ("max_rdf_triples", int),
            ("max_literal_chars", int),
            ("query_memory_mb", int),
            ("store_batch", int),
            ("store_write_timeout", float),
            ("serve_max_connections", int),
            ("serve_idle_timeout", int),
            ("serve_head_timeout", float),
            ("serve_body_timeout", float),
            ("serve_max_head_bytes", int),
            ("serve_bodies_in_flight_mb", int),
            ("index_ann_min_rows", int),
        ):
            raw = env.get(f"PCM_{name.upper()}")
            if raw:
                try:
                    kwargs[name] = conv(raw)
                except ValueError as exc:
                    raise UsageError(f"PCM_{name.upper()}={raw!r} is not a valid {conv.__name__}") from exc
        for name, choices in _CHOICES.items():
            if env.get(f"PCM_{name.upper()}"):
                kwargs[name] = _choice(f"PCM_{name.upper()}", env[f"PCM_{name.upper()}"], choices)
        if env.get("PCM_STORE_URL"):
            kwargs["store_url"] = env["PCM_STORE_URL"]
        for name in ("store_update_url", "store_gsp_url", "store_user", "store_password", "store_token"):
            if env.get(f"PCM_{name.upper()}"):
                kwargs[name] = env[f"PCM_{name.upper()}"]
        if env.get("PCM_TOKEN"):
            kwargs["token"] = env["PCM_TOKEN"]
        if env.get("PCM_READ_TOKEN"):
            kwargs["read_token"] = env["PCM_READ_TOKEN"]
        if env.get("PCM_PUBLIC_READ", "").lower() in {"1", "on", "true", "yes"}:
            kwargs["public_read"] = True
        if env.get("PCM_TRAVERSAL"):
            kwargs["traversal_algorithm"] = env["PCM_TRAVERSAL"]
        if env.get("PCM_INDEX", "").lower() in {"0", "off", "false", "no"}:
            kwargs["index_enabled"] = False
        if env.get("OMP_WAIT_POLICY"):
            kwargs["omp_wait_policy"] = env["OMP_WAIT_POLICY"]
        if env.get("PCM_LLM_STATE_DIR"):
            raw_dir = env["PCM_LLM_STATE_DIR"].strip()
            kwargs["llm_state_dir"] = None if raw_dir.lower() in {"off", "none"} else Path(raw_dir).expanduser()
        if env.get("PCM_LLM_FAST_GRAMMAR", "").lower() in {"0", "off", "false", "no"}:
            kwargs["llm_fast_grammar"] = False
        if env.get("PCM_SUMMARIES", "").lower() in {"0", "off", "false", "no"}:
            kwargs["summaries_enabled"] = False
        if env.get("PCM_EXTRACTION_GATE", "").lower() in {"0", "off", "false", "no"}:
            kwargs["extraction_gate"] = False
        if env.get("PCM_EXTRACTION_GROUNDING", "").lower() in {"0", "off", "false", "no"}:
            kwargs["extraction_grounding"] = False
        kwargs.update({k: v for k, v in overrides.items() if v is not None})
        if int(kwargs.get("max_utterance_chars", 1)) < 1:
            raise UsageError("PCM_MAX_UTTERANCE_CHARS must be at least 1")
        for name in ("max_rdf_mb", "max_rdf_triples", "max_literal_chars"):
            if int(kwargs.get(name, 1)) < 1:
                raise UsageError(f"PCM_{name.upper()} must be at least 1")
        for name in ("serve_max_connections", "serve_idle_timeout", "serve_head_timeout", "serve_body_timeout",
                     "serve_max_head_bytes", "serve_bodies_in_flight_mb", "store_write_timeout"):
            if name in kwargs and float(kwargs[name]) <= 0:
                raise UsageError(f"PCM_{name.upper()} (or its flag) must be more than 0")
        return cls(**kwargs)

    def with_(self, **changes: Any) -> Settings:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

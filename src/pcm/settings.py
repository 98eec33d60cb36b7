"""One typed settings object. Environment variables ``PCM_*`` give the defaults; CLI flags override them.

No other module reads the environment: they receive a :class:`Settings`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, TypeVar

from platformdirs import user_cache_dir, user_data_dir

from pcm.errors import UsageError

_Config = TypeVar("_Config", "ExtractionConfig", "AskConfig", "RecallConfig")


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
        """Parse ``none``, ``anthropic[:MODEL]``, ``openai:BASE_URL#MODEL`` (Ollama, vLLM, llama.cpp, LM Studio),
        ``llamacpp:PATH.gguf``, ``scripted:PATH`` or ``replay:DIR``: one row of :data:`_SPEC_FORMS` a provider."""
        text = text.strip()
        if not text or text == "none":
            return cls()
        provider, _, rest = text.partition(":")
        form = _SPEC_FORMS.get(provider)
        if form is None:
            raise UsageError(
                f"PCM_LLM={text!r}: expected none, anthropic:MODEL, openai:BASE_URL#MODEL, llamacpp:PATH.gguf or replay:DIR"
            )
        return form(text, rest)

    @property
    def enabled(self) -> bool:
        return self.provider != "none"

    def __str__(self) -> str:
        if self.provider == "none":
            return "none"
        if self.provider == "openai":
            return f"openai:{self.base_url}#{self.model}"
        return f"{self.provider}:{self.model}"


@dataclass(frozen=True)
class GroundingConfig:
    """The check that keeps only the extracted values found in the words said (:mod:`pcm.extraction.grounding`):
    whether it runs, and how much of a value must have been said."""

    #: Off (``PCM_EXTRACTION_GROUNDING=0``) stores what the model wrote, for measuring what the check removes.
    enabled: bool = True
    #: Share of a name's content words that must be found in what was said.
    name_coverage: float = 0.5
    #: Share for text the model writes in its own words: descriptions, and the labels of actions and events
    #: ("buying the Breville Barista Express" for "I bought a Breville Barista Express").
    description_coverage: float = 1 / 3
    #: Similarity (difflib ratio) from which two words of five letters or more are one word misspelt or inflected.
    fuzzy_word: float = 0.8
    #: Words a category value ("positive", "dog", "female") may have and be kept without being said.
    category_words: int = 3



@dataclass(frozen=True)
class ExtractionConfig:
    """How ingest turns what was said into facts (:mod:`pcm.extraction`): when it runs, what the model is asked to
    write and with what context, how often a refused answer is sent back, and the checks around the model.

    The first fields are read from ``PCM_*`` variables (named beside each); the rest are tuning values a benchmark
    may vary (``Settings.with_(extraction=replace(settings.extraction, ...))``). Limits that only keep a prompt,
    grammar or answer within bounds stay beside the code that builds them.
    """

    #: When ingest extracts (``PCM_EXTRACTION``): ``inline`` (before it returns, as each batch is stored),
    #: ``queued`` (it stores and indexes the posts and returns; ``pcm extract --pending`` or a running
    #: ``pcm serve`` extracts them later), or ``auto`` (queued for a model on this machine, where one utterance
    #: takes a minute or more, so a file would hold ingest for hours; inline for a hosted model).
    mode: str = "auto"
    #: The answer format (``PCM_LLM_OUTPUT``): ``turtle`` (free-form), ``json`` (held to a JSON Schema generated
    #: from the ontology, sent natively to the provider), ``compact`` (one fact per line, held to a GBNF grammar: a
    #: model in this process; an answer that still fails is written again in the ``fallback`` form), or ``auto``
    #: (compact for a model in this process, json for another model on this machine, turtle otherwise).
    output: str = "auto"
    #: Where the vocabulary catalogue goes in the prompt (``PCM_LLM_CATALOGUE``): ``areas`` (the core areas in the
    #: system prompt, each call's further areas in its user turn: the smallest prompt, best where every call is
    #: paid in full), ``whole`` (every area in the fixed system prompt: a model that keeps its previous prompt's
    #: tokens then re-reads only the call's own few hundred), or ``auto`` (whole for a client with such a prefix
    #: cache, i.e. an in-process model; areas otherwise).
    catalogue: str = "auto"
    #: Rounds of SHACL/parse repair after the first attempt (``PCM_REPAIR_ROUNDS``).
    repair_rounds: int = 2
    #: The form a compact answer that still fails once its rounds are spent is written in again (``json``, or
    #: ``""`` for none): see :meth:`pcm.extraction.extractor.Extractor.extract`.
    fallback: str = "json"
    #: Concurrent model calls during batch ingest (``PCM_LLM_CONCURRENCY``).
    concurrency: int = 4
    #: Keep utterances that state nothing (greetings, thanks, "sounds great") from the model
    #: (:mod:`pcm.extraction.gate`; they get the status ``gated``, ``pcm extract --gated`` extracts them). Off:
    #: ``PCM_EXTRACTION_GATE=off`` sends every utterance to the model.
    gate: bool = True
    #: Keep only the extracted values found in the words said, and how strictly (``PCM_EXTRACTION_GROUNDING``).
    grounding: GroundingConfig = field(default_factory=GroundingConfig)
    #: Tokens one answer (and one repair round's answer) may take.
    max_output_tokens: int = 3000
    #: Room for one call's own user turn (context, entities, the utterance) that the whole-catalogue layout keeps in
    #: the model's context window beside the system prompt; the answer and its echo in a repair round get
    #: ``max_output_tokens`` each.
    user_tokens: int = 2000
    #: Previous turns of the session shown with the utterance.
    previous_turns: int = 4
    #: Known entities offered per call (found from the previous turns, labels said and the side index).
    context_entities: int = 30

    def with_(self, **changes: Any) -> ExtractionConfig:
        """This config with some fields changed; an unknown name is a one-line error."""
        return _changed(self, "extraction", changes)


@dataclass(frozen=True)
class AskConfig:
    """How ``ask`` answers with a model (:mod:`pcm.retrieval.ask`): what it tries first, how it writes and repairs
    a graph query, and how much of the stored facts, evidence and summaries it reads.

    The first fields are read from ``PCM_*`` variables (named beside each); ``output``, ``catalogue`` and
    ``repair_rounds`` share their variables with :class:`ExtractionConfig`. The rest are tuning values a benchmark
    may vary; limits that only keep a prompt or answer within bounds stay beside the code that builds them.
    """

    #: What ``ask`` tries first with a model (``PCM_ASK_ORDER``): ``graph`` (the model writes a SPARQL query,
    #: repaired until it answers; the stored facts nearest the question only when it does not), ``facts`` (the
    #: model first answers from those facts, one short call; a graph query only when it finds no answer there), or
    #: ``auto`` (facts for a model on this machine, whose query-writing calls take a minute each; graph otherwise).
    order: str = "auto"
    #: Whether ``ask`` first reads a question into a typed frame (one short constrained model call) and answers
    #: counts, totals, latest values, relatives, intervals and the like in code (:mod:`pcm.retrieval.frame`;
    #: ``PCM_ASK_FRAME``): ``on``, ``off`` (the pipeline reads the question's wording instead), or ``auto`` (on for a
    #: client that constrains its output: llama.cpp, OpenAI-compatible servers, Anthropic).
    frame: str = "auto"
    #: Traversal algorithm of the first fallback (``PCM_TRAVERSAL``): wc, bs, astar, wc+bs, bs+astar, astar+wc or
    #: all. WaterCircles (wc) needs no embedding.
    traversal: str = "wc"
    #: ``json`` writes the graph query as JSON held to a schema, anything else as SPARQL (``PCM_LLM_OUTPUT``, read
    #: as :attr:`ExtractionConfig.output` is).
    output: str = "auto"
    #: Where the catalogue goes in the NL->SPARQL prompt (``PCM_LLM_CATALOGUE``, as for extraction).
    catalogue: str = "auto"
    #: Repair rounds of a graph query after the first (``PCM_REPAIR_ROUNDS``); at least one query is tried.
    repair_rounds: int = 2
    #: Tokens one written graph query may take.
    query_tokens: int = 1200
    #: Room for one NL->SPARQL call's own user turn (terms in use, matched entities, the question) that the
    #: whole-catalogue layout keeps in the model's context window beside the system prompt; the query and its echo in
    #: a repair round get ``query_tokens`` each.
    question_tokens: int = 2000
    #: Session summaries added as supporting lines to the episodic fallback's context.
    summary_lines: int = 2
    #: Lines of stored facts kept for the model (:mod:`pcm.retrieval.facts`): enough for a question with three
    #: parts, short enough for a 1.5B model to read.
    fact_lines: int = 14
    #: Nodes the fact context starts from: taken from grounding's matches and from the side index's nearest
    #: entities, each.
    fact_seeds: int = 6
    #: Neighbours added per seed (deterministically, in IRI order): a hub seed must not flood the context.
    fact_neighbours: int = 12
    #: The best lines whose other ends are read in a following round.
    fact_follow: int = 6
    #: Rounds of following: the habit behind "Thursday: by day of every Thursday evening" is two hops away.
    fact_follow_rounds: int = 2
    #: Grounding's score from which a match counts as named in the question (exact and normalised labels); below it
    #: ("Shop 132" for "shop") a match is only a place to start from.
    named_score: float = 0.8
    #: Added to the similarity of fact lines about a node the question names.
    named_bonus: float = 0.08
    #: Rows of the evidence query behind a graph answer (its WHERE group as SELECT *).
    evidence_rows: int = 500
    #: Answer rows bound into the evidence query (more than this and the rows are matched after the query instead).
    evidence_values: int = 50
    #: Ground triples looked up per graph answer.
    evidence_facts: int = 400

    def with_(self, **changes: Any) -> AskConfig:
        """This config with some fields changed; an unknown name is a one-line error."""
        return _changed(self, "ask", changes)


@dataclass(frozen=True)
class RecallConfig:
    """How episodic recall ranks (:mod:`pcm.index.recall`, :class:`pcm.index.SideIndex`): the weights and depths of
    its legs and priors, as one value a memory's index is opened with (``PCM_RECALL_RECIPE`` names a recipe of
    :data:`RECALL_RECIPES`; a benchmark varies single fields with ``--set name=value``).

    The values were chosen on LoCoMo conv-26 as broad plateaus, not peaks: R@10 stays within 0.01 for
    ``vector_weight`` 0.35-0.8, ``other_speaker_factor`` 0.5-0.7 and a fusion offset of 5-20, so they are not fitted
    to that conversation's questions; each field says what it was measured at (docs/benchmarks.md has the tables).
    """

    #: Weight of the full-text leg in the fusion.
    fts_weight: float = 1.0
    #: Weight of the vector leg. The full-text leg carries neighbour context and dates, and finds more; vectors
    #: rescue paraphrases. Raised from 0.35 once the vector query lost the named speaker
    #: (``named_speaker_in_vector``): LoCoMo conv-26 R@10 stays 0.740 for 0.5-0.8 (R@5 0.653 -> 0.667 at 0.5), the
    #: LongMemEval dev slice rises 0.870 -> 0.891 (multi-session 0.429 -> 0.571; 0.935 at 0.65-0.8) and the S-like
    #: haystack 0.783 -> 0.848 (multi-session 0.429 -> 0.714; 0.826 at 0.65), no category lower; 0.5 keeps
    #: single-hop R@5 (0.843, 0.771 at 0.8).
    vector_weight: float = 0.5
    #: Candidates taken from each leg before fusion (at least 4k).
    depth: int = 100
    #: When the question names exactly one speaker, posts by anyone else have their leg scores multiplied by this:
    #: "what did Caroline research?" is answered by Caroline's own words far more often than by her friend's.
    other_speaker_factor: float = 0.5
    #: When a question speaks in the first person and names no one ("how many weddings have I attended?"), posts
    #: not by the owner have their leg scores multiplied by this: the asker is the owner, and what they did is in
    #: their own words. Chosen on LongMemEval dev48 (0.3-0.5 help, 0.7 barely); neutral on LoCoMo, whose questions
    #: name people.
    other_role_factor: float = 0.3
    #: Whether the vector leg embeds the name of the one speaker a question names. Not by default: every post of
    #: that speaker is embedded as ``NAME said: ...`` and many posts by others address them by name, so the name
    #: pulls short chatter ("Wow, NAME, that's great!") above the posts that carry the question's content; the
    #: speaker prior does the name's job. Dropping it raised LoCoMo conv-26 R@10 0.733 -> 0.740 (R@5 0.633 ->
    #: 0.653, multi-hop 0.219 -> 0.250, open-domain R@20 0.364 -> 0.455, no category lower).
    named_speaker_in_vector: bool = False
    #: Pseudo-relevance feedback: the best fused posts that a second round of retrieval starts from (0 switches it
    #: off). A question whose evidence is spread over several turns finds one or two of them by its own words; the
    #: vector of those first finds brings up their siblings, which share the topic but not the question's words.
    #: On LoCoMo conv-26 (5 posts, vector leg at 0.5, beta 0.25, head kept) R@10 0.740 -> 0.767 (multi-hop 0.250 ->
    #: 0.312, open-domain 0.364 -> 0.455, single-hop 0.929 -> 0.943; R@20 0.793 -> 0.833), the LongMemEval dev
    #: slice 0.891 -> 0.913 and the S-like haystack 0.848 unchanged (R@20 0.870 -> 0.913). 2, 3 or 5 posts give
    #: the same R@10. Cost: a second vector search (a bfloat16 pass of 3-4 ms at 100k posts on two cores).
    feedback_posts: int = 5
    #: Weight of the vector leg run with the query vector moved towards the feedback posts' (0: not run). 0.3
    #: gives conv-26 0.747 (open-domain 0.455, multi-hop 0.250); 0.8 (3 posts, beta 0.5) 0.753 with single-hop
    #: 0.929 -> 0.886.
    feedback_vector_weight: float = 0.5
    #: How far the feedback query vector moves: ``query + beta * mean(feedback posts)``, renormalised. At 0.5 (and
    #: 1.0) conv-26 and the dev slice stay as at 0.25 (0.767 / 0.913; 0.753 at 1.0) but the S-like haystack falls
    #: 0.848 -> 0.826 (temporal 0.750 -> 0.625): the further the query moves, the more distractor sessions it
    #: reaches.
    feedback_beta: float = 0.25
    #: The feedback posts keep the first places, in their first-round order, after the second round: the third
    #: leg otherwise pushes exact answers down (conv-26 single-hop R@5 0.843 -> 0.729-0.757, R@10 unchanged).
    feedback_keeps_head: bool = True
    #: Weight of the quantity leg: when a question asks an amount of a unit ("how many hours", "how much money",
    #: "how long", :mod:`pcm.index.quantity`), the fused candidates that state such an amount, in fused order; 0
    #: switches it off. At 1.0 and 2.0 the LongMemEval dev slice rises 0.935 -> 0.957 (multi-session 0.714 ->
    #: 0.857) and the S-like haystack 0.848 -> 0.870, no type lower; LoCoMo conv-26 unchanged (R@10 0.767).
    quantity_weight: float = 1.0
    #: Content diversity (maximal marginal relevance) among the best hybrid candidates: the first
    #: ``diversity_pool`` posts are re-ordered greedily by ``score / best score - diversity * max cosine with the
    #: posts already placed``, so a near-duplicate of a post above it yields its place to a post that says
    #: something else; 0 switches it off. The feedback head keeps its places. At 0.1 the LongMemEval dev slice
    #: gains (R@10 0.913 -> 0.935, multi-session 0.571 -> 0.714, R@20 0.978 -> 1.000); LoCoMo conv-26 keeps R@10
    #: 0.767 but R@20 falls 0.833 -> 0.827; the S-like haystack keeps R@10 0.848 (R@20 0.913 -> 0.891). 0.05
    #: lowers conv-26 R@10 to 0.760, 0.2 cuts open-domain R@20 to 0.636, 0.5 lowers R@10 to 0.740.
    diversity: float = 0.1
    #: Best fused posts the diversity re-ordering may move; the rest keep their fused order after them.
    diversity_pool: int = 30
    #: Weight of the vector leg in the attribution check's fusion (:meth:`SideIndex.said_by_others`): the value
    #: ``attribution_rank`` was chosen with.
    attribution_vector_weight: float = 0.35
    #: Candidates of each leg the attribution check ranks.
    attribution_depth: int = 100
    #: The check finds a question's words said by someone else when at least this many posts by others outrank
    #: the named speaker's best post (content words only, no speaker prior) and the nearest post in meaning is
    #: also not theirs. Chosen on LoCoMo conv-26 as the point where answerable questions almost never trip it (3%
    #: there); one rank declines more adversarial questions and about one answerable question in five.
    attribution_rank: int = 2

    def with_(self, **changes: Any) -> RecallConfig:
        """This config with some fields changed (a benchmark's ``--set``); an unknown name is a one-line error."""
        return _changed(self, "recall", changes)


def _changed(config: _Config, what: str, changes: Mapping[str, Any]) -> _Config:
    """``config`` with ``changes``; a name it has no field for is a one-line error naming those it has."""
    unknown = sorted(set(changes) - {f.name for f in fields(config)})
    if unknown:
        raise UsageError(f"{what} has no setting {unknown[0]!r}; it has {', '.join(f.name for f in fields(config))}")
    return replace(config, **changes)


#: Recall configs whose values travel together, by the name ``PCM_RECALL_RECIPE`` gives: ``tuned`` (the default:
#: every leg and prior at its measured value) and ``plain`` (the full-text and vector legs fused alone: no
#: feedback round, quantity leg, diversity or priors), the baseline the tuned legs are measured against.
RECALL_RECIPES: dict[str, RecallConfig] = {
    "tuned": RecallConfig(),
    "plain": RecallConfig(
        other_speaker_factor=1.0, other_role_factor=1.0, feedback_posts=0, quantity_weight=0.0, diversity=0.0
    ),
}


DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-5"


def _openai_spec(text: str, rest: str) -> LLMSpec:
    base, sep, model = rest.rpartition("#")
    if not sep or not base or not model:
        raise UsageError(f"PCM_LLM={text!r}: expected openai:BASE_URL#MODEL, e.g. openai:http://localhost:11434/v1#llama3.1")
    return LLMSpec("openai", model, base)


def _llamacpp_spec(text: str, rest: str) -> LLMSpec:
    if not rest:
        raise UsageError(f"PCM_LLM={text!r}: expected llamacpp:/path/to/model.gguf")
    return LLMSpec("llamacpp", rest)


def _replay_spec(text: str, rest: str) -> LLMSpec:
    if not rest:
        raise UsageError(f"PCM_LLM={text!r}: expected replay:DIR (a directory written by pcm eval --record)")
    return LLMSpec("replay", rest)


#: How ``PCM_LLM`` names each provider: ``PROVIDER:REST`` read by the provider's row (the clients themselves are
#: built by :data:`pcm.llm.factory.PROVIDERS`, from the same names).
_SPEC_FORMS: dict[str, Callable[[str, str], LLMSpec]] = {
    "anthropic": lambda _text, rest: LLMSpec("anthropic", rest or DEFAULT_ANTHROPIC_MODEL),
    "openai": _openai_spec,
    "llamacpp": _llamacpp_spec,
    "scripted": lambda _text, rest: LLMSpec("scripted", rest),
    "replay": _replay_spec,
}
#: Values of ``PCM_LLM_CATALOGUE`` (see :attr:`ExtractionConfig.catalogue`).
CATALOGUE_LAYOUTS = ("auto", "areas", "whole")
#: Values of ``PCM_ASK_ORDER`` (see :attr:`AskConfig.order`).
ASK_ORDERS = ("auto", "graph", "facts")
#: Values of ``PCM_ASK_FRAME`` (see :attr:`AskConfig.frame`).
ASK_FRAMES = ("auto", "on", "off")
#: Values of ``PCM_EXTRACTION`` (see :attr:`ExtractionConfig.mode`).
EXTRACTION_MODES = ("auto", "inline", "queued")
#: Settings read from a ``PCM_*`` variable that names one of a few choices, and those choices.
_CHOICES: dict[str, tuple[str, ...]] = {
    "llm_output": ("auto", "turtle", "json", "compact"),
    "llm_catalogue": CATALOGUE_LAYOUTS,
    "ask_order": ASK_ORDERS,
    "ask_frame": ASK_FRAMES,
    "llm_draft": ("none", "prompt-lookup"),
    "extraction_mode": EXTRACTION_MODES,
    "store_engine": ("auto", "oxigraph", "virtuoso", "generic"),
}
#: The flat names by which ``PCM_*`` variables, CLI flags and :meth:`Settings.with_` set the fields of a subsystem's
#: config: each name sets these (config, field) pairs, so ``with_(ask_order="facts")`` gives ``settings.ask.order``
#: and ``PCM_LLM_OUTPUT`` sets the format of both extraction and ask.
_NESTED: dict[str, tuple[tuple[str, str], ...]] = {
    "llm_output": (("extraction", "output"), ("ask", "output")),
    "llm_catalogue": (("extraction", "catalogue"), ("ask", "catalogue")),
    "repair_rounds": (("extraction", "repair_rounds"), ("ask", "repair_rounds")),
    "llm_concurrency": (("extraction", "concurrency"),),
    "extraction_mode": (("extraction", "mode"),),
    "extraction_gate": (("extraction", "gate"),),
    "ask_order": (("ask", "order"),),
    "ask_frame": (("ask", "frame"),),
    "traversal_algorithm": (("ask", "traversal"),),
}
#: The variable of a flat name, where it is not ``PCM_`` and the name in capitals.
_VARIABLES = {"extraction_mode": "PCM_EXTRACTION", "traversal_algorithm": "PCM_TRAVERSAL"}


def _variable(name: str) -> str:
    return _VARIABLES.get(name, f"PCM_{name.upper()}")


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
    #: How ingest extracts facts with the model (``PCM_EXTRACTION``, ``PCM_LLM_OUTPUT``, ``PCM_LLM_CATALOGUE``,
    #: ``PCM_REPAIR_ROUNDS``, ``PCM_LLM_CONCURRENCY``, ``PCM_EXTRACTION_GATE``, ``PCM_EXTRACTION_GROUNDING``).
    extraction: ExtractionConfig = field(default_factory=ExtractionConfig)
    #: How ``ask`` answers with a model (``PCM_ASK_ORDER``, ``PCM_ASK_FRAME``, ``PCM_TRAVERSAL``, and the format,
    #: catalogue and repair variables it shares with extraction).
    ask: AskConfig = field(default_factory=AskConfig)
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
    #: Most megabytes of utterance vectors a process reads into memory and keeps once it has made 64 recalls with
    #: them left on disk (a memory past ``index_ann_min_rows``): recall then scores the index's candidates from
    #: memory, about 10 ms faster a recall (``PCM_INDEX_RESIDENT_MB``; 0: never). 1.5 KB an utterance: the
    #: default keeps up to about 700k utterances' vectors; at 1M (1.5 GB) ``pcm serve`` peaked at 5.3 GB with them
    #: and 2.2 GB without, against a 4 GB target (docs/benchmarks.md).
    index_resident_mb: int = 1024
    #: How episodic recall ranks: a recipe of :data:`RECALL_RECIPES` (``PCM_RECALL_RECIPE``, default ``tuned``).
    recall: RecallConfig = field(default_factory=RecallConfig)
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
            ("index_resident_mb", int),
        ):
            raw = env.get(f"PCM_{name.upper()}")
            if raw:
                try:
                    kwargs[name] = conv(raw)
                except ValueError as exc:
                    raise UsageError(f"PCM_{name.upper()}={raw!r} is not a valid {conv.__name__}") from exc
        for name, choices in _CHOICES.items():
            if env.get(_variable(name)):
                kwargs[name] = _choice(_variable(name), env[_variable(name)], choices)
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
        if env.get("PCM_RECALL_RECIPE"):
            recipe = _choice("PCM_RECALL_RECIPE", env["PCM_RECALL_RECIPE"], tuple(RECALL_RECIPES))
            kwargs["recall"] = RECALL_RECIPES[recipe]
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
            kwargs["extraction"] = ExtractionConfig(grounding=GroundingConfig(enabled=False))
        kwargs.update({k: v for k, v in overrides.items() if v is not None})
        flat = {name: kwargs.pop(name) for name in list(kwargs) if name in _NESTED}
        if int(kwargs.get("max_utterance_chars", 1)) < 1:
            raise UsageError("PCM_MAX_UTTERANCE_CHARS must be at least 1")
        for name in ("max_rdf_mb", "max_rdf_triples", "max_literal_chars"):
            if int(kwargs.get(name, 1)) < 1:
                raise UsageError(f"PCM_{name.upper()} must be at least 1")
        for name in ("serve_max_connections", "serve_idle_timeout", "serve_head_timeout", "serve_body_timeout",
                     "serve_max_head_bytes", "serve_bodies_in_flight_mb", "store_write_timeout"):
            if name in kwargs and float(kwargs[name]) <= 0:
                raise UsageError(f"PCM_{name.upper()} (or its flag) must be more than 0")
        return cls(**kwargs).with_(**flat)

    def with_(self, **changes: Any) -> Settings:
        """These settings with some changed (``None`` leaves one as it is); a flat name of :data:`_NESTED` changes
        the fields of the subsystem configs it stands for."""
        changes = {k: v for k, v in changes.items() if v is not None}
        out = replace(self, **{k: v for k, v in changes.items() if k not in _NESTED})
        for name in changes.keys() & _NESTED.keys():
            for config, field_name in _NESTED[name]:
                out = replace(out, **{config: replace(getattr(out, config), **{field_name: changes[name]})})
        return out

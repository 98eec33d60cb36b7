"""A GGUF model run in this process through llama-cpp-python (``PCM_LLM=llamacpp:/path/to/model.gguf``).

Why in-process: a personal memory on a laptop should not need a model server. llama-cpp-python is an optional
extra (``pip install 'pcm[local]'``); without it this provider says how to install it. On a CPU without AVX-512
(or where the default native build crashes) build it with
``CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" pip install llama-cpp-python``.

* Constrained output: a :class:`pcm.llm.base.JsonSchema` becomes a grammar (llama-cpp-python's JSON Schema
  converter, built once per schema) that holds decoding to the schema. llama-cpp-python's own ``response_format``
  path falls back to plain JSON without a word when a schema does not convert; here that fallback is taken with
  one warning, so a schema the converter cannot read is seen.
* Greedy decoding under a grammar checks the grammar on the best token first and matches the whole vocabulary only
  when that token is refused (:mod:`pcm.llm.grammar_first`): the same answer, about twice as fast on two cores.
  ``PCM_LLM_FAST_GRAMMAR=0`` goes back to llama-cpp-python's own sampler.
* Threads and context size come from settings (``PCM_LLM_THREADS``, ``PCM_LLM_CONTEXT``).
* The model keeps the tokens of its previous prompt and re-reads only what changed after their common prefix, so
  the prompts are laid out stable part first (instructions and catalogue in the system prompt, the utterance
  last): each utterance pays mostly for its own tokens.
* One call at a time (the model object is not thread-safe); a progress line on stderr during a long wait.
* A fresh process does not re-read a long system prompt: the model's state after it is saved once on disk
  (``PCM_LLM_STATE_DIR``) and loaded at the process's first call that starts with it (:mod:`pcm.llm.state`).
* ``PCM_LLM_DRAFT=prompt-lookup`` drafts tokens by copying what follows the last two tokens' earlier occurrence in
  the prompt (llama-cpp-python's ``LlamaPromptLookupDecoding``); the model checks them in one batch.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pcm.errors import LLMError
from pcm.llm.base import Completion, JsonSchema, Request, Usage
from pcm.llm.manners import PROGRESS_AFTER, waiting
from pcm.llm.retry import as_int, one_line
from pcm.llm.state import LlamaStateAccess, PrefixStates, StateAccess, StateError, StateStore

log = logging.getLogger(__name__)

INSTALL_HINT = (
    "install the optional extra: pip install 'pcm[local]' (on a CPU without AVX-512: "
    'CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" pip install llama-cpp-python)'
)

LlamaFactory = Callable[..., Any]
#: Built grammars kept per client: the utterance's and its repair rounds', and the other pipelines' few schemas.
GRAMMARS_KEPT = 8
#: JSON Schema text (or GBNF text) -> the decoding constraint ``create_chat_completion`` takes as ``grammar``.
GrammarBuilder = Callable[[str], Any]
#: Values of ``PCM_LLM_DRAFT``: no draft, or prompt-lookup decoding.
DRAFTS = ("none", "prompt-lookup")
#: Tokens a prompt-lookup draft proposes per step (llama-cpp-python advises 2 on a CPU, 10 on a GPU).
DRAFT_TOKENS = 2


def _default_factory(fast_grammar: bool) -> LlamaFactory:
    try:
        import llama_cpp
    except ImportError as exc:
        raise LLMError(f"PCM_LLM=llamacpp needs llama-cpp-python: {INSTALL_HINT}") from exc
    if fast_grammar:
        from pcm.llm.grammar_first import fast_llama_class

        return fast_llama_class()
    return llama_cpp.Llama


def _default_prompt_cache(capacity: int, keep_logits: bool) -> Any:
    """The prompt-state cache: after each call the model's state is kept under its tokens, and a later prompt
    resumes from the kept state that shares the longest beginning with it (least recently used states go first
    when ``capacity`` bytes are exceeded, every byte of a state counted: :mod:`pcm.llm.prompt_cache`)."""
    try:
        import llama_cpp  # noqa: F401  (the cache module builds on it)
    except ImportError as exc:
        raise LLMError(f"PCM_LLM=llamacpp needs llama-cpp-python: {INSTALL_HINT}") from exc
    from pcm.llm.prompt_cache import prompt_state_cache

    return prompt_state_cache(capacity, keep_logits=keep_logits)


def _default_draft() -> Any:
    try:
        from llama_cpp.llama_speculative import LlamaPromptLookupDecoding
    except ImportError as exc:
        raise LLMError(f"PCM_LLM=llamacpp needs llama-cpp-python: {INSTALL_HINT}") from exc
    return LlamaPromptLookupDecoding(num_pred_tokens=DRAFT_TOKENS)


def _default_grammar() -> GrammarBuilder:
    try:
        from llama_cpp import LlamaGrammar
    except ImportError as exc:
        raise LLMError(f"PCM_LLM=llamacpp needs llama-cpp-python: {INSTALL_HINT}") from exc
    return lambda text: LlamaGrammar.from_json_schema(text, verbose=False)


def _default_gbnf() -> GrammarBuilder:
    try:
        from llama_cpp import LlamaGrammar
    except ImportError as exc:
        raise LLMError(f"PCM_LLM=llamacpp needs llama-cpp-python: {INSTALL_HINT}") from exc
    return lambda text: LlamaGrammar.from_string(text, verbose=False)


class LlamaCppClient:
    """An :class:`pcm.llm.LLMClient` running a GGUF file in this process; calls are serialised."""

    #: A model on this machine: ``PCM_LLM_OUTPUT=auto`` picks constrained (json) output for it.
    local = True
    #: Constrained decoding through a grammar is always available in-process.
    constrained = True
    #: A grammar is applied as it is (no provider field in between): ``PCM_LLM_OUTPUT=auto`` picks the compact
    #: line form for extraction (:mod:`pcm.extraction.compact`), held to its GBNF grammar.
    in_process = True
    #: The model keeps its previous prompt's tokens: ``PCM_LLM_CATALOGUE=auto`` puts the whole catalogue in the
    #: fixed system prompt for it.
    prefix_cache = True

    def __init__(
        self,
        *,
        model_path: str,
        threads: int,
        context: int,
        factory: LlamaFactory | None = None,
        grammar: GrammarBuilder | None = None,
        gbnf: GrammarBuilder | None = None,
        progress: Callable[[str], None] | None = None,
        progress_after: float = PROGRESS_AFTER,
        fast_grammar: bool = True,
        prompt_cache_mb: int = 0,
        prompt_cache: Callable[[int], Any] | None = None,
        state_dir: str | Path | None = None,
        state_access: Callable[[Any], StateAccess] | None = None,
        draft: str = "none",
        draft_model: Callable[[], Any] | None = None,
    ) -> None:
        path = Path(model_path).expanduser()
        if not path.is_file():
            raise LLMError(f"PCM_LLM=llamacpp:{model_path}: no such model file (a .gguf file is expected)")
        self.model_path = path
        self.name = f"llamacpp:{path.name}"
        self.model = path.stem
        self.usage = Usage()
        self.threads = threads
        self.context = context
        self._progress = progress
        self._progress_after = progress_after
        self._lock = threading.Lock()
        #: Built grammars by their text, the most recently used last (see :meth:`_cached`).
        self._grammars: OrderedDict[str, Any] = OrderedDict()
        self._build_grammar = grammar
        self._build_gbnf = gbnf
        make = factory or _default_factory(fast_grammar)
        if draft not in DRAFTS:
            raise LLMError(f"PCM_LLM_DRAFT={draft!r}: expected one of {', '.join(DRAFTS)}")
        extra: dict[str, Any] = {}
        if draft == "prompt-lookup":
            # A draft makes llama-cpp-python keep the logits of every token it reads, but (0.3.36) it sizes that
            # array by the logits_all argument: without it, n_batch rows, and a prompt longer than n_batch fails
            # ("could not broadcast ... into shape (0,)"). With it: n_ctx x vocabulary floats of address space
            # (~10 GB at 16k tokens for Qwen), ~600 KB of memory per prompt token read.
            extra.update(draft_model=(draft_model or _default_draft)(), logits_all=True)
        try:
            self._llama = make(
                model_path=str(path), n_ctx=context, n_threads=threads, n_threads_batch=threads, seed=0,
                verbose=False, **extra,
            )
        except ValueError as exc:  # llama-cpp-python's word for a file it cannot load
            raise LLMError(f"{self.name}: cannot load the model: {one_line(exc)}") from exc
        if prompt_cache_mb > 0:
            # Without it llama.cpp reuses only the previous prompt's beginning, so ask, which alternates its ~7k-token
            # NL->SPARQL prompt with short answer prompts, would re-read the catalogue for every question.
            capacity = prompt_cache_mb << 20
            keep_logits = "logits_all" in extra  # the draft reads them; greedy decoding does not
            cache = prompt_cache(capacity) if prompt_cache else _default_prompt_cache(capacity, keep_logits)
            self._llama.set_cache(cache)
        #: Saved states of long system prompts (None: ``PCM_LLM_STATE_DIR=off``, or a library without the calls).
        self.states: PrefixStates | None = None
        if state_dir is not None:
            try:
                access = (state_access or LlamaStateAccess)(self._llama)
            except StateError as exc:
                log.info("%s: saved prompt states are off: %s", self.name, exc)
            else:
                self.states = PrefixStates(StateStore(Path(state_dir)), access, model=path, context=context)

    def complete(self, request: Request) -> Completion:
        system, max_tokens, schema = request.system, request.max_tokens, request.schema
        chat = [{"role": "system", "content": system}] if system else []
        chat += [{"role": m.role, "content": m.content} for m in request.messages]
        kwargs: dict[str, Any] = {"messages": chat, "max_tokens": max_tokens, "temperature": 0.0, "seed": 0}
        if schema is not None:
            kwargs.update(self._constraint(schema, max_tokens))
        with self._lock, waiting(self.name, write=self._progress, after=self._progress_after, streaming=False):
            if self.states is not None:
                self.states.before(system)
            # read by the fast grammar path (grammar_first.GrammarFirstLlama), per call
            self._llama.end_at_repeated_line = schema is not None and schema.line_set
            try:
                reply = self._llama.create_chat_completion(**kwargs)
            except ValueError as exc:  # e.g. the prompt exceeds the context window
                raise LLMError(f"{self.name}: {one_line(exc)} (context size {self.context}: PCM_LLM_CONTEXT)") from exc
            completion = _completion(reply, self.model)
            if self.states is not None:
                self.states.after(system, completion.input_tokens)
        self.usage.record(request.operation, completion)
        return completion

    def _constraint(self, schema: JsonSchema, max_tokens: int) -> dict[str, Any]:
        """The arguments that hold decoding to ``schema``: its bounded GBNF grammar when it has one (every answer
        then fits in ``max_tokens``), else the grammar converted from the JSON Schema (built once), else plain JSON
        after a warning."""
        if schema.grammar is not None:
            if self._build_gbnf is None:
                self._build_gbnf = _default_gbnf()
            text = schema.grammar(max_tokens)
            build = self._build_gbnf
            return {"grammar": self._cached(text, lambda: build(text))}
        if self._build_grammar is None:
            self._build_grammar = _default_grammar()
        # the schema's own key order, never sorted: llama.cpp's converter writes properties in that order, and a
        # model asked for a triple pattern as "o", "p", "s" (sorted) wrote its patterns back to front
        key, convert = json.dumps(schema.schema), self._build_grammar
        grammar = self._cached(key, lambda: self._from_schema(convert, schema, key))
        return {"grammar": grammar} if grammar is not None else {"response_format": {"type": "json_object"}}

    def _from_schema(self, convert: GrammarBuilder, schema: JsonSchema, key: str) -> Any:
        try:
            return convert(key)
        except (AssertionError, ValueError, RuntimeError) as exc:  # the converter's ways of saying no
            log.warning("%s: the JSON Schema %r does not convert to a grammar (%s); the model writes plain "
                        "JSON instead", self.name, schema.name, one_line(exc))
            return None

    def _cached(self, key: str, build: Callable[[], Any]) -> Any:
        """The grammar built for ``key``, built once while it stays among the :data:`GRAMMARS_KEPT` last used.

        Bounded because a schema may be made per call (the extraction schema names the entities its prompt
        offers), and each grammar of the bounded extraction answer is about a megabyte of text.
        """
        if key in self._grammars:
            self._grammars.move_to_end(key)
            return self._grammars[key]
        grammar = self._grammars[key] = build()
        while len(self._grammars) > GRAMMARS_KEPT:
            self._grammars.popitem(last=False)
        return grammar

    def close(self) -> None:
        close = getattr(self._llama, "close", None)
        if close is not None:
            close()


def _completion(reply: Any, model: str) -> Completion:
    choices = reply.get("choices") if isinstance(reply, dict) else None
    if not isinstance(choices, list) or not choices:
        raise LLMError(f"llamacpp:{model}: the model returned no choices")
    message = choices[0].get("message") or {}
    usage = reply.get("usage") or {}
    return Completion(
        text=str(message.get("content") or ""),
        model=model,
        input_tokens=as_int(usage.get("prompt_tokens")),
        output_tokens=as_int(usage.get("completion_tokens")),
        stop_reason=choices[0].get("finish_reason"),
    )

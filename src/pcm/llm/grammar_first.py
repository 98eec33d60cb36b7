"""Greedy decoding under a grammar that checks the grammar on the greedy token first.

Why: llama-cpp-python chains its samplers as penalties -> grammar -> greedy, so at every step the grammar is
matched against every token of the vocabulary (about 151k for Qwen) before the best one is taken; on two cores that
halves decoding speed. llama.cpp's own sampler does it the other way round, and so does this module: take the best
token without the grammar, ask the grammar about that one token, and match the whole vocabulary only when it is
refused. With greedy decoding the answer is the same token either way: when the best token is grammatical it is
also the best grammatical token (ties go to the lowest index on both paths), and when it is not, the whole-
vocabulary path is exactly the old one.

This reaches into llama-cpp-python's internals (``Llama._init_sampler``, ``_internals.LlamaSampler``, the
``llama_sampler_*`` bindings), written against 0.3.36. :func:`check_support` verifies at load that what it uses is
there and names the installed version when it is not; ``PCM_LLM_FAST_GRAMMAR=0`` turns the fast path off.
"""

from __future__ import annotations

import ctypes
import inspect
from collections.abc import Callable
from typing import Any, Protocol

import llama_cpp
import numpy as np
from llama_cpp import _internals

from pcm.errors import LLMError

#: One ``llama_token_data`` (token id, logit, probability) as numpy reads it from llama.cpp's candidate array.
TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])

#: The bindings and the sampler-building pieces this module relies on.
BINDINGS = (
    "llama_sampler_init_grammar", "llama_sampler_apply", "llama_sampler_accept", "llama_sampler_reset",
    "llama_sampler_free", "llama_sampler_chain_add", "llama_sampler_chain_n", "llama_sampler_i", "llama_sampler",
    "llama_sampler_i_apply", "llama_sampler_i_accept", "llama_sampler_i_reset", "llama_sampler_i_name",
    "llama_token_data", "llama_token_data_array",
)
SAMPLER_METHODS = ("add_penalties", "add_greedy", "close")
CHAIN_ATTRIBUTES = ("sampler", "custom_samplers", "_exit_stack")
INIT_SAMPLER_PARAMETERS = ("temp", "repeat_penalty", "frequency_penalty", "presence_penalty", "logits_processor",
                           "grammar")


class Grammar(Protocol):
    """A grammar sampler as the fast path uses it (the real one is :class:`LlamaGrammarSampler`)."""

    def apply(self, candidates: Any) -> None: ...
    def accept(self, token: int) -> None: ...
    def reset(self) -> None: ...


def check_support() -> None:
    """Raise one clear line when the installed llama-cpp-python lacks what the fast path uses."""
    missing = [name for name in BINDINGS if not hasattr(llama_cpp, name)]
    missing += [f"LlamaSampler.{name}" for name in SAMPLER_METHODS if not hasattr(_internals.LlamaSampler, name)]
    init = getattr(llama_cpp.Llama, "_init_sampler", None)
    if init is None:
        missing.append("Llama._init_sampler")
    else:
        parameters = inspect.signature(init).parameters
        missing += [f"Llama._init_sampler({name}=)" for name in INIT_SAMPLER_PARAMETERS if name not in parameters]
    if not missing and ctypes.sizeof(llama_cpp.llama_token_data) != TOKEN_DATA.itemsize:
        missing.append("a 12-byte llama_token_data")
    if not missing:
        chain = _internals.LlamaSampler()
        missing += [f"LlamaSampler().{name}" for name in CHAIN_ATTRIBUTES if not hasattr(chain, name)]
        chain.close()
    if missing:
        raise LLMError(
            f"llama-cpp-python {getattr(llama_cpp, '__version__', '?')} lacks {', '.join(missing)} (the fast "
            "grammar path was written for 0.3.36): set PCM_LLM_FAST_GRAMMAR=0"
        )


def candidates_view(candidates: Any) -> np.ndarray:
    """The candidate array behind a ``llama_token_data_array *`` as a numpy record array (no copy)."""
    array = candidates.contents
    if array.size == 0:
        return np.empty(0, dtype=TOKEN_DATA)
    buffer = (ctypes.c_char * (array.size * TOKEN_DATA.itemsize)).from_address(ctypes.addressof(array.data.contents))
    return np.frombuffer(buffer, dtype=TOKEN_DATA)


class RepeatedLines:
    """Watches the answer's lines for the first one written a second time.

    Why: a greedy decoder that writes a whole line it already wrote has the same context pattern before it again,
    and Qwen2.5-Coder-1.5B then writes the same block of lines to the grammar's budget (427 tokens for a ~110-token
    answer). For an answer that is a set of lines (:mod:`pcm.extraction.compact`), a repeated line adds nothing,
    so the answer may end there.
    """

    def __init__(self, piece: Callable[[int], bytes]) -> None:
        self._piece = piece
        self._line = b""
        self._seen: set[bytes] = set()
        #: True once a non-blank line has been completed a second time.
        self.repeated = False

    def accept(self, token: int) -> None:
        *done, self._line = (self._line + self._piece(token)).split(b"\n")
        for line in done:
            if line.strip():
                self.repeated = self.repeated or line in self._seen
                self._seen.add(line)

    def reset(self) -> None:
        self._line, self._seen, self.repeated = b"", set(), False


class GrammarFirst:
    """The sampler step that stands where the grammar stood in the chain (after the penalties, before greedy).

    ``apply`` leaves either the one greedy token (when the grammar takes it) or the whole array with the grammar
    applied; greedy then picks the same token full grammar sampling would. ``accept`` advances the grammar with
    the token the chain chose, once per token (the chain calls it; the grammar sampler itself is not in the chain).

    With ``lines`` and ``end`` (the end-of-answer token), the answer ends after its first repeated line wherever
    the grammar lets it end there (:class:`RepeatedLines`).
    """

    def __init__(self, grammar: Grammar, lines: RepeatedLines | None = None, end: int | None = None) -> None:
        self.grammar = grammar
        self.lines = lines
        self.end = end
        #: Steps decided by the one-token check, and steps that needed the whole vocabulary (for benchmarks).
        self.checked = 0
        self.full = 0
        #: Whether the answer was ended at a repeated line.
        self.ended_repeat = False

    def apply(self, candidates: Any) -> None:
        view = candidates_view(candidates)
        if view.size == 0:
            return
        if self.lines is not None and self.end is not None and self.lines.repeated and self._end_here(candidates):
            return
        best = int(np.argmax(view["logit"]))
        logit = float(view["logit"][best])
        if np.isfinite(logit):
            one = llama_cpp.llama_token_data_array(
                data=ctypes.pointer(llama_cpp.llama_token_data(int(view["id"][best]), logit, 0.0)),
                size=1, selected=-1, sorted=False,
            )
            self.grammar.apply(ctypes.pointer(one))
            if one.data[0].logit != float("-inf"):
                self.checked += 1
                array = candidates.contents
                array.data[0] = llama_cpp.llama_token_data(int(view["id"][best]), logit, float(view["p"][best]))
                array.size = 1
                array.selected = 0
                return
        self.full += 1
        self.grammar.apply(candidates)

    def _end_here(self, candidates: Any) -> bool:
        """Leave only the end token when the grammar takes it at this point."""
        assert self.end is not None
        one = llama_cpp.llama_token_data_array(
            data=ctypes.pointer(llama_cpp.llama_token_data(self.end, 0.0, 0.0)), size=1, selected=-1, sorted=False)
        self.grammar.apply(ctypes.pointer(one))
        if one.data[0].logit == float("-inf"):
            return False
        array = candidates.contents
        array.data[0] = llama_cpp.llama_token_data(self.end, 0.0, 1.0)
        array.size = 1
        array.selected = 0
        self.ended_repeat = True
        return True

    def accept(self, token: int) -> None:
        self.grammar.accept(token)
        if self.lines is not None:
            self.lines.accept(token)

    def reset(self) -> None:
        self.grammar.reset()
        if self.lines is not None:
            self.lines.reset()


class LlamaGrammarSampler:
    """llama.cpp's grammar sampler, held outside the chain: this object frees it."""

    def __init__(self, model: Any, grammar: Any) -> None:
        self.pointer = llama_cpp.llama_sampler_init_grammar(
            model.vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8"))
        if not self.pointer:
            raise LLMError("llama.cpp could not build the sampler for this grammar")

    def apply(self, candidates: Any) -> None:
        llama_cpp.llama_sampler_apply(self.pointer, candidates)

    def accept(self, token: int) -> None:
        llama_cpp.llama_sampler_accept(self.pointer, token)

    def reset(self) -> None:
        llama_cpp.llama_sampler_reset(self.pointer)

    def free(self) -> None:
        if self.pointer:
            llama_cpp.llama_sampler_free(self.pointer)
            self.pointer = None


class ChainStep:
    """A Python sampler step as llama.cpp calls it (apply, accept, reset), like llama-cpp-python's
    ``CustomSampler`` but with ``accept`` and ``reset`` wired (that one leaves them empty)."""

    def __init__(self, step: GrammarFirst) -> None:
        self.step = step
        # The callbacks are kept on the object: llama.cpp holds only their addresses.
        self._apply = llama_cpp.llama_sampler_i_apply(lambda _smpl, candidates: self.apply(candidates))
        self._accept = llama_cpp.llama_sampler_i_accept(lambda _smpl, token: step.accept(token))
        self._reset = llama_cpp.llama_sampler_i_reset(lambda _smpl: step.reset())
        self.iface = llama_cpp.llama_sampler_i()
        self.iface.name = llama_cpp.llama_sampler_i_name(0)
        self.iface.apply = self._apply
        self.iface.accept = self._accept
        self.iface.reset = self._reset
        self.sampler = llama_cpp.llama_sampler()
        self.sampler.iface = ctypes.pointer(self.iface)
        self.sampler.ctx = None

    def apply(self, candidates: Any) -> None:
        """The fast step; should it raise (a bug, or Ctrl-C inside the callback), the grammar is applied to every
        token before the error goes on: ctypes only prints an exception raised in a callback, and greedy would then
        pick a token the grammar refuses, which llama.cpp's grammar aborts the process on when it accepts it."""
        try:
            self.step.apply(candidates)
        except BaseException:
            self.step.grammar.apply(candidates)
            raise

    def add_to(self, chain: Any) -> None:
        """Append to ``chain`` (a ``LlamaSampler``), registered as llama-cpp-python registers its custom samplers:
        taken out of the chain before the chain is freed, since llama.cpp did not allocate it."""
        llama_cpp.llama_sampler_chain_add(chain.sampler, ctypes.pointer(self.sampler))
        chain.custom_samplers.append((llama_cpp.llama_sampler_chain_n(chain.sampler) - 1, self))


def fast_llama_class() -> type[llama_cpp.Llama]:
    """``llama_cpp.Llama`` whose greedy grammar-held sampling checks the greedy token first."""
    check_support()
    return GrammarFirstLlama


class GrammarFirstLlama(llama_cpp.Llama):
    """``llama_cpp.Llama`` with :class:`GrammarFirst` in place of the grammar step when decoding is greedy."""

    #: The last fast-path step built (its counts say how often the one-token check sufficed).
    last_step: GrammarFirst | None = None
    #: End the next answers at their first repeated line (:class:`RepeatedLines`); the client sets it per call.
    end_at_repeated_line = False

    def _init_sampler(self, *args: Any, **kwargs: Any) -> Any:
        bound = inspect.signature(llama_cpp.Llama._init_sampler).bind(self, *args, **kwargs)
        bound.apply_defaults()
        options = bound.arguments
        grammar = options["grammar"]
        if grammar is None or options["temp"] != 0.0 or options["logits_processor"] is not None:
            return super()._init_sampler(*args, **kwargs)
        chain = _internals.LlamaSampler()
        chain.add_penalties(
            n_vocab=self._n_vocab,
            penalty_last_n=self.last_n_tokens_size,
            penalty_repeat=options["repeat_penalty"],
            penalty_freq=options["frequency_penalty"],
            penalty_present=options["presence_penalty"],
        )
        held = LlamaGrammarSampler(self._model, grammar)
        if self.end_at_repeated_line:
            lines = RepeatedLines(lambda token: self.detokenize([token]))
            step = GrammarFirst(held, lines, self.token_eos())
        else:
            step = GrammarFirst(held)
        ChainStep(step).add_to(chain)
        chain._exit_stack.callback(held.free)
        chain.add_greedy()
        self.last_step = step
        return chain


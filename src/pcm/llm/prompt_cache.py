"""The in-process model's prompt-state cache, bounded by the memory its states really hold.

Why not llama-cpp-python's ``LlamaRAMCache`` as it is (0.3.36): it counts a state by ``llama_state_size`` (the KV
cells) alone, while every ``Llama.save_state()`` also copies the logits array, ``min(n_tokens, n_batch) x vocabulary``
floats: 311 MB a state for Qwen's 151,936 tokens at the default batch of 512. None of that is counted, so a
cache of "2 GB" held about 2 GB of KV cells plus 311 MB for each of its dozens of states, and a process answering
questions grew ~0.4 GB a question until the OOM killer stopped it.

Greedy decoding without ``logits_all`` never reads those logits (sampling runs in llama.cpp's sampler; llama-cpp-
python keeps them only for ``logprobs``), so a state is kept here with one zero row in their place, which
``Llama.load_state`` broadcasts back; with ``logits_all`` (the prompt-lookup draft reads them) the logits are kept
and counted. Either way the capacity bounds everything a state holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from llama_cpp import LlamaRAMCache
from llama_cpp.llama import LlamaState


def state_bytes(state: LlamaState) -> int:
    """What a kept state occupies: its KV cells, its logits and its tokens."""
    return int(state.llama_state_size) + int(state.scores.nbytes) + int(state.input_ids.nbytes)


class PromptStateCache(LlamaRAMCache):
    """``LlamaRAMCache`` whose capacity counts every byte a kept state holds, and which drops the logits the
    model never reads (``keep_logits=False``)."""

    def __init__(self, capacity_bytes: int, *, keep_logits: bool) -> None:
        super().__init__(capacity_bytes)
        self.keep_logits = keep_logits
        self._size = 0

    @property
    def cache_size(self) -> int:
        return self._size

    def __setitem__(self, key: Sequence[int], value: LlamaState) -> None:
        if not self.keep_logits:
            row = np.zeros((1, value.scores.shape[-1]), dtype=np.single)
            value = LlamaState(input_ids=value.input_ids, scores=row, n_tokens=value.n_tokens,
                               llama_state=value.llama_state, llama_state_size=value.llama_state_size,
                               seed=value.seed)
        kept = tuple(key)
        old = self.cache_state.pop(kept, None)
        if old is not None:
            self._size -= state_bytes(old)
        self.cache_state[kept] = value
        self._size += state_bytes(value)
        while self._size > self.capacity_bytes and self.cache_state:
            _, dropped = self.cache_state.popitem(last=False)
            self._size -= state_bytes(dropped)


def prompt_state_cache(capacity_bytes: int, *, keep_logits: bool) -> Any:
    """The cache :class:`pcm.llm.llamacpp_client.LlamaCppClient` gives the model (``PCM_LLM_PROMPT_CACHE_MB``)."""
    return PromptStateCache(capacity_bytes, keep_logits=keep_logits)

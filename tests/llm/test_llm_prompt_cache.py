"""The prompt-state cache counts every byte a kept state holds, and drops the logits greedy decoding never reads.

The states are llama-cpp-python's own ``LlamaState`` records, shaped as ``Llama.save_state()`` makes them (a logits
array of ``min(n_tokens, n_batch) x vocabulary`` floats); a real model is used only where ``PCM_TEST_GGUF`` names a
GGUF file.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'pcm[local]')")

from llama_cpp.llama import LlamaState  # noqa: E402

from pcm.llm import Message  # noqa: E402
from pcm.llm.base import Request  # noqa: E402
from pcm.llm.llamacpp_client import LlamaCppClient  # noqa: E402
from pcm.llm.prompt_cache import PromptStateCache, state_bytes  # noqa: E402

VOCABULARY = 1000
BATCH = 64


def saved(tokens: list[int], kv_bytes: int = 10_000) -> LlamaState:
    """A state as ``save_state`` makes it: the KV bytes, the logits rows, the context's token array."""
    ids = np.zeros(256, dtype=np.intc)
    ids[: len(tokens)] = tokens
    scores = np.ones((min(len(tokens), BATCH), VOCABULARY), dtype=np.single)
    return LlamaState(input_ids=ids, scores=scores, n_tokens=len(tokens), llama_state=b"\x01" * kv_bytes,
                      llama_state_size=kv_bytes, seed=0)


def test_a_state_kept_without_logits_holds_one_zero_row_and_is_counted_whole() -> None:
    cache = PromptStateCache(10 << 20, keep_logits=False)
    cache[list(range(100))] = saved(list(range(100)))
    kept = cache[list(range(100))]
    assert kept.scores.shape == (1, VOCABULARY) and not kept.scores.any()
    assert kept.n_tokens == 100 and kept.llama_state_size == 10_000 and list(kept.input_ids[:3]) == [0, 1, 2]
    assert cache.cache_size == state_bytes(kept) == 10_000 + VOCABULARY * 4 + 256 * 4


def test_the_logits_are_counted_against_the_capacity() -> None:
    """llama-cpp-python's own cache counted only the KV bytes: these three states fit its count and not memory."""
    one = state_bytes(saved(list(range(100))))
    assert one > 10_000 + BATCH * VOCABULARY * 4 - 1
    cache = PromptStateCache(2 * one + one // 2, keep_logits=True)
    for start in range(3):
        tokens = list(range(start * 100, start * 100 + 100))
        cache[tokens] = saved(tokens)
    assert len(cache.cache_state) == 2 and cache.cache_size == 2 * one
    with pytest.raises(KeyError):
        cache[list(range(0, 100))]  # the least recently used went first
    assert cache[list(range(200, 300))].scores.shape == (BATCH, VOCABULARY)


def test_a_state_stored_again_under_its_key_is_counted_once() -> None:
    cache = PromptStateCache(10 << 20, keep_logits=False)
    for _ in range(3):
        cache[[1, 2, 3]] = saved([1, 2, 3])
    assert len(cache.cache_state) == 1 and cache.cache_size == state_bytes(cache[[1, 2, 3]])


def test_the_longest_shared_beginning_is_found() -> None:
    cache = PromptStateCache(10 << 20, keep_logits=False)
    cache[[1, 2, 3, 4]] = saved([1, 2, 3, 4])
    cache[[1, 2, 9]] = saved([1, 2, 9])
    assert cache[[1, 2, 3, 4, 5, 6]].n_tokens == 4


GGUF = os.environ.get("PCM_TEST_GGUF", "")


@pytest.mark.model
@pytest.mark.skipif(not GGUF or not Path(GGUF).is_file(), reason="PCM_TEST_GGUF does not name a GGUF model file")
def test_a_prompt_resumed_from_a_kept_state_gets_the_same_answer() -> None:
    system = "You answer in one word. " + " ".join(f"Rule {n}: be brief." for n in range(60))
    cached = LlamaCppClient(model_path=GGUF, threads=os.cpu_count() or 2, context=2048, prompt_cache_mb=512)
    fresh = LlamaCppClient(model_path=GGUF, threads=os.cpu_count() or 2, context=2048, prompt_cache_mb=0)
    questions = ["What colour is the sky?", "What do cows drink?", "What colour is the sky?"]
    answers = [cached.complete(Request(system, [Message("user", q)], "t", max_tokens=8)).text for q in questions]
    expected = [fresh.complete(Request(system, [Message("user", q)], "t", max_tokens=8)).text for q in questions]
    assert answers == expected
    cache = cached._llama.cache
    assert isinstance(cache, PromptStateCache) and cache.cache_state
    assert all(state.scores.shape[0] == 1 for state in cache.cache_state.values())

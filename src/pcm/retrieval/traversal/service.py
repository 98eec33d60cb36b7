"""Traversal for an open memory (:class:`~pcm.context.MemoryContext`): one engine per memory, start vertices from the side index.

This is what ``pcm retrieve`` and ``ask``'s fallback call::

    result = retrieve(memory, "Which shop fixed my car?")            # starts matched in the side index
    result = retrieve(memory, question, start=[iri, ...], algorithm="wc+bs")
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from pcm.retrieval.traversal.config import TraversalConfig
from pcm.retrieval.traversal.engine import TraversalEngine
from pcm.retrieval.traversal.model import Kind, Result
from pcm.retrieval.traversal.starts import StartMatch, find_starts

if TYPE_CHECKING:
    from pcm.context import MemoryContext

DEFAULT_ALGORITHM = "wc"


def engine_for(memory: MemoryContext) -> TraversalEngine:
    """The memory's engine, made on first use and kept on its context until the memory closes (its caches stay
    warm; closing saves its vectors)."""
    with memory.lock:
        engine = memory.engine
        if not isinstance(engine, TraversalEngine) or engine.graph.backend is not memory.backend:
            engine = TraversalEngine.for_memory(memory)
            memory.engine = engine
        return engine


def configured_algorithm(memory: MemoryContext) -> str:
    """The algorithm the ask config names (``PCM_TRAVERSAL``), else WaterCircles."""
    return memory.settings.ask.traversal or DEFAULT_ALGORITHM


def retrieve(
    memory: MemoryContext,
    question: str,
    *,
    start: Sequence[str] | None = None,
    algorithm: str | None = None,
    forbid: Iterable[Kind] | None = None,
    top_n: int | None = -1,
    sources: bool = True,
) -> Result:
    """Triples that answer ``question``, walked from ``start`` (or from the entities the question mentions).

    ``top_n`` -1 keeps the configured triples filter, None keeps everything found.
    """
    engine = engine_for(memory)
    matches: list[StartMatch] = []
    if start is None:
        matches = find_starts(memory.index, question)
        start = [m.iri for m in matches]
    config = engine.config if top_n == -1 else replace(engine.config, top_n=top_n)
    result = engine.retrieve(
        question, list(start), algorithm or configured_algorithm(memory), config=config, forbid=forbid, sources=sources
    )
    result.matches = matches
    engine.close()  # keep what was embedded for the next process
    return result


__all__ = ["DEFAULT_ALGORITHM", "TraversalConfig", "configured_algorithm", "engine_for", "retrieve"]

"""What a pipeline is given instead of the facade: one open memory's parts and the caches that belong to it.

The :class:`~pcm.memory.Memory` facade builds one :class:`MemoryContext` when it opens a memory, passes it to the
pipelines (extraction, retrieval, summaries, ontology tools) and closes it when the memory closes. A pipeline reads
``memory.store``, ``memory.naming``, ``memory.settings``, ``memory.index`` and the rest from here and never imports
the facade, so a question's path runs one way (facade → pipeline → services → storage). Everything cached for one
memory (the query worker, the traversal engine, the LLM replies, usage counts, text vectors) lives on its context,
never in a module-level registry, so two memories in one process share nothing and :meth:`close` releases all of it
(docs/DESIGN.md §8).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pcm.backend import Backend
from pcm.errors import MemoryClosedError
from pcm.manifest import Manifest
from pcm.naming import Naming
from pcm.settings import Settings
from pcm.store import MemoryStore

if TYPE_CHECKING:
    from pcm.index import RecallHit, SideIndex
    from pcm.ontology import Ontology
    from pcm.query_safety import QueryRunner

#: Under the memory directory: the caches a purge empties (LLM replies, usage counts; docs/DESIGN.md §1).
CACHE_DIR = Path("cache") / "ask"
#: Under the memory directory: the traversal engine's cache of embedded triples (a purge empties it too).
VECTORS_DIR = ("index", "traversal")


class Engine(Protocol):
    """A per-memory engine kept warm between calls (the traversal engine): saved on close, dropped on purge."""

    def close(self) -> None: ...

    def discard(self) -> None: ...


@dataclass(eq=False)
class MemoryContext:
    """One open memory as the pipelines see it. Built and owned by the facade; see the module docstring."""

    settings: Settings
    manifest: Manifest
    naming: Naming
    backend: Backend
    store: MemoryStore
    read_only: bool
    open_index: Callable[[], SideIndex]
    """The facade's side index, opened on first use and brought up to date with the store (the outbox replay)."""

    runner: QueryRunner | None = None
    """The query worker for queries a person or a model wrote (:meth:`query_runner`)."""
    engine: Engine | None = None
    """The traversal engine (:func:`pcm.retrieval.traversal.engine_for`)."""
    llm_replies: dict[str, str] = field(default_factory=dict)
    """LLM replies by key (:class:`pcm.retrieval.ask.CachingClient`), beside the disk copy under CACHE_DIR."""
    versions: dict[str, tuple[float, str]] = field(default_factory=dict)
    """The memory version by store fingerprint (:func:`pcm.retrieval.grounding.memory_version`)."""
    usage: dict[str, Any] = field(default_factory=dict)
    """Classes and properties in use by memory version (:func:`pcm.retrieval.grounding.usage_stats`)."""
    text_vectors: dict[str, Any] = field(default_factory=dict)
    """Sentence vectors by text (:func:`pcm.summaries.store.cached_vectors`)."""
    closed: bool = False
    """Set by :meth:`close`: the query worker is not started again for a closed memory."""
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    """Guards the slots above: the endpoint serves one memory from several threads."""

    @property
    def index(self) -> SideIndex:
        return self.open_index()

    @property
    def ontology(self) -> Ontology:
        from pcm.ontology import load_ontology  # rdflib: paid only by the pipelines that read the ontology

        return load_ontology()

    def recall(self, text: str, k: int = 10, **filters: Any) -> list[RecallHit]:
        """Utterances nearest to ``text`` in the side index (the facade checks text a person typed first)."""
        return self.index.recall(text, k, **filters)

    def query_runner(self) -> QueryRunner:
        """The memory's query runner (at most one worker process), made on first use and kept until close:
        ``ask``'s generated queries and a person's own ``sparql`` share it."""
        from pcm.query_safety import (
            QueryRunner,  # the worker machinery, for the commands that run such queries
        )

        with self.lock:
            if self.closed:
                raise MemoryClosedError(f"the memory {self.settings.memory} is closed; open it again")
            runner = self.runner
            if runner is None or runner.backend is not self.backend:
                settings = self.settings
                runner = QueryRunner(
                    self.backend, timeout=settings.query_timeout, limit=settings.query_limit,
                    memory_mb=settings.query_memory_mb,
                )
                self.runner = runner
            return runner

    def stop_runner(self) -> None:
        """Stop the query worker (it reads the store's files: a purge stops it before replacing them)."""
        with self.lock:
            runner, self.runner = self.runner, None
        if runner is not None:
            runner.close()

    def drop_caches(self) -> None:
        """Forget everything cached from the memory's content, unsaved (a purge: forgotten facts must not return)."""
        with self.lock:
            engine, self.engine = self.engine, None
            for cache in (self.llm_replies, self.versions, self.usage, self.text_vectors):
                cache.clear()
        if engine is not None:
            engine.discard()

    def close(self) -> None:
        """Release every per-memory resource: stop the query worker, save the engine's vectors, empty the caches.
        A second call finds nothing left to release."""
        with self.lock:
            self.closed = True
        self.stop_runner()
        with self.lock:
            engine, self.engine = self.engine, None
            for cache in (self.llm_replies, self.versions, self.usage, self.text_vectors):
                cache.clear()
        if engine is not None:
            engine.close()

    def holds_state(self) -> bool:
        """Whether anything per-memory is still held (false after :meth:`close`)."""
        return bool(self.runner or self.engine or self.llm_replies or self.versions or self.usage or self.text_vectors)


__all__ = ["CACHE_DIR", "VECTORS_DIR", "Engine", "MemoryContext"]

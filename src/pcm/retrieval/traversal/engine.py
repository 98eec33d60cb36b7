"""``retrieve``: run one algorithm or a mixture from the start vertices, merge, filter, and say where each triple
came from.

One :class:`TraversalEngine` per open memory keeps what walks learn from question to question: vertex kinds and
names, and the vectors of verbalised triples (also kept on disk, see :mod:`.vectors`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyoxigraph as ox

from pcm.backend import Backend
from pcm.context import VECTORS_DIR
from pcm.errors import UsageError
from pcm.naming import check_iri
from pcm.retrieval.traversal.astar import a_star
from pcm.retrieval.traversal.beamsearch import beam_search
from pcm.retrieval.traversal.config import TraversalConfig, parse_algorithm
from pcm.retrieval.traversal.graph import GraphView
from pcm.retrieval.traversal.model import Found, Kind, Node, Result, Stats, Triple
from pcm.retrieval.traversal.model import Path as WalkPath
from pcm.retrieval.traversal.vectors import TextEmbedder, TextVectors
from pcm.retrieval.traversal.verbalise import Verbaliser
from pcm.retrieval.traversal.watercircles import water_circles

if TYPE_CHECKING:
    from pcm.context import MemoryContext


class TraversalEngine:
    """Traversal retrieval over one store (embedded or remote)."""

    def __init__(
        self,
        backend: Backend,
        *,
        post_prefix: str,
        hubs: Iterable[str] = (),
        embedder: TextEmbedder | None = None,
        vectors_dir: Path | None = None,
        vectors_read_only: bool = False,
        timeout: float | None = None,
        config: TraversalConfig | None = None,
    ) -> None:
        self.graph = GraphView(backend, post_prefix=post_prefix, hubs=hubs, timeout=timeout)
        self.verbaliser = Verbaliser(self.graph)
        self.config = config or TraversalConfig()
        self._embedder = embedder
        self._vectors_dir = vectors_dir
        self._vectors_read_only = vectors_read_only
        self._vectors: TextVectors | None = None

    @classmethod
    def for_memory(
        cls, memory: MemoryContext, *, embedder: TextEmbedder | None = None, config: TraversalConfig | None = None
    ) -> TraversalEngine:
        """An engine on the memory's store; its vector cache sits in the memory's index directory (read, not
        written, when the memory is open read-only)."""
        return cls(
            memory.backend,
            post_prefix=memory.naming.post(""),
            hubs=(memory.naming.owner, memory.naming.assistant),
            embedder=embedder,
            vectors_dir=memory.settings.memory.joinpath(*VECTORS_DIR),
            vectors_read_only=memory.read_only,
            timeout=memory.settings.query_timeout,
            config=config,
        )

    @property
    def vectors(self) -> TextVectors:
        if self._vectors is None:
            embedder = self._embedder
            if embedder is None:
                from pcm.index import get_embedder

                embedder = get_embedder()
            self._vectors = TextVectors(embedder, self._vectors_dir, read_only=self._vectors_read_only)
        return self._vectors

    def discard(self) -> None:
        """Drop the vectors embedded during this session unsaved (a purge emptied their cache: triples of
        forgotten facts must not be written back by :meth:`close`)."""
        self._vectors = None

    def close(self) -> None:
        """Keep the vectors embedded during this session for the next one."""
        if self._vectors is not None:
            self._vectors.flush()

    def __enter__(self) -> TraversalEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the one entry point ----------------------------------------------------------------------------------------
    def retrieve(
        self,
        question: str,
        starts: Sequence[str | Node],
        algorithm: str = "wc",
        *,
        config: TraversalConfig | None = None,
        forbid: Iterable[Kind] | None = None,
        sources: bool = True,
    ) -> Result:
        """Walk from ``starts`` with ``algorithm`` (``wc``, ``bs``, ``astar``, ``a+b`` mixtures or ``all``).

        ``stats.ms`` is the wall time of everything but embedding the question (which a caller that matched the
        start vertices has usually done already).
        """
        algorithms = parse_algorithm(algorithm)
        cfg = config or self.config
        if forbid is not None:
            cfg = cfg.with_forbidden(frozenset(forbid))
        start_nodes = [_vertex(s) for s in dict.fromkeys(starts)]
        result = Result(question, "+".join(algorithms), start_nodes, [])
        if not start_nodes:
            result.notes.append("no start vertices: nothing in the graph matched the question's entities")
            return result
        question_vector = None
        if "bs" in algorithms or cfg.top_n is not None:
            question_vector = self.vectors.query(question)
        before = replace(self.graph.stats)
        embedded_before = self.vectors.embedded if self._vectors is not None else 0
        started = time.perf_counter()
        self.graph.restrict(episodic_edges=Kind.EPISODIC not in cfg.restrictions.forbid)
        self.graph.begin()
        merged: dict[Triple, Found] = {}
        for name in algorithms:
            found, paths, notes = self._run(name, question_vector, start_nodes, cfg)
            result.paths += paths
            result.notes += notes
            for item in found:
                if item.triple in merged:
                    merged[item.triple].algorithms |= item.algorithms
                else:
                    merged[item.triple] = item
        result.found = self._filter(list(merged.values()), question_vector, cfg.top_n)
        if sources and result.found:
            attached = self.graph.sources([f.triple for f in result.found])
            for item in result.found:
                item.sources = attached.get(item.triple, [])
        result.stats = _delta(before, self.graph.stats, time.perf_counter() - started)
        result.stats.embedded = (self._vectors.embedded if self._vectors is not None else 0) - embedded_before
        return result

    def text_of(self, triple: Triple) -> str:
        return self.verbaliser.text(triple)

    # -- internals ----------------------------------------------------------------------------------------------------
    def _run(
        self, name: str, question: np.ndarray | None, starts: list[Node], cfg: TraversalConfig
    ) -> tuple[list[Found], list[WalkPath], list[str]]:
        if name == "wc":
            return water_circles(self.graph, starts, cfg.wc, cfg.restrictions)
        if name == "bs":
            assert question is not None
            return beam_search(self.graph, self.verbaliser, self.vectors, question, starts, cfg.bs, cfg.restrictions)
        return a_star(self.graph, self.vectors, starts, cfg.astar, cfg.restrictions)

    def _filter(self, found: list[Found], question: np.ndarray | None, top_n: int | None) -> list[Found]:
        """The triples filter: rank by similarity to the question, keep the best ``top_n`` (all when None)."""
        if not found:
            return found
        texts = self.verbaliser.texts([f.triple for f in found])
        for item, text in zip(found, texts, strict=True):
            item.text = text
        if question is None or top_n is None:
            return found
        similarity = self.vectors.get(texts) @ question
        for item, value in zip(found, similarity.tolist(), strict=True):
            item.similarity = float(value)
        ranked = sorted(range(len(found)), key=lambda i: (-similarity[i], i))
        return [found[i] for i in ranked[:top_n]]


def _vertex(iri: str | Node) -> Node:
    if isinstance(iri, ox.NamedNode):
        return iri
    try:
        return ox.NamedNode(check_iri(iri))
    except ValueError as exc:
        raise UsageError(f"start vertex {iri!r} is not a usable IRI") from exc


def _delta(before: Stats, after: Stats, seconds: float) -> Stats:
    return Stats(
        queries=after.queries - before.queries,
        rows=after.rows - before.rows,
        passed=after.passed - before.passed,
        ms=seconds * 1000,
    )

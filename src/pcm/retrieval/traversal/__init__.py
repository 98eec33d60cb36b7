"""Traversal retrieval (issue 6): from the vertices matched to a question's entities, walk the graph and collect
the triples that answer it, after PersonalAI (arXiv 2506.17001, §III-D and Appendix E).

Algorithms: WaterCircles (``wc``), BeamSearch (``bs``), A* (``astar``) and their mixtures (``wc+bs``, ``all``,
...). Every hop is a SPARQL query, so the same code walks the embedded store and any SPARQL 1.1 server::

    with TraversalEngine.for_memory(memory) as engine:
        result = engine.retrieve("Which shop fixed my car?", starts, "wc+bs", forbid={Kind.EPISODIC})

For an open memory, :func:`retrieve` does it all (start vertices from the side index's entity matching)::

    result = retrieve(memory, "Which shop fixed my car?", algorithm="wc+bs")
"""

from __future__ import annotations

from pcm.retrieval.traversal.config import (
    AStarConfig,
    BeamSearchConfig,
    Restrictions,
    TraversalConfig,
    WaterCirclesConfig,
    parse_algorithm,
)
from pcm.retrieval.traversal.engine import TraversalEngine
from pcm.retrieval.traversal.model import Found, Kind, Path, Result, Source, Stats, Step, Triple
from pcm.retrieval.traversal.service import configured_algorithm, engine_for, retrieve
from pcm.retrieval.traversal.starts import StartMatch, find_starts, mentions

__all__ = [
    "AStarConfig",
    "BeamSearchConfig",
    "Found",
    "Kind",
    "Path",
    "Restrictions",
    "Result",
    "Source",
    "StartMatch",
    "Stats",
    "Step",
    "TraversalConfig",
    "TraversalEngine",
    "Triple",
    "WaterCirclesConfig",
    "configured_algorithm",
    "engine_for",
    "find_starts",
    "mentions",
    "parse_algorithm",
    "retrieve",
]

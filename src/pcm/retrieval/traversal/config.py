"""Hyperparameters of the traversal algorithms.

Defaults are PersonalAI's (arXiv 2506.17001, Appendix E). The paper itself cannot be fetched here; the values are
checked against the authors' reference implementation, github.com/Dzigen/PersonalAI, under
``src/pipelines/qa/kg_reasoning/weak_reasoner/knowledge_retriever/traversal_methods/``:

* ``WaterCirclesTripletsRetriever.py``, ``WaterCirclesSearchConfig``: ``chain_triplets_num=25``,
  ``other_triplets_num=6``, ``hyper_num=15``, ``episodic_num=15``, ``strict_filter=True`` (one later version,
  commit 0d77d8e, has ``hyper_num=25``; 15 is also what PersonalAI 2.0's Appendix E reports);
* ``BeamSearchTripletsRetriever.py`` (commit 098b08a), ``GraphBeamSearchConfig``: ``max_depth=10``,
  ``max_paths=50``, ``same_path_intersection_by_node``, ``diff_paths_intersection_by_node`` and
  ``diff_paths_intersection_by_rel`` all True, ``mean_alpha=0.75``, ``final_sorting_mode='mixed'`` (an older
  version of that file defaults to ``'finished_first'``, our ``ended_first``); triple cost ``-log(cos)``, path
  score ``cost / hops**mean_alpha``, as in :mod:`.beamsearch`;
* ``AStarTripletsRetriever.py`` (commit 0f3c39f), ``AStarGraphSearchConfig``: ``max_depth=10``,
  ``max_passed_nodes=500``, ``h_metric_name='ip'``.

The follow-up paper (PersonalAI 2.0, arXiv 2605.13481, its Appendix E) runs BeamSearch with ``max_depth=5``,
``max_paths=10`` and the three intersection switches off; those are not the defaults here. Bounds the papers do
not have (WaterCircles' depth and circle width, BeamSearch's fan-out, A*'s expand batch, hubs) are ours: they keep
one question's work bounded on a store where one vertex (the memory's owner) touches almost every fact.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from pcm.errors import UsageError
from pcm.retrieval.traversal.model import Kind

ALGORITHMS = ("wc", "bs", "astar")
FINAL_SORTING = ("ended_first", "continuous_first", "mixed")
HEURISTICS = ("ip", "weighted_short_path", "avg_weighted_short_path")


@dataclass(frozen=True)
class Restrictions:
    """Which vertices a walk may enter (the paper's O/T/E switches) and whether it may go through hubs.

    A forbidden vertex is never entered, except that a start vertex is always walked from. Hubs (the memory's
    owner and the assistant: every "I" statement touches the owner) may be reached, but a walk does not continue
    through them unless ``cross_hubs`` is set or the hub is a start: through the owner, everything is two hops
    from everything, and no path through it says anything.
    """

    forbid: frozenset[Kind] = frozenset()
    cross_hubs: bool = False

    def allows(self, kind: Kind) -> bool:
        return kind not in self.forbid

    @property
    def needs_kinds(self) -> bool:
        """Whether walks must know each vertex's kind (episodic vertices are kept out by dropping their edges)."""
        return bool(self.forbid & {Kind.OBJECT, Kind.THESIS})


@dataclass(frozen=True)
class WaterCirclesConfig:
    max_depth: int = 2
    """Circles grown from every start; circles of radius r meet on paths of up to 2r hops."""
    primary: int = 25
    """N: triples on chains where circles from different starts meet (paper: chain_triplets_num)."""
    secondary: int = 6
    """K: other traversed triples, nearest circle first (paper: other_triplets_num)."""
    thesis_fragments: int = 15
    """Thesis vertices crossed, kept by how many question entities they touch (paper: hyper_num)."""
    episodic_fragments: int = 15
    """Episodic vertices (posts) crossed, ranked the same way (paper: episodic_num)."""
    max_width: int = 64
    """Vertices kept per start per circle (ours: bounds a circle that reaches a popular vertex)."""


@dataclass(frozen=True)
class BeamSearchConfig:
    max_depth: int = 10
    max_paths: int = 50
    revisit_vertices: bool = True
    """A path may come back to a vertex it passed (paper: same_path_intersection_by_node)."""
    share_vertices: bool = True
    """Paths from one start may pass the same vertex (paper: diff_paths_intersection_by_node)."""
    share_edges: bool = True
    """Paths from one start may use the same triple (paper: diff_paths_intersection_by_rel)."""
    mean_alpha: float = 0.75
    """Path score = summed triple cost / hops**mean_alpha (0: sum, 1: mean)."""
    final_sorting: str = "mixed"
    max_fanout: int = 256
    """A tail with more facts than this is scored on a sample of about this many (ours: bounds a tail with
    thousands of facts, such as a person mentioned in every other utterance)."""

    def __post_init__(self) -> None:
        if self.final_sorting not in FINAL_SORTING:
            raise UsageError(f"final_sorting {self.final_sorting!r}: choose one of {', '.join(FINAL_SORTING)}")


@dataclass(frozen=True)
class AStarConfig:
    heuristic: str = "ip"
    max_depth: int = 10
    max_passed_nodes: int = 500
    expand_batch: int = 16
    """Open vertices expanded per SPARQL query (ours; 1 is textbook A*, more saves round trips; within one
    layer of the ip heuristic the path found is as short either way)."""

    def __post_init__(self) -> None:
        if self.heuristic not in HEURISTICS:
            raise UsageError(f"A* heuristic {self.heuristic!r}: choose one of {', '.join(HEURISTICS)}")


@dataclass(frozen=True)
class TraversalConfig:
    """Everything ``retrieve`` needs besides the question and the start vertices."""

    restrictions: Restrictions = field(default_factory=Restrictions)
    wc: WaterCirclesConfig = field(default_factory=WaterCirclesConfig)
    bs: BeamSearchConfig = field(default_factory=BeamSearchConfig)
    astar: AStarConfig = field(default_factory=AStarConfig)
    top_n: int | None = 30
    """Triples filter: keep the N triples most similar to the question (None keeps everything found)."""

    def with_forbidden(self, kinds: frozenset[Kind]) -> TraversalConfig:
        return replace(self, restrictions=replace(self.restrictions, forbid=kinds))


def parse_algorithm(text: str) -> tuple[str, ...]:
    """``wc``, ``bs``, ``astar``, ``wc+bs``, ``bs+astar``, ``astar+wc`` or ``all`` → the algorithms in run order."""
    text = text.strip().lower()
    if text == "all":
        return ALGORITHMS
    parts = tuple(dict.fromkeys(p for p in text.split("+") if p))
    if not parts or any(p not in ALGORITHMS for p in parts):
        raise UsageError(f"algorithm {text!r}: use wc, bs, astar, a mixture such as wc+bs, or all")
    return parts

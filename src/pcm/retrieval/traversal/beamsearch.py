"""BeamSearch (PersonalAI §III-D, Appendix E): from each start vertex, grow up to ``max_paths`` paths of up to
``max_depth`` hops, choosing next triples by how close their verbalisation is to the question.

A triple's cost is ``-log(similarity)`` (similarity = cosine of the question and the verbalised triple, clipped to
(0, 1]); a path's cost is the sum over its triples, and at the end it is ranked by ``cost / hops**mean_alpha``,
so ``mean_alpha`` trades a long path of good triples against a short excellent one. Every round reads the facts of
the tails of all live paths of all starts in one batched query (vertices not met before are counted first, in the
engine, and one with more than ``max_fanout`` facts is read as a bounded sample); the candidates' vectors come
from the text-vector cache (each verbalised triple is embedded once, ever). A path whose candidates are all used
up or forbidden has *ended*; one still growing at ``max_depth`` is *continuous*; ``final_sorting`` says which
kind is preferred.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyoxigraph as ox

from pcm.retrieval.traversal.config import BeamSearchConfig, Restrictions
from pcm.retrieval.traversal.graph import GraphView
from pcm.retrieval.traversal.model import Found, Node, Path, Step, Triple, Value
from pcm.retrieval.traversal.vectors import TextVectors
from pcm.retrieval.traversal.verbalise import Verbaliser

NAME = "bs"
_FLOOR = 1e-4


@dataclass(frozen=True)
class _Beam:
    start: int
    steps: tuple[Step, ...]
    vertices: frozenset[Value]
    cost: float

    @property
    def tail(self) -> Value:
        return self.steps[-1].target if self.steps else next(iter(self.vertices))

    @property
    def previous(self) -> Value | None:
        return self.steps[-1].source if self.steps else None

    def extend(self, step: Step, cost: float) -> _Beam:
        return _Beam(self.start, (*self.steps, step), self.vertices | {step.target}, self.cost + cost)

    def score(self, alpha: float) -> float:
        """Length-normalised cost: lower is better."""
        return self.cost / (len(self.steps) ** alpha) if self.steps else math.inf


def beam_search(
    graph: GraphView,
    verbaliser: Verbaliser,
    vectors: TextVectors,
    question: np.ndarray,
    starts: Sequence[Node],
    config: BeamSearchConfig,
    restrictions: Restrictions,
) -> tuple[list[Found], list[Path], list[str]]:
    starts = list(dict.fromkeys(starts))
    live: list[list[_Beam]] = [[_Beam(i, (), frozenset({s}), 0.0)] for i, s in enumerate(starts)]
    ended: list[list[_Beam]] = [[] for _ in starts]
    capped = 0
    for _ in range(config.max_depth):
        live, stopped = _split_stopped(graph, live, starts, restrictions)
        for i, beams in enumerate(stopped):
            ended[i] += [b for b in beams if b.steps]
        tails = list(dict.fromkeys(b.tail for beams in live for b in beams))
        if not tails:
            break
        graph.stats.passed += len(tails)
        options, capped_now = _options(graph, tails, config, restrictions, starts)
        capped += capped_now
        scored = _costs(verbaliser, vectors, question, options)
        for i, beams in enumerate(live):
            grown, finished = _grow(beams, scored, config)
            ended[i] += finished
            live[i] = grown
    notes = [f"BeamSearch: {capped} vertices had more than {config.max_fanout} facts; a sample was scored"] if capped else []
    found: dict[Triple, Found] = {}
    paths: list[Path] = []
    for i, start in enumerate(starts):
        ended_ids = {id(b) for b in ended[i]}
        for beam in _final(ended[i], live[i], config):
            path = Path(NAME, start, beam.steps, score=math.exp(-beam.score(config.mean_alpha)), ended=id(beam) in ended_ids)
            paths.append(path)
            for step in beam.steps:
                if step.triple not in found:
                    found[step.triple] = Found(step.triple, "path", {NAME}, path, rank=path.score)
    return list(found.values()), paths, notes


def _split_stopped(
    graph: GraphView, live: list[list[_Beam]], starts: list[Node], restrictions: Restrictions
) -> tuple[list[list[_Beam]], list[list[_Beam]]]:
    """Beams whose tail cannot be walked from (a literal, a hub that is not a start) stop here."""
    going: list[list[_Beam]] = []
    stopped: list[list[_Beam]] = []
    for i, beams in enumerate(live):
        ok: list[_Beam] = []
        stop: list[_Beam] = []
        for b in beams:  # one pass: ``b not in ok`` would compare whole beams, quadratically
            (ok if _walkable_tail(graph, b, starts[i], restrictions) else stop).append(b)
        going.append(ok)
        stopped.append(stop)
    return going, stopped


def _walkable_tail(graph: GraphView, beam: _Beam, start: Node, restrictions: Restrictions) -> bool:
    tail = beam.tail
    if not isinstance(tail, ox.NamedNode):
        return False
    return tail == start or restrictions.cross_hubs or not graph.is_hub(tail)


def _options(
    graph: GraphView, tails: list[Value], config: BeamSearchConfig, restrictions: Restrictions, starts: list[Node]
) -> tuple[dict[Value, list[Step]], int]:
    """Allowed candidate steps per tail (forbidden kinds dropped). A tail touching more than ``max_fanout``
    triples is read as a sample of about that many (see :meth:`GraphView.edges`)."""
    start_set = set(starts)
    wanted = [t for t in tails if isinstance(t, ox.NamedNode)]
    steps = graph.edges(wanted, cap=config.max_fanout)
    capped = sum(graph.degree(t) > config.max_fanout for t in wanted)
    if restrictions.needs_kinds:
        kinds = graph.kinds(s.target for s in steps if isinstance(s.target, ox.NamedNode))
        steps = [
            s for s in steps
            if not isinstance(s.target, ox.NamedNode) or s.target in start_set or restrictions.allows(kinds[s.target])
        ]
    by_tail: dict[Value, list[Step]] = {}
    for step in steps:
        by_tail.setdefault(step.source, []).append(step)
    return by_tail, capped


Scored = list[tuple[float, Step]]


def _costs(
    verbaliser: Verbaliser, vectors: TextVectors, question: np.ndarray, options: dict[Value, list[Step]]
) -> dict[Value, Scored]:
    """Each tail's options with their cost, cheapest first (ties keep the order the store returned them in,
    which is fixed for a given store)."""
    flat = [step for steps in options.values() for step in steps]
    if not flat:
        return {}
    similarity = vectors.get(verbaliser.texts([s.triple for s in flat])) @ question
    cost = -np.log(np.clip(similarity, _FLOOR, 1.0))
    scored: dict[Value, Scored] = {}
    at = 0
    for tail, steps in options.items():
        block = cost[at : at + len(steps)]
        order = np.argsort(block, kind="stable")
        scored[tail] = [(float(block[k]), steps[k]) for k in order]
        at += len(steps)
    return scored


def _grow(beams: list[_Beam], options: dict[Value, Scored], config: BeamSearchConfig) -> tuple[list[_Beam], list[_Beam]]:
    """Extend the beams of one start by their allowed steps; keep the ``max_paths`` cheapest extensions.

    Options come cheapest first, so a beam's scan stops at the first step that could not make the cut.
    """
    vertex_use: Counter[Value] = Counter(v for b in beams for v in {s.target for s in b.steps})
    triple_use: Counter[Triple] = Counter(s.triple for b in beams for s in b.steps)
    best: list[tuple[float, int, int, float, Step]] = []  # max-heap on cost: (-total, -order, beam, cost, step)
    order = 0
    finished: list[_Beam] = []
    for index, beam in enumerate(beams):
        own_triples = {s.triple for s in beam.steps}
        own_targets = {s.target for s in beam.steps}
        movable = False
        for cost, step in options.get(beam.tail, ()):
            target = step.target
            if target == beam.previous or step.triple in own_triples:
                continue
            if not config.revisit_vertices and target in beam.vertices:
                continue
            if not config.share_vertices and vertex_use[target] - (target in own_targets) > 0:
                continue
            if not config.share_edges and triple_use[step.triple] > 0:
                continue
            movable = True
            total = beam.cost + cost
            if len(best) >= config.max_paths and total >= -best[0][0]:
                break
            order += 1
            heapq.heappush(best, (-total, -order, index, cost, step))
            if len(best) > config.max_paths:
                heapq.heappop(best)
        if not movable and beam.steps:
            finished.append(beam)
    chosen = sorted(best, key=lambda item: (-item[0], -item[1]))
    return [beams[i].extend(step, cost) for _, _, i, cost, step in chosen], finished


def _final(ended: list[_Beam], continuous: list[_Beam], config: BeamSearchConfig) -> list[_Beam]:
    """The paper's final sorting: ended paths first, continuous first, or all mixed; best ``max_paths``."""

    def ranked(beams: list[_Beam]) -> list[_Beam]:
        return sorted((b for b in beams if b.steps), key=lambda b: (b.score(config.mean_alpha), len(b.steps)))

    if config.final_sorting == "mixed":
        return ranked(ended + continuous)[: config.max_paths]
    first, then = (ended, continuous) if config.final_sorting == "ended_first" else (continuous, ended)
    chosen = ranked(first)[: config.max_paths]
    return chosen + ranked(then)[: config.max_paths - len(chosen)]

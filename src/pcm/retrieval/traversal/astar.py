"""A* (PersonalAI §III-D, Appendix E): the shortest path between every pair of matched vertices, over the graph
taken as unweighted and undirected, guided by one of the paper's three heuristics.

* ``ip``: the inner-product distance between the names of the vertex and the goal;
* ``weighted_short_path``: that distance times the breadth-first distance from the vertex to the goal;
* ``avg_weighted_short_path``: the mean inner-product distance between consecutive vertices of the path so far
  (and on to the goal), times the breadth-first distance.

The inner-product distance is taken as ``(1 - cos) / 2``, in [0, 1], where the paper uses ``1 - cos``: with that
scale every heuristic is at most the true number of hops left (1 for ``ip``; the breadth-first distance itself
for the other two), so it never overestimates and the first path found to the goal is a shortest one. The
breadth-first distances come from one walk out of the goal, bounded like the search itself.

Work is bounded by ``max_depth`` (hops from the start) and ``max_passed_nodes`` (vertices taken off the open set);
``expand_batch`` open vertices are expanded per SPARQL query.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pcm.retrieval.traversal.config import AStarConfig, Restrictions
from pcm.retrieval.traversal.graph import GraphView
from pcm.retrieval.traversal.model import Found, Node, Path, Triple
from pcm.retrieval.traversal.vectors import TextVectors

NAME = "astar"


@dataclass
class _Search:
    start: Node
    goal: Node
    g: dict[Node, int] = field(default_factory=dict)
    parent: dict[Node, Node | None] = field(default_factory=dict)
    ip_sum: dict[Node, float] = field(default_factory=dict)
    """Summed inner-product distance between consecutive vertices of the best path to each vertex."""
    h: dict[Node, float] = field(default_factory=dict)
    passed: int = 0


class _Names:
    """Unit vectors of vertex names (labels), fetched and embedded in batches."""

    def __init__(self, graph: GraphView, vectors: TextVectors) -> None:
        self.graph = graph
        self.vectors = vectors
        self._cache: dict[Node, np.ndarray] = {}

    def of(self, vertices: Sequence[Node]) -> dict[Node, np.ndarray]:
        missing = [v for v in dict.fromkeys(vertices) if v not in self._cache]
        if missing:
            labels = self.graph.labels(missing)
            rows = self.vectors.get([labels[v] for v in missing])
            self._cache.update(zip(missing, rows, strict=True))
        return {v: self._cache[v] for v in vertices}

    def matrix(self, vertices: Sequence[Node]) -> np.ndarray:
        """The vectors of ``vertices`` as rows (repeats allowed)."""
        known = self.of(vertices)
        return np.stack([known[v] for v in vertices]) if vertices else np.zeros((0, self.vectors.dim), np.float32)


def a_star(
    graph: GraphView,
    vectors: TextVectors,
    starts: Sequence[Node],
    config: AStarConfig,
    restrictions: Restrictions,
) -> tuple[list[Found], list[Path], list[str]]:
    """Shortest paths between every pair of starts (in the order given); the triples along them."""
    starts = list(dict.fromkeys(starts))
    names = _Names(graph, vectors)
    found: dict[Triple, Found] = {}
    paths: list[Path] = []
    notes: list[str] = []
    for a, b in itertools.combinations(starts, 2):
        chain, passed = _search(graph, names, a, b, config, restrictions, set(starts))
        graph.stats.passed += passed
        if chain is None:
            notes.append(
                f"A*: no path from {a.value} to {b.value} within {config.max_depth} hops "
                f"and {config.max_passed_nodes} passed vertices"
            )
            continue
        steps = graph.between(zip(chain, chain[1:], strict=False))
        walked = [steps[(x, y)][0] for x, y in zip(chain, chain[1:], strict=False) if steps.get((x, y))]
        if len(walked) != len(chain) - 1:
            notes.append(f"A*: the path from {a.value} to {b.value} changed while it was read")
            continue
        path = Path(NAME, a, tuple(walked), score=1.0 / (1 + len(walked)), goal=b)
        paths.append(path)
        for x, y in zip(chain, chain[1:], strict=False):
            for step in steps[(x, y)]:
                if step.triple not in found:
                    found[step.triple] = Found(step.triple, "path", {NAME}, path, rank=path.score)
    return list(found.values()), paths, notes


def _search(
    graph: GraphView,
    names: _Names,
    start: Node,
    goal: Node,
    config: AStarConfig,
    restrictions: Restrictions,
    question_vertices: set[Node],
) -> tuple[list[Node] | None, int]:
    s = _Search(start, goal)
    distance_to_goal = _bfs_distances(graph, goal, config, restrictions, question_vertices) if config.heuristic != "ip" else {}
    horizon = max(distance_to_goal.values(), default=0) + 1
    # With the ip heuristic (< 1 hop), vertices leave the open set layer by layer, so the first vertex generated
    # next to the goal closes a shortest path: no need to wait for the goal to be popped.
    ring = _goal_ring(graph, goal, restrictions, question_vertices) if config.heuristic == "ip" else set()
    if start in ring:
        return [start, goal], 1
    goal_vector = names.of([goal])[goal]
    s.g[start], s.parent[start], s.ip_sum[start] = 0, None, 0.0
    s.h[start] = float(_heuristics(config, names.matrix([start]), goal_vector, np.zeros(1), np.zeros(1), np.array([distance_to_goal.get(start, horizon)]))[0])
    counter = itertools.count()
    open_heap: list[tuple[float, float, int, Node]] = [(s.h[start], s.h[start], next(counter), start)]
    while open_heap and s.passed < config.max_passed_nodes:
        batch: list[Node] = []
        while open_heap and len(batch) < config.expand_batch and s.passed < config.max_passed_nodes:
            f, h, _, vertex = heapq.heappop(open_heap)
            if f > s.g[vertex] + s.h[vertex] + 1e-12:
                continue  # a better route to it was found after this entry was pushed
            s.passed += 1
            if vertex == goal:
                return _chain(s, goal), s.passed
            if s.g[vertex] >= config.max_depth:
                continue
            if vertex != start and not restrictions.cross_hubs and graph.is_hub(vertex):
                continue
            batch.append(vertex)
        if not batch:
            continue
        rows = graph.neighbours(list(enumerate(batch)))
        kinds = graph.kinds(r.vertex for r in rows) if restrictions.needs_kinds else {}
        rows = [r for r in rows if not kinds or r.vertex in question_vertices or restrictions.allows(kinds[r.vertex])]
        rows.sort(key=lambda r: (r.tag, r.vertex.value))
        hits = [(s.g[batch[r.tag]] + (1 if r.vertex == goal else 2), r) for r in rows if r.vertex == goal or r.vertex in ring]
        if hits:
            hops, row = min(hits, key=lambda item: item[0])
            if hops <= config.max_depth:
                chain = _chain(s, batch[row.tag]) + ([row.vertex, goal] if row.vertex != goal else [goal])
                return chain, s.passed
        fresh = [r for r in rows if r.vertex not in s.g or s.g[batch[r.tag]] + 1 < s.g[r.vertex]]
        if not fresh:
            continue
        there = names.matrix([r.vertex for r in fresh])
        here = names.matrix([batch[r.tag] for r in fresh])
        steps = (1.0 - np.einsum("ij,ij->i", there, here)) / 2.0
        g = np.array([s.g[batch[r.tag]] + 1 for r in fresh], dtype=np.float64)
        ip_sum = np.array([s.ip_sum[batch[r.tag]] for r in fresh]) + steps
        bfs = np.array([distance_to_goal.get(r.vertex, horizon) for r in fresh], dtype=np.float64)
        h = _heuristics(config, there, goal_vector, ip_sum, g, bfs)
        for k, row in enumerate(fresh):
            x = row.vertex
            if x in s.g and g[k] >= s.g[x]:
                continue  # reached twice in this batch
            s.g[x], s.parent[x], s.ip_sum[x], s.h[x] = int(g[k]), batch[row.tag], float(ip_sum[k]), float(h[k])
            heapq.heappush(open_heap, (g[k] + h[k], float(h[k]), next(counter), x))
    return None, s.passed


def _goal_ring(graph: GraphView, goal: Node, restrictions: Restrictions, question_vertices: set[Node]) -> set[Node]:
    """The goal's walkable neighbours (a hub among them would be crossed, so it is left out)."""
    rows = graph.neighbours([(0, goal)])
    kinds = graph.kinds(r.vertex for r in rows) if restrictions.needs_kinds else {}
    return {
        r.vertex
        for r in rows
        if (restrictions.cross_hubs or not graph.is_hub(r.vertex) or r.vertex in question_vertices)
        and (not kinds or r.vertex in question_vertices or restrictions.allows(kinds[r.vertex]))
    }


def _heuristics(
    config: AStarConfig, vectors: np.ndarray, goal: np.ndarray, ip_sum: np.ndarray, hops: np.ndarray, bfs: np.ndarray
) -> np.ndarray:
    """h for a block of vertices; ``ip_sum`` is the summed step distance of the path to each, ``hops`` its length."""
    ip = np.minimum((1.0 - vectors @ goal) / 2.0, 1.0 - 1e-9)
    if config.heuristic == "ip":
        return ip
    if config.heuristic == "weighted_short_path":
        return ip * bfs
    return (ip_sum + ip) / (hops + 1.0) * bfs


def _bfs_distances(
    graph: GraphView, goal: Node, config: AStarConfig, restrictions: Restrictions, question_vertices: set[Node]
) -> dict[Node, int]:
    """Breadth-first hop counts from the goal, over the same walkable graph, bounded like the search."""
    distance = {goal: 0}
    frontier = [goal]
    for depth in range(1, config.max_depth + 1):
        expandable = [v for v in frontier if v == goal or restrictions.cross_hubs or not graph.is_hub(v)]
        if not expandable or len(distance) >= config.max_passed_nodes:
            break
        frontier = []
        rows = graph.neighbours([(0, v) for v in expandable])
        kinds = graph.kinds(r.vertex for r in rows) if restrictions.needs_kinds else {}
        for row in rows:
            if row.vertex in distance:
                continue
            if kinds and row.vertex not in question_vertices and not restrictions.allows(kinds[row.vertex]):
                continue
            distance[row.vertex] = depth
            frontier.append(row.vertex)
    return distance


def _chain(s: _Search, vertex: Node) -> list[Node]:
    chain = [vertex]
    while (up := s.parent[chain[-1]]) is not None:
        chain.append(up)
    return chain[::-1]


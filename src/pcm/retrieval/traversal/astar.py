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

With ``ip`` (below one hop everywhere) the open set empties layer by layer, which makes the search bidirectional
without changing the length of the path A* returns. The pair is unordered, so the search runs from the end with
fewer facts (both counted in the engine) and meets the other end in the middle with property-path queries, never
shipping the neighbourhood of a popular end:

* one hop, then two: K/K from the start to the goal (``bridges.rq``), the goal's neighbourhood joined in the engine;
* three: the start's ring is read (that many vertices are passed; past ``max_passed_nodes`` only those A* would
  pop first, nearest the goal), and K/K from the ring vertices to the goal, the same query;
* four: only now is the goal's ring read; A* passes the whole start ring and one more vertex, so the path is kept
  only if that fits in ``max_passed_nodes``. Where both rings' neighbourhoods are small (``RING_ROWS``) they are
  read (the start ring's is A*'s next layer anyway) and four hops is a lookup, as is, later, whether a vertex
  closes a path through the goal's ring; otherwise the engine finds where both rings meet (``meet.rq``). (Reading
  the goal's ring at once when it is small, to find three and four hops in one meet, was measured and is slower
  on the 2.65M-quad store: A* p95 70 ms CPU against 40.)

Ties between equally short paths are broken by the heuristic, as A*'s ordering would. Longer paths are searched
vertex by vertex from the start's ring, and a vertex generated next to the goal closes the path without waiting
for the goal to be popped. Where the budget ends in a layer, what is left is known before it is read: when that
layer cannot close a path (none of four hops exists) the search ends with the budget passed, and when it can
only through the goal's ring, one ``bridges.rq`` over the vertices A* would still pass finds the first that does
(``_layer_fills_budget``, ``_last_pops``). One layer earlier, when the next layer is bound to fill the budget and
none of its vertices is next to the goal's ring, the engine says so (it counts and checks them without shipping
them) and the search ends there (``_next_layer_ends``). Where both rings were read and one end's ring leads nowhere
else (``_closed``), no path of any length exists and the search ends at once: its passed count is then what it
passed, not the budget A* would have spent finding nothing. On random graphs the paths are exactly as short as a
breadth-first search's (``tests/retrieval/traversal/test_traversal_paths.py``).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from pcm.retrieval.traversal.config import AStarConfig, Restrictions
from pcm.retrieval.traversal.graph import GraphView, Neighbour
from pcm.retrieval.traversal.model import Found, Node, Path, Triple
from pcm.retrieval.traversal.vectors import TextVectors

NAME = "astar"
#: How many batches of one layer are read ahead in one query (see ``_coming``).
PREFETCH_BATCHES = 8


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
    """One A* search; the vertices of the shortest path from ``start`` to ``goal``, or None."""
    ring: set[Node] = set()
    seed: set[Node] | None = None
    shortest = 1
    swapped = False
    read: dict[Node, list[Neighbour]] = {}
    goal_side: dict[Node, list[Node]] | None = None
    if config.heuristic == "ip":
        # With the ip heuristic (< 1 hop), vertices leave the open set layer by layer, so the first vertex
        # generated next to the goal closes a shortest path. The search runs from the end with fewer facts (the
        # path is unordered; counted in the engine), so the other end's neighbourhood is never shipped, and meets
        # it in the middle (see the module docstring).
        if graph.between([(start, goal)]):
            return [start, goal], 1
        chain = _bridged(graph, names, start, goal, set(), config, restrictions, question_vertices)
        if chain is not None:  # two hops, found without shipping either end's neighbours
            return chain, 1
        degrees = graph.degrees([start, goal])
        if degrees[start] > degrees[goal]:
            start, goal, swapped = goal, start, True
        ring_start = _ring(graph, start, restrictions, question_vertices)
        budget = config.max_passed_nodes - 1
        passing = ring_start if len(ring_start) <= budget else _nearest(names, ring_start, goal, budget)
        if config.max_depth < 3 or not passing:
            return None, 1 + len(passing)
        chain = _bridged(graph, names, start, goal, passing, config, restrictions, question_vertices)
        if chain is not None:
            return _oriented(chain, swapped), 1 + len(passing)
        if config.max_depth < 4:
            return None, 1 + len(passing)
        # Four hops: A* passes the start's whole ring and one more vertex (a path found with only part of the ring
        # passed is not the one A* returns); where both rings' neighbourhoods are small they are read, and they
        # are what A* reads next anyway; otherwise the engine finds where the rings meet.
        ring_goal = _ring(graph, goal, restrictions, question_vertices)
        if ring_goal and passing == ring_start:
            rings = _read_rings(graph, passing, ring_goal)
            if rings is None:
                chain = _meet_rings(graph, names, start, goal, passing, ring_goal, config, restrictions, question_vertices)
            else:
                read, goal_side = rings
                chain = _met(graph, names, start, goal, read, goal_side, restrictions, question_vertices)
                beyond_start = (row.vertex for rows in read.values() for row in rows)
                if chain is None and (
                    _closed(graph, start, ring_start, beyond_start, restrictions)
                    or _closed(graph, goal, ring_goal, goal_side, restrictions)
                ):
                    return None, 1 + len(passing)  # no path at all: see _closed
            passed = 2 + len(passing)
            if chain is not None and passed <= config.max_passed_nodes:
                return _oriented(chain, swapped), passed
        if config.max_depth < 5:
            return None, 1 + len(passing)
        if len(ring_start) >= budget:
            return None, config.max_passed_nodes  # A* would stop before leaving the start's ring
        ring, seed, shortest = ring_goal, ring_start, 5
    chain, passed = _a_star(graph, names, start, goal, config, restrictions, question_vertices, ring, seed, shortest,
                            read, goal_side)
    return (_oriented(chain, swapped) if chain is not None else None), passed


def _closed(graph: GraphView, end: Node, ring: set[Node], beyond: Iterable[Node], restrictions: Restrictions) -> bool:
    """Whether ``end`` and its ``ring`` are all a walk from ``end`` can reach: every vertex next to the ring
    (``beyond``, read with it) is ``end``, in the ring, or a hub (passed, never expanded). No path of any length
    then joins the two ends when none of four hops does (the other end is not in here), and A* would pass up to its
    whole budget to find that out: at 1M posts, a friend whose every fact was said in posts naming only them (the
    ring is those posts) against another friend, 500 vertices and 2,600 rows read, 63-80 ms."""
    return all(x == end or x in ring or (not restrictions.cross_hubs and graph.is_hub(x)) for x in beyond)


def _oriented(chain: list[Node], swapped: bool) -> list[Node]:
    return chain[::-1] if swapped else chain


def _a_star(
    graph: GraphView,
    names: _Names,
    start: Node,
    goal: Node,
    config: AStarConfig,
    restrictions: Restrictions,
    question_vertices: set[Node],
    ring: set[Node],
    seed: set[Node] | None,
    shortest: int = 1,
    read: dict[Node, list[Neighbour]] | None = None,
    goal_side: dict[Node, list[Node]] | None = None,
) -> tuple[list[Node] | None, int]:
    """A* proper. ``shortest``: the fewest hops a path can have, as already proven by the caller (paths of up to
    four hops are looked for in the engine first, see the module docstring). ``read``: neighbours of vertices the
    caller read already; ``goal_side``: the vertices next to the goal's ``ring``, with their neighbours in it, when
    the caller read them (see :func:`_read_rings`)."""
    s = _Search(start, goal)
    distance_to_goal = _bfs_distances(graph, goal, config, restrictions, question_vertices) if config.heuristic != "ip" else {}
    horizon = max(distance_to_goal.values(), default=0) + 1
    goal_vector = names.of([goal])[goal]
    s.g[start], s.parent[start], s.ip_sum[start] = 0, None, 0.0
    s.h[start] = float(_heuristics(config, names.matrix([start]), goal_vector, np.zeros(1), np.zeros(1), np.array([distance_to_goal.get(start, horizon)]))[0])
    counter = itertools.count()
    open_heap: list[tuple[float, float, int, Node]] = []
    ahead: dict[Node, list[Neighbour]] = dict(read or {})
    """Neighbours read before their vertex was expanded (with the batch that needed a query)."""
    if seed is None:
        open_heap.append((s.h[start], s.h[start], next(counter), start))
    else:  # the start's neighbours are known already: it is passed, they are open
        s.passed = 1
        _push(s, open_heap, counter, names, config, goal_vector, distance_to_goal, horizon,
              [(start, x) for x in sorted(seed, key=lambda v: v.value)])
    checked_layer = -1
    while open_heap and s.passed < config.max_passed_nodes:
        layer = s.g[open_heap[0][3]]
        if layer != checked_layer:
            checked_layer = layer
            waiting = _waiting(s, open_heap, layer) if config.heuristic == "ip" else []
            if _layer_fills_budget(s, waiting, config, layer, shortest, bool(ring)):
                return None, config.max_passed_nodes
            last = _last_pops(s, waiting, config, layer, shortest)
            if last is not None:
                return _close_in_engine(graph, s, last, ring, ahead, config, restrictions, goal_side)
            if _next_layer_ends(graph, s, waiting, config, restrictions, layer, shortest, ahead, goal_side):
                return None, config.max_passed_nodes
        batch: list[Node] = []
        while open_heap and len(batch) < config.expand_batch and s.passed < config.max_passed_nodes:
            f, h, _, vertex = heapq.heappop(open_heap)
            if _stale(s, f, vertex):
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
        # the next vertices of the layer are read only with a batch that needs a query anyway: read with every batch,
        # each query would add just the vertices that entered the window since the last one
        unread = any(v not in ahead for v in batch)
        coming = _coming(s, open_heap, config, restrictions, graph, ahead, batch) if unread else []
        rows = _expand(graph, batch, ahead, coming)
        kinds = graph.kinds(r.vertex for r in rows) if restrictions.needs_kinds else {}
        rows = [r for r in rows if not kinds or r.vertex in question_vertices or restrictions.allows(kinds[r.vertex])]
        rows.sort(key=lambda r: (r.tag, r.vertex.value))
        hits = [(s.g[batch[r.tag]] + (1 if r.vertex == goal else 2), r) for r in rows if r.vertex == goal or r.vertex in ring]
        if hits:
            hops, row = min(hits, key=lambda item: item[0])
            if hops <= config.max_depth:
                chain = _chain(s, batch[row.tag]) + ([row.vertex, goal] if row.vertex != goal else [goal])
                return chain, s.passed
        _push(s, open_heap, counter, names, config, goal_vector, distance_to_goal, horizon,
              [(batch[r.tag], r.vertex) for r in rows])
    return None, s.passed


_Entry = tuple[float, float, int, Node]
"""An open-set entry: f, h, the push counter (ties), the vertex."""


def _stale(s: _Search, f: float, vertex: Node) -> bool:
    """Whether an open-set entry of ``f`` for ``vertex`` was overtaken by a better route pushed after it."""
    return f > s.g[vertex] + s.h[vertex] + 1e-12


def _waiting(s: _Search, open_heap: list[_Entry], layer: int) -> list[_Entry]:
    """The live entries of ``layer`` in the open set, in the order A* pops them."""
    return sorted(e for e in open_heap if s.g[e[3]] == layer and not _stale(s, e[0], e[3]))


def _layer_fills_budget(
    s: _Search, waiting: list[_Entry], config: AStarConfig, layer: int, shortest: int, ring: bool
) -> bool:
    """Whether the search is bound to end in ``layer`` without a path, so its vertices' neighbours need not be read.

    With the ip heuristic (below one hop) a layer leaves the open set before any vertex of the next, each of its
    vertices once (a vertex is pushed again only on a shorter route, which a later layer never offers). So when
    the vertices of ``layer`` still open reach ``max_passed_nodes`` with those passed, no vertex of the next layer
    is ever passed, and what expanding ``layer`` could still do is close a path: to the goal in ``layer + 1`` hops
    or through the goal's ring in ``layer + 2``. When ``shortest`` (proven by the caller) rules both out, A* would
    pass the whole budget and find nothing: at 1M posts, two friends with no path of four hops fill the budget in
    the second layer, whose 400 vertices' neighbours (thousands of rows) were read for nothing."""
    if config.heuristic != "ip" or layer + 1 >= shortest or (ring and layer + 2 >= shortest):
        return False
    return s.passed + len(waiting) >= config.max_passed_nodes


def _last_pops(
    s: _Search, waiting: list[_Entry], config: AStarConfig, layer: int, shortest: int
) -> list[Node] | None:
    """The vertices A* will still pass, in the order it pops them, when the budget ends in ``layer`` and what
    expanding them could still find is only a path through the goal's ring (``layer + 2`` hops: one to the goal,
    ``layer + 1``, is ruled out by ``shortest``); None otherwise. Their neighbours then matter only where they
    meet the goal's ring, which the engine finds without shipping them (:func:`_close_in_engine`)."""
    if config.heuristic != "ip" or layer + 1 >= shortest or layer >= config.max_depth:
        return None
    room = config.max_passed_nodes - s.passed
    if len(waiting) < room:
        return None
    return [vertex for *_, vertex in waiting[:room]]


def _next_layer_ends(
    graph: GraphView,
    s: _Search,
    waiting: list[_Entry],
    config: AStarConfig,
    restrictions: Restrictions,
    layer: int,
    shortest: int,
    ahead: dict[Node, list[Neighbour]],
    goal_side: dict[Node, list[Node]] | None,
) -> bool:
    """Whether the search is bound to end in the layer after ``layer`` without a path, so neither layer's
    neighbours need be shipped: ``layer`` fits in the budget, the next one fills what is left, and none of the next
    one's vertices is next to the goal's ring.

    With the ip heuristic A* passes ``layer`` whole, expanding it; that closes nothing when ``shortest`` rules out
    ``layer + 1`` hops (to the goal) and ``layer + 2`` (through its ring). The next layer then leaves the open set in
    :func:`_last_pops`'s order, and when it has at least as many vertices as the budget has room, all A* can still
    find is a vertex of it next to the goal's ring (:func:`_close_in_engine`, a lookup in ``goal_side``). Both are
    asked of the engine instead: whether the layer's neighbours number that many (read up to that many, the
    engine stopping there) and whether any of them is one of ``goal_side``'s expandable vertices (one row at most).
    Kind restrictions drop vertices after they are read, so with them the layer is expanded as before. At 1M
    posts, two friends with no path of four hops: a second layer of 176 vertices has 2,700 neighbour pairs over
    2,000 vertices, which took 38 ms to ship and push, against 2.6 ms to count the first 500 in the engine."""
    if config.heuristic != "ip" or goal_side is None or restrictions.needs_kinds:
        return False
    if layer + 2 >= shortest or layer + 1 >= config.max_depth:
        return False
    room = config.max_passed_nodes - s.passed - len(waiting)
    if room <= 0:
        return False  # the budget ends in ``layer`` itself (:func:`_layer_fills_budget`, :func:`_last_pops`)
    expandable = [v for *_, v in waiting if restrictions.cross_hubs or not graph.is_hub(v)]
    if all(v in ahead for v in expandable):
        return False  # the layer's neighbours were read already (the start's ring's): expanding it reads nothing
    # the goal is never in the next layer (``layer + 1`` hops are ruled out), and a hub there is not expanded
    closers = [x for x in goal_side if x != s.goal and x not in s.g and (restrictions.cross_hubs or not graph.is_hub(x))]
    if closers and graph.touches(expandable, closers):
        return False
    # the next layer is the neighbours of ``expandable`` not reached before; every vertex reached so far may be
    # among those read, so that many more are read
    beyond = graph.beyond(expandable, room + len(s.g))
    return sum(1 for x in beyond if x not in s.g) >= room


def _close_in_engine(
    graph: GraphView,
    s: _Search,
    pops: list[Node],
    ring: set[Node],
    ahead: dict[Node, list[Neighbour]],
    config: AStarConfig,
    restrictions: Restrictions,
    goal_side: dict[Node, list[Node]] | None = None,
) -> tuple[list[Node] | None, int]:
    """What A* returns from its last layer, ``pops`` (in order): batch by batch, the first vertex with a neighbour
    in the goal's ring closes the path (through that neighbour, the first by IRI), counted as passed when its
    batch is; no such vertex, no path and the whole budget passed. The meetings come from one ``bridges.rq``
    (K/K to the goal, joined in the engine), not from every neighbour of every vertex shipped and pushed: at 1M
    posts two friends five hops apart fill the budget in the third layer, whose expansion read ~2,000 rows.
    Vertices whose neighbours were read ahead already are looked up in those rows, and all of them in
    ``goal_side`` (the ring's neighbours) when it was read."""
    expandable = [v for v in pops if restrictions.cross_hubs or not graph.is_hub(v)]
    unread = [v for v in expandable if v not in ahead]
    near: dict[Node, list[Node]] = {}
    if goal_side is not None:
        for a in unread:
            if a in goal_side:
                near[a] = list(goal_side[a])
    elif ring and unread:
        for a, y in graph.bridges(unread, s.goal):
            if y in ring:
                near.setdefault(a, []).append(y)
    for v in expandable:
        for row in ahead.get(v, ()):
            if row.vertex in ring:
                near.setdefault(v, []).append(row.vertex)
    if not near:
        return None, config.max_passed_nodes
    allowed = set(expandable)
    passed = s.passed
    batch: list[Node] = []
    for vertex in pops:
        passed += 1
        if vertex in allowed:
            batch.append(vertex)
        if len(batch) == config.expand_batch or passed == config.max_passed_nodes:
            for v in batch:
                if v in near:
                    return _chain(s, v) + [min(near[v], key=lambda y: y.value), s.goal], passed
            batch = []
    return None, config.max_passed_nodes


def _coming(
    s: _Search,
    open_heap: list[tuple[float, float, int, Node]],
    config: AStarConfig,
    restrictions: Restrictions,
    graph: GraphView,
    ahead: dict[Node, list[Neighbour]],
    batch: list[Node],
) -> list[Node]:
    """The vertices A* would expand after ``batch`` in the same layer, as many as it may still pass (at most
    ``PREFETCH_BATCHES`` batches): with the ip heuristic (below one hop) a layer leaves the open set in the order it
    has now, whatever is pushed meanwhile, so their neighbours can be read with the batch's in one query instead of
    a query per batch. Nothing else changes: a vertex read ahead and never expanded is only a few rows read."""
    if config.heuristic != "ip":
        return []
    room = min(config.max_passed_nodes - s.passed, PREFETCH_BATCHES * config.expand_batch)
    layer = max(s.g[v] for v in batch)
    if room <= 0 or layer >= config.max_depth:
        return []
    coming: list[Node] = []
    for f, _, _, vertex in heapq.nsmallest(room, open_heap):
        if _stale(s, f, vertex) or vertex in ahead or vertex == s.goal:
            continue  # stale, read already, or the end of the search
        if s.g[vertex] != layer:
            break
        if not restrictions.cross_hubs and graph.is_hub(vertex):
            continue
        coming.append(vertex)
    return coming


def _expand(graph: GraphView, batch: list[Node], ahead: dict[Node, list[Neighbour]], coming: list[Node]) -> list[Neighbour]:
    """The neighbours of ``batch`` tagged by position, as one query of the batch's would return them; the unread
    vertices of the batch and ``coming`` are read together, and ``coming``'s rows kept in ``ahead``."""
    unread = [v for v in dict.fromkeys(batch) if v not in ahead]
    wanted = list(dict.fromkeys(unread + [v for v in coming if v not in unread]))
    if wanted:
        for vertex in wanted:
            ahead[vertex] = []
        for row in graph.neighbours(list(enumerate(wanted))):
            ahead[wanted[row.tag]].append(row)
    rows = [Neighbour(tag, r.vertex, r.parent) for tag, vertex in enumerate(batch) for r in ahead[vertex]]
    for vertex in batch:
        ahead.pop(vertex, None)  # expanded: a later route to it is never expanded again at a smaller depth
    return rows


def _push(
    s: _Search,
    open_heap: list[tuple[float, float, int, Node]],
    counter: itertools.count[int],
    names: _Names,
    config: AStarConfig,
    goal_vector: np.ndarray,
    distance_to_goal: dict[Node, int],
    horizon: int,
    edges: list[tuple[Node, Node]],
) -> None:
    """Relax (here -> there) edges: record better routes and push them, heuristics computed as one block."""
    fresh = [(here, there) for here, there in edges if there not in s.g or s.g[here] + 1 < s.g[there]]
    if not fresh:
        return
    there = names.matrix([x for _, x in fresh])
    g = np.array([s.g[y] + 1 for y, _ in fresh], dtype=np.float64)
    if config.heuristic == "avg_weighted_short_path":  # the only heuristic that reads the path's step distances
        here = names.matrix([y for y, _ in fresh])
        steps = (1.0 - np.einsum("ij,ij->i", there, here)) / 2.0
        ip_sum = np.array([s.ip_sum[y] for y, _ in fresh]) + steps
    else:
        ip_sum = np.zeros(len(fresh))
    bfs = np.array([distance_to_goal.get(x, horizon) for _, x in fresh], dtype=np.float64)
    h = _heuristics(config, there, goal_vector, ip_sum, g, bfs)
    for k, (y, x) in enumerate(fresh):
        if x in s.g and g[k] >= s.g[x]:
            continue  # reached twice in this batch
        s.g[x], s.parent[x], s.ip_sum[x], s.h[x] = int(g[k]), y, float(ip_sum[k]), float(h[k])
        heapq.heappush(open_heap, (g[k] + h[k], float(h[k]), next(counter), x))


#: Rows of neighbours each end's ring may have for both to be read at four hops (:func:`_read_rings`); more, and
#: the engine finds where they meet (``meet.rq``) without shipping them.
RING_ROWS = 2_000


def _read_rings(
    graph: GraphView, ring_start: set[Node], ring_goal: set[Node]
) -> tuple[dict[Node, list[Neighbour]], dict[Node, list[Node]]] | None:
    """The neighbours of both ends' rings, when each side has at most ``RING_ROWS``: the start ring's as A* would
    read them when it expands that layer (which it does next when no path of four hops exists), and the goal
    ring's as the vertices next to it, each with its neighbours in the ring. Four hops is then a lookup, and so is
    whether a vertex of a later layer closes a path through the ring (no ``meet.rq``, no ``bridges.rq``: at 1M
    posts, for two friends with 81 facts each, 2 x 3 ms of rows against 10 ms and 6 ms of engine joins). None when
    either side has more rows (read in part, up to the bound)."""
    starts = graph.pairs(sorted(ring_start, key=lambda v: v.value), RING_ROWS)
    if starts is None:
        return None
    goals = graph.pairs(sorted(ring_goal, key=lambda v: v.value), RING_ROWS)
    if goals is None:
        return None
    read: dict[Node, list[Neighbour]] = {v: [] for v in ring_start}
    for parent, x in starts:
        read[parent].append(Neighbour(0, x, parent))
    goal_side: dict[Node, list[Node]] = {}
    for r, x in goals:
        goal_side.setdefault(x, []).append(r)
    return read, goal_side


def _met(
    graph: GraphView,
    names: _Names,
    start: Node,
    goal: Node,
    read: dict[Node, list[Neighbour]],
    goal_side: dict[Node, list[Node]],
    restrictions: Restrictions,
    question_vertices: set[Node],
) -> list[Node] | None:
    """The path of four hops :func:`_meet_rings` finds, from both rings' neighbours read (:func:`_read_rings`):
    a vertex next to both rings, the start ring's vertex and the goal ring's first by IRI on either side of it.
    Shorter paths are ruled out by the caller, so neither end is next to the middle vertex."""
    left: dict[Node, Node] = {}
    for parent, rows in read.items():
        for row in rows:
            x = row.vertex
            if x in goal_side and x not in (start, goal) and (x not in left or parent.value < left[x].value):
                left[x] = parent
    middles = [x for x in left if not graph.is_hub(x) or restrictions.cross_hubs or x in question_vertices]
    kinds = graph.kinds(middles) if restrictions.needs_kinds and middles else {}
    if kinds:
        middles = [x for x in middles if x in question_vertices or restrictions.allows(kinds[x])]
    return _nearest_middle(names, goal, [(x, [start, left[x], x, min(goal_side[x], key=lambda r: r.value), goal])
                                         for x in middles])


def _nearest_middle(names: _Names, goal: Node, chosen: list[tuple[Node, list[Node]]]) -> list[Node] | None:
    """Among equally short paths, given with their middle vertices, the one whose middle vertex is nearest the
    goal by the heuristic (ties by IRI), as A*'s ordering would pick it."""
    if not chosen:
        return None
    vectors = names.matrix([x for x, _ in chosen])
    distance = (1.0 - vectors @ names.of([goal])[goal]) / 2.0
    k = min(range(len(chosen)), key=lambda i: (float(distance[i]), chosen[i][0].value))
    return chosen[k][1]


def _meet_rings(
    graph: GraphView,
    names: _Names,
    start: Node,
    goal: Node,
    ring_start: set[Node],
    ring_goal: set[Node],
    config: AStarConfig,
    restrictions: Restrictions,
    question_vertices: set[Node],
) -> list[Node] | None:
    """Paths of three or four hops, found in the engine where the two ends' rings meet (only the meeting vertices
    come back). What A* would expand layer by layer to find; among equally short paths, the one whose middle
    vertex is nearest the goal by the heuristic, as A*'s ordering would pick it."""
    tagged = [(0, start)] + [(0, v) for v in sorted(ring_start, key=lambda v: v.value)]
    tagged += [(1, goal)] + [(1, v) for v in sorted(ring_goal, key=lambda v: v.value)]
    rows = graph.meet(tagged)
    if not rows:
        return None
    kinds = graph.kinds(x for x, _, _ in rows) if restrictions.needs_kinds else {}
    ends = (start, goal)
    best: dict[Node, list[Node | None]] = {}
    for x, tag, parent in sorted(rows, key=lambda r: (r[0].value, r[1], r[2] != ends[r[1]], r[2].value)):
        if x in ends or (graph.is_hub(x) and not restrictions.cross_hubs and x not in question_vertices):
            continue
        if kinds and x not in question_vertices and not restrictions.allows(kinds[x]):
            continue
        via = best.setdefault(x, [None, None])
        if via[tag] is None:
            via[tag] = parent
    candidates = []
    for x, (left, right) in best.items():
        if left is None or right is None:
            continue
        chain = [start] + ([] if left == start else [left]) + [x] + ([] if right == goal else [right]) + [goal]
        if len(chain) - 1 <= config.max_depth:
            candidates.append((len(chain), x, chain))
    if not candidates:
        return None
    shortest = min(c[0] for c in candidates)
    return _nearest_middle(names, goal, [(x, chain) for hops, x, chain in candidates if hops == shortest])


def _bridged(
    graph: GraphView,
    names: _Names,
    start: Node,
    goal: Node,
    passing: set[Node],
    config: AStarConfig,
    restrictions: Restrictions,
    question_vertices: set[Node],
) -> list[Node] | None:
    """The shortest path of two or three hops, if there is one: K/K from the start and from the ring vertices A*
    would pass, to the goal (``bridges.rq``, only the paths come back). Among paths of three hops, the one through
    the ring vertex nearest the goal by the heuristic, the one A* pops first."""
    if config.max_depth < 2:
        return None
    firsts = sorted(passing, key=lambda v: v.value) if passing else [start]
    rows = graph.bridges(firsts, goal)
    middles = {y for _, y in rows}
    kinds = graph.kinds(middles) if restrictions.needs_kinds and middles else {}

    def crossable(y: Node) -> bool:
        if y in (start, goal):
            return False
        if y in question_vertices:
            return True
        return (restrictions.cross_hubs or not graph.is_hub(y)) and (not kinds or restrictions.allows(kinds[y]))

    two = {y for a, y in rows if a == start and crossable(y)}
    if two:
        return [start, _nearest(names, two, goal, 1).pop(), goal]
    three = [(a, y) for a, y in rows if a != start and a in passing and crossable(y)]
    if not three:
        return None
    first = _nearest(names, {a for a, _ in three}, goal, 1).pop()
    middle = min((y for a, y in three if a == first), key=lambda v: v.value)
    return [start, first, middle, goal]


def _nearest(names: _Names, vertices: set[Node], goal: Node, count: int) -> set[Node]:
    """The ``count`` vertices A* would pop first: smallest inner-product distance to the goal (ties by IRI)."""
    if len(vertices) <= count:
        return set(vertices)  # nothing to rank: no names to read, no vectors to compare
    ordered = sorted(vertices, key=lambda v: v.value)
    distance = (1.0 - names.matrix(ordered) @ names.of([goal])[goal]) / 2.0
    ranked = sorted(range(len(ordered)), key=lambda i: (float(distance[i]), ordered[i].value))
    return {ordered[i] for i in ranked[:count]}


def _ring(graph: GraphView, vertex: Node, restrictions: Restrictions, question_vertices: set[Node]) -> set[Node]:
    """One end's walkable neighbours (a hub among them would be crossed, so it is left out)."""
    rows = graph.neighbours([(0, vertex)])
    kinds = graph.kinds(r.vertex for r in rows) if restrictions.needs_kinds else {}
    return {
        r.vertex
        for r in rows
        if r.vertex in question_vertices
        or ((restrictions.cross_hubs or not graph.is_hub(r.vertex)) and (not kinds or restrictions.allows(kinds[r.vertex])))
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


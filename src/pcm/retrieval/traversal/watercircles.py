"""WaterCircles (PersonalAI §III-D): circles grow from every start vertex at once, one hop per round, like rings
on water; where circles from different starts meet, the chain joining the two starts goes to the primary list.

How the rounds run as SPARQL, so that one question costs a few queries whatever the degree of its vertices:

* circle 1 is a bounded sample of each start's neighbours (``around.rq``: each part stops at ``max_width``);
* middle circles are one query per round for all starts (frontiers go in as ``VALUES`` tagged by start), which
  returns each newly reached vertex once with one parent: the engine groups the triples;
* the outermost circle is never shipped: the engine finds the vertices one hop from two different starts'
  circles and returns only those, with their parents (``meet.rq``). Meetings next to the starts themselves are
  found there in full, whatever the sample of circle 1 left out.

The triples themselves are read at the end, only for the chains and the few other triples that are returned.

Output, in order: up to N primary triples (chains, shortest first), the thesis and episodic fragments crossed
(the facts around an event, an action, a preference, or an utterance), ranked by how many question entities they
contain, then up to K secondary triples: other traversed triples, nearest circle first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pcm.retrieval.traversal.config import Restrictions, WaterCirclesConfig
from pcm.retrieval.traversal.graph import GraphView
from pcm.retrieval.traversal.model import Found, Kind, Node, Path, Step, Triple

NAME = "wc"


@dataclass
class _Circles:
    """Per start: who reached which vertex from where, and when."""

    starts: list[Node]
    parent: list[dict[Node, Node | None]] = field(default_factory=list)
    depth: list[dict[Node, int]] = field(default_factory=list)
    visited: dict[Node, None] = field(default_factory=dict)
    """Every vertex reached by any circle, in order."""
    touching: dict[Node, set[int]] = field(default_factory=dict)
    """Vertices adjacent to starts: which starts (how many question entities a fragment contains)."""
    order: dict[Node, int] = field(default_factory=dict)
    tree: list[tuple[int, Node, Node]] = field(default_factory=list)
    """(start, parent, child) in the order the circles reached them."""
    meetings: list[tuple[int, int, int, Node]] = field(default_factory=list)
    """(hops of the chain, start i, start j, meeting vertex)."""
    truncated: int = 0
    met: set[tuple[int, int, Node]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.parent = [{s: None} for s in self.starts]
        self.depth = [{s: 0} for s in self.starts]

    def branch(self, i: int, vertex: Node) -> list[Node]:
        """Start i, ..., vertex."""
        chain = [vertex]
        while (up := self.parent[i][chain[-1]]) is not None:
            chain.append(up)
        return chain[::-1]


def water_circles(
    graph: GraphView, starts: Sequence[Node], config: WaterCirclesConfig, restrictions: Restrictions
) -> tuple[list[Found], list[Path], list[str]]:
    """Run WaterCircles from ``starts``; returns the triples found (in output order), their paths and notes."""
    starts = list(dict.fromkeys(starts))
    if not starts:
        return [], [], []
    circles = _Circles(starts)
    _grow(graph, circles, config, restrictions)
    return _collect(graph, circles, config)


def _grow(graph: GraphView, circles: _Circles, config: WaterCirclesConfig, restrictions: Restrictions) -> None:
    """Circle 1 from bounded samples of each start; middle circles hop by hop; the last one only where it meets."""
    start_set = set(circles.starts)
    several = len(circles.starts) > 1
    frontier = _first_circle(graph, circles, config, restrictions)
    if config.max_depth == 1 and several:
        _meet(graph, circles, [(i, s) for i, s in enumerate(circles.starts)], 1, restrictions)
    for depth in range(2, config.max_depth + 1):
        tagged = [
            (i, v)
            for i, vertices in enumerate(frontier)
            for v in vertices
            if restrictions.cross_hubs or not graph.is_hub(v)
        ]
        if not tagged or not several and depth == config.max_depth:
            break  # past the first circle, the outermost one matters only where circles meet
        graph.stats.passed += len(tagged)
        if depth == config.max_depth:
            _meet(graph, circles, [(i, s) for i, s in enumerate(circles.starts)] + tagged, depth, restrictions)
            break
        rows = sorted(graph.neighbours(tagged), key=lambda r: (r.tag, r.vertex.value))
        kinds = graph.kinds(r.vertex for r in rows) if restrictions.needs_kinds else {}
        reached: list[list[Node]] = [[] for _ in circles.starts]
        for row in rows:
            i, x = row.tag, row.vertex
            if kinds and x not in start_set and not restrictions.allows(kinds[x]):
                continue
            if _reach(circles, i, x, row.parent, depth):
                reached[i].append(x)
                _record_meetings(graph, circles, i, x, start_set, restrictions)
        frontier = [_widest(graph, circles, i, vertices, config.max_width) for i, vertices in enumerate(reached)]


def _first_circle(
    graph: GraphView, circles: _Circles, config: WaterCirclesConfig, restrictions: Restrictions
) -> list[list[Node]]:
    """Each start's neighbours: a bounded sample per start (meetings next to the starts are found in full later)."""
    start_set = set(circles.starts)
    samples = [graph.around(s, config.max_width) for s in circles.starts]
    graph.stats.passed += len(circles.starts)
    kinds = graph.kinds(x for sample in samples for x in sample) if restrictions.needs_kinds else {}
    reached: list[list[Node]] = []
    for i, sample in enumerate(samples):
        reached.append([])
        for x in sorted(sample, key=lambda v: v.value):
            if kinds and x not in start_set and not restrictions.allows(kinds[x]):
                continue
            circles.touching.setdefault(x, set()).add(i)
            if _reach(circles, i, x, circles.starts[i], 1):
                reached[i].append(x)
    for i, sample in enumerate(reached):
        for x in sample:
            _record_meetings(graph, circles, i, x, start_set, restrictions)
    return [_widest(graph, circles, i, vertices, config.max_width) for i, vertices in enumerate(reached)]


def _reach(circles: _Circles, i: int, x: Node, parent: Node, depth: int) -> bool:
    """Record that circle i reached x from parent; False when it had already."""
    circles.visited.setdefault(x, None)
    if x in circles.parent[i]:
        return False
    circles.parent[i][x] = parent
    circles.depth[i][x] = depth
    circles.order.setdefault(x, len(circles.order))
    return True


def _widest(graph: GraphView, circles: _Circles, i: int, reached: list[Node], width: int) -> list[Node]:
    """The vertices of circle i that are walked on: all of them, or (past ``width``) thesis and episodic vertices
    first: they are the hyperedges that tie entities together, and cheap to expand; objects such as a home town
    touch hundreds of facts."""
    chosen = reached
    if len(reached) > width:
        kinds = graph.kinds(reached)
        order = {Kind.THESIS: 0, Kind.EPISODIC: 1, Kind.OBJECT: 2}
        chosen = sorted(reached, key=lambda v: order[kinds[v]])[:width]
        circles.truncated += len(reached) - width
    for x in chosen:
        circles.tree.append((i, circles.parent[i][x] or circles.starts[i], x))
    return chosen


def _meet(
    graph: GraphView, circles: _Circles, tagged: list[tuple[int, Node]], depth: int, restrictions: Restrictions
) -> None:
    """The outermost circle, computed in the engine: only the vertices where two circles meet come back."""
    start_set = set(circles.starts)
    rows = graph.meet(list(dict.fromkeys(tagged)))
    kinds = graph.kinds(x for x, _, _ in rows) if restrictions.needs_kinds else {}
    for x, i, parent in sorted(rows, key=lambda r: (r[0].value, r[1], circles.depth[r[1]].get(r[2], 1 << 30))):
        if kinds and x not in start_set and not restrictions.allows(kinds[x]):
            continue
        hops = circles.depth[i].get(parent, 1 << 30) + 1
        if hops > depth or circles.depth[i].get(x, 1 << 30) <= hops:
            continue
        if hops == 1:
            circles.touching.setdefault(x, set()).add(i)
        circles.visited.setdefault(x, None)
        circles.parent[i][x] = parent
        circles.depth[i][x] = hops
        circles.order.setdefault(x, len(circles.order))
    for x in {r[0] for r in rows}:
        for i in range(len(circles.starts)):
            if x in circles.parent[i]:
                _record_meetings(graph, circles, i, x, start_set, restrictions)


def _record_meetings(
    graph: GraphView, circles: _Circles, i: int, x: Node, start_set: set[Node], restrictions: Restrictions
) -> None:
    if graph.is_hub(x) and x not in start_set and not restrictions.cross_hubs:
        return  # reached, but a chain through the owner crosses a hub
    for j in range(len(circles.starts)):
        if j != i and x in circles.parent[j]:
            a, b = min(i, j), max(i, j)
            if (a, b, x) not in circles.met:
                circles.met.add((a, b, x))
                circles.meetings.append((circles.depth[i][x] + circles.depth[j][x], a, b, x))


def _collect(graph: GraphView, circles: _Circles, config: WaterCirclesConfig) -> tuple[list[Found], list[Path], list[str]]:
    meetings = sorted(circles.meetings, key=lambda m: (m[0], circles.order.get(m[3], -1)))[: config.primary]
    chains = [_chain(circles, i, j, x) for _, i, j, x in meetings]
    secondary_tree = circles.tree[: 4 * config.secondary + len(circles.starts)]
    pairs = [(a, b) for chain in chains for a, b in zip(chain, chain[1:], strict=False)]
    pairs += [(p, c) for _, p, c in secondary_tree]
    steps = graph.between(pairs)

    found: dict[Triple, Found] = {}
    paths: list[Path] = []
    primary = 0
    for chain, (_, i, j, _x) in zip(chains, meetings, strict=True):
        path = _path(circles.starts[i], chain, steps, goal=circles.starts[j])
        if path is None or primary >= config.primary:
            continue
        paths.append(path)
        for step in _all_steps(chain, steps):
            if primary < config.primary and step.triple not in found:
                _add(found, step.triple, "primary", path)
                primary += 1

    _fragments(graph, circles, config, found, steps)

    added = 0
    for i, parent, child in secondary_tree:
        if added >= config.secondary:
            break
        branch = circles.branch(i, child)
        path = _path(circles.starts[i], branch, steps)
        for step in steps.get((parent, child), [])[:1]:
            if step.triple not in found:
                _add(found, step.triple, "secondary", path)
                added += 1
    notes = []
    if circles.truncated:
        notes.append(f"WaterCircles: {circles.truncated} vertices reached but not expanded (max_width {config.max_width})")
    if len(circles.starts) > 1 and not circles.meetings:
        notes.append(f"WaterCircles: circles did not meet within {config.max_depth} hops of each start")
    return list(found.values()), paths, notes


def _fragments(
    graph: GraphView,
    circles: _Circles,
    config: WaterCirclesConfig,
    found: dict[Triple, Found],
    steps: dict[tuple[Node, Node], list[Step]],
) -> None:
    """Thesis and episodic vertices crossed, with the facts around them, most question entities first."""
    crossed = [v for v in circles.visited if v not in circles.starts]
    crossed.sort(key=lambda v: (-len(circles.touching.get(v, ())), _nearest(circles, v), circles.order.get(v, 0)))
    budgets = {Kind.THESIS: config.thesis_fragments, Kind.EPISODIC: config.episodic_fragments}
    picked: dict[Kind, list[Node]] = {Kind.THESIS: [], Kind.EPISODIC: []}
    for start in range(0, len(crossed), 256):  # kinds are looked up only as far down the ranking as needed
        if all(len(picked[k]) >= budgets[k] for k in budgets):
            break
        for vertex, kind in graph.kinds(crossed[start : start + 256]).items():
            if kind in picked and len(picked[kind]) < budgets[kind]:
                picked[kind].append(vertex)
    chosen = [(v, "thesis") for v in picked[Kind.THESIS]] + [(v, "episodic") for v in picked[Kind.EPISODIC]]
    if not chosen:
        return
    stars: dict[Node, list[Step]] = {}
    for step in graph.edges([v for v, _ in chosen]):
        stars.setdefault(step.source, []).append(step)
    for vertex, role in chosen:
        i = min(range(len(circles.starts)), key=lambda k: circles.depth[k].get(vertex, 1 << 30))
        branch = circles.branch(i, vertex) if vertex in circles.parent[i] else [circles.starts[i]]
        path = _path(circles.starts[i], branch, steps) if len(branch) > 1 else None
        for step in sorted(stars.get(vertex, []), key=lambda s: (s.triple.p.value, str(s.target))):
            if step.triple not in found:
                _add(found, step.triple, role, path)


def _nearest(circles: _Circles, vertex: Node) -> int:
    return min((d.get(vertex, 1 << 30) for d in circles.depth), default=1 << 30)


def _chain(circles: _Circles, i: int, j: int, vertex: Node) -> list[Node]:
    """Start i, ..., meeting vertex, ..., start j."""
    return circles.branch(i, vertex) + circles.branch(j, vertex)[::-1][1:]


def _all_steps(chain: list[Node], steps: dict[tuple[Node, Node], list[Step]]) -> list[Step]:
    return [s for a, b in zip(chain, chain[1:], strict=False) for s in steps.get((a, b), [])]


def _path(start: Node, chain: list[Node], steps: dict[tuple[Node, Node], list[Step]], goal: Node | None = None) -> Path | None:
    walked = []
    for a, b in zip(chain, chain[1:], strict=False):
        options = steps.get((a, b))
        if not options:
            return None
        walked.append(options[0])
    return Path(NAME, start, tuple(walked), goal=goal)


def _add(found: dict[Triple, Found], triple: Triple, role: str, path: Path | None) -> None:
    if triple not in found:
        found[triple] = Found(triple, role, {NAME}, path)

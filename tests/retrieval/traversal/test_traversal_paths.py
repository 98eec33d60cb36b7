"""Hops as SPARQL property paths (issue 6, item 6), and A* against a plain breadth-first search.

The hop queries write K = (p1|^p1|p2|^p2...) as a property path with the start vertices in ``VALUES``; the whole
bounded walk K/K?/K? is a template too (``reach.rq``), kept for the benchmark. On random small graphs, A* (searching
from the end with fewer facts and meeting the other end in the engine) must find paths exactly as short as a
breadth-first search over the same facts, with the same rules: the owner may be an end but is never crossed.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path

import pyoxigraph as ox
import pytest

from pcm.backend_local import LocalBackend
from pcm.layout import LEGACY_LAYOUT
from pcm.namespaces import RDFS, SCHEMA
from pcm.naming import Naming
from pcm.resources import render_query
from pcm.retrieval.traversal import AStarConfig, Restrictions, TraversalConfig, TraversalEngine
from pcm.retrieval.traversal.graph import DENIED_PREDICATES, hop_path, hop_sequence
from tests.retrieval.traversal.test_traversal import WordEmbedder

NS = "https://pcm.invalid/m/traversal-paths/"
NAMING = Naming(NS)
N = ox.NamedNode
OWNER = N(NAMING.owner)
PREDICATES = [N(SCHEMA + p) for p in ("knows", "location", "object", "participant", "brand")]
WORDS = ["red", "blue", "green", "river", "stone", "cloud", "paper", "glass", "maple", "cedar", "copper", "amber", "north", "south", "harbor", "lantern"]


# ---------------------------------------------------------------------------------------------- the query shapes
def test_k_is_a_negated_property_set_both_ways_and_the_walk_a_bounded_sequence() -> None:
    k = hop_path(DENIED_PREDICATES)
    assert k.startswith("!(") and k.endswith(")")
    for predicate in DENIED_PREDICATES:
        assert f"<{predicate}>" in k and f"^<{predicate}>" in k
    assert hop_sequence(DENIED_PREDICATES, 1) == k
    assert hop_sequence(DENIED_PREDICATES, 3) == f"{k}/({k})?/({k})?"  # SPARQL 1.1 has no {1,3}
    with pytest.raises(ValueError):
        hop_sequence(DENIED_PREDICATES, 0)


def test_the_hop_templates_take_their_starts_through_values_and_walk_k_as_a_path() -> None:
    k = hop_path(DENIED_PREDICATES)
    frontier = f"(0 <{NS}a>) (1 <{NS}b>)"
    neighbours = render_query("traversal/neighbours", frontier=frontier, k=k, non_fact="<urn:x>")
    assert f"VALUES (?tag ?from) {{ {frontier} }}" in neighbours
    assert f"GRAPH ?g {{ ?from {k} ?x }}" in neighbours
    reach = render_query("traversal/reach", frontier=frontier, path=hop_sequence(DENIED_PREDICATES, 2))
    assert f"?from {k}/({k})? ?x" in reach
    store = ox.Store()
    for query in (neighbours, reach):
        assert list(store.query(query)) == []  # Oxigraph parses both


# ---------------------------------------------------------------------------------------------- random graphs
def random_facts(seed: int, size: int = 24, edges: int = 30) -> list[ox.Quad]:
    """A sparse random graph spread over several extraction graphs, the owner touching a few vertices, and one
    superseded fact (history graph) that must never shorten a path."""
    rng = random.Random(seed)
    vertices = [N(f"{NS}v{seed}-{i}") for i in range(size)]
    graphs = [N(NAMING.extraction_graph(NAMING.post(f"p{seed}-{i}"))) for i in range(5)]
    quads = [ox.Quad(v, N(RDFS + "label"), ox.Literal(" ".join(rng.sample(WORDS, 2))), graphs[0]) for v in vertices]
    for _ in range(edges):
        a, b = rng.sample(vertices, 2)
        quads.append(ox.Quad(a, rng.choice(PREDICATES), b, rng.choice(graphs)))
    for v in rng.sample(vertices, 4):
        quads.append(ox.Quad(OWNER, PREDICATES[0], v, rng.choice(graphs)))
    a, b = rng.sample(vertices, 2)
    quads.append(ox.Quad(a, PREDICATES[1], b, N(LEGACY_LAYOUT.history)))
    return quads


def bfs_lengths(quads: list[ox.Quad], start: ox.NamedNode) -> dict[ox.NamedNode, int]:
    """Hop counts from ``start`` over the fact triples, either direction, not walking on through the owner."""
    adjacent: dict[ox.NamedNode, set[ox.NamedNode]] = {}
    for q in quads:
        if q.graph_name == N(LEGACY_LAYOUT.history) or not isinstance(q.object, ox.NamedNode):
            continue
        if q.predicate.value in DENIED_PREDICATES:
            continue
        adjacent.setdefault(q.subject, set()).add(q.object)  # type: ignore[arg-type]
        adjacent.setdefault(q.object, set()).add(q.subject)  # type: ignore[arg-type]
    distance = {start: 0}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        if v == OWNER and v != start:
            continue
        for x in adjacent.get(v, ()):
            if x not in distance:
                distance[x] = distance[v] + 1
                queue.append(x)
    return distance


@pytest.fixture(scope="module")
def graphs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TraversalEngine, dict[int, list[ox.Quad]]]]:
    facts = {seed: random_facts(seed) for seed in range(6)}
    backend = LocalBackend(Path(tmp_path_factory.mktemp("paths")) / "oxigraph")
    backend.extend([q for quads in facts.values() for q in quads])
    engine = TraversalEngine(backend, post_prefix=NAMING.post(""), hubs=(NAMING.owner,), embedder=WordEmbedder())
    yield engine, facts
    backend.close()



@pytest.fixture
def larger(tmp_path: Path) -> Iterator[tuple[LocalBackend, list[ox.NamedNode]]]:
    """Three larger random graphs in one store, and their vertices but the owner."""
    facts = [q for seed in range(3) for q in random_facts(50 + seed, size=60, edges=75)]
    backend = LocalBackend(tmp_path / "oxigraph")
    backend.extend(facts)
    yield backend, sorted({q.subject for q in facts if q.subject != OWNER}, key=lambda v: v.value)
    backend.close()


def _walks(
    backend: LocalBackend, pairs: list[tuple[ox.NamedNode, ...]], budgets: tuple[int, ...]
) -> tuple[list[object], int, int]:
    """A* between every pair at each budget (batches of two, so a search runs many): each result's paths, notes and
    passed count, and the passed counts and queries summed."""
    engine = TraversalEngine(backend, post_prefix=NAMING.post(""), hubs=(NAMING.owner,), embedder=WordEmbedder())
    seen: list[object] = []
    queries = passed = 0
    for budget in budgets:
        config = TraversalConfig(top_n=None, astar=AStarConfig(max_depth=10, max_passed_nodes=budget, expand_batch=2))
        for a, b in pairs:
            result = engine.retrieve("", [a, b], "astar", config=config, sources=False)
            seen.append(([p.vertices for p in result.paths], result.notes, result.stats.passed))
            queries, passed = queries + result.stats.queries, passed + result.stats.passed
    return seen, passed, queries


def test_reading_a_layer_ahead_changes_no_path_and_no_passed_count(
    larger: tuple[LocalBackend, list[ox.NamedNode]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A* reads the neighbours of a layer's next batches with the batch that needs them: every path, every note and
    every passed count is what one query per batch gives, in fewer queries."""
    from pcm.retrieval.traversal import astar

    backend, vertices = larger
    rng = random.Random(7)
    pairs = [tuple(rng.sample(vertices, 2)) for _ in range(40)]
    monkeypatch.setattr(astar, "PREFETCH_BATCHES", 0)
    one_each, passed_each, queries_each = _walks(backend, pairs, (40,))
    monkeypatch.setattr(astar, "PREFETCH_BATCHES", 8)
    ahead, passed_ahead, queries_ahead = _walks(backend, pairs, (40,))
    assert ahead == one_each and passed_ahead == passed_each
    assert sum(1 for paths, _, _ in one_each if paths and len(paths[0]) > 5) >= 3  # long paths were searched for
    assert queries_ahead < queries_each


def test_ending_when_a_layer_fills_the_budget_changes_no_path_and_no_passed_count(
    larger: tuple[LocalBackend, list[ox.NamedNode]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no path of four hops, A* stops as soon as the open vertices of its current layer fill
    ``max_passed_nodes`` (none of them can close a path, and none of the next layer is passed), and in a last
    layer that can close one only through the goal's ring the engine finds where (``bridges.rq``): on random
    graphs with small budgets, every path, note and passed count is what expanding that layer gives, in fewer
    queries."""
    from pcm.retrieval.traversal import astar

    backend, vertices = larger
    rng = random.Random(11)
    pairs = [tuple(rng.sample(vertices, 2)) for _ in range(60)]
    fills, last = astar._layer_fills_budget, astar._last_pops
    ended: list[bool] = []
    closed: list[bool] = []

    def counted_fills(*args: object) -> bool:
        verdict = fills(*args)  # type: ignore[arg-type]
        ended.append(verdict)
        return verdict

    def counted_last(*args: object) -> list[ox.NamedNode] | None:
        pops = last(*args)  # type: ignore[arg-type]
        closed.append(pops is not None)
        return pops

    budgets = (8, 14, 24, 40)
    monkeypatch.setattr(astar, "_closed", lambda *args: False)  # the searches that end earlier than these
    monkeypatch.setattr(astar, "_next_layer_ends", lambda *args: False)
    monkeypatch.setattr(astar, "_layer_fills_budget", lambda *args: False)
    monkeypatch.setattr(astar, "_last_pops", lambda *args: None)
    full, passed_full, queries_full = _walks(backend, pairs, budgets)
    monkeypatch.setattr(astar, "_layer_fills_budget", counted_fills)
    monkeypatch.setattr(astar, "_last_pops", counted_last)
    early, passed_early, queries_early = _walks(backend, pairs, budgets)
    assert early == full and passed_early == passed_full
    assert sum(ended) >= 5  # the budget was filled in a layer that could not close a path
    assert sum(closed) >= 5  # ... and in a layer that could, through the goal's ring
    assert any(paths for paths, _, _ in full) and queries_early < queries_full


def test_reading_both_rings_changes_no_path_and_no_passed_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where both ends' rings have few neighbours A* reads them and finds four hops, and later the vertices that
    close a path through the goal's ring, by lookup instead of ``meet.rq`` and ``bridges.rq``: every path, note and
    passed count is what the engine's joins give (denser graphs than ``larger``'s: a middle vertex has several
    parents to choose from)."""
    from pcm.retrieval.traversal import astar

    facts = [q for seed in range(3) for q in random_facts(70 + seed, size=40, edges=60)]
    backend = LocalBackend(tmp_path / "oxigraph")
    backend.extend(facts)
    vertices = sorted({q.subject for q in facts if q.subject != OWNER}, key=lambda v: v.value)
    rng = random.Random(13)
    pairs = [tuple(rng.sample(vertices, 2)) for _ in range(100)]
    met, close = astar._met, astar._close_in_engine
    found: list[bool] = []
    looked_up: list[bool] = []

    def counted_met(*args: object) -> list[ox.NamedNode] | None:
        chain = met(*args)  # type: ignore[arg-type]
        found.append(chain is not None)
        return chain

    def counted_close(*args: object) -> tuple[list[ox.NamedNode] | None, int]:
        chain, passed = close(*args)  # type: ignore[arg-type]
        if args[-1] is not None:
            looked_up.append(chain is not None)
        return chain, passed

    budgets = (8, 14, 24, 40, 500)
    monkeypatch.setattr(astar, "_closed", lambda *args: False)  # the searches that end earlier than these
    monkeypatch.setattr(astar, "_next_layer_ends", lambda *args: False)
    monkeypatch.setattr(astar, "RING_ROWS", 0)  # every ring has more: the engine's joins
    joined, passed_joined, _ = _walks(backend, pairs, budgets)
    monkeypatch.setattr(astar, "RING_ROWS", 2_000)
    monkeypatch.setattr(astar, "_met", counted_met)
    monkeypatch.setattr(astar, "_close_in_engine", counted_close)
    read, passed_read, _ = _walks(backend, pairs, budgets)
    backend.close()
    assert read == joined and passed_read == passed_joined
    assert sum(found) >= 5 and sum(not f for f in found) >= 5  # four hops found by lookup, and ruled out
    assert sum(looked_up) >= 3  # a last layer closed through the goal's ring by lookup


def test_ending_a_layer_early_when_the_next_fills_the_budget_changes_no_path_and_no_passed_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no path of four hops and both rings read, A* ends a layer before it is expanded when the engine finds
    that the next layer fills what is left of the budget and none of its vertices is next to the goal's ring: every
    path, note and passed count is what expanding both layers gives, with fewer rows read. Where the next layer
    does touch the ring (a path may close there) the layer is expanded as before."""
    from pcm.retrieval.traversal import astar

    backend, pairs = _random_pairs(tmp_path, 90, size=50, edges=80, seed=17, count=120)
    counted, verdicts = _counting(astar._next_layer_ends)
    monkeypatch.setattr(astar, "_closed", lambda *args: False)  # no search ends for a closed end here
    monkeypatch.setattr(astar, "_next_layer_ends", lambda *args: False)
    expanded, passed_expanded, _ = _walks(backend, pairs, (10, 16, 24))
    rows_expanded = _rows(backend, pairs, (10, 16, 24))
    monkeypatch.setattr(astar, "_next_layer_ends", counted)
    early, passed_early, _ = _walks(backend, pairs, (10, 16, 24))
    rows_early = _rows(backend, pairs, (10, 16, 24))
    backend.close()
    assert early == expanded and passed_early == passed_expanded
    assert sum(verdicts) >= 5  # ended a layer early
    assert any(paths for paths, _, _ in expanded) and rows_early < rows_expanded


def test_a_closed_end_ends_the_search_with_the_same_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where one end and its ring are all a walk from it reaches (every vertex next to the ring is the end, in the
    ring or the owner), no path joins the ends once none of four hops does: every path and note is what passing the
    whole budget gives, and fewer vertices are passed to find it."""
    from pcm.retrieval.traversal import astar

    backend, pairs = _random_pairs(tmp_path, 110, size=60, edges=60, seed=19, count=150)
    counted, verdicts = _counting(astar._closed)
    monkeypatch.setattr(astar, "_closed", lambda *args: False)
    searched, passed_searched, _ = _walks(backend, pairs, (40, 500))
    monkeypatch.setattr(astar, "_closed", counted)
    ended, passed_ended, _ = _walks(backend, pairs, (40, 500))
    backend.close()
    assert [(paths, notes) for paths, notes, _ in ended] == [(paths, notes) for paths, notes, _ in searched]
    assert sum(verdicts) >= 5 and not all(verdicts)
    assert any(paths for paths, _, _ in searched) and passed_ended < passed_searched


def _random_pairs(
    tmp_path: Path, first: int, *, size: int, edges: int, seed: int, count: int
) -> tuple[LocalBackend, list[tuple[ox.NamedNode, ...]]]:
    """Three random graphs (seeds ``first`` on) in one store, and ``count`` pairs of their vertices but the owner."""
    facts = [q for n in range(3) for q in random_facts(first + n, size=size, edges=edges)]
    backend = LocalBackend(tmp_path / "oxigraph")
    backend.extend(facts)
    vertices = sorted({q.subject for q in facts if q.subject != OWNER}, key=lambda v: v.value)
    rng = random.Random(seed)
    return backend, [tuple(rng.sample(vertices, 2)) for _ in range(count)]


def _counting(check: Callable[..., bool]) -> tuple[Callable[..., bool], list[bool]]:
    """``check`` as it is, with every verdict it gives kept in the list returned beside it."""
    verdicts: list[bool] = []

    def counted(*args: object) -> bool:
        verdict = check(*args)
        verdicts.append(verdict)
        return verdict

    return counted, verdicts


def _rows(backend: LocalBackend, pairs: list[tuple[ox.NamedNode, ...]], budgets: tuple[int, ...]) -> int:
    """Rows the engine shipped for A* between every pair at each budget (as :func:`_walks` runs it)."""
    engine = TraversalEngine(backend, post_prefix=NAMING.post(""), hubs=(NAMING.owner,), embedder=WordEmbedder())
    rows = 0
    for budget in budgets:
        config = TraversalConfig(top_n=None, astar=AStarConfig(max_depth=10, max_passed_nodes=budget, expand_batch=2))
        for a, b in pairs:
            rows += engine.retrieve("", [a, b], "astar", config=config, sources=False).stats.rows
    return rows


@pytest.mark.parametrize("heuristic", ["ip", "weighted_short_path"])
def test_a_star_paths_are_as_short_as_breadth_first_search(
    graphs: tuple[TraversalEngine, dict[int, list[ox.Quad]]], heuristic: str
) -> None:
    engine, facts = graphs
    config = TraversalConfig(top_n=None, astar=AStarConfig(heuristic=heuristic, max_depth=6))
    checked = {"found": 0, "none": 0}
    for seed, quads in facts.items():
        vertices = sorted({q.subject for q in quads if q.subject != OWNER}, key=lambda v: v.value)
        rng = random.Random(100 + seed)
        for a, b in [tuple(rng.sample(vertices, 2)) for _ in range(12)]:
            expected = bfs_lengths(quads, a).get(b)  # type: ignore[arg-type]
            result = engine.retrieve("", [a, b], "astar", config=config, sources=False)
            if expected is None or expected > 6:
                assert not result.paths, f"seed {seed}: {a.value} - {b.value} has no path within 6 hops"
                checked["none"] += 1
                continue
            (path,) = result.paths
            assert len(path.steps) == expected, f"seed {seed}: {a.value} - {b.value}"
            assert path.vertices[0] == a and path.vertices[-1] == b
            assert OWNER not in path.vertices[1:-1]
            checked["found"] += 1
    assert checked["found"] >= 20 and checked["none"] >= 1  # both outcomes were exercised


def test_a_star_with_the_owner_as_an_end_and_with_hubs_crossable(
    graphs: tuple[TraversalEngine, dict[int, list[ox.Quad]]],
) -> None:
    engine, facts = graphs
    quads = facts[0]
    reach = bfs_lengths(quads, OWNER)
    far = max((v for v in reach if v != OWNER), key=lambda v: (reach[v], v.value))
    result = engine.retrieve("", [OWNER, far], "astar", config=TraversalConfig(top_n=None), sources=False)
    assert len(result.paths[0].steps) == reach[far]
    crossing = TraversalConfig(top_n=None, restrictions=Restrictions(cross_hubs=True))
    vertices = sorted({q.subject for q in quads if q.subject != OWNER}, key=lambda v: v.value)
    for b in vertices[:8]:
        via_owner = engine.retrieve("", [vertices[-1], b], "astar", config=crossing, sources=False)
        plain = engine.retrieve("", [vertices[-1], b], "astar", config=TraversalConfig(top_n=None), sources=False)
        if via_owner.paths and plain.paths:
            assert len(via_owner.paths[0].steps) <= len(plain.paths[0].steps)


def test_one_sequence_path_reaches_what_the_hops_reach_and_what_they_must_not(
    graphs: tuple[TraversalEngine, dict[int, list[ox.Quad]]],
) -> None:
    """Why the walk stays one K query per hop: the sequence K/K?/K? finds the same vertices where every triple is a
    fact, but it walks the union of all graphs (a superseded fact shortens it) and goes on through the owner."""
    engine, facts = graphs
    store = engine.graph.backend
    quads = facts[1]
    history = next(q for q in quads if q.graph_name == N(LEGACY_LAYOUT.history))
    start = history.subject
    hops: set[ox.NamedNode] = {start}  # type: ignore[arg-type]
    level = {start}
    for _ in range(3):
        rows = engine.graph.neighbours([(0, v) for v in level if v != OWNER])  # type: ignore[misc]
        level = {r.vertex for r in rows} - hops
        hops |= level
    query = render_query("traversal/reach", frontier=f"(0 {start})", path=hop_sequence(DENIED_PREDICATES, 3))
    path = {row[1] for row in store.query(query).rows} | {start}  # type: ignore[union-attr]
    expected = {v for v, d in bfs_lengths(quads, start).items() if d <= 3}  # type: ignore[arg-type]
    assert hops == expected  # the hop queries walk the facts, and stop at the owner
    assert hops <= path
    assert history.object in path  # the sequence also walks the history graph
    if history.object not in expected:
        assert history.object not in hops

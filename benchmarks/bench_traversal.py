"""Traversal benchmark (issue 6): WaterCircles, BeamSearch and A* on a generated personal graph of ~1M quads.

Prints figures; asserts nothing. Run::

    python benchmarks/bench_traversal.py [--posts 40000] [--questions 60] [--store DIR] [--skip-rdflib]

The graph is laid out as pcm writes it (DESIGN.md §3): one post per utterance in the conversation graph, one
extraction graph per post holding an event, action, preference or habit (a thesis vertex) with its participants,
first-mention facts about people, places, organisations and products, and entity-to-post derivations; provenance
per extraction. Popularity is Zipf-like and every "I" statement touches the owner, as in a real memory.

For each algorithm: the latency of ``TraversalEngine.retrieve`` per question (p50/p95), cold (first time the
question's triples are embedded) and warm, not counting the question's embedding, with the share spent in SPARQL
(engine plus turning rows into Python terms). Then two rdflib baselines over the same facts, both warm (the rdflib
Graph is loaded once, outside the timings) and timed as CPU time like ours:

* the same algorithm code with its hop primitives answered by Python loops over an rdflib Graph (the exact walk);
* a plain breadth-first walk (WaterCircles' circles, A*'s shortest path) over that Graph with the same rules: the
  extraction and import graphs only, the same predicates (``rdf:type`` and names are not edges), both directions,
  literals and graph names not vertices, the owner reached but not crossed, the same depth, and for A* the same
  ``max_passed_nodes``; where it differs, it reads every neighbour where ours samples (``max_width``).

``--paths`` times the two designs of a bounded walk: one K/K?/K? property-path query against one K query per hop.
Full size (about 20 minutes, most of it embedding BeamSearch's candidates cold)::

    python benchmarks/bench_traversal.py --posts 100000 --store /tmp/pcm-trav-100k/oxigraph --paths
    python benchmarks/bench_traversal.py --posts 40000 --store /tmp/pcm-trav-40k/oxigraph --paths
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import pyoxigraph as ox

from pcm.backend_local import LocalBackend
from pcm.conversations import Utterance
from pcm.layout import LEGACY_LAYOUT
from pcm.namespaces import PCM, PROV, RDF, RDFS, SCHEMA
from pcm.naming import Naming
from pcm.ontology import load_ontology
from pcm.provenance import Activity, activity_quads, post_quads
from pcm.retrieval.traversal import Kind, TraversalConfig, TraversalEngine
from pcm.retrieval.traversal.graph import (
    DENIED_PREDICATES,
    EPISODIC_LINK,
    THESIS_ROOTS,
    GraphView,
    Neighbour,
)
from pcm.retrieval.traversal.model import Node, Stats, Step, Triple

NS = "https://pcm.invalid/m/bench-traversal/"
N = ox.NamedNode
A = N(RDF + "type")
LABEL = N(RDFS + "label")
FIRST = ["Ana", "Ben", "Chen", "Dara", "Eli", "Farah", "Gus", "Hana", "Ivo", "Jun", "Kai", "Lena", "Milo", "Nia", "Omar", "Pia", "Quinn", "Rosa", "Sami", "Tara", "Uma", "Vic", "Wen", "Yara", "Zoe"]
LAST = ["Novak", "Ortiz", "Patel", "Quist", "Ruiz", "Silva", "Tanaka", "Umar", "Varga", "Weber", "Xu", "Young", "Zeman", "Abbott", "Baker", "Costa", "Diaz", "Evans", "Fox", "Grant"]
CITIES = ["Portland", "Salem", "Eugene", "Bend", "Seattle", "Tacoma", "Boise", "Spokane", "Reno", "Sacramento", "Denver", "Austin", "Chicago", "Boston"]
PLACE_KINDS = ["park", "cafe", "gym", "library", "beach", "trail", "market", "museum", "clinic", "school"]
ORG_KINDS = ["Bikes", "Auto Repair", "Outfitters", "Books", "Coffee", "Dental", "Hardware", "Pharmacy", "Labs"]
PRODUCT_KINDS = ["bike", "laptop", "jacket", "espresso machine", "tent", "phone", "guitar", "camera", "kettle", "drill"]
COLORS = ["red", "blue", "green", "black", "white", "grey"]
PUBLISHED = {  # PersonalAI (arXiv 2506.17001): minutes per question, end to end
    "wc": "WaterCircles 0.14–0.46 min/question (LLM entity extraction, Neo4j walk and LLM answer included)",
    "bs": "BeamSearch 5–8.7 min/question (LLM calls, embedding every candidate triple, Neo4j walk included)",
    "astar": "A*: not reported separately in minutes",
}


# ------------------------------------------------------------------------------------------------ the graph
@dataclass
class World:
    naming: Naming
    labels: dict[Node, str] = field(default_factory=dict)
    theses: list[tuple[Node, list[Node], str]] = field(default_factory=list)
    """(thesis vertex, its non-owner participants, a question about it)."""
    quads: int = 0


def _entities(rng: random.Random, naming: Naming) -> dict[str, list[tuple[Node, str, str]]]:
    """(vertex, label, class) per kind."""
    def people(n: int) -> list[tuple[Node, str, str]]:
        return [(N(f"{NS}person-{i}"), f"{FIRST[i % 25]} {LAST[(i // 25) % 20]} {i // 500 or ''}".strip(), SCHEMA + "Person") for i in range(n)]

    return {
        "person": people(3000),
        "place": [(N(f"{NS}place-{i}"), f"{CITIES[i % 14]} {PLACE_KINDS[(i // 14) % 10]} {i // 140}", SCHEMA + "Place") for i in range(1500)],
        "org": [(N(f"{NS}org-{i}"), f"{LAST[i % 20]} {ORG_KINDS[(i // 20) % 9]} {i // 180}", SCHEMA + "Organization") for i in range(1000)],
        "product": [(N(f"{NS}product-{i}"), f"{COLORS[i % 6]} {LAST[(i // 6) % 20]} {PRODUCT_KINDS[(i // 120) % 10]} {i // 1200}", SCHEMA + "Product") for i in range(4000)],
    }


def generate(posts: int, seed: int = 11) -> tuple[World, Iterable[ox.Quad]]:
    rng = random.Random(seed)
    naming = Naming(NS)
    world = World(naming)
    ents = _entities(rng, naming)
    weights = {k: [1.0 / (i + 1) ** 0.7 for i in range(len(v))] for k, v in ents.items()}
    owner = N(naming.owner)
    world.labels[owner] = "Dana"

    def pick(kind: str) -> tuple[Node, str, str]:
        return rng.choices(ents[kind], weights[kind])[0]

    def quads() -> Iterable[ox.Quad]:
        conv = N("urn:pcm:graph:conversation")
        yield ox.Quad(owner, A, N(PCM + "MemoryOwner"), conv)
        yield ox.Quad(owner, LABEL, ox.Literal("Dana"), conv)
        introduced: set[Node] = set()
        previous: str | None = None
        t0 = datetime(2023, 1, 1, 9, 0)
        for i in range(posts):
            when = t0 + timedelta(hours=3 * i)
            kind = rng.choice(["buy", "travel", "event", "repair", "pref", "habit"])
            facts, participants, text, question = _thesis(rng, i, kind, owner, pick, when)
            u = Utterance(session=f"s{i // 30}", position=i % 30, role="user", content=text, timestamp=when,
                          source_id=f"m{i}")
            ref, conv_quads = post_quads(naming, u, previous if i % 30 else None)
            previous = ref.iri
            yield from conv_quads
            graph = N(ref.graph)
            yield from activity_quads(naming, Activity("extraction", when, model="bench"), ref.graph, ref.iri)
            mentioned: list[Node] = []
            for s, p, o in facts:
                yield ox.Quad(s, p, o, graph)
                if s != owner and s not in mentioned:
                    mentioned.append(s)
            for v, label, cls in participants:
                world.labels[v] = label
                if v not in mentioned:
                    mentioned.append(v)
                if v not in introduced:
                    introduced.add(v)
                    for q in _first_mention(rng, v, label, cls, pick):
                        yield ox.Quad(*q, graph)
            for v in mentioned:
                yield ox.Quad(v, N(PROV + "wasDerivedFrom"), N(ref.iri), graph)
            thesis = facts[0][0]
            world.theses.append((thesis, [v for v, _, _ in participants], question))

    def counted() -> Iterable[ox.Quad]:
        for q in quads():
            world.quads += 1
            yield q

    return world, counted()


def _thesis(rng, i, kind, owner, pick, when):  # type: ignore[no-untyped-def]
    """The facts of one utterance: one thesis vertex with its participants."""
    t = N(f"{NS}{kind}-{i}")
    date = ox.Literal(when.date().isoformat(), datatype=N("http://www.w3.org/2001/XMLSchema#date"))
    s = SCHEMA
    if kind == "buy":
        product, seller = pick("product"), pick("org")
        facts = [(t, A, N(s + "BuyAction")), (t, LABEL, ox.Literal(f"buying the {product[1]}")),
                 (t, N(s + "agent"), owner), (t, N(s + "object"), product[0]), (t, N(s + "seller"), seller[0]),
                 (t, N(s + "price"), ox.Literal(str(rng.randrange(5, 900)))), (t, N(s + "startDate"), date)]
        return facts, [product, seller], f"I bought the {product[1]} at {seller[1]}.", f"Where did I buy the {product[1]}?"
    if kind == "travel":
        place, friend = pick("place"), pick("person")
        facts = [(t, A, N(s + "TravelAction")), (t, LABEL, ox.Literal(f"trip to {place[1]}")),
                 (t, N(s + "agent"), owner), (t, N(s + "toLocation"), place[0]), (t, N(s + "participant"), friend[0]),
                 (t, N(s + "startDate"), date)]
        return facts, [place, friend], f"I went to {place[1]} with {friend[1]}.", f"Who came with me to {place[1]}?"
    if kind == "event":
        a, b, place = pick("person"), pick("person"), pick("place")
        facts = [(t, A, N(s + "SocialEvent")), (t, LABEL, ox.Literal(f"party at {place[1]}")),
                 (t, N(s + "attendee"), owner), (t, N(s + "attendee"), a[0]), (t, N(s + "attendee"), b[0]),
                 (t, N(s + "location"), place[0]), (t, N(s + "startDate"), date)]
        return facts, [a, b, place], f"{a[1]} and {b[1]} came to the party at {place[1]}.", f"Who was at the party at {place[1]}?"
    if kind == "repair":
        product, shop = pick("product"), pick("org")
        facts = [(t, A, N(PCM + "RepairAction")), (t, LABEL, ox.Literal(f"repairing the {product[1]}")),
                 (t, N(s + "agent"), owner), (t, N(s + "object"), product[0]), (t, N(s + "provider"), shop[0]),
                 (t, N(s + "price"), ox.Literal(str(rng.randrange(20, 700)))), (t, N(s + "startDate"), date)]
        return facts, [product, shop], f"{shop[1]} fixed my {product[1]}.", f"Who repaired my {product[1]}?"
    if kind == "pref":
        thing = pick(rng.choice(["product", "place", "org"]))
        facts = [(t, A, N(PCM + "Preference")), (t, LABEL, ox.Literal(f"liking {thing[1]}")),
                 (owner, N(PCM + "hasPreference"), t), (t, N(PCM + "preferenceFor"), thing[0]),
                 (t, N(PCM + "polarity"), ox.Literal(rng.choice(["positive", "negative"])))]
        return facts, [thing], f"I really like {thing[1]}.", f"What do I think of {thing[1]}?"
    place, friend = pick("place"), pick("person")
    facts = [(t, A, N(PCM + "Habit")), (t, LABEL, ox.Literal(f"running at {place[1]}")),
             (owner, N(PCM + "hasHabit"), t), (t, N(s + "location"), place[0]), (t, N(s + "participant"), friend[0])]
    return facts, [place, friend], f"I run at {place[1]} with {friend[1]} every week.", f"Where do I run with {friend[1]}?"


def _first_mention(rng, v, label, cls, pick):  # type: ignore[no-untyped-def]
    s = SCHEMA
    yield (v, A, N(cls))
    yield (v, LABEL, ox.Literal(label))
    if cls == s + "Person":
        yield (v, N(s + "knows"), pick("person")[0])
        yield (v, N(s + "worksFor"), pick("org")[0])
        yield (v, N(s + "homeLocation"), pick("place")[0])
    elif cls == s + "Product":
        yield (v, N(s + "brand"), pick("org")[0])
        yield (v, N(s + "color"), ox.Literal(label.split()[0]))
    elif cls == s + "Organization":
        yield (v, N(s + "location"), pick("place")[0])
    elif cls == s + "Place":
        yield (v, N(s + "containedInPlace"), N(f"{NS}place-{rng.randrange(14)}"))


def build_store(directory: Path, posts: int) -> World:
    world, quads = generate(posts)
    backend = LocalBackend(directory)
    started = time.perf_counter()
    backend.store.bulk_extend(load_ontology().quads())
    batch: list[ox.Quad] = []
    for q in quads:
        batch.append(q)
        if len(batch) >= 200_000:
            backend.store.bulk_extend(batch)
            batch = []
    backend.store.bulk_extend(batch)
    backend.store.optimize()
    backend.close()
    print(f"generated and loaded {world.quads:,} quads ({posts:,} utterances) in {time.perf_counter() - started:.1f} s")
    return world


# ------------------------------------------------------------------------------------------------ questions
@dataclass(frozen=True)
class Question:
    text: str
    starts: tuple[Node, ...]
    shape: str


def questions(world: World, count: int, seed: int = 5) -> list[Question]:
    """A third each: two entities of one event (2 hops apart), two entities of different events sharing one
    (up to 4 hops), and one entity alone."""
    rng = random.Random(seed)
    by_member: dict[Node, list[int]] = {}
    for i, (_, members, _) in enumerate(world.theses):
        for v in members:
            by_member.setdefault(v, []).append(i)
    out: list[Question] = []
    while len(out) < count:
        thesis, members, question = world.theses[rng.randrange(len(world.theses))]
        shape = ("pair", "far", "single")[len(out) % 3]
        if shape == "pair" and len(members) >= 2:
            out.append(Question(question, (members[0], members[1]), shape))
        elif shape == "far" and members:
            hub = members[-1]
            other = world.theses[rng.choice(by_member[hub])][1]
            far = next((v for v in other if v not in members), None)
            if far is not None:
                out.append(Question(f"{question} And {world.labels[far]}?", (members[0], far), shape))
        elif shape == "single" and members:
            out.append(Question(question, (members[0],), shape))
    return out


# ------------------------------------------------------------------------------------------------ rdflib baseline
class RdflibGraphView(GraphView):
    """The same hop primitives as :class:`GraphView`, written as a plain Python walk over an rdflib Graph."""

    def __init__(self, graph, post_prefix: str, hubs: Sequence[str], thesis: set[str]) -> None:  # type: ignore[no-untyped-def]
        super().__init__(None, post_prefix=post_prefix, hubs=hubs)  # type: ignore[arg-type]
        import rdflib

        self.g = graph
        self.rdflib = rdflib
        self.denied = {rdflib.URIRef(p) for p in DENIED_PREDICATES}
        self.thesis_classes = {rdflib.URIRef(c) for c in thesis}
        self.rdf_type = rdflib.URIRef(RDF + "type")

    def restrict(self, *, episodic_edges: bool) -> None:
        import rdflib

        base = {rdflib.URIRef(p) for p in DENIED_PREDICATES}
        self.denied = base if episodic_edges else base | {rdflib.URIRef(EPISODIC_LINK)}

    def _ox(self, term):  # type: ignore[no-untyped-def]
        if isinstance(term, self.rdflib.URIRef):
            return ox.NamedNode(str(term))
        if isinstance(term, self.rdflib.Literal):
            return ox.Literal(str(term))
        return None

    def _is_thesis(self, x) -> bool:  # type: ignore[no-untyped-def]
        return any(c in self.thesis_classes for c in self.g.objects(x, self.rdf_type))

    def _around(self, v):  # type: ignore[no-untyped-def]
        return self.around_raw(self.rdflib.URIRef(v.value))

    def around_raw(self, u):  # type: ignore[no-untyped-def]
        for _, p, o in self.g.triples((u, None, None)):
            if p not in self.denied:
                yield p, o, True
        for s, p, _ in self.g.triples((None, None, u)):
            if p not in self.denied:
                yield p, s, False

    def neighbours(self, frontier):  # type: ignore[no-untyped-def]
        seen: dict[tuple[int, object], Node] = {}
        for tag, v in frontier:
            for _, x, _ in self._around(v):
                if isinstance(x, self.rdflib.URIRef) and (tag, x) not in seen:
                    seen[(tag, x)] = v
        self.stats.queries += 1
        out = []
        for (tag, x), parent in seen.items():
            node = ox.NamedNode(str(x))
            if self.walkable(node):
                out.append(Neighbour(tag, node, parent))
        return out

    def _read_edges(self, vertices):  # type: ignore[no-untyped-def]
        self.stats.queries += 1
        out = {}
        for v in vertices:
            steps = []
            for p, x, forward in self._around(v):
                pn, xn = ox.NamedNode(str(p)), self._ox(x)
                if isinstance(xn, ox.Literal):
                    steps.append(Step(Triple(v, pn, xn), True))
                elif xn is not None and self.walkable(xn):
                    steps.append(Step(Triple(v, pn, xn) if forward else Triple(xn, pn, v), forward))
            out[v] = steps
        return out

    def _parts(self, v, limit, literals=True):  # type: ignore[no-untyped-def]
        """around.rq (no literals) / edges_sample.rq: up to ``limit`` of each of the four kinds of triple."""
        taken = {(True, False): 0, (False, False): 0, (True, True): 0, (False, True): 0}
        for p, x, forward in self._around(v):
            part = (forward, str(p) == EPISODIC_LINK)
            if taken[part] < limit and (literals or isinstance(x, self.rdflib.URIRef)):
                taken[part] += 1
                yield p, x, forward

    def _sample(self, vertex, cap):  # type: ignore[no-untyped-def]
        self.stats.queries += 1
        out = []
        for p, x, forward in self._parts(vertex, cap):
            pn, xn = ox.NamedNode(str(p)), self._ox(x)
            if isinstance(xn, ox.Literal):
                out.append(Step(Triple(vertex, pn, xn), True))
            elif xn is not None and self.walkable(xn):
                out.append(Step(Triple(vertex, pn, xn) if forward else Triple(xn, pn, vertex), forward))
        return out

    def around(self, vertex, limit):  # type: ignore[no-untyped-def]
        self.stats.queries += 1
        seen = {}
        for _, x, _ in self._parts(vertex, limit, literals=False):
            if isinstance(x, self.rdflib.URIRef):
                seen.setdefault(ox.NamedNode(str(x)), None)
        return [x for x in seen if self.walkable(x)]

    def meet(self, frontier):  # type: ignore[no-untyped-def]
        self.stats.queries += 1
        reached: dict[object, list[tuple[int, Node]]] = {}
        for tag, v in frontier:
            for _, x, _ in self._around(v):
                if isinstance(x, self.rdflib.URIRef):
                    reached.setdefault(x, []).append((tag, v))
        out = []
        for x, via in reached.items():
            if len({tag for tag, _ in via}) > 1:
                node = ox.NamedNode(str(x))
                if self.walkable(node):
                    out.extend((node, tag, parent) for tag, parent in dict.fromkeys(via))
        return out

    def bridges(self, firsts, goal):  # type: ignore[no-untyped-def]
        self.stats.queries += 1
        near_goal = {x for _, x, _ in self.around_raw(self.rdflib.URIRef(goal.value))
                     if isinstance(x, self.rdflib.URIRef)}
        out = []
        for a in dict.fromkeys(firsts):
            for _, x, _ in self._around(a):
                if x in near_goal:
                    node = ox.NamedNode(str(x))
                    if self.walkable(node):
                        out.append((a, node))
        return list(dict.fromkeys(out))

    def _probe(self, vertices):  # type: ignore[no-untyped-def]
        for v in vertices:
            self._degree[v] = sum(1 for _ in self._around(v))

    def kinds(self, vertices):  # type: ignore[no-untyped-def]
        out = {}
        for v in vertices:
            if v not in self._kinds:
                if v.value.startswith(self.post_prefix):
                    self._kinds[v] = Kind.EPISODIC
                else:
                    thesis = self._is_thesis(self.rdflib.URIRef(v.value))
                    self._kinds[v] = Kind.THESIS if thesis else Kind.OBJECT
            out[v] = self._kinds[v]
        return out

    def between(self, pairs):  # type: ignore[no-untyped-def]
        out: dict[tuple[Node, Node], list[Step]] = {}
        for a, b in dict.fromkeys(pairs):
            ua, ub = self.rdflib.URIRef(a.value), self.rdflib.URIRef(b.value)
            for p in self.g.predicates(ua, ub):
                if p not in self.denied:
                    out.setdefault((a, b), []).append(Step(Triple(a, ox.NamedNode(str(p)), b), True))
            for p in self.g.predicates(ub, ua):
                if p not in self.denied:
                    out.setdefault((a, b), []).append(Step(Triple(b, ox.NamedNode(str(p)), a), False))
        return out

    def labels(self, vertices):  # type: ignore[no-untyped-def]
        out = {}
        for v in vertices:
            if v not in self._labels:
                label = next(iter(self.g.objects(self.rdflib.URIRef(v.value), self.rdflib.RDFS.label)), None)
                self._labels[v] = str(label) if label is not None else v.value.rsplit("/", 1)[-1]
            out[v] = self._labels[v]
        return out


class PlainBFS:
    """The walks written the plain way: Python over an rdflib Graph, each vertex's facts read in full, circle by
    circle (WaterCircles) or layer by layer until the goal (a shortest path), with the same walking rules
    (predicates not walked, literals and graph names not vertices, the owner reached but not crossed)."""

    def __init__(self, view: RdflibGraphView) -> None:
        self.view = view
        self.rdflib = view.rdflib
        self.hubs = {self.rdflib.URIRef(h.value) for h in view.hubs}

    def _neighbours(self, v):  # type: ignore[no-untyped-def]
        for _, x, _ in self.view.around_raw(v):
            if isinstance(x, self.rdflib.URIRef) and not str(x).startswith("urn:pcm:graph:"):
                yield x

    def water_circles(self, starts: Sequence[Node], depth: int, primary: int, secondary: int) -> int:
        """Circles from every start, full neighbourhoods; meetings give chains; returns the triples collected."""
        roots = [self.rdflib.URIRef(s.value) for s in starts]
        parent = [{r: None} for r in roots]
        frontier = [[r] for r in roots]
        meetings = []
        tree = []
        for _ in range(depth):
            for i in range(len(roots)):
                nxt = []
                for v in frontier[i]:
                    if v in self.hubs and v != roots[i]:
                        continue
                    for x in self._neighbours(v):
                        if x not in parent[i]:
                            parent[i][x] = v
                            nxt.append(x)
                            tree.append((v, x))
                            meetings += [(i, j, x) for j in range(len(roots)) if j != i and x in parent[j]]
                frontier[i] = nxt
        triples = set()
        for i, j, x in meetings[:primary]:
            for side in (i, j):
                v = x
                while parent[side][v] is not None:
                    u = parent[side][v]
                    triples.update(self._between(u, v))
                    v = u
        for u, v in tree[:secondary]:
            triples.update(self._between(u, v))
        thesis = [x for x in parent[0] if self.view._is_thesis(x)][:15]
        for t in thesis:
            triples.update((t, p, o) for _, p, o in self.view.g.triples((t, None, None)))
        return len(triples)

    def _between(self, u, v):  # type: ignore[no-untyped-def]
        out = [(u, p, v) for p in self.view.g.predicates(u, v)]
        return out + [(v, p, u) for p in self.view.g.predicates(v, u)]

    def shortest_path(self, a: Node, b: Node, max_depth: int, max_passed: int) -> int | None:
        """Breadth-first from a until b, within max_depth hops and max_passed expanded vertices (A*'s bounds);
        the path length or None."""
        start, goal = self.rdflib.URIRef(a.value), self.rdflib.URIRef(b.value)
        parent = {start: None}
        frontier = [start]
        passed = 0
        for depth in range(1, max_depth + 1):
            nxt = []
            for v in frontier:
                if v in self.hubs and v != start:
                    continue
                passed += 1
                if passed > max_passed:
                    return None
                for x in self._neighbours(v):
                    if x not in parent:
                        parent[x] = v
                        if x == goal:
                            return depth
                        nxt.append(x)
            frontier = nxt
        return None


def plain_timings(plain: PlainBFS, qs: Sequence[Question], name: str, config: TraversalConfig) -> list[float]:
    """CPU ms per question of the plain walk that does what ``name`` does (the second of two runs, like ours)."""
    out: list[float] = []
    for q in [*qs, *qs]:
        if len(out) == len(qs):
            out.clear()
        before = time.process_time()
        if name == "wc":
            plain.water_circles(q.starts, config.wc.max_depth, config.wc.primary, config.wc.secondary)
        elif name == "astar":
            for i, a in enumerate(q.starts):
                for b in q.starts[i + 1 :]:
                    plain.shortest_path(a, b, config.astar.max_depth, config.astar.max_passed_nodes)
        out.append((time.process_time() - before) * 1000)
    return out


def rdflib_facts(store_dir: Path):  # type: ignore[no-untyped-def]
    import rdflib

    backend = LocalBackend(store_dir, read_only=True)
    graph = rdflib.Graph()
    for q in backend.store.quads_for_pattern(None, None, None, None):
        g = q.graph_name.value if isinstance(q.graph_name, ox.NamedNode) else ""
        if not (g.startswith("urn:pcm:graph:extraction:") or g.startswith("urn:pcm:graph:import:")):
            continue
        o = q.object
        obj = rdflib.URIRef(o.value) if isinstance(o, ox.NamedNode) else rdflib.Literal(o.value)
        graph.add((rdflib.URIRef(q.subject.value), rdflib.URIRef(q.predicate.value), obj))
    thesis = {
        r[0].value
        for r in backend.store.query(
            "SELECT DISTINCT ?c WHERE { VALUES ?root { " + " ".join(f"<{t}>" for t in THESIS_ROOTS) + " } "
            f"GRAPH <{LEGACY_LAYOUT.ontology}> {{ ?c <{RDFS}subClassOf>* ?root }} }}"
        )
    }
    backend.close()
    return graph, thesis


# ------------------------------------------------------------------------------------------------ measuring
def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


CPU: list[float] = []
"""CPU time of the last ``timed`` run, per question (ms): on a shared machine, wall time also counts waiting."""
SPARQL: list[float] = []
"""Of the last ``timed`` run's wall time, the part spent in SPARQL queries (engine plus turning rows into Python
terms), per question (ms); the rest is the algorithm's own Python (bookkeeping, verbalising, vectors)."""


def timed(engine: TraversalEngine, qs: Sequence[Question], algorithm: str, config: TraversalConfig) -> tuple[list[float], list[Stats]]:
    latencies, stats = [], []
    CPU.clear()
    SPARQL.clear()
    for q in qs:
        before = time.process_time()
        sparql_before = engine.graph.stats.ms
        result = engine.retrieve(q.text, list(q.starts), algorithm, config=config, sources=False)
        CPU.append((time.process_time() - before) * 1000)
        SPARQL.append(engine.graph.stats.ms - sparql_before)
        latencies.append(result.stats.ms)
        stats.append(result.stats)
    return latencies, stats


def summary(values: Sequence[float]) -> str:
    return f"p50 {percentile(values, 0.5):7.1f} ms   p95 {percentile(values, 0.95):7.1f} ms   max {max(values):7.1f} ms"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--posts", type=int, default=40_000, help="utterances to generate (40k gives ~1M quads)")
    parser.add_argument("--questions", type=int, default=60)
    parser.add_argument("--store", type=Path, default=None, help="keep the generated store here (reused if present)")
    parser.add_argument("--skip-rdflib", action="store_true", help="skip the rdflib baseline (its load takes a minute)")
    parser.add_argument("--algorithms", default="wc,astar,bs")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    parser.add_argument("--paths", action="store_true",
                        help="also time the same 2- and 3-hop reach written as property paths K/K? and K/K/K?")
    args = parser.parse_args(argv)

    workdir = Path(tempfile.mkdtemp(prefix="pcm-bench-traversal-"))
    store_dir = args.store or workdir / "oxigraph"
    world_file = store_dir.with_suffix(".world.json")
    if store_dir.exists() and world_file.exists():
        world = _load_world(world_file)
        print(f"reusing {store_dir} ({world.quads:,} quads)")
    else:
        world = build_store(store_dir, args.posts)
        _save_world(world, world_file)
    qs = questions(world, args.questions)
    _WORLD[:] = [world]
    from pcm.index import get_embedder

    embedder = get_embedder()
    started = time.perf_counter()
    embedder.encode(["warm up the model"])
    print(f"embedding model loaded in {time.perf_counter() - started:.1f} s")
    naming = Naming(NS)
    backend = LocalBackend(store_dir, read_only=True)
    engine = TraversalEngine(backend, post_prefix=naming.post(""), hubs=(naming.owner, naming.assistant), embedder=embedder)
    config = TraversalConfig(top_n=None)
    figures: dict[str, dict[str, object]] = {}
    algorithms = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    print(f"\n{len(qs)} questions ({', '.join(sorted({q.shape for q in qs}))} start sets), triples filter off\n")
    for name in algorithms:
        cold, cold_stats = timed(engine, qs, name, config)
        warm, warm_stats = timed(engine, qs, name, config)
        warm_cpu = list(CPU)
        sparql_share = sum(SPARQL) / max(sum(warm), 1e-9)
        found = [len(engine.retrieve(q.text, list(q.starts), name, config=config, sources=False).found) for q in qs[:10]]
        figures[name] = {
            "cold_p50_ms": percentile(cold, 0.5), "cold_p95_ms": percentile(cold, 0.95),
            "warm_p50_ms": percentile(warm, 0.5), "warm_p95_ms": percentile(warm, 0.95),
            "warm_cpu_p50_ms": percentile(warm_cpu, 0.5), "warm_cpu_p95_ms": percentile(warm_cpu, 0.95),
            "queries_mean": statistics.mean(s.queries for s in warm_stats),
            "rows_mean": statistics.mean(s.rows for s in warm_stats),
            "embedded_cold": sum(s.embedded for s in cold_stats),
            "warm_sparql_share": sparql_share,
            "triples_mean": statistics.mean(found),
        }
        print(f"{name:6s} cold  {summary(cold)}   embedded {figures[name]['embedded_cold']:,} texts")
        print(f"{name:6s} warm  {summary(warm)}   SPARQL queries/question {figures[name]['queries_mean']:.1f}, "
              f"rows {figures[name]['rows_mean']:.0f}, triples returned {figures[name]['triples_mean']:.0f}")
        print(f"{name:6s} warm CPU time {summary(warm_cpu)}   in SPARQL (engine + rows to Python) {sparql_share:.0%}")
    filtered = TraversalConfig(top_n=30)
    timed(engine, qs, "wc", filtered)  # embeds the found triples' texts once
    wall, _ = timed(engine, qs, "wc", filtered)
    print(f"wc+filter warm {summary(wall)}   (verbalise + rank by similarity, top 30)")
    figures["wc_with_filter"] = {"warm_p95_ms": percentile(wall, 0.95)}

    if not args.skip_rdflib:
        started = time.perf_counter()
        graph, thesis = rdflib_facts(store_dir)
        print(f"\nrdflib baseline: {len(graph):,} fact triples loaded in {time.perf_counter() - started:.1f} s")
        baseline = TraversalEngine(backend, post_prefix=naming.post(""), hubs=(naming.owner, naming.assistant),
                                   embedder=embedder)
        baseline.graph = RdflibGraphView(graph, naming.post(""), (naming.owner, naming.assistant), thesis)
        baseline.verbaliser.graph = baseline.graph
        baseline._vectors = engine.vectors  # same vector cache: only the walk differs
        plain_walk = PlainBFS(baseline.graph)  # type: ignore[arg-type]
        print("CPU time per question (ms); ratio = baseline / pcm, above 1 means pcm is faster")
        for name in algorithms:
            timed(engine, qs, name, config)
            ours_cpu = list(CPU)
            timed(baseline, qs, name, config)  # warm its label cache like the engine's
            timed(baseline, qs, name, config)
            same_cpu = list(CPU)
            same = percentile(same_cpu, 0.5) / max(percentile(ours_cpu, 0.5), 1e-6)
            figures[name].update({"pcm_cpu_p50_ms": percentile(ours_cpu, 0.5), "pcm_cpu_p95_ms": percentile(ours_cpu, 0.95),
                                  "same_walk_rdflib_cpu_p50_ms": percentile(same_cpu, 0.5),
                                  "same_walk_rdflib_cpu_p95_ms": percentile(same_cpu, 0.95), "ratio_same_walk_p50": same})
            print(f"{name:6s} pcm (SPARQL)              {summary(ours_cpu)}")
            print(f"{name:6s} same algorithm on rdflib  {summary(same_cpu)}   ratio p50 {same:.2f}")
            if name in ("wc", "astar"):
                plain_cpu = plain_timings(plain_walk, qs, name, config)
                ratio = percentile(plain_cpu, 0.5) / max(percentile(ours_cpu, 0.5), 1e-6)
                ratio95 = percentile(plain_cpu, 0.95) / max(percentile(ours_cpu, 0.95), 1e-6)
                figures[name].update({"plain_bfs_cpu_p50_ms": percentile(plain_cpu, 0.5),
                                      "plain_bfs_cpu_p95_ms": percentile(plain_cpu, 0.95),
                                      "ratio_plain_bfs_p50": ratio, "ratio_plain_bfs_p95": ratio95})
                print(f"{name:6s} plain BFS on rdflib       {summary(plain_cpu)}   ratio p50 {ratio:.1f}, p95 {ratio95:.1f}")

    print("\nPer question, side by side (what each figure includes differs):")
    for name in algorithms:
        ours = figures[name]
        print(f"  pcm {name:5s} warm p95 {ours['warm_p95_ms']:7.1f} ms wall, {ours['warm_cpu_p95_ms']:7.1f} ms CPU   "
              f"| PersonalAI: {PUBLISHED[name]}")
    print("pcm: the traversal alone (SPARQL hops + Python), triples' vectors from the cache when warm; no LLM call,")
    print("no question embedding (matching the start vertices happens before, in the side index).")
    if args.paths:
        figures["property_paths"] = property_paths(store_dir, engine, qs)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    engine.close()
    backend.close()


def property_paths(store_dir: Path, engine: TraversalEngine, qs: Sequence[Question]) -> dict[str, object]:
    """The two designs of a bounded walk, timed on the same starts: the whole reach as ONE property-path sequence
    K/K? or K/K?/K? (``queries/traversal/reach.rq``, over the union graph, since a path cannot check the graph of
    each step) against one K query per hop (``neighbours.rq``, graphs checked, the owner reached but not crossed).

    Oxigraph evaluates a sequence path as a join of its steps without removing duplicate intermediate vertices, so
    the work grows with the number of walks, not of vertices; the hop-by-hop form deduplicates every round.
    """
    import multiprocessing

    from pcm.resources import render_query
    from pcm.retrieval.traversal.graph import DENIED_PREDICATES, hop_sequence

    backend = LocalBackend(store_dir, read_only=True)

    def reach(start: Node, depth: int) -> str:
        return render_query("traversal/reach", frontier=f"(0 {start})", path=hop_sequence(DENIED_PREDICATES, depth))

    print("\nproperty paths: one K/K?(/K?) query (reach.rq) against one K query per hop (neighbours.rq)")
    out: dict[str, object] = {}
    singles = [q for q in qs if q.shape == "single"][:5]
    for q in singles:
        start = q.starts[0]
        list(backend.store.query(reach(start, 2), use_default_graph_as_union=True))  # warm both, like the others
        started = time.perf_counter()
        reached = {r[1] for r in backend.store.query(reach(start, 2), use_default_graph_as_union=True)}
        path_ms = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        level1 = {r.vertex for r in engine.graph.neighbours([(0, start)])}
        level2 = {r.vertex for r in engine.graph.neighbours([(0, v) for v in level1 if not engine.graph.is_hub(v)])}
        hop_ms = (time.perf_counter() - started) * 1000
        print(f"  2 hops from {start.value.rsplit('/', 1)[-1]:14s}: K/K? {path_ms:8.1f} ms ({len(reached)} vertices)   "
              f"two hop queries {hop_ms:6.1f} ms ({len(level1 | level2)} vertices)")
        out[start.value] = {"k_k_ms": path_ms, "hops_ms": hop_ms}
    thesis = next(t for t, members, _ in world_theses(qs) if "buy-" in t.value)
    started = time.perf_counter()
    level, reached_all = {thesis}, {thesis}
    for _ in range(3):  # our rules: the owner is reached, not crossed
        level = {r.vertex for r in engine.graph.neighbours([(0, v) for v in level if not engine.graph.is_hub(v)])}
        level -= reached_all
        reached_all |= level
    hops3 = (time.perf_counter() - started) * 1000
    name = thesis.value.rsplit("/", 1)[-1]
    print(f"  3 hops from the purchase {name}: three hop queries {hops3:.0f} ms ({len(reached_all)} vertices)")
    out["hops3_ms"] = hops3
    child = multiprocessing.Process(target=_count, args=(str(store_dir), reach(thesis, 3)))
    started = time.perf_counter()
    child.start()
    child.join(60)
    if child.is_alive():
        child.terminate()
        child.join()
        out["k_k_k_ms"] = None
        print(f"  3 hops as K/K?/K? from {name}: stopped after 60 s")
    else:
        out["k_k_k_ms"] = (time.perf_counter() - started) * 1000
        print(f"  3 hops as K/K?/K? from {name}: {out['k_k_k_ms']:.0f} ms (a path cannot leave the owner out: "
              "every purchase is two hops away through it)")
    backend.close()
    return out


def world_theses(qs: Sequence[Question]) -> list[tuple[Node, list[Node], str]]:
    """Thesis vertices of the questions' world (set by ``main``)."""
    return _WORLD[0].theses if _WORLD else []


_WORLD: list[World] = []


def _count(store_dir: str, query: str) -> None:
    store = ox.Store.read_only(store_dir)
    list(store.query(query, use_default_graph_as_union=True))


def _save_world(world: World, path: Path) -> None:
    data = {
        "quads": world.quads,
        "labels": {k.value: v for k, v in world.labels.items()},
        "theses": [[t.value, [m.value for m in members], q] for t, members, q in world.theses],
    }
    path.write_text(json.dumps(data), encoding="utf-8")


def _load_world(path: Path) -> World:
    data = json.loads(path.read_text(encoding="utf-8"))
    world = World(Naming(NS), quads=data["quads"])
    world.labels = {N(k): v for k, v in data["labels"].items()}
    world.theses = [(N(t), [N(m) for m in members], q) for t, members, q in data["theses"]]
    return world


Forbid = Callable[[Kind], bool]

if __name__ == "__main__":
    sys.exit(main())

"""The graph as traversal sees it, read hop by hop through SPARQL, so the same code runs on the embedded store and
on any SPARQL 1.1 server.

Vertices are IRIs of individuals: never classes or properties (``rdf:type`` is not an edge), never the dataset's
graph names, never literals (a literal ends a walk: two facts sharing the value "2024" are not connected). Edges
are fact triples: only extraction and import graphs are walked, so ontology, conversation, provenance and history
triples never pass for facts. Every query here is a fixed template from ``queries/traversal/``; what varies is
written as pyoxigraph terms (validated IRIs, escaped literals), so no label or question can inject SPARQL.

Item 6 of the issue: every hop is K = (p1|^p1|p2|^p2...) over the allowed predicates, a SPARQL property path, with
the start vertices in ``VALUES`` (``neighbours.rq``, ``meet.rq``, ``around.rq``, ``bridges.rq``). K is written as
the negated property set ``!(d1|...|^d1|...)`` of the predicates that are not edges (``rdf:type``, names): the
same path, without a scan of the store to list the predicates in use, and half the cost of the spelled-out
alternatives. It sits inside ``GRAPH ?g`` with ``?g`` checked, so ontology, conversation, provenance and history
triples never pass for facts.

A walk of depth d is d such queries, one per round, not one bounded sequence K/K?/K? (``reach.rq``, which the
benchmark times against them). Both designs were measured (``benchmarks/bench_traversal.py --paths``) and the
per-hop one is kept because only it meets the rest of the spec:

* a sequence path is evaluated in one graph: inside ``GRAPH ?g`` every step would have to be in the same extraction
  graph (facts about one thing come from many utterances), and over the union default graph it walks the
  conversation, provenance and history graphs too (two hops from a product: 772 vertices as K/K?, 80 over facts);
* it cannot leave the owner out of its middle: through "Dana bought ..." every purchase is two hops from every
  other, so three hops from one purchase take 9.8 s as K/K?/K? and 0.11 s as three rounds that reach the owner
  without crossing it (1.08M-quad store);
* it returns its ends, not the vertices and triples between them, which chains and paths are made of.

Timed alone, one path query can be the faster (two hops from the most popular place: 70 ms CPU as K/K?, 120 ms as
two rounds, the second sending 700 vertices back in as ``VALUES``), but it walks more than the facts, and no
algorithm here needs only the ends.

Where an algorithm keeps state between hops (BeamSearch scores every candidate triple, WaterCircles and A* keep
parents), the state stays in Python and the frontier expansion is one K query per hop. BeamSearch's candidates
(``edges.rq``) and the triples of found chains (``between.rq``) are triple patterns, not paths: they need the
predicate, which a path does not bind.

Costs, measured on a 1M-quad store: the engine reads about a million index entries a second, while every row that
crosses into Python costs several microseconds and every IRI in a ``VALUES`` block about ten. The hop queries are
shaped accordingly: the engine deduplicates and groups, and the rows that come back are vertices, not triples;
where only the meeting points of two walks matter, only those come back (``meet.rq``); a vertex known to touch
thousands of facts is read as a bounded sample (``around.rq``, ``edges_sample.rq``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeGuard

import pyoxigraph as ox

from pcm.backend import Backend, Solutions, datetime_or_none, value_or_none
from pcm.layout import CONVERSATION, HISTORY, LEGACY_PREFIX, ONTOLOGY, PROVENANCE
from pcm.namespaces import (
    FOAF,
    OWL,
    PCM,
    PROV,
    RDF,
    RDFS,
    SCHEMA,
    SH,
    SKOS,
    VOCABULARY_NAMESPACES,
    XSD,
)
from pcm.resources import render_query
from pcm.retrieval.traversal.model import Kind, Node, Source, Stats, Step, Triple
from pcm.sparql import is_true

#: The graphs that hold no facts (placeholders the backend fills with the memory's names).
NON_FACT_GRAPHS = (ONTOLOGY, CONVERSATION, PROVENANCE, HISTORY)
#: Predicates that are not edges: class membership and names (names are how a vertex is verbalised instead).
DENIED_PREDICATES = (
    RDF + "type",
    RDFS + "label",
    SKOS + "prefLabel",
    SKOS + "altLabel",
    SCHEMA + "name",
    SCHEMA + "alternateName",
    FOAF + "name",
)
#: The entity-to-post link: crossing it is crossing an episodic vertex.
EPISODIC_LINK = PROV + "wasDerivedFrom"
THESIS_ROOTS = (SCHEMA + "Action", SCHEMA + "Event", PCM + "Preference", PCM + "Habit")
_NOT_VERTICES = (*VOCABULARY_NAMESPACES, RDF, RDFS, OWL, XSD, SH, LEGACY_PREFIX, "urn:pcm:memory:")


@dataclass(frozen=True)
class Neighbour:
    """One vertex reached from a tagged frontier vertex (``parent``) in one hop."""

    tag: int
    vertex: Node
    parent: Node


class GraphView:
    """SPARQL access for the traversal algorithms, with what walks learn cached (vertex kinds and names).

    Kinds are looked up only when something needs them (a forbidden kind, WaterCircles' fragments), and then once
    per vertex: an episodic vertex is known by its IRI, a thesis vertex by its classes.
    """

    def __init__(
        self,
        backend: Backend,
        *,
        post_prefix: str,
        hubs: Iterable[str] = (),
        episodic_edges: bool = True,
        timeout: float | None = None,
    ) -> None:
        self.backend = backend
        self.post_prefix = post_prefix
        self.hubs = frozenset(ox.NamedNode(h) for h in hubs)
        self.timeout = timeout
        self.stats = Stats()
        self._terms: dict[str, str] = {}
        self.restrict(episodic_edges=episodic_edges)
        self._thesis: str | None = None
        self._labels: dict[Node, str] = {}
        self._kinds: dict[Node, Kind] = {}
        self._memo: dict[Node, list[Step]] = {}
        self._degree: dict[Node, int] = {}
        """Triples per vertex when last read in full: which vertices to sample rather than read."""

    def restrict(self, *, episodic_edges: bool) -> None:
        """Whether entity-to-post links are edges (forbidding episodic vertices removes them from every hop)."""
        denied = DENIED_PREDICATES if episodic_edges else (*DENIED_PREDICATES, EPISODIC_LINK)
        if hasattr(self, "_memo"):
            self._memo.clear()
        self._terms = {
            "non_fact": ", ".join(NON_FACT_GRAPHS),
            "denied": ", ".join(f"<{p}>" for p in denied),
            "k": hop_path(denied),
            "fwd": negated_set(tuple(dict.fromkeys((*denied, EPISODIC_LINK))), forward=True),
            "bwd": negated_set(tuple(dict.fromkeys((*denied, EPISODIC_LINK))), forward=False),
        }

    def forget(self) -> None:
        """Drop cached kinds, names and degrees (after the store changed under a long-lived engine)."""
        self._labels.clear()
        self._kinds.clear()
        self._degree.clear()
        self._memo.clear()
        self._thesis = None

    # -- plumbing -------------------------------------------------------------------------------------------------
    def _select(self, name: str, **terms: str) -> Solutions:
        return self._select_rows(name, None, terms)

    def _select_rows(self, name: str, max_rows: int | None, terms: dict[str, str]) -> Solutions:
        """``traversal/<name>`` with ``terms``, reading at most ``max_rows`` rows (the engine stops there)."""
        started = time.perf_counter()
        result = self.backend.query(render_query(f"traversal/{name}", **terms), timeout=self.timeout, limit=max_rows)
        assert isinstance(result, Solutions), f"traversal/{name} is a SELECT"
        self.stats.queries += 1
        self.stats.rows += len(result.rows)
        self.stats.ms += (time.perf_counter() - started) * 1000
        return result

    def _thesis_terms(self) -> str:
        if self._thesis is None:
            classes = [row[0] for row in self._select("thesis_classes").rows]  # its roots: THESIS_ROOTS
            self._thesis = ", ".join(str(c) for c in classes if c is not None)
        return self._thesis

    def walkable(self, term: object) -> TypeGuard[Node]:
        """An IRI that may be a vertex (not a vocabulary term or a graph name)."""
        return isinstance(term, ox.NamedNode) and not term.value.startswith(_NOT_VERTICES)

    def is_hub(self, vertex: object) -> bool:
        return vertex in self.hubs

    # -- hops -------------------------------------------------------------------------------------------------------
    def neighbours(self, frontier: Sequence[tuple[int, Node]]) -> list[Neighbour]:
        """The distinct neighbours of each tagged frontier vertex, one parent each (a breadth-first hop)."""
        if not frontier:
            return []
        walkable = self.walkable
        tags = {vertex: tag for tag, vertex in frontier}
        if len(tags) == len(frontier) and len(set(tags.values())) == len(tags):
            # one vertex per tag: the distinct pairs are the rows, and the engine need not group them
            return [Neighbour(tags[parent], vertex, parent) for parent, vertex in self.pairs(list(tags)) or ()]
        rows = self._select(
            "neighbours", frontier=" ".join(f"({tag} {vertex})" for tag, vertex in frontier), **self._terms
        ).rows
        return [
            Neighbour(int(_value(tag).value), vertex, _node(parent))
            for tag, vertex, parent in rows
            if parent is not None and walkable(vertex)
        ]

    def pairs(self, vertices: Sequence[Node], limit: int | None = None) -> list[tuple[Node, Node]] | None:
        """Every distinct (vertex, neighbour) pair of ``vertices`` (``hops.rq``); None when there are more than
        ``limit`` (the engine stops once it has produced one more): whether a neighbourhood is small enough to
        ship, found at the cost of the rows that were to be shipped anyway."""
        if not vertices:
            return []
        ordered = list(dict.fromkeys(vertices))
        frontier = " ".join(f"({at} {v})" for at, v in enumerate(ordered))
        rows = self._select_rows("hops", None if limit is None else limit + 1, {"frontier": frontier, **self._terms}).rows
        if limit is not None and len(rows) > limit:
            return None
        walkable = self.walkable
        return [(ordered[int(_value(at).value)], vertex) for at, vertex in rows if walkable(vertex)]

    def beyond(self, vertices: Sequence[Node], limit: int) -> list[Node]:
        """The distinct walkable neighbours of ``vertices`` among the first ``limit`` the engine finds
        (``beyond.rq``): whether a layer has at least so many vertices, without shipping its pairs."""
        if not vertices or limit <= 0:
            return []
        frontier = _iris(vertices)
        rows = self._select_rows("beyond", limit, {"frontier": frontier, **self._terms}).rows
        walkable = self.walkable
        return [x for (x,) in rows if walkable(x)]

    def touches(self, vertices: Sequence[Node], targets: Sequence[Node]) -> bool:
        """Whether any of ``vertices`` is next to any of ``targets`` (``touches.rq``, one row at most read)."""
        if not vertices or not targets:
            return False
        terms = {
            "frontier": _iris(vertices),
            "targets": _iris(targets),
            **self._terms,
        }
        return bool(self._select_rows("touches", 1, terms).rows)

    def around(self, vertex: Node, limit: int) -> list[Node]:
        """Up to ``limit`` neighbours of one vertex each way (its facts, facts about it, its posts or entities):
        a bounded sample of a vertex that may touch thousands of facts."""
        rows = self._select("around", vertex=str(vertex), limit=str(int(limit)), **self._terms).rows
        return [x for (x,) in dict.fromkeys(rows) if self.walkable(x)]

    def meet(self, frontier: Sequence[tuple[int, Node]]) -> list[tuple[Node, int, Node]]:
        """Vertices one hop from the frontiers of two or more tags, as (vertex, tag, parent) for every tag that
        reaches them: where circles meet, found by the engine without shipping the circles."""
        if not frontier:
            return []
        rows = self._select(
            "meet", frontier=" ".join(f"({tag} {vertex})" for tag, vertex in frontier), **self._terms
        ).rows
        return [
            (x, int(_value(tag).value), _node(parent))
            for x, tag, parent in rows
            if parent is not None and self.walkable(x)
        ]

    def edges(self, frontier: Sequence[Node], cap: int | None = None) -> list[Step]:
        """Every fact triple touching the frontier (literal-valued ones included), as steps away from it.

        Within one retrieval each vertex's triples are read once. With ``cap``, a vertex already seen to touch more
        than ``cap`` triples is read as a bounded sample (``cap`` of each kind of triple) instead of in full.
        """
        wanted = list(dict.fromkeys(frontier))
        todo = [v for v in wanted if v not in self._memo]
        if cap is not None:
            self._probe([v for v in todo if v not in self._degree])
            for v in [v for v in todo if self._degree.get(v, 0) > cap]:
                self._memo[v] = self._sample(v, max(1, cap // 4))
            todo = [v for v in todo if v not in self._memo]
        if todo:
            for v, steps in self._read_edges(todo).items():
                self._memo[v] = steps
                self._degree[v] = len(steps)
        return [step for v in wanted for step in self._memo[v]]

    def _read_edges(self, vertices: list[Node]) -> dict[Node, list[Step]]:
        rows = self._select("edges", frontier=_iris(vertices), **self._terms).rows
        fetched: dict[Node, list[Step]] = {v: [] for v in vertices}
        for subject, p, x, fwd in rows:
            y = _node(subject)
            step = self._step(y, _node(p), x, fwd)
            if step is not None:
                fetched[y].append(step)
        return fetched

    def _probe(self, vertices: list[Node]) -> None:
        """Count the triples of vertices never read before (counted in the engine, nothing shipped)."""
        for start in range(0, len(vertices), 1000):
            chunk = vertices[start : start + 1000]
            for v, n in self._select("degrees", iris=_iris(chunk)).rows:
                self._degree[_node(v)] = int(value_or_none(n) or 0)

    def degrees(self, vertices: Sequence[Node]) -> dict[Node, int]:
        """Triples touching each vertex (counted in the engine the first time, nothing shipped)."""
        self._probe([v for v in dict.fromkeys(vertices) if v not in self._degree])
        return {v: self._degree.get(v, 0) for v in vertices}

    def bridges(self, firsts: Sequence[Node], goal: Node) -> list[tuple[Node, Node]]:
        """(a, y) for every two-hop walk a - y - goal with ``a`` among ``firsts`` (``y`` an IRI, never checked
        here for hubs or kinds)."""
        if not firsts:
            return []
        rows = self._select(
            "bridges", firsts=_iris(firsts), goal=str(goal), **self._terms
        ).rows
        return [(_node(a), y) for a, y in rows if self.walkable(y)]

    def degree(self, vertex: Node) -> int:
        """Triples touching ``vertex`` when last read in full (0 if never)."""
        return self._degree.get(vertex, 0)

    def _sample(self, vertex: Node, cap: int) -> list[Step]:
        rows = self._select("edges_sample", vertex=str(vertex), limit=str(int(cap)), **self._terms).rows
        steps = [self._step(vertex, _node(p), x, fwd) for p, x, fwd in rows]
        return [s for s in steps if s is not None]

    def _step(self, y: Node, p: Node, x: object, fwd: object) -> Step | None:
        if isinstance(x, ox.Literal):
            return Step(Triple(y, p, x), True)
        if not self.walkable(x):
            return None
        return Step(Triple(y, p, x), True) if is_true(fwd) else Step(Triple(x, p, y), False)

    def begin(self) -> None:
        """Start one retrieval: triples read from now on are kept until the next one (the store may change)."""
        self._memo.clear()

    def between(self, pairs: Iterable[tuple[Node, Node]]) -> dict[tuple[Node, Node], list[Step]]:
        """The fact triples joining each (a, b) pair, as steps walked from a to b."""
        wanted = list(dict.fromkeys(pairs))
        if not wanted:
            return {}
        rows = self._select("between", pairs=" ".join(f"({a} {b})" for a, b in wanted), **self._terms).rows
        found: dict[tuple[Node, Node], list[Step]] = {}
        for a, b, p, fwd in rows:  # the query binds ?a ?b ?p to IRIs only
            forward = is_true(fwd)
            a, p, b = _node(a), _node(p), _node(b)
            triple = Triple(a, p, b) if forward else Triple(b, p, a)
            found.setdefault((a, b), []).append(Step(triple, forward))
        for steps in found.values():
            steps.sort(key=lambda s: (not s.forward, s.triple.p.value))
        return found

    # -- what vertices are ------------------------------------------------------------------------------------------
    def kinds(self, vertices: Iterable[Node]) -> dict[Node, Kind]:
        """Object, thesis or episodic, for each vertex (thesis classes looked up once per vertex)."""
        wanted = list(dict.fromkeys(vertices))
        missing = []
        for v in wanted:
            if v not in self._kinds:
                if v.value.startswith(self.post_prefix):
                    self._kinds[v] = Kind.EPISODIC
                else:
                    missing.append(v)
        for start in range(0, len(missing), 1000):
            chunk = missing[start : start + 1000]
            thesis = {
                row[0]
                for row in self._select(
                    "types", iris=_iris(chunk), thesis=self._thesis_terms()
                ).rows
            }
            for v in chunk:
                self._kinds[v] = Kind.THESIS if v in thesis else Kind.OBJECT
        return {v: self._kinds[v] for v in wanted}

    def labels(self, vertices: Iterable[Node]) -> dict[Node, str]:
        """A readable name per vertex: label, name, or for a post its first words; the IRI's tail otherwise."""
        wanted = list(dict.fromkeys(vertices))
        missing = [v for v in wanted if v not in self._labels]
        for start in range(0, len(missing), 1000):
            chunk = missing[start : start + 1000]
            for x, label, content in self._select("labels", iris=_iris(chunk)).rows:
                text = label.value if label is not None else _snippet(content.value) if content is not None else None
                if text:
                    self._labels[_node(x)] = text
            for v in chunk:
                self._labels.setdefault(v, local_name(v.value))
        return {v: self._labels[v] for v in wanted}

    def sources(self, triples: Sequence[Triple]) -> dict[Triple, list[Source]]:
        """Where each triple was said: the posts its extraction graphs came from (or the imported file)."""
        found: dict[Triple, list[Source]] = {}
        for start in range(0, len(triples), 200):
            chunk = triples[start : start + 200]
            rows = self._select("sources", triples=" ".join(f"({t.s} {t.p} {t.o})" for t in chunk)).dicts()
            for row in rows:
                triple = Triple(_node(row["s"]), _node(row["p"]), _value(row["o"]))
                found.setdefault(triple, []).append(
                    Source(
                        post=value_or_none(row.get("post")),
                        text=value_or_none(row.get("content")),
                        session=value_or_none(row.get("session")),
                        time=datetime_or_none(row.get("time")),
                        speaker=value_or_none(row.get("speaker")),
                        source_id=value_or_none(row.get("source_id")),
                        file=value_or_none(row.get("file")),
                    )
                )
        for triple in triples:  # an episodic step's source is the post itself
            if triple.p.value == EPISODIC_LINK and isinstance(triple.o, ox.NamedNode):
                post = triple.o.value
                if not any(s.post == post for s in found.get(triple, [])):
                    found.setdefault(triple, []).insert(0, Source(post=post, text=self.labels([triple.o])[triple.o]))
        for sources in found.values():
            sources.sort(key=lambda s: (s.time is not None, s.time.timestamp() if s.time else 0.0, s.post or "", s.file or ""))
        return found


def negated_set(denied: Sequence[str], *, forward: bool) -> str:
    """One direction of K: ``!(d1|d2)`` (any other predicate, subject to object) or ``!(^d1|^d2)`` (object to
    subject)."""
    mark = "" if forward else "^"
    return "!(" + "|".join(f"{mark}<{p}>" for p in denied) + ")"


def hop_path(denied: Sequence[str]) -> str:
    """K = (p1|^p1|p2|^p2...) over every predicate but ``denied``, as one negated property set
    ``!(d1|...|^d1|...)``: the same path as the alternatives, without listing the predicates in use (which would
    take a scan of the store to learn, and is twice as slow to evaluate: 55 ms against 104 ms for one hop from
    about 35 vertices on the 2.65M-quad benchmark store)."""
    return "!(" + "|".join([f"<{p}>" for p in denied] + [f"^<{p}>" for p in denied]) + ")"


def hop_sequence(denied: Sequence[str], depth: int) -> str:
    """The bounded walk K/K?/K?... of ``depth`` hops (SPARQL 1.1 has no ``{n,m}``; Oxigraph rejects it)."""
    if depth < 1:
        raise ValueError("a walk has at least one hop")
    k = hop_path(denied)
    return "/".join([k] + [f"({k})?"] * (depth - 1))


def local_name(iri: str) -> str:
    """``https://…/dana-s-bike`` → ``dana s bike``: a last resort when a vertex has no label."""
    tail = iri.rstrip("/#").rsplit("/", 1)[-1].rsplit("#", 1)[-1]
    return tail.replace("-", " ").replace("_", " ") or iri



def _snippet(text: str, words: int = 16) -> str:
    parts = text.split()
    return " ".join(parts[:words]) + (" …" if len(parts) > words else "")


def _node(term: object) -> Node:
    """A term our traversal queries bind to an IRI only; anything else is a bug in the query and fails as such."""
    if not isinstance(term, ox.NamedNode):
        raise TypeError(f"an IRI expected from a traversal query, got {term!r}")
    return term


def _iris(vertices: Iterable[Node]) -> str:
    """``vertices`` as a ``VALUES`` list, each once, in the order given."""
    return " ".join(str(v) for v in dict.fromkeys(vertices))


def _value(term: object) -> ox.NamedNode | ox.Literal:
    """A fact's object as our traversal queries bind it: an IRI or a literal."""
    if not isinstance(term, ox.NamedNode | ox.Literal):
        raise TypeError(f"an IRI or a literal expected from a traversal query, got {term!r}")
    return term

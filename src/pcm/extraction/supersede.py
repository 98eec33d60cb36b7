"""Knowledge updates: a new value of a single-valued property moves the older statement to the history graph.

Only properties the ontology declares ``owl:FunctionalProperty`` or the shapes constrain with ``sh:maxCount 1``
are single-valued, and only the same subject is looked at: nothing else in the graph is touched (Graphiti
invalidated 41% of its facts by searching the whole graph for contradictions; mem0 lost both facts on a
contradiction). The older statement is deleted from the graph that held it and recorded in the history graph as an
``rdf:Statement`` (never as the triple itself, since queries see the union of graphs) with ``pcm:supersededAt``
(the message time of the superseding post), ``pcm:supersededBy`` (that post), and where it came from.

Which statement is older is decided by message time, not by arrival order: re-extracting an old post (``pcm
extract --all``) must not overwrite what a later utterance said. When the stored statement was said later, the
incoming value is the stale one and goes straight to history, superseded by the later post.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING

import pyoxigraph as ox

from pcm.extraction.queries import render
from pcm.namespaces import DCTERMS, GRAPH_HISTORY, PCM, PROV, RDF, SH
from pcm.naming import digest
from pcm.provenance import dt_literal
from pcm.sparql import iri_term

if TYPE_CHECKING:
    from pcm.memory import Memory
    from pcm.ontology import Ontology

N = ox.NamedNode
G_HISTORY = N(GRAPH_HISTORY)


@dataclass
class Supersessions:
    """What one extraction write changes in other graphs."""

    delete: list[ox.Quad] = field(default_factory=list)
    """Older statements removed from the graphs that held them."""
    history: list[ox.Quad] = field(default_factory=list)
    """Their ``rdf:Statement`` records in the history graph."""
    stale: set[ox.Triple] = field(default_factory=set)
    """Incoming triples a later utterance already superseded: recorded in history, not asserted."""
    count: int = 0


@dataclass(frozen=True)
class _Stored:
    triple: ox.Triple
    graph: str
    post: str | None
    time: datetime | None


def single_valued_properties(ontology: Ontology) -> frozenset[str]:
    """Functional properties plus properties some shape bounds with ``sh:maxCount 1``."""
    from pcm.extraction.normalise import reserved_terms

    return (ontology.functional_properties | _max_count_one()) - reserved_terms(ontology)


@cache
def _max_count_one() -> frozenset[str]:
    import rdflib

    from pcm import resources

    graph = rdflib.Graph()
    for path in sorted(resources.shapes_dir().glob("*.ttl")):
        graph.parse(path, format="turtle")
    found = set()
    for shape, count in graph.subject_objects(rdflib.URIRef(SH + "maxCount")):
        path = graph.value(shape, rdflib.URIRef(SH + "path"))
        if isinstance(path, rdflib.URIRef) and str(count) == "1":
            found.add(str(path))
    return frozenset(found)


def plan_supersessions(
    memory: Memory,
    triples: Sequence[ox.Triple],
    *,
    graph: str,
    post: str,
    time: datetime | None,
    single_valued: frozenset[str],
) -> Supersessions:
    """Compare the delta's single-valued statements with the stored ones on the same subjects (one query)."""
    incoming: dict[tuple[str, str], set[ox.Triple]] = {}
    for t in triples:
        if t.predicate.value in single_valued and isinstance(t.subject, ox.NamedNode):
            incoming.setdefault((t.subject.value, t.predicate.value), set()).add(t)
    plan = Supersessions()
    if not incoming:
        return plan
    for stored in _stored_values(memory, incoming.keys(), graph):
        key = (stored.triple.subject.value, stored.triple.predicate.value)
        news = incoming[key]
        if stored.triple in news:
            continue  # said again: nothing changes
        if _later(stored.time, time):
            for new in sorted(news, key=str):
                plan.stale.add(new)
                plan.history += _statement(memory, new, by=stored.post, at=stored.time, origin=post, source=graph)
        else:
            s = stored.triple
            plan.delete.append(ox.Quad(s.subject, s.predicate, s.object, N(stored.graph)))
            plan.history += _statement(
                memory, stored.triple, by=post, at=time, origin=stored.post, source=stored.graph
            )
        plan.count += 1
    plan.history = list(dict.fromkeys(plan.history))
    return plan


def _stored_values(memory: Memory, keys: Iterable[tuple[str, str]], graph: str) -> list[_Stored]:
    pairs = " ".join(f"({iri_term(s)} {iri_term(p)})" for s, p in sorted(keys))
    rows = memory.store.select(render("single_values", pairs=pairs, graph=iri_term(graph))).dicts()
    out = []
    for r in rows:
        triple = ox.Triple(r["s"], r["p"], r["o"])  # type: ignore[arg-type]
        out.append(_Stored(triple, r["g"].value, r["post"].value if "post" in r else None, _time(r.get("time"))))
    return sorted(out, key=lambda s: (str(s.triple), s.graph))


def _time(term: object) -> datetime | None:
    value = getattr(term, "value", None)
    if not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _later(stored: datetime | None, incoming: datetime | None) -> bool:
    """True when the stored statement was said after the incoming one (unknown times never win)."""
    if stored is None or incoming is None:
        return False
    if (stored.tzinfo is None) != (incoming.tzinfo is None):
        stored, incoming = stored.replace(tzinfo=None), incoming.replace(tzinfo=None)
    return stored > incoming


def _statement(
    memory: Memory, triple: ox.Triple, *, by: str | None, at: datetime | None, origin: str | None, source: str
) -> list[ox.Quad]:
    """The ``rdf:Statement`` record of a superseded triple (its IRI is stable, so re-runs add nothing)."""
    node = N(f"{memory.naming.namespace}history/{digest(str(triple), by or '')}")
    quads = [
        ox.Quad(node, N(RDF + "type"), N(RDF + "Statement"), G_HISTORY),
        ox.Quad(node, N(RDF + "subject"), triple.subject, G_HISTORY),
        ox.Quad(node, N(RDF + "predicate"), triple.predicate, G_HISTORY),
        ox.Quad(node, N(RDF + "object"), triple.object, G_HISTORY),
        ox.Quad(node, N(DCTERMS + "source"), N(source), G_HISTORY),
    ]
    if by:
        quads.append(ox.Quad(node, N(PCM + "supersededBy"), N(by), G_HISTORY))
    if at:
        quads.append(ox.Quad(node, N(PCM + "supersededAt"), dt_literal(at), G_HISTORY))
    if origin:
        quads.append(ox.Quad(node, N(PROV + "wasDerivedFrom"), N(origin), G_HISTORY))
    return quads

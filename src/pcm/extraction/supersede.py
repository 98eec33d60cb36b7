"""Knowledge updates: a new value of a single-valued property moves the older statement to the history graph.

Only properties the ontology declares ``owl:FunctionalProperty`` or the shapes constrain with ``sh:maxCount 1`` (or
mark ``pcmsh:laterValuesReplace``) are single-valued, a shape's only for the subjects its target reaches (``sh:targetClass
schema:Person``: people, not every subject), and only the same subject is looked at: nothing else is touched (Graphiti
invalidated 41% of its facts by searching the whole graph for contradictions; mem0 lost both facts on a
contradiction). The older statement is deleted from the graph that held it and recorded in the history graph as an
``rdf:Statement`` (never as the triple itself, since queries see the union of graphs) with ``pcm:supersededAt``
(the message time of the superseding post), ``pcm:supersededBy`` (that post), and where it came from.

Which statement is older is decided by message time, not by arrival order: re-extracting an old post (``pcm
extract --all``) must not overwrite what a later utterance said. When the stored statement was said later, the
incoming value is the stale one and goes straight to history, superseded by the later post.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pyoxigraph as ox

from pcm.backend import checked_triple, term_value
from pcm.extraction.queries import render
from pcm.namespaces import DCTERMS, PCM, PROV, RDF
from pcm.naming import digest
from pcm.provenance import dt_literal
from pcm.sparql import iri_term, values_clause

if TYPE_CHECKING:
    from pcm.context import MemoryContext
    from pcm.ontology import Ontology

N = ox.NamedNode


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
class StoredValue:
    triple: ox.Triple
    graph: str
    post: str | None
    time: datetime | None


@dataclass(frozen=True)
class SingleValued:
    """Which statements hold one value at a time: per property, for every subject or for instances of some classes."""

    everywhere: frozenset[str] = frozenset()
    """Single-valued whatever the subject (functional properties, shapes targeting the subjects of the property)."""
    by_class: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """Property -> the classes (subclasses included) whose instances hold one current value of it."""
    strict: frozenset[str] = frozenset()
    """Of ``everywhere``: the properties for which two values in one utterance are an error (not ``laterValuesReplace``)."""

    @property
    def properties(self) -> frozenset[str]:
        """Every property that is single-valued for some subject."""
        return self.everywhere | frozenset(self.by_class)

    def __contains__(self, prop: object) -> bool:
        return prop in self.everywhere or prop in self.by_class

    def applies(self, prop: str, types: Iterable[str]) -> bool:
        """Whether ``prop`` holds one value on a subject with these ``rdf:type`` values."""
        if prop in self.everywhere:
            return True
        classes = self.by_class.get(prop)
        return classes is not None and any(t in classes for t in types)


def single_valued_properties(ontology: Ontology, shapes_dir: Path | None = None) -> SingleValued:
    """Functional properties plus what the shapes bound with ``sh:maxCount 1`` or mark ``pcmsh:laterValuesReplace``."""
    from pcm.extraction.normalise import reserved_terms
    from pcm.shape_limits import value_limits

    reserved = reserved_terms(ontology)
    limits = value_limits(shapes_dir)
    everywhere = {p for p, limit in limits.items() if limit.anywhere} | set(ontology.functional_properties)
    strict = {p for p, limit in limits.items() if limit.strict} | set(ontology.functional_properties)
    by_class = {
        p: frozenset(sub for c in limit.classes for sub in ontology.subclasses(c))
        for p, limit in limits.items()
        if limit.classes and p not in everywhere
    }
    return SingleValued(
        frozenset(everywhere - reserved),
        {p: c for p, c in by_class.items() if p not in reserved},
        frozenset(strict - reserved),
    )


def plan_supersessions(
    memory: MemoryContext,
    triples: Sequence[ox.Triple],
    *,
    graph: str,
    post: str,
    time: datetime | None,
    single_valued: SingleValued,
) -> Supersessions:
    """Compare the delta's single-valued statements with the stored ones on the same subjects (one or two queries)."""
    incoming: dict[tuple[str, str], set[ox.Triple]] = {}
    for t in triples:
        if t.predicate.value in single_valued and isinstance(t.subject, ox.NamedNode):
            incoming.setdefault((t.subject.value, t.predicate.value), set()).add(t)
    incoming = _in_scope(memory, incoming, triples, single_valued)
    plan = Supersessions()
    if not incoming:
        return plan
    for stored in stored_values(memory, incoming.keys(), graph):
        key = (term_value(stored.triple.subject), stored.triple.predicate.value)
        news = incoming[key]
        if stored.triple in news:
            continue  # said again: nothing changes
        if said_later(stored.time, time):
            for new in sorted(news, key=str):
                plan.stale.add(new)
                plan.history += history_record(memory, new, by=stored.post, at=stored.time, origin=post, source=graph)
        else:
            s = stored.triple
            plan.delete.append(ox.Quad(s.subject, s.predicate, s.object, N(stored.graph)))
            plan.history += history_record(
                memory, stored.triple, by=post, at=time, origin=stored.post, source=stored.graph
            )
        plan.count += 1
    plan.history = list(dict.fromkeys(plan.history))
    return plan


def _in_scope(
    memory: MemoryContext,
    incoming: dict[tuple[str, str], set[ox.Triple]],
    triples: Sequence[ox.Triple],
    single_valued: SingleValued,
) -> dict[tuple[str, str], set[ox.Triple]]:
    """Keep the pairs whose subject the property is single-valued for (its types: from the delta and the store)."""
    scoped = {s for s, p in incoming if p not in single_valued.everywhere}
    if not scoped:
        return incoming
    types: dict[str, set[str]] = {}
    for t in triples:
        if term_value(t.subject) in scoped and t.predicate.value == RDF + "type":
            types.setdefault(term_value(t.subject), set()).add(term_value(t.object))
    q = render("entity_types", entities=values_clause("e", sorted(scoped)))
    for row in memory.store.select(q).rows:
        if row[0] is not None and row[1] is not None:
            types.setdefault(term_value(row[0]), set()).add(term_value(row[1]))
    return {
        (s, p): news for (s, p), news in incoming.items() if single_valued.applies(p, types.get(s, ()))
    }


def stored_values(memory: MemoryContext, keys: Iterable[tuple[str, str]], graph: str) -> list[StoredValue]:
    pairs = " ".join(f"({iri_term(s)} {iri_term(p)})" for s, p in sorted(keys))
    rows = memory.store.select(render("single_values", pairs=pairs, graph=iri_term(graph))).dicts()
    out = []
    for r in rows:
        triple = checked_triple(r["s"], r["p"], r["o"])
        out.append(StoredValue(triple, term_value(r["g"]), term_value(r["post"]) if "post" in r else None, parse_time(r.get("time"))))
    return sorted(out, key=lambda s: (str(s.triple), s.graph))


def parse_time(term: object) -> datetime | None:
    value = getattr(term, "value", None)
    if not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def said_later(stored: datetime | None, incoming: datetime | None) -> bool:
    """True when the stored statement was said after the incoming one (unknown times never win)."""
    if stored is None or incoming is None:
        return False
    if (stored.tzinfo is None) != (incoming.tzinfo is None):
        stored, incoming = stored.replace(tzinfo=None), incoming.replace(tzinfo=None)
    return stored > incoming


def history_record(
    memory: MemoryContext, triple: ox.Triple, *, by: str | None, at: datetime | None, origin: str | None, source: str
) -> list[ox.Quad]:
    """The ``rdf:Statement`` record of a superseded triple (its IRI is stable, so re-runs add nothing)."""
    node = N(f"{memory.naming.namespace}history/{digest(str(triple), by or '')}")
    G_HISTORY = N(memory.naming.layout.history)
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

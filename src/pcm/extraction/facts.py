"""Facts as an assistant's API lists, shows and deletes them (mem0's ``get_all`` / ``get`` / ``delete``).

A fact is one statement (subject, property, value) of the memory's extraction or import graphs; entity cards (a
type, a label) and provenance are not facts. The same statement said by two messages is one fact with two sources.
Its id is the statement itself, written as N-Triples and encoded base64url, so a fact is found again from its id
without an index, and the same statement has the same id in every listing.

Deleting a fact removes the statement from every graph that states it and records each removal in the history
graph as a knowledge update does (:mod:`pcm.extraction.supersede`): an ``rdf:Statement`` with its source graph,
the message that said it (``prov:wasDerivedFrom``) and ``pcm:supersededAt`` the time of the deletion, with no
superseding message. ``pcm history`` then shows the value as over, and forgetting the message that said it drops
that record too (:func:`pcm.extraction.history.forget_delta` drops every record a forgotten message said).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from datetime import datetime, tzinfo
from typing import TYPE_CHECKING

import pyoxigraph as ox

from pcm.backend import Term, checked_triple, datetime_or_none, term_value, value_or_none
from pcm.errors import InputError, NotFound
from pcm.extraction.context import show_iri
from pcm.extraction.queries import render
from pcm.models import Fact, FactDeleted, FactPage, FactSource
from pcm.namespaces import DCTERMS, PCM, PROV, RDF
from pcm.naming import digest
from pcm.provenance import dt_literal
from pcm.sparql import values_clause
from pcm.store import page_clause, window_filter

if TYPE_CHECKING:
    from pcm.context import MemoryContext

N = ox.NamedNode


def fact_id(triple: ox.Triple) -> str:
    """The id of a statement: its N-Triples form, base64url without padding."""
    return base64.urlsafe_b64encode(str(triple).encode("utf-8")).decode("ascii").rstrip("=")


def _triple_of(given: str) -> ox.Triple:
    """The statement a fact id names; an id that is none is one :class:`InputError` line."""
    refused = InputError(f"{given[:80]!r} is not a fact id: give the `id` of a fact as `facts` lists it")
    try:
        text = base64.urlsafe_b64decode(given.strip() + "=" * (-len(given.strip()) % 4)).decode("utf-8")
        triples = [t.triple for t in ox.parse(text + " .\n", format=ox.RdfFormat.N_TRIPLES)]
    except (binascii.Error, UnicodeError, ValueError, SyntaxError):
        raise refused from None
    if len(triples) != 1 or not isinstance(triples[0].subject, ox.NamedNode):
        raise refused
    return triples[0]


def list_facts(
    memory: MemoryContext, *, thread: str | None, since: datetime | None, until: datetime | None, limit: int,
    offset: int, zone: tzinfo,
) -> FactPage:
    """One page of facts whose sources are in ``thread`` (any when None) and said in [since, until)."""
    filt = window_filter(thread, since, until)
    counted = memory.store.select(render("facts_count", filter=filt)).rows
    total = int(value_or_none(counted[0][0]) or 0) if counted else 0
    rows = memory.store.select(render("facts_page", filter=filt, page=page_clause(limit, offset)))
    triples = [checked_triple(r[0], r[1], r[2]) for r in rows.rows]
    facts = _facts(memory, triples, zone)
    after = offset + len(facts)
    return FactPage(facts=facts, total=total, offset=offset, limit=limit, next_offset=after if after < total else None)


def get_fact(memory: MemoryContext, given: str, zone: tzinfo) -> Fact:
    """The fact with this id, or one :class:`NotFound` line."""
    found = _facts(memory, [_triple_of(given)], zone)
    if not found:
        raise NotFound(f"no fact {given[:80]!r} in this memory (deleted, or its message forgotten?)")
    return found[0]


def delete_fact(memory: MemoryContext, given: str, zone: tzinfo) -> FactDeleted:
    """Remove the statement from every graph that states it and record each removal in the history graph, in one
    atomic update; a fact that is not there is one :class:`NotFound` line and nothing is written."""
    fact = get_fact(memory, given, zone)
    triple = _triple_of(given)
    now = datetime.now(zone).replace(microsecond=0)
    delete: list[ox.Quad] = []
    insert: list[ox.Quad] = []
    for source in fact.sources:
        delete.append(ox.Quad(triple.subject, triple.predicate, triple.object, N(source.graph)))
        insert += _removal_record(memory, triple, source, now)
    memory.store.apply(delete=delete, insert=insert)
    return FactDeleted(fact=fact, recorded=now)


def _removal_record(memory: MemoryContext, triple: ox.Triple, source: FactSource, at: datetime) -> list[ox.Quad]:
    """The history record of a statement deleted from one graph: a superseded statement with no superseding post."""
    node = N(f"{memory.naming.namespace}history/{digest(str(triple), 'deleted', source.graph)}")
    graph = N(memory.naming.layout.history)
    quads = [
        ox.Quad(node, N(RDF + "type"), N(RDF + "Statement"), graph),
        ox.Quad(node, N(RDF + "subject"), triple.subject, graph),
        ox.Quad(node, N(RDF + "predicate"), triple.predicate, graph),
        ox.Quad(node, N(RDF + "object"), triple.object, graph),
        ox.Quad(node, N(DCTERMS + "source"), N(source.graph), graph),
        ox.Quad(node, N(PCM + "supersededAt"), dt_literal(at), graph),
    ]
    if source.post:
        quads.append(ox.Quad(node, N(PROV + "wasDerivedFrom"), N(source.post), graph))
    return quads


def _facts(memory: MemoryContext, triples: Sequence[ox.Triple], zone: tzinfo) -> list[Fact]:
    """The facts of these statements, in the order given, each with its sources; a statement no graph states is
    left out."""
    if not triples:
        return []
    rows_of = " ".join(f"({t.subject} {t.predicate} {t.object})" for t in triples)
    found = memory.store.select(render("fact_sources", facts=f"VALUES (?s ?p ?o) {{ {rows_of} }}")).dicts()
    sources: dict[ox.Triple, list[FactSource]] = {}
    for row in found:
        triple = checked_triple(row["s"], row["p"], row["o"])
        sources.setdefault(triple, []).append(FactSource(
            graph=term_value(row["g"]), post=value_or_none(row.get("post")), session=value_or_none(row.get("session")),
            time=_time(row.get("time"), zone),
        ))
    entities = sorted({term_value(t.subject) for t in triples} | {t.object.value for t in triples
                                                                  if isinstance(t.object, ox.NamedNode)})
    labels = {
        term_value(row["e"]): term_value(row["label"])
        for row in memory.store.select(render("fact_labels", entities=values_clause("e", entities))).dicts()
        if "label" in row
    }
    ontology = memory.ontology
    namespace = memory.manifest.namespace

    def shown(term: ox.NamedNode | ox.Literal) -> str:
        if isinstance(term, ox.Literal):
            return term.value
        return labels.get(term.value) or show_iri(term.value, namespace, ontology)

    out = []
    for t in triples:
        if t not in sources:
            continue
        o = t.object
        literal = isinstance(o, ox.Literal)
        assert isinstance(o, ox.NamedNode | ox.Literal) and isinstance(t.subject, ox.NamedNode)
        out.append(Fact(
            id=fact_id(t), subject=t.subject.value, predicate=t.predicate.value, object=o.value,
            object_type="literal" if literal else "iri",
            datatype=o.datatype.value if isinstance(o, ox.Literal) else None,
            lang=o.language if isinstance(o, ox.Literal) else None,
            text=f"{shown(t.subject)} {ontology.curie(t.predicate.value)} {shown(o)}",
            sources=sources[t],
        ))
    return out


def _time(term: Term | None, zone: tzinfo) -> datetime | None:
    """A stored time in the memory's zone when it was stored without one."""
    when = datetime_or_none(term)
    return when if when is None or when.tzinfo is not None else when.replace(tzinfo=zone)


__all__ = ["delete_fact", "fact_id", "get_fact", "list_facts"]

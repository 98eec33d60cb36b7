"""An individual's card (its types and labels) is stored once, not once per utterance that mentions it.

A model restates ``m:biscuit a pcm:Pet ; rdfs:label "Biscuit"`` each time Biscuit comes up. Kept in every extraction
graph, each restatement is one more row for every later lookup of Biscuit's types or label (the default graph is the
union of graphs, and a pattern is matched in each graph), so extracting an utterance got slower the more often its
entities had been mentioned (about 6 ms more per utterance after 800 mentions of one entity; a label lookup took
8 ms at 20,000 mentions). Hence:

* :func:`restated` — a type or label of an individual that another graph already holds is not written again, and
  neither is what the memory wrote about the owner and the assistant at its creation (in the conversation graph,
  never forgotten); other facts about them are kept. The utterance still derives the entity (``prov:wasDerivedFrom``), so ``pcm why`` still lists it.
* :func:`orphaned_cards` — when the graphs holding a card go (a forget, or a re-extraction that no longer says it)
  while another post still derives the entity, the card moves into that post's extraction graph (the latest such
  post), in the same atomic update: an entity that is still mentioned never loses its type or label.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import pyoxigraph as ox

from pcm.backend import Term, checked_triple, term_value
from pcm.extraction.queries import render
from pcm.layout import CONVERSATION
from pcm.namespaces import RDF, RDFS
from pcm.sparql import iri_term, literal_term, values_clause

if TYPE_CHECKING:
    from pcm.context import MemoryContext

CARD_PREDICATES = frozenset({RDF + "type", RDFS + "label"})
_BATCH = 200


def restated(memory: MemoryContext, triples: Sequence[ox.Triple], *, graph: str) -> set[ox.Triple]:
    """The triples that only repeat a card another graph than ``graph`` already holds (see the module doc)."""
    agents = {memory.naming.owner, memory.naming.assistant}
    cards, about_agents = [], []
    for t in triples:
        if not (isinstance(t.subject, ox.NamedNode) and memory.naming.is_individual(t.subject.value)
                and isinstance(t.object, ox.NamedNode | ox.Literal)):
            continue
        if t.predicate.value in CARD_PREDICATES:
            cards.append(t)
        elif t.subject.value in agents:
            about_agents.append(t)
    found: set[ox.Triple] = set()
    for candidates, holder in ((cards, f"?g != {iri_term(graph)}"), (about_agents, f"?g = {CONVERSATION}")):
        for start in range(0, len(candidates), _BATCH):
            rows = " ".join(f"({t.subject} {t.predicate} {t.object})" for t in candidates[start : start + _BATCH])
            q = render("card_restated", triples=f"VALUES (?s ?p ?o) {{ {rows} }}", holder=holder)
            found.update(_triples(memory.store.select(q).rows))
    return found


def orphaned_cards(
    memory: MemoryContext, gone: Sequence[str], *, written: Sequence[ox.Quad] = (), derived: Iterable[str] = ()
) -> list[ox.Quad]:
    """The quads that keep the cards held only by the ``gone`` graphs, for entities another post still derives.

    ``written`` and ``derived``: for a re-extraction, what the new version of the (single) gone graph holds and which
    entities it derives; a card it restates needs no move, and an entity it still derives keeps its card there.
    """
    if not gone:
        return []
    graph_list = ", ".join(iri_term(g) for g in gone)
    namespace = literal_term(memory.naming.namespace)
    orphans: list[ox.Triple] = []
    for start in range(0, len(gone), _BATCH):
        q = render("card_orphans", graphs=values_clause("g", list(gone[start : start + _BATCH])),
                   graph_list=graph_list, namespace=namespace)
        orphans += _triples(memory.store.select(q).rows)
    kept = {ox.Triple(q.subject, q.predicate, q.object) for q in written}
    orphans = sorted({t for t in orphans if t not in kept}, key=str)
    if not orphans:
        return []
    still = set(derived)
    entities = sorted({term_value(t.subject) for t in orphans} - still)
    holder: dict[str, tuple[str, str]] = {}
    for start in range(0, len(entities), _BATCH):
        q = render("card_holders", entities=values_clause("e", entities[start : start + _BATCH]), graph_list=graph_list)
        for row in memory.store.select(q).rows:
            if row[0] is None or row[1] is None:
                continue
            key = (term_value(row[2]) if row[2] is not None else "", term_value(row[1]))
            entity = term_value(row[0])
            holder[entity] = max(holder.get(entity, key), key)
    moved = []
    for t in orphans:
        entity = term_value(t.subject)
        target = gone[0] if entity in still else holder.get(entity, ("", ""))[1]
        if target:
            moved.append(ox.Quad(t.subject, t.predicate, t.object, ox.NamedNode(target)))
    return moved


def _triples(rows: Iterable[Sequence[Term | None]]) -> list[ox.Triple]:
    """Rows of ``?s ?p ?o`` as triples, without those with an unbound value."""
    return [checked_triple(*row) for row in rows if None not in row]

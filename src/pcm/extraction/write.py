"""The second atomic write of a post: its extraction graph, provenance, status and knowledge updates, in ONE update.

The post itself was written first (by ``Memory.ingest``), so whatever happens here, what was said is kept. This
write replaces the post's previous extraction (``DROP`` of its graph and of that graph's activity record), inserts
the new triples into the post's extraction graph (``…:extraction:<key>``) with entity-level ``prov:wasDerivedFrom`` the post, records
the activity (model, prompt and ontology versions, tokens) and the unknown vocabulary terms the model tried, sets
the status, and moves superseded statements to the history graph, all in one ``MemoryStore.apply`` call.

A failed extraction changes only the status, the report and the unknown terms: a previous successful extraction of
the post (if any) stays until a new one succeeds, so a bad re-run never loses facts.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyoxigraph as ox

from pcm.backend import term_value
from pcm.errors import PcmError
from pcm.extraction.cards import orphaned_cards, restated
from pcm.extraction.context import entity_cards
from pcm.extraction.extractor import EXTRACTED, Extraction
from pcm.extraction.queries import render
from pcm.extraction.resolve import resolve_entities
from pcm.extraction.supersede import SingleValued, plan_supersessions
from pcm.index.records import entity_record
from pcm.namespaces import PCM, PROV
from pcm.provenance import Activity, activity_quads, entity_derivation_quads
from pcm.sparql import iri_term, values_clause

if TYPE_CHECKING:
    from pcm.context import MemoryContext
    from pcm.ontology import Ontology

log = logging.getLogger(__name__)

N = ox.NamedNode
#: Where the unknown vocabulary terms an extraction tried are recorded (on the post, in the provenance graph).
UNKNOWN_TERM = PCM + "unknownTerm"
_ATTRIBUTED = N(PROV + "wasAttributedTo")


@dataclass
class Written:
    """What one write did (for the run report)."""

    status: str
    triples: int = 0
    merged: dict[str, str] = field(default_factory=dict)
    renamed: dict[str, str] = field(default_factory=dict)
    superseded: int = 0
    entities: list[str] = field(default_factory=list)


def write_extraction(
    memory: MemoryContext,
    extraction: Extraction,
    *,
    ontology: Ontology,
    prompt_version: str,
    single_valued: SingleValued,
) -> Written:
    """Apply one extraction to the store (see the module docstring); returns what changed."""
    if extraction.status != EXTRACTED:
        return _write_outcome_only(memory, extraction)
    post = extraction.post.iri
    graph = memory.naming.extraction_graph(post)
    g = N(graph)
    resolution = resolve_entities(memory, extraction.triples, offered=extraction.offered, ontology=ontology)
    plan = plan_supersessions(
        memory, resolution.triples, graph=graph, post=post, time=extraction.post.time, single_valued=single_valued
    )
    said = [t for t in resolution.triples if t not in plan.stale]
    subjects = sorted(
        {t.subject.value for t in said if isinstance(t.subject, ox.NamedNode) and memory.naming.is_individual(t.subject.value)}
        - {memory.naming.owner, memory.naming.assistant}
    )
    repeated = restated(memory, said, graph=graph)  # cards other graphs hold: stored once (pcm.extraction.cards)
    kept = [t for t in said if t not in repeated]
    insert = [ox.Quad(t.subject, t.predicate, t.object, g) for t in kept]
    insert += entity_derivation_quads(subjects, post, graph)
    insert += orphaned_cards(memory, [graph], written=insert, derived=subjects)  # a re-extraction's old cards
    if extraction.speaker == memory.naming.assistant:
        insert += [ox.Quad(N(s), _ATTRIBUTED, N(memory.naming.assistant), g) for s in sorted(resolution.new_nodes)
                   if s in subjects]
    insert += activity_quads(memory.naming, _activity(extraction, prompt_version, ontology), graph, post)
    insert += [ox.Quad(g, _ATTRIBUTED, N(extraction.speaker), N(memory.naming.layout.provenance))]
    insert += plan.history
    insert += _unknown_term_quads(memory, post, extraction.unknown_terms)
    extra = [
        render("replace_extraction.ru", graph=iri_term(graph)),
        render("clear_unknown_terms.ru", post=iri_term(post)),
        *memory.store.set_status(post, EXTRACTED, extraction.report),
    ]
    memory.store.apply(delete=plan.delete, insert=insert, extra=extra)
    return Written(EXTRACTED, len(kept), resolution.merged, resolution.renamed, plan.count, subjects)


def write_failure_status(memory: MemoryContext, post: str, status: str, report: str) -> None:
    """Last resort when the extraction write itself failed: record why, change nothing else."""
    memory.store.apply(extra=memory.store.set_status(post, status, report))


def _write_outcome_only(memory: MemoryContext, extraction: Extraction) -> Written:
    post = extraction.post.iri
    extra = [
        render("clear_unknown_terms.ru", post=iri_term(post)),
        *memory.store.set_status(post, extraction.status, extraction.report),
    ]
    memory.store.apply(insert=_unknown_term_quads(memory, post, extraction.unknown_terms), extra=extra)
    return Written(extraction.status)


def _activity(extraction: Extraction, prompt_version: str, ontology: Ontology) -> Activity:
    return Activity(
        "extraction",
        extraction.started,
        model=extraction.model,
        prompt_version=prompt_version,
        ontology_version=ontology.version,
        input_tokens=extraction.input_tokens,
        output_tokens=extraction.output_tokens,
    )


def _unknown_term_quads(memory: MemoryContext, post: str, terms: Sequence[str] | set[str]) -> list[ox.Quad]:
    provenance = N(memory.naming.layout.provenance)
    return [ox.Quad(N(post), N(UNKNOWN_TERM), ox.Literal(t), provenance) for t in sorted(terms)]


def update_index(memory: MemoryContext, iris: Sequence[str]) -> None:
    """Bring the side index's entity rows for these individuals up to date (skipped when the index is off).

    The rows are built from queries that start from the given IRIs (``MemoryStore.entities(iris)`` filters after
    scanning every labelled entity, seconds on a large memory).
    """
    if not iris or not memory.settings.index_enabled:
        return
    try:
        cards = entity_cards(memory, iris)
        alts: dict[str, list[str]] = {}
        q = render("entity_alts", entities=values_clause("e", list(iris)))
        for row in memory.store.select(q).rows:
            if row[0] is not None and row[1] is not None:
                alts.setdefault(term_value(row[0]), []).append(term_value(row[1]))
        records = [
            entity_record(c.iri, c.label, c.types, tuple(sorted(alts.get(c.iri, ()))))
            for c in cards.values() if c.label
        ]
        if records:
            memory.index.upsert_entities(records)
    except PcmError as error:
        log.warning("side index not updated after extraction (reconciled on the next open): %s", error)
        memory.store.mark_index_pending()  # sticky: a later index write must not clear it before a full reconcile

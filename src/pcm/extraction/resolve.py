"""Entity resolution at write time: deterministic merges, and IRIs the model reused by accident.

Runs on the writer thread just before the store write, so it sees every entity written so far (including those of
other sessions extracted concurrently). Two rules, and nothing fuzzy:

* Merge: a node the extraction declares (it has an ``rdf:type`` in the delta) that does not exist yet, whose
  normalised label equals an existing entity's and which shares one of its declared types with it, *is* that
  entity: it is renamed to the existing IRI. Normalised means case, accents, punctuation and a leading article
  ignored ("The Burke-Gilman trail" = "Burke Gilman Trail"). Occurrences are never merged by label: two actions,
  events or trips with the same label ("lunch with Priya") are two lunches, not one, so a node typed with a
  subclass of ``schema:Action``, ``schema:Event`` or ``schema:Trip`` keeps its own IRI.
* Collision: a declared node whose IRI already exists, but which was not offered to the model and whose types are
  unrelated to the stored ones (neither equal nor sub/superclasses), is a different thing that happened to get the
  same slug: it gets a fresh IRI (or merges by the rule above).

Anything less certain (similar labels, same label with other types) is left alone and listed by
``pcm duplicates``; nothing is merged silently on a guess.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyoxigraph as ox

from pcm.backend import term_value
from pcm.extraction.context import entity_cards
from pcm.extraction.queries import render
from pcm.namespaces import FOAF, OWL, RDF, RDFS, SCHEMA
from pcm.sparql import literal_term

if TYPE_CHECKING:
    from pcm.context import MemoryContext
    from pcm.ontology import Ontology

_RDF_TYPE = RDF + "type"
_LABEL = RDFS + "label"
_NAME_PROPERTIES = (_LABEL, SCHEMA + "name")
#: Types too general to say two things are the same kind of thing.
GENERIC_TYPES = frozenset({SCHEMA + "Thing", OWL + "Thing", FOAF + "Agent", SCHEMA + "Intangible"})
#: Classes of things that happen (docs/DESIGN.md §7 "thesis" vertices): same label does not mean same occurrence.
OCCURRENCE_ROOTS = (SCHEMA + "Action", SCHEMA + "Event", SCHEMA + "Trip")
_ARTICLE = re.compile(r"^(the|a|an)\s+")
_ARTICLE_ANY_CASE = re.compile(r"^(the|a|an)\s+", re.IGNORECASE)


def normalise_label(label: str) -> str:
    """Case, accents, punctuation, spacing and a leading article removed: the merge key of a label."""
    text = unicodedata.normalize("NFKD", label).encode("ascii", "ignore").decode("ascii") or label
    text = re.sub(r"[^\w\s]|_", " ", text.casefold())
    text = " ".join(text.split())
    return _ARTICLE.sub("", text)


def label_lookup_variants(label: str) -> set[str]:
    """Spellings to look up exactly (the store indexes literals, not their normalised form)."""
    base = " ".join(label.split())
    bare = _ARTICLE_ANY_CASE.sub("", base, count=1)
    out: set[str] = set()
    for form in {base, bare, f"the {bare}", f"The {bare}"}:
        out.update({form, form.lower(), form.title(), form[:1].upper() + form[1:]})
    return {o for o in out if o}


@dataclass
class Resolution:
    """The renames applied to one delta, and why (for the run report and the tests)."""

    triples: list[ox.Triple]
    merged: dict[str, str] = field(default_factory=dict)
    """New node IRI → the existing entity it was merged into."""
    renamed: dict[str, str] = field(default_factory=dict)
    """Colliding IRI → the fresh IRI the new entity got."""
    new_nodes: set[str] = field(default_factory=set)
    """Individuals this delta creates (they did not exist before)."""


def resolve_entities(
    memory: MemoryContext, triples: Sequence[ox.Triple], *, offered: Iterable[str], ontology: Ontology
) -> Resolution:
    """Apply the merge and collision rules to one delta (see the module docstring)."""
    naming = memory.naming
    fixed = {naming.owner, naming.assistant}
    declared = _declared_types(triples, naming.namespace)
    labels = _labels(triples)
    nodes = {
        t.value
        for tr in triples
        for t in (tr.subject, tr.object)
        if isinstance(t, ox.NamedNode) and naming.is_individual(t.value) and t.value not in fixed
    }
    existing = entity_cards(memory, sorted(nodes))
    offered_set = set(offered)
    taken = set(existing) | nodes
    result = Resolution(list(triples))
    undecided = [
        iri for iri in sorted(declared)
        if iri not in fixed and not (
            iri in existing and (iri in offered_set or _related(existing[iri].types, declared[iri], ontology))
        )
    ]  # the others are references to existing entities
    mergeable = {
        iri: (labels.get(iri, []), declared[iri]) for iri in undecided if not _occurrence(declared[iri], ontology)
    }
    same = _same_entities(memory, mergeable, exclude=nodes)
    for iri in undecided:
        if iri in same:
            result.merged[iri] = same[iri]
        elif iri in existing:
            fresh = naming.entity(next(iter(labels.get(iri, ())), "") or iri.rsplit("/", 1)[-1], taken)
            taken.add(fresh)
            result.renamed[iri] = fresh
    mapping = {**result.merged, **result.renamed}
    if mapping:
        result.triples = [_renamed(t, mapping) for t in triples]
    after = {
        t.value for tr in result.triples for t in (tr.subject, tr.object) if isinstance(t, ox.NamedNode)
    }
    result.new_nodes = {n for n in after if naming.is_individual(n) and n not in fixed} - set(existing) - set(
        result.merged.values()
    )
    return result


def _declared_types(triples: Sequence[ox.Triple], namespace: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for t in triples:
        s, o = t.subject, t.object
        if t.predicate.value == _RDF_TYPE and isinstance(s, ox.NamedNode) and isinstance(o, ox.NamedNode) \
                and s.value.startswith(namespace):
            out.setdefault(s.value, set()).add(o.value)
    return out


def _labels(triples: Sequence[ox.Triple]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for t in triples:
        if t.predicate.value in _NAME_PROPERTIES and isinstance(t.subject, ox.NamedNode) and isinstance(t.object, ox.Literal):
            out.setdefault(t.subject.value, []).append(t.object.value)
    for values in out.values():
        values.sort()
    return out


def _occurrence(types: Iterable[str], ontology: Ontology) -> bool:
    return any(root in ontology.superclasses(t) for t in types if ontology.defines(t) for root in OCCURRENCE_ROOTS)


def _related(stored: Iterable[str], declared: Iterable[str], ontology: Ontology) -> bool:
    """Same type, or one a subclass of the other: the model meant the entity it named."""
    stored_set = set(stored)
    if not stored_set:
        return True
    for t in declared:
        if t in stored_set:
            return True
        if ontology.defines(t) and (ontology.superclasses(t) | ontology.subclasses(t)) & stored_set:
            return True
    return False


def _same_entities(
    memory: MemoryContext, wanted: Mapping[str, tuple[Sequence[str], set[str]]], *, exclude: set[str]
) -> dict[str, str]:
    """For each node (labels, declared types): the existing entity with an equal normalised label and a shared
    specific type, the smallest IRI if several. Two queries for the whole delta."""
    keys = {iri: {normalise_label(x) for x in labels} - {""} for iri, (labels, _) in wanted.items()}
    specific = {iri: types - GENERIC_TYPES for iri, (_, types) in wanted.items()}
    variants = sorted({v for iri, (labels, _) in wanted.items() if keys[iri] and specific[iri]
                       for label in labels for v in label_lookup_variants(label)})
    if not variants:
        return {}
    q = render(
        "label_matches",
        labels=" ".join(literal_term(v) for v in variants),
        namespace=literal_term(memory.naming.namespace),
    )
    by_key: dict[str, set[str]] = {}
    for row in memory.store.select(q).rows:
        entity, label = row[0], row[1]
        if entity is not None and label is not None and term_value(entity) not in exclude:
            by_key.setdefault(normalise_label(term_value(label)), set()).add(term_value(entity))
    candidates = sorted({e for found in by_key.values() for e in found})
    cards = entity_cards(memory, candidates) if candidates else {}
    out: dict[str, str] = {}
    for iri in wanted:
        matches = {
            e for key in keys[iri] for e in by_key.get(key, ())
            if e in cards and specific[iri] & set(cards[e].types)
        }
        if matches:
            out[iri] = min(matches)
    return out


def _renamed(t: ox.Triple, mapping: Mapping[str, str]) -> ox.Triple:
    s, o = t.subject, t.object
    if isinstance(s, ox.NamedNode) and s.value in mapping:
        s = ox.NamedNode(mapping[s.value])
    if isinstance(o, ox.NamedNode) and o.value in mapping:
        o = ox.NamedNode(mapping[o.value])
    return ox.Triple(s, t.predicate, o)

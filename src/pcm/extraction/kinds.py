"""Facts that make a person (or a happening) something it is not: left out before validation.

A small model fills a line's subject or value with whoever is at hand: ``me schema:agent you`` (the owner as the
agent of an action), ``monstera schema:manufacturer me`` (the owner as a plant's maker). The shapes do not catch
these (schema.org's domains and ranges are open, and pcm's modelling uses properties beyond them, such as
``schema:startDate`` on an action), yet each states something false about a person. So a narrow rule, checked
against the vocabulary's own domains and ranges: a fact whose subject is a person while its property's domain holds
no class a person is, or whose value is a person while its range holds none, is dropped and reported like a value no
one said. Only people: the rule was checked against the labelled facts of the sample conversations (none of their
41 facts about a person nor 51 with a person as value is dropped), where the same check on every kind of subject
would drop 21 of 172 gold facts.

The same holds for a happening as a value: a small model links whatever the memory holds to whatever property is at
hand (``me schema:worksFor thanking-melanie``, ``me schema:birthPlace charity-race``). A fact whose value is an
action, event or trip while its property's range holds no such class is dropped too (as a value only: actions carry
properties beyond their schema.org domains, such as ``schema:startDate``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import pyoxigraph as ox

from pcm.extraction.resolve import OCCURRENCE_ROOTS
from pcm.namespaces import FOAF, OWL, RDF, RDFS, SCHEMA

if TYPE_CHECKING:
    from pcm.ontology import Ontology

_PEOPLE = frozenset({SCHEMA + "Person", FOAF + "Person"})
#: Classes of things that happen.
_HAPPENINGS = frozenset(OCCURRENCE_ROOTS)
_ANYTHING = frozenset({OWL + "Thing", RDFS + "Resource", SCHEMA + "Thing"})
_TYPE = RDF + "type"


def node_types(triples: Iterable[ox.Triple], known: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """Each node's classes: those the answer gives it, and those ``known`` (the memory's) for nodes it names."""
    types = {iri: set(classes) for iri, classes in known.items()}
    for t in triples:
        if t.predicate.value == _TYPE and isinstance(t.subject, ox.NamedNode) and isinstance(t.object, ox.NamedNode):
            types.setdefault(t.subject.value, set()).add(t.object.value)
    return types


def misplaced_facts(
    triples: Iterable[ox.Triple], types: Mapping[str, set[str]], ontology: Ontology
) -> list[ox.Triple]:
    """The facts that give a person a property for other kinds of things, or make a person or a happening the
    value of one."""
    found = []
    for t in triples:
        term = ontology.terms.get(t.predicate.value)
        if term is None or t.predicate.value == _TYPE:
            continue
        subject = types.get(t.subject.value, set()) if isinstance(t.subject, ox.NamedNode) else set()
        value = types.get(t.object.value, set()) if isinstance(t.object, ox.NamedNode) else set()
        if (_is_person(subject, ontology) and not _fits(subject, term.domain, ontology)) or (
            (_is_person(value, ontology) or _is_a(value, _HAPPENINGS, ontology)) and not _fits(value, term.range, ontology)
        ):
            found.append(t)
    return found


def _is_person(classes: set[str], ontology: Ontology) -> bool:
    return _is_a(classes, _PEOPLE, ontology)


def _is_a(classes: set[str], roots: frozenset[str], ontology: Ontology) -> bool:
    return any(c in roots or ontology.superclasses(c) & roots for c in classes)


def _fits(classes: set[str], allowed: tuple[str, ...], ontology: Ontology) -> bool:
    """Whether a node of ``classes`` may stand where ``allowed`` classes may (no classes named: anything may)."""
    if not allowed or _ANYTHING & set(allowed):
        return True
    wanted = set(allowed)
    return any(c in wanted or ontology.superclasses(c) & wanted for c in classes)

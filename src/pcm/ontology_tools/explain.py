"""Why HermiT finds the ontology inconsistent, or a class unsatisfiable: a minimal set of axioms that causes it.

A justification in the usual sense (what Protégé's explanation view shows): removing any one of its axioms makes the
problem go away. Found black-box, with HermiT as the oracle:

1. The ontology's triples are grouped into axioms: a statement about a named subject, with the blank-node
   structure it points to (a restriction, a union list); a blank-node axiom such as ``owl:AllDisjointClasses``
   with its members. Declarations (``rdf:type owl:Class`` and the like) are kept in every test, not candidates.
2. A module is taken: the axioms about the terms the problem starts from (the class; for an inconsistency, every
   individual), then about the terms those mention, upwards, and every axiom naming one of them as disjoint,
   equivalent or complementary. It is far smaller than the ontology and must show the problem on its own.
3. QuickXplain (Junker, 2004) shrinks the module to a minimal subset, in O(k log n) reasoner calls for k axioms
   kept out of n.

An unsatisfiable class C is tested by adding one individual of C: the axioms then become inconsistent exactly when C
can have no member. Each reasoner call starts Java (about a second), so explanations are given for the first few
problems only, within a budget of calls; a budget run out says so rather than showing a set that is not minimal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import rdflib
from rdflib import OWL, RDF, RDFS, BNode, Literal, URIRef
from rdflib.collection import Collection

from pcm.ontology_tools.reasoner import run_hermit

_DECLARATION_TYPES = frozenset({OWL.Class, OWL.ObjectProperty, OWL.DatatypeProperty, OWL.AnnotationProperty,
                                OWL.NamedIndividual, OWL.Ontology, RDF.Property, OWL.FunctionalProperty})
_LINKING = frozenset({OWL.disjointWith, OWL.equivalentClass, OWL.complementOf, OWL.equivalentProperty,
                      OWL.propertyDisjointWith, OWL.inverseOf})
_PROBE = URIRef("urn:pcm:explain:probe")
_ANNOTATIONS = frozenset({RDFS.label, RDFS.comment, RDFS.seeAlso, RDFS.isDefinedBy, OWL.versionInfo,
                          OWL.deprecated, OWL.versionIRI, OWL.imports})

Triple = tuple[rdflib.term.Node, rdflib.term.Node, rdflib.term.Node]


@dataclass(frozen=True)
class Axiom:
    triples: frozenset[Triple]
    text: str
    """The axiom in a compact Turtle-like form, CURIEs where a prefix is known."""
    terms: frozenset[str]
    """Every IRI it mentions."""


@dataclass
class Explanation:
    axioms: list[str]
    minimal: bool
    """False when the budget of reasoner calls ran out before the set was shrunk to a minimal one."""
    calls: int

    def text(self) -> str:
        if not self.axioms:
            return "no explanation found (the problem needs axioms outside the module examined)"
        head = "because of these axioms together" if self.minimal else "within these axioms (not minimal: budget spent)"
        return head + ": " + " ; ".join(self.axioms)


class _Budget(Exception):
    pass


def explain_unsatisfiable(graph: rdflib.Graph, iri: str, *, curie: Callable[[str], str] = str,
                          workdir: Path | None = None, max_calls: int = 40) -> Explanation:
    """A minimal set of axioms making the class ``iri`` unsatisfiable."""
    probe: list[Triple] = [(_PROBE, RDF.type, OWL.NamedIndividual), (_PROBE, RDF.type, URIRef(iri))]
    return _explain(graph, {iri}, probe, curie, workdir, max_calls)


def explain_inconsistency(graph: rdflib.Graph, *, curie: Callable[[str], str] = str, workdir: Path | None = None,
                          max_calls: int = 40) -> Explanation:
    """A minimal set of axioms making the ontology inconsistent (starting from its individuals)."""
    individuals = {str(s) for s in graph.subjects(RDF.type, OWL.NamedIndividual) if isinstance(s, URIRef)}
    return _explain(graph, individuals, [], curie, workdir, max_calls)


def _explain(graph: rdflib.Graph, start: set[str], fixed: Sequence[Triple], curie: Callable[[str], str],
             workdir: Path | None, max_calls: int) -> Explanation:
    axioms, declarations = split_axioms(graph, curie)
    module = _module(axioms, start)
    used = set().union(*(a.terms for a in module), start, *(str(n) for t in fixed for n in t))
    declarations = [t for t in declarations if str(t[0]) in used]  # the rest cannot matter, and costs parse time
    calls = 0

    def inconsistent(subset: Sequence[Axiom]) -> bool:
        nonlocal calls
        if calls >= max_calls:
            raise _Budget
        calls += 1
        test = rdflib.Graph()
        for triple in [*declarations, *fixed, *(t for axiom in subset for t in axiom.triples)]:
            test.add(triple)
        return not run_hermit(test, workdir).consistent

    try:
        if not inconsistent(module):
            return Explanation([], True, calls)
        found = _quickxplain([], [], module, inconsistent)
        return Explanation(sorted(a.text for a in found), True, calls)
    except _Budget:
        return Explanation(sorted(a.text for a in module), False, calls)


def _quickxplain(background: list[Axiom], added: list[Axiom], candidates: list[Axiom],
                 inconsistent: Callable[[Sequence[Axiom]], bool]) -> list[Axiom]:
    """A minimal subset of ``candidates`` that, with ``background``, is inconsistent (Junker's QuickXplain)."""
    if added and inconsistent(background):
        return []
    if len(candidates) == 1:
        return list(candidates)
    half = len(candidates) // 2
    first, second = candidates[:half], candidates[half:]
    kept_second = _quickxplain(background + first, first, second, inconsistent)
    kept_first = _quickxplain(background + kept_second, kept_second, first, inconsistent)
    return kept_first + kept_second


def split_axioms(graph: rdflib.Graph, curie: Callable[[str], str] = str) -> tuple[list[Axiom], list[Triple]]:
    """The graph's axioms (each with its blank-node structure) and its declarations."""
    declarations: list[Triple] = []
    axioms: list[Axiom] = []
    referenced = {o for o in graph.objects() if isinstance(o, BNode)}
    annotations = set(graph.subjects(RDF.type, OWL.AnnotationProperty)) | _ANNOTATIONS
    for s, p, o in sorted(graph, key=lambda t: tuple(str(x) for x in t)):
        if isinstance(s, BNode) and s in referenced:
            continue  # part of the axiom that points to it
        if p in annotations:
            continue  # annotations carry no logical meaning: they cannot cause a contradiction
        if p == RDF.type and o in _DECLARATION_TYPES:
            declarations.append((s, p, o))
            continue
        if isinstance(s, BNode):  # a root blank node (owl:AllDisjointClasses ...): the whole structure is one axiom
            if p != RDF.type:
                continue
            triples = _closure(graph, s)
            axioms.append(Axiom(frozenset(triples), _show(graph, s, curie), _iris(triples)))
            continue
        triples = {(s, p, o), *(_closure(graph, o) if isinstance(o, BNode) else ())}
        text = f"{curie(str(s))} {curie(str(p))} {_show(graph, o, curie)}"
        axioms.append(Axiom(frozenset(triples), text, _iris(triples)))
    return axioms, declarations


def _closure(graph: rdflib.Graph, node: BNode) -> set[Triple]:
    found: set[Triple] = set()
    stack = [node]
    seen: set[BNode] = set()
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        for p, o in graph.predicate_objects(current):
            found.add((current, p, o))
            if isinstance(o, BNode):
                stack.append(o)
    return found


def _iris(triples: Iterable[Triple]) -> frozenset[str]:
    return frozenset(str(n) for t in triples for n in t if isinstance(n, URIRef))


def _module(axioms: list[Axiom], start: set[str]) -> list[Axiom]:
    """Axioms about the start terms and, transitively, about the terms they mention (see the module docstring)."""
    about: dict[str, list[Axiom]] = {}
    linking: dict[str, list[Axiom]] = {}
    for axiom in axioms:
        subjects = {str(s) for s, _, _ in axiom.triples if isinstance(s, URIRef)}
        for subject in subjects:
            about.setdefault(subject, []).append(axiom)
        if any(p in _LINKING for _, p, _ in axiom.triples) or not subjects:
            for term in axiom.terms:
                linking.setdefault(term, []).append(axiom)
    chosen: dict[int, Axiom] = {}
    seen: set[str] = set()
    queue = sorted(start)
    while queue:
        term = queue.pop()
        if term in seen:
            continue
        seen.add(term)
        for axiom in about.get(term, []) + linking.get(term, []):
            if id(axiom) not in chosen:
                chosen[id(axiom)] = axiom
                queue.extend(t for t in axiom.terms if t not in seen and not t.startswith(str(OWL)))
    return sorted(chosen.values(), key=lambda a: a.text)


def _show(graph: rdflib.Graph, node: object, curie: Callable[[str], str]) -> str:
    if isinstance(node, URIRef):
        return curie(str(node))
    if isinstance(node, Literal):
        return node.n3()
    if isinstance(node, BNode):
        if graph.value(node, RDF.first) is not None or node == RDF.nil:
            return "( " + " ".join(_show(graph, m, curie) for m in Collection(graph, node)) + " )"
        parts = [f"{curie(str(p))} {_show(graph, o, curie)}" for p, o in sorted(graph.predicate_objects(node))]
        return "[ " + " ; ".join(parts) + " ]"
    return str(node)

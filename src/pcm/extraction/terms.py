"""pyoxigraph terms to rdflib terms, directly (no serialise-and-parse round trip on every validation)."""

from __future__ import annotations

from collections.abc import Iterable

import pyoxigraph as ox
import rdflib

from pcm.backend import Term

_XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"
_RDF_LANG_STRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"


def term_to_rdflib(term: Term) -> rdflib.term.Node:
    if isinstance(term, ox.NamedNode):
        return rdflib.URIRef(term.value)
    if isinstance(term, ox.BlankNode):
        return rdflib.BNode(term.value)
    if isinstance(term, ox.Triple):
        raise TypeError(f"rdflib has no triple terms: {term}")
    if term.language:
        return rdflib.Literal(term.value, lang=term.language)
    datatype = term.datatype.value
    if datatype in (_XSD_STRING, _RDF_LANG_STRING):
        return rdflib.Literal(term.value)
    return rdflib.Literal(term.value, datatype=rdflib.URIRef(datatype))


def to_rdflib(triple: ox.Triple) -> tuple[rdflib.term.Node, rdflib.term.Node, rdflib.term.Node]:
    return (
        term_to_rdflib(triple.subject),
        term_to_rdflib(triple.predicate),
        term_to_rdflib(triple.object),
    )


def graph_of(triples: Iterable[ox.Triple]) -> rdflib.Graph:
    graph = rdflib.Graph()
    for t in triples:
        graph.add(to_rdflib(t))
    return graph

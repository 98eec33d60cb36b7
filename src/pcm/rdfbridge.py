"""pyoxigraph terms to rdflib terms, for the code that hands our quads to pyshacl.

pyshacl wants an rdflib Graph (handed a pyoxigraph Store it reports false ``sh:in`` violations, docs/DESIGN.md §6).
The graph used to be filled by writing the quads as N-Triples and reading the text back with rdflib's reader, whose
time grows with the square of a line's length: a 1 MB literal took seconds, a 4 MB one minutes. Building the terms
directly is linear and gives the same graph: a plain literal has no datatype in rdflib (as its N-Triples reader
makes it), a language-tagged one its language, every other literal its datatype; a blank node label becomes one
fresh rdflib blank node per call, as a parse would make it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import pyoxigraph as ox

if TYPE_CHECKING:  # imported where a graph is built: the CLI's start must not pay for rdflib (test_cli_start)
    import rdflib

XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"


def to_rdflib(triples: Iterable[ox.Quad | ox.Triple], graph: rdflib.Graph | None = None) -> rdflib.Graph:
    """``graph`` (a new one by default) with the triples added; a quad's graph name is dropped.

    Raises :class:`ValueError` for what rdflib cannot hold: RDF 1.2 triple terms and literals with a base
    direction.
    """
    import rdflib

    target = rdflib.Graph() if graph is None else graph
    blanks: dict[str, rdflib.BNode] = {}

    def node(term: object) -> rdflib.term.Node:
        if isinstance(term, ox.NamedNode):
            return rdflib.URIRef(term.value)
        if isinstance(term, ox.BlankNode):
            found = blanks.get(term.value)
            if found is None:
                found = blanks[term.value] = rdflib.BNode()
            return found
        if isinstance(term, ox.Literal):
            if term.direction is not None:
                raise ValueError(f"a literal with a base direction ({term.direction}) cannot be validated")
            if term.language is not None:
                return rdflib.Literal(term.value, lang=term.language)
            datatype = term.datatype.value
            return rdflib.Literal(term.value, datatype=None if datatype == XSD_STRING else rdflib.URIRef(datatype))
        raise ValueError(f"an RDF 1.2 triple term ({term}) cannot be validated")

    for t in triples:
        target.add((node(t.subject), node(t.predicate), node(t.object)))
    return target

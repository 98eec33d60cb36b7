"""Query results in the standard formats, for crossing a process boundary (the query worker's pipe).

Solutions and booleans travel as SPARQL 1.1 Query Results JSON (https://www.w3.org/TR/sparql11-results-json/),
graphs as N-Triples; both are read back with pyoxigraph's own parsers, so the terms that come out are the terms
that went in (blank node labels, language tags, datatypes and triple terms included) without a private encoding.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import pyoxigraph as ox

from pcm.backend import QueryResult, Solutions


def term_json(term: Any) -> dict[str, Any]:
    """One RDF term as a SPARQL JSON results binding (``triple`` for RDF-star / RDF 1.2 triple terms)."""
    if isinstance(term, ox.NamedNode):
        return {"type": "uri", "value": term.value}
    if isinstance(term, ox.BlankNode):
        return {"type": "bnode", "value": term.value}
    if isinstance(term, ox.Literal):
        out: dict[str, Any] = {"type": "literal", "value": term.value}
        if term.language:
            out["xml:lang"] = term.language
        elif term.datatype.value != "http://www.w3.org/2001/XMLSchema#string":
            out["datatype"] = term.datatype.value
        return out
    if isinstance(term, ox.Triple):
        return {"type": "triple", "value": {
            "subject": term_json(term.subject), "predicate": term_json(term.predicate), "object": term_json(term.object)
        }}
    raise TypeError(f"not an RDF term: {term!r}")


def solutions_json(variables: Sequence[str], rows: Iterable[Sequence[Any]]) -> dict[str, Any]:
    """A SPARQL JSON results document of solutions (unbound values left out of their binding, as the format says)."""
    bindings = [{v: term_json(t) for v, t in zip(variables, row, strict=True) if t is not None} for row in rows]
    return {"head": {"vars": list(variables)}, "results": {"bindings": bindings}}


def boolean_json(value: bool) -> dict[str, Any]:
    return {"head": {}, "boolean": bool(value)}


def read_json(document: dict[str, Any] | str | bytes) -> bool | Solutions:
    """A SPARQL JSON results document as pcm's result types, parsed by pyoxigraph."""
    data = document if isinstance(document, str | bytes) else json.dumps(document)
    parsed = ox.parse_query_results(data.encode("utf-8") if isinstance(data, str) else data,
                                    format=ox.QueryResultsFormat.JSON)
    if isinstance(parsed, ox.QueryBoolean):
        return bool(parsed)
    variables = tuple(v.value for v in parsed.variables)
    return Solutions(variables, [tuple(solution[v] for v in variables) for solution in parsed])


def graph_ntriples(triples: Iterable[ox.Triple]) -> str:
    """Triples as N-Triples text."""
    return (ox.serialize(list(triples), format=ox.RdfFormat.N_TRIPLES) or b"").decode("utf-8")


def read_ntriples(text: str) -> list[ox.Triple]:
    return [quad.triple for quad in ox.parse(text.encode("utf-8"), format=ox.RdfFormat.N_TRIPLES)]


def read_result(message: dict[str, Any]) -> QueryResult:
    """A result as :func:`result_message` wrote it."""
    if "graph" in message:
        return read_ntriples(message["graph"])
    return read_json(message["results"])


def result_message(result: Any, limit: int) -> dict[str, Any]:
    """A pyoxigraph query result, at most ``limit`` rows or triples, in the standard formats: ``{"results": SPARQL
    JSON}`` for solutions and booleans, ``{"graph": N-Triples}`` for graphs."""
    if isinstance(result, ox.QueryBoolean):
        return {"results": boolean_json(bool(result))}
    if isinstance(result, ox.QuerySolutions):
        variables = [v.value for v in result.variables]
        rows: list[list[Any]] = []
        for solution in result:
            if len(rows) >= limit:
                break
            rows.append([solution[v] for v in variables])
        return {"results": solutions_json(variables, rows)}
    triples: list[ox.Triple] = []
    for triple in result:
        if len(triples) >= limit:
            break
        triples.append(triple)
    return {"graph": graph_ntriples(triples)}


__all__ = [
    "boolean_json",
    "graph_ntriples",
    "read_json",
    "read_ntriples",
    "read_result",
    "result_message",
    "solutions_json",
    "term_json",
]

"""The SPARQL Protocol answered from the open memory, for a memory whose store is an external server.

Behind ``pcm serve`` over a local memory, ``/query`` is forwarded to the engine pcm runs (see
:mod:`pcm.endpoint.upstream`). Over an external store there is no engine of pcm's: the store is the server's, with
its own endpoints, authentication and deviations (which :class:`pcm.backend_remote.RemoteBackend` already handles).
So the front answers reads through :meth:`pcm.memory.Memory.sparql`, which checks them read-only, bounds them and
runs them as the memory runs every query, and serialises the materialised result here. Writes go to the server
itself (its update and Graph Store endpoints); the front does not forward them.
"""

from __future__ import annotations

import json

import pyoxigraph as ox

from pcm.backend import QueryResult, Solutions, Term

RESULTS_JSON = "application/sparql-results+json"
N_TRIPLES = "application/n-triples"


def term_json(term: Term) -> dict[str, object]:
    """One term in the SPARQL 1.1 Query Results JSON Format."""
    if isinstance(term, ox.NamedNode):
        return {"type": "uri", "value": term.value}
    if isinstance(term, ox.BlankNode):
        return {"type": "bnode", "value": term.value}
    if isinstance(term, ox.Literal):
        out: dict[str, object] = {"type": "literal", "value": term.value}
        if term.language:
            out["xml:lang"] = term.language
        elif term.datatype.value != "http://www.w3.org/2001/XMLSchema#string":
            out["datatype"] = term.datatype.value
        return out
    return {  # an RDF-star quoted triple
        "type": "triple",
        "value": {"subject": term_json(term.subject), "predicate": term_json(term.predicate),
                  "object": term_json(term.object)},
    }


def serialise(result: QueryResult) -> tuple[str, bytes]:
    """Content type and body for a query result: results JSON for SELECT and ASK, N-Triples for a graph."""
    if isinstance(result, bool):
        return RESULTS_JSON, json.dumps({"head": {}, "boolean": result}).encode("utf-8")
    if isinstance(result, Solutions):
        bindings = [{k: term_json(v) for k, v in row.items()} for row in result.dicts()]
        document = {"head": {"vars": list(result.variables)}, "results": {"bindings": bindings}}
        return RESULTS_JSON, json.dumps(document, ensure_ascii=False).encode("utf-8")
    lines = "".join(f"{t.subject} {t.predicate} {t.object} .\n" for t in result)
    return N_TRIPLES, lines.encode("utf-8")

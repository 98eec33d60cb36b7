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

from pcm.backend import QueryResult, Solutions
from pcm.sparql.results import boolean_json, graph_ntriples, solutions_json

RESULTS_JSON = "application/sparql-results+json"
N_TRIPLES = "application/n-triples"


def serialise(result: QueryResult) -> tuple[str, bytes]:
    """Content type and body for a query result: results JSON for SELECT and ASK, N-Triples for a graph."""
    if isinstance(result, bool):
        return RESULTS_JSON, json.dumps(boolean_json(result)).encode("utf-8")
    if isinstance(result, Solutions):
        document = solutions_json(result.variables, result.rows)
        return RESULTS_JSON, json.dumps(document, ensure_ascii=False).encode("utf-8")
    return N_TRIPLES, graph_ntriples(result).encode("utf-8")

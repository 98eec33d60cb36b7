"""Rows are built from solutions by position: in SELECT order, None for unbound, whatever the result format; a
failed update is our QueryError."""

from __future__ import annotations

from pathlib import Path

import pyoxigraph as ox
import pytest

from pcm.backend import Solutions, materialise
from pcm.backend_local import LocalBackend
from pcm.errors import QueryError

A, B = ox.NamedNode("http://a"), ox.NamedNode("http://b")


def test_rows_follow_the_select_order_with_none_for_unbound() -> None:
    store = ox.Store()
    store.add(ox.Quad(A, B, ox.Literal("c")))
    result = materialise(store.query("SELECT ?o ?z ?s WHERE { ?s ?p ?o OPTIONAL { ?s <http://x> ?z } }"),
                         deadline=None, limit=None)
    assert isinstance(result, Solutions)
    assert result.variables == ("o", "z", "s")
    assert result.rows == [(ox.Literal("c"), None, A)]


def test_parsed_results_with_bindings_in_another_order_keep_the_header_order() -> None:
    text = (b'{"head":{"vars":["a","b","c"]},"results":{"bindings":['
            b'{"c":{"type":"literal","value":"C"},"a":{"type":"uri","value":"http://a"}},'
            b'{"b":{"type":"uri","value":"http://b"}}]}}')
    parsed = ox.parse_query_results(text, format=ox.QueryResultsFormat.JSON)
    result = materialise(parsed, deadline=None, limit=1)
    assert isinstance(result, Solutions)
    assert result.rows == [(A, None, ox.Literal("C"))]  # limit 1: the second row is not read


def test_an_update_that_fails_to_run_is_a_query_error(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path / "store")
    backend.update("CREATE GRAPH <http://g>")
    for update in ("CREATE GRAPH <http://g>", "DROP GRAPH <http://absent>", "LOAD <file:///absent.ttl>"):
        with pytest.raises(QueryError, match="SPARQL Update failed"):
            backend.update(update)
    with pytest.raises(QueryError, match="syntax error"):
        backend.update("CREATE GRAF <http://g>")
    backend.close()

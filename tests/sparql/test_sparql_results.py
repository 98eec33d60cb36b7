"""Query results in the standard formats (SPARQL JSON results, N-Triples): what crosses the query worker's pipe."""

from __future__ import annotations

import json

import pyoxigraph as ox

from pcm.sparql.results import read_json, read_result, result_message, solutions_json

XSD = "http://www.w3.org/2001/XMLSchema#"


def test_terms_come_back_as_they_went() -> None:
    row = (
        ox.NamedNode("urn:x:é"),
        ox.BlankNode("b0"),
        ox.Literal("hé \"quoted\"\n", language="fr-CA"),
        ox.Literal("4.50", datatype=ox.NamedNode(XSD + "decimal")),
        ox.Literal("plain"),
        None,
        ox.Triple(ox.NamedNode("urn:s"), ox.NamedNode("urn:p"), ox.Literal("1", datatype=ox.NamedNode(XSD + "integer"))),
    )
    variables = ("a", "b", "c", "d", "e", "f", "g")
    document = json.loads(json.dumps(solutions_json(variables, [row])))
    assert "f" not in document["results"]["bindings"][0]  # unbound: left out, as the format says
    assert document["results"]["bindings"][0]["e"] == {"type": "literal", "value": "plain"}
    assert read_json(document) == (variables, [row])


def test_the_worker_messages_bound_rows_and_carry_graphs_and_booleans() -> None:
    store = ox.Store()
    store.extend([ox.Quad(ox.NamedNode(f"urn:s:{i}"), ox.NamedNode("urn:p"), ox.BlankNode(f"o{i}")) for i in range(5)])
    solutions = result_message(store.query("SELECT ?s ?o WHERE { ?s ?p ?o }"), 3)
    table = read_result(json.loads(json.dumps(solutions)))
    assert isinstance(table, tuple) and table[0] == ("s", "o") and len(table[1]) == 3
    graph = read_result(json.loads(json.dumps(result_message(store.query("CONSTRUCT WHERE { ?s ?p ?o }"), 10))))
    assert isinstance(graph, list) and set(graph) == {q.triple for q in store}
    assert read_result(result_message(store.query("ASK { ?s ?p ?o }"), 1)) is True

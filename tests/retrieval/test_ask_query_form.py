"""Asking with the constrained JSON query form: the schema from the ontology, the compiler, and the real ask path.

The sample memory is built through the real extraction pipeline (see ``test_ask_support``); a scripted model
answers the NL→SPARQL step with a query form, which pcm compiles to SPARQL and runs through the same safety check
and repair loop as a query the model wrote.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import jsonschema
import pytest

from pcm.llm import ScriptedClient
from pcm.memory import Memory
from pcm.ontology import load_ontology
from pcm.retrieval.ask import CachingClient, ask
from pcm.retrieval.query_form import FormProblem, compile_form, query_schema
from pcm.settings import Settings
from tests.retrieval.test_ask_support import build_sample_memory, without_traversal

AS_OF = datetime(2025, 10, 1, 12, 0, tzinfo=UTC)
ONTOLOGY = load_ontology()
NS = "https://pcm.invalid/m/test/"

PRICE_FORM = {
    "select": ["?price", "?currency"],
    "where": [
        {"s": "?buy", "p": "rdf:type", "o": "schema:BuyAction"},
        {"s": "?buy", "p": "schema:agent", "o": "m:owner"},
        {"s": "?buy", "p": "schema:object", "o": "?item"},
        {"s": "?item", "p": "rdfs:label", "o": "?label"},
        {"s": "?buy", "p": "schema:price", "o": "?price"},
        {"s": "?buy", "p": "schema:priceCurrency", "o": "?currency", "optional": True},
    ],
    "filters": [{"var": "?label", "op": "contains", "value": "Breville"}],
    "limit": 5,
}


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    path = Path(tmp_path_factory.mktemp("ask-form")) / "memory"
    build_sample_memory(path, index=False).close()
    mem = Memory.open(Settings(memory=path, index_enabled=False).with_(llm_output="json"))
    CachingClient.forget(mem.context)
    yield mem
    CachingClient.forget(mem.context)
    mem.close()


def test_the_schema_offers_every_property_and_refuses_others() -> None:
    schema = query_schema(ONTOLOGY).schema
    jsonschema.Draft202012Validator.check_schema(schema)
    predicates = set(schema["properties"]["where"]["items"]["properties"]["p"]["enum"])
    assert {ONTOLOGY.curie(i) for i in ONTOLOGY.properties} | {"rdf:type", "rdfs:label"} == predicates
    assert jsonschema.Draft202012Validator(schema).is_valid(PRICE_FORM)
    bad = {**PRICE_FORM, "where": [{"s": "?x", "p": "schema:inventedPrice", "o": "?y"}]}
    assert not jsonschema.Draft202012Validator(schema).is_valid(bad)
    assert not jsonschema.Draft202012Validator(schema).is_valid({**PRICE_FORM, "limit": 100000})


def test_the_compiler_writes_plain_sparql_with_escaped_values() -> None:
    form = {"select": ["?x"], "where": [{"s": "?x", "p": "rdfs:label", "o": "?l"}],
            "filters": [{"var": "?l", "op": "contains", "value": 'a"} DROP ALL #'}]}
    sparql = compile_form(form, namespace=NS, ontology=ONTOLOGY)
    assert 'LCASE("a\\"} DROP ALL #")' in sparql and "SELECT ?x" in sparql


def test_a_selected_variable_no_pattern_binds_is_dropped() -> None:
    form = {"select": ["?x", "?where"], "where": [{"s": "?x", "p": "rdfs:label", "o": "?l"}]}
    assert "SELECT ?x\nWHERE" in compile_form(form, namespace=NS, ontology=ONTOLOGY)


def test_an_aggregate_groups_the_other_variables() -> None:
    form = {"select": ["?pet", "?n"], "where": [{"s": "m:owner", "p": "pcm:hasPet", "o": "?pet"},
                                                {"s": "?pet", "p": "pcm:petBreed", "o": "?b"}],
            "aggregate": {"fn": "count", "var": "?b", "distinct": True, "as": "?n"}, "group_by": ["?pet"]}
    sparql = compile_form(form, namespace=NS, ontology=ONTOLOGY)
    assert "SELECT ?pet (COUNT(DISTINCT ?b) AS ?n)" in sparql and "GROUP BY ?pet" in sparql
    with pytest.raises(FormProblem, match="group_by"):
        compile_form({**form, "group_by": []}, namespace=NS, ontology=ONTOLOGY)


@pytest.mark.parametrize(
    ("form", "fragment"),
    [({"where": []}, "at least one"), ({"where": [{"s": "?x", "p": "schema:nope", "o": "?y"}]}, "not a property"),
     ({"where": [{"s": "Dana", "p": "rdfs:label", "o": "?y"}]}, "subject"),
     ({"select": ["?z"], "where": [{"s": "?x", "p": "rdfs:label", "o": "?y"}]}, "does not occur")],
)
def test_forms_that_cannot_compile_say_why(form: dict[str, object], fragment: str) -> None:
    with pytest.raises(FormProblem, match=fragment):
        compile_form(form, namespace=NS, ontology=ONTOLOGY)


def test_ask_compiles_the_form_runs_it_safely_and_answers(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    without_traversal(monkeypatch)
    client = ScriptedClient([json.dumps(PRICE_FORM), "ANSWER: $549 [cites: 1]"] * 2)
    result = ask(memory.context, "How much did I pay for the Breville?", client=client, as_of=AS_OF, plan=False)
    assert result.path == "sparql" and "549" in result.answer
    assert result.sparql is not None and "CONTAINS(LCASE(STR(?label))" in result.sparql
    assert client.schemas[0] is not None and client.schemas[0].name == "query"
    assert "JSON query form" in client.requests[0][0]


def test_a_bad_form_goes_through_the_repair_loop(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    without_traversal(monkeypatch)
    bad = {**PRICE_FORM, "where": [{"s": "?buy", "p": "schema:pricePaid", "o": "?price"}], "select": ["?price"]}
    client = ScriptedClient([json.dumps(bad), json.dumps(PRICE_FORM)] + ["ANSWER: $549 [cites: 1]"] * 2)
    result = ask(memory.context, "What did the Breville cost me?", client=client, as_of=AS_OF, plan=False)
    assert result.path == "sparql" and "549" in result.answer
    repair = client.requests[1][1][-1].content
    assert "schema:pricePaid" in repair and "not a property" in repair


def test_no_query_in_the_form_falls_back(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    without_traversal(monkeypatch)
    client = ScriptedClient([json.dumps({"no_query": "nothing about submarines"})] + ["NOT IN MEMORY"] * 3)
    result = ask(memory.context, "Which submarine did I command?", client=client, as_of=AS_OF, plan=False)
    assert result.path in ("none", "episodic")
    assert any("nothing about submarines" in step.detail for step in result.trace)

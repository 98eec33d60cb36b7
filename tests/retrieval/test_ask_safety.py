"""The safety checks in front of every generated query: forms, updates, SERVICE, LOAD, paths, LIMIT, time limit.

The W3C SPARQL 1.1 syntax suites go through the checker: valid queries accepted (or refused only for a policy
reason: SERVICE), invalid ones rejected as syntax errors, updates refused.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyoxigraph as ox
import pytest

from pcm.backend_local import LocalBackend, store_fingerprint
from pcm.errors import QueryError
from pcm.query_safety import (
    QueryRefused,
    QueryRunner,
    QueryTimeout,
    bound_limit,
    check_query,
    check_read_only,
    query_shape,
)
from pcm.sparql import check_read_only as regex_check_read_only
from pcm.sparql.query import rdflib_shape as _rdflib_shape
from tests.conftest import W3C_RDF_TESTS

SPARQL11 = W3C_RDF_TESTS / "sparql" / "sparql11"
MF = "http://www.w3.org/2001/sw/DataAccess/tests/test-manifest#"


def refused(query: str) -> QueryRefused:
    with pytest.raises(QueryRefused) as caught:
        check_query(query)
    return caught.value


# ------------------------------------------------------------------------------------------------ refusals


@pytest.mark.parametrize(
    "query",
    [
        "INSERT DATA { <urn:a> <urn:b> <urn:c> }",
        "DELETE WHERE { ?s ?p ?o }",
        "delete { ?s ?p ?o } where { ?s ?p ?o }",
        "PREFIX ex: <http://example.org/> DROP GRAPH ex:g",
        "CLEAR ALL",
        "SELECT * WHERE { ?s ?p ?o } ; INSERT DATA { <urn:a> <urn:b> <urn:c> }",
        "WITH <urn:g> DELETE { ?s ?p ?o } WHERE { ?s ?p ?o }",
    ],
)
def test_updates_are_refused(query: str) -> None:
    error = refused(query)
    assert error.kind == "update" and "refused" in str(error) and "\n" not in str(error)


def test_service_and_load_are_refused_before_any_engine_sees_them() -> None:
    assert refused("SELECT * WHERE { SERVICE <http://example.org/sparql> { ?s ?p ?o } }").kind == "service"
    assert refused("SELECT * WHERE { service silent <http://x/> { ?s ?p ?o } }").kind == "service"
    assert refused("LOAD <http://example.org/data.ttl>").kind == "load"


def test_keywords_inside_strings_iris_and_comments_are_harmless() -> None:
    query = """# DELETE everything? no: this is a comment
SELECT ?x WHERE { ?x <http://example.org/INSERT> "please DROP it and LOAD <http://x>" }"""
    assert check_query(query).form == "SELECT"


def test_syntax_errors_are_told_apart_from_refusals() -> None:
    error = refused("SELECT ?x WHERE { ?x ?p ")
    assert error.kind == "syntax" and str(error).startswith("SPARQL syntax error")
    assert refused("hello there").kind == "form"


def test_check_read_only_keeps_the_behaviour_of_the_regex_precheck() -> None:
    for query in ("SELECT * WHERE { ?s ?p ?o }", "ASK { ?s ?p ?o }", "CONSTRUCT WHERE { ?s ?p ?o }",
                  "DESCRIBE <urn:x>"):
        assert check_read_only(query) == regex_check_read_only(query)
    for query in ("INSERT DATA { <urn:a> <urn:b> <urn:c> }", "SELECT * { SERVICE <http://x/> { ?s ?p ?o } }",
                  "SELECT * WHERE { ?s ?p"):
        with pytest.raises(QueryError):
            regex_check_read_only(query)
        with pytest.raises(QueryError):
            check_read_only(query)


# ------------------------------------------------------------------------------------------------ bounds


def test_a_missing_limit_is_added_and_a_huge_one_lowered() -> None:
    added = check_query("SELECT ?s WHERE { ?s ?p ?o }", max_limit=50)
    assert added.text.rstrip().endswith("LIMIT 50") and added.notes == ["LIMIT 50 added"]
    lowered = check_query("SELECT ?s WHERE { ?s ?p ?o } LIMIT 100000000", max_limit=50)
    assert "LIMIT 50" in lowered.text and "LIMIT 100000000 lowered to 50" in lowered.notes[0]
    kept = check_query("SELECT ?s WHERE { ?s ?p ?o } LIMIT 7", max_limit=50)
    assert kept.text.endswith("LIMIT 7") and not kept.notes
    assert check_query("ASK { ?s ?p ?o }").text == "ASK { ?s ?p ?o }"


def test_limit_rewriting_respects_subqueries_and_trailing_values() -> None:
    text, note = bound_limit("SELECT * { { SELECT ?s { ?s ?p ?o } LIMIT 5000 } } VALUES ?s { <urn:a> }", 100)
    assert "LIMIT 5000 }" in text  # the subquery's own limit is not the outer one
    assert text.index("LIMIT 100") < text.index("VALUES") and note == "LIMIT 100 added"
    check_query(text)  # still a valid query


def test_unanchored_star_and_plus_paths_are_refused_with_the_reason() -> None:
    for query in ("SELECT * WHERE { ?a <http://schema.org/knows>* ?b }",
                  "SELECT * WHERE { ?a (<urn:p>|^<urn:p>)+ ?b }",
                  "PREFIX s: <urn:s:> SELECT * WHERE { ?a s:x/s:y* ?b }",
                  "SELECT * WHERE { ?a ?p ?o . OPTIONAL { ?o <urn:p>+ ?z } }"):
        error = refused(query)
        assert error.kind == "path" and "anchor one end to a constant IRI" in str(error)


def test_anchored_and_bounded_paths_are_fine() -> None:
    for query in ("SELECT * WHERE { ?x a/rdfs:subClassOf* schema:Event }",
                  "SELECT * WHERE { <urn:me> (<urn:knows>|^<urn:knows>)+ ?friend }",
                  "SELECT * WHERE { ?rel rdfs:subPropertyOf* ob:hasChild . <urn:me> ?rel ?child }",
                  "SELECT * WHERE { ?a <urn:p>/<urn:q>? ?b }",
                  "SELECT * WHERE { ?a <urn:p>|<urn:q> ?b }"):
        assert check_query(query).form == "SELECT"


def test_missing_known_prefixes_are_declared() -> None:
    safe = check_query("SELECT ?x WHERE { ?x a schema:Person ; rdfs:label ?n . m:owner pcm:hasPet ?x }",
                       prefixes={"m": "https://pcm.invalid/m/test/"})
    assert "PREFIX m: <https://pcm.invalid/m/test/>" in safe.text and "PREFIX rdfs:" in safe.text
    assert refused("SELECT ?x WHERE { ?x a nowhere:Thing }").kind == "syntax"


# ------------------------------------------------------------------------------------------------ shape


def test_the_token_parser_agrees_with_rdflib() -> None:
    queries = [
        "PREFIX s: <urn:s:> SELECT ?n WHERE { ?x a s:Pet ; s:name ?n , 'Rex'@en ; s:age 4 . OPTIONAL { ?x s:breed ?b } }",
        "PREFIX s: <urn:s:> SELECT * WHERE { { ?x s:p ?y } UNION { ?y s:q 2.5 } GRAPH ?g { ?y s:r true } }",
        "PREFIX s: <urn:s:> SELECT (COUNT(?x) AS ?n) WHERE { ?x s:p/s:q* s:C FILTER(?x != s:a) BIND(1 AS ?one) }",
        "PREFIX s: <urn:s:> SELECT ?x WHERE { { SELECT ?x WHERE { ?x s:p \"a\\\"b\" } LIMIT 3 } ?x s:q [ s:r ?z ] }",
    ]
    for query in queries:
        ours, theirs = query_shape(query), _rdflib_shape(query)
        assert ours is not None and theirs is not None and ours.parser == "tokens"
        assert set(ours.patterns) == set(theirs.patterns), query
        assert sorted((p.subject, p.object, p.anchored) for p in ours.paths) == sorted(
            (p.subject, p.object, p.anchored) for p in theirs.paths)
    assert query_shape("SELECT ?x WHERE { ?x <urn:p> ( 1 2 ) }").parser == "rdflib"  # collections: the fallback


def test_negated_patterns_are_not_evidence() -> None:
    shape = query_shape("SELECT ?x WHERE { ?x <urn:p> ?y FILTER NOT EXISTS { ?x <urn:q> ?z } MINUS { ?x <urn:r> ?w } }")
    assert shape is not None and shape.patterns == [("?x", "<urn:p>", "?y")] and shape.projected == ["x"]


# ------------------------------------------------------------------------------------------------ W3C suites


def _syntax_tests() -> list[tuple[str, Path]]:
    tests = []
    for manifest in sorted(SPARQL11.glob("*/manifest.ttl")):
        store = ox.Store()
        store.load(path=str(manifest), format=ox.RdfFormat.TURTLE, base_iri=manifest.resolve().as_uri())
        query = (
            f"SELECT ?type ?action WHERE {{ ?t a ?type ; <{MF}action> ?action . "
            "FILTER(CONTAINS(STR(?type), 'SyntaxTest11')) }"
        )
        for row in store.query(query):
            tests.append((row["type"].value.rsplit("#", 1)[1], Path(row["action"].value.removeprefix("file://"))))
    return sorted(tests, key=lambda t: str(t[1]))


SYNTAX_TESTS = _syntax_tests()


@pytest.mark.parametrize(("kind", "path"), SYNTAX_TESTS, ids=[f"{p.parent.name}/{p.name}" for _, p in SYNTAX_TESTS])
def test_w3c_syntax_suite_through_the_checker(kind: str, path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    try:
        check_query(text, base_iri=path.resolve().as_uri())
        outcome = "accepted"
    except QueryRefused as error:
        outcome = error.kind
    if kind == "PositiveSyntaxTest11":
        assert outcome in ("accepted", "service"), f"valid query refused: {outcome}"
    elif kind == "NegativeSyntaxTest11":
        assert outcome in ("syntax", "update"), f"invalid query not rejected: {outcome}"
    else:  # positive and negative update syntax tests: never run
        assert outcome in ("update", "load", "form", "syntax"), f"update not refused: {outcome}"


def test_the_w3c_suite_is_all_there() -> None:
    kinds = {k for k, _ in SYNTAX_TESTS}
    assert {"PositiveSyntaxTest11", "NegativeSyntaxTest11", "PositiveUpdateSyntaxTest11"} <= kinds
    assert len(SYNTAX_TESTS) > 150


# ------------------------------------------------------------------------------------------------ time limit


@pytest.fixture
def local_store(tmp_path: Path):  # type: ignore[no-untyped-def]
    backend = LocalBackend(tmp_path / "store")
    backend.extend([ox.Quad(ox.NamedNode(f"urn:s:{i}"), ox.NamedNode("urn:p"), ox.Literal(str(i)), ox.NamedNode("urn:g"))
                    for i in range(2000)])
    yield backend
    backend.close()


def test_a_runaway_query_is_killed_at_the_time_limit_and_the_next_one_runs(local_store: LocalBackend) -> None:
    runner = QueryRunner(local_store, timeout=1.0, limit=100)
    assert runner.isolated
    try:
        # 8e9 rows to count: blocks inside COUNT, so only the kill at the limit can end it (pytest-timeout bounds
        # the wait if it does not); how soon after the limit it lands is benchmarks/bench_runaway.py's figure
        with pytest.raises(QueryTimeout, match="time limit of 1 s"):
            runner.run(check_query("SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i }"))
        # a fresh worker answers the next one (its own limit generous: starting a worker counts inside it, and a
        # loaded machine may take more than a second to start one)
        rows = runner.run(check_query("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"), timeout=120)
        assert rows.rows[0][0].value == "2000"  # type: ignore[union-attr]
    finally:
        runner.close()


def test_the_worker_sees_what_was_written_after_it_started(local_store: LocalBackend) -> None:
    runner = QueryRunner(local_store, timeout=120.0, limit=100)
    try:
        count = check_query("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }")
        assert runner.run(count).rows[0][0].value == "2000"  # type: ignore[union-attr]
        before = store_fingerprint(local_store.path)  # type: ignore[arg-type]
        local_store.extend([ox.Quad(ox.NamedNode("urn:new"), ox.NamedNode("urn:p"), ox.Literal("x"), ox.NamedNode("urn:g"))])
        assert store_fingerprint(local_store.path) != before  # type: ignore[arg-type]
        assert runner.run(count).rows[0][0].value == "2001"  # type: ignore[union-attr]
    finally:
        runner.close()


def test_rows_are_bounded_and_terms_survive_the_pipe(local_store: LocalBackend) -> None:
    local_store.extend([ox.Quad(ox.NamedNode("urn:t"), ox.NamedNode("urn:p"), ox.Literal("été", language="fr"),
                                ox.NamedNode("urn:g"))])
    runner = QueryRunner(local_store, timeout=120.0, limit=10)
    try:
        assert len(runner.run(check_query("SELECT * WHERE { ?s ?p ?o }"))) == 10
        row = runner.run(check_query("SELECT ?o WHERE { <urn:t> ?p ?o }")).rows[0]
        assert row[0] == ox.Literal("été", language="fr")
        assert runner.run(check_query("ASK { <urn:t> ?p ?o }")) is True
        with pytest.raises(QueryError, match="query failed"):
            runner.run(check_query("SELECT ?o WHERE { ?s ?p ?o FILTER(<urn:pcm:no-such-function>(?o)) }"))
    finally:
        runner.close()
    assert os.name != "nt"  # the worker relies on select() over pipes


def test_the_worker_answers_what_the_store_answers_in_process(local_store: LocalBackend) -> None:
    """Results cross the pipe as SPARQL JSON results and N-Triples: blank nodes, datatypes, language tags, unbound
    values and graphs come back as the same terms the store gives in process."""
    g = ox.NamedNode("urn:g")
    local_store.extend([
        ox.Quad(ox.BlankNode("b1"), ox.NamedNode("urn:p"), ox.Literal("42", datatype=ox.NamedNode(
            "http://www.w3.org/2001/XMLSchema#integer")), g),
        ox.Quad(ox.BlankNode("b1"), ox.NamedNode("urn:q"), ox.Literal('a "quoted"\nline'), g),
        ox.Quad(ox.NamedNode("urn:u"), ox.NamedNode("urn:q"), ox.Literal("hé", language="fr-CA"), g),
    ])
    runner = QueryRunner(local_store, timeout=5.0, limit=100)
    queries = [
        "SELECT ?s ?v ?w WHERE { ?s <urn:q> ?v OPTIONAL { ?s <urn:p> ?w } } ORDER BY ?v",
        "CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o FILTER(?p != <urn:p>) }",
        "ASK { ?s <urn:p> 42 }",
    ]
    try:
        for text in queries:
            through_worker = runner.run(check_query(text, policy=False))
            in_process = local_store.query(text, timeout=5.0, limit=100)
            if isinstance(in_process, list):
                assert isinstance(through_worker, list) and set(through_worker) == set(in_process)
            else:
                assert through_worker == in_process, text
    finally:
        runner.close()


# ------------------------------------------------------------------------------------------------ hierarchy paths


def test_hierarchy_paths_expanded_from_the_ontology_give_the_same_answers() -> None:
    from pcm.ontology import load_ontology
    from pcm.retrieval.repair import faster

    ontology = load_ontology()
    ns = "https://pcm.invalid/m/t/"
    store = ox.Store()
    store.extend(ontology.quads())
    data = f"""@prefix m: <{ns}> . @prefix schema: <https://schema.org/> . @prefix ob: <https://w3id.org/ontobio/> .
    @prefix rel: <http://purl.org/vocab/relationship/> .
    m:buy a schema:BuyAction ; schema:agent m:owner . m:pay a schema:PayAction ; schema:agent m:owner .
    m:trip a schema:TravelAction ; schema:agent m:owner . m:owner ob:hasDaughter m:lily ; ob:hasSon m:owen ;
    rel:friendOf m:sam ; ob:hasChild m:kim ."""
    store.load(data.encode(), format=ox.RdfFormat.TURTLE, to_graph=ox.NamedNode("urn:pcm:graph:extraction:x"))
    queries = [
        "SELECT ?x WHERE { ?x a/rdfs:subClassOf* schema:TradeAction ; schema:agent m:owner }",
        "SELECT ?c WHERE { m:owner ?r ?c . ?r rdfs:subPropertyOf* ob:hasChild . }",
        "SELECT ?x WHERE { ?x schema:agent m:owner ; a/rdfs:subClassOf* schema:Action FILTER(?x != m:buy) }",
    ]
    for query in queries:
        safe = check_query(query, prefixes={"m": ns})
        fast = faster(safe, ontology, ns, 1000)
        assert fast.text != safe.text and "VALUES" in fast.text and "expanded" in fast.notes[-1]

        def rows(text: str) -> set[str]:
            return {str(tuple(r)) for r in store.query(text, use_default_graph_as_union=True)}

        assert rows(fast.text) == rows(safe.text) != set(), query
    kept = check_query("SELECT ?x WHERE { ?x a/rdfs:subClassOf* schema:Event, schema:Action }")
    assert faster(kept, ontology, ns, 1000).text == kept.text  # an object list: left as written


def test_the_syntax_check_passes_what_only_evaluation_refuses_and_not_a_bad_argument() -> None:
    safe = check_query("SELECT ?x WHERE { BIND(<http://example.org/f>(1) AS ?x) }")  # an unknown extension function
    assert safe.form == "SELECT"
    with pytest.raises(ValueError, match="base IRI"):
        check_query("SELECT * WHERE { ?s ?p ?o }", base_iri="not an iri")

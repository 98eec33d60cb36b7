"""The ask pipeline with a scripted model on a small memory: each repair path, refusals, abstention, determinism.

The memory is real (pyoxigraph on disk, the query worker process); its facts are written straight into extraction
graphs so the file stays fast. The side index is off: grounding uses exact label lookups.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pyoxigraph as ox
import pytest
from click.testing import CliRunner

from pcm.conversations import Conversation, Utterance
from pcm.llm import ScriptedClient
from pcm.memory import Memory
from pcm.namespaces import turtle_prefixes
from pcm.provenance import entity_derivation_quads
from pcm.retrieval.ask import CachingClient, ask
from pcm.settings import Settings

AS_OF = datetime(2025, 4, 1, 12, 0, tzinfo=UTC)
UTTERANCES = [
    ("2025-03-18T20:45:00+00:00", "My dog Biscuit is a four-year-old beagle."),
    ("2025-03-19T10:00:00+00:00", "I bought a blue Trek bike for 600 dollars at Bike Gallery yesterday."),
    ("2025-03-20T09:00:00+00:00", "My favourite food is mushroom risotto."),
    ("2025-03-21T09:00:00+00:00", "We had a picnic in the park last Saturday."),
]
FACTS = [
    """m:biscuit a pcm:Pet ; rdfs:label "Biscuit" ; pcm:petSpecies "dog" ; pcm:petBreed "beagle" .
       m:owner pcm:hasPet m:biscuit .""",
    """m:buy-trek a schema:BuyAction ; rdfs:label "buying the Trek bike" ; schema:agent m:owner ;
           schema:object m:trek-bike ; schema:seller m:bike-gallery ; schema:price 600 ; schema:priceCurrency "USD" ;
           schema:startDate "2025-03-18"^^xsd:date .
       m:trek-bike a pcm:Bicycle ; rdfs:label "Trek bike" ; schema:color "blue" .
       m:bike-gallery a schema:Store ; rdfs:label "Bike Gallery" .""",
    """m:pref-risotto a pcm:Preference ; rdfs:label "favourite food: mushroom risotto" ; pcm:preferenceFor m:risotto .
       m:risotto a pcm:FoodItem ; rdfs:label "mushroom risotto" .
       m:owner pcm:hasPreference m:pref-risotto .""",
    """m:picnic a schema:SocialEvent ; rdfs:label "picnic in the park" ; schema:agent m:owner ;
           schema:startDate "2025-03-15"^^xsd:date .""",
]
GOOD_BREED = "SELECT ?breed WHERE { m:biscuit pcm:petBreed ?breed }"


def reply(query: str) -> str:
    return f"```sparql\n{query}\n```"


def write_facts(memory: Memory) -> list[str]:
    posts = sorted(memory.store.posts(), key=lambda p: p.position)
    for post, turtle in zip(posts, FACTS, strict=True):
        text = turtle_prefixes() + f"@prefix m: <{memory.naming.namespace}> .\n" + turtle
        graph = memory.naming.extraction_graph(post.iri)
        triples = list(ox.parse(text.encode(), format=ox.RdfFormat.TURTLE))
        quads = [ox.Quad(t.subject, t.predicate, t.object, ox.NamedNode(graph)) for t in triples]
        subjects = {t.subject.value for t in triples} - {memory.naming.owner}
        memory.store.write(quads + entity_derivation_quads(subjects, post.iri, graph))
    return [p.iri for p in posts]


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    # a runaway cross product never ends, so the limit only bounds that test's wait; 1.5 s was passed by good
    # queries on a loaded machine, which then asked for a repair round the scripts did not hold
    settings = Settings(memory=tmp_path_factory.mktemp("ask-small") / "memory", index_enabled=False, query_timeout=6.0)
    memory = Memory.init(settings, owner="Dana Whitfield")
    memory.ingest([Conversation("small", [
        Utterance("small", i, "user", text, timestamp=datetime.fromisoformat(when), source_id=f"u{i}")
        for i, (when, text) in enumerate(UTTERANCES)
    ])])
    write_facts(memory)
    yield memory
    memory.close()


@pytest.fixture(autouse=True)
def no_cached_replies(small: Memory):  # type: ignore[no-untyped-def]
    CachingClient.forget(small.context)
    yield
    CachingClient.forget(small.context)


def cited(memory: Memory, result) -> set[str]:  # type: ignore[no-untyped-def]
    return {p.source_id or "" for p in result.posts}


def outcomes(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [s.outcome for s in result.trace]


def repair_text(client: ScriptedClient, call: int) -> str:
    return client.requests[call][1][-1].content


# ------------------------------------------------------------------------------------------------ repair paths


def test_syntax_error_is_fed_back_and_fixed(small: Memory) -> None:
    client = ScriptedClient([reply("SELECT ?breed WHERE { m:biscuit pcm:petBreed ?breed "), reply(GOOD_BREED)])
    result = ask(small.context, "What breed is Biscuit?", client=client, as_of=AS_OF)
    assert outcomes(result) == ["parse_error", "ok"]
    assert result.path == "sparql" and result.answer == "Beagle."
    assert "does not parse" in repair_text(client, 1)
    assert client.requests[1][1][1].role == "assistant"  # the model sees its own broken query
    assert cited(small, result) == {"u0"}


def test_execution_error_is_fed_back_and_fixed(small: Memory) -> None:
    broken = "SELECT ?breed WHERE { m:biscuit pcm:petBreed ?breed FILTER(<urn:pcm:test:nofunction>(?breed)) }"
    client = ScriptedClient([reply(broken), reply(GOOD_BREED)])
    result = ask(small.context, "What breed is Biscuit?", client=client, as_of=AS_OF)
    assert outcomes(result) == ["execution_error", "ok"]
    assert "Running your query failed" in repair_text(client, 1)
    assert result.answer == "Beagle."


def test_empty_result_gets_the_facts_around_the_matched_entities(small: Memory) -> None:
    client = ScriptedClient([reply("SELECT ?kind WHERE { m:biscuit pcm:dogBreed ?kind }"), reply(GOOD_BREED)])
    result = ask(small.context, "What kind of dog is Biscuit?", client=client, as_of=AS_OF)
    assert outcomes(result) == ["empty", "ok"]
    feedback = repair_text(client, 1)
    assert "returned no rows" in feedback
    assert "m:biscuit: " in feedback and "pcm:petBreed" in feedback  # what Biscuit really has
    assert result.answer == "Beagle."


def test_relaxation_to_case_insensitive_labels_needs_no_second_call(small: Memory) -> None:
    client = ScriptedClient([reply('SELECT ?breed WHERE { ?d rdfs:label "biscuit" ; pcm:petBreed ?breed }')])
    result = ask(small.context, "What breed is Biscuit?", client=client, as_of=AS_OF)
    assert len(client.requests) == 1
    assert outcomes(result) == ["empty", "ok"]
    assert result.trace[-1].source == "relaxation: case-insensitive labels"
    assert "relaxation" in result.note and result.answer == "Beagle."


def test_relaxation_to_subclasses(small: Memory) -> None:
    query = "SELECT ?item WHERE { ?b a schema:TradeAction ; schema:object ?o . ?o rdfs:label ?item }"
    result = ask(small.context, "What did I buy?", client=ScriptedClient([reply(query)]), as_of=AS_OF)
    assert result.trace[-1].source == "relaxation: subclasses"
    assert "VALUES ?_c1" in (result.sparql or "") and result.answer == "Trek bike."  # closure expanded


def test_relaxation_dropping_one_constraint(small: Memory) -> None:
    query = """SELECT ?item WHERE { ?b a schema:BuyAction ; schema:object ?o ; schema:startDate ?d .
               ?o rdfs:label ?item . FILTER(STRSTARTS(STR(?d), "2024")) }"""
    result = ask(small.context, "What did I buy in 2024?", client=ScriptedClient([reply(query)]), as_of=AS_OF)
    assert result.trace[-1].source.startswith("relaxation: dropped FILTER(STRSTARTS")
    assert result.answer == "Trek bike."


def test_bare_iris_are_suspicious_and_fed_back(small: Memory) -> None:
    client = ScriptedClient([
        reply("SELECT ?pet WHERE { m:owner pcm:hasPet ?pet }"),
        reply("SELECT ?name WHERE { m:owner pcm:hasPet ?pet . ?pet rdfs:label ?name }"),
    ])
    result = ask(small.context, "Which pets do I have?", client=client, as_of=AS_OF)
    assert outcomes(result) == ["suspicious", "ok"]
    assert "only IRIs" in repair_text(client, 1)
    assert result.answer == "Biscuit."


def test_bare_iris_are_accepted_with_labels_when_rounds_run_out(small: Memory) -> None:
    client = ScriptedClient([reply("SELECT ?pet WHERE { m:owner pcm:hasPet ?pet }")] * 3)
    result = ask(small.context, "Which pets do I have?", client=client, as_of=AS_OF)
    assert outcomes(result) == ["suspicious"] * 2  # a third round would repeat the second prompt word for word
    assert result.path == "sparql" and result.answer == "Biscuit."
    assert "may be incomplete" in result.note


def test_many_rows_about_anyone_are_suspicious(small: Memory) -> None:
    """A query tied to nothing the memory names answers for everyone: fed back, and never the answer."""
    client = ScriptedClient([
        reply("SELECT ?what WHERE { ?x rdfs:label ?what }"),
        "NO QUERY: I cannot tie it to anything",
        "NOT IN MEMORY",
    ])
    result = ask(small.context, "What did I buy?", client=client, as_of=AS_OF, plan=False)
    assert outcomes(result)[:2] == ["suspicious", "no_query"]
    assert "m:owner" in result.trace[0].detail and result.path != "sparql"
    assert "tie it to m:owner" in repair_text(client, 1)


def test_anchors_are_names_of_the_memory_or_tests_on_names() -> None:
    from pcm.retrieval.repair import anchored

    ns = "https://pcm.invalid/m/x/"
    prologue = f"PREFIX m: <{ns}>\nPREFIX schema: <https://schema.org/>\n"
    assert not anchored(prologue + "SELECT ?l WHERE { ?b a schema:BuyAction ; schema:object/rdfs:label ?l }", ns)
    assert anchored(prologue + "SELECT ?l WHERE { ?b schema:agent m:owner ; schema:object/rdfs:label ?l }", ns)
    assert anchored(f"SELECT ?l WHERE {{ ?b schema:agent <{ns}owner> }}", ns)
    assert anchored(prologue + 'SELECT ?l WHERE { ?x rdfs:label ?l FILTER(CONTAINS(LCASE(?l), "espresso")) }', ns)
    assert not anchored(prologue + "SELECT ?l WHERE { ?x schema:price ?l FILTER(?l > 5) }", ns)


def test_a_preference_where_dates_are_compared_is_suspicious(small: Memory) -> None:
    client = ScriptedClient([
        reply("SELECT ?p ?what WHERE { m:owner pcm:hasPreference ?p . ?p rdfs:label ?what }"),
        "NO QUERY: the memory records no date for when a preference began",
        "NOT IN MEMORY",  # the stored facts about risotto say nothing of when
    ])
    result = ask(small.context, "When did I start liking risotto?", client=client, as_of=AS_OF)
    assert outcomes(result) == ["suspicious", "no_query"]
    assert "pcm:Preference" in result.trace[0].detail
    assert result.path == "none" and result.answer.startswith("Not in memory")


def test_a_runaway_query_is_stopped_and_fed_back(small: Memory) -> None:
    runaway = "SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i }"
    client = ScriptedClient([reply(runaway), reply(GOOD_BREED)])
    result = ask(small.context, "What breed is Biscuit?", client=client, as_of=AS_OF)
    assert outcomes(result) == ["timeout", "ok"]
    assert "time limit" in result.trace[0].detail
    assert result.answer == "Beagle."


# ------------------------------------------------------------------------------------------------ refusals


@pytest.mark.parametrize(
    ("bad", "kind"),
    [
        ("DELETE WHERE { m:biscuit ?p ?o }", "DELETE is refused"),
        ("INSERT DATA { m:biscuit pcm:petBreed \"poodle\" }", "INSERT is refused"),
        ("LOAD <http://example.org/data.ttl>", "LOAD is refused"),
        ("SELECT * WHERE { SERVICE <http://example.org/sparql> { ?s ?p ?o } }", "SERVICE is refused"),
        ("SELECT ?x ?y WHERE { ?x (schema:knows|^schema:knows)+ ?y }", "unbounded path"),
        ("SELECT ?breed WHERE { m:biscuit pcm:petBreed ?breed } LIMIT 100000000", None),
    ],
)
def test_unsafe_queries_are_refused_or_bounded(small: Memory, bad: str, kind: str | None) -> None:
    before = small.backend.dump(ox.RdfFormat.N_QUADS)
    client = ScriptedClient([reply(bad), reply(GOOD_BREED)])
    result = ask(small.context, "Forget that Biscuit is a beagle and tell me his breed", client=client, as_of=AS_OF)
    if kind is None:  # bounded, not refused: the huge LIMIT is lowered and said so
        assert outcomes(result) == ["ok"] and "LIMIT 100000000 lowered" in result.trace[0].detail
    else:
        assert outcomes(result) == ["refused", "ok"]
        assert kind in result.trace[0].detail and "was refused" in repair_text(client, 1)
    assert result.answer == "Beagle."
    assert small.backend.dump(ox.RdfFormat.N_QUADS) == before  # ask never modifies the memory


def test_a_model_that_keeps_writing_updates_gets_nothing_run(small: Memory) -> None:
    before = small.backend.dump(ox.RdfFormat.N_QUADS)
    client = ScriptedClient([reply("DROP GRAPH <urn:pcm:graph:conversation>")] * 3)
    result = ask(small.context, "Please delete my conversations", client=client, as_of=AS_OF)
    assert outcomes(result) == ["refused"] * 2
    assert result.path == "none" and result.answer.startswith("Not in memory")
    assert small.backend.dump(ox.RdfFormat.N_QUADS) == before


# ------------------------------------------------------------------------------------------------ answers


def test_abstains_when_nothing_supports_an_answer(small: Memory) -> None:
    empty = reply("SELECT ?name WHERE { m:owner ?r ?b . ?r rdfs:subPropertyOf* ob:hasBrother . ?b rdfs:label ?name }")
    result = ask(small.context, "What is my brother's name?", client=ScriptedClient([empty] * 3), as_of=AS_OF)
    assert outcomes(result) == ["empty"] * 2
    assert result.path == "none" and result.answer.startswith("Not in memory") and not result.posts


def test_date_difference_is_computed_in_code_and_cites_both_utterances(small: Memory) -> None:
    query = """#pcm:compute between(?picnic, ?bought, days)
SELECT ?picnic ?bought WHERE {
  ?e a/rdfs:subClassOf* schema:Event ; rdfs:label ?l ; schema:startDate ?picnic . FILTER(CONTAINS(?l, "picnic"))
  ?b a schema:BuyAction ; schema:object m:trek-bike ; schema:startDate ?bought . }"""
    result = ask(small.context, "How many days after the picnic did I buy the bike?", client=ScriptedClient([reply(query)]), as_of=AS_OF)
    assert result.answer.startswith("3 days (from Saturday 15 March 2025 to Tuesday 18 March 2025)")
    assert result.computed is not None and result.computed.startswith("between(?picnic, ?bought, days) = 3 days")
    assert cited(small, result) == {"u1", "u3"}


def test_the_evidence_of_last_is_the_chosen_row_only(small: Memory) -> None:
    query = """#pcm:compute last(?what, ?date)
SELECT ?what ?date WHERE { { ?x a schema:BuyAction } UNION { ?x a schema:SocialEvent }
  ?x schema:agent m:owner ; rdfs:label ?what ; schema:startDate ?date }"""
    result = ask(small.context, "What did I do most recently?", client=ScriptedClient([reply(query)]), as_of=AS_OF)
    assert result.answer.startswith("Buying the Trek bike")
    assert cited(small, result) == {"u1"}
    assert {f.text for f in result.facts} >= {"buying the Trek bike schema:startDate Tuesday 18 March 2025"}


def test_explain_and_json_show_every_query_tried(small: Memory) -> None:
    client = ScriptedClient([reply("SELECT ?x WHERE { m:biscuit pcm:nothing ?x }"), reply(GOOD_BREED)])
    result = ask(small.context, "What breed is Biscuit?", client=client, as_of=AS_OF, explain=True)
    text = result.render()
    assert "round 1, model: empty" in text and "pcm:nothing" in text and "round 2, model: ok" in text
    data = result.as_json()
    assert set(data) == {"question", "answer", "path", "as_of", "note", "sparql", "computed", "citations", "facts",
                         "pending", "warnings", "trace", "plan", "frame", "stats"}
    assert [s["outcome"] for s in data["trace"]] == ["empty", "ok"]  # type: ignore[index]
    post = data["citations"][0]  # type: ignore[index]
    assert post["source_id"] == "u0" and post["text"].startswith("My dog Biscuit") and post["session"] == "small"


# ------------------------------------------------------------------------------------------------ determinism


def test_same_memory_and_question_give_the_same_output_and_the_second_run_costs_no_call(small: Memory) -> None:
    query = "SELECT ?item ?price ?store WHERE { ?b a schema:BuyAction ; schema:object/rdfs:label ?item ; schema:price ?price ; schema:seller/rdfs:label ?store }"
    first_client = ScriptedClient([reply(query)])
    first = ask(small.context, "What did I buy, where and for how much?", client=first_client, as_of=AS_OF)
    second_client = ScriptedClient([])
    second = ask(small.context, "What did I buy, where and for how much?", client=second_client, as_of=AS_OF)
    assert json.dumps(first.as_json(), sort_keys=True) == json.dumps(second.as_json(), sort_keys=True)
    assert second_client.requests == [] and second.stats["cache_hits"] == 1
    CachingClient.forget(small.context)
    third = ask(small.context, "What did I buy, where and for how much?", client=ScriptedClient([reply(query)]), as_of=AS_OF)
    assert json.dumps(third.as_json(), sort_keys=True) == json.dumps(first.as_json(), sort_keys=True)
    assert first.answer == "Trek bike (price: 600, store: Bike Gallery)."


def test_a_write_changes_the_memory_version_and_so_misses_the_cache(tmp_path: Path) -> None:
    memory = Memory.init(Settings(memory=tmp_path / "m", index_enabled=False), owner="Dana Whitfield")
    try:
        memory.ingest([Conversation("c", [Utterance("c", 0, "user", UTTERANCES[0][1], source_id="u0")])])
        write_facts_first(memory)
        first = ScriptedClient([reply(GOOD_BREED)])
        ask(memory.context, "What breed is Biscuit?", client=first, as_of=AS_OF)
        again = ScriptedClient([])
        ask(memory.context, "What breed is Biscuit?", client=again, as_of=AS_OF)
        assert len(first.requests) == 1 and again.requests == []
        memory.ingest([Conversation("c", [Utterance("c", 1, "user", "Biscuit loves socks.", source_id="u1")])])
        after = ScriptedClient([reply(GOOD_BREED)])
        ask(memory.context, "What breed is Biscuit?", client=after, as_of=AS_OF)
        assert len(after.requests) == 1
    finally:
        CachingClient.forget(memory.context)
        memory.close()


def write_facts_first(memory: Memory) -> None:
    post = next(iter(memory.store.posts()))
    text = turtle_prefixes() + f"@prefix m: <{memory.naming.namespace}> .\n" + FACTS[0]
    graph = ox.NamedNode(memory.naming.extraction_graph(post.iri))
    memory.store.write([ox.Quad(t.subject, t.predicate, t.object, graph)
                        for t in ox.parse(text.encode(), format=ox.RdfFormat.TURTLE)])


# ------------------------------------------------------------------------------------------------ command line


def test_cli_ask_prints_json_and_explains(small: Memory, tmp_path: Path) -> None:
    from pcm.cli_ask import ask as ask_command

    script = tmp_path / "replies.json"
    script.write_text(json.dumps([reply(GOOD_BREED)]), encoding="utf-8")
    env = {"PCM_LLM": f"scripted:{script}", "PCM_INDEX": "off"}
    runner = CliRunner()
    out = runner.invoke(ask_command, ["--memory", str(small.settings.memory), "What breed is Biscuit?", "--json",
                                      "--as-of", "2025-04-01"], env=env)
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["answer"] == "Beagle." and data["path"] == "sparql" and data["as_of"].startswith("2025-04-01")
    explained = runner.invoke(ask_command, ["--memory", str(small.settings.memory), "What breed is Biscuit?",
                                            "--explain", "--as-of", "2025-04-01"], env=env)
    assert explained.exit_code == 0, explained.output
    assert explained.output.startswith("Beagle.") and "round 1, model: ok" in explained.output


def test_cli_ask_reports_a_bad_date_in_one_line(small: Memory) -> None:
    from pcm.cli_ask import ask as ask_command

    out = CliRunner().invoke(ask_command, ["--memory", str(small.settings.memory), "x?", "--as-of", "someday"],
                             env={"PCM_INDEX": "off", "PCM_LLM": "none"})
    assert out.exit_code != 0 and "someday" in out.output


# ------------------------------------------------------------------------------------------------ remote store


def test_ask_over_a_remote_store(tmp_path: Path) -> None:
    """The same pipeline over the SPARQL protocol (a real ``oxigraph serve`` on loopback): no worker process."""
    from tests.oxigraph_server import start_oxigraph

    with start_oxigraph(tmp_path / "server-store") as url:
        settings = Settings(memory=tmp_path / "remote", store_url=f"{url}/query", index_enabled=False)
        memory = Memory.init(settings, owner="Dana Whitfield")
        try:
            memory.ingest([Conversation("small", [
                Utterance("small", i, "user", text, timestamp=datetime.fromisoformat(when), source_id=f"u{i}")
                for i, (when, text) in enumerate(UTTERANCES)
            ])])
            write_facts(memory)
            client = ScriptedClient([reply('SELECT ?breed WHERE { ?d rdfs:label "biscuit" ; pcm:petBreed ?breed }')])
            result = ask(memory.context, "What breed is Biscuit?", client=client, as_of=AS_OF)
            assert not memory.context.query_runner().isolated
            assert result.answer == "Beagle." and cited(memory, result) == {"u0"}
            assert result.trace[-1].source == "relaxation: case-insensitive labels"
        finally:
            CachingClient.forget(memory.context)
            memory.close()


# ------------------------------------------------------------------------------------------------ relaxations


def test_relaxations_widen_names_and_classes_then_drop_one_constraint_at_a_time() -> None:
    from pcm.ontology import load_ontology
    from pcm.query_safety import check_query
    from pcm.retrieval.repair import relaxations

    query = """SELECT ?store WHERE {
  ?buy a schema:TradeAction ; schema:agent m:owner ; schema:actionStatus schema:CompletedActionStatus ; schema:seller ?s .
  ?s rdfs:label "williams SONOMA" . ?buy schema:startDate ?d . FILTER(?d > "2024-01-01"^^xsd:date) }"""
    steps = list(relaxations(query, load_ontology(), prefixes={"m": "https://pcm.invalid/m/t/"}))
    names = [name for name, _ in steps]
    assert names[:2] == ["case-insensitive labels", "subclasses"]
    assert 'CONTAINS(LCASE(STR(?_label1)), "williams sonoma")' in steps[0][1]
    assert "subClassOf>*" in steps[1][1]
    dropped = names[2:]
    assert any("FILTER(?d >" in n for n in dropped) and any("actionStatus" in n for n in dropped)
    assert not any("m:owner" in n or "?_label" in n for n in dropped)  # whose facts, and the name asked about, stay
    for _, text in steps:
        check_query(text, prefixes={"m": "https://pcm.invalid/m/t/"})  # every variant is a valid query


def test_aggregates_are_never_relaxed_by_dropping_constraints() -> None:
    from pcm.ontology import load_ontology
    from pcm.retrieval.repair import relaxations

    query = "SELECT (COUNT(DISTINCT ?p) AS ?n) WHERE { ?p a pcm:Pet ; pcm:petSpecies \"dog\" ; pcm:petBreed ?b }"
    assert [name for name, _ in relaxations(query, load_ontology())] == []


def test_label_relaxation_decodes_unicode_escapes() -> None:
    """The label's value is decoded as the grammar says: ``\\u00e9`` is é (it used to lose its backslash only)."""
    from pcm.retrieval.repair import contains_labels

    relaxed = contains_labels('SELECT ?x WHERE { ?x rdfs:label "Caf\\u00e9 \\"Bleu\\"" }')
    assert 'CONTAINS(LCASE(STR(?_label1)), "café \\"bleu\\"")' in relaxed

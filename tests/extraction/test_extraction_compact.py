"""The compact extraction form: lines read into the JSON form's triples, its grammar, and one run through the pipeline.

The reader is checked against the JSON form on the same facts (the triples must be equal, so validation, repair and
provenance see no difference), on the hand-written extractions of the sample conversations and on each value shape;
malformed lines must come back as one readable problem quoting them. The grammar is read by the small GBNF
recogniser of ``test_extraction_grammar`` (no model needed), and by llama.cpp itself where llama-cpp-python is
installed and ``PCM_TEST_GGUF`` names a GGUF file (only its vocabulary is loaded).
"""

from __future__ import annotations

import ctypes
import json
import os
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pyoxigraph as ox
import pytest
from click.testing import CliRunner

from pcm.cli_extract import extract
from pcm.conversations import Conversation, Utterance
from pcm.extraction import extract_posts
from pcm.extraction.compact import (
    ANSWER_CHARS,
    NOTHING,
    as_compact,
    bare_name,
    call_names,
    compact_grammar,
    compact_schema,
    grammar_budget,
    in_handles,
    normalise_answer,
    normalise_compact,
    read_compact,
)
from pcm.extraction.extractor import Extractor
from pcm.extraction.normalise import OutputProblem, normalise_json, normalise_output
from pcm.extraction.prompts import prompt_version, system_prompt
from pcm.llm import ScriptedClient
from pcm.llm.base import output_format
from pcm.memory import Memory
from pcm.namespaces import PCM, RDF, RDFS, SCHEMA, XSD
from pcm.naming import Naming
from pcm.ontology import load_ontology
from pcm.settings import Settings
from tests.extraction.test_extraction_grammar import Grammar

NS = "https://pcm.invalid/m/test/"
ONTOLOGY = load_ontology()
NAMING = Naming(NS)
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ask" / "extraction"
GGUF = os.environ.get("PCM_TEST_GGUF", "")

EXAMPLE = """buy schema:BuyAction "buying the Breville Barista Express"
machine schema:Product "Breville Barista Express"
breville schema:Brand "Breville"
shop schema:Store "Williams Sonoma"
buy schema:agent me
buy schema:object machine
buy schema:seller shop
buy schema:price 549
buy schema:priceCurrency "USD"
buy schema:startDate 2025-02-04
buy schema:actionStatus schema:CompletedActionStatus
machine schema:brand breville
"""


def triples(text: str, **names: str) -> set[ox.Triple]:
    known = {**call_names(NAMING, NAMING.owner), **{k: NS + v for k, v in names.items()}}
    return set(normalise_compact(text, namespace=NS, ontology=ONTOLOGY, names=known).triples)


def as_json(*nodes: dict[str, Any]) -> set[ox.Triple]:
    """The triples the JSON form gives for the same facts."""
    return set(normalise_json(json.dumps({"@graph": list(nodes)}), namespace=NS, ontology=ONTOLOGY).triples)


def problem(text: str, **names: str) -> str:
    with pytest.raises(OutputProblem) as caught:
        triples(text, **names)
    return str(caught.value)


def t(s: str, p: str, o: ox.NamedNode | ox.Literal) -> ox.Triple:
    return ox.Triple(ox.NamedNode(NS + s), ox.NamedNode(p), o)


# ------------------------------------------------------------------------------------------------ the reader


def test_the_example_reads_as_the_json_form_reads_the_same_facts() -> None:
    got = triples(EXAMPLE)
    buy = "m:buying-the-breville-barista-express"
    assert got == as_json(
        {"@id": buy, "@type": ["schema:BuyAction"], "rdfs:label": "buying the Breville Barista Express",
         "schema:agent": "m:owner", "schema:object": "m:breville-barista-express", "schema:seller": "m:williams-sonoma",
         "schema:price": 549, "schema:priceCurrency": "USD", "schema:startDate": "2025-02-04",
         "schema:actionStatus": "schema:CompletedActionStatus"},
        {"@id": "m:breville-barista-express", "@type": ["schema:Product"], "rdfs:label": "Breville Barista Express",
         "schema:brand": "m:breville"},
        {"@id": "m:breville", "@type": ["schema:Brand"], "rdfs:label": "Breville"},
        {"@id": "m:williams-sonoma", "@type": ["schema:Store"], "rdfs:label": "Williams Sonoma"},
    )
    assert t("buying-the-breville-barista-express", SCHEMA + "price",
             ox.Literal("549", datatype=ox.NamedNode(XSD + "integer"))) in got
    assert t("buying-the-breville-barista-express", SCHEMA + "startDate",
             ox.Literal("2025-02-04", datatype=ox.NamedNode(XSD + "date"))) in got


def test_handles_are_the_answers_own_and_iris_come_from_labels() -> None:
    """Two answers that both say ``buy`` must not share a purchase: the IRI is the label's, a clash gets a suffix."""
    text = 'buy schema:BuyAction "buying a kettle"\nbuy schema:agent me\n'
    answer = read_compact(text, namespace=NS, ontology=ONTOLOGY)
    assert answer.minted == {"buy": NS + "buying-a-kettle"}
    again = read_compact(text, namespace=NS, ontology=ONTOLOGY, existing=lambda iris: iris & {NS + "buying-a-kettle"})
    assert again.minted == {"buy": NS + "buying-a-kettle-2"}
    twice = read_compact('a schema:Thing "Kettle"\nb schema:Product "kettle"\na schema:about b\n', namespace=NS,
                         ontology=ONTOLOGY)
    assert twice.minted == {"a": NS + "kettle", "b": NS + "kettle-2"}
    # never the owner's or the assistant's IRI, whatever the label
    assert read_compact('x schema:Person "Owner"\nme schema:knows x\n', namespace=NS,
                        ontology=ONTOLOGY).minted == {"x": NS + "owner-2"}


def test_labels_keep_their_language_and_accents() -> None:
    got = triples('cafe schema:CafeOrCoffeeShop "Café Müller"\nme pcm:likes cafe\n'
                  'tower schema:TouristAttraction "東京タワー"\nme pcm:likes tower\n'
                  'temple schema:TouristAttraction "浅草寺"\nme pcm:likes temple\n')
    labels = {(x.subject.value, x.object) for x in got if x.predicate.value == RDFS + "label"}
    assert (NS + "cafe-muller", ox.Literal("Café Müller")) in labels  # a plain string, as the JSON form stores it
    others = {iri for iri, label in labels if label.value in ("東京タワー", "浅草寺")}
    assert len(others) == 2 and all(iri.startswith((NS + "tower-", NS + "temple-")) for iri in others)


def test_speaker_words_follow_the_turn() -> None:
    """``me`` is whoever speaks: the assistant in its own turn, where ``you`` is the owner."""
    names = call_names(NAMING, NAMING.assistant, [NS + "biscuit"])
    assert (names["me"], names["you"], names["biscuit"]) == (NAMING.assistant, NAMING.owner, NS + "biscuit")
    text = 'tip schema:InformAction "tip about leashes"\ntip schema:agent me\ntip schema:recipient you\n' \
           "tip schema:about biscuit\n"
    got = set(normalise_compact(text, namespace=NS, ontology=ONTOLOGY, names=names).triples)
    agent = {x.object.value for x in got if x.predicate.value == SCHEMA + "agent"}
    recipient = {x.object.value for x in got if x.predicate.value == SCHEMA + "recipient"}
    assert (agent, recipient) == ({NAMING.assistant}, {NAMING.owner})
    assert t("tip-about-leashes", SCHEMA + "about", ox.NamedNode(NS + "biscuit")) in got
    # a known entity is written bare; "m:" is read too
    assert triples("me pcm:hasPet m:biscuit\n", biscuit="biscuit") == triples("me pcm:hasPet biscuit\n",
                                                                               biscuit="biscuit")


@pytest.mark.parametrize(("line", "json_value", "datatype"), [
    ("x schema:price 549", 549, XSD + "integer"),
    ("x schema:price 12.5", 12.5, XSD + "decimal"),
    ("x schema:price -3", -3, XSD + "integer"),
    ('x schema:price "about 20 dollars"', "about 20 dollars", XSD + "string"),
    ("x pcm:quantity 2", 2, XSD + "integer"),
    ("x schema:model 3", "3", XSD + "string"),  # a string property: the number is its text, as the schema says
    ("x schema:startDate 2025-02-04", "2025-02-04", XSD + "date"),
    ("x schema:startDate 2025-02-04T10:30", "2025-02-04T10:30", XSD + "dateTime"),
    ('x schema:startDate "2025-02-04"', "2025-02-04", XSD + "date"),  # quoted: read all the same
    ("x bio:date 2019", "2019", XSD + "gYear"),
    ("x bio:date 2019-06", "2019-06", XSD + "gYearMonth"),
    ("x schema:startTime 06:30", "06:30", XSD + "time"),
    ("x schema:duration PT2H", "PT2H", XSD + "duration"),
    ("x cv:isCurrent true", True, XSD + "boolean"),
    ('x schema:description "the \\"Big\\" one, a \\\\ and all"', 'the "Big" one, a \\ and all', XSD + "string"),
])
def test_values_are_typed_as_the_json_form_types_them(line: str, json_value: object, datatype: str) -> None:
    got = triples(f'x schema:Event "party"\n{line}\n')
    key = line.split()[1]
    assert got == as_json({"@id": "m:party", "@type": ["schema:Event"], "rdfs:label": "party", key: json_value})
    objects = {x.object for x in got if x.predicate.value not in (RDF + "type", RDFS + "label")}
    assert [o.datatype.value for o in objects if isinstance(o, ox.Literal)] == [datatype]


def test_named_values_and_several_values() -> None:
    got = triples('walk schema:ExerciseAction "evening walk"\nwalk schema:agent me\n'
                  "walk schema:actionStatus schema:ActiveActionStatus\nwalk schema:participant you\n"
                  "walk schema:participant biscuit\n", biscuit="biscuit")
    assert t("evening-walk", SCHEMA + "actionStatus", ox.NamedNode(SCHEMA + "ActiveActionStatus")) in got
    assert {x.object.value for x in got if x.predicate.value == SCHEMA + "participant"} == {
        NAMING.assistant, NS + "biscuit"}
    two = triples('d pcm:Pet schema:Thing "Rex"\nme pcm:hasPet d\n')
    assert {x.object.value for x in two if x.predicate.value == RDF + "type"} == {PCM + "Pet", SCHEMA + "Thing"}


def test_a_fact_without_a_value_states_nothing() -> None:
    """Small models fill a node's properties with null; such a line is left out, not turned into a node."""
    assert triples('d pcm:Pet "Rex"\nme pcm:hasPet d\nd pcm:petBreed null\nd schema:owns unknown\n') == triples(
        'd pcm:Pet "Rex"\nme pcm:hasPet d\n')


def test_nothing_to_extract_is_no_triples_and_empty_output_is_a_problem() -> None:
    assert normalise_compact(NOTHING + "\n", namespace=NS, ontology=ONTOLOGY).triples == []
    assert normalise_compact("```\nnothing to extract.\n```", namespace=NS, ontology=ONTOLOGY).triples == []
    with pytest.raises(OutputProblem) as caught:
        normalise_compact("  \n", namespace=NS, ontology=ONTOLOGY)
    assert caught.value.kind == "empty"


@pytest.mark.parametrize(("text", "expected"), [
    ('buy schema:BuyAction "buying"\nbuy schema:agent\n', "line 2 reads `buy schema:agent`"),
    ('buy schema:BuyAction "buying"\nmachine schema:brand buy\n', "`machine` is neither declared"),
    ('shop schema:Store "Tea & Co"\nme schema:knows "Priya"\n', "schema:knows takes the name of a node"),
    ('dog pcm:Pet "Rex"\ndog pcm:petBreed golden retriever\n', "text values are quoted"),
    ('dog pcm:Pet "Rex"\ndog pcm:petBreed beagle\n', "pcm:petBreed takes quoted text"),
    ('dog pcm:Pet "Rex\nme pcm:hasPet dog\n', "line 1 reads `dog pcm:Pet \"Rex`: a quoted text is not closed"),
    ('dog ex:Dog "Rex"\n', "`ex:Dog` is not a vocabulary term"),
    ('buy schema:BuyAction "buying"\nbuy schema:actionStatus schema:Done\n', "schema:Done is not one of the values"),
    ('me schema:Person "Dana"\n', "cannot name a new node"),
    ('biscuit pcm:Pet "Biscuit"\n', "`biscuit` is a known entity"),
    ('dog pcm:Pet "Rex"\ndog rdfs:label "Rexy"\n', "types and labels go in a declaration line"),
    ('x schema:Event "party"\nx schema:startDate tomorrow\n', "takes a date, time or duration written bare"),
])
def test_malformed_lines_are_one_problem_quoting_them(text: str, expected: str) -> None:
    message = problem(text, biscuit="biscuit")
    assert expected in message, message


def test_all_bad_lines_are_reported_at_once() -> None:
    message = problem('a schema:Thing "A"\nb schema:about a\nc schema:about a\nme pcm:likes a\n')
    assert message.startswith("2 line(s) could not be read") and "`b`" in message and "`c`" in message


def test_a_name_used_as_a_value_without_a_declaration_is_completed_as_the_json_form_completes_it() -> None:
    """The JSON form lets a value be a bare name and the extractor types it from the property's range; a small model
    does the same in lines (``buy schema:seller stumptown``), and a repair round rarely fixed it."""
    from pcm.extraction.jsonld import complete_references

    got = triples('buy schema:BuyAction "buying beans"\nbuy schema:agent me\nbuy schema:seller stumptown\n'
                  'stumptown schema:description "a roaster"\n')
    buy = {"@id": "m:buying-beans", "@type": ["schema:BuyAction"], "rdfs:label": "buying beans",
           "schema:agent": "m:owner", "schema:seller": "m:stumptown"}
    expected = complete_references(list(as_json(buy, {"@id": "m:stumptown", "schema:description": "a roaster"})),
                                   [NS + "stumptown"], namespace=NS, ontology=ONTOLOGY)
    assert got == set(expected)
    assert t("stumptown", RDFS + "label", ox.Literal("stumptown")) in got
    # a stored node of that name is that node, left as it is
    answer = read_compact("me schema:knows priya\n", namespace=NS, ontology=ONTOLOGY,
                          existing=lambda iris: iris & {NS + "priya"})
    assert answer.undeclared == set() and normalise_answer(answer, namespace=NS, ontology=ONTOLOGY).triples == [
        ox.Triple(ox.NamedNode(NAMING.owner), ox.NamedNode(SCHEMA + "knows"), ox.NamedNode(NS + "priya"))]


def test_unknown_terms_of_known_vocabularies_go_to_validation_with_hints() -> None:
    """As in the other forms, an undefined schema: or pcm: term is kept so validation names it and suggests one."""
    result = normalise_compact('dog pcm:Pett "Rex"\nme pcm:hasPett dog\n', namespace=NS, ontology=ONTOLOGY)
    assert result.unknown_terms == {PCM + "Pett", PCM + "hasPett"}


def test_a_report_names_nodes_as_the_answer_did() -> None:
    answer = read_compact(EXAMPLE, namespace=NS, ontology=ONTOLOGY)
    report = (f"- [action-has-agent] <{NS}buying-the-breville-barista-express> (schema:BuyAction) has no "
              f"schema:agent\n- m:breville-barista-express m:biscuit <{NS}owner>")
    assert in_handles(report, answer, NS) == "- [action-has-agent] buy (schema:BuyAction) has no schema:agent\n" \
                                             "- machine biscuit owner"


# ------------------------------------------------------------------------------------------------ the fixtures


def fixture_forms(path: Path) -> tuple[list[ox.Triple], str, dict[str, str], dict[str, str]]:
    """``(the JSON form's triples, the compact answer, its names, IRI -> handle)`` of one hand-written extraction."""
    gold = normalise_output(path.read_text(encoding="utf-8"), namespace=NS, ontology=ONTOLOGY).triples
    from_json = normalise_json(json.dumps(_answer(gold)), namespace=NS, ontology=ONTOLOGY).triples
    typed = {x.subject.value for x in from_json if x.predicate.value == RDF + "type"}
    names = call_names(NAMING, NAMING.owner)
    for x in from_json:  # what an earlier utterance declared is offered by name
        for term in (x.subject, x.object):
            local = bare_name(term.value, NS) if isinstance(term, ox.NamedNode) else None
            if local is not None and term.value not in typed:
                names.setdefault(local, term.value)
    text, handles = as_compact(from_json, namespace=NS, ontology=ONTOLOGY, names=names)
    return from_json, text, names, handles


def _answer(gold: list[ox.Triple]) -> dict[str, Any]:
    from pcm.extraction.jsonld import as_answer

    return as_answer(gold, namespace=NS, ontology=ONTOLOGY)


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.ttl")), ids=lambda p: p.stem)
def test_hand_written_extractions_round_trip_to_the_json_forms_triples(path: Path) -> None:
    from_json, text, names, handles = fixture_forms(path)
    answer = read_compact(text, namespace=NS, ontology=ONTOLOGY, names=names)
    renamed = {iri: answer.minted[handle] for iri, handle in handles.items()}

    def moved(term: Any) -> Any:
        return ox.NamedNode(renamed[term.value]) if isinstance(term, ox.NamedNode) and term.value in renamed else term

    expected = {ox.Triple(moved(x.subject), x.predicate, moved(x.object)) for x in from_json}
    assert set(normalise_answer(answer, namespace=NS, ontology=ONTOLOGY).triples) == expected
    assert grammar(3000, tuple(names)).accepts(text), text


# ------------------------------------------------------------------------------------------------ the grammar


@cache
def grammar(max_tokens: int, known: tuple[str, ...] = ()) -> Grammar:
    return Grammar(compact_grammar(ONTOLOGY, grammar_budget(max_tokens), known))


KNOWN = ("assistant", "biscuit", "me", "owner", "you")

ACCEPTED = [
    EXAMPLE,
    EXAMPLE + "\n",  # a blank line ends the answer
    NOTHING + "\n",
    'd pcm:Pet "Rex"\nme pcm:hasPet d\n',
    'd pcm:Pet schema:Thing "Rex"\nbiscuit pcm:petBreed "beagle"\n',
    'x schema:Organization schema:Brand schema:Thing "Acme"\nyou schema:knows me\n',
    f'x schema:Event "{"a" * 120}"\n',
    "owner schema:knows assistant\nbiscuit schema:startDate 2025\n",
    "me schema:price -12.25\nme pcm:quantity 3\nme cv:isCurrent false\nme schema:startDate 2025-02\n",
    "me schema:startDate 2025-02-04T10:30\nme schema:startTime 06:30\nme schema:duration PT2H\n",
    "me schema:url https://example.org/a?b=c\nme schema:actionStatus schema:PotentialActionStatus\n",
    "me schema:byDay schema:Monday\nme schema:description \"Ça va très bien\"\n",
]
REFUSED = [
    "",  # nothing at all: "nothing to extract" says it
    'd pcm:Pet "Rex"',  # a line ends with a newline
    'd pcm:Pett "Rex"\n',  # unknown class
    "me pcm:hasPett biscuit\n",  # unknown property
    'd ex:Dog "Rex"\n',  # unknown prefix
    'biscuit pcm:Pet "Biscuit"\n',  # a known entity declared again
    'me schema:Person "Dana"\n',  # the speaker declared
    'me schema:knows "Priya"\n',  # text where a node goes
    "me pcm:petBreed beagle\n",  # a name where text goes
    "me pcm:petBreed golden retriever\n",
    'me pcm:petBreed "say \\"hi\\""\n',  # no escapes in the grammar
    "me schema:actionStatus schema:Done\n",
    f'x schema:Event "{"a" * 121}"\n',  # longer than a text may be
    "me schema:startDate 2025-2-4\n",
    EXAMPLE.replace("\nbuy schema:agent", "\n\nbuy schema:agent"),  # nothing after a blank line
    "me rdfs:label \"Dana\"\n",
]


@pytest.mark.parametrize("text", ACCEPTED)
def test_the_grammar_accepts_every_line_form_the_reader_reads(text: str) -> None:
    assert grammar(3000, KNOWN).accepts(text)
    names = {k: v for k, v in call_names(NAMING, NAMING.owner, [NS + "biscuit"]).items()}
    read_compact(text, namespace=NS, ontology=ONTOLOGY, names=names)  # and the reader reads it


@pytest.mark.parametrize("text", REFUSED)
def test_the_grammar_refuses_what_is_not_an_answer(text: str) -> None:
    assert not grammar(3000, KNOWN).accepts(text)


def test_every_class_and_property_can_be_written() -> None:
    from pcm.extraction.jsonld import _value_schema, _vocabulary

    classes, properties, values = _vocabulary(ONTOLOGY, None)
    g = grammar(1000, KNOWN)
    for iri in classes:
        assert g.accepts(f'x {ONTOLOGY.curie(iri)} "X"\n'), iri
    samples = ["biscuit", '"some text"', "12", "2025-02-04", "2025-02-04T10:00", "10:30", "P2D", "true",
               "https://example.org/a", "schema:CompletedActionStatus", "schema:Monday"]
    for iri in properties:
        assert any(g.accepts(f"me {ONTOLOGY.curie(iri)} {v}\n") for v in samples), iri
    assert _value_schema  # the same sources as the JSON Schema


@pytest.mark.parametrize("max_tokens", [300, 1000, 3000])
def test_the_longest_answer_fits_the_token_budget(max_tokens: int) -> None:
    """Every line costs its longest form, so a looping model ends with whole lines before the limit; and however
    large the call's budget, an answer ends at ANSWER_CHARS."""
    budget = min(max_tokens, ANSWER_CHARS)
    longest = grammar(max_tokens, KNOWN).longest()
    assert budget * 0.8 < longest <= budget


def test_a_repeated_line_is_refused_once_the_budget_is_spent() -> None:
    line = "me schema:knows biscuit\n"
    g = grammar(300, KNOWN)
    fits = max(n for n in range(1, 40) if g.accepts(line * n))
    assert 1 < fits < 40 and not g.accepts(line * (fits + 1))


@pytest.mark.skipif(not GGUF or not Path(GGUF).is_file(), reason="PCM_TEST_GGUF does not name a GGUF model file")
@pytest.mark.model
def test_llama_cpp_parses_the_grammar_and_holds_decoding_to_it() -> None:
    llama_cpp = pytest.importorskip("llama_cpp")
    from pcm.llm.grammar_first import LlamaGrammarSampler

    llm = llama_cpp.Llama(model_path=GGUF, vocab_only=True, verbose=False)
    text = compact_schema(ONTOLOGY, KNOWN).grammar(3000)  # type: ignore[misc]

    def accepts(answer: str) -> bool:
        sampler = LlamaGrammarSampler(llm._model, llama_cpp.LlamaGrammar.from_string(text))  # noqa: SLF001
        try:
            for token in [*llm.tokenize(answer.encode(), add_bos=False, special=False), llm.token_eos()]:
                data = llama_cpp.llama_token_data(token, 0.0, 0.0)
                one = llama_cpp.llama_token_data_array(data=ctypes.pointer(data), size=1, selected=-1, sorted=False)
                sampler.apply(ctypes.pointer(one))
                if one.data[0].logit == float("-inf"):
                    return False
                if token != llm.token_eos():
                    sampler.accept(token)
            return True
        finally:
            sampler.free()

    assert accepts(EXAMPLE) and accepts(NOTHING + "\n")
    assert not accepts('d pcm:Pett "Rex"\n') and not accepts('biscuit pcm:Pet "B"\n')


# ------------------------------------------------------------------------------------------------ the pipeline


class Local(ScriptedClient):
    """The scripted model, declaring what the in-process llama.cpp client declares."""

    local = True
    constrained = True
    in_process = True


class Provider(ScriptedClient):
    """The scripted model, declaring what a provider client (OpenAI-compatible, Anthropic) declares."""

    local = True
    constrained = True


def test_compact_is_auto_for_a_model_in_this_process_and_given_when_asked() -> None:
    forms = ("turtle", "json", "compact")
    assert output_format("auto", Local(), forms=forms) == "compact"
    assert output_format("compact", Local(), forms=forms) == "compact"
    assert output_format("auto", Local()) == "json"  # a caller without the form (ask) keeps json
    assert output_format("auto", Provider(), forms=forms) == "json"
    assert output_format("compact", Provider(), forms=forms) == "json"  # its field would get no JSON Schema
    assert output_format("auto", ScriptedClient(), forms=forms) == "turtle"
    assert output_format("compact", ScriptedClient(), forms=forms) == "compact"


UTTERANCE = "Last Tuesday I bought a Breville Barista Express at Williams Sonoma for $549."


def ingested(path: Path) -> Memory:
    from datetime import datetime

    memory = Memory.init(Settings(memory=path, index_enabled=False), owner="Dana Whitfield")
    when = datetime.fromisoformat("2025-02-09T10:00:00+00:00")
    memory.ingest([Conversation("s1", [Utterance("s1", 0, "user", UTTERANCE, timestamp=when, source_id="m0")])])
    return memory


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with ingested(tmp_path / "mem") as mem:
        yield mem


def test_one_extraction_in_compact_form_with_a_repair_round(memory: Memory) -> None:
    """The first answer gives the purchase no agent; the repair round gets the report in the answer's own names
    (``buy``, not the IRI minted for it), and the corrected answer is stored with the compact prompt's version."""
    first = EXAMPLE.replace("buy schema:agent me\n", "")
    client = Local([first, EXAMPLE])
    report = extract_posts(memory.context, [p.iri for p in memory.store.posts()], client=client, concurrency=1,
                           output="compact")
    assert (report.extracted, report.failed, report.repairs) == (1, 0, 1)
    schema = client.schemas[0]
    assert schema is not None and schema.name == "extraction_compact" and schema.grammar is not None
    assert "me" in schema.grammar(300) and "Write the lines for the current utterance." in client.requests[0][1][0].content
    system, messages, _ = client.requests[1]
    assert "# Output\n- One line per fact" in system and "buy schema:BuyAction" not in system
    # the purchase's example goes with the utterance (its words name a purchase), not in the fixed system prompt
    assert "buy schema:BuyAction" in client.requests[0][1][0].content
    assert messages[1].content == first and "[action-has-agent] buy " in messages[2].content
    assert "buying-the-breville" not in messages[2].content
    assert "Write the corrected lines" in messages[2].content
    graph = memory.naming.extraction_graph(next(iter(memory.store.posts())).iri)
    rows = memory.store.select(f"SELECT ?s ?p ?o WHERE {{ GRAPH <{graph}> {{ ?s ?p ?o }} }}").rows
    stored = {(r[0].value, r[1].value, r[2].value) for r in rows}
    ns = memory.naming.namespace
    assert (ns + "buying-the-breville-barista-express", SCHEMA + "seller", ns + "williams-sonoma") in stored
    assert (ns + "buying-the-breville-barista-express", SCHEMA + "price", "549") in stored
    versions = memory.store.select(f"SELECT ?v WHERE {{ GRAPH ?g {{ ?a <{PCM}promptVersion> ?v }} }}").rows
    assert [r[0].value for r in versions] == [prompt_version("compact")]
    assert "extract_compact.v5@" in prompt_version("compact") and "extract_compact" not in prompt_version()


def test_once_the_rounds_are_spent_the_readable_lines_are_kept_and_the_others_named(memory: Memory) -> None:
    """Both answers describe a subject nothing declares; the readable lines are stored after the last round, the
    unreadable ones are left out and named in the post's report. With a round left, the model gets them back."""
    answer = EXAMPLE + 'pet schema:name "Biscuit"\n'
    client = Local([answer, answer])
    report = extract_posts(memory.context, [p.iri for p in memory.store.posts()], client=client, concurrency=1,
                           output="compact")
    assert (report.extracted, report.failed, report.repairs) == (1, 0, 1)
    assert "`pet` is neither declared" in client.requests[1][1][2].content
    post = next(iter(memory.store.posts()))
    graph = memory.naming.extraction_graph(post.iri)
    rows = memory.store.select(f"SELECT ?s ?p ?o WHERE {{ GRAPH <{graph}> {{ ?s ?p ?o }} }}").rows
    stored = {(r[0].value, r[1].value, r[2].value) for r in rows}
    ns = memory.naming.namespace
    assert (ns + "buying-the-breville-barista-express", SCHEMA + "price", "549") in stored
    assert not any("Biscuit" in o or s == ns + "pet" for s, _, o in stored)
    notes = memory.store.select(f"SELECT ?r WHERE {{ GRAPH ?g {{ <{post.iri}> <{PCM}extractionReport> ?r }} }}").rows
    assert any("left out 1 line(s) it could not read: line " in r[0].value for r in notes)


def test_unreadable_lines_fail_the_answer_when_nothing_readable_is_left(memory: Memory) -> None:
    answer = 'pet schema:name "Biscuit"\n'
    report = extract_posts(memory.context, [p.iri for p in memory.store.posts()], client=Local([answer, answer]),
                           concurrency=1, output="compact")
    assert (report.extracted, report.failed) == (0, 1)


def test_the_user_message_names_known_entities_as_the_answer_writes_them(memory: Memory) -> None:
    post = next(iter(memory.store.posts()))
    extractor = Extractor(memory.context, ScriptedClient(), output="compact")
    _, user = extractor.prompt(extractor.contexts.build(post, [post]))
    assert "Speaker: me (Dana Whitfield, the memory's owner)" in user
    known = user.split("KNOWN ENTITIES")[1].split("PREVIOUS TURNS")[0]
    entries = [line for line in known.splitlines() if line.startswith("- ")]
    assert "- me \"Dana Whitfield\"" in known and "- you " in known
    assert entries and not any(e.startswith("- m:") for e in entries)
    assert system_prompt("CATALOGUE", "compact").count("# Example") == 1


def test_pcm_extract_with_a_scripted_model_in_compact_form(tmp_path: Path) -> None:
    path = tmp_path / "mem"
    ingested(path).close()
    script = tmp_path / "replies.json"
    script.write_text(json.dumps([EXAMPLE]), encoding="utf-8")
    env = {"PCM_INDEX": "off", "PCM_LLM": f"scripted:{script}", "PCM_LLM_OUTPUT": "compact"}
    out = CliRunner().invoke(extract, ["--memory", str(path), "--pending", "--json"], env=env, catch_exceptions=False)
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["extracted"] == 1
    with Memory.open(Settings(memory=path, index_enabled=False)) as reopened:
        labels = reopened.store.select(f"SELECT ?l WHERE {{ GRAPH ?g {{ ?s <{RDFS}label> ?l }} }}").rows
        assert {r[0].value for r in labels} >= {"Breville Barista Express", "Williams Sonoma", "Breville"}


# ------------------------------------------------------------------------------------------------ examples and areas


def example_blocks() -> list[tuple[str, str, str, str]]:
    """``(kind, message day, role, utterance, lines)`` of every example the shipped compact prompt shows."""
    from pcm.extraction.prompts import _example_blocks, compact_prompt

    found = []
    for kind, block in _example_blocks(compact_prompt()).items():
        head, _, lines = block.partition("\n\n")
        day = re.search(r"Message time: (\d{4}-\d{2}-\d{2})", head)
        utterance = re.search(r'Utterance: "(.*)"', head.replace("\n", " "))
        assert utterance is not None, kind
        role = "assistant" if "the assistant" in head.split("Utterance:")[0] else "user"
        found.append((kind, day.group(1) if day else "2024-08-01", role, utterance.group(1), lines.strip("\n") + "\n"))
    return found


def test_the_prompt_has_an_example_for_an_assistants_turn_and_a_default() -> None:
    from pcm.extraction.prompts import ASSISTANT_EXAMPLE, DEFAULT_EXAMPLE

    kinds = [k for k, *_ in example_blocks()]
    assert ASSISTANT_EXAMPLE in kinds and DEFAULT_EXAMPLE in kinds
    assert set(kinds) - {ASSISTANT_EXAMPLE} <= set(ONTOLOGY.areas)  # every other kind is a catalogue area


@pytest.mark.parametrize("kind", [k for k, *_ in example_blocks()])
def test_every_example_is_an_answer_the_pipeline_stores_whole(kind: str, tmp_path: Path) -> None:
    """An example the model is shown must be a right answer: the grammar (of its own areas) writes it, it is valid
    and every value in it is grounded in its utterance, or the model learns to write what is then left out."""
    from datetime import datetime

    from pcm.catalogue_areas import CORE_AREAS, select_areas
    from pcm.extraction.extractor import GRAMMAR_AREAS

    _, day, role, utterance, lines = next(e for e in example_blocks() if e[0] == kind)
    areas = (*select_areas(utterance, ontology=ONTOLOGY, core=CORE_AREAS), *GRAMMAR_AREAS)
    assert Grammar(compact_grammar(ONTOLOGY, grammar_budget(3000), KNOWN, areas)).accepts(lines), lines
    with Memory.init(Settings(memory=tmp_path / "m", index_enabled=False), owner="Sam Ortiz") as mem:
        when = datetime.fromisoformat(day + "T10:00:00+00:00")
        mem.ingest([Conversation("s1", [Utterance("s1", 0, role, utterance, timestamp=when, source_id="m0")])])
        report = extract_posts(mem.context, [p.iri for p in mem.store.posts()], client=Local([lines]),
                               concurrency=1, output="compact")
    assert (report.extracted, report.failed, report.repairs, report.ungrounded) == (1, 0, 0, 0)


def test_a_call_is_shown_the_examples_of_its_own_kinds() -> None:
    from pcm.extraction.prompts import EXAMPLES_HEADING, MAX_EXAMPLES, compact_examples

    work = compact_examples(("people", "work", "family"), "user")
    assert work.startswith(EXAMPLES_HEADING) and "cv:WorkHistory" in work and "ob:hasCousin" in work
    assert "schema:BuyAction" not in work and work.count("Utterance:") == MAX_EXAMPLES
    advice = compact_examples(("people", "travel"), "assistant")
    assert advice.index("schema:InformAction") < advice.index("schema:TravelAction")
    assert compact_examples(("people",), "user").count("Utterance:") == 1  # the default, when no kind has one


def test_the_examples_follow_the_utterances_own_words_not_the_sessions_entities(memory: Memory) -> None:
    """A pronoun brings every known entity's types into the vocabulary, but not into the examples: a trip stored
    earlier in the session does not make the next "it was lovely" a trip."""
    from dataclasses import replace

    from pcm.extraction.context import Entity
    from pcm.extraction.prompts import compact_examples

    post = next(iter(memory.store.posts()))
    extractor = Extractor(memory.context, Local(), output="compact")
    context = extractor.contexts.build(post, [post])
    trip = Entity(memory.naming.namespace + "bus-trip", "bus trip to Salem", (SCHEMA + "TravelAction",))
    later = replace(context, post=replace(context.post, text="It was lovely, and the kids loved it."), entities=[trip])
    assert "travel" in extractor._areas(later)  # the vocabulary may name the trip
    travel = compact_examples(("travel",), "user")
    assert "Flagstaff" in travel  # the travel example, which this call is not shown
    assert "Flagstaff" not in extractor.prompt(later)[1]


@pytest.mark.parametrize(("text", "travel"), [
    ("We went to Lisbon in June.", True),
    ("I'm going back to Denver next week.", True),
    ("I went to a support group yesterday and it was powerful.", False),
    ("I'm going to try pottery.", False),
])
def test_going_somewhere_is_a_trip_only_when_the_place_is_named(text: str, travel: bool) -> None:
    from pcm.catalogue_areas import select_areas

    assert ("travel" in select_areas(text, ontology=ONTOLOGY)) is travel


def test_the_grammar_offers_only_the_terms_of_the_given_areas() -> None:
    narrow = Grammar(compact_grammar(ONTOLOGY, grammar_budget(3000), KNOWN, ("people", "activities", "work")))
    assert narrow.accepts('x schema:Organization "Acme"\nme schema:worksFor x\n')
    assert narrow.accepts("me schema:actionStatus schema:CompletedActionStatus\n")  # named values stay
    assert not narrow.accepts('x schema:BuyAction "buying a kettle"\n')
    assert not narrow.accepts('d pcm:Pet "Rex"\n')
    assert grammar(3000, KNOWN).accepts('x schema:BuyAction "buying a kettle"\n')  # every area by default


def test_a_compact_call_gets_the_grammar_of_its_utterances_areas(memory: Memory) -> None:
    post = next(iter(memory.store.posts()))
    extractor = Extractor(memory.context, Local(), output="compact")
    schema = extractor._constraint(extractor.contexts.build(post, [post]))
    text = schema.grammar(3000)  # type: ignore[misc]
    assert '"schema:BuyAction"' in text and '"schema:InformAction"' in text  # bought; social always
    assert '"pcm:Pet"' not in text and '"opencare:Medication"' not in text


def _stored(memory: Memory) -> set[tuple[str, str, str]]:
    graph = memory.naming.extraction_graph(next(iter(memory.store.posts())).iri)
    rows = memory.store.select(f"SELECT ?s ?p ?o WHERE {{ GRAPH <{graph}> {{ ?s ?p ?o }} }}").rows
    return {(r[0].value, r[1].value, r[2].value) for r in rows}


def _report_of(memory: Memory) -> str:
    post = next(iter(memory.store.posts()))
    notes = memory.store.select(f"SELECT ?r WHERE {{ GRAPH ?g {{ <{post.iri}> <{PCM}extractionReport> ?r }} }}").rows
    return " ".join(r[0].value for r in notes)


def test_a_compact_answer_that_still_fails_is_written_again_in_the_json_form(memory: Memory) -> None:
    """Two compact answers that describe only a node nothing declares, then the JSON form's call: its facts are
    stored, every call is counted in the one extraction, and the report says the compact lines failed."""
    from pcm.extraction.jsonld import as_answer

    ns = memory.naming.namespace
    facts = normalise_compact(EXAMPLE, namespace=ns, ontology=ONTOLOGY).triples
    as_json = json.dumps(as_answer(facts, namespace=ns, ontology=ONTOLOGY))
    bad = 'pet schema:name "Biscuit"\n'
    client = Local([bad, bad, as_json])
    report = extract_posts(memory.context, [p.iri for p in memory.store.posts()], client=client, concurrency=1,
                           output="compact")
    assert (report.extracted, report.failed, report.calls) == (1, 0, 3)
    assert [s.name if s else None for s in client.schemas] == ["extraction_compact", "extraction_compact",
                                                                 "extraction"]
    assert (ns + "buying-the-breville-barista-express", SCHEMA + "price", "549") in _stored(memory)
    assert "the compact lines failed (" in _report_of(memory) and "written in the json form instead" in _report_of(memory)


def test_without_a_fallback_form_a_failing_compact_answer_fails(tmp_path: Path) -> None:
    with ingested(tmp_path / "mem") as memory:
        memory.settings = memory.settings.with_(extraction=memory.settings.extraction.with_(fallback=""))
        bad = 'pet schema:name "Biscuit"\n'
        client = Local([bad, bad])
        report = extract_posts(memory.context, [p.iri for p in memory.store.posts()], client=client,
                               concurrency=1, output="compact")
        assert (report.extracted, report.failed, report.calls) == (0, 1, 2)


def test_a_handle_declared_for_two_things_states_nothing_about_either() -> None:
    """``city`` is Portland and Lisbon: which one the trip leaves from is not known, so that line is not read."""
    text = ('trip schema:TravelAction "flying to Lisbon"\ncity schema:City "Portland"\ncity schema:City "Lisbon"\n'
            "trip schema:agent me\ntrip schema:fromLocation city\n")
    with pytest.raises(OutputProblem, match="`city` names two nodes"):
        read_compact(text, namespace=NS, ontology=ONTOLOGY)
    answer = read_compact(text, namespace=NS, ontology=ONTOLOGY, skip_unreadable=True)
    got = normalise_answer(answer, namespace=NS, ontology=ONTOLOGY).triples
    assert not [t for t in got if t.predicate.value == SCHEMA + "fromLocation"]
    agent = ox.Triple(ox.NamedNode(NS + "flying-to-lisbon"), ox.NamedNode(SCHEMA + "agent"), ox.NamedNode(NAMING.owner))
    assert agent in got


def test_a_fact_that_makes_a_person_the_agent_of_a_person_is_left_out_and_reported(memory: Memory) -> None:
    """``me schema:agent you``: the owner is no action; the purchase's facts are stored, that line is not."""
    client = Local(["me schema:agent you\n" + EXAMPLE])
    report = extract_posts(memory.context, [p.iri for p in memory.store.posts()], client=client, concurrency=1,
                           output="compact")
    assert (report.extracted, report.calls) == (1, 1)
    stored = _stored(memory)
    assert (memory.naming.owner, SCHEMA + "agent", memory.naming.assistant) not in stored
    assert (memory.naming.namespace + "buying-the-breville-barista-express", SCHEMA + "agent",
            memory.naming.owner) in stored
    assert "left out 1 fact(s) that make a person what a person is not: " in _report_of(memory)

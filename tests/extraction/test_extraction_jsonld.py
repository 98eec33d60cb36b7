"""Constrained extraction output: the JSON Schema generated from the ontology, and JSON-LD answers read back.

The schema is checked with a real JSON Schema validator (``jsonschema``): every catalogue term of the selected areas
is reachable and nothing else is accepted. Answers of every value shape go through the real normalise → SHACL path
of :class:`pcm.extraction.extractor.Extractor` (its ``check``), the same one Turtle takes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pyoxigraph as ox
import pytest

from pcm.catalogue_areas import CORE_AREAS, RESERVED_AREAS
from pcm.extraction.extractor import Extractor
from pcm.extraction.jsonld import (
    MAX_NODES,
    MAX_TEXT,
    complete_references,
    dangling_references,
    extraction_schema,
)
from pcm.extraction.normalise import OutputProblem, normalise_json
from pcm.llm import ScriptedClient
from pcm.memory import Memory
from pcm.namespaces import FOAF, PCM, RDF, RDFS, SCHEMA, XSD
from pcm.ontology import AREAS, CLASS, DATATYPE_PROPERTY, OBJECT_PROPERTY, load_ontology
from pcm.settings import Settings

NS = "https://pcm.invalid/m/test/"
ONTOLOGY = load_ontology()
ALL = tuple(a for a in AREAS if a not in RESERVED_AREAS)


def validator(areas: tuple[str, ...], known: tuple[str, ...] = ()) -> jsonschema.Draft202012Validator:
    schema = extraction_schema(ONTOLOGY, areas, known).schema
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def valid(areas: tuple[str, ...], answer: object, known: tuple[str, ...] = ()) -> bool:
    return validator(areas, known).is_valid(answer)


def node(name: str, cls: str, label: str, **members: object) -> dict[str, object]:
    """A new node as the schema wants it: ``@id``, ``@type`` and ``rdfs:label`` first."""
    return {"@id": name, "@type": [cls], "rdfs:label": label, **{k.replace("__", ":"): v for k, v in members.items()}}


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    path = Path(tmp_path_factory.mktemp("jsonld")) / "memory"
    mem = Memory.init(Settings(memory=path, index_enabled=False), owner="Dana Whitfield")
    yield mem
    mem.close()


# ---------------------------------------------------------------------------------------------------- the schema


def test_every_catalogue_term_of_the_areas_is_reachable_and_nothing_else() -> None:
    node = extraction_schema(ONTOLOGY, ALL).schema["$defs"]["node"]
    types = set(node["properties"]["@type"]["items"]["enum"])
    keys = set(node["properties"]) - {"@id", "@type", "rdfs:label"}
    for term in ONTOLOGY.terms.values():
        curie = ONTOLOGY.curie(term.iri)
        offered = term.area not in RESERVED_AREAS
        if term.kind == CLASS:
            assert (curie in types) is offered, curie
        elif term.kind in (OBJECT_PROPERTY, DATATYPE_PROPERTY):
            assert (curie in keys) is offered, curie
    assert keys <= {ONTOLOGY.curie(i) for i in ONTOLOGY.properties}
    assert node["additionalProperties"] is False


def test_extraction_uses_the_whole_catalogue_so_a_missed_area_costs_no_fact() -> None:
    assert extraction_schema(ONTOLOGY).schema == extraction_schema(ONTOLOGY, ALL).schema


def test_the_schema_follows_the_selected_areas() -> None:
    pets = ("pets",) + CORE_AREAS
    assert valid(pets, {"@graph": [node("m:biscuit", "pcm:Pet", "Biscuit", pcm__petBreed="beagle")]})
    assert not valid(CORE_AREAS, {"@graph": [node("m:biscuit", "pcm:Pet", "Biscuit")]})
    assert not valid(CORE_AREAS, {"@graph": [node("m:biscuit", "schema:Thing", "Biscuit", pcm__petBreed="beagle")]})


A = {"@id": "m:a", "@type": ["schema:Thing"], "rdfs:label": "a"}


@pytest.mark.parametrize(
    "answer",
    [
        {"@graph": [{**A, "schema:inventedProperty": "x"}]},  # not a catalogue predicate
        {"@graph": [{**A, "@type": ["schema:Superhero"]}]},  # not a catalogue class
        {"@graph": [{**A, "@id": "ex:a"}]},  # not an m: name
        {"@graph": [{**A, "schema:startDate": "last Tuesday"}]},  # not a date's lexical form
        {"@graph": [{**A, "schema:agent": "Dana"}]},  # a node reference must be a name
        {"@graph": [{**A, "rdfs:label": "x" * (MAX_TEXT + 1)}]},  # bounded strings
        {"@graph": [{**A, "@id": f"m:n{i}"} for i in range(MAX_NODES + 1)]},  # bounded nodes
        {"nodes": []},
    ],
)
def test_the_schema_refuses_what_is_not_the_catalogue_or_too_large(answer: object) -> None:
    assert not valid(ALL, answer)


def test_named_values_are_offered_where_their_class_is_the_range() -> None:
    assert valid(ALL, {"@graph": [{**A, "schema:actionStatus": "schema:CompletedActionStatus"}]})
    assert not valid(ALL, {"@graph": [{**A, "schema:actionStatus": "schema:Monday"}]})


# The three shapes SHACL refused in real small models' answers, each unsayable in the schema.
UNTYPED = {"@graph": [{"@id": "m:a", "rdfs:label": "a", "schema:about": "m:owner"}]}
UNLABELLED = {"@graph": [{"@id": "m:a", "@type": ["schema:Thing"], "schema:about": "m:owner"}]}
EMPTY_LABEL = {"@graph": [{**A, "rdfs:label": ""}]}
NUMBER_NODE = {"@graph": [{**A, "@id": "m:712"}]}
NUMBER_REFERENCE = {"@graph": [{**A, "schema:object": "m:712"}]}
NESTED_UNLABELLED = {"@graph": [{**A, "schema:object": {"@id": "m:car", "@type": ["schema:Car"]}}]}
NODE_AS_LITERAL = {"@graph": [{**A, "schema:description": node("m:b", "schema:Thing", "b")}]}


@pytest.mark.parametrize(
    "answer",
    [UNTYPED, UNLABELLED, EMPTY_LABEL, NUMBER_NODE, NUMBER_REFERENCE, NESTED_UNLABELLED, NODE_AS_LITERAL],
    ids=["untyped", "unlabelled", "empty-label", "number-node", "number-reference", "nested-unlabelled",
         "node-as-literal"],
)
def test_what_shacl_refuses_is_not_in_the_schema(answer: object) -> None:
    assert not valid(ALL, answer, known=("m:owner",))


def test_only_the_known_entities_of_the_prompt_go_without_type_and_label() -> None:
    owner = {"@graph": [{"@id": "m:owner", "pcm:hasPet": "m:biscuit"}]}
    assert valid(ALL, owner, known=("m:owner", "m:biscuit"))
    assert not valid(ALL, owner, known=("m:biscuit",))
    assert not valid(ALL, owner)


def test_a_thing_can_be_described_where_it_is_referred_to() -> None:
    """A property whose range is a class takes an embedded node (typed and labelled), alone or in a list."""
    buy = node("m:buy", "schema:BuyAction", "buying a car", schema__agent="m:owner",
               schema__object=node("m:car", "schema:Car", "car", schema__color="red"),
               schema__participant=[node("m:anna", "schema:Person", "Anna"), "m:bob"])
    assert valid(ALL, {"@graph": [buy]})


# ---------------------------------------------------------------------------------------------------- answers


VALUE_SHAPES = {"@graph": [
    {"@id": "m:owner", "pcm:hasPet": ["m:biscuit"], "schema:birthDate": "1990-04-12"},
    {"@id": "m:biscuit", "@type": ["pcm:Pet"], "rdfs:label": "Biscuit", "pcm:petSpecies": "dog",
     "pcm:petBreed": "beagle"},
    {"@id": "m:buy-leash", "@type": ["schema:BuyAction"], "rdfs:label": "buying a leash", "schema:agent": "m:owner",
     "schema:object": "m:leash", "schema:price": 24.5, "schema:priceCurrency": "USD",
     "schema:startDate": "2025-03", "schema:actionStatus": "schema:CompletedActionStatus"},
    {"@id": "m:leash", "@type": ["schema:Product"], "rdfs:label": "leash", "schema:url": "https://example.com/leash",
     "pcm:quantity": 2},
]}


def test_an_answer_of_every_value_shape_is_valid_and_passes_normalise_and_shacl(memory: Memory) -> None:
    areas = ALL
    assert valid(areas, VALUE_SHAPES, known=("m:owner",))
    extractor = Extractor(memory.context, ScriptedClient(), output="json")
    verdict = extractor.check(json.dumps(VALUE_SHAPES))
    assert verdict.accepted, verdict.report
    ns = memory.naming.namespace
    facts = {(t.subject.value, t.predicate.value, t.object) for t in verdict.triples}
    literal = {(s, p): o for s, p, o in facts if isinstance(o, ox.Literal)}
    assert (ns + "owner", PCM + "hasPet", ox.NamedNode(ns + "biscuit")) in facts
    assert (ns + "buy-leash", SCHEMA + "actionStatus", ox.NamedNode(SCHEMA + "CompletedActionStatus")) in facts
    assert (ns + "biscuit", RDF + "type", ox.NamedNode(PCM + "Pet")) in facts
    assert literal[(ns + "buy-leash", SCHEMA + "price")] == ox.Literal("24.5", datatype=ox.NamedNode(XSD + "decimal"))
    assert literal[(ns + "buy-leash", SCHEMA + "startDate")].datatype.value == XSD + "gYearMonth"
    assert literal[(ns + "owner", SCHEMA + "birthDate")].datatype.value == XSD + "date"
    assert literal[(ns + "leash", SCHEMA + "url")].datatype.value == XSD + "anyURI"
    assert literal[(ns + "leash", PCM + "quantity")].value == "2"


def test_embedded_nodes_become_typed_labelled_individuals_through_normalise_and_shacl(memory: Memory) -> None:
    ns = memory.naming.namespace
    buy = node("m:buy-bike", "schema:BuyAction", "buying a bike", schema__agent="m:owner",
               schema__actionStatus="schema:CompletedActionStatus",
               schema__object=node("m:bike", "pcm:Bicycle", "Trek bike", schema__color="blue"),
               schema__participant=[node("m:anna", "schema:Person", "Anna"), node("m:bob", "schema:Person", "Bob")])
    answer = {"@graph": [buy]}
    assert valid(ALL, answer)
    verdict = Extractor(memory.context, ScriptedClient(), output="json").check(json.dumps(answer))
    assert verdict.accepted, verdict.report
    facts = {(t.subject.value, t.predicate.value, t.object.value) for t in verdict.triples}
    assert (ns + "buy-bike", SCHEMA + "object", ns + "bike") in facts
    assert {(ns + "bike", RDF + "type", PCM + "Bicycle"), (ns + "bike", RDFS + "label", "Trek bike"),
            (ns + "bike", SCHEMA + "color", "blue")} <= facts
    for person, label in (("anna", "Anna"), ("bob", "Bob")):
        assert {(ns + "buy-bike", SCHEMA + "participant", ns + person), (ns + person, RDF + "type", SCHEMA + "Person"),
                (ns + person, RDFS + "label", label)} <= facts


def test_a_bare_new_name_gets_the_node_the_ranges_entail(memory: Memory) -> None:
    """A reference to a new name without a node of its own: typed with what the property's range entails (the most
    specific classes above every class of the range) and labelled from the name; nothing is guessed."""
    ns = memory.naming.namespace
    extractor = Extractor(memory.context, ScriptedClient(), output="json")
    repair = node("m:repair", "pcm:RepairAction", "repairing the car", schema__agent="m:owner",
                  schema__object="m:honda-civic", schema__provider="m:rosewood-auto-repair")
    verdict = extractor.check(json.dumps({"@graph": [repair]}))
    assert verdict.accepted, verdict.report
    facts = {(t.subject.value, t.predicate.value, t.object.value) for t in verdict.triples}
    assert {(ns + "honda-civic", RDF + "type", SCHEMA + "Thing"),
            (ns + "honda-civic", RDFS + "label", "honda civic")} <= facts
    shop = {(p, o) for s, p, o in facts if s == ns + "rosewood-auto-repair"}
    assert shop == {(RDF + "type", FOAF + "Agent"), (RDF + "type", SCHEMA + "Thing"),
                    (RDFS + "label", "rosewood auto repair")}  # a person or an organisation: an agent, a thing


def test_a_bare_name_in_camel_case_is_labelled_with_its_words() -> None:
    name = NS + "harborAnalytics"
    triples = [ox.Triple(ox.NamedNode(NS + "job"), ox.NamedNode(SCHEMA + "worksFor"), ox.NamedNode(name))]
    added = complete_references(triples, {name}, namespace=NS, ontology=ONTOLOGY)[len(triples):]
    assert ox.Triple(ox.NamedNode(name), ox.NamedNode(RDFS + "label"), ox.Literal("harbor Analytics")) in added


def test_a_name_pointed_to_by_a_property_without_range_is_left_for_shacl() -> None:
    name, unranged = NS + "x", "https://example.org/unranged"
    triples = [ox.Triple(ox.NamedNode(NS + "a"), ox.NamedNode(SCHEMA + "object"), ox.NamedNode(name)),
               ox.Triple(ox.NamedNode(NS + "a"), ox.NamedNode(unranged), ox.NamedNode(name))]
    assert dangling_references(triples, NS) == {name}
    assert complete_references(triples, {name}, namespace=NS, ontology=ONTOLOGY) == triples


def test_a_known_entity_referred_to_gets_no_new_type_or_label(memory: Memory) -> None:
    ns = memory.naming.namespace
    verdict = Extractor(memory.context, ScriptedClient(), output="json").check(json.dumps({"@graph": [
        node("m:walk", "schema:ExerciseAction", "a walk", schema__agent="m:owner")]}))
    assert verdict.accepted, verdict.report
    assert not [t for t in verdict.triples if t.subject.value == ns + "owner"]


def test_shacl_violations_of_a_json_answer_go_back_as_a_report(memory: Memory) -> None:
    extractor = Extractor(memory.context, ScriptedClient(), output="json")
    verdict = extractor.check(json.dumps({"@graph": [{"@id": "m:biscuit", "@type": ["pcm:Pet"]}]}))
    assert not verdict.accepted and "rdfs:label" in verdict.report


def test_an_empty_graph_means_nothing_to_extract(memory: Memory) -> None:
    verdict = Extractor(memory.context, ScriptedClient(), output="json").check('{"@graph": []}')
    assert verdict.accepted and verdict.triples == []


@pytest.mark.parametrize(
    ("text", "fragment"),
    [("Sorry, I cannot.", "no JSON object"), ('{"@graph": [', "not valid JSON"), ('{"@graph": "x"}', "@graph"),
     ('{"@graph": [1, 2]}', "JSON object with an @id")],
)
def test_unreadable_answers_say_why_in_one_line(text: str, fragment: str) -> None:
    with pytest.raises(OutputProblem, match=fragment) as info:
        normalise_json(text, namespace=NS, ontology=ONTOLOGY)
    assert info.value.kind == "syntax" and "\n" not in str(info.value)


def test_fences_and_a_bare_node_list_are_read_and_paper_style_names_re_homed() -> None:
    text = '```json\n[{"@id": "pcm:user", "schema:knows": "m:marcus"}, {"@id": "m:marcus", "rdfs:label": "M"}]\n```'
    result = normalise_json(text, namespace=NS, ontology=ONTOLOGY)
    assert (NS + "owner", SCHEMA + "knows", NS + "marcus") in {
        (t.subject.value, t.predicate.value, t.object.value) for t in result.triples
    }


def test_the_models_own_context_is_ignored() -> None:
    text = json.dumps({"@context": {"schema": "http://evil.example/"}, "@graph": [
        {"@context": {"m": "http://evil.example/m/"}, "@id": "m:a", "rdfs:label": "A", "schema:name": "A"}]})
    result = normalise_json(text, namespace=NS, ontology=ONTOLOGY)
    assert {t.subject.value for t in result.triples} == {NS + "a"}
    assert not [t for t in result.triples if "evil" in t.predicate.value]


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ask" / "extraction"


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.ttl")), ids=lambda p: p.stem)
def test_every_gold_fact_of_the_samples_can_be_said_in_the_schema_and_reads_back_the_same(path: Path) -> None:
    """The schema loses nothing Turtle can say: each gold answer, in the JSON shape, is valid and round-trips."""
    from pcm.extraction.jsonld import as_answer
    from pcm.extraction.normalise import normalise_output

    turtle = normalise_output(path.read_text(encoding="utf-8"), namespace=NS, ontology=ONTOLOGY).triples
    answer = as_answer(turtle, namespace=NS, ontology=ONTOLOGY)
    known = tuple(n["@id"] for n in answer["@graph"] if "@type" not in n)  # entities of earlier utterances
    errors = [e.message[:200] for e in validator(ALL, known).iter_errors(answer)]
    assert errors == []
    back = normalise_json(json.dumps(answer), namespace=NS, ontology=ONTOLOGY).triples
    assert set(back) == set(turtle)


def test_every_pattern_is_anchored_as_grammar_converters_require() -> None:
    from pcm.retrieval.query_form import query_schema

    def patterns(node: object) -> list[str]:
        if isinstance(node, dict):
            own = [node["pattern"]] if isinstance(node.get("pattern"), str) else []
            return own + [p for value in node.values() for p in patterns(value)]
        if isinstance(node, list):
            return [p for value in node for p in patterns(value)]
        return []

    found = patterns(extraction_schema(ONTOLOGY).schema) + patterns(query_schema(ONTOLOGY).schema)
    assert found and all(p.startswith("^") and p.endswith("$") for p in found), found

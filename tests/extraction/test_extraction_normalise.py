"""From model text to triples, and the small pure helpers around the prompt (no store, no model)."""

from __future__ import annotations

from datetime import datetime

import pyoxigraph as ox
import pytest

from pcm.catalogue_areas import CORE_AREAS, select_areas
from pcm.extraction.context import label_variants, message_time
from pcm.extraction.normalise import (
    MAX_OUTPUT_CHARS,
    OutputProblem,
    extract_turtle,
    normalise_json,
    normalise_output,
)
from pcm.extraction.resolve import label_lookup_variants, normalise_label
from pcm.ontology import load_ontology

NS = "https://pcm.invalid/m/test/"
SCHEMA = "https://schema.org/"
PCM = "https://w3id.org/pcm/ontology#"


def norm(text: str):  # type: ignore[no-untyped-def]
    return normalise_output(text, namespace=NS, ontology=load_ontology())


def spo(result) -> set[tuple[str, str, str]]:  # type: ignore[no-untyped-def]
    return {(t.subject.value, t.predicate.value, t.object.value) for t in result.triples}


# ---------------------------------------------------------------------------------------------------- text


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("```turtle\nm:a a pcm:Pet .\n```", "m:a a pcm:Pet .\n"),
        ("Sure! Here it is:\n```ttl\nm:a a pcm:Pet .\n```\nAnything else?", "m:a a pcm:Pet .\n"),
        ("Here is the Turtle:\nm:a a pcm:Pet ;\n  rdfs:label \"A\" .\nHope this helps.", 'm:a a pcm:Pet ;\n  rdfs:label "A" .\n'),
        ("```\nm:a a pcm:Pet .\n", "m:a a pcm:Pet .\n"),  # an unterminated fence (truncated reply)
        ("@prefix m: <x:> .\nm:a a pcm:Pet .", "@prefix m: <x:> .\nm:a a pcm:Pet .\n"),
    ],
)
def test_turtle_is_cut_out_of_fences_and_prose(reply: str, expected: str) -> None:
    assert extract_turtle(reply) == expected


def test_fences_prose_prefixes_and_http_schema_are_normalised() -> None:
    result = norm(
        "Here you go:\n```turtle\n@prefix schema: <http://schema.org/> .\n"
        'm:bike a pcm:Bicycle ; rdfs:label "bike" ; schema:color "blue" .\n```'
    )
    assert result.problems == []
    assert spo(result) == {
        (NS + "bike", "http://www.w3.org/1999/02/22-rdf-syntax-ns#type", PCM + "Bicycle"),
        (NS + "bike", "http://www.w3.org/2000/01/rdf-schema#label", "bike"),
        (NS + "bike", SCHEMA + "color", "blue"),
    }
    assert any("added prefixes" in n for n in result.notes)


def test_individuals_in_the_models_own_namespaces_are_re_homed() -> None:
    result = norm(
        "@prefix ex: <http://example.org/> .\n"
        'ex:dana schema:owns :bike . :bike a pcm:Bicycle ; rdfs:label "bike" .\n'
        '<http://other.example/people#Marcus> a schema:Person ; rdfs:label "Marcus" .\n'
        'm:bike schema:url <https://www.trekbikes.com/> .'
    )
    subjects = {s for s, _, _ in spo(result)}
    assert subjects == {NS + "dana", NS + "bike", NS + "marcus"}
    assert (NS + "bike", SCHEMA + "url", "https://www.trekbikes.com/") in spo(result)


def test_untyped_iso_dates_on_date_properties_are_typed() -> None:
    result = norm('m:a schema:startDate "2025-03-02" ; schema:endDate "2025-04" ; schema:description "2025-03-02" .')
    types = {t.predicate.value: t.object.datatype.value for t in result.triples if isinstance(t.object, ox.Literal)}
    assert types[SCHEMA + "startDate"].endswith("#date")
    assert types[SCHEMA + "endDate"].endswith("#gYearMonth")
    assert types[SCHEMA + "description"].endswith("#string")  # not a date property: left alone


def test_literals_come_out_canonical_and_deduplicated() -> None:
    result = norm('m:a schema:price 549.0 ; schema:price 549.00 ; schema:price "549.0"^^xsd:decimal .')
    assert [t.object.value for t in result.triples] == ["549"]


def test_unknown_terms_are_kept_and_reported_not_dropped() -> None:
    result = norm('m:owner schema:favoriteColor "teal" .\nm:kit a schema:Superhero .')
    assert result.problems == []
    assert result.unknown_terms == {SCHEMA + "favoriteColor", SCHEMA + "Superhero"}
    assert (NS + "owner", SCHEMA + "favoriteColor", "teal") in spo(result)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("GRAPH <urn:pcm:graph:conversation> { m:a a pcm:Pet . }", "named graphs"),
        ("{ m:a a pcm:Pet . }", "named graphs"),
        ("INSERT DATA { m:a a pcm:Pet }", "SPARQL Update"),
        ("DROP GRAPH <urn:pcm:graph:conversation>", "SPARQL Update"),
        ("pcm:Foo a owl:Class .", "vocabulary term pcm:Foo"),
        ("m:a rdfs:subClassOf schema:Thing .", "declares ontology terms"),
        ("m:a a owl:Class .", "owl:Class"),
        ("m:a schema:about <urn:pcm:graph:history> .", "one of pcm's graphs"),
        ("<post/abc> schema:about m:a .", "a post, session or record"),
        ("m:a schema:about <session/s1> .", "a post, session or record"),
        ("m:a sioc:content \"hi\" .", "bookkeeping"),
        ("m:a a pcm:ExtractionActivity .", "bookkeeping"),
    ],
)
def test_hostile_or_reserved_output_is_refused(text: str, fragment: str) -> None:
    result = norm(text)
    assert result.problems and any(fragment in p for p in result.problems), result.problems


@pytest.mark.parametrize(
    "text",
    [
        "@prefix pcm: <https://pcm.org/ontology/> .\nm:a a pcm:Pet ; rdfs:label \"A\" .",
        "PREFIX pcm: <http://evil.example/>\nm:a a pcm:Pet ; rdfs:label \"A\" .",
    ],
)
def test_a_known_prefix_declared_with_a_wrong_iri_is_bound_back(text: str) -> None:
    result = norm(text)
    assert result.problems == []
    assert (NS + "a", "http://www.w3.org/1999/02/22-rdf-syntax-ns#type", PCM + "Pet") in spo(result)
    assert any("bound prefix pcm: back" in n for n in result.notes)
    assert result.unknown_terms == set()


def test_a_paper_style_reply_is_stored_under_the_memory_namespace() -> None:
    # What the 0.5B model wrote, prefix and all: individuals in pcm:, the user as pcm:user.
    result = norm(
        "@prefix pcm: <https://pcm.org/ontology/> .\n"
        "pcm:user schema:owns pcm:silver-honda-civic .\n"
        'pcm:silver-honda-civic a pcm:Car ; rdfs:label "silver Honda Civic" .\n'
        "pcm:me schema:knows schema:marcus-lee .\n"
    )
    assert result.problems == []
    assert spo(result) == {
        (NS + "owner", SCHEMA + "owns", NS + "silver-honda-civic"),
        (NS + "silver-honda-civic", "http://www.w3.org/1999/02/22-rdf-syntax-ns#type", PCM + "Car"),
        (NS + "silver-honda-civic", "http://www.w3.org/2000/01/rdf-schema#label", "silver Honda Civic"),
        (NS + "owner", SCHEMA + "knows", NS + "marcus-lee"),
    }


def test_undefined_classes_and_capitalised_values_are_not_taken_for_individuals() -> None:
    result = norm("m:a a pcm:Hovercraft ; schema:eventStatus schema:EventPostponedForever .")
    assert (NS + "a", "http://www.w3.org/1999/02/22-rdf-syntax-ns#type", PCM + "Hovercraft") in spo(result)
    assert (NS + "a", SCHEMA + "eventStatus", SCHEMA + "EventPostponedForever") in spo(result)
    assert {PCM + "Hovercraft", SCHEMA + "EventPostponedForever"} <= result.unknown_terms


def test_forbidden_triples_are_dropped_and_the_rest_kept() -> None:
    result = norm(
        'm:biscuit a pcm:Pet ; rdfs:label "Biscuit" .\n'
        "pcm:Pet rdfs:subClassOf schema:Thing .\n"
        'm:biscuit sioc:content "hi" .\n'
        "m:biscuit schema:about <urn:pcm:graph:history> .\n"
    )
    assert result.problems == []
    assert spo(result) == {
        (NS + "biscuit", "http://www.w3.org/1999/02/22-rdf-syntax-ns#type", PCM + "Pet"),
        (NS + "biscuit", "http://www.w3.org/2000/01/rdf-schema#label", "Biscuit"),
    }
    [note] = [n for n in result.notes if n.startswith("dropped")]
    assert "dropped 3 triple(s)" in note and "bookkeeping" in note and "pcm's graphs" in note


def test_the_owner_and_the_assistant_keep_who_they_are() -> None:
    """What the 0.5B model wrote for "I am allergic to peanuts": the owner as a new node, labelled with the
    utterance and typed at random. Their facts stay; the types and names an answer gives them go, with a note."""
    result = normalise_json(
        '{"@graph": [{"@id": "m:owner", "@type": ["schema:SportsTeam", "schema:JoinAction"], "rdfs:label": "I am '
        'allergic to peanuts", "pcm:hasAllergy": {"@id": "m:peanut-allergy", "@type": ["pcm:Allergy"], '
        '"rdfs:label": "peanut allergy"}}, {"@id": "m:assistant", "schema:name": "Sage"}]}',
        namespace=NS, ontology=load_ontology(),
    )
    assert result.problems == []
    subjects = {s for s, _, _ in spo(result)}
    assert subjects == {NS + "owner", NS + "peanut-allergy"}
    assert (NS + "owner", PCM + "hasAllergy", NS + "peanut-allergy") in spo(result)
    assert not [t for t in spo(result) if t[0] == NS + "owner" and t[1] != PCM + "hasAllergy"]
    assert any("dropped 4 type(s) or name(s) given to m:owner or m:assistant" in n for n in result.notes)
    # the same in Turtle; anyone else may be typed and named
    turtle = norm('m:owner a schema:SportsTeam ; rdfs:label "Dana W." .\nm:marcus a schema:Person ; schema:name "Marcus" .')
    assert spo(turtle) == {(NS + "marcus", "http://www.w3.org/1999/02/22-rdf-syntax-ns#type", SCHEMA + "Person"),
                           (NS + "marcus", SCHEMA + "name", "Marcus")}


def test_http_schema_prefix_declaration_is_not_a_redefinition() -> None:
    assert norm('@prefix schema: <http://schema.org/> .\nm:a a schema:Person ; rdfs:label "A" .').problems == []


def test_words_in_strings_and_prose_do_not_trigger_refusals() -> None:
    result = norm('Here is the graph you asked for:\nm:a rdfs:label "drop graph { delete }" ; a pcm:Pet .')
    assert result.problems == []


@pytest.mark.parametrize(
    ("text", "kind", "fatal"),
    [
        ("", "empty", False),
        ("  \n ", "empty", False),
        ("x" * (MAX_OUTPUT_CHARS + 1), "too-large", True),
        ('m:a a pcm:Pet ;\n  rdfs:label "A .\n', "syntax", False),
        # RDF 1.2 triple terms: read by the parser, taken by nothing after it
        ("m:a schema:knows m:b .\nm:claim rdf:reifies <<( m:a schema:knows m:b )>> .", "syntax", False),
        ("<< m:a schema:knows m:b >> schema:startDate \"2024-01-01\" .", "syntax", False),
    ],
)
def test_unreadable_output_raises_with_its_kind(text: str, kind: str, fatal: bool) -> None:
    with pytest.raises(OutputProblem) as caught:
        norm(text)
    assert (caught.value.kind, caught.value.fatal) == (kind, fatal)


def test_syntax_errors_name_the_models_own_line() -> None:
    with pytest.raises(OutputProblem) as caught:
        norm('m:a a pcm:Pet .\nm:b a pcm:Pet ;\n    rdfs:label "B" "C" .\n')
    assert "line 3" in str(caught.value) and 'rdfs:label "B" "C"' in str(caught.value)


def test_too_many_triples_is_fatal() -> None:
    text = "\n".join(f"m:p{i} a pcm:Plant ." for i in range(400))
    with pytest.raises(OutputProblem) as caught:
        norm(text)
    assert caught.value.fatal and "cap" in str(caught.value)


# ---------------------------------------------------------------------------------------------------- helpers


def test_message_time_spells_out_relative_dates_from_the_message_not_the_clock() -> None:
    when, hints = message_time(datetime.fromisoformat("2025-09-16T19:30:00-07:00"))
    assert when == "2025-09-16T19:30:00-07:00 (Tuesday)"
    assert "yesterday 2025-09-15" in hints and "tomorrow 2025-09-17" in hints
    assert "Fri 2025-09-12" in hints.split("the next")[0]  # "last Friday"
    assert "Mon 2025-09-22" in hints.split("the next")[1]  # "next Monday"
    unknown, hint = message_time(None)
    assert unknown == "unknown" and "cannot be resolved" in hint


def test_label_variants_cover_casings_without_stopword_grams() -> None:
    found = label_variants("I took biscuit to Sellwood Animal Clinic yesterday.")
    assert {"Biscuit", "biscuit", "Sellwood Animal Clinic", "sellwood animal clinic"} <= found
    assert "to" not in found and "yesterday" not in found and "the" not in found


def test_label_normalisation_is_the_merge_key() -> None:
    assert normalise_label("The Burke-Gilman Trail") == normalise_label("burke gilman trail")
    assert normalise_label("Café Müller") == "cafe muller"
    assert normalise_label("Biscuit") != normalise_label("Biscuits")
    assert {"Burke-Gilman Trail", "the Burke-Gilman Trail", "burke-gilman trail"} <= label_lookup_variants(
        "The Burke-Gilman Trail"
    )


def test_catalogue_areas_follow_the_utterance() -> None:
    ontology = load_ontology()
    car = select_areas("Yesterday my car broke down; the repair cost $712.", ontology=ontology)
    assert {"vehicles", "services", "purchases"} <= set(car) and set(CORE_AREAS) <= set(car)
    assert "health" not in car and "conversation" not in car and "provenance" not in car
    pet = select_areas("She is doing fine.", entity_types=[PCM + "Pet"], ontology=ontology)
    assert "pets" in pet

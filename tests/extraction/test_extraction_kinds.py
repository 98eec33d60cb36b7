"""Facts that make a person, or a happening, something it is not (:mod:`pcm.extraction.kinds`)."""

from __future__ import annotations

import pyoxigraph as ox

from pcm.extraction.kinds import misplaced_facts, node_types
from pcm.namespaces import FOAF, PCM, RDF, SCHEMA
from pcm.ontology import load_ontology

ONTOLOGY = load_ontology()
M = "https://pcm.invalid/m/t/"


def fact(s: str, p: str, o: str) -> ox.Triple:
    return ox.Triple(ox.NamedNode(M + s), ox.NamedNode(p), ox.NamedNode(M + o))


def test_a_person_as_an_actions_agent_or_a_products_maker_is_misplaced_but_not_as_a_buyer() -> None:
    triples = [
        ox.Triple(ox.NamedNode(M + "buy"), ox.NamedNode(RDF + "type"), ox.NamedNode(SCHEMA + "BuyAction")),
        ox.Triple(ox.NamedNode(M + "plant"), ox.NamedNode(RDF + "type"), ox.NamedNode(SCHEMA + "Product")),
        fact("buy", SCHEMA + "agent", "owner"),  # a person does the buying: fine
        fact("owner", SCHEMA + "agent", "assistant"),  # the owner is no action
        fact("plant", SCHEMA + "manufacturer", "owner"),  # nor an organization that makes plants
        fact("owner", PCM + "hasPet", "biscuit"),  # what a person has
        fact("owner", SCHEMA + "knows", "tom"),
    ]
    known = {M + "owner": {PCM + "MemoryOwner", SCHEMA + "Person"}, M + "assistant": {PCM + "AssistantAgent"},
             M + "tom": {FOAF + "Person"}}
    found = misplaced_facts(triples, node_types(triples, known), ONTOLOGY)
    assert found == [fact("owner", SCHEMA + "agent", "assistant"), fact("plant", SCHEMA + "manufacturer", "owner")]


def test_nodes_whose_types_are_unknown_are_left_alone() -> None:
    triples = [fact("someone", SCHEMA + "agent", "thing")]
    assert misplaced_facts(triples, node_types(triples, {}), ONTOLOGY) == []


def test_a_happening_is_no_employer_or_birthplace_but_may_be_what_something_is_about() -> None:
    triples = [
        ox.Triple(ox.NamedNode(M + "race"), ox.NamedNode(RDF + "type"), ox.NamedNode(SCHEMA + "ExerciseAction")),
        ox.Triple(ox.NamedNode(M + "fair"), ox.NamedNode(RDF + "type"), ox.NamedNode(SCHEMA + "Event")),
        fact("owner", SCHEMA + "worksFor", "race"),
        fact("owner", SCHEMA + "birthPlace", "fair"),
        fact("post", SCHEMA + "about", "race"),  # anything may be about a race
        fact("race", SCHEMA + "location", "park"),
    ]
    known = {M + "owner": {SCHEMA + "Person"}, M + "park": {SCHEMA + "Park"}}
    found = misplaced_facts(triples, node_types(triples, known), ONTOLOGY)
    assert found == [fact("owner", SCHEMA + "worksFor", "race"), fact("owner", SCHEMA + "birthPlace", "fair")]

"""Whom a turn addresses: the owner's "you" is the other person of a two-person conversation, not the assistant.
No model, no store."""

from __future__ import annotations

from datetime import datetime

import pyoxigraph as ox

from pcm.conversations import PostRecord
from pcm.extraction.context import addressee_iri
from pcm.extraction.grounding import Grounding, Said
from pcm.naming import Naming
from pcm.ontology import load_ontology

NAMING = Naming("https://pcm.invalid/m/test/")
WHEN = datetime(2023, 5, 8, 13, 56)


def post(position: int, role: str, speaker: str | None) -> PostRecord:
    return PostRecord(iri=f"urn:p{position}", session="s1", role=role, speaker=speaker, time=WHEN, text="...",
                      source_id=None, position=position)


def test_the_owner_talks_to_the_other_person_of_the_session_else_to_the_assistant() -> None:
    friends = [post(0, "user", "Caroline"), post(1, "other", "Melanie"), post(2, "user", "Caroline")]
    melanie = NAMING.person("Melanie")
    assert addressee_iri(friends[0], friends, NAMING) == melanie  # the first turn: the next speaker
    assert addressee_iri(friends[2], friends, NAMING) == melanie
    assert addressee_iri(friends[1], friends, NAMING) == NAMING.owner
    chat = [post(0, "user", None), post(1, "assistant", None), post(2, "user", None)]
    assert addressee_iri(chat[0], chat, NAMING) == NAMING.assistant
    assert addressee_iri(chat[2], chat, NAMING) == NAMING.assistant
    assert addressee_iri(chat[1], chat, NAMING) == NAMING.owner
    alone = [post(0, "user", "Caroline")]
    assert addressee_iri(alone[0], alone, NAMING) == NAMING.assistant


def test_thanks_between_the_owner_and_the_person_addressed_are_not_a_fact() -> None:
    grounding = Grounding(load_ontology(), parties=(NAMING.owner, NAMING.assistant))
    melanie = ox.NamedNode(NAMING.person("Melanie"))
    thanks = ox.NamedNode(NAMING.namespace + "thanks")
    triples = [
        ox.Triple(thanks, ox.NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#type"),
                  ox.NamedNode("https://schema.org/CommunicateAction")),
        ox.Triple(thanks, ox.NamedNode("https://schema.org/agent"), ox.NamedNode(NAMING.owner)),
        ox.Triple(thanks, ox.NamedNode("https://schema.org/recipient"), melanie),
    ]
    said = Said.of("Thanks, Melanie! Your kind words really mean a lot.", WHEN)
    kept = grounding.ground(triples, said, speaker=NAMING.owner, addressee=melanie.value).triples
    assert kept == []
    assert grounding.ground(triples, said, speaker=NAMING.owner).triples, "to anyone else it would be a fact"

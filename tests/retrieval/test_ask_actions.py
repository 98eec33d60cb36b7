"""Reading questions about a person's actions of one kind: which class the verb names, and who."""

from __future__ import annotations

import pytest

from pcm.ontology import load_ontology
from pcm.retrieval.grounding import GroundedEntity
from pcm.retrieval.wording import action_classes, asked_action, verb_class
from pcm.retrieval.worked import person

VERBS = action_classes(load_ontology().classes)
SCHEMA = "https://schema.org/"


def test_every_action_class_of_the_ontology_is_named_by_its_verb() -> None:
    assert VERBS["buy"] == SCHEMA + "BuyAction" and VERBS["order"] == SCHEMA + "OrderAction"
    assert VERBS["repair"].endswith("#RepairAction")
    assert "" not in VERBS and all(iri.endswith("Action") for iri in VERBS.values())


@pytest.mark.parametrize(
    ("word", "cls"),
    [("bought", "BuyAction"), ("buy", "BuyAction"), ("ordered", "OrderAction"), ("moved", "MoveAction"),
     ("paid", "PayAction"), ("cooking", "CookAction"), ("shopped", None), ("sister", None), ("car", None)],
)
def test_a_verb_in_any_tense_names_its_class(word: str, cls: str | None) -> None:
    found = verb_class(word, VERBS)
    assert (found.rsplit("/", 1)[-1] if found else None) == cls


@pytest.mark.parametrize(
    ("question", "kind", "who", "what"),
    [
        ("What did Dana buy most recently?", "latest", "Dana", ""),
        ("what did Dana Whitfield   buy last", "latest", "Dana Whitfield", ""),
        ("What was the last thing I bought?", "latest", "I", ""),
        ("What did I order first?", "earliest", "I", ""),
        ("How much has Dana spent on the things she bought?", "total", "Dana", ""),
        ("How much did I spend on everything I bought?", "total", "I", ""),
        ("On what date did Dana buy the espresso machine?", "when", "Dana", "the espresso machine"),
        ("When did Dana's sister move to Denver?", "when", "Dana's sister", "to Denver"),
    ],
)
def test_the_kind_the_person_and_the_thing_are_read_from_the_question(question: str, kind: str, who: str,
                                                                       what: str) -> None:
    asked = asked_action(question, VERBS)
    assert asked is not None and (asked.kind, asked.who, asked.what) == (kind, who, what)


@pytest.mark.parametrize(
    "question",
    [
        "When did Dana's car break down?",  # no action class for "break"
        "What did Dana do last summer?",
        "How much has Dana spent on the things Marcus bought?",  # two people: left to the model
        "How often does Dana run?",
        "What did Dana say most recently?",
    ],
)
def test_other_questions_are_left_to_the_model(question: str) -> None:
    assert asked_action(question, VERBS) is None


def test_the_person_is_the_owner_for_i_or_the_owners_name_else_one_entity_matched_by_name() -> None:
    joanna = GroundedEntity("m:joanna", "Joanna", ("Person",), 1.0, "label")
    loose = GroundedEntity("m:jo", "Jo's shop", ("Store",), 0.5, "vector")
    kwargs = {"owner": "m:owner", "owner_name": "Dana Whitfield"}
    assert person("I", entities=[], **kwargs) == "m:owner"
    assert person("Dana's", entities=[], **kwargs) == "m:owner"
    assert person("Joanna", entities=[joanna, loose], **kwargs) == "m:joanna"
    assert person("Jo", entities=[loose], **kwargs) is None
    assert person("Dana's sister", entities=[joanna], **kwargs) is None
    # a genitive written without an apostrophe (German, Dutch, the Nordic languages) names the same person
    assert person("Danas", entities=[], **kwargs) == "m:owner"
    assert person("Joannas", entities=[joanna], **kwargs) == "m:joanna"
    assert person("Thomas", entities=[joanna], **kwargs) is None

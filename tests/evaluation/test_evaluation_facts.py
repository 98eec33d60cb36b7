"""The gold facts of ``tests/fixtures/extraction`` and the scorer that measures extractions against them.

The fixture tests check the labels themselves: they load, use only terms the ontology defines, name real utterances,
and are enough (45 utterances, 12 that state nothing). The scorer tests write hand-made extractions through the real
pipeline (a scripted model answers with Turtle, then normalisation, SHACL, entity resolution, supersession and the
write run as for any model) and check the precision and recall a person computes by hand from them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from pcm.conversations import parse_file, sample_paths
from pcm.errors import InputError, UsageError
from pcm.evaluation.facts import (
    LabelSet,
    label_conversations,
    literal_matches,
    load_label_dir,
    load_labels,
    names_match,
    post_iri,
    resolve,
    score,
    vocabulary_term,
)
from pcm.extraction import extract_posts
from pcm.llm import ScriptedClient
from pcm.llm.base import Message
from pcm.memory import Memory
from pcm.ontology import Ontology
from tests.conftest import shared_path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "extraction"
NOTHING = "# nothing to extract"


@pytest.fixture(scope="module")
def label_sets() -> dict[str, LabelSet]:
    return {s.source: s for s in load_label_dir(FIXTURES)}


# ---------------------------------------------------------------------------------------------------- the fixture


def test_fixture_files_load(label_sets: dict[str, LabelSet]) -> None:
    assert set(label_sets) == {"samples"}
    assert label_sets["samples"].format == "json"
    for labels in label_sets.values():
        for utterance in labels.utterances:
            assert utterance.fact_bearing == bool(utterance.facts), utterance.id
            assert len(utterance.facts) <= 15, f"{utterance.id}: label the essential facts only"


def test_labels_use_terms_the_ontology_defines(label_sets: dict[str, LabelSet], onto: Ontology) -> None:
    for labels in label_sets.values():
        for utterance in labels.utterances:
            for fact in utterance.facts:
                where = f"{labels.source} {utterance.id}: {fact}"
                if fact.cls is not None:
                    assert onto.is_class(fact.cls), where
                    assert not onto.terms[fact.cls].deprecated, where
                else:
                    assert fact.prop is not None and onto.is_property(fact.prop), where
                    assert not onto.terms[fact.prop].deprecated, where
                    term = vocabulary_term(fact.value or "")
                    assert term is None or onto.defines(term), where


def test_enough_utterances_and_enough_that_state_nothing(label_sets: dict[str, LabelSet]) -> None:
    utterances = [u for labels in label_sets.values() for u in labels.utterances]
    assert len(utterances) >= 45
    assert sum(not u.fact_bearing for u in utterances) >= 12
    samples = label_sets["samples"].utterances
    assert len({u.file for u in samples}) >= 8
    assert {u.role for u in samples if u.fact_bearing} == {"user", "assistant"}
    assert {u.role for u in samples if not u.fact_bearing} == {"user", "assistant"}
    assert label_sets["samples"].fact_bearing_ids() | label_sets["samples"].non_fact_bearing_ids() == {
        u.id for u in samples
    }


def test_a_label_file_of_locomo_turns_resolves_against_the_shared_data(tmp_path: Path) -> None:
    """Labels of LoCoMo turns are kept outside the repository (the data is not bundled); the scorer reads such a
    file by the turns' ids, with the text from ../shared at run time."""
    data = shared_path("data")
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps({
        "source": "locomo-test", "format": "locomo", "data": "locomo/locomo-conv-26.json", "sample_id": "conv-26",
        "owner": "Caroline", "utterances": [
            {"id": "D1:1", "role": "user", "fact_bearing": False, "facts": []},
            {"id": "D1:2", "role": "other", "fact_bearing": False, "facts": []},
        ],
    }), encoding="utf-8")
    labels = load_labels(path)
    found = resolve(labels, label_conversations(labels, data))
    assert [found[i].source_id for i in ("D1:1", "D1:2")] == ["D1:1", "D1:2"]
    assert found["D1:1"].role == "user"


def test_every_sample_id_names_a_sample_utterance_of_that_role(label_sets: dict[str, LabelSet]) -> None:
    labels = label_sets["samples"]
    found = resolve(labels, label_conversations(labels))
    for utterance in labels.utterances:
        assert found[utterance.id].role == utterance.role, utterance.id
        assert utterance.file is not None and any(p.stem == utterance.file for p in sample_paths())


def test_a_malformed_label_file_is_one_input_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"source": "x", "format": "json", "owner": "me", "utterances": [
        {"id": "01-work/dana-01-work/d01-m01", "role": "user", "fact_bearing": True,
         "facts": [{"entity": "Greg", "class": "nope:Person", "property": None, "value": None}]},
    ]}))
    with pytest.raises(InputError, match="known prefix"):
        load_labels(path)
    path.write_text(json.dumps({"source": "x", "format": "json", "owner": "me", "utterances": [
        {"id": "01-work/dana-01-work/d01-m01", "role": "user", "fact_bearing": True, "facts": []},
    ]}))
    with pytest.raises(InputError, match="fact_bearing"):
        load_labels(path)


# ------------------------------------------------------------------------------------------------- value matching


def test_names_match_other_wordings_but_not_other_things() -> None:
    assert names_match("the Trek bike", "Trek bike")
    assert names_match("Dana Whitfield", "Dana")
    assert names_match("lactose intolerance", "lactose intolerant")
    assert names_match("alternator failure", "alternator")
    assert not names_match("Owen", "Owen's sock")
    assert not names_match("Harbor Analytics", "Cascade Health")


def test_literals_match_by_value_and_dates_by_prefix() -> None:
    assert literal_matches("1200", "1,200")
    assert literal_matches("549.00", "549")
    assert not literal_matches("459", "549")
    assert literal_matches("2025-03-15", "2025-03")
    assert not literal_matches("2025-03", "2025-03-15")  # the gold day is not said
    assert literal_matches("2010-01-01", "2010") and literal_matches("2010", "2010")
    assert not literal_matches("2025-06-20", "20")
    assert literal_matches("06:00:00", "6:00")
    assert literal_matches("@dana.pulls.shots", "@dana.pulls.shots")


# ---------------------------------------------------------------------------------------------------- the scorer

# Every value below is in the words said, so the pipeline's grounding check keeps them: what is wrong is wrong in
# meaning (whose job title), not in wording.
TURTLE = {
    # 01-work: Harbor Analytics typed with a subclass of the gold class; Greg's employer is not labelled; his job
    # title is the wrong one (the owner's new title). The owner's employer is superseded by d14-m03 and must still
    # count here.
    "d01-m01": """
m:greg-olsen a schema:Person ; rdfs:label "Greg Olsen" ; schema:worksFor m:harbor-analytics ;
    schema:jobTitle "Senior Data Analyst" .
m:harbor-analytics a cv:Company ; rdfs:label "Harbor Analytics" .
m:owner schema:worksFor m:harbor-analytics .
""",
    # the gold says "Dana rel:colleagueOf Priya": stored the other way round, a symmetric property
    "d01-m05": """
m:priya-raman a schema:Person ; rdfs:label "Priya Raman" ; rel:colleagueOf m:owner .
""",
    "d01-m09": NOTHING,
    # 03-purchase: the object and the types of the seller and the product are not labelled; the status is
    # scaffolding, checked only for recall
    "d03-m01": """
m:purchase a schema:BuyAction ; rdfs:label "espresso machine purchase" ;
    schema:agent m:owner ; schema:object m:barista-express ; schema:seller m:williams-sonoma ;
    schema:price 549 ; schema:startDate "2025-02-04"^^xsd:date ; schema:actionStatus schema:CompletedActionStatus .
m:barista-express a schema:Product ; rdfs:label "Barista Express" .
m:williams-sonoma a schema:Store ; rdfs:label "Williams Sonoma" .
""",
    # an assistant's question: nothing to remember, but a home is read into it
    "d14-m06": """
m:owner schema:homeLocation m:seattle .
m:seattle a schema:City ; rdfs:label "Seattle" .
""",
    "d14-m03": """
m:cascade-health a cv:Company ; rdfs:label "Cascade Health" .
m:owner schema:worksFor m:cascade-health .
""",
}

GOLD = {
    "source": "scorer-test",
    "format": "json",
    "owner": "Dana Whitfield",
    "utterances": [
        {"id": "01-work/dana-01-work/d01-m01", "role": "user", "fact_bearing": True, "facts": [
            {"entity": "Harbor Analytics", "class": "schema:Organization", "property": None, "value": None},
            {"entity": "Dana", "class": None, "property": "schema:worksFor", "value": "Harbor Analytics"},
            {"entity": "Greg Olsen", "class": "schema:Person", "property": None, "value": None},
            {"entity": "Greg Olsen", "class": None, "property": "schema:jobTitle", "value": "manager"},
        ]},
        {"id": "01-work/dana-01-work/d01-m05", "role": "user", "fact_bearing": True, "facts": [
            {"entity": "Dana", "class": None, "property": "rel:colleagueOf", "value": "Priya Raman"},
            {"entity": "Priya Raman", "class": "schema:Person", "property": None, "value": None},
        ]},
        {"id": "01-work/dana-01-work/d01-m09", "role": "user", "fact_bearing": False, "facts": []},
        {"id": "03-purchase/dana-03-purchase/d03-m01", "role": "user", "fact_bearing": True, "facts": [
            {"entity": "buying the espresso machine", "class": "schema:BuyAction", "property": None, "value": None},
            {"entity": "buying the espresso machine", "class": None, "property": "schema:agent", "value": "Dana"},
            {"entity": "buying the espresso machine", "class": None, "property": "schema:seller",
             "value": "Williams Sonoma"},
            {"entity": "buying the espresso machine", "class": None, "property": "schema:price", "value": "549"},
            {"entity": "buying the espresso machine", "class": None, "property": "schema:startDate",
             "value": "2025-02-04"},
            {"entity": "buying the espresso machine", "class": None, "property": "schema:actionStatus",
             "value": "schema:CompletedActionStatus"},
        ]},
        {"id": "14-update/dana-14-update/d14-m03", "role": "user", "fact_bearing": True, "facts": [
            {"entity": "Dana", "class": None, "property": "schema:worksFor", "value": "Cascade Health"},
            {"entity": "Cascade Health", "class": "schema:Organization", "property": None, "value": None},
        ]},
        {"id": "14-update/dana-14-update/d14-m06", "role": "assistant", "fact_bearing": False, "facts": []},
    ],
}


def responder(by_text: dict[str, str]) -> Callable[[str, list[Message], str], str]:
    """Answer an extraction prompt with the Turtle written for the utterance it quotes."""

    def respond(system: str, messages: list[Message], operation: str) -> str:
        match = re.search(r"<utterance>\s*(.*?)\s*</utterance>", messages[0].content, re.DOTALL)
        return by_text.get(" ".join(match.group(1).split()) if match else "", NOTHING)

    return respond


@pytest.fixture
def scored_memory(memory: Memory, tmp_path: Path) -> tuple[Memory, LabelSet]:
    """The scorer-test gold, and a memory holding its conversations with the hand-made extractions written."""
    path = tmp_path / "gold.json"
    path.write_text(json.dumps(GOLD), encoding="utf-8")
    labels = load_labels(path)
    conversations = label_conversations(labels)
    memory.ingest(conversations)  # no model configured: the posts wait, pending
    texts = {u.source_id: " ".join(u.content.split()) for c in conversations for u in c.utterances}
    client = ScriptedClient([responder({texts[k]: v for k, v in TURTLE.items()})] * 20)
    posts = [post_iri(memory.naming, u) for u in labels.utterances]
    report = extract_posts(memory.context, posts, client=client, concurrency=1)
    assert report.failed == 0, report.failures
    return memory, labels


def test_scorer_gives_the_hand_computed_precision_and_recall(scored_memory: tuple[Memory, LabelSet]) -> None:
    memory, labels = scored_memory
    result = score(memory, [labels])
    by_id = {u.labelled.id.rsplit("/", 1)[1]: u for u in result.utterances}
    # d01-m01: stored Greg a Person, Greg worksFor, Greg's job title, Harbor a Company, owner worksFor (labels do
    # not count); Greg's employer is unlabelled and his title is the wrong one, so the gold title is missing
    assert (by_id["d01-m01"].tally.stored, by_id["d01-m01"].tally.matched_stored) == (5, 3)
    assert by_id["d01-m01"].gold_matched == [True, True, True, False]
    assert by_id["d01-m05"].gold_matched == [True, True]
    # d03-m01: type, agent, object, seller, price, date, and the two object types (the status is not counted, but
    # matches the gold's)
    assert (by_id["d03-m01"].tally.stored, by_id["d03-m01"].tally.matched_stored) == (8, 5)
    assert by_id["d03-m01"].gold_matched == [True] * 6
    assert (by_id["d14-m06"].tally.stored, by_id["d14-m06"].tally.matched_stored) == (2, 0)
    overall = result.tally()
    assert (overall.matched_stored, overall.stored) == (12, 19)
    assert (overall.matched_gold, overall.gold) == (13, 14)
    assert overall.precision == pytest.approx(12 / 19) and overall.recall == pytest.approx(13 / 14)
    gate = result.gate("scorer-test")
    assert (gate.kept, gate.lost, gate.spurious, gate.quiet) == (4, 0, 1, 1)
    assert result.fact_bearing_ids() == labels.fact_bearing_ids()
    assert any(line.startswith("overall: 6 utterances; precision 63%") for line in result.lines())


def test_a_superseded_statement_still_counts_for_the_post_that_said_it(
    scored_memory: tuple[Memory, LabelSet],
) -> None:
    memory, labels = scored_memory
    first = post_iri(memory.naming, labels.utterances[0])
    graph = memory.naming.extraction_graph(first)
    asked = f"ASK {{ GRAPH <{graph}> {{ <{memory.naming.owner}> <https://schema.org/worksFor> ?x }} }}"
    assert memory.backend.query(asked) is False  # moved to the history graph by d14-m03
    only = score(memory, [labels], only={labels.utterances[0].id})
    assert only.utterances[0].gold_matched[1]


def test_a_subclass_matches_and_a_superclass_does_not(scored_memory: tuple[Memory, LabelSet], tmp_path: Path) -> None:
    memory, _ = scored_memory
    gold = {**GOLD, "utterances": [{**GOLD["utterances"][0], "facts": [  # type: ignore[index]
        {"entity": "Harbor Analytics", "class": "schema:Organization", "property": None, "value": None},
        {"entity": "Harbor Analytics", "class": "schema:Corporation", "property": None, "value": None},
        {"entity": "Greg Olsen", "class": "pcm:MemoryOwner", "property": None, "value": None},
    ]}]}
    path = tmp_path / "subclass.json"
    path.write_text(json.dumps(gold), encoding="utf-8")
    result = score(memory, [load_labels(path)])
    assert result.utterances[0].gold_matched == [True, False, False]


def test_scoring_an_utterance_the_memory_lacks_is_refused(memory: Memory, tmp_path: Path) -> None:
    path = tmp_path / "gold.json"
    path.write_text(json.dumps(GOLD), encoding="utf-8")
    memory.ingest(parse_file(sample_paths()[0]))
    with pytest.raises(UsageError, match="ingest their conversations"):
        score(memory, [load_labels(path)])

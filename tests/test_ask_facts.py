"""The stored-facts fallback of ask: the facts nearest a question as lines the model reads, each citing the
utterances it came from. One module-scoped memory (the samples, extracted, indexed)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from pcm.llm import ScriptedClient
from pcm.llm.base import Message
from pcm.memory import Memory
from pcm.retrieval.ask import CachingClient, ask
from pcm.retrieval.facts import fact_context
from pcm.retrieval.grounding import match_question_entities
from test_ask_support import build_sample_memory, cited_ids

AS_OF = datetime(2025, 10, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    memory = build_sample_memory(tmp_path_factory.mktemp("ask-facts") / "memory", index=True)
    CachingClient.forget(memory.context)
    yield memory
    CachingClient.forget(memory.context)
    memory.close()


def _lines(memory: Memory, question: str) -> list[tuple[str, list[str]]]:
    entities = match_question_entities(memory.context, question)
    return [(text, [p.source_id or p.post for p in posts]) for text, posts in fact_context(memory.context, question, entities)]


def test_the_purchase_behind_a_question_is_read_with_its_price_seller_and_date(indexed: Memory) -> None:
    """Grounding matches no node for "the espresso machine"; the owner's line about buying it is followed to the
    purchase itself, whose facts hold the answer, with dates as answers print them."""
    lines = _lines(indexed, "How much did Dana pay for the espresso machine?")
    purchase = [(text, posts) for text, posts in lines if "BuyAction" in text and "Breville" in text]
    assert purchase, lines
    text, posts = purchase[0]
    assert "price 549" in text and "Williams Sonoma" in text and "Tuesday 4 February 2025" in text
    assert "d03-m01" in posts


def test_a_named_node_is_read_with_its_attributes_first(indexed: Memory) -> None:
    lines = _lines(indexed, "What kind of dog is Biscuit?")
    biscuit = next(text for text, _ in lines if text.startswith("Biscuit ("))
    assert "beagle" in biscuit
    assert biscuit.index("beagle") < biscuit.index(" of ")  # what Biscuit is comes before what points at him


def test_a_predicate_with_several_values_on_a_busy_node_is_one_line(indexed: Memory) -> None:
    lines = _lines(indexed, "How many pets does Dana have?")
    pets = [text for text, _ in lines if "has pet" in text and text.startswith("Dana Whitfield")]
    assert pets and "Biscuit" in pets[0] and "Mochi" in pets[0] and "(2)" in pets[0]


def test_the_same_question_gives_the_same_lines(indexed: Memory) -> None:
    question = "Who was the vet for Dana's pets in Portland?"
    first = _lines(indexed, question)
    assert first == _lines(indexed, question)
    said = " ".join(text for text, _ in first)
    assert "Dr. Alvarez" in said and "Sellwood Animal Clinic" in said


def test_ask_answers_from_the_facts_when_no_query_fits_and_cites_their_utterance(indexed: Memory) -> None:
    seen: list[str] = []

    def model(system: str, messages: list[Message], operation: str) -> str:
        if operation == "nl2sparql":
            return "NO QUERY: the model could not write it"
        seen.append(messages[0].content)
        numbers = [n for n, line in re.findall(r"^\[(\d+)\] (.*)$", messages[0].content, re.MULTILINE) if "price 549" in line]
        return f"ANSWER: 549 USD, at Williams Sonoma. [cites: {numbers[0]}]" if numbers else "NOT IN MEMORY"

    client = ScriptedClient([model] * 4)
    result = ask(indexed.context, "How much did Dana pay for the espresso machine?", client=client, as_of=AS_OF, plan=False)
    assert result.path == "facts" and "stored facts" in result.note
    assert result.answer == "549 USD, at Williams Sonoma."
    assert cited_ids(result) == {"d03-m01"}
    assert len(seen) == 1  # the facts answered: neither traversal nor recall was needed


def test_when_the_facts_do_not_say_it_the_fallbacks_go_on(indexed: Memory) -> None:
    operations: list[str] = []

    def model(system: str, messages: list[Message], operation: str) -> str:
        operations.append(operation)
        return "NO QUERY: nothing fits" if operation == "nl2sparql" else "NOT IN MEMORY"

    result = ask(indexed.context, "What is Dana's favourite colour of umbrella?", client=ScriptedClient([model] * 6),
                 as_of=AS_OF, plan=False)
    assert result.path in ("episodic", "none")
    assert operations.count("answer") >= 2  # the facts, then what came after them

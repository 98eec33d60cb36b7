"""The fallbacks of ask, with the side index on: the stored facts the model reads when no query answered, episodic
recall when the graph has no answer, abstention, and the no-LLM mode. One module-scoped memory (the samples,
extracted); the embedding model loads once."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from pcm.errors import UsageError
from pcm.llm import ScriptedClient
from pcm.llm.base import Message
from pcm.memory import Memory
from pcm.retrieval.ask import NO_LLM_NOTE, CachingClient, ask
from pcm.retrieval.facts import fact_context
from pcm.retrieval.grounding import build_grounding, match_question_entities
from pcm.retrieval.traversal import TraversalEngine
from pcm.settings import Settings
from tests.retrieval.test_ask_support import (
    GOLD_MODEL_QUESTIONS,
    build_sample_memory,
    cited_ids,
    sparql_reply,
)

AS_OF = datetime(2025, 10, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    memory = build_sample_memory(tmp_path_factory.mktemp("ask-indexed") / "memory", index=True)
    CachingClient.forget(memory.context)
    yield memory
    CachingClient.forget(memory.context)
    memory.close()


def test_without_an_llm_it_answers_with_the_best_utterances_and_says_so(indexed: Memory) -> None:
    result = ask(indexed.context, "What kind of dog is Biscuit?", client=None, as_of=AS_OF)
    assert result.path == "episodic" and result.note == NO_LLM_NOTE
    assert "d05-m03" in cited_ids(result)  # "He's a four-year-old beagle."
    assert result.answer.count('"') == 2 and "said" in result.answer


def test_when_the_graph_has_no_answer_recalled_utterances_answer_it(indexed: Memory) -> None:
    def model(system: str, messages: list[Message], operation: str) -> str:
        if operation == "nl2sparql":
            return "NO QUERY: the vocabulary has no term for advice about socks"
        numbers = [int(n) for n, line in re.findall(r"^\[(\d+)\] (.*)$", messages[0].content, re.MULTILINE)
                   if "laundry" in line]
        if not numbers:  # the traversal facts come first: they do not say it
            return "NOT IN MEMORY"
        return f"ANSWER: Keep laundry behind closed doors, give him his own chew toys, trade him a treat. [cites: {numbers[0]}]"

    client = ScriptedClient([model] * 4)
    result = ask(indexed.context, "What did the assistant suggest to stop Biscuit stealing socks?", client=client, as_of=AS_OF)
    assert result.path == "episodic" and "recalled utterances" in result.note
    assert result.answer.startswith("Keep laundry behind closed doors")
    assert cited_ids(result) == {"d05-m10"}
    assert [op for _, _, op in client.requests][0] == "nl2sparql" and client.requests[-1][2] == "answer"


def test_when_the_model_finds_nothing_the_closest_utterances_are_still_shown(indexed: Memory) -> None:
    """Never worse than episodic mode: the graph has no answer, the model abstains, what was said is still cited."""
    client = ScriptedClient([lambda s, m, op: "NO QUERY: no price fact" if op == "nl2sparql" else "NOT IN MEMORY"] * 6)
    result = ask(indexed.context, "How much did I pay for the espresso machine?", client=client, as_of=AS_OF)
    assert result.path == "episodic" and "as in episodic mode" in result.note
    assert result.answer.startswith("Not in memory as a stored fact. The closest thing said:")
    assert "$549" in result.answer
    assert "d03-m01" in cited_ids(result)
    assert client.requests[-1][2] == "answer"  # the model did see the recalled utterances, and found nothing


def test_a_look_alike_is_not_taken_for_the_relative_asked(indexed: Memory) -> None:
    """LoCoMo-style adversarial question: the graph has no brother of Dana, recall finds a look-alike (the
    daughter's little brother, said in d02-m05); the kinship facts say no brother is stored, naming those that are."""
    gold = sparql_reply(GOLD_MODEL_QUESTIONS["What is the name of Dana's brother?"])
    client = ScriptedClient([lambda s, m, op: gold if op == "nl2sparql" else "ANSWER: Owen [cites: 1]"] * 6)
    result = ask(indexed.context, "What is the name of Dana's brother?", client=client, as_of=AS_OF)
    assert result.path == "facts" and result.answer.startswith("Not in memory: no brother of Dana Whitfield"), (
        result.render())
    assert "son Owen" in result.answer and not cited_ids(result)  # an abstention cites nothing
    operations = [op for _, _, op in client.requests]
    assert operations == ["nl2sparql"] * 2  # round 3 would repeat round 2; the model read no context


def test_a_question_about_something_never_said_shows_the_closest_thing_said(indexed: Memory) -> None:
    """Names no speaker, so there is nothing to attribute: the model's last resort shows what recall found, as
    episodic mode does, and says it is not a stored fact."""
    client = ScriptedClient([lambda s, m, op: "NO QUERY: nothing fits" if op == "nl2sparql" else "NOT IN MEMORY"] * 6)
    result = ask(indexed.context, "Which submarine did I command?", client=client, as_of=AS_OF)
    assert result.path == "episodic" and result.answer.startswith("Not in memory as a stored fact.")
    episodic = ask(indexed.context, "Which submarine did I command?", client=None, as_of=AS_OF)
    assert cited_ids(result) == cited_ids(episodic) and cited_ids(result)


def test_traversal_answers_from_facts_around_the_matched_entities(indexed: Memory) -> None:
    def model(system: str, messages: list[Message], operation: str) -> str:
        if operation == "nl2sparql":
            return "NO QUERY: the question asks for a description, not a value"
        lines = re.findall(r"^\[(\d+)\] (.*)$", messages[0].content, re.MULTILINE)
        # the stored facts come first, one line per node ("Joanna (Person): ..."); this model reads only the
        # traversal's one-fact sentences
        cite = next((n for n, line in lines if line.startswith("Joanna home location Denver")), None)
        return f"ANSWER: Dana's sister, who lives in Denver. [cites: {cite}]" if cite else "NOT IN MEMORY"

    client = ScriptedClient([model] * 3)
    result = ask(indexed.context, "Who is Joanna?", client=client, as_of=AS_OF)
    assert result.path == "traversal" and "facts around the matched entities" in result.note
    assert result.answer == "Dana's sister, who lives in Denver."
    assert cited_ids(result) == {"d02-m07"}


def test_grounding_matches_entities_through_the_index(indexed: Memory) -> None:
    grounding = build_grounding(indexed.context, "Which shop repaired Dana's car?", as_of=AS_OF)
    assert grounding.entities, "entity matching found nothing"
    assert all(e.score >= 0.3 for e in grounding.entities)
    exact = build_grounding(indexed.context, "Who is Priya Raman?", as_of=AS_OF)
    assert exact.entities[0].label == "Priya Raman" and exact.entities[0].how == "exact"


# ------------------------------------------------------------------------------------------------ stored facts


def _lines(memory: Memory, question: str) -> list[tuple[str, list[str]]]:
    entities = match_question_entities(memory.context, question)
    with TraversalEngine.for_memory(memory.context) as engine:
        found = fact_context(memory.context, question, entities, engine.vectors)
    return [(text, [p.source_id or p.post for p in posts]) for text, posts in found]


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


def test_a_fact_pointing_at_a_node_reads_as_a_statement_when_its_predicate_is_a_verb(indexed: Memory) -> None:
    """ "Seattle: contained in place of Ballard" reads as if Seattle lay in Ballard, "Dana's car: owns of Dana" as
    if the car owned her: such facts are written whole, the node named; a noun keeps "of" ("location of ...")."""
    lines = _lines(indexed, "Which city does Dana live in now?")
    seattle = next(text for text, _ in lines if text.startswith("Seattle ("))
    assert "Ballard contained in place Seattle" in seattle
    assert "location of Cascade Health" in seattle
    said = " ".join(text for text, _ in lines)
    assert "contained in place of" not in said and "\x00" not in said
    car = " ".join(text for text, _ in _lines(indexed, "What went wrong with Dana's car, and on which day?"))
    assert "Dana Whitfield owns Dana's car" in car and "owns of" not in car


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


def _no_query(answer: str, n: int) -> tuple[ScriptedClient, list[str]]:
    """A client whose model writes no query and answers ``answer`` from any context, and the operations it was
    asked for."""
    operations: list[str] = []

    def model(system: str, messages: list[Message], operation: str) -> str:
        operations.append(operation)
        return "NO QUERY: the model could not write it" if operation == "nl2sparql" else answer

    return ScriptedClient([model] * n), operations


def test_how_long_between_two_events_is_counted_from_their_dated_facts_without_the_model(indexed: Memory) -> None:
    client, operations = _no_query("NOT IN MEMORY", 4)
    question = "How many days after buying the espresso machine did Dana's car break down?"
    result = ask(indexed.context, question, client=client, as_of=AS_OF, plan=False)
    assert result.path == "facts" and "dated facts" in result.note, result.render()
    assert result.answer.startswith("26 days (")
    assert "Tuesday 4 February 2025" in result.answer and "Sunday 2 March 2025" in result.answer
    assert "answer" not in operations  # counted in code: the model was not asked to read the facts
    assert cited_ids(result)


def test_how_many_of_a_thing_a_person_has_is_read_from_their_gathered_line(indexed: Memory) -> None:
    client, operations = _no_query("ANSWER: 4 [cites: 1]", 4)
    result = ask(indexed.context, "How many pets does Dana have?", client=client, as_of=AS_OF, plan=False)
    assert result.path == "facts" and result.answer == "2 (Biscuit, Mochi)", result.render()
    assert "answer" not in operations
    assert cited_ids(result)


def test_an_interval_whose_event_nothing_stored_tells_is_left_to_the_model(indexed: Memory) -> None:
    client, operations = _no_query("NOT IN MEMORY", 6)
    question = "How many days after buying the espresso machine did Dana's boat sink?"
    result = ask(indexed.context, question, client=client, as_of=AS_OF, plan=False)
    assert "dated facts" not in result.note and not result.answer.startswith("26 days")
    assert "answer" in operations


def test_when_the_facts_do_not_say_it_the_fallbacks_go_on(indexed: Memory) -> None:
    operations: list[str] = []

    def model(system: str, messages: list[Message], operation: str) -> str:
        operations.append(operation)
        return "NO QUERY: nothing fits" if operation == "nl2sparql" else "NOT IN MEMORY"

    result = ask(indexed.context, "What is Dana's favourite colour of umbrella?", client=ScriptedClient([model] * 6),
                 as_of=AS_OF, plan=False)
    assert result.path in ("episodic", "none")
    assert operations.count("answer") >= 2  # the facts, then what came after them


def _local(model: object, n: int = 6) -> ScriptedClient:
    """A scripted client that declares itself a model on this machine (as llama.cpp in process or on loopback)."""
    client = ScriptedClient([model] * n)  # type: ignore[list-item]
    client.local = True  # type: ignore[attr-defined]
    return client


def _price_from_facts(system: str, messages: list[Message], operation: str) -> str:
    if operation == "nl2sparql":
        return '{"no_query": "not reached when the facts answer"}'
    numbers = [n for n, line in re.findall(r"^\[(\d+)\] (.*)$", messages[0].content, re.MULTILINE) if "price 549" in line]
    return f"ANSWER: 549 USD, at Williams Sonoma. [cites: {numbers[0]}]" if numbers else "NOT IN MEMORY"


def test_a_model_on_this_machine_answers_from_the_stored_facts_before_writing_a_query(indexed: Memory) -> None:
    CachingClient.forget(indexed.context)
    client = _local(_price_from_facts)
    result = ask(indexed.context, "How much did Dana pay for the espresso machine?", client=client, as_of=AS_OF)
    assert [op for _, _, op in client.requests] == ["answer"]  # one short call, no query-writing call
    assert result.path == "facts" and result.note.startswith("stored facts first")
    assert result.answer == "549 USD, at Williams Sonoma." and cited_ids(result) == {"d03-m01"}
    assert result.stats["queries_ms"] == 0.0 and result.stats["llm_calls"] == 1


def test_when_the_stored_facts_hold_no_answer_a_local_model_then_writes_the_query(
        indexed: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    CachingClient.forget(indexed.context)
    monkeypatch.setattr(indexed.context, "settings", indexed.context.settings.with_(llm_output="turtle"))  # SPARQL
    question = "Which shop repaired Dana's car, and what did the repair cost?"
    gold = sparql_reply(GOLD_MODEL_QUESTIONS[question])
    client = _local(lambda s, m, op: gold if op == "nl2sparql" else "NOT IN MEMORY")
    result = ask(indexed.context, question, client=client, as_of=AS_OF)
    assert [op for _, _, op in client.requests] == ["answer", "nl2sparql"]
    assert result.path == "sparql" and "Rosewood Auto Repair" in result.answer


def test_the_stored_facts_are_read_once_when_neither_they_nor_the_query_answer(indexed: Memory) -> None:
    CachingClient.forget(indexed.context)
    client = _local(lambda s, m, op: '{"no_query": "nothing fits"}' if op == "nl2sparql" else "NOT IN MEMORY", 10)
    result = ask(indexed.context, "How much did I pay for the espresso machine?", client=client, as_of=AS_OF)
    facts_prompts = [m[0].content for _, m, op in client.requests if op == "answer" and "price 549" in m[0].content]
    assert len(facts_prompts) == 1  # not shown again as a fallback after the query found nothing
    assert result.path == "episodic" and "stored facts held no answer" in result.note
    assert "d03-m01" in cited_ids(result)


@pytest.mark.parametrize(("order", "local", "first"), [("graph", True, "nl2sparql"), ("facts", False, "answer"),
                                                        ("auto", False, "nl2sparql")])
def test_the_ask_order_setting_chooses_what_comes_first(indexed: Memory, monkeypatch: pytest.MonkeyPatch,
                                                        order: str, local: bool, first: str) -> None:
    CachingClient.forget(indexed.context)
    monkeypatch.setattr(indexed.context, "settings", indexed.context.settings.with_(ask_order=order))
    client = _local(_price_from_facts) if local else ScriptedClient([_price_from_facts] * 6)
    ask(indexed.context, "How much did Dana pay for the espresso machine?", client=client, as_of=AS_OF, plan=False)
    assert client.requests[0][2] == first


def test_the_ask_order_setting_parses_and_rejects_a_bad_value_in_one_line() -> None:
    assert Settings.from_env({}).ask.order == "auto"
    assert Settings.from_env({"PCM_ASK_ORDER": " Facts "}).ask.order == "facts"
    with pytest.raises(UsageError) as error:
        Settings.from_env({"PCM_ASK_ORDER": "sparql"})
    assert str(error.value) == "PCM_ASK_ORDER='sparql': expected auto, graph or facts"


def test_the_latest_of_a_persons_purchases_is_chosen_over_all_of_them_without_the_model(indexed: Memory) -> None:
    client, operations = _no_query("ANSWER: the Breville Barista Express [cites: 1]", 4)
    result = ask(indexed.context, "What did Dana buy most recently?", client=client, as_of=AS_OF, plan=False)
    assert result.path == "facts" and "latest" in result.note, result.render()
    assert result.answer.startswith("Rumours") and "Friday 18 July 2025" in result.answer
    assert "answer" not in operations
    assert cited_ids(result) == {"d11-m01"}


def test_what_a_person_spent_on_what_they_bought_is_summed_over_every_purchase(indexed: Memory) -> None:
    client, operations = _no_query("ANSWER: $712 [cites: 1]", 4)
    question = "How much has Dana spent on the things she bought?"
    result = ask(indexed.context, question, client=client, as_of=AS_OF, plan=False)
    assert result.path == "facts" and "summed" in result.note, result.render()
    assert result.answer.startswith("$634 in total (") and "$549" in result.answer and "$85" in result.answer
    assert "712" not in result.answer  # the repair was paid for, not bought
    assert result.answer.endswith("Returned, so not counted: buying the rain jacket at REI.")
    assert {"d03-m01", "d11-m01"} <= cited_ids(result)


def test_the_date_of_a_purchase_named_by_what_was_bought_is_read_from_the_graph(indexed: Memory) -> None:
    client, operations = _no_query("NOT IN MEMORY", 4)
    question = "On what date did Dana buy the espresso machine?"
    result = ask(indexed.context, question, client=client, as_of=AS_OF, plan=False)
    assert result.path == "facts" and result.answer == "Tuesday 4 February 2025 (buying the Breville Barista Express).", (
        result.render())
    assert cited_ids(result) == {"d03-m01"}


def test_an_action_question_about_someone_unknown_is_left_to_the_model(indexed: Memory) -> None:
    client, operations = _no_query("NOT IN MEMORY", 6)
    result = ask(indexed.context, "What did Zebulon buy most recently?", client=client, as_of=AS_OF, plan=False)
    assert "stored actions of this kind" not in result.note and "answer" in operations, result.render()


def test_what_came_before_a_named_job_is_the_nearest_earlier_job_without_the_model(indexed: Memory) -> None:
    client, operations = _no_query("NOT IN MEMORY", 4)
    result = ask(indexed.context, "Where did Dana work before Cascade Health?", client=client, as_of=AS_OF, plan=False)
    assert result.path == "facts" and "same kind" in result.note, result.render()
    assert result.answer.startswith("job at Harbor Analytics") and "12 September 2025" in result.answer
    assert "answer" not in operations
    assert cited_ids(result)


def test_a_relative_of_a_kind_the_family_lacks_is_not_in_memory_and_one_it_has_is_named(indexed: Memory) -> None:
    client, operations = _no_query("ANSWER: Joanna [cites: 1]", 4)
    result = ask(indexed.context, "What is the name of Dana's brother?", client=client, as_of=AS_OF, plan=False)
    assert result.path == "facts" and result.answer.startswith("Not in memory: no brother of Dana Whitfield"), (
        result.render())
    assert "sister Joanna" in result.answer and "answer" not in operations and not result.posts
    children = ask(indexed.context, "What are the names of Dana's children?", client=client, as_of=AS_OF, plan=False)
    assert children.answer == "Lily and Owen" and cited_ids(children)


def test_an_answer_from_the_stored_facts_naming_what_they_do_not_write_is_not_used(indexed: Memory) -> None:
    CachingClient.forget(indexed.context)
    answers = iter(["ANSWER: Seattle Animal Clinic [cites: 1]"])

    def model(system: str, messages: list[Message], operation: str) -> str:
        if operation == "nl2sparql":
            return '{"no_query": "nothing fits"}'
        return next(answers, "NOT IN MEMORY")

    result = ask(indexed.context, "What is the name of the new vet Dana found in Seattle?", client=_local(model, 10),
                 as_of=AS_OF, plan=False)
    assert "Seattle Animal Clinic" not in result.answer, result.render()
    assert "named 'Seattle Animal Clinic', which the context does not write: not used" in result.note

"""Question decomposition and search plans (issue 10 part 2): reply parsing and bounds, when ask plans at all, and
planned answers end to end on the sample memory with a scripted model (steps, checks, one revision, combination,
evidence from every hop, the --explain trace, determinism, the CLI switches)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from pcm.llm import ScriptedClient
from pcm.llm.base import Message
from pcm.memory import Memory
from pcm.retrieval.ask import CachingClient, ask
from pcm.retrieval.plan import (
    Bounds,
    PlanReplyError,
    StepRecord,
    parse_check,
    parse_decomposition,
    step_question,
)
from pcm.retrieval.wording import may_decompose
from tests.retrieval.test_ask_support import (
    GOLD_MODEL_QUESTIONS,
    build_sample_memory,
    cited_ids,
    fresh_reply_cache,
    sparql_reply,
    without_traversal,
)

AS_OF = datetime(2025, 10, 1, 12, 0, tzinfo=UTC)
BREED = "What kind of dog is Biscuit?"
VET = "Who was the vet for Dana's pets in Portland?"
SHOP = "Which shop repaired Dana's car, and what did the repair cost?"
TWO_HOP = "What kind of dog is Biscuit, and who was his vet in Portland?"


# ------------------------------------------------------------------------------------------------ parsing


def test_decomposition_with_sub_question_objects_and_bounds() -> None:
    reply = json.dumps({"multi_hop": True, "kind": "factual", "sub_questions": [
        {"question": f"q{i}", "plan": [f"s{i}.{j}" for j in range(5)]} for i in range(5)]})
    parsed = parse_decomposition("Here is the plan:\n```json\n" + reply + "\n```", Bounds(2, 3, 1))
    assert parsed.multi_hop and parsed.kind == "factual"
    assert [s.question for s in parsed.sub_questions] == ["q0", "q1"]
    assert parsed.sub_questions[1].steps == ("s1.0", "s1.1", "s1.2")


def test_decomposition_with_plain_sub_questions_and_a_top_level_plan() -> None:
    aligned = parse_decomposition(json.dumps({"multi_hop": True, "sub_questions": ["a?", "b?"], "plan": [["a1"], []]}))
    assert [(s.question, s.steps) for s in aligned.sub_questions] == [("a?", ("a1",)), ("b?", ("b?",))]
    flat = parse_decomposition(json.dumps({"multi_hop": True, "sub_questions": ["a?"], "plan": ["x", "y"]}))
    assert flat.sub_questions[0].steps == ("x", "y") and flat.kind is None


@pytest.mark.parametrize("text", [
    "NO PLAN", "{not json}", "[1, 2]", '{"multi_hop": "yes"}', '{"multi_hop": true, "kind": "how"}',
    '{"multi_hop": true, "sub_questions": [3]}', '{"multi_hop": true, "sub_questions": [{"plan": ["x"]}]}',
    '{"multi_hop": true, "sub_questions": [{"question": "q", "plan": "x"}]}',
])
def test_malformed_decomposition_replies_raise_one_error_type(text: str) -> None:
    with pytest.raises(PlanReplyError):
        parse_decomposition(text)


def test_check_reply_is_clipped_to_the_step_budget() -> None:
    check = parse_check('{"enough": false, "revise": true, "steps": ["a", "b", "c"], "reason": "nothing found"}', 2)
    assert (check.enough, check.revise, check.steps, check.reason) == (False, True, ("a", "b"), "nothing found")
    with pytest.raises(PlanReplyError):
        parse_check('{"enough": 1}', 2)


def test_only_questions_that_may_have_several_parts_are_shown_for_decomposition() -> None:
    assert may_decompose(SHOP) and may_decompose(TWO_HOP)
    assert may_decompose("Where does the friend who gave me the book live?")
    assert may_decompose("Who is Joanna? Where does she live?")
    for simple in (BREED, VET, "What did I buy, where and for how much?", "Where did Dana travel in June 2025, and with whom?",
                   "How many days after the picnic did I buy the bike?"):
        assert not may_decompose(simple), simple


def test_a_step_carries_what_earlier_steps_found() -> None:
    found = StepRecord(1, 1, "s", "s", "sparql", "Beagle.", "", [])
    empty = StepRecord(1, 2, "t", "t", "none", "Not in memory.", "", [])
    assert step_question("Who was his vet?", []) == "Who was his vet?"
    assert step_question("Who was his vet?", [found, empty]) == "Who was his vet? (known: Beagle)"


# ------------------------------------------------------------------------------------------------ on the sample memory


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    memory = build_sample_memory(tmp_path_factory.mktemp("ask-plan") / "memory", index=False)
    yield memory
    CachingClient.forget(memory.context)
    memory.close()


@pytest.fixture(autouse=True)
def no_traversal(monkeypatch: pytest.MonkeyPatch) -> None:
    without_traversal(monkeypatch)


@pytest.fixture(autouse=True)
def no_cached_replies(sample: Memory) -> Iterator[None]:
    with fresh_reply_cache(sample):
        yield


def asked(messages: list[Message]) -> str:
    return next(line[len("QUESTION: "):] for line in messages[0].content.splitlines() if line.startswith("QUESTION: "))


def gold_or_nothing(messages: list[Message]) -> str:
    question = asked(messages)
    for known, query in GOLD_MODEL_QUESTIONS.items():
        if question == known or question.startswith(known + " (known:"):
            return sparql_reply(query)
    return "NO QUERY: nothing in the vocabulary fits"


def two_hop_model(system: str, messages: list[Message], operation: str) -> str:
    """Plans breed then vet; the first vet step finds nothing, the check revises it into the question that works."""
    text = messages[0].content
    if operation == "decompose":
        return json.dumps({"multi_hop": True, "kind": "factual", "sub_questions": [
            {"question": TWO_HOP, "plan": [BREED, "Who was Biscuit's vet?"]}]})
    if operation == "nl2sparql":
        return gold_or_nothing(messages)
    if operation == "plan_check":
        if "found nothing" in text:
            return json.dumps({"enough": False, "revise": True, "steps": [VET], "reason": "ask about Dana's pets"})
        return json.dumps({"enough": False, "revise": False, "steps": []})
    if operation == "combine":
        lines = dict((line, n) for n, line in re.findall(r"^\[(\d+)\] (.*)$", text, re.MULTILINE))
        cites = ", ".join(lines[line] for line in lines if "beagle" in line or "Alvarez" in line)
        return f"ANSWER: A beagle; his vet was Dr. Alvarez at Sellwood Animal Clinic. [cites: {cites}]"
    return "NOT IN MEMORY"  # the fallbacks' answer prompt


def test_a_two_hop_question_runs_both_steps_revises_once_and_cites_both_hops(sample: Memory) -> None:
    client = ScriptedClient([two_hop_model] * 40)
    result = ask(sample.context, TWO_HOP, client=client, as_of=AS_OF)
    assert result.path == "plan" and result.answer.startswith("A beagle; his vet was Dr. Alvarez")
    plan = result.plan
    assert plan is not None and plan.planned and plan.multi_hop and plan.mode == "model"
    assert [(r.step, r.path) for r in plan.steps] == [(BREED, "sparql"), ("Who was Biscuit's vet?", "none"), (VET, "sparql")]
    assert plan.steps[1].asked.startswith("Who was Biscuit's vet? (known: Dog (breed: beagle")
    assert len(plan.revisions) == 1 and plan.revisions[0].after_step == 2 and plan.revisions[0].steps == (VET,)
    assert {"d05-m03", "d05-m05"} <= cited_ids(result)  # the breed hop and the vet hop
    assert cited_ids(result) == {p.source_id for r in plan.steps for p in r.posts}
    operations = [op for _, _, op in client.requests]
    assert operations[0] == "decompose" and operations[-1] == "combine"
    assert operations.count("plan_check") == 2 and operations.count("combine") == 1


def test_two_independent_sub_questions_are_combined(sample: Memory) -> None:
    def model(system: str, messages: list[Message], operation: str) -> str:
        if operation == "decompose":
            return json.dumps({"multi_hop": True, "kind": "factual", "sub_questions": [BREED, VET]})
        if operation == "nl2sparql":
            return gold_or_nothing(messages)
        if operation == "combine":
            return "ANSWER: Biscuit is a beagle; the vet was Dr. Alvarez. [cites: 2]"
        raise AssertionError(f"unexpected {operation}")  # a one-step plan that found something needs no check

    client = ScriptedClient([model] * 10)
    result = ask(sample.context, "What kind of dog is Biscuit, and who was the vet for Dana's pets?", client=client, as_of=AS_OF)
    assert result.path == "plan" and [r.sub for r in result.plan.steps] == [1, 2]  # type: ignore[union-attr]
    assert cited_ids(result) == {"d05-m01", "d05-m05"}  # only the cited finding's posts
    assert result.facts and all(set(f.posts) & {p.post for p in result.posts} for f in result.facts)


def test_explain_shows_the_plan_revisions_and_each_steps_evidence(sample: Memory) -> None:
    result = ask(sample.context, TWO_HOP, client=ScriptedClient([two_hop_model] * 40), as_of=AS_OF, explain=True)
    text = result.render()
    assert "plan: model, kind factual, multi-hop" in text
    assert f"planned step 1: {BREED}" in text and "revised after step 2 (ask about Dana's pets): " + VET in text
    assert "ran step 3: " + VET + " (known: Dog (breed: beagle" in text and "evidence: d05-m05" in text
    data = result.as_json()
    assert data["plan"]["planned"] and len(data["plan"]["steps"]) == 3  # type: ignore[index]
    assert data["plan"]["revisions"][0]["steps"] == [VET]  # type: ignore[index]


def test_the_same_question_gives_the_same_plan_and_answer_from_the_cache(sample: Memory) -> None:
    first = ask(sample.context, TWO_HOP, client=ScriptedClient([two_hop_model] * 40), as_of=AS_OF)
    again = ScriptedClient([])
    second = ask(sample.context, TWO_HOP, client=again, as_of=AS_OF)
    assert not again.requests and second.stats["cache_hits"] > 0
    assert json.dumps(first.as_json(), sort_keys=True) == json.dumps(second.as_json(), sort_keys=True)


def test_a_malformed_decomposition_falls_back_to_the_single_question(sample: Memory) -> None:
    replies = ["Sure! First find the shop, then the cost.", sparql_reply(GOLD_MODEL_QUESTIONS[SHOP])]
    result = ask(sample.context, SHOP, client=ScriptedClient(replies), as_of=AS_OF, explain=True)
    assert result.path == "sparql" and "Rosewood Auto Repair" in result.answer
    assert result.plan is not None and not result.plan.planned
    assert "malformed decomposition reply" in result.plan.notes[0] and "malformed decomposition" in result.render()
    assert result.stats["llm_calls"] == 2


def test_a_question_the_model_does_not_mark_multi_hop_runs_once(sample: Memory) -> None:
    client = ScriptedClient(['{"multi_hop": false, "kind": "factual", "sub_questions": []}',
                             sparql_reply(GOLD_MODEL_QUESTIONS[SHOP])])
    result = ask(sample.context, SHOP, client=client, as_of=AS_OF)
    assert result.path == "sparql" and result.plan is not None and result.plan.mode == "model"
    assert not result.plan.multi_hop and [op for _, _, op in client.requests] == ["decompose", "nl2sparql"]


def test_no_plan_and_single_clause_questions_cost_no_extra_call(sample: Memory) -> None:
    gold = sparql_reply(GOLD_MODEL_QUESTIONS[SHOP])
    client = ScriptedClient([gold])
    assert ask(sample.context, SHOP, client=client, as_of=AS_OF, plan=False).path == "sparql"
    assert [op for _, _, op in client.requests] == ["nl2sparql"]
    simple = ScriptedClient([sparql_reply(GOLD_MODEL_QUESTIONS[BREED])])
    result = ask(sample.context, BREED, client=simple, as_of=AS_OF)
    assert [op for _, _, op in simple.requests] == ["nl2sparql"] and result.plan.mode == "keywords"  # type: ignore[union-attr]


def test_a_model_on_this_machine_plans_only_when_asked(sample: Memory) -> None:
    """A two-part question is not shown to a local model for decomposition (each plan step costs it minutes)."""
    def model(system: str, messages: list[Message], operation: str) -> str:
        return '{"no_query": "nothing fits"}' if operation == "nl2sparql" else "NOT IN MEMORY"

    client = ScriptedClient([model] * 8)
    client.local = True  # type: ignore[attr-defined]
    result = ask(sample.context, SHOP, client=client, as_of=AS_OF)
    operations = [op for _, _, op in client.requests]
    assert operations[:2] == ["answer", "nl2sparql"] and "decompose" not in operations  # stored facts, then a query
    assert result.plan is not None and "--plan" in result.plan.notes[-1]
    forced = ScriptedClient([two_hop_model] * 12)
    forced.local = True  # type: ignore[attr-defined]
    ask(sample.context, TWO_HOP, client=forced, as_of=AS_OF, plan=True)
    assert forced.requests[0][2] == "decompose"


def test_plan_forces_a_plan_even_when_the_model_says_single(sample: Memory) -> None:
    def model(system: str, messages: list[Message], operation: str) -> str:
        if operation == "decompose":
            return '{"multi_hop": false, "kind": "factual", "sub_questions": []}'
        if operation == "nl2sparql":
            return gold_or_nothing(messages)
        return "ANSWER: A beagle. [cites: 1]"

    client = ScriptedClient([model] * 5)
    result = ask(sample.context, BREED, client=client, as_of=AS_OF, plan=True)
    assert result.path == "plan" and result.plan.mode == "forced"  # type: ignore[union-attr]
    assert [r.step for r in result.plan.steps] == [BREED]  # type: ignore[union-attr]
    assert [op for _, _, op in client.requests] == ["decompose", "nl2sparql", "combine"]


def test_a_plan_whose_steps_find_nothing_is_not_in_memory(sample: Memory) -> None:
    def model(system: str, messages: list[Message], operation: str) -> str:
        if operation == "decompose":
            return json.dumps({"multi_hop": True, "sub_questions": [{"question": "q", "plan": ["Dana's brother?"]}]})
        if operation == "nl2sparql":
            return "NO QUERY: no such term"
        if operation == "plan_check":
            return "I think we should keep going"  # malformed: the remaining steps stay as they are
        return "NOT IN MEMORY"

    client = ScriptedClient([model] * 20)
    result = ask(sample.context, "Who is Dana's brother and where does he live?", client=client, as_of=AS_OF)
    assert result.path == "none" and result.answer.startswith("Not in memory") and not result.posts
    assert "combine" not in [op for _, _, op in client.requests]
    assert any("check reply ignored" in n for n in result.plan.notes)  # type: ignore[union-attr]
    assert len(result.plan.steps) == 1  # type: ignore[union-attr]


# ------------------------------------------------------------------------------------------------ command line


def test_cli_plan_switches(sample: Memory, tmp_path: Path) -> None:
    from pcm.cli_ask import ask as ask_command

    gold = sparql_reply(GOLD_MODEL_QUESTIONS[SHOP])
    script = tmp_path / "replies.json"
    env = {"PCM_LLM": f"scripted:{script}", "PCM_INDEX": "off"}
    base = ["--memory", str(sample.settings.memory), SHOP, "--json", "--as-of", "2025-10-01"]
    script.write_text(json.dumps([gold]), encoding="utf-8")
    out = CliRunner().invoke(ask_command, [*base, "--no-plan"], env=env)
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["path"] == "sparql" and data["plan"]["mode"] == "keywords"
    CachingClient.forget(sample.context)
    script.write_text(json.dumps(['{"multi_hop": false, "sub_questions": []}', gold, "ANSWER: Rosewood. [cites: 1]"]),
                      encoding="utf-8")
    forced = CliRunner().invoke(ask_command, [*base, "--plan"], env=env)
    assert forced.exit_code == 0, forced.output
    data = json.loads(forced.output)
    assert data["path"] == "plan" and data["plan"]["mode"] == "forced" and data["answer"] == "Rosewood."

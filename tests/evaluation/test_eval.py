"""pcm.evaluation without a memory: datasets, LoCoMo token F1, evidence recall@k, judges, record/replay clients."""

from __future__ import annotations

from pathlib import Path

import pytest

from pcm.errors import LLMError, UsageError
from pcm.evaluation.datasets import category_of, load_items, locomo_evidence_ids, parse_types, select
from pcm.evaluation.judge import judge, parse_locomo_label, prompt_name
from pcm.evaluation.metrics import (
    hits_at,
    locomo_f1,
    mean_by,
    multi_answer_f1,
    normalize_answer,
    percentile,
    recall_table,
    says_not_in_memory,
    token_f1,
)
from pcm.llm import ScriptedClient
from pcm.llm.base import Message, Request, catalogue_layout, output_format
from pcm.llm.factory import make_client
from pcm.llm.record import METADATA, RecordingClient, ReplayClient, exchange_key
from pcm.settings import LLMSpec, Settings
from tests.conftest import shared_path

LOCOMO = ("data", "locomo", "locomo-conv-26.json")
LONGMEMEVAL = ("data", "longmemeval", "longmemeval-oracle-dev48.json")


# -- metrics ---------------------------------------------------------------------------------------------------------


def test_normalisation_follows_locomo() -> None:
    assert normalize_answer("The Cat, and a DOG!") == "cat dog"
    assert normalize_answer("  7 May, 2023. ") == "7 may 2023"


def test_token_f1_by_hand() -> None:
    # prediction tokens: melanie painted sunrise (3); gold: sunrise lake (2); common: sunrise -> P 1/3, R 1/2
    assert token_f1("Melanie painted a sunrise", "the sunrise, lake") == pytest.approx(2 * (1 / 3) * (1 / 2) / (1 / 3 + 1 / 2))
    assert token_f1("Paris", "paris") == 1.0
    assert token_f1("nothing shared", "other words") == 0.0
    assert token_f1("", "gold") == 0.0


def test_multi_hop_f1_takes_the_best_prediction_for_each_gold_item() -> None:
    # gold items: "pottery" (best 1.0 from "pottery"), "camping trips" (best: "camping" -> P 1, R 1/2 -> 2/3)
    assert multi_answer_f1("pottery, camping", "pottery, camping trips") == pytest.approx((1.0 + 2 / 3) / 2)


def test_locomo_f1_by_category() -> None:
    assert locomo_f1("Psychology", "Psychology; counseling", "open-domain") == 1.0
    assert locomo_f1("Not in memory: nothing stored answers this question.", "x", "adversarial") == 1.0
    assert locomo_f1("Adoption agencies", "x", "adversarial") == 0.0
    assert says_not_in_memory("That is not mentioned anywhere")


def test_evidence_recall_needs_all_evidence_in_the_top_k() -> None:
    ranked = ["D1:1", "D1:2", "D2:5", "D3:1", "D2:7"]
    assert hits_at(ranked, {"D1:2", "D2:7"}, ks=(2, 4, 5)) == {2: False, 4: False, 5: True}
    assert hits_at(ranked, {"D1:1"}, ks=(1, 5)) == {1: True, 5: True}
    assert hits_at(ranked, set(), ks=(5,)) == {5: False}


def test_recall_table_by_hand() -> None:
    rows = [
        ("temporal", {5: True, 10: True}),
        ("temporal", {5: False, 10: True}),
        ("single-hop", {5: False, 10: False}),
        ("temporal", {5: False, 10: False}),
    ]
    table = recall_table(rows, ks=(5, 10))
    assert table["temporal"] == {"n": 3, "R@5": round(1 / 3, 4), "R@10": round(2 / 3, 4)}
    assert table["single-hop"] == {"n": 1, "R@5": 0.0, "R@10": 0.0}
    assert table["all"] == {"n": 4, "R@5": 0.25, "R@10": 0.5}
    assert list(table)[-1] == "all"


def test_means_skip_unscored_and_percentiles_are_nearest_rank() -> None:
    means = mean_by([("a", 1.0), ("a", None), ("b", 0.0)])
    assert means == {"a": {"n": 1, "mean": 1.0}, "b": {"n": 1, "mean": 0.0}, "all": {"n": 2, "mean": 0.5}}
    assert mean_by([("a", None)])["a"]["mean"] is None
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 51.0 and percentile(values, 95) == 95.0 and percentile([], 50) == 0.0


# -- datasets ----------------------------------------------------------------------------------------------------------


def test_locomo_items_carry_evidence_turn_ids() -> None:
    [item] = load_items("locomo", shared_path(*LOCOMO))
    first = item.questions[0]
    assert item.id == "conv-26" and item.utterances > 300
    assert (first.category, first.gold, first.evidence) == ("temporal", "7 May 2023", frozenset({"D1:3"}))
    assert first.sessions == frozenset({"conv-26:session_1"}) and first.as_of is not None
    assert sum(q.abstention for q in item.questions) == sum(q.category == "adversarial" for q in item.questions) > 0
    assert locomo_evidence_ids(["D8:6; D9:17", "D1:2"]) == {"D8:6", "D9:17", "D1:2"}


def test_longmemeval_items_are_one_haystack_per_question() -> None:
    items = load_items("longmemeval", shared_path(*LONGMEMEVAL))
    assert len(items) == 48 and all(len(i.questions) == 1 for i in items)
    q = items[0].questions[0]
    assert q.id == "e66b632c" and q.category == "knowledge-update"
    assert q.evidence and all(e.split(":")[0] in q.sessions for e in q.evidence)
    assert q.as_of is not None and q.as_of.year == 2023
    abstaining = [i.questions[0] for i in items if i.questions[0].abstention]
    assert abstaining and all(category_of(a) == "abstention" for a in abstaining)


def test_types_and_limit_select_questions() -> None:
    [item] = load_items("locomo", shared_path(*LOCOMO))
    assert parse_types("locomo", ["2,adversarial"]) == {"temporal", "adversarial"}
    chosen = select([item], parse_types("locomo", ["5"]), limit=3)
    assert [q.category for q in chosen[0].questions] == ["adversarial"] * 3
    assert select([item], None, None)[0].questions == item.questions
    with pytest.raises(UsageError, match="unknown LoCoMo category"):
        parse_types("locomo", ["7"])
    with pytest.raises(UsageError, match="unknown LongMemEval type"):
        parse_types("longmemeval", ["multi-hop"])


# -- judges ------------------------------------------------------------------------------------------------------------


def test_judge_prompt_per_longmemeval_type_and_abstention() -> None:
    items = {i.questions[0].category: i.questions[0] for i in load_items("longmemeval", shared_path(*LONGMEMEVAL))}
    temporal = items["temporal-reasoning"]
    client = ScriptedClient(["Yes."])
    verdict = judge(client, "longmemeval", temporal, "about 18 days")
    assert verdict.correct is True and verdict.method.startswith("llm:judge_longmemeval_temporal_reasoning.v1@")
    system, messages, operation = client.requests[0]
    assert operation == "judge" and "off-by-one" in messages[0].content and temporal.gold in messages[0].content
    assert judge(ScriptedClient(["no"]), "longmemeval", items["knowledge-update"], "x").correct is False
    abstaining = next(i.questions[0] for i in load_items("longmemeval", shared_path(*LONGMEMEVAL)) if i.questions[0].abstention)
    assert prompt_name("longmemeval", abstaining) == "judge_longmemeval_abstention"
    assert prompt_name("longmemeval", items["single-session-preference"]) == "judge_longmemeval_single_session_preference"


def test_locomo_judge_labels_and_adversarial_rule() -> None:
    assert parse_locomo_label('The dates match.\n```json\n{"label": "CORRECT"}\n```') is True
    assert parse_locomo_label('{"label": "WRONG"}') is False
    assert parse_locomo_label("It names another city. WRONG") is False
    [item] = load_items("locomo", shared_path(*LOCOMO))
    adversarial = next(q for q in item.questions if q.abstention)
    client = ScriptedClient([])
    assert judge(client, "locomo", adversarial, "Not in memory: nothing stored answers this question.").correct is True
    assert judge(client, "locomo", adversarial, "Adoption agencies").method == "rule:declines"
    assert client.requests == []  # adversarial questions never reach the judge model
    assert judge(None, "locomo", item.questions[0], "7 May").method == "skipped"


# -- record / replay ---------------------------------------------------------------------------------------------------


def test_replay_answers_what_was_recorded_with_its_token_counts(tmp_path: Path) -> None:
    inner = ScriptedClient(["first", "second"])
    recorder = RecordingClient(inner, tmp_path / "rec")
    messages = [Message.user("hello")]
    assert recorder.complete(Request(system="s", messages=messages, operation="answer")).text == "first"
    recorder.complete(Request(system="s", messages=[Message.user("other")], operation="judge"))
    assert len([p for p in (tmp_path / "rec").glob("*.json") if p.name != METADATA]) == 2
    replay = ReplayClient(tmp_path / "rec")
    again = replay.complete(Request(system="s", messages=messages, operation="answer"))
    assert again.text == "first" and replay.usage.as_dict() == {"answer": {"calls": 1, "input_tokens": 0, "output_tokens": 0}}
    missing = exchange_key(Request(system="s", messages=[Message.user("never asked")], operation="answer"))
    with pytest.raises(LLMError, match=missing):
        replay.complete(Request(system="s", messages=[Message.user("never asked")], operation="answer"))
    assert replay.misses == [missing]
    assert exchange_key(Request("s", messages, "answer")) != exchange_key(Request("s", messages, "judge"))


def test_a_call_held_to_a_grammar_replays_only_under_the_same_grammar(tmp_path: Path) -> None:
    """The compact form's schema is empty: the grammar alone says which lines the model could write, so a run
    under a changed grammar (other catalogue areas, another budget) must not get the old run's answers."""
    from pcm.llm.base import JsonSchema

    def held(alternatives: str) -> JsonSchema:
        return JsonSchema("lines", {}, grammar=lambda budget: f"root ::= ({alternatives}) # {budget}")

    def asked(schema: JsonSchema, budget: int = 200) -> Request:
        return Request(system="s", messages=[Message.user("I adopted a cat.")], operation="extract",
                       max_tokens=budget, schema=schema)

    RecordingClient(ScriptedClient(["pet cat"]), tmp_path / "rec").complete(asked(held('"pet"')))
    replay = ReplayClient(tmp_path / "rec")
    assert replay.complete(asked(held('"pet"'))).text == "pet cat"
    for request in (asked(held('"pet" | "trip"')), asked(held('"pet"'), 300)):
        with pytest.raises(LLMError, match="no recorded 'extract' exchange"):
            replay.complete(request)
    plain = JsonSchema("frame", {"type": "object"})
    messages = [Message.user("q")]
    assert exchange_key(Request("s", messages, "ask", 100, plain)) == exchange_key(Request("s", messages, "ask", 900, plain))


def test_a_replay_declares_what_the_recorded_client_declared(tmp_path: Path) -> None:
    """A run recorded from an in-process model (local, prefix cache, a context window) replays with its prompts."""
    inner = ScriptedClient(["answer"])
    inner.local, inner.prefix_cache, inner.context = True, True, 4096  # type: ignore[attr-defined]
    inner.constrained = True  # type: ignore[attr-defined]
    RecordingClient(inner, tmp_path / "rec").complete(Request(system="s", messages=[Message.user("q")], operation="answer"))
    RecordingClient(ScriptedClient([]), tmp_path / "rec", describe=False)  # a judge does not overwrite them
    replay = ReplayClient(tmp_path / "rec")
    assert (replay.local, replay.prefix_cache, replay.context) == (True, True, 4096)
    from pcm.llm.base import constrains

    assert constrains(replay)  # ask reads the questions into frames on replay as it did live
    assert output_format("auto", replay) == "json"
    assert catalogue_layout("auto", replay, whole_tokens=lambda: 1000) == "whole"
    assert catalogue_layout("auto", replay, whole_tokens=lambda: 5000) == "areas"  # past the recorded window
    assert replay.complete(Request(system="s", messages=[Message.user("q")], operation="answer")).text == "answer"


def test_a_recorder_inside_another_wrapper_still_declares_the_model_it_records(tmp_path: Path) -> None:
    """A reply cache around a recorder around an in-process model: every decision that depends on the model being
    local (facts first, no plan, json output, the whole catalogue) sees through both wrappers."""
    from pcm.llm.base import constrains, runs_here

    inner = ScriptedClient(["answer"])
    inner.local, inner.prefix_cache, inner.context = True, True, 4096  # type: ignore[attr-defined]
    inner.constrained = True  # type: ignore[attr-defined]

    class Outer:
        def __init__(self, client: object) -> None:
            self.client = client

    wrapped = Outer(RecordingClient(inner, tmp_path / "rec"))
    assert runs_here(wrapped) and constrains(wrapped) and output_format("auto", wrapped) == "json"
    assert catalogue_layout("auto", wrapped, whole_tokens=lambda: 5000) == "areas"  # the recorded model's window


def test_a_recording_without_flags_replays_as_a_hosted_client(tmp_path: Path) -> None:
    RecordingClient(ScriptedClient(["a"]), tmp_path / "rec").complete(Request(system="s", messages=[], operation="answer"))
    (tmp_path / "rec" / METADATA).unlink()  # as an older recording has it
    replay = ReplayClient(tmp_path / "rec")
    assert (replay.local, replay.prefix_cache, replay.context) == (False, False, None)
    assert not hasattr(replay, "constrained")
    assert output_format("auto", replay) == "turtle" and catalogue_layout("auto", replay) == "areas"
    (tmp_path / "rec" / METADATA).write_text("[1]", encoding="utf-8")
    with pytest.raises(LLMError, match="flags"):
        ReplayClient(tmp_path / "rec")


def test_pcm_llm_replay_spec(tmp_path: Path) -> None:
    assert LLMSpec.parse(f"replay:{tmp_path}") == LLMSpec("replay", str(tmp_path))
    assert isinstance(make_client(Settings(llm=LLMSpec.parse(f"replay:{tmp_path}"))), ReplayClient)
    with pytest.raises(UsageError, match="replay:DIR"):
        LLMSpec.parse("replay:")
    with pytest.raises(LLMError, match="not a directory"):
        make_client(Settings(llm=LLMSpec("replay", str(tmp_path / "missing"))))


def test_every_judge_prompt_renders_question_gold_and_answer() -> None:
    from pcm.evaluation.judge import PROMPTS_DIR, judge_prompt

    names = sorted(p.name.removesuffix(".v1.md") for p in PROMPTS_DIR.glob("judge_*.v1.md"))
    assert len(names) == 8 and "judge_longmemeval_abstention" in names
    for name in names:
        text = judge_prompt(name).render("user", question="Q?", gold="G.", answer="A.")
        assert all(part in text for part in ("Q?", "G.", "A.")), name

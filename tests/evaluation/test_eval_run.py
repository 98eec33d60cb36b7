"""``pcm eval`` end to end on the shared slices: scripted LLM (extraction, ask, judge), record, replay, resume.

The scripted model answers each question with its gold answer, except questions naming a "support group" (a wrong answer)
and LoCoMo's adversarial ones (it declines), and it judges by looking for the gold in the response; so the expected
verdicts are known question by question. LoCoMo runs on a two-session cut of conv-26 written to tmp_path (the whole
conversation takes minutes to ingest); LongMemEval on the dev slice with ``--limit``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pcm.cli import main
from pcm.errors import UsageError
from pcm.evaluation.datasets import load_items
from pcm.evaluation.runner import EvalConfig, Reporter, read_results, run_eval
from pcm.llm import ScriptedClient
from pcm.llm.base import Message
from pcm.llm.record import RecordingClient
from tests.conftest import shared_path

LOCOMO = ("data", "locomo", "locomo-conv-26.json")
LONGMEMEVAL = ("data", "longmemeval", "longmemeval-oracle-dev48.json")
pytestmark = pytest.mark.slow  # a few fresh memories with a side index each: ~20 s on an idle machine
WRONG = "a lake at dawn"


def two_session_locomo(tmp: Path) -> Path:
    """Sessions 1-2 of conv-26 and, per category, the first question whose evidence lies in them."""
    sample = json.loads(shared_path(*LOCOMO).read_text(encoding="utf-8"))[0]
    keep = re.compile(r"session_[12](_date_time)?|speaker_[ab]")
    conversation = {k: v for k, v in sample["conversation"].items() if keep.fullmatch(k)}
    questions = []
    for category in range(1, 6):
        questions.append(next(q for q in sample["qa"] if q["category"] == category and q["evidence"]
                              and all(re.match(r"D[12]:", e) for e in q["evidence"])))
    path = tmp / "locomo-two-sessions.json"
    path.write_text(json.dumps([{"sample_id": "conv-26", "conversation": conversation, "qa": questions}]), encoding="utf-8")
    return path


def scripted_model(golds: dict[str, str]):  # type: ignore[no-untyped-def]
    def reply(system: str, messages: list[Message], operation: str) -> str:
        text = messages[-1].content
        if operation in ("extract", "repair"):
            return "```turtle\n```"
        if operation == "nl2sparql":
            return "NO QUERY: the vocabulary cannot express it"
        if operation == "answer":
            question = re.search(r"QUESTION: (.*)", text).group(1)  # type: ignore[union-attr]
            gold = golds.get(question)
            if gold is None:
                return "NOT IN MEMORY"
            return f"ANSWER: {WRONG if 'support group' in question else gold} [cites: 1]"
        if operation == "judge":
            # the last ones: LoCoMo's prompt shows an example gold answer first
            gold = re.findall(r"(?:Correct Answer|Gold answer|Rubric|Explanation): (.*)", text)[-1]
            response = re.findall(r"(?:Model Response|Generated answer): (.*)", text)[-1]
            ok = gold.strip().lower() in response.lower()
            if "Gold answer" in text:
                return 'Reasoning.\n{"label": "%s"}' % ("CORRECT" if ok else "WRONG")
            return "yes" if ok else "no"
        raise AssertionError(f"unexpected operation {operation}")

    return reply


def golds_of(dataset: str, path: Path) -> dict[str, str]:
    return {q.text: q.gold for i in load_items(dataset, path) for q in i.questions if not (dataset == "locomo" and q.abstention)}


def deterministic(summary: dict[str, Any]) -> dict[str, Any]:
    """What a replay must reproduce: everything but wall time and latencies."""
    return {k: v for k, v in summary.items() if k not in {"latency", "wall_seconds", "llm", "judge_llm"}}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Record a scripted run of both datasets, then replay each through the CLI into a fresh directory."""
    tmp = tmp_path_factory.mktemp("eval")
    locomo = two_session_locomo(tmp)
    lme = shared_path(*LONGMEMEVAL)
    out: dict[str, Any] = {"tmp": tmp}
    for dataset, path, limit in (("locomo", locomo, None), ("longmemeval", lme, 1)):
        model = scripted_model(golds_of(dataset, path))
        record = tmp / f"{dataset}-rec"
        client = RecordingClient(ScriptedClient([model] * 500), record)
        judge = RecordingClient(ScriptedClient([model] * 500), record)
        config = EvalConfig(dataset, path, tmp / f"{dataset}-run", llm=client, judge_llm=judge, llm_label="scripted",
                            judge_label="scripted", limit=limit, deterministic=True)
        summary = run_eval(config)
        args = ["eval", dataset, str(path), "--replay", str(record), "--out", str(tmp / f"{dataset}-replay"), "--json"]
        if limit:
            args += ["--limit", str(limit)]
        replayed = CliRunner().invoke(main, args)
        out[dataset] = {"summary": summary, "config": config, "replay": replayed}
    return out


def test_locomo_writes_results_and_summaries(runs: dict[str, Any]) -> None:
    config: EvalConfig = runs["locomo"]["config"]
    rows = {r["category"]: r for r in read_results(config.out / "results.jsonl")}
    assert set(rows) == {"multi-hop", "temporal", "open-domain", "single-hop", "adversarial"}
    for row in rows.values():
        assert {"question", "gold", "answer", "verdict", "sparql", "trace", "evidence_posts", "path", "llm",
                "latency_ms"} <= row.keys()
    assert rows["temporal"]["answer"] == WRONG and rows["temporal"]["correct"] is False  # "When did Caroline go to the LGBTQ support group?"
    assert rows["single-hop"]["correct"] is True and rows["single-hop"]["f1"] == 1.0
    assert rows["adversarial"]["verdict"]["method"] == "rule:declines" and rows["adversarial"]["correct"] is True
    assert rows["temporal"]["path"] == "episodic" and rows["temporal"]["trace"][0]["outcome"] == "no_query"
    assert rows["single-hop"]["llm"]["calls"] == 2 and rows["single-hop"]["judge_llm"]["calls"] == 1
    summary = runs["locomo"]["summary"]
    assert summary["accuracy"]["J"]["all"] == {"n": 5, "mean": 0.8}
    assert summary["accuracy"]["J"]["temporal"]["mean"] == 0.0
    # one extraction call per utterance but the 6 small-talk turns the gate holds back (pcm.extraction.gate)
    assert summary["cost"]["ingest"]["utterances"] == 35 and summary["cost"]["ingest"]["calls"] == 29
    assert summary["cost"]["judge"]["calls"] == 4  # the adversarial question is scored by rule
    assert set(summary["retrieval"]["recall"]) == {"multi-hop", "temporal", "open-domain", "single-hop", "all"}
    assert summary["retrieval"]["recall"]["all"]["n"] == 4
    md = (config.out / "summary.md").read_text(encoding="utf-8")
    assert "| temporal | 1 | 0.000 |" in md and "R@10" in md
    assert json.loads((config.out / "summary.json").read_text(encoding="utf-8")) == summary


def test_longmemeval_writes_results_and_summaries(runs: dict[str, Any]) -> None:
    [row] = read_results(runs["longmemeval"]["config"].out / "results.jsonl")
    assert row["id"] == "e66b632c" and row["correct"] is True
    assert row["verdict"]["method"].startswith("llm:judge_longmemeval_knowledge_update.v1@")
    assert row["gold_evidence"] == ["answer_ac0140ce_1:2", "answer_ac0140ce_2:8"]
    assert set(row["retrieval"]["recall"]["hits"]) == {"5", "10", "20"}
    summary = runs["longmemeval"]["summary"]
    assert summary["items"] == 1 and summary["cost"]["ingest"]["per_utterance"]["calls"] == 1.0


@pytest.mark.parametrize("dataset", ["locomo", "longmemeval"])
def test_replay_reproduces_the_numbers_without_an_llm(runs: dict[str, Any], dataset: str) -> None:
    replayed = runs[dataset]["replay"]
    assert replayed.exit_code == 0, replayed.output
    summary = json.loads(replayed.stdout[replayed.stdout.index("{"):])
    assert summary["llm"].startswith("replay:")
    assert deterministic(summary) == deterministic(runs[dataset]["summary"])
    original = read_results(runs[dataset]["config"].out / "results.jsonl")
    again = read_results(runs["tmp"] / f"{dataset}-replay" / "results.jsonl")
    assert [(r["answer"], r["correct"], r["llm"]) for r in again] == [(r["answer"], r["correct"], r["llm"]) for r in original]


def test_replay_of_a_missing_exchange_names_it(runs: dict[str, Any], tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = CliRunner().invoke(main, ["eval", "longmemeval", str(shared_path(*LONGMEMEVAL)), "--limit", "1",
                                       "--replay", str(empty), "--out", str(tmp_path / "out")])
    assert result.exit_code != 0
    assert "replay: no recorded" in result.output


class Notes(Reporter):
    def __init__(self) -> None:
        self.notes: list[str] = []
        self.ingests: list[str] = []

    def note(self, text: str) -> None:
        self.notes.append(text)

    def ingest_started(self, item: str, utterances: int) -> None:
        self.ingests.append(item)


def test_without_llm_the_judge_is_skipped_and_a_killed_run_resumes(tmp_path: Path) -> None:
    path = shared_path(*LONGMEMEVAL)
    out = tmp_path / "run"
    result = CliRunner().invoke(main, ["eval", "longmemeval", str(path), "--llm", "none", "--limit", "1",
                                       "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout[result.stdout.index("{"):])
    assert summary["accuracy"]["J"]["all"]["mean"] is None and "no judge LLM" in summary["accuracy"]["note"]
    assert summary["accuracy"]["F1"]["all"]["n"] == 1 and summary["paths"] == {"episodic": 1}
    first = read_results(out / "results.jsonl")
    # a killed run: a torn last line, and the second item's memory started but never marked ingested
    with (out / "results.jsonl").open("a", encoding="utf-8") as sink:
        sink.write('{"id": "ce6d2d27", "answ')
    (out / "memories" / "ce6d2d27").mkdir(parents=True)
    notes = Notes()
    summary = run_eval(EvalConfig("longmemeval", path, out, limit=2), notes)
    rows = read_results(out / "results.jsonl")
    assert [r["id"] for r in rows] == ["e66b632c", "ce6d2d27"] and rows[0] == first[0]
    assert notes.ingests == ["ce6d2d27"] and summary["questions"] == 2 and summary["items"] == 2
    again = Notes()
    run_eval(EvalConfig("longmemeval", path, out, limit=2), again)
    assert again.ingests == [] and len(read_results(out / "results.jsonl")) == 2
    assert "pcm eval longmemeval" in (out / "summary.md").read_text(encoding="utf-8")
    with pytest.raises(UsageError, match="holds another evaluation"):
        run_eval(EvalConfig("longmemeval", path, out, limit=2, llm_label="anthropic:x"))

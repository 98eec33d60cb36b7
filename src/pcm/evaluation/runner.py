"""The evaluation loop: a fresh memory per item, ingest, ask every question, judge, score, write as it goes.

Resumable by construction: each answered question is appended to ``results.jsonl`` (flushed) and skipped when the
run is started again with the same ``--out``; an item's memory is reused when its ingest marker
(``memories/<item>.ingest.json``, written after ingest and extraction finished) exists, and rebuilt otherwise.
The summaries (``summary.json``, ``summary.md``) are always recomputed from the whole ``results.jsonl`` and the
markers, so a resumed run reports on everything done so far.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pcm.errors import UsageError
from pcm.evaluation.datasets import EvalItem, EvalQuestion, category_of, load_items, select
from pcm.evaluation.judge import judge
from pcm.evaluation.metrics import (
    KS,
    hits_at,
    locomo_f1,
    mean_by,
    percentile,
    ranked_unique,
    recall_table,
    says_not_in_memory,
    token_f1,
)
from pcm.llm.base import LLMClient
from pcm.memory import MANIFEST, Memory
from pcm.settings import LLMSpec, Settings

RESULTS = "results.jsonl"
SUMMARY_JSON = "summary.json"
SUMMARY_MD = "summary.md"
RUN_FILE = "run.json"
MEMORIES = "memories"
#: Posts ask may cite and recall returns per question: enough for recall@20, and ask's context is ASK_K posts.
ASK_K = 10


class Reporter:
    """Progress callbacks (no-ops here; the CLI draws bars)."""

    def run_started(self, questions: int, done: int) -> None: ...

    def ingest_started(self, item: str, utterances: int) -> None: ...

    def ingested(self, n: int) -> None: ...

    def ingest_finished(self) -> None: ...

    def answered(self, n: int) -> None: ...

    def note(self, text: str) -> None: ...


@dataclass
class EvalConfig:
    """One evaluation run. ``llm`` drives ingest and ask, ``judge_llm`` grades; either may be ``None``."""

    dataset: str
    path: Path
    out: Path
    llm: LLMClient | None = None
    judge_llm: LLMClient | None = None
    llm_label: str = "none"
    judge_label: str = "none"
    limit: int | None = None
    types: frozenset[str] | None = None
    settings: Settings = field(default_factory=Settings)
    deterministic: bool = False
    """One extraction worker, so every prompt (and so every recorded exchange) is the same on every run."""


def configure(
    dataset: str, path: Path, *, settings: Settings, out: Path | None = None, judge_llm: str | None = None,
    record: Path | None = None, replay: Path | None = None, limit: int | None = None, types: Sequence[str] = (),
) -> EvalConfig:
    """The run ``pcm eval`` asks for: the model under test (``settings.llm``) and the judge (``judge_llm``, default
    the same model) each with a client of its own (its own usage counters), both recorded into ``record`` or both
    answered from ``replay``; a recorded or replayed run is deterministic (one extraction worker)."""
    from pcm.evaluation.datasets import parse_types

    if record is not None and replay is not None:
        raise UsageError("use --record or --replay, not both")
    client, label = _client(settings, replay)
    judge_client, judge_label = _judge_client(settings, judge_llm, replay, label)
    if record is not None:
        from pcm.llm.record import RecordingClient

        client = RecordingClient(client, record) if client is not None else None
        # the flags recorded are the answering model's
        judge_client = RecordingClient(judge_client, record, describe=False) if judge_client is not None else None
    return EvalConfig(
        dataset=dataset, path=path, out=out or Path("pcm-eval") / f"{dataset}-{path.stem}", llm=client,
        judge_llm=judge_client, llm_label=label, judge_label=judge_label, limit=limit,
        types=parse_types(dataset, tuple(types)), settings=settings,
        deterministic=record is not None or label.startswith("replay:"),
    )


def _client(settings: Settings, replay: Path | None) -> tuple[LLMClient | None, str]:
    from pcm.llm import make_client

    if replay is not None:
        from pcm.llm.record import ReplayClient

        return ReplayClient(replay), f"replay:{replay}"
    return make_client(settings), str(settings.llm)


def _judge_client(settings: Settings, judge_llm: str | None, replay: Path | None,
                  label: str) -> tuple[LLMClient | None, str]:
    """The judge gets its own client (its own usage counters), of the --judge-llm model or else the --llm one."""
    if replay is not None or (judge_llm is None and label.startswith("replay:")):
        return _client(settings, replay or Path(label.partition(":")[2]))
    if judge_llm is None:
        return _client(settings, None)
    return _client(settings.with_(llm=LLMSpec.parse(judge_llm)), None)


def run_eval(config: EvalConfig, reporter: Reporter | None = None) -> dict[str, Any]:
    """Run (or resume) the evaluation; returns the summary it wrote to ``summary.json``."""
    return _Run(config, reporter or Reporter()).run()


class _Run:
    def __init__(self, config: EvalConfig, reporter: Reporter) -> None:
        self.config = config
        self.reporter = reporter
        self.out = config.out
        self.results = self.out / RESULTS
        self._source_ids: dict[str, str | None] | None = None
        """post IRI -> turn id of the item being run, read once when traversal first needs it."""

    def run(self) -> dict[str, Any]:
        started = time.perf_counter()
        items = select(load_items(self.config.dataset, self.config.path), self.config.types, self.config.limit)
        self.out.mkdir(parents=True, exist_ok=True)
        self._claim()
        drop_torn_tail(self.results)
        done = {r["id"] for r in read_results(self.results)}
        total = sum(len(i.questions) for i in items)
        self.reporter.run_started(total, sum(1 for i in items for q in i.questions if q.id in done))
        with self.results.open("a", encoding="utf-8") as sink:
            for item in items:
                todo = [q for q in item.questions if q.id not in done]
                if todo:
                    self._run_item(item, todo, sink)
        wanted = {q.id for i in items for q in i.questions}
        rows = [r for r in read_results(self.results) if r["id"] in wanted]
        markers = [m for i in items if (m := self._read_marker(i)) is not None]
        summary = summarise(rows, markers, self.config, time.perf_counter() - started)
        (self.out / SUMMARY_JSON).write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        (self.out / SUMMARY_MD).write_text(render_markdown(summary), encoding="utf-8")
        return summary

    def _claim(self) -> None:
        """Record what this directory evaluates; resuming it with another dataset or model would mix results."""
        identity = {"dataset": self.config.dataset, "file": self.config.path.name, "llm": self.config.llm_label,
                    "judge_llm": self.config.judge_label}
        path = self.out / RUN_FILE
        try:
            earlier = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            earlier = None
        if isinstance(earlier, dict) and earlier != identity:
            changed = ", ".join(f"{k} {earlier.get(k)!r} -> {v!r}" for k, v in identity.items() if earlier.get(k) != v)
            raise UsageError(f"{self.out} holds another evaluation ({changed}); choose a new --out")
        path.write_text(json.dumps(identity, indent=2) + "\n", encoding="utf-8")

    # -- one item ----------------------------------------------------------------------------------------------

    def _run_item(self, item: EvalItem, todo: Sequence[EvalQuestion], sink: Any) -> None:
        memory, marker = self._memory_for(item)
        self._source_ids = None
        sessions = {u.source_id: c.id for c in item.conversations for u in c.utterances if u.source_id}
        try:
            for question in todo:
                row = self._question(memory, question, sessions, facts=bool(marker.get("extracted")))
                sink.write(json.dumps(row, ensure_ascii=False) + "\n")
                sink.flush()
                self.reporter.answered(1)
        finally:
            memory.close()

    def _memory_dir(self, item: EvalItem) -> Path:
        return self.out / MEMORIES / re.sub(r"[^\w.-]+", "_", item.id)

    def _marker_path(self, item: EvalItem) -> Path:
        return self._memory_dir(item).with_suffix(".ingest.json")

    def _read_marker(self, item: EvalItem) -> dict[str, Any] | None:
        try:
            return json.loads(self._marker_path(item).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def _memory_for(self, item: EvalItem) -> tuple[Memory, dict[str, Any]]:
        """The item's memory: reused when its ingest finished in an earlier run, else built from scratch."""
        path = self._memory_dir(item)
        # the model under test is the run's client (given to each memory by use_llm), not one the settings name;
        # one extraction worker when deterministic, so every prompt is the same on every run
        settings = self.config.settings.with_(memory=path, llm=LLMSpec(), index_enabled=True,
                                              **({"llm_concurrency": 1} if self.config.deterministic else {}))
        marker = self._read_marker(item)
        if marker is not None and (path / MANIFEST).exists():
            self.reporter.note(f"{item.id}: reusing the memory ingested earlier")
            memory = Memory.open(settings)
            memory.use_llm(self.config.llm)
            return memory, marker
        shutil.rmtree(path, ignore_errors=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        memory = Memory.init(settings, owner=_owner(item), namespace=_namespace(item))
        memory.use_llm(self.config.llm)
        try:
            marker = self._ingest(memory, item)
        except BaseException:
            memory.close()
            raise
        self._marker_path(item).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
        return memory, marker

    def _ingest(self, memory: Memory, item: EvalItem) -> dict[str, Any]:
        """Posts (and index) first, then extraction with the evaluated client, as ``pcm ingest`` does."""
        self.reporter.ingest_started(item.id, item.utterances)
        started = time.perf_counter()
        report = memory.ingest(item.conversations, progress=self.reporter.ingested)
        marker: dict[str, Any] = {
            "item": item.id,
            "utterances": report.utterances,
            "posts": report.added,
            "episodic_seconds": round(time.perf_counter() - started, 3),
            "extracted": 0,
            "llm": {"calls": 0, "input_tokens": 0, "output_tokens": 0},
            "extraction_seconds": 0.0,
        }
        client = self.config.llm
        if client is not None and report.posts:
            before = client.usage.totals
            extract_started = time.perf_counter()
            run = memory.extract(report.posts)
            memory.sync_index()
            marker["extraction_seconds"] = round(time.perf_counter() - extract_started, 3)
            marker["extracted"] = run.extracted
            marker["failed"] = run.failed
            marker["llm"] = _delta(before, client.usage.totals)
            marker["extraction"] = run.as_json()
        self.reporter.ingest_finished()
        return marker

    # -- one question ------------------------------------------------------------------------------------------

    def _question(self, memory: Memory, q: EvalQuestion, sessions: dict[str, str], *, facts: bool) -> dict[str, Any]:
        client, judge_client = self.config.llm, self.config.judge_llm
        before = client.usage.totals if client is not None else None
        started = time.perf_counter()
        result = memory.ask(q.text, as_of=q.as_of, explain=True, k=ASK_K)
        ask_ms = (time.perf_counter() - started) * 1000
        stats = result.stats or {}
        llm = _delta(before, client.usage.totals) if client is not None and before is not None else _delta(None, None)
        llm_ms = float(stats.get("llm_ms", 0.0))
        judge_before = judge_client.usage.totals if judge_client is not None else None
        verdict = judge(judge_client, self.config.dataset, q, result.answer)
        judged = _delta(judge_before, judge_client.usage.totals) if judge_client is not None else _delta(None, None)
        scored = q.evidence and not q.abstention
        recalled = ranked_unique(h.source_id for h in memory.recall(q.text, max(KS))) if scored else []
        cited = ranked_unique(p.source_id for p in result.citations)
        walked = self._traversal_ranking(memory, q.text) if scored and facts else None
        return {
            "id": q.id,
            "item": q.item,
            "category": category_of(q),
            "question": q.text,
            "gold": q.gold,
            "answer": result.answer,
            "path": result.path,
            "note": result.note,
            "correct": verdict.correct,
            "verdict": verdict.as_json(),
            "f1": round(_f1(self.config.dataset, q, result.answer), 4),
            "sparql": result.sparql,
            "trace": [s.as_json() for s in result.trace],
            "evidence_posts": [{"source_id": p.source_id, "session": p.session, "post": p.post}
                               for p in result.citations],
            "gold_evidence": sorted(q.evidence),
            "gold_sessions": sorted(q.sessions),
            "retrieval": {
                "recall": _scored(recalled, q, sessions) if scored else None,
                "ask": _scored(cited, q, sessions) if scored else None,
                "traversal": _scored(walked, q, sessions) if walked is not None else None,
            },
            "llm": llm,
            "judge_llm": judged,
            "latency_ms": {"total": round(ask_ms, 1), "llm": round(llm_ms, 1), "non_llm": round(ask_ms - llm_ms, 1)},
            "stats": stats,
        }


    def _traversal_ranking(self, memory: Memory, question: str) -> list[str]:
        """Turn ids of the posts behind the triples traversal finds, best triple first (empty when it finds none)."""
        from pcm.errors import PcmError

        try:
            found = memory.retrieve(question).triples
        except (PcmError, OSError, ValueError):
            return []
        posts = [s.post for item in found for s in item.sources if s.post]
        if posts and self._source_ids is None:
            self._source_ids = {p.iri: p.source_id for p in memory.store.posts()}
        return ranked_unique((self._source_ids or {}).get(p) for p in posts)


def _owner(item: EvalItem) -> str:
    """The memory's owner: the speaker of the first ``user`` turn (LoCoMo's speaker_a), else ``me``."""
    for conversation in item.conversations:
        for u in conversation.utterances:
            if u.role == "user" and u.speaker:
                return u.speaker
    return "me"


def _namespace(item: EvalItem) -> str:
    """A namespace fixed by the item, not random per memory: its IRIs reach prompts, and a replay must match them."""
    return f"https://pcm.invalid/m/{hashlib.sha256(item.id.encode('utf-8')).hexdigest()[:12]}/"


def _delta(before: dict[str, int] | None, after: dict[str, int] | None) -> dict[str, int]:
    keys = ("calls", "input_tokens", "output_tokens")
    if before is None or after is None:
        return dict.fromkeys(keys, 0)
    return {k: after.get(k, 0) - before.get(k, 0) for k in keys}


def _f1(dataset: str, q: EvalQuestion, answer: str) -> float:
    if dataset == "locomo":
        return locomo_f1(answer, q.gold, q.category)
    if q.abstention:
        return 1.0 if says_not_in_memory(answer) else 0.0
    return token_f1(answer, q.gold)


def _scored(ranked: Sequence[str], q: EvalQuestion, sessions: dict[str, str]) -> dict[str, Any]:
    """Ranked turn ids with their hits at each k, for turns and for the sessions of the first k turns."""
    turn_hits = hits_at(ranked, q.evidence)
    session_hits = {k: bool(q.sessions) and q.sessions <= {sessions.get(t) for t in ranked[:k]} for k in KS}
    return {
        "ranked": list(ranked[: max(KS)]),
        "hits": {str(k): v for k, v in turn_hits.items()},
        "session_hits": {str(k): v for k, v in session_hits.items()},
    }


def drop_torn_tail(path: Path) -> None:
    """Cut a last line a killed run left half-written, so the next row starts on a line of its own."""
    if not path.exists():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        path.write_bytes(data[: data.rfind(b"\n") + 1])


def read_results(path: Path) -> list[dict[str, Any]]:
    """The rows of a ``results.jsonl``; a torn last line (a killed run) is ignored, and re-asked on resume."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and "id" in row:
            rows.append(row)
    return rows


# -- summaries ---------------------------------------------------------------------------------------------------


def summarise(rows: Sequence[dict[str, Any]], markers: Sequence[dict[str, Any]], config: EvalConfig, seconds: float) -> dict[str, Any]:
    """Everything the summaries show. Every figure except ``latency`` and ``wall_seconds`` is deterministic."""
    judged = [r for r in rows if r["verdict"]["method"] != "skipped"]
    return {
        "dataset": config.dataset,
        "file": str(config.path),
        "llm": config.llm_label,
        "judge_llm": config.judge_label,
        "items": len(markers),
        "questions": len(rows),
        "accuracy": {
            "J": mean_by((r["category"], None if r["correct"] is None else float(r["correct"])) for r in rows),
            "F1": mean_by((r["category"], r["f1"]) for r in rows),
            "judged": len(judged),
            "note": "" if config.judge_llm is not None else "no judge LLM: J only for questions scored by rule (n/a elsewhere)",
        },
        "paths": dict(sorted(Counter(r["path"] for r in rows).items())),
        "retrieval": {
            f"{source}{suffix}": _recall_of(rows, source, key)
            for source in ("recall", "ask", "traversal")
            for suffix, key in (("", "hits"), ("_sessions", "session_hits"))
        },
        "cost": _cost(rows, markers),
        "latency": _latency(rows, markers),
        "wall_seconds": round(seconds, 1),
    }


def _recall_of(rows: Iterable[dict[str, Any]], source: str, key: str) -> dict[str, dict[str, float]]:
    pairs = [
        (r["category"], {int(k): v for k, v in scored[key].items()})
        for r in rows
        if (scored := r["retrieval"].get(source)) is not None
    ]
    return recall_table(pairs)


def _cost(rows: Sequence[dict[str, Any]], markers: Sequence[dict[str, Any]]) -> dict[str, Any]:
    utterances = sum(m["utterances"] for m in markers)
    ingest = {k: sum(m["llm"][k] for m in markers) for k in ("calls", "input_tokens", "output_tokens")}
    asked = {k: sum(r["llm"][k] for r in rows) for k in ("calls", "input_tokens", "output_tokens")}
    judged = {k: sum(r["judge_llm"][k] for r in rows) for k in ("calls", "input_tokens", "output_tokens")}
    n = max(1, len(rows))
    return {
        "ingest": {**ingest, "utterances": utterances, "per_utterance": _per(ingest, max(1, utterances))},
        "questions": {**asked, "per_question": _per(asked, n)},
        "judge": {**judged, "per_question": _per(judged, n)},
    }


def _per(counts: dict[str, int], n: int) -> dict[str, float]:
    return {
        "calls": round(counts["calls"] / n, 3),
        "tokens": round((counts["input_tokens"] + counts["output_tokens"]) / n, 1),
    }


def _latency(rows: Sequence[dict[str, Any]], markers: Sequence[dict[str, Any]]) -> dict[str, Any]:
    def spread(values: list[float]) -> dict[str, float]:
        return {"p50": round(percentile(values, 50), 1), "p95": round(percentile(values, 95), 1)}

    utterances = max(1, sum(m["utterances"] for m in markers))
    return {
        "ask_ms": spread([r["latency_ms"]["total"] for r in rows]),
        "ask_llm_ms": spread([r["latency_ms"]["llm"] for r in rows]),
        "ask_non_llm_ms": spread([r["latency_ms"]["non_llm"] for r in rows]),
        "ingest_ms_per_utterance": {
            "episodic": round(1000 * sum(m["episodic_seconds"] for m in markers) / utterances, 2),
            "extraction": round(1000 * sum(m["extraction_seconds"] for m in markers) / utterances, 2),
        },
    }


def render_markdown(summary: dict[str, Any]) -> str:
    """``summary.md``: the same figures as ``summary.json``, as tables."""
    acc = summary["accuracy"]
    lines = [
        f"# pcm eval {summary['dataset']}: {Path(summary['file']).name}",
        "",
        f"LLM `{summary['llm']}`, judge `{summary['judge_llm']}`; {summary['items']} memories, "
        f"{summary['questions']} questions; paths {summary['paths']}; {summary['wall_seconds']} s.",
        "",
        "## Answers",
        "",
        "| category | n | J | F1 |",
        "|---|---|---|---|",
    ]
    for category, f1 in acc["F1"].items():
        j = acc["J"].get(category, {}).get("mean")
        lines.append(f"| {category} | {f1['n']} | {'n/a' if j is None else f'{j:.3f}'} | {_fmt(f1['mean'])} |")
    if acc["note"]:
        lines += ["", acc["note"]]
    lines += ["", "## Retrieval: evidence recall@k (all evidence turns in the top k)", ""]
    for source, table in summary["retrieval"].items():
        if not table:
            lines.append(f"- {source}: n/a")
            continue
        lines.append(f"### {source}")
        lines += ["", "| category | n | " + " | ".join(f"R@{k}" for k in KS) + " |", "|---" * (len(KS) + 2) + "|"]
        for category, row in table.items():
            lines.append(f"| {category} | {row['n']} | " + " | ".join(f"{row[f'R@{k}']:.3f}" for k in KS) + " |")
        lines.append("")
    cost, latency = summary["cost"], summary["latency"]
    lines += [
        "## Cost and latency",
        "",
        f"- ingest: {cost['ingest']['utterances']} utterances, {cost['ingest']['calls']} LLM calls, "
        f"{cost['ingest']['per_utterance']['calls']} calls and {cost['ingest']['per_utterance']['tokens']} tokens per utterance; "
        f"{latency['ingest_ms_per_utterance']['episodic']} ms/utterance episodic, "
        f"{latency['ingest_ms_per_utterance']['extraction']} ms/utterance extraction",
        f"- questions: {cost['questions']['per_question']['calls']} calls and {cost['questions']['per_question']['tokens']} "
        f"tokens per question (judge: {cost['judge']['per_question']['calls']} calls, {cost['judge']['per_question']['tokens']} tokens)",
        f"- ask latency ms p50/p95: total {latency['ask_ms']['p50']}/{latency['ask_ms']['p95']}, "
        f"LLM {latency['ask_llm_ms']['p50']}/{latency['ask_llm_ms']['p95']}, "
        f"non-LLM {latency['ask_non_llm_ms']['p50']}/{latency['ask_non_llm_ms']['p95']}",
        "",
    ]
    return "\n".join(lines)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


__all__ = ["ASK_K", "EvalConfig", "Reporter", "configure", "read_results", "render_markdown", "run_eval", "summarise"]

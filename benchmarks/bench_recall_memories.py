"""Episodic recall re-measured over memories a ``pcm eval`` run already ingested: no ingest, seconds per run.

``pcm eval`` builds one memory per item under ``OUT/memories`` (a LoCoMo conversation, a LongMemEval question's
haystack). This script reopens each item's side index and asks only the recall: evidence recall@5/@10/@20 per
category (all evidence turns in the top k), session recall@10 (every answer session among the sessions of the top
10), and, for questions the memory cannot answer (LoCoMo adversarial, LongMemEval ``_abs``), how often episodic
answers decline them, against how often they decline an answerable question: the old rank-count attribution check
(:meth:`SideIndex.said_by_others`) and the relevance decision that answers use (:meth:`SideIndex.relevance`), the
latter also as a trade-off curve over its threshold (``ATTRIBUTION_MARGIN``) and per half of the questions (even-
and odd-numbered), so a threshold chosen on one half can be checked on the other.

    pcm eval locomo ../shared/data/locomo/locomo-conv-26.json --llm none --out /tmp/run-locomo
    python benchmarks/bench_recall_memories.py locomo ../shared/data/locomo/locomo-conv-26.json /tmp/run-locomo

``--set NAME=VALUE`` changes a field of the recall config (:class:`pcm.settings.RecallConfig`) or a constant of
:mod:`~pcm.index.relevance` or :mod:`~pcm.index.text` for one run (an ablation: e.g. ``--set attribution_rank=1``,
``--recipe plain``), so each lever's effect is
measured alone; ``--reembed`` re-encodes the posts from the embedded text as ingest would write it now, for a
change of that text (``--set EMBED_SPEAKER_MIN_WORDS=8 --reembed``).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import fields
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from pcm.evaluation.datasets import category_of, load_items  # noqa: E402
from pcm.evaluation.metrics import KS, hits_at, percentile, ranked_unique  # noqa: E402
from pcm.index import SideIndex, get_embedder, relevance  # noqa: E402
from pcm.index import text as index_text  # noqa: E402
from pcm.settings import RECALL_RECIPES, RecallConfig  # noqa: E402

CURVE = (-0.3, -0.25, -0.2, -0.18, -0.15, -0.12, -0.1, -0.05, 0.0, 0.05)
"""Thresholds of the relevance score at which the trade-off curve is reported."""


def override(assignments: list[str], recipe: str = "tuned") -> tuple[RecallConfig, dict[str, Any]]:
    """The recall config of ``recipe`` with each ``NAME=VALUE`` applied (the value parsed as JSON, so numbers and
    booleans work): a field of :class:`RecallConfig`, or else a constant of the relevance or text module."""
    config = RECALL_RECIPES[recipe]
    recall_fields = {f.name for f in fields(RecallConfig)}
    applied = {}
    for assignment in assignments:
        name, _, raw = assignment.partition("=")
        value = json.loads(raw)
        if name in recall_fields:
            config = config.with_(**{name: value})
        else:
            module = next((m for m in (relevance, index_text) if hasattr(m, name)), None)
            if module is None:
                raise SystemExit(f"neither RecallConfig nor pcm.index.relevance or .text has a setting {name!r}")
            setattr(module, name, value)
        applied[name] = value
    return config, applied


def reembed(index: SideIndex) -> None:
    """Re-encode every post's vector, in memory, from the embedded text as ingest writes it now
    (:func:`pcm.index.text.embed_text`), so a change of that text is measured without re-ingesting."""
    posts = index._posts
    records = list(posts.live_records())
    vectors = index.embedder.encode([index_text.embed_text(r) for r in records])
    for record, vector in zip(records, vectors, strict=True):
        posts.vectors[posts.slot_of[record.iri]] = vector


def run(
    dataset: str,
    path: Path,
    out: Path,
    limit: int | None = None,
    *,
    fresh_vectors: bool = False,
    recall_config: RecallConfig | None = None,
) -> dict[str, Any]:
    embedder = get_embedder()
    embedder.encode(["warm up the model"])
    hits: dict[str, dict[int, list[bool]]] = defaultdict(lambda: defaultdict(list))
    session_hits: dict[str, list[bool]] = defaultdict(list)
    declined: dict[str, list[bool]] = defaultdict(list)
    decided: dict[str, list[bool]] = defaultdict(list)
    scores: list[tuple[int, bool, float | None]] = []
    latencies: list[float] = []
    checks: list[float] = []
    decisions: list[float] = []
    items = load_items(dataset, path)[:limit]
    for item in items:
        directory = out / "memories" / re.sub(r"[^\w.-]+", "_", item.id) / "index"
        if not directory.exists():
            raise SystemExit(f"{directory} is missing: run `pcm eval {dataset} {path} --llm none --out {out}` first")
        index = SideIndex.open(directory, embedder=embedder, recall_config=recall_config)
        if fresh_vectors:
            reembed(index)
        sessions = {u.source_id: c.id for c in item.conversations for u in c.utterances if u.source_id}
        try:
            for q in item.questions:
                category = category_of(q)
                start = time.perf_counter()
                found = index.recall(q.text, max(KS))
                latencies.append(time.perf_counter() - start)
                start = time.perf_counter()
                kind = "unanswerable" if q.abstention else "answerable"
                declined[kind].append(index.said_by_others(q.text))
                checks.append(time.perf_counter() - start)
                start = time.perf_counter()
                decision = index.relevance(q.text)
                decisions.append(time.perf_counter() - start)
                decided[kind].append(not decision.relevant)
                scores.append((len(scores), q.abstention, decision.score if decision.speaker else None))
                if not q.evidence or q.abstention:
                    continue
                ranked = ranked_unique(h.source_id for h in found)
                for k, ok in hits_at(ranked, q.evidence).items():
                    hits[category][k].append(ok)
                    hits["overall"][k].append(ok)
                top_sessions = {sessions.get(t) for t in ranked[:10]}
                ok = bool(q.sessions) and q.sessions <= top_sessions
                session_hits[category].append(ok)
                session_hits["overall"].append(ok)
        finally:
            index.close()
    return {
        "dataset": dataset,
        "file": path.name,
        "recall": {
            c: {"n": len(v[KS[0]]), **{f"R@{k}": statistics.fmean(v[k]) for k in KS},
                "S@10": statistics.fmean(session_hits[c])}
            for c, v in sorted(hits.items(), key=lambda kv: (kv[0] == "overall", kv[0]))
        },
        "declined": {c: {"n": len(v), "rate": statistics.fmean(v)} for c, v in declined.items()},
        "relevance": {c: {"n": len(v), "rate": statistics.fmean(v)} for c, v in decided.items()},
        "curve": curve(scores),
        "decision_ms": {"p50": percentile(decisions, 50) * 1000, "p95": percentile(decisions, 95) * 1000},
        "latency_ms": {"p50": percentile(latencies, 50) * 1000, "p95": percentile(latencies, 95) * 1000},
        "check_ms": {"p50": percentile(checks, 50) * 1000, "p95": percentile(checks, 95) * 1000},
    }


def curve(scores: list[tuple[int, bool, float | None]]) -> list[dict[str, Any]]:
    """Decline rates (unanswerable, answerable) at each threshold of :data:`CURVE`, over all questions and over
    the even- and odd-numbered halves; a question the decision does not apply to is never declined."""
    rows = []
    for threshold in CURVE:
        row: dict[str, Any] = {"threshold": threshold}
        for half, keep in (("all", lambda i: True), ("even", lambda i: i % 2 == 0), ("odd", lambda i: i % 2 == 1)):
            chosen = [(a, s) for i, a, s in scores if keep(i)]
            for kind, want in (("unanswerable", True), ("answerable", False)):
                flags = [s is not None and s < threshold for a, s in chosen if a is want]
                row[f"{half}_{kind}"] = statistics.fmean(flags) if flags else float("nan")
        rows.append(row)
    return rows


def report(result: dict[str, Any], applied: dict[str, Any]) -> str:
    title = f"{result['dataset']} {result['file']}" + (f" with {applied}" if applied else "")
    lines = [title, f"  {'category':26s} {'n':>4s} " + " ".join(f"{'R@' + str(k):>6s}" for k in KS) + "   S@10"]
    for category, row in result["recall"].items():
        lines.append(
            f"  {category:26s} {row['n']:4d} " + " ".join(f"{row[f'R@{k}']:6.3f}" for k in KS) + f" {row['S@10']:6.3f}"
        )
    for kind, row in result["declined"].items():
        lines.append(f"  declined {kind:17s} {row['n']:4d} {row['rate']:6.3f}")
    for kind, row in result["relevance"].items():
        lines.append(f"  relevance declined {kind:7s} {row['n']:4d} {row['rate']:6.3f}"
                     f"  (ATTRIBUTION_MARGIN {relevance.ATTRIBUTION_MARGIN})")
    lines.append("  relevance curve: threshold   unanswerable/answerable declined: all | even half | odd half")
    for row in result["curve"]:
        lines.append(f"    {row['threshold']:+.2f}  " + " | ".join(
            f"{row[f'{h}_unanswerable']:.3f}/{row[f'{h}_answerable']:.3f}" for h in ("all", "even", "odd")))
    lat = result["latency_ms"]
    check = result["check_ms"]
    decision = result["decision_ms"]
    lines.append(f"  recall latency p50 {lat['p50']:.1f} ms p95 {lat['p95']:.1f} ms; "
                 f"attribution check p50 {check['p50']:.1f} ms p95 {check['p95']:.1f} ms; "
                 f"relevance p50 {decision['p50']:.1f} ms p95 {decision['p95']:.1f} ms")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", choices=("locomo", "longmemeval"))
    parser.add_argument("file", type=Path)
    parser.add_argument("run", type=Path, help="the --out directory of a `pcm eval ... --llm none` run")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="change a RecallConfig field (or a relevance/text constant)")
    parser.add_argument("--recipe", choices=sorted(RECALL_RECIPES), default="tuned", help="the recall recipe to start from")
    parser.add_argument("--limit", type=int, default=None, help="only the first N items")
    parser.add_argument("--reembed", action="store_true",
                        help="re-encode the posts' vectors from the current embedded text (after --set)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    config, applied = override(args.set, args.recipe)
    result = run(args.dataset, args.file, args.run, args.limit, fresh_vectors=args.reembed, recall_config=config)
    print(json.dumps({**result, "set": applied}) if args.json else report(result, applied))


if __name__ == "__main__":
    main()

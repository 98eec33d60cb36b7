"""Episodic recall re-measured over memories a ``pcm eval`` run already ingested: no ingest, seconds per run.

``pcm eval`` builds one memory per item under ``OUT/memories`` (a LoCoMo conversation, a LongMemEval question's
haystack). This script reopens each item's side index and asks only the recall: evidence recall@5/@10/@20 per
category (all evidence turns in the top k), session recall@10 (every answer session among the sessions of the top
10), and, for questions the memory cannot answer (LoCoMo adversarial, LongMemEval ``_abs``), how often the
attribution check of episodic answers (:meth:`SideIndex.said_by_others`) declines them, against how often it
declines an answerable question.

    pcm eval locomo ../shared/data/locomo/locomo-conv-26.json --llm none --out /tmp/run-locomo
    python benchmarks/bench_recall_memories.py locomo ../shared/data/locomo/locomo-conv-26.json /tmp/run-locomo

``--set NAME=VALUE`` overrides a ranking constant of :mod:`pcm.index.recall` for one run (an ablation: e.g.
``--set ATTRIBUTION_RANK=1``), so each lever's effect is measured alone.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from pcm.evaluation.datasets import category_of, load_items  # noqa: E402
from pcm.evaluation.metrics import KS, hits_at, percentile, ranked_unique  # noqa: E402
from pcm.index import SideIndex, get_embedder  # noqa: E402
from pcm.index import recall as ranking  # noqa: E402


def override(assignments: list[str]) -> dict[str, Any]:
    """Apply ``NAME=VALUE`` to the ranking constants (the value parsed as JSON, so numbers and booleans work)."""
    applied = {}
    for assignment in assignments:
        name, _, raw = assignment.partition("=")
        if not hasattr(ranking, name):
            raise SystemExit(f"pcm.index.recall has no constant {name!r}")
        value = json.loads(raw)
        setattr(ranking, name, value)
        applied[name] = value
    return applied


def run(dataset: str, path: Path, out: Path, limit: int | None = None) -> dict[str, Any]:
    embedder = get_embedder()
    embedder.encode(["warm up the model"])
    hits: dict[str, dict[int, list[bool]]] = defaultdict(lambda: defaultdict(list))
    session_hits: dict[str, list[bool]] = defaultdict(list)
    declined: dict[str, list[bool]] = defaultdict(list)
    latencies: list[float] = []
    checks: list[float] = []
    items = load_items(dataset, path)[:limit]
    for item in items:
        directory = out / "memories" / re.sub(r"[^\w.-]+", "_", item.id) / "index"
        if not directory.exists():
            raise SystemExit(f"{directory} is missing: run `pcm eval {dataset} {path} --llm none --out {out}` first")
        index = SideIndex.open(directory, embedder=embedder)
        sessions = {u.source_id: c.id for c in item.conversations for u in c.utterances if u.source_id}
        try:
            for q in item.questions:
                category = category_of(q)
                start = time.perf_counter()
                found = index.recall(q.text, max(KS))
                latencies.append(time.perf_counter() - start)
                start = time.perf_counter()
                declined["unanswerable" if q.abstention else "answerable"].append(index.said_by_others(q.text))
                checks.append(time.perf_counter() - start)
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
        "latency_ms": {"p50": percentile(latencies, 50) * 1000, "p95": percentile(latencies, 95) * 1000},
        "check_ms": {"p50": percentile(checks, 50) * 1000, "p95": percentile(checks, 95) * 1000},
    }


def report(result: dict[str, Any], applied: dict[str, Any]) -> str:
    title = f"{result['dataset']} {result['file']}" + (f" with {applied}" if applied else "")
    lines = [title, f"  {'category':26s} {'n':>4s} " + " ".join(f"{'R@' + str(k):>6s}" for k in KS) + "   S@10"]
    for category, row in result["recall"].items():
        lines.append(
            f"  {category:26s} {row['n']:4d} " + " ".join(f"{row[f'R@{k}']:6.3f}" for k in KS) + f" {row['S@10']:6.3f}"
        )
    for kind, row in result["declined"].items():
        lines.append(f"  declined {kind:17s} {row['n']:4d} {row['rate']:6.3f}")
    lat = result["latency_ms"]
    check = result["check_ms"]
    lines.append(f"  recall latency p50 {lat['p50']:.1f} ms p95 {lat['p95']:.1f} ms; "
                 f"attribution check p50 {check['p50']:.1f} ms p95 {check['p95']:.1f} ms")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", choices=("locomo", "longmemeval"))
    parser.add_argument("file", type=Path)
    parser.add_argument("run", type=Path, help="the --out directory of a `pcm eval ... --llm none` run")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="override a ranking constant")
    parser.add_argument("--limit", type=int, default=None, help="only the first N items")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    applied = override(args.set)
    result = run(args.dataset, args.file, args.run, args.limit)
    print(json.dumps({**result, "set": applied}) if args.json else report(result, applied))


if __name__ == "__main__":
    main()

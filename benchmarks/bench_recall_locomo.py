"""Episodic recall on LoCoMo: evidence recall@5/@10/@20 for fts, vector and hybrid, with timings.

Episodic mode: every turn becomes a post carrying its session date; for each non-adversarial question
(category != 5) the top-k posts are retrieved and the question counts as a hit at k only when ALL its evidence turns
are among them. Questions without usable evidence ids are skipped (and counted).

    python benchmarks/bench_recall_locomo.py [PATH ...] [--json]

The scoring (evidence ids, recall@k, percentiles) is :mod:`pcm.evaluation.metrics`, shared with ``pcm eval``, which
measures the same recall through whole memories (``retrieval.recall`` in its summary).

Reference points on conv-26 (plain retrievers over raw turns, from the issue): BM25 R@10 0.477, MiniLM dense
0.503, RRF 0.523. Target: hybrid R@10 >= 0.70 with no LLM.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from pcm.conversations import parse_file  # noqa: E402
from pcm.evaluation.datasets import LOCOMO_CATEGORIES as CATEGORIES  # noqa: E402
from pcm.evaluation.datasets import locomo_evidence_ids  # noqa: E402
from pcm.evaluation.metrics import KS, hits_at, percentile  # noqa: E402
from pcm.index import PostRecord, SideIndex, get_embedder  # noqa: E402

DEFAULT_PATH = REPO.parent / "shared" / "data" / "locomo" / "locomo-conv-26.json"
MODES = ("fts", "vector", "hybrid")


@dataclass(frozen=True)
class Question:
    text: str
    evidence: frozenset[str]
    category: int


def load_posts(path: Path) -> list[PostRecord]:
    """One PostRecord per LoCoMo turn, through the project's own parser (captions included as it renders them)."""
    posts = []
    for conversation in parse_file(path, "locomo"):
        for u in conversation.utterances:
            posts.append(
                PostRecord(
                    iri=f"urn:test:post:{u.source_id}",
                    session=u.session,
                    role=u.role,
                    speaker=u.speaker,
                    time=u.timestamp,
                    text=u.content,
                    source_id=u.source_id,
                    position=u.position,
                )
            )
    return posts


def load_questions(path: Path, known: set[str]) -> tuple[list[Question], int]:
    """Non-adversarial questions with their evidence ids (``"D8:6; D9:17"`` is two ids); the count skipped."""
    data = json.loads(path.read_text(encoding="utf-8"))
    samples = data if isinstance(data, list) else [data]
    questions, skipped = [], 0
    for sample in samples:
        for qa in sample.get("qa", []):
            if qa.get("category") == 5:
                continue
            ids = locomo_evidence_ids(qa.get("evidence", [])) & known
            if not ids:
                skipped += 1
                continue
            questions.append(Question(str(qa["question"]), frozenset(ids), int(qa["category"])))
    return questions, skipped


def evaluate(index: SideIndex, questions: list[Question], mode: str) -> dict[str, Any]:
    index._query_cache.clear()  # time every mode with cold query vectors, as a fresh CLI call would
    hits: dict[int, list[bool]] = defaultdict(list)
    by_category: dict[tuple[int, int], list[bool]] = defaultdict(list)
    latencies = []
    for q in questions:
        start = time.perf_counter()
        ranked = [h.source_id for h in index.recall(q.text, k=max(KS), mode=mode)]
        latencies.append(time.perf_counter() - start)
        for k, ok in hits_at(ranked, q.evidence).items():
            hits[k].append(ok)
            by_category[(k, q.category)].append(ok)
    return {
        "recall": {k: statistics.fmean(v) for k, v in hits.items()},
        "by_category": {
            CATEGORIES.get(c, str(c)): {k: statistics.fmean(by_category[(k, c)]) for k in KS}
            for c in sorted({q.category for q in questions})
        },
        "latency_ms": {"p50": percentile(latencies, 50) * 1000, "p95": percentile(latencies, 95) * 1000},
    }


def run(path: Path) -> dict[str, Any]:
    posts = load_posts(path)
    questions, skipped = load_questions(path, {p.source_id for p in posts if p.source_id})
    embedder = get_embedder()
    embedder.encode(["warm up the model"])
    with tempfile.TemporaryDirectory() as tmp:
        index = SideIndex.open(Path(tmp) / "index", embedder=embedder)
        start = time.perf_counter()
        index.upsert_posts(posts)
        indexing = time.perf_counter() - start
        index.optimize()
        results = {mode: evaluate(index, questions, mode) for mode in MODES}
        index.close()
    return {
        "file": path.name,
        "posts": len(posts),
        "questions": len(questions),
        "skipped_without_evidence": skipped,
        "index_posts_per_s": len(posts) / indexing,
        "modes": results,
    }


def report(result: dict[str, Any]) -> str:
    lines = [
        f"{result['file']}: {result['posts']} posts, {result['questions']} questions "
        f"({result['skipped_without_evidence']} skipped: no evidence ids); "
        f"indexing {result['index_posts_per_s']:.0f} posts/s (embedding included)"
    ]
    for mode, r in result["modes"].items():
        overall = " ".join(f"R@{k}={r['recall'][k]:.3f}" for k in KS)
        lat = r["latency_ms"]
        lines.append(f"  {mode:7s} {overall}   latency p50 {lat['p50']:.1f} ms p95 {lat['p95']:.1f} ms")
        for name, rec in r["by_category"].items():
            lines.append(f"          {name:12s} " + " ".join(f"R@{k}={rec[k]:.3f}" for k in KS))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, default=[DEFAULT_PATH])
    parser.add_argument("--json", action="store_true", help="print one JSON object per file")
    args = parser.parse_args()
    for path in args.paths:
        result = run(path)
        print(json.dumps(result) if args.json else report(result))


if __name__ == "__main__":
    main()

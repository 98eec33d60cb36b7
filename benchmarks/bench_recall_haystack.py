"""Episodic recall on an S-like LongMemEval haystack: each question's sessions hidden among ~45 distractor sessions.

The haystack is built in memory by :mod:`make_lme_haystack` (seeded). Every question gets its own side index, as
``pcm eval`` gives it its own memory, but the turns are embedded once for all questions (a distractor session
recurs in many haystacks), so the run costs about one embedding pass over the oracle file instead of forty-eight.
Prints evidence recall@5/@10/@20 per question type (all ``has_answer`` turns in the top k) and session recall@10.

    python benchmarks/bench_recall_haystack.py ../shared/data/longmemeval/longmemeval-oracle-dev48.json
    python benchmarks/bench_recall_haystack.py ORACLE --types multi-session --set vector_weight=0.5

``--indexes DIR`` keeps each question's side index under ``DIR`` and reopens it on the next run (same oracle,
distractors and seed), so an ablation of the recall config costs seconds instead of an ingest.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_recall_memories import override  # noqa: E402
from make_lme_haystack import DISTRACTORS, SEED, build  # noqa: E402
from pcm.evaluation.datasets import category_of, load_items  # noqa: E402
from pcm.evaluation.metrics import KS, hits_at, percentile, ranked_unique  # noqa: E402
from pcm.index import PostRecord, SideIndex, get_embedder  # noqa: E402
from pcm.index.embedder import Embedder  # noqa: E402
from pcm.settings import RECALL_RECIPES, RecallConfig  # noqa: E402


class CachedEmbedder(Embedder):
    """The real model, each distinct text encoded once (distractor sessions recur across haystacks)."""

    def __init__(self, inner: Embedder) -> None:
        super().__init__()
        self.inner = inner
        self.name, self.dim = inner.name, inner.dim
        self.cache: dict[str, np.ndarray] = {}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        todo = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if todo:
            for text, vector in zip(todo, self.inner.encode(todo), strict=True):
                self.cache[text] = vector
        return np.stack([self.cache[t] for t in texts]) if texts else np.zeros((0, self.dim), dtype=np.float32)


def run(
    path: Path,
    distractors: int,
    seed: int,
    types: set[str] | None,
    keep: Path | None = None,
    recall_config: RecallConfig | None = None,
) -> dict[str, Any]:
    records = build(json.loads(path.read_text(encoding="utf-8")), distractors, seed)
    with tempfile.TemporaryDirectory() as tmp:
        haystack = Path(tmp) / path.name
        haystack.write_text(json.dumps(records), encoding="utf-8")
        items = load_items("longmemeval", haystack)  # the parser pcm eval uses
    embedder = CachedEmbedder(get_embedder())
    hits: dict[str, dict[int, list[bool]]] = defaultdict(lambda: defaultdict(list))
    session_hits: dict[str, list[bool]] = defaultdict(list)
    latencies: list[float] = []
    posts_per_question = []
    for item in items:
        (q,) = item.questions
        category = category_of(q)
        if (types and category not in types) or q.abstention or not q.evidence:
            continue
        posts = [
            PostRecord(f"urn:h:{u.source_id}", u.session, u.role, u.speaker, u.timestamp, u.content, u.source_id, u.position)
            for c in item.conversations
            for u in c.utterances
        ]
        posts_per_question.append(len(posts))
        sessions = {p.source_id: p.session for p in posts}
        with tempfile.TemporaryDirectory() as tmp:
            name = re.sub(r"[^\w.-]+", "_", q.id)
            directory = (keep / f"{distractors}-{seed}" / name) if keep is not None else Path(tmp) / "index"
            built = directory.with_name(directory.name + ".built")  # only a finished index is reused
            index = SideIndex.open(
                directory, embedder=embedder, rebuild=not built.exists(), recall_config=recall_config
            )
            if not built.exists():
                index.upsert_posts(posts)
                index.optimize()
                built.touch()
            start = time.perf_counter()
            found = index.recall(q.text, max(KS))
            latencies.append(time.perf_counter() - start)
            index.close()
        ranked = ranked_unique(h.source_id for h in found)
        for k, ok in hits_at(ranked, q.evidence).items():
            hits[category][k].append(ok)
            hits["overall"][k].append(ok)
        ok = q.sessions <= {sessions.get(t) for t in ranked[:10]}
        session_hits[category].append(ok)
        session_hits["overall"].append(ok)
    return {
        "file": path.name,
        "distractors": distractors,
        "posts_per_question": statistics.fmean(posts_per_question) if posts_per_question else 0,
        "recall": {
            c: {"n": len(v[KS[0]]), **{f"R@{k}": statistics.fmean(v[k]) for k in KS},
                "S@10": statistics.fmean(session_hits[c])}
            for c, v in sorted(hits.items(), key=lambda kv: (kv[0] == "overall", kv[0]))
        },
        "latency_ms": {"p50": percentile(latencies, 50) * 1000, "p95": percentile(latencies, 95) * 1000},
    }


def report(result: dict[str, Any], applied: dict[str, Any]) -> str:
    lines = [
        f"{result['file']} + {result['distractors']} distractor sessions per question "
        f"({result['posts_per_question']:.0f} posts each)" + (f" with {applied}" if applied else ""),
        f"  {'type':26s} {'n':>4s} " + " ".join(f"{'R@' + str(k):>6s}" for k in KS) + "   S@10",
    ]
    for category, row in result["recall"].items():
        lines.append(
            f"  {category:26s} {row['n']:4d} " + " ".join(f"{row[f'R@{k}']:6.3f}" for k in KS) + f" {row['S@10']:6.3f}"
        )
    lat = result["latency_ms"]
    lines.append(f"  recall latency p50 {lat['p50']:.1f} ms p95 {lat['p95']:.1f} ms")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("oracle", type=Path)
    parser.add_argument("--distractors", type=int, default=DISTRACTORS)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--types", default="", help="only these question types, comma-separated")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="change a RecallConfig field (or a relevance/text constant)")
    parser.add_argument("--recipe", choices=sorted(RECALL_RECIPES), default="tuned", help="the recall recipe to start from")
    parser.add_argument("--indexes", type=Path, default=None, help="keep (and reuse) the side indexes here")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    config, applied = override(args.set, args.recipe)
    types = {t.strip() for t in args.types.split(",") if t.strip()} or None
    result = run(args.oracle, args.distractors, args.seed, types, args.indexes, config)
    print(json.dumps({**result, "set": applied}) if args.json else report(result, applied))


if __name__ == "__main__":
    main()

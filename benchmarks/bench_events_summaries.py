"""Event chains and session summaries as retrieval on LoCoMo (issue 10 parts 1 and 3): evidence recall@10 on
multi-hop (cat 1), temporal (cat 2) and all non-adversarial questions, beside episodic recall alone.

Episodic mode, no LLM: the conversation is ingested through ``Memory.ingest`` (side index on, extractive session
summaries made at ingest). A question counts only when ALL its evidence turns are in the top 10. Rankings:

- ``recall``: ``memory.recall(question, 10)``;
- ``chain s=N b/a``: the *episodic event chain*: there are no extracted events without an LLM, so the chain is
  the turns around recall's top N hits in message order, crossing into the neighbouring session at a session's
  edge (``episodic_chain``, b turns before, a after), hit by hit, cut at 10. It trades recall's lower hits for the neighbours of its best ones;
- ``recall+chain``: recall's top 7, then the chain around its top hits to fill the last 3 places;
- ``recall+summary``: recall's top 8, then the best posts of the top summary-matched session to fill 2 places;
- ``summaries w=W s=S``: ``summary_posts``: recall's hits re-ranked by RRF with W times the rank of their
  session's summary match (top S sessions, default 3, by MiniLM cosine to the question), complemented by those
  sessions' best posts.

Ingest and the summaries are timed apart (the same work ``Memory.ingest`` does with summaries on).

    python benchmarks/bench_events_summaries.py [PATH] [--limit N] [--json]

``--limit`` keeps the first N questions (for a quick run while developing); the full run is without it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_recall_locomo import CATEGORIES, DEFAULT_PATH, Question, load_questions  # noqa: E402
from pcm.conversations import parse_file  # noqa: E402
from pcm.memory import Memory  # noqa: E402
from pcm.retrieval.summaries import summary_posts  # noqa: E402
from pcm.retrieval.traversal.events import episodic_chain  # noqa: E402
from pcm.settings import Settings  # noqa: E402
from pcm.summaries import update_summaries  # noqa: E402
from pcm.summaries.store import sessions_of_posts  # noqa: E402

K = 10
Ranker = Callable[[Memory, str], list[str]]


def recall(memory: Memory, question: str) -> list[str]:
    return [h.post for h in memory.recall(question, K)]


def chain(seeds: int, before: int, after: int) -> Ranker:
    def rank(memory: Memory, question: str) -> list[str]:
        hits = [h.post for h in memory.recall(question, seeds)]
        return episodic_chain(memory.context, hits, before=before, after=after)[:K]

    return rank


def recall_then_chain(memory: Memory, question: str) -> list[str]:
    hits = [h.post for h in memory.recall(question, K)]
    ranked = list(dict.fromkeys(hits[:7]))
    for post in episodic_chain(memory.context, hits[:3], before=1, after=1):
        if len(ranked) == K:
            break
        if post not in ranked:
            ranked.append(post)
    return ranked[:K]


def summaries(weight: float, sessions: int = 3) -> Ranker:
    def rank(memory: Memory, question: str) -> list[str]:
        return summary_posts(memory.context, question, K, weight=weight, sessions=sessions)

    return rank


def recall_then_summary(memory: Memory, question: str) -> list[str]:
    """Recall's top 8, then the best posts of the best-matching session's summary that recall did not rank."""
    ranked = [h.post for h in memory.recall(question, 8)]
    for post in summary_posts(memory.context, question, K, weight=1.0, sessions=1):
        if len(ranked) == K:
            break
        if post not in ranked:
            ranked.append(post)
    return ranked


RANKERS: dict[str, Ranker] = {
    "recall": recall,
    "chain s=5 b0/a1": chain(5, 0, 1),
    "chain s=3 b1/a2": chain(3, 1, 2),
    "recall+chain": recall_then_chain,
    "summaries w=1": summaries(1.0),
    "summaries w=0.1": summaries(0.1),
    "summaries w=0.03": summaries(0.03),
    "recall+summary": recall_then_summary,
}


def evaluate(memory: Memory, questions: list[Question], ranker: Ranker, source_of: dict[str, str]) -> dict[str, Any]:
    hits: dict[str, list[bool]] = defaultdict(list)
    latencies = []
    for q in questions:
        start = time.perf_counter()
        ranked = ranker(memory, q.text)
        latencies.append(time.perf_counter() - start)
        ok = q.evidence <= {source_of.get(p, "") for p in ranked[:K]}
        hits[CATEGORIES.get(q.category, str(q.category))].append(ok)
        hits["all"].append(ok)
    return {
        "r_at_10": {name: statistics.fmean(v) for name, v in hits.items()},
        "n": {name: len(v) for name, v in hits.items()},
        "p50_ms": statistics.median(latencies) * 1000,
    }


def run(path: Path, limit: int | None) -> dict[str, Any]:
    conversations = parse_file(path, "locomo")
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(memory=Path(tmp) / "mem")
        with Memory.init(settings, owner="me") as memory:
            start = time.perf_counter()
            memory.settings = memory.settings.with_(summaries_enabled=False)
            memory.ingest(conversations)
            ingest_s = time.perf_counter() - start
            start = time.perf_counter()
            sessions = sessions_of_posts(memory.context, [p.iri for p in memory.store.posts()])
            update_summaries(memory.context, sessions)
            summaries_s = time.perf_counter() - start
            source_of = {p.iri: p.source_id or "" for p in memory.store.posts()}
            questions, skipped = load_questions(path, set(source_of.values()))
            questions = questions[:limit] if limit else questions
            results = {name: evaluate(memory, questions, ranker, source_of) for name, ranker in RANKERS.items()}
    return {"file": path.name, "posts": len(source_of), "questions": len(questions), "skipped": skipped,
            "ingest_s": ingest_s, "summaries_s": summaries_s, "sessions": len(sessions), "rankers": results}


def report(result: dict[str, Any]) -> str:
    names = ["multi-hop", "temporal", "all"]
    lines = [
        f"{result['file']}: {result['posts']} posts, {result['questions']} questions "
        f"({result['skipped']} skipped: no evidence ids); ingest {result['ingest_s']:.1f} s, "
        f"extractive summaries of {result['sessions']} sessions {result['summaries_s']:.1f} s",
        f"  {'ranking':18s} " + " ".join(f"{n + ' R@10':>15s}" for n in names) + "   p50 ms",
    ]
    for name, r in result["rankers"].items():
        cells = " ".join(f"{r['r_at_10'].get(n, float('nan')):>8.3f} (n={r['n'].get(n, 0):3d})" for n in names)
        lines.append(f"  {name:18s} {cells}   {r['p50_ms']:6.1f}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH)
    parser.add_argument("--limit", type=int, default=None, help="first N questions only")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.path, args.limit)
    print(json.dumps(result) if args.json else report(result))


if __name__ == "__main__":
    main()

"""Evidence recall@10 of the dev sets inside the 1M lifetime memory, through LanceDB's vector index and through the
exact scan (issue 37: "hybrid recall p95 <= 50 ms, with R@10 on the dev sets within 0.01 of exact search").

    cp -a LIFETIME_1M COPY     # the turns are written into the memory: never the original
    python benchmarks/bench_lifetime_devsets.py --memory COPY \\
        [--locomo ../shared/data/locomo/locomo-conv-26.json] \\
        [--longmemeval ../shared/data/longmemeval/longmemeval-oracle-dev48.json] [--no-fold] \\
        [--small-run locomo=RUN] [--small-run longmemeval=RUN]

``bench_lifetime.py`` compares indexed and exact recall on the synthetic corpus, where a million texts from 60
made-up topics are near-duplicates by the thousand and "the exact top ten" is one draw among ties. Here the dev
sets' real turns are added to that memory as ``pcm ingest`` adds them (:meth:`Memory.ingest`: the store, the real
embedding model, the side index's own write path; each LongMemEval question's haystack sessions and the LoCoMo
conversation as their own sessions, speakers and dates), and every scored dev question (evidence, not adversarial
or ``_abs``) is recalled (hybrid, k 10) over the whole memory, switched between the vector index
(``ann_min_rows = 0``) and the exact scan (``ann_min_rows = 10**12``) as ``bench_lifetime.py`` switches them.
Printed per dataset: evidence R@10 both ways (all evidence turns in the top 10, the definition and helpers of
``bench_recall_memories.py``), their difference, the share of the exact top 10 the indexed recall returns, recall
wall and CPU p50/p95 both ways.

A rerun skips the turns already stored (ingest adds nothing twice). The rows the write added are not yet in the
vector index (LanceDB scans them flat beside it until they pass ``ann.STALE_SHARE`` of the table); the figures are
taken in that state, then once more after :meth:`SideIndex.optimize` folds them into the index (``--no-fold``
leaves the memory as it is). ``DIR/devsets.json`` records what was added and where each evidence turn is stored.
``--small-run DATASET=RUN`` adds, for contrast, the same R@10 over the per-item memories of a
``pcm eval DATASET FILE --llm none --out RUN`` run (``bench_recall_memories.run``).

In the default lifetime memory the 1M posts' vectors are synthetic (``make_lifetime.py``), the dev turns' and
questions' the real model's: the distractors compete with the dev turns in the full-text leg on equal terms, in the
vector leg hardly at all. In a copy of ``make_lifetime.py --texts english`` (English utterances on everyday topics,
embedded by the real model) they compete in both legs, which is the corpus the R@10 target is settled on.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_recall_memories  # noqa: E402
from bench_index import cpu_pressure, pct  # noqa: E402
from pcm.evaluation.datasets import EvalItem, EvalQuestion, load_items  # noqa: E402
from pcm.evaluation.metrics import hits_at, ranked_unique  # noqa: E402
from pcm.index.tables import POSTS_TABLE  # noqa: E402
from pcm.index.text import fts_query  # noqa: E402
from pcm.models import RecallHit  # noqa: E402

NEVER = 10**12
"""``ann_min_rows`` that keeps every search on the exact scan."""
K = 10
SHARED = REPO.parent / "shared" / "data"
RECORD = "devsets.json"
"""What this script added to the memory, in the memory's directory."""


@dataclass
class DevSet:
    """One dataset's items, its scored questions, and which sessions are its own (every other post is a
    distractor)."""

    name: str
    path: Path
    items: list[EvalItem]
    questions: list[EvalQuestion] = field(default_factory=list)
    sessions: set[str] = field(default_factory=set)

    @classmethod
    def load(cls, name: str, path: Path) -> DevSet:
        items = load_items(name, path)
        scored = [q for item in items for q in item.questions if q.evidence and not q.abstention]
        sessions = {c.id for item in items for c in item.conversations}
        return cls(name, path, items, scored, sessions)

    def ranked(self, hits: Sequence[RecallHit]) -> list[str]:
        """The hits as turn ids, best first: a dev turn by its ``source_id`` (what the evidence names), any other
        post by its IRI, so a distractor takes its place in the ranking without matching any evidence."""
        return ranked_unique(h.source_id if h.session in self.sessions else h.post for h in hits)


@dataclass
class Way:
    """One way of searching, over one dataset's questions: the hits and the time of each recall."""

    hits: list[list[RecallHit]] = field(default_factory=list)
    legs: list[list[int]] = field(default_factory=list)
    """Each recall's first vector leg (its ``depth`` slots, the prior applied), as :meth:`SideIndex._nearest`
    returned it."""
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


def ingest(memory: Any, sets: Sequence[DevSet]) -> dict[str, Any]:
    """Store every turn of every set through :meth:`Memory.ingest` (a session shared by two LongMemEval haystacks
    is the same session, stored once), and the record of where each turn is."""
    record: dict[str, Any] = {"sets": {}}
    for dev in sets:
        conversations = {c.id: c for item in dev.items for c in item.conversations}
        start, start_cpu = time.perf_counter(), time.process_time()
        report = memory.ingest(list(conversations.values()))
        wall, cpu = time.perf_counter() - start, time.process_time() - start_cpu
        naming = memory.naming
        posts = {
            f"{u.session} {u.source_id}": naming.post(naming.post_key(u.session, u.source_id, u.position))
            for c in conversations.values()
            for u in c.utterances
        }
        print(
            f"{dev.name}: {report.utterances} turns in {len(conversations)} sessions, {report.added} added, "
            f"{report.skipped} already stored; ingest {wall:.1f} s wall, {cpu:.1f} s CPU"
            + (f" ({report.added / wall:.0f} turns/s)" if report.added else "")
        )
        record["sets"][dev.name] = {
            "file": str(dev.path),
            "sessions": len(conversations),
            "turns": report.utterances,
            "scored_questions": len(dev.questions),
            "posts": posts,
        }
    return record


def index_state(index: Any) -> tuple[int, int]:
    """Rows of the posts table in its vector index, and rows LanceDB scans flat beside it."""
    indexed: tuple[int, int] = index._open_tables().vector_index_rows(POSTS_TABLE)
    return indexed


def run_way(index: Any, dev: DevSet, threshold: int) -> Way:
    """Every scored question of ``dev`` recalled with ``index.ann_min_rows`` at ``threshold``."""
    way = Way()
    kept, nearest = index.ann_min_rows, index._nearest

    def first_leg(*args: Any, **kwargs: Any) -> Any:
        slots, scores = nearest(*args, **kwargs)
        if len(way.legs) == len(way.hits):  # the first search of this recall
            way.legs.append(slots.tolist())
        return slots, scores

    index.ann_min_rows, index._nearest = threshold, first_leg
    index._query_cache.clear()
    try:
        for q in dev.questions:
            start, start_cpu = time.perf_counter(), time.process_time()
            hits = index.recall(q.text, k=K)
            way.wall.append(time.perf_counter() - start)
            way.cpu.append(time.process_time() - start_cpu)
            way.hits.append(hits)
    finally:
        index.ann_min_rows = kept
        del index._nearest
    return way


def vector_legs(index: Any, dev_sessions: set[str], indexed: Way, exact: Way) -> tuple[float, float]:
    """Of the exact first vector legs: the share of their rows that are lifetime posts, and the share of their dev
    turns the indexed legs hold too (averaged over the questions)."""
    posts = index._posts
    lifetime, found = [], []
    for a, b in zip(indexed.legs, exact.legs, strict=True):
        dev = {s for s in b if posts.record_at(s).session in dev_sessions}
        lifetime.append(1 - len(dev) / max(len(b), 1))
        found.append(len(dev & set(a)) / len(dev) if dev else 1.0)
    return sum(lifetime) / max(len(lifetime), 1), sum(found) / max(len(found), 1)


def peak_rss() -> str:
    return f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB"


def evidence_recall(dev: DevSet, way: Way) -> tuple[float, list[bool]]:
    found = [hits_at(dev.ranked(hits), q.evidence, (K,))[K] for q, hits in zip(dev.questions, way.hits, strict=True)]
    return sum(found) / max(len(found), 1), found


def overlap(indexed: Way, exact: Way) -> float:
    """The share of the exact top 10 the indexed recall returns, averaged over the questions."""
    shares = []
    for a, b in zip(indexed.hits, exact.hits, strict=True):
        wanted = {h.post for h in b}
        shares.append(len({h.post for h in a} & wanted) / max(len(wanted), 1))
    return sum(shares) / max(len(shares), 1)


def ms(values: list[float]) -> str:
    return f"{pct(values, 50) * 1e3:.1f} / {pct(values, 95) * 1e3:.1f} ms"


def measure(index: Any, sets: Sequence[DevSet], label: str) -> dict[str, Any]:
    """Both ways over every set, one set at a time (the index first, as ``bench_lifetime.py``), and the figures."""
    indexed_rows, flat_rows = index_state(index)
    print(f"\n[{label}] posts in the vector index {indexed_rows}, scanned flat beside it {flat_rows}; {cpu_pressure()}")
    out: dict[str, Any] = {"indexed_rows": indexed_rows, "flat_rows": flat_rows}
    dev_sessions = {s for dev in sets for s in dev.sessions}
    tables, texts = index._open_tables(), [fts_query(q.text) for dev in sets for q in dev.questions]
    cpu = []
    for text in texts:
        start = time.process_time()
        tables.fts_rows(tables.posts, text, index.recall_config.depth, None)
        cpu.append(time.process_time() - start)
    print(f"the full-text search alone (depth {index.recall_config.depth}), CPU p50 / p95: {ms(cpu)}")
    out["fts_cpu_ms"] = [pct(cpu, 50) * 1e3, pct(cpu, 95) * 1e3]
    pooled = {"index": 0, "exact": 0}
    for dev in sets:
        ways = {"index": run_way(index, dev, 0), "exact": run_way(index, dev, NEVER)}
        (r_index, ok_index), (r_exact, ok_exact) = (evidence_recall(dev, ways[w]) for w in ("index", "exact"))
        pooled["index"] += sum(ok_index)
        pooled["exact"] += sum(ok_exact)
        share = overlap(ways["index"], ways["exact"])
        lost = [q.id for q, a, b in zip(dev.questions, ok_index, ok_exact, strict=True) if b and not a]
        gained = [q.id for q, a, b in zip(dev.questions, ok_index, ok_exact, strict=True) if a and not b]
        print(
            f"{dev.name} ({len(dev.questions)} questions): evidence R@10 index {r_index:.3f}, exact {r_exact:.3f}, "
            f"difference {r_index - r_exact:+.3f}; top-10 overlap with exact {share:.3f}\n"
            f"  recall wall p50 / p95: index {ms(ways['index'].wall)}, exact {ms(ways['exact'].wall)}; "
            f"CPU p50 / p95: index {ms(ways['index'].cpu)}, exact {ms(ways['exact'].cpu)}"
            + (f"\n  found by exact only: {', '.join(lost)}" if lost else "")
            + (f"\n  found by the index only: {', '.join(gained)}" if gained else "")
        )
        dev_share = [
            sum(h.session in dev.sessions for h in hits) / max(len(hits), 1) for hits in ways["exact"].hits
        ]
        lifetime, found = vector_legs(index, dev_sessions, ways["index"], ways["exact"])
        print(
            f"  dev turns among the exact top 10: {sum(dev_share) / len(dev_share):.3f}; the first vector leg "
            f"(depth {index.recall_config.depth}, the prior applied): lifetime posts {lifetime:.3f} of the exact one, "
            f"its dev turns found by the index {found:.4f}"
        )
        out[dev.name] = {
            "n": len(dev.questions),
            "r10_index": r_index,
            "r10_exact": r_exact,
            "overlap": share,
            "lost": lost,
            "gained": gained,
            "lifetime_in_exact_leg": lifetime,
            "dev_turns_found_by_index_leg": found,
            **{
                f"{w}_{kind}_ms": [pct(getattr(ways[w], kind), 50) * 1e3, pct(getattr(ways[w], kind), 95) * 1e3]
                for w in ways
                for kind in ("wall", "cpu")
            },
        }
    n = sum(len(dev.questions) for dev in sets)
    print(
        f"all {n} questions: evidence R@10 index {pooled['index'] / n:.3f}, exact {pooled['exact'] / n:.3f}, "
        f"difference {(pooled['index'] - pooled['exact']) / n:+.3f}"
    )
    return out


def small_runs(assignments: Sequence[str], files: dict[str, Path]) -> None:
    """Evidence R@10 over a ``pcm eval --llm none`` run's per-item memories, as ``bench_recall_memories.py``
    measures it (a recall of 20, its first 10: recall's depth is 100 either way, so the same top 10)."""
    for assignment in assignments:
        name, _, run = assignment.partition("=")
        if name not in files:
            raise SystemExit(f"--small-run takes locomo=RUN or longmemeval=RUN, not {assignment!r}")
        result = bench_recall_memories.run(name, files[name], Path(run))
        overall = result["recall"]["overall"]
        print(f"{name} in its own small memories ({overall['n']} questions): evidence R@10 {overall['R@10']:.3f}")


def timed_step(label: str, fn: Callable[[], object]) -> None:
    start, start_cpu = time.perf_counter(), time.process_time()
    fn()
    print(f"{label}: {time.perf_counter() - start:.1f} s wall, {time.process_time() - start_cpu:.1f} s CPU")


def open_memory(directory: Path) -> Any:
    """The memory as ``pcm eval`` opens one: the side index on, no model (no extraction, extractive summaries)."""
    from pcm.memory import Memory
    from pcm.settings import LLMSpec, Settings

    return Memory.open(Settings(memory=directory).with_(llm=LLMSpec(), index_enabled=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memory", type=Path, required=True, help="a COPY of the 1M lifetime memory (written to)")
    parser.add_argument("--locomo", type=Path, default=SHARED / "locomo" / "locomo-conv-26.json")
    parser.add_argument("--longmemeval", type=Path, default=SHARED / "longmemeval" / "longmemeval-oracle-dev48.json")
    parser.add_argument("--no-fold", action="store_true", help="measure without folding the new rows into the index")
    parser.add_argument("--small-run", action="append", default=[], metavar="DATASET=RUN",
                        help="also the R@10 over a `pcm eval DATASET FILE --llm none --out RUN` run's memories")
    parser.add_argument("--ingest-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    files = {"locomo": args.locomo, "longmemeval": args.longmemeval}
    sets = [DevSet.load(name, path) for name, path in files.items()]
    if args.ingest_only:
        memory = open_memory(args.memory)
        try:
            timed_step("posts mirror loaded", lambda: len(memory.index._posts))
            record = ingest(memory, sets)
            print(f"{len(memory.index._posts)} posts in the memory; ingest process {peak_rss()}")
        finally:
            memory.close()
        (args.memory / RECORD).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        return
    print(f"before: {cpu_pressure()}")
    # a write reads the whole vector matrix into the mirror: in a process of its own, so this one holds only
    # what the measurement needs (at 1M posts the two together peaked at 7.5 GB)
    subprocess.run(
        [sys.executable, __file__, "--memory", str(args.memory), "--locomo", str(args.locomo),
         "--longmemeval", str(args.longmemeval), "--ingest-only"],
        check=True,
    )
    record = json.loads((args.memory / RECORD).read_text(encoding="utf-8"))
    memory = open_memory(args.memory)
    index = memory.index
    try:
        index.recall(sets[0].questions[0].text, k=K)  # the model and the mirror, outside the timings
        print(f"vector index from {index.ann_min_rows} rows; {len(index._posts)} posts; {peak_rss()}")
        results = {"before": measure(index, sets, "as found")}
        print(peak_rss())
        if not args.no_fold and results["before"]["flat_rows"] > 0:
            timed_step("\nSideIndex.optimize (folds the new rows into the vector index)", index.optimize)
            results["after"] = measure(index, sets, "after the fold")
            print(peak_rss())
        record["results"] = results
        record["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        (args.memory / RECORD).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    finally:
        memory.close()
    small_runs(args.small_run, files)
    print(f"after: {cpu_pressure()}")


if __name__ == "__main__":
    main()

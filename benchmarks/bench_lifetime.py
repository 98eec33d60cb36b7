"""A lifetime of conversations (issue 37): the scale figures on one memory of N utterances, with a baseline beside
each where one exists.

    python benchmarks/bench_lifetime.py [--posts 1000000] [--memory DIR] [--queries 200] [--asks 60]
        [--seconds 20] [--import-quads 10000000] [--skip ask,walks,endpoint,serve,import] [--texts english]
        [--warmup 100]

Builds the memory with ``make_lifetime.py`` (or reuses it), then prints:

- hybrid recall p50/p95 (query embedded by the real model, every leg), through LanceDB's vector index and, as the
  baseline, through the exact scan of every vector, in the same process; and the share of the exact top 10 the
  indexed recall returns (R@10 against exact, the same questions); the ``--warmup`` other questions asked before
  them are the process's first, reported apart (``lifetime_serving.others``);
- entity matching p95 for mentions that need the vector leg (no label matches), index against exact scan, and for
  known labels (no vector search at all);
- opening the memory and its first recall in a fresh process (no server; the model load timed apart, the OS file
  cache warm) and that process's peak resident memory;
- disk per utterance: the store and the index, with the index's parts;
- from ``lifetime_serving.py``: ask without the model (gold queries replayed) and the three walks on questions drawn
  from the memory's facts; 2-hop queries/s through ``pcm serve`` against a bare ``oxigraph serve-read-only`` on
  the same store; the peak resident memory of ``pcm serve`` after recalls and asks; and bulk import of
  ``--import-quads`` generated quads against bare ``bulk_load`` of the same file (``--skip`` leaves rows out).

The stored vectors are synthetic (see ``make_lifetime.py``); the questions are embedded by the real model, so the
latency includes a real embedding while the neighbourhoods searched are the synthetic ones. R@10 against exact is
therefore also measured with questions embedded like the stored texts (``in-distribution``). With ``--texts
english`` (a memory of English utterances the real model embedded, ``make_lifetime.py --texts english``) the real
model's questions are the in-distribution ones: they ask about the memory's topics in English, and the synthetic
rows are left out.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

import lifetime_english  # noqa: E402
import lifetime_serving as serving  # noqa: E402
import make_lifetime  # noqa: E402
from bench_index import cpu_pressure, pct  # noqa: E402
from pcm.index.tables import ENTITIES_TABLE, POSTS_TABLE  # noqa: E402

NEVER = 10**12


CPU: dict[str, tuple[float, float]] = {}
"""CPU time per call (all threads of the process), p50 and p95 in ms, of the last :func:`timed` run under each
label: on a shared machine wall times swing with the other load, CPU time much less."""


def timed(fn: Callable[[str], object], inputs: Sequence[str], label: str = "") -> tuple[float, float]:
    times, cpu = [], []
    for text in inputs:
        start, start_cpu = time.perf_counter(), time.process_time()
        fn(text)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    CPU[label] = (pct(cpu, 50) * 1e3, pct(cpu, 95) * 1e3)
    return pct(times, 50) * 1e3, pct(times, 95) * 1e3


def cpu_figures(label: str) -> str:
    return f"{CPU[label][0]:.1f} / {CPU[label][1]:.1f} ms"


def questions(seed: int, count: int, texts: str = "made-up") -> list[str]:
    """Questions in the memory's words: half in the first person (the owner prior), half not."""
    rng = random.Random(seed)
    if texts == "english":
        return [_english_question(rng, i) for i in range(count)]
    topics = make_lifetime._vocabulary(seed)
    out = []
    for i in range(count):
        topic = topics[rng.randrange(len(topics))]
        words = " ".join(rng.sample(topic, 3))
        out.append(f"What did I say about {words}?" if i % 2 else f"When was {words} discussed?")
    return out


def _english_question(rng: random.Random, i: int) -> str:
    nouns, verbs, adjectives = lifetime_english.TOPICS[rng.choice(sorted(lifetime_english.TOPICS))]
    base, _ = rng.choice(verbs).split("/")
    noun, adjective = rng.choice(nouns), rng.choice(adjectives)
    shapes = (f"What did I say about the {adjective} {noun}?", f"When did I {base} the {noun}?",
              f"Was the {noun} {adjective}?", f"How did it go when we tried to {base} the {noun}?")
    return shapes[i % len(shapes)]


def mentions(seed: int, count: int, texts: str = "made-up") -> list[str]:
    """Mentions no label matches (the vector leg runs): descriptions in the memory's words."""
    rng = random.Random(seed + 1)
    if texts == "english":
        topics = [lifetime_english.TOPICS[t] for t in sorted(lifetime_english.TOPICS)]
        return [f"the {rng.choice(make_lifetime.THINGS)} for the {rng.choice(topics[i % len(topics)][0])}"
                for i in range(count)]
    topics = make_lifetime._vocabulary(seed)
    return [
        f"the {rng.choice(make_lifetime.THINGS)} {rng.choice(topics[i % len(topics)])} one" for i in range(count)
    ]


def du(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


COLD = """
import json, resource, sys, time
t0, c0 = time.perf_counter(), time.process_time()
sys.path.insert(0, {src!r})
from pathlib import Path
from pcm.index import get_embedder
from pcm.memory import Memory
from pcm.settings import Settings
imported = time.perf_counter()
get_embedder().encode(["warm up"])
model = time.perf_counter()
memory = Memory.open(Settings(memory=Path({memory!r})))
opened, c_opened = time.perf_counter(), time.process_time()
memory.index.recall({question!r}, k=10)
first, c_first = time.perf_counter(), time.process_time()
print(json.dumps({{"import": imported - t0, "model": model - imported, "open": opened - model,
                  "first_recall": first - opened, "first_recall_cpu": c_first - c_opened,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def cold_open(directory: Path, question: str) -> dict[str, float]:
    code = COLD.format(src=str(REPO / "src"), memory=str(directory), question=question)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    line: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return line


def vector_leg_share(
    index: Any, embedder: Any, asks: Sequence[str], with_threshold: Callable[[int, Callable[[], object]], object]
) -> float:
    """The vector leg alone: the mean share of the exact scan's top 10 the vector index returns, the questions
    embedded by ``embedder``."""
    shares = []
    for q in asks:
        vector = embedder.encode([q])[0]
        found = with_threshold(0, lambda v=vector: index._nearest(POSTS_TABLE, v, 10))[0]  # type: ignore[index]
        exact = with_threshold(NEVER, lambda v=vector: index._nearest(POSTS_TABLE, v, 10))[0]  # type: ignore[index]
        shares.append(len(set(found.tolist()) & set(exact.tolist())) / max(len(exact), 1))
    return sum(shares) / len(shares)


def in_distribution(
    index: Any, asks: Sequence[str], seed: int, with_threshold: Callable[[int, Callable[[], object]], object]
) -> None:
    """R@10 against exact with the questions embedded as the synthetic texts were (made-up memories only)."""
    synthetic = make_lifetime.SyntheticEmbedder(seed)
    share = vector_leg_share(index, synthetic, asks[:100], with_threshold)
    print(f"vector leg R@10 against exact, in-distribution questions: {share:.3f}")
    index.embedder, real = synthetic, index.embedder  # questions embedded as the stored texts were
    index._query_cache.clear()
    shares = []
    for q in asks:
        found = {h.post for h in with_threshold(0, lambda q=q: index.recall(q, k=10))}  # type: ignore[attr-defined]
        exact = [h.post for h in with_threshold(NEVER, lambda q=q: index.recall(q, k=10))]  # type: ignore[attr-defined]
        shares.append(len(found & set(exact)) / max(len(exact), 1))
    index.embedder = real
    index._query_cache.clear()
    print(f"hybrid recall R@10 against exact, in-distribution questions: {sum(shares) / len(shares):.3f}")


def _match_row(
    index: Any, said: Sequence[str], first: Sequence[str], rows: dict[str, int],
    with_threshold: Callable[[int, Callable[[], object]], object],
) -> None:
    """Entity matching through the index and the exact scan, and for known labels; ``first`` matched before
    them (``lifetime_serving.others``)."""
    for mention in first:
        index.match_entities(mention, k=10)
    results: dict[str, tuple[float, float]] = {}
    labels = [r.label for r in list(index._entities.live_records())[: len(said)]]
    for label, value in (("index", 0), ("exact", NEVER)):
        index._query_cache.clear()
        results[label] = with_threshold(  # type: ignore[assignment]
            value, lambda label=label: timed(lambda m: index.match_entities(m, k=10), said, f"match {label}")
        )
    known = timed(lambda m: index.match_entities(m, k=10), labels)
    print(
        f"entity matching @{rows[ENTITIES_TABLE]} entities, mentions needing vectors: index p50 "
        f"{results['index'][0]:.1f} ms p95 {results['index'][1]:.1f} ms | exact scan p50 {results['exact'][0]:.1f} ms "
        f"p95 {results['exact'][1]:.1f} ms; known labels p95 {known[1]:.1f} ms (mention embedding included); CPU p50 / p95 "
        f"index {cpu_figures('match index')}, exact {cpu_figures('match exact')}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posts", type=int, default=1_000_000)
    parser.add_argument("--memory", type=Path, default=None)
    parser.add_argument("--seed", type=int, default=37)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--asks", type=int, default=60, help="questions for the ask and walk rows")
    parser.add_argument("--seconds", type=float, default=20.0, help="each endpoint load")
    parser.add_argument("--import-quads", type=int, default=10_000_000)
    parser.add_argument("--skip", default="", help="rows to leave out, comma-separated: ask,walks,endpoint,serve,import")
    parser.add_argument("--texts", choices=make_lifetime.TEXTS, default="made-up", help="the memory's utterances")
    parser.add_argument("--warmup", type=int, default=100, help="other questions, mentions and asks put first (0: none)")
    args = parser.parse_args()
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    directory = args.memory or make_lifetime.default_directory(args.posts)
    print(f"before: {cpu_pressure()}")
    record = make_lifetime.build(directory, args.posts, args.seed, args.texts)
    posts = int(record["posts"])  # type: ignore[call-overload]

    cold = cold_open(directory, questions(args.seed, 1, args.texts)[0])
    print(
        f"open + first recall, fresh process (no server): open {cold['open']:.2f} s, first hybrid recall "
        f"{cold['first_recall']:.2f} s, CPU {cold['first_recall_cpu']:.2f} s (model load {cold['model']:.1f} s and "
        f"imports {cold['import']:.1f} s apart); "
        f"peak RSS {cold['rss_mb']:.0f} MB"
    )

    from pcm.index import get_embedder
    from pcm.memory import Memory
    from pcm.settings import Settings

    embedder = get_embedder()
    memory = Memory.open(Settings(memory=directory))
    index = memory.index
    tables = index._open_tables()
    threshold = index.ann_min_rows
    start = time.perf_counter()
    rows = {POSTS_TABLE: len(index._posts), ENTITIES_TABLE: len(index._entities)}
    print(f"mirrors loaded in {time.perf_counter() - start:.1f} s: {rows[POSTS_TABLE]} posts, "
          f"{rows[ENTITIES_TABLE]} entities; vector index from {threshold} rows")
    for name in (POSTS_TABLE, ENTITIES_TABLE):
        if not tables.vector_indexed[name]:
            start = time.perf_counter()
            tables.build_vector_index(name)  # below the threshold: built here so both ways can be timed
            print(f"built the {name} vector index ({rows[name]} rows) in {time.perf_counter() - start:.1f} s")
    asks = questions(args.seed, args.queries, args.texts)
    first = serving.others(lambda seed, n: questions(seed, n, args.texts), args.seed, asks, args.warmup)
    index.recall((first or asks)[0], k=10)  # the term graph and bfloat16 copy, outside the timings

    def with_threshold(value: int, fn: Callable[[], object]) -> object:
        index.ann_min_rows = value
        try:
            return fn()
        finally:
            index.ann_min_rows = threshold

    if first:
        early = with_threshold(0, lambda: timed(lambda q: index.recall(q, k=10), first, "recall first"))
        print(f"hybrid recall, the process's first {len(first)} questions (other ones): p50 {early[0]:.1f} ms "  # type: ignore[index]
              f"p95 {early[1]:.1f} ms; CPU p50 / p95 {cpu_figures('recall first')}")  # type: ignore[index]
    if index._residing is not None:  # the vector matrix read beside the first questions: adopted before the timings
        start = time.perf_counter()
        index._residing.result()
        print(f"vector matrix read into memory after {index.resident_after} recalls; waited "
              f"{time.perf_counter() - start:.1f} s for the end of the read")
        with_threshold(0, lambda: index.recall(first[0], k=10))
    if index._posts.deferred():
        print(f"the posts' vector matrix stays on disk (larger than index_resident_mb, {index.resident_mb} MB)")
    results: dict[str, tuple[float, float]] = {}
    for label, value in (("index", 0), ("exact", NEVER)):
        index._query_cache.clear()
        results[label] = with_threshold(  # type: ignore[assignment]
            value, lambda label=label: timed(lambda q: index.recall(q, k=10), asks, f"recall {label}")
        )
    index._posts.vectors  # noqa: B018 - read by the exact scan already; the index pass again with it in memory
    index._query_cache.clear()
    resident = with_threshold(0, lambda: timed(lambda q: index.recall(q, k=10), asks, "recall resident"))
    print(f"hybrid recall through the index with the vector matrix in memory (PCM_INDEX_RESIDENT_MB above its "
          f"size): p50 {resident[0]:.1f} ms p95 {resident[1]:.1f} ms; CPU p50 / p95 "  # type: ignore[index]
          f"{cpu_figures('recall resident')}")
    shares = []
    for q in asks:
        found = {h.post for h in with_threshold(0, lambda q=q: index.recall(q, k=10))}  # type: ignore[attr-defined]
        exact = [h.post for h in with_threshold(NEVER, lambda q=q: index.recall(q, k=10))]  # type: ignore[attr-defined]
        shares.append(len(found & set(exact)) / max(len(exact), 1))
    print(
        f"hybrid recall @{posts}: index p50 {results['index'][0]:.1f} ms p95 {results['index'][1]:.1f} ms | "
        f"exact scan p50 {results['exact'][0]:.1f} ms p95 {results['exact'][1]:.1f} ms | "
        f"R@10 against exact {sum(shares) / len(shares):.3f} (real-model questions); CPU p50 / p95 index "
        f"{cpu_figures('recall index')}, exact {cpu_figures('recall exact')}"
    )
    if args.texts == "english":
        share = vector_leg_share(index, index.embedder, asks[:100], with_threshold)
        print(f"vector leg R@10 against exact, real-model questions: {share:.3f}")
    else:
        in_distribution(index, asks, args.seed, with_threshold)
    said = mentions(args.seed, args.queries, args.texts)
    said_first = serving.others(lambda seed, n: mentions(seed, n, args.texts), args.seed, said, args.warmup)
    _match_row(index, said, said_first, rows, with_threshold)
    if "ask" not in skip:
        serving.ask_row(memory, args.seed, args.asks, args.warmup)
    if "walks" not in skip:
        serving.traversal_row(memory, args.seed, args.asks)
    agents = serving.friends(memory, 2000)
    memory.close()

    side = directory / "index"
    store = sum(du(p) for p in directory.iterdir() if p.name not in {"index", make_lifetime.RECORD})
    parts = {p.name: du(p) for p in sorted(side.iterdir())} if side.exists() else {}
    total = store + du(side)
    breakdown = ", ".join(f"{name} {size / posts:.0f}" for name, size in parts.items() if size > 1024)
    print(
        f"disk per utterance: {total / posts:.0f} bytes (store {store / posts:.0f}, index {du(side) / posts:.0f}: "
        f"{breakdown}); {record['quads']} quads, {store / max(int(record['quads']), 1):.0f} bytes of store per quad"  # type: ignore[call-overload]
    )
    del embedder
    if "endpoint" not in skip:
        serving.endpoint_row(directory, agents, 4, args.seconds)
    if "serve" not in skip:
        serving.serve_rss_row(directory, asks[:100])
    if "import" not in skip:
        serving.import_row(args.import_quads)
    print(f"after: {cpu_pressure()}")


if __name__ == "__main__":
    main()

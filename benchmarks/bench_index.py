"""Side-index speed: batch indexing throughput, recall latency at 100k posts, entity matching at 100k entities.

The relevance decision of episodic answers (:meth:`SideIndex.relevance`) is timed beside recall: its first call
after opening builds the word tables of every post, later calls cost one query embedding and a postings walk.

    python benchmarks/bench_index.py [--posts 100000] [--entities 100000] [--queries 200]

Targets (issue 4): batch indexing >= 300 utterances/s with embedding; recall p95 <= 50 ms at 100k posts; entity
matching p95 <= 15 ms at 100k entities. The 100k tables are filled with synthetic text and random unit vectors
(embedding 200k texts would take ten minutes and does not change search cost), then reopened with the real
model, so every query below is embedded for real. The throughput run embeds real LoCoMo turns.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from pcm.index import EntityRecord, PostRecord, SideIndex, get_embedder  # noqa: E402
from pcm.index.embedder import MODEL_DIM, MODEL_NAME, Embedder  # noqa: E402

LOCOMO = REPO.parent / "shared" / "data" / "locomo" / "locomo-conv-26.json"
SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ra",
    "ne",
    "su",
    "ta",
    "vi",
    "do",
    "pe",
    "li",
    "an",
    "ber",
    "ton",
    "mar",
    "ell",
    "ric",
    "sen",
    "dor",
    "wyn",
]
WORDS = [
    "garden",
    "trip",
    "museum",
    "painting",
    "camping",
    "school",
    "coffee",
    "dinner",
    "guitar",
    "doctor",
    "holiday",
    "birthday",
    "movie",
    "book",
    "recipe",
    "hike",
    "beach",
    "concert",
    "family",
    "friend",
    "work",
    "project",
    "meeting",
    "weekend",
    "morning",
    "adoption",
    "puppy",
    "violin",
    "marathon",
    "pottery",
    "conference",
    "mentor",
    "city",
    "country",
    "river",
    "mountain",
    "bakery",
    "library",
    "festival",
    "interview",
    "promotion",
    "wedding",
]


class RandomEmbedder(Embedder):
    """Same name and dimension as the real model, random unit vectors: fills big tables without a model."""

    name = MODEL_NAME
    dim = MODEL_DIM

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        self._rng = np.random.default_rng(seed)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        vectors = self._rng.standard_normal((len(texts), self.dim)).astype(np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def cpu_pressure() -> str:
    """How much CPU other processes were taking (Linux PSI), so timings from a shared machine can be read."""
    try:
        some = Path("/proc/pressure/cpu").read_text().splitlines()[0].split()
        return (
            "CPU pressure "
            + ", ".join(f for f in some[1:3])
            + f"; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
        )
    except (OSError, IndexError):
        return f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def timed(fn: Callable[[str], object], inputs: list[str]) -> dict[str, float]:
    """Wall-clock percentiles, plus this process's CPU time per call (steadier when other processes load the
    machine: compare before/after figures on it when the wall-clock ones are noisy)."""
    times, cpu = [], []
    for text in inputs:
        start, start_cpu = time.perf_counter(), time.process_time()
        fn(text)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return {
        "p50": pct(times, 50) * 1000,
        "p95": pct(times, 95) * 1000,
        "max": max(times) * 1000,
        "cpu50": pct(cpu, 50) * 1000,
        "cpu95": pct(cpu, 95) * 1000,
    }


def locomo_turns() -> list[str]:
    from pcm.conversations import parse_file

    return [u.content for c in parse_file(LOCOMO, "locomo") for u in c.utterances]


def throughput(tmp: Path, batches: int = 3) -> tuple[float, float, float]:
    """Posts/s of ``upsert_posts`` on LoCoMo turns: the first (cold) batch, the median of warm batches, and the
    warm batches' posts per CPU-second of this process (all threads: ~2x the rate on two idle cores)."""
    turns = locomo_turns()
    index = SideIndex.open(tmp / "throughput", embedder=get_embedder())
    rates, cpu_rates = [], []
    for b in range(batches + 1):
        records = [
            PostRecord(
                f"urn:bench:t{b}:{i}",
                f"s{b}:{i // 20}",
                "user" if i % 2 else "other",
                "Ann" if i % 2 else "Bob",
                datetime(2024, 1, 1) + timedelta(minutes=i),
                f"{text} ({b})",
                None,
                i % 20,
            )
            for i, text in enumerate(turns)
        ]
        start, start_cpu = time.perf_counter(), time.process_time()
        index.upsert_posts(records)
        rates.append(len(records) / (time.perf_counter() - start))
        cpu_rates.append(len(records) / (time.process_time() - start_cpu))
    index.close()
    return rates[0], statistics.median(rates[1:]), statistics.median(cpu_rates[1:])


def synthetic_posts(n: int, rng: random.Random) -> list[PostRecord]:
    speakers = [_name(rng) for _ in range(50)]
    start = datetime(2020, 1, 1)
    posts = []
    for i in range(n):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 20)))
        posts.append(
            PostRecord(
                f"urn:bench:p{i}",
                f"s{i // 25}",
                "user" if i % 2 else "other",
                speakers[(i // 25 + i % 2) % 50],
                start + timedelta(hours=i),
                f"I went to the {words}",
                None,
                i % 25,
            )
        )
    return posts


def synthetic_entities(n: int, rng: random.Random) -> list[EntityRecord]:
    out = []
    for i in range(n):
        label = f"{_name(rng)} {_name(rng)}"
        out.append(
            EntityRecord(
                f"urn:bench:e{i}",
                label,
                (label.split()[0],) if i % 3 == 0 else (),
                ("schema:Person",),
                f"{label}, a person who likes {rng.choice(WORDS)}",
            )
        )
    return out


def _name(rng: random.Random) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()


def scale(tmp: Path, n_posts: int, n_entities: int, n_queries: int) -> None:
    rng = random.Random(7)
    posts, entities = synthetic_posts(n_posts, rng), synthetic_entities(n_entities, rng)
    start = time.perf_counter()
    index = SideIndex.open(tmp / "scale", embedder=RandomEmbedder())
    index.upsert_posts(posts)
    index.upsert_entities(entities)
    index.optimize()
    index.close()
    print(
        f"filled {n_posts} posts + {n_entities} entities (random vectors) in {time.perf_counter() - start:.1f} s"
    )

    embedder = get_embedder()
    embedder.encode(["warm up"])
    start = time.perf_counter()
    index = SideIndex.open(tmp / "scale", embedder=embedder)
    opened = time.perf_counter()
    index.post_iris()
    loaded_posts = time.perf_counter()
    index.entity_iris()
    loaded_entities = time.perf_counter()
    index.recall("warm up the term graph", k=1, mode="fts")
    index.recall("warm up the term graph", k=1)
    print(
        f"open {opened - start:.2f} s; first use loads the mirrors: posts {loaded_posts - opened:.2f} s, "
        f"entities {loaded_entities - loaded_posts:.2f} s; the term graph from its file with the first hybrid "
        f"recall {time.perf_counter() - loaded_entities:.2f} s"
    )

    questions = [
        f"When did {rng.choice(posts).speaker} go to the {rng.choice(WORDS)} {rng.choice(WORDS)}?"
        for _ in range(n_queries)
    ]
    r = timed(lambda q: embedder.encode([q]), [f"{q} (embedding alone)" for q in questions])
    print(f"query embedding alone: p50 {r['p50']:.1f} ms  p95 {r['p95']:.1f} ms")
    for mode in ("hybrid", "fts", "vector"):
        index._query_cache.clear()  # every mode embeds its queries afresh, as a new CLI call would
        r = timed(lambda q, m=mode: index.recall(q, k=10, mode=m), questions)
        print(
            f"recall {mode:6s} @{n_posts}: p50 {r['p50']:.1f} ms  p95 {r['p95']:.1f} ms  max {r['max']:.1f} ms"
            f"  (CPU p50 {r['cpu50']:.1f} ms  p95 {r['cpu95']:.1f} ms)"
        )
    r = timed(lambda q: index.recall(q, k=10, session="s7", since=datetime(2020, 1, 2)), questions[:50])
    print(f"recall filtered @{n_posts}: p50 {r['p50']:.1f} ms  p95 {r['p95']:.1f} ms")

    # the relevance decision of episodic answers: its first call tokenises every post into the word tables
    index._query_cache.clear()
    start, start_cpu = time.perf_counter(), time.process_time()
    index.relevance(questions[0])
    print(
        f"relevance first decision @{n_posts} (builds the word tables): {time.perf_counter() - start:.2f} s"
        f"  (CPU {time.process_time() - start_cpu:.2f} s)"
    )
    r = timed(index.relevance, questions[1:])
    print(
        f"relevance per question @{n_posts}: p50 {r['p50']:.1f} ms  p95 {r['p95']:.1f} ms  max {r['max']:.1f} ms"
        f"  (CPU p50 {r['cpu50']:.1f} ms  p95 {r['cpu95']:.1f} ms)"
    )

    picks = [rng.choice(entities) for _ in range(n_queries)]
    mentions = []
    for i, e in enumerate(picks):
        kind = i % 4
        mentions.append(
            [e.label, e.label.lower(), e.label.split()[-1], f"{rng.choice(WORDS)} {rng.choice(WORDS)}"][kind]
        )
    index._query_cache.clear()
    r = timed(lambda m: index.match_entities(m, k=10), mentions)
    print(
        f"match_entities @{n_entities} (fresh mentions): p50 {r['p50']:.1f} ms  p95 {r['p95']:.1f} ms  "
        f"max {r['max']:.1f} ms  (CPU p50 {r['cpu50']:.1f} ms  p95 {r['cpu95']:.1f} ms)"
    )
    found = 0
    for e in picks[:50]:
        best = index.match_entities(e.label, k=1)[0]
        found += best.how.startswith("exact") and best.label.casefold() == e.label.casefold()
    print(f"exact labels found first: {found}/50")
    start = time.perf_counter()
    index.optimize()
    print(f"optimize @{n_posts}: {time.perf_counter() - start:.2f} s")
    index.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posts", type=int, default=100_000)
    parser.add_argument("--entities", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--skip-throughput", action="store_true")
    args = parser.parse_args()
    print(f"before: {cpu_pressure()}")
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_throughput:
            cold, warm, per_cpu = throughput(Path(tmp))
            print(
                f"batch indexing (LoCoMo turns, embedding included): cold {cold:.0f} posts/s, warm {warm:.0f} posts/s"
                f" ({per_cpu:.0f} posts per CPU-second)"
            )
        scale(Path(tmp), args.posts, args.entities, args.queries)
    print(f"after: {cpu_pressure()}")


if __name__ == "__main__":
    main()

"""Tune LanceDB's vector index on a lifetime memory's own vectors: recall@10 of the vector leg against the exact
scan, and its latency, for each index kind and search setting.

    python benchmarks/tune_ann.py [--posts 100000] [--memory DIR] [--queries 200]
        [--builds IVF_HNSW_SQ:2,IVF_PQ:316:48] [--nprobes 1,2,4] [--ef 200,500] [--refine 1,5,10]

The utterances table of the memory (``make_lifetime.py``) is copied to a scratch table, so the memory itself is not
touched. A build is ``KIND:PARTITIONS[:SUB_VECTORS]``. Queries are the benchmark questions embedded as the stored
texts were (in distribution, see ``bench_lifetime.py``), each searched twice as recall searches it: for the
``DEPTH`` nearest rows, and again moved towards its first five (the feedback leg); with and without the owner
filter (``role = 'user'``). A search's candidates are re-scored exactly, as :mod:`pcm.index.sideindex` does, and
recall@10 is the share of the exact top 10 found in the re-scored top 10 (``R@100`` likewise for the leg's whole
depth, which is what the fusion reads). The exact scan's latency is printed first as the baseline.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from itertools import product
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

from lancedb.index import IvfFlat, IvfHnswSq, IvfPq  # noqa: E402

import make_lifetime  # noqa: E402
from bench_ann import mirror_of  # noqa: E402
from bench_index import cpu_pressure, pct  # noqa: E402
from bench_lifetime import questions  # noqa: E402
from pcm.index import ann  # noqa: E402
from pcm.index.recall import DEPTH, PRF_DOCS, PRF_VECTOR_BETA  # noqa: E402
from pcm.index.tables import POSTS_TABLE  # noqa: E402

OWNER = "role = 'user'"


def config(spec: str) -> Any:
    kind, *rest = spec.split(":")
    parts = int(rest[0])
    if kind == "IVF_HNSW_SQ":
        return IvfHnswSq(distance_type=ann.METRIC, num_partitions=parts)
    if kind == "IVF_PQ":
        return IvfPq(
            distance_type=ann.METRIC, num_partitions=parts, num_sub_vectors=int(rest[1]) if rest[1:] else 48
        )
    if kind == "IVF_FLAT":
        return IvfFlat(distance_type=ann.METRIC, num_partitions=parts)
    raise SystemExit(f"unknown index kind {kind!r}")


def search(
    table: Any, q: np.ndarray, n: int, nprobes: int, ef: int, refine: int, where: str | None
) -> list[str]:
    builder = (
        table.search(q, vector_column_name="vector")
        .distance_type(ann.METRIC)
        .nprobes(nprobes)
        .ef(max(ef, n * max(refine, 1)))
        .limit(n)
        .select(["iri"])
    )
    if refine > 0:
        builder = builder.refine_factor(refine)
    if where:
        builder = builder.where(where, prefilter=True)
    iris: list[str] = builder.to_arrow().column("iri").to_pylist()
    return iris


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posts", type=int, default=100_000)
    parser.add_argument("--memory", type=Path, default=None)
    parser.add_argument("--seed", type=int, default=37)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--builds", default="IVF_HNSW_SQ:2")
    parser.add_argument("--nprobes", default="1,2")
    parser.add_argument("--ef", default="200,500")
    parser.add_argument("--refine", default="0,1,5")
    parser.add_argument(
        "--scan-sizes",
        default="",
        help="also time the exact scan over this many rows (the memory's vectors repeated with noise), e.g. 1000000",
    )
    parser.add_argument(
        "--scratch", type=Path, default=None, help="keep the scratch tables here between runs"
    )
    args = parser.parse_args()
    import lancedb

    directory = args.memory or make_lifetime.default_directory(args.posts)
    print(f"before: {cpu_pressure()}")
    source = lancedb.connect(str(directory / "index")).open_table(POSTS_TABLE)
    data = source.search().select(["iri", "role", "vector"]).limit(source.count_rows()).to_arrow()
    vectors = np.stack(data.column("vector").to_numpy(zero_copy_only=False)).astype(np.float32)
    iris = data.column("iri").to_pylist()
    mirror = mirror_of(vectors)
    mirror.slot_of = {iri: i for i, iri in enumerate(iris)}
    owner = np.array([r == "user" for r in data.column("role").to_pylist()])
    synthetic = make_lifetime.SyntheticEmbedder(args.seed)
    asks = synthetic.encode(questions(args.seed, args.queries))
    cases: list[tuple[np.ndarray, np.ndarray | None]] = []
    for q in asks:
        top, _ = mirror.top_by_vector(q, PRF_DOCS)
        moved = q + PRF_VECTOR_BETA * vectors[top].mean(axis=0)
        moved = (moved / np.linalg.norm(moved)).astype(np.float32)
        cases += [(q, None), (moved, None), (q, owner)]
    mirror.top_by_vector(asks[0], DEPTH)
    truth, times = [], []
    for q, mask in cases:
        start = time.perf_counter()
        slots, _ = mirror.top_by_vector(q, DEPTH, mask)
        times.append(time.perf_counter() - start)
        truth.append(slots.tolist())
    print(
        f"{len(vectors)} rows, {len(cases)} searches (k {DEPTH}); exact scan p50 {pct(times, 50) * 1e3:.1f} ms "
        f"p95 {pct(times, 95) * 1e3:.1f} ms"
    )
    scratch = args.scratch or Path(tempfile.mkdtemp(prefix="tune-ann-"))
    db = lancedb.connect(str(scratch))
    for spec in (b for b in args.builds.split(",") if b):
        name = spec.replace(":", "_")
        if name in db.list_tables().tables:
            table = db.open_table(name)
            print(f"{spec}: reusing the scratch table")
        else:
            table = db.create_table(name, data=data.select(["iri", "role", "vector"]))
            start = time.perf_counter()
            table.create_index("vector", config=config(spec), name=ann.INDEX_NAME)
            print(f"{spec}: built in {time.perf_counter() - start:.1f} s")
        for nprobes, ef, refine in product(
            (int(x) for x in args.nprobes.split(",")),
            (int(x) for x in args.ef.split(",")),
            (int(x) for x in args.refine.split(",")),
        ):
            if not spec.startswith("IVF_HNSW") and ef != int(args.ef.split(",")[0]):
                continue  # ef is HNSW's only
            times, r10, r100 = [], [], []
            kinds: dict[str, list[float]] = {"plain": [], "feedback": [], "owner": []}
            for number, ((q, mask), expected) in enumerate(zip(cases, truth, strict=True)):
                start = time.perf_counter()
                found = search(table, q, DEPTH, nprobes, ef, refine, OWNER if mask is not None else None)
                slots = np.fromiter((mirror.slot_of[i] for i in found), dtype=np.int64)
                top, _ = mirror.rescore(slots, q, DEPTH, mask)
                times.append(time.perf_counter() - start)
                r10.append(len(set(top[:10].tolist()) & set(expected[:10])) / 10)
                kinds[("plain", "feedback", "owner")[number % 3]].append(r10[-1])
                r100.append(len(set(top.tolist()) & set(expected)) / len(expected))
            print(
                f"  nprobes {nprobes:>3} ef {ef:>4} refine {refine:>2}: p50 {pct(times, 50) * 1e3:6.1f} ms "
                f"p95 {pct(times, 95) * 1e3:6.1f} ms  R@10 {statistics.mean(r10):.4f}  R@100 {statistics.mean(r100):.4f}"
                f"  (R@10 plain/feedback/owner "
                + "/".join(f"{statistics.mean(v):.3f}" for v in kinds.values())
                + f", worst {min(r10):.1f})",
                flush=True,
            )
    times = []
    for q, mask in cases:
        start = time.perf_counter()
        mirror.top_by_vector(q, DEPTH, mask)
        times.append(time.perf_counter() - start)
    print(f"exact scan again: p50 {pct(times, 50) * 1e3:.1f} ms p95 {pct(times, 95) * 1e3:.1f} ms")
    rng = np.random.default_rng(args.seed)
    for size in (int(x) for x in args.scan_sizes.split(",") if x):
        rows = vectors[rng.integers(0, len(vectors), size)]
        rows += rng.standard_normal(rows.shape, dtype=np.float32) * (0.3 / np.sqrt(rows.shape[1]))
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        big = mirror_of(rows)
        del rows
        big.top_by_vector(asks[0], DEPTH)
        times, cpu = [], []
        for q in asks:
            start, start_cpu = time.perf_counter(), time.process_time()
            big.top_by_vector(q, DEPTH)
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        print(
            f"exact scan over {size} rows: p50 {pct(times, 50) * 1e3:.1f} ms p95 {pct(times, 95) * 1e3:.1f} ms, "
            f"CPU p50 {pct(cpu, 50) * 1e3:.1f} ms"
        )
        del big
    print(f"after: {cpu_pressure()}")


if __name__ == "__main__":
    main()

"""Exact scan against LanceDB's approximate indexes for the vector legs: latency and recall@10 at several sizes.

    python benchmarks/bench_ann.py [--sizes 10000,30000,100000] [--queries 200] [--index IVF_HNSW_SQ,IVF_PQ]

For each size it fills a LanceDB table with clustered synthetic unit vectors of the real model's dimension (a
Gaussian mixture: real sentence embeddings are clustered, and uniform random vectors, which have no neighbours
worth the name, would make any approximate index look worse than it is on text), builds each index, and times the
``k = 40`` search the recall's vector leg asks for (``DEPTH``) three ways:

- ``exact``: the in-memory scan (:meth:`pcm.index.mirror.PostMirror.top_by_vector`, bfloat16 pass then exact
  re-scoring), the reference;
- ``<index>``: LanceDB's index alone (``nprobes``, ``refine_factor`` as given), candidates re-scored exactly in
  the mirror, as :mod:`pcm.index.sideindex` does;
- ``<index>+tail``: the same after appending 2% unindexed rows, which LanceDB scans flat beside the index (the
  state between two index updates).

recall@10 is the share of the exact top 10 the approximate search returns in its top 10. The figure chooses
``Settings.index_ann_min_rows``: below the size where the index is faster, the scan stays.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_index import cpu_pressure, pct  # noqa: E402
from pcm.index import ann  # noqa: E402
from pcm.index.mirror import PostMirror  # noqa: E402
from pcm.index.records import PostRecord  # noqa: E402

DIM = 384
DEPTH = 40


def clustered(n: int, seed: int, dim: int = DIM, clusters: int | None = None, spread: float = 0.6) -> np.ndarray:
    """``n`` unit vectors around ``clusters`` random centres (default one per 100 rows, at least 8), each a centre
    plus Gaussian noise of ``spread`` times its length: neighbours within a cluster have cosines of about 0.5-0.8,
    as sentence embeddings of one topic do. Deterministic in ``seed``."""
    rng = np.random.default_rng(seed)
    count = clusters or max(8, n // 100)
    centres = rng.standard_normal((count, dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    out = np.empty((n, dim), dtype=np.float32)
    step = 65536
    for start in range(0, n, step):
        size = min(step, n - start)
        which = rng.integers(0, count, size)
        noise = rng.standard_normal((size, dim)).astype(np.float32) * (spread / np.sqrt(dim))
        rows = centres[which] + noise
        out[start : start + size] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return out


def queries(vectors: np.ndarray, count: int, seed: int) -> np.ndarray:
    """Queries near stored rows (a row plus as much noise again), as a question is near the turns it asks about."""
    rng = np.random.default_rng(seed)
    picks = vectors[rng.integers(0, len(vectors), count)]
    noise = rng.standard_normal(picks.shape).astype(np.float32) * (0.6 / np.sqrt(vectors.shape[1]))
    rows = picks + noise
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def table_of(vectors: np.ndarray, start: int = 0) -> pa.Table:
    flat = pa.array(vectors.reshape(-1), type=pa.float32())
    return pa.table(
        {
            "iri": [f"urn:a:{i}" for i in range(start, start + len(vectors))],
            "vector": pa.FixedSizeListArray.from_arrays(flat, vectors.shape[1]),
        }
    )


def mirror_of(vectors: np.ndarray) -> PostMirror:
    n = len(vectors)
    records = [PostRecord(f"urn:a:{i}", "s", "user", None, None, "", None, i) for i in range(n)]
    mirror = PostMirror(vectors.shape[1])
    mirror.load(records, [""] * n, [""] * n, vectors, np.full(n, np.nan))
    return mirror


def run(directory: Path, n: int, n_queries: int, kinds: list[str], nprobes: int, refine: int) -> None:
    import lancedb

    vectors = clustered(n, seed=n)
    asks = queries(vectors, n_queries, seed=n + 1)
    mirror = mirror_of(vectors)
    mirror.top_by_vector(asks[0], DEPTH)  # the bfloat16 copy
    exact_top: list[list[int]] = []
    times: list[float] = []
    cpu: list[float] = []
    for q in asks:
        start, start_cpu = time.perf_counter(), time.process_time()
        slots, _ = mirror.top_by_vector(q, DEPTH)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        exact_top.append(slots[:10].tolist())
    print(
        f"n={n:>8}  exact scan        p50 {pct(times, 50) * 1e3:6.2f} ms  p95 {pct(times, 95) * 1e3:6.2f} ms"
        f"  CPU p50 {pct(cpu, 50) * 1e3:6.2f} ms"
    )
    db = lancedb.connect(str(directory / f"n{n}"))
    for kind in kinds:
        table = db.create_table(f"t_{kind}", data=table_of(vectors), mode="overwrite")
        start = time.perf_counter()
        ann.build(table, n, kind)
        built = time.perf_counter() - start
        for label in (kind, f"{kind}+tail"):
            if label.endswith("+tail"):
                extra = clustered(max(1, n // 50), seed=n + 2)
                table.add(table_of(extra, start=n))
                all_vectors = np.concatenate([vectors, extra])
                tail_mirror = mirror_of(all_vectors)
                truth = [tail_mirror.top_by_vector(q, DEPTH)[0][:10].tolist() for q in asks]
                use = tail_mirror
            else:
                truth, use = exact_top, mirror
            times, cpu, recalls = [], [], []
            for q, expected in zip(asks, truth, strict=True):
                start, start_cpu = time.perf_counter(), time.process_time()
                iris = ann.search_rows(table, q, DEPTH, nprobes=nprobes, refine=refine)[0]
                slots = np.array([use.slot_of[i] for i in iris], dtype=np.int64)
                top, _ = use.rescore(slots, q, DEPTH)
                times.append(time.perf_counter() - start)
                cpu.append(time.process_time() - start_cpu)
                recalls.append(len(set(top[:10].tolist()) & set(expected)) / max(len(expected), 1))
            print(
                f"n={n:>8}  {label:<17} p50 {pct(times, 50) * 1e3:6.2f} ms  p95 {pct(times, 95) * 1e3:6.2f} ms"
                f"  CPU p50 {pct(cpu, 50) * 1e3:6.2f} ms  recall@10 {statistics.mean(recalls):.4f}"
                + (f"  (built in {built:.1f} s)" if not label.endswith("+tail") else "")
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,30000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--index", default="IVF_HNSW_SQ,IVF_PQ")
    parser.add_argument("--nprobes", type=int, default=ann.NPROBES)
    parser.add_argument("--refine", type=int, default=ann.REFINE_FACTOR)
    args = parser.parse_args()
    print(f"before: {cpu_pressure()}; nprobes {args.nprobes}, refine_factor {args.refine}, k {DEPTH}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            run(Path(tmp), n, args.queries, args.index.split(","), args.nprobes, args.refine)
    print(f"after: {cpu_pressure()}")


if __name__ == "__main__":
    main()

"""``pcm serve`` benchmark (issue 7): a 2-hop query at 1M triples from 4 concurrent clients over loopback.

The server runs as its own process (``pcm serve``, as a user would start it); each client is a separate process
with one keep-alive connection, so client-side Python does not share a GIL with the server. Every request is a
SPARQL Protocol GET through pcm's front (host check, parsing, SERVICE refusal, time limit, size cap) to the
engine and back. With ``--direct`` the same load is then sent straight to a bare ``oxigraph serve`` on the same
store, to show what the front costs. Run both back to back: on a shared machine only figures taken under the
same conditions compare.

The front's own overhead per request (time spent in pcm's code, excluding the engine) is measured inside the
front and read from its ``Server-Timing`` header (up to the answer's write) and ``GET /api/timings`` (including it).

Prints figures; asserts nothing. Run: ``python benchmarks/bench_endpoint.py [--triples 1000000] [--seconds 20]``.
To compare with another version of the front under the same conditions, ``--compare OTHER/src --rounds 2`` runs
both on one store, alternating (e.g. ``git archive REV src queries pcm_ontology shapes | tar -x -C /tmp/old``).
Traffic goes to 127.0.0.1 only, bounded by ``--seconds`` and ``--max-requests``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_store import generate  # noqa: E402  (the same synthetic personal graph as the store benchmark)
from pcm.memory import Memory  # noqa: E402
from pcm.settings import Settings  # noqa: E402

QUERY = (
    "SELECT ?friend ?place WHERE {{ <{ns}person-{i}> <https://schema.org/knows> ?friend . "
    "?friend <https://schema.org/homeLocation> ?place }}"
)


def build(work: Path, triples: int) -> tuple[Settings, str, int]:
    """A memory holding ``triples`` quads shaped like a pcm dump (imported the way `pcm import` does)."""
    settings = Settings(memory=work / "memory", index_enabled=False)
    with Memory.init(settings, owner="Owner") as memory:
        ns = memory.manifest.namespace
    dump = work / "dump.nq"
    n, people = generate(dump, ns, triples)
    with Memory.open(settings) as memory:
        t = time.perf_counter()
        memory.import_rdf(dump)
        print(f"memory with {n:,} quads imported in {time.perf_counter() - t:.1f} s")
    dump.unlink()
    return settings, ns, people


def start_server(settings: Settings, source: str | None = None, *, index: bool = False) -> tuple[subprocess.Popen[str], str]:
    """``pcm serve`` in its own process (from another checkout's ``src`` when ``source`` is given; the side index
    off unless ``index``); returns it and its base URL."""
    env = {**os.environ, "PCM_INDEX": "on" if index else "off", "PCM_TOKEN": "bench"}
    if source:
        env["PYTHONPATH"] = source
    command = [sys.executable, "-c", "from pcm.cli_serve import serve; serve()",
               "--memory", str(settings.memory), "--bind", "127.0.0.1:0", "--json"]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    lines: list[str] = []
    while not lines or lines[-1].rstrip() != "}":
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("pcm serve exited before announcing its URL")
        lines.append(line)
    return proc, json.loads("".join(lines))["url"]


def wait_until_up(url: str, seconds: float = 60.0) -> None:
    """Return once ``url`` answers (an engine just started is loading its store); give up after ``seconds``."""
    stop = time.monotonic() + seconds
    while True:
        try:
            httpx.head(url, timeout=0.5)
            return
        except httpx.HTTPError:
            if time.monotonic() > stop:
                raise
            time.sleep(0.1)


def client(
    endpoint: str, ns: str, people: int, seconds: float, max_requests: int, seed: int
) -> tuple[list[float], int, list[float]]:
    """One client: 2-hop queries back to back for ``seconds``; returns latencies (ms), the error count and the
    front's own time per request (ms, from ``Server-Timing``; empty for a bare engine)."""
    rng = random.Random(seed)
    latencies: list[float] = []
    fronts: list[float] = []
    errors = 0
    accept = {"Accept": "application/sparql-results+json"}
    with httpx.Client(timeout=30) as http:
        for _ in range(20):  # warm-up: connection, engine caches
            http.get(endpoint, params={"query": QUERY.format(ns=ns, i=rng.randrange(people))}, headers=accept)
        stop = time.perf_counter() + seconds
        while time.perf_counter() < stop and len(latencies) < max_requests:
            query = QUERY.format(ns=ns, i=rng.randrange(people))
            t = time.perf_counter()
            response = http.get(endpoint, params={"query": query}, headers=accept)
            latencies.append((time.perf_counter() - t) * 1000)
            if response.status_code != 200 or "results" not in response.json():
                errors += 1
            timing = response.headers.get("server-timing", "")
            if timing.startswith("front;dur="):
                fronts.append(float(timing.split(",")[0].split("=")[1]))
    return latencies, errors, fronts


def load(label: str, endpoint: str, ns: str, people: int, clients: int, seconds: float, max_requests: int) -> None:
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=clients) as pool:
        futures = [pool.submit(client, endpoint, ns, people, seconds, max_requests, seed) for seed in range(clients)]
        results = [f.result() for f in futures]
    wall = time.perf_counter() - started
    latencies = sorted(ms for lat, _, _ in results for ms in lat)
    fronts = sorted(ms for _, _, front in results for ms in front)
    errors = sum(e for _, e, _ in results)
    print(
        f"{label}: {len(latencies):,} queries from {clients} clients in {seconds:.0f} s = {len(latencies) / seconds:,.0f} queries/s; "
        f"p50 {statistics.median(latencies):.2f} ms, p95 {_pick(latencies, 0.95):.2f} ms, "
        f"p99 {_pick(latencies, 0.99):.2f} ms; errors {errors} (wall {wall:.0f} s incl. warm-up)"
    )
    if fronts:
        print(
            f"  front's own time per request (Server-Timing, before the write): mean {statistics.fmean(fronts):.3f} ms, "
            f"p50 {_pick(fronts, 0.5):.3f} ms, p95 {_pick(fronts, 0.95):.3f} ms, p99 {_pick(fronts, 0.99):.3f} ms"
        )


def _pick(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))]


def front_stats(base_url: str) -> None:
    """The front's own summary (``/api/timings``: includes writing the answer; last 4096 requests)."""
    try:
        stats = httpx.get(base_url + "/api/timings", timeout=10).json()
    except (httpx.HTTPError, ValueError):
        return
    front, engine = stats.get("front_ms") or {}, stats.get("engine_ms") or {}
    print(
        f"  /api/timings over {stats.get('window')} requests: front mean {front.get('mean')} ms, p95 {front.get('p95')} ms; "
        f"engine mean {engine.get('mean')} ms, p95 {engine.get('p95')} ms"
    )


def direct(settings: Settings, ns: str, people: int, clients: int, seconds: float, max_requests: int) -> None:
    """The same load straight to a bare `oxigraph serve` on the same store (no front, union default graph)."""
    port = 17000 + random.randrange(2000)
    proc = subprocess.Popen(
        ["oxigraph", "serve", "--location", str(settings.memory / "oxigraph"), "--bind", f"127.0.0.1:{port}",
         "--union-default-graph"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        wait_until_up(f"http://127.0.0.1:{port}/")
        load("bare oxigraph serve (no front)", f"http://127.0.0.1:{port}/query", ns, people, clients, seconds, max_requests)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--triples", type=int, default=1_000_000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--max-requests", type=int, default=200_000, help="per client")
    parser.add_argument("--direct", action="store_true", help="also measure a bare oxigraph serve on the same store")
    parser.add_argument("--compare", metavar="SRC", help="also measure the front of another checkout (its src/ directory), "
                        "on the same store, alternating with this one")
    parser.add_argument("--rounds", type=int, default=1, help="repeat the measurements (alternating) this many times")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pcm-bench-serve-"))
    try:
        settings, ns, people = build(work, args.triples)
        fronts: list[tuple[str, str | None]] = [("pcm serve (front + engine)", None)]
        if args.compare:
            fronts.append((f"pcm serve from {args.compare}", args.compare))
        for _round in range(args.rounds):
            for label, source in fronts:
                proc, url = start_server(settings, source)
                try:
                    load(label, url + "/query", ns, people, args.clients, args.seconds, args.max_requests)
                    front_stats(url)
                finally:
                    proc.terminate()
                    proc.wait(timeout=20)
            if args.direct:
                direct(settings, ns, people, args.clients, args.seconds, args.max_requests)
        print("target: p95 <= 20 ms, and at least 0.5x the bare engine's queries/s")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

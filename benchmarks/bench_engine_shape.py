"""The engine's CPU per query under each request shape: what ``pcm serve``'s front sends against a bare client.

Under ``pcm serve`` the engine spent 100-190 us more CPU per 2-hop query than a bare ``oxigraph serve-read-only``
(``lifetime_serving.py``). The front's request differs from a bare client's in several ways; this script starts
the engine once per shape on the same store and drives it directly, so each difference is measured alone:

- ``bare``: ``serve-read-only --union-default-graph``, ``GET /query?query=...`` (the baseline of the endpoint rows);
- ``pcm``: ``serve --timeout-s 10`` (as ``pcm serve`` starts it), ``POST /query?union-default-graph`` with the
  query as an ``application/sparql-query`` body after the front's ``BASE <...>`` line;
- ``rw-bare``: the bare request to the read-write server; ``ro-pcm``: the front's request to the read-only one;
- ``pcm-nobase``, ``pcm-get``, ``pcm-flag`` (the union as the server's flag), ``pcm-notimeout``: the front's
  request with one difference taken away;
- ``serve``: ``pcm serve`` itself, its front and engine (GET from the clients, as ``lifetime_serving.py``).

``--rate`` offers a fixed rate (queries/s over all clients) instead of back-to-back queries: the engine's CPU per
query depends on how fast queries come, so shapes are compared at the same rate.

``python benchmarks/bench_engine_shape.py --memory DIR [--shapes bare,pcm,...] [--rounds 3] [--seconds 8]
[--rate 0]`` (DIR: a memory from ``make_lifetime.py``; it must not be served meanwhile).
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing
import os
import random
import subprocess
import sys
import time
import urllib.parse
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

from lifetime_serving import TWO_HOPS, friends, start_server  # noqa: E402
from pcm.memory import Memory  # noqa: E402
from pcm.settings import Settings  # noqa: E402

OXIGRAPH = str(Path(sys.executable).parent / "oxigraph")
CLIENTS = 4
FRONT = dict(post=True, base=True, union_param=True)
SHAPES: dict[str, tuple[str, list[str], dict[str, bool]]] = {
    "bare": ("serve-read-only", ["--union-default-graph"], {}),
    "pcm": ("serve", ["--timeout-s", "10"], FRONT),
    "rw-bare": ("serve", ["--union-default-graph"], {}),
    "ro-pcm": ("serve-read-only", ["--timeout-s", "10"], FRONT),
    "pcm-nobase": ("serve", ["--timeout-s", "10"], {**FRONT, "base": False}),
    "pcm-get": ("serve", ["--timeout-s", "10"], {**FRONT, "post": False}),
    "pcm-flag": ("serve", ["--timeout-s", "10", "--union-default-graph"], {**FRONT, "union_param": False}),
    "pcm-notimeout": ("serve", [], FRONT),
}


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def client(port: int, shape: dict[str, bool], agents: list[str], seconds: float, rate: float, seed: int) -> int:
    """2-hop queries in ``shape`` on one keep-alive connection for ``seconds`` (at ``rate``/s, or back to back)."""
    rng = random.Random(seed)
    conn = http.client.HTTPConnection("127.0.0.1", port)
    sent = 0
    start = time.perf_counter()
    while (now := time.perf_counter()) < start + seconds:
        if rate and start + sent / rate > now:
            time.sleep(start + sent / rate - now)
        query = TWO_HOPS.format(agent=rng.choice(agents))
        if shape.get("base"):
            query = "BASE <http://127.0.0.1:7878/query> " + query
        target = "/query?union-default-graph" if shape.get("union_param") else "/query"
        headers = {"Accept": "application/sparql-results+json"}
        if shape.get("post"):
            headers["Content-Type"] = "application/sparql-query; charset=utf-8"
            conn.request("POST", target, body=query.encode(), headers=headers)
        else:
            joiner = "&" if "?" in target else "?"
            conn.request("GET", target + joiner + urllib.parse.urlencode({"query": query}), headers=headers)
        answer = conn.getresponse()
        answer.read()
        if answer.status != 200:
            raise RuntimeError(f"the engine answered {answer.status}")
        sent += 1
    return sent


def drive(
    port: int, shape: dict[str, bool], agents: list[str], seconds: float, rate: float, pids: list[int]
) -> tuple[int, list[float]]:
    """Queries answered in ``seconds`` by ``CLIENTS`` clients after a 2 s warm-up, and the CPU seconds each of
    ``pids`` used meanwhile."""
    each = rate / CLIENTS
    with ProcessPoolExecutor(CLIENTS, mp_context=multiprocessing.get_context("spawn")) as pool:
        same = [port] * CLIENTS, [shape] * CLIENTS, [agents] * CLIENTS
        list(pool.map(client, *same, [2.0] * CLIENTS, [each] * CLIENTS, range(CLIENTS)))  # warm-up
        before = [cpu_s(p) for p in pids]
        answered = sum(pool.map(client, *same, [seconds] * CLIENTS, [each] * CLIENTS, range(10, 10 + CLIENTS)))
        return answered, [cpu_s(p) - b for p, b in zip(pids, before, strict=True)]


def engine(store: Path, mode: str, flags: list[str]) -> tuple[subprocess.Popen[bytes], int]:
    port = 17000 + random.randrange(2000)
    proc = subprocess.Popen([OXIGRAPH, mode, "--location", str(store), "--bind", f"127.0.0.1:{port}", *flags],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        try:
            probe = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            probe.request("HEAD", "/")
            probe.getresponse()
            break
        except OSError:
            time.sleep(0.1)
    return proc, port


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memory", type=Path, required=True)
    parser.add_argument("--shapes", default="bare,pcm,rw-bare,ro-pcm,pcm-nobase,pcm-get,pcm-flag,pcm-notimeout")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rate", type=float, default=0.0, help="queries/s offered over all clients (0: back to back)")
    args = parser.parse_args()
    with Memory.open(Settings(memory=args.memory, index_enabled=False)) as memory:
        agents = friends(memory, 2000)
    offered = f"{args.rate:g} q/s offered" if args.rate else "back to back"
    print(f"2-hop queries, {CLIENTS} clients, {args.seconds:g} s each, {offered}; CPU per query answered:")
    for r in range(args.rounds):
        for name in args.shapes.split(","):
            if name == "serve":
                proc, url = start_server(args.memory, index=False)
                try:
                    front = proc.pid
                    inner = int(Path(f"/proc/{front}/task/{front}/children").read_text().split()[0])
                    n, (front_s, engine_s) = drive(int(url.rsplit(":", 1)[1]), {}, agents, args.seconds, args.rate,
                                                   [front, inner])
                finally:
                    proc.terminate()
                    proc.wait(timeout=60)
                print(f"  round {r + 1} {name:14s} {n / args.seconds:6,.0f} q/s  engine {engine_s / n * 1e6:5.0f} us  "
                      f"front {front_s / n * 1e6:5.0f} us", flush=True)
                continue
            mode, flags, shape = SHAPES[name]
            proc, port = engine(args.memory / "oxigraph", mode, flags)
            try:
                n, (engine_s,) = drive(port, shape, agents, args.seconds, args.rate, [proc.pid])
            finally:
                proc.terminate()
                proc.wait(timeout=60)
            print(f"  round {r + 1} {name:14s} {n / args.seconds:6,.0f} q/s  engine {engine_s / n * 1e6:5.0f} us",
                  flush=True)


if __name__ == "__main__":
    main()

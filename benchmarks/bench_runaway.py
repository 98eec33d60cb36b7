"""Runaway queries against the time limit and the memory bound (PCM_QUERY_TIMEOUT, PCM_QUERY_MEMORY_MB).

Builds a memory of N posts (default 3,000, no index), then runs queries that yield no row before they finish
(path closures joined end to end, cross products, aggregates over them) from the Python API (``Memory.sparql``),
from ``pcm sparql`` and from ``pcm ask`` (a scripted model writing the runaway query), and prints for each the
elapsed time against the deadline and the peak RSS of the query worker. Prints figures; asserts nothing.

Run: ``python benchmarks/bench_runaway.py [--posts 3000] [--deadline 5] [--memory-mb 1024]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

from pcm.conversations import Conversation, Utterance
from pcm.errors import QueryError
from pcm.memory import Memory
from pcm.settings import Settings

SHAPES = {
    "two !rdf:type* closures joined, COUNT": (
        "SELECT (COUNT(*) AS ?n) WHERE { ?a !<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>* ?b . "
        "?b !<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>* ?c }"
    ),
    "undirected closures joined, COUNT": (
        "SELECT (COUNT(*) AS ?n) WHERE { ?a (!<urn:x:none>|^!<urn:x:none>)* ?b . ?b (!<urn:x:none>|^!<urn:x:none>)* ?c }"
    ),
    "3-way cross product, COUNT": "SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i }",
    "GROUP BY over a cross product": (
        "SELECT ?p (COUNT(*) AS ?n) WHERE { ?a ?p ?b . ?c ?q ?d . ?e ?r ?f } GROUP BY ?p ORDER BY DESC(?n)"
    ),
    "ORDER BY over a cross product": "SELECT ?a ?d WHERE { ?a ?p ?b . ?c ?q ?d } ORDER BY ?a ?d LIMIT 1",
}


def build(path: Path, posts: int) -> None:
    start = datetime(2025, 1, 1, 9)
    conversations = []
    for s in range(0, posts, 30):
        sid = f"s{s // 30:04d}"
        turns = [
            Utterance(sid, i, "user" if i % 2 == 0 else "assistant",
                      f"turn {s + i} about topic {(s + i) % 97} and place {(s + i) % 13}",
                      timestamp=start + timedelta(minutes=s + i), source_id=f"{sid}:{i}")
            for i in range(min(30, posts - s))
        ]
        conversations.append(Conversation(sid, turns))
    settings = Settings(memory=path, index_enabled=False, summaries_enabled=False)
    with Memory.init(settings, owner="Bench Owner") as memory:
        memory.ingest(conversations)


class PeakRss:
    """Samples the RSS of a process every 20 ms (the worker is killed at the deadline, so it cannot be asked)."""

    def __init__(self) -> None:
        self.peak_kb = 0
        self.pid: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            if self.pid is None:
                continue
            try:
                for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        self.peak_kb = max(self.peak_kb, int(line.split()[1]))
            except OSError:
                pass

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak_kb


def api(path: Path, deadline: float, memory_mb: int) -> None:
    print(f"\nPython API (Memory.sparql), deadline {deadline:g} s, memory bound {memory_mb} MB")
    settings = Settings(memory=path, index_enabled=False, query_timeout=deadline, query_memory_mb=memory_mb)
    with Memory.open(settings, read_only=True) as memory:
        memory.sparql("ASK { ?s ?p ?o }")  # start the worker outside the figures, as a long-lived process would
        for name, query in SHAPES.items():
            runner = memory.context.query_runner()
            memory.sparql("ASK { ?s ?p ?o }")
            sampler = PeakRss()
            sampler.pid = runner._worker.proc.pid if runner._worker else None  # noqa: SLF001 - a benchmark looks inside
            started = time.monotonic()
            try:
                memory.sparql(query)
                outcome = "finished"
            except QueryError as error:
                outcome = str(error).split(":", 1)[-1].strip()[:60]
            elapsed = time.monotonic() - started
            peak = sampler.stop()
            print(f"  {name:40s} {elapsed:6.2f} s = {elapsed / deadline:4.2f}x deadline   "
                  f"worker peak RSS {peak / 1024:6.0f} MB   {outcome}")


def cli(path: Path, deadline: float, memory_mb: int, ask_script: Path) -> None:
    print(f"\nCLI (a new process per command), deadline {deadline:g} s; 'startup' is `pcm sparql 'ASK {{}}'`")
    env = {**os.environ, "PCM_MEMORY": str(path), "PCM_LLM": "none", "PCM_INDEX": "off",
           "PCM_QUERY_TIMEOUT": str(deadline), "PCM_QUERY_MEMORY_MB": str(memory_mb)}

    def run(args: list[str], **extra: str) -> tuple[float, subprocess.CompletedProcess[str]]:
        started = time.monotonic()
        out = subprocess.run([sys.executable, "-m", "pcm.cli", *args], capture_output=True, text=True,
                             env={**env, **extra}, timeout=30 * deadline + 120)
        return time.monotonic() - started, out

    startup, _ = run(["sparql", "ASK {}"])
    print(f"  startup {startup:.2f} s")
    for name, query in SHAPES.items():
        elapsed, out = run(["sparql", query])
        print(f"  sparql {name:40s} {elapsed:6.2f} s = {(elapsed - startup) / deadline:4.2f}x deadline after startup  "
              f"exit {out.returncode}")
    # ru_maxrss of waited children covers the query workers the commands started and waited for
    print(f"  largest RSS of any command or its worker: {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:.0f} MB")
    elapsed, out = run(["ask", "Which predicate is used most?", "--json", "--explain"],
                       PCM_LLM=f"scripted:{ask_script}", PCM_REPAIR_ROUNDS="0")
    data = json.loads(out.stdout) if out.returncode == 0 else {}
    outcome = data.get("trace", [{}])[0].get("outcome") if data.get("trace") else None
    queries_ms = data.get("stats", {}).get("queries_ms")
    print(f"  ask (model writes the GROUP BY shape): generated query {outcome} after {queries_ms} ms of query time; "
          f"{elapsed:.2f} s for the whole command (exit {out.returncode})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posts", type=int, default=3000)
    parser.add_argument("--deadline", type=float, default=5.0)
    parser.add_argument("--memory-mb", type=int, default=1024)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pcm-runaway-") as tmp:
        path = Path(tmp) / "memory"
        started = time.monotonic()
        build(path, args.posts)
        print(f"memory of {args.posts} posts built in {time.monotonic() - started:.1f} s")
        api(path, args.deadline, args.memory_mb)
        script = Path(tmp) / "replies.json"
        query = SHAPES["GROUP BY over a cross product"]
        script.write_text(json.dumps([f"```sparql\n{query}\n```", "NO QUERY: nothing else to try"] * 3))
        cli(path, args.deadline, args.memory_mb, script)


if __name__ == "__main__":
    main()

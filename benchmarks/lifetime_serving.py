"""The serving rows of the lifetime benchmark (issue 37): ask without the model, the three walks, the endpoint
against a bare engine, the resident memory of ``pcm serve``, and bulk import against bare ``bulk_load``.

Imported by ``bench_lifetime.py``, which builds or reuses the memory; each function prints one or a few rows and
returns its figures. The questions are drawn from the memory's own facts (a friend's purchases, trips, pets and
parties, as ``make_lifetime.py`` writes them), so the same rows run at 100k and at 1M posts.

The endpoint row alone, in alternating rounds on a memory already built:
``python benchmarks/lifetime_serving.py --memory DIR [--rounds 3] [--seconds 10]``.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import httpx
import pyoxigraph as ox

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

from pcm.memory import Memory  # noqa: E402
from pcm.settings import Settings  # noqa: E402

SCHEMA = "https://schema.org/"
PCM = "https://w3id.org/pcm/ontology#"
AS_OF = datetime(2025, 10, 1, tzinfo=UTC)

#: Facts to ask about: a friend of the owner with one of their purchases, trips, parties or pets. The friend's label
#: is in the graph of the post that first named them (a card is written once), not necessarily the act's; joined
#: after the acts are cut (the engine otherwise starts from the labels: minutes against 1.6 s at 1M posts).
FACTS = """
SELECT ?kind ?node ?agent ?name WHERE {
  { SELECT ?kind ?node ?agent WHERE { GRAPH ?g {
      { ?node a ?kind ; <https://schema.org/agent> ?agent .
        VALUES ?kind { <https://schema.org/BuyAction> <https://schema.org/TravelAction> <https://schema.org/SocialEvent> } }
      UNION { ?agent <https://w3id.org/pcm/ontology#hasPet> ?node . BIND(<https://w3id.org/pcm/ontology#Pet> AS ?kind) }
  } } LIMIT 20000 }
  ?agent <http://www.w3.org/2000/01/rdf-schema#label> ?name .
}
"""

T = TypeVar("T")
WARMUP_SEED = 1000
"""Added to the seed for the inputs asked before the timed ones (none of which they repeat)."""

#: A question and its gold query for each kind of fact (``{agent}`` is the friend's IRI, ``{name}`` their name).
ASKED = {
    SCHEMA + "BuyAction": ("What did {name} buy, and where?",
                           "SELECT ?item ?shop WHERE {{ ?buy a schema:BuyAction ; schema:agent <{agent}> ; "
                           "schema:object ?o ; schema:seller ?s . ?o rdfs:label ?item . ?s rdfs:label ?shop }}"),
    SCHEMA + "TravelAction": ("Where did {name} travel?",
                              "SELECT ?city ?when WHERE {{ ?trip a schema:TravelAction ; schema:agent <{agent}> ; "
                              "schema:toLocation ?c ; schema:startDate ?when . ?c rdfs:label ?city }}"),
    SCHEMA + "SocialEvent": ("When were {name}'s parties?",
                             "SELECT ?party ?when WHERE {{ ?e a schema:SocialEvent ; schema:agent <{agent}> ; "
                             "schema:startDate ?when ; rdfs:label ?party }}"),
    PCM + "Pet": ("What pets does {name} have?",
                  "SELECT ?pet ?species WHERE {{ <{agent}> pcm:hasPet ?p . ?p rdfs:label ?pet ; "
                  "pcm:petSpecies ?species }}"),
}

#: The 2-hop query of the endpoint rows: a friend's acts and what each was about.
TWO_HOPS = ("SELECT ?act ?thing WHERE {{ ?act <https://schema.org/agent> <{agent}> . "
            "?act <https://schema.org/object>|<https://schema.org/toLocation> ?thing }}")


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def facts(memory: Memory, count: int, seed: int) -> list[dict[str, str]]:
    """``count`` facts of the memory, one per friend where possible, drawn with ``seed``."""
    rows = memory.store.select(FACTS).dicts()
    found = [{"kind": r["kind"].value, "node": r["node"].value, "agent": r["agent"].value, "name": r["name"].value}
             for r in rows]
    rng = random.Random(seed)
    rng.shuffle(found)
    picked: dict[str, dict[str, str]] = {}
    for fact in found:
        picked.setdefault(fact["agent"] + fact["kind"], fact)
    return list(picked.values())[:count]


def others(
    make: Callable[[int, int], list[T]], seed: int, taken: Iterable[Hashable], count: int,
    key: Callable[[T], Hashable] = lambda item: item,
) -> list[T]:
    """``count`` inputs ``make(seed, n)`` draws with another seed (:data:`WARMUP_SEED`), distinct by ``key`` and
    none of ``taken``: asked before the timed ones and reported apart as the process's first. LanceDB loads the
    full-text index's posting lists, and the data file's pages a search reads back, as searches first need them: a
    process's first hundred questions' recall p95 was 68-96 ms against 49-73 ms for the same questions asked again
    (five fresh processes), and other questions asked first take that from them just as well (one-off drivers on
    the 1M English memory, 2026-11-29: p95 56.6 ms after 193 other questions, 56.5 ms asked a second time). The
    timed rows are then what a memory that has been answering meets, and the first ones what a fresh process
    meets."""
    seen, out = set(taken), []
    for item in make(seed + WARMUP_SEED, 4 * count):
        if key(item) not in seen:
            seen.add(key(item))
            out.append(item)
    return out[:count]


def ask_row(memory: Memory, seed: int, count: int, warmup: int = 0) -> dict[str, float]:
    """Ask with the gold query replayed by a scripted client: everything but the model (entity matching, grounding,
    safety checks, execution, evidence, the answer), as ``bench_ask.py`` measures it on the sample memory.

    ``warmup`` questions about other facts (another seed) are asked first and reported apart as the process's
    first questions: the store's and LanceDB's caches fill as a memory answers, and the timed questions are then
    what a memory that has been answering meets (:func:`others`)."""
    from bench_ask import gold_client
    from pcm.retrieval.ask import ask

    def asked(facts_of: list[dict[str, str]]) -> list[tuple[str, str]]:
        out = []
        for fact in facts_of:
            question, query = ASKED[fact["kind"]]
            out.append((question.format(name=fact["name"]), query.format(agent=fact["agent"])))
        return out

    timed_set = asked(facts(memory, count, seed))
    first = others(lambda s, n: asked(facts(memory, n, s)), seed, [q for q, _ in timed_set], warmup,
                   key=lambda pair: pair[0])
    client = gold_client(dict(timed_set + first))

    def run(pairs: list[tuple[str, str]]) -> tuple[list[float], int]:
        totals, answered = [], 0
        for question, _ in pairs:
            result = ask(memory.context, question, client=client, as_of=AS_OF)
            totals.append(result.stats["non_llm_ms"])
            answered += result.path == "sparql"
        return totals, answered

    ask(memory.context, (first or timed_set)[0][0], client=client, as_of=AS_OF)  # the query worker and imports
    if first:
        early, _ = run(first)
        print(f"ask without the model, the process's first {len(first)} questions (other facts): "
              f"p50 {pct(early, 0.5):.1f} ms, p95 {pct(early, 0.95):.1f} ms")
    totals, answered = run(timed_set)
    figures = {"p50": pct(totals, 0.5), "p95": pct(totals, 0.95), "answered": answered, "questions": len(timed_set)}
    print(f"ask without the model (gold query replayed), {len(timed_set)} questions"
          f"{f' after {len(first)} others' if first else ''}: p50 {figures['p50']:.1f} ms, "
          f"p95 {figures['p95']:.1f} ms; answered from the graph {answered}/{len(timed_set)} (target p95 <= 100 ms)")
    return figures


def traversal_row(memory: Memory, seed: int, count: int) -> dict[str, float]:
    """WaterCircles, A* and BeamSearch from the side index's start vertices, warm (the second pass), as
    ``bench_traversal.py`` times them: pairs of a friend and one of their acts, two friends, one friend."""
    from pcm.index import get_embedder
    from pcm.retrieval.traversal import TraversalConfig, TraversalEngine

    picked = facts(memory, count * 2, seed + 1)
    starts: list[tuple[str, tuple[ox.NamedNode, ...]]] = []
    for i, fact in enumerate(picked[:count]):  # a memory smaller than asked offers fewer
        agent, node = ox.NamedNode(fact["agent"]), ox.NamedNode(fact["node"])
        other = ox.NamedNode(picked[(count + i) % len(picked)]["agent"])
        shape = i % 3
        text = f"What do I know about {fact['name']}?"
        starts.append((text, (agent, node) if shape == 0 else (agent, other) if shape == 1 else (agent,)))
    naming = memory.naming
    engine = TraversalEngine(memory.backend, post_prefix=naming.post(""), hubs=(naming.owner, naming.assistant),
                             embedder=get_embedder())
    config = TraversalConfig(top_n=None)
    figures: dict[str, float] = {}
    for name, label in (("wc", "WaterCircles"), ("astar", "A*"), ("bs", "BeamSearch")):
        for _ in range(2):  # the first pass embeds each question's triples once; the second is timed
            times = [engine.retrieve(text, list(nodes), name, config=config, sources=False).stats.ms
                     for text, nodes in starts]
        figures[name] = pct(times, 0.95)
        print(f"{label} warm, {len(starts)} start sets: p50 {pct(times, 0.5):.1f} ms, p95 {pct(times, 0.95):.1f} ms")
    engine.close()
    return figures


def start_server(memory_dir: Path, *, index: bool) -> tuple[subprocess.Popen[str], str]:
    """``pcm serve`` on the memory in its own process, as ``bench_endpoint.py`` starts it, from this checkout's
    ``src`` (not whichever pcm the interpreter would import)."""
    from bench_endpoint import start_server as start

    return start(Settings(memory=memory_dir), str(REPO / "src"), index=index)


def _client(endpoint: str, agents: list[str], seconds: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    latencies: list[float] = []
    accept = {"Accept": "application/sparql-results+json"}
    with httpx.Client(timeout=30) as http:
        for _ in range(20):
            http.get(endpoint, params={"query": TWO_HOPS.format(agent=rng.choice(agents))}, headers=accept)
        stop = time.perf_counter() + seconds
        while time.perf_counter() < stop:
            t = time.perf_counter()
            response = http.get(endpoint, params={"query": TWO_HOPS.format(agent=rng.choice(agents))},
                                headers=accept)
            response.raise_for_status()
            latencies.append((time.perf_counter() - t) * 1000)
    return latencies


def _load(label: str, endpoint: str, agents: list[str], clients: int, seconds: float) -> float:
    # spawned, not forked: the parent holds LanceDB's runtime, which a fork may leave mid-operation
    with ProcessPoolExecutor(max_workers=clients, mp_context=multiprocessing.get_context("spawn")) as pool:
        runs = [pool.submit(_client, endpoint, agents, seconds, seed) for seed in range(clients)]
        latencies = [ms for run in runs for ms in run.result()]
    rate = len(latencies) / seconds
    print(f"  {label}: {rate:,.0f} queries/s from {clients} clients, p50 {pct(latencies, 0.5):.2f} ms, "
          f"p95 {pct(latencies, 0.95):.2f} ms")
    return rate


def _cpu_s(pid: int) -> float:
    """CPU seconds a process has used (user and system, Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    with contextlib.suppress(OSError):
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    return []


def endpoint_row(memory_dir: Path, agents: list[str], clients: int, seconds: float, rounds: int = 1) -> dict[str, float]:
    """2-hop queries/s through ``pcm serve`` and, on the same store right after, through a bare ``oxigraph serve``;
    ``rounds`` times, alternating (the median ratio is returned). The CPU each server process used per query
    (the front, its engine, the bare engine; warm-up queries counted) is printed too: on a shared machine it moves
    far less than queries/s."""
    from bench_endpoint import wait_until_up

    print(f"endpoint, a 2-hop query (a friend's acts and their objects), {clients} clients, {seconds:.0f} s each:")
    warmed = clients * 20  # each client's untimed warm-up queries (_client)
    ratios, figures = [], {}
    for _ in range(rounds):
        proc, url = start_server(memory_dir, index=False)
        try:
            engines = _children(proc.pid)
            front, engine = _cpu_s(proc.pid), sum(_cpu_s(p) for p in engines)
            ours = _load("pcm serve", url + "/query", agents, clients, seconds)
            answered = ours * seconds + warmed
            front = (_cpu_s(proc.pid) - front) / answered
            engine = (sum(_cpu_s(p) for p in engines) - engine) / answered
        finally:
            proc.terminate()
            proc.wait(timeout=60)
        port = 17000 + random.randrange(2000)
        bare_engine = subprocess.Popen(
            [str(Path(sys.executable).parent / "oxigraph"), "serve-read-only", "--location",
             str(memory_dir / "oxigraph"), "--bind", f"127.0.0.1:{port}", "--union-default-graph"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_until_up(f"http://127.0.0.1:{port}/")
            used = _cpu_s(bare_engine.pid)
            bare = _load("bare oxigraph serve", f"http://127.0.0.1:{port}/query", agents, clients, seconds)
            bare_cpu = (_cpu_s(bare_engine.pid) - used) / (bare * seconds + warmed)
        finally:
            bare_engine.terminate()
            bare_engine.wait(timeout=60)
        ratios.append(ours / bare)
        print(f"  CPU per query: pcm serve's front {front * 1e6:.0f} us, its engine {engine * 1e6:.0f} us; the bare "
              f"engine {bare_cpu * 1e6:.0f} us. Ratio pcm serve / bare engine: {ours / bare:.2f} (target >= 0.6)")
        figures = {"pcm": ours, "bare": bare, "front_us": front * 1e6, "engine_us": engine * 1e6,
                   "bare_us": bare_cpu * 1e6}
    ratio = statistics.median(ratios)
    if rounds > 1:
        print(f"  ratio over {rounds} alternating rounds: {', '.join(f'{r:.2f}' for r in ratios)}; median {ratio:.2f}")
    return {**figures, "ratio": ratio}


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def serve_rss_row(memory_dir: Path, questions: Sequence[str]) -> float:
    """Peak resident memory of ``pcm serve`` (side index on) after recalls, model-less asks and ten ingested
    utterances (a lifetime memory is written to every day), and the time of those writes. A hundred recalls or more
    make the server read the posts' vector matrix into memory where it fits ``Settings.index_resident_mb``, as a
    server that keeps answering does. The utterances are
    about none of the benchmark's questions, and their session is forgotten at the end, so the memory the other
    rows measure stays what it was."""
    proc, url = start_server(memory_dir, index=True)
    try:
        with httpx.Client(timeout=300) as http:
            for q in questions:
                http.get(url + "/api/recall", params={"q": q, "k": 10}).raise_for_status()
            headers = {"Authorization": "Bearer bench"}
            for q in questions[:10]:
                http.post(url + "/api/ask", json={"question": q}, headers=headers)
            session = f"lifetime-bench-{time.time_ns()}"
            writes: list[float] = []
            for i in range(10):
                started = time.perf_counter()
                http.post(url + "/api/ingest", headers=headers, json={
                    "text": f"Note {i} for the benchmark's own session, kept only while it runs.",
                    "session": session}).raise_for_status()
                writes.append((time.perf_counter() - started) * 1000)
            for q in questions[:10]:
                http.get(url + "/api/recall", params={"q": q, "k": 10}).raise_for_status()
            http.post(url + "/api/forget", headers=headers, json={"session": session}).raise_for_status()
        peak = _peak_rss_mb(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    print(f"pcm serve peak resident memory after {len(questions)} recalls, 10 asks and 10 ingested utterances: "
          f"{peak:,.0f} MB (target <= 4 GB); each ingest p50 {pct(writes, 0.5):.0f} ms, the first {writes[0]:.0f} ms")
    return peak


def import_row(quads: int) -> dict[str, float]:
    """``pcm import`` of a generated pcm dump of ``quads`` quads into a fresh memory, against pyoxigraph's bare
    ``bulk_load`` of the same file into a fresh store, in the same run."""
    from bench_store import generate

    with tempfile.TemporaryDirectory(prefix="pcm-lifetime-import-") as work:
        root = Path(work)
        # a lifetime's dump is over the default limits of one import file (PCM_MAX_RDF_MB, PCM_MAX_RDF_TRIPLES)
        settings = Settings(memory=root / "memory", index_enabled=False, max_rdf_mb=1 << 16,
                            max_rdf_triples=2 * quads + 1_000_000)
        with Memory.init(settings, owner="Owner") as memory:
            ns = memory.manifest.namespace
        dump = root / "dump.nq"
        n, _ = generate(dump, ns, quads)
        raw = ox.Store(str(root / "raw"))
        t, cpu = time.perf_counter(), time.process_time()
        raw.bulk_load(path=str(dump), format=ox.RdfFormat.N_QUADS)
        raw.flush()
        bare, bare_cpu = time.perf_counter() - t, time.process_time() - cpu
        del raw
        with Memory.open(settings) as memory:
            t, cpu = time.perf_counter(), time.process_time()
            memory.import_rdf(dump)
            ours, ours_cpu = time.perf_counter() - t, time.process_time() - cpu
    # CPU is the process's, over every thread: the bulk loader's and, in pcm, the thread that checks the file
    print(f"bulk import of {n:,} quads: pcm import {ours:.1f} s ({n / ours:,.0f} quads/s, CPU {ours_cpu:.1f} s), bare "
          f"bulk_load {bare:.1f} s ({n / bare:,.0f} quads/s, CPU {bare_cpu:.1f} s): ratio {bare / ours:.2f} "
          "(target >= 0.9)")
    return {"pcm_s": ours, "bare_s": bare, "ratio": bare / ours, "pcm_cpu_s": ours_cpu, "bare_cpu_s": bare_cpu}


def friends(memory: Memory, count: int) -> list[str]:
    """Friends of the owner who did something (the 2-hop query's starts)."""
    query = ("SELECT DISTINCT ?agent WHERE { GRAPH ?g { ?act <https://schema.org/agent> ?agent } } LIMIT "
             f"{count}")
    return [r["agent"].value for r in memory.store.select(query).dicts()]


__all__ = ["ask_row", "endpoint_row", "friends", "import_row", "serve_rss_row", "traversal_row"]


def main() -> None:
    """The endpoint row alone, on a lifetime memory already built (``make_lifetime.py``), in alternating rounds."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--memory", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=4)
    args = parser.parse_args()
    with Memory.open(Settings(memory=args.memory, index_enabled=False)) as memory:
        agents = friends(memory, 2000)
    endpoint_row(args.memory, agents, args.clients, args.seconds, args.rounds)


if __name__ == "__main__":
    main()

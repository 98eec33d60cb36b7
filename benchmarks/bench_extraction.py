"""Extraction pipeline overhead (issue 3): everything but the model, per utterance, on a memory of 50,000 posts.

A memory is filled with ``--posts`` posts (default 50,000), each with an extraction graph (people, places, pets,
labels, provenance), bulk loaded. Then ``--utterances`` new utterances (default 1,000, in sessions of 20 turns) are
ingested and extracted one at a time, the way ``pcm ingest --text`` does it, by a scripted model (LLM time zero)
whose realistic replies mention existing people by label, create new things with prices and brands, and now and
then change a single-valued property (a knowledge update). Per utterance the time covers: context and prompt build,
parse, normalise, SHACL on the delta, entity resolution, supersession, the atomic store write and (with ``--index``)
the side index update. Prints figures; asserts nothing.

With ``--batch`` the utterances are extracted in one run (as ``pcm ingest FILE`` does), where the side index is
updated in batches; the per-utterance time is then the interval between two writes.

Run: ``python benchmarks/bench_extraction.py [--posts 50000] [--utterances 1000] [--index] [--batch]``
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyoxigraph as ox

import pcm.extraction.extractor as extractor_module
import pcm.extraction.pipeline as pipeline_module
from pcm.conversations import Conversation, Utterance
from pcm.extraction import extract_posts
from pcm.extraction.context import ContextBuilder
from pcm.index import SideIndex
from pcm.index.embedder import Embedder
from pcm.index.tables import Tables
from pcm.llm import Message, ScriptedClient
from pcm.memory import Memory
from pcm.namespaces import DCTERMS as DCT
from pcm.namespaces import PCM, PROV, RDF, RDFS, SCHEMA, SIOC, XSD
from pcm.settings import Settings
from pcm.sparql import literal_term as lit

RDF_TYPE = RDF + "type"
LABEL = RDFS + "label"
SESSION_TURNS = 20


def generate(path: Path, ns: str, posts: int, seed: int = 11) -> int:
    """N-Quads of ``posts`` extracted posts, shaped like what pcm writes (posts, statuses, extraction graphs)."""
    rng = random.Random(seed)
    people, places = max(500, posts // 10), max(100, posts // 200)
    conv, provg = "<urn:pcm:graph:conversation>", "<urn:pcm:graph:provenance>"
    t0 = datetime(2023, 1, 1)
    n = 0
    with path.open("w", encoding="utf-8") as f:
        for i in range(posts):
            post, g = f"<{ns}post/b{i}>", f"<urn:pcm:graph:extraction:b{i}>"
            thread = f"<{ns}session/base-{i // SESSION_TURNS}>"
            when = (t0 + timedelta(minutes=7 * i)).isoformat()
            a, b, c = rng.randrange(people), rng.randrange(people), rng.randrange(places)
            pa, pb, place = f"<{ns}person-{a}>", f"<{ns}person-{b}>", f"<{ns}place-{c}>"
            lines = [
                f"{post} <{RDF_TYPE}> <{SIOC}Post> {conv} .",
                f"{post} <{SIOC}content> {lit(f'I met Person {a} and Person {b} at Place {c}.')} {conv} .",
                f"{post} <{SIOC}has_container> {thread} {conv} .",
                f"{post} <{PCM}role> \"user\" {conv} .",
                f"{post} <{PCM}position> \"{i % SESSION_TURNS}\"^^<{XSD}integer> {conv} .",
                f"{post} <{DCT}created> \"{when}\"^^<{XSD}dateTime> {conv} .",
                f"{post} <{PCM}extractionStatus> \"extracted\" {provg} .",
                f"{g} <{PROV}wasDerivedFrom> {post} {provg} .",
                f"{pa} <{RDF_TYPE}> <{SCHEMA}Person> {g} .",
                f"{pa} <{LABEL}> \"Person {a}\" {g} .",
                f"{pa} <{SCHEMA}knows> {pb} {g} .",
                f"{pb} <{RDF_TYPE}> <{SCHEMA}Person> {g} .",
                f"{pb} <{LABEL}> \"Person {b}\" {g} .",
                f"{pb} <{SCHEMA}homeLocation> {place} {g} .",
                f"{place} <{RDF_TYPE}> <{SCHEMA}City> {g} .",
                f"{place} <{LABEL}> \"Place {c}\" {g} .",
                f"{pa} <{PROV}wasDerivedFrom> {post} {g} .",
                f"{pb} <{PROV}wasDerivedFrom> {post} {g} .",
            ]
            if i % SESSION_TURNS == 0:
                lines += [f"{thread} <{RDF_TYPE}> <{SIOC}Thread> {conv} .",
                          f"{thread} <{DCT}identifier> \"base-{i // SESSION_TURNS}\" {conv} ."]
            if i % 50 == 0:
                lines.append(f"{pa} <http://xmlns.com/foaf/0.1/age> \"{30 + a % 40}\"^^<{XSD}integer> {g} .")
            f.write("\n".join(lines) + "\n")
            n += len(lines)
    return n


def utterances(count: int, people: int, seed: int = 5) -> list[Conversation]:
    rng = random.Random(seed)
    start = datetime.fromisoformat("2025-06-02T09:00:00+02:00")
    sessions: list[Conversation] = []
    for k in range(count):
        s = k // SESSION_TURNS
        if k % SESSION_TURNS == 0:
            sessions.append(Conversation(f"bench-{s}", []))
        who = rng.randrange(people)
        text = (f"Yesterday I had lunch with Person {who} and bought a reading lamp number {k} at IKEA for 40 euros."
                if k % 10 else f"By the way, Person {who} just turned {20 + k % 50}.")
        sessions[-1].utterances.append(Utterance(
            f"bench-{s}", k % SESSION_TURNS, "user", text, timestamp=start + timedelta(minutes=3 * k), source_id=f"u{k}"))
    return sessions


def reply(system: str, messages: list[Message], operation: str) -> str:
    """A model answering each benchmark utterance with realistic, valid Turtle (LLM time zero)."""
    utterance = messages[0].content.split("<utterance>\n", 1)[1].split("\n</utterance>", 1)[0]
    words = utterance.split()
    who = words[words.index("Person") + 1]
    if "turned" in utterance:
        return f"m:person-{who} a schema:Person ; rdfs:label \"Person {who}\" ; foaf:age {words[-1].rstrip('.')} ."
    k = words[words.index("number") + 1]
    return f"""```turtle
m:lunch-{k} a schema:FoodEvent ; rdfs:label "lunch with Person {who}" ; schema:agent m:owner ;
    schema:attendee m:person-{who} ; schema:startDate "2025-06-01"^^xsd:date .
m:buy-lamp-{k} a schema:BuyAction ; rdfs:label "buying reading lamp {k}" ; schema:agent m:owner ;
    schema:object m:lamp-{k} ; schema:seller m:ikea ; schema:price 40 ; schema:priceCurrency "EUR" ;
    schema:actionStatus schema:CompletedActionStatus .
m:lamp-{k} a schema:Product ; rdfs:label "reading lamp {k}" ; schema:brand m:ikea-brand .
m:ikea-brand a schema:Brand ; rdfs:label "IKEA" .
m:ikea a schema:Store ; rdfs:label "IKEA store" .
```"""


class Stages:
    """Wall time per pipeline stage, by wrapping the functions that implement each one."""

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = defaultdict(list)
        self._undo: list[Callable[[], None]] = []

    def wrap(self, owner: Any, name: str, stage: str) -> None:
        original = getattr(owner, name)
        self.times[stage] = []  # printed in the order wrapped, so sub-stages follow their stage

        def timed(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.times[stage].append(time.perf_counter() - t)

        setattr(owner, name, timed)
        self._undo.append(lambda: setattr(owner, name, original))

    def restore(self) -> None:
        for undo in reversed(self._undo):
            undo()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--posts", type=int, default=50_000)
    parser.add_argument("--utterances", type=int, default=1_000)
    parser.add_argument("--index", action="store_true", help="Keep the side index on (embeds the base posts first).")
    parser.add_argument("--batch", action="store_true",
                        help="One run over all utterances (as `pcm ingest FILE` does) instead of one run per utterance.")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="pcm-bench-extract-"))
    try:
        settings = Settings(memory=root / "memory", index_enabled=args.index)
        memory = Memory.init(settings, owner="Bench Owner")
        ns = memory.manifest.namespace
        t = time.perf_counter()
        quads = generate(root / "base.nq", ns, args.posts)
        memory.backend.bulk_load(str(root / "base.nq"), ox.RdfFormat.N_QUADS)
        print(f"base memory: {args.posts} posts, {quads} quads loaded in {time.perf_counter() - t:.1f} s", flush=True)
        if args.index:
            t = time.perf_counter()
            memory.sync_index()
            print(f"side index built in {time.perf_counter() - t:.1f} s")

        posts = memory.ingest(utterances(args.utterances, people=max(500, args.posts // 10))).posts
        client = ScriptedClient([reply] * (args.utterances * 3))
        stages = Stages()
        stages.wrap(ContextBuilder, "build", "context (previous turns, entity lookup)")
        stages.wrap(extractor_module.Extractor, "prompt", "prompt build")
        stages.wrap(extractor_module.Extractor, "check", "parse + normalise + SHACL")
        stages.wrap(pipeline_module, "write_extraction", "resolve + supersede + store write")
        stages.wrap(pipeline_module, "update_index", "index update")
        if args.index:  # what the index update and the entity matching spend their time on
            stages.wrap(SideIndex, "upsert_entities", "  of which: entity rows (embed + write)")
            stages.wrap(Embedder, "encode", "  model forward passes (any stage)")
            stages.wrap(Tables, "upsert", "  LanceDB update-or-insert")
            stages.wrap(Tables, "append", "  LanceDB plain append")
        per_utterance: list[float] = []
        cpu_per_utterance: list[float] = []
        totals = {"calls": 0, "repairs": 0, "failed": 0, "merges": 0, "supersessions": 0, "prompt_tokens": 0}
        reports = []
        if args.batch:  # one run, concurrency 1 so that the intervals between writes are per-utterance costs
            marks = [(time.perf_counter(), time.process_time())]

            def tick(n: int) -> None:
                marks.append((time.perf_counter(), time.process_time()))

            reports.append(extract_posts(memory.context, posts, client=client, concurrency=1, progress=tick))
            per_utterance = [b[0] - a[0] for a, b in zip(marks, marks[1:], strict=False)]
            cpu_per_utterance = [b[1] - a[1] for a, b in zip(marks, marks[1:], strict=False)]
        for done, post in enumerate([] if args.batch else posts, 1):  # one run per utterance, as `ingest --text`
            t, cpu = time.perf_counter(), time.process_time()
            reports.append(extract_posts(memory.context, [post], client=client, concurrency=1))
            per_utterance.append(time.perf_counter() - t)
            cpu_per_utterance.append(time.process_time() - cpu)
            if done % 200 == 0:
                window, cpu_window = per_utterance[-200:], cpu_per_utterance[-200:]
                growth = ", ".join(f"{stage.split(' (')[0].strip()} {1000 * statistics.median(times[-200:]):.1f}"
                                   for stage, times in stages.times.items() if len(times) >= 200)
                print(f"  utterances {done - 199}-{done}: median wall {1000 * statistics.median(window):.1f} ms, "
                      f"cpu {1000 * statistics.median(cpu_window):.1f} ms; stages (ms): {growth}", flush=True)
        for report in reports:
            totals["calls"] += report.calls
            totals["repairs"] += report.repairs
            totals["failed"] += report.failed
            totals["merges"] += report.merges
            totals["supersessions"] += report.supersessions
            totals["prompt_tokens"] += report.estimated_prompt_tokens
            if report.failed:
                print("failed:", report.failures)
        stages.restore()
        memory.close()

        ms = sorted(1000 * x for x in per_utterance)
        n = len(ms)
        mode = "one batch run" if args.batch else "one run per utterance"
        print(f"\npipeline overhead per utterance over {n} utterances ({mode}; LLM time zero):")
        print(f"  wall: median {statistics.median(ms):.1f} ms   p95 {ms[int(n * 0.95) - 1]:.1f} ms   max {ms[-1]:.1f} ms"
              f"   mean {statistics.fmean(ms):.1f} ms   (target: median <= 50 ms)")
        print(f"  cpu:  median {1000 * statistics.median(cpu_per_utterance):.1f} ms (process time, all threads; "
              "robust to other load on the machine)")
        for stage, times in stages.times.items():
            if not times:
                continue
            print(f"  {stage:45} median {1000 * statistics.median(times):6.2f} ms  ({len(times)} calls)")
        print(f"LLM calls per utterance: {totals['calls'] / n:.3f} (target 1 on the happy path); "
              f"repairs {totals['repairs']}, failed {totals['failed']}")
        print(f"estimated prompt tokens per call: {totals['prompt_tokens'] / max(1, totals['calls']):.0f}")
        print(f"merges {totals['merges']}, knowledge updates {totals['supersessions']}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

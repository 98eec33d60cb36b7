"""Store benchmarks (issue 2): bulk import at 1M triples, 2-hop lookups, episodic ingest.

Prints figures; asserts nothing. Run: ``python benchmarks/bench_store.py [--triples 1000000] [--utterances 5000]``.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

from pcm.conversations import Conversation, Utterance
from pcm.memory import Memory
from pcm.namespaces import DCTERMS as DCT
from pcm.namespaces import PCM, PROV, RDF, RDFS, SCHEMA, SIOC
from pcm.settings import Settings
from pcm.sparql import literal_term as lit

RDF_TYPE = RDF + "type"
LABEL = RDFS + "label"


def generate(path: Path, ns: str, target: int, seed: int = 7) -> tuple[int, int]:
    """A personal graph shaped like a pcm dump: posts in the conversation graph, one extraction graph per post."""
    rng = random.Random(seed)
    people = max(1000, target // 100)
    places = max(100, target // 2000)
    n = 0
    conv = "<urn:pcm:graph:conversation>"
    provg = "<urn:pcm:graph:provenance>"
    t0 = datetime(2024, 1, 1)
    with path.open("w", encoding="utf-8") as f:
        owner = f"<{ns}owner>"
        f.write(f"{owner} <{RDF_TYPE}> <{PCM}MemoryOwner> {conv} .\n{owner} <{LABEL}> \"Owner\" {conv} .\n")
        n += 2
        post_no = 0
        while n < target:
            post = f"<{ns}post/p{post_no}>"
            g = f"<urn:pcm:graph:extraction:p{post_no}>"
            thread = f"<{ns}session/s{post_no // 20}>"
            when = (t0 + timedelta(minutes=post_no)).isoformat()
            lines = [
                f"{post} <{RDF_TYPE}> <{SIOC}Post> {conv} .",
                f"{post} <{SIOC}content> {lit(f'utterance number {post_no} about person {post_no % people}')} {conv} .",
                f"{post} <{SIOC}has_container> {thread} {conv} .",
                f"{post} <{PCM}role> \"user\" {conv} .",
                f"{post} <{DCT}created> \"{when}\"^^<http://www.w3.org/2001/XMLSchema#dateTime> {conv} .",
                f"{g} <{PROV}wasDerivedFrom> {post} {provg} .",
            ]
            if post_no % 20 == 0:
                lines.append(f"{thread} <{RDF_TYPE}> <{SIOC}Thread> {conv} .")
                lines.append(f"{thread} <{DCT}identifier> \"s{post_no // 20}\" {conv} .")
            a, b = rng.randrange(people), rng.randrange(people)
            pa, pb, place = f"<{ns}person-{a}>", f"<{ns}person-{b}>", f"<{ns}place-{rng.randrange(places)}>"
            lines += [
                f"{pa} <{RDF_TYPE}> <{SCHEMA}Person> {g} .",
                f"{pa} <{LABEL}> \"Person {a}\" {g} .",
                f"{pa} <{SCHEMA}knows> {pb} {g} .",
                f"{pb} <{RDF_TYPE}> <{SCHEMA}Person> {g} .",
                f"{pb} <{LABEL}> \"Person {b}\" {g} .",
                f"{pb} <{SCHEMA}homeLocation> {place} {g} .",
                f"{place} <{RDF_TYPE}> <{SCHEMA}Place> {g} .",
                f"{place} <{LABEL}> \"Place\" {g} .",
                f"{pa} <{PROV}wasDerivedFrom> {post} {g} .",
                f"{pb} <{PROV}wasDerivedFrom> {post} {g} .",
            ]
            f.write("\n".join(lines) + "\n")
            n += len(lines)
            post_no += 1
    return n, people


def bench_import(work: Path, triples: int) -> None:
    settings = Settings(memory=work / "big", index_enabled=False)
    memory = Memory.init(settings, owner="Owner")
    ns = memory.manifest.namespace
    memory.close()
    dump = work / "big.nq"
    t = time.perf_counter()
    n, people = generate(dump, ns, triples)
    print(f"generated {n:,} quads ({dump.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t:.1f} s")

    memory = Memory.open(settings)
    t = time.perf_counter()
    report = memory.import_rdf(dump)
    dt = time.perf_counter() - t
    print(f"pcm import (parse, vocabulary check on a staging store, bulk load): {report.quads:,} quads in {dt:.2f} s "
          f"= {report.quads / dt:,.0f} triples/s (target >= 100,000)")

    import pyoxigraph as ox
    import rdflib

    raw = ox.Store(str(work / "raw"))
    t = time.perf_counter()
    raw.bulk_load(path=str(dump), format=ox.RdfFormat.N_QUADS)
    raw.flush()
    bl = time.perf_counter() - t
    print(f"for reference, pyoxigraph bulk_load alone (no checks): {bl:.2f} s = {n / bl:,.0f} triples/s")
    del raw

    t = time.perf_counter()
    ds = rdflib.Dataset()
    ds.parse(str(dump), format="nquads")
    rd = time.perf_counter() - t
    print(f"rdflib parse of the same file: {rd:.2f} s = {n / rd:,.0f} triples/s; pcm import is {rd / dt:.1f}x faster")
    del ds

    rng = random.Random(3)
    q = ("SELECT ?friend ?place WHERE {{ <{ns}person-{i}> <https://schema.org/knows> ?friend . "
         "?friend <https://schema.org/homeLocation> ?place }}")
    for i in range(20):
        memory.sparql(q.format(ns=ns, i=i))
    times = []
    for _ in range(500):
        t = time.perf_counter()
        memory.sparql(q.format(ns=ns, i=rng.randrange(people)))
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    print(f"2-hop sparql lookup at {n:,} triples (in-process, Memory.sparql incl. read-only check): "
          f"p50 {statistics.median(times):.2f} ms, p95 {times[int(0.95 * len(times))]:.2f} ms (target p50 <= 5 ms)")

    store_dir = settings.memory / "oxigraph"
    before = sum(f.stat().st_size for f in store_dir.rglob("*") if f.is_file())
    t = time.perf_counter()
    kept = memory.purge().quads
    dt = time.perf_counter() - t
    after = sum(f.stat().st_size for f in store_dir.rglob("*") if f.is_file())
    print(f"pcm purge (copy the store into fresh files, check, swap): {kept:,} quads in {dt:.1f} s = "
          f"{kept / dt:,.0f} quads/s; store files {before / 1e6:.0f} MB before, {after / 1e6:.0f} MB after")
    memory.close()


def bench_ingest(work: Path, utterances: int, index: bool) -> None:
    settings = Settings(memory=work / "episodic", index_enabled=index)
    Memory.init(settings, owner="Owner").close()
    rng = random.Random(5)
    words = ["dog", "bike", "trip", "doctor", "pasta", "Seattle", "sister", "yoga", "coffee", "garden", "vinyl", "jacket", "car", "repair", "Monday"]
    convs = []
    for s in range(utterances // 10):
        start = datetime(2025, 1, 1) + timedelta(days=s)
        convs.append(Conversation(f"session-{s}", [
            Utterance(f"session-{s}", i, "user" if i % 2 == 0 else "assistant",
                      " ".join(rng.choice(words) for _ in range(14)), timestamp=start + timedelta(minutes=i),
                      source_id=f"{s}:{i}")
            for i in range(10)
        ]))
    with Memory.open(settings) as memory:
        if index:
            memory.index  # noqa: B018 - load the embedding model before timing
        t = time.perf_counter()
        report = memory.ingest(convs)
        dt = time.perf_counter() - t
    size = sum(f.stat().st_size for f in settings.memory.rglob("*") if f.is_file())
    print(f"episodic ingest ({'store + LanceDB index' if index else 'store only'}): {report.added:,} utterances in "
          f"{dt:.1f} s = {report.added / dt:,.0f} utterances/s; {size / report.added:,.0f} bytes on disk per utterance")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--triples", type=int, default=1_000_000)
    parser.add_argument("--utterances", type=int, default=5_000)
    parser.add_argument("--no-index", action="store_true", help="measure ingest without the side index")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pcm-bench-"))
    try:
        bench_import(work, args.triples)
        bench_ingest(work, args.utterances, index=not args.no_index)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

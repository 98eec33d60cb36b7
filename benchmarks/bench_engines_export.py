"""Export and re-import of a large memory (1M quads by default) on the embedded store, `oxigraph serve` and Virtuoso.

    python benchmarks/bench_engines_export.py [--quads N] [--engines embedded,oxigraph,virtuoso] [--json]

The memory is synthetic but shaped like one pcm writes: posts in the conversation graph (type, session, speaker,
time, text, order), one extraction graph per post (entities from a shared pool with types, labels and
``prov:wasDerivedFrom`` the post, an event linking them, the owner knowing one of them) and an extraction activity
per post in the provenance graph; about 23 quads per post. Each engine gets a fresh store started by the helpers
the tests use (see ``bench_engines.py``); the quads are bulk loaded into an initialised memory, then timed:

* ``export``: ``Memory.export("nquads")`` (what ``pcm export`` does),
* ``import``: ``Memory.import_rdf`` of that file into a second fresh memory on the same engine (what ``pcm import``
  does: parse and check on a staging store, re-home the individuals into the new memory's namespace, bulk load).

The re-imported memory is checked to hold as many quads as the export. Not run in CI: figures depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import pyoxigraph as ox  # noqa: E402

from bench_engines import empty, engine_settings  # noqa: E402
from pcm.memory import Memory  # noqa: E402
from pcm.naming import Naming  # noqa: E402

#: Quads written per synthetic post (conversation 7, extraction 13, provenance 3).
PER_POST = 23
#: Distinct entities the posts' extractions draw from (a memory mentions the same people and places again).
ENTITY_POOL = 5_000
_TYPES = ("Person", "Place", "Organization", "CreativeWork")
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
SIOC = "http://rdfs.org/sioc/ns#"
DCT = "http://purl.org/dc/terms/"
PROV = "http://www.w3.org/ns/prov#"
SCHEMA = "https://schema.org/"
XSD_DATETIME = "http://www.w3.org/2001/XMLSchema#dateTime"


def synthetic_nquads(naming: Naming, posts: int, path: Path) -> int:
    """Write ``posts`` posts with their extraction graphs and activities as N-Quads; returns the quads written."""
    ns = naming.namespace
    written = 0

    def iri(value: str) -> str:
        return f"<{value}>"

    def lit(value: str, datatype: str | None = None) -> str:
        text = json.dumps(value, ensure_ascii=False)
        return f"{text}^^<{datatype}>" if datatype else text

    conv, prov = iri(naming.layout.conversation), iri(naming.layout.provenance)  # the memory's own graph names
    owner = iri(naming.owner)
    with path.open("w", encoding="utf-8") as out:
        previous = None
        for n in range(posts):
            post = naming.post(f"{n:016x}")
            p = iri(post)
            session = iri(f"{ns}session/s{n // 20}")
            speaker = owner if n % 2 else iri(f"{ns}friend-{n % 7}")
            when = lit(f"2024-{1 + n % 12:02d}-{1 + n % 28:02d}T{n % 24:02d}:{n % 60:02d}:00", XSD_DATETIME)
            lines = [
                (p, iri(RDF + "type"), iri(SIOC + "Post"), conv),
                (p, iri(SIOC + "has_container"), session, conv),
                (p, iri(PROV + "wasAttributedTo"), speaker, conv),
                (p, iri(DCT + "identifier"), lit(f"D{n // 20}:{n % 20}"), conv),
                (p, iri(DCT + "created"), when, conv),
                (p, iri(SIOC + "content"), lit(f"Post {n}: I went to place {n % ENTITY_POOL} with entity {(7 * n) % ENTITY_POOL} again."), conv),
                (p, iri(SIOC + "previous_by_date"), previous or p, conv),
            ]
            graph = iri(naming.extraction_graph(post))
            a, b = n % ENTITY_POOL, (7 * n + 3) % ENTITY_POOL
            event = iri(f"{ns}event-{n}")
            for e in (a, b):
                entity = iri(f"{ns}entity-{e}")
                lines += [
                    (entity, iri(RDF + "type"), iri(SCHEMA + _TYPES[e % len(_TYPES)]), graph),
                    (entity, iri(RDFS + "label"), lit(f"Entity {e}"), graph),
                    (entity, iri(PROV + "wasDerivedFrom"), p, graph),
                ]
            lines += [
                (event, iri(RDF + "type"), iri(SCHEMA + "Event"), graph),
                (event, iri(RDFS + "label"), lit(f"Event {n}"), graph),
                (event, iri(SCHEMA + "location"), iri(f"{ns}entity-{a}"), graph),
                (event, iri(SCHEMA + "startDate"), when, graph),
                (event, iri(PROV + "wasDerivedFrom"), p, graph),
                (owner, iri(SCHEMA + "knows"), iri(f"{ns}entity-{b}"), graph),
                (event, iri(SCHEMA + "attendee"), owner, graph),
            ]
            activity = iri(naming.activity("extraction", f"{n:016x}"))
            lines += [
                (activity, iri(RDF + "type"), iri(PROV + "Activity"), prov),
                (activity, iri(PROV + "used"), p, prov),
                (activity, iri(PROV + "startedAtTime"), when, prov),
            ]
            out.write("".join(f"{s} {pr} {o} {g} .\n" for s, pr, o, g in lines))
            written += len(lines)
            previous = p
    return written


def run(engine: str, quads: int, where: Path) -> dict[str, Any]:
    where.mkdir(parents=True)
    with engine_settings(engine, where) as base:
        # a long request timeout: one write of 50,000 quads can take over the default 30 s on a loaded machine
        base = base.with_(query_timeout=300.0)
        settings = base.with_(memory=where / "mem", index_enabled=False)
        with Memory.init(settings, owner="Caroline") as memory:
            data = where / "synthetic.nq"
            written = synthetic_nquads(memory.naming, max(1, quads // PER_POST), data)
            started = time.perf_counter()
            memory.backend.bulk_load(str(data), ox.RdfFormat.N_QUADS)
            load_s = time.perf_counter() - started
            total = len(list(memory.backend.quads()))
            started = time.perf_counter()
            dump = memory.export("nquads")
            export_s = time.perf_counter() - started
        path = where / "export.nq"
        path.write_bytes(dump)
        del dump
        empty(base)
        again = base.with_(memory=where / "again", index_enabled=False)
        with Memory.init(again, owner="Caroline") as restored:
            before = len(list(restored.backend.quads()))
            started = time.perf_counter()
            report = restored.import_rdf(path)
            import_s = time.perf_counter() - started
            after = len(list(restored.backend.quads()))
        empty(base)
    return {
        "engine": engine, "synthetic": written, "quads": total, "load_s": round(load_s, 1),
        "export_s": round(export_s, 1), "export_mb": round(path.stat().st_size / 1e6, 1),
        "import_s": round(import_s, 1), "imported": report.quads, "gained": after - before,
        "export_kq_s": round(total / export_s / 1000, 1), "import_kq_s": round(total / import_s / 1000, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quads", type=int, default=1_000_000, help="size of the synthetic memory (default 1M)")
    parser.add_argument("--engines", default="embedded,oxigraph,virtuoso")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="pcm-bench-export-") as tmp:
        for engine in args.engines.split(","):
            results.append(run(engine, args.quads, Path(tmp) / engine))
            if not args.json:
                print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{'engine':<10} {'quads':>9} {'load s':>7} {'export s':>9} {'MB':>6} {'import s':>9} {'kq/s exp':>9} "
          f"{'kq/s imp':>9} {'gained':>9}")
    for r in results:
        print(f"{r['engine']:<10} {r['quads']:>9} {r['load_s']:>7} {r['export_s']:>9} {r['export_mb']:>6} "
              f"{r['import_s']:>9} {r['export_kq_s']:>9} {r['import_kq_s']:>9} {r['gained']:>9}")


if __name__ == "__main__":
    main()

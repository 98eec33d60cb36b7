"""Ingest, recall, ask and export/re-import wall times of one memory on the embedded store, `oxigraph serve` and
Virtuoso.

    python benchmarks/bench_engines.py [--sessions N] [--questions N] [--index] [--json]

Each engine gets a fresh store (Oxigraph: a temporary ``--location``; Virtuoso: a temporary database, Digest auth as
``dba``), started on loopback by the same helpers the tests use and stopped at the end. The memory ingests the first
N sessions of LoCoMo conv-26 (episodic mode, no LLM; on a server a session's posts go in requests of up to the
store's batch), runs ``recall`` (k 10) and then ``ask`` for the first questions in process (no LLM: the episodic
path, so this times the store's reads; without ``--index`` they find nothing to search and return at once), then is
exported as N-Quads and re-imported into a second fresh memory on the same engine. Targets from the issue: ingest on
Virtuoso <= 1.2x embedded (on any loopback server <= 1.5x), ask p95 <= 2x embedded.
Not run in CI: figures depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO))  # the tests package: its sample memory and servers

from tests.oxigraph_server import start_oxigraph  # noqa: E402
from tests.virtuoso_server import VIRTUOSO_PASSWORD, VIRTUOSO_USER, start_virtuoso  # noqa: E402

from pcm.backend_remote import RemoteBackend  # noqa: E402
from pcm.conversations import Conversation, parse_file  # noqa: E402
from pcm.evaluation.metrics import percentile  # noqa: E402
from pcm.memory import Memory  # noqa: E402
from pcm.settings import Settings  # noqa: E402

LOCOMO = REPO.parent / "shared" / "data" / "locomo" / "locomo-conv-26.json"


@contextmanager
def engine_settings(engine: str, where: Path) -> Iterator[Settings]:
    if engine == "embedded":
        with nullcontext():
            yield Settings()
    elif engine == "oxigraph":
        if shutil.which("oxigraph") is None:
            raise SystemExit("the `oxigraph` binary is not on PATH")
        with start_oxigraph(where / "oxigraph") as url:
            yield Settings(store_url=url)
    else:
        if shutil.which("virtuoso-t") is None:
            raise SystemExit("the `virtuoso-t` binary is not on PATH (apt-get install virtuoso-opensource)")
        with start_virtuoso(where / "virtuoso") as url:
            yield Settings(store_url=url, store_user=VIRTUOSO_USER, store_password=VIRTUOSO_PASSWORD)


def empty(settings: Settings) -> None:
    if settings.store_url:
        with RemoteBackend(settings.store_url, user=settings.store_user, password=settings.store_password,
                           timeout=max(settings.query_timeout, 30.0)) as backend:
            for graph in backend.named_graphs():
                backend.update(f"DROP SILENT GRAPH <{graph}>")


def questions(n: int) -> list[str]:
    data = json.loads(LOCOMO.read_text(encoding="utf-8"))
    sample = data[0] if isinstance(data, list) else data
    return [q["question"] for q in sample["qa"]][:n]


def run(engine: str, conversations: list[Conversation], asked: list[str], index: bool, where: Path) -> dict[str, Any]:
    where.mkdir(parents=True)
    turns = sum(len(c.utterances) for c in conversations)
    with engine_settings(engine, where) as base:
        settings = base.with_(memory=where / f"{engine}-mem", index_enabled=index)
        with Memory.init(settings, owner="Caroline") as memory:
            started = time.perf_counter()
            memory.ingest(conversations)
            ingest_s = time.perf_counter() - started
            recalls = [0.0]  # recall reads the side index alone: nothing to time without it
            for question in asked if index else ():
                started = time.perf_counter()
                memory.recall(question, k=10)
                recalls.append((time.perf_counter() - started) * 1000)
            times = []
            for question in asked:
                started = time.perf_counter()
                memory.ask(question)
                times.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            dump = memory.export("nquads")
            export_s = time.perf_counter() - started
        path = where / f"{engine}.nq"
        path.write_bytes(dump)
        empty(base)
        again = base.with_(memory=where / f"{engine}-again", index_enabled=False)
        with Memory.init(again, owner="Caroline") as restored:
            started = time.perf_counter()
            report = restored.import_rdf(path)
            import_s = time.perf_counter() - started
        empty(base)
    return {
        "engine": engine, "turns": turns, "ingest_s": round(ingest_s, 2),
        "recall_p50_ms": round(statistics.median(recalls), 1), "recall_p95_ms": round(percentile(recalls, 95), 1),
        "ask_p50_ms": round(statistics.median(times), 1),
        "ask_p95_ms": round(percentile(times, 95), 1), "export_s": round(export_s, 2), "quads": report.quads,
        "import_s": round(import_s, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=19, help="LoCoMo conv-26 sessions to ingest (default: all 19)")
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--index", action="store_true", help="keep the side index on (embeds every turn)")
    parser.add_argument("--engines", default="embedded,oxigraph,virtuoso")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    conversations = parse_file(LOCOMO, "locomo")
    chosen = conversations[: args.sessions]  # one Conversation per session, in the file's order
    asked = questions(args.questions)
    results = []
    with tempfile.TemporaryDirectory(prefix="pcm-bench-engines-") as tmp:
        run("embedded", chosen[:1], asked[:2], args.index, Path(tmp) / "warm-up")  # model and query worker loaded
        for engine in args.engines.split(","):
            results.append(run(engine, chosen, asked, args.index, Path(tmp) / engine))
    if args.json:
        print(json.dumps(results, indent=2))
        return
    embedded = next((r for r in results if r["engine"] == "embedded"), None)
    def ratio(r: dict[str, Any], key: str) -> str:
        return f"{r[key] / embedded[key]:.2f}" if embedded and embedded[key] else "-"

    print(f"{'engine':<10} {'turns':>6} {'ingest s':>9} {'x emb':>6} {'rec p50':>8} {'rec p95':>8} {'x emb':>6} "
          f"{'ask p50':>8} {'ask p95':>8} {'x emb':>6} {'export s':>9} {'quads':>7} {'import s':>9}")
    for r in results:
        print(f"{r['engine']:<10} {r['turns']:>6} {r['ingest_s']:>9} {ratio(r, 'ingest_s'):>6} {r['recall_p50_ms']:>8} "
              f"{r['recall_p95_ms']:>8} {ratio(r, 'recall_p95_ms'):>6} {r['ask_p50_ms']:>8} {r['ask_p95_ms']:>8} "
              f"{ratio(r, 'ask_p95_ms'):>6} {r['export_s']:>9} {r['quads']:>7} {r['import_s']:>9}")


if __name__ == "__main__":
    main()

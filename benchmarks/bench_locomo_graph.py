"""The graph path on a real conversation: LoCoMo's conv-26 extracted by a local model, its questions asked three ways.

Every turn is stored and indexed first (episodic ingest); then a GGUF model run in this process extracts facts
session by session, in order, until ``--minutes`` are spent (a session is begun only while time is left, and only
wholly extracted sessions count). The questions whose evidence lies wholly in those sessions are then asked:

- **both**: ``ask`` as the product runs it (frame, stored facts, graph query, then episodic recall);
- **graph**: the same answers where they came from the graph; where ask fell back to recalled utterances, the
  graph path had no answer ("not in memory");
- **episodic**: the model answers from the ten recalled utterances alone, as ask's fallback does, with no graph.

Scores: LoCoMo's token F1 by category (:func:`pcm.evaluation.metrics.locomo_f1`; abstention for adversarial
questions), and "by values": every word of the gold answer (normalised as LoCoMo does) is in the answer.

    nice python benchmarks/bench_locomo_graph.py MODEL --out DIR [--minutes 70] [--output compact] [--ask] [--record REC]

Both steps resume: the memory keeps which posts were extracted, and ``DIR/answers.jsonl`` which questions were
asked. ``--record REC`` keeps every model exchange, so a later change to what happens after the model (grounding,
validation, the ask evaluator) can be measured again on the same answers: ``--replay REC`` answers from the
recording where it holds the exchange and from the model where the prompt changed.
The data (non-commercial, never bundled) is read from ``../shared/data``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from bench_local_model import Replaying  # noqa: E402  (recorded answers first, the model where the prompt changed)
from pcm.evaluation.datasets import EvalItem, EvalQuestion, category_of, load_items  # noqa: E402
from pcm.evaluation.metrics import locomo_f1, normalize_answer  # noqa: E402
from pcm.extraction import extract_posts  # noqa: E402
from pcm.llm.llamacpp_client import LlamaCppClient  # noqa: E402
from pcm.llm.record import RecordingClient, ReplayClient  # noqa: E402
from pcm.memory import MANIFEST, Memory  # noqa: E402
from pcm.retrieval import answer as answers  # noqa: E402
from pcm.retrieval.ask import CachingClient, ask  # noqa: E402
from pcm.settings import LLMSpec, Settings  # noqa: E402

DEFAULT_PATH = REPO.parent / "shared" / "data" / "locomo" / "locomo-conv-26.json"
#: Posts recalled for a question (as ``pcm eval`` asks).
K = 10
GRAPH_PATHS_NOT = ("episodic", "none")
MODES = ("graph", "episodic", "both")


def open_memory(out: Path, item: EvalItem) -> Memory:
    """The conversation's memory under ``out``: made and ingested (episodic, indexed) once, reopened after."""
    path = out / "memory"
    settings = Settings().with_(memory=path, llm=LLMSpec(), index_enabled=True)
    if (path / MANIFEST).exists():
        return Memory.open(settings)
    owner = next(u.speaker for c in item.conversations for u in c.utterances if u.role == "user" and u.speaker)
    memory = Memory.init(settings, owner=owner, namespace="https://pcm.invalid/m/locomo-graph/")
    started = time.perf_counter()
    report = memory.ingest(item.conversations)
    print(f"stored and indexed {report.added} turns in {time.perf_counter() - started:.1f} s", flush=True)
    return memory


def sessions_in_order(memory: Memory) -> dict[str, list[str]]:
    by_session: dict[str, list[str]] = defaultdict(list)
    for post in memory.store.posts():
        if post.role != "system":
            by_session[post.session].append(post.iri)
    return dict(sorted(by_session.items(), key=lambda kv: _session_number(kv[0])))


def _session_number(session: str) -> int:
    digits = "".join(ch for ch in session.rsplit("_", 1)[-1] if ch.isdigit())
    return int(digits) if digits else 0


def extract(memory: Memory, client: LlamaCppClient, out: Path, minutes: float, output: str) -> list[str]:
    """Extract whole sessions in order while time is left; the sessions done (this run and earlier ones)."""
    done_file = out / "sessions.json"
    done: dict[str, Any] = json.loads(done_file.read_text()) if done_file.exists() else {}
    started = time.perf_counter()
    for session, iris in sessions_in_order(memory).items():
        if session in done:
            continue
        if time.perf_counter() - started > minutes * 60:
            break
        began = time.perf_counter()
        finished = [0]

        def progress(n: int, finished: list[int] = finished, session: str = session, total: int = len(iris)) -> None:
            finished[0] += n
            print(f"  {session}: {finished[0]}/{total}", flush=True)

        run = extract_posts(memory.context, iris, client=client, output=output, concurrency=1, progress=progress)
        memory.sync_index()
        report = run.as_json()
        done[session] = {"posts": len(iris), "seconds": round(time.perf_counter() - began, 1), **{
            key: report.get(key) for key in ("extracted", "gated", "failed", "repairs", "output_tokens", "ungrounded")}}
        print(f"{session}: {done[session]}", flush=True)
        done_file.write_text(json.dumps(done, indent=2) + "\n")
    return list(done)


def by_values(answer: str, gold: str) -> bool:
    words = normalize_answer(gold).split()
    said = set(normalize_answer(answer).split())
    return bool(words) and all(w in said for w in words)


def episodic(memory: Memory, client: CachingClient, q: EvalQuestion) -> str:
    posts = answers.posts_from_hits(memory.recall(q.text, K))
    lines = [answers.utterance_line(p) for p in posts]
    assert q.as_of is not None
    reply = answers.answer_from_context(client, q.text, lines, as_of=q.as_of, owner_name=memory.manifest.owner)
    return reply.text if reply.text is not None else answers.NOT_IN_MEMORY


def ask_all(memory: Memory, client: LlamaCppClient, item: EvalItem, sessions: list[str], out: Path) -> None:
    session_of = {p.source_id: p.session for p in memory.store.posts()}
    chosen = [q for q in item.questions
              if q.evidence and all(session_of.get(e) in sessions for e in q.evidence)]
    print(f"{len(chosen)} of {len(item.questions)} questions have all their evidence in the {len(sessions)} "
          "extracted sessions", flush=True)
    rows_file = out / "answers.jsonl"
    asked = {json.loads(line)["id"] for line in rows_file.read_text().splitlines()} if rows_file.exists() else set()
    cache = CachingClient(client, memory.context)
    with rows_file.open("a", encoding="utf-8") as sink:
        for q in chosen:
            if q.id in asked:
                continue
            began = time.perf_counter()
            result = ask(memory.context, q.text, client=cache, as_of=q.as_of, k=K)
            both_s = time.perf_counter() - began
            began = time.perf_counter()
            recalled = episodic(memory, cache, q)
            row = {"id": q.id, "category": category_of(q), "question": q.text, "gold": q.gold, "path": result.path,
                   "both": result.answer, "episodic": recalled,
                   "graph": answers.NOT_IN_MEMORY if result.path in GRAPH_PATHS_NOT else result.answer,
                   "seconds": {"both": round(both_s, 1), "episodic": round(time.perf_counter() - began, 1)}}
            sink.write(json.dumps(row) + "\n")
            sink.flush()
            print(f"[{row['category']}] {q.text} | gold {q.gold!r} | {result.path}: {result.answer[:90]!r} | "
                  f"episodic: {recalled[:90]!r}", flush=True)


def report(out: Path) -> None:
    rows = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
    table: dict[str, dict[str, list[tuple[float, bool]]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        for mode in MODES:
            score = (locomo_f1(row[mode], row["gold"], row["category"]),
                     by_values(row[mode], row["gold"]) if row["category"] != "adversarial"
                     else locomo_f1(row[mode], row["gold"], row["category"]) == 1.0)
            table[row["category"]][mode].append(score)
            table["all"][mode].append(score)
    print("\n| category | n | " + " | ".join(f"{m} F1 | {m} by values" for m in MODES) + " |")
    print("|---|---|" + "---|---|" * len(MODES))
    for category in sorted(table, key=lambda c: (c == "all", c)):
        cells = []
        for mode in MODES:
            scores = table[category][mode]
            cells += [f"{statistics.fmean(s for s, _ in scores):.3f}", f"{sum(v for _, v in scores)}/{len(scores)}"]
        print(f"| {category} | {len(table[category]['both'])} | " + " | ".join(cells) + " |")
    paths: dict[str, int] = defaultdict(int)
    for row in rows:
        paths[row["path"]] += 1
    both = sorted(r["seconds"]["both"] for r in rows)
    print(f"\nask paths: {dict(sorted(paths.items()))}; ask seconds median {statistics.median(both):.1f}, "
          f"max {both[-1]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", help="path of a .gguf file")
    parser.add_argument("--data", type=Path, default=DEFAULT_PATH)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--minutes", type=float, default=60.0, help="extraction time to spend (whole sessions)")
    parser.add_argument("--output", choices=("compact", "json"), default="compact")
    parser.add_argument("--ask", action="store_true", help="ask the questions of the extracted sessions")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--record", type=Path, help="record every model exchange in this folder")
    parser.add_argument("--replay", type=Path,
                        help="answer from this recording where it holds the exchange, from the model otherwise "
                             "(with --record the same folder may be given: it gains the live exchanges)")
    args = parser.parse_args()
    item = load_items("locomo", args.data)[0]
    args.out.mkdir(parents=True, exist_ok=True)
    memory = open_memory(args.out, item)
    model = LlamaCppClient(model_path=args.model, threads=args.threads, context=16384,
                           state_dir=Settings().llm_state_dir)
    client: Any = RecordingClient(model, args.record) if args.record else model
    if args.replay:
        client = Replaying(ReplayClient(args.replay), client)
    try:
        sessions = extract(memory, client, args.out, args.minutes, args.output) if args.minutes > 0 else \
            list(json.loads((args.out / "sessions.json").read_text()))
        if args.ask:
            ask_all(memory, client, item, sessions, args.out)
            report(args.out)
    finally:
        model.close()
        memory.close()


if __name__ == "__main__":
    main()

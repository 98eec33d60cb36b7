"""Ask benchmark (issue 5): everything except LLM time, on a memory of ~1M triples and 100k posts.

The memory: the bundled sample conversations, extracted through the real pipeline with the scripted Turtle of
``tests/fixtures/ask/extraction`` (so the gold questions have their facts), plus a synthetic personal graph bulk
loaded beside it: ~100k posts in 1,000 sessions (10 quads each, as ``pcm ingest`` writes them) and ~8,000
extraction graphs about the owner's friends, their purchases, trips, pets and events, with provenance. The side
index holds every entity (for entity-to-vertex matching); posts are not indexed (recall is not on this path).

Measured per question, with the scripted client replaying the gold SPARQL of ``tests/fixtures/ask/questions.json``
(so LLM time is ~0 and is subtracted anyway): grounding (entity matching incl. mention embeddings, usage counts,
catalogue), safety checks, execution in the worker process, post-processing, evidence (the evidence query, graph
lookups, cited posts), the answer. Prints p50/p95 overall and per stage, answer accuracy at scale, and the prompt
tokens per question. ``--llm`` runs the same questions against the configured model (``PCM_LLM``) instead.

``--set FILE`` asks another question set (e.g. ``tests/fixtures/ask/varied.json``: the gold facts in other
words, other operations, other languages, abstentions) and scores it by values, abstentions and citations,
overall, per category and per language. Such a set has no gold SPARQL: the scripted client then answers every
model call with nothing (``NO QUERY``), so without ``--llm`` it measures what ask does without a model.

Run: ``python benchmarks/bench_ask.py [--memory DIR] [--posts 100000] [--graphs 8000] [--runs 3] [--llm]
[--questions N] [--set FILE] [--record DIR]``.
The memory is built once into DIR (default: a temp dir) and reused when it exists.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyoxigraph as ox

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the tests package: its sample memory and servers

from tests.retrieval.test_ask_support import FIXTURES, build_sample_memory, cited_ids, sparql_reply  # noqa: E402

from pcm.errors import LLMError  # noqa: E402
from pcm.index.records import entity_record as _entity_record  # noqa: E402
from pcm.llm import ScriptedClient  # noqa: E402
from pcm.llm.base import LLMClient, Message  # noqa: E402
from pcm.memory import Memory  # noqa: E402
from pcm.settings import Settings  # noqa: E402

SCHEMA = "https://schema.org/"
PCM = "https://w3id.org/pcm/ontology#"
PROV = "http://www.w3.org/ns/prov#"
SIOC = "http://rdfs.org/sioc/ns#"
DCT = "http://purl.org/dc/terms/"
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
XSD = "http://www.w3.org/2001/XMLSchema#"
REL = "http://purl.org/vocab/relationship/"
CONV, PROVG = ox.NamedNode("urn:pcm:graph:conversation"), ox.NamedNode("urn:pcm:graph:provenance")
FIRST = ("Alex", "Sam", "Jordan", "Taylor", "Morgan", "Casey", "Riley", "Jamie", "Avery", "Quinn", "Rowan", "Elliot")
LAST = ("Nguyen", "Garcia", "Smith", "Kowalski", "Okafor", "Haddad", "Lindqvist", "Moreau", "Tanaka", "Rossi")
CITIES = ("Vienna", "Osaka", "Lyon", "Bergen", "Austin", "Halifax", "Porto", "Ghent", "Tartu", "Bologna")
THINGS = ("kayak", "tent", "camera", "guitar", "blender", "drone", "lamp", "backpack", "bike helmet", "printer")
WORDS = ("coffee", "meeting", "weekend", "garden", "movie", "dinner", "project", "trip", "book", "run", "weather")


def N(iri: str) -> ox.NamedNode:  # noqa: N802 - reads like the RDF it builds
    return ox.NamedNode(iri)


def lit(value: object, datatype: str | None = None) -> ox.Literal:
    return ox.Literal(str(value), datatype=N(XSD + datatype)) if datatype else ox.Literal(str(value))


def synthetic(ns: str, posts: int, graphs: int, seed: int = 11) -> list[ox.Quad]:
    """Posts, sessions and extraction graphs shaped like what ingest and extraction write (see the docstring)."""
    rng = random.Random(seed)
    quads: list[ox.Quad] = []
    t0 = datetime(2023, 1, 1, 9, 0, tzinfo=UTC)
    per_session = 100
    post_iris: list[str] = []
    step = max(1, posts // graphs) if graphs else 0  # every step-th post has an extraction graph (0: none)
    for i in range(posts):
        session = f"{ns}session/bench-{i // per_session}"
        if i % per_session == 0:
            quads += [ox.Quad(N(session), N(RDF_TYPE), N(SIOC + "Thread"), CONV),
                      ox.Quad(N(session), N(DCT + "identifier"), lit(f"bench-{i // per_session}"), CONV)]
        post = f"{ns}post/bench{i:06d}"
        post_iris.append(post)
        p = N(post)
        text = " ".join(rng.choice(WORDS) for _ in range(12))
        quads += [
            ox.Quad(p, N(RDF_TYPE), N(SIOC + "Post"), CONV),
            ox.Quad(p, N(SIOC + "content"), lit(text), CONV),
            ox.Quad(p, N(SIOC + "has_container"), N(session), CONV),
            ox.Quad(p, N(PCM + "role"), lit("user" if i % 2 == 0 else "assistant"), CONV),
            ox.Quad(p, N(PCM + "position"), lit(i % per_session, "integer"), CONV),
            ox.Quad(p, N(PROV + "wasAttributedTo"), N(ns + ("owner" if i % 2 == 0 else "assistant")), CONV),
            ox.Quad(p, N(DCT + "created"), lit((t0 + timedelta(minutes=7 * i)).isoformat(), "dateTime"), CONV),
            ox.Quad(p, N(DCT + "identifier"), lit(f"b{i}"), CONV),
            ox.Quad(p, N(PCM + "extractionStatus"), lit("extracted" if step and i % step == 0 else "pending"), PROVG),
        ]
        if i % per_session:
            quads.append(ox.Quad(p, N(SIOC + "previous_by_date"), N(post_iris[-2]), CONV))
    people = [f"{ns}friend-{j}" for j in range(max(50, graphs // 4))]
    for k in range(graphs):
        post = post_iris[(k * step) % posts]
        g = N("urn:pcm:graph:extraction:" + post.rsplit("/", 1)[-1])
        facts = _facts(rng, ns, k, people)
        quads += [ox.Quad(s, pr, o, g) for s, pr, o in facts]
        subjects = sorted({s.value for s, _, _ in facts if s.value.startswith(ns) and not s.value.endswith("/owner")})
        quads += [ox.Quad(N(s), N(PROV + "wasDerivedFrom"), N(post), g) for s in subjects]
        act = N(f"{ns}activity/extraction/{k}")
        quads += [
            ox.Quad(g, N(RDF_TYPE), N(PROV + "Entity"), PROVG),
            ox.Quad(g, N(PROV + "wasGeneratedBy"), act, PROVG),
            ox.Quad(g, N(PROV + "wasDerivedFrom"), N(post), PROVG),
            ox.Quad(act, N(RDF_TYPE), N(PCM + "ExtractionActivity"), PROVG),
            ox.Quad(act, N(PROV + "startedAtTime"), lit((t0 + timedelta(minutes=k)).isoformat(), "dateTime"), PROVG),
        ]
    return quads


def _facts(rng: random.Random, ns: str, k: int, people: list[str]) -> list[tuple[ox.NamedNode, ox.NamedNode, object]]:
    """One utterance's worth of facts about a friend of the owner (never about the owner: gold answers stay right)."""
    person = people[k % len(people)]
    name = f"{FIRST[k % len(FIRST)]} {LAST[(k // len(FIRST)) % len(LAST)]} {k % len(people)}"
    day = (datetime(2023, 1, 1) + timedelta(days=rng.randrange(900))).date().isoformat()
    out: list[tuple[ox.NamedNode, ox.NamedNode, object]] = [
        (N(person), N(RDF_TYPE), N(SCHEMA + "Person")),
        (N(person), N(LABEL), lit(name)),
        (N(ns + "owner"), N(REL + "friendOf"), N(person)),
    ]
    kind = k % 4
    if kind == 0:
        thing, store = N(f"{ns}item-{k}"), N(f"{ns}store-{k % 300}")
        act = N(f"{ns}buy-{k}")
        out += [(thing, N(RDF_TYPE), N(SCHEMA + "Product")), (thing, N(LABEL), lit(f"{rng.choice(THINGS)} {k}")),
                (store, N(RDF_TYPE), N(SCHEMA + "Store")), (store, N(LABEL), lit(f"Shop {k % 300}")),
                (act, N(RDF_TYPE), N(SCHEMA + "BuyAction")), (act, N(LABEL), lit(f"{name} buying item {k}")),
                (act, N(SCHEMA + "agent"), N(person)), (act, N(SCHEMA + "object"), thing),
                (act, N(SCHEMA + "seller"), store), (act, N(SCHEMA + "price"), lit(rng.randrange(5, 900), "integer")),
                (act, N(SCHEMA + "startDate"), lit(day, "date"))]
    elif kind == 1:
        city, act = N(f"{ns}city-{k % 200}"), N(f"{ns}trip-{k}")
        out += [(city, N(RDF_TYPE), N(SCHEMA + "City")), (city, N(LABEL), lit(f"{CITIES[k % len(CITIES)]} {k % 200}")),
                (act, N(RDF_TYPE), N(SCHEMA + "TravelAction")), (act, N(LABEL), lit(f"{name}'s trip {k}")),
                (act, N(SCHEMA + "agent"), N(person)), (act, N(SCHEMA + "toLocation"), city),
                (act, N(SCHEMA + "startDate"), lit(day, "date"))]
    elif kind == 2:
        pet = N(f"{ns}pet-{k}")
        out += [(pet, N(RDF_TYPE), N(PCM + "Pet")), (pet, N(LABEL), lit(f"Pet {k}")),
                (pet, N(PCM + "petSpecies"), lit(rng.choice(("dog", "cat", "rabbit")))), (N(person), N(PCM + "hasPet"), pet)]
    else:
        event = N(f"{ns}event-{k}")
        out += [(event, N(RDF_TYPE), N(SCHEMA + "SocialEvent")), (event, N(LABEL), lit(f"{name}'s party {k}")),
                (event, N(SCHEMA + "agent"), N(person)), (event, N(SCHEMA + "startDate"), lit(day, "date"))]
    return out  # type: ignore[return-value]


def build(directory: Path, posts: int, graphs: int) -> None:
    started = time.perf_counter()
    memory = build_sample_memory(directory, index=False)
    ns = memory.naming.namespace
    quads = synthetic(ns, posts - memory.post_count(), graphs)
    spool = directory / "bench.nq"
    spool.write_bytes(ox.serialize(quads, format=ox.RdfFormat.N_QUADS))
    memory.backend.bulk_load(str(spool), ox.RdfFormat.N_QUADS)
    spool.unlink()
    triples = len(list(memory.backend.quads()))
    print(f"built {directory}: {memory.post_count()} posts, {triples} quads in {time.perf_counter() - started:.0f} s")
    memory.close()
    index_entities(directory)


def index_entities(directory: Path) -> None:
    """(Re)build the side index with every entity of the memory (posts are not indexed: not on this path)."""
    import shutil

    from pcm.index import SideIndex, get_embedder

    memory = Memory.open(Settings(memory=directory, index_enabled=False), read_only=True)
    records = [_entity_record(*e) for e in memory.store.entities()]
    memory.close()
    shutil.rmtree(directory / "index", ignore_errors=True)
    t = time.perf_counter()
    index = SideIndex.open(directory / "index", embedder=get_embedder())
    index.upsert_entities(records)
    index.optimize()
    index.close()
    print(f"indexed {len(records)} entities in {time.perf_counter() - t:.0f} s")


def right_by_values(answer: str, question: dict[str, object]) -> bool:
    """Whether ``answer`` holds every value of the question in some accepted form.

    ``expect`` holds pcm's own composed wording (``age: 4``, ``Lily and Owen``), which a model's right answer in
    other words misses; a question whose wording matters for that reason also lists ``values``, each a string or a
    list of accepted forms of one value. Without ``values``, ``expect`` is the values.
    """
    text = answer.lower()
    wanted = question.get("values", question["expect"])
    assert isinstance(wanted, list)
    return all(any(str(f).lower() in text for f in (v if isinstance(v, list) else [v])) for v in wanted)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


GOLD_SET = FIXTURES / "questions.json"


def abstained(answer: str) -> bool:
    """Whether ask said the memory holds no answer (every such answer starts "Not in memory")."""
    from pcm.retrieval.answer import NOT_IN_MEMORY

    text = answer.strip().lower()
    return text.startswith("not in memory") or NOT_IN_MEMORY.lower() in text


def holds_values(answer: str, values: list[object]) -> bool:
    """Every value in some accepted form, as a whole word ("2" is not found in "2025", nor "no" in "know")."""
    def found(form: str) -> bool:
        return re.search(rf"(?<!\w){re.escape(form.lower())}(?!\w)", answer.lower()) is not None

    return all(any(found(str(f)) for f in (v if isinstance(v, list) else [v])) for v in values)


def gold_client(gold: dict[str, str]) -> ScriptedClient:
    """A scripted model that writes each question's gold query (``gold``: question -> SPARQL), so ask's time is
    everything but the model's: no answer ("NOT IN MEMORY": the answer is composed from the rows), no plan."""

    def respond(system: str, messages: list[Message], operation: str) -> str:
        if operation == "answer":
            return "NOT IN MEMORY"
        if operation == "decompose":  # the gold questions are single questions (issue 10: plans are for multi-hop)
            return '{"multi_hop": false, "kind": "factual", "sub_questions": []}'
        lines = messages[0].content.splitlines()
        asked = next((line[10:] for line in lines if line.startswith("QUESTION: ")), "")
        if asked not in gold:  # a set without gold SPARQL, or a call that is not NL->SPARQL: nothing to offer
            return "NO QUERY: the scripted benchmark client has no gold query for this question"
        return sparql_reply(gold[asked])

    return ScriptedClient([respond] * 100_000)


def run(directory: Path, runs: int, use_llm: bool, limit: int | None = None, save: Path | None = None,
        question_set: Path = GOLD_SET, record: Path | None = None) -> None:
    from pcm.llm import make_client
    from pcm.retrieval.ask import ask

    questions: list[dict[str, Any]] = json.loads(question_set.read_text(encoding="utf-8"))[:limit]
    gold = {str(q["question"]): "\n".join(q["sparql"]) for q in questions if "sparql" in q}
    settings = Settings.from_env(memory=directory, index_enabled=True)
    client = make_client(settings) if use_llm else gold_client(gold)
    if client is None:
        raise SystemExit("--llm needs PCM_LLM set to a model")
    if record is not None:
        from pcm.llm.record import RecordingClient

        client = RecordingClient(client, record)
    memory = Memory.open(settings.with_(llm=None), read_only=True)
    as_of = datetime(2025, 10, 1, tzinfo=UTC)
    t = time.perf_counter()
    _ = memory.index
    from pcm.retrieval.grounding import usage_stats

    print(f"index open + model load: {time.perf_counter() - t:.1f} s")
    t = time.perf_counter()
    usage_stats(memory.context)
    print(f"usage counts (computed once per memory version, then cached): {(time.perf_counter() - t) * 1000:.0f} ms")
    if not use_llm:  # the first question starts the query worker and imports what the pipeline needs
        ask(memory.context, str(questions[0]["question"]), client=client, as_of=as_of)
    if "category" in questions[0]:
        run_set(memory, client, questions, runs, use_llm, as_of, save)
        memory.close()
        return
    totals: list[float] = []
    stages: dict[str, list[float]] = {"grounding_ms": [], "queries_ms": [], "answer_ms": []}
    per_question: dict[str, list[float]] = {}
    tokens: list[int] = []
    calls: list[int] = []
    planned = 0
    right = cited_right = right_values = 0
    answers: list[dict[str, object]] = []
    wall: list[float] = []
    valid = repairs = 0
    for round_ in range(runs):
        for q in questions:
            requests_before = len(getattr(client, "requests", ()))
            written = _output_tokens(client)
            started = time.perf_counter()
            result = ask(memory.context, str(q["question"]), client=client, as_of=as_of)
            wall.append(time.perf_counter() - started)
            totals.append(result.stats["non_llm_ms"])
            per_question.setdefault(str(q["question"]), []).append(result.stats["non_llm_ms"])
            for stage, values in stages.items():
                values.append(result.stats[stage])
            if round_ == 0:
                tokens.append(max(result.stats["prompt_tokens"] or [0]))
                calls.append(len(client.requests) - requests_before if not use_llm else result.stats["llm_calls"])
                planned += result.plan is not None and result.plan.mode not in ("keywords", "frame")
                ok = all(str(e).lower() in result.answer.lower() for e in q["expect"])  # type: ignore[union-attr]
                cites = cited_ids(result) == set(q["evidence"])  # type: ignore[arg-type]
                by_values = ok or right_by_values(result.answer, q)
                right += ok
                right_values += by_values
                cited_right += cites
                answers.append({"question": q["question"], "answer": result.answer, "path": result.path,
                                "seconds": round(wall[-1], 1), "right": ok, "right_by_values": by_values,
                                "frame": result.frame, "output_tokens": _output_tokens(client) - written})
                model_steps = [s for s in result.trace if s.source == "model"]
                valid += any(s.outcome in ("ok", "empty") for s in model_steps)
                repairs += max(0, len(model_steps) - 1)
                if use_llm:
                    verdict = "right" if ok else "values" if by_values else "wrong"
                    print(f"  {wall[-1]:6.1f} s  {verdict}  {result.path:<10} "
                          f"{len(model_steps)} model queries  {q['question']}", flush=True)
                if not (ok and cites):
                    print(f"  MISS {q['question']} -> {result.answer} [{result.path}]")
    n = len(questions)
    print(f"questions: {n} x {runs} runs; answers right {right}/{n} (every value in any accepted form: "
          f"{right_values}/{n}), citations right {cited_right}/{n}")
    if save is not None:
        save.write_text(json.dumps(answers, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"questions with a valid model query (ran, rows or none): {valid}/{n}; repair rounds: {repairs} "
          f"({repairs / n:.2f} per question)")
    print(f"wall seconds per question: median {statistics.median(wall):.1f}, p95 {pct(wall, 0.95):.1f}, "
          f"total {sum(wall):.0f}")
    written_per_question = [int(str(a["output_tokens"])) for a in answers]
    print(f"model output tokens per question: median {statistics.median(written_per_question):.0f}, "
          f"max {max(written_per_question)}")
    print(f"non-LLM time per question: p50 {pct(totals, 0.5):.1f} ms, p95 {pct(totals, 0.95):.1f} ms, "
          f"max {max(totals):.1f} ms (target p95 <= 100 ms)")
    for stage, values in stages.items():
        print(f"  {stage[:-3]:>9}: p50 {pct(values, 0.5):6.1f} ms, p95 {pct(values, 0.95):6.1f} ms")
    slowest = sorted(per_question.items(), key=lambda item: -statistics.median(item[1]))[:5]
    print("  slowest questions (median ms): " + "; ".join(f"{q[:45]} {statistics.median(v):.0f}" for q, v in slowest))
    print(f"prompt tokens per question (first call, ~3.5 chars/token): mean {statistics.mean(tokens):.0f}, "
          f"max {max(tokens)} (target <= 4000)")
    print(f"model calls per question (first run): mean {statistics.mean(calls):.2f}, max {max(calls)}; "
          f"{planned} of {n} shown to the model for decomposition first")
    memory.close()


def _output_tokens(client: object) -> int:
    """The model's output tokens so far (0 for a client that keeps no usage, as the scripted one)."""
    usage = getattr(client, "usage", None)
    return int(usage.totals.get("output_tokens", 0)) if usage is not None else 0


def run_set(memory: Memory, client: LLMClient, questions: list[dict[str, Any]], runs: int, use_llm: bool,
            as_of: datetime, save: Path | None) -> None:
    """Ask a set in the varied shape; print how many were right and cited, overall, by category and language.

    Right: an abstention when ``abstain`` is set, otherwise an answer (not an abstention) holding every value;
    cited: right, and an answered question cites at least one of its evidence utterances.
    """
    from pcm.retrieval.ask import ask

    wall: list[float] = []
    rows: list[dict[str, object]] = []
    for round_ in range(runs):
        for q in questions:
            started = time.perf_counter()
            written = _output_tokens(client)
            try:
                result = ask(memory.context, str(q["question"]), client=client, as_of=as_of)
            except LLMError as error:
                if not str(getattr(client, "name", "")).startswith("replay:"):
                    raise
                # a replay whose pipeline now asks something the recorded run did not: scored wrong, run on
                print(f"  not replayed: {q['question']} ({error})", flush=True)
                rows.append({"question": q["question"], "category": q["category"], "lang": q["lang"],
                             "answer": "(not replayed)", "path": "none", "seconds": 0.0, "right": False,
                             "cited": False, "frame": None})
                continue
            wall.append(time.perf_counter() - started)
            if round_:
                continue
            values, evidence = q["values"], q["evidence"]
            assert isinstance(values, list) and isinstance(evidence, list)
            if q["abstain"]:
                right = cited = abstained(result.answer)
            else:
                right = not abstained(result.answer) and holds_values(result.answer, values)
                cited = right and bool(cited_ids(result) & set(evidence))
            rows.append({"question": q["question"], "category": q["category"], "lang": q["lang"],
                         "answer": result.answer, "path": result.path, "seconds": round(wall[-1], 1),
                         "right": right, "cited": cited, "frame": result.frame,
                         "output_tokens": _output_tokens(client) - written})
            if use_llm:
                print(f"  {wall[-1]:6.1f} s  {'right' if right else 'wrong'}{'+cited' if cited else '':<7} "
                      f"{result.path:<10} {q['question']}", flush=True)

    def line(name: str, group: list[dict[str, object]]) -> str:
        n = len(group)
        right, cited = sum(bool(r["right"]) for r in group), sum(bool(r["cited"]) for r in group)
        return (f"{name:<26} {n:>3}  right {right:>3} ({100 * right / n:3.0f}%)  "
                f"right+cited {cited:>3} ({100 * cited / n:3.0f}%)")

    print(f"questions: {len(questions)} x {runs} runs")
    print(line("overall", rows))
    for key in ("category", "lang"):
        for name in sorted({str(r[key]) for r in rows}):
            print(line(f"  {key} {name}", [r for r in rows if r[key] == name]))
    answerable = [r for r in rows if r["category"] != "abstain"]
    abstentions = sum(abstained(str(r["answer"])) for r in answerable)
    print(f"answerable questions answered 'Not in memory': {abstentions}/{len(answerable)}")
    tokens = [int(str(r.get("output_tokens", 0))) for r in rows]
    print(f"model output tokens per question: median {statistics.median(tokens):.0f}, max {max(tokens)}")
    print(f"wall seconds per question: median {statistics.median(wall):.2f}, p95 {pct(wall, 0.95):.2f}, "
          f"total {sum(wall):.0f}")
    if save is not None:
        save.write_text(json.dumps(rows, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memory", type=Path, default=None)
    parser.add_argument("--posts", type=int, default=100_000)
    parser.add_argument("--graphs", type=int, default=8_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--llm", action="store_true", help="use the configured model (PCM_LLM) instead of the gold SPARQL")
    parser.add_argument("--questions", type=int, help="only the first N questions (a real model takes minutes each)")
    parser.add_argument("--save", type=Path, help="write each question's answer, path, seconds and verdicts (JSON)")
    parser.add_argument("--reindex", action="store_true", help="rebuild the entity index of an existing memory first")
    parser.add_argument("--set", type=Path, default=GOLD_SET, dest="question_set",
                        help="question set (default: the gold questions; a set in the varied shape is scored "
                             "by values, abstentions and citations)")
    parser.add_argument("--record", type=Path,
                        help="write every model exchange to DIR; PCM_LLM=replay:DIR re-scores it without the model")
    args = parser.parse_args()
    directory = args.memory or Path(tempfile.mkdtemp(prefix="pcm-bench-ask-")) / "memory"
    if not (directory / "memory.toml").exists():
        build(directory, args.posts, args.graphs)
    elif args.reindex:
        index_entities(directory)
    run(directory, args.runs, args.llm, args.questions, args.save, args.question_set, args.record)


if __name__ == "__main__":
    main()

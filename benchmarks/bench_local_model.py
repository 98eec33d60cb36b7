"""Extraction with a real local model (a GGUF file run in-process): free-form Turtle against constrained JSON.

Never run in CI: it needs llama-cpp-python (``pip install 'pcm[local]'``) and a GGUF file, e.g. one assembled by
``benchmarks/assemble_gguf.py``. For each output format, a fresh memory gets the chosen sample conversations and
every utterance is extracted through the real pipeline (prompt, model, normalise, SHACL, repair, write). Printed
per format: utterances valid (extracted, i.e. parsed, in the vocabulary and SHACL-clean within the repair budget),
facts per extracted utterance, repair rounds, calls, tokens in and out, seconds per utterance (the first one is
cold: the model has no prompt prefix cached), and the failures' first lines.

Run: ``python benchmarks/bench_local_model.py /work/models/qwen2.5-coder-0.5b.gguf --samples 03-purchase
--formats turtle json``.

``--labelled [SOURCE ...]`` measures meaning instead: for each label set of ``tests/fixtures/extraction`` (all, or
the named sources: ``samples``, ``locomo-conv-26``), a fresh memory owned by the set's owner gets the conversations
that hold its labelled utterances, exactly those utterances are extracted, and the stored facts are scored against
the gold (:mod:`pcm.evaluation.facts`): precision, recall and the gate figures per source and overall, with seconds
per utterance and output tokens. LoCoMo is read from ``--data`` (default ``../shared/data``). Run:
``python benchmarks/bench_local_model.py MODEL --labelled --formats json``; ``--misses`` also lists each
utterance's missing and unlabelled facts.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import statistics
import tempfile
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import llama_cpp

from pcm.conversations import parse_file, sample_paths
from pcm.errors import LLMError
from pcm.evaluation.facts import FactScore, LabelSet, label_conversations, load_label_dir, post_iri, score
from pcm.extraction import extract_posts
from pcm.layout import LEGACY_LAYOUT
from pcm.llm.base import Request
from pcm.llm.llamacpp_client import LlamaCppClient
from pcm.llm.record import RecordingClient, ReplayClient
from pcm.memory import Memory
from pcm.namespaces import PCM, PROV
from pcm.settings import ExtractionConfig, GroundingConfig, Settings


def facts(memory: Memory) -> int:
    """Triples in the extraction graphs (one per extracted post), less the provenance pcm adds to each new node."""
    rows = memory.store.select(
        "SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } "
        f'FILTER(STRSTARTS(STR(?g), "{LEGACY_LAYOUT.extraction_prefix}")) '
        f"FILTER(?p != <{PROV}wasDerivedFrom>) }}"
    ).rows
    return int(rows[0][0].value) if rows and rows[0][0] is not None else 0


class Replaying:
    """Answers from a recording where it holds the exchange, from the live model otherwise: a second run over the
    same utterances (with the grounding check or the gate on) pays only for the calls the first did not make."""

    def __init__(self, recorded: ReplayClient, live: Any) -> None:
        self.recorded = recorded
        self.live = live
        self.replayed = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.live, name)

    def complete(self, request: Request) -> Any:
        try:
            completion = self.recorded.complete(request)
        except LLMError:
            return self.live.complete(request)
        self.replayed += 1
        return completion


class Counting:
    """The client, counting requests sent twice with the same content (a re-send; must stay 0)."""

    def __init__(self, client: Any, timings: bool = False) -> None:
        self.client = client
        self.timings = timings
        #: The in-process model under any recording or replaying wrappers (its counters time each call).
        self.llama = client
        while not isinstance(self.llama, LlamaCppClient):
            self.llama = next(getattr(self.llama, a) for a in ("inner", "live", "client") if hasattr(self.llama, a))
        self.seen: set[str] = set()
        self.duplicates = 0
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def complete(self, request: Request) -> Any:
        key = hashlib.sha256(repr((request.system, request.messages)).encode()).hexdigest()
        self.duplicates += key in self.seen
        self.seen.add(key)
        self.calls += 1
        if not self.timings:
            return self.client.complete(request)
        ctx = self.llama._llama._ctx.ctx  # noqa: SLF001 - llama.cpp's own counters for this call
        llama_cpp.llama_perf_context_reset(ctx)
        started = time.perf_counter()
        completion = self.client.complete(request)
        wall = time.perf_counter() - started
        perf = llama_cpp.llama_perf_context(ctx)
        read, wrote = perf.t_p_eval_ms / 1000, perf.t_eval_ms / 1000
        print(f"    call: {wall:.1f} s; read {perf.n_p_eval} new prompt tokens in {read:.1f} s, wrote {perf.n_eval} "
              f"in {wrote:.1f} s ({perf.n_eval / max(wrote, 1e-9):.1f} tok/s); sampling and the rest "
              f"{wall - read - wrote:.1f} s", flush=True)
        return completion


def chosen(memory: Memory, per_session: int | None, limit: int | None, skip: int = 0) -> list[str]:
    """The first ``per_session`` user/assistant utterances of every conversation after its first ``skip``, in order
    (then ``limit``): ``skip`` lets a later run measure the utterances an earlier run with ``per_session`` left."""
    seen: dict[str, int] = {}
    posts = []
    for post in memory.store.posts():
        if post.role == "system":
            continue
        seen[post.session] = seen.get(post.session, 0) + 1
        if seen[post.session] <= skip or (per_session is not None and seen[post.session] > skip + per_session):
            continue
        posts.append(post.iri)
    return posts[:limit]


QUESTIONS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "ask" / "questions.json"
LABELS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "extraction"
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def gold_questions(count: int) -> list[dict[str, Any]]:
    """The first ``count`` questions of the ask gold set that the graph should answer (path ``sparql``)."""
    questions = json.loads(QUESTIONS.read_text(encoding="utf-8"))
    return [q for q in questions if q.get("path") == "sparql"][:count]


def _forms(expected: str) -> list[str]:
    """An expected answer and its ISO form when it is a date ("Tuesday 4 February 2025" -> "2025-02-04")."""
    forms = [expected.lower()]
    words = expected.split()
    for text in (expected, " ".join(words[1:])):
        with contextlib.suppress(ValueError):
            forms.append(datetime.strptime(text, "%d %B %Y").date().isoformat())
    return forms


def facts_right(memory: Memory, questions: list[dict[str, Any]]) -> tuple[int, list[str]]:
    """Questions whose every expected value is in the facts extracted from their evidence utterances.

    A proxy for "the graph answers it" that needs no model: each expected value (or a date's ISO form) must occur,
    case-insensitively, in a literal or an IRI of the evidence utterances' extraction graphs.
    """
    by_source = {p.source_id: p.iri for p in memory.store.posts()}
    right, missing = 0, []
    for question in questions:
        text = []
        for source in question["evidence"]:
            graph = memory.naming.extraction_graph(by_source[source])
            rows = memory.store.select(f"SELECT ?s ?o WHERE {{ GRAPH <{graph}> {{ ?s ?p ?o }} }}").rows
            text += [str(term.value).lower().replace("-", " ") + " " + str(term.value).lower()
                     for row in rows for term in row if term is not None]
        blob = "\n".join(text)
        absent = [e for e in question["expect"] if not any(f in blob for f in _forms(e))]
        right += not absent
        if absent:
            missing.append(f"{question['question'][:60]}: missing {absent}")
    return right, missing


def run(client: LlamaCppClient, output: str, samples: list[str], repair_rounds: int, limit: int | None,
        per_session: int | None = None, keep: Path | None = None, questions: int | None = None,
        catalogue: str = "auto", every: bool = False, timings: bool = False, skip: int = 0,
        max_tokens: int = ExtractionConfig.max_output_tokens) -> None:
    root = Path(tempfile.mkdtemp(prefix=f"pcm-bench-local-{output}-"))
    try:
        settings = Settings(memory=root / "memory", index_enabled=False, summaries_enabled=False,
                            extraction=ExtractionConfig(repair_rounds=repair_rounds, catalogue=catalogue,
                                                        max_output_tokens=max_tokens))
        memory = Memory.init(settings, owner="Dana Whitfield")
        paths = [p for p in sample_paths() if any(p.stem.startswith(s) for s in samples)]
        memory.ingest([c for p in paths for c in parse_file(p)])
        asked = gold_questions(questions) if questions else []
        if asked and not every:
            sources = list(dict.fromkeys(e for q in asked for e in q["evidence"]))
            by_source = {p.source_id: p.iri for p in memory.store.posts()}
            posts = [by_source[s] for s in sources]
        else:
            posts = chosen(memory, per_session, limit, skip)
        counting = Counting(client, timings)
        marks = [time.perf_counter()]
        before = client.usage.totals

        def tick(n: int) -> None:
            marks.append(time.perf_counter())
            print(f"  [{output}] utterance {len(marks) - 1}/{len(posts)}: {marks[-1] - marks[-2]:.1f} s, "
                  f"{marks[-1] - marks[0]:.0f} s so far", flush=True)

        report = extract_posts(memory.context, posts, client=counting,
                               concurrency=1, output=output, progress=tick)
        seconds = [b - a for a, b in zip(marks, marks[1:], strict=False)]
        used = {k: client.usage.totals[k] - before[k] for k in before}
        considered = report.posts - report.skipped
        stored = facts(memory)
        right, missing = facts_right(memory, asked) if asked else (0, [])
        memory.close()
        print(f"\n== {output}: {len(paths)} conversation(s), {report.posts} utterances ({report.skipped} skipped)")
        print(f"valid within {repair_rounds} repair round(s): {report.extracted}/{considered} "
              f"({100 * report.extracted / max(1, considered):.0f}%); repairs {report.repairs}; calls {used['calls']}; "
              f"duplicated requests {counting.duplicates}")
        print(f"facts stored in extraction graphs: {stored} "
              f"({stored / max(1, report.extracted):.1f} per extracted utterance)")
        print(f"tokens in {used['input_tokens']} ({used['input_tokens'] / max(1, used['calls']):.0f}/call), "
              f"out {used['output_tokens']} ({used['output_tokens'] / max(1, used['calls']):.0f}/call)")
        if seconds:
            warm = seconds[1:] or seconds
            print(f"seconds per utterance: cold (first) {seconds[0]:.1f}, warm median {statistics.median(warm):.1f}, "
                  f"max {max(seconds):.1f}, total {sum(seconds):.0f}")
        if asked:
            print(f"gold questions whose expected values are all in the graph of their evidence: {right}/{len(asked)}")
            for line in missing:
                print(f"  {line}")
        for post, first_line in report.failures:
            print(f"  failed {post.rsplit('/', 1)[-1]}: {first_line[:200]}")
        if keep is not None:
            target = keep / output
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(root / "memory", target)
            print(f"memory kept in {target}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def fallen_back(memory: Memory) -> list[str]:
    """Posts whose compact answer failed and were written again in the fallback form (their report says so)."""
    rows = memory.store.select(
        f"SELECT DISTINCT ?post WHERE {{ GRAPH ?g {{ ?post <{PCM}extractionReport> ?r }} "
        'FILTER(CONTAINS(STR(?r), "form instead")) } ORDER BY ?post'
    ).rows
    return [row[0].value for row in rows if row[0] is not None]


def spread(items: tuple[Any, ...], count: int | None) -> tuple[Any, ...]:
    """``count`` items taken evenly across ``items`` (all of them when ``count`` is None or larger)."""
    if count is None or count >= len(items):
        return items
    return tuple(items[i * len(items) // count] for i in range(count))


def run_labelled(client: LlamaCppClient, output: str, label_sets: list[LabelSet], data: Path, repair_rounds: int,
                 catalogue: str = "auto", timings: bool = False, misses: bool = False, limit: int | None = None,
                 grounding: bool = True, gate: bool = True,
                 max_tokens: int = ExtractionConfig.max_output_tokens,
                 fallback: str = ExtractionConfig.fallback) -> FactScore:
    """Extract exactly the labelled utterances of each label set with the model (one fresh memory per set, owned by
    the set's owner, holding the sessions of its labelled utterances), then score the stored facts against the gold.
    ``limit``: that many utterances per set, taken evenly across it; ``grounding`` and ``gate`` off measure the
    pipeline without those checks (what it stored before them).
    """
    total = FactScore([])
    seconds: list[float] = []
    called: list[float] = []
    uncalled: list[float] = []
    calls = output_tokens = ungrounded = 0
    for labels in label_sets:
        labels = replace(labels, utterances=spread(labels.utterances, limit))
        root = Path(tempfile.mkdtemp(prefix=f"pcm-bench-labelled-{output}-"))
        try:
            settings = Settings(memory=root / "memory", index_enabled=False, summaries_enabled=False,
                                extraction=ExtractionConfig(repair_rounds=repair_rounds, catalogue=catalogue,
                                                            grounding=GroundingConfig(enabled=grounding), gate=gate,
                                                            max_output_tokens=max_tokens, fallback=fallback))
            memory = Memory.init(settings, owner=labels.owner)
            memory.ingest(label_conversations(labels, data))
            posts = [post_iri(memory.naming, u) for u in labels.utterances]
            counting = Counting(client, timings)
            marks = [time.perf_counter()]
            seen_calls = [0]

            def tick(n: int, source: str = labels.source, marks: list[float] = marks, count: int = len(posts),
                     counting: Counting = counting, seen_calls: list[int] = seen_calls) -> None:
                marks.append(time.perf_counter())
                took = marks[-1] - marks[-2]
                (called if counting.calls > seen_calls[0] else uncalled).append(took)
                seen_calls[0] = counting.calls
                print(f"  [{output} {source}] utterance {len(marks) - 1}/{count}: {took:.1f} s", flush=True)

            report = extract_posts(memory.context, posts, client=counting,
                                   concurrency=1, output=output, progress=tick)
            seconds += [b - a for a, b in zip(marks, marks[1:], strict=False)]
            calls += report.calls
            output_tokens += report.output_tokens
            ungrounded += report.ungrounded
            result = score(memory, [labels])
            print(f"\n== {output} {labels.source}: {report.posts} utterances, {report.extracted} extracted, "
                  f"{report.failed} failed, {report.skipped} skipped; repairs {report.repairs}; calls {report.calls}; "
                  f"output tokens {report.output_tokens} ({report.output_tokens / max(1, report.posts):.0f}/utterance)")
            for line in result.lines(memory.ontology if misses else None):
                print(line)
            for post, first_line in report.failures:
                print(f"  failed {post.rsplit('/', 1)[-1]}: {first_line[:200]}")
            again = fallen_back(memory)
            if again:
                print(f"  written again in the fallback form ({fallback}): {len(again)}: "
                      + ", ".join(p.rsplit('/', 1)[-1] for p in again))
            memory.close()
            total = total + result
        finally:
            shutil.rmtree(root, ignore_errors=True)
    print(f"\n== {output}, all labelled sources")
    for line in total.lines():
        print(line)
    if seconds:
        warm = seconds[1:] or seconds
        print(f"seconds per utterance: cold (first) {seconds[0]:.1f}, warm median {statistics.median(warm):.1f}, "
              f"mean {statistics.fmean(seconds):.1f}, max {max(seconds):.1f}, total {sum(seconds):.0f}")
    if called:
        warm_called = called[1:] or called
        print(f"utterances sent to the model: {len(called)}, first {called[0]:.1f} s, warm median "
              f"{statistics.median(warm_called):.1f} s, max {max(called):.1f} s")
    if uncalled:
        print(f"utterances with no model call (gated): {len(uncalled)}, max {max(uncalled):.2f} s")
    print(f"calls {calls}; output tokens {output_tokens} ({output_tokens / max(1, calls):.0f}/call, "
          f"{output_tokens / max(1, len(called)):.0f}/utterance sent); values left out as not said: {ungrounded}")
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="path of a .gguf file")
    parser.add_argument("--samples", nargs="+", default=["03-purchase"], help="sample conversation name prefixes")
    parser.add_argument("--formats", nargs="+", default=["turtle", "json"], choices=["turtle", "json", "compact"])
    parser.add_argument("--repair-rounds", type=int, default=ExtractionConfig.repair_rounds,
                        help="repair rounds per utterance (default: the product's, PCM_REPAIR_ROUNDS)")
    parser.add_argument("--limit", type=int,
                        help="extract only the first N utterances (with --labelled: N per set, taken evenly across it)")
    parser.add_argument("--per-session", type=int, help="extract only the first N utterances of every conversation")
    parser.add_argument("--skip-per-session", type=int, default=0,
                        help="leave out the first N utterances of every conversation (the ones an earlier "
                             "--per-session N run measured); their facts are then not in the graph")
    parser.add_argument("--questions", type=int,
                        help="extract the evidence utterances of the first N gold questions, then check their facts")
    parser.add_argument("--all", action="store_true",
                        help="every sample conversation (overrides --samples); with --questions, every utterance is "
                             "extracted and the questions are checked against the graphs of their evidence")
    parser.add_argument("--keep", type=Path, help="copy each format's memory into KEEP/<format> (for questions)")
    parser.add_argument("--max-tokens", type=int, default=ExtractionConfig.max_output_tokens,
                        help="output budget per call, and so the grammar's (default: the product's); a smaller one "
                             "cut the 0.5B model's first 12 sample utterances from 24 facts to none")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--context", type=int, default=Settings().llm_context)
    parser.add_argument("--catalogue", choices=["auto", "areas", "whole"], default="auto",
                        help="PCM_LLM_CATALOGUE for the run (auto: whole, the model keeps its prompt prefix)")
    parser.add_argument("--timings", action="store_true",
                        help="a line per model call: new prompt tokens read, tokens written, and their seconds")
    parser.add_argument("--labelled", nargs="*", metavar="SOURCE",
                        help="extract the labelled utterances of tests/fixtures/extraction (all sources, or these) "
                             "and score their facts against the gold: precision, recall, gate figures")
    parser.add_argument("--data", type=Path, default=SHARED_DATA,
                        help="the shared data folder LoCoMo labels are read from (default: ../shared/data)")
    parser.add_argument("--misses", action="store_true",
                        help="with --labelled, list each utterance's missing and unlabelled facts")
    parser.add_argument("--labels", type=Path, action="append", default=[],
                        help="with --labelled, a further folder of label files (e.g. labels of LoCoMo turns, which "
                             "are kept outside the repository)")
    parser.add_argument("--record", type=Path, help="with --labelled, record every model exchange in this folder")
    parser.add_argument("--replay", type=Path,
                        help="with --labelled, answer from this recording where it holds the exchange (the live "
                             "model otherwise): scores a second configuration without paying again for its calls")
    parser.add_argument("--no-grounding", action="store_true",
                        help="with --labelled, store what the model wrote (PCM_EXTRACTION_GROUNDING=0)")
    parser.add_argument("--no-state", action="store_true",
                        help="do not load or save the model's state after the fixed prompt prefix (PCM_LLM_STATE_DIR): "
                             "every run then pays the whole catalogue prompt on its first call")
    parser.add_argument("--fallback", default=ExtractionConfig.fallback, choices=["json", "none"],
                        help="with --labelled, the form a failing compact answer is written in again (none: fail)")
    parser.add_argument("--no-gate", action="store_true",
                        help="with --labelled, send small talk to the model too (PCM_EXTRACTION_GATE=off)")
    args = parser.parse_args()
    label_sets = None
    if args.labelled is not None:
        folders = [LABELS, *args.labels]
        everything = [s for folder in folders for s in load_label_dir(folder)]
        label_sets = [s for s in everything if not args.labelled or s.source in args.labelled]
        unknown = set(args.labelled) - {s.source for s in label_sets}
        if unknown or not label_sets:
            parser.error(f"no label set {sorted(unknown)} in {', '.join(map(str, folders))}")
        if any(s.format == "locomo" for s in label_sets) and not args.data.is_dir():
            parser.error(f"{args.data} is missing: give --data, or choose --labelled samples")
    started = time.perf_counter()
    client = LlamaCppClient(model_path=args.model, threads=args.threads, context=args.context,
                            state_dir=None if args.no_state else Settings().llm_state_dir)
    print(f"model {client.name} loaded in {time.perf_counter() - started:.1f} s; threads {args.threads}, "
          f"context {args.context}, max tokens {args.max_tokens}", flush=True)
    if label_sets is not None:
        used: Any = client
        if args.record:
            used = RecordingClient(client, args.record)
        if args.replay:
            used = Replaying(ReplayClient(args.replay), used)
        for output in args.formats:
            run_labelled(used, output, label_sets, args.data, args.repair_rounds, args.catalogue,
                         timings=args.timings, misses=args.misses, limit=args.limit,
                         grounding=not args.no_grounding, gate=not args.no_gate, max_tokens=args.max_tokens,
                         fallback="" if args.fallback == "none" else args.fallback)
        client.close()
        return
    samples = [p.stem for p in sample_paths()] if args.all or args.questions else args.samples
    for output in args.formats:
        run(client, output, samples, args.repair_rounds, args.limit, args.per_session, args.keep, args.questions,
            args.catalogue, every=args.all and bool(args.questions), timings=args.timings, skip=args.skip_per_session,
            max_tokens=args.max_tokens)
    client.close()


if __name__ == "__main__":
    main()

"""Extraction with a real local model (a GGUF file run in-process): free-form Turtle against constrained JSON.

Never run in CI: it needs llama-cpp-python (``pip install 'pcm[local]'``) and a GGUF file, e.g. one assembled by
``benchmarks/assemble_gguf.py``. For each output format, a fresh memory gets the chosen sample conversations and
every utterance is extracted through the real pipeline (prompt, model, normalise, SHACL, repair, write). Printed
per format: utterances valid (extracted, i.e. parsed, in the vocabulary and SHACL-clean within the repair budget),
facts per extracted utterance, repair rounds, calls, tokens in and out, seconds per utterance (the first one is
cold: the model has no prompt prefix cached), and the failures' first lines.

Run: ``python benchmarks/bench_local_model.py /work/models/qwen2.5-coder-0.5b.gguf --samples 03-purchase
--formats turtle json``.
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
from datetime import datetime
from pathlib import Path
from typing import Any

import llama_cpp

from pcm.conversations import parse_file, sample_paths
from pcm.extraction import extract_posts
from pcm.extraction import extractor as extractor_module
from pcm.layout import LEGACY_LAYOUT
from pcm.llm.llamacpp_client import LlamaCppClient
from pcm.memory import Memory
from pcm.namespaces import PROV
from pcm.settings import Settings


def facts(memory: Memory) -> int:
    """Triples in the extraction graphs (one per extracted post), less the provenance pcm adds to each new node."""
    rows = memory.store.select(
        "SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } "
        f'FILTER(STRSTARTS(STR(?g), "{LEGACY_LAYOUT.extraction_prefix}")) '
        f"FILTER(?p != <{PROV}wasDerivedFrom>) }}"
    ).rows
    return int(rows[0][0].value) if rows and rows[0][0] is not None else 0


class Counting:
    """The client, counting requests sent twice with the same content (a re-send; must stay 0)."""

    def __init__(self, client: LlamaCppClient, timings: bool = False) -> None:
        self.client = client
        self.timings = timings
        self.seen: set[str] = set()
        self.duplicates = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def complete(self, **kwargs: Any) -> Any:
        key = hashlib.sha256(repr((kwargs.get("system"), kwargs.get("messages"))).encode()).hexdigest()
        self.duplicates += key in self.seen
        self.seen.add(key)
        if not self.timings:
            return self.client.complete(**kwargs)
        ctx = self.client._llama._ctx.ctx  # noqa: SLF001 - llama.cpp's own counters for this call
        llama_cpp.llama_perf_context_reset(ctx)
        started = time.perf_counter()
        completion = self.client.complete(**kwargs)
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
        catalogue: str = "auto", every: bool = False, timings: bool = False, skip: int = 0) -> None:
    root = Path(tempfile.mkdtemp(prefix=f"pcm-bench-local-{output}-"))
    try:
        settings = Settings(memory=root / "memory", index_enabled=False, repair_rounds=repair_rounds, llm_catalogue=catalogue,
                            summaries_enabled=False)
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

        report = extract_posts(memory.context, posts, client=counting,  # type: ignore[arg-type]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="path of a .gguf file")
    parser.add_argument("--samples", nargs="+", default=["03-purchase"], help="sample conversation name prefixes")
    parser.add_argument("--formats", nargs="+", default=["turtle", "json"], choices=["turtle", "json"])
    parser.add_argument("--repair-rounds", type=int, default=Settings().repair_rounds,
                        help="repair rounds per utterance (default: the product's, PCM_REPAIR_ROUNDS)")
    parser.add_argument("--limit", type=int, help="extract only the first N utterances")
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
    parser.add_argument("--max-tokens", type=int, default=extractor_module.MAX_OUTPUT_TOKENS,
                        help="output budget per call, and so the grammar's (default: the product's); a smaller one "
                             "cut the 0.5B model's first 12 sample utterances from 24 facts to none")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--context", type=int, default=Settings().llm_context)
    parser.add_argument("--catalogue", choices=["auto", "areas", "whole"], default="auto",
                        help="PCM_LLM_CATALOGUE for the run (auto: whole, the model keeps its prompt prefix)")
    parser.add_argument("--timings", action="store_true",
                        help="a line per model call: new prompt tokens read, tokens written, and their seconds")
    args = parser.parse_args()
    extractor_module.MAX_OUTPUT_TOKENS = args.max_tokens
    started = time.perf_counter()
    client = LlamaCppClient(model_path=args.model, threads=args.threads, context=args.context)
    print(f"model {client.name} loaded in {time.perf_counter() - started:.1f} s; threads {args.threads}, "
          f"context {args.context}, max tokens {args.max_tokens}", flush=True)
    samples = [p.stem for p in sample_paths()] if args.all or args.questions else args.samples
    for output in args.formats:
        run(client, output, samples, args.repair_rounds, args.limit, args.per_session, args.keep, args.questions,
            args.catalogue, every=args.all and bool(args.questions), timings=args.timings, skip=args.skip_per_session)
    client.close()


if __name__ == "__main__":
    main()

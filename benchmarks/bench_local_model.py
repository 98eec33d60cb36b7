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
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from pcm.conversations import parse_file, sample_paths
from pcm.extraction import extract_posts
from pcm.extraction import extractor as extractor_module
from pcm.llm.llamacpp_client import LlamaCppClient
from pcm.memory import Memory
from pcm.namespaces import GRAPH_EXTRACTION_PREFIX
from pcm.settings import Settings


def facts(memory: Memory) -> int:
    """Triples in the extraction graphs (one per extracted post)."""
    rows = memory.store.select(
        "SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } "
        f'FILTER(STRSTARTS(STR(?g), "{GRAPH_EXTRACTION_PREFIX}")) }}'
    ).rows
    return int(rows[0][0].value) if rows and rows[0][0] is not None else 0


def run(client: LlamaCppClient, output: str, samples: list[str], repair_rounds: int, limit: int | None) -> None:
    root = Path(tempfile.mkdtemp(prefix=f"pcm-bench-local-{output}-"))
    try:
        settings = Settings(memory=root / "memory", index_enabled=False, repair_rounds=repair_rounds,
                            summaries_enabled=False)
        memory = Memory.init(settings, owner="Dana Whitfield")
        paths = [p for p in sample_paths() if any(p.stem.startswith(s) for s in samples)]
        memory.ingest([c for p in paths for c in parse_file(p)])
        posts = [p.iri for p in memory.store.posts()][:limit]
        marks = [time.perf_counter()]
        before = client.usage.totals
        report = extract_posts(memory.context, posts, client=client, concurrency=1, output=output,
                               progress=lambda n: marks.append(time.perf_counter()))
        seconds = [b - a for a, b in zip(marks, marks[1:], strict=False)]
        used = {k: client.usage.totals[k] - before[k] for k in before}
        considered = report.posts - report.skipped
        stored = facts(memory)
        memory.close()
        print(f"\n== {output}: {len(paths)} conversation(s), {report.posts} utterances ({report.skipped} skipped)")
        print(f"valid within {repair_rounds} repair round(s): {report.extracted}/{considered} "
              f"({100 * report.extracted / max(1, considered):.0f}%); repairs {report.repairs}; calls {used['calls']}")
        print(f"facts stored in extraction graphs: {stored} "
              f"({stored / max(1, report.extracted):.1f} per extracted utterance)")
        print(f"tokens in {used['input_tokens']} ({used['input_tokens'] / max(1, used['calls']):.0f}/call), "
              f"out {used['output_tokens']} ({used['output_tokens'] / max(1, used['calls']):.0f}/call)")
        if seconds:
            warm = seconds[1:] or seconds
            print(f"seconds per utterance: cold (first) {seconds[0]:.1f}, warm median {statistics.median(warm):.1f}, "
                  f"max {max(seconds):.1f}, total {sum(seconds):.0f}")
        for post, first_line in report.failures:
            print(f"  failed {post.rsplit('/', 1)[-1]}: {first_line[:200]}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="path of a .gguf file")
    parser.add_argument("--samples", nargs="+", default=["03-purchase"], help="sample conversation name prefixes")
    parser.add_argument("--formats", nargs="+", default=["turtle", "json"], choices=["turtle", "json"])
    parser.add_argument("--repair-rounds", type=int, default=1)
    parser.add_argument("--limit", type=int, help="extract only the first N utterances")
    parser.add_argument("--max-tokens", type=int, default=800, help="output budget per call")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--context", type=int, default=8192)
    args = parser.parse_args()
    extractor_module.MAX_OUTPUT_TOKENS = args.max_tokens  # a looping small model otherwise runs for minutes
    started = time.perf_counter()
    client = LlamaCppClient(model_path=args.model, threads=args.threads, context=args.context)
    print(f"model {client.name} loaded in {time.perf_counter() - started:.1f} s; threads {args.threads}, "
          f"context {args.context}, max tokens {args.max_tokens}")
    for output in args.formats:
        run(client, output, args.samples, args.repair_rounds, args.limit)
    client.close()


if __name__ == "__main__":
    main()

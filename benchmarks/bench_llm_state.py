"""A fresh process's first extraction call with and without a saved prompt state, and warm calls with and without
prompt-lookup decoding (``PCM_LLM_STATE_DIR``, ``PCM_LLM_DRAFT``; see ``pcm.llm.state``).

Never run in CI: it needs llama-cpp-python and a GGUF file. Each measurement runs in its own child process (a
fresh model object, as ``pcm extract`` or ``pcm serve`` would start): a sample conversation is ingested into a
temporary memory without a model, then its first utterances are extracted through the real pipeline (whole
catalogue in the system prompt, constrained JSON, repair rounds), one call at a time. Runs:

1. ``cold``: an empty state folder: the first call reads the whole system prompt, then saves its state;
2. ``loaded``: the folder of run 1: the first call loads the state and reads only its own turn;
3. ``loaded+draft``: the same with ``PCM_LLM_DRAFT=prompt-lookup`` (the answers must be the same as run 2's).

Printed per run: model load time, each call's wall time, prompt tokens read, tokens written, the answer's digest,
the state file's size and the child's peak memory. The machine may be shared: times are indicative.

Run: ``nice -n 10 python benchmarks/bench_llm_state.py /work/models/qwen2.5-coder-1.5b.gguf --utterances 3``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def child(args: argparse.Namespace) -> None:
    """One fresh process: extract ``--utterances`` utterances (after ``--skip``); print one JSON line."""
    import llama_cpp

    from pcm.conversations import parse_file, sample_paths
    from pcm.extraction import extract_posts
    from pcm.llm.base import Request
    from pcm.llm.llamacpp_client import LlamaCppClient
    from pcm.memory import Memory
    from pcm.settings import Settings

    started = time.perf_counter()
    client = LlamaCppClient(model_path=args.model, threads=args.threads, context=args.context,
                            state_dir=args.state_dir, draft=args.draft, prompt_cache_mb=args.prompt_cache_mb)
    loaded = time.perf_counter() - started
    calls: list[dict[str, Any]] = []

    class Timed:
        """The client, timing each call with llama.cpp's own counters."""

        def __getattr__(self, name: str) -> Any:
            return getattr(client, name)

        def complete(self, request: Request) -> Any:
            ctx = client._llama._ctx.ctx  # noqa: SLF001 - llama.cpp's counters for this call
            llama_cpp.llama_perf_context_reset(ctx)
            began = time.perf_counter()
            completion = client.complete(request)
            perf = llama_cpp.llama_perf_context(ctx)
            calls.append({
                "operation": request.operation, "seconds": round(time.perf_counter() - began, 1),
                "read_tokens": perf.n_p_eval, "read_seconds": round(perf.t_p_eval_ms / 1000, 1),
                "decode_steps": perf.n_eval, "decode_seconds": round(perf.t_eval_ms / 1000, 1),
                "written_tokens": completion.output_tokens,
                "prompt_tokens": completion.input_tokens,
                "restored": client.states.restored if client.states is not None else 0,
                "answer": hashlib.sha256(completion.text.encode()).hexdigest()[:12],
            })
            print(f"    {calls[-1]}", file=sys.stderr, flush=True)
            return completion

    root = Path(tempfile.mkdtemp(prefix="pcm-bench-state-"))
    try:
        settings = Settings(memory=root / "memory", index_enabled=False, summaries_enabled=False).with_(
            repair_rounds=args.repair_rounds)
        memory = Memory.init(settings, owner="Dana Whitfield")
        paths = [p for p in sample_paths() if p.stem.startswith(args.sample)]
        memory.ingest([c for p in paths for c in parse_file(p)])
        posts = [p.iri for p in memory.store.posts() if p.role != "system"][args.skip: args.skip + args.utterances]
        extract_posts(memory.context, posts, client=Timed(), concurrency=1, output="json")  # type: ignore[arg-type]
        memory.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    files = sorted(Path(args.state_dir).glob("*.kvstate")) if args.state_dir else []
    print(json.dumps({
        "model_load_seconds": round(loaded, 1), "calls": calls,
        "state_files": {f.name[:12]: f.stat().st_size for f in files},
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
    }))


def run(args: argparse.Namespace, label: str, state_dir: Path, draft: str) -> dict[str, Any]:
    command = [sys.executable, __file__, args.model, "--child", "--state-dir", str(state_dir), "--draft", draft,
               "--utterances", str(args.utterances), "--skip", str(args.skip), "--sample", args.sample,
               "--threads", str(args.threads), "--context", str(args.context),
               "--repair-rounds", str(args.repair_rounds), "--prompt-cache-mb", str(args.prompt_cache_mb)]
    print(f"== {label}", flush=True)
    started = time.perf_counter()
    done = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_seconds"] = round(time.perf_counter() - started, 1)
    calls = result["calls"]
    if not calls:
        raise SystemExit(f"{label}: no model call succeeded (see the log above)")
    print(f"  model load {result['model_load_seconds']} s; first call {calls[0]['seconds']} s "
          f"(read {calls[0]['read_tokens']} of {calls[0]['prompt_tokens']} prompt tokens, restored "
          f"{calls[0]['restored']}); later calls {[c['seconds'] for c in calls[1:]]} s; "
          f"peak RSS {result['peak_rss_mb']} MB; state files {result['state_files']}", flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="path of a .gguf file")
    parser.add_argument("--utterances", type=int, default=2, help="utterances extracted per run")
    parser.add_argument("--skip", type=int, default=0, help="utterances of the sample left out first")
    parser.add_argument("--sample", default="03-purchase", help="sample conversation name prefix")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--context", type=int, default=16384)
    parser.add_argument("--repair-rounds", type=int, default=2)
    parser.add_argument("--prompt-cache-mb", type=int, default=2048,
                        help="PCM_LLM_PROMPT_CACHE_MB for the runs (the product's default; 0: only the model's own "
                             "reuse of its last prompt)")
    parser.add_argument("--runs", nargs="+", default=["cold", "loaded", "loaded+draft"],
                        choices=["cold", "loaded", "loaded+draft", "cold+draft"])
    parser.add_argument("--state-dir", help="a state folder kept between runs (a cold run empties it first); "
                                            "default: a temporary one")
    parser.add_argument("--draft", default="none", help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    folder = Path(args.state_dir) if args.state_dir else Path(tempfile.mkdtemp(prefix="pcm-bench-states-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        results = {}
        for label in args.runs:
            if label.startswith("cold"):
                shutil.rmtree(folder, ignore_errors=True)
                folder.mkdir()
            results[label] = run(args, label, folder, "prompt-lookup" if label.endswith("+draft") else "none")
        answers = {label: [c["answer"] for c in r["calls"]] for label, r in results.items()}
        print(f"answers per run (digests): {answers}")
    finally:
        if not args.state_dir:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()

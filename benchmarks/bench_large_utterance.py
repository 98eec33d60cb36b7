"""Utterance size limit: what a huge paste costs now that ingest refuses it before anything is read into the store.

Each case runs ``pcm ingest`` as a fresh process (side index on, no LLM) on a fresh memory and prints its wall time,
its peak RSS and its exit code: a trivial utterance, one at the limit (``PCM_MAX_UTTERANCE_CHARS``, 50,000
characters), and a 5 MB one (refused, exit 3). Then ``pcm recall --json`` over the memory holding the one at the
limit, to show how many bytes a recall returns.

Run: ``python benchmarks/bench_large_utterance.py [--huge-mb 5]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run(args: list[str], memory: Path) -> tuple[float, float, int, bytes]:
    """(seconds, peak RSS in MB, exit code, stdout) of one ``pcm`` process."""
    env = {**os.environ, "PCM_MEMORY": str(memory), "PCM_LLM": "none"}
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        process = subprocess.Popen([sys.executable, "-m", "pcm.cli", *args], stdout=out, stderr=subprocess.DEVNULL,
                                   env=env)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        elapsed = time.perf_counter() - started
        out.seek(0)
        return elapsed, usage.ru_maxrss / 1024, process.returncode, out.read()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--huge-mb", type=float, default=5.0)
    options = parser.parse_args()
    cases = {
        "trivial (20 chars)": "I adopted a beagle.",
        "at the limit (50,000 chars)": ("my beagle ate a sock " * 2500)[:50_000],
        f"huge ({options.huge_mb:g} MB)": "word " * int(options.huge_mb * 1_000_000 / 5),
    }
    with tempfile.TemporaryDirectory(prefix="pcm-bench-size-") as tmp:
        print(f"{'case':32} {'seconds':>8} {'peak RSS MB':>12} {'exit':>5}")
        at_limit = None
        for n, (name, text) in enumerate(cases.items()):
            memory = Path(tmp) / f"m{n}"
            run(["init"], memory)
            chats = Path(tmp) / f"c{n}.json"
            chats.write_text(json.dumps([{"conversation_id": "s", "messages": [{"role": "user", "content": text}]}]))
            seconds, rss, code, _ = run(["ingest", str(chats)], memory)
            print(f"{name:32} {seconds:8.2f} {rss:12.0f} {code:5d}")
            if "limit" in name:
                at_limit = memory
        if at_limit is not None:
            seconds, rss, code, out = run(["recall", "beagle sock", "--k", "10", "--json"], at_limit)
            print(f"recall --k 10 over the memory at the limit: {len(out):,} bytes, {seconds:.2f} s, exit {code}")


if __name__ == "__main__":
    main()

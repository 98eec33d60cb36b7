"""Wall time of `pcm ask` and `pcm recall` as commands, cold and warm, as an assistant shelling out to pcm sees it.

Cold: no pcm process holds the memory, so each command imports the libraries, opens the store and the side index
and loads the embedding model itself. Warm: a `pcm serve` runs for the memory (found through its serve.json), and
the command asks it over HTTP; the server already holds the model. `pcm stats` (a command that needs no model) is
timed cold too, and so is the answer inside a process (what the cold command waits for on top of starting).

Each figure is the median (and max) of ``--runs`` runs, each a fresh `python -m pcm.cli` process, in wall time and
in the command's own CPU time (which a busy machine inflates less). `python -c pass` is timed as the floor. Prints
figures; asserts nothing. Run: ``python benchmarks/bench_cli_start.py [--runs 5]``. The server listens on 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

QUESTION = "What is my dog called?"
RECALL = "dog beagle"
SRC = Path(__file__).resolve().parents[1] / "src"


def command(memory: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "pcm.cli", "--memory", str(memory), *args]


def timed(cmd: list[str], env: dict[str, str], runs: int) -> tuple[list[float], list[float]]:
    """Wall time and CPU time (user + system, the command's own process) of each run."""
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return walls, cpus


def show(label: str, measured: tuple[list[float], list[float]]) -> None:
    walls, cpus = measured
    print(f"{label:40} wall p50 {statistics.median(walls):6.2f} s (max {max(walls):6.2f})   "
          f"CPU p50 {statistics.median(cpus):6.2f} s   ({len(walls)} runs)")


def build(memory: Path, env: dict[str, str]) -> None:
    """The bundled sample conversations (129 utterances), stored and indexed."""
    code = (
        "from pathlib import Path; from pcm.memory import Memory; from pcm.settings import Settings;"
        "from pcm.conversations import parse_file, sample_paths;"
        f"m = Memory.init(Settings.from_env(memory=Path({str(memory)!r})), owner='Dana');"
        "m.ingest([c for p in sample_paths() for c in parse_file(p)]); m.close()"
    )
    subprocess.run([sys.executable, "-c", code], env=env, check=True)


def in_process(memory: Path, env: dict[str, str]) -> str:
    code = (
        "import time, statistics; from pcm.memory import Memory;"
        "from pathlib import Path; from pcm.settings import Settings;"
        f"m = Memory.open(Settings.from_env(memory=Path({str(memory)!r})), read_only=True); m.ask({QUESTION!r});"
        "t = []\nfor _ in range(5):\n s = time.perf_counter(); m.ask(" + repr(QUESTION) + "); t.append(time.perf_counter() - s)\n"
        "print(f'{statistics.median(t) * 1000:.0f} ms')"
    )
    return subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True).stdout.strip()


def serve(memory: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    server = subprocess.Popen(command(memory, "serve", "--bind", "127.0.0.1:0"), env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    info = memory / "serve.json"
    deadline = time.monotonic() + 300
    while not info.exists():  # a benchmark may poll; the server writes the file once it answers
        if server.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("pcm serve did not start")
        time.sleep(0.2)
    print(f"pcm serve at {json.loads(info.read_text())['url']}")
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--src", type=Path, default=SRC, help="pcm sources to time (another checkout, to compare)")
    parser.add_argument("--warm-only", action="store_true", help="skip the cold runs (minutes on a busy machine)")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(args.src.resolve()), "PCM_LLM": "none"}
    for name in ("PCM_MEMORY", "PCM_STORE_URL", "PCM_TOKEN"):
        env.pop(name, None)
    work = Path(tempfile.mkdtemp(prefix="pcm-bench-cli-"))
    memory = work / "memory"
    try:
        build(memory, env)
        print(f"sources: {args.src}; memory: bundled samples; {os.cpu_count()} CPUs, "
              f"load average {os.getloadavg()[0]:.1f}")
        show("      python -c pass (the floor)", timed([sys.executable, "-c", "pass"], env, args.runs))
        show("cold  pcm stats (no model)", timed(command(memory, "stats"), env, args.runs))
        if not args.warm_only:
            show("cold  pcm recall", timed(command(memory, "recall", RECALL, "--k", "5"), env, args.runs))
            show("cold  pcm ask", timed(command(memory, "ask", QUESTION), env, args.runs))
            print(f"{'      ask inside a warm process':40} p50 {in_process(memory, env)}")
        server = serve(memory, env)
        try:
            timed(command(memory, "ask", QUESTION), env, 1)  # the server loads its model on the first question
            show("warm  pcm recall (through pcm serve)", timed(command(memory, "recall", RECALL, "--k", "5"), env, args.runs))
            show("warm  pcm ask (through pcm serve)", timed(command(memory, "ask", QUESTION), env, args.runs))
        finally:
            server.terminate()
            server.wait(timeout=60)
        print(f"load average after: {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

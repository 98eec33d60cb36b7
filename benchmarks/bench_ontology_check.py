"""How long `pcm ontology check` takes (issue 8; target ≤ 10 s in all, of which the JVM start alone is ~1 s).

Prints figures; asserts nothing. Run: ``python benchmarks/bench_ontology_check.py [--runs 3]``. Each run is a fresh
process, as CI and a developer run it (``pcm ontology check`` through the CLI module), plus the phases as the
report times them and the bare JVM start for reference.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time


def jvm_start() -> float:
    """Seconds for `java -version`: the floor under any HermiT run."""
    import owlready2

    started = time.perf_counter()
    subprocess.run([owlready2.JAVA_EXE, "-version"], capture_output=True, check=True)
    return time.perf_counter() - started


def one_run() -> tuple[float, dict[str, float]]:
    """Wall time of a fresh `check --json` process, and the phase timings it reports."""
    code = "from pcm.cli_ontology import ontology; ontology()"
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, "check", "--json"], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    report = json.loads(done.stdout)
    return wall, report["timings"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if shutil.which("java") is None:
        print("java is not installed: the reasoner phase cannot run")
        return
    print(f"JVM start (java -version): {min(jvm_start() for _ in range(3)):.2f} s")
    walls, phases = [], []
    for _ in range(args.runs):
        wall, timings = one_run()
        walls.append(wall)
        phases.append(timings)
    print(f"pcm ontology check, fresh process: median {statistics.median(walls):.2f} s, max {max(walls):.2f} s "
          f"over {args.runs} run(s)")
    for phase in phases[0]:
        values = [p[phase] for p in phases]
        print(f"  {phase:9} median {statistics.median(values):.2f} s")


if __name__ == "__main__":
    main()

"""The front's client to the engine alone (issue 37): CPU per read through ``Upstream.fetch`` in one process,
against a bare ``oxigraph serve`` on a one-triple store, 4 reads in flight at once.

CPU time of the process (``time.process_time``) is what the client costs the front; on a shared machine it moves
much less than queries/s, which the engine and the other load share. ``--compare OTHER/src`` measures another
checkout's ``pcm/endpoint/upstream.py`` in the same run, alternating (e.g. ``git archive REV src | tar -x -C
/tmp/old``). Traffic goes to 127.0.0.1 only.

    python benchmarks/bench_upstream.py [--reads 3000] [--rounds 3] [--compare OTHER/src]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import uvloop

SRC = Path(__file__).resolve().parents[1] / "src"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_endpoint import wait_until_up  # noqa: E402

QUERY = b"SELECT ?s ?p ?o WHERE { ?s ?p ?o } LIMIT 5"
HEADERS = {"Content-Type": "application/sparql-query; charset=utf-8", "Accept": "application/sparql-results+json"}


@dataclass
class _Engine:
    port: int
    idle_timeout_s: float | None = 10.0


class _Watchdog:
    @contextlib.asynccontextmanager
    async def arequest(self) -> AsyncIterator[int]:
        yield 0

    def abandoned(self) -> None:
        pass


def upstream_module(src: Path, name: str) -> ModuleType:
    """``pcm/endpoint/upstream.py`` of the checkout whose ``src`` is given (it imports nothing else of pcm's)."""
    spec = importlib.util.spec_from_file_location(name, src / "pcm" / "endpoint" / "upstream.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


async def measure(module: Any, port: int, reads: int, clients: int) -> tuple[float, float]:
    """CPU microseconds per read and reads per second, ``clients`` reads in flight at once."""
    up = module.Upstream(_Engine(port), _Watchdog())

    async def reader(count: int) -> None:
        for _ in range(count):
            answer = await up.fetch("POST", "/query", body=QUERY, headers=HEADERS, timeout=10)
            assert answer.status == 200, answer.status

    await reader(50)  # warm-up: connections, engine caches
    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(reader(reads // clients) for _ in range(clients)))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    await up.aclose()
    return cpu / reads * 1e6, reads / wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=3000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--compare", type=Path, metavar="SRC", help="another checkout's src/ directory")
    args = parser.parse_args()
    modules = {"this checkout": upstream_module(SRC, "_upstream_here")}
    if args.compare:
        modules[f"{args.compare}"] = upstream_module(args.compare, "_upstream_other")
    with tempfile.TemporaryDirectory(prefix="pcm-bench-upstream-") as store, socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        engine = subprocess.Popen(
            ["oxigraph", "serve", "--location", store, "--bind", f"127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            wait_until_up(f"http://127.0.0.1:{port}/")
            httpx.post(
                f"http://127.0.0.1:{port}/update", content="INSERT DATA { <urn:a> <urn:b> <urn:c> }",
                headers={"Content-Type": "application/sparql-update"},
            )
            for round_ in range(args.rounds):
                for label, module in modules.items():
                    cpu, rate = uvloop.run(measure(module, port, args.reads, args.clients))
                    print(f"round {round_ + 1}, {label}: {cpu:.0f} µs CPU per read, {rate:,.0f} reads/s")
        finally:
            engine.terminate()
            engine.wait(timeout=10)


if __name__ == "__main__":
    main()

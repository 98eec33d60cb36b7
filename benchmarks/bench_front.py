"""The front's own CPU per SPARQL query on its ASGI path, the engine client stubbed: what the Guard, the routing and
the protocol checks of ``pcm serve`` cost for one ``GET /query``, without sockets, an engine or other processes.

``lifetime_serving.py`` measures the whole front under load, where the CPU per query moves with the rate the
machine lets it reach (a shared machine gives a different rate every round). This script calls the ASGI application
directly, one request after another, on one thread, so its figure moves little with the machine's load: it is the
part of the front's CPU per query that is pcm's Python (uvicorn's parsing and writing, the sockets and the engine
client are not in it). It runs against whichever ``pcm`` is on ``PYTHONPATH``, so an older checkout's ``src`` gives
the figure before a change.

``python benchmarks/bench_front.py [--requests 20000] [--rounds 3]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import urllib.parse
from pathlib import Path
from types import SimpleNamespace
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if not os.environ.get("PYTHONPATH"):  # a PYTHONPATH given wins: the front measured is that one
    sys.path.insert(0, str(REPO / "src"))

import httpx  # noqa: E402

from pcm.endpoint.app import App  # noqa: E402
from pcm.endpoint.config import ServeConfig  # noqa: E402
from pcm.endpoint.upstream import Answer  # noqa: E402
from pcm.endpoint.web import create_app  # noqa: E402

QUERY = ("SELECT ?act ?thing WHERE { ?act <https://schema.org/agent> <https://pcm.invalid/m/32905f3c5911/friend-{n}> . "
         "?act <https://schema.org/object>|<https://schema.org/toLocation> ?thing }")
RESULT = b'{"head":{"vars":["act","thing"]},"results":{"bindings":[]}}'


class StubUpstream:
    """Answers every read at once, as the engine would answer a query with no rows."""

    def __init__(self) -> None:
        self.headers = httpx.Headers({"content-type": "application/sparql-results+json"})

    async def fetch(self, method: str, target: str, **_: Any) -> Answer:
        return Answer(200, self.headers, RESULT, engine_ns=1000)

    async def aclose(self) -> None:
        return None


def front() -> Any:
    """The ASGI application of ``pcm serve`` over a stub memory and engine (only what a query reads of them)."""
    memory = SimpleNamespace(naming=SimpleNamespace(layout=SimpleNamespace(kind="graphs")))
    watchdog = SimpleNamespace(generation=0)
    app = App(ServeConfig(), memory, StubUpstream(), watchdog, public_url="http://127.0.0.1:7878")  # type: ignore[arg-type]
    return create_app(app)


def scope(n: int) -> dict[str, Any]:
    """The scope uvicorn gives a client's ``GET /query?query=...`` (as httpx sends it, keep-alive)."""
    query = urllib.parse.urlencode({"query": QUERY.replace("{n}", str(n % 2000))}).encode("latin-1")
    headers = [(b"host", b"127.0.0.1:7878"), (b"accept", b"application/sparql-results+json"),
               (b"accept-encoding", b"gzip, deflate"), (b"connection", b"keep-alive"),
               (b"user-agent", b"python-httpx/0.28.1")]
    return {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}, "http_version": "1.1",
            "server": ("127.0.0.1", 7878), "client": ("127.0.0.1", 50000), "scheme": "http", "method": "GET",
            "root_path": "", "path": "/query", "raw_path": b"/query", "query_string": query, "headers": headers,
            "state": {}}


async def run(app: Any, requests: int) -> float:
    """CPU seconds of this thread per request over ``requests`` requests (after as many again to warm up)."""

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    sent: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            sent.append(message["status"])

    scopes = [scope(n) for n in range(2000)]
    for n in range(requests):  # warm-up: caches of the checks, the interpreter's own
        await app(dict(scopes[n % 2000], state={}), receive, send)
    started = time.thread_time()
    for n in range(requests):
        await app(dict(scopes[n % 2000], state={}), receive, send)
    used = time.thread_time() - started
    if set(sent) != {200}:
        raise SystemExit(f"the front answered {sorted(set(sent))}, not 200")
    return used / requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    app = front()
    import pcm

    figures = [asyncio.run(run(app, args.requests)) * 1e6 for _ in range(args.rounds)]
    print(f"the front's ASGI path ({Path(pcm.__file__).parent}), GET /query, engine stubbed, {args.requests:,} "
          f"requests x {args.rounds}: {', '.join(f'{f:.1f}' for f in figures)} us CPU a request; "
          f"median {statistics.median(figures):.1f} us")


if __name__ == "__main__":
    main()

"""A small SPARQL 1.1 Protocol server for tests: real HTTP over an in-memory pyoxigraph store, slow where told.

It stands for a generic server pcm knows nothing of (no engine profile: its ``Server`` header is the standard
library's): ``/query`` answers queries over the union of graphs, ``/update`` applies updates one at a time, in the
order they come (as a server with one writer does), and an update longer than ``slow_bytes`` waits ``delay``
seconds first, as a slow server does with a big write. Every request's ``Authorization`` header is recorded.

    with slow_sparql_server(delay=3.0) as server:
        settings = Settings(store_url=server.url + "/query", store_write_timeout=1)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import pyoxigraph as ox


@dataclass
class SlowServer:
    url: str
    store: ox.Store
    delay: float = 0.0
    slow_bytes: int = 10_000
    authorizations: list[str] = field(default_factory=list)
    writing: threading.Lock = field(default_factory=threading.Lock)
    updates_done: int = 0

    def graphs(self) -> list[str]:
        return sorted(g.value for g in self.store.named_graphs() if isinstance(g, ox.NamedNode))


def _handler(server: SlowServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # a root page: no service description, so the profile is the standard alone
            server.authorizations.append(self.headers.get("Authorization", ""))
            self._answer(200, "text/plain", b"a SPARQL server")

        def do_POST(self) -> None:
            server.authorizations.append(self.headers.get("Authorization", ""))
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            kind = "update" if self.path.startswith("/update") else "query"
            text = body.decode("utf-8")
            if self.headers.get("Content-Type", "").startswith("application/x-www-form-urlencoded"):
                text = parse_qs(text)[kind][0]
            try:
                if kind == "update":
                    self._update(text)
                else:
                    self._query(text)
            except (SyntaxError, ValueError, OSError) as exc:
                self._answer(400, "text/plain", str(exc).encode())

        def _update(self, text: str) -> None:
            with server.writing:  # one writer: updates apply in the order they arrived
                if len(text) > server.slow_bytes:
                    time.sleep(server.delay)
                server.store.update(text)
                server.updates_done += 1
            self._answer(204, "text/plain", b"")

        def _query(self, text: str) -> None:
            result = server.store.query(text, use_default_graph_as_union=True)
            if isinstance(result, ox.QueryTriples):
                self._answer(200, "application/n-triples", result.serialize(format=ox.RdfFormat.N_TRIPLES) or b"")
            else:
                payload = result.serialize(format=ox.QueryResultsFormat.JSON) or b""  # type: ignore[union-attr]
                self._answer(200, "application/sparql-results+json", payload)

        def _answer(self, status: int, content_type: str, payload: bytes) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client stopped waiting (its write timeout): the update was applied all the same

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
            pass

    return Handler


@contextmanager
def slow_sparql_server(*, delay: float = 0.0, slow_bytes: int = 10_000) -> Iterator[SlowServer]:
    """Start the server on a free loopback port; yield it (its base URL in ``url``); stop it on exit."""
    server = SlowServer("", ox.Store(), delay=delay, slow_bytes=slow_bytes)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(server))
    httpd.daemon_threads = True
    server.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)

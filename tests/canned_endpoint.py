"""A fake SPARQL endpoint on loopback for protocol tests: it records each POST and answers with a canned response.

The answer and the record are class-level so a test sets them before the call it makes; one endpoint runs at a time
in a test module.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar


class Recorder(BaseHTTPRequestHandler):
    """Records each request and answers with the class-level canned response."""

    seen: ClassVar[list[tuple[str, dict[str, str], bytes]]] = []
    answer: ClassVar[tuple[int, str, bytes]] = (200, "application/sparql-results+json", b"")

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        type(self).seen.append((self.path, dict(self.headers.items()), body))
        status, content_type, payload = type(self).answer
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass


@contextmanager
def canned_endpoint(
    answer: tuple[int, str, bytes] = (200, "text/plain", b""), handler: type[Recorder] = Recorder
) -> Iterator[str]:
    """The endpoint's base URL while it runs, ``handler`` (a :class:`Recorder` or a subclass that answers some
    requests its own way) answering ``(status, content type, payload)``; its record starts empty."""
    handler.seen = []
    handler.answer = answer
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)

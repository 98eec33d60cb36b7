"""The front's HTTP client to the engine (:mod:`pcm.endpoint.upstream`) against scripted engines on loopback,
and the front's own timing (``Server-Timing``, ``/api/stats``) on a real server.

The scripted engine is a plain socket server that answers each request with bytes the test chose, so framing
(chunked, Content-Length, close-delimited), connection reuse and the deadline are checked exactly.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from pcm.endpoint.upstream import EngineUnavailable, TimeLimit, TooLarge, Upstream

try:
    from test_endpoint_support import POSTS, build_memory, serving
except ImportError:  # tests/ imported as a package
    from tests.test_endpoint_support import POSTS, build_memory, serving

Reply = Callable[[socket.socket, bytes], bool]  # (connection, request head) -> keep the connection open?


@dataclass
class ScriptedEngine:
    """Accepts connections on 127.0.0.1 and answers every request with ``reply``; counts connections."""

    reply: Reply
    port: int = 0
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)

    def serve(self) -> Iterator[ScriptedEngine]:
        listener = socket.create_server(("127.0.0.1", 0))
        self.port = listener.getsockname()[1]
        stop = threading.Event()

        def handle(conn: socket.socket) -> None:
            with conn:
                buffer = b""
                while not stop.is_set():
                    while b"\r\n\r\n" not in buffer:
                        data = conn.recv(65536)
                        if not data:
                            return
                        buffer += data
                    head, _, buffer = buffer.partition(b"\r\n\r\n")
                    length = next(
                        (int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")),
                        0,
                    )
                    while len(buffer) < length:
                        buffer += conn.recv(65536)
                    self.requests.append(head + b"\r\n\r\n" + buffer[:length])
                    buffer = buffer[length:]
                    if not self.reply(conn, head):
                        return

        def accept() -> None:
            listener.settimeout(0.1)
            while not stop.is_set():
                try:
                    conn, _ = listener.accept()
                except TimeoutError:
                    continue
                self.connections += 1
                threading.Thread(target=handle, args=(conn,), daemon=True).start()

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join(5)
            listener.close()


class _Watchdog:
    """What Upstream needs from the watchdog: a count of requests in flight and of abandoned ones."""

    def __init__(self) -> None:
        self.inflight = 0
        self.abandoned_count = 0

    @contextlib.contextmanager
    def request(self) -> Iterator[int]:
        self.inflight += 1
        try:
            yield 0
        finally:
            self.inflight -= 1

    def abandoned(self) -> None:
        self.abandoned_count += 1


@dataclass
class _Engine:
    port: int


@contextlib.contextmanager
def upstream_to(reply: Reply) -> Iterator[tuple[Upstream, ScriptedEngine, _Watchdog]]:
    engine = ScriptedEngine(reply)
    for running in engine.serve():
        watchdog = _Watchdog()
        yield Upstream(_Engine(running.port), watchdog), running, watchdog  # type: ignore[arg-type]


def chunked(pieces: list[bytes], *, extension: bytes = b"", trailer: bytes = b"") -> Reply:
    def reply(conn: socket.socket, head: bytes) -> bool:
        body = b"".join(b"%x%s\r\n%s\r\n" % (len(p), extension, p) for p in pieces) + b"0\r\n" + trailer + b"\r\n"
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/sparql-results+json\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n" + body)
        return True

    return reply


def fixed(body: bytes, *, status: int = 200, close: bool = False) -> Reply:
    def reply(conn: socket.socket, head: bytes) -> bool:
        extra = b"Connection: close\r\n" if close else b""
        conn.sendall(b"HTTP/1.1 %d X\r\nContent-Length: %d\r\n%s\r\n%s" % (status, len(body), extra, body))
        return not close

    return reply


def test_chunked_answers_are_joined_and_the_connection_is_reused() -> None:
    with upstream_to(chunked([b'{"head"', b": {}, ", b'"results": []}'], extension=b";x=1", trailer=b"X-T: 1\r\n")) as (
        up, engine, watchdog
    ):
        for _ in range(5):
            answer = up.fetch("POST", "/query", body=b"SELECT * {}", headers={"Accept": "*/*"}, timeout=5)
            assert answer.status == 200 and answer.body == b'{"head": {}, "results": []}'
            assert answer.content_type == "application/sparql-results+json"
            assert answer.engine_ns > 0
        assert engine.connections == 1  # keep-alive: no new TCP connection per request
        assert watchdog.inflight == 0
    first = engine.requests[0]
    assert first.startswith(b"POST /query HTTP/1.1\r\n")
    assert b"\r\nContent-Length: 11\r\n" in first and first.endswith(b"\r\n\r\nSELECT * {}")


def test_content_length_and_error_statuses_pass_through() -> None:
    with upstream_to(fixed(b"Parser error at line 1", status=400)) as (up, engine, _):
        answer = up.fetch("GET", "/query?query=x", timeout=5)
        up.fetch("GET", "/query?query=y", timeout=5)
        assert (answer.status, answer.body) == (400, b"Parser error at line 1")
        assert engine.connections == 1


def test_an_engine_that_closes_gets_a_new_connection_next_time() -> None:
    with upstream_to(fixed(b"ok", close=True)) as (up, engine, _):
        assert up.fetch("GET", "/", timeout=5).body == b"ok"
        assert up.fetch("GET", "/", timeout=5).body == b"ok"
        assert engine.connections == 2


def test_a_stale_pooled_connection_is_replaced_transparently() -> None:
    served: list[int] = []

    def once_then_hang_up(conn: socket.socket, head: bytes) -> bool:
        served.append(1)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        return False  # closes after answering, without saying so: the pooled connection goes stale

    with upstream_to(once_then_hang_up) as (up, engine, _):
        assert up.fetch("GET", "/", timeout=5).body == b"ok"
        time.sleep(0.05)
        assert up.fetch("GET", "/", timeout=5).body == b"ok"
        assert engine.connections == 2 and len(served) == 2


def test_a_trickling_answer_is_dropped_at_the_deadline() -> None:
    def trickle(conn: socket.socket, head: bytes) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        with contextlib.suppress(OSError):
            for _ in range(100):
                conn.sendall(b"1\r\nx\r\n")
                time.sleep(0.02)
        return False

    with upstream_to(trickle) as (up, _, watchdog):
        with pytest.raises(TimeLimit):
            up.fetch("GET", "/", timeout=0.3)
        assert watchdog.abandoned_count == 1 and watchdog.inflight == 0


def test_a_silent_engine_is_dropped_at_the_deadline() -> None:
    def silent(conn: socket.socket, head: bytes) -> bool:
        time.sleep(1.0)
        return False

    with upstream_to(silent) as (up, _, watchdog):
        with pytest.raises(TimeLimit):
            up.fetch("GET", "/", timeout=0.2)
        assert watchdog.abandoned_count == 1


def test_an_answer_past_the_size_cap_is_refused() -> None:
    with upstream_to(chunked([b"x" * 1000] * 5)) as (up, _, watchdog):
        with pytest.raises(TooLarge):
            up.fetch("GET", "/", timeout=5, max_bytes=3000)
        assert watchdog.abandoned_count == 1


def test_a_close_delimited_answer_is_read_to_the_end() -> None:
    def until_close(conn: socket.socket, head: bytes) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/turtle\r\n\r\n<a> <b> <c> .\n")
        return False

    with upstream_to(until_close) as (up, _, _):
        streamed = up.stream("GET", "/store")
        assert streamed.status == 200 and streamed.headers["content-type"] == "text/turtle"
        assert streamed.read() == b"<a> <b> <c> .\n"


def test_no_engine_is_reported_as_unavailable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    up = Upstream(_Engine(port), _Watchdog())  # type: ignore[arg-type]
    with pytest.raises(EngineUnavailable):
        up.fetch("GET", "/", timeout=2)


# -------------------------------------------------------------------------------- the front's own timing


def test_server_timing_and_stats_show_the_fronts_share(tmp_path: Path) -> None:
    with serving(build_memory(tmp_path / "memory", facts=False)) as server:
        before = httpx.get(server.url + "/api/stats").json()
        assert before["requests"] == 0 and before["front_ms"] is None
        with httpx.Client() as http:
            for _ in range(5):
                response = http.get(server.url + "/query", params={"query": POSTS})
                assert response.status_code == 200
        front, engine = (part.strip() for part in response.headers["server-timing"].split(","))
        assert front.startswith("front;dur=") and engine.startswith("engine;dur=")
        assert float(front.split("=")[1]) >= 0 and float(engine.split("=")[1]) > 0
        stats = httpx.get(server.url + "/api/stats").json()
        assert stats["requests"] == 5 and stats["window"] == 5
        assert 0 < stats["front_ms"]["p50"] <= stats["front_ms"]["p99"]
        assert stats["engine_ms"]["mean"] > 0
        assert "server-timing" not in httpx.get(server.url + "/api/info").headers  # no engine, no timing


# -------------------------------------------------------------------------------- the front's request parsing


def _raw(url: str, request: bytes) -> bytes:
    """Send raw bytes to the front and read until it closes the connection (or 5 s pass)."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(request)
        data = b""
        with contextlib.suppress(TimeoutError):
            while chunk := sock.recv(65536):
                data += chunk
    return data


def test_the_fronts_lean_header_parsing_keeps_the_protocol_rules(tmp_path: Path) -> None:
    with serving(build_memory(tmp_path / "memory", facts=False)) as server:
        # HTTP/1.0 without keep-alive: one answer, then the front closes (else _raw would wait 5 s and fail below)
        answer = _raw(server.url, b"GET /api/health HTTP/1.0\r\nHost: localhost\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 200 ") and b'"status": "ok"' in answer
        # a folded header line continues the previous field; Connection: close ends the exchange
        folded = _raw(server.url, b"GET /api/health HTTP/1.1\r\nHost:\r\n localhost\r\nConnection: close\r\n\r\n")
        assert folded.startswith(b"HTTP/1.1 200 ")
        # the Host check sees header names in any case
        refused = _raw(server.url, b"GET /api/health HTTP/1.1\r\nhOsT: evil.example\r\nConnection: close\r\n\r\n")
        assert refused.startswith(b"HTTP/1.1 403 ")
        # too many header fields: 431, as the stdlib answers
        many = b"".join(b"X-%d: 1\r\n" % i for i in range(101))
        assert _raw(server.url, b"GET /api/health HTTP/1.1\r\n" + many + b"\r\n").startswith(b"HTTP/1.1 431 ")
        # Expect: 100-continue gets its interim answer, then the real one
        body = b"query=" + POSTS.replace(" ", "+").encode()
        expect = _raw(
            server.url,
            b"POST /query HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nConnection: close\r\n"
            b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body),
        )
        assert expect.startswith(b"HTTP/1.1 100 ") and b"HTTP/1.1 200 " in expect
        # an unusual request line still goes through the stdlib parser (which refuses HTTP/2 with 505)
        assert b"Error code explanation: 505" in _raw(server.url, b"GET /api/health HTTP/2.0\r\n\r\n")

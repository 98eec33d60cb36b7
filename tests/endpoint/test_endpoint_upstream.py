"""The front's HTTP client to the engine (:mod:`pcm.endpoint.upstream`) against scripted engines on loopback,
and the front's own timing (``Server-Timing``, ``/api/timings``) and HTTP handling on a real server.

The scripted engine is a plain socket server that answers each request with bytes the test chose, so framing
(chunked, Content-Length, close-delimited), connection reuse, what is sent again after a dropped connection, and
the deadline are checked exactly.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from pcm.endpoint.upstream import EngineUnavailable, TimeLimit, TooLarge, Upstream, WriteUnconfirmed
from tests.endpoint.test_endpoint_support import POSTS, build_memory, serving

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

    @contextlib.asynccontextmanager
    async def arequest(self) -> AsyncIterator[int]:
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
    idle_timeout_s: float | None = 10.0


Scenario = Callable[[Upstream, ScriptedEngine, _Watchdog], Awaitable[None]]


def run_against(reply: Reply, scenario: Scenario, *, idle_timeout_s: float | None = 10.0) -> ScriptedEngine:
    """Run ``scenario`` with an Upstream to a scripted engine, in an event loop as the front does."""
    async def main(running: ScriptedEngine, watchdog: _Watchdog) -> None:
        up = Upstream(_Engine(running.port, idle_timeout_s), watchdog)  # type: ignore[arg-type]
        try:
            await scenario(up, running, watchdog)
        finally:
            await up.aclose()

    engine = ScriptedEngine(reply)
    for running in engine.serve():
        asyncio.run(main(running, _Watchdog()))
    return engine


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
    async def scenario(up: Upstream, engine: ScriptedEngine, watchdog: _Watchdog) -> None:
        for _ in range(5):
            answer = await up.fetch("POST", "/query", body=b"SELECT * {}", headers={"Accept": "*/*"}, timeout=5)
            assert answer.status == 200 and answer.body == b'{"head": {}, "results": []}'
            assert answer.content_type == "application/sparql-results+json"
            assert answer.engine_ns > 0
        assert engine.connections == 1  # keep-alive: no new TCP connection per read
        assert watchdog.inflight == 0

    engine = run_against(chunked([b'{"head"', b": {}, ", b'"results": []}'], extension=b";x=1", trailer=b"X-T: 1\r\n"), scenario)
    first = engine.requests[0]
    assert first.startswith(b"POST /query HTTP/1.1\r\n")
    assert b"\r\ncontent-length: 11\r\n" in first.lower() and first.endswith(b"\r\n\r\nSELECT * {}")


def test_content_length_and_error_statuses_pass_through() -> None:
    async def scenario(up: Upstream, engine: ScriptedEngine, _: _Watchdog) -> None:
        answer = await up.fetch("GET", "/query?query=x", timeout=5)
        await up.fetch("GET", "/query?query=y", timeout=5)
        assert (answer.status, answer.body) == (400, b"Parser error at line 1")
        assert engine.connections == 1

    run_against(fixed(b"Parser error at line 1", status=400), scenario)


def test_an_engine_that_closes_gets_a_new_connection_next_time() -> None:
    async def scenario(up: Upstream, engine: ScriptedEngine, _: _Watchdog) -> None:
        assert (await up.fetch("GET", "/", timeout=5)).body == b"ok"
        assert (await up.fetch("GET", "/", timeout=5)).body == b"ok"
        assert engine.connections == 2

    run_against(fixed(b"ok", close=True), scenario)


def test_a_stale_pooled_connection_is_replaced_transparently() -> None:
    served: list[int] = []
    hung_up = threading.Event()

    def once_then_hang_up(conn: socket.socket, head: bytes) -> bool:
        served.append(1)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        hung_up.set()
        return False  # closes after answering, without saying so: the pooled connection goes stale

    async def scenario(up: Upstream, engine: ScriptedEngine, _: _Watchdog) -> None:
        assert (await up.fetch("GET", "/", timeout=5)).body == b"ok"
        await asyncio.to_thread(hung_up.wait, 5)
        assert (await up.fetch("GET", "/", timeout=5)).body == b"ok"
        assert engine.connections == 2 and len(served) == 2

    run_against(once_then_hang_up, scenario)


def _oxigraph_idle_close(after_idle: threading.Event) -> Reply:
    """Oxigraph's way of dropping an idle keep-alive connection: an unasked 500, then close."""

    def reply(conn: socket.socket, head: bytes) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        conn.sendall(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 46\r\n\r\n"
                     b"Resource temporarily unavailable (os error 11)")
        after_idle.set()
        return False

    return reply


def test_an_unasked_500_on_an_idle_connection_is_never_read_as_an_answer() -> None:
    """The lost-update defect: the front read the engine's idle-timeout 500 as the answer to the next request."""
    idle_closed = threading.Event()

    async def scenario(up: Upstream, engine: ScriptedEngine, _: _Watchdog) -> None:
        for _ in range(3):
            assert (await up.fetch("GET", "/query", timeout=5)).status == 200
            await asyncio.to_thread(idle_closed.wait, 5)
            idle_closed.clear()
        answer = await up.fetch("POST", "/update", body=b"INSERT DATA {}", timeout=5, write=True)
        assert answer.status == 200
        assert len([r for r in engine.requests if r.startswith(b"POST /update")]) == 1

    run_against(_oxigraph_idle_close(idle_closed), scenario)


def test_writes_each_take_a_new_connection() -> None:
    async def scenario(up: Upstream, engine: ScriptedEngine, _: _Watchdog) -> None:
        await up.fetch("GET", "/query", timeout=5)
        for _ in range(3):
            assert (await up.fetch("POST", "/update", body=b"x", timeout=5, write=True)).status == 200
        assert engine.connections == 4  # one for the read, one per write: a write never meets a stale connection

    run_against(fixed(b"ok"), scenario)


def test_a_write_the_engine_dropped_is_not_sent_again() -> None:
    def hang_up(conn: socket.socket, head: bytes) -> bool:
        return False  # reads the request, then closes without answering

    async def scenario(up: Upstream, engine: ScriptedEngine, _: _Watchdog) -> None:
        with pytest.raises(WriteUnconfirmed, match="not confirmed"):
            await up.fetch("POST", "/update", body=b"INSERT DATA {}", timeout=5, write=True)
        assert len(engine.requests) == 1  # sent once, never blindly again
        with pytest.raises(EngineUnavailable):  # a read is sent again once, then given up
            await up.fetch("GET", "/query", timeout=5)
        assert len(engine.requests) == 3

    run_against(hang_up, scenario)


def test_a_trickling_answer_is_dropped_at_the_deadline() -> None:
    def trickle(conn: socket.socket, head: bytes) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        with contextlib.suppress(OSError):
            for _ in range(100):
                conn.sendall(b"1\r\nx\r\n")
                time.sleep(0.02)
        return False

    async def scenario(up: Upstream, engine: ScriptedEngine, watchdog: _Watchdog) -> None:
        with pytest.raises(TimeLimit):
            await up.fetch("GET", "/", timeout=0.3)
        assert watchdog.abandoned_count == 1 and watchdog.inflight == 0

    run_against(trickle, scenario)


def test_a_silent_engine_is_dropped_at_the_deadline() -> None:
    released = threading.Event()

    def silent(conn: socket.socket, head: bytes) -> bool:
        released.wait(60)  # silent until the client has given up, however long that takes
        return False

    async def scenario(up: Upstream, engine: ScriptedEngine, watchdog: _Watchdog) -> None:
        try:
            with pytest.raises(TimeLimit):
                await up.fetch("GET", "/", timeout=0.2)
        finally:
            released.set()
        assert watchdog.abandoned_count == 1

    run_against(silent, scenario)


def test_an_answer_past_the_size_cap_is_refused() -> None:
    async def scenario(up: Upstream, engine: ScriptedEngine, watchdog: _Watchdog) -> None:
        with pytest.raises(TooLarge):
            await up.fetch("GET", "/", timeout=5, max_bytes=3000)
        assert watchdog.abandoned_count == 1

    run_against(chunked([b"x" * 1000] * 5), scenario)


def test_bytes_behind_an_answer_keep_its_connection_out_of_the_pool() -> None:
    """An answer followed at once by another one (unasked): the first is the answer, and the connection is closed, so
    the unasked one is never read as the next request's."""

    def answer_and_more(conn: socket.socket, head: bytes) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
                     b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\nboom")
        return True

    async def scenario(up: Upstream, engine: ScriptedEngine, _: _Watchdog) -> None:
        for _ in range(2):
            answer = await up.fetch("GET", "/query", timeout=5)
            assert (answer.status, answer.body) == (200, b"ok")
        assert engine.connections == 2

    run_against(answer_and_more, scenario)


def test_an_interim_answer_is_skipped_and_a_close_delimited_one_read_to_the_end() -> None:
    def interim_then_until_close(conn: socket.socket, head: bytes) -> bool:
        conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it")
        return False

    async def scenario(up: Upstream, engine: ScriptedEngine, _: _Watchdog) -> None:
        answer = await up.fetch("GET", "/query", timeout=5)
        assert (answer.status, answer.body, answer.content_type) == (200, b"all of it", "text/plain")

    run_against(interim_then_until_close, scenario)


def test_a_close_delimited_answer_is_read_to_the_end() -> None:
    def until_close(conn: socket.socket, head: bytes) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/turtle\r\n\r\n<a> <b> <c> .\n")
        return False

    async def scenario(up: Upstream, engine: ScriptedEngine, watchdog: _Watchdog) -> None:
        streamed = await up.stream("GET", "/store")
        assert streamed.status == 200 and streamed.headers["content-type"] == "text/turtle"
        assert await streamed.read() == b"<a> <b> <c> .\n"
        assert watchdog.inflight == 0

    run_against(until_close, scenario)


def test_no_engine_is_reported_as_unavailable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    async def main() -> None:
        up = Upstream(_Engine(port), _Watchdog())  # type: ignore[arg-type]
        with pytest.raises(EngineUnavailable):
            await up.fetch("GET", "/", timeout=5)
        with pytest.raises(EngineUnavailable):  # nothing was sent: not a WriteUnconfirmed
            try:
                await up.fetch("POST", "/update", body=b"x", timeout=5, write=True)
            except WriteUnconfirmed:
                pytest.fail("a write that never left is not 'unconfirmed'")
        await up.aclose()

    asyncio.run(main())


# -------------------------------------------------------------------------------- the front's own timing


def test_server_timing_and_stats_show_the_fronts_share(tmp_path: Path) -> None:
    with serving(build_memory(tmp_path / "memory", facts=False)) as server:
        before = httpx.get(server.url + "/api/timings").json()
        assert before["requests"] == 0 and before["front_ms"] is None
        with httpx.Client() as http:
            for _ in range(5):
                response = http.get(server.url + "/query", params={"query": POSTS})
                assert response.status_code == 200
        front, engine = (part.strip() for part in response.headers["server-timing"].split(","))
        assert front.startswith("front;dur=") and engine.startswith("engine;dur=")
        assert float(front.split("=")[1]) >= 0 and float(engine.split("=")[1]) > 0
        stats = httpx.get(server.url + "/api/timings").json()
        assert stats["requests"] == 5 and stats["window"] == 5
        assert 0 < stats["front_ms"]["p50"] <= stats["front_ms"]["p99"]
        assert stats["engine_ms"]["mean"] > 0
        assert "server-timing" not in httpx.get(server.url + "/api/info").headers  # no engine, no timing


# -------------------------------------------------------------------------------- the front's HTTP handling


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


def test_the_front_keeps_the_http_rules(tmp_path: Path) -> None:
    with serving(build_memory(tmp_path / "memory", facts=False)) as server:
        # HTTP/1.0 without keep-alive: one answer, then the front closes (else _raw would wait 5 s and fail below)
        answer = _raw(server.url, b"GET /api/health HTTP/1.0\r\nHost: localhost\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 200 ") and b'"status": "ok"' in answer
        # the Host check sees header names in any case
        refused = _raw(server.url, b"GET /api/health HTTP/1.1\r\nhOsT: evil.example\r\nConnection: close\r\n\r\n")
        assert refused.startswith(b"HTTP/1.1 403 ")
        # Expect: 100-continue gets its interim answer, then the real one
        body = b"query=" + POSTS.replace(" ", "+").encode()
        expect = _raw(
            server.url,
            b"POST /query HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nConnection: close\r\n"
            b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body),
        )
        assert expect.startswith(b"HTTP/1.1 100 ") and b"HTTP/1.1 200 " in expect
        # a chunked body is read whole
        chunked_body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
        chunked = _raw(
            server.url,
            b"POST /query HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n"
            b"Content-Type: application/x-www-form-urlencoded\r\nAccept: text/csv\r\n\r\n" + chunked_body,
        )
        assert chunked.startswith(b"HTTP/1.1 200 ") and chunked.endswith(b"n\r\n10\r\n")

"""``pcm serve`` under many slow clients at once, bounded, as a user runs it (a ``pcm serve`` process on loopback).

While a supervisor polls ``GET /api/health``: 200 connections that send nothing or half a head, slowly (beyond the
default 64 connections, where uvicorn answers every other request 503), then 20 uploads of 15 MB each, sent
slowly to the Graph Store with the token, against a budget of 32 MB of bodies in flight. Every health check is
answered 200 within 100 ms of the server's own time (the time the scheduler kept it or the poller from a CPU left
out, as ``tests/health_poll.py`` measures it: on a shared two-core machine that alone reached 600 ms) and within
5 s all told; the server's resident memory grows by less than 200 MB (without the budget every
upload was taken and it grew by 584 MB); at most two uploads are taken at a time, the others answered
503 before their body is read; the silent and half-sent connections are closed at the head timeout and an idle
kept-alive one at the idle timeout, waited for on the sockets.

The clients pace themselves (a chunk, then a pause: that is what makes them slow); nothing in the test waits on a
timer for the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from starlette.types import Message

from pcm.endpoint.inflight import BodyBudget, Metered, OverBudget
from pcm.errors import UsageError
from pcm.settings import Settings
from tests.endpoint.test_endpoint_support import TOKEN, build_memory
from tests.serve_process import Served, served_with_log

REPO = Path(__file__).resolve().parents[2]
MB = 1024 * 1024
HEAD_TIMEOUT = 2.0
IDLE_TIMEOUT = 1
BODIES_IN_FLIGHT_MB = 32
SLOW_CONNECTIONS = 200
UPLOADS = 20
UPLOAD_BYTES = 15 * MB
CHUNK = 256 * 1024
PACE_S = 0.02  # between two chunks of an upload: 15 MB in about 1.2 s
HEALTH_LIMIT_S = 0.1  # each check, not counting the time the machine kept the server from a CPU
STALL_S = 5.0  # each check, counting everything: a stall, whatever the machine
RSS_GROWTH_LIMIT_MB = 200
SLACK_S = 3.0  # on top of a timeout, for a loaded machine


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """`pcm serve` with the default connection limit (64), short head and idle timeouts and 32 MB of bodies in
    flight, set by its flags."""
    root = tmp_path_factory.mktemp("slow-clients")
    settings = build_memory(root / "memory", samples=(), facts=False)
    log = root / "serve.log"
    flags = ("--head-timeout", str(HEAD_TIMEOUT), "--idle-timeout", str(IDLE_TIMEOUT), "--bodies-in-flight-mb",
             str(BODIES_IN_FLIGHT_MB))
    with served_with_log(settings.memory, log, *flags, token=TOKEN) as server:
        yield server


def resident_mb(pid: int) -> float:
    """The process's resident set (``VmRSS``) in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


@dataclass
class Checks:
    """What the supervisor saw, one entry per health check."""

    statuses: list[int]
    seconds: list[float]
    #: Of those seconds, the time the scheduler kept the server or the poller from a CPU (see the poller).
    starved: list[float]
    resident_mb: list[float]
    at: list[float]

    def served_in(self) -> list[float]:
        """Each check's seconds without the machine's part: what the server took."""
        return [max(0.0, seconds - starved) for seconds, starved in zip(self.seconds, self.starved, strict=True)]


@contextlib.contextmanager
def supervised(served: Served) -> Iterator[Checks]:
    """The health check polled by ``tests/health_poll.py`` in its own process while the block runs; its checks
    fill the yielded :class:`Checks` when the block ends."""
    host, port = served.address
    poll = subprocess.Popen([sys.executable, str(REPO / "tests" / "health_poll.py"), host, str(port), str(served.pid)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    checks = Checks([], [], [], [], [])
    try:
        yield checks
    finally:
        out, _ = poll.communicate(timeout=60)  # closing its stdin stops it
        for line in out.splitlines():
            record = json.loads(line)
            checks.statuses.append(record["status"])
            checks.seconds.append(record["seconds"])
            checks.starved.append(record["starved"])
            checks.resident_mb.append(record["resident_mb"])
            checks.at.append(record["at"])


@dataclass
class Connected:
    """Set once every slow connection is open."""

    expected: int
    count: int = 0
    all: asyncio.Event = field(default_factory=asyncio.Event)

    def one(self) -> None:
        self.count += 1
        if self.count == self.expected:
            self.all.set()


async def silent_or_half_head(address: tuple[str, int], half: bool, connected: Connected) -> float:
    """One slow connection: nothing at all, or a head that never ends (a header line every 0.3 s). Seconds until
    the server closed it."""
    opened = time.monotonic()
    reader, writer = await asyncio.open_connection(*address)
    connected.one()
    if half:
        writer.write(b"GET /api/info HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    try:
        while True:
            try:
                if not await asyncio.wait_for(reader.read(65536), 0.3):
                    break  # closed by the server
            except TimeoutError:
                if half:
                    writer.write(b"X-Slow: 1\r\n")
    except ConnectionError:
        pass
    writer.close()
    return time.monotonic() - opened


@dataclass
class Uploads:
    """What happened to the uploads: the most a careful client was told to send at once, and every final answer
    (client kind, status or 0 when the server hung up without one, body)."""

    sending: int = 0
    most_at_once: int = 0
    answers: list[tuple[str, int, bytes]] = field(default_factory=list)


async def upload(address: tuple[str, int], uploads: Uploads, waits_for_continue: bool) -> None:
    """PUT 15 MB of Turtle (one long comment) to the Graph Store, slowly. A careful client asks ``Expect:
    100-continue`` and sends nothing unless told to; a naive one sends at once and stops when the server hangs up."""
    reader, writer = await asyncio.open_connection(*address)
    head = (f"PUT /store?graph=urn:test:upload HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
            f"Content-Type: text/turtle\r\nContent-Length: {UPLOAD_BYTES}\r\n")
    writer.write((head + ("Expect: 100-continue\r\n" if waits_for_continue else "") + "\r\n").encode())
    kind = "careful" if waits_for_continue else "naive"
    if waits_for_continue:
        status = await _status(reader)
        if status != 100:
            uploads.answers.append((kind, status, await reader.read()))
            writer.close()
            return
        uploads.sending += 1
        uploads.most_at_once = max(uploads.most_at_once, uploads.sending)
    body = memoryview(b"#" + b"x" * (UPLOAD_BYTES - 2) + b"\n")
    try:
        for start in range(0, UPLOAD_BYTES, CHUNK):
            writer.write(body[start:start + CHUNK])
            await writer.drain()
            await asyncio.sleep(PACE_S)  # the client's own pace
        status = await _status(reader)
        uploads.answers.append((kind, status, await reader.read()))
    except ConnectionError:  # refused and closed while the body was on its way: the answer, if it came first
        answer = b""
        with contextlib.suppress(ConnectionError):
            answer = await reader.read()
        status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0
        uploads.answers.append((kind, status, answer))
    finally:
        uploads.sending -= waits_for_continue
        writer.close()


async def _status(reader: asyncio.StreamReader) -> int:
    """The status of the next answer's status line (its headers and a ``100 Continue``'s blank line read too)."""
    line = await reader.readline()
    status = int(line.split(b" ", 2)[1]) if line.startswith(b"HTTP/1.1 ") else 0
    if status == 100:
        await reader.readline()
    return status


@pytest.mark.slow
def test_health_is_answered_and_memory_bounded_under_slow_clients(served: Served) -> None:
    for _ in range(5):  # warm: the routes' code loaded before the baseline is taken
        assert httpx.get(served.url + "/api/health").status_code == 200
    baseline = resident_mb(served.pid)
    uploads = Uploads()

    async def slow_connections() -> tuple[list[float], int]:
        """200 slow connections: every other request is answered 503 while they are open, the health check not."""
        connected = Connected(SLOW_CONNECTIONS)
        slow = [asyncio.create_task(silent_or_half_head(served.address, i % 2 == 1, connected))
                for i in range(SLOW_CONNECTIONS)]
        await connected.all.wait()
        busy = await asyncio.to_thread(httpx.get, served.url + "/api/info", timeout=30)
        return await asyncio.gather(*slow), busy.status_code

    async def slow_uploads() -> None:
        """20 slow uploads of 15 MB, every fourth one naive: two at a time fit the 32 MB budget."""
        await asyncio.gather(*(upload(served.address, uploads, i % 4 != 0) for i in range(UPLOADS)))

    with supervised(served) as checks:
        closed_after, busy_status = asyncio.run(slow_connections())
        uploads_started = time.monotonic()
        asyncio.run(slow_uploads())

    assert busy_status == 503
    assert max(closed_after) < HEAD_TIMEOUT + SLACK_S, sorted(closed_after)[-5:]
    during_slow = [at for at in checks.at if at < uploads_started]
    assert len(during_slow) >= 3 and len(checks.at) > len(during_slow), checks
    assert set(checks.statuses) == {200}, checks.statuses
    assert max(checks.served_in()) < HEALTH_LIMIT_S, sorted(zip(checks.served_in(), checks.seconds, strict=True))[-5:]
    assert max(checks.seconds) < STALL_S, sorted(checks.seconds)[-5:]
    growth = max(checks.resident_mb) - baseline
    assert growth < RSS_GROWTH_LIMIT_MB, f"{growth:.0f} MB"
    taken = [a for a in uploads.answers if a[1] in (200, 201, 204)]
    refused = [a for a in uploads.answers if a not in taken]
    assert 1 <= len(taken) <= BODIES_IN_FLIGHT_MB * MB // UPLOAD_BYTES and uploads.most_at_once <= 2, uploads.answers
    assert len(taken) + len(refused) == UPLOADS
    careful = [a for a in refused if a[0] == "careful"]
    assert careful and all(status == 503 and b"PCM_SERVE_BODIES_IN_FLIGHT_MB" in body for _, status, body in careful)
    assert all(status in (503, 0) for _, status, _ in refused), refused
    print(f"\nhealth checks: {len(checks.seconds)}, slowest {max(checks.served_in()) * 1000:.1f} ms served, "
          f"{max(checks.seconds) * 1000:.1f} ms with waits for a CPU; resident memory "
          f"+{growth:.0f} MB; slow connections closed after {max(closed_after):.2f} s at most; uploads taken "
          f"{len(taken)}, refused {len(refused)}")


@pytest.mark.slow
def test_an_idle_kept_alive_connection_is_closed_at_the_idle_timeout(served: Served) -> None:
    with socket.create_connection(served.address, timeout=30) as sock:
        sock.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        first = sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 200")
        started = time.monotonic()
        with contextlib.suppress(ConnectionResetError):
            while sock.recv(65536):
                pass
        waited = time.monotonic() - started
    assert IDLE_TIMEOUT * 0.8 <= waited < IDLE_TIMEOUT + SLACK_S


def test_a_chunked_body_is_charged_as_it_arrives_and_everything_is_given_back() -> None:
    """A chunked body has no length to reserve: its pieces are charged as they arrive, and the one that passes the
    budget stops it. What a request held is given back once it has been answered."""
    budget = BodyBudget(10)
    assert budget.reserve(6)  # another request's body, by its Content-Length
    pieces = [{"type": "http.request", "body": b"xx", "more_body": True}] * 3

    async def receive() -> Message:
        return pieces.pop(0)

    async def read_all() -> None:
        metered = Metered(receive, budget, 0)
        try:
            await metered()
            await metered()
            assert budget.held == 10
            with pytest.raises(OverBudget):
                await metered()
        finally:
            metered.release()

    asyncio.run(read_all())
    assert budget.held == 6 and not budget.reserve(5) and budget.reserve(4)


def test_the_budget_is_a_setting() -> None:
    settings = Settings.from_env({"PCM_SERVE_BODIES_IN_FLIGHT_MB": "48"})
    assert settings.serve_bodies_in_flight_mb == 48
    assert Settings.from_env({}, serve_bodies_in_flight_mb=8).serve_bodies_in_flight_mb == 8  # a flag wins
    with pytest.raises(UsageError, match="PCM_SERVE_BODIES_IN_FLIGHT_MB"):
        Settings.from_env({"PCM_SERVE_BODIES_IN_FLIGHT_MB": "0"})

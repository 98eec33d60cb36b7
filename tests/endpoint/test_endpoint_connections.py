"""``pcm serve`` under misbehaving clients, as a user runs it (a `pcm serve` process, its stderr read back):
a silent connection or a half-sent head is closed at the head timeout, a stalled body is answered 408, a head over
the cap is refused, connections beyond the limit are answered 503, a client gone mid-body is one log line, deeply
nested JSON is a 400, and a relative graph IRI at /store is resolved against the server's own address."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from pcm.errors import UsageError
from pcm.settings import Settings
from tests.endpoint.test_endpoint_support import AUTH, TOKEN, build_memory
from tests.serve_process import Served, served_with_log

HEAD_TIMEOUT = 2.0
BODY_TIMEOUT = 1.0
MAX_CONNECTIONS = 4
MAX_HEAD = 4096


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """`pcm serve` with small connection limits set by its flags; stderr goes to a file the tests read."""
    root = tmp_path_factory.mktemp("connections")
    settings = build_memory(root / "memory", facts=False)
    log = root / "serve.log"
    flags = ("--head-timeout", str(HEAD_TIMEOUT), "--body-timeout", str(BODY_TIMEOUT), "--max-connections",
             str(MAX_CONNECTIONS), "--max-head-bytes", str(MAX_HEAD))
    with served_with_log(settings.memory, log, *flags, token=TOKEN) as server:
        yield server


def wait_closed(sock: socket.socket) -> tuple[float, bytes]:
    """Seconds until the server closes ``sock`` (read to the end, so the test waits on the socket, not a sleep),
    and what it sent before closing."""
    started = time.monotonic()
    received = b""
    with contextlib.suppress(ConnectionResetError):
        while piece := sock.recv(65536):
            received += piece
    return time.monotonic() - started, received


def test_a_silent_connection_is_closed_at_the_head_timeout(served: Served) -> None:
    with served.connect() as sock:
        waited, received = wait_closed(sock)
    assert received == b"" and HEAD_TIMEOUT * 0.8 <= waited < HEAD_TIMEOUT + 5


def test_a_half_sent_head_is_closed_at_the_head_timeout(served: Served) -> None:
    with served.connect() as sock:
        sock.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        time.sleep(HEAD_TIMEOUT / 2)  # the slow client: half the deadline before its next bytes
        sock.sendall(b"X-Slow: 1\r\n")
        waited, received = wait_closed(sock)
    # more bytes of the same head do not push the deadline back: closed about HEAD_TIMEOUT / 2 after them, where a
    # deadline restarted by them would close it a whole HEAD_TIMEOUT after
    assert received == b"" and waited < HEAD_TIMEOUT * 0.8


def test_a_kept_alive_connection_then_a_half_head_is_closed_too(served: Served) -> None:
    with served.connect() as sock:
        sock.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        first = sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 200")
        sock.sendall(b"GET /api/health HTTP/1.1\r\n")
        waited, _ = wait_closed(sock)
    assert waited < HEAD_TIMEOUT + 5


def test_a_stalled_body_is_answered_408_and_closed(served: Served) -> None:
    with served.connect() as sock:
        sock.sendall(b"POST /api/ask HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 100\r\n\r\n{\"question\":")
        waited, received = wait_closed(sock)
    assert received.startswith(b"HTTP/1.1 408"), received
    assert b"stalled" in received and waited < BODY_TIMEOUT + 5


def test_a_head_over_the_cap_is_refused(served: Served) -> None:
    """A head still incomplete past the cap is answered 400 and closed, before the rest of it is waited for."""
    with served.connect() as sock:
        sock.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"x" * (MAX_HEAD * 2))
        waited, received = wait_closed(sock)
    assert received.startswith(b"HTTP/1.1 400") and waited < HEAD_TIMEOUT
    assert httpx.get(served.url + "/api/health").status_code == 200


def test_connections_beyond_the_limit_are_answered_503_but_the_health_check(served: Served) -> None:
    idle = [served.connect() for _ in range(MAX_CONNECTIONS)]
    try:
        busy = httpx.get(served.url + "/api/info")
        assert busy.status_code == 503
        assert httpx.get(served.url + "/api/health").status_code == 200  # pcm.endpoint.connections.UNLIMITED
    finally:
        for sock in idle:
            sock.close()
    deadline = time.monotonic() + 30
    while httpx.get(served.url + "/api/info").status_code == 503:  # the closed sockets are let go
        assert time.monotonic() < deadline


def test_a_client_gone_mid_body_is_one_log_line(served: Served) -> None:
    before = served.log_text()
    for path in ("/api/ask", "/update"):
        with served.connect() as sock:
            sock.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         f"Authorization: Bearer {TOKEN}\r\nContent-Length: 100000\r\n\r\n".encode() + b"[" * 10)
    deadline = time.monotonic() + 30
    while served.log_text().count("went away") - before.count("went away") < 2:
        assert time.monotonic() < deadline, served.log_text()
        time.sleep(0.05)
    assert httpx.get(served.url + "/api/health").status_code == 200  # the server is fine
    new = served.log_text()[len(before):]
    assert "Traceback" not in new and "ClientDisconnect" not in new, new
    lines = new.strip().splitlines()
    assert len(lines) == 2 and all("went away" in line for line in lines), new


@pytest.mark.parametrize(("path", "headers"), [
    ("/api/ask", {}),
    ("/api/ingest", AUTH),
    ("/api/ingest", {**AUTH, "Content-Type": "application/x-ndjson"}),
])
def test_deeply_nested_json_is_a_400(served: Served, path: str, headers: dict[str, str]) -> None:
    answer = httpx.post(served.url + path, content=b"[" * 100_000,
                        headers={"Content-Type": "application/json", **headers})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert "\n" not in error and "Recursion" not in error


def test_a_relative_graph_at_the_store_is_resolved_against_the_public_address(served: Served) -> None:
    answer = httpx.get(served.url + "/store", params={"graph": "no-such-graph"})
    assert answer.status_code == 404
    assert served.url + "/no-such-graph" in answer.text  # the front's own address, not the engine's port
    put = httpx.put(served.url + "/store", params={"graph": "notes"}, content='<http://ex.org/a> <http://ex.org/b> "1" .',
                    headers={**AUTH, "Content-Type": "application/n-triples"})
    assert put.status_code in (201, 204), put.text
    read = httpx.get(served.url + "/query", params={
        "query": f"ASK {{ GRAPH <{served.url}/notes> {{ ?s ?p ?o }} }}"}, headers={"Accept": "application/json"})
    assert read.json()["boolean"] is True



def test_the_connection_limits_are_settings() -> None:
    env = {"PCM_SERVE_MAX_CONNECTIONS": "8", "PCM_SERVE_IDLE_TIMEOUT": "5", "PCM_SERVE_HEAD_TIMEOUT": "1.5",
           "PCM_SERVE_BODY_TIMEOUT": "2", "PCM_SERVE_MAX_HEAD_BYTES": "8192"}
    settings = Settings.from_env(env)
    assert (settings.serve_max_connections, settings.serve_idle_timeout, settings.serve_head_timeout,
            settings.serve_body_timeout, settings.serve_max_head_bytes) == (8, 5, 1.5, 2.0, 8192)
    assert Settings.from_env(env, serve_head_timeout=3.0).serve_head_timeout == 3.0  # a flag wins
    with pytest.raises(UsageError, match="PCM_SERVE_HEAD_TIMEOUT"):
        Settings.from_env({"PCM_SERVE_HEAD_TIMEOUT": "0"})
    with pytest.raises(UsageError, match="PCM_SERVE_MAX_CONNECTIONS"):
        Settings.from_env({"PCM_SERVE_MAX_CONNECTIONS": "many"})

"""The front's ASGI application without a server: the protocol paths answered outside Starlette's router keep the
Guard's headers, ``Server-Timing`` and the JSON 500 for a bug; the write of an answer's head with its body."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from pcm.endpoint.app import App
from pcm.endpoint.config import ServeConfig
from pcm.endpoint.connections import HeadWithBody
from pcm.endpoint.upstream import Answer
from pcm.endpoint.web import create_app

RESULT = b'{"head":{"vars":[]},"results":{"bindings":[]}}'


class StubUpstream:
    """The engine client, answering every read at once (or failing as a bug would)."""

    def __init__(self, bug: bool = False) -> None:
        self.bug = bug
        self.targets: list[str] = []

    async def fetch(self, method: str, target: str, **_: Any) -> Answer:
        if self.bug:
            raise RuntimeError("a bug in the engine client")
        self.targets.append(target)
        return Answer(200, httpx.Headers({"content-type": "application/sparql-results+json"}), RESULT, engine_ns=1000)

    async def aclose(self) -> None:
        return None


def client(upstream: StubUpstream) -> TestClient:
    memory = SimpleNamespace(naming=SimpleNamespace(layout=SimpleNamespace(kind="graphs")))
    front = App(ServeConfig(), memory, upstream, SimpleNamespace(generation=0), public_url="http://127.0.0.1:7878")  # type: ignore[arg-type]
    return TestClient(create_app(front), base_url="http://127.0.0.1:7878", raise_server_exceptions=False)


def test_a_query_is_answered_with_the_guards_headers_and_its_timing() -> None:
    upstream = StubUpstream()
    with client(upstream) as http:
        answer = http.get("/query/", params={"query": "SELECT * WHERE { ?s ?p ?o }"})
    assert answer.status_code == 200
    assert answer.content == RESULT
    assert answer.headers["content-length"] == str(len(RESULT))
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["server-timing"].startswith("front;dur=")
    assert upstream.targets == ["/query?union-default-graph"]


def test_a_protocol_error_is_text_and_a_refused_host_is_json() -> None:
    with client(StubUpstream()) as http:
        federated = http.get("/query", params={"query": "SELECT * WHERE { SERVICE <http://x/> { ?s ?p ?o } }"})
        foreign = http.get("/query", params={"query": "ASK {}"}, headers={"Host": "evil.example"})
    assert federated.status_code == 400 and federated.text.startswith("SERVICE is refused")
    assert foreign.status_code == 403 and "Host header refused" in foreign.json()["error"]


def test_a_bug_behind_a_protocol_path_is_a_json_500() -> None:
    with client(StubUpstream(bug=True)) as http:
        answer = http.get("/query", params={"query": "ASK {}"})
    assert answer.status_code == 500
    assert answer.json() == {"error": "internal error: RuntimeError"}


class Transport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


HEAD = b"HTTP/1.1 200 OK\r\ndate: now\r\ncontent-length: 2\r\n\r\n"


def test_a_head_with_a_length_goes_out_with_the_body_in_one_write() -> None:
    transport = Transport()
    held = HeadWithBody(transport)  # type: ignore[arg-type]
    held.write(HEAD)
    assert transport.writes == []
    held.write(b"ok")
    assert transport.writes == [HEAD + b"ok"]


@pytest.mark.parametrize("head", [b"HTTP/1.1 100 Continue\r\n\r\n",
                                  b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"])
def test_a_continue_or_a_streamed_head_goes_out_at_once(head: bytes) -> None:
    transport = Transport()
    HeadWithBody(transport).write(head)  # type: ignore[arg-type]
    assert transport.writes == [head]


def test_closing_writes_a_held_head_first() -> None:
    transport = Transport()
    held = HeadWithBody(transport)  # type: ignore[arg-type]
    held.write(HEAD)
    held.close()
    assert transport.writes == [HEAD] and transport.closed and held.is_closing()

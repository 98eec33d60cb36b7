"""``pcm serve``'s JSON API for assistants (ingest, ask, recall), and who owns the memory while it is served:
discovery file, store lock, the ``pcm serve`` command itself."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from pcm.endpoint import SERVE_FILE, discover
from pcm.endpoint.config import ServeConfig
from pcm.endpoint.server import PcmServer
from pcm.errors import MemoryLockedError, UsageError
from pcm.memory import Memory
from pcm.settings import Settings
from tests.endpoint.test_endpoint_support import AUTH, PET_TEXT, TOKEN, ask, build_memory, serving

# ------------------------------------------------------------------------------------------------ JSON API


def test_ingest_needs_the_token_and_then_stores_the_utterance(url: str) -> None:
    body = {"text": "I planted three tomato seedlings on the balcony.", "session": "garden", "at": "2025-05-02T09:30:00"}
    assert httpx.post(url + "/api/ingest", json=body).status_code == 401
    response = httpx.post(url + "/api/ingest", json=body, headers=AUTH)
    assert response.status_code == 200, response.text
    report = response.json()
    assert report["stored"] == 1 and len(report["posts"]) == 1
    again = httpx.post(url + "/api/ingest", json={**body, "text": "They get afternoon sun."}, headers=AUTH).json()
    assert again["stored"] == 1
    conversation = httpx.get(url + "/api/conversation", params={"id": "garden"}).json()
    assert [p["text"] for p in conversation["posts"]] == [body["text"], "They get afternoon sun."]
    assert [p["position"] for p in conversation["posts"]] == [0, 1]


def test_ingest_takes_a_conversation_file_body(url: str) -> None:
    conversation = {
        "conversation_id": "api-file",
        "messages": [
            {"id": "a1", "role": "user", "content": "My sister Ines lives in Lisbon.", "timestamp": "2025-06-01T10:00:00Z"},
            {"id": "a2", "role": "assistant", "content": "Lisbon is lovely in June.", "timestamp": "2025-06-01T10:00:05Z"},
        ],
    }
    response = httpx.post(url + "/api/ingest", json=conversation, headers=AUTH)
    assert response.status_code == 200 and response.json()["stored"] == 2
    again = httpx.post(url + "/api/ingest", json={"conversations": [conversation], "format": "json"}, headers=AUTH)
    assert again.json()["stored"] == 0 and again.json()["duplicates"] == 2
    bad = httpx.post(url + "/api/ingest", json={"messages": "nope"}, headers=AUTH)
    assert bad.status_code == 400 and "error" in bad.json() and "/tmp" not in bad.json()["error"]


def test_api_errors_are_json(url: str) -> None:
    assert httpx.post(url + "/api/ask", content=b"not json").json()["error"].startswith("the body is not JSON")
    assert httpx.post(url + "/api/ask", json={}).status_code == 400
    assert httpx.get(url + "/api/recall").status_code == 400
    assert httpx.get(url + "/api/ask").status_code == 405
    assert httpx.get(url + "/api/recall", params={"q": "x", "k": "many"}).status_code == 400
    assert httpx.get(url + "/api/nothing-here").status_code == 404


def test_ask_and_recall_without_the_side_index_say_why(url: str) -> None:
    response = httpx.get(url + "/api/recall", params={"q": "dog"})
    assert response.status_code == 400 and "side index" in response.json()["error"]


# ------------------------------------------------------------------------------------------------ ownership


def test_discovery_while_serving_and_after(tmp_path: Path) -> None:
    settings = build_memory(tmp_path / "disc", facts=False)
    with serving(settings) as server:
        info = discover(settings.memory)
        assert info is not None and info.url == server.url and info.token_required
        assert info.query_url == server.url + "/query"
        health = httpx.get(server.url + "/api/health").json()
        assert health["pid"] == info.pid
        with pytest.raises(MemoryLockedError, match="already served"):
            PcmServer(settings, server.config).start()
        with pytest.raises(MemoryLockedError):
            Memory.open(settings)
    assert not (settings.memory / SERVE_FILE).exists()
    assert discover(settings.memory) is None
    with Memory.open(settings) as memory:  # the store is free again
        assert memory.post_count() == 10


def test_serve_reports_a_store_held_by_another_process_as_locked(tmp_path: Path) -> None:
    settings = build_memory(tmp_path / "held", facts=False)
    with Memory.open(settings), pytest.raises(MemoryLockedError, match="locked"):
        PcmServer(settings, ServeConfig(bind="127.0.0.1:0")).start()
    assert not (settings.memory / SERVE_FILE).exists()


def test_serve_reports_a_taken_port(tmp_path: Path, server: PcmServer) -> None:
    settings = build_memory(tmp_path / "port", facts=False)
    taken = server.url.rsplit(":", 1)[1]
    with pytest.raises(UsageError, match="cannot listen"):
        PcmServer(settings, ServeConfig(bind=f"127.0.0.1:{taken}")).start()
    assert not (settings.memory / SERVE_FILE).exists()
    with Memory.open(settings) as memory:  # the engine started for it was stopped again
        assert memory.post_count() == 10


def test_serve_refuses_a_missing_memory(tmp_path: Path) -> None:
    from pcm.errors import MemoryNotFoundError

    with pytest.raises(MemoryNotFoundError):
        PcmServer(Settings(memory=tmp_path / "none", index_enabled=False), ServeConfig(bind="127.0.0.1:0")).start()


def test_serve_command_runs_announces_and_stops_cleanly(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys

    settings = build_memory(tmp_path / "cli", facts=False)
    env = {**os.environ, "PCM_INDEX": "off", "PCM_TOKEN": TOKEN}
    command = [sys.executable, "-c", "from pcm.cli_serve import serve; serve()",
               "--memory", str(settings.memory), "--bind", "127.0.0.1:0", "--json"]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        assert proc.stdout is not None
        while not lines or lines[-1].rstrip() != "}":
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else "no output"
            lines.append(line)
        announced = json.loads("".join(lines))
        assert announced["writable"] is True
        assert httpx.get(announced["url"] + "/api/health").json()["status"] == "ok"
        info = discover(settings.memory)
        assert info is not None and info.url == announced["url"] and info.pid == proc.pid
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not (settings.memory / SERVE_FILE).exists()
    with Memory.open(settings) as memory:  # the engine child is gone and released the store
        assert memory.post_count() == 10


def test_pet_fixture_is_served(url: str) -> None:
    assert ask(url, f"ASK {{ ?p <http://rdfs.org/sioc/ns#content> ?t FILTER(STRSTARTS(?t, {json.dumps(PET_TEXT[:20])})) }}")


# ------------------------------------------------------------------------------------------------ the CLI's client


def test_serve_client_ingests_files_and_text_through_the_server(tmp_path: Path, url: str) -> None:
    from pcm.conversations import sample_paths
    from pcm.endpoint.client import ServeClient
    from pcm.errors import InputError
    from pcm.serve_file import ServerInfo

    info = ServerInfo(url=url, pid=0, token_required=True, memory="", started="")
    lines = tmp_path / "notes.jsonl"
    lines.write_text(
        '{"conversation_id": "client-notes", "id": "n1", "role": "user", "content": "The bike shop is on Alder St.", "timestamp": "2025-07-01T08:00:00Z"}\n',
        encoding="utf-8",
    )
    with ServeClient(info, token=TOKEN) as client:
        assert client.ingest_file(lines)["added"] == 1
        sample = next(p for p in sample_paths() if p.name.startswith("07-"))
        first = client.ingest_file(sample, "json")
        assert first["added"] > 0 and client.ingest_file(sample)["skipped"] == first["added"]
        assert client.ingest_text("Note to self: buy oat milk.", session="client-text")["added"] == 1
        with pytest.raises(InputError):
            client.ask("")
    assert ask(url, 'ASK { ?p <http://rdfs.org/sioc/ns#content> "The bike shop is on Alder St." }')
    with ServeClient(info) as anonymous, pytest.raises(MemoryLockedError, match="PCM_TOKEN"):
        anonymous.ingest_text("sneaky")


def test_another_asgi_app_mounted_beside_the_front(tmp_path: Path) -> None:
    """What the MCP endpoint uses: an ASGI app under a path, behind the same Host check, with its lifespan run."""
    import contextlib

    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    events: list[str] = []

    async def hello(request: Request) -> JSONResponse:
        return JSONResponse({"path": request.url.path, "running": events == ["started"]})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):  # type: ignore[no-untyped-def]
        events.append("started")
        yield
        events.append("stopped")

    extra = Starlette(routes=[Route("/", hello, methods=["GET", "POST"])])
    server = PcmServer(build_memory(tmp_path / "m", facts=False), ServeConfig(bind="127.0.0.1:0", token=TOKEN))
    server.mount("/mcp", extra, lifespan=lifespan)
    with server:
        answer = httpx.get(server.url + "/mcp/")
        assert answer.status_code == 200 and answer.json()["running"] is True
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert httpx.get(server.url + "/mcp/", headers={"Host": "evil.example"}).status_code == 403
        assert httpx.get(server.url + "/api/health").status_code == 200
        with pytest.raises(UsageError):
            server.mount("/late", extra)
    assert events == ["started", "stopped"]

"""The MCP face, driven by the SDK's own clients: `pcm mcp` over stdio (a real subprocess) and the streamable HTTP
app mounted in a Starlette front under uvicorn on loopback (a real server and socket)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
import uvicorn
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

from pcm.mcp_server import build_server, streamable_http_app
from pcm.memory import Memory
from pcm.settings import Settings

REPO = Path(__file__).resolve().parents[1]
TOKEN = "owner-secret"
TOOLS = {"remember", "recall", "ask", "why", "history", "forget", "sparql", "stats", "export", "list_messages",
         "get_message", "list_facts", "get_fact", "delete_fact"}
BISCUIT = "I adopted a beagle called Biscuit"


def _result(result: Any) -> Any:
    assert not result.is_error, result.content
    return result.structured_content


async def _remember_recall_ask(client: Client) -> str:
    """The acceptance round: remember, then recall and ask find the text with its citation. Returns the post."""
    tools = await client.list_tools()
    assert {t.name for t in tools.tools} == TOOLS
    remember = next(t for t in tools.tools if t.name == "remember")
    assert {"text", "time", "speaker", "session", "key"} <= set(remember.input_schema["properties"])
    assert remember.output_schema is not None
    hints = {t.name: t.annotations for t in tools.tools}
    assert hints["recall"].read_only_hint is True and hints["sparql"].read_only_hint is True  # type: ignore[union-attr]
    assert hints["forget"].destructive_hint is True and hints["remember"].read_only_hint is False  # type: ignore[union-attr]
    stored = _result(await client.call_tool("remember", {"text": BISCUIT, "time": "2025-03-02T10:00", "key": "m-1"}))
    assert stored["stored"] is True
    retry = _result(await client.call_tool("remember", {"text": BISCUIT, "time": "2025-03-02T10:00", "key": "m-1"}))
    assert (retry["stored"], retry["post"]) == (False, stored["post"])
    hits = _result(await client.call_tool("recall", {"query": "dog beagle", "k": 3}))["result"]
    assert hits[0]["post"] == stored["post"] and hits[0]["text"] == BISCUIT
    answer = _result(await client.call_tool("ask", {"question": "What is my dog called?"}))
    assert "Biscuit" in answer["answer"]
    assert [c["post"] for c in answer["citations"]] == [stored["post"]]
    assert answer["citations"][0]["source_id"] == "m-1"
    return str(stored["post"])


# -- stdio: `pcm mcp` as an assistant starts it ----------------------------------------------------------------------


@pytest.mark.slow
def test_pcm_mcp_over_stdio(tmp_path: Path) -> None:
    path = tmp_path / "memory"
    Memory.init(Settings(memory=path, index_enabled=False), owner="Dana").close()
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "PCM_LLM": "none"}
    for name in ("PCM_MEMORY", "PCM_STORE_URL", "PCM_TOKEN"):
        env.pop(name, None)
    params = StdioServerParameters(command=sys.executable, args=["-m", "pcm.cli", "--memory", str(path), "mcp"],
                                   env=env, cwd=str(tmp_path))

    async def session() -> None:
        async with Client(params, read_timeout_seconds=300) as client:
            post = await _remember_recall_ask(client)
            resources = {str(r.uri) for r in (await client.list_resources()).resources}
            assert resources == {"pcm://ontology/catalogue", "pcm://ontology/competency-questions"}
            catalogue = (await client.read_resource("pcm://ontology/catalogue")).contents[0]
            assert "## people" in catalogue.text  # type: ignore[union-attr]
            questions = json.loads((await client.read_resource("pcm://ontology/competency-questions")).contents[0].text)  # type: ignore[union-attr]
            assert questions and {"name", "question", "sparql"} <= set(questions[0])
            rows = _result(await client.call_tool("sparql", {"query": "SELECT ?t WHERE { ?p sioc:content ?t }"}))
            assert rows["rows"] == [{"t": BISCUIT}]
            refused = await client.call_tool("sparql", {"query": "DELETE WHERE { ?s ?p ?o }"})
            assert refused.is_error and "refused" in refused.content[0].text  # type: ignore[union-attr]
            assert _result(await client.call_tool("stats", {}))["posts"] == 1
            # the owner started this server: forget needs no token here, and the files are rewritten
            forgotten = _result(await client.call_tool("forget", {"post": "m-1"}))
            assert (forgotten["posts"], forgotten["purged"]) == ([post], True)
            assert _result(await client.call_tool("stats", {}))["posts"] == 0

    asyncio.run(session())


# -- streamable HTTP, mounted in a Starlette front under uvicorn ------------------------------------------------------


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Memory]]:
    """A Starlette front with the MCP app at /mcp, under uvicorn on a loopback socket bound before it starts."""
    memory = Memory.init(Settings(memory=tmp_path / "memory", index_enabled=True), owner="Dana")
    mcp_app = streamable_http_app(memory, TOKEN, lock=threading.RLock())

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True})

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with mcp_app.router.lifespan_context(mcp_app):
            yield

    front = Starlette(routes=[Route("/api/health", health), Mount("/", app=mcp_app)], lifespan=lifespan)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)  # connections wait in the backlog until uvicorn accepts: no start-up polling needed
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(front, lifespan="on", log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}", memory
    finally:
        server.should_exit = True
        thread.join(timeout=60)
        sock.close()
        memory.close()


def _client(url: str, token: str | None) -> Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(300.0))
    return Client(streamable_http_client(url + "/mcp", http_client=http), read_timeout_seconds=300)


def test_mcp_over_streamable_http(served: tuple[str, Memory]) -> None:
    url, memory = served

    async def session() -> None:
        async with _client(url, TOKEN) as owner:
            post = await _remember_recall_ask(owner)
        async with _client(url, None) as stranger:
            tools = {t.name for t in (await stranger.list_tools()).tools}
            assert tools == TOOLS
            refused = await stranger.call_tool("forget", {"post": "m-1"})
            assert refused.is_error and "token" in refused.content[0].text  # type: ignore[union-attr]
            refused = await stranger.call_tool("remember", {"text": "I sold the car"})
            assert refused.is_error and "token" in refused.content[0].text  # type: ignore[union-attr]
            # reading needs no token
            hits = _result(await stranger.call_tool("recall", {"query": "beagle", "k": 1}))["result"]
            assert hits[0]["post"] == post
        async with _client(url, "wrong") as guesser:
            refused = await guesser.call_tool("forget", {"post": "m-1"})
            assert refused.is_error and "token" in refused.content[0].text  # type: ignore[union-attr]
        assert memory.post_count() == 1  # nothing was forgotten or added without the token
        async with _client(url, TOKEN) as owner:
            forgotten = _result(await owner.call_tool("forget", {"post": "m-1", "purge": False}))
            assert (forgotten["posts"], forgotten["purged"]) == ([post], False)
        assert memory.post_count() == 0

    asyncio.run(session())


def test_http_without_a_token_takes_no_writes(tmp_path: Path) -> None:
    """A server started without a token is read-only over HTTP; the same server in-process (no headers) is not."""
    from pcm.mcp_server import _write_refusal

    assert _write_refusal(None, "", "forget") is None
    assert "takes no writes" in (_write_refusal({}, "", "forget") or "")
    assert "token" in (_write_refusal({"authorization": "Bearer x"}, "y", "forget") or "")
    assert _write_refusal({"authorization": "Bearer y"}, "y", "forget") is None
    with Memory.init(Settings(memory=tmp_path / "m", index_enabled=False), owner="Dana") as memory:
        server = build_server(memory)

        async def inproc() -> None:
            async with Client(server) as client:
                stored = _result(await client.call_tool("remember", {"text": "hello", "key": "h"}))
                bad = await client.call_tool("remember", {"text": "other", "key": "h"})
                assert bad.is_error and "different message" in bad.content[0].text  # type: ignore[union-attr]
                late = await client.call_tool("remember", {"text": "x", "time": "next tuesday"})
                assert late.is_error and "unrecognised timestamp 'next tuesday'" in late.content[0].text  # type: ignore[union-attr]
                missing = await client.call_tool("forget", {"post": "no-such-message"})
                assert missing.is_error and "no post 'no-such-message'" in missing.content[0].text  # type: ignore[union-attr]
                assert _result(await client.call_tool("forget", {"post": "h"}))["posts"] == [stored["post"]]

        asyncio.run(inproc())


def test_export_gives_the_dump_and_refuses_one_over_its_cap_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``export`` is ``Memory.export`` as text; a dump over ``MCP_EXPORT_BYTES`` is one line naming the faces that
    give it whole."""
    with Memory.init(Settings(memory=tmp_path / "m", index_enabled=False), owner="Dana") as memory:
        memory.remember("hello", key="h")
        whole = memory.export("trig").decode("utf-8")

        async def export(fmt: str) -> Any:
            async with Client(build_server(memory)) as client:
                return await client.call_tool("export", {"format": fmt})

        assert _result(asyncio.run(export("trig")))["result"] == whole
        monkeypatch.setattr("pcm.mcp_server.MCP_EXPORT_BYTES", len(whole) - 1)
        refused = asyncio.run(export("trig"))
        line = refused.content[0].text  # type: ignore[union-attr]
        assert refused.is_error and "over the" in line and "pcm export" in line and "\n" not in line
        bad = asyncio.run(export("csv"))
        assert bad.is_error


def test_readme_mcp_configuration_starts_this_command() -> None:
    """The README's Claude Desktop entry is valid JSON and names `pcm ... mcp`, a command that exists."""
    import re

    from click.testing import CliRunner

    from pcm.cli import main

    section = (REPO / "README.md").read_text(encoding="utf-8").split("## For assistants (MCP)", 1)[1]
    match = re.search(r"```json\n(.*?)```", section, re.DOTALL)
    assert match
    entry = json.loads(match.group(1))["mcpServers"]["pcm"]
    assert entry["command"] == "pcm" and entry["args"][-1] == "mcp"
    result = CliRunner().invoke(main, [*entry["args"], "--help"])
    assert result.exit_code == 0 and "Model Context Protocol" in result.output


def test_pcm_serve_answers_mcp_at_slash_mcp(tmp_path: Path) -> None:
    """`pcm serve` itself serves MCP at /mcp on its open memory: remember then recall and ask find the text with its
    citation; forget and remember without the server's token are refused."""
    from pcm.endpoint.config import ServeConfig
    from pcm.endpoint.server import PcmServer

    settings = Settings(memory=tmp_path / "memory", index_enabled=True)
    Memory.init(settings, owner="Dana").close()
    with PcmServer(settings, ServeConfig(bind="127.0.0.1:0", token=TOKEN)) as server:

        async def session() -> None:
            async with _client(server.url, TOKEN) as owner:
                post = await _remember_recall_ask(owner)
            async with _client(server.url, None) as stranger:
                refused = await stranger.call_tool("forget", {"post": "m-1"})
                assert refused.is_error and "token" in refused.content[0].text  # type: ignore[union-attr]
                hits = _result(await stranger.call_tool("recall", {"query": "beagle", "k": 1}))["result"]
                assert hits[0]["post"] == post
            # the JSON API beside it sees the same memory
            assert httpx.get(server.url + "/api/stats").status_code == 200

        asyncio.run(session())
        assert server.memory is not None and server.memory.post_count() == 1


def test_mcp_and_the_http_api_give_a_stored_message_one_shape() -> None:
    """A recall hit and a cited message are the same models on both faces, so their schemas cannot drift apart."""
    from pcm import mcp_server
    from pcm.endpoint import models

    assert mcp_server.Message is models.Message and mcp_server.RecallHit is models.RecallHit
    assert mcp_server.Answer is models.Answer and models.Answer.model_fields["citations"].annotation == list[models.Message]
    assert list(models.RecallHit.model_fields) == ["post", "source_id", "session", "time", "speaker", "role", "text",
                                                   "score"]

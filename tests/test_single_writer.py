"""While `pcm serve` holds a memory it is the memory's only writer: `pcm forget` goes through it (the server's store,
side index and summaries stay one, and it keeps answering), and import and extract go through it too, with
their progress streamed back; purge, which rewrites the files the server holds, is refused in one line naming the
server, before anything is opened."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pcm.memory import Memory
from pcm.settings import Settings
from tests.serve_process import SRC, Served, served_with_log

TOKEN = "owner-secret"


def pcm(memory: Path, *args: str, token: str = TOKEN) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PCM_")}
    env.update({"PYTHONPATH": str(SRC), "PCM_LLM": "none", "PCM_INDEX": "off", "PCM_TOKEN": token})
    return subprocess.run([sys.executable, "-m", "pcm.cli", "--memory", str(memory), *args], capture_output=True,
                          text=True, env=env, timeout=600)


@pytest.fixture(scope="module")
def served(template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Served]]:
    root = tmp_path_factory.mktemp("single-writer")
    path = root / "memory"
    shutil.copytree(template, path)
    with Memory.open(Settings(memory=path, index_enabled=False)) as memory:
        for n in range(3):
            memory.remember(f"note number {n}", at=f"2025-03-0{n + 1}T10:00", session="notes", key=f"n{n}")
    with served_with_log(path, root / "serve.log", token=TOKEN) as server:
        yield path, server


@pytest.mark.slow
def test_cli_forget_goes_through_the_server_which_keeps_answering(served: tuple[Path, Served]) -> None:
    path, server = served
    before = httpx.get(server.url + "/api/messages", timeout=120).json()
    refused = pcm(path, "forget", "--post", "n0", token="")
    assert refused.returncode == 4 and "token" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    done = pcm(path, "forget", "--post", "n0", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["forgotten"] == [before["messages"][0]["post"]] and report["purged"] is False
    assert "not purged" in done.stderr  # the server holds the files: `pcm purge` once it is stopped
    after = httpx.get(server.url + "/api/messages", timeout=120)
    assert after.status_code == 200 and after.json()["total"] == before["total"] - 1
    assert [m["source_id"] for m in after.json()["messages"]] == ["n1", "n2"]
    assert httpx.get(server.url + "/api/health", timeout=120).status_code == 200
    missing = pcm(path, "forget", "--post", "n0")
    assert missing.returncode == 3 and missing.stderr.strip() == "pcm: error: no post 'n0' in this memory"


@pytest.mark.slow
def test_purge_is_refused_naming_the_server(served: tuple[Path, Served]) -> None:
    path, server = served
    refused = pcm(path, "purge")
    assert refused.returncode == 4, refused.stderr
    line = refused.stderr.strip()
    assert len(line.splitlines()) == 1 and line.startswith(f"pcm: error: pcm serve at {server.url} holds this memory")
    assert httpx.get(server.url + "/api/messages", timeout=120).status_code == 200


@pytest.mark.slow
def test_cli_import_goes_through_the_server(served: tuple[Path, Served], tmp_path: Path) -> None:
    """`pcm import` beside a running server was refused; the server imports, and the CLI follows its progress."""
    path, server = served
    facts = tmp_path / "facts.ttl"
    facts.write_text(_pet(path, "pebble", "Pebble"))
    refused = pcm(path, "import", str(facts), token="")
    assert refused.returncode == 4 and "token" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    done = pcm(path, "import", str(facts), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["mode"], report["quads"], report["file"]) == ("facts", 3, "facts.ttl")
    query = 'SELECT ?s WHERE { ?s <http://www.w3.org/2000/01/rdf-schema#label> "Pebble" }'
    rows = httpx.post(server.url + "/query", data={"query": query}, headers={"Accept": "application/sparql-results+json"},
                      timeout=120).json()["results"]["bindings"]
    assert [r["s"]["value"].rsplit("/", 1)[-1] for r in rows] == ["pebble"]


def _pet(memory: Path, slug: str, name: str) -> str:
    """Turtle for one pet of this memory (its individuals live in its own namespace)."""
    from pcm.manifest import Manifest

    ns = Manifest.load(memory).namespace
    return (f"@prefix pcm: <https://w3id.org/pcm/ontology#> .\n@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n"
            f'<{ns}{slug}> a pcm:Pet ; rdfs:label "{name}" .\n<{ns}owner> pcm:hasPet <{ns}{slug}> .\n')


@pytest.mark.slow
def test_import_over_http_streams_progress_then_the_result(served: tuple[Path, Served]) -> None:
    path, server = served
    body = {"data": _pet(path, "kiwi", "Kiwi"), "name": "kiwi.ttl"}
    with httpx.stream("POST", server.url + "/api/import", json=body, timeout=120,
                      headers={"Authorization": f"Bearer {TOKEN}"}) as answer:
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/x-ndjson")
        events = [json.loads(line) for line in answer.iter_lines() if line.strip()]
    assert [e["event"] for e in events][-1] == "result" and events[-1]["result"]["quads"] == 3, events
    assert any(e["event"] == "progress" and e["done"] >= 1 for e in events), events


@pytest.mark.slow
def test_cli_extract_goes_through_the_server_and_keeps_its_error_line(served: tuple[Path, Served]) -> None:
    """`pcm extract` beside a running server goes through it: this server has no model, so its refusal comes back
    as the one line and exit code `pcm extract` gives without a server."""
    path, _ = served
    done = pcm(path, "extract", "--pending")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("pcm: error: no LLM configured"), done.stderr


@pytest.mark.slow
def test_pcm_mcp_beside_the_server_answers_through_it(served: tuple[Path, Served]) -> None:
    import asyncio

    from mcp import Client, StdioServerParameters

    path, server = served

    async def session(token: str) -> tuple[Any, Any, Any, Any]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PCM_")}
        env.update({"PYTHONPATH": str(SRC), "PCM_LLM": "none", "PCM_INDEX": "off", "PCM_TOKEN": token})
        params = StdioServerParameters(command=sys.executable, args=["-m", "pcm.cli", "--memory", str(path), "mcp"],
                                       env=env, cwd=str(path.parent))
        async with Client(params, read_timeout_seconds=300) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            listed = await client.call_tool("list_messages", {"session": "notes"})
            stored = await client.call_tool("remember", {"text": "a note through the server", "session": "mcp",
                                                         "key": f"mcp-{bool(token)}"})
            resources = {str(r.uri) for r in (await client.list_resources()).resources}
            return tools, listed, stored, resources

    tools, listed, refused, resources = asyncio.run(session(""))  # the owner's lock is the server's: no crash
    assert {"remember", "list_messages", "delete_fact"} <= tools and "pcm://ontology/catalogue" in resources
    assert listed.structured_content == httpx.get(server.url + "/api/messages", params={"session": "notes"},
                                                  timeout=120).json()
    assert refused.is_error and "token" in refused.content[0].text
    _, _, stored, _ = asyncio.run(session(TOKEN))
    assert not stored.is_error and stored.structured_content["stored"] is True
    assert httpx.get(server.url + "/api/messages", params={"session": "mcp"}, timeout=120).json()["total"] == 1

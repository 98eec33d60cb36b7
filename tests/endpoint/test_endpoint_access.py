"""Reads beyond loopback (pcm.endpoint.access): a server listening on a non-loopback address answers every route,
reads included, only to a holder of the read token or the write token; ``--public-read`` opens reads on purpose;
without either, ``pcm serve`` refuses to start. Loopback stays token-free for reads."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from pcm.endpoint.server import PcmServer
from pcm.memory import Memory
from pcm.serve_file import SERVE_FILE, discover, read_info
from pcm.serve_link import find
from pcm.settings import Settings
from tests.endpoint.test_endpoint_support import AUTH, TOKEN, build_memory, serving

READ = "read-token-7c1e"
REPO = Path(__file__).resolve().parents[2]
MCP_INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

#: Every read the server answers: SPARQL, the Graph Store, the JSON API, MCP, the explorer, and a 404.
READS: list[tuple[str, str, dict[str, object]]] = [
    ("GET", "/query", {"params": {"query": "ASK {}"}}),
    ("POST", "/query", {"content": "ASK {}", "headers": {"Content-Type": "application/sparql-query"}}),
    ("GET", "/sparql", {"params": {"query": "ASK {}"}}),
    ("GET", "/query", {}),  # the service description
    ("GET", "/store", {"headers": {"Accept": "application/n-quads"}}),
    ("HEAD", "/store", {}),
    ("GET", "/api/health", {}),
    ("GET", "/api/info", {}),
    ("GET", "/api/stats", {}),
    ("GET", "/api/timings", {}),
    ("GET", "/api/conversations", {}),
    ("GET", "/api/conversation", {"params": {"id": "dana-05-pets"}}),
    ("GET", "/api/search", {"params": {"q": "dog"}}),
    ("GET", "/api/recall", {"params": {"q": "dog"}}),  # answered without the side index too, but not 200
    ("POST", "/api/ask", {"json": {"question": "What is my dog called?"}}),
    ("GET", "/api/reindex", {}),
    ("GET", "/openapi.json", {}),
    ("GET", "/", {}),
    ("GET", "/static/app.js", {}),
    ("POST", "/mcp", {"json": MCP_INIT, "headers": MCP_HEADERS}),
    ("GET", "/no-such-page", {}),
]


def basic(token: str) -> dict[str, str]:
    """What a browser sends once asked: HTTP Basic, any user name, the token as the password."""
    return {"Authorization": "Basic " + base64.b64encode(f"dana:{token}".encode()).decode()}


def call(url: str, method: str, path: str, options: dict[str, object], auth: dict[str, str]) -> httpx.Response:
    headers = {**dict(options.get("headers") or {}), **auth}  # type: ignore[call-overload]
    rest = {k: v for k, v in options.items() if k != "headers"}
    return httpx.request(method, url + path, headers=headers, timeout=60, **rest)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def memory_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return build_memory(tmp_path_factory.mktemp("access") / "memory")


@pytest.fixture(scope="module")
def wide(memory_settings: Settings) -> Iterator[PcmServer]:
    """A server listening on every address (not loopback), with a read token and a write token."""
    with serving(memory_settings, bind="0.0.0.0:0", read_token=READ) as server:
        yield server


def local_url(server: PcmServer) -> str:
    """The server's address as a client on this machine reaches it (it listens on 0.0.0.0)."""
    return server.url.replace("0.0.0.0", "127.0.0.1")


@pytest.mark.parametrize(("method", "path", "options"), READS, ids=[f"{m} {p}" for m, p, _ in READS])
def test_every_read_beyond_loopback_needs_a_token(wide: PcmServer, method: str, path: str,
                                                   options: dict[str, object]) -> None:
    url = local_url(wide)
    refused = call(url, method, path, options, {})
    assert refused.status_code == 401, refused.text
    assert "Basic" in refused.headers["WWW-Authenticate"]  # a browser asks for the token by itself
    if method != "HEAD":
        assert "read token" in refused.json()["error"]
    assert call(url, method, path, options, {"Authorization": "Bearer wrong"}).status_code == 401
    assert call(url, method, path, options, basic("wrong")).status_code == 401
    for auth in ({"Authorization": f"Bearer {READ}"}, AUTH, basic(READ)):
        answer = call(url, method, path, options, auth)
        assert answer.status_code != 401, (auth, answer.text)
        if path not in ("/no-such-page", "/api/recall"):
            assert answer.status_code == 200, answer.text


def test_the_store_dump_is_only_for_token_holders(wide: PcmServer) -> None:
    url = local_url(wide)
    assert "Biscuit" not in httpx.get(url + "/store").text
    dump = httpx.get(url + "/store", headers={"Authorization": f"Bearer {READ}", "Accept": "application/n-quads"})
    assert dump.status_code == 200 and "Biscuit" in dump.text


def test_the_read_token_does_not_write(wide: PcmServer) -> None:
    url = local_url(wide)
    body = {"text": "I adopted a kitten called Pepper"}
    refused = httpx.post(url + "/api/ingest", json=body, headers={"Authorization": f"Bearer {READ}"})
    assert refused.status_code == 401 and "writes" in refused.json()["error"]
    update = "INSERT DATA { <http://example.org/a> <http://example.org/b> 1 }"
    for auth in ({"Authorization": f"Bearer {READ}"}, basic(TOKEN)):  # Basic, what browsers replay, never writes
        assert httpx.post(url + "/update", content=update, headers={
            **auth, "Content-Type": "application/sparql-update"}).status_code == 401
    assert httpx.post(url + "/api/ingest", json=body, headers=AUTH).status_code == 200


def test_the_owners_commands_read_through_a_wide_server(wide: PcmServer, memory_settings: Settings) -> None:
    """serve.json (owner-only, in the owner-only memory directory) holds the read token, so the owner's commands
    find the server and read through it without being given the token."""
    path = memory_settings.memory
    info = read_info(path / SERVE_FILE)
    assert info is not None and info.read_token == READ and "read_token" not in info.as_json()
    assert oct((path / SERVE_FILE).stat().st_mode & 0o777) == "0o600"
    assert discover(path) is not None
    link = find(path)
    assert link is not None and link.token == READ
    with Memory.open(memory_settings.with_(token=""), read_only=True) as memory:
        assert memory.held_by_server and memory.post_count() > 0


def test_public_read_opens_reads_on_purpose(memory_settings: Settings, tmp_path: Path) -> None:
    settings = build_memory(tmp_path / "memory")
    with serving(settings, bind="0.0.0.0:0", public_read=True) as server:
        url = local_url(server)
        assert httpx.get(url + "/store").status_code == 200
        assert httpx.post(url + "/api/ask", json={"question": "dog?"}).status_code == 200
        assert httpx.post(url + "/api/ingest", json={"text": "hello there"}).status_code == 401  # writes: token
        assert read_info(settings.memory / SERVE_FILE).read_token == ""  # type: ignore[union-attr]


def test_loopback_reads_need_no_token(tmp_path: Path) -> None:
    settings = build_memory(tmp_path / "memory")
    with serving(settings, read_token=READ) as server:  # a read token on loopback changes nothing
        assert httpx.get(server.url + "/store").status_code == 200
        assert httpx.post(server.url + "/api/ask", json={"question": "dog?"}).status_code == 200


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "PCM_LLM": "none", "PCM_INDEX": "off"}
    for name in ("PCM_MEMORY", "PCM_STORE_URL", "PCM_TOKEN", "PCM_READ_TOKEN", "PCM_PUBLIC_READ"):
        env.pop(name, None)
    return env


@pytest.mark.parametrize("extra", [{}, {"PCM_TOKEN": TOKEN}], ids=["no token", "write token only"])
def test_serve_refuses_a_wide_address_without_a_read_token(tmp_path: Path, extra: dict[str, str]) -> None:
    Memory.init(Settings(memory=tmp_path / "memory", index_enabled=False), owner="Dana").close()
    out = subprocess.run([sys.executable, "-m", "pcm.cli", "--memory", str(tmp_path / "memory"), "serve", "--bind",
                          "0.0.0.0:0"], capture_output=True, text=True, env={**_env(), **extra}, timeout=120)
    assert out.returncode == 2, out.stderr
    [line] = out.stderr.strip().splitlines()
    assert "--read-token" in line and "--public-read" in line and "loopback" in line
    assert not (tmp_path / "memory" / SERVE_FILE).exists()


def test_the_read_settings_come_from_the_environment() -> None:
    settings = Settings.from_env({"PCM_READ_TOKEN": READ, "PCM_PUBLIC_READ": "1"})
    assert settings.read_token == READ and settings.public_read
    assert not Settings.from_env({}).public_read

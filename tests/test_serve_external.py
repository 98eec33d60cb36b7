"""`pcm serve` in front of an external store, on both engines: a real `oxigraph serve` and a real Virtuoso, each on
loopback. The JSON API, the SPARQL reads at /query and MCP at /mcp (why, forget) run against the server's store,
and purge says what it can and cannot guarantee there. Also the backends' stated capabilities."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyoxigraph as ox
import pytest

from pcm.backend import PurgeScope, QueryIsolation
from pcm.backend_local import LocalBackend
from pcm.backend_remote import RemoteBackend
from pcm.endpoint.config import ServeConfig
from pcm.endpoint.server import PcmServer
from pcm.memory import Memory
from pcm.settings import Settings
from tests.oxigraph_server import start_oxigraph
from tests.virtuoso_server import VIRTUOSO_PASSWORD, VIRTUOSO_USER, start_virtuoso

pytestmark = pytest.mark.slow  # a store server and a `pcm serve` in front of it, per engine
REPO = Path(__file__).resolve().parents[1]
TOKEN = "front-secret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
BISCUIT = "I adopted a beagle called Biscuit"
RIVER = "We walk along the river every Sunday"


@pytest.fixture(scope="module", params=["oxigraph", pytest.param("virtuoso", marks=pytest.mark.engine)])
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    location = tmp_path_factory.mktemp(request.param)
    if request.param == "oxigraph":
        with start_oxigraph(location / "store") as url:
            yield Settings(store_url=url)
    else:
        with start_virtuoso(location) as url:
            yield Settings(store_url=url, store_user=VIRTUOSO_USER, store_password=VIRTUOSO_PASSWORD)


def _empty(settings: Settings) -> None:
    with RemoteBackend(settings.store_url, user=settings.store_user, password=settings.store_password) as backend:
        for graph in backend.named_graphs():
            backend.update(f"DROP SILENT GRAPH <{graph}>")


@pytest.fixture
def remote(store: Settings, tmp_path: Path) -> Iterator[Settings]:
    _empty(store)
    yield store.with_(memory=tmp_path / "mem")
    _empty(store)


def _select(http: httpx.Client, url: str, query: str) -> list[dict[str, Any]]:
    response = http.post(url + "/query", content=query, headers={
        "Content-Type": "application/sparql-query", "Accept": "application/sparql-results+json"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/sparql-results+json")
    return list(response.json()["results"]["bindings"])


async def _mcp(url: str, tool: str, arguments: dict[str, Any]) -> Any:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers=AUTH, timeout=httpx2.Timeout(300.0))
    async with Client(streamable_http_client(url + "/mcp", http_client=http), read_timeout_seconds=300) as client:
        result = await client.call_tool(tool, arguments)
        assert not result.is_error, result.content
        return result.structured_content


def test_the_json_api_sparql_reads_and_mcp_over_an_external_store(remote: Settings, tmp_path: Path) -> None:
    settings = remote.with_(index_enabled=True)
    with Memory.init(settings, owner="Dana") as memory:
        ns = memory.manifest.namespace
        facts = tmp_path / "facts.ttl"
        facts.write_text(
            "@prefix pcm: <https://w3id.org/pcm/ontology#> .\n@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n"
            f"<{ns}biscuit> a pcm:Pet ; rdfs:label \"Biscuit\" .\n<{ns}owner> pcm:hasPet <{ns}biscuit> .\n"
        )
        memory.import_rdf(facts)
    with PcmServer(settings, ServeConfig(bind="127.0.0.1:0", token=TOKEN)) as server, httpx.Client(timeout=300) as http:
        url = server.url
        info = http.get(url + "/api/info").json()
        assert info["namespace"] == ns and info["endpoints"]["update"] == ""
        for text, key, at in ((BISCUIT, "m1", "2025-03-02T10:00:00"), (RIVER, "m2", "2025-03-02T10:02:00")):
            body = {"text": text, "session": "s1", "at": at, "id": key}
            assert http.post(url + "/api/ingest", json=body).status_code == 401  # the front's token still guards
            stored = http.post(url + "/api/ingest", json=body, headers=AUTH)
            assert stored.status_code == 200, stored.text
            assert stored.json()["stored"] == 1
        assert http.get(url + "/api/stats").json()["posts"] == 2
        conversation = http.get(url + "/api/conversation", params={"id": "s1"}).json()
        assert [p["text"] for p in conversation["posts"]] == [BISCUIT, RIVER]
        hits = http.get(url + "/api/recall", params={"q": "dog beagle", "k": 2}).json()
        assert hits[0]["text"] == BISCUIT
        answer = http.post(url + "/api/ask", json={"question": "What is my dog called?"})
        assert answer.status_code == 200, answer.text
        assert "Biscuit" in answer.json()["answer"]
        entity = http.get(url + "/api/entity", params={"iri": ns + "biscuit"})
        assert entity.status_code == 200 and "Biscuit" in entity.text

        # SPARQL reads through the memory: results JSON for SELECT and ASK, N-Triples for CONSTRUCT
        rows = _select(http, url, "SELECT ?t WHERE { ?p a <http://rdfs.org/sioc/ns#Post> ; <http://rdfs.org/sioc/ns#content> ?t } ORDER BY ?t")
        assert [r["t"]["value"] for r in rows] == sorted([BISCUIT, RIVER])
        ask = http.post(url + "/query", data={"query": f"ASK {{ <{ns}owner> ?p <{ns}biscuit> }}"})
        assert ask.json()["boolean"] is True
        graph = http.post(url + "/query", data={"query": f"CONSTRUCT {{ <{ns}biscuit> ?p ?o }} WHERE {{ <{ns}biscuit> ?p ?o }}"})
        assert graph.headers["content-type"].startswith("application/n-triples")
        assert len(list(ox.parse(graph.content, format=ox.RdfFormat.N_TRIPLES))) >= 2
        refused = http.post(url + "/query", data={"query": "DELETE WHERE { ?s ?p ?o }"})
        assert refused.status_code == 400
        update = http.post(url + "/update", data={"update": "INSERT DATA { <urn:x> <urn:y> <urn:z> }"}, headers=AUTH)
        assert update.status_code == 501 and remote.store_url in update.text  # writes go to the store itself

        # why and forget through MCP at /mcp (the JSON API has neither)
        sources = asyncio.run(_mcp(url, "why", {"iri": ns + "biscuit"}))["result"]
        assert [s["file"] for s in sources] == ["facts.ttl"]
        forgotten = asyncio.run(_mcp(url, "forget", {"post": "m1"}))
        assert len(forgotten["posts"]) == 1 and forgotten["purged"] is True
        assert "not guaranteed" in forgotten["note"] and "engine" in forgotten["note"]
        assert http.get(url + "/api/stats").json()["posts"] == 1
        assert all(h["text"] != BISCUIT for h in http.get(url + "/api/recall", params={"q": "dog beagle"}).json())
        assert _select(http, url, f'SELECT ?p WHERE {{ ?p <http://rdfs.org/sioc/ns#content> "{BISCUIT}" }}') == []


def test_purge_on_an_external_store_says_what_it_cannot_guarantee(remote: Settings, tmp_path: Path) -> None:
    settings = remote.with_(index_enabled=False)
    Memory.init(settings, owner="Dana").close()
    env = {"PCM_STORE_URL": settings.store_url, "PCM_STORE_USER": settings.store_user,
           "PCM_STORE_PASSWORD": settings.store_password, "PCM_INDEX": "0", "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run([sys.executable, "-m", "pcm.cli", "--memory", str(settings.memory), "purge", "--json"],
                          capture_output=True, text=True, env={**_base_env(), **env}, timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["purged"] is True and report["scope"] == "graphs" and report["quads_kept"] is None
    assert any("memory's graphs" in line for line in report["guaranteed"])
    assert any("engine" in line for line in report["not_guaranteed"])
    human = subprocess.run([sys.executable, "-m", "pcm.cli", "--memory", str(settings.memory), "purge"],
                           capture_output=True, text=True, env={**_base_env(), **env}, timeout=300)
    assert human.returncode == 0 and "not guaranteed: the server's own files" in human.stdout


def _cli_writes_go_through_the_server(settings: Settings, env: dict[str, str | None]) -> None:
    """With `pcm serve` holding the memory, `pcm ingest --text` from the CLI is found by the server's recall, and
    `pcm forget` leaves the server answering 2xx with the post gone from recall, ask and the listing."""
    from click.testing import CliRunner

    from pcm.cli import main

    with Memory.init(settings, owner="Dana") as memory:
        memory.remember(RIVER, at="2025-03-02T10:02:00", session="s1", key="m2")
    runner = CliRunner()
    env = {"PCM_TOKEN": TOKEN, "PCM_LLM": "none", "PCM_MEMORY": None, **env}
    with PcmServer(settings, ServeConfig(bind="127.0.0.1:0", token=TOKEN)) as server, httpx.Client(timeout=300) as http:
        url = server.url
        said = runner.invoke(main, ["--memory", str(settings.memory), "ingest", "--text", BISCUIT, "--session", "s1",
                                    "--at", "2025-03-02T10:00:00", "--json"], env=env)
        assert said.exit_code == 0, said.output
        post = json.loads(said.stdout)["posts"][0]
        hits = http.get(url + "/api/recall", params={"q": "dog beagle", "k": 2})
        assert hits.status_code == 200 and hits.json()[0]["text"] == BISCUIT, hits.text
        forgot = runner.invoke(main, ["--memory", str(settings.memory), "forget", "--post", post, "--json"], env=env)
        assert forgot.exit_code == 0, forgot.output
        assert json.loads(forgot.stdout)["forgotten"] == [post]
        hits = http.get(url + "/api/recall", params={"q": "dog beagle", "k": 2})
        assert hits.status_code == 200 and all(h["text"] != BISCUIT for h in hits.json()), hits.text
        answer = http.post(url + "/api/ask", json={"question": "What is my dog called?"})
        assert answer.status_code == 200 and all(c["post"] != post for c in answer.json()["citations"]), answer.text
        listed = http.get(url + "/api/messages")
        assert listed.status_code == 200 and [m["text"] for m in listed.json()["messages"]] == [RIVER]


def test_cli_writes_beside_a_server_over_an_external_store_go_through_it(remote: Settings) -> None:
    _cli_writes_go_through_the_server(remote.with_(index_enabled=True), {
        "PCM_STORE_URL": remote.store_url, "PCM_STORE_USER": remote.store_user or None,
        "PCM_STORE_PASSWORD": remote.store_password or None})


def test_cli_writes_beside_a_server_over_an_embedded_store_go_through_it(tmp_path: Path) -> None:
    _cli_writes_go_through_the_server(Settings(memory=tmp_path / "mem", index_enabled=True), {"PCM_STORE_URL": None})


def _base_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("PCM_")}


# ------------------------------------------------------------------------------------------------ capabilities


def test_each_backend_states_its_capabilities(tmp_path: Path) -> None:
    local = LocalBackend(tmp_path / "store")
    caps = local.capabilities
    assert (caps.files, caps.isolation, caps.purge, caps.transactions) == (
        tmp_path / "store", QueryIsolation.WORKER, PurgeScope.FILES, True)
    before = local.fingerprint()
    local.extend([ox.Quad(ox.NamedNode("urn:s"), ox.NamedNode("urn:p"), ox.Literal("o"), ox.NamedNode("urn:g"))])
    local.flush()
    assert before and local.fingerprint() != before
    local.checkpoint(tmp_path / "copy")
    local.close()
    assert len(list(LocalBackend(tmp_path / "copy").quads())) == 1
    memory_only = LocalBackend(None).capabilities
    assert (memory_only.files, memory_only.isolation) == (None, QueryIsolation.IN_PROCESS)
    for engine, transactions in (("oxigraph", True), ("virtuoso", False), ("generic", False)):
        remote = RemoteBackend("http://127.0.0.1:9/query", engine=engine, update_url="http://127.0.0.1:9/update")
        caps = remote.capabilities  # nothing listens there: stating capabilities sends no request
        assert (caps.files, caps.isolation, caps.purge) == (None, QueryIsolation.SERVER, PurgeScope.GRAPHS)
        assert caps.transactions is transactions and remote.fingerprint() == ""
        remote.close()


def test_no_module_probes_the_concrete_backend() -> None:
    """Callers choose by capability: no type-name test, no isinstance on a backend class, no getattr for a path."""
    probes = ('__name__ == "LocalBackend"', "isinstance(memory.backend", "isinstance(backend, LocalBackend",
              'getattr(memory.backend, "path"', 'getattr(backend, "path"', "backend.path")
    found = [f"{path.relative_to(REPO)}: {probe}" for path in (REPO / "src" / "pcm").rglob("*.py")
             for probe in probes if probe in path.read_text(encoding="utf-8")]
    assert found == []

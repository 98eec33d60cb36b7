"""The explorer's JSON pages and static files, over a served memory with facts traced to utterances."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import httpx
import pytest

from pcm.endpoint.app import STATIC
from pcm.endpoint.server import PcmServer
from pcm.namespaces import PREFIXES
from tests.endpoint.test_endpoint_support import BREED_POST, PET_POST, VET_POST, build_memory, serving

PCM = "https://w3id.org/pcm/ontology#"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PcmServer]:
    settings = build_memory(tmp_path_factory.mktemp("explorer") / "memory")
    with serving(settings) as running:
        yield running


@pytest.fixture(scope="module")
def ns(url: str) -> str:
    return str(httpx.get(url + "/api/info").json()["namespace"])


def get(url: str, path: str, **params: str) -> httpx.Response:
    return httpx.get(url + path, params=params, timeout=30)


def test_entity_page_traces_each_fact_to_its_utterance(url: str, ns: str) -> None:
    page = get(url, "/api/entity", iri=ns + "biscuit").json()
    assert page["label"] == "Biscuit" and page["curie"] == "m:biscuit"
    assert [t["curie"] for t in page["types"]] == ["pcm:Pet"]
    facts = {(f["direction"], f["predicate"]["curie"], f["value"]["value"]): f for f in page["facts"]}
    breed = facts[("out", "pcm:petBreed", "beagle")]
    (source,) = breed["sources"]
    assert source["source_id"] == BREED_POST and "four-year-old beagle" in source["text"]
    assert source["session"] == "dana-05-pets" and source["thread"].startswith(ns + "session/")
    owner = facts[("in", "pcm:hasPet", ns + "owner")]
    assert owner["value"]["label"] == "Dana Whitfield"
    assert owner["sources"][0]["source_id"] == PET_POST
    assert {r["value"] for r in page["related"]} == {ns + "owner", PCM + "Pet"}
    assert set(page["mentioned_in"]) == {source["post"], owner["sources"][0]["post"]}  # entity-level provenance
    assert not any(f["predicate"]["curie"] == "prov:wasDerivedFrom" for f in page["facts"])


def test_the_python_api_gives_the_entity_page_the_http_api_gives(server: PcmServer, url: str, ns: str) -> None:
    """``Memory.entity_page`` is the page ``/api/entity`` answers with, field by field, for a CURIE as for an IRI."""
    assert server.memory is not None
    page = server.memory.entity_page("m:biscuit").model_dump(mode="json", exclude_unset=True)
    assert page == get(url, "/api/entity", iri=ns + "biscuit").json() == get(url, "/api/entity", iri="m:biscuit").json()


def test_why_is_the_same_sources_over_http_mcp_the_cli_and_python(server: PcmServer, url: str, ns: str) -> None:
    """``/api/why`` answers what ``Memory.why``, ``pcm why --json`` and MCP's ``why`` give, field by field, and a
    malformed IRI is the same one line on each."""
    import asyncio
    import json

    from click.testing import CliRunner
    from mcp import Client

    from pcm.cli import main as pcm
    from pcm.mcp_server import build_server

    assert server.memory is not None and server.app is not None
    python = [s.as_json() for s in server.memory.why("m:biscuit")]
    assert python and get(url, "/api/why", iri="m:biscuit").json() == python
    assert get(url, "/api/why", iri=ns + "biscuit").json() == python
    cli = CliRunner().invoke(pcm, ["--memory", str(server.memory.settings.memory), "why", "m:biscuit", "--json"],
                             env={"PCM_INDEX": "off", "PCM_LLM": "none", "PCM_TOKEN": None})
    assert cli.exit_code == 0 and json.loads(cli.stdout) == python, cli.output

    async def mcp(iri: str) -> object:
        async with Client(build_server(server.memory, lock=server.app.memory_lock)) as client:
            result = await client.call_tool("why", {"iri": iri})
            return result.content[0].text if result.is_error else (result.structured_content or {})["result"]

    assert asyncio.run(mcp("m:biscuit")) == python
    bad = get(url, "/api/why", iri="a b")
    assert bad.status_code == 400 and str(asyncio.run(mcp("a b"))).endswith(bad.json()["error"])


def test_a_fact_said_in_one_post_is_not_credited_to_another(url: str, ns: str) -> None:
    page = get(url, "/api/entity", iri=ns + "dr-alvarez").json()
    assert page["label"] == "Dr. Alvarez"
    sources = {s["source_id"] for f in page["facts"] for s in f["sources"]}
    assert sources == {VET_POST}


def test_unknown_and_malformed_entities(url: str, ns: str) -> None:
    empty = get(url, "/api/entity", iri=ns + "nobody")
    assert empty.status_code == 200 and empty.json()["facts"] == [] and empty.json()["label"] == "m:nobody"
    for bad in ("not an iri", ns + "x> } ; DROP ALL ; {", ""):
        response = get(url, "/api/entity", iri=bad)
        assert response.status_code == 400 and "error" in response.json()


def test_conversation_page_lists_turns_with_the_facts_each_produced(url: str, ns: str) -> None:
    by_id = get(url, "/api/conversation", id="dana-05-pets").json()
    by_iri = get(url, "/api/conversation", iri=by_id["iri"]).json()
    assert by_id == by_iri
    assert by_id["title"] == "Biscuit ate a sock" and len(by_id["posts"]) == 10
    assert [p["position"] for p in by_id["posts"]] == list(range(10))
    first, second = by_id["posts"][0], by_id["posts"][1]
    assert first["source_id"] == PET_POST and first["role"] == "user"
    produced = {(f["s"]["value"], f["p"]["curie"], f["o"]["value"]) for f in first["facts"]}
    assert (ns + "biscuit", "pcm:petSpecies", "dog") in produced and len(produced) == 4
    assert second["facts"] == []
    assert get(url, "/api/conversation", id="no-such-session").status_code == 400


def test_conversation_list(url: str) -> None:
    listing = get(url, "/api/conversations").json()
    assert [(c["id"], c["title"], c["posts"]) for c in listing] == [("dana-05-pets", "Biscuit ate a sock", 10)]


def test_search_without_the_index_falls_back_to_text(url: str, ns: str) -> None:
    result = get(url, "/api/search", q="BEAGLE").json()
    assert result["mode"] == "text"
    assert {h["source_id"] for h in result["hits"]} == {"d05-m03", "d05-m09", "d05-m10"}
    entities = get(url, "/api/search", q="bisc").json()["entities"]
    assert [e["iri"] for e in entities] == [ns + "biscuit"]
    weird = get(url, "/api/search", q='"} } DROP ALL { "')
    assert weird.status_code == 200 and weird.json()["hits"] == []


def test_static_files_are_served_with_a_strict_policy(url: str) -> None:
    page = get(url, "/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY" and page.headers["x-content-type-options"] == "nosniff"
    assert "/static/app.js" in page.text and "http" not in page.text.split("<body>")[0].replace("http-equiv", "")
    script = get(url, "/static/app.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert "innerHTML" not in script.text  # memory text is only ever set as text
    assert get(url, "/static/app.css").headers["content-type"].startswith("text/css")
    for sneaky in ("/static/../app.py", "/static/%2e%2e/app.py", "/static/nothing.js", "/app.py"):
        assert get(url, sneaky).status_code == 404, sneaky


def test_no_cdn_anywhere_in_the_explorer(url: str) -> None:
    """Everything the explorer loads comes from the server itself."""
    for path in ("/", "/static/app.js", "/static/app.css"):
        text = get(url, path).text
        for marker in ("cdn", "googleapis", "unpkg", "jsdelivr", "https://"):
            assert marker not in text.lower(), (path, marker)


def test_the_sparql_editor_is_served_from_the_package(url: str) -> None:
    """YASQE is vendored in the package (scripts/vendor_yasqe.sh): served by pcm itself, as recorded in VERSION."""
    vendor = STATIC / "vendor" / "yasqe"
    recorded = dict(
        reversed(line.split()) for line in (vendor / "VERSION").read_text().splitlines() if line.startswith("  ")
    )
    assert set(recorded) == {"yasqe.min.js", "yasqe.min.css"} and (vendor / "LICENSE").is_file()
    page = get(url, "/").text
    for name, digest in recorded.items():
        assert f'"/static/vendor/yasqe/{name}"' in page
        served = get(url, "/static/vendor/yasqe/" + name)
        assert served.status_code == 200 and hashlib.sha256(served.content).hexdigest() == digest
    assert get(url, "/static/vendor/yasqe/yasqe.min.js").headers["content-type"].startswith("text/javascript")
    assert get(url, "/api/info").json()["prefixes"] == PREFIXES  # what the editor offers to complete

"""Writes that go straight to the engine (SPARQL Update, Graph Store Protocol) keep the side index in step: a post
inserted that way is found by ``/api/recall``, and after ``DROP ALL`` recall finds nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from pcm.endpoint.server import PcmServer
from pcm.memory import Memory
from tests.endpoint.test_endpoint_support import AUTH, build_memory, serving
from tests.retrieval.traversal.test_traversal import WordEmbedder

CONVERSATION = "urn:pcm:graph:conversation"
PREFIXES = (
    "PREFIX sioc: <http://rdfs.org/sioc/ns#> PREFIX dcterms: <http://purl.org/dc/terms/> "
    "PREFIX pcm: <https://w3id.org/pcm/ontology#> "
)


def _post(n: int, text: str) -> str:
    """Turtle for one post of a thread ``hedgehogs``, shaped as ingest writes the fields the index reads."""
    return (
        f'<urn:test:post-{n}> a <http://rdfs.org/sioc/ns#Post> ; <http://rdfs.org/sioc/ns#content> "{text}" ; '
        f'<http://rdfs.org/sioc/ns#has_container> <urn:test:thread> ; <https://w3id.org/pcm/ontology#role> "user" ; '
        f"<https://w3id.org/pcm/ontology#position> {n} .\n"
        '<urn:test:thread> <http://purl.org/dc/terms/identifier> "hedgehogs" .\n'
    )


@pytest.fixture()
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[PcmServer]:
    monkeypatch.setattr("pcm.index.get_embedder", lambda *args, **kwargs: WordEmbedder())
    for name in ("PCM_INDEX", "PCM_STORE_URL", "PCM_TOKEN", "PCM_MEMORY"):
        monkeypatch.delenv(name, raising=False)
    settings = build_memory(tmp_path / "memory", facts=False).with_(index_enabled=True)
    with Memory.open(settings) as memory:
        memory.reindex()  # indexed with the test's embedder
    with serving(settings) as running:
        yield running


def _recall(url: str, text: str) -> list[str]:
    response = httpx.get(url + "/api/recall", params={"q": text, "k": 20}, timeout=60)
    assert response.status_code == 200, response.text
    return [hit["text"] for hit in response.json()]


def test_update_and_graph_store_writes_reach_recall_and_drop_all_empties_it(server: PcmServer) -> None:
    url = server.url
    assert any("Biscuit" in t for t in _recall(url, "Biscuit dog"))
    assert not any("hedgehog" in t for t in _recall(url, "hedgehog Quill"))

    insert = f"INSERT DATA {{ GRAPH <{CONVERSATION}> {{ {_post(0, 'I adopted a hedgehog called Quill')} }} }}"
    update = httpx.post(url + "/update", content=insert, headers={**AUTH, "Content-Type": "application/sparql-update"})
    assert update.status_code == 204, update.text
    assert "I adopted a hedgehog called Quill" in _recall(url, "hedgehog Quill")

    gsp = httpx.post(url + "/store", params={"graph": CONVERSATION}, content=_post(1, "Quill eats mealworms"),
                     headers={**AUTH, "Content-Type": "text/turtle"})
    assert gsp.status_code in (200, 201, 204), gsp.text
    assert "Quill eats mealworms" in _recall(url, "mealworms")

    forget = httpx.post(url + "/update", content=f"{PREFIXES} DELETE WHERE {{ GRAPH <{CONVERSATION}> "
                        "{ <urn:test:post-1> ?p ?o } }", headers={**AUTH, "Content-Type": "application/sparql-update"})
    assert forget.status_code == 204, forget.text
    assert "Quill eats mealworms" not in _recall(url, "mealworms")

    drop = httpx.post(url + "/update", content="DROP ALL", headers={**AUTH, "Content-Type": "application/sparql-update"})
    assert drop.status_code == 204, drop.text
    assert _recall(url, "Biscuit dog") == [] and _recall(url, "hedgehog Quill") == []

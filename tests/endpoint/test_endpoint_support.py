"""Helpers shared by the endpoint and explorer tests (this module has no tests of its own).

``build_memory`` makes a real memory on disk: the pets sample conversation ingested, plus extraction graphs
written the way extraction writes them (one graph per utterance, provenance in the provenance graph), so the
explorer has facts to trace back to utterances without an LLM.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pyoxigraph as ox

from pcm.conversations import parse_file, sample_paths
from pcm.endpoint.config import ServeConfig
from pcm.endpoint.server import PcmServer
from pcm.memory import Memory
from pcm.namespaces import PCM, RDF, RDFS, SCHEMA
from pcm.provenance import Activity, activity_quads, entity_derivation_quads
from pcm.settings import Settings

TOKEN = "test-token-3f9a"
#: The utterances the hand-written extraction graphs come from (source message ids of 05-pets.json).
PET_POST = "d05-m01"
BREED_POST = "d05-m03"
VET_POST = "d05-m05"
PET_TEXT = "My dog Biscuit ate one of Owen's socks last weekend."
AUTH = {"Authorization": f"Bearer {TOKEN}"}
POSTS = "SELECT (COUNT(?p) AS ?n) WHERE { ?p a <http://rdfs.org/sioc/ns#Post> }"
EX = "http://example.org/"


def build_memory(path: Path, *, samples: tuple[str, ...] = ("05-pets",), facts: bool = True) -> Settings:
    """A memory at ``path`` with the given sample conversations and (optionally) a few extracted facts."""
    settings = Settings(memory=path, index_enabled=False)
    with Memory.init(settings, owner="Dana Whitfield") as memory:
        chosen = [p for p in sample_paths() if any(p.name.startswith(s) for s in samples)]
        memory.ingest([c for p in chosen for c in parse_file(p)])
        if facts:
            add_pet_facts(memory)
    return settings


def add_pet_facts(memory: Memory) -> None:
    """Three extraction graphs: Biscuit is Dana's dog (m01), a beagle (m03); Dr. Alvarez is their vet (m05)."""
    ns = memory.manifest.namespace
    biscuit, vet, owner = ox.NamedNode(ns + "biscuit"), ox.NamedNode(ns + "dr-alvarez"), ox.NamedNode(ns + "owner")
    a, label = ox.NamedNode(RDF + "type"), ox.NamedNode(RDFS + "label")
    per_post = {
        PET_POST: [
            (owner, ox.NamedNode(PCM + "hasPet"), biscuit),
            (biscuit, a, ox.NamedNode(PCM + "Pet")),
            (biscuit, label, ox.Literal("Biscuit")),
            (biscuit, ox.NamedNode(PCM + "petSpecies"), ox.Literal("dog")),
        ],
        BREED_POST: [(biscuit, ox.NamedNode(PCM + "petBreed"), ox.Literal("beagle"))],
        VET_POST: [
            (vet, a, ox.NamedNode(SCHEMA + "Person")),
            (vet, label, ox.Literal("Dr. Alvarez")),
            (owner, ox.NamedNode(SCHEMA + "knows"), vet),
        ],
    }
    for source_id, triples in per_post.items():
        (post,) = memory.store.find_post(source_id)
        graph = memory.naming.extraction_graph(post)
        g = ox.NamedNode(graph)
        quads = [ox.Quad(s, p, o, g) for s, p, o in triples]
        subjects = {t[0].value for t in triples if t[0].value.startswith(ns) and not t[0].value.endswith("owner")}
        quads += entity_derivation_quads(subjects, post, graph)
        activity = Activity("extraction", datetime(2025, 3, 19, tzinfo=UTC), model="scripted")
        quads += activity_quads(memory.naming, activity, graph, post)
        memory.store.write(quads)


@contextmanager
def serving(settings: Settings, **config: object) -> Iterator[PcmServer]:
    """A running server on a free loopback port (token required for writes unless ``token=""``)."""
    options: dict[str, object] = {"bind": "127.0.0.1:0", "token": TOKEN, **config}
    with PcmServer(settings, ServeConfig(**options)) as server:  # type: ignore[arg-type]
        yield server


def ask(url: str, text: str) -> bool:
    """Run an ASK through the server's query endpoint (plain HTTP GET)."""
    response = httpx.get(url + "/query", params={"query": text}, headers={"Accept": "application/sparql-results+json"})
    assert response.status_code == 200, response.text
    return bool(response.json()["boolean"])

"""The same memory operations over the remote backend: a real `oxigraph serve` on loopback."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from oxigraph_server import start_oxigraph
from pcm.conversations import Conversation, Utterance
from pcm.memory import Memory
from pcm.settings import Settings


@pytest.fixture
def remote_memory(tmp_path: Path):  # type: ignore[no-untyped-def]
    with start_oxigraph(tmp_path / "server-store") as url:
        settings = Settings(memory=tmp_path / "mem", store_url=f"{url}/query", index_enabled=False)
        memory = Memory.init(settings, owner="Dana")
        yield memory
        memory.close()


def test_ingest_why_forget_round_trip_over_http(remote_memory: Memory, tmp_path: Path) -> None:
    conv = Conversation("s1", [
        Utterance("s1", 0, "user", "I adopted a beagle called Biscuit", timestamp=datetime(2025, 3, 2, 10), source_id="m1"),
        Utterance("s1", 1, "assistant", "Congratulations!", timestamp=datetime(2025, 3, 2, 10, 1), source_id="m2"),
    ])
    assert remote_memory.ingest([conv]).added == 2
    assert remote_memory.ingest([conv]).added == 0  # idempotent over HTTP too
    stats = remote_memory.stats()
    assert (stats.posts, stats.sessions) == (2, 1)
    post = remote_memory.store.find_post("m1")[0]
    [source] = remote_memory.why(post)
    assert source.content == "I adopted a beagle called Biscuit" and source.session == "s1"
    ttl = tmp_path / "facts.ttl"
    ns = remote_memory.manifest.namespace
    ttl.write_text(
        f"@prefix pcm: <https://w3id.org/pcm/ontology#> .\n@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n"
        f"<{ns}biscuit> a pcm:Pet ; rdfs:label \"Biscuit\" .\n<{ns}owner> pcm:hasPet <{ns}biscuit> .\n"
    )
    assert remote_memory.import_rdf(ttl).quads == 3
    assert [s.file for s in remote_memory.why(f"{ns}biscuit")] == ["facts.ttl"]
    assert remote_memory.forget(post="m1") == [post]
    assert remote_memory.stats().posts == 1

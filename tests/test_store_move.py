"""`pcm store move`: a memory moves between its embedded store, `oxigraph serve` and Virtuoso with every post, fact,
provenance record and history entry, its export the same sorted N-Quads byte for byte at each step, the source
emptied and the side index reconciled with the new store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from pcm.backend_remote import RemoteBackend
from pcm.conversations import Conversation, Utterance
from pcm.errors import UsageError
from pcm.extraction import extract_posts, fact_history
from pcm.llm import ScriptedClient
from pcm.manifest import Manifest
from pcm.memory import Memory
from pcm.settings import Settings
from tests.oxigraph_server import start_oxigraph
from tests.snippets import PORTLAND, SEATTLE
from tests.virtuoso_server import VIRTUOSO_PASSWORD, VIRTUOSO_USER, start_virtuoso

T0 = datetime.fromisoformat("2025-09-01T19:30:00-07:00")
FACTS = """@prefix pcm: <https://w3id.org/pcm/ontology#> . @prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
<{ns}biscuit> a pcm:Pet ; rdfs:label "Biscuit" .
<{ns}owner> pcm:hasPet <{ns}biscuit> .
"""


def fill(memory: Memory, tmp_path: Path) -> None:
    """Posts, their extractions (the second supersedes the first: history), a summary, and an imported file."""
    texts = ["I live in Portland and work at Harbor Analytics.",
             "We moved from Portland to Seattle; I start at Cascade Health next Monday."]
    posts = []
    for i, text in enumerate(texts):
        u = Utterance(f"s{i}", 0, "user", text, timestamp=T0 + timedelta(days=7 * i), source_id=f"m{i}")
        posts += memory.ingest([Conversation(f"s{i}", [u])]).posts
    for post, reply in zip(posts, (PORTLAND, SEATTLE), strict=True):
        extract_posts(memory.context, [post], client=ScriptedClient([reply]), concurrency=1)
    facts = tmp_path / "facts.ttl"
    facts.write_text(FACTS.format(ns=memory.manifest.namespace), encoding="utf-8")
    memory.import_rdf(facts)


def sorted_export(settings: Settings) -> bytes:
    with Memory.open(settings, read_only=True) as memory:
        lines = memory.export("nquads").splitlines(keepends=True)
    return b"".join(sorted(lines))


def remote_graphs(url: str) -> list[str]:
    with RemoteBackend(url, user=VIRTUOSO_USER, password=VIRTUOSO_PASSWORD) as backend:
        return backend.named_graphs()


def check_memory(settings: Settings) -> None:
    """The moved memory answers from its new store: posts, history, recall through the reconciled index."""
    with Memory.open(settings) as memory:
        assert memory.stats().posts == 2
        owner = memory.manifest.namespace + "owner"
        assert any(not v.current for v in fact_history(memory.context, owner).versions)
        hits = memory.recall("where do I work now", k=2)
        assert hits and {h.text for h in hits} <= {
            "I live in Portland and work at Harbor Analytics.",
            "We moved from Portland to Seattle; I start at Cascade Health next Monday.",
        }


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[str, str]]:
    with start_oxigraph(tmp_path / "oxigraph") as oxigraph, start_virtuoso(tmp_path / "virtuoso") as virtuoso:
        yield oxigraph, virtuoso


@pytest.mark.engine
def test_embedded_to_oxigraph_to_virtuoso_to_embedded_keeps_the_export_byte_for_byte(
    servers: tuple[str, str], tmp_path: Path
) -> None:
    oxigraph, virtuoso = servers
    # the store credentials go to whichever server asks for them (Oxigraph's never does)
    settings = Settings(memory=tmp_path / "mem", store_user=VIRTUOSO_USER, store_password=VIRTUOSO_PASSWORD)
    with Memory.init(settings, owner="Dana") as memory:
        fill(memory, tmp_path)
    before = sorted_export(settings)
    assert b"urn:pcm:graph:history" in before and b"urn:pcm:graph:import:" in before
    for target, engine in ((oxigraph, "oxigraph"), (virtuoso, "virtuoso"), ("embedded", "embedded")):
        report = Memory.move_store(settings, target)
        assert (report.target, report.engine) == (target, engine)
        assert report.quads == before.count(b"\n") and not report.source_kept
        manifest = Manifest.load(settings.memory)
        assert (manifest.store_url, manifest.store_engine) == ("" if target == "embedded" else target, engine)
        assert sorted_export(settings) == before, f"the export changed on the move to {engine}"
        check_memory(settings)
        # the source keeps nothing: the servers left are empty, the embedded store is gone while on a server
        assert (settings.memory / "oxigraph").exists() == (target == "embedded")
        if engine != "oxigraph":
            assert remote_graphs(oxigraph) == []
        if engine != "virtuoso":
            assert remote_graphs(virtuoso) == []


def test_a_memory_made_on_a_server_moves_into_its_embedded_store(tmp_path: Path) -> None:
    with start_oxigraph(tmp_path / "oxigraph") as url:
        made = Settings(memory=tmp_path / "mem", store_url=url, index_enabled=False)
        with Memory.init(made, owner="Dana") as memory:
            memory.ingest([Conversation("s", [Utterance("s", 0, "user", "I adopted a beagle", timestamp=T0)])])
        settings = made.with_(store_url="")
        before = sorted_export(settings)
        assert b"urn:pcm:memory:" in before  # its graphs carry its id: kept as they are
        with pytest.raises(UsageError, match="already lives on"):
            Memory.move_store(settings, url + "/query")
        Memory.move_store(settings, "embedded", keep_source=True)
        assert sorted_export(settings) == before
        assert remote_graphs(url) != []  # --keep-source
        with pytest.raises(UsageError, match="is embedded"):
            Memory.open(made)  # PCM_STORE_URL now contradicts memory.toml
        with pytest.raises(UsageError, match="already in its embedded store"):
            Memory.move_store(settings, "embedded")
        # back onto the server that still holds the old copy: refused, naming the graphs to drop
        with pytest.raises(UsageError, match="already holds"):
            Memory.move_store(settings, url)
        assert sorted_export(settings) == before  # and nothing changed


def test_the_cli_moves_and_says_so_in_json(tmp_path: Path) -> None:
    with start_oxigraph(tmp_path / "oxigraph") as url:
        env = {**os.environ, "PCM_LLM": "none", "PCM_INDEX": "off", "PCM_MEMORY": str(tmp_path / "mem")}
        env = {k: v for k, v in env.items() if not k.startswith("PCM_STORE_")}

        def pcm(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, "-m", "pcm.cli", *args], capture_output=True, text=True, env=env,
                                  timeout=300)

        assert pcm("init", "--owner", "Dana").returncode == 0
        assert pcm("ingest", "--text", "I adopted a beagle called Biscuit").returncode == 0
        moved = pcm("store", "move", url, "--json")
        assert moved.returncode == 0, moved.stderr
        report = json.loads(moved.stdout)
        assert (report["source"], report["target"], report["engine"]) == ("embedded", url, "oxigraph")
        stats = pcm("stats", "--json")
        assert stats.returncode == 0 and json.loads(stats.stdout)["posts"] == 1
        again = pcm("store", "move", url)
        assert again.returncode == 2 and again.stderr.count("\n") == 1 and "already lives on" in again.stderr


def test_virtuoso_padded_seconds_read_back_in_their_canonical_form() -> None:
    """Virtuoso gives ``35.82971Z`` (a time whose microseconds end in 0, as Oxigraph stores it) back as
    ``35.829710Z``: the graph reads undo it, or one move in ten would find its copy differing."""
    import pyoxigraph as ox

    from pcm.backend_remote import unpad_seconds

    dt = ox.NamedNode("http://www.w3.org/2001/XMLSchema#dateTime")
    padded = ["2026-11-28T20:05:35.829710Z", "2026-11-28T20:05:35.800-07:00", "2026-11-28T20:05:35.000Z",
              "2026-11-28T20:05:35.829712Z", "2026-11-28T20:05:35Z"]
    quads = [ox.Quad(ox.NamedNode("urn:s"), ox.NamedNode("urn:p"), ox.Literal(v, datatype=dt), ox.NamedNode("urn:g"))
             for v in padded]
    assert [q.object.value for q in unpad_seconds(quads)] == [  # type: ignore[union-attr]
        "2026-11-28T20:05:35.82971Z", "2026-11-28T20:05:35.8-07:00", "2026-11-28T20:05:35Z",
        "2026-11-28T20:05:35.829712Z", "2026-11-28T20:05:35Z",
    ]

"""``pcm retrieve`` and ``retrieve(memory, ...)`` on a real memory: posts ingested, facts extracted (written here
as an extraction would), entities matched through the side index. The embedding model is replaced by a
bag-of-words stand-in carrying its name, so the index opens and the test stays fast; matching a name does not
depend on vectors (exact and normalised labels come first).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pyoxigraph as ox
import pytest
from click.testing import CliRunner

from pcm.cli_retrieve import retrieve as retrieve_command
from pcm.conversations import Conversation, Utterance
from pcm.index import MODEL_DIM, MODEL_NAME
from pcm.memory import Memory
from pcm.namespaces import PCM, PROV, RDF, RDFS, SCHEMA
from pcm.provenance import Activity, activity_quads
from pcm.retrieval.traversal import Kind, retrieve
from pcm.settings import Settings
from tests.retrieval.traversal.test_traversal import WordEmbedder

N = ox.NamedNode
A = N(RDF + "type")
LABEL = N(RDFS + "label")
SAID = [
    "I bought a Trek bike at City Bikes for 600 dollars.",
    "City Bikes is in Portland.",
    "Rosewood Auto Repair in Portland fixed my Subaru for 712 dollars.",
]


class StandIn(WordEmbedder):
    """The bag-of-words embedder under the real model's name and size, so the memory's index accepts it."""

    name = MODEL_NAME
    dim = MODEL_DIM


def facts(ns: str, owner: ox.NamedNode) -> list[list[tuple[ox.NamedNode, ox.NamedNode, ox.NamedNode | ox.Literal]]]:
    def m(x: str) -> ox.NamedNode:
        return N(ns + x)

    def s(x: str) -> ox.NamedNode:
        return N(SCHEMA + x)

    bike, shop, buy, portland = m("trek-bike"), m("city-bikes"), m("buying-the-bike"), m("portland")
    rosewood, repair, car = m("rosewood-auto-repair"), m("repairing-the-subaru"), m("subaru-outback")
    return [
        [(buy, A, s("BuyAction")), (buy, LABEL, ox.Literal("buying the Trek bike")), (buy, s("agent"), owner),
         (buy, s("object"), bike), (buy, s("seller"), shop), (buy, s("price"), ox.Literal("600")),
         (bike, A, N(PCM + "Bicycle")), (bike, LABEL, ox.Literal("Trek bike")),
         (shop, A, s("Store")), (shop, LABEL, ox.Literal("City Bikes"))],
        [(shop, s("containedInPlace"), portland), (portland, A, s("City")), (portland, LABEL, ox.Literal("Portland"))],
        [(repair, A, N(PCM + "RepairAction")), (repair, LABEL, ox.Literal("repairing the Subaru")),
         (repair, s("agent"), owner), (repair, s("object"), car), (repair, s("provider"), rosewood),
         (car, A, s("Car")), (car, LABEL, ox.Literal("Subaru Outback")),
         (rosewood, A, s("AutoRepair")), (rosewood, LABEL, ox.Literal("Rosewood Auto Repair")),
         (rosewood, s("containedInPlace"), portland)],
    ]


@pytest.fixture(scope="module")
def memory_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("pcm.index.get_embedder", lambda settings=None: _STAND_IN)
        patch.delenv("PCM_INDEX", raising=False)
        patch.delenv("PCM_STORE_URL", raising=False)
        settings = Settings(memory=tmp_path_factory.mktemp("retrieve") / "mem", index_enabled=True)
        with Memory.init(settings, owner="Dana") as memory:
            when = datetime(2025, 3, 3, 17, 0)
            utterances = [Utterance("s1", i, "user", text, timestamp=when, source_id=f"m{i}") for i, text in enumerate(SAID)]
            report = memory.ingest([Conversation("s1", utterances)])
            owner = N(memory.naming.owner)
            for post, triples in zip(report.posts, facts(memory.manifest.namespace, owner), strict=True):
                graph = memory.naming.extraction_graph(post)
                quads = [ox.Quad(a, b, c, N(graph)) for a, b, c in triples]
                subjects = sorted({a for a, _, _ in triples if a != owner}, key=lambda n: n.value)
                quads += [ox.Quad(x, N(PROV + "wasDerivedFrom"), N(post), N(graph)) for x in subjects]
                quads += activity_quads(memory.naming, Activity("extraction", when, model="test"), graph, post)
                memory.store.write(quads)
            memory.sync_index()
        yield settings.memory


_STAND_IN = StandIn()


@pytest.fixture
def runner(memory_dir: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setattr("pcm.index.get_embedder", lambda settings=None: _STAND_IN)
    monkeypatch.delenv("PCM_INDEX", raising=False)
    monkeypatch.delenv("PCM_STORE_URL", raising=False)
    return CliRunner()


def test_retrieve_matches_the_questions_entities_and_shows_paths_and_utterances(runner: CliRunner, memory_dir: Path) -> None:
    result = runner.invoke(retrieve_command, [
        "--memory", str(memory_dir), "How is the Trek bike connected to Rosewood Auto Repair?",
        "--algorithm", "astar", "--forbid", "e", "--top", "0",
    ])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "start: Trek bike" in out and "start: Rosewood Auto Repair" in out
    assert "buying the Trek bike seller City Bikes" in out
    assert "path: Trek bike <-object- buying the Trek bike -seller-> City Bikes" in out
    assert f'said: "{SAID[0]}"' in out and f'said: "{SAID[1]}"' in out


def test_retrieve_json_from_given_starts(runner: CliRunner, memory_dir: Path) -> None:
    result = runner.invoke(retrieve_command, [
        "--memory", str(memory_dir), "what did I buy", "--start", "m:trek-bike", "--start", "m:city-bikes",
        "-a", "wc+bs", "--json",
    ])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["algorithm"] == "wc+bs" and len(data["starts"]) == 2
    seller = next(t for t in data["triples"] if t["p"] == SCHEMA + "seller")
    assert seller["text"] == "buying the Trek bike seller City Bikes"
    assert seller["sources"][0]["text"] == SAID[0] and seller["sources"][0]["source_id"] == "m0"
    assert seller["similarity"] is not None and seller["path"]["steps"]
    assert 0 < len(data["triples"]) <= 30  # the triples filter's default


def test_bad_options_are_usage_errors(runner: CliRunner, memory_dir: Path) -> None:
    forbid = runner.invoke(retrieve_command, ["--memory", str(memory_dir), "x", "--forbid", "q"])
    assert forbid.exit_code == 2 and "--forbid" in forbid.output
    top = runner.invoke(retrieve_command, ["--memory", str(memory_dir), "x", "--top", "-1"])
    assert top.exit_code == 2


def test_without_the_index_start_vertices_must_be_given(runner: CliRunner, memory_dir: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PCM_INDEX", "off")
    result = runner.invoke(retrieve_command, ["--memory", str(memory_dir), "Which shop sold the Trek bike?"])
    assert result.exit_code == 2 and "--start" in result.output
    given = runner.invoke(retrieve_command, ["--memory", str(memory_dir), "Which shop sold the Trek bike?",
                                             "--start", "m:trek-bike", "--top", "0", "-a", "wc"])
    assert given.exit_code == 0 and "City Bikes" in given.output


def test_retrieve_is_what_ask_falls_back_to(memory_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("pcm.index.get_embedder", lambda settings=None: _STAND_IN)
    with Memory.open(Settings(memory=memory_dir, index_enabled=True), read_only=True) as memory:
        start = [memory.manifest.namespace + "subaru-outback"]
        found = retrieve(memory.context, "Who fixed my Subaru?", start=start, forbid={Kind.EPISODIC})
        assert found.starts[0].value == start[0]
        texts = [t.text for t in found.triples]
        assert "repairing the Subaru provider Rosewood Auto Repair" in texts
        posts = {s.post for t in found.triples for s in t.sources}
        assert any(p and p.startswith(memory.manifest.namespace + "post/") for p in posts)

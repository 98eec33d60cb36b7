"""The memory operations over the remote backend, on both engines: a real `oxigraph serve` and a real Virtuoso,
each on loopback (one server per engine for the module; the store is emptied between tests)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pyoxigraph as ox
import pytest

from oxigraph_server import start_oxigraph
from pcm.backend_remote import RemoteBackend
from pcm.conversations import Conversation, Utterance
from pcm.memory import Memory
from pcm.settings import Settings
from virtuoso_server import VIRTUOSO_PASSWORD, VIRTUOSO_USER, start_virtuoso

ENGINES = ["oxigraph", "virtuoso"]


@pytest.fixture(scope="module", params=ENGINES)
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """Settings that reach the engine's server (the memory directory is set per test)."""
    location = tmp_path_factory.mktemp(request.param)
    if request.param == "oxigraph":
        with start_oxigraph(location / "store") as url:
            yield Settings(store_url=url)  # the root URL, as the server prints it
    else:
        with start_virtuoso(location) as url:
            yield Settings(store_url=url, store_user=VIRTUOSO_USER, store_password=VIRTUOSO_PASSWORD)


def _empty(settings: Settings) -> None:
    with RemoteBackend(
        settings.store_url, user=settings.store_user, password=settings.store_password, engine=settings.store_engine
    ) as backend:
        for graph in backend.named_graphs():
            backend.update(f"DROP SILENT GRAPH <{graph}>")


@pytest.fixture
def remote(store: Settings, tmp_path: Path) -> Iterator[Settings]:
    _empty(store)
    yield store.with_(memory=tmp_path / "mem")
    _empty(store)


def conversation() -> Conversation:
    return Conversation("s1", [
        Utterance("s1", 0, "user", "I adopted a beagle called Biscuit", timestamp=datetime(2025, 3, 2, 10), source_id="m1"),
        Utterance("s1", 1, "assistant", "Congratulations!", timestamp=datetime(2025, 3, 2, 10, 1), source_id="m2"),
        Utterance("s1", 2, "user", "We walk along the river every Sunday", timestamp=datetime(2025, 3, 2, 10, 2), source_id="m3"),
    ])


def facts(ns: str) -> str:
    return (
        "@prefix pcm: <https://w3id.org/pcm/ontology#> .\n@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n"
        f"<{ns}biscuit> a pcm:Pet ; rdfs:label \"Biscuit\" .\n<{ns}owner> pcm:hasPet <{ns}biscuit> .\n"
    )


def _canonical(nquads: bytes) -> set[str]:
    ds = ox.Dataset(ox.parse(nquads, format=ox.RdfFormat.N_QUADS))
    ds.canonicalize(ox.CanonicalizationAlgorithm.UNSTABLE)
    return {str(q) for q in ds}


def test_ingest_recall_ask_why_forget_over_http(remote: Settings, tmp_path: Path) -> None:
    with Memory.init(remote, owner="Dana") as memory:
        assert memory.ingest([conversation()]).added == 3
        assert memory.ingest([conversation()]).added == 0  # idempotent over HTTP too
        stats = memory.stats()
        assert (stats.posts, stats.sessions) == (3, 1)
        hits = memory.recall("dog adoption", k=2)
        assert hits and "beagle" in hits[0].text
        answer = memory.ask("What is my dog called?")
        assert any("Biscuit" in p.content for p in answer.posts)
        post = memory.store.find_post("m1")[0]
        [source] = memory.why(post)
        assert source.content == "I adopted a beagle called Biscuit" and source.session == "s1"
        ttl = tmp_path / "facts.ttl"
        ttl.write_text(facts(memory.manifest.namespace))
        assert memory.import_rdf(ttl).quads == 3
        assert [s.file for s in memory.why(f"{memory.manifest.namespace}biscuit")] == ["facts.ttl"]
        assert memory.forget(post="m1") == [post]
        assert memory.stats().posts == 2
        assert all("beagle" not in h.text for h in memory.recall("dog adoption", k=3))


def test_export_then_reimport_is_isomorphic(remote: Settings, tmp_path: Path) -> None:
    with Memory.init(remote.with_(index_enabled=False), owner="Dana") as memory:
        memory.ingest([conversation()])
        ttl = tmp_path / "facts.ttl"
        ttl.write_text(facts(memory.manifest.namespace))
        memory.import_rdf(ttl)
        original = memory.export("nquads")
        namespace = memory.manifest.namespace
    dump = tmp_path / "dump.nq"
    dump.write_bytes(original)
    _empty(remote)
    other = remote.with_(memory=tmp_path / "other", index_enabled=False)
    with Memory.init(other, owner="Dana") as restored:
        restored.import_rdf(dump)
        again = restored.export("nquads").decode().replace(restored.manifest.namespace, namespace).encode()
    assert _canonical(again) == _canonical(original)


def _events_memory(settings: Settings) -> tuple[Memory, list[str]]:
    from test_events import T0, TEXTS, _write_facts

    memory = Memory.init(settings.with_(index_enabled=False), owner="Dana")
    utterances = [Utterance("s1", i, "user", t, timestamp=T0.replace(minute=i), source_id=f"m{i}") for i, t in enumerate(TEXTS)]
    posts = memory.ingest([Conversation("s1", utterances)]).posts
    _write_facts(memory, posts)
    return memory, posts


def _walks(memory: Memory) -> dict[str, object]:
    """What the event walks and every traversal algorithm find, with the memory's own names taken out."""
    from pcm.retrieval.traversal.events import event_classes, retrieve_events, walk_events
    from pcm.retrieval.traversal.service import retrieve

    ns = memory.naming.namespace

    def short(term: ox.NamedNode | ox.Literal) -> str:
        return term.value.rsplit("/", 1)[-1]

    out: dict[str, object] = {
        "classes": event_classes(memory.context),
        "walk": [(short(f.triple.s), short(f.triple.o), f.role) for f in walk_events(memory.context, [ns + "missed"], direction="both", depth=3, k=20).found],
        "after": [(short(f.triple.s), short(f.triple.o), f.role) for f in walk_events(memory.context, [ns + "blocked"], direction="after", depth=3).found],
        "events": [(short(f.triple.s), short(f.triple.o)) for f in retrieve_events(memory.context, "Why did I miss my flight to Lisbon?", direction="causes").found],
    }
    for algorithm in ("wc", "bs", "astar"):
        found = retrieve(memory.context, "why did I miss the flight", start=[ns + "missed"], algorithm=algorithm).found
        out[algorithm] = sorted(f"{short(f.triple.s)} {short(f.triple.o)}" for f in found)
    return out


def test_event_walks_and_traversal_match_the_embedded_store(remote: Settings, tmp_path: Path) -> None:
    """The queries Virtuoso refused in their first form (a `*` path from a VALUES root, an IN list of one IRI) and
    its integer booleans: the same answers as the embedded store."""
    local, _ = _events_memory(Settings(memory=tmp_path / "local"))
    with local:
        expected = _walks(local)
    memory, _ = _events_memory(remote)
    with memory:
        assert _walks(memory) == expected
    assert expected["walk"] and expected["wc"] and expected["events"]


def test_init_refuses_a_store_holding_another_memory_unless_told_to_share(remote: Settings, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from pcm.cli import main

    env = {"PCM_STORE_URL": remote.store_url, "PCM_STORE_USER": remote.store_user,
           "PCM_STORE_PASSWORD": remote.store_password, "PCM_INDEX": "off"}
    runner = CliRunner()
    first = runner.invoke(main, ["--memory", str(tmp_path / "a"), "init", "--owner", "Dana"], env=env)
    assert first.exit_code == 0, first.output
    second = runner.invoke(main, ["--memory", str(tmp_path / "b"), "init", "--owner", "Eli"], env=env)
    assert second.exit_code == 2 and "already holds another memory" in second.output and "--share-store" in second.output
    with Memory.open(remote.with_(memory=tmp_path / "a", index_enabled=False)) as memory:
        assert memory.stats().posts == 0  # the refused init wrote nothing beside it
        owners = memory.sparql("SELECT ?o WHERE { ?o a <https://w3id.org/pcm/ontology#MemoryOwner> }")
        assert len(owners) == 1  # type: ignore[arg-type]
    shared = runner.invoke(main, ["--memory", str(tmp_path / "b"), "init", "--owner", "Eli", "--share-store"], env=env)
    assert shared.exit_code == 0, shared.output

"""The memory operations over the remote backend, on both engines: a real `oxigraph serve` and a real Virtuoso,
each on loopback (one server per engine for the module; the store is emptied between tests)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pyoxigraph as ox
import pytest

from pcm.backend_remote import RemoteBackend
from pcm.conversations import Conversation, Utterance
from pcm.memory import Memory
from pcm.settings import Settings
from tests.oxigraph_server import start_oxigraph
from tests.virtuoso_server import VIRTUOSO_PASSWORD, VIRTUOSO_USER, start_virtuoso

ENGINES = ["oxigraph", pytest.param("virtuoso", marks=pytest.mark.engine)]


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
        assert any("Biscuit" in p.text for p in answer.citations)
        post = memory.store.find_post("m1")[0]
        [source] = memory.why(post)
        assert source.text == "I adopted a beagle called Biscuit" and source.session == "s1"
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
        namespace, prefix = memory.manifest.namespace, memory.naming.layout.prefix
    dump = tmp_path / "dump.nq"
    dump.write_bytes(original)
    _empty(remote)
    other = remote.with_(memory=tmp_path / "other", index_enabled=False)
    with Memory.init(other, owner="Dana") as restored:
        restored.import_rdf(dump)  # another memory: its graph names carry its own id
        again = restored.export("nquads").decode().replace(restored.manifest.namespace, namespace)
        again = again.replace(restored.naming.layout.prefix, prefix).encode()
    assert _canonical(again) == _canonical(original)


def _events_memory(settings: Settings) -> tuple[Memory, list[str]]:
    from tests.test_events import T0, TEXTS, _write_facts

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


def _third_party_select(settings: Settings, query: str) -> list[dict[str, str]]:
    """A SELECT sent as any SPARQL client sends it: a GET on the server's query URL, no pcm code involved."""
    import httpx

    virtuoso = bool(settings.store_user)
    url = settings.store_url + ("/sparql-auth" if virtuoso else "/query")
    auth = httpx.DigestAuth(settings.store_user, settings.store_password) if virtuoso else None
    response = httpx.get(url, params={"query": query}, headers={"Accept": "application/sparql-results+json"}, auth=auth)
    response.raise_for_status()
    return [{k: v["value"] for k, v in row.items()} for row in response.json()["results"]["bindings"]]


def test_two_memories_on_one_server_see_nothing_of_each_other(remote: Settings, tmp_path: Path) -> None:
    from pcm.errors import QueryError

    parrot = Conversation("s1", [
        Utterance("s1", 0, "user", "My parrot Kiwi speaks French", timestamp=datetime(2025, 4, 1, 9), source_id="m1"),
    ])
    with Memory.init(remote, owner="Dana") as a, \
            Memory.init(remote.with_(memory=tmp_path / "b"), owner="Eli", share_store=True) as b:
        assert a.manifest.layout == b.manifest.layout == "memory-id"  # a memory made on a server carries its id
        assert a.naming.layout.prefix != b.naming.layout.prefix
        a.ingest([conversation()])
        b.ingest([parrot])  # the same session and message ids as one of a's posts
        for memory in (a, b):
            ttl = tmp_path / f"facts-{memory.manifest.memory_id}.ttl"
            ttl.write_text(facts(memory.manifest.namespace))
            memory.import_rdf(ttl)
        assert (a.stats().posts, b.stats().posts) == (3, 1)
        # recall and ask
        assert all("Kiwi" not in h.text for h in a.recall("parrot French", k=5))
        assert all("beagle" not in h.text for h in b.recall("dog adoption", k=5))
        assert all("Kiwi" not in p.text for p in a.ask("What does my parrot speak?").citations)
        assert all("Biscuit" not in p.text for p in b.ask("What is my dog called?").citations)
        # sparql: the union default graph, GRAPH ?g, and a hostile query naming the other memory's graphs
        probe = 'SELECT ?o WHERE { ?s ?p ?o FILTER(CONTAINS(STR(?o), "Biscuit") || CONTAINS(STR(?o), "Kiwi") || ?o = "Eli") }'
        a_text = str(a.sparql(probe).rows)  # type: ignore[union-attr]
        assert "Biscuit" in a_text and "Kiwi" not in a_text and "Eli" not in a_text
        graphs = a.sparql("SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } }").values("g")  # type: ignore[union-attr]
        assert graphs and all(g.value.startswith(a.naming.layout.prefix) for g in graphs if g is not None)
        owners = b.sparql("SELECT ?o WHERE { ?o a <https://w3id.org/pcm/ontology#MemoryOwner> }")
        assert [row[0].value for row in owners.rows] == [b.naming.owner]  # type: ignore[union-attr]
        for hostile in (f"SELECT * WHERE {{ GRAPH <{b.naming.layout.conversation}> {{ ?s ?p ?o }} }}",
                        f"SELECT * FROM <{b.naming.layout.conversation}> WHERE {{ ?s ?p ?o }}",
                        "SELECT * WHERE { SERVICE <http://127.0.0.1:9/sparql> { ?s ?p ?o } }"):
            with pytest.raises(QueryError):
                a.sparql(hostile)
        # export
        exported = a.export("nquads").decode()
        assert "Biscuit" in exported and "Kiwi" not in exported and b.naming.layout.prefix not in exported
        # forget: a's m1 goes, b's m1 stays
        [post] = a.forget(post="m1")
        assert (a.stats().posts, b.stats().posts) == (2, 1)
        assert b.store.find_post("m1") and "Kiwi" in b.why(b.store.find_post("m1")[0])[0].text  # type: ignore[operator]
        # a migration's restore puts back this memory's graphs only (no CLEAR ALL: the other memory stays)
        from pcm.ontology_tools.migrate import make_backup, restore_backup

        backup = make_backup(a, None, "test")
        a.forget(post="m2")
        restore_backup(a, backup)
        assert (a.stats().posts, b.stats().posts) == (2, 1)
        # a third-party client sees one memory's posts by naming its graphs (README, "An external store")
        rows = _third_party_select(remote, (
            "SELECT (COUNT(?p) AS ?n) WHERE { GRAPH ?g { ?p a <http://rdfs.org/sioc/ns#Post> } "
            f'FILTER(STRSTARTS(STR(?g), "{b.naming.layout.prefix}")) }}'
        ))
        assert rows == [{"n": "1"}]
        rows = _third_party_select(remote, (
            f"SELECT ?text WHERE {{ GRAPH <{a.naming.layout.conversation}> {{ ?p <http://rdfs.org/sioc/ns#content> ?text }} }}"
        ))
        assert sorted(r["text"] for r in rows) == ["Congratulations!", "We walk along the river every Sunday"]

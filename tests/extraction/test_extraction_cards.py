"""An entity's types and label are stored once: a restatement adds nothing, and when the graph holding them goes
(forget, re-extraction) while other posts still mention the entity, they move to the latest such post's graph."""

from __future__ import annotations

from pathlib import Path

import pytest

from pcm.index.records import entity_record
from pcm.memory import Memory
from pcm.namespaces import PCM, RDF, RDFS
from pcm.settings import Settings
from tests.extraction.test_extraction import BISCUIT, graph_triples, ingest, rows, run

#: A later mention of Biscuit that restates its card and says something new.
WALK = """m:biscuit a pcm:Pet ; rdfs:label "Biscuit" .
m:walk-1 a schema:ExerciseAction ; rdfs:label "walking Biscuit" ; schema:agent m:owner ; schema:object m:biscuit ;
    schema:actionStatus schema:CompletedActionStatus ."""
#: Another mention that restates the card only (and the walk-free collar fact).
COLLAR = """m:biscuit a pcm:Pet ; rdfs:label "Biscuit" ; pcm:petBreed "beagle" ."""
CARD = {RDF + "type", RDFS + "label"}


def card_rows(memory: Memory, entity: str) -> list[tuple[str | None, ...]]:
    """Every stored (graph, predicate, value) of the entity's card: one row per graph that holds it."""
    return sorted(rows(memory, f"""SELECT ?g ?p ?o WHERE {{ VALUES ?p {{ <{RDF}type> <{RDFS}label> }}
        GRAPH ?g {{ <{entity}> ?p ?o }} }}"""))


def card_in(memory: Memory, post: str, entity: str) -> set[tuple[str, str]]:
    return {(p, o) for s, p, o in graph_triples(memory, memory.naming.extraction_graph(post)) if s == entity and p in CARD}


def three_mentions(memory: Memory) -> tuple[str, list[str]]:
    ns = memory.manifest.namespace
    posts = ingest(memory, "I adopted a beagle called Biscuit yesterday.", "I walked Biscuit in the park.",
                   "Biscuit is a beagle, did I say?")
    report, _ = run(memory, posts, BISCUIT, WALK, COLLAR)
    assert report.extracted == 3
    return ns + "biscuit", posts


def test_a_restated_card_is_stored_once_and_the_mention_still_derives_the_entity(memory: Memory) -> None:
    biscuit, posts = three_mentions(memory)
    assert card_in(memory, posts[0], biscuit) == {(RDF + "type", PCM + "Pet"), (RDFS + "label", "Biscuit")}
    assert card_in(memory, posts[1], biscuit) == set() == card_in(memory, posts[2], biscuit)
    assert len(card_rows(memory, biscuit)) == 2  # one type and one label, whatever the number of mentions
    assert {s.post for s in memory.why("m:biscuit")} == set(posts)  # every mention still traces to Biscuit
    assert (biscuit, PCM + "petBreed", "beagle") in graph_triples(
        memory, memory.naming.extraction_graph(posts[2]))  # a restated non-card fact stays where it was said


def test_forgetting_the_first_mention_moves_the_card_to_the_latest_mention(memory: Memory) -> None:
    biscuit, posts = three_mentions(memory)
    memory.forget(post=posts[0])
    assert card_in(memory, posts[2], biscuit) == {(RDF + "type", PCM + "Pet"), (RDFS + "label", "Biscuit")}
    assert len(card_rows(memory, biscuit)) == 2
    memory.forget(post=posts[2])
    assert card_in(memory, posts[1], biscuit) and len(card_rows(memory, biscuit)) == 2


def test_forgetting_every_mention_leaves_nothing_of_the_entity(memory: Memory) -> None:
    biscuit, _ = three_mentions(memory)
    memory.forget(session="s1")
    assert rows(memory, f"SELECT ?p ?o WHERE {{ <{biscuit}> ?p ?o }}") == []


def test_a_re_extraction_that_drops_the_entity_hands_its_card_on(memory: Memory) -> None:
    biscuit, posts = three_mentions(memory)
    report, _ = run(memory, [posts[0]], '''m:adopting a schema:ReceiveAction ; rdfs:label "adopting a dog" ;
        schema:agent m:owner ; schema:actionStatus schema:CompletedActionStatus .''', force=True)
    assert report.extracted == 1
    assert card_in(memory, posts[0], biscuit) == set()
    assert card_in(memory, posts[2], biscuit) and len(card_rows(memory, biscuit)) == 2


def test_a_re_extraction_that_still_mentions_the_entity_keeps_its_card(memory: Memory) -> None:
    biscuit, posts = three_mentions(memory)
    report, _ = run(memory, [posts[0]], 'm:biscuit pcm:petBreed "beagle" . m:owner pcm:hasPet m:biscuit .',
                    force=True)
    assert report.extracted == 1
    assert card_in(memory, posts[0], biscuit) and len(card_rows(memory, biscuit)) == 2


def test_a_forget_leaves_the_index_entities_a_full_reconcile_would(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A forget updates only the entities its graphs described (a full reconcile lists every post and entity: at
    1M posts, minutes for one post): after each forget the index holds the entities, labels and types the store
    holds, as a full reconcile would make them."""
    from tests.index.test_index_ann import TopicEmbedder

    embedder = TopicEmbedder()
    monkeypatch.setattr("pcm.index.get_embedder", lambda *args, **kwargs: embedder)
    settings = Settings(memory=tmp_path / "memory", index_enabled=False)
    Memory.init(settings, owner="Dana Whitfield").close()
    with Memory.open(settings.with_(index_enabled=True)) as memory:
        memory.reindex()
        biscuit, posts = three_mentions(memory)
        reconciles: list[int] = []
        monkeypatch.setattr(type(memory.index), "reconcile", lambda *args, **kwargs: reconciles.append(1) or (0, 0))

        def index_entities() -> dict[str, tuple[str, tuple[str, ...]]]:
            return {r.iri: (r.label, r.types) for r in memory.index._entities.live_records()}

        def store_entities() -> dict[str, tuple[str, tuple[str, ...]]]:
            return {r.iri: (r.label, r.types) for r in (entity_record(*e) for e in memory.store.entities())}

        assert biscuit in index_entities()
        for post in (posts[0], posts[2], posts[1]):
            memory.forget(post=post)
            assert index_entities() == store_entities()
        assert biscuit not in index_entities() and not reconciles

"""The store half of the index outbox: which writes set the marker, and when the watcher may clear it."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pyoxigraph as ox
import pytest

from pcm.conversations import Conversation, Utterance
from pcm.index.outbox import OutboxWatcher, sync_stamp
from pcm.layout import LEGACY_LAYOUT
from pcm.memory import Memory
from pcm.namespaces import PCM
from pcm.store import index_marker

INDEX_PENDING = index_marker(LEGACY_LAYOUT)


def _conv(text: str) -> Conversation:
    return Conversation("s1", [Utterance("s1", 0, "user", text, timestamp=datetime(2025, 1, 1), source_id="s1:0")])


def test_a_post_write_sets_the_marker_in_the_same_write(memory: Memory) -> None:
    memory.store.clear_index_pending()
    before = memory.store.index_writes
    memory.ingest([_conv("my dog is called Biscuit")])
    assert memory.store.index_pending()
    assert memory.store.index_writes > before
    assert INDEX_PENDING in set(memory.backend.quads(LEGACY_LAYOUT.provenance))


def test_status_only_writes_leave_the_marker_alone(memory: Memory) -> None:
    memory.ingest([_conv("hello")])
    post = next(iter(memory.store.posts())).iri
    memory.store.clear_index_pending()
    writes = memory.store.index_writes
    memory.store.apply(extra=memory.store.set_status(post, "failed", "no model"))
    prov = ox.NamedNode(LEGACY_LAYOUT.provenance)
    note = ox.Quad(ox.NamedNode(post), ox.NamedNode(PCM + "unknownTerm"), ox.Literal("x"), prov)
    memory.store.apply(insert=[note], extra=memory.store.set_status(post, "extracted"))
    assert not memory.store.index_pending() and memory.store.index_writes == writes


@pytest.mark.parametrize("kind", ["graph-insert", "drop", "forget"])
def test_writes_that_change_indexed_data_set_the_marker(memory: Memory, kind: str) -> None:
    memory.ingest([_conv("hello")])
    post = next(iter(memory.store.posts())).iri
    memory.store.clear_index_pending()
    graph = memory.naming.extraction_graph(post)
    if kind == "graph-insert":
        label = ox.Quad(ox.NamedNode(memory.naming.namespace + "rex"), ox.NamedNode(
            "http://www.w3.org/2000/01/rdf-schema#label"), ox.Literal("Rex"), ox.NamedNode(graph))
        memory.store.apply(insert=[label], extra=memory.store.set_status(post, "extracted"))
    elif kind == "drop":
        memory.store.apply(extra=[f"DROP SILENT GRAPH <{graph}>"])
    else:
        memory.store.forget_posts([post])
    assert memory.store.index_pending()


def test_a_writer_can_say_its_data_is_not_mirrored(memory: Memory) -> None:
    memory.ingest([_conv("hello")])
    session = memory.naming.session("s1")
    memory.store.clear_index_pending()
    note = ox.Quad(ox.NamedNode(session), ox.NamedNode(PCM + "summary"), ox.Literal("hi"), ox.NamedNode(
        "urn:pcm:graph:conversation"))
    memory.store.apply(insert=[note], extra=[f"DELETE WHERE {{ GRAPH <urn:pcm:graph:conversation> {{ <{session}> "
                                             f"<{PCM}summary> ?s }} }}"], mirrored=False)
    memory.store.write([note], mirrored=False)
    assert not memory.store.index_pending()


def test_the_marker_is_importable_vocabulary_and_idempotent(memory: Memory) -> None:
    from pcm.shapes import BUILTIN_TERMS

    assert INDEX_PENDING.predicate.value in BUILTIN_TERMS  # a dump carrying it restores without complaint
    memory.store.mark_index_pending()
    memory.store.mark_index_pending()
    assert sum(1 for q in memory.backend.quads(LEGACY_LAYOUT.provenance) if q == INDEX_PENDING) == 1


class FakeStore:
    def __init__(self) -> None:
        self.index_writes = 0
        self.cleared = 0

    def clear_index_pending(self) -> None:
        self.cleared += 1


def test_the_watcher_clears_only_after_an_index_write_no_store_write_raced() -> None:
    store = FakeStore()
    watcher = OutboxWatcher(store, pending=False)
    token = watcher.begin()
    watcher.done(token)
    assert store.cleared == 0  # nothing was marked since the open: no store round trip
    store.index_writes += 1  # a store write, then its index write
    watcher.done(watcher.begin())
    assert store.cleared == 1
    store.index_writes += 1
    token = watcher.begin()
    store.index_writes += 1  # another thread wrote the store while the index was writing
    watcher.done(token)
    assert store.cleared == 1


def test_a_marker_left_by_an_earlier_process_waits_for_a_full_reconcile() -> None:
    store = FakeStore()
    watcher = OutboxWatcher(store, pending=True)
    store.index_writes += 1
    watcher.done(watcher.begin())
    assert store.cleared == 0  # an incremental write does not cover what the earlier process left
    watcher.clear(store.index_writes)  # what sync_index calls after a full reconcile
    assert store.cleared == 1
    watcher.clear(store.index_writes - 1)  # a stale token never clears
    assert store.cleared == 1


def test_the_stamp_names_what_a_reconcile_depends_on() -> None:
    stamp = sync_stamp(namespace="https://x/", ontology_version="1.2", model="m", dim=384)
    assert stamp == {"namespace": "https://x/", "ontology_version": "1.2", "model": "m", "dim": 384}


def test_an_ingest_folds_the_text_it_added_once_at_its_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ingest writes the side index a few hundred posts at a time; the full-text tail they leave is folded in
    once, when the ingest is done, however many writes it took."""
    from pcm.index.sideindex import SideIndex
    from pcm.settings import Settings
    from tests.index.test_index_ann import TopicEmbedder

    embedder = TopicEmbedder()
    monkeypatch.setattr("pcm.index.get_embedder", lambda *args, **kwargs: embedder)
    settings = Settings(memory=tmp_path / "memory", index_enabled=False)
    Memory.init(settings, owner="Dana Whitfield").close()
    with Memory.open(settings.with_(index_enabled=True)) as memory:
        memory.reindex()  # the memory's index made with the test's embedder
        folds: list[int] = []
        optimize = SideIndex._optimize
        monkeypatch.setattr(SideIndex, "fold_text_bytes", 1)
        monkeypatch.setattr(SideIndex, "_optimize", lambda self, retain: folds.append(self._unfolded) or optimize(self, retain))
        turns = [Utterance("s2", i, "user", f"turn {i} about the garden", timestamp=datetime(2025, 1, 1), source_id=f"s2:{i}")
                 for i in range(600)]  # three writes of the side index
        memory.ingest([Conversation("s2", turns)])
        assert len(folds) == 1 and folds[0] > 0

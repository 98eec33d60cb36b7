"""A failed index write after extraction keeps the outbox marker until a full reconcile brings the index up to date."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from pcm.conversations import Conversation, Utterance
from pcm.errors import PcmError
from pcm.extraction import extract_posts
from pcm.index.outbox import OutboxWatcher
from pcm.llm import ScriptedClient
from pcm.memory import Memory
from pcm.settings import Settings

T0 = datetime.fromisoformat("2025-03-03T17:10:00-08:00")


class DirtyStore:
    def __init__(self) -> None:
        self.index_writes = 0
        self.index_dirty = False
        self.cleared = 0

    def clear_index_pending(self) -> None:
        self.cleared += 1
        self.index_dirty = False


def test_a_dirty_store_keeps_its_marker_until_a_full_reconcile() -> None:
    store = DirtyStore()
    watcher = OutboxWatcher(store, pending=False)
    store.index_writes += 1
    store.index_dirty = True  # what mark_index_pending does after a failed index write
    watcher.done(watcher.begin())
    assert store.cleared == 0
    watcher.clear(store.index_writes)  # sync_index after its reconcile
    assert store.cleared == 1 and not store.index_dirty
    store.index_writes += 1
    watcher.done(watcher.begin())  # incremental writes clear again once the reconcile is done
    assert store.cleared == 2


def _conv(cid: str, text: str) -> Conversation:
    return Conversation(cid, [Utterance(cid, 0, "user", text, timestamp=T0, source_id=f"{cid}:0")])


def test_a_failed_index_update_is_replayed_on_the_next_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings(memory=tmp_path / "memory", index_enabled=True)
    client = ScriptedClient([
        'm:biscuit a pcm:Pet ; rdfs:label "Biscuit" ; pcm:petBreed "beagle" .\nm:owner pcm:hasPet m:biscuit .',
        'm:rex a pcm:Pet ; rdfs:label "Rex" .\nm:owner pcm:hasPet m:rex .',
    ])
    with Memory.init(settings, owner="Dana Whitfield") as memory:
        ns = memory.manifest.namespace
        first = memory.ingest([_conv("a", "I adopted a beagle called Biscuit.")]).posts
        second = memory.ingest([_conv("b", "And a terrier called Rex.")]).posts
        index = memory.index
        assert not memory.store.index_pending()  # the ingest's index writes caught up
        real = index.upsert_entities
        calls: list[int] = []

        def fail_once(records):  # type: ignore[no-untyped-def]
            calls.append(len(records))
            if len(calls) == 1:
                raise PcmError("lance table is locked")
            real(records)

        monkeypatch.setattr(index, "upsert_entities", fail_once)
        assert extract_posts(memory.context, first, client=client).extracted == 1
        assert memory.store.index_pending() and memory.store.index_dirty
        assert extract_posts(memory.context, second, client=client).extracted == 1
        assert len(calls) == 2  # the second index write succeeded ...
        assert memory.store.index_pending()  # ... and did not clear the marker the failed one left
        assert ns + "rex" in index.entity_iris() and ns + "biscuit" not in index.entity_iris()
    with Memory.open(settings) as memory:
        entities = memory.index.entity_iris()  # the open sees the marker and reconciles
        assert {ns + "biscuit", ns + "rex"} <= entities
        assert not memory.store.index_pending() and not memory.store.index_dirty

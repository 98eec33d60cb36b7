"""The store and the side index together: the outbox replay after a crash, forget, model mismatch, demo recall."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pcm.conversations import parse_file, sample_paths
from pcm.errors import MemoryVersionError
from pcm.index import SideIndex
from pcm.manifest import Manifest
from pcm.memory import INDEX_DIR, Memory
from pcm.settings import Settings
from pcm.store import MemoryStore

INGEST_FOREVER = """
import sys
from datetime import datetime, timedelta
from pathlib import Path
from pcm.conversations import Conversation, Utterance
from pcm.memory import Memory
from pcm.settings import Settings
from pcm.store import MemoryStore

memory = Memory.open(Settings(memory=Path(sys.argv[1])))
memory.index  # load the model and open the index before announcing we are running
print("ready", flush=True)
for s in range(10_000):
    conv = Conversation(f"bulk-{s}", [
        Utterance(f"bulk-{s}", i, "user", f"session {s} turn {i} about gardening and tomatoes",
                  timestamp=datetime(2025, 1, 1) + timedelta(minutes=s * 10 + i), source_id=f"{s}:{i}")
        for i in range(5)
    ])
    memory.ingest([conv])
"""


@pytest.fixture
def indexed(tmp_path: Path) -> Settings:
    settings = Settings(memory=tmp_path / "mem", index_enabled=True)
    Memory.init(settings, owner="Dana Whitfield").close()
    return settings


@pytest.mark.slow
def test_a_killed_ingest_loses_nothing_and_the_index_catches_up(indexed: Settings) -> None:
    # the writer kills itself (SIGKILL) right after its 20th store write, before that utterance reaches the index
    env = {**os.environ, "PCM_FAULT_POINT": "store:20"}
    proc = subprocess.Popen([sys.executable, "-c", INGEST_FOREVER, str(indexed.memory)], stdout=subprocess.PIPE,
                            text=True, env=env)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        returncode = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert returncode == -signal.SIGKILL
    with SideIndex.open(indexed.memory / INDEX_DIR) as raw:
        indexed_before = raw.post_iris()
    with Memory.open(indexed) as memory:
        stored = {p.iri for p in memory.store.posts()}
        assert len(stored) > 5
        assert stored - indexed_before  # the kill left stored utterances the index had not seen
        assert memory.index.post_iris() == stored  # opening the index replayed what the store had and it lacked
        # every stored utterance is complete (one atomic write each): content, session, position, time
        assert all(p.text and p.session and p.time for p in memory.store.posts())


def test_forget_removes_index_rows(indexed: Settings) -> None:
    with Memory.open(indexed) as memory:
        memory.ingest(parse_file(sample_paths()[4]))  # the pets conversation
        hits = memory.recall("dog ate a sock", 3)
        assert hits and "sock" in hits[0].text
        memory.forget(post=hits[0].source_id or "")
        assert hits[0].post not in memory.index.post_iris()
        assert all(h.post != hits[0].post for h in memory.recall("dog ate a sock", 10))


def test_memory_indexed_with_another_model_is_refused(indexed: Settings) -> None:
    manifest = Manifest.load(indexed.memory)
    manifest.embedding_model = "some/other-model"
    manifest.save(indexed.memory)
    with Memory.open(indexed) as memory, pytest.raises(MemoryVersionError, match="pcm reindex"):
        memory.recall("anything")


def test_episodic_ask_cites_the_utterance(indexed: Settings) -> None:
    with Memory.open(indexed) as memory:
        for path in sample_paths():
            memory.ingest(parse_file(path))
        answer = memory.ask("What is the name of my dog?")
        assert answer.path == "episodic" and "LLM" in answer.note
        assert any("Biscuit" in p.text for p in answer.citations[:3])


def without_summaries(settings: Settings) -> Settings:
    """Session summaries are written after ingest without an index write of their own; until they tell the store
    they change no index row (``mirrored=False``), they leave the outbox marker set, so these tests turn them off."""
    if hasattr(settings, "summaries_enabled"):
        return dataclasses.replace(settings, summaries_enabled=False)
    return settings


class ListingSpy:
    """Counts calls of the store's full listings (the cost a writable open must not pay when nothing changed)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[str] = []
        for name in ("posts", "entities"):
            original = getattr(MemoryStore, name)

            def spy(store: MemoryStore, *args: object, _name: str = name, _original=original, **kw: object):  # type: ignore[no-untyped-def]
                self.calls.append(_name)
                return _original(store, *args, **kw)

            monkeypatch.setattr(MemoryStore, name, spy)


def test_reopening_an_unchanged_memory_lists_no_post_or_entity(indexed: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    indexed = without_summaries(indexed)
    with Memory.open(indexed) as memory:
        memory.ingest(parse_file(sample_paths()[4]))
        assert not memory.store.index_pending()  # the index write that followed the store writes cleared the marker
    spy = ListingSpy(monkeypatch)
    with Memory.open(indexed) as memory:
        assert memory.recall("dog ate a sock", 3)  # opening the index for real
        assert spy.calls == []


def test_writes_the_index_never_saw_are_replayed_on_the_next_open(indexed: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    indexed = without_summaries(indexed)
    with Memory.open(indexed) as memory:
        _ = memory.index  # the index exists and records its sync
    # the store takes writes while the index does not follow (as if the process died between the two)
    with Memory.open(indexed.with_(index_enabled=False)) as memory:
        memory.ingest(parse_file(sample_paths()[4]))
        stored = {p.iri for p in memory.store.posts()}
        assert memory.store.index_pending()
    spy = ListingSpy(monkeypatch)
    with Memory.open(indexed) as memory:
        assert memory.index.post_iris() == stored
        assert spy.calls.count("posts") == 1 and not memory.store.index_pending()
    with Memory.open(indexed) as memory:
        _ = memory.index
        assert spy.calls.count("posts") == 1  # caught up: the open after that is cheap again


def test_an_index_reconciled_against_something_else_is_reconciled_again(
    indexed: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    indexed = without_summaries(indexed)
    with Memory.open(indexed) as memory:
        memory.ingest(parse_file(sample_paths()[4]))
        record = memory.index.sync_record()
        assert record is not None and record["namespace"] == memory.manifest.namespace
        memory.index.record_sync({**record, "ontology_version": "0.0.1"})  # e.g. a migration ran since
    spy = ListingSpy(monkeypatch)
    with Memory.open(indexed) as memory:
        _ = memory.index
        assert spy.calls.count("posts") == 1
    (indexed.memory / "index" / "synced.json").unlink()  # an index without a record (older pcm, copied in)
    with Memory.open(indexed) as memory:
        _ = memory.index
        assert spy.calls.count("posts") == 2


def test_reindex_lists_once_and_leaves_the_memory_in_sync(indexed: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    indexed = without_summaries(indexed)
    with Memory.open(indexed) as memory:
        memory.ingest(parse_file(sample_paths()[4]))
        spy = ListingSpy(monkeypatch)
        assert memory.reindex() > 0
        assert spy.calls == ["posts", "entities"]
        assert not memory.store.index_pending()


def test_recall_on_a_memory_opened_without_its_index_is_a_usage_error(tmp_path: Path) -> None:
    """One line and the usage exit code (HTTP 400), not the 500 of a server fault: nothing failed, the memory was
    opened without what recall needs."""
    from pcm.errors import UsageError

    with (Memory.init(Settings(memory=tmp_path / "m", index_enabled=False), owner="Dana") as memory,
          pytest.raises(UsageError, match=r"PCM_INDEX=off") as refused):
        memory.recall("tomatoes", 5)
    assert (refused.value.exit_code, refused.value.http_status) == (2, 400)

"""The store and the side index together: the outbox replay after a crash, forget, model mismatch, demo recall."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pcm.conversations import parse_file, sample_paths
from pcm.errors import MemoryVersionError
from pcm.manifest import Manifest
from pcm.memory import Memory
from pcm.settings import Settings

INGEST_FOREVER = """
import sys
from datetime import datetime, timedelta
from pathlib import Path
from pcm.conversations import Conversation, Utterance
from pcm.memory import Memory
from pcm.settings import Settings

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


def test_a_killed_ingest_loses_nothing_and_the_index_catches_up(indexed: Settings) -> None:
    proc = subprocess.Popen([sys.executable, "-c", INGEST_FOREVER, str(indexed.memory)], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(4)  # let it write a few hundred posts, then kill it without warning, mid-write
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    with Memory.open(indexed) as memory:
        stored = {p.iri for p in memory.store.posts()}
        assert len(stored) > 5
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
        assert any("Biscuit" in p.content for p in answer.posts[:3])

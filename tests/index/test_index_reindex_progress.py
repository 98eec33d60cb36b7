"""A rebuild of the side index reports its progress as it embeds, not once per 2,048-record chunk: a reindex of a
few hundred posts (through `pcm serve` or not) sat at 0% and then jumped to 100%."""

from __future__ import annotations

from pathlib import Path

import pytest

from pcm.conversations import Conversation, Utterance
from pcm.memory import Memory
from pcm.settings import Settings
from tests.retrieval.traversal.test_traversal import WordEmbedder

EMBEDDER = WordEmbedder()


@pytest.fixture(autouse=True)
def _embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("pcm.index.get_embedder", lambda *args, **kwargs: EMBEDDER)


def test_reindex_progress_moves_before_the_end(tmp_path: Path) -> None:
    settings = Settings(memory=tmp_path / "m", index_enabled=False)
    turns = [Utterance("notes", i, "user", f"note number {i} about the garden and the dog") for i in range(300)]
    with Memory.init(settings, owner="Dana") as memory:
        memory.ingest([Conversation("notes", turns)])
    with Memory.open(settings.with_(index_enabled=True)) as memory:
        total = memory.post_count() + sum(1 for _ in memory.store.entities())
        steps: list[int] = []
        memory.reindex(progress=steps.append)
    assert sum(steps) == total
    assert len(steps) >= 4 and max(steps) < 300, steps  # several steps, none of them the whole rebuild

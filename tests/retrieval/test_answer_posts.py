"""The posts an answer cites (pcm.retrieval.answer.posts_of): read from the side index where it holds them, from
the store otherwise, and the same records in the same order either way."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from pcm.conversations import Conversation, Utterance
from pcm.index import SideIndex
from pcm.memory import Memory
from pcm.retrieval.answer import posts_of
from pcm.settings import Settings


def _conversations() -> list[Conversation]:
    t0 = datetime(2025, 3, 2, 10, 0, tzinfo=UTC)
    return [
        Conversation("a", [
            Utterance("a", 0, "user", "I adopted a beagle called Biscuit.", speaker="Dana", timestamp=t0, source_id="a:0"),
            Utterance("a", 1, "assistant", "Lovely! How old is she?", timestamp=t0 + timedelta(minutes=1)),
            Utterance("a", 2, "user", "Zwei Jahre alt, sagt der Züchter \u2013 «très calme».", speaker="Dana",
                      timestamp=datetime(2025, 3, 2, 12, 2, tzinfo=timezone(timedelta(hours=2)))),
        ]),
        Conversation("b", [
            Utterance("b", 0, "user", "No date on this one.", source_id="b:0"),
            Utterance("b", 1, "user", "Nor on this one, said by someone else.", speaker="Lee"),
        ]),
    ]


def test_cited_posts_from_the_index_are_those_the_store_lists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings(memory=tmp_path / "memory", index_enabled=True)
    with Memory.init(settings, owner="Dana Whitfield") as memory:
        memory.ingest(_conversations())
        iris = sorted(p.iri for p in memory.store.posts())
        assert set(memory.index.post_records(iris)) == set(iris)
        from_index = posts_of(memory.context, iris[::-1] + iris[:2])  # any order, repeats once
        held = memory.index.post_records
        monkeypatch.setattr(SideIndex, "post_records", lambda self, wanted: {
            iri: r for iri, r in held(wanted).items() if iri in iris[::2]})
        mixed = posts_of(memory.context, iris)  # half from the index, half from the store
    with Memory.open(replace(settings, index_enabled=False)) as plain:
        from_store = posts_of(plain.context, iris)
    assert len(from_store) == 5
    assert from_index == from_store
    assert mixed == from_store
    assert [p.session for p in from_store[:3]] == ["b", "b", "a"]  # undated first, then by time

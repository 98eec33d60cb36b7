"""The attribution check of episodic answers: a question about what one named person did, whose words match only
what someone else said about themselves, is not answered by the memory.

A small two-friend conversation: Alice tells of her pottery class and her garden, Bob of his marathon training and
his dog. Asking what Bob made in pottery class must be declined (only Alice took one); asking it of Alice must not,
nor must a question that names no one or both, nor one asked of a memory with a single speaker.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from pcm.conversations import Conversation, Utterance
from pcm.evaluation.metrics import says_not_in_memory
from pcm.index import PostRecord, SideIndex
from pcm.memory import Memory
from pcm.retrieval.answer import NOT_IN_MEMORY
from pcm.retrieval.ask import ask
from pcm.settings import Settings
from tests.index.test_index_side import HashEmbedder

TURNS = [
    ("s1", "Alice", "I finally finished a bowl in my pottery class, glazed it blue."),
    ("s1", "Bob", "Nice! I ran twenty miles this morning for the marathon."),
    ("s1", "Alice", "The pottery teacher says my next bowl could go in the show."),
    ("s1", "Bob", "My dog Rex came along for the first five miles."),
    ("s2", "Alice", "My tomatoes are finally ripe; the garden looks wild."),
    ("s2", "Bob", "The marathon is in three weeks and my knee still hurts."),
    ("s2", "Alice", "Rest that knee, and bring Rex to see the garden."),
    ("s2", "Bob", "Rex would dig up your tomatoes for sure."),
]


def _records(turns: list[tuple[str, str, str]]) -> list[PostRecord]:
    positions: dict[str, int] = {}
    out = []
    for session, speaker, text in turns:
        n = positions.get(session, 0)
        positions[session] = n + 1
        role = "user" if speaker == "Alice" else "assistant"
        out.append(PostRecord(f"urn:t:{session}:{n}", session, role, speaker, None, text, f"{session}:{n}", n))
    return out


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> SideIndex:
    idx = SideIndex.open(Path(tmp_path_factory.mktemp("attribution")) / "index", embedder=HashEmbedder())
    idx.upsert_posts(_records(TURNS))
    idx.optimize()
    return idx


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What did Bob make in his pottery class?", True),
        ("What did Alice make in her pottery class?", False),
        ("How far did Alice run for the marathon?", True),
        ("How far did Bob run for the marathon?", False),
        ("What did someone make in pottery class?", False),  # names no one: nothing to attribute
        ("What did Alice and Bob make in pottery class?", False),  # names both
    ],
)
def test_a_question_is_declined_only_when_others_said_its_words(index: SideIndex, query: str, expected: bool) -> None:
    assert index.said_by_others(query) is expected


def test_a_lower_rank_threshold_declines_more(index: SideIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a threshold past every candidate nothing is declined: the rank is what decides."""
    monkeypatch.setattr(index, "recall_config", index.recall_config.with_(attribution_rank=10_000))
    assert index.said_by_others("What did Bob make in his pottery class?") is False


def test_a_memory_with_one_speaker_never_declines(tmp_path: Path) -> None:
    idx = SideIndex.open(tmp_path / "index", embedder=HashEmbedder())
    idx.upsert_posts(_records([t for t in TURNS if t[1] == "Alice"]))
    idx.optimize()
    assert idx.said_by_others("What did Alice make in her pottery class?") is False
    assert idx.said_by_others("What did Bob make in his pottery class?") is False  # Bob is no speaker here


def test_episodic_ask_says_not_in_memory_and_keeps_answerable_evidence(tmp_path: Path) -> None:
    """Without an LLM, ask declines the misattributed question (showing whose words matched) and still answers
    the answerable one with its evidence."""
    when = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
    conversations = [
        Conversation(session, [
            Utterance(session, n, r.role, r.text, r.speaker, when, r.source_id)
            for n, r in enumerate(r for r in _records(TURNS) if r.session == session)
        ])
        for session in ("s1", "s2")
    ]
    memory = Memory.init(Settings(memory=tmp_path / "memory", index_enabled=True), owner="Alice")
    try:
        memory.ingest(conversations)
        declined = ask(memory.context, "What did Bob make in his pottery class?", client=None, as_of=when)
        assert declined.answer.startswith(NOT_IN_MEMORY) and declined.path == "none"
        assert says_not_in_memory(declined.answer)
        assert "s1:0" in {p.source_id for p in declined.posts}  # Alice's pottery turn, shown as the nearest
        answered = ask(memory.context, "What did Alice make in her pottery class?", client=None, as_of=when)
        assert answered.path == "episodic"
        assert "s1:0" in {p.source_id for p in answered.posts}
    finally:
        memory.close()

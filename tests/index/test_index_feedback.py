"""Pseudo-relevance feedback in episodic recall, and the query and post texts the levers beside it change.

The memory holds a list question's two answers: one shares the question's words, the other shares only its topic
with the first (the hash embedder's vectors are bags of words, so "topic" here is shared words). Chatter that
repeats the question's words fills the top without feedback; the second round, started from the first answer's
vector, brings its sibling up.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pcm.index import PostRecord, SideIndex
from pcm.index import text as index_text
from pcm.settings import RecallConfig
from tests.index.test_index_attribution import _records
from tests.index.test_index_side import HashEmbedder

TURNS = [
    ("s1", "Alice", "Any news?"),
    ("s1", "Bob", "I play the violin: violin lessons, violin orchestra, violin concerts."),
    ("s2", "Alice", "How was the weekend?"),
    ("s2", "Bob", "Violin orchestra concerts and violin lessons, the violin again."),
    ("s3", "Alice", "The weather was sunny and warm."),
    ("s3", "Bob", "Tomatoes grow slowly."),
    ("s4", "Alice", "We cooked pasta for dinner."),
    ("s4", "Bob", "The garden needs rain soon."),
]
QUESTION = "Which instruments does Bob play?"
FIRST, SIBLING = "s1:1", "s2:1"


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> SideIndex:
    # content diversity would move the sibling (a near-duplicate of the first answer) down: each lever alone
    idx = SideIndex.open(
        Path(tmp_path_factory.mktemp("feedback")) / "index",
        embedder=HashEmbedder(),
        recall_config=RecallConfig(diversity=0.0),
    )
    idx.upsert_posts(_records(TURNS))
    idx.optimize()
    return idx


def _ids(index: SideIndex, query: str, k: int, **filters: object) -> list[str | None]:
    return [h.source_id for h in index.recall(query, k, **filters)]  # type: ignore[arg-type]


def test_feedback_brings_up_the_sibling_of_the_first_answer(
    index: SideIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index, "recall_config", index.recall_config.with_(feedback_posts=0))
    plain = _ids(index, QUESTION, 2)
    assert plain[0] == FIRST and SIBLING not in plain
    monkeypatch.setattr(index, "recall_config", index.recall_config.with_(feedback_posts=1))
    # in a memory this small every post is in the first round's vector leg; the feedback leg must outweigh it
    monkeypatch.setattr(index, "recall_config", index.recall_config.with_(feedback_vector_weight=1.0))
    assert _ids(index, QUESTION, 2) == [FIRST, SIBLING]


def test_the_feedback_posts_keep_their_first_round_places(
    index: SideIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index, "recall_config", index.recall_config.with_(feedback_posts=0))
    head = _ids(index, QUESTION, 2)
    monkeypatch.setattr(index, "recall_config", index.recall_config.with_(feedback_posts=2))
    monkeypatch.setattr(index, "recall_config", index.recall_config.with_(feedback_vector_weight=5.0))  # a second round strong enough to reorder anything
    assert _ids(index, QUESTION, 2) == head
    monkeypatch.setattr(index, "recall_config", index.recall_config.with_(feedback_keeps_head=False))
    assert _ids(index, QUESTION, 2) != head


def test_feedback_respects_the_filters(index: SideIndex) -> None:
    assert {h.session for h in index.recall(QUESTION, 8, session="s2")} == {"s2"}
    assert {h.speaker for h in index.recall(QUESTION, 8, speaker="Alice")} == {"Alice"}


def test_feedback_is_deterministic(index: SideIndex) -> None:
    assert _ids(index, QUESTION, 8) == _ids(index, QUESTION, 8)


@pytest.mark.parametrize(
    ("setting", "query", "expected"),
    [
        (0, "What does Bob do to destress?", "What does Bob do to destress?"),
        (1, "What does Bob do to destress?", "Bob do to destress"),
        (2, "What does Bob do to destress in 2023?", "Bob destress 2023"),
        (2, "What did you do?", "What did you do?"),  # nothing left: the query as it was
    ],
)
def test_fts_query(monkeypatch: pytest.MonkeyPatch, setting: int, query: str, expected: str) -> None:
    monkeypatch.setattr(index_text, "FTS_CONTENT_ONLY", setting)
    assert index_text.fts_query(query) == expected


def test_the_speaker_prefix_of_the_embedded_text_can_wait_for_long_posts(monkeypatch: pytest.MonkeyPatch) -> None:
    short = PostRecord("urn:t:a", "s", "user", "Bob", None, "Wow, great!", "s:0", 0)
    long = PostRecord("urn:t:b", "s", "user", "Bob", None, "I play the violin in the city orchestra.", "s:1", 1)
    assert index_text.embed_text(short) == "Bob said: Wow, great!"
    monkeypatch.setattr(index_text, "EMBED_SPEAKER_MIN_WORDS", 4)
    assert index_text.embed_text(short) == "Wow, great!"
    assert index_text.embed_text(long) == "Bob said: I play the violin in the city orchestra."

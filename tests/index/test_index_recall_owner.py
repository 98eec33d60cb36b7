"""The owner prior of episodic recall: a first-person question that names no one favours the owner's own posts.

A small labelled memory: the owner (role ``user``) states facts, the assistant talks about the same topics at
length. "I" questions should find the owner's statements first; questions that name a speaker, say "you", or
filter by role must be ranked exactly as before.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pcm.index import PostRecord, SideIndex
from pcm.index import recall as ranking
from tests.index.test_index_side import HashEmbedder


def _post(session: str, position: int, role: str, text: str) -> PostRecord:
    return PostRecord(f"urn:t:{session}:{position}", session, role, None, None, text, f"{session}:{position}", position)


POSTS = [
    _post("s1", 0, "user", "I went to my cousin's wedding at a vineyard last month."),
    _post("s1", 1, "assistant", "Wedding venues: a vineyard wedding, a beach wedding, a barn wedding, a garden wedding."),
    _post("s1", 2, "assistant", "More wedding ideas for a wedding: wedding music and wedding flowers."),
    _post("s2", 0, "user", "I attended my college friend's wedding in the city too."),
    _post("s2", 1, "assistant", "City wedding tips: a rooftop wedding or a wedding in a loft."),
    _post("s2", 2, "assistant", "Wedding checklist: wedding dress, wedding cake, wedding rings."),
]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> SideIndex:
    idx = SideIndex.open(Path(tmp_path_factory.mktemp("owner")) / "index", embedder=HashEmbedder())
    idx.upsert_posts(POSTS)
    idx.optimize()
    return idx


def _ids(index: SideIndex, query: str, k: int = 2, **filters: object) -> list[str | None]:
    return [h.source_id for h in index.recall(query, k, **filters)]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("How many weddings have I attended?", True),
        ("What did I say about my cousin?", True),
        ("I'm curious which wedding I went to", True),
        ("What wedding venues did you suggest to me?", False),
        ("What are good wedding venues?", False),
        ("Which wedding did Irene attend?", False),
    ],
)
def test_asks_about_owner(query: str, expected: bool) -> None:
    assert ranking.asks_about_owner(query) is expected


def test_role_factors_keep_owner_posts_and_damp_the_rest() -> None:
    factors = ranking.role_factors(np.array([True, False, True]), 0.3)
    assert factors.tolist() == pytest.approx([1.0, 0.3, 1.0])


def test_first_person_question_brings_both_sessions_owner_posts_to_the_top(index: SideIndex) -> None:
    # the evidence spans two sessions, and the assistant's wedding-heavy turns outscore it on words alone
    assert set(_ids(index, "How many weddings have I attended?")) == {"s1:0", "s2:0"}


def test_second_person_question_is_not_reordered(index: SideIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    query = "What wedding venues did you suggest to me?"
    before = index.recall(query, 6)
    monkeypatch.setattr(index, "recall_config", index.recall_config.with_(other_role_factor=1.0))
    after = index.recall(query, 6)
    assert [h.post for h in before] == [h.post for h in after]
    assert [h.score for h in before] == pytest.approx([h.score for h in after])


def test_role_filter_turns_the_prior_off(index: SideIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    query = "How many weddings have I attended?"
    before = index.recall(query, 4, role="assistant")
    monkeypatch.setattr(index, "recall_config", index.recall_config.with_(other_role_factor=1.0))
    after = index.recall(query, 4, role="assistant")
    assert before and all(h.role == "assistant" for h in before)
    assert [(h.post, h.score) for h in before] == [(h.post, h.score) for h in after]


def test_prior_off_gives_the_plain_order(index: SideIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index, "recall_config", index.recall_config.with_(other_role_factor=1.0))
    assert set(_ids(index, "How many weddings have I attended?")) != {"s1:0", "s2:0"}

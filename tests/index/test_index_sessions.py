"""Two-stage recall (sessions first, then the best turns of each chosen session) and neighbouring turns.

Both are off by default (``SESSION_TURNS`` and ``NEIGHBOUR_SHARE`` are 0, see their docstrings for the figures);
these tests switch them on. The memory hides a list question's answers in two sessions: one session talks about
hiking at length, the other mentions it once, so plain fusion fills the top with the first session.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pcm.index import SideIndex
from pcm.index import recall as ranking
from tests.index.test_index_attribution import _records
from tests.index.test_index_side import HashEmbedder

TURNS = [
    ("s1", "Alice", "We went hiking on the mountain trail, hiking all day."),
    ("s1", "Bob", "Hiking that trail sounds hard; did your hiking boots hold up?"),
    ("s1", "Alice", "The hiking boots were fine, the trail was steep."),
    ("s1", "Bob", "Next time I will join the hiking trip."),
    ("s2", "Alice", "My tomatoes are finally ripe in the garden."),
    ("s2", "Bob", "Nice. I also started hiking on Sundays."),
    ("s2", "Alice", "The garden needs rain."),
]
QUESTION = "Who went hiking on the trail?"


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> SideIndex:
    idx = SideIndex.open(Path(tmp_path_factory.mktemp("sessions")) / "index", embedder=HashEmbedder())
    idx.upsert_posts(_records(TURNS))
    idx.optimize()
    return idx


def _sessions(index: SideIndex, query: str, k: int) -> list[str]:
    return [h.session for h in index.recall(query, k)]


def test_two_stage_brings_the_second_sessions_best_turn_up() -> None:
    # slots 0-2 in session 7, slot 3 in session 9: fused order puts all of session 7 first
    slots, scores = [0, 1, 2, 3], [0.9, 0.8, 0.7, 0.6]
    session_of = np.array([7, 7, 7, 9])
    staged = ranking.two_stage(slots, scores, session_of, sessions=2, turns=1, head=1, pool=1)
    assert staged == [0, 3, 1, 2]


def test_two_stage_takes_up_to_turns_per_session_and_keeps_the_head() -> None:
    slots, scores = [0, 1, 2, 3, 4, 5], [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]
    session_of = np.array([1, 1, 1, 2, 2, 3])
    staged = ranking.two_stage(slots, scores, session_of, sessions=3, turns=2, head=2, pool=2)
    # the head holds two of session 1; round one adds 2's and 3's best, round two 2's second
    assert staged == [0, 1, 3, 5, 4, 2]


def test_two_stage_scores_a_session_by_its_pool_of_best_posts() -> None:
    # session 2 has one strong post, session 3 three fair ones: with a pool of 3, session 3 is chosen
    slots, scores = [0, 1, 2, 3, 4], [0.9, 0.8, 0.5, 0.5, 0.5]
    session_of = np.array([1, 2, 3, 3, 3])
    assert ranking.two_stage(slots, scores, session_of, sessions=1, turns=1, head=0, pool=3)[0] == 2
    assert ranking.two_stage(slots, scores, session_of, sessions=1, turns=1, head=0, pool=1)[0] == 0


def test_two_stage_is_a_permutation_whatever_the_settings() -> None:
    rng = np.random.default_rng(3)
    session_of = rng.integers(0, 5, 40)
    scores = np.sort(rng.random(40))[::-1]
    slots = list(range(40))
    for sessions, turns, head, pool in [(1, 1, 0, 1), (5, 3, 2, 3), (10, 10, 50, 2)]:
        staged = ranking.two_stage(slots, scores, session_of, sessions=sessions, turns=turns, head=head, pool=pool)
        assert sorted(staged) == slots


def test_neighbours_inherit_a_share_and_join_the_candidates() -> None:
    fused = {5: 1.0, 9: 0.5}
    around = {5: [4, 6], 9: [8]}
    spread = ranking.spread_to_neighbours(fused, lambda slot: around[slot], 0.2)
    assert spread == pytest.approx({5: 1.0, 9: 0.5, 4: 0.2, 6: 0.2, 8: 0.1})
    assert ranking.spread_to_neighbours(fused, lambda slot: around[slot], 0.0) is fused


def test_recall_gives_a_turn_from_each_session_the_evidence_spans(
    index: SideIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _sessions(index, QUESTION, 2) == ["s1", "s1"]
    monkeypatch.setattr(ranking, "SESSION_TURNS", 1)
    monkeypatch.setattr(ranking, "SESSIONS", 2)
    monkeypatch.setattr(ranking, "SESSION_HEAD", 1)
    monkeypatch.setattr(ranking, "SESSION_POOL", 1)
    hits = index.recall(QUESTION, 2)
    assert [h.session for h in hits] == ["s1", "s2"]
    assert hits[1].source_id == "s2:1"


def test_two_stage_leaves_a_one_session_filter_alone(index: SideIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    before = [h.post for h in index.recall(QUESTION, 4, session="s1")]
    monkeypatch.setattr(ranking, "SESSION_TURNS", 2)
    assert [h.post for h in index.recall(QUESTION, 4, session="s1")] == before


def test_a_turn_between_two_matching_turns_rises_with_the_neighbour_share(
    index: SideIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ranking, "PRF_DOCS", 0)  # the feedback posts would keep the first place
    assert [h.source_id for h in index.recall(QUESTION, 1)] == ["s1:0"]
    monkeypatch.setattr(ranking, "NEIGHBOUR_SHARE", 0.5)
    assert [h.source_id for h in index.recall(QUESTION, 1)] == ["s1:1"]


def test_neighbours_respect_the_filters(index: SideIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ranking, "NEIGHBOUR_SHARE", 0.5)
    assert {h.session for h in index.recall(QUESTION, 7, session="s2")} == {"s2"}
    assert {h.speaker for h in index.recall(QUESTION, 7, speaker="Bob")} == {"Bob"}


@pytest.mark.parametrize(
    ("query", "named", "expected"),
    [
        ("What did Alice paint?", {"Alice"}, "What did paint?"),
        ("What did Alice and Bob paint?", {"Alice", "Bob"}, "What did Alice and Bob paint?"),
        ("What did I paint?", set(), "What did I paint?"),
        ("Who is Alice?", {"Alice"}, "Who is Alice?"),  # nothing left to embed: the name stays
    ],
)
def test_the_vector_leg_drops_the_one_named_speaker(query: str, named: set[str], expected: str) -> None:
    assert SideIndex._vector_text(query, named) == expected


def test_the_name_stays_in_the_vector_query_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ranking, "NAMED_SPEAKER_IN_VECTOR", True)
    assert SideIndex._vector_text("What did Alice paint?", {"Alice"}) == "What did Alice paint?"

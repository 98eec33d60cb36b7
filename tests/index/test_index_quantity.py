"""Quantity questions: which unit a question asks an amount of, which texts state one, and the recall leg that
lifts those texts among the fused candidates."""

from __future__ import annotations

from pathlib import Path

import pytest

from pcm.index import SideIndex
from pcm.index.quantity import Unit, asked_unit, states
from tests.index.test_index_attribution import _records
from tests.index.test_index_side import HashEmbedder


@pytest.mark.parametrize(
    ("question", "unit"),
    [
        ("How many hours have I spent playing games in total?", Unit("time", "hour")),
        ("how many days did the trip take", Unit("time", "day")),
        ("How long did it take me to finish the quilt?", Unit("time")),
        ("How much time do I spend on my commute?", Unit("time")),
        ("How much money did I spend on gifts?", Unit("money")),
        ("How much did the new bike cost?", Unit("money")),
        ("How many miles did I run last week?", Unit("measure", "mile")),
        ("How many weddings have I attended this year?", None),
        ("How many times did I go to the beach?", None),
        ("How much did I enjoy the concert?", None),
        ("What did I buy for my sister?", None),
    ],
)
def test_the_asked_unit(question: str, unit: Unit | None) -> None:
    assert asked_unit(question) == unit


@pytest.mark.parametrize(
    ("text", "unit", "stated"),
    [
        ("Celeste took me 10 hours to complete.", Unit("time", "hour"), True),
        ("It was a 25-hour game, longer than I thought.", Unit("time", "hour"), True),
        ("I spent around seventy hours on it.", Unit("time", "hour"), True),
        ("I played for hours and hours.", Unit("time", "hour"), False),
        ("Celeste took me 10 days.", Unit("time", "hour"), False),
        ("We stayed for a week in Lisbon.", Unit("time"), True),
        ("We stayed in Lisbon.", Unit("time"), False),
        ("The bike was $1,250 after the discount.", Unit("money"), True),
        ("It cost me 40 euros.", Unit("money"), True),
        ("It cost a fortune.", Unit("money"), False),
        ("I ran 5 miles on Sunday.", Unit("measure", "mile"), True),
        ("A mile from home.", Unit("measure", "mile"), False),
    ],
)
def test_what_states_an_amount(text: str, unit: Unit, stated: bool) -> None:
    assert states(text, unit) is stated


def test_a_quantity_question_recalls_the_turns_that_state_the_amount(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twelve sessions say the question's words ("spent hours playing games in total") without an amount; two
    turns say how many hours a game took and share only "hours" with it. The quantity leg brings those two up to
    just after the feedback head; without it they rank below the chatter."""
    months = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"]
    turns = []
    for session, month in enumerate(months):
        turns.append((f"s{session}", "Alice", f"In {month} I spent hours playing games, in total more hours than my friends"))
        turns.append((f"s{session}", "Bob", f"Sounds fun, what did you like about {month}?"))
    stated = {"Hollow Knight took me 30 hours, what a ride", "Celeste lasted about twelve hours for me"}
    turns += [("s1", "Alice", "Hollow Knight took me 30 hours, what a ride"), ("s7", "Alice", "Celeste lasted about twelve hours for me")]
    index = SideIndex.open(tmp_path / "index", embedder=HashEmbedder())
    index.upsert_posts(_records(turns))
    index.optimize()
    question = "How many hours have I spent playing games in total?"

    def top(n: int) -> set[str]:
        return {hit.text for hit in index.recall(question, n)}

    assert stated <= top(index.recall_config.feedback_posts + 2)
    monkeypatch.setattr(index, "recall_config", index.recall_config.with_(quantity_weight=0.0))
    assert not stated & top(10)
    index.close()

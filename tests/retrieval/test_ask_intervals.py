"""Reading a question that asks how long lay between two events, and the date a fact line is about."""

from __future__ import annotations

from datetime import date

import pytest

from pcm.retrieval.intervals import line_date
from pcm.retrieval.wording import asked_parts


@pytest.mark.parametrize(
    ("question", "parts"),
    [
        ("How many days after buying the espresso machine did Dana's car break down?",
         ("days", "buying the espresso machine", "Dana's car break down")),
        ("How many days before Rachel's wedding did Dana order her jumpsuit?",
         ("days", "Rachel's wedding", "Dana order her jumpsuit")),
        ("how many weeks passed between the move and   the party ?", ("weeks", "the move", "the party")),
        ("How many months between my promotion and my new job", ("months", "my promotion", "my new job")),
    ],
)
def test_the_two_events_are_read_from_the_question(question: str, parts: tuple[str, str, str]) -> None:
    assert asked_parts(question) == parts


@pytest.mark.parametrize(
    "question",
    ["How many pets does Dana have?", "How many days did the trip last?", "When did Dana buy the espresso machine?",
     "How many days after the move?"],
)
def test_other_questions_are_not_intervals(question: str) -> None:
    assert asked_parts(question) is None


def test_a_line_is_about_its_start_date_else_its_date_else_the_first_it_writes() -> None:
    trip = "summer trip (TravelAction): end date Sunday 29 June 2025; participant Lily; start date Friday 20 June 2025"
    assert line_date(trip) == date(2025, 6, 20)
    wedding = "Rachel's wedding (Marriage): attendee Dana; date Saturday 6 September 2025"
    assert line_date(wedding) == date(2025, 9, 6)
    assert line_date("job (WorkHistory): end date Friday 12 September 2025") == date(2025, 9, 12)
    ended = "party (SocialEvent): end date Sunday 9 February 2025; date Saturday 8 February 2025"
    assert line_date(ended) == date(2025, 2, 8)  # "end date" is not "date"
    assert line_date("moving (MoveAction): start date September 2025") is None  # a month is no day to count from
    assert line_date("Biscuit (Pet): age 4") is None

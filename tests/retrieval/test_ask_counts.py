"""Counting what a person has from the stored facts' lines."""

from __future__ import annotations

import pytest

from pcm.retrieval.counts import count_answer
from pcm.retrieval.wording import asked_count

LINES = [
    "Pet 142 (Pet): pet species cat; Alex Lindqvist 42 has pet Pet 142",
    "Avery Smith 2 (Person): has pet Pet 102; has pet Pet 2; agent of Avery Smith 2 buying item 152",
    "Dana Whitfield: has pet Biscuit, Mochi (2)",
    "Dana Whitfield: has daughter Lily",
    "Biscuit (Pet): age 4; pet breed beagle",
]


@pytest.mark.parametrize(
    ("question", "asked"),
    [
        ("How many pets does Dana have?", ("pet", "Dana")),
        ("how many   children do I have", ("child", "I")),
        ("How many cousins does Dana's husband have?", ("cousin", "Dana's husband")),
        ("How many records are in Dana's collection?", None),
        ("How many days after the move did Dana start?", None),
    ],
)
def test_the_thing_and_the_person_are_read_from_the_question(question: str, asked: tuple[str, str] | None) -> None:
    assert asked_count(question) == asked


def test_the_persons_gathered_line_gives_the_count_not_other_peoples_lines() -> None:
    found = count_answer("How many pets does Dana have?", LINES)
    assert found is not None and found.text == "2 (Biscuit, Mochi)" and found.line == 2


def test_separate_facts_on_one_line_are_added_and_i_is_the_owner() -> None:
    found = count_answer("How many pets does Avery Smith 2 have?", LINES)
    assert found is not None and found.text == "2 (Pet 102, Pet 2)"
    mine = count_answer("How many daughters do I have?", LINES, owner_name="Dana Whitfield")
    assert mine is not None and mine.text == "1 (Lily)"


def test_nothing_is_counted_when_no_line_or_two_lines_say_it() -> None:
    assert count_answer("How many cars does Dana have?", LINES) is None
    twice = [*LINES, "Dana Whitfield (Person): has pet Rex"]
    assert count_answer("How many pets does Dana have?", twice) is None
    assert count_answer("How many pets does Morgan have?", LINES) is None

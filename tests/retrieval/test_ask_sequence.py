"""What came just before or after a thing of the same kind, read from the dated fact lines."""

from __future__ import annotations

import pytest

from pcm.retrieval.sequence import neighbour_answer
from pcm.retrieval.wording import asked_side

LINES = [
    "Cascade Health (Company): location Seattle; Dana Whitfield works for Cascade Health",
    "job at Cascade Health (WorkHistory): employed in Cascade Health; is current yes; start date Monday 22 September 2025",
    "job at Harbor Analytics (WorkHistory): employed in Harbor Analytics; end date Friday 12 September 2025",
    "job at Blue Mesa (WorkHistory): employed in Blue Mesa; start date Monday 3 June 2019",
    "promotion to Senior Data Analyst (BusinessEvent): agent Harbor Analytics; start date Saturday 1 March 2025",
    "Dana Whitfield: works for Cascade Health",
]


@pytest.mark.parametrize(
    ("question", "asked"),
    [
        ("Where did Dana work before Cascade Health?", ("before", "Cascade Health")),
        ("Which job did I have after   Blue Mesa ?", ("after", "Blue Mesa")),
        ("What did Dana do prior to the promotion?", ("before", "the promotion")),
    ],
)
def test_the_side_and_the_anchor_are_read_from_the_question(question: str, asked: tuple[str, str]) -> None:
    assert asked_side(question) == asked


@pytest.mark.parametrize(
    "question",
    ["How many days before Rachel's wedding did Dana order her jumpsuit?", "What did Dana eat before lunch?",
     "Where was Dana before 2020?", "What did Dana do before March?", "Where does Dana work now?"],
)
def test_times_intervals_and_other_questions_are_not_sequences(question: str) -> None:
    assert asked_side(question) is None


def test_the_nearest_dated_line_of_the_anchors_kind_on_the_asked_side_answers() -> None:
    before = neighbour_answer("Where did Dana work before Cascade Health?", LINES)
    assert before is not None and before.lines == (2, 1)
    assert before.text.startswith("job at Harbor Analytics: employed in Harbor Analytics; end date Friday 12 September")
    assert before.text.endswith("(before job at Cascade Health: Monday 22 September 2025).")
    after = neighbour_answer("Where did Dana work after Blue Mesa?", LINES)
    assert after is not None and after.lines == (2, 3)  # Harbor Analytics, not the promotion (another kind)


def test_nothing_is_answered_without_one_anchor_or_a_sibling_on_that_side() -> None:
    assert neighbour_answer("Where did Dana work before Blue Mesa?", LINES) is None  # the first job
    assert neighbour_answer("Where did Dana work before Acme?", LINES) is None  # never mentioned
    assert neighbour_answer("What happened before the promotion?", LINES) is None  # no other BusinessEvent
    twice = [*LINES, "job at Cascade Health Labs (WorkHistory): start date Monday 1 July 2024"]
    assert neighbour_answer("Where did Dana work before Cascade Health?", twice) is None

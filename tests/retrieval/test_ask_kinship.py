"""Reading which relative of whom a question asks."""

from __future__ import annotations

import pytest

from pcm.retrieval.kinship import KINDS
from pcm.retrieval.wording import asked_kin


@pytest.mark.parametrize(
    ("question", "who", "kind", "alone"),
    [
        ("What is the name of Dana's brother?", "Dana", "brother", True),
        ("what are the names of Dana's   children", "Dana", "child", True),
        ("Who is my mother?", "my", "mother", True),
        ("Who's Dana Whitfield’s wife?", "Dana Whitfield", "wife", True),
        ("What's the name of my son", "my", "son", True),
        ("What is my daughter's name?", "my", "daughter", True),
        ("Who is Joanna's brother's wife?", "Joanna", "brother", False),
        ("Who is Dana Whitfield’s wife?", "Dana Whitfield", "wife", True),
        ("What is the name of Dana's sister, and where does she live?", "Dana", "sister", False),
    ],
)
def test_the_person_the_kind_and_whether_it_is_asked_alone_are_read(question: str, who: str | None,
                                                                     kind: str | None, alone: bool | None) -> None:
    asked = asked_kin(question, KINDS)
    if who is None:
        assert asked is None
    else:
        assert asked is not None and (asked.who, asked.kind, asked.alone) == (who, kind, alone)


@pytest.mark.parametrize("question", ["What is the name of Dana's dog?", "Who is Dana's vet?", "Where is my car?"])
def test_other_questions_are_not_about_kin(question: str) -> None:
    assert asked_kin(question, KINDS) is None

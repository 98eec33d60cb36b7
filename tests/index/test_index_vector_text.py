"""The text the vector leg embeds: a question about one named speaker loses the name (the speaker prior already
favours that speaker's posts), unless nothing else would be left."""

from __future__ import annotations

import pytest

from pcm.index import SideIndex


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


def test_the_name_stays_in_the_vector_query_when_asked() -> None:
    assert SideIndex._vector_text("What did Alice paint?", {"Alice"}, keep_name=True) == "What did Alice paint?"

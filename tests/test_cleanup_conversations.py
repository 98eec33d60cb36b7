"""The public parser pieces the evaluation loader builds on: one decoded LoCoMo sample, one LongMemEval question."""

from __future__ import annotations

from pathlib import Path

import pytest

import pcm.conversations as conversations
from pcm.conversations import list_field, longmemeval_sessions, parse_locomo
from pcm.errors import InputError


def test_no_private_parser_is_imported_across_modules() -> None:
    import pcm.evaluation.datasets as datasets

    for name in ("list_field", "longmemeval_sessions", "parse_locomo"):
        assert getattr(datasets, name) is getattr(conversations, name)
        assert not hasattr(conversations, "_" + name)  # renamed, no alias left behind


def test_parse_locomo_takes_one_decoded_sample() -> None:
    sample = {"sample_id": "c1", "conversation": {
        "speaker_a": "Ann", "speaker_b": "Bo", "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "hi"}, {"speaker": "Bo", "dia_id": "D1:2", "text": "yo"}],
    }}
    [conv] = parse_locomo(Path("x.json"), sample)
    assert conv.id == "c1:session_1"
    assert [(u.role, u.source_id) for u in conv.utterances] == [("user", "D1:1"), ("other", "D1:2")]


def test_longmemeval_sessions_and_list_fields_given_as_literal_text() -> None:
    question = {"haystack_session_ids": "['s1']", "haystack_dates": ["2023/05/20 (Sat) 02:21"],
                "haystack_sessions": [[{"role": "user", "content": "I moved to Lisbon"}]]}
    [conv] = longmemeval_sessions("q1", question)
    assert conv.id == "s1" and conv.utterances[0].source_id == "s1:0"
    assert list_field(question, "haystack_session_ids", "q1") == ["s1"]
    with pytest.raises(InputError, match="q1: answer_session_ids must be a list"):
        list_field(question, "answer_session_ids", "q1")

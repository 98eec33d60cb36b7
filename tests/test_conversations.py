"""Conversation parsers: every source format, format detection, bad input, timestamps and the bundled samples."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from pcm.conversations import (
    FORMATS,
    ROLES,
    Conversation,
    detect_format,
    parse_file,
    parse_text_utterance,
    parse_timestamp,
    sample_paths,
)
from pcm.errors import InputError, UsageError
from pcm.resources import samples_dir
from tests.conftest import shared_path

LOCOMO = ("data", "locomo", "locomo-conv-26.json")
LONGMEMEVAL = ("data", "longmemeval", "longmemeval-oracle-dev48.json")


def write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def write_lines(path: Path, rows: list[Any]) -> Path:
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n", encoding="utf-8")
    return path


def conversation(cid: str = "c1", **extra: Any) -> dict[str, Any]:
    return {
        "conversation_id": cid,
        "messages": [
            {"id": "m1", "role": "user", "content": "I bought a bike.", "timestamp": "2025-03-01T10:00:00"},
            {"id": "m2", "role": "assistant", "content": "Nice! Which one?"},
        ],
        **extra,
    }


@pytest.fixture(scope="module")
def locomo() -> list[Conversation]:
    return parse_file(shared_path(*LOCOMO))


@pytest.fixture(scope="module")
def longmemeval() -> list[Conversation]:
    return parse_file(shared_path(*LONGMEMEVAL))


# -- LoCoMo ------------------------------------------------------------------------------------------------------------


def test_locomo_one_conversation_per_session_in_order(locomo: list[Conversation]) -> None:
    assert [c.id for c in locomo] == [f"conv-26:session_{n}" for n in range(1, 20)]
    assert sum(len(c.utterances) for c in locomo) == 419


def test_locomo_known_turn_has_session_date_speaker_and_role(locomo: list[Conversation]) -> None:
    first = locomo[0]
    assert first.started == datetime(2023, 5, 8, 13, 56)
    turn = next(u for u in first.utterances if u.source_id == "D1:3")
    assert turn.position == 2
    assert turn.speaker == "Caroline" and turn.role == "user"
    assert turn.timestamp == datetime(2023, 5, 8, 13, 56)
    assert turn.session == "conv-26:session_1"
    assert "LGBTQ support group yesterday" in turn.content


def test_locomo_roles_and_timestamps(locomo: list[Conversation]) -> None:
    for conv in locomo:
        assert [u.position for u in conv.utterances] == list(range(len(conv.utterances)))
        assert all(u.timestamp == conv.started for u in conv.utterances)
        assert {(u.speaker, u.role) for u in conv.utterances} <= {("Caroline", "user"), ("Melanie", "other")}
    assert locomo[15].started == datetime(2023, 9, 13, 0, 9)  # "12:09 am on 13 September, 2023"


def test_locomo_photo_caption_is_appended(locomo: list[Conversation]) -> None:
    turn = next(u for u in locomo[0].utterances if u.source_id == "D1:5")
    assert turn.content.endswith(
        "support. [shares a photo: a photo of a dog walking past a wall with a painting of a woman]"
    )


def test_locomo_single_sample_object_and_caption_only_turn(tmp_path: Path) -> None:
    sample = {
        "sample_id": "s1",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_2": [{"speaker": "Bob", "dia_id": "D2:1", "text": "", "blip_caption": "a cat"}],
            "session_2_date_time": "9:00 am on 2 June, 2023",
            "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "Hi"}],
            "session_3_date_time": "9:00 am on 3 June, 2023",
        },
    }
    convs = parse_file(write_json(tmp_path / "one.json", sample))
    assert [c.id for c in convs] == ["s1:session_1", "s1:session_2"]
    assert convs[0].started is None and convs[0].utterances[0].timestamp is None
    assert convs[1].utterances[0].content == "[shares a photo: a cat]"
    assert convs[1].utterances[0].role == "other"


# -- LongMemEval -------------------------------------------------------------------------------------------------------


def test_longmemeval_sessions_deduplicated_with_dates(longmemeval: list[Conversation]) -> None:
    assert len(longmemeval) == 82
    assert sum(len(c.utterances) for c in longmemeval) == 946
    assert len({c.id for c in longmemeval}) == 82
    first = longmemeval[0]
    assert first.id == "answer_ac0140ce_1"
    assert first.started == datetime(2023, 4, 11, 23, 44)
    assert first.utterances[0].role == "user" and first.utterances[1].role == "assistant"
    assert first.utterances[1].source_id == "answer_ac0140ce_1:1"
    assert all(u.timestamp == first.started for u in first.utterances)


def test_longmemeval_roles(longmemeval: list[Conversation]) -> None:
    assert {u.role for c in longmemeval for u in c.utterances} == {"user", "assistant"}


def lme_question(qid: str, sessions: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {
        "question_id": qid,
        "haystack_session_ids": list(sessions),
        "haystack_dates": ["2023/05/08 (Mon) 13:56"] * len(sessions),
        "haystack_sessions": list(sessions.values()),
    }


TURNS = [
    {"role": "user", "content": "I run 5K.", "has_answer": True},
    {"role": "assistant", "content": "Great."},
]


def test_longmemeval_shared_session_kept_once(tmp_path: Path) -> None:
    data = [lme_question("q1", {"s1": TURNS}), lme_question("q2", {"s2": TURNS, "s1": TURNS})]
    convs = parse_file(write_json(tmp_path / "lme.json", data))
    assert [c.id for c in convs] == ["s1", "s2"]


def test_longmemeval_python_literal_strings(tmp_path: Path) -> None:
    question = lme_question("q1", {"s1": TURNS})
    for key in ("haystack_session_ids", "haystack_dates", "haystack_sessions"):
        question[key] = str(question[key])  # Python repr: single quotes, True
    convs = parse_file(write_json(tmp_path / "lme.json", [question]))
    assert convs[0].id == "s1" and convs[0].started == datetime(2023, 5, 8, 13, 56)
    assert [u.content for u in convs[0].utterances] == ["I run 5K.", "Great."]


def test_longmemeval_literal_is_not_evaluated_as_code(tmp_path: Path) -> None:
    question = lme_question("q1", {"s1": TURNS})
    question["haystack_session_ids"] = "__import__('os').getcwd()"
    with pytest.raises(InputError, match="haystack_session_ids.*neither a JSON nor a Python literal"):
        parse_file(write_json(tmp_path / "lme.json", [question]))


# -- json and jsonl ----------------------------------------------------------------------------------------------------


def test_json_list_with_all_fields(tmp_path: Path) -> None:
    data = [
        conversation("c1", title="Bikes", started="2025-03-01"),
        {
            "conversation_id": 7,
            "messages": [{"role": "Human", "content": " hi ", "speaker": "Dana", "timestamp": 1735689600}],
        },
    ]
    first, second = parse_file(write_json(tmp_path / "c.json", data))
    assert first.id == "c1" and first.title == "Bikes" and first.started == datetime(2025, 3, 1)
    assert [(u.position, u.role, u.source_id) for u in first.utterances] == [
        (0, "user", "m1"),
        (1, "assistant", "m2"),
    ]
    assert first.utterances[0].timestamp == datetime(2025, 3, 1, 10, 0)
    assert first.utterances[1].timestamp is None
    only = second.utterances[0]
    assert second.id == "7" and only.role == "user" and only.content == "hi" and only.speaker == "Dana"
    assert only.timestamp == datetime(2025, 1, 1, tzinfo=UTC)


def test_json_single_object(tmp_path: Path) -> None:
    (conv,) = parse_file(write_json(tmp_path / "c.json", conversation("solo")))
    assert conv.id == "solo" and len(conv.utterances) == 2


@pytest.mark.parametrize(
    ("alias", "role"), [("human", "user"), ("AI", "assistant"), ("bot", "assistant"), ("model", "assistant")]
)
def test_role_aliases(tmp_path: Path, alias: str, role: str) -> None:
    data = {"conversation_id": "c", "messages": [{"role": alias, "content": "x"}]}
    assert parse_file(write_json(tmp_path / "c.json", data))[0].utterances[0].role == role


def test_jsonl_message_lines_grouped_by_conversation(tmp_path: Path) -> None:
    rows = [
        {"conversation_id": "a", "role": "user", "content": "one", "id": "a1"},
        {"session": "b", "role": "user", "content": "other"},
        {"conversation_id": "a", "role": "assistant", "content": "two", "timestamp": "2025-01-02 09:30"},
    ]
    path = write_lines(tmp_path / "m.jsonl", rows)
    path.write_text(path.read_text() + "\n\n", encoding="utf-8")  # trailing blank lines are fine
    a, b = parse_file(path)
    assert (a.id, [u.content for u in a.utterances], [u.position for u in a.utterances]) == (
        "a",
        ["one", "two"],
        [0, 1],
    )
    assert a.utterances[1].timestamp == datetime(2025, 1, 2, 9, 30)
    assert b.id == "b" and b.utterances[0].session == "b"


def test_jsonl_conversation_per_line(tmp_path: Path) -> None:
    convs = parse_file(write_lines(tmp_path / "c.jsonl", [conversation("x"), conversation("y")]))
    assert [c.id for c in convs] == ["x", "y"]


# -- detection ---------------------------------------------------------------------------------------------------------


def test_detect_shared_files() -> None:
    assert detect_format(shared_path(*LOCOMO)) == "locomo"
    assert detect_format(shared_path(*LONGMEMEVAL)) == "longmemeval"


def test_detect_json_and_jsonl(tmp_path: Path) -> None:
    assert detect_format(write_json(tmp_path / "list.json", [conversation()])) == "json"
    assert detect_format(write_json(tmp_path / "one.json", conversation())) == "json"
    assert (
        detect_format(write_lines(tmp_path / "lines.json", [conversation("a"), conversation("b")])) == "jsonl"
    )
    one_message = {"conversation_id": "a", "role": "user", "content": "hi"}
    assert detect_format(write_lines(tmp_path / "single.txt", [one_message])) == "jsonl"
    assert detect_format(write_lines(tmp_path / "single.jsonl", [conversation()])) == "jsonl"
    assert set(FORMATS) == {"json", "jsonl", "locomo", "longmemeval"}


@pytest.mark.parametrize("content", ['{"hello": 1}', "[1, 2]", '"text"', ""])
def test_detect_unknown_shape(tmp_path: Path, content: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError, match=r"x\.json: (unknown conversation format|file is empty)"):
        detect_format(path)


def test_explicit_format_overrides_detection(tmp_path: Path) -> None:
    path = write_json(tmp_path / "c.json", conversation())
    with pytest.raises(InputError, match="sample #0: expected an object with a 'conversation' object"):
        parse_file(path, "locomo")
    with pytest.raises(
        UsageError, match="unknown conversation format 'csv'.*json, jsonl, locomo, longmemeval"
    ):
        parse_file(path, "csv")


# -- bad input ---------------------------------------------------------------------------------------------------------


def message(**fields: Any) -> dict[str, Any]:
    return {"conversation_id": "c1", "messages": [{"role": "user", "content": "fine"}, fields]}


BAD_JSON = [
    (
        message(role="robot", content="x"),
        r"conversation 'c1', message 1: unknown role 'robot' \(allowed: user, assistant, system, other; also accepted: human=user",
    ),
    (message(role="user", content="   "), r"conversation 'c1', message 1: content is empty"),
    (message(role="user"), r"conversation 'c1', message 1: content must be text, found nothing"),
    (
        message(role="user", content="x", timestamp="last week"),
        r"message 1: unrecognised timestamp 'last week' \(expected ISO 8601",
    ),
    (
        {
            "conversation_id": "c1",
            "messages": [
                {"id": "m", "role": "user", "content": "a"},
                {"id": "m", "role": "user", "content": "b"},
            ],
        },
        r"conversation 'c1': duplicate message id 'm'",
    ),
    ([conversation("c1"), conversation("c1")], r"conversation id 'c1' appears twice"),
    ([conversation(), "oops"], r"conversation #1: expected a conversation object, found a string"),
    ([{"messages": []}], r"conversation #0: missing or empty conversation_id"),
    (
        {"conversation_id": "c1", "messages": {"role": "user"}},
        r"conversation 'c1': 'messages' must be a list, found an object",
    ),
    ({"conversation_id": "c1", "messages": []}, r"conversation 'c1': has no messages"),
]


@pytest.mark.parametrize(("data", "pattern"), BAD_JSON)
def test_bad_json_input(tmp_path: Path, data: Any, pattern: str) -> None:
    path = write_json(tmp_path / "bad.json", data)
    with pytest.raises(InputError, match=pattern) as caught:
        parse_file(path, "json")
    assert str(caught.value).startswith(str(path)) and "\n" not in str(caught.value)


def test_malformed_json_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('[\n  {"conversation_id": "c1",\n   "messages": [}\n]\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"broken\.json: malformed JSON at line 3, column 17"):
        parse_file(path)


def test_wrong_top_level_shape(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="expected a conversation object or a list of them, found a number"):
        parse_file(write_json(tmp_path / "n.json", 42), "json")
    with pytest.raises(InputError, match="expected a list of LongMemEval questions, found a string"):
        parse_file(write_json(tmp_path / "s.json", "hi"), "longmemeval")


@pytest.mark.parametrize(
    ("lines", "pattern"),
    [
        (
            ['{"conversation_id": "a", "role": "user", "content": "x"}', "{oops"],
            r"bad\.jsonl:2: malformed JSON at column 2",
        ),
        (['{"role": "user", "content": "x"}'], r"bad\.jsonl:1: missing or empty conversation_id or session"),
        (["[1]"], r"bad\.jsonl:1: expected a message or conversation object, found a list"),
        (
            [
                '{"conversation_id": "a", "role": "user", "content": "x"}',
                '{"conversation_id": "a", "role": "wizard", "content": "y"}',
            ],
            r"bad\.jsonl:2: conversation 'a', message 1: unknown role 'wizard'",
        ),
        (
            [json.dumps(conversation("a")), '{"conversation_id": "a", "role": "user", "content": "x"}'],
            r"bad\.jsonl:2: conversation id 'a' appears twice",
        ),
        (
            [
                '{"conversation_id": "a", "role": "user", "content": "x", "id": 1}',
                '{"conversation_id": "a", "role": "user", "content": "y", "id": "1"}',
            ],
            r"conversation 'a': duplicate message id '1'",
        ),
    ],
)
def test_bad_jsonl_input(tmp_path: Path, lines: list[str], pattern: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(InputError, match=pattern):
        parse_file(path)


def test_bad_locomo_input(tmp_path: Path) -> None:
    body = {
        "speaker_a": "Ann",
        "speaker_b": "Bob",
        "session_1": [{"speaker": "Cy", "dia_id": "D1:1", "text": "hi"}],
    }
    path = write_json(tmp_path / "l.json", [{"sample_id": "s", "conversation": body}])
    with pytest.raises(
        InputError,
        match=r"sample 's', session_1, turn 0: speaker 'Cy' is neither of the sample's speakers \('Ann' or 'Bob'\)",
    ):
        parse_file(path)
    body["session_1"] = [
        {"speaker": "Ann", "dia_id": "D1:1", "text": "a"},
        {"speaker": "Bob", "dia_id": "D1:1", "text": "b"},
    ]
    with pytest.raises(InputError, match=r"sample 's', session_1: duplicate message id 'D1:1'"):
        parse_file(write_json(path, [{"sample_id": "s", "conversation": body}]))


def test_bad_longmemeval_input(tmp_path: Path) -> None:
    question = lme_question("q1", {"s1": TURNS})
    question["haystack_dates"] = []
    with pytest.raises(InputError, match=r"question 'q1': .* differ in length \(1, 0, 1\)"):
        parse_file(write_json(tmp_path / "a.json", [question]))
    changed = [{"role": "user", "content": "I run 10K."}, TURNS[1]]
    data = [lme_question("q1", {"s1": TURNS}), lme_question("q2", {"s1": changed})]
    with pytest.raises(InputError, match=r"question 'q2': session 's1' differs from an earlier copy"):
        parse_file(write_json(tmp_path / "b.json", data))
    data = [lme_question("q1", {"s1": [{"role": "tool", "content": "x"}]})]
    with pytest.raises(InputError, match=r"question 'q1', session 's1', turn 0: unknown role 'tool'"):
        parse_file(write_json(tmp_path / "c.json", data))


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="missing.json: no such file"):
        parse_file(tmp_path / "missing.json")
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"conversation_id": "caf\xe9"}')
    with pytest.raises(InputError, match="latin.json: not UTF-8 text"):
        parse_file(latin)


# -- timestamps --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2025-03-01T10:15:00", datetime(2025, 3, 1, 10, 15)),
        ("2025-03-01T10:15:00Z", datetime(2025, 3, 1, 10, 15, tzinfo=UTC)),
        ("2025-03-01T10:15:00-08:00", datetime(2025, 3, 1, 10, 15, tzinfo=timezone(timedelta(hours=-8)))),
        ("2025-03-01", datetime(2025, 3, 1)),
        ("2023/05/08 (Mon) 13:56", datetime(2023, 5, 8, 13, 56)),
        ("2023/05/08", datetime(2023, 5, 8)),
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56)),
        ("12:09 am on 13 September, 2023", datetime(2023, 9, 13, 0, 9)),
        ("12:30 PM on 1 Jan, 2024", datetime(2024, 1, 1, 12, 30)),
        ("8 May, 2023", datetime(2023, 5, 8)),
        ("May 8, 2023", datetime(2023, 5, 8)),
    ],
)
def test_parse_timestamp_shapes(text: str, expected: datetime) -> None:
    parsed = parse_timestamp(text)
    assert parsed == expected and parsed.tzinfo == expected.tzinfo


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("yesterday", "expected ISO 8601"),
        ("13:00 pm on 8 May, 2023", "not on a 12-hour clock"),
        ("1:00 pm on 8 Smarch, 2023", "unknown month 'Smarch'"),
        ("2023/02/30 (Thu) 10:00", "day is out of range"),
        ("  ", "non-empty string"),
    ],
)
def test_parse_timestamp_rejects(text: str, reason: str) -> None:
    with pytest.raises(InputError, match=reason):
        parse_timestamp(text)


# -- single utterances -------------------------------------------------------------------------------------------------


def test_parse_text_utterance() -> None:
    at = datetime(2025, 5, 1, 9, 0)
    u = parse_text_utterance("  I moved to Seattle. ", session=None, role="human", at=at, speaker="Dana")
    assert (u.session, u.position, u.role, u.content, u.speaker, u.timestamp) == (
        "note:2025-05-01",
        0,
        "user",
        "I moved to Seattle.",
        "Dana",
        at,
    )
    assert parse_text_utterance("x", session="s9", role="assistant", at=None).session == "s9"
    assert parse_text_utterance("x", session=None, role="user", at=None).session == "note"
    with pytest.raises(InputError, match="utterance: content is empty"):
        parse_text_utterance(" ", session=None, role="user", at=None)
    with pytest.raises(InputError, match="utterance: unknown role 'narrator'"):
        parse_text_utterance("x", session=None, role="narrator", at=None)


# -- bundled samples ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def samples() -> list[Conversation]:
    convs: list[Conversation] = []
    for path in sample_paths():
        assert detect_format(path) == "json"
        convs.extend(parse_file(path))
    return convs


def test_samples_parse_with_unique_ids(samples: list[Conversation]) -> None:
    assert len(samples) >= 10
    assert len({c.id for c in samples}) == len(samples)
    message_ids = [u.source_id for c in samples for u in c.utterances]
    assert None not in message_ids and len(set(message_ids)) == len(message_ids)
    assert all(p.name != "questions.json" for p in sample_paths())


def test_samples_are_realistic_dialogues(samples: list[Conversation]) -> None:
    for conv in samples:
        assert 6 <= len(conv.utterances) <= 14, conv.id
        assert {u.role for u in conv.utterances} == {"user", "assistant"}, conv.id
        stamps = [u.timestamp for u in conv.utterances]
        assert all(s is not None and s.year == 2025 and s.tzinfo is not None for s in stamps), conv.id
        assert stamps == sorted(stamps), conv.id
    starts = [c.utterances[0].timestamp for c in samples]
    assert starts == sorted(starts)  # sample_paths() is chronological, so later facts are ingested later


def test_sample_questions_cite_existing_messages(samples: list[Conversation]) -> None:
    by_id = {u.source_id: u for c in samples for u in c.utterances}
    questions = json.loads((samples_dir() / "questions.json").read_text(encoding="utf-8"))
    assert len(questions) >= 12
    for q in questions:
        assert set(q) == {"question", "answer", "evidence"}
        assert q["question"].endswith("?") and q["answer"].strip()
        assert q["evidence"] and all(e in by_id for e in q["evidence"]), q["question"]
    assert all(role in ROLES for role in {u.role for u in by_id.values()})

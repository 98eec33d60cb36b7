"""Property tests of every input parser: generated files with bad Unicode, wrong types, truncation and duplicates.

Whatever a file holds, reading it ends in conversations that can be stored or in one :class:`InputError` line,
never in another exception; and an ingest that is refused leaves the memory exactly as it was (the quads counted
before and after). Parsing is cheap, so those properties run many examples; the ones through the command line and
``/api/ingest`` run a few, all against one memory each.
"""

from __future__ import annotations

import copy
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pcm.cli import main as cli
from pcm.conversations import DEFAULT_MAX_UTTERANCE_CHARS, check_conversations, parse_file
from pcm.errors import InputError
from pcm.naming import Naming
from pcm.provenance import post_quads, session_quads
from pcm.settings import Settings
from tests.conftest import shared_path
from tests.endpoint.test_endpoint_support import AUTH, POSTS, serving
from tests.memory_template import init_template

FORMATS = ("json", "jsonl", "locomo", "longmemeval")
NAMING = Naming("https://pcm.invalid/m/test/")

# -- values -----------------------------------------------------------------------------------------------------------

SURROGATES = st.sampled_from(["\ud800", "\udbff", "\udc80", "\udcff", "\udfff"])
ODD = st.sampled_from(["\x00", "\x1b[2J", "\u202e", "\u2028", "\x85", "\r", "\ufeff", "\U0010ffff", "\ufffe", " ", "\n"])
plain = st.text(min_size=1, max_size=20)  # any code point but surrogates: controls, bidi, astral planes
words = st.one_of(plain, st.builds(lambda a, b, c: a + b + c, plain, ODD, plain))
ids = st.one_of(st.text(min_size=1, max_size=6), st.integers(0, 99))
stamps = st.one_of(
    st.none(),
    st.sampled_from(["2025-03-02T10:00:00Z", "2023/05/08 (Mon) 13:56", "1:56 pm on 8 May, 2023", "8 May, 2023",
                     "13:99 pm on 40 Foo, 2023", "2023-02-30", ""]),
    st.integers(-(10**15), 10**15),
    st.floats(allow_nan=True, allow_infinity=True),
)
roles = st.sampled_from(["user", "assistant", "system", "other", "Human", "AI", "robot"])
any_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=5)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=6,
)

# -- well-shaped documents of each format, before they are damaged ----------------------------------------------------

message = st.fixed_dictionaries(
    {"role": roles, "content": words}, optional={"id": ids, "timestamp": stamps, "speaker": words}
)
json_doc = st.lists(
    st.fixed_dictionaries(
        {"conversation_id": ids, "messages": st.lists(message, min_size=1, max_size=4)},
        optional={"title": words, "started": stamps},
    ),
    min_size=1,
    max_size=3,
)
jsonl_doc = st.lists(
    st.fixed_dictionaries(
        {"conversation_id": ids, "role": roles, "content": words}, optional={"id": ids, "timestamp": stamps}
    ),
    min_size=1,
    max_size=6,
)
turn = st.fixed_dictionaries(
    {"speaker": st.sampled_from(["Ann", "Bob", "Eve"]), "dia_id": ids, "text": words},
    optional={"blip_caption": words},
)
locomo_doc = st.lists(
    st.builds(
        lambda sample, sessions, dates: {
            "sample_id": sample,
            "conversation": {
                "speaker_a": "Ann",
                "speaker_b": "Bob",
                **{f"session_{n}": turns for n, turns in enumerate(sessions, 1)},
                **{f"session_{n}_date_time": date for n, date in enumerate(dates, 1)},
            },
        },
        ids,
        st.lists(st.lists(turn, max_size=3), min_size=1, max_size=2),
        st.lists(stamps, max_size=2),
    ),
    min_size=1,
    max_size=2,
)
longmemeval_doc = st.lists(
    st.builds(
        lambda qid, sessions: {
            "question_id": qid,
            "haystack_session_ids": [sid for sid, _, _ in sessions],
            "haystack_dates": [date for _, date, _ in sessions],
            "haystack_sessions": [turns for _, _, turns in sessions],
        },
        ids,
        st.lists(
            st.tuples(ids, stamps, st.lists(st.fixed_dictionaries({"role": roles, "content": words}), max_size=3)),
            min_size=1,
            max_size=3,
        ),
    ),
    min_size=1,
    max_size=2,
)
DOCS = {"json": json_doc, "jsonl": jsonl_doc, "locomo": locomo_doc, "longmemeval": longmemeval_doc}


def slots(tree: Any) -> Iterator[tuple[Any, Any]]:
    """Every (container, key) under ``tree``, so one value anywhere can be replaced."""
    items = tree.items() if isinstance(tree, dict) else enumerate(tree) if isinstance(tree, list) else ()
    for key, value in list(items):
        yield tree, key
        yield from slots(value)


def damage(draw: st.DrawFn, tree: Any) -> Any:
    """The document with up to two faults: a lone surrogate, a value of the wrong type, a key dropped, an item
    duplicated (as it was, or with other text)."""
    tree = copy.deepcopy(tree)
    for _ in range(draw(st.integers(0, 2))):
        places = list(slots(tree))
        if not places:
            break
        container, key = draw(st.sampled_from(places))
        kind = draw(st.sampled_from(["surrogate", "retype", "drop", "duplicate"]))
        value = container[key]
        if kind == "surrogate" and isinstance(value, str):
            at = draw(st.integers(0, len(value)))
            container[key] = value[:at] + draw(SURROGATES) + value[at:]
        elif kind == "retype":
            container[key] = draw(any_json)
        elif kind == "drop" and isinstance(container, dict):
            del container[key]
        elif kind == "duplicate" and isinstance(value, list) and value:
            twin = copy.deepcopy(draw(st.sampled_from(value)))
            if isinstance(twin, dict) and draw(st.booleans()):
                for field in ("content", "text"):
                    if field in twin:
                        twin[field] = f"other {twin[field]!r}"
            value.append(twin)
    return tree


@st.composite
def files(draw: st.DrawFn, fmt: str | None = None) -> tuple[str, bytes]:
    """(format, file bytes): a document of the format, damaged, serialised, then maybe cut short or given a byte
    that is not UTF-8."""
    fmt = fmt or draw(st.sampled_from(FORMATS))
    tree = damage(draw, draw(DOCS[fmt]))
    if fmt == "jsonl" and isinstance(tree, list):
        data = "\n".join(json.dumps(line) for line in tree).encode("utf-8")
    else:
        data = json.dumps(tree).encode("utf-8")
    cut = draw(st.sampled_from(["whole", "whole", "truncate", "bad byte"]))
    if cut == "truncate" and data:
        data = data[: draw(st.integers(0, len(data) - 1))]
    elif cut == "bad byte":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80"])) + data[at:]
    return fmt, data


def read(path: Path, fmt: str | None) -> list[Any] | InputError:
    """What an ingest would get from the file: storable conversations, or one InputError line."""
    try:
        conversations = parse_file(path, fmt)
        check_conversations(conversations, max_chars=DEFAULT_MAX_UTTERANCE_CHARS)
    except InputError as error:
        assert "\n" not in str(error) and str(error).strip(), repr(str(error))
        return error
    for conversation in conversations:  # every literal and IRI the store would get can be built
        session_quads(NAMING, conversation.id, conversation.title, conversation.started)
        for utterance in conversation.utterances:
            for quad in post_quads(NAMING, utterance, None)[1]:
                str(quad).encode("utf-8")
    return conversations


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="pcm-props-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


# -- parse level: many examples ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_parser_gives_conversations_or_one_input_error(scratch: Path, fmt: str, data: st.DataObject) -> None:
    _, body = data.draw(files(fmt))
    path = scratch / ("in.jsonl" if fmt == "jsonl" else "in.json")
    path.write_bytes(body)
    read(path, None)
    read(path, fmt)


@settings(max_examples=150, deadline=None)
@given(text=st.one_of(words, st.builds(lambda a, s: a + s, words, SURROGATES), any_json), session=st.one_of(
    st.none(), words, any_json), role=st.one_of(roles, any_json), speaker=st.one_of(st.none(), words, any_json))
def test_a_text_utterance_is_storable_or_one_input_error(text: Any, session: Any, role: Any, speaker: Any) -> None:
    from pcm.conversations import Conversation, parse_text_utterance

    try:
        utterance = parse_text_utterance(text, session=session, role=role, at=None, speaker=speaker, where="--text")
        conversation = Conversation(utterance.session, [utterance], source="--text")
        check_conversations([conversation], max_chars=DEFAULT_MAX_UTTERANCE_CHARS)
    except InputError as error:
        assert "\n" not in str(error) and str(error).startswith("--text")
        return
    post_quads(NAMING, utterance, None)


@pytest.mark.parametrize(("dataset", "parts"), [
    ("locomo", ("data", "locomo", "locomo-conv-26.json")),
    ("longmemeval", ("data", "longmemeval", "longmemeval-oracle-dev48.json")),
])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_evaluation_loaders_give_items_or_one_input_error(scratch: Path, dataset: str, parts: tuple[str, ...],
                                                               data: st.DataObject) -> None:
    """``pcm eval`` reads the same files with their questions: the real data, damaged the same ways."""
    from pcm.evaluation.datasets import load_items

    real = _real_data(parts)
    tree = damage(data.draw, real[:2] if isinstance(real, list) else real)
    path = scratch / f"eval-{dataset}.json"
    path.write_text(json.dumps(tree), encoding="utf-8")
    try:
        load_items(dataset, path)
    except InputError as error:
        assert "\n" not in str(error)


_REAL: dict[tuple[str, ...], Any] = {}


def _real_data(parts: tuple[str, ...]) -> Any:
    if parts not in _REAL:
        _REAL[parts] = json.loads(shared_path(*parts).read_text(encoding="utf-8"))
    return _REAL[parts]


@settings(max_examples=150, deadline=None)
@given(data=st.data(), key=st.one_of(st.none(), words, st.builds(lambda a, s: a + s, words, SURROGATES)))
def test_an_api_messages_body_is_storable_or_one_input_error(data: st.DataObject, key: str | None) -> None:
    """The chat shape assistants send (``{"messages": [...]}``, no conversation id needed)."""
    from pcm.conversations import parse_messages

    body = damage(data.draw, {"messages": data.draw(st.lists(message, min_size=1, max_size=4))})
    try:
        conversation = parse_messages(body, key=key)
        check_conversations([conversation], max_chars=DEFAULT_MAX_UTTERANCE_CHARS)
    except InputError as error:
        assert "\n" not in str(error)
        return
    for utterance in conversation.utterances:
        post_quads(NAMING, utterance, None)


# -- end to end: a few examples, one memory each ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def cli_memory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return init_template(tmp_path_factory)


def run(args: list[str], memory: Path) -> Any:
    result = CliRunner().invoke(cli, ["--memory", str(memory), *args],
                                env={"PCM_LLM": "none", "PCM_INDEX": "off", "PCM_TOKEN": ""})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def triples(memory: Path) -> int:
    result = run(["stats", "--json"], memory)
    assert result.exit_code == 0, result.output
    return int(json.loads(result.stdout)["triples"])


@settings(max_examples=16, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(generated=files())
def test_cli_ingest_of_a_file_is_all_or_nothing(cli_memory: Path, scratch: Path, generated: tuple[str, bytes]) -> None:
    fmt, body = generated
    path = scratch / ("cli.jsonl" if fmt == "jsonl" else "cli.json")
    path.write_bytes(body)
    before = triples(cli_memory)
    result = run(["ingest", str(path), "--json"], cli_memory)
    # a message this shared memory already holds with other text (an earlier example's) is refused as well
    refused = isinstance(read(path, None), InputError) or "already stored with other text" in result.stderr
    if refused:
        assert result.exit_code == 3, result.output
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("pcm: error: ")
        assert triples(cli_memory) == before
    else:
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout)
        assert report["added"] + report["skipped"] == report["utterances"]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(text=st.one_of(words, st.builds(lambda a, s: a + s, words, SURROGATES)),
       session=st.one_of(st.none(), words, st.builds(lambda a, s: a + s, words, SURROGATES)),
       speaker=st.one_of(st.none(), words), at=st.one_of(st.none(), st.sampled_from(["2025-03-02T10:00", "soon"])))
def test_cli_ingest_text_stores_it_or_nothing(cli_memory: Path, text: str, session: str | None, speaker: str | None,
                                              at: str | None) -> None:
    args = ["ingest", "--text", text, "--json"]
    for flag, value in (("--session", session), ("--speaker", speaker), ("--at", at)):
        if value is not None:
            args += [flag, value]
    before = triples(cli_memory)
    result = run(args, cli_memory)
    if result.exit_code == 0:
        assert json.loads(result.stdout)["added"] == 1
    else:
        assert result.exit_code in (2, 3) and result.stderr.count("\n") == 1, result.output
        assert triples(cli_memory) == before


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    template = init_template(tmp_path_factory)
    with serving(Settings(memory=template, index_enabled=False)) as server:
        yield server.url


def api_posts(url: str) -> int:
    answer = httpx.post(url + "/query", data={"query": POSTS}, headers={"Accept": "application/sparql-results+json"})
    return int(answer.json()["results"]["bindings"][0]["n"]["value"])


@settings(max_examples=24, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(generated=files(), text_body=st.one_of(st.none(), st.fixed_dictionaries(
    {"text": st.one_of(words, st.builds(lambda a, s: a + s, words, SURROGATES), any_json)},
    optional={"session": st.one_of(words, any_json), "role": st.one_of(roles, any_json),
              "speaker": st.one_of(words, any_json), "at": st.one_of(stamps, any_json)})))
def test_api_ingest_answers_200_or_a_json_400_and_a_refusal_stores_nothing(
    api: str, generated: tuple[str, bytes], text_body: dict[str, Any] | None
) -> None:
    fmt, body = generated
    media = "application/x-ndjson" if fmt == "jsonl" else "application/json"
    if text_body is not None:
        body, media = json.dumps(text_body).encode("utf-8"), "application/json"
    before = api_posts(api)
    answer = httpx.post(api + "/api/ingest", content=body, headers={**AUTH, "Content-Type": media}, timeout=60)
    assert answer.status_code in (200, 400), (answer.status_code, answer.text)
    assert answer.headers["content-type"].startswith("application/json")
    if answer.status_code == 400:
        assert answer.json()["error"] and api_posts(api) == before
    else:
        report = answer.json()
        assert api_posts(api) == before + report["stored"]

"""Bad input is refused in one line, with one exit code per meaning, before anything is written.

Real processes and real memories on disk: a file whose second conversation holds a lone surrogate, ``--text`` with
an invalid byte, the same conversation given twice with different turns, an utterance over the size limit, a write
while ``pcm serve`` holds the memory, an index built with another model, and a ``memory.toml`` edited by hand.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from pcm.conversations import Conversation, Utterance, parse_file
from pcm.errors import InputError, MemoryVersionError
from pcm.manifest import MANIFEST, Manifest
from pcm.memory import Memory
from pcm.settings import Settings
from tests.endpoint.test_endpoint_support import AUTH, POSTS, TOKEN, serving
from tests.memory_template import memory_copy


def pcm(args: list[str | bytes], memory: Path, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "PCM_TOKEN"}
    environ.update({"PCM_MEMORY": str(memory), "PCM_LLM": "none", "PCM_INDEX": "off", **env})
    return subprocess.run([sys.executable, "-m", "pcm.cli", *args], capture_output=True, text=True, env=environ,
                          cwd=cwd, timeout=300)


@pytest.fixture
def mem(template: Path, tmp_path: Path) -> Path:
    with memory_copy(template, tmp_path) as memory:
        return memory.settings.memory


def posts(memory: Path, cwd: Path) -> int:
    out = pcm(["stats", "--json"], memory, cwd)
    assert out.returncode == 0, out.stderr
    return int(json.loads(out.stdout)["posts"])


def one_line(stderr: str) -> str:
    assert stderr.count("\n") == 1 and "Traceback" not in stderr, stderr
    return stderr


def conversation(cid: str, *contents: str) -> dict[str, object]:
    return {"conversation_id": cid, "messages": [{"role": "user", "content": c} for c in contents]}


# ------------------------------------------------------------------------------------------------ bad characters


def test_a_lone_surrogate_in_the_second_conversation_stores_nothing(mem: Path, tmp_path: Path) -> None:
    path = tmp_path / "chats.json"
    path.write_text(json.dumps([conversation("first", "hello"), conversation("second", "fine", "bad \ud800 here")]))
    out = pcm(["ingest", str(path)], mem, tmp_path)
    assert out.returncode == 3
    line = one_line(out.stderr)
    assert "chats.json" in line and "conversation 'second'" in line and "message 1" in line and "U+D800" in line
    assert posts(mem, tmp_path) == 0


def test_text_with_an_invalid_byte_is_one_line_and_exit_3(mem: Path, tmp_path: Path) -> None:
    out = pcm(["ingest", "--text", b"caf\xe9 au lait"], mem, tmp_path)
    assert out.returncode == 3
    line = one_line(out.stderr)
    assert "the message" in line and "0xE9" in line and "position 3" in line
    assert posts(mem, tmp_path) == 0


@pytest.mark.parametrize(("args", "named"), [
    (["sparql", b"SELECT * WHERE { ?s ?p \"\xff\" }"], "the query"),  # the facade's line, as on every face
    (["why", b"m:caf\xe9"], "IRI"),
    (["forget", "--post", b"D1:\xff"], "--post"),
    (["forget", "--session", b"s\xff"], "--session"),
    (["ingest", "--text", "hello", "--speaker", b"Zo\xeb"], "--speaker"),
])
def test_an_invalid_byte_in_any_argument_is_one_line_and_exit_3(mem: Path, tmp_path: Path, args: list[str | bytes],
                                                                 named: str) -> None:
    out = pcm(args, mem, tmp_path)
    assert out.returncode == 3 and named in one_line(out.stderr) and "not UTF-8" in out.stderr


def test_a_query_file_that_is_not_utf8_is_one_line(mem: Path, tmp_path: Path) -> None:
    query = tmp_path / "q.rq"
    query.write_bytes(b"SELECT * WHERE { ?s ?p '\xff' }")
    out = pcm(["sparql", "--file", str(query)], mem, tmp_path)
    assert out.returncode == 3 and "q.rq" in one_line(out.stderr) and "0xFF" in out.stderr


def test_empty_text_is_bad_input_not_a_usage_error(mem: Path, tmp_path: Path) -> None:
    out = pcm(["ingest", "--text", "  "], mem, tmp_path)
    assert out.returncode == 3 and "the message: content is empty" in one_line(out.stderr)


def test_a_file_with_an_invalid_byte_names_its_line(mem: Path, tmp_path: Path) -> None:
    path = tmp_path / "chats.jsonl"
    path.write_bytes(b'{"conversation_id": "a", "role": "user", "content": "ok"}\n'
                     b'{"conversation_id": "a", "role": "user", "content": "caf\xe9"}\n')
    out = pcm(["ingest", str(path)], mem, tmp_path)
    assert out.returncode == 3 and "line 2" in one_line(out.stderr) and "0xE9" in out.stderr
    assert posts(mem, tmp_path) == 0


def test_the_same_conversation_twice_with_other_turns_is_refused_whole(mem: Path, tmp_path: Path) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps([conversation("trip", "We fly on Monday.")]))
    second.write_text(json.dumps([conversation("trip", "We fly on Tuesday.", "Pack the tent.")]))
    out = pcm(["ingest", str(first), str(second)], mem, tmp_path)
    assert out.returncode == 3
    line = one_line(out.stderr)
    assert "b.json" in line and "conversation 'trip'" in line and "message 0" in line
    assert posts(mem, tmp_path) == 0
    again = pcm(["ingest", str(first), str(first), "--json"], mem, tmp_path)  # the same turns twice are fine
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["added"] == 1


def test_an_edited_message_is_refused_not_skipped(mem: Path, tmp_path: Path) -> None:
    path = tmp_path / "trip.json"
    path.write_text(json.dumps([conversation("trip", "We fly on Monday.", "Pack the tent.")]))
    assert pcm(["ingest", str(path)], mem, tmp_path).returncode == 0
    path.write_text(json.dumps([conversation("trip", "We fly on Tuesday.", "Pack the tent.", "And the stove.")]))
    out = pcm(["ingest", str(path)], mem, tmp_path)
    assert out.returncode == 3
    assert "conversation 'trip', message 0: already stored with other text" in one_line(out.stderr)
    assert posts(mem, tmp_path) == 2  # nothing of the edited file, not even its new third message
    path.write_text(json.dumps([conversation("trip", "We fly on Monday.", "Pack the tent.", "And the stove.")]))
    assert json.loads(pcm(["ingest", str(path), "--json"], mem, tmp_path).stdout)["added"] == 1


def test_wrong_types_in_a_file_are_one_line(mem: Path, tmp_path: Path) -> None:
    path = tmp_path / "chats.json"
    path.write_text(json.dumps([conversation("ok", "hello"),
                                {"conversation_id": "typed", "messages": [{"role": "user", "content": ["a list"]}]}]))
    out = pcm(["ingest", str(path)], mem, tmp_path)
    assert out.returncode == 3 and "conversation 'typed', message 0: content has no text part" in one_line(out.stderr)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    out = pcm(["ingest", str(deep)], mem, tmp_path)
    assert out.returncode == 3 and "nested too deeply" in one_line(out.stderr)
    assert posts(mem, tmp_path) == 0


def test_jsonl_keeps_a_line_separator_inside_a_string(template: Path, tmp_path: Path) -> None:
    """U+2028 is legal raw inside a JSON string: JSON lines are split at line feeds only."""
    path = tmp_path / "notes.jsonl"
    text = "first\u2028second\x85third"
    path.write_text(json.dumps({"conversation_id": "n", "role": "user", "content": text}, ensure_ascii=False) + "\n",
                    encoding="utf-8")
    (parsed,) = parse_file(path)
    assert parsed.utterances[0].content == text


# ------------------------------------------------------------------------------------------------ size limit


def test_an_utterance_over_the_limit_is_refused_before_any_write(template: Path, tmp_path: Path) -> None:
    with memory_copy(template, tmp_path) as memory:
        huge = "word " * 20_000  # 100,000 characters, over the default 50,000
        convs = [
            Conversation("fine", [Utterance("fine", 0, "user", "a short note")]),
            Conversation("long", [Utterance("long", 0, "user", huge)], source="paste.json"),
        ]
        with pytest.raises(InputError, match=r"paste.json: conversation 'long', message 0: .*PCM_MAX_UTTERANCE_CHARS"):
            memory.ingest(convs)
        assert memory.post_count() == 0
        small = Memory(memory.settings.with_(max_utterance_chars=5), memory.manifest, memory.backend, read_only=False)
        with pytest.raises(InputError, match="over the limit of 5"):
            small.ingest([convs[0]])
        assert memory.post_count() == 0
        assert memory.ingest([convs[0]]).added == 1


def test_the_limit_is_a_setting() -> None:
    assert Settings.from_env({}).max_utterance_chars == 50_000
    assert Settings.from_env({"PCM_MAX_UTTERANCE_CHARS": "1000"}).max_utterance_chars == 1000
    from pcm.errors import UsageError

    with pytest.raises(UsageError):
        Settings.from_env({"PCM_MAX_UTTERANCE_CHARS": "lots"})
    with pytest.raises(UsageError):
        Settings.from_env({"PCM_MAX_UTTERANCE_CHARS": "0"})


def test_cli_refuses_a_long_text_with_exit_3(mem: Path, tmp_path: Path) -> None:
    out = pcm(["ingest", "--text", "x" * 2_000], mem, tmp_path, PCM_MAX_UTTERANCE_CHARS="1000")
    assert out.returncode == 3 and "over the limit of 1,000" in one_line(out.stderr)
    assert posts(mem, tmp_path) == 0


# ------------------------------------------------------------------------------------------------ exit codes


@pytest.mark.slow
def test_a_write_to_a_served_memory_without_the_token_exits_4_for_every_command(mem: Path, tmp_path: Path) -> None:
    notes = tmp_path / "notes.json"
    notes.write_text(json.dumps([conversation("n", "hello")]))
    with serving(Settings(memory=mem, index_enabled=False)):
        codes = {
            "ingest --text": pcm(["ingest", "--text", "hello"], mem, tmp_path),
            "ingest FILE": pcm(["ingest", str(notes)], mem, tmp_path),
            "reindex": pcm(["reindex"], mem, tmp_path),
            "forget": pcm(["forget", "--session", "n"], mem, tmp_path),
            "wrong token": pcm(["ingest", "--text", "hello"], mem, tmp_path, PCM_TOKEN="not-the-token"),
        }
        for name, out in codes.items():
            assert out.returncode == 4, (name, out.returncode, out.stderr)
            assert "pcm serve" in one_line(out.stderr), name
        with_token = pcm(["ingest", "--text", "hello", "--json"], mem, tmp_path, PCM_TOKEN=TOKEN)
        assert with_token.returncode == 0 and json.loads(with_token.stdout)["added"] == 1
        other = tmp_path / "other.json"  # the same conversation with other turns, in a second file
        other.write_text(json.dumps([conversation("n", "goodbye")]))
        clash = pcm(["ingest", str(notes), str(other)], mem, tmp_path, PCM_TOKEN=TOKEN)
        assert clash.returncode == 3 and "other.json" in one_line(clash.stderr)
        assert posts(mem, tmp_path) == 1  # through the server: only the --text above


def test_an_index_of_another_dimension_is_refused_before_the_post_is_stored(template: Path, tmp_path: Path) -> None:
    with memory_copy(template, tmp_path) as memory:
        path = memory.settings.memory
    manifest = Manifest.load(path)
    manifest.embedding_dim = 512
    manifest.save(path)
    with Memory.open(Settings(memory=path, index_enabled=True)) as memory:
        with pytest.raises(MemoryVersionError, match="dim 512"):
            memory.ingest([Conversation("s", [Utterance("s", 0, "user", "I adopted a beagle")])])
        assert memory.post_count() == 0


def test_an_ontology_version_edited_in_memory_toml_is_refused(mem: Path, tmp_path: Path) -> None:
    toml = mem / MANIFEST
    text = toml.read_text(encoding="utf-8")
    toml.write_text(text.replace('ontology_version = "', 'ontology_version = "9.', 1), encoding="utf-8")
    for args in (["stats"], ["ingest", "--text", "hello"]):
        out = pcm(args, mem, tmp_path)
        assert out.returncode == 5
        assert "ontology_version" in one_line(out.stderr) and "changed outside pcm" in out.stderr
    toml.write_text(text, encoding="utf-8")  # put back, it opens again
    assert posts(mem, tmp_path) == 0


def test_a_manifest_from_before_the_seal_is_accepted_and_sealed(mem: Path, tmp_path: Path) -> None:
    toml = mem / MANIFEST
    text = toml.read_text(encoding="utf-8")
    toml.write_text(text[: text.index("[seal]")], encoding="utf-8")
    assert Manifest.load(mem).seal == {}
    with Memory.open(Settings(memory=mem, index_enabled=False)):
        pass
    assert set(Manifest.load(mem).seal) >= {"ontology_version", "namespace", "embedding_dim"}


# ------------------------------------------------------------------------------------------------ the JSON API


@pytest.fixture(scope="module")
def served(template: Path, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    import shutil

    path = tmp_path_factory.mktemp("served") / "memory"
    shutil.copytree(template, path)
    with serving(Settings(memory=path, index_enabled=False)) as server:
        yield server


def count_posts(url: str) -> int:
    answer = httpx.post(url + "/query", data={"query": POSTS}, headers={"Accept": "application/sparql-results+json"})
    return int(answer.json()["results"]["bindings"][0]["n"]["value"])


def test_api_ingest_refuses_bad_input_with_a_json_400_and_stores_nothing(served) -> None:  # type: ignore[no-untyped-def]
    url = served.url
    bad_bodies: list[bytes] = [
        json.dumps([conversation("api-1", "hello"), conversation("api-2", "bad \ud800")]).encode(),
        json.dumps({"text": 5}).encode(),
        json.dumps({"text": "hello", "session": 7}).encode(),
        json.dumps({"text": "hello", "speaker": ["x"]}).encode(),
        json.dumps({"text": "caf\udce9"}).encode(),
        json.dumps({"text": "x" * 60_000}).encode(),
        b'[{"conversation_id": "cut", "messages": [{"role": "us',
    ]
    for body in bad_bodies:
        answer = httpx.post(url + "/api/ingest", content=body, headers={**AUTH, "Content-Type": "application/json"})
        too_long = b"x" * 60_000 in body  # over a size limit: 413, as every InputTooLarge
        assert answer.status_code == (413 if too_long else 400), (body[:60], answer.status_code, answer.text)
        assert answer.headers["content-type"].startswith("application/json") and answer.json()["error"]
        assert "/tmp" not in answer.json()["error"]
    assert count_posts(url) == 0


def test_remember_refuses_a_bad_key_before_it_queries(template: Path, tmp_path: Path) -> None:
    with memory_copy(template, tmp_path) as memory:
        for key in ("\ud800", [1], " "):
            with pytest.raises(InputError, match="message key"):
                memory.remember("I adopted a beagle", key=key)  # type: ignore[arg-type]
        assert memory.post_count() == 0
        assert memory.remember("I adopted a beagle", key=7).stored


def test_a_question_with_a_lone_surrogate_is_bad_input(template: Path, tmp_path: Path) -> None:
    """Python API, JSON API and MCP reach ask and recall without the command line's argument check."""
    with memory_copy(template, tmp_path) as memory:
        with pytest.raises(InputError, match="ask: the question has an invalid character at position 4"):
            memory.ask("dog \ud800?")
        with pytest.raises(InputError, match="recall: the text to recall has an invalid character"):
            memory.recall("caf\udce9")


def test_api_ask_with_a_lone_surrogate_is_a_json_400(served) -> None:  # type: ignore[no-untyped-def]
    answer = httpx.post(served.url + "/api/ask", content=b'{"question": "dog \\ud800?"}',
                        headers={"Content-Type": "application/json"})
    error = answer.json()["error"]  # the body's model refuses it before the memory sees it
    assert answer.status_code == 400 and "question" in error and "invalid character" in error and "\n" not in error

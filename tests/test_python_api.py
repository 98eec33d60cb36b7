"""The Python API: ``from pcm import Memory``, create/open by path, remember (idempotent with a key), the
OpenAI-style messages body, and the README example run exactly as written."""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from pcm.conversations import parse_messages
from pcm.errors import InputError, MemoryClosedError, UsageError
from pcm.memory import Memory
from pcm.settings import Settings

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def quiet_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings from the environment as a new user has them: no LLM, no server, no token."""
    for name in ("PCM_MEMORY", "PCM_STORE_URL", "PCM_TOKEN", "PCM_SUMMARIES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PCM_LLM", "none")


@pytest.fixture
def mem(tmp_path: Path):  # type: ignore[no-untyped-def]
    with Memory.init(Settings(memory=tmp_path / "m", index_enabled=False), owner="Dana") as m:
        yield m


def test_import_pcm_is_cheap_and_memory_is_lazy() -> None:
    code = (
        "import sys, pcm; heavy = [m for m in ('pcm.memory', 'pyoxigraph', 'torch', 'lancedb') if m in sys.modules];"
        "print(heavy); from pcm import Memory; print(Memory.__module__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})
    assert out.stdout.splitlines() == ["[]", "pcm.memory"]


def test_create_open_by_path_and_context_manager(tmp_path: Path, quiet_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PCM_INDEX", "off")
    path = tmp_path / "mine"
    with Memory.create(str(path), owner="Dana") as m:
        assert m.manifest.owner == "Dana"
        report = m.remember("I adopted a beagle called Biscuit", at="2025-03-02T10:00")
        assert report.stored and report.session == "cli-2025-03-02"
    with pytest.raises(UsageError, match="already exists"):
        Memory.create(path)
    with Memory.open(path) as m:  # the lock was released on leaving the block
        assert m.post_count() == 1
        [source] = m.why(report.post)
        assert source.text == "I adopted a beagle called Biscuit"


def test_same_key_twice_stores_one_post_and_says_so(mem: Memory) -> None:
    first = mem.remember("I moved to Lisbon", at=datetime(2025, 5, 1, 9, 0), key="msg-42")
    again = mem.remember("I moved to Lisbon", at=datetime(2025, 5, 1, 9, 0), key="msg-42")
    assert first.stored and not again.stored
    assert again.post == first.post
    assert mem.post_count() == 1


def test_a_retry_on_another_day_still_finds_the_key(mem: Memory) -> None:
    """The default session depends on the date; the key alone decides that the message is already stored."""
    first = mem.remember("Call the vet", at=datetime(2025, 5, 1, 23, 59), key="k-1")
    retry = mem.remember("Call the vet", at=datetime(2025, 5, 2, 0, 1), key="k-1")
    assert (retry.stored, retry.post, retry.session) == (False, first.post, "cli-2025-05-01")
    assert mem.post_count() == 1


def test_different_messages_with_the_same_text_are_two_posts(mem: Memory) -> None:
    when = datetime(2025, 5, 1, 9, 0)
    a = mem.remember("ok", at=when)
    b = mem.remember("ok", at=when)
    c = mem.remember("ok", at=when, key="m-1")
    d = mem.remember("ok", at=when, key="m-2")
    assert all(r.stored for r in (a, b, c, d))
    assert len({a.post, b.post, c.post, d.post}) == 4
    assert mem.post_count() == 4
    positions = [p.position for p in mem.store.posts()]
    assert sorted(positions) == [0, 1, 2, 3]


def test_a_key_reused_for_other_text_is_refused_and_nothing_is_stored(mem: Memory) -> None:
    mem.remember("I drive a Golf", key="k-7")
    with pytest.raises(InputError, match="already used for a different message"):
        mem.remember("I drive a Polo", key="k-7")
    with pytest.raises(InputError, match="empty"):
        mem.remember("x", key="  ")
    assert mem.post_count() == 1


def test_forget_what_was_remembered(mem: Memory) -> None:
    report = mem.remember("My PIN is 1234", key="oops")
    assert mem.forget(post="oops") == [report.post]
    assert mem.post_count() == 0


def test_messages_body_without_conversation_id_is_idempotent(mem: Memory) -> None:
    body = {"messages": [{"role": "user", "content": "I adopted a beagle"},
                         {"role": "assistant", "content": "What is its name?"}]}
    first = mem.ingest([parse_messages(body)])
    again = mem.ingest([parse_messages(body)])
    assert (first.added, again.added, again.skipped) == (2, 0, 2)
    other = {"messages": [{"role": "user", "content": "I adopted a beagle"},
                          {"role": "assistant", "content": "Congratulations!"}]}
    assert mem.ingest([parse_messages(other)]).added == 2  # another chat, though its first turn has the same text
    assert mem.post_count() == 4


def test_messages_with_the_same_text_are_told_apart_by_their_ids(mem: Memory) -> None:
    """Without ids, an identical body is a retry; message ids (or keys) make same-text messages distinct."""
    say_ok = {"messages": [{"role": "user", "content": "ok"}]}
    assert mem.ingest([parse_messages(say_ok)]).added == 1
    assert mem.ingest([parse_messages(say_ok)]).added == 0
    for message_id in ("a", "b"):
        body = {"messages": [{"id": message_id, "role": "user", "content": "ok"}]}
        assert mem.ingest([parse_messages(body)]).added == 1
    assert mem.ingest([parse_messages(say_ok, key="k-2")]).added == 1
    assert mem.post_count() == 4


def test_messages_body_named_by_the_idempotency_key(mem: Memory) -> None:
    """A client sending its growing chat under one key stores only the new turns."""
    turns = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    conv = parse_messages({"messages": turns[:1]}, key="chat-9")
    assert mem.ingest([conv]).added == 1
    later = parse_messages({"messages": turns}, key="chat-9")
    assert later.id == conv.id
    assert mem.ingest([later]).added == 1
    named = parse_messages({"conversation_id": "c1", "messages": turns})
    assert named.id == "c1"


def test_messages_with_content_parts_keep_their_text() -> None:
    conv = parse_messages({"messages": [{"role": "user", "content": [
        {"type": "text", "text": "This is Biscuit"}, {"type": "image_url", "image_url": {"url": "data:..."}},
        {"type": "text", "text": "my beagle"}]}]})
    assert conv.utterances[0].content == "This is Biscuit\n\nmy beagle"
    with pytest.raises(InputError, match=r"message 0: content has no text part"):
        parse_messages({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([], r"request body: expected an object with 'messages', found a list"),
        ({"messages": "hi"}, r"request body: 'messages' must be a list, found a string"),
        ({"messages": []}, r"request body: conversation 'chat-[0-9a-f]{16}': has no messages"),
        ({"messages": [{"role": "user"}]}, r"message 0: content must be text, found nothing"),
        ({"messages": [{"role": "robot", "content": "x"}]}, r"message 0: unknown role 'robot'"),
    ],
)
def test_bad_messages_body_is_one_clear_line(body: object, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_messages(body)


def readme_python_example() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## From Python", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "the README's 'From Python' section has a python code block"
    return match.group(1)


def test_readme_example_runs_as_written(tmp_path: Path, quiet_env: None, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    code = readme_python_example()
    assert len(code.strip().splitlines()) <= 6
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {})
    printed = capsys.readouterr().out
    assert "Biscuit" in printed
    with Memory.open(tmp_path / "my-memory", read_only=True) as m:
        assert m.post_count() == 1


def test_close_twice_is_a_no_op_and_a_closed_memory_says_so(tmp_path: Path) -> None:
    m = Memory.init(Settings(memory=tmp_path / "m", index_enabled=False), owner="Dana")
    m.remember("I adopted a beagle called Biscuit", at="2025-03-02T10:00")
    assert m.sparql("ASK { ?s ?p ?o }") is True  # starts the query worker
    m.close()
    m.close()
    assert not m.context.holds_state()
    for use in (
        lambda: m.post_count(),
        lambda: m.sparql("ASK { ?s ?p ?o }"),
        lambda: m.remember("and a cat", at="2025-03-03T10:00"),
        lambda: m.recall("beagle"),
    ):
        with pytest.raises(MemoryClosedError, match="closed"):
            use()
    with Memory.open(tmp_path / "m") as again:  # the store's lock went with the first close
        assert again.post_count() == 1


def test_a_closed_store_closes_once_and_refuses_use(tmp_path: Path) -> None:
    from pcm.backend_local import LocalBackend
    from pcm.backend_remote import RemoteBackend

    local = LocalBackend(tmp_path / "store")
    local.close()
    local.close()
    with pytest.raises(MemoryClosedError):
        local.query("ASK { ?s ?p ?o }")
    remote = RemoteBackend("http://127.0.0.1:9/query", engine="oxigraph")  # no request is sent
    remote.close()
    remote.close()
    with pytest.raises(MemoryClosedError):
        remote.query("ASK { ?s ?p ?o }")

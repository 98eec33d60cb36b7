"""Saved prompt states of the in-process model (``pcm.llm.state``): a fresh process does not re-read a long system
prompt that an earlier process saved.

A stand-in for ``llama_cpp.Llama`` renders the chat as tokens (one per character, template markers around each
message), keeps the tokens of its last prompt and answer as llama.cpp does, and counts the tokens each call had
to read (those after the longest prefix shared with what it holds). Its "state" is the bytes of the held tokens,
so a state restored from a file is checked to be the one saved. Two client instances on one folder stand for two
processes. The real model is used only where ``PCM_TEST_GGUF`` names a GGUF file.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pcm.llm import Message, Request
from pcm.llm.llamacpp_client import LlamaCppClient
from pcm.llm.state import MAGIC, MIN_PREFIX_TOKENS, PrefixStates, StateKey, StateStore, system_span
from pcm.settings import Settings

START, END, SYSTEM, USER, ASSISTANT = 1, 2, 3, 4, 5
ROLES = {"system": SYSTEM, "user": USER, "assistant": ASSISTANT}
#: A long system prompt (one token per character: well over MIN_PREFIX_TOKENS) and another one.
RULES = "Rules and catalogue. " * (MIN_PREFIX_TOKENS // 10)
OTHER_RULES = "Other rules, other catalogue. " * (MIN_PREFIX_TOKENS // 10)


def encode(text: str) -> list[int]:
    return [100 + ord(c) for c in text]


class FakeLlama:
    """Answers ``{"n": 3}``; keeps what it read; ``read`` lists the tokens each call computed."""

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.held: list[int] = []
        self.read: list[int] = []

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        return encode(text.decode("utf-8"))

    def render(self, messages: list[dict[str, str]]) -> list[int]:
        tokens: list[int] = []
        for message in messages:
            tokens += [START, ROLES[message["role"]], *encode(message["content"]), END]
        return [*tokens, START, ASSISTANT]

    def create_chat_completion(self, **kwargs: Any) -> dict[str, Any]:
        prompt = self.render(kwargs["messages"])
        shared = 0
        for a, b in zip(self.held, prompt, strict=False):
            if a != b:
                break
            shared += 1
        shared = min(shared, len(prompt) - 1)  # the last prompt token is always read (fresh logits)
        self.read.append(len(prompt) - shared)
        answer = encode('{"n": 3}')
        self.held = prompt + answer
        return {"choices": [{"message": {"role": "assistant", "content": '{"n": 3}'}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(answer)}}


class FakeAccess:
    """:class:`pcm.llm.state.StateAccess` on :class:`FakeLlama`."""

    template_text = "fake template"

    def __init__(self, llama: FakeLlama) -> None:
        self.llama = llama
        self.restored: list[int] = []

    def library(self) -> str:
        return "fake-llama 1.0"

    def template(self) -> str:
        return self.template_text

    def tokenize(self, text: str) -> list[int]:
        return encode(text)

    def held(self) -> np.ndarray:
        return np.array(self.llama.held, dtype=np.int32)

    def capture(self, count: int) -> bytes:
        self.llama.held = self.llama.held[:count]
        return b"KV" + np.array(self.llama.held, dtype="<i4").tobytes()

    def restore(self, tokens: np.ndarray, data: bytearray) -> bool:
        if bytes(data) != b"KV" + np.asarray(tokens, dtype="<i4").tobytes():
            self.llama.held = []
            return False
        self.llama.held = [int(t) for t in tokens]
        self.restored.append(len(tokens))
        return True


@pytest.fixture
def gguf(tmp_path: Path) -> Path:
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF")
    return path


def process(gguf: Path, states: Path, access: type[FakeAccess] = FakeAccess, context: int = 16384) -> LlamaCppClient:
    """A client as a fresh process makes it: a new model object holding nothing."""
    return LlamaCppClient(model_path=str(gguf), threads=1, context=context, factory=FakeLlama, state_dir=states,
                          state_access=access)


def extract(client: LlamaCppClient, utterance: str, system: str = RULES) -> None:
    client.complete(Request(system=system, messages=[Message.user(utterance)], operation="extract"))


def prompt_length(utterance: str, system: str = RULES) -> int:
    return len(FakeLlama().render([{"role": "system", "content": system}, {"role": "user", "content": utterance}]))


def held_prefix(system: str) -> int:
    """The stable prefix's length for ``system``: template opening and the system text up to its last token."""
    return 2 + len(encode(system)) - 1


def test_the_state_is_saved_once_and_a_fresh_process_does_not_reread_the_system_prompt(gguf: Path,
                                                                                        tmp_path: Path) -> None:
    states = tmp_path / "states"
    first = process(gguf, states)
    extract(first, "I adopted a cat named Biscuit.")
    extract(first, "My sister lives in Lyon.")
    files = sorted(states.glob("*.kvstate"))
    assert len(files) == 1 and first.states is not None and first.states.saved == files[0]
    assert first._llama.read[0] == prompt_length("I adopted a cat named Biscuit.")  # read in full
    # the saved state holds the system prompt alone: the next call re-read its own turn, never the system prompt
    assert first._llama.read[1] == prompt_length("My sister lives in Lyon.") - held_prefix(RULES)
    written = files[0].stat().st_mtime_ns

    second = process(gguf, states)
    extract(second, "We met at the bakery on Tuesday.")
    assert second.states is not None and second.states.restored == held_prefix(RULES)
    # only the utterance's turn (and the system text's last token), not the ~2k-token system prompt
    assert second._llama.read[0] == prompt_length("We met at the bakery on Tuesday.") - held_prefix(RULES) < 60
    assert sorted(states.glob("*.kvstate")) == files and second.states.saved is None  # loaded, not saved again
    assert files[0].stat().st_mtime_ns >= written

    extract(second, "Another utterance.")
    assert second.states.access.restored == [held_prefix(RULES)]  # type: ignore[attr-defined]  # loaded once


def test_switching_between_two_system_prompts_loads_each_ones_state_again(gguf: Path, tmp_path: Path) -> None:
    """The compact extraction form and its JSON fallback in one process: each switch loads the other prompt's
    saved state instead of reading its whole system prompt again."""
    states = tmp_path / "states"
    client = process(gguf, states)
    extract(client, "I adopted a cat.")  # read in full, saved
    extract(client, "I adopted a dog.", system=OTHER_RULES)  # read in full, saved
    extract(client, "I adopted a bird.")
    extract(client, "I adopted a fish.", system=OTHER_RULES)
    extract(client, "I adopted a horse.", system=OTHER_RULES)  # held: nothing loaded
    assert len(sorted(states.glob("*.kvstate"))) == 2
    assert client.states is not None
    assert client.states.access.restored == [held_prefix(RULES), held_prefix(OTHER_RULES)]  # type: ignore[attr-defined]
    assert client._llama.read[2] == prompt_length("I adopted a bird.") - held_prefix(RULES)
    assert client._llama.read[3] == prompt_length("I adopted a fish.", OTHER_RULES) - held_prefix(OTHER_RULES)


def test_no_state_is_loaded_for_another_system_prompt_model_context_or_template(gguf: Path, tmp_path: Path) -> None:
    states = tmp_path / "states"
    extract(process(gguf, states), "I adopted a cat.")

    other_system = process(gguf, states)
    extract(other_system, "I adopted a cat.", system=OTHER_RULES)
    assert other_system.states is not None and other_system.states.restored == 0
    assert other_system._llama.read[0] > len(OTHER_RULES)

    other_context = process(gguf, states, context=8192)
    extract(other_context, "I adopted a cat.")
    assert other_context.states is not None and other_context.states.restored == 0

    class OtherTemplate(FakeAccess):
        template_text = "another chat template"

    other_template = process(gguf, states, access=OtherTemplate)
    extract(other_template, "I adopted a cat.")
    assert other_template.states is not None and other_template.states.restored == 0

    gguf.write_bytes(b"GGUF, but another model")  # same path, another file
    other_model = process(gguf, states)
    extract(other_model, "I adopted a cat.")
    assert other_model.states is not None and other_model.states.restored == 0


def test_a_short_system_prompt_is_not_saved(gguf: Path, tmp_path: Path) -> None:
    states = tmp_path / "states"
    client = process(gguf, states)
    extract(client, "Hello.", system="Answer briefly.")
    assert not states.exists() or not list(states.glob("*.kvstate"))
    assert client._llama.held[-1] != END  # the model kept its prompt and answer (nothing was cut back)


@pytest.mark.parametrize("damage", ["truncate", "flip", "magic", "empty"])
def test_a_corrupt_file_gives_one_log_line_and_a_normal_call(gguf: Path, tmp_path: Path, damage: str,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    states = tmp_path / "states"
    extract(process(gguf, states), "I adopted a cat.")
    (path,) = states.glob("*.kvstate")
    raw = bytearray(path.read_bytes())
    if damage == "truncate":
        raw = raw[: len(raw) - 7]
    elif damage == "flip":
        raw[-3] ^= 0xFF
    elif damage == "magic":
        raw[: len(MAGIC)] = b"PCMKVST0"
    else:
        raw = bytearray()
    path.write_bytes(bytes(raw))

    client = process(gguf, states)
    with caplog.at_level(logging.WARNING, logger="pcm.llm.state"):
        completion = client.complete(Request(system=RULES, messages=[Message.user("I adopted a cat.")], operation="extract"))
    assert completion.text == '{"n": 3}'
    lines = [r for r in caplog.records if r.name == "pcm.llm.state"]
    assert len(lines) == 1 and "ignored" in lines[0].getMessage()
    assert client.states is not None and client.states.restored == 0
    assert client._llama.read[0] > len(RULES)
    # the bad file was replaced by a good one: the next process loads it
    later = process(gguf, states)
    extract(later, "Another utterance.")
    assert later.states is not None and later.states.restored == held_prefix(RULES)


def test_a_state_the_model_refuses_is_read_again_and_saved_again(gguf: Path, tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    states = tmp_path / "states"
    extract(process(gguf, states), "I adopted a cat.")

    class Refusing(FakeAccess):
        def restore(self, tokens: np.ndarray, data: bytearray) -> bool:
            return super().restore(tokens, bytearray(b"not this"))

    client = process(gguf, states, access=Refusing)
    with caplog.at_level(logging.WARNING, logger="pcm.llm.state"):
        extract(client, "I adopted a cat.")
    assert "refused" in caplog.text
    assert client._llama.read[0] > len(RULES) and client.states is not None and client.states.saved is not None


def test_a_file_under_the_right_name_with_another_key_is_not_loaded(gguf: Path, tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    states = tmp_path / "states"
    extract(process(gguf, states), "I adopted a cat.")
    other = process(gguf, states)
    assert other.states is not None
    (path,) = states.glob("*.kvstate")
    wanted = other.states.key(OTHER_RULES)
    path.rename(states / wanted.filename)  # e.g. a name collision
    with caplog.at_level(logging.WARNING, logger="pcm.llm.state"):
        extract(other, "I adopted a cat.", system=OTHER_RULES)
    assert "another model, context, template, system prompt or library version" in caplog.text
    assert other.states.restored == 0 and other._llama.read[0] > len(OTHER_RULES)


def key(n: int) -> StateKey:
    return StateKey(model="/m.gguf", model_bytes=1, model_mtime_ns=1, context=512, template="t", system=f"s{n}",
                    library="fake")


def test_concurrent_writers_leave_one_whole_file_and_no_temporary_file(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Writers interleave their writes (each stops half way until all have started): the file read afterwards is
    one writer's whole file, and nothing else is left in the folder."""
    store = StateStore(tmp_path)
    writers = 4
    halfway = threading.Barrier(writers, timeout=30)
    real_fsync = os.fsync

    def fsync_after_everyone_wrote(descriptor: int) -> None:
        if threading.current_thread().name.startswith("writer"):
            halfway.wait()
        real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", fsync_after_everyone_wrote)
    payloads = {n: bytes([n]) * (200_000 + n) for n in range(writers)}
    threads = [threading.Thread(target=store.save, args=(key(0), [n, n + 1], payloads[n]), name=f"writer{n}")
               for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    saved = store.load(key(0))
    assert saved is not None
    n = int(saved.tokens[0])
    assert list(saved.tokens) == [n, n + 1] and bytes(saved.data) == payloads[n]
    assert [p.name for p in tmp_path.iterdir()] == [key(0).filename]


def test_a_writer_that_fails_half_way_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    store = StateStore(tmp_path)

    def full_disk(descriptor: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with caplog.at_level(logging.WARNING, logger="pcm.llm.state"):
        assert store.save(key(0), [1, 2, 3], b"x" * 1000) is None
    assert "cannot be saved" in caplog.text
    assert list(tmp_path.iterdir()) == [] and store.load(key(0)) is None


def test_the_folder_keeps_the_most_recently_used_states(tmp_path: Path) -> None:
    store = StateStore(tmp_path, kept=2)
    for n in range(3):
        store.save(key(n), [n], b"data")
        os.utime(store.path(key(n)), (1_000_000 + n, 1_000_000 + n))
    store.prune()
    assert store.load(key(0)) is None and store.load(key(1)) is not None  # loading key 1 makes it the newest
    store.save(key(3), [3], b"data")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([key(1).filename, key(3).filename])
    stale = tmp_path / ".abandoned.tmp"
    stale.write_bytes(b"half")
    os.utime(stale, (1_000_000, 1_000_000))
    store.prune()
    assert not stale.exists()


def test_the_stable_prefix_ends_before_the_system_texts_last_token() -> None:
    system = encode("abcdef")
    prompt = [START, SYSTEM, *encode("abcdef"), END, START, USER, *encode("hi"), END]
    assert system_span(prompt, system) == 2 + 5
    assert system_span([START, *encode("xyz")], system) == 0
    assert system_span(prompt, encode("ab")) == 0  # nothing between the first and last token to find


def test_settings_name_the_folder_and_the_draft(tmp_path: Path) -> None:
    assert Settings.from_env({}).llm_state_dir is not None
    assert Settings.from_env({"PCM_LLM_STATE_DIR": str(tmp_path)}).llm_state_dir == tmp_path
    assert Settings.from_env({"PCM_LLM_STATE_DIR": "off"}).llm_state_dir is None
    assert Settings.from_env({}).llm_draft == "none"
    assert Settings.from_env({"PCM_LLM_DRAFT": "prompt-lookup"}).llm_draft == "prompt-lookup"


def test_prompt_lookup_draft_is_passed_to_the_model(gguf: Path) -> None:
    drafts: list[str] = []
    client = LlamaCppClient(model_path=str(gguf), threads=1, context=512, factory=FakeLlama, draft="prompt-lookup",
                            draft_model=lambda: drafts.append("made") or "draft")
    assert client._llama.kwargs["draft_model"] == "draft" and drafts == ["made"]
    assert client._llama.kwargs["logits_all"] is True  # without it a prompt longer than n_batch fails
    plain = LlamaCppClient(model_path=str(gguf), threads=1, context=512, factory=FakeLlama)
    assert "draft_model" not in plain._llama.kwargs and plain.states is None


HAVE_LLAMA = importlib.util.find_spec("llama_cpp") is not None
GGUF = os.environ.get("PCM_TEST_GGUF", "")


@pytest.mark.skipif(not HAVE_LLAMA, reason="llama-cpp-python is not installed (pip install 'pcm[local]')")
@pytest.mark.skipif(not GGUF or not Path(GGUF).is_file(), reason="PCM_TEST_GGUF does not name a GGUF model file")
@pytest.mark.model
def test_a_real_models_restored_state_gives_the_same_answer(tmp_path: Path) -> None:
    """llama.cpp's sequence state written by one model object and read by another: the same greedy answer as a
    model that read the whole prompt."""
    system = "You list the animals named in the user's message as JSON. " * 6
    messages = [Message.user("I saw a heron, two foxes and a cat.")]

    def fresh(min_tokens: int | None) -> LlamaCppClient:
        client = LlamaCppClient(model_path=GGUF, threads=os.cpu_count() or 2, context=1024, state_dir=tmp_path)
        if min_tokens is not None and client.states is not None:
            client.states = PrefixStates(client.states.store, client.states.access, model=Path(GGUF), context=1024,
                                         min_tokens=min_tokens)
        return client

    cold = fresh(None)
    cold.states = None
    expected = cold.complete(Request(system=system, messages=messages, operation="t", max_tokens=24)).text
    cold.close()
    saving = fresh(32)
    assert saving.complete(Request(system=system, messages=messages, operation="t", max_tokens=24)).text == expected
    assert saving.states is not None and saving.states.saved is not None
    saving.close()
    loading = fresh(32)
    assert loading.complete(Request(system=system, messages=messages, operation="t", max_tokens=24)).text == expected
    assert loading.states is not None and loading.states.restored > 32
    loading.close()

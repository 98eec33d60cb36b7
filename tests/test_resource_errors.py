"""A full disk, a quota, permissions or memory running out are errors like the others: one line and exit 10 from
the CLI, 507 (storage full) or 500 with one line over HTTP, an ingest that says which posts it stored, and a memory
that opens afterwards with its side index catching up. Any other OSError stays a bug with its traceback.

The disk is simulated here (an ``OSError`` or ``MemoryError`` raised at a storage write); tests/test_full_disk.py
fills a real one."""

from __future__ import annotations

import errno
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner, Result

from pcm.backend_local import LocalBackend
from pcm.cli import main as cli
from pcm.conversations import Conversation, Utterance
from pcm.errors import ResourceError
from pcm.index.sideindex import SideIndex
from pcm.memory import Memory
from pcm.oserrors import refused_in_text, resource_error
from pcm.settings import Settings
from pcm.store import MemoryStore
from tests.endpoint.test_endpoint_support import AUTH, build_memory, serving
from tests.fault_driver import install, restore

#: How pyoxigraph reports RocksDB's full disk (no errno: the text is all there is), and how LanceDB does.
ROCKSDB_FULL = "IO error: No space left on device: While appending to file: /m/oxigraph/000022.log: No space left on device"
LANCE_FULL = "lance error: LanceError(IO): No space left on device (os error 28), lance-file/src/writer/structural.rs:258:9"


# ------------------------------------------------------------------------------------------------ what is a refusal


@pytest.mark.parametrize(("exc", "full"), [
    (OSError(errno.ENOSPC, "No space left on device", "/m/x"), True),
    (OSError(errno.EDQUOT, "Disk quota exceeded"), True),
    (PermissionError(errno.EACCES, "Permission denied", "/m/x"), False),
    (PermissionError(errno.EPERM, "Operation not permitted"), False),
    (OSError(errno.EROFS, "Read-only file system"), False),
    (OSError(ROCKSDB_FULL), True),
    (RuntimeError(LANCE_FULL), True),
    (MemoryError(), False),
])
def test_the_machines_refusals_are_resource_errors(exc: BaseException, full: bool) -> None:
    refused = resource_error(exc)
    assert isinstance(refused, ResourceError) and refused.exit_code == 10 and refused.storage_full is full
    assert "\n" not in str(refused)


@pytest.mark.parametrize("exc", [
    FileNotFoundError(errno.ENOENT, "No such file or directory", "/m/x"),
    OSError(errno.EBADF, "Bad file descriptor"),
    OSError("IO error: While lock file: /m/oxigraph/LOCK: Resource temporarily unavailable"),
    RuntimeError("lance error: schema mismatch"),
    ValueError("No space left on device"),  # only OSError, RuntimeError and MemoryError are read for the words
])
def test_other_errors_are_not_refusals(exc: BaseException) -> None:
    assert resource_error(exc) is None


def test_a_servers_answer_naming_a_full_disk_is_a_refusal() -> None:
    refused = refused_in_text("Storage error: " + ROCKSDB_FULL)
    assert refused is not None and refused.storage_full
    assert refused_in_text("Resource temporarily unavailable") is None


def test_resource_error_exit_code_is_its_own() -> None:
    from pcm import errors

    codes = {cls: cls.exit_code for cls in vars(errors).values()
             if isinstance(cls, type) and issubclass(cls, errors.PcmError) and "exit_code" in vars(cls)}
    assert list(codes.values()).count(10) == 1 and codes[ResourceError] == 10


# ------------------------------------------------------------------------------------------------ the CLI


def _conversation(path: Path, n: int, name: str = "full") -> Path:
    messages = [{"id": f"{name}-{i}", "role": "user" if i % 2 == 0 else "assistant",
                 "content": f"Message {i} of {name}: my dog Biscuit met a heron at the pond.",
                 "timestamp": f"2025-03-0{1 + i % 9}T10:00:00"} for i in range(n)]
    path.write_text(json.dumps({"conversation_id": name, "messages": messages}), encoding="utf-8")
    return path


def _failing_after(original: Callable[..., Any], calls: int, exc: BaseException) -> Callable[..., Any]:
    """``original``, until it has run ``calls`` times; then every call raises ``exc``."""
    seen = {"n": 0}

    def write(*args: Any, **kwargs: Any) -> Any:
        seen["n"] += 1
        if seen["n"] > calls:
            raise exc
        return original(*args, **kwargs)

    return write


def _pcm(memory: Path, *args: str, **env: str) -> Result:
    env = {"PCM_LLM": "none", "PCM_INDEX": "off", "PCM_MEMORY": str(memory), "PCM_STORE_URL": "", **env}
    return CliRunner().invoke(cli, list(args), env=env)


@pytest.fixture
def memory_path(tmp_path: Path) -> Path:
    path = tmp_path / "memory"
    Memory.init(Settings(memory=path, index_enabled=False), owner="Dana Whitfield").close()
    return path


@pytest.mark.parametrize(("exc", "words"), [
    (OSError(ROCKSDB_FULL), "the disk is full"),
    (OSError(errno.ENOSPC, "No space left on device"), "the disk is full"),
    (MemoryError(), "out of memory"),
])
def test_cli_ingest_stopped_by_the_machine_is_one_line_exit_10_and_says_what_was_stored(
    memory_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exc: BaseException, words: str
) -> None:
    chat = _conversation(tmp_path / "chat.json", 6)
    monkeypatch.setattr(LocalBackend, "extend", _failing_after(LocalBackend.extend, 3, exc))  # one write per post
    result = _pcm(memory_path, "ingest", str(chat))
    assert result.exit_code == 10, (result.output, result.exception)
    assert isinstance(result.exception, SystemExit)  # handled: no traceback
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"pcm: error: {words}"), result.stderr
    assert "3 new utterance(s) were stored" in lines[0] and "message 'full-2'" in lines[0]
    monkeypatch.undo()
    stats = _pcm(memory_path, "stats", "--json")
    assert stats.exit_code == 0 and json.loads(stats.stdout)["posts"] == 3
    again = _pcm(memory_path, "ingest", str(chat), "--json")
    assert again.exit_code == 0 and json.loads(again.stdout)["added"] == 3


def test_cli_another_oserror_keeps_its_traceback(memory_path: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    chat = _conversation(tmp_path / "chat.json", 2)
    bug = OSError(errno.EBADF, "Bad file descriptor")
    monkeypatch.setattr(LocalBackend, "extend", _failing_after(LocalBackend.extend, 0, bug))
    result = _pcm(memory_path, "ingest", str(chat))
    assert result.exception is bug and result.exit_code == 1


def test_cli_a_refused_flush_at_close_comes_after_the_report(memory_path: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Every post was stored when the close's flush met the full disk: the report is printed, then one line."""
    chat = _conversation(tmp_path / "chat.json", 2)
    original_close = LocalBackend.close

    def close(self: LocalBackend) -> None:
        if self._handle is not None and not self.read_only:
            self._handle = _Unflushable(self._handle)  # type: ignore[assignment]
        original_close(self)

    monkeypatch.setattr(LocalBackend, "close", close)
    result = _pcm(memory_path, "ingest", str(chat), "--json")
    assert result.exit_code == 10 and json.loads(result.stdout)["added"] == 2
    assert re.fullmatch(r"pcm: error: the disk is full \(.*\); the store's writes are kept in its log and replayed "
                        r"at the next open\n", result.stderr), result.stderr
    monkeypatch.undo()
    assert json.loads(_pcm(memory_path, "stats", "--json").stdout)["posts"] == 2


def test_cli_import_of_a_literal_past_the_parsers_buffer_is_one_line(memory_path: Path, tmp_path: Path) -> None:
    """A 17 MB literal (the literal limit raised past it) meets the parser's 16 MB token buffer, a MemoryError."""
    from pcm.manifest import Manifest

    namespace = Manifest.load(memory_path).namespace
    path = tmp_path / "big.ttl"
    path.write_text(f'<{namespace}biscuit> <http://www.w3.org/2000/01/rdf-schema#label> "{"x" * 17_000_000}" .\n',
                    encoding="utf-8")
    result = _pcm(memory_path, "import", str(path), PCM_MAX_LITERAL_CHARS="100000000")
    assert result.exit_code == 10 and isinstance(result.exception, SystemExit), (result.output, result.exception)
    assert re.fullmatch(r"pcm: error: out of memory \(.*\): the operation needed more memory than it could get\n",
                        result.stderr), result.stderr
    with Memory.open(Settings(memory=memory_path, index_enabled=False), read_only=True) as memory:
        assert not [g for g in memory.backend.named_graphs() if "import" in g]


class _Unflushable:
    """A store whose flush meets a full disk (pyoxigraph's Store cannot be patched: it is a native type)."""

    def __init__(self, store: object) -> None:
        self._store: object | None = store

    def flush(self) -> None:
        self._store = None  # released unflushed, as when the process exits: its writes are in RocksDB's log
        raise OSError(ROCKSDB_FULL)


# ------------------------------------------------------------------------------------------------ store and index


@pytest.fixture
def stand_in_embedder() -> Iterator[None]:
    previous = install()
    yield
    restore(previous)


def _chat(name: str, n: int) -> Conversation:
    from datetime import datetime

    return Conversation(name, [Utterance(name, i, "user", f"{name} turn {i}: the heron {name} fished in the pond",
                                         timestamp=datetime(2025, 4, 1, 10, i), source_id=f"{name}-{i}")
                               for i in range(n)])


def test_an_index_write_refused_is_caught_up_at_the_next_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              stand_in_embedder: None) -> None:
    """The posts are stored, the index write meets the full disk: a later index write that succeeds must not clear
    the outbox marker those posts set, so the next open reconciles them into the index."""
    settings = Settings(memory=tmp_path / "memory", index_enabled=True)
    monkeypatch.setattr(SideIndex, "upsert_posts", _failing_after(SideIndex.upsert_posts, 0, RuntimeError(LANCE_FULL)))
    with Memory.init(settings, owner="Dana Whitfield") as memory:
        with pytest.raises(ResourceError, match=r"all 2 new utterance\(s\) were stored") as stopped:
            memory.ingest([_chat("egret", 2)])
        assert stopped.value.storage_full
        monkeypatch.undo()
        memory.ingest([_chat("ibis", 2)])  # its index write succeeds
        stored = _post_iris(memory)
        assert len(stored) == 4 and memory.index.post_iris() < stored  # the egret posts are not indexed yet
    with Memory.open(settings) as memory:
        assert memory.index.post_iris() == stored


def _post_iris(memory: Memory) -> set[str]:
    return {p.iri for p in memory.store.posts()}


# ------------------------------------------------------------------------------------------------ HTTP


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    with serving(build_memory(tmp_path / "memory", facts=False)) as server:
        yield server.url


def _posts(url: str) -> int:
    response = httpx.get(url + "/api/stats", timeout=60)
    assert response.status_code == 200, response.text
    return int(response.json()["posts"])


@pytest.mark.parametrize(("exc", "status", "words"), [
    (OSError(errno.ENOSPC, "No space left on device"), 507, "the disk is full"),
    (PermissionError(errno.EACCES, "Permission denied", "/m/oxigraph"), 500, "permission denied"),
])
def test_http_ingest_stopped_by_the_machine_says_what_was_stored(
    served: str, monkeypatch: pytest.MonkeyPatch, exc: BaseException, status: int, words: str
) -> None:
    before = _posts(served)
    messages = [{"id": f"h{i}", "role": "user", "content": f"Note {i}: the heron came back.",
                 "timestamp": "2025-06-01T10:00:00Z"} for i in range(5)]
    monkeypatch.setattr(MemoryStore, "write", _failing_after(MemoryStore.write, 2, exc))
    response = httpx.post(served + "/api/ingest", json={"conversation_id": "h", "messages": messages},
                          headers=AUTH, timeout=60)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error.startswith(words) and "2 new utterance(s) were stored" in error and "\n" not in error
    monkeypatch.undo()
    assert _posts(served) == before + 2


def test_http_another_oserror_is_an_internal_error(served: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(MemoryStore, "write", _failing_after(MemoryStore.write, 0, OSError(errno.EBADF, "Bad fd")))
    response = httpx.post(served + "/api/ingest", json={"text": "A heron.", "session": "h"}, headers=AUTH, timeout=60)
    assert response.status_code == 500 and response.json()["error"] == "internal error: OSError"

"""A memory's files are its owner's alone (pcm.private): under a umask of 022, everything pcm, Oxigraph (RocksDB)
and LanceDB create in a memory is 0700 or 0600, and a memory left open to others is repaired when it is opened."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from pcm.conversations import parse_file, sample_paths
from pcm.memory import Memory
from pcm.settings import Settings
from tests.endpoint.test_endpoint_support import AUTH, serving


@pytest.fixture
def umask_022() -> Iterator[None]:
    """The usual default umask, under which files are created world-readable; the test's own umask comes back."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def current_umask() -> int:
    value = os.umask(0)
    os.umask(value)
    return value


def modes(root: Path) -> dict[str, int]:
    """Every path under ``root`` (``root`` too) with its permission bits; symbolic links left out."""
    found = {".": stat.S_IMODE(root.lstat().st_mode)}
    for path in root.rglob("*"):
        if not path.is_symlink():
            found[str(path.relative_to(root))] = stat.S_IMODE(path.lstat().st_mode)
    return found


def wrong_modes(root: Path) -> dict[str, str]:
    """The paths whose mode is not 0700 (directory) or 0600 (file), with the mode they have."""
    wrong = {}
    for name, mode in modes(root).items():
        expected = 0o700 if (root / name).is_dir() else 0o600
        if mode != expected:
            wrong[name] = oct(mode)
    return wrong


def open_everything(root: Path) -> None:
    """What an older pcm (or a copy under umask 022) left: directories 0755, files 0644."""
    for name in modes(root):
        (root / name).chmod(0o755 if (root / name).is_dir() else 0o644)


def test_init_ingest_and_ask_create_only_private_files(tmp_path: Path, umask_022: None) -> None:
    settings = Settings(memory=tmp_path / "memory", index_enabled=True)
    pets = next(p for p in sample_paths() if p.name.startswith("05-pets"))
    with Memory.init(settings, owner="Dana Whitfield") as memory:
        assert current_umask() == 0o077  # while a memory is open, whatever the process creates is owner-only
        memory.ingest(parse_file(pets))
        assert memory.recall("dog", 3)  # the side index was written
        memory.ask("What is my dog called?")
    assert current_umask() == 0o022  # the last close gives the process its umask back (library use)
    root = settings.memory
    assert (root / "oxigraph").is_dir() and (root / "index").is_dir() and (root / "memory.toml").is_file()
    assert len(modes(root / "index")) > 5  # LanceDB's own files are among those checked
    assert wrong_modes(root) == {}


def test_a_served_memory_stays_private_engine_files_included(tmp_path: Path, umask_022: None) -> None:
    settings = Settings(memory=tmp_path / "memory", index_enabled=False)
    Memory.init(settings, owner="Dana Whitfield").close()
    with serving(settings) as server:
        answer = httpx.post(server.url + "/api/ingest", json={"text": "I adopted a beagle called Biscuit"}, headers=AUTH)
        assert answer.status_code == 200, answer.text
        assert (settings.memory / "serve.json").exists()
        assert wrong_modes(settings.memory) == {}  # the engine (a child process) wrote RocksDB files too
    assert current_umask() == 0o022


def test_a_memory_open_to_others_is_repaired_on_open(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    settings = Settings(memory=tmp_path / "memory", index_enabled=False)
    Memory.init(settings, owner="Dana Whitfield").close()
    open_everything(settings.memory)
    assert wrong_modes(settings.memory)
    with caplog.at_level(logging.WARNING, logger="pcm.private"), Memory.open(settings):
        pass
    assert wrong_modes(settings.memory) == {}
    lines = [r.getMessage() for r in caplog.records if r.name == "pcm.private"]
    assert len(lines) == 1 and "open to other users" in lines[0] and "owner-only" in lines[0]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="pcm.private"), Memory.open(settings, read_only=True):
        pass
    assert not [r for r in caplog.records if r.name == "pcm.private"]  # nothing to repair: nothing said


def test_an_inner_directory_open_to_others_is_repaired(tmp_path: Path) -> None:
    settings = Settings(memory=tmp_path / "memory", index_enabled=False)
    Memory.init(settings, owner="Dana Whitfield").close()
    (settings.memory / "oxigraph").chmod(0o755)
    with Memory.open(settings):
        pass
    assert wrong_modes(settings.memory) == {}


def test_init_over_an_open_directory_repairs_it_and_says_so(
    tmp_path: Path, umask_022: None, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "memory"
    path.mkdir(mode=0o755)
    with caplog.at_level(logging.WARNING, logger="pcm.private"):
        Memory.init(Settings(memory=path, index_enabled=False), owner="Dana Whitfield").close()
    assert wrong_modes(path) == {}
    assert any("open to other users" in r.getMessage() for r in caplog.records)

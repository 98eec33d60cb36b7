"""A real full disk (a 20 MB tmpfs): an ingest stops with one line, exit 10 (HTTP 507), naming how many posts it
stored; ``pcm stats`` shows exactly those; once there is room the same ingest stores the rest and the side index
holds every post. Skipped where mounting a tmpfs is not allowed (tests/test_resource_errors.py simulates it)."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import string
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from pcm.memory import Memory
from pcm.settings import Settings
from tests.endpoint.test_endpoint_support import AUTH, serving
from tests.fault_driver import install, restore

DRIVER = Path(__file__).with_name("fault_driver.py")
POSTS = 200
#: Room left for the ingest: well short of what its posts need (1.8 MB of text, kept by the store and by the index),
#: so the store refuses a post part-way (the side index may refuse its write first, after every post was stored:
#: then the report says "all"); the memory made before takes 3 MB of the 20.
ROOM = 2**20
#: The report of a stopped ingest: "N new utterance(s) were stored before it stopped", or "all N ... were stored".
STOPPED = re.compile(r"(?:all )?(\d+) new utterance\(s\) were stored")

pytestmark = pytest.mark.slow


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no `mount` here")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(mount)], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not allowed here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(disk: Path) -> Path:
    """Take all the disk's free space but :data:`ROOM`; remove the returned file to make room again."""
    filler = disk / "filler"
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    with open(filler, "wb") as out:
        os.posix_fallocate(out.fileno(), 0, free - ROOM)
    return filler


def _chat(path: Path) -> dict[str, object]:
    """A conversation of 200 posts of about 9 kB each, written to ``path`` (off the small disk)."""
    rng = random.Random(7)  # words that do not compress: the disk fills as it would with real talk
    messages = [{"id": f"n{i}", "role": "user" if i % 2 == 0 else "assistant",
                 "content": f"Note {i} about the heron at the pond: " + " ".join(
                     "".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9))) for _ in range(1500)),
                 "timestamp": "2025-02-03T19:00:00"} for i in range(POSTS)]
    chat = {"conversation_id": "pond", "title": "pond", "messages": messages}
    path.write_text(json.dumps(chat), encoding="utf-8")
    return chat


def _pcm(memory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """One real ``pcm`` process (the embedding model stood in for, see fault_driver), side index on."""
    env = {**os.environ, "PCM_MEMORY": str(memory), "PCM_LLM": "none", "PCM_INDEX": "on",
           "PYTHONPATH": os.pathsep.join([str(DRIVER.parent), *sys.path])}
    env.pop("PCM_STORE_URL", None)
    return subprocess.run([sys.executable, str(DRIVER), *args], capture_output=True, text=True, env=env, timeout=600)


@pytest.fixture
def stand_in_embedder() -> Iterator[None]:
    previous = install()
    yield
    restore(previous)


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if not line.startswith("faults-seen")]  # the driver's own line


def test_cli_ingest_on_a_full_disk(disk: Path, tmp_path: Path, stand_in_embedder: None) -> None:
    memory = disk / "memory"
    assert _pcm(memory, "init", "--owner", "Dana Whitfield").returncode == 0
    chat = tmp_path / "pond.json"
    _chat(chat)
    filler = _fill(disk)

    stopped = _pcm(memory, "ingest", str(chat))
    lines = _error_lines(stopped.stderr)
    assert stopped.returncode == 10, stopped.stderr
    assert len(lines) == 1 and lines[0].startswith("pcm: error: the disk is full ("), stopped.stderr
    found = STOPPED.search(lines[0])
    assert found is not None, lines[0]
    stored = int(found.group(1))
    assert 0 < stored < POSTS, lines[0]  # stopped part-way: a post was refused, the ones before it hold

    stats = _pcm(memory, "stats", "--json")  # a read-only open works on the full disk
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)["posts"] == stored

    filler.unlink()
    again = _pcm(memory, "ingest", str(chat), "--json")
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert (report["added"], report["skipped"]) == (POSTS - stored, stored)
    with Memory.open(Settings(memory=memory, index_enabled=True), read_only=True) as opened:  # no catching up here
        posts = {p.iri for p in opened.store.posts()}
        assert len(posts) == POSTS and opened.index.post_iris() == posts and opened.index_lag is None


def test_http_ingest_on_a_full_disk(disk: Path, tmp_path: Path, stand_in_embedder: None) -> None:
    """Through ``pcm serve``: its engine (``oxigraph serve``) meets the full disk, or the side index does."""
    settings = Settings(memory=disk / "memory", index_enabled=True)
    Memory.init(settings, owner="Dana Whitfield").close()
    chat = _chat(tmp_path / "pond.json")
    filler = _fill(disk)
    with serving(settings) as server:
        response = httpx.post(server.url + "/api/ingest", json=chat, headers=AUTH, timeout=600)
        assert response.status_code == 507, response.text
        error = response.json()["error"]
        found = STOPPED.search(error)
        assert error.startswith("the disk is full (") and found is not None and "\n" not in error, error
        stored = int(found.group(1))
        stats = httpx.get(server.url + "/api/stats", timeout=60)
        assert stats.status_code == 200 and stats.json()["posts"] == stored
    filler.unlink()
    with Memory.open(settings) as memory:  # the next open catches the index up with the store
        assert memory.stats().posts == stored
        assert len(memory.index.post_iris()) == stored

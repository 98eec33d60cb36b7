"""`pcm serve` finds the `oxigraph` binary in pcm's own environment, not only on PATH: an assistant's config that
starts pcm by its absolute path rarely puts that environment's `bin` on PATH, and the server failed to start."""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

import httpx
import pytest

from pcm.endpoint.engine import engine_binary
from pcm.memory import Memory
from pcm.settings import Settings
from tests.serve_process import SRC, serve_process

pytestmark = pytest.mark.skipif(
    shutil.which("oxigraph", path=sysconfig.get_path("scripts")) is None,
    reason="the `oxigraph` binary is not installed in this environment's scripts directory",
)


def _path_without_oxigraph() -> str:
    """PATH with every directory that holds an `oxigraph` (the environment's bin, a pyenv shim) left out."""
    kept = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d and shutil.which("oxigraph", path=d) is None]
    path = os.pathsep.join(kept) or "/nonexistent"
    assert shutil.which("oxigraph", path=path) is None
    return path


def test_the_binary_is_found_in_the_environment_without_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", _path_without_oxigraph())
    found = engine_binary()
    assert found is not None and Path(found).parent == Path(sysconfig.get_path("scripts"))


@pytest.mark.slow  # starts a server
def test_pcm_serve_starts_with_a_path_that_lacks_the_environment_bin(tmp_path: Path) -> None:
    memory = tmp_path / "m"
    Memory.init(Settings(memory=memory, index_enabled=False), owner="Dana").close()
    env = {**os.environ, "PATH": _path_without_oxigraph(), "PYTHONPATH": str(SRC), "PCM_LLM": "none",
           "PCM_INDEX": "off"}
    for name in ("PCM_MEMORY", "PCM_STORE_URL", "PCM_TOKEN"):
        env.pop(name, None)
    log = tmp_path / "serve.log"
    with log.open("w") as stderr, serve_process(memory, env=env, stderr=stderr, why=lambda _: log.read_text()) as (
        _,
        announced,
    ):
        assert Path(sys.executable).is_absolute()
        assert httpx.get(announced["url"] + "/api/health", timeout=60).status_code == 200

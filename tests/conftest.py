"""Shared fixtures: real memories on disk in tmp_path (no mocks of our own storage)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pcm.memory import Memory
from pcm.settings import Settings

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


def shared_path(*parts: str) -> Path:
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"../shared/{'/'.join(parts)} is not available")
    return path


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings for a fresh memory without the side index (tests of the index turn it on themselves)."""
    return Settings(memory=tmp_path / "memory", index_enabled=False)


@pytest.fixture
def memory(settings: Settings):  # type: ignore[no-untyped-def]
    m = Memory.init(settings, owner="Dana Whitfield")
    yield m
    m.close()

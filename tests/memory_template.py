"""A freshly initialised memory per test module, copied for each test (init writes the ontology: ~0.4 s)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pcm.memory import Memory
from pcm.settings import Settings


def init_template(tmp_path_factory: pytest.TempPathFactory, owner: str = "Dana Whitfield") -> Path:
    """Initialise one memory (index off) to copy from; call it from a module-scoped fixture."""
    path = tmp_path_factory.mktemp("template") / "memory"
    Memory.init(Settings(memory=path, index_enabled=False), owner=owner).close()
    return path


@contextmanager
def memory_copy(template: Path, tmp_path: Path) -> Iterator[Memory]:
    """A copy of ``template`` under ``tmp_path``, opened (index off) for the block and closed after it."""
    path = tmp_path / "memory"
    shutil.copytree(template, path)
    with Memory.open(Settings(memory=path, index_enabled=False)) as opened:
        yield opened

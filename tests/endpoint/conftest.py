"""Fixtures of the endpoint tests: one small memory and one ``pcm serve`` over it per module (a module that needs
other limits, switches or an embedder defines its own ``server``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pcm.endpoint.server import PcmServer
from pcm.settings import Settings
from tests.endpoint.test_endpoint_support import build_memory, serving


@pytest.fixture(scope="module")
def memory_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return build_memory(tmp_path_factory.mktemp("served") / "memory")


@pytest.fixture(scope="module")
def server(memory_settings: Settings) -> Iterator[PcmServer]:
    with serving(memory_settings) as running:
        yield running

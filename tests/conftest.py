"""Shared fixtures: real memories on disk in tmp_path (no mocks of our own storage)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pcm.memory import Memory
from pcm.ontology_tools.vocab import SHIPPED_VOCAB
from pcm.settings import Settings
from tests.memory_template import init_template

if TYPE_CHECKING:
    from pcm.endpoint.server import PcmServer
    from pcm.ontology import Ontology

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
#: The W3C RDF and SPARQL test files the suite reads, vendored with their licence (fixtures/w3c/README.md).
W3C_RDF_TESTS = REPO / "tests" / "fixtures" / "w3c" / "w3c-rdf-tests"
#: The published vocabularies' term lists the ontology checks read, shipped with their licences
#: (src/pcm/ontology_tools/standard_vocab/README.txt).
VOCAB = SHIPPED_VOCAB


def shared_path(*parts: str) -> Path:
    """A file of ../shared (the LoCoMo and LongMemEval data sets, non-commercial: read there, never copied into the
    repository), or a skip where it is not available."""
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


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One freshly initialised memory per module; each test gets a copy (init writes the ontology: ~0.4 s).

    Use with :func:`memory_template.memory_copy`."""
    return init_template(tmp_path_factory)


@pytest.fixture(scope="module")
def onto() -> Ontology:
    """The shipped ontology."""
    from pcm.ontology import load_ontology

    return load_ontology()


@pytest.fixture(scope="module")
def url(server: PcmServer) -> str:
    """The base URL of the module's ``server`` fixture (each endpoint module defines its own server)."""
    return server.url

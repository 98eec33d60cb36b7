"""A memory records the SPARQL server it lives in (pcm.store_binding), on a real `oxigraph serve` on loopback.

Commands reach the recorded server without PCM_STORE_URL and never make an embedded store beside it; a
PCM_STORE_URL that names another server, or any server for an embedded memory, is refused in one line (exit 2);
the store's credentials have their own settings, apart from `pcm serve`'s token."""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from pcm.backend_remote import RemoteBackend
from pcm.errors import MemoryNotFoundError, UsageError
from pcm.manifest import MANIFEST, Manifest
from pcm.memory import Memory
from pcm.settings import Settings
from pcm.store_binding import bind, same_store, without_credentials
from tests.oxigraph_server import start_oxigraph

BISCUIT = "I adopted a beagle called Biscuit"


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with start_oxigraph(None) as url:
        yield url


@pytest.fixture
def server_url(server: str) -> Iterator[str]:
    """The module's server, emptied after each test."""
    yield server
    with RemoteBackend(server) as backend:
        for graph in backend.named_graphs():
            backend.update(f"DROP SILENT GRAPH <{graph}>")


def pcm(memory: Path, *args: str, **env: str) -> Result:
    """``pcm --memory MEMORY ARGS`` in this process, with no PCM_* variable but ``env``."""
    from pcm.cli import main

    clean: dict[str, str | None] = {name: None for name in os.environ if name.startswith("PCM_")}
    return CliRunner().invoke(main, ["--memory", str(memory), *args], env={**clean, **env})


def _made_on(url: str, memory: Path) -> Path:
    result = pcm(memory, "init", "--owner", "Dana", PCM_STORE_URL=url)
    assert result.exit_code == 0, result.output
    return memory


def _toml(memory: Path) -> dict[str, object]:
    return tomllib.loads((memory / MANIFEST).read_text())


# ------------------------------------------------------------------------------------------------ recorded


def test_init_records_the_server_and_its_engine_never_a_credential(server_url: str, tmp_path: Path) -> None:
    with_password = server_url.replace("http://", "http://dana:s3cret@")
    memory = _made_on(with_password, tmp_path / "mem")
    recorded = _toml(memory)
    assert (recorded["store_url"], recorded["store_engine"]) == (server_url, "oxigraph")
    assert "s3cret" not in (memory / MANIFEST).read_text() and "dana:" not in (memory / MANIFEST).read_text()
    assert "store_url" not in recorded["seal"]  # type: ignore[operator]  # where the data is, not what it is
    assert not (memory / "oxigraph").exists()


def test_commands_reach_the_recorded_server_without_the_variable(server_url: str, tmp_path: Path) -> None:
    memory = _made_on(server_url, tmp_path / "mem")
    ingest = pcm(memory, "ingest", "--text", BISCUIT, "--at", "2025-03-02T10:00")
    assert ingest.exit_code == 0, ingest.output
    stats = pcm(memory, "stats", "--json")
    assert stats.exit_code == 0, stats.output
    assert json.loads(stats.output)["posts"] == 1
    recall = pcm(memory, "recall", "dog", "--json")
    assert recall.exit_code == 0, recall.output
    assert BISCUIT in recall.output
    # the post is on the server, and no command made a store of its own in the memory's directory
    with RemoteBackend(server_url) as backend:
        assert backend.query(f'ASK {{ GRAPH ?g {{ ?p <http://rdfs.org/sioc/ns#content> "{BISCUIT}" }} }}') is True
    assert not (memory / "oxigraph").exists()
    with Memory.open(Settings(memory=memory, index_enabled=False), read_only=True) as opened:
        assert opened.settings.store_url == server_url and opened.stats().posts == 1
    assert not (memory / "oxigraph").exists()


def test_the_same_server_spelt_otherwise_is_accepted(server_url: str, tmp_path: Path) -> None:
    memory = _made_on(server_url, tmp_path / "mem")
    for spelling in (server_url + "/", server_url + "/query", server_url.replace("http://", "HTTP://")):
        result = pcm(memory, "stats", "--json", PCM_STORE_URL=spelling)
        assert result.exit_code == 0, (spelling, result.output)


def test_pcm_serve_serves_a_recorded_server_without_the_variable(server_url: str, tmp_path: Path) -> None:
    import httpx

    from pcm.endpoint.config import ServeConfig
    from pcm.endpoint.server import PcmServer

    memory = _made_on(server_url, tmp_path / "mem")
    with PcmServer(Settings(memory=memory, index_enabled=False), ServeConfig(bind="127.0.0.1:0", token="t")) as served:
        assert served.settings.store_url == server_url
        assert httpx.get(served.url + "/api/stats", timeout=30).json()["posts"] == 0
    assert not (memory / "oxigraph").exists()


# ------------------------------------------------------------------------------------------------ refused


def test_a_variable_naming_another_server_is_refused_naming_both(server_url: str, tmp_path: Path) -> None:
    memory = _made_on(server_url, tmp_path / "mem")
    other = "http://user:pw@127.0.0.1:9/query"
    for args in (("stats",), ("ingest", "--text", BISCUIT)):
        result = pcm(memory, *args, PCM_STORE_URL=other)
        assert result.exit_code == 2, result.output
        line = result.output.strip()
        assert "\n" not in line and server_url in line and "http://127.0.0.1:9/query" in line
        assert "pw" not in line
    assert not (memory / "oxigraph").exists()


def test_an_embedded_memory_refuses_a_server_url(server_url: str, tmp_path: Path) -> None:
    memory = tmp_path / "mem"
    assert pcm(memory, "init", "--owner", "Dana").exit_code == 0
    pcm(memory, "ingest", "--text", BISCUIT, PCM_INDEX="off")
    for args in (("stats",), ("ingest", "--text", "I also have a cat")):
        result = pcm(memory, *args, PCM_STORE_URL=server_url)
        assert result.exit_code == 2, result.output
        line = result.output.strip()
        assert "\n" not in line and "embedded" in line and server_url in line and str(memory / "oxigraph") in line
    with RemoteBackend(server_url) as backend:
        assert backend.named_graphs() == []  # nothing went to the server
    with Memory.open(Settings(memory=memory, index_enabled=False)) as opened:
        assert opened.stats().posts == 1


def test_a_server_that_does_not_hold_the_memory_is_refused(server_url: str, tmp_path: Path) -> None:
    memory = _made_on(server_url, tmp_path / "mem")
    with start_oxigraph(None) as elsewhere:
        path = memory / MANIFEST
        path.write_text(path.read_text().replace(server_url, elsewhere))  # moved by hand, to the wrong server
        result = pcm(memory, "stats")
        assert result.exit_code == MemoryNotFoundError.exit_code, result.output
        assert elsewhere in result.output and "does not hold" in result.output
    assert not (memory / "oxigraph").exists()


def test_an_engine_that_contradicts_the_record_is_refused(server_url: str, tmp_path: Path) -> None:
    memory = _made_on(server_url, tmp_path / "mem")
    result = pcm(memory, "stats", PCM_STORE_ENGINE="virtuoso")
    assert result.exit_code == 2 and "oxigraph" in result.output and "virtuoso" in result.output


# ------------------------------------------------------------------------------------------------ older memories


def _forget_the_record(memory: Path) -> None:
    """memory.toml as a pcm before the record wrote it (the store fields are not sealed)."""
    manifest = Manifest.load(memory)
    manifest.store_url = manifest.store_engine = ""
    manifest.save(memory)
    assert "store_url" not in _toml(memory)


def test_a_server_memory_made_before_the_record_takes_the_variable_once(server_url: str, tmp_path: Path) -> None:
    memory = _made_on(server_url, tmp_path / "mem")
    _forget_the_record(memory)
    refused = pcm(memory, "stats")
    assert refused.exit_code == 2 and "PCM_STORE_URL" in refused.output  # never a new embedded store
    assert not (memory / "oxigraph").exists()
    with Memory.open(Settings(memory=memory, store_url=server_url, index_enabled=False), read_only=True):
        pass
    assert "store_url" not in _toml(memory)  # a read-only open writes nothing
    assert pcm(memory, "stats", PCM_STORE_URL=server_url).exit_code == 0  # stats opens read-only: no record
    assert "store_url" not in _toml(memory)
    ingest = pcm(memory, "ingest", "--text", BISCUIT, PCM_STORE_URL=server_url, PCM_INDEX="off")
    assert ingest.exit_code == 0, ingest.output  # a writable open records it
    assert (_toml(memory)["store_url"], _toml(memory)["store_engine"]) == (server_url, "oxigraph")
    assert pcm(memory, "stats").exit_code == 0
    assert not (memory / "oxigraph").exists()


def test_a_manifest_without_the_record_is_an_embedded_memory(tmp_path: Path) -> None:
    memory = tmp_path / "mem"
    Memory.init(Settings(memory=memory, index_enabled=False), owner="Dana").close()
    assert not set(_toml(memory)) & {"store_url", "store_engine", "store_update_url", "store_gsp_url"}
    settings = Settings(memory=memory)
    assert bind(settings, Manifest.load(memory)) == settings


# ------------------------------------------------------------------------------------------------ credentials


def test_serve_token_and_store_user_and_password_go_together(server_url: str, tmp_path: Path) -> None:
    """PCM_TOKEN is `pcm serve`'s alone: with a store user and password beside it every command used to fail."""
    memory = _made_on(server_url, tmp_path / "mem")
    env = {"PCM_TOKEN": "serve-secret", "PCM_STORE_USER": "dba", "PCM_STORE_PASSWORD": "dba", "PCM_INDEX": "off"}
    ingest = pcm(memory, "ingest", "--text", BISCUIT, **env)
    assert ingest.exit_code == 0, ingest.output
    stats = pcm(memory, "stats", "--json", **env)
    assert stats.exit_code == 0 and json.loads(stats.output)["posts"] == 1
    both = pcm(memory, "stats", PCM_STORE_TOKEN="t", PCM_STORE_USER="dba", PCM_STORE_PASSWORD="dba")
    assert both.exit_code == UsageError.exit_code and "not both" in both.output  # the store's own two, still


def test_store_settings_are_read_apart_from_serves() -> None:
    settings = Settings.from_env({"PCM_TOKEN": "serve", "PCM_STORE_TOKEN": "store", "PCM_STORE_WRITE_TIMEOUT": "90"})
    assert (settings.token, settings.store_token, settings.store_write_timeout) == ("serve", "store", 90.0)
    assert Settings.from_env({}).store_write_timeout == 30.0
    with pytest.raises(UsageError, match="PCM_STORE_WRITE_TIMEOUT"):
        Settings.from_env({"PCM_STORE_WRITE_TIMEOUT": "0"})
    assert Settings.from_env({"PCM_ENGINE_URL": "http://x"}).engine_url == ""  # pcm's own, never the environment's


# ------------------------------------------------------------------------------------------------ URLs


def test_urls_lose_their_credentials_and_compare_by_server() -> None:
    assert without_credentials("http://dba:pw@h:8890/sparql") == "http://h:8890/sparql"
    assert without_credentials("http://h:8890/") == "http://h:8890/"
    assert same_store("http://h:7878", "http://h:7878/query")
    assert same_store("http://h/sparql", "http://u:p@H:80/sparql-auth/")
    assert same_store("https://h/ds", "https://h:443/ds/")
    assert not same_store("http://h:7878", "http://h:7879")
    assert not same_store("http://h:3030/ds1/query", "http://h:3030/ds2/query")
    assert not same_store("http://h/x", "https://h/x")

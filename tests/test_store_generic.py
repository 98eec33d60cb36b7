"""pcm on servers it has no profile for, and on what servers answer: a slow server's writes (a setting, and an init
that runs past it leaves nothing behind), the store's own bearer token, an unbound group key in a stats answer,
and Virtuoso's refusal of a write without credentials, reported as a permission error."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pyoxigraph as ox
import pytest
from click.testing import CliRunner, Result

from pcm.backend import Solutions
from pcm.backend_remote import RemoteBackend
from pcm.errors import PcmError, QueryError
from pcm.layout import LEGACY, DatasetLayout
from pcm.manifest import MANIFEST
from pcm.memory import Memory
from pcm.naming import Naming
from pcm.settings import Settings
from pcm.store import MemoryStore
from tests.canned_endpoint import Recorder, canned_endpoint
from tests.slow_sparql_server import slow_sparql_server
from tests.virtuoso_server import start_virtuoso

XSD_INTEGER = ox.NamedNode("http://www.w3.org/2001/XMLSchema#integer")
#: What Virtuoso 7.2 answers (HTTP 500, text/plain) to an update sent to /sparql without dba's credentials.
VIRTUOSO_DENIED = (
    "Virtuoso 42000 Error SR186:SECURITY: No permission to execute procedure DB.DBA.SPARQL_INSERT_DICT_CONTENT with "
    "user ID 107, group ID 107\n\nSPARQL query:\nINSERT DATA { GRAPH <urn:g> { <urn:a> <urn:b> <urn:c> } }"
)
#: Newer Virtuoso releases, for a user without write permission on the graph.
VIRTUOSO_GRAPH_DENIED = (
    "Virtuoso RDF02 Error SR619: SPARUL INSERT access denied: database user 107 (SPARQL) has no write permission on "
    "graph urn:g"
)


def pcm(memory: Path, *args: str, **env: str) -> Result:
    from pcm.cli import main

    clean: dict[str, str | None] = {name: None for name in os.environ if name.startswith("PCM_")}
    return CliRunner().invoke(main, ["--memory", str(memory), *args], env={**clean, "PCM_INDEX": "off", **env})


# ------------------------------------------------------------------------------------------------ slow writes


def test_an_init_that_runs_past_the_write_timeout_leaves_the_store_clean(tmp_path: Path) -> None:
    with slow_sparql_server(delay=3.0) as server:
        result = pcm(tmp_path / "mem", "init", PCM_STORE_URL=server.url + "/query", PCM_STORE_WRITE_TIMEOUT="1")
        assert result.exit_code == PcmError.exit_code, result.output
        line = result.output.strip()
        assert "\n" not in line and "within 1 s" in line and "PCM_STORE_WRITE_TIMEOUT" in line
        assert "keeps nothing" in line
        with server.writing:  # every update sent has been applied, the slow one too
            assert server.graphs() == []
        assert server.updates_done >= 2  # the write that ran past the timeout did land, and was dropped after it
    assert not (tmp_path / "mem" / MANIFEST).exists() and not (tmp_path / "mem" / "oxigraph").exists()


def test_a_slow_server_is_waited_for_as_long_as_the_setting_says(tmp_path: Path) -> None:
    with slow_sparql_server(delay=2.0) as server:
        url = server.url + "/query"
        made = pcm(tmp_path / "mem", "init", PCM_STORE_URL=url, PCM_STORE_WRITE_TIMEOUT="20")
        assert made.exit_code == 0, made.output
        stats = pcm(tmp_path / "mem", "stats")  # without PCM_STORE_URL: the memory names its server
        assert stats.exit_code == 0, stats.output
        assert server.graphs()


def test_the_store_gets_its_own_token_never_serves(tmp_path: Path) -> None:
    with slow_sparql_server() as server:
        env = {"PCM_STORE_URL": server.url + "/query", "PCM_TOKEN": "serve-secret", "PCM_STORE_TOKEN": "store-secret"}
        assert pcm(tmp_path / "mem", "init", **env).exit_code == 0
        assert pcm(tmp_path / "mem", "ingest", "--text", "I adopted a beagle", **env).exit_code == 0
    assert server.authorizations and set(server.authorizations) == {"Bearer store-secret"}


# ------------------------------------------------------------------------------------------------ stats


class _GroupOverNothing:
    """Answers pcm's stats queries as rdflib does for a group over nothing: one row, its group key unbound."""

    layout: DatasetLayout | None = None

    def query(self, sparql: str, *, timeout: float | None = None, limit: int | None = None) -> Solutions:
        zero = ox.Literal("0", datatype=XSD_INTEGER)
        if "?class" in sparql:
            biscuit = (ox.NamedNode("https://w3id.org/pcm/ontology#Pet"), ox.Literal("1", datatype=XSD_INTEGER))
            return Solutions(("class", "n"), [biscuit, (None, zero)])
        if "?graphs" in sparql:
            return Solutions(("kind", "graphs", "triples"), [(None, zero, zero)])
        return Solutions(("kind", "n"), [(ox.Literal("posts"), ox.Literal("2", datatype=XSD_INTEGER)), (None, zero)])


def test_stats_skip_a_row_whose_group_key_is_unbound() -> None:
    naming = Naming("https://pcm.invalid/m/x/", DatasetLayout.of(LEGACY, "x"))
    stats = MemoryStore(_GroupOverNothing(), naming).stats()  # type: ignore[arg-type]
    assert (stats.posts, stats.entities_by_class, stats.graphs) == (2, [("https://w3id.org/pcm/ontology#Pet", 1)], {})


# ------------------------------------------------------------------------------------------------ permission


@pytest.fixture
def canned() -> Iterator[str]:
    with canned_endpoint((500, "text/plain", VIRTUOSO_DENIED.encode())) as url:
        yield url + "/sparql"


@pytest.mark.parametrize("status", [500, 400])
@pytest.mark.parametrize("text", [VIRTUOSO_DENIED, VIRTUOSO_GRAPH_DENIED], ids=["SR186", "SR619"])
def test_virtuoso_permission_refusals_are_permission_errors(canned: str, status: int, text: str) -> None:
    Recorder.answer = (status, "text/plain", text.encode())
    with RemoteBackend(canned, engine="virtuoso") as backend, pytest.raises(PcmError) as refused:
        backend.update("INSERT DATA { GRAPH <urn:g> { <urn:a> <urn:b> <urn:c> } }")
    message = str(refused.value)
    assert not isinstance(refused.value, QueryError) and "syntax" not in message
    assert "no permission" in message and "PCM_STORE_USER" in message and "\n" not in message


@pytest.mark.engine
def test_virtuoso_refuses_writes_without_credentials_as_permission_errors(tmp_path: Path) -> None:
    """End to end on a real Virtuoso: a write without dba's credentials is refused in one line as a permission
    error, whether Virtuoso says so (SR186) or fails to compile a big update first (an init's ontology: SP031)."""
    with start_virtuoso(tmp_path / "virtuoso") as url:
        with RemoteBackend(url) as anonymous, pytest.raises(PcmError) as small:
            anonymous.update("INSERT DATA { GRAPH <urn:g> { <urn:a> <urn:b> <urn:c> } }")
        with pytest.raises(PcmError) as init:
            Memory.init(Settings(memory=tmp_path / "mem", store_url=url, index_enabled=False), owner="Dana")
        with RemoteBackend(url, user="dba", password="dba") as backend:
            assert backend.named_graphs() == []
    assert "SR186" in str(small.value) and "keeps nothing" in str(init.value)
    for refused in (small.value, init.value):
        message = str(refused)
        assert not isinstance(refused, QueryError) and "syntax error" not in message and "\n" not in message
        assert "permission" in message and "PCM_STORE_USER" in message
    assert not (tmp_path / "mem" / MANIFEST).exists()

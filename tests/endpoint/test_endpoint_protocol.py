"""Unit tests of the front's request parsing, safety rules, negotiation, config and discovery (no server)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyoxigraph as ox
import pytest

from pcm.endpoint.config import ServeConfig, split_bind
from pcm.endpoint.protocol import (
    DEFAULT_ACCEPT,
    ProtocolError,
    engine_accept,
    parse_operation,
    refuse_federation,
    service_description,
)
from pcm.errors import UsageError
from pcm.serve_file import SERVE_FILE, ServerInfo, discover, remove_info, write_info

FORM = "application/x-www-form-urlencoded"


def parse(endpoint: str, method: str, params: list[tuple[str, str]], ctype: str = "", body: bytes = b""):  # type: ignore[no-untyped-def]
    return parse_operation(endpoint, method, params, ctype, body)


def status_of(endpoint: str, method: str, params: list[tuple[str, str]], ctype: str = "", body: bytes = b"") -> int:
    with pytest.raises(ProtocolError) as err:
        parse(endpoint, method, params, ctype, body)
    return err.value.status


# ------------------------------------------------------------------------------------------------ parsing


def test_get_form_and_direct_post_give_the_same_query() -> None:
    text = "SELECT * WHERE { ?s ?p ?o }"
    via_get = parse("query", "GET", [("query", text), ("default-graph-uri", "http://g")])
    via_form = parse("query", "POST", [], FORM, b"query=SELECT+*+WHERE+%7B+%3Fs+%3Fp+%3Fo+%7D&default-graph-uri=http%3A%2F%2Fg")
    via_direct = parse("query", "POST", [("default-graph-uri", "http://g")], "application/sparql-query", text.encode())
    for op in (via_get, via_form, via_direct):
        assert op is not None and op.kind == "query" and op.text == text
        assert op.dataset == [("default-graph-uri", "http://g")]


def test_plain_get_asks_for_the_service_description() -> None:
    assert parse("query", "GET", []) is None
    assert parse("sparql", "GET", [("union-default-graph", "")]) is None


@pytest.mark.parametrize(
    ("endpoint", "method", "params", "ctype", "body", "status"),
    [
        ("sparql", "PUT", [("query", "ASK {}")], FORM, b"", 405),
        ("sparql", "GET", [("query", "ASK {}"), ("query", "SELECT * {}")], "", b"", 400),
        ("sparql", "POST", [], "text/plain", b"ASK {}", 415),
        ("sparql", "POST", [], "", b"query=ASK%20%7B%7D", 400),
        ("sparql", "POST", [], "application/sparql-query; charset=UTF-16", "ASK {}".encode("utf-16"), 400),
        ("sparql", "POST", [], "application/sparql-query", b"ASK { \xff }", 400),
        ("sparql", "GET", [("update", "CLEAR ALL")], "", b"", 400),
        ("sparql", "POST", [], FORM, b"update=CLEAR%20NAMED&update=CLEAR%20DEFAULT", 400),
        ("sparql", "POST", [], FORM, b"query=ASK%20%7B%7D&update=CLEAR%20ALL", 400),
        ("query", "POST", [], "application/sparql-update", b"CLEAR ALL", 400),
        ("update", "POST", [], "application/sparql-query", b"ASK {}", 400),
        ("update", "GET", [], "", b"", 405),
        ("query", "GET", [("query", "ASK {}"), ("using-graph-uri", "http://g")], "", b"", 400),
        ("query", "GET", [("query", "  ")], "", b"", 400),
    ],
)
def test_protocol_violations_are_4xx(
    endpoint: str, method: str, params: list[tuple[str, str]], ctype: str, body: bytes, status: int
) -> None:
    assert status_of(endpoint, method, params, ctype, body) == status


def test_update_via_form_and_direct_post() -> None:
    form = parse("sparql", "POST", [("using-graph-uri", "http://g")], FORM, b"update=CLEAR+ALL")
    direct = parse("update", "POST", [], "application/sparql-update; charset=utf-8", b"CLEAR ALL")
    assert form is not None and form.kind == "update" and form.text == "CLEAR ALL"
    assert form.dataset == [("using-graph-uri", "http://g")]
    assert direct is not None and direct.kind == "update"


# ------------------------------------------------------------------------------------------------ safety


@pytest.mark.parametrize(
    "text",
    [
        "SELECT * WHERE { SERVICE <http://evil.example/sparql> { ?s ?p ?o } }",
        "select * where { service silent <http://x/> { ?s ?p ?o } }",
        "LOAD <http://evil.example/data.ttl>",
        "INSERT { ?s ?p ?o } WHERE { SERVICE <http://x/> { ?s ?p ?o } }",
    ],
)
def test_federation_is_refused(text: str) -> None:
    with pytest.raises(ProtocolError, match="refused") as err:
        refuse_federation(text)
    assert err.value.status == 400


@pytest.mark.parametrize(
    "text",
    [
        'SELECT * WHERE { ?s ?p "SERVICE <http://x/>" }',
        "SELECT * WHERE { ?s <http://ex/SERVICE> ?o }",
        "PREFIX ex: <http://ex/> SELECT ?service WHERE { ?s ex:SERVICE ?service }",
        "SELECT * WHERE { ?s ?p ?o } # SERVICE <http://x/> in a comment",
    ],
)
def test_the_word_service_in_strings_names_or_comments_is_fine(text: str) -> None:
    refuse_federation(text)


def test_union_default_graph_unless_the_client_names_a_dataset() -> None:
    plain = parse("query", "GET", [("query", "SELECT * WHERE { ?s ?p ?o }")])
    with_from = parse("query", "GET", [("query", "SELECT * FROM <http://g> WHERE { ?s ?p ?o }")])
    with_param = parse("query", "GET", [("query", "ASK {}"), ("named-graph-uri", "http://g/1")])
    quoted_from = parse("query", "GET", [("query", 'SELECT * WHERE { ?s ?p "FROM" }')])
    assert plain is not None and plain.engine_target("/query") == "/query?union-default-graph"
    assert with_from is not None and with_from.engine_target("/query") == "/query"
    assert with_param is not None and with_param.engine_target("/query") == "/query?named-graph-uri=http%3A%2F%2Fg%2F1"
    assert quoted_from is not None and quoted_from.engine_target("/query").endswith("?union-default-graph")


def test_base_is_the_front_and_keeps_line_numbers() -> None:
    op = parse("query", "GET", [("query", "SELECT * WHERE {\n <rel> ?p ?o }")])
    assert op is not None
    text = op.with_base("http://127.0.0.1:7878/query")
    assert text.count("\n") == 1
    result = ox.Store().query(text)
    assert isinstance(result, ox.QuerySolutions)


# ------------------------------------------------------------------------------------------------ negotiation


@pytest.mark.parametrize("accept", ["", "*/*", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"])
def test_no_real_preference_gets_json_and_turtle(accept: str) -> None:
    assert engine_accept(accept) == DEFAULT_ACCEPT


def test_a_real_preference_is_forwarded() -> None:
    assert engine_accept("text/csv") == "text/csv"
    assert engine_accept("application/sparql-results+xml, */*;q=0.1") == "application/sparql-results+xml, */*;q=0.1"


@pytest.mark.parametrize(
    ("accept", "media_type", "fmt"),
    [
        ("", "text/turtle", ox.RdfFormat.TURTLE),
        ("application/ld+json", "application/ld+json", ox.RdfFormat.JSON_LD),
        ("application/n-triples;q=0.5, application/rdf+xml", "application/rdf+xml", ox.RdfFormat.RDF_XML),
    ],
)
def test_service_description_is_negotiated_and_parses(accept: str, media_type: str, fmt: ox.RdfFormat) -> None:
    got_type, body = service_description("http://127.0.0.1:7878/query", writable=False, accept=accept)
    assert got_type == media_type
    triples = list(ox.parse(body, format=fmt))
    languages = {t.object.value for t in triples if t.predicate.value.endswith("supportedLanguage")}
    assert languages == {"http://www.w3.org/ns/sparql-service-description#SPARQL11Query"}
    endpoints = {t.object.value for t in triples if t.predicate.value.endswith("#endpoint")}
    assert endpoints == {"http://127.0.0.1:7878/query"}


def test_a_writable_server_describes_update() -> None:
    _, body = service_description("http://x/sparql", writable=True, accept="application/n-triples")
    assert b"SPARQL11Update" in body


# ------------------------------------------------------------------------------------------------ config


@pytest.mark.parametrize(
    ("bind", "host", "port", "loopback"),
    [
        ("127.0.0.1:7878", "127.0.0.1", 7878, True),
        ("[::1]:8000", "::1", 8000, True),
        (":0", "127.0.0.1", 0, True),
        ("localhost:1", "localhost", 1, True),
        ("0.0.0.0:7878", "0.0.0.0", 7878, False),
    ],
)
def test_bind_addresses(bind: str, host: str, port: int, loopback: bool) -> None:
    assert split_bind(bind) == (host, port)
    assert ServeConfig(bind=bind).loopback is loopback


@pytest.mark.parametrize("bind", ["7878", "host:port", "127.0.0.1:70000"])
def test_bad_bind_addresses_are_usage_errors(bind: str) -> None:
    with pytest.raises(UsageError, match="--bind"):
        split_bind(bind)


def test_defaults_are_safe() -> None:
    config = ServeConfig()
    assert config.loopback and not config.writable and not config.cors
    assert config.query_timeout > 0 and config.max_body > 0 and config.max_result > 0


# ------------------------------------------------------------------------------------------------ discovery


def test_discovery_file_round_trip_and_stale_files(tmp_path: Path) -> None:
    info = ServerInfo(url="http://127.0.0.1:9", pid=os.getpid(), token_required=True, memory=str(tmp_path), started="now")
    path = write_info(tmp_path, info)
    assert path.name == SERVE_FILE and (path.stat().st_mode & 0o777) == 0o600
    assert json.loads(path.read_text())["pid"] == os.getpid()
    assert discover(tmp_path, probe=False) == info
    assert discover(tmp_path, probe=True, timeout=0.2) is None  # nothing answers at that URL: stale
    remove_info(tmp_path, pid=os.getpid() + 1)  # not ours: left alone
    assert path.exists()
    remove_info(tmp_path, pid=os.getpid())
    assert not path.exists() and discover(tmp_path) is None


def test_a_file_whose_process_is_gone_is_ignored(tmp_path: Path) -> None:
    dead = 2**22 + 12345  # above the default pid_max: no such process
    write_info(tmp_path, ServerInfo("http://127.0.0.1:9", dead, False, str(tmp_path), "now"))
    assert discover(tmp_path, probe=False) is None
    (tmp_path / SERVE_FILE).write_text("{not json")
    assert discover(tmp_path, probe=False) is None

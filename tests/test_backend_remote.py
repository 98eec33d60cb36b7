"""RemoteBackend against a real ``oxigraph serve``: it must behave like LocalBackend on the same quads."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pyoxigraph as ox
import pytest

from pcm.backend import Solutions
from pcm.backend_local import LocalBackend
from pcm.backend_remote import CANCELLED_MARKER, RemoteBackend, derive_urls
from pcm.errors import InputError, PcmError, QueryError, UsageError
from tests.canned_endpoint import Recorder, canned_endpoint
from tests.oxigraph_server import _free_port, start_oxigraph
from tests.virtuoso_server import start_virtuoso

EX = "http://example.org/"
G1 = EX + "graph/one"
G2 = EX + "graph/two"


def N(local: str) -> ox.NamedNode:
    return ox.NamedNode(EX + local)


def sample_quads() -> list[ox.Quad]:
    """Two named graphs and the default graph; literals that stress escaping (quotes, newline, language, type)."""
    g1, g2 = N("graph/one"), N("graph/two")
    return [
        ox.Quad(N("alice"), N("name"), ox.Literal('Alice "Al" Smith\nsecond line'), g1),
        ox.Quad(N("alice"), N("knows"), N("bob"), g1),
        ox.Quad(
            N("alice"),
            N("age"),
            ox.Literal("42", datatype=ox.NamedNode("http://www.w3.org/2001/XMLSchema#integer")),
            g1,
        ),
        ox.Quad(N("bob"), N("name"), ox.Literal("Bob", language="en"), g2),
        ox.Quad(N("bob"), N("city"), ox.Literal("Zürich ☃"), g2),
        ox.Quad(N("bob"), N("knows"), N("carol"), g2),
        ox.Quad(N("carol"), N("name"), ox.Literal("Carol")),
    ]


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with start_oxigraph(None) as url:
        yield url


@pytest.fixture
def remote(server: str) -> Iterator[RemoteBackend]:
    backend = RemoteBackend(server + "/query", timeout=30)
    backend.update("DROP ALL")
    yield backend
    backend.close()


@pytest.fixture
def local() -> Iterator[LocalBackend]:
    backend = LocalBackend(None)
    yield backend
    backend.close()


def rows(result: object) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """Order-insensitive view of a SELECT result (SPARQL does not order rows without ORDER BY)."""
    assert isinstance(result, Solutions)
    return result.variables, sorted(tuple(str(t) for t in row) for row in result.rows)


def canonical(quads: object) -> set[ox.Quad]:
    dataset = ox.Dataset(quads)  # type: ignore[arg-type]
    dataset.canonicalize(ox.CanonicalizationAlgorithm.UNSTABLE)
    return set(dataset)


# ---------------------------------------------------------------------------------------- same answers as local


QUERIES_SELECT = [
    f"SELECT ?s ?name WHERE {{ ?s <{EX}name> ?name }}",  # union of every graph, no GRAPH clause
    f"SELECT * WHERE {{ ?a <{EX}knows> ?b . ?b <{EX}name> ?n }}",  # a join across two graphs
    "SELECT ?g (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } } GROUP BY ?g",
    f"SELECT ?s ?o WHERE {{ ?s <{EX}nothing> ?o }}",
    f"SELECT ?s ?missing WHERE {{ ?s <{EX}name> ?n OPTIONAL {{ ?s <{EX}city> ?missing }} }}",
]


@pytest.mark.parametrize("sparql", QUERIES_SELECT)
def test_select_over_the_union_matches_local(remote: RemoteBackend, local: LocalBackend, sparql: str) -> None:
    remote.extend(sample_quads())
    local.extend(sample_quads())
    assert rows(remote.query(sparql)) == rows(local.query(sparql))


def test_select_sees_triples_in_named_graphs_without_graph_clause(remote: RemoteBackend) -> None:
    remote.extend(sample_quads())
    names = remote.query(f"SELECT ?n WHERE {{ ?s <{EX}name> ?n }}")
    assert isinstance(names, Solutions)
    assert {t.value for t in names.values("n") if t is not None} == {
        'Alice "Al" Smith\nsecond line',
        "Bob",
        "Carol",
    }


def test_ask_and_construct_match_local(remote: RemoteBackend, local: LocalBackend) -> None:
    remote.extend(sample_quads())
    local.extend(sample_quads())
    for ask in (f"ASK {{ <{EX}alice> <{EX}knows> ?x . ?x <{EX}city> ?c }}", f"ASK {{ ?s <{EX}nothing> ?o }}"):
        assert remote.query(ask) is local.query(ask)
    construct = f"CONSTRUCT {{ ?b <{EX}knownBy> ?a . ?a <{EX}label> ?n }} WHERE {{ ?a <{EX}knows> ?b . ?a <{EX}name> ?n }}"
    got = remote.query(construct)
    assert isinstance(got, list) and got
    assert all(isinstance(t, ox.Triple) for t in got)
    assert set(got) == set(local.query(construct))  # type: ignore[arg-type]


def test_union_can_be_left_to_the_server(server: str) -> None:
    """union_default_graph=False sends nothing: Oxigraph then sees only the real default graph."""
    with RemoteBackend(server + "/query", union_default_graph=False) as backend:
        backend.update("DROP ALL")
        backend.extend(sample_quads())
        names = backend.query(f"SELECT ?n WHERE {{ ?s <{EX}name> ?n }}")
        assert [t.value for t in names.values("n")] == ["Carol"]  # type: ignore[union-attr]


def test_limit_stops_reading_a_huge_stream(remote: RemoteBackend) -> None:
    """The rows are parsed while they stream: 10 rows of a 10^8-row cross product come back at once."""
    remote.extend([ox.Quad(N(f"s{i}"), N("p"), N(f"s{i + 1}"), N("graph/chain")) for i in range(100)])
    sparql = "SELECT * WHERE { ?a ?p ?b . ?c ?q ?d . ?e ?r ?f . ?g ?h ?i }"
    result = remote.query(sparql, limit=10)
    assert isinstance(result, Solutions) and len(result) == 10
    assert remote.query("ASK { ?s ?p ?o }") is True  # the abandoned stream did not wedge the connection pool


# ---------------------------------------------------------------------------------------- writes and errors


def test_update_deletes_one_graph_and_leaves_the_other(remote: RemoteBackend) -> None:
    remote.extend(sample_quads())
    remote.update(f"DROP GRAPH <{G1}>")
    assert remote.named_graphs() == [G2]
    assert list(remote.quads(G1)) == []
    assert len(list(remote.quads(G2))) == 3


def test_failed_update_writes_nothing(remote: RemoteBackend) -> None:
    """Oxigraph runs one update request in one transaction: a failing last operation undoes the first."""
    remote.extend(sample_quads())
    closed_port = _free_port()
    with pytest.raises(QueryError) as err:
        remote.update(f"DROP GRAPH <{G1}> ; LOAD <http://127.0.0.1:{closed_port}/nothing.ttl>")
    assert "\n" not in str(err.value)
    assert remote.named_graphs() == [G1, G2]
    assert len(list(remote.quads(G1))) == 3


def test_syntax_errors_raise_query_error_on_one_line(remote: RemoteBackend) -> None:
    with pytest.raises(QueryError, match="syntax error") as err:
        remote.query("SELEC * WHERE { ?s ?p ?o }")
    assert "\n" not in str(err.value)
    with pytest.raises(QueryError, match="syntax error") as err:
        remote.update("INSERT DATA { GRAPH _:b { <http://a> <http://b> <http://c> } }")
    assert "\n" not in str(err.value)


def test_extend_with_an_invalid_quad_writes_nothing(remote: RemoteBackend) -> None:
    good = sample_quads()
    in_blank_graph = ox.Quad(N("x"), N("p"), N("y"), ox.BlankNode("g"))
    with pytest.raises(InputError, match="blank-node graph"):
        remote.extend([*good, in_blank_graph])
    with pytest.raises(TypeError):
        remote.extend([*good, (N("x"), N("p"), N("y"))])  # type: ignore[list-item]
    assert list(remote.quads()) == []
    assert remote.named_graphs() == []


def test_extend_nothing_is_a_no_op(remote: RemoteBackend) -> None:
    remote.extend([])
    assert list(remote.quads()) == []


def test_unreachable_server_names_the_url() -> None:
    url = f"http://127.0.0.1:{_free_port()}/query"
    with pytest.raises(PcmError, match=url.replace("/query", "")):
        RemoteBackend(url, timeout=5)  # auto-detection asks the server first
    with RemoteBackend(url, timeout=5, engine="generic", update_url=url) as backend, pytest.raises(PcmError, match=url.replace("/query", "")):
        backend.query("ASK {}")


# ---------------------------------------------------------------------------------------- graph store reads


def test_named_graphs_matches_local(remote: RemoteBackend, local: LocalBackend) -> None:
    for backend in (remote, local):
        backend.extend(sample_quads())
        backend.update(f"CREATE GRAPH <{EX}graph/empty>")
    assert remote.named_graphs() == local.named_graphs() == sorted([G1, G2, EX + "graph/empty"])


def test_quads_and_dump_round_trip(remote: RemoteBackend, local: LocalBackend) -> None:
    blank = ox.BlankNode()
    quads = [
        *sample_quads(),
        ox.Quad(N("alice"), N("address"), blank, N("graph/one")),
        ox.Quad(blank, N("city"), ox.Literal("Bern"), N("graph/one")),
    ]
    remote.extend(quads)
    local.extend(quads)
    assert canonical(remote.quads()) == canonical(quads)
    assert canonical(ox.parse(remote.dump(ox.RdfFormat.N_QUADS), ox.RdfFormat.N_QUADS)) == canonical(quads)
    assert canonical(ox.parse(remote.dump(ox.RdfFormat.TRIG), ox.RdfFormat.TRIG)) == canonical(local.quads())
    in_g1 = [q for q in quads if q.graph_name == N("graph/one")]
    assert canonical(remote.quads(G1)) == canonical(in_g1)  # quads of one graph keep their graph name
    turtle = remote.dump(ox.RdfFormat.TURTLE, graph=G1)
    assert canonical(ox.parse(turtle, ox.RdfFormat.TURTLE)) == canonical(
        ox.parse(local.dump(ox.RdfFormat.TURTLE, graph=G1), ox.RdfFormat.TURTLE)
    )
    assert list(remote.quads(EX + "graph/absent")) == []
    assert remote.dump(ox.RdfFormat.N_TRIPLES, graph=EX + "graph/absent") == b""
    with pytest.raises(UsageError):
        remote.dump(ox.RdfFormat.TURTLE)


def test_bulk_load_dataset_and_single_graph(remote: RemoteBackend, tmp_path: Path) -> None:
    dataset = tmp_path / "dump.nq"
    dataset.write_bytes(ox.serialize(sample_quads(), format=ox.RdfFormat.N_QUADS) or b"")
    remote.bulk_load(str(dataset), ox.RdfFormat.N_QUADS)
    assert canonical(remote.quads()) == canonical(sample_quads())

    turtle = tmp_path / "extra.ttl"
    turtle.write_text(f'<{EX}dave> <{EX}name> "Dave" .\n', encoding="utf-8")
    remote.bulk_load(str(turtle), ox.RdfFormat.TURTLE, graph=EX + "graph/import")
    assert [str(q) for q in remote.quads(EX + "graph/import")] == [
        f'<{EX}dave> <{EX}name> "Dave" <{EX}graph/import>'
    ]
    remote.bulk_load(str(turtle), ox.RdfFormat.TURTLE)  # no graph: the default graph
    assert ox.Quad(N("dave"), N("name"), ox.Literal("Dave")) in set(remote.quads())

    broken = tmp_path / "broken.ttl"
    broken.write_text("<http://a> <http://b> .\n", encoding="utf-8")
    with pytest.raises(PcmError, match="HTTP 400"):
        remote.bulk_load(str(broken), ox.RdfFormat.TURTLE)


# ---------------------------------------------------------------------------------------- time limits


@pytest.mark.timeout(60)
def test_runaway_query_is_cancelled_by_the_server_and_the_server_lives_on(tmp_path: Path) -> None:
    """``oxigraph serve --timeout-s 1`` cancels mid-answer (HTTP 200, body ends with its message)."""
    with (
        start_oxigraph(tmp_path / "db", timeout_s=1) as url,
        RemoteBackend(url + "/query", timeout=30) as backend,
    ):
        backend.extend([ox.Quad(N(f"s{i}"), N("p"), N(f"s{i + 1}"), N("graph/chain")) for i in range(3000)])
        runaway = f"SELECT * WHERE {{ ?a (<{EX}p>|^<{EX}p>)* ?b FILTER(?b = <{EX}never>) }}"
        with pytest.raises(QueryError, match="time limit"):
            backend.query(runaway)
        assert backend.query(f"ASK {{ <{EX}s0> <{EX}p> <{EX}s1> }}") is True


@pytest.mark.timeout(60)
def test_client_deadline_stops_a_streaming_query(remote: RemoteBackend) -> None:
    """Without a server time limit, our own deadline stops reading; closing the stream frees the server."""
    remote.extend([ox.Quad(N(f"s{i}"), N("p"), N(f"s{i + 1}"), N("graph/chain")) for i in range(200)])
    with pytest.raises(QueryError, match="time limit"):
        remote.query("SELECT * WHERE { ?a ?p ?b . ?c ?q ?d . ?e ?r ?f . ?g ?h ?i }", timeout=0.5)
    assert remote.query(f"ASK {{ <{EX}s0> <{EX}p> <{EX}s1> }}") is True


# ---------------------------------------------------------------------------------------- protocol details


@pytest.fixture
def fake_endpoint() -> Iterator[str]:
    with canned_endpoint((200, "application/sparql-results+json", json.dumps({"head": {}, "boolean": True}).encode())) as url:
        yield url


def test_bearer_token_and_protocol_headers_are_sent(fake_endpoint: str) -> None:
    with RemoteBackend(fake_endpoint + "/query", token="s3cret", engine="oxigraph") as backend:
        assert backend.query("ASK { ?s ?p ?o }") is True
    path, headers, body = Recorder.seen[-1]
    assert headers["Authorization"] == "Bearer s3cret"
    assert headers["Content-Type"] == "application/sparql-query"
    assert headers["Accept"] == "application/sparql-results+json"  # an ASK asks for results only
    assert path == "/query?union-default-graph"
    assert body == b"ASK { ?s ?p ?o }"


def test_no_token_no_authorization_header(fake_endpoint: str) -> None:
    with RemoteBackend(fake_endpoint + "/query", engine="oxigraph", union_default_graph=False) as backend:
        backend.query("ASK {}")
    path, headers, _ = Recorder.seen[-1]
    assert "Authorization" not in headers
    assert path == "/query"


def test_refused_token_is_a_clear_error(fake_endpoint: str) -> None:
    Recorder.answer = (401, "text/plain", b"unauthorized")
    with (
        RemoteBackend(fake_endpoint + "/query", token="wrong", engine="oxigraph") as backend,
        pytest.raises(PcmError, match="token"),
    ):
        backend.update("INSERT DATA { <http://a> <http://b> <http://c> }")
    assert Recorder.seen[-1][0] == "/update"


@pytest.mark.parametrize(
    "answer",
    [
        (
            200,
            "application/sparql-results+json",
            b'{"head":{"vars":["a"]},"results":{"bindings":[' + CANCELLED_MARKER.encode(),
        ),
        (
            200,
            "application/sparql-results+json",
            b'{"head":{"vars":["a"]},"results":{"bindings":[{"a":{"type":"uri","value":"http://x"}}'
            + CANCELLED_MARKER.encode(),
        ),
        (200, "application/n-triples", b"<http://a> <http://b> <http://c> .\n" + CANCELLED_MARKER.encode()),
        (500, "text/plain", CANCELLED_MARKER.encode()),
    ],
    ids=["json-head-only", "json-mid-row", "ntriples", "http-500"],
)
def test_cancellation_marker_becomes_a_time_limit_error(
    fake_endpoint: str, answer: tuple[int, str, bytes]
) -> None:
    Recorder.answer = answer
    query = "CONSTRUCT WHERE { ?a ?b ?c }" if answer[1] == "application/n-triples" else "SELECT * WHERE { ?a ?b ?c }"
    with RemoteBackend(fake_endpoint + "/query", engine="oxigraph") as backend, pytest.raises(QueryError, match="time limit"):
        backend.query(query)


def test_garbage_answer_is_a_query_error(fake_endpoint: str) -> None:
    Recorder.answer = (200, "text/html", b"<html>proxy login</html>")
    with RemoteBackend(fake_endpoint + "/query", engine="oxigraph") as backend, pytest.raises(QueryError, match="content type"):
        backend.query("SELECT * WHERE { ?a ?b ?c }")


def test_urls_are_derived_oxigraph_style() -> None:
    assert derive_urls("http://h:7878/query") == (
        "http://h:7878/query",
        "http://h:7878/update",
        "http://h:7878/store",
    )
    assert derive_urls("http://h/ds/sparql/") == ("http://h/ds/sparql",) * 3
    assert derive_urls("http://h/ds") == ("http://h/ds", "http://h/ds", "http://h/ds")
    backend = RemoteBackend(
        "http://h:7878/query", update_url="http://h:7878/u", gsp_url="http://h:7878/g", engine="generic"
    )
    assert (backend.update_url, backend.gsp_url) == ("http://h:7878/u", "http://h:7878/g")
    backend.close()


# ---------------------------------------------------------------------------------------- standard protocol, profiles


def test_server_root_url_is_accepted_and_detected_as_oxigraph(server: str) -> None:
    with RemoteBackend(server) as backend:
        assert backend.engine == "oxigraph"
        assert (backend.query_url, backend.update_url, backend.gsp_url) == (
            server + "/query",
            server + "/update",
            server + "/store",
        )
        backend.update("DROP ALL")
        backend.extend(sample_quads())
        assert backend.query(f"ASK {{ <{EX}bob> <{EX}knows> <{EX}carol> }}") is True


def _named_only(quads: object) -> set[ox.Quad]:
    return canonical(q for q in quads if not isinstance(q.graph_name, ox.DefaultGraph))  # type: ignore[attr-defined]


@pytest.mark.parametrize("gsp", [False, True], ids=["construct-reads", "graph-store-reads"])
def test_generic_profile_uses_only_standard_requests(tmp_path: Path, gsp: bool) -> None:
    """Against a server whose default graph is the union by its own configuration: no Oxigraph parameter, no
    whole-dataset Graph Store request; writes in batches that keep blank-node groups whole."""
    blank = ox.BlankNode()
    quads = [
        *sample_quads(),
        ox.Quad(N("alice"), N("address"), blank, N("graph/one")),
        ox.Quad(blank, N("city"), ox.Literal("Bern"), N("graph/one")),
    ]
    with start_oxigraph(None, union_default_graph=True) as url:
        gsp_url = url + "/store" if gsp else None
        with RemoteBackend(url + "/query", engine="generic", batch=2, gsp_url=gsp_url) as backend:
            assert not backend.union_default_graph and backend.gsp_url == (gsp_url or "")
            backend.extend(quads)
            names = backend.query(f"SELECT ?n WHERE {{ ?s <{EX}name> ?n }}")
            assert len(names) == 3  # type: ignore[arg-type]
            assert backend.query(f"ASK {{ ?a <{EX}address> ?b . ?b <{EX}city> \"Bern\" }}") is True
            assert _named_only(backend.quads()) == _named_only(quads)
            assert backend.named_graphs() == [G1, G2]
            trig = backend.dump(ox.RdfFormat.TRIG)
            assert _named_only(ox.parse(trig, ox.RdfFormat.TRIG)) == _named_only(quads)
            assert backend.dump(ox.RdfFormat.N_TRIPLES, graph=EX + "graph/absent") == b""
            dataset = tmp_path / "dump.nq"
            dataset.write_bytes(ox.serialize(quads, format=ox.RdfFormat.N_QUADS) or b"")
            backend.update("DROP ALL")
            backend.bulk_load(str(dataset), ox.RdfFormat.N_QUADS)
            assert _named_only(backend.quads()) == _named_only(quads)


def test_batches_keep_blank_node_groups_together() -> None:
    from pcm.backend_remote import batches

    a, b = ox.BlankNode(), ox.BlankNode()
    chain = [ox.Quad(N("s"), N("p"), a), ox.Quad(a, N("q"), b), ox.Quad(b, N("r"), ox.Literal("x"))]
    plain = [ox.Quad(N(f"s{i}"), N("p"), N("o")) for i in range(5)]
    parts = list(batches([plain[0], chain[0], *plain[1:3], chain[2], *plain[3:], chain[1]], 2))
    flat = [q for part in parts for q in part]
    assert len(flat) == 8 and set(flat) == set(plain + chain)
    assert any(set(chain) <= set(part) for part in parts)  # the group went whole, over the size
    assert all(len(part) <= 2 for part in parts if not set(chain) & set(part))
    assert list(batches([], 2)) == []


def test_skolemised_text_leaves_strings_and_iris_alone() -> None:
    from pcm.backend_remote import SKOLEM_PREFIX, skolemise_text

    text = 'INSERT DATA { GRAPH <urn:g> { _:b1 <http://p> "say _:b1" . <http://s#_:x> <http://p> _:b1 } } # _:c'
    out = skolemise_text(text)
    assert out.count(SKOLEM_PREFIX) == 2 and '"say _:b1"' in out and "<http://s#_:x>" in out and "# _:c" in out
    assert len(set(re_iris(out))) == 1  # one label, one IRI
    ended = skolemise_text("INSERT DATA { <urn:s> <urn:p> _:b1. }")
    assert ended.endswith("-b1>. }")  # the statement's dot is not part of the label


def re_iris(text: str) -> list[str]:
    import re

    from pcm.backend_remote import SKOLEM_PREFIX

    return re.findall(re.escape(SKOLEM_PREFIX) + r"[^>]+", text)


def test_accept_follows_the_query_form(fake_endpoint: str) -> None:
    with RemoteBackend(fake_endpoint + "/query", engine="generic") as backend:
        backend.query("PREFIX ex: <http://ex/construct#> # CONSTRUCT\nASK { ?s ?p 'DESCRIBE' }")
        Recorder.answer = (200, "application/n-triples", b"<http://a> <http://b> <http://c> .\n")
        assert len(backend.query("CONSTRUCT WHERE { ?s ?p ?o }")) == 1  # type: ignore[arg-type]
        backend.query("DESCRIBE <http://a>")
    accepts = [headers["Accept"] for _, headers, _ in Recorder.seen]
    assert accepts[0] == "application/sparql-results+json"
    assert accepts[1].startswith("application/n-triples") and "sparql-results" not in accepts[1]
    assert accepts[2] == accepts[1]
    assert [path for path, _, _ in Recorder.seen] == ["/query"] * 3  # generic: no Oxigraph parameter


@pytest.mark.parametrize(
    ("query", "answer"),
    [
        ("CONSTRUCT WHERE { ?s ?p ?o }", (200, "application/sparql-results+json", b'{"head":{"vars":["s"]},"results":{"bindings":[]}}')),
        ("SELECT * WHERE { ?s ?p ?o }", (200, "application/n-triples", b"")),
        ("ASK { ?s ?p ?o }", (200, "application/sparql-results+json", b'{"head":{"vars":["s"]},"results":{"bindings":[]}}')),
    ],
    ids=["construct-as-table", "select-as-graph", "ask-as-table"],
)
def test_an_answer_of_the_wrong_kind_is_an_error_not_an_empty_result(
    fake_endpoint: str, query: str, answer: tuple[int, str, bytes]
) -> None:
    Recorder.answer = answer
    with RemoteBackend(fake_endpoint + "/query", engine="generic") as backend, pytest.raises(QueryError, match="answered a"):
        backend.query(query)


class _Challenger(Recorder):
    """Asks for credentials with the class's scheme; records what came back. Calls itself Virtuoso."""

    scheme: ClassVar[str] = "Basic"
    server_version = "Virtuoso/07.20.3229"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        if "Authorization" not in self.headers:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            type(self).seen.append((self.path, dict(self.headers.items()), b""))
            challenge = 'Digest realm="SPARQL", nonce="abc", qop="auth", algorithm="MD5"' if self.scheme == "Digest" else 'Basic realm="SPARQL"'
            self.send_response(401)
            self.send_header("WWW-Authenticate", challenge)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        super().do_POST()


@pytest.mark.parametrize("scheme", ["Basic", "Digest"])
def test_user_and_password_answer_the_servers_challenge(scheme: str) -> None:
    _Challenger.scheme = scheme
    ok = (200, "application/sparql-results+json", json.dumps({"head": {}, "boolean": True}).encode())
    with canned_endpoint(ok, _Challenger) as url, RemoteBackend(url + "/sparql", user="dba", password="pw") as backend:
        assert backend.engine == "virtuoso"  # detected from the Server header
        assert backend.query_url == url + "/sparql-auth" and backend.gsp_url == url + "/sparql-graph-crud-auth"
        assert backend.query("ASK { ?s ?p ?o }") is True
        assert backend.query("ASK { ?s ?p ?o }") is True
    first, *_, answered, again = _Challenger.seen  # Digest asks once more before its first answer
    assert len(_Challenger.seen) <= 4
    assert "Authorization" not in first[1]
    assert answered[1]["Authorization"].startswith(scheme + " ")
    assert again[1]["Authorization"].startswith(scheme + " ")  # the scheme is remembered: no second challenge
    assert answered[1]["Content-Type"] == "application/x-www-form-urlencoded"  # Virtuoso: form-encoded queries
    assert answered[2].startswith(b"query=ASK")


def test_bearer_token_and_user_are_exclusive() -> None:
    with pytest.raises(UsageError):
        RemoteBackend("http://h/sparql", token="t", user="u", engine="generic")
    with pytest.raises(UsageError, match="engine"):
        RemoteBackend("http://h/sparql", engine="fuseki")


def test_store_settings_come_from_the_environment() -> None:
    from pcm.settings import Settings

    env = {
        "PCM_STORE_URL": "http://h:8890/",
        "PCM_STORE_UPDATE_URL": "http://h:8890/u",
        "PCM_STORE_GSP_URL": "http://h:8890/g",
        "PCM_STORE_USER": "dba",
        "PCM_STORE_PASSWORD": "pw",
        "PCM_STORE_ENGINE": "Virtuoso",
        "PCM_STORE_BATCH": "500",
    }
    s = Settings.from_env(env)
    assert (s.store_url, s.store_update_url, s.store_gsp_url) == ("http://h:8890/", "http://h:8890/u", "http://h:8890/g")
    assert (s.store_user, s.store_password, s.store_engine, s.store_batch) == ("dba", "pw", "virtuoso", 500)
    with pytest.raises(UsageError, match="PCM_STORE_ENGINE"):
        Settings.from_env({"PCM_STORE_ENGINE": "fuseki"})


# ---------------------------------------------------------------------------------------- a real Virtuoso


@pytest.fixture(scope="module")
def virtuoso(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with start_virtuoso(tmp_path_factory.mktemp("virtuoso")) as url:
        yield url


@pytest.fixture
def on_virtuoso(virtuoso: str) -> Iterator[RemoteBackend]:
    """Digest-authenticated as the fresh database's dba, the engine detected from the root URL."""
    backend = RemoteBackend(virtuoso, user="dba", password="dba", timeout=30)
    for graph in backend.named_graphs():
        backend.update(f"DROP SILENT GRAPH <{graph}>")
    yield backend
    backend.close()


@pytest.mark.engine
def test_virtuoso_is_detected_and_answers_like_local(on_virtuoso: RemoteBackend, local: LocalBackend) -> None:
    assert on_virtuoso.engine == "virtuoso" and on_virtuoso.update_url.endswith("/sparql-auth")
    named = [q for q in sample_quads() if not isinstance(q.graph_name, ox.DefaultGraph)]
    on_virtuoso.extend(named)
    local.extend(named)
    assert on_virtuoso.named_graphs() == [G1, G2]  # Virtuoso's own graphs left out
    for sparql in QUERIES_SELECT[:2] + QUERIES_SELECT[3:]:
        assert rows(on_virtuoso.query(sparql)) == rows(local.query(sparql)), sparql
    construct = f"CONSTRUCT {{ ?b <{EX}knownBy> ?a }} WHERE {{ ?a <{EX}knows> ?b }}"
    assert set(on_virtuoso.query(construct)) == set(local.query(construct))  # type: ignore[arg-type]
    assert on_virtuoso.query(f"ASK {{ <{EX}alice> <{EX}knows> <{EX}bob> }}") is True


@pytest.mark.engine
def test_virtuoso_takes_blank_nodes_and_big_writes(on_virtuoso: RemoteBackend, tmp_path: Path) -> None:
    """Blank nodes are skolemised on the way in and come back as blank nodes; 2,500 quads go in batches of 1,000;
    update text with blank nodes (as the ontology's replacement sends) is skolemised too."""
    blank = ox.BlankNode()
    quads = [
        ox.Quad(N("alice"), N("address"), blank, N("graph/one")),
        ox.Quad(blank, N("city"), ox.Literal("Bern"), N("graph/one")),
        *[ox.Quad(N(f"s{i}"), N("p"), ox.Literal(f"value {i}"), N("graph/big")) for i in range(2500)],
    ]
    assert on_virtuoso.batch == 1000
    on_virtuoso.extend(quads)
    assert canonical(on_virtuoso.quads()) == canonical(quads)
    assert on_virtuoso.query(f"ASK {{ <{EX}alice> <{EX}address> ?a . ?a <{EX}city> \"Bern\" }}") is True
    on_virtuoso.update(f'INSERT DATA {{ GRAPH <{G2}> {{ <{EX}bob> <{EX}pet> _:p . _:p <{EX}name> "Rex _:not" }} }}')
    assert canonical(on_virtuoso.quads(G2)) == canonical([
        ox.Quad(N("bob"), N("pet"), (pet := ox.BlankNode()), N("graph/two")),
        ox.Quad(pet, N("name"), ox.Literal("Rex _:not"), N("graph/two")),
    ])
    dump = tmp_path / "dump.nq"
    dump.write_bytes(on_virtuoso.dump(ox.RdfFormat.N_QUADS))
    on_virtuoso.update(f"DROP SILENT GRAPH <{G1}> ; DROP SILENT GRAPH <{G2}> ; DROP SILENT GRAPH <{EX}graph/big>")
    on_virtuoso.bulk_load(str(dump), ox.RdfFormat.N_QUADS)
    assert len(list(on_virtuoso.quads())) == len(quads) + 2


@pytest.mark.engine
def test_virtuoso_answers_cut_at_its_row_limit_are_errors(tmp_path: Path) -> None:
    """A stock Virtuoso cuts answers at ResultSetMaxRows: a SELECT says so in a header, a graph read says nothing;
    both become errors instead of short results."""
    with start_virtuoso(tmp_path, max_rows=5) as url, RemoteBackend(url, user="dba", password="dba") as backend:
        backend.extend([ox.Quad(N(f"s{i}"), N("p"), ox.Literal(str(i)), N("graph/seven")) for i in range(7)])
        with pytest.raises(QueryError, match="cut the answer at 5 rows"):
            backend.query(f"SELECT ?s WHERE {{ GRAPH <{EX}graph/seven> {{ ?s ?p ?o }} }}")
        assert len(backend.query(f"SELECT ?s WHERE {{ ?s <{EX}p> ?o }}", limit=3)) == 3  # type: ignore[arg-type]
        with pytest.raises(PcmError, match="of the 7 triples"):
            list(backend.quads())


class _Described(Recorder):
    """A generic endpoint whose service description (GET without a query) says whether it takes updates."""

    updates: ClassVar[bool] = True

    def do_GET(self) -> None:
        sd = "http://www.w3.org/ns/sparql-service-description#"
        language = "SPARQL11Update" if self.updates else "SPARQL11Query"
        body = f"<#service> a <{sd}Service> ; <{sd}supportedLanguage> <{sd}{language}> .\n".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/turtle")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.mark.parametrize("updates", [True, False])
def test_generic_update_url_comes_from_the_service_description(updates: bool) -> None:
    _Described.updates = updates
    with canned_endpoint(handler=_Described) as url, RemoteBackend(url + "/query") as backend:
        assert backend.engine == "generic"
        assert backend.update_url == (url + "/query" if updates else url + "/update")

"""``pcm serve`` end to end: a real engine, a real front, real clients (plain HTTP, SPARQLWrapper, rdflib).

One server over one small memory serves the read tests; tests that change data use their own graph names, and
tests that need other limits or switches start their own server (start-up takes well under a second).
"""

from __future__ import annotations

import csv
import io
import socket
from pathlib import Path

import httpx
import pyoxigraph as ox
import pytest
import rdflib
from rdflib.compare import isomorphic

from pcm.backend import Solutions
from pcm.backend_remote import RemoteBackend
from pcm.errors import PcmError
from tests.endpoint.test_endpoint_support import AUTH, EX, POSTS, TOKEN, ask, build_memory, serving

# ------------------------------------------------------------------------------------------------ queries


@pytest.mark.parametrize(
    ("accept", "media_type"),
    [
        ("application/sparql-results+json", "application/sparql-results+json"),
        ("application/sparql-results+xml", "application/sparql-results+xml"),
        ("text/csv", "text/csv"),
        ("text/tab-separated-values", "text/tab-separated-values"),
    ],
)
def test_select_in_every_results_format(url: str, accept: str, media_type: str) -> None:
    response = httpx.get(url + "/query", params={"query": POSTS}, headers={"Accept": accept})
    assert response.status_code == 200
    assert response.headers["content-type"].split(";")[0] == media_type
    if media_type == "text/csv":  # lossy: pyoxigraph does not parse it back
        assert list(csv.reader(io.StringIO(response.text))) == [["n"], ["10"]]
        return
    fmt = ox.QueryResultsFormat.from_media_type(media_type)
    assert fmt is not None
    rows = list(ox.parse_query_results(response.content, fmt))  # type: ignore[arg-type]
    assert int(rows[0]["n"].value) == 10  # the union default graph sees the conversation graph's posts


def test_get_form_post_and_direct_post_agree(url: str) -> None:
    accept = {"Accept": "text/csv"}
    via_get = httpx.get(url + "/query", params={"query": POSTS}, headers=accept)
    via_form = httpx.post(url + "/query", data={"query": POSTS}, headers=accept)
    via_direct = httpx.post(
        url + "/sparql", content=POSTS, headers={**accept, "Content-Type": "application/sparql-query"}
    )
    bodies = {r.text for r in (via_get, via_form, via_direct)}
    assert len(bodies) == 1 and list(csv.reader(io.StringIO(bodies.pop())))[1] == ["10"]


@pytest.mark.parametrize(
    ("accept", "fmt"),
    [
        ("text/turtle", ox.RdfFormat.TURTLE),
        ("application/n-triples", ox.RdfFormat.N_TRIPLES),
        ("application/ld+json", ox.RdfFormat.JSON_LD),
        ("", ox.RdfFormat.TURTLE),
    ],
)
def test_construct_in_graph_formats(url: str, accept: str, fmt: ox.RdfFormat) -> None:
    query = "CONSTRUCT { ?p <http://example.org/text> ?t } WHERE { ?p <http://rdfs.org/sioc/ns#content> ?t }"
    response = httpx.post(url + "/query", content=query, headers={"Content-Type": "application/sparql-query", "Accept": accept})
    assert response.status_code == 200
    assert response.headers["content-type"].split(";")[0] == fmt.media_type
    triples = list(ox.parse(response.content, format=fmt))
    assert len(triples) == 10 and any(t.object.value.startswith("My dog Biscuit") for t in triples)


def test_service_description(url: str) -> None:
    response = httpx.get(url + "/query", headers={"Accept": "text/turtle"})
    assert response.status_code == 200 and response.headers["content-type"] == "text/turtle"
    graph = rdflib.Graph().parse(data=response.text, format="turtle")
    sd = rdflib.Namespace("http://www.w3.org/ns/sparql-service-description#")
    assert (None, sd.endpoint, rdflib.URIRef(url + "/query")) in graph
    assert (None, sd.supportedLanguage, sd.SPARQL11Query) in graph
    assert (None, sd.supportedLanguage, sd.SPARQL11Update) not in graph  # /query refuses updates: not offered
    combined = rdflib.Graph().parse(data=httpx.get(url + "/sparql", headers={"Accept": "text/turtle"}).text, format="turtle")
    assert (None, sd.supportedLanguage, sd.SPARQL11Update) in combined  # /sparql takes them (this server has a token)


def test_syntax_error_is_a_one_line_protocol_error(url: str) -> None:
    response = httpx.get(url + "/query", params={"query": "SELECT ?x WHERE { ?x "})
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("text/plain")
    assert response.text.count("\n") == 1 and "error" in response.text.lower()


def test_relative_iris_resolve_against_the_front(url: str) -> None:
    response = httpx.get(
        url + "/query", params={"query": "SELECT ?x WHERE { BIND(<thing> AS ?x) }"}, headers={"Accept": "text/csv"}
    )
    assert response.text.splitlines()[1] == url + "/thing"


# ------------------------------------------------------------------------------------------------ real clients


def test_sparqlwrapper_select_ask_and_construct(url: str) -> None:
    from SPARQLWrapper import JSON, RDFXML, SPARQLWrapper

    client = SPARQLWrapper(url + "/query")
    client.setQuery(POSTS)
    client.setReturnFormat(JSON)
    result = client.queryAndConvert()
    assert result["results"]["bindings"][0]["n"]["value"] == "10"  # type: ignore[index]
    client.setQuery("ASK { ?p <http://rdfs.org/sioc/ns#content> ?t FILTER(CONTAINS(?t, 'Biscuit')) }")
    assert client.queryAndConvert()["boolean"] is True  # type: ignore[index]
    client.setQuery("CONSTRUCT WHERE { ?p <http://rdfs.org/sioc/ns#content> ?t }")
    client.setReturnFormat(RDFXML)
    graph = client.queryAndConvert()
    assert isinstance(graph, rdflib.Graph) and len(graph) == 10


def test_sparqlwrapper_update_with_and_without_the_token(url: str) -> None:
    from SPARQLWrapper import POST, SPARQLWrapper
    from SPARQLWrapper.SPARQLExceptions import Unauthorized

    insert = f"INSERT DATA {{ GRAPH <{EX}wrapper> {{ <{EX}a> <{EX}b> <{EX}c> }} }}"
    anonymous = SPARQLWrapper(url + "/query", updateEndpoint=url + "/update")
    anonymous.setMethod(POST)
    anonymous.setQuery(insert)
    with pytest.raises(Unauthorized):
        anonymous.query()
    assert not ask(url, f"ASK {{ <{EX}a> <{EX}b> <{EX}c> }}")
    owner = SPARQLWrapper(url + "/query", updateEndpoint=url + "/update")
    owner.setMethod(POST)
    owner.addCustomHttpHeader("Authorization", f"Bearer {TOKEN}")
    owner.setQuery(insert)
    owner.query()
    assert ask(url, f"ASK {{ GRAPH <{EX}wrapper> {{ <{EX}a> <{EX}b> <{EX}c> }} }}")


def test_rdflib_sparqlstore_and_update_store(url: str) -> None:
    from rdflib.plugins.stores.sparqlstore import SPARQLStore, SPARQLUpdateStore

    reader = rdflib.Graph(SPARQLStore(url + "/query"))
    rows = list(reader.query("SELECT ?t WHERE { ?p <http://rdfs.org/sioc/ns#content> ?t } ORDER BY ?t LIMIT 3"))
    assert len(rows) == 3 and all(isinstance(r[0], rdflib.Literal) for r in rows)
    writer = SPARQLUpdateStore(url + "/query", url + "/update", headers=dict(AUTH))
    graph = rdflib.Graph(writer, identifier=rdflib.URIRef(EX + "rdflib"))
    graph.add((rdflib.URIRef(EX + "x"), rdflib.URIRef(EX + "y"), rdflib.Literal("z")))
    assert ask(url, f'ASK {{ GRAPH <{EX}rdflib> {{ <{EX}x> <{EX}y> "z" }} }}')


def test_pcm_remote_backend_through_the_front(url: str) -> None:
    """What a CLI command does when it finds the server: the same RemoteBackend as for any SPARQL server."""
    with RemoteBackend(url + "/query", token=TOKEN) as backend:
        result = backend.query(POSTS)
        assert isinstance(result, Solutions) and int(result.rows[0][0].value) == 10  # type: ignore[union-attr]
        g = ox.NamedNode(EX + "remote")
        backend.extend([ox.Quad(ox.NamedNode(EX + "s"), ox.NamedNode(EX + "p"), ox.Literal("o"), g)])
        assert EX + "remote" in backend.named_graphs()
        assert [q.object.value for q in backend.quads(EX + "remote")] == ["o"]
        everything = list(backend.quads())  # the whole dataset, streamed through the front
        assert len(everything) > 1000 and any(q.graph_name == g for q in everything)
        assert b"<urn:pcm:graph:conversation>" in backend.dump(ox.RdfFormat.N_QUADS)
    with RemoteBackend(url + "/query") as anonymous, pytest.raises(PcmError, match="token"):
        anonymous.update(f"DROP GRAPH <{EX}remote>")


# ------------------------------------------------------------------------------------------------ graph store


def test_graph_store_round_trip(url: str) -> None:
    graph = {"graph": EX + "gsp"}
    turtle = f'<{EX}alice> <{EX}knows> <{EX}bob> ; <{EX}name> "Alice \\"Al\\"" .\n'
    put = httpx.put(url + "/store", params=graph, content=turtle, headers={**AUTH, "Content-Type": "text/turtle"})
    assert put.status_code in (201, 204)
    more = f"<{EX}bob> <{EX}name> \"Bob\"@en .\n"
    post = httpx.post(url + "/store", params=graph, content=more, headers={**AUTH, "Content-Type": "application/n-triples"})
    assert post.status_code in (200, 201, 204)
    got = httpx.get(url + "/store", params=graph, headers={"Accept": "text/turtle"})
    assert got.status_code == 200 and got.headers["content-type"].startswith("text/turtle")
    expected = rdflib.Graph().parse(data=turtle + more, format="turtle")
    assert isomorphic(rdflib.Graph().parse(data=got.text, format="turtle"), expected)
    assert httpx.head(url + "/store", params=graph).status_code == 200
    assert httpx.delete(url + "/store", params=graph, headers=AUTH).status_code in (200, 204)
    assert httpx.get(url + "/store", params=graph).status_code == 404


def test_graph_store_writes_need_the_token_and_write_nothing(url: str) -> None:
    graph = {"graph": EX + "intruder"}
    body = f"<{EX}x> <{EX}y> <{EX}z> .\n"
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}):
        response = httpx.put(url + "/store", params=graph, content=body, headers={**headers, "Content-Type": "text/turtle"})
        assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer"
    assert httpx.get(url + "/store", params=graph).status_code == 404
    protected = {"graph": "urn:pcm:graph:conversation"}
    assert httpx.delete(url + "/store", params=protected).status_code == 401
    assert ask(url, POSTS.replace("SELECT (COUNT(?p) AS ?n)", "ASK").replace("WHERE", ""))


# ------------------------------------------------------------------------------------------------ security


@pytest.mark.parametrize("auth", [None, "Bearer nope", f"bearer {TOKEN}x", "Token " + TOKEN])
def test_update_without_or_with_a_wrong_token_is_refused_and_writes_nothing(url: str, auth: str | None) -> None:
    headers = {"Content-Type": "application/sparql-update", **({"Authorization": auth} if auth else {})}
    update = f"INSERT DATA {{ <{EX}evil> <{EX}p> 1 }} ; DROP GRAPH <urn:pcm:graph:conversation>"
    for endpoint in ("/update", "/sparql"):
        response = httpx.post(url + endpoint, content=update, headers=headers)
        assert response.status_code == 401, response.text
    form = httpx.post(url + "/sparql", data={"update": update}, headers={k: v for k, v in headers.items() if k != "Content-Type"})
    assert form.status_code == 401
    assert not ask(url, f"ASK {{ <{EX}evil> ?p ?o }}")
    assert ask(url, "ASK { GRAPH <urn:pcm:graph:conversation> { ?s ?p ?o } }")


def test_the_right_token_updates(url: str) -> None:
    response = httpx.post(
        url + "/update", content=f"INSERT DATA {{ GRAPH <{EX}ok> {{ <{EX}good> <{EX}p> 1 }} }}",
        headers={**AUTH, "Content-Type": "application/sparql-update"},
    )
    assert response.status_code == 204
    assert ask(url, f"ASK {{ <{EX}good> <{EX}p> 1 }}")


class _Listener:
    """A local socket that tells whether anything connected (to prove SERVICE/LOAD never left the server).

    Nothing accepts while the requests run: a connection made to it waits in the listen backlog, where the
    non-blocking accepts of :meth:`connections` find it afterwards (no wait for a thread to notice)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]

    def connections(self) -> int:
        count = 0
        while True:
            try:
                conn, _ = self.sock.accept()
            except BlockingIOError:
                return count
            count += 1
            conn.close()

    def close(self) -> None:
        self.sock.close()


def test_service_and_load_are_refused_before_anything_is_fetched(url: str) -> None:
    listener = _Listener()
    try:
        target = f"http://127.0.0.1:{listener.port}/sparql"
        query = f"SELECT * WHERE {{ SERVICE <{target}> {{ ?s ?p ?o }} }}"
        response = httpx.get(url + "/query", params={"query": query})
        assert response.status_code == 400 and "SERVICE is refused" in response.text
        load = httpx.post(url + "/update", content=f"LOAD <{target}> INTO GRAPH <{EX}loaded>",
                          headers={**AUTH, "Content-Type": "application/sparql-update"})
        assert load.status_code == 400 and "LOAD is refused" in load.text
        assert listener.connections() == 0
        socket.create_connection(("127.0.0.1", listener.port)).close()
        assert listener.connections() == 1  # what the check would have seen
    finally:
        listener.close()


def test_a_foreign_host_header_is_refused(url: str) -> None:
    """DNS rebinding: a page on evil.example resolving to 127.0.0.1 must not read the memory."""
    response = httpx.get(url + "/query", params={"query": POSTS}, headers={"Host": "evil.example:7878"})
    assert response.status_code == 403
    assert httpx.get(url + "/query", params={"query": POSTS}, headers={"Host": "localhost"}).status_code == 200


def test_cors_is_off_by_default(url: str) -> None:
    response = httpx.get(url + "/query", params={"query": POSTS}, headers={"Origin": "http://evil.example"})
    assert response.status_code == 200 and "access-control-allow-origin" not in response.headers
    preflight = httpx.options(url + "/update", headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"})
    assert "access-control-allow-origin" not in preflight.headers


def test_cors_for_the_configured_origin_only(tmp_path: Path) -> None:
    lone = build_memory(tmp_path / "cors", facts=False)
    with serving(lone, cors="http://app.example") as other:
        good = httpx.get(other.url + "/query", params={"query": POSTS}, headers={"Origin": "http://app.example"})
        assert good.headers["access-control-allow-origin"] == "http://app.example"
        assert "Origin" in good.headers["vary"]
        preflight = httpx.options(other.url + "/update", headers={"Origin": "http://app.example"})
        assert preflight.status_code == 204 and "Authorization" in preflight.headers["access-control-allow-headers"]
        bad = httpx.get(other.url + "/query", params={"query": POSTS}, headers={"Origin": "http://evil.example"})
        assert "access-control-allow-origin" not in bad.headers


def test_read_only_server_refuses_every_write(tmp_path: Path) -> None:
    settings = build_memory(tmp_path / "ro", facts=False)
    with serving(settings, token="") as server:
        url = server.url
        update = httpx.post(url + "/update", content="CLEAR ALL", headers={**AUTH, "Content-Type": "application/sparql-update"})
        put = httpx.put(url + "/store", params={"graph": EX + "g"}, content="<a:a> <a:b> <a:c> .", headers={**AUTH, "Content-Type": "text/turtle"})
        ingest = httpx.post(url + "/api/ingest", json={"text": "hello"}, headers=AUTH)
        assert [r.status_code for r in (update, put, ingest)] == [403, 403, 403]
        assert "read-only" in update.text
        assert ask(url, POSTS.replace("SELECT (COUNT(?p) AS ?n)", "ASK").replace("WHERE", ""))
        sd = httpx.get(url + "/query", headers={"Accept": "application/n-triples"}).text
        assert "SPARQL11Update" not in sd


# ------------------------------------------------------------------------------------------------ HTTP details


@pytest.mark.parametrize(
    "text",
    ["SELEKT * WHERE { ?s ?p ?o }", "SELECT * WHERE { ?s ?p ?o \n FILTER(?o = ) }", "ASK { ?s ?p }"],
)
def test_syntax_error_positions_are_the_users(url: str, text: str) -> None:
    """The front sends the text on with a BASE before it; the positions reported are still in the user's text."""
    with pytest.raises(SyntaxError) as parsed:
        ox.Store().query(text)
    expected = str(parsed.value).split(":")[0:2]  # "error at L", "C"
    response = httpx.get(url + "/query", params={"query": text})
    assert response.status_code == 400
    assert response.text.startswith(":".join(expected) + ":"), (response.text, parsed.value)


def test_head_on_query_answers_like_get(url: str) -> None:
    params = {"query": POSTS}
    accept = {"Accept": "application/sparql-results+json"}
    got, head = httpx.get(url + "/query", params=params, headers=accept), httpx.head(url + "/query", params=params, headers=accept)
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-type"] == got.headers["content-type"]
    assert head.headers["content-length"] == str(len(got.content))
    assert httpx.head(url + "/query").status_code == 200  # the service description


def _raw_exchange(url: str, request: bytes) -> bytes:
    """Send a request head and read the first answer (the body is never sent)."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    return data


def test_no_100_continue_before_the_body_is_accepted(url: str) -> None:
    """A body over the cap, or a write without the token, is refused on its head: the client is never asked to
    upload it (no ``100 Continue`` first)."""
    too_big = _raw_exchange(
        url, b"POST /update HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nAuthorization: Bearer %s\r\n"
        b"Content-Type: application/sparql-update\r\nContent-Length: 20000000\r\n\r\n" % TOKEN.encode(),
    )
    assert too_big.startswith(b"HTTP/1.1 413 "), too_big[:80]
    no_token = _raw_exchange(
        url, b"PUT /store?graph=urn:x HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\n"
        b"Content-Type: text/turtle\r\nContent-Length: 1000\r\n\r\n",
    )
    assert no_token.startswith(b"HTTP/1.1 401 "), no_token[:80]


def test_every_non_protocol_error_is_one_json_shape(url: str) -> None:
    """401, 403, 404 and 413 answer ``{"error": ...}`` like the JSON API's own errors."""
    answers = [
        httpx.post(url + "/update", content="CLEAR ALL", headers={"Content-Type": "application/sparql-update"}),
        httpx.post(url + "/api/ingest", json={"text": "x"}),
        httpx.get(url + "/query", params={"query": POSTS}, headers={"Host": "evil.example"}),
        httpx.get(url + "/no/such/page"),
        httpx.delete(url + "/api/nothing"),
        httpx.post(url + "/update", content=b"x" * (16 * 1024 * 1024 + 1), headers=AUTH),
    ]
    assert [a.status_code for a in answers] == [401, 401, 403, 404, 404, 413]
    for answer in answers:
        assert answer.headers["content-type"].startswith("application/json"), answer.headers
        assert isinstance(answer.json()["error"], str) and answer.json()["error"]

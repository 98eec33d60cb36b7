"""The W3C SPARQL 1.1 Protocol test suite, run against ``pcm serve``.

Each manifest entry is a list of HTTP requests with the expected status, result format and (for ASK) boolean.
Requests go to ``/sparql`` (pcm's combined query + update endpoint), as the manifest's ``/sparql/`` prefix says.
Two adaptations, both from the suite's own instructions or from what it leaves open:

* every request carries the owner's bearer token: the suite's updates are writes, and pcm serve takes writes only
  with the token (the security tests check the refusals);
* ``ut:graphData`` is loaded into its named graph through the Graph Store Protocol before the test runs.

No entry is expected to fail; one that does is listed in ``EXPECTED_FAILURES`` with its reason.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pyoxigraph as ox
import pytest
import rdflib
from rdflib.collection import Collection

from pcm.endpoint.server import PcmServer
from tests.endpoint.test_endpoint_support import TOKEN, build_memory, serving

SUITE = Path(__file__).resolve().parents[1] / "fixtures" / "w3c" / "w3c-rdf-tests" / "sparql" / "sparql11" / "protocol"
MF = rdflib.Namespace("http://www.w3.org/2001/sw/DataAccess/tests/test-manifest#")
HT = rdflib.Namespace("http://www.w3.org/2011/http#")
CNT = rdflib.Namespace("http://www.w3.org/2011/content#")
UT = rdflib.Namespace("http://www.w3.org/2009/sparql/tests/test-update#")
HTS = "http://www.w3.org/2011/http-statusCodes#StatusCode"
#: name -> reason; none today.
EXPECTED_FAILURES: dict[str, str] = {}
_TABULAR = {"application/sparql-results+json", "application/sparql-results+xml", "text/csv", "text/tab-separated-values"}
_BOOLEAN = {"application/sparql-results+json", "application/sparql-results+xml"}


def _manifest() -> rdflib.Graph:
    path = SUITE / "manifest.ttl"
    return rdflib.Graph().parse(path, format="turtle") if path.exists() else rdflib.Graph()


def _entries(graph: rdflib.Graph) -> list[tuple[str, rdflib.term.Node]]:
    manifest = next(graph.subjects(rdflib.RDF.type, MF.Manifest), None)
    if manifest is None:
        return []
    return [(str(e).rsplit("#", 1)[-1], e) for e in Collection(graph, graph.value(manifest, MF.entries))]


GRAPH = _manifest()
ENTRIES = _entries(GRAPH)


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    assert ENTRIES, f"the vendored W3C protocol suite is missing from {SUITE}"
    settings = build_memory(tmp_path_factory.mktemp("w3c") / "memory", samples=(), facts=False)
    server: PcmServer
    with serving(settings) as server:
        yield server.url


def _load_graph_data(url: str, test: rdflib.term.Node) -> None:
    for data in GRAPH.objects(test, UT.graphData):
        name = str(GRAPH.value(data, rdflib.RDFS.label))
        source = SUITE / str(GRAPH.value(data, UT.graph)).rsplit("/", 1)[-1]
        response = httpx.put(
            url + "/store", params={"graph": name}, content=source.read_bytes(),
            headers={"Content-Type": "application/n-triples", "Authorization": f"Bearer {TOKEN}"},
        )
        assert response.status_code in (201, 204), response.text


def _send(url: str, request: rdflib.term.Node) -> httpx.Response:
    path = str(GRAPH.value(request, HT.absolutePath)).replace("/sparql/", "/sparql", 1)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    header_list = GRAPH.value(request, HT.headers)
    if header_list is not None:
        for header in Collection(GRAPH, header_list):
            headers[str(GRAPH.value(header, HT.fieldName))] = str(GRAPH.value(header, HT.fieldValue))
    body = GRAPH.value(request, HT.body)
    content = None
    if body is not None:
        encoding = str(GRAPH.value(body, CNT.characterEncoding) or "UTF-8")
        content = str(GRAPH.value(body, CNT.chars)).encode(encoding.lower())
    method = str(GRAPH.value(request, HT.methodName))
    # the raw path goes out as written: its percent-encoding is part of the test
    built = httpx.Request(method, url + path, headers=headers, content=content)
    with httpx.Client(timeout=30) as client:
        return client.send(built)


def _check(response: httpx.Response, expected: rdflib.term.Node) -> None:
    statuses = {str(s).removeprefix(HTS) for s in GRAPH.objects(expected, MF.expectedStatus)}
    assert f"{response.status_code // 100}xx" in statuses, f"status {response.status_code}: {response.text[:300]}"
    media_type = response.headers.get("content-type", "").split(";")[0].strip()
    fmt = GRAPH.value(expected, MF.expectedFormat)
    if fmt is not None and str(fmt) == "boolean":
        assert media_type in _BOOLEAN, media_type
    elif fmt is not None and str(fmt) == "tabular":
        assert media_type in _TABULAR, media_type
    elif fmt is not None and str(fmt) == "RDF":
        rdf_format = ox.RdfFormat.from_media_type(media_type)
        assert rdf_format is not None and not rdf_format.supports_datasets, media_type
        list(ox.parse(response.content, format=rdf_format))
    boolean = GRAPH.value(expected, MF.expectedBoolean)
    if boolean is not None:
        assert _boolean(response, media_type) is bool(boolean.toPython())  # type: ignore[union-attr]


def _boolean(response: httpx.Response, media_type: str) -> bool:
    if media_type == "application/sparql-results+json":
        return bool(json.loads(response.text)["boolean"])
    result = ox.parse_query_results(response.content, ox.QueryResultsFormat.XML)
    return bool(result)


@pytest.mark.parametrize(("name", "test"), ENTRIES, ids=[n for n, _ in ENTRIES])
def test_w3c_protocol(url: str, name: str, test: rdflib.term.Node) -> None:
    if name in EXPECTED_FAILURES:
        pytest.xfail(EXPECTED_FAILURES[name])
    _load_graph_data(url, test)
    connection = GRAPH.value(test, MF.action)
    for request in Collection(GRAPH, GRAPH.value(connection, HT.requests)):
        response = _send(url, request)
        _check(response, GRAPH.value(request, HT.resp))


def test_the_suite_is_all_there() -> None:
    assert len(ENTRIES) == 34

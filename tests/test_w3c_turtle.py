"""The W3C RDF 1.1 Turtle suite through pcm's import parser (``pcm.rdfio.parse_rdf``)."""

from __future__ import annotations

from pathlib import Path

import pyoxigraph as ox
import pytest
import rdflib

from pcm.errors import InputError
from pcm.rdfio import load_staging, parse_rdf
from tests.conftest import W3C_RDF_TESTS

SUITE = W3C_RDF_TESTS / "rdf" / "rdf11" / "rdf-turtle"
BASE = "https://w3c.github.io/rdf-tests/rdf/rdf11/rdf-turtle/"
MF = rdflib.Namespace("http://www.w3.org/2001/sw/DataAccess/tests/test-manifest#")
RDFT = rdflib.Namespace("http://www.w3.org/ns/rdftest#")


def _cases() -> list[tuple[str, str, str, str | None]]:
    g = rdflib.Graph()
    g.parse(SUITE / "manifest.ttl", format="turtle", publicID=BASE + "manifest.ttl")
    cases = []
    for test, kind in g.subject_objects(rdflib.RDF.type):
        if kind not in (RDFT.TestTurtleEval, RDFT.TestTurtlePositiveSyntax, RDFT.TestTurtleNegativeSyntax,
                        RDFT.TestTurtleNegativeEval):
            continue
        action = str(g.value(test, MF.action)).removeprefix(BASE)
        result = g.value(test, MF.result)
        cases.append((str(test).rsplit("#", 1)[-1], str(kind).rsplit("#", 1)[-1], action,
                      str(result).removeprefix(BASE) if result else None))
    return sorted(cases)


CASES = _cases()


@pytest.mark.parametrize(("name", "kind", "action", "result"), CASES, ids=[c[0] for c in CASES])
def test_turtle_suite(name: str, kind: str, action: str, result: str | None) -> None:
    path: Path = SUITE / action
    if kind in ("TestTurtleNegativeSyntax", "TestTurtleNegativeEval"):
        with pytest.raises(InputError):
            parse_rdf(path.read_bytes(), "turtle", base_iri=BASE + action, name=action)
        with pytest.raises(InputError):  # the staging load of `pcm import` refuses it too
            load_staging(path.read_bytes(), "turtle", base_iri=BASE + action, name=action)
        return
    load_staging(path.read_bytes(), "turtle", base_iri=BASE + action, name=action)  # accepted by import too
    quads = parse_rdf(path.read_bytes(), "turtle", base_iri=BASE + action, name=action)
    if kind == "TestTurtleEval":
        assert result is not None
        expected = [ox.Quad(t.subject, t.predicate, t.object) for t in ox.parse(path=str(SUITE / result), format=ox.RdfFormat.N_TRIPLES)]
        assert _canonical(quads) == _canonical(expected), name


def _canonical(quads: list[ox.Quad]) -> set[str]:
    ds = ox.Dataset(quads)
    ds.canonicalize(ox.CanonicalizationAlgorithm.UNSTABLE)
    return {str(q) for q in ds}


def test_suite_is_complete() -> None:
    assert len(CASES) >= 300

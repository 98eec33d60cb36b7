"""The cross-engine differential suite: the same queries, through pcm's scope rewrite, give the same answers on the
embedded store, on Oxigraph's server and on Virtuoso (tests/engine_diff.py says how they are run and compared).

The queries: the competency questions (``queries/competency``, each over its fixture and the ontology), the ask gold
set's SPARQL (``tests/fixtures/ask/questions.json``, over the sample memory built as the ask tests build it), pcm's own
``.rq`` files that run without parameters (over the same memory), and a selection of the W3C SPARQL 1.1 query
evaluation tests whose queries read the default graph (vendored in ``tests/fixtures/w3c``). Each engine's server is
started once for the module.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pyoxigraph as ox
import pytest

from pcm import resources
from pcm.backend_remote import RemoteBackend
from pcm.layout import LEGACY_LAYOUT
from pcm.ontology import load_ontology
from pcm.ontology_tools.competency import FIXTURE_NAMESPACE, fixture_quads, load_questions
from pcm.sparql.check import check_query
from tests.conftest import W3C_RDF_TESTS
from tests.engine_diff import Case, Engines
from tests.oxigraph_server import start_oxigraph
from tests.virtuoso_server import VIRTUOSO_PASSWORD, VIRTUOSO_USER, start_virtuoso

pytestmark = pytest.mark.engine

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SPARQL11 = W3C_RDF_TESTS / "sparql" / "sparql11"
SAMPLE = "sample"
SAMPLE_NAMESPACE = "https://pcm.invalid/m/sample/"

#: The W3C evaluation tests run here: (directory, query, data). Tests whose query reads named graphs are left out
#: (a memory's query may not name graphs outside the memory), and so are those whose answers are not fixed by the
#: data (NOW, RAND, UUID, BNODE).
W3C: list[tuple[str, str, str]] = [
    tuple(line.split()[:3])  # type: ignore[misc]
    for line in (FIXTURES / "w3c" / "differential.txt").read_text(encoding="utf-8").splitlines()
    if line.strip() and not line.startswith("#")
]


def _competency() -> list[Case]:
    return [Case(f"competency/{q.name}", f"competency/{q.name}", q.query) for q in load_questions()]


def _ask_gold() -> list[Case]:
    questions = json.loads((FIXTURES / "ask" / "questions.json").read_text(encoding="utf-8"))
    cases = []
    for k, question in enumerate(questions):
        text = check_query("\n".join(question["sparql"]), prefixes={"m": SAMPLE_NAMESPACE}, policy=False).text
        cases.append(Case(f"ask-gold/{k:02d}", SAMPLE, text))
    return cases


def _own_queries() -> list[Case]:
    """pcm's ``.rq`` files whose only placeholders are graph names (the others are templates filled by code)."""
    cases = []
    root = resources.queries_dir()
    for path in sorted(root.rglob("*.rq")):
        if path.parent.name == "competency":
            continue
        text = path.read_text(encoding="utf-8")
        try:
            ox.Store().query(LEGACY_LAYOUT.render(text))
        except (SyntaxError, KeyError):
            continue
        cases.append(Case(f"rq/{path.relative_to(root).as_posix()}", SAMPLE, text))
    return cases


def _w3c() -> list[Case]:
    return [
        Case(f"w3c/{d}/{q}:{data}", f"w3c/{d}/{data}", (SPARQL11 / d / q).read_text(encoding="utf-8"))
        for d, q, data in W3C
    ]


#: The issue's own example: the pattern pcm recommends for "of this class or a subclass".
STAR_PATH = Case(
    "star-path",
    "competency/pets",
    "PREFIX pcm: <https://w3id.org/pcm/ontology#>\nPREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>\n"
    f"PREFIX m: <{FIXTURE_NAMESPACE}>\nSELECT ?x WHERE {{ ?x a/rdfs:subClassOf* pcm:Pet }}",
)

#: Two datasets (two memories on one server) where a walk from one would go on through the other's graph:
#: Virtuoso 7.2 walks ``:a :p+ ?z`` inside ``GRAPH ?g`` through every graph (``:c`` came back), so the profile
#: writes it as a transitive subquery over the memory's graphs.
WALK_HERE = [ox.Quad(ox.NamedNode("http://example/a"), ox.NamedNode("http://example/p"), ox.NamedNode("http://example/b"))]
WALK_THERE = [ox.Quad(ox.NamedNode("http://example/b"), ox.NamedNode("http://example/p"), ox.NamedNode("http://example/c"))]
WALKS = [
    Case("walk-stays-in-its-memory", "walk/here", "SELECT ?z WHERE { <http://example/a> <http://example/p>+ ?z }"),
    Case("walk-back-stays-in-its-memory", "walk/here", "SELECT ?a WHERE { ?a <http://example/p>+ <http://example/b> }"),
    Case("walk-between-variables", "walk/here", "SELECT ?a ?z WHERE { ?a (<http://example/p>|^<http://example/p>)+ ?z }"),
    Case("walk-in-a-sequence", "walk/here",
         "SELECT ?z WHERE { <http://example/a> <http://example/p>/^<http://example/p>+ ?z }"),
]

CASES = [STAR_PATH, *WALKS, *_competency(), *_ask_gold(), *_own_queries(), *_w3c()]

#: Queries Virtuoso refuses in one line (pcm's rewrite, or Virtuoso's own error): an answer it cannot give right.
VIRTUOSO_REFUSES = {
    "competency/social-friends-in-city": "`?tie rdfs:subPropertyOf* ?friendship` between two variables",
    "w3c/property-path/pp14.rq:pp14.ttl": "`?X foaf:knows* ?Y` between two variables",
    "w3c/property-path/pp14.rq:pp16.ttl": "`?X foaf:knows* ?Y` between two variables",
    "w3c/property-path/pp37.rq:pp37.ttl": "`((:P)*)*`: a repeated path holding `*`",
    "w3c/property-path/nps_inverse.rq:nps_inverse.ttl": "Virtuoso's parser refuses `!^p`",
    "w3c/property-path/nps_a_inverse.rq:nps_a_inverse.ttl": "Virtuoso's parser refuses `!^a`",
    "walk-between-variables": "a `+` path between two variables: its walk needs a fixed end",
    "walk-in-a-sequence": "a `+` path after another step: its walk has no fixed end",
}
#: Where Virtuoso 7.2 answered otherwise before its profile wrote around it (docs/engines.md, "What each profile
#: rewrites"): each must now agree. A GROUP_CONCAT's order is the engine's (the standard leaves it open), so the
#: suite compares its parts as a multiset (engine_diff.concat_columns).
VIRTUOSO_REWRITTEN = {
    "competency/activities-planned": "a `+` path joined with patterns that bind its end found nothing",
    "competency/food-italian-restaurants": "a `+` path joined with patterns that bind its end found nothing",
    "competency/vehicles-owned": "`?type rdfs:subClassOf+ schema:Vehicle` joined with `?v a ?type` dropped schema:Car",
    "competency/people-sister-birthday": "a `+` path inside OPTIONAL, joined: the spouse was dropped",
    "competency/events-concerts": "a FILTER inside OPTIONAL did not see ?owner, which the query does not project",
    "ask-gold/08": "GROUP_CONCAT joined the days in another order",
    "ask-gold/13": "GROUP_CONCAT joined the companions in another order",
    "w3c/property-path/path-2-2.rq:data-diamond-loop.ttl": "`:a :p+ ?z` walked into another dataset's graph",
    "w3c/property-path/path-2-2.rq:data-diamond.ttl": "`:a :p+ ?z` walked into another dataset's graph",
    "walk-stays-in-its-memory": "`:a :p+ ?z` walked into the other memory's graph",
}


def _datasets(sample_dir: Path) -> dict[str, list[ox.Quad]]:
    from tests.retrieval.test_ask_support import build_sample_memory

    ontology = list(load_ontology().quads())
    datasets: dict[str, list[ox.Quad]] = {}
    for question in load_questions():
        datasets[f"competency/{question.name}"] = ontology + fixture_quads(question.fixture)
    memory = build_sample_memory(sample_dir, index=False)
    try:
        exported = memory.export("nquads")
        namespace = memory.manifest.namespace
    finally:
        memory.close()
    exported = exported.replace(namespace.encode(), SAMPLE_NAMESPACE.encode())
    datasets[SAMPLE] = list(ox.parse(exported, format=ox.RdfFormat.N_QUADS))
    datasets["walk/here"], datasets["walk/there"] = WALK_HERE, WALK_THERE
    for d, _q, data in W3C:
        path = SPARQL11 / d / data
        datasets[f"w3c/{d}/{data}"] = list(ox.parse(path=str(path), format=ox.RdfFormat.TURTLE, base_iri=path.as_uri()))
    return datasets


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engines]:
    started = time.perf_counter()
    location = tmp_path_factory.mktemp("engines")
    with start_oxigraph(None) as oxigraph_url, start_virtuoso(location / "virtuoso") as virtuoso_url:
        remotes = {
            "oxigraph": RemoteBackend(oxigraph_url, engine="oxigraph"),
            "virtuoso": RemoteBackend(virtuoso_url, engine="virtuoso", user=VIRTUOSO_USER, password=VIRTUOSO_PASSWORD),
        }
        try:
            found = Engines(_datasets(location / "sample"), remotes)
            print(f"\nthe engines started and loaded in {time.perf_counter() - started:.1f} s")
            yield found
        finally:
            for backend in remotes.values():
                backend.close()


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in CASES])
def test_the_engines_agree(engines: Engines, case: Case) -> None:
    found = engines.answers(case)
    reference = found.pop("reference")
    assert not isinstance(reference, str), reference
    if case.name in VIRTUOSO_REFUSES:
        answer = found.pop("virtuoso")
        assert isinstance(answer, str) and answer.startswith(("refused:", "error:")), answer
        assert "\n" not in answer
    differing = {engine: answer for engine, answer in found.items() if answer != reference}
    assert not differing, f"{case.name}: reference {reference}\n" + "\n".join(f"{e}: {a}" for e, a in differing.items())


def test_every_listed_deviation_is_a_case() -> None:
    names = {c.name for c in CASES}
    assert set(VIRTUOSO_REFUSES) <= names and set(VIRTUOSO_REWRITTEN) <= names

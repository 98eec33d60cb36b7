"""``pcm ontology test``: competency questions, each a SPARQL query over a small fixture with expected results.

A competency question is the promise an ontology makes: "with these terms you can answer *this*". Each one lives in
``queries/competency/`` as three files sharing a name:

- ``NAME.rq``: the query; its first ``# question:`` comment line is the question in words. A ``# fixture:
  OTHER.trig`` line makes it share another question's fixture.
- ``NAME.trig``: the fixture. The pcm prefixes and ``m:`` (the fixture memory's namespace) are predeclared. Triples
  outside ``GRAPH`` blocks are extracted facts: they go into one extraction graph and must satisfy the SHACL shapes
  (so fixtures look like real extraction output; ``prov:wasDerivedFrom`` links, which pcm adds itself after
  validation, are exempt). ``GRAPH`` blocks (conversation, provenance) are kept as written.
  Every fixture memory also holds its owner ``m:owner`` ("Dana Whitfield") and ``m:assistant``, as a real one does.
- ``NAME.json``: ``{"results": [ {"var": value, ...}, ... ], "ordered": false}`` or ``{"results": true}`` for ASK.
  A value is ``null`` (unbound), a JSON number (an xsd:integer) or a string: ``m:biscuit`` / ``schema:Car`` /
  ``<iri>`` for an IRI, ``"2024-03-02"^^xsd:date`` or ``"chat"@en`` for a typed literal, anything else a plain
  string literal.

The query runs on a store holding the ontology graph and the fixture, with the default graph as the union of all
graphs, exactly as ``Memory.sparql`` runs queries. The suite must cover every area of the ontology: an area is
covered when some question's query uses one of its terms.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pyoxigraph as ox
import rdflib

from pcm import resources
from pcm.errors import InputError
from pcm.layout import LEGACY_LAYOUT
from pcm.namespaces import PREFIXES, PROV, XSD, turtle_prefixes
from pcm.naming import Naming
from pcm.ontology import META_AREAS, Ontology, load_ontology
from pcm.ontology_tools.usage import sparql_terms
from pcm.provenance import fixed_agent_quads

if TYPE_CHECKING:
    from pcm.shapes import Validator

FIXTURE_NAMESPACE = "https://pcm.invalid/m/fixture/"
FIXTURE_GRAPH = LEGACY_LAYOUT.extraction("fixture")
FIXTURE_OWNER = "Dana Whitfield"
_QUESTION = re.compile(r"^#\s*question:\s*(?P<text>.+?)\s*$", re.MULTILINE)
_FIXTURE = re.compile(r"^#\s*fixture:\s*(?P<name>[\w.-]+\.trig)\s*$", re.MULTILINE)
_LITERAL = re.compile(r'^"(?P<lex>(?:[^"\\]|\\.)*)"(?:@(?P<lang>[A-Za-z-]+)|\^\^(?P<dt><[^>]+>|[\w-]+:[\w.-]*))?$')
_CURIE = re.compile(r"^(?P<prefix>[A-Za-z][\w-]*):(?P<local>[^\s<>\"]*)$")


@dataclass(frozen=True)
class CompetencyQuestion:
    name: str
    question: str
    query: str
    fixture: Path
    expected: Path


@dataclass
class CompetencyResult:
    name: str
    question: str
    passed: bool
    areas: tuple[str, ...]
    problems: list[str] = field(default_factory=list)


@dataclass
class CompetencyReport:
    results: list[CompetencyResult] = field(default_factory=list)
    uncovered: list[str] = field(default_factory=list)
    """Areas of the ontology that no question's query touches."""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return bool(self.results) and all(r.passed for r in self.results) and not self.uncovered

    def text(self) -> str:
        lines = []
        for r in self.results:
            lines.append(f"{'PASS' if r.passed else 'FAIL'} {r.name}: {r.question}")
            lines += [f"    {p}" for p in r.problems]
        if self.uncovered:
            lines.append(f"areas without a competency question: {', '.join(self.uncovered)}")
        passed = sum(r.passed for r in self.results)
        lines.append(f"{passed}/{len(self.results)} competency question(s) passed in {self.seconds:.2f}s"
                     + ("" if self.ok else " — FAILED"))
        return "\n".join(lines)

    def as_json(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "seconds": round(self.seconds, 3),
            "uncovered_areas": self.uncovered,
            "results": [r.__dict__ for r in self.results],
        }


def competency_dir() -> Path:
    return resources.queries_dir() / "competency"


def load_questions(directory: Path | None = None) -> list[CompetencyQuestion]:
    """Every question in ``directory``; :class:`InputError` when one lacks its fixture, results or question line."""
    folder = directory or competency_dir()
    questions = []
    for query_path in sorted(folder.glob("*.rq")):
        name = query_path.stem
        text = query_path.read_text(encoding="utf-8")
        match = _QUESTION.search(text)
        if match is None:
            raise InputError(f"{query_path.name}: no '# question: ...' line")
        shared = _FIXTURE.search(text)
        fixture = folder / shared.group("name") if shared else query_path.with_suffix(".trig")
        expected = query_path.with_suffix(".json")
        for needed in (fixture, expected):
            if not needed.is_file():
                raise InputError(f"competency question {name} has no {needed.name}")
        questions.append(CompetencyQuestion(name, match.group("text"), text, fixture, expected))
    return questions


def run_competency(
    directory: Path | None = None,
    *,
    ontology: Ontology | None = None,
    names: Iterable[str] | None = None,
    validate: bool = True,
) -> CompetencyReport:
    """Run the questions (all, or those in ``names``) and compute which areas the whole suite covers."""
    started = time.perf_counter()
    onto = ontology or load_ontology()
    questions = load_questions(directory)
    wanted = set(names) if names else None
    validator: Validator | None = None
    if validate:
        from pcm.shapes import Validator

        validator = Validator(onto)
    report = CompetencyReport()
    covered: set[str] = set()
    for question in questions:
        areas = question_areas(question, onto)
        covered.update(areas)
        if wanted is None or question.name in wanted:
            report.results.append(_run_one(question, onto, areas, validator))
    if wanted is None:
        in_use = {t.area for t in onto.terms.values()} - META_AREAS
        report.uncovered = [a for a in onto.areas if a in in_use and a not in covered]
    report.seconds = time.perf_counter() - started
    return report


def question_areas(question: CompetencyQuestion, ontology: Ontology) -> tuple[str, ...]:
    """Areas of the ontology terms the query names."""
    used = {u.iri for u in sparql_terms(question.query, Path(question.name))}
    return tuple(a for a in ontology.areas if any(ontology.terms[i].area == a for i in used if i in ontology.terms))


def _run_one(question: CompetencyQuestion, ontology: Ontology, areas: tuple[str, ...], validator: Validator | None) -> CompetencyResult:
    result = CompetencyResult(question.name, question.question, False, areas)
    try:
        quads = fixture_quads(question.fixture)
        expected, ordered = _expected(question.expected)
    except InputError as error:
        result.problems.append(str(error))
        return result
    if validator is not None:
        result.problems += _validation_problems(quads, validator)
    store = ox.Store()
    store.extend(ontology.quads())
    store.extend(quads)
    try:
        answer = store.query(LEGACY_LAYOUT.render(question.query), use_default_graph_as_union=True)
    except (SyntaxError, OSError, RuntimeError) as error:
        result.problems.append(f"query failed: {' '.join(str(error).split())}")
        return result
    actual = _canonical_answer(answer)
    if not _same(actual, expected, ordered):
        result.problems.append(f"expected {_show(expected)}")
        result.problems.append(f"got      {_show(actual)}")
    result.passed = not result.problems
    return result


def fixture_quads(path: Path) -> list[ox.Quad]:
    """The fixture's quads: default-graph triples moved into the fixture extraction graph, plus owner and assistant."""
    header = turtle_prefixes() + f"@prefix m: <{FIXTURE_NAMESPACE}> .\n"
    try:
        parsed = list(ox.parse(header + path.read_text(encoding="utf-8"), format=ox.RdfFormat.TRIG))
    except SyntaxError as error:
        raise InputError(f"{path.name}: not valid TriG: {' '.join(str(error).split())}") from error
    target = ox.NamedNode(FIXTURE_GRAPH)
    quads = [
        ox.Quad(q.subject, q.predicate, q.object, target) if isinstance(q.graph_name, ox.DefaultGraph) else q
        for q in parsed
    ]
    return quads + fixed_agent_quads(Naming(FIXTURE_NAMESPACE), FIXTURE_OWNER)


def _validation_problems(quads: Sequence[ox.Quad], validator: Validator) -> list[str]:
    """The extracted facts of a fixture must pass the shapes, with the other graphs as context."""
    delta, context = rdflib.Graph(), rdflib.Graph()
    graph, derived = ox.NamedNode(FIXTURE_GRAPH), ox.NamedNode(PROV + "wasDerivedFrom")
    facts = [q for q in quads if q.graph_name == graph and q.predicate != derived]
    rest = [q for q in quads if q.graph_name != graph]
    for target, chosen in ((delta, facts), (context, rest)):
        if chosen:
            triples = [ox.Quad(q.subject, q.predicate, q.object) for q in chosen]
            data = ox.serialize(triples, format=ox.RdfFormat.N_TRIPLES)
            assert data is not None, "pyoxigraph returns the bytes when given no output"
            target.parse(data=data.decode("utf-8"), format="nt")
    report = validator.validate(delta, memory_namespace=FIXTURE_NAMESPACE, context=context)
    return [f"fixture violates [{v.rule}]: {v.message}" for v in report.violations]


# ---------------------------------------------------------------------- results as comparable strings

Row = dict[str, str | None]
Answer = list[Row] | bool


def _canonical_answer(answer: object) -> Answer:
    if isinstance(answer, ox.QueryBoolean):
        return bool(answer)
    if isinstance(answer, ox.QuerySolutions):
        names = [v.value for v in answer.variables]
        return [{n: _canonical_term(s[n]) for n in names} for s in answer]
    raise InputError("a competency question must be a SELECT or an ASK query")


def _canonical_term(term: object) -> str | None:
    if term is None:
        return None
    if isinstance(term, ox.NamedNode):
        return f"<{term.value}>"
    if isinstance(term, ox.Literal):
        if term.language:
            return f'"{_escape(term.value)}"@{term.language.lower()}'
        return f'"{_escape(term.value)}"^^<{term.datatype.value}>'
    return "_:"


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _expected(path: Path) -> tuple[Answer, bool]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise InputError(f"{path.name}: not valid JSON: {error}") from error
    if not isinstance(data, dict) or "results" not in data:
        raise InputError(f'{path.name}: expected an object with "results"')
    results = data["results"]
    if isinstance(results, bool):
        return results, False
    if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
        raise InputError(f'{path.name}: "results" must be true/false or a list of objects')
    rows = [{k: expected_value(v, path.name) for k, v in row.items()} for row in results]
    return rows, bool(data.get("ordered", False))


def expected_value(value: object, where: str = "expected") -> str | None:
    """A value of an expected-results file in the canonical form results are compared in."""
    if value is None:
        return None
    if isinstance(value, bool):
        return f'"{str(value).lower()}"^^<{XSD}boolean>'
    if isinstance(value, int):
        return f'"{value}"^^<{XSD}integer>'
    if not isinstance(value, str):
        raise InputError(f"{where}: unsupported value {value!r} (write decimals as \"1.5\"^^xsd:decimal)")
    if value.startswith("<") and value.endswith(">"):
        return value
    literal = _LITERAL.match(value)
    if literal:
        if literal.group("lang"):
            return f'"{literal.group("lex")}"@{literal.group("lang").lower()}'
        datatype = literal.group("dt")
        iri = _expand(datatype, where) if datatype else f"<{XSD}string>"
        return f'"{literal.group("lex")}"^^{iri}'
    curie = _CURIE.match(value)
    if curie and (curie.group("prefix") in PREFIXES or curie.group("prefix") == "m"):
        return _expand(value, where)
    return f'"{_escape(value)}"^^<{XSD}string>'


def _expand(name: str, where: str) -> str:
    if name.startswith("<"):
        return name
    prefix, _, local = name.partition(":")
    namespace = FIXTURE_NAMESPACE if prefix == "m" else PREFIXES.get(prefix)
    if namespace is None:
        raise InputError(f"{where}: unknown prefix in {name!r}")
    return f"<{namespace}{local}>"


def _same(actual: Answer, expected: Answer, ordered: bool) -> bool:
    if isinstance(actual, bool) or isinstance(expected, bool):
        return actual == expected
    left, right = [_row_key(r) for r in actual], [_row_key(r) for r in expected]
    return left == right if ordered else sorted(left) == sorted(right)


def _row_key(row: Row) -> str:
    return json.dumps({k: v for k, v in row.items() if v is not None}, sort_keys=True)


def _show(answer: Answer) -> str:
    if isinstance(answer, bool):
        return str(answer).lower()
    rows = []
    for row in answer:
        cells = [f"{k}={_display(v)}" for k, v in sorted(row.items()) if v is not None]
        rows.append("{" + ", ".join(cells) + "}")
    return "[" + ", ".join(rows) + "]"


def _display(value: str) -> str:
    """Short form for a report: plain strings quoted, IRIs and datatypes as CURIEs."""
    plain = f"^^<{XSD}string>"
    value = value[: -len(plain)] if value.endswith(plain) else value
    return _IRI.sub(_curie, value)


_IRI = re.compile(r"<([^<>]+)>")
_SHORT = sorted([("m", FIXTURE_NAMESPACE), *PREFIXES.items()], key=lambda item: -len(item[1]))


def _curie(match: re.Match[str]) -> str:
    iri = match.group(1)
    for prefix, namespace in _SHORT:
        if iri.startswith(namespace) and len(iri) > len(namespace):
            return f"{prefix}:{iri[len(namespace):]}"
    return match.group(0)

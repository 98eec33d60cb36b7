"""What reading a query costs in the SPARQL front end (:mod:`pcm.sparql`), per query, and what rdflib would cost.

For each query of a small set shaped like the generated ones (plus, with ``--w3c``, every query of the W3C SPARQL
1.1 suites vendored in tests/fixtures/w3c), prints the median time of:

- ``lex``: :func:`pcm.sparql.lexer.tokenize`;
- ``fast shape``: the token parser of :mod:`pcm.sparql.query` (patterns, paths, projection);
- ``oxigraph``: Oxigraph's parser (the validity judge of :func:`pcm.sparql.check.check_query`);
- ``rdflib parse`` / ``rdflib algebra`` / ``rdflib to text``: rdflib's ``parseQuery``, ``translateQuery`` and
  ``translateAlgebra`` (what a rewrite built on rdflib's algebra would pay: parse, translate, serialise back);
- ``check cold`` / ``check warm``: the whole check with empty caches, and again with the parse cached;
- ``bound limit`` / ``hierarchy``: the two span rewrites;

and the cost of a 1,000-row result through the worker's standard format (SPARQL JSON out, pyoxigraph's parser
in). Prints figures; asserts nothing.

Run: ``python benchmarks/bench_sparql_parse.py [--repeat 50] [--w3c]``.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import pyoxigraph as ox

from pcm.namespaces import PREFIXES
from pcm.sparql import query as query_module
from pcm.sparql.check import QueryRefused, check_query
from pcm.sparql.lexer import tokenize
from pcm.sparql.query import _ShapeParser, _Unsupported, parse
from pcm.sparql.results import read_json, solutions_json
from pcm.sparql.rewrite import bound_limit, expand_hierarchy_paths

PROLOGUE = "".join(f"PREFIX {p}: <{PREFIXES[p]}>\n" for p in ("rdfs", "schema", "pcm"))
QUERIES = {
    "one pattern": "SELECT ?breed WHERE { <urn:pcm:m:biscuit> pcm:petBreed ?breed }",
    "label + join": 'SELECT ?breed WHERE { ?d rdfs:label "biscuit" ; pcm:petBreed ?breed }',
    "type path + dates": (
        "SELECT ?item ?d WHERE { ?b a/rdfs:subClassOf* schema:BuyAction ; schema:object ?o ; schema:startDate ?d . "
        '?o rdfs:label ?item FILTER(?d >= "2023-01-01"^^<http://www.w3.org/2001/XMLSchema#date>) } '
        "ORDER BY DESC(?d) LIMIT 5"
    ),
    "optional + union + count": (
        "SELECT (COUNT(DISTINCT ?e) AS ?n) WHERE { { ?e a schema:Event } UNION { ?e a schema:Action } "
        "OPTIONAL { ?e schema:location ?l . ?l rdfs:label ?place } FILTER NOT EXISTS { ?e pcm:supersededBy ?x } }"
    ),
}
W3C = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "w3c" / "w3c-rdf-tests" / "sparql" / "sparql11"


def median_us(action: Callable[[], object], repeat: int, clear: Callable[[], None] | None = None) -> float:
    times = []
    for _ in range(repeat):
        if clear is not None:
            clear()
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def clear_caches() -> None:
    parse.cache_clear()
    query_module._rdflib_parse.cache_clear()


def fast_shape(text: str) -> None:
    with contextlib.suppress(_Unsupported):
        _ShapeParser(tokenize(text)).query()


def rdflib_covers(text: str) -> bool:
    """Whether rdflib parses and translates ``text``: the comparison columns need it, and on valid queries it does
    not cover rdflib raises errors of several kinds from inside its parser and algebra (AttributeError,
    ExpressionNotCoveredException, ...), so only rdflib's own calls are guarded here, never pcm's."""
    from rdflib.plugins.sparql import algebra, parser

    try:
        algebra.translateAlgebra(algebra.translateQuery(parser.parseQuery(text)))
    except Exception:  # noqa: BLE001 - a third-party parser's failure on a valid query: that query is not compared
        return False
    return True


def costs(text: str, repeat: int) -> dict[str, float]:
    from rdflib.plugins.sparql import algebra, parser

    empty = ox.Store()
    translated = algebra.translateQuery(parser.parseQuery(text))
    closure = lambda kind, iri: frozenset({iri})  # noqa: E731 - one class per closure: the rewrite's own cost
    return {
        "lex": median_us(lambda: tokenize(text), repeat),
        "fast shape": median_us(lambda: fast_shape(text), repeat),
        "oxigraph": median_us(lambda: empty.query(text), repeat),
        "rdflib parse": median_us(lambda: parser.parseQuery(text), repeat),
        "rdflib algebra": median_us(lambda: algebra.translateQuery(parser.parseQuery(text)), repeat),
        "rdflib to text": median_us(lambda: algebra.translateAlgebra(translated), repeat),
        "check cold": median_us(lambda: check_query(text), repeat, clear_caches),
        "check warm": median_us(lambda: check_query(text), repeat),
        "bound limit": median_us(lambda: bound_limit(text, 100), repeat),
        "hierarchy": median_us(lambda: expand_hierarchy_paths(text, closure), repeat),
    }


def results_cost(repeat: int) -> tuple[float, float]:
    rows = [(ox.NamedNode(f"urn:x:{i}"), ox.Literal(f"label {i}", language="en"), ox.Literal(str(i), datatype=ox.NamedNode(
        "http://www.w3.org/2001/XMLSchema#integer"))) for i in range(1000)]
    document = solutions_json(["s", "l", "n"], rows)
    import json

    text = json.dumps(document)
    out = median_us(lambda: json.dumps(solutions_json(["s", "l", "n"], rows)), repeat)
    back = median_us(lambda: read_json(text), repeat)
    return out, back


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--repeat", type=int, default=50)
    args.add_argument("--w3c", action="store_true", help="also the median over every W3C SPARQL 1.1 query")
    options = args.parse_args()
    columns = list(costs(PROLOGUE + QUERIES["one pattern"], 3))
    print(f"{'query (µs, median)':28}" + "".join(f"{c:>15}" for c in columns))
    for name, body in QUERIES.items():
        figures = costs(PROLOGUE + body, options.repeat)
        print(f"{name:28}" + "".join(f"{figures[c]:>15.0f}" for c in columns))
    if options.w3c:
        per_column: dict[str, list[float]] = {c: [] for c in columns}
        for path in sorted(W3C.glob("*/*.rq")):
            text = path.read_text(encoding="utf-8")
            try:
                ox.Store().query(text)  # as costs() runs it: no base, so relative IRIs are not measured
            except (SyntaxError, ValueError, OSError, RuntimeError):  # noqa: S112 - invalid or update tests, relative
                # IRIs, custom functions Oxigraph does not run (its errors)
                continue
            if not rdflib_covers(text):
                continue
            try:
                check_query(text)
            except QueryRefused:  # noqa: S112 - pcm refuses it (an unanchored path): no engine ever runs it
                continue
            figures = costs(text, max(3, options.repeat // 10))
            for column, value in figures.items():
                per_column[column].append(value)
        count = len(per_column["lex"])
        print(f"{f'W3C queries ({count})':28}" + "".join(f"{statistics.median(per_column[c]):>15.0f}" for c in columns))
    out, back = results_cost(max(5, options.repeat // 5))
    print(f"1,000-row result as SPARQL JSON: {out / 1000:.1f} ms to write, {back / 1000:.1f} ms to read back")


if __name__ == "__main__":
    main()

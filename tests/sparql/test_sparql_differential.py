"""The fast shape parser of :mod:`pcm.sparql.query` held to rdflib's parser and algebra.

The fast path is only worth keeping if it gives the same shape (triple patterns, property paths and whether they
are anchored, projected variables) as rdflib wherever it does not defer. Two sources of queries:

- generated ones (hypothesis, derandomised): prologues, every graph-pattern form the fast path claims (groups,
  OPTIONAL, UNION, MINUS, GRAPH, FILTER [NOT] EXISTS, BIND, VALUES, subqueries, property paths, blank node
  property lists), literals with escapes, language tags and datatypes; each must also pass Oxigraph's parser;
- every query of the W3C SPARQL 1.1 suites (vendored in tests/fixtures/w3c) (the syntax tests and the evaluation tests'
  queries): on valid ones the fast path agrees with rdflib or defers; invalid ones never reach it, because the
  checker's Oxigraph parse rejects them first.

Arbitrary text must never make the lexer or the shape raise: the engine's parser reports errors, not ours.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pyoxigraph as ox
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from pcm.sparql.check import QueryRefused, check_query
from pcm.sparql.lexer import string_value, tokenize
from pcm.sparql.query import QueryShape, _ShapeParser, _Unsupported, parse, query_shape, rdflib_shape
from tests.conftest import W3C_RDF_TESTS

SPARQL11 = W3C_RDF_TESTS / "sparql" / "sparql11"
MF = "http://www.w3.org/2001/sw/DataAccess/tests/test-manifest#"
QT = "http://www.w3.org/2001/sw/DataAccess/tests/test-query#"
#: Queries of the suite where rdflib is wrong and the fast path right (name -> what rdflib does).
RDFLIB_WRONG = {
    "exists/exists04.rq": "drops a FILTER EXISTS nested inside a FILTER EXISTS group",
}


def fast(text: str) -> QueryShape | None:
    """The fast path alone (None when it defers)."""
    try:
        return _ShapeParser(list(parse(text).tokens)).query()
    except _Unsupported:
        return None


def comparable(shape: QueryShape) -> tuple[object, ...]:
    """What both parsers must agree on (blank nodes have no name in rdflib's shape, paths no common spelling)."""
    def name(term: str) -> str:
        return "" if term.startswith("_:") else term

    paths = sorted((name(p.subject), name(p.object), p.anchored) for p in shape.paths)
    return set(shape.patterns), paths, shape.projected


def agree(text: str) -> str:
    """Which parser read the text: ``fast`` (and then it agrees with rdflib), ``deferred`` (the fast path left it to
    rdflib) or ``fast only`` (rdflib cannot read a query Oxigraph accepts, e.g. a negative decimal object)."""
    ours = fast(text)
    if ours is None:
        return "deferred"
    theirs = rdflib_shape(text)
    if theirs is None:
        return "fast only"
    assert comparable(ours) == comparable(theirs), text
    return "fast"


# ------------------------------------------------------------------------------------------------ generated queries

PROLOGUE = "PREFIX s: <urn:s:>\nPREFIX xsd: <http://www.w3.org/2001/XMLSchema#>\n"
VARS = ("?a", "?b", "?c", "$d")
IRIS = ("<urn:s:p>", "s:q", "s:r.s", "s:1x", "s:caf\u00e9", "<urn:s:\\u00e9t\\u00e9>", "<http://example.org/x#y>")


@st.composite
def literals(draw: st.DrawFn) -> str:
    body = draw(st.sampled_from(['"x"', "'y'", '"a \\"quoted\\" word"', '"caf\\u00e9"', "'tab\\there'",
                                 '"""two\nlines"""', "'''it''s'''", '"\\U0001F600"', '""']))
    suffix = draw(st.sampled_from(["", "", "@en", "@en-GB", "^^xsd:string", "^^<urn:s:type>"]))
    return body + suffix


@st.composite
def terms(draw: st.DrawFn, fresh: list[int]) -> str:
    kind = draw(st.sampled_from(["var", "var", "iri", "literal", "number", "boolean", "bnode"]))
    if kind == "var":
        return draw(st.sampled_from(VARS))
    if kind == "iri":
        return draw(st.sampled_from(IRIS))
    if kind == "literal":
        return draw(literals())
    if kind == "number":
        return draw(st.sampled_from(["4", "0", "12", "-3", "+7", "1.5", "0.25", "-2.5"]))
    if kind == "boolean":
        return draw(st.sampled_from(["true", "false"]))
    fresh[0] += 1
    return f"_:n{fresh[0]}"


@st.composite
def paths(draw: st.DrawFn, depth: int = 0) -> str:
    element = draw(st.sampled_from(["s:q", "<urn:s:p>", "a", "s:r.s"]))
    kind = draw(st.sampled_from(["plain", "modifier", "inverse", "negated", "negated-set", "sequence", "alternative",
                                 "group"] if depth < 2 else ["plain", "modifier", "inverse"]))
    if kind == "plain":
        return element
    if kind == "modifier":
        return element + draw(st.sampled_from(["*", "+", "?"]))
    if kind == "inverse":
        return "^" + element
    if kind == "negated":
        return "!" + draw(st.sampled_from(["s:q", "^s:q", "a"]))
    if kind == "negated-set":
        return "!(" + "|".join(draw(st.lists(st.sampled_from(["s:q", "^s:q", "a", "<urn:s:p>"]), min_size=1, max_size=3))) + ")"
    if kind == "group":
        return "(" + draw(paths(depth + 1)) + ")" + draw(st.sampled_from(["", "*", "+", "?"]))
    joiner = "/" if kind == "sequence" else "|"
    return draw(paths(depth + 1)) + joiner + draw(paths(depth + 1))


@st.composite
def verbs(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["iri", "iri", "a", "var", "path"]))
    if kind == "iri":
        return draw(st.sampled_from(IRIS))
    if kind == "a":
        return "a"
    if kind == "var":
        return draw(st.sampled_from(VARS))
    return draw(paths())


@st.composite
def objects(draw: st.DrawFn, fresh: list[int], depth: int) -> str:
    if depth < 2 and draw(st.integers(0, 6)) == 0:
        return "[ " + draw(property_lists(fresh, depth + 1)) + " ]"
    return draw(terms(fresh))


@st.composite
def property_lists(draw: st.DrawFn, fresh: list[int], depth: int = 0) -> str:
    pairs = []
    for _ in range(draw(st.integers(1, 3))):
        objs = [draw(objects(fresh, depth)) for _ in range(draw(st.integers(1, 2)))]
        pairs.append(draw(verbs()) + " " + " , ".join(objs))
    return " ; ".join(pairs) + draw(st.sampled_from(["", " ;"]))


@st.composite
def triples(draw: st.DrawFn, fresh: list[int]) -> str:
    subject = draw(st.sampled_from(["var", "var", "iri", "bnode", "anon"]))
    if subject == "anon":
        return "[ " + draw(property_lists(fresh, 1)) + " ] " + draw(st.sampled_from(["", "s:q ?a"]))
    if subject == "bnode":
        fresh[0] += 1
        text = f"_:n{fresh[0]}"
    else:
        text = draw(st.sampled_from(VARS if subject == "var" else IRIS))
    return text + " " + draw(property_lists(fresh))


@st.composite
def expressions(draw: st.DrawFn) -> str:
    v = draw(st.sampled_from(VARS))
    return draw(st.sampled_from([
        f"{v} = \"x\"", f"{v} != s:q", f"regex({v}, \"^a\", \"i\")", f"CONTAINS(LCASE(STR({v})), \"caf\\u00e9\")",
        f"{v} > 3", f"BOUND({v})", f"{v} IN (1, 2)", f"{v} NOT IN (s:q)", f"!BOUND({v}) || {v} < 2.5",
        f"xsd:integer({v}) >= 0", f"LANG({v}) = \"en\"",
    ]))


@st.composite
def groups(draw: st.DrawFn, fresh: list[int], depth: int = 0, in_exists: bool = False) -> str:
    """A group graph pattern. No FILTER EXISTS inside an EXISTS group: rdflib drops those (see RDFLIB_WRONG)."""
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        kinds = ["triples", "triples", "filter", "bind", "values"]
        if depth < 2:
            kinds += ["optional", "union", "minus", "graph", "group", "subquery"] + ([] if in_exists else ["exists"])
        kind = draw(st.sampled_from(kinds))
        if kind == "triples":
            parts.append(draw(triples(fresh)) + " .")
        elif kind == "filter":
            parts.append(f"FILTER({draw(expressions())})")
        elif kind == "bind":
            fresh[0] += 1
            value = draw(st.sampled_from(["1", "STR(?a)", "s:q", '"x"@en']))
            parts.append(f"BIND({value} AS ?bound{fresh[0]})")
        elif kind == "values":
            v = draw(st.sampled_from(["?a", "?c"]))
            value = draw(st.sampled_from(["s:q", "1", "UNDEF", '"x"']))
            parts.append(f"VALUES {v} {{ {value} }}")
        elif kind == "optional":
            parts.append("OPTIONAL " + draw(groups(fresh, depth + 1, in_exists)))
        elif kind == "union":
            parts.append(draw(groups(fresh, depth + 1, in_exists)) + " UNION " + draw(groups(fresh, depth + 1, in_exists)))
        elif kind == "minus":
            parts.append("MINUS " + draw(groups(fresh, depth + 1, in_exists)))
        elif kind == "graph":
            parts.append("GRAPH " + draw(st.sampled_from(["?g", "<urn:s:g>", "s:g"])) + " " + draw(groups(fresh, depth + 1, in_exists)))
        elif kind == "exists":
            parts.append("FILTER " + draw(st.sampled_from(["EXISTS ", "NOT EXISTS "])) + draw(groups(fresh, depth + 1, True)))
        elif kind == "group":
            parts.append(draw(groups(fresh, depth + 1, in_exists)))
        else:
            parts.append("{ SELECT ?a ?b WHERE " + draw(groups(fresh, depth + 1, in_exists)) + " LIMIT 5 }")
    return "{ " + " ".join(parts) + " }"


@st.composite
def queries(draw: st.DrawFn) -> str:
    fresh = [0]
    where = draw(groups(fresh))
    form = draw(st.sampled_from(["select", "select", "select-star", "count", "ask", "construct", "describe"]))
    if form == "select":
        chosen = draw(st.lists(st.sampled_from(["?a", "?b", "?c"]), min_size=1, max_size=3, unique=True))
        head = "SELECT " + draw(st.sampled_from(["", "DISTINCT "])) + " ".join(chosen) + " WHERE "
    elif form == "select-star":
        head = "SELECT * WHERE "
    elif form == "count":
        head = "SELECT (COUNT(*) AS ?n) WHERE "
    elif form == "ask":
        head = "ASK "
    elif form == "construct":
        head = "CONSTRUCT { ?a s:q ?b } WHERE "
    else:
        head = "DESCRIBE ?a WHERE "
    tail = draw(st.sampled_from(["", " ORDER BY ?a", " LIMIT 10", " ORDER BY DESC(?b) LIMIT 3 OFFSET 1"]))
    if form in ("ask", "count"):
        tail = ""
    return PROLOGUE + head + where + tail


HANDLED: list[str] = []


#: No shrinking: a generated query is short enough to read as it fails, and shrinking these takes minutes.
PHASES = (Phase.explicit, Phase.reuse, Phase.generate)


@settings(max_examples=300, deadline=None, derandomize=True, phases=PHASES, suppress_health_check=[HealthCheck.too_slow])
@given(queries())
@pytest.mark.slow
def test_generated_queries_the_fast_path_reads_as_rdflib_does(text: str) -> None:
    try:
        check_query(text, policy=False)
    except QueryRefused as error:
        pytest.fail(f"the generator wrote a query Oxigraph rejects ({error}):\n{text}")
    HANDLED.append(agree(text))


def test_the_generated_queries_mostly_take_the_fast_path() -> None:
    """The fast path earns its keep only when it handles most generated queries (it defers on the rest)."""
    if not HANDLED:
        pytest.skip("runs after the generated-queries test")
    compared = HANDLED.count("fast")
    assert compared >= 0.7 * len(HANDLED), f"{compared} of {len(HANDLED)} compared with rdflib on the fast path"


SPARQLISH = st.lists(
    st.sampled_from(list("SELECTWHERFILTOPNAMINUSabcxyz?$:_<>\"'\\#{}()[].,;*+/|^!=@-0123456789 \n\u00e9")
                    + ["\\u00e9", '"""', "'''", "^^", "&&", "||", "PREFIX ", "EXISTS", "SERVICE"]),
    max_size=40,
).map("".join)


@settings(max_examples=300, deadline=None, derandomize=True, phases=PHASES)
@given(SPARQLISH)
def test_any_text_tokenizes_and_shapes_without_raising(text: str) -> None:
    tokens = tokenize(text)
    covered = "".join(t.text for t in tokens)
    assert len(covered) <= len(text) and all(t.start < t.end for t in tokens)
    assert all(a.end <= b.start for a, b in zip(tokens, tokens[1:], strict=False))
    for token in tokens:
        if token.kind == "string":
            string_value(token.text)
    query_shape(text)
    with contextlib.suppress(QueryRefused):
        check_query(text)


# ------------------------------------------------------------------------------------------------ W3C suites


def _w3c() -> tuple[list[Path], dict[Path, str]]:
    """Every query file the suites' manifests name (syntax tests and evaluation tests), and each one's test type."""
    kinds: dict[Path, str] = {}
    for manifest in sorted(SPARQL11.glob("*/manifest.ttl")):
        store = ox.Store()
        store.load(path=str(manifest), format=ox.RdfFormat.TURTLE, base_iri=manifest.resolve().as_uri())
        query = (
            f"SELECT ?type ?file WHERE {{ ?t a ?type ; <{MF}action> ?action . "
            f"OPTIONAL {{ ?action <{QT}query> ?query }} BIND(COALESCE(?query, ?action) AS ?file) "
            "FILTER(isIRI(?file) && STRENDS(STR(?file), '.rq')) }"
        )
        for row in store.query(query):
            kinds[Path(row["file"].value.removeprefix("file://"))] = row["type"].value.rsplit("#", 1)[1]
    return sorted(kinds), kinds


W3C_FILES, W3C_KINDS = _w3c()


def test_the_w3c_queries_read_the_same_by_both_parsers() -> None:
    counts = {"fast": 0, "deferred": 0, "fast only": 0, "rejected by the checker": 0, "rdflib wrong": 0}
    for path in W3C_FILES:
        text = path.read_text(encoding="utf-8")
        name = f"{path.parent.name}/{path.name}"
        kind = W3C_KINDS[path]
        try:
            check_query(text, base_iri=path.resolve().as_uri(), policy=False)
        except QueryRefused as error:
            # invalid queries stop here, before any shape is read; valid ones only for a policy reason
            assert kind.startswith("Negative") or error.kind in ("service", "update", "load"), (name, error)
            counts["rejected by the checker"] += 1
            continue
        assert not kind.startswith("Negative"), f"{name}: an invalid query passed the checker"
        if name in RDFLIB_WRONG:
            ours, theirs = fast(text), rdflib_shape(text)
            assert ours is not None and theirs is not None and set(theirs.patterns) < set(ours.patterns)
            counts["rdflib wrong"] += 1
        else:
            counts[agree(text)] += 1
    print(len(W3C_FILES), counts)
    assert counts["fast"] > 300, counts
    assert counts["rejected by the checker"] >= 40, counts  # the negative syntax tests, SERVICE, updates


# ------------------------------------------------------------------------------------------------ lexer


@pytest.mark.parametrize(
    ("literal", "value"),
    [
        ('"caf\\u00e9"', "caf\u00e9"),
        ('"\\U0001F600"', "\U0001f600"),
        ("'tab\\there'", "tab\there"),
        ('"a \\"b\\" c"', 'a "b" c'),
        ('"""x\n"y"\n"""', 'x\n"y"\n'),
        ("'''it''s'''", "it''s"),
    ],
)
def test_string_escapes_decode_as_the_grammar_says(literal: str, value: str) -> None:
    (token,) = tokenize(literal)
    assert token.kind == "string" and string_value(token.text) == value
    assert rdflib_shape(f"SELECT * WHERE {{ ?s <urn:p> {literal} }}").patterns[0][2] == str(ox.Literal(value))


def test_an_invalid_escape_is_no_string_so_keywords_after_it_show() -> None:
    """ECHAR is a closed list: ``"\\q"`` is not a string token, so what follows it is not hidden as string text."""
    kinds = [t.kind for t in tokenize('"\\q SERVICE"')]
    assert "string" not in kinds and "word" in kinds


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("<http://a/b#c>", "iri"), ("<urn:x:\\u00e9>", "iri"), ("s:a.b", "pname"), ("s:", "pname"), (":x", "pname"),
        ("s:a\\.b", "pname"), ("s:%20", "pname"), ("_:b.1", "bnode"), ("?x\u00e9", "var"), ("@en-GB", "lang"),
        ("1.5e3", "number"), (".5", "number"),
    ],
)
def test_terminals(text: str, kind: str) -> None:
    (token,) = tokenize(text)
    assert (token.kind, token.text) == (kind, text)


def test_less_than_between_variables_is_no_iri() -> None:
    assert [t.kind for t in tokenize("FILTER(?a < ?b)")] == ["word", "punct", "var", "punct", "var", "punct"]

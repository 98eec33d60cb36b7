"""Run one SPARQL query on several engines through pcm's scope rewrite and compare the answers (the cross-engine
differential suite, ``test_engines_differential.py``, and ``pcm store check``'s tests).

Each case is a dataset and a query. The dataset goes into graphs under a memory prefix of its own
(:class:`pcm.layout.DatasetLayout`), on every engine; the query is rendered with that layout and run:

- ``reference``: the embedded store holding that case alone, the query as written, the default graph the union of
  the graphs: what the query means to pcm (``Memory.sparql`` on an embedded memory);
- ``embedded``: one embedded store holding every case, the query scoped to the case's graphs (:mod:`pcm.scope`);
- ``oxigraph`` / ``virtuoso``: the same on the server, through :class:`pcm.backend_remote.RemoteBackend`.

Answers are compared as sorted multisets of rows (an ``ORDER BY`` is not compared: engines break ties
differently), each term normalised where engines legitimately differ (:func:`term_key`). A ``GROUP_CONCAT`` joins
its values in an order the standard leaves open (SPARQL 1.1 §18.5.1.7: the aggregate is over a multiset), so its
column is compared as the multiset of the parts its separator splits (:func:`concat_columns`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

import pyoxigraph as ox

from pcm.backend import Solutions
from pcm.backend_remote import SKOLEM_PREFIX, RemoteBackend
from pcm.errors import PcmError
from pcm.layout import LEGACY_PREFIX, DatasetLayout
from pcm.scope import ScopeError, scope_query, strip_hidden
from pcm.sparql.lexer import matching, string_value, tokenize

XSD = "http://www.w3.org/2001/XMLSchema#"
#: Integer types an engine may give an integer result (Virtuoso types COUNT and integer sums as xsd:int or
#: xsd:long where the standard says xsd:integer): compared as xsd:integer.
INTEGERS = {XSD + t for t in ("integer", "int", "long", "short", "byte", "nonNegativeInteger", "positiveInteger",
                              "negativeInteger", "nonPositiveInteger", "unsignedInt", "unsignedLong",
                              "unsignedShort", "unsignedByte")}
#: Numeric types whose lexical forms differ between engines for the same value (``1.0E0`` and ``1e0``, ``2.50``
#: and ``2.5``): compared by value within their type.
NUMERIC = {XSD + t for t in ("decimal", "double", "float")}
#: A date-time with fractional seconds: (up to the seconds, the fraction's digits, the zone).
_FRACTION = re.compile(r"(-?\d{4,}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d+)(Z|[+-]\d\d:\d\d)?")


@dataclass(frozen=True)
class Case:
    name: str
    dataset: str  # the name of the dataset it runs on
    query: str  # with layout placeholders ({{graph:...}}) or none


def layout_for(index: int) -> DatasetLayout:
    return DatasetLayout(f"diff{index}")


def move_graphs(quads: Sequence[ox.Quad], layout: DatasetLayout) -> list[ox.Quad]:
    """Quads of an embedded memory (graphs under ``urn:pcm:graph:``) or of a plain dataset (the default graph) put
    under ``layout``'s prefix; IRIs that name a graph (provenance speaks of graphs) follow."""

    def term(t: object) -> object:
        if isinstance(t, ox.NamedNode) and t.value.startswith(LEGACY_PREFIX):
            return ox.NamedNode(layout.prefix + t.value[len(LEGACY_PREFIX):])
        return t

    moved = []
    for q in quads:
        graph = ox.NamedNode(layout.prefix + "extraction:data") if isinstance(q.graph_name, ox.DefaultGraph) else term(q.graph_name)
        moved.append(ox.Quad(term(q.subject), q.predicate, term(q.object), graph))  # type: ignore[arg-type]
    return moved


def term_key(term: object) -> str:
    """A term as compared: blank nodes (and Virtuoso's skolem IRIs for them) are all alike; integers of any integer
    type are xsd:integer; decimals, doubles and floats are compared by value within their type."""
    if term is None:
        return "UNBOUND"
    if isinstance(term, ox.BlankNode) or isinstance(term, ox.NamedNode) and term.value.startswith(SKOLEM_PREFIX):
        return "_:b"
    if isinstance(term, ox.Literal):
        datatype = term.datatype.value
        if datatype in INTEGERS or datatype in NUMERIC:
            try:
                value = Decimal(term.value.strip())
            except InvalidOperation:
                return str(term)
            if datatype in INTEGERS:
                return f"{value.normalize():f}^^integer" if value == value.to_integral_value() else str(term)
            if not value.is_finite():
                return f"{value}^^{datatype}"
            return f"{value.normalize():f}^^{datatype}"
        if term.language:
            return f'"{term.value}"@{term.language.lower()}'
        if datatype in (XSD + "dateTime", XSD + "string") and (fraction := _FRACTION.fullmatch(term.value)):
            # an engine may keep a stored time's trailing zeros (Virtuoso: "10.611990Z") where another writes it
            # canonically (Oxigraph: "10.61199Z"), also in STR() of it
            seconds = fraction.group(2).rstrip("0")
            return str(ox.Literal(fraction.group(1) + (f".{seconds}" if seconds else "") + (fraction.group(3) or ""),
                                  datatype=term.datatype))
    if isinstance(term, ox.Triple):
        return f"<< {term_key(term.subject)} {term_key(term.predicate)} {term_key(term.object)} >>"
    return str(term)


def concat_columns(query: str) -> dict[str, str]:
    """The columns a query fills with ``GROUP_CONCAT(...) AS ?v``, each with its separator (a space by default)."""
    tokens = tokenize(query)
    columns: dict[str, str] = {}
    for i, token in enumerate(tokens):
        if not token.is_word("GROUP_CONCAT"):
            continue
        close = matching(tokens, i + 1, "(", ")")
        if close is None or close + 2 >= len(tokens) or not tokens[close + 1].is_word("AS"):
            continue
        separator = " "
        for j in range(i + 2, close - 2):
            if tokens[j].is_word("SEPARATOR") and tokens[j + 1].text == "=" and tokens[j + 2].kind == "string":
                separator = string_value(tokens[j + 2].text)
        columns[tokens[close + 2].text[1:]] = separator
    return columns


def _unordered(term: object, separator: str) -> object:
    """A GROUP_CONCAT's value with its parts sorted (the order is the engine's)."""
    if isinstance(term, ox.Literal) and separator:
        joined = separator.join(sorted(term.value.split(separator)))
        return ox.Literal(joined, language=term.language) if term.language else ox.Literal(joined, datatype=term.datatype)
    return term


def answer_key(result: object, concat: dict[str, str] | None = None) -> object:
    """The comparable form of a query result (see the module docstring); ``concat``: :func:`concat_columns`."""
    if isinstance(result, bool):
        return result
    if isinstance(result, Solutions):
        keep = strip_hidden(result.variables)
        names = [result.variables[k] for k in keep] if keep is not None else list(result.variables)
        concat = concat or {}
        rows = sorted(
            tuple(sorted(
                (v, term_key(_unordered(t, concat[v]) if v in concat else t))
                for v, t in zip(result.variables, row, strict=True) if v in names and t is not None
            ))
            for row in result.rows
        )
        return ("select", tuple(sorted(names)), tuple(rows))
    assert isinstance(result, list)
    return ("graph", tuple(sorted(" ".join(term_key(x) for x in (t.subject, t.predicate, t.object)) for t in result)))


def from_pyoxigraph(result: object) -> object:
    if isinstance(result, ox.QueryBoolean):
        return bool(result)
    if isinstance(result, ox.QuerySolutions):
        names = tuple(v.value for v in result.variables)
        return Solutions(names, [tuple(s) for s in result])
    return list(result)  # type: ignore[call-overload]


class Engines:
    """Every dataset loaded on every engine, each under its own memory prefix; :meth:`answers` runs a query."""

    def __init__(self, datasets: dict[str, Sequence[ox.Quad]], remotes: dict[str, RemoteBackend]) -> None:
        self.remotes = remotes
        self.embedded = ox.Store()
        self.layouts: dict[str, DatasetLayout] = {}
        self.references: dict[str, ox.Store] = {}
        for k, (name, quads) in enumerate(datasets.items()):
            layout = self.layouts[name] = layout_for(k)
            moved = move_graphs(quads, layout)
            reference = self.references[name] = ox.Store()
            reference.extend(moved)
            self.embedded.extend(moved)
            for backend in remotes.values():
                backend.layout = None
                backend.extend(moved)

    def answers(self, case: Case) -> dict[str, object]:
        """Engine name → the comparable answer (or ``"error: ..."`` when the engine refused or failed)."""
        layout = self.layouts[case.dataset]
        text = layout.render(case.query)
        found: dict[str, object] = {}
        concat = concat_columns(text)
        reference = self.references[case.dataset].query(text, use_default_graph_as_union=True)
        found["reference"] = answer_key(from_pyoxigraph(reference), concat)
        try:
            scoped = scope_query(text, layout.prefix)
            found["embedded"] = answer_key(
                from_pyoxigraph(self.embedded.query(scoped, use_default_graph_as_union=True)), concat
            )
        except (PcmError, SyntaxError, OSError) as error:
            found["embedded"] = f"error: {error}"
        for engine, backend in self.remotes.items():
            backend.layout = layout
            try:
                found[engine] = answer_key(backend.query(text), concat)
            except ScopeError as error:
                found[engine] = f"refused: {error}"
            except PcmError as error:
                found[engine] = f"error: {error}"
            finally:
                backend.layout = None
        return found

"""A constrained JSON query form for asking, compiled to SPARQL in code.

Why: a small model held to a JSON Schema writes a query built only from catalogue terms, variables and values, and
cannot break SPARQL's syntax; pcm writes the SPARQL. The form covers what the NL→SPARQL prompt's strategy needs:
triple patterns (some optional), filters, one aggregate, grouping, order and limit, or ``no_query`` with a reason.
The schema is generated from the ontology (predicates and classes of the catalogue, the named values), never by
hand. What the compiler produces goes through the same safety check and repair loop as a query the model wrote
(see :mod:`pcm.retrieval.repair`).

The form::

    {"select": ["?item", "?price"],
     "where": [{"s": "?buy", "p": "rdf:type", "o": "schema:BuyAction"},
               {"s": "?buy", "p": "schema:object", "o": "?item"},
               {"s": "?buy", "p": "schema:price", "o": "?price", "optional": true}],
     "filters": [{"var": "?label", "op": "contains", "value": "espresso"}],
     "aggregate": {"fn": "count", "var": "?item", "distinct": true, "as": "?n"},
     "group_by": ["?x"], "order_by": [{"var": "?price", "desc": true}], "limit": 10}
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

from pcm.llm.base import JsonSchema
from pcm.namespaces import PREFIXES, RDF, RDFS
from pcm.ontology import CLASS, INDIVIDUAL, Ontology
from pcm.sparql import literal_term

VARIABLE = r"^\?[A-Za-z_][A-Za-z0-9_]{0,30}$"
NAME = r"^m:[A-Za-z0-9][A-Za-z0-9._-]{0,79}$"
OPERATORS = ("=", "!=", "<", "<=", ">", ">=", "contains")
AGGREGATES = ("count", "sum", "min", "max", "avg")
DATATYPES = ("xsd:date", "xsd:dateTime", "xsd:gYear", "xsd:gYearMonth", "xsd:integer", "xsd:decimal", "xsd:boolean")
MAX_PATTERNS = 12
MAX_FILTERS = 6
MAX_LIMIT = 1000
SCHEMA_NAME = "query"

_VARIABLE = re.compile(VARIABLE)
_NAME = re.compile(NAME)


class FormProblem(ValueError):
    """The reply is not a usable query form; the message goes back to the model in a repair round."""


@cache
def query_schema(ontology: Ontology) -> JsonSchema:
    """The JSON Schema of the query form, from the ontology's predicates, classes and named values."""
    predicates = sorted({ontology.curie(i) for i in ontology.properties} | {"rdf:type", "rdfs:label"})
    constants = sorted(ontology.curie(t.iri) for t in ontology.terms.values() if t.kind in (CLASS, INDIVIDUAL))
    variable = {"type": "string", "pattern": VARIABLE, "maxLength": 32}
    name = {"type": "string", "pattern": NAME, "maxLength": 82}
    literal = {
        "type": "object",
        "properties": {
            "literal": {"anyOf": [{"type": "string", "maxLength": 200}, {"type": "number"}, {"type": "boolean"}]},
            "datatype": {"type": "string", "enum": list(DATATYPES)},
        },
        "required": ["literal"],
        "additionalProperties": False,
    }
    pattern = {
        "type": "object",
        "properties": {
            "s": {"anyOf": [variable, name]},
            "p": {"type": "string", "enum": predicates},
            "o": {"anyOf": [variable, name, {"type": "string", "enum": constants}, literal]},
            "optional": {"type": "boolean"},
        },
        "required": ["s", "p", "o"],
        "additionalProperties": False,
    }
    value = {"anyOf": [{"type": "string", "maxLength": 200}, {"type": "number"}, {"type": "boolean"}]}
    schema = {
        "type": "object",
        "properties": {
            "no_query": {"type": "string", "maxLength": 300},
            "select": {"type": "array", "items": variable, "maxItems": 8},
            "distinct": {"type": "boolean"},
            "where": {"type": "array", "items": pattern, "minItems": 1, "maxItems": MAX_PATTERNS},
            "filters": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "var": variable,
                        "op": {"type": "string", "enum": list(OPERATORS)},
                        "value": value,
                        "datatype": {"type": "string", "enum": list(DATATYPES)},
                    },
                    "required": ["var", "op", "value"],
                    "additionalProperties": False,
                },
                "maxItems": MAX_FILTERS,
            },
            "aggregate": {
                "type": "object",
                "properties": {
                    "fn": {"type": "string", "enum": list(AGGREGATES)},
                    "var": variable,
                    "distinct": {"type": "boolean"},
                    "as": variable,
                },
                "required": ["fn", "var", "as"],
                "additionalProperties": False,
            },
            "group_by": {"type": "array", "items": variable, "maxItems": 4},
            "order_by": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"var": variable, "desc": {"type": "boolean"}},
                    "required": ["var"],
                    "additionalProperties": False,
                },
                "maxItems": 3,
            },
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
        },
        "additionalProperties": False,
    }
    return JsonSchema(SCHEMA_NAME, schema, "The query that answers the question, or no_query with the reason.")


def parse_form(text: str) -> dict[str, Any]:
    """The JSON object of a reply (a Markdown fence or prose around it is cut away)."""
    fence = re.search(r"```[^\n`]*\n(.*?)(?:```|\Z)", text, re.DOTALL)
    body = fence.group(1) if fence else text
    start = body.find("{")
    if start < 0:
        raise FormProblem("the reply holds no JSON object; write the query form, or {\"no_query\": \"reason\"}")
    try:
        value, _ = json.JSONDecoder().raw_decode(body[start:])
    except ValueError as error:
        raise FormProblem(f"the reply is not valid JSON: {error}") from error
    if not isinstance(value, dict):
        raise FormProblem("the query form must be a JSON object")
    return value


def compile_form(form: dict[str, Any], *, namespace: str, ontology: Ontology) -> str:
    """SPARQL for a query form; :class:`FormProblem` (one line) when a part cannot be compiled."""
    patterns = form.get("where")
    if not isinstance(patterns, list) or not patterns:
        raise FormProblem('"where" must list at least one triple pattern {"s", "p", "o"}')
    required: list[str] = []
    optional: list[str] = []
    for pattern in patterns:
        if not isinstance(pattern, dict):
            raise FormProblem("each item of \"where\" must be an object {\"s\", \"p\", \"o\"}")
        triple = f"{_subject(pattern.get('s'), namespace)} {_predicate(pattern.get('p'), ontology)} " \
                 f"{_object(pattern.get('o'), namespace, ontology)} ."
        (optional if pattern.get("optional") is True else required).append(triple)
    if not required:
        raise FormProblem("at least one triple pattern must not be optional")
    body = [f"  {t}" for t in required] + [f"  OPTIONAL {{ {t} }}" for t in optional]
    body += [f"  FILTER({_filter(f)})" for f in _list(form, "filters")]
    used = set(re.findall(r"\?\w+", "\n".join(body)))
    head = _head(form, used)
    lines = [f"PREFIX {name}: <{iri}>" for name, iri in sorted(PREFIXES.items())]
    lines.append(f"PREFIX m: <{namespace}>")
    lines += [head, "WHERE {", *body, "}"]
    groups = [_variable(v, "group_by") for v in _list(form, "group_by")]
    if groups:
        lines.append("GROUP BY " + " ".join(groups))
    orders = []
    for order in _list(form, "order_by"):
        variable = _variable(order.get("var") if isinstance(order, dict) else None, "order_by")
        orders.append(f"DESC({variable})" if isinstance(order, dict) and order.get("desc") is True else variable)
    if orders:
        lines.append("ORDER BY " + " ".join(orders))
    limit = form.get("limit")
    if isinstance(limit, int) and not isinstance(limit, bool) and 0 < limit <= MAX_LIMIT:
        lines.append(f"LIMIT {limit}")
    return "\n".join(lines) + "\n"


def _list(form: dict[str, Any], key: str) -> list[Any]:
    value = form.get(key) or []
    if not isinstance(value, list):
        raise FormProblem(f'"{key}" must be a list')
    return value


def _variable(value: Any, where: str) -> str:
    if not isinstance(value, str) or not _VARIABLE.match(value):
        raise FormProblem(f"{where}: {json.dumps(value)} is not a variable like ?item")
    return value


def _subject(value: Any, namespace: str) -> str:
    if isinstance(value, str) and (_VARIABLE.match(value) or _NAME.match(value)):
        return value
    raise FormProblem(f"subject {json.dumps(value)} must be a variable (?x) or a known entity (m:name)")


def _predicate(value: Any, ontology: Ontology) -> str:
    if value in ("rdf:type", "a"):
        return "rdf:type"
    if value == "rdfs:label":
        return "rdfs:label"
    if isinstance(value, str) and ":" in value and _expand(value) in ontology.properties:
        return value
    raise FormProblem(f"predicate {json.dumps(value)} is not a property of the vocabulary")


def _object(value: Any, namespace: str, ontology: Ontology) -> str:
    if isinstance(value, str):
        if _VARIABLE.match(value) or _NAME.match(value):
            return value
        if ":" in value and ontology.defines(_expand(value)):
            return value
        raise FormProblem(f"object {json.dumps(value)} is not a variable, an m: entity or a vocabulary term; "
                          'write a literal as {"literal": ...}')
    if isinstance(value, dict) and "literal" in value:
        return _literal(value.get("literal"), value.get("datatype"))
    raise FormProblem(f"object {json.dumps(value)} is not a variable, an entity, a term or a literal")


def _literal(value: Any, datatype: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)) and datatype in (None, "xsd:integer", "xsd:decimal"):
        return repr(value) if isinstance(value, float) else str(value)
    if not isinstance(value, (str, int, float)):
        raise FormProblem(f"literal {json.dumps(value)} must be a string, a number or a boolean")
    text = literal_term(str(value))
    if datatype is not None:
        if datatype not in DATATYPES:
            raise FormProblem(f"datatype {json.dumps(datatype)} is not one of {', '.join(DATATYPES)}")
        text += f"^^{datatype}"
    return text


def _filter(spec: Any) -> str:
    if not isinstance(spec, dict):
        raise FormProblem('each filter must be an object {"var", "op", "value"}')
    variable = _variable(spec.get("var"), "filter")
    op = spec.get("op")
    if op not in OPERATORS:
        raise FormProblem(f"filter operator {json.dumps(op)} is not one of {', '.join(OPERATORS)}")
    if op == "contains":
        return f"CONTAINS(LCASE(STR({variable})), LCASE({literal_term(str(spec.get('value')))}))"
    return f"{variable} {op} {_literal(spec.get('value'), spec.get('datatype'))}"


def _head(form: dict[str, Any], used: set[str]) -> str:
    selected = [_variable(v, "select") for v in _list(form, "select")]
    aggregate = form.get("aggregate")
    alias_of = aggregate.get("as") if isinstance(aggregate, dict) else None
    # A small model lists what the question asks for, including a variable it then never binds: the query is still
    # meaningful without it, so it is dropped rather than the whole answer refused; nothing bound at all is refused.
    bound = [v for v in selected if v in used or v == alias_of]
    if selected and not bound:
        raise FormProblem(f"select: {', '.join(selected)} {'does' if len(selected) == 1 else 'do'} not occur in the patterns")
    selected = bound
    distinct = "DISTINCT " if form.get("distinct") is True else ""
    if aggregate is None:
        return f"SELECT {distinct}{' '.join(selected) if selected else '*'}"
    if not isinstance(aggregate, dict) or aggregate.get("fn") not in AGGREGATES:
        raise FormProblem(f"aggregate must be {{\"fn\": one of {', '.join(AGGREGATES)}, \"var\", \"as\"}}")
    variable = _variable(aggregate.get("var"), "aggregate")
    alias = _variable(aggregate.get("as"), "aggregate")
    inner = ("DISTINCT " if aggregate.get("distinct") is True else "") + variable
    others = [v for v in selected if v not in (alias,)]
    grouped = set(_list(form, "group_by"))
    if set(others) - grouped:
        raise FormProblem(f"with an aggregate, the other selected variables {sorted(set(others) - grouped)} must "
                          "be in group_by")
    return f"SELECT {distinct}{' '.join(others)} ({aggregate['fn'].upper()}({inner}) AS {alias})".replace("  ", " ")


def _expand(curie: str) -> str:
    prefix, _, local = curie.partition(":")
    if prefix == "rdf":
        return RDF + local
    if prefix == "rdfs":
        return RDFS + local
    return PREFIXES.get(prefix, "") + local


__all__ = ["FormProblem", "compile_form", "parse_form", "query_schema"]

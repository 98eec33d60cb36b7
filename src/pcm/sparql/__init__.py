"""The SPARQL front end: one lexer, one query representation, the checks and rewrites built on them, and values
rendered into query text safely.

- :mod:`pcm.sparql.lexer`: the SPARQL 1.1 terminals (IRIs, strings and their escapes, prefixed names) and the
  token-level helpers every reader of query text uses.
- :mod:`pcm.sparql.query`: :class:`Query`, one text parsed once (tokens, prefixes, form, shape, WHERE group);
  a fast shape parser held to rdflib's by a differential test, rdflib as the fallback.
- :mod:`pcm.sparql.check`: read-only, no federation, bounded (what runs a query someone else wrote).
- :mod:`pcm.sparql.rewrite`: LIMIT bounds and ontology hierarchy expansion, as span edits of the text.
- :mod:`pcm.sparql.results`: results in SPARQL JSON / N-Triples across a process boundary.

Every IRI or literal we splice into a query goes through :func:`iri_term` / :func:`literal_term`, so an utterance
or a question can never close a ``<...>`` or a string and write its own SPARQL.
"""

from __future__ import annotations

import pyoxigraph as ox

from pcm.naming import check_iri
from pcm.sparql.check import QueryRefused, SafeQuery, check_query, check_read_only
from pcm.sparql.lexer import Token, tokenize
from pcm.sparql.query import PathUse, Query, QueryShape, parse, query_shape


def is_true(term: object) -> bool:
    """A bound boolean that says true: ``"true"``, or ``1`` where an engine (Virtuoso) answers a bound boolean as
    an integer. Every query result read as a flag goes through this one test."""
    return isinstance(term, ox.Literal) and term.value in ("true", "1")


def iri_term(iri: str) -> str:
    return f"<{check_iri(iri)}>"


def literal_term(value: str) -> str:
    return str(ox.Literal(value))


def values_clause(variable: str, iris: list[str]) -> str:
    return f"VALUES ?{variable} {{ " + " ".join(iri_term(i) for i in iris) + " }"


__all__ = [
    "PathUse",
    "Query",
    "QueryRefused",
    "QueryShape",
    "SafeQuery",
    "Token",
    "check_query",
    "check_read_only",
    "iri_term",
    "is_true",
    "literal_term",
    "parse",
    "query_shape",
    "tokenize",
    "values_clause",
]

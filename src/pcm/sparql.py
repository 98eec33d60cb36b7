"""Rendering values into SPARQL text safely, and the read-only check for user-supplied queries.

Every IRI or literal we splice into a query goes through here, so an utterance or a question can never close a
``<...>`` or a string and write its own SPARQL.
"""

from __future__ import annotations

import re

import pyoxigraph as ox

from pcm.errors import QueryError
from pcm.naming import check_iri


def iri_term(iri: str) -> str:
    return f"<{check_iri(iri)}>"


def literal_term(value: str) -> str:
    return str(ox.Literal(value))


def values_clause(variable: str, iris: list[str]) -> str:
    return f"VALUES ?{variable} {{ " + " ".join(iri_term(i) for i in iris) + " }"


_COMMENT_OR_STRING = re.compile(
    r'"""(?:[^"\\]|\\.|"(?!""))*"""|' r"'''(?:[^'\\]|\\.|'(?!''))*'''|" r'"(?:[^"\\\n]|\\.)*"|' r"'(?:[^'\\\n]|\\.)*'|"
    r"<[^<>\"{}|^`\\\s]*>|#[^\n]*"
)
_KEYWORD = r"(?<![?$:\w-])({})(?![:\w-])"
_FORBIDDEN = re.compile(
    _KEYWORD.format("SERVICE|LOAD|INSERT|DELETE|CLEAR|DROP|CREATE|ADD|MOVE|COPY|WITH"), re.IGNORECASE
)
_FORM = re.compile(_KEYWORD.format("SELECT|ASK|CONSTRUCT|DESCRIBE"), re.IGNORECASE)


def check_read_only(sparql: str) -> str:
    """Refuse anything but SELECT/ASK/CONSTRUCT/DESCRIBE, and SERVICE (federation could reach any URL).

    Keywords are looked for outside strings, IRIs and comments; the query is then parsed by the engine itself,
    which also rejects any update syntax. Returns the query form.
    """
    code = _COMMENT_OR_STRING.sub(" ", sparql)
    bad = _FORBIDDEN.search(code)
    if bad:
        word = bad.group(1).upper()
        if word == "SERVICE":
            raise QueryError("SERVICE is refused: federated queries could reach any URL from your memory")
        raise QueryError(f"only read queries are allowed here ({word} is an update operation)")
    form = _FORM.search(code)
    if not form:
        raise QueryError("not a SPARQL query: expected SELECT, ASK, CONSTRUCT or DESCRIBE")
    try:
        ox.Store().query(sparql)
    except SyntaxError as exc:
        raise QueryError(f"SPARQL syntax error: {exc}") from exc
    return form.group(1).upper()

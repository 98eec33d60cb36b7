"""Rendering values into SPARQL text safely, and the read-only check for user-supplied queries.

Every IRI or literal we splice into a query goes through here, so an utterance or a question can never close a
``<...>`` or a string and write its own SPARQL.
"""

from __future__ import annotations

import pyoxigraph as ox

from pcm.naming import check_iri


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


def check_read_only(sparql: str) -> str:
    """Refuse anything but SELECT/ASK/CONSTRUCT/DESCRIBE, and SERVICE/LOAD; returns the query form.

    Delegates to the parser-based checker of :mod:`pcm.retrieval.safety`, which ``ask`` uses too.
    """
    from pcm.retrieval.safety import check_read_only as check

    return check(sparql)

"""Reading and writing RDF files: format detection, parse errors as one clear line, input limits
(:mod:`pcm.rdflimits`), schema.org normalisation."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pyoxigraph as ox

from pcm.errors import InputError, UsageError
from pcm.namespaces import SCHEMA, SCHEMA_HTTP
from pcm.rdflimits import RdfLimits, checked_triples, read_file

FORMATS: dict[str, ox.RdfFormat] = {
    "turtle": ox.RdfFormat.TURTLE,
    "trig": ox.RdfFormat.TRIG,
    "nquads": ox.RdfFormat.N_QUADS,
    "ntriples": ox.RdfFormat.N_TRIPLES,
    "jsonld": ox.RdfFormat.JSON_LD,
    "rdfxml": ox.RdfFormat.RDF_XML,
}
_EXTENSIONS = {
    ".ttl": "turtle",
    ".turtle": "turtle",
    ".trig": "trig",
    ".nq": "nquads",
    ".nquads": "nquads",
    ".nt": "ntriples",
    ".jsonld": "jsonld",
    ".json": "jsonld",
    ".rdf": "rdfxml",
    ".owl": "rdfxml",
}


def rdf_format(name: str) -> ox.RdfFormat:
    try:
        return FORMATS[name]
    except KeyError:
        raise UsageError(f"unknown RDF format {name!r}; choose one of {', '.join(FORMATS)}") from None


def detect_rdf_format(path: Path, fmt: str | None = None) -> str:
    if fmt:
        rdf_format(fmt)
        return fmt
    found = _EXTENSIONS.get(path.suffix.lower())
    if not found:
        raise UsageError(f"cannot tell the RDF format of {path.name}; pass --format ({', '.join(FORMATS)})")
    return found


def normalise_term(term: ox.NamedNode | ox.BlankNode | ox.Literal | ox.Triple) -> ox.NamedNode | ox.BlankNode | ox.Literal | ox.Triple:
    """``http://schema.org/x`` → ``https://schema.org/x`` (in IRIs and datatypes)."""
    if isinstance(term, ox.NamedNode):
        if term.value.startswith(SCHEMA_HTTP):
            return ox.NamedNode(SCHEMA + term.value[len(SCHEMA_HTTP) :])
        return term
    if isinstance(term, ox.Literal) and term.datatype.value.startswith(SCHEMA_HTTP):
        return ox.Literal(term.value, datatype=ox.NamedNode(SCHEMA + term.datatype.value[len(SCHEMA_HTTP) :]))
    return term


def normalise_quad(q: ox.Quad) -> ox.Quad:
    s, p, o = normalise_term(q.subject), normalise_term(q.predicate), normalise_term(q.object)
    if s is q.subject and p is q.predicate and o is q.object:
        return q
    return ox.Quad(s, p, o, q.graph_name)  # type: ignore[arg-type]  # normalise_term keeps a term's kind


def parse_rdf(
    source: Path | bytes | str,
    fmt: str,
    *,
    base_iri: str | None = None,
    name: str = "input",
    limits: RdfLimits | None = None,
) -> list[ox.Quad]:
    """Parse a whole document strictly, within ``limits`` (the default settings' when not given); any syntax error
    becomes one :class:`InputError` line, a limit passed one :class:`~pcm.errors.InputTooLarge` line.

    Returns quads (triples land in the default graph), with schema.org IRIs normalised to https. This is the
    parser of every import (the W3C Turtle suite runs through it).
    """
    limits = limits or RdfLimits()
    data = _bytes(source, limits)
    with worded(fmt, name):
        quads = [_as_quad(q) for q in checked_triples(data, rdf_format(fmt), limits, base_iri=base_iri, name=name)]
    if SCHEMA_HTTP.encode() in data:
        quads = [normalise_quad(q) for q in quads]
    return quads


def load_staging(
    source: Path | bytes | str,
    fmt: str,
    *,
    base_iri: str | None = None,
    name: str = "input",
    limits: RdfLimits | None = None,
) -> ox.Store:
    """:func:`parse_rdf` into an in-memory store, where imports are checked before anything touches the memory.

    The document is parsed as a stream into the store, so one over a limit is refused at the triple that passes
    it. Note that Oxigraph stores typed literals by value: ``"1.0"^^xsd:decimal`` comes back as ``"1"``.
    """
    limits = limits or RdfLimits()
    data = _bytes(source, limits)
    staging = ox.Store()
    if SCHEMA_HTTP.encode() in data:  # needs rewriting term by term
        staging.extend(parse_rdf(data, fmt, base_iri=base_iri, name=name, limits=limits))
        return staging
    with worded(fmt, name):
        triples = checked_triples(data, rdf_format(fmt), limits, base_iri=base_iri, name=name)
        staging.extend(_as_quad(t) for t in triples)
    return staging


def _bytes(source: Path | bytes | str, limits: RdfLimits) -> bytes:
    if isinstance(source, Path):
        return read_file(source, limits)
    return source.encode("utf-8") if isinstance(source, str) else source


def syntax_error(fmt: str, name: str, exc: SyntaxError) -> InputError:
    """Oxigraph's parse error as one line naming the input."""
    return InputError(f"{name}: not valid {fmt}: {_one_line(str(exc))}")


@contextmanager
def worded(fmt: str, name: str) -> Iterator[None]:
    """Oxigraph's parse errors as one :class:`InputError` line naming the input."""
    try:
        yield
    except SyntaxError as exc:
        raise syntax_error(fmt, name, exc) from exc
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{name}: cannot read {fmt}: {_one_line(str(exc))}") from exc


def _as_quad(t: ox.Triple | ox.Quad) -> ox.Quad:
    if isinstance(t, ox.Quad):
        return t
    return ox.Quad(t.subject, t.predicate, t.object, ox.DefaultGraph())


def canonical_blank_nodes(quads: Iterable[ox.Quad]) -> list[ox.Quad]:
    """``quads`` with their blank nodes named by RDF Dataset Canonicalization (RDFC-1.0), so the same dataset reads
    out the same from any store (each store labels blank nodes its own way: the ontology's OWL lists, a Virtuoso
    skolem IRI turned back). The quads without a blank node come first, in their order; the others after, sorted.
    Only they are canonicalised: a blank node's canonical name depends on the quads that mention blank nodes alone."""
    plain: list[ox.Quad] = []
    blank = ox.Dataset()
    for q in quads:
        if isinstance(q.subject, ox.BlankNode) or isinstance(q.object, ox.BlankNode) or isinstance(q.graph_name, ox.BlankNode):
            blank.add(q)
        else:
            plain.append(q)
    if not len(blank):
        return plain
    blank.canonicalize(ox.CanonicalizationAlgorithm.RDFC_1_0)
    return plain + sorted(blank, key=str)


def serialize(quads: Iterable[ox.Quad], fmt: str, *, prefixes: dict[str, str] | None = None) -> bytes:
    rdf = rdf_format(fmt)
    if rdf.supports_datasets:
        data = ox.serialize(quads, format=rdf, prefixes=prefixes)
    else:
        data = ox.serialize([ox.Triple(q.subject, q.predicate, q.object) for q in quads], format=rdf, prefixes=prefixes)
    assert data is not None, "pyoxigraph returns the bytes when given no output"
    return data


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]

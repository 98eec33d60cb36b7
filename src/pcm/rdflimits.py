"""Limits on RDF that enters a memory: an import file, a Graph Store upload. Checked before anything is staged.

A few hundred bytes of RDF/XML can make a parser build gigabytes: Oxigraph's RDF/XML parser expands the entities a
DOCTYPE declares, each declaration already expanded, with no bound (a "billion laughs": 985 bytes grew past 9 GB and
aborted the process), and it writes every namespace in scope into each top element of an ``rdf:parseType``
property (26 kB made one 36 MB literal). Neither option can be turned off in the parser, so RDF/XML is first read
with expat (the standard library's XML parser): a document that declares an entity is refused at the declaration,
before any expansion, and the characters such a property would hold are counted before Oxigraph builds them.

Oxigraph's cost also grows with the square of how deeply a document nests: its JSON-LD parser's memory (1,000
levels of objects, 25 kB of file, took 190 MB; 2,000 took 760 MB; 4,000, 100 kB, crashed the process) and its
RDF/XML parser's time (10,000 levels of elements: 0.3 s; 40,000, 2 MB: 6.6 s). So a JSON-LD document's brackets
are counted first (outside its strings, at C speed) and expat counts RDF/XML's elements, and a document nested
deeper than :data:`MAX_NESTING` is refused. Turtle, TriG and the line formats cost linear time and memory however
they nest.

Then every document is parsed as a stream and refused at the first triple over the count limit or the first
literal over the length limit, so what is refused is never held whole. The limits are settings
(``PCM_MAX_RDF_MB``, ``PCM_MAX_RDF_TRIPLES``, ``PCM_MAX_LITERAL_CHARS``); a refusal is one
:class:`~pcm.errors.InputTooLarge` line (too big: HTTP 413) or :class:`~pcm.errors.InputError` line (refused
content: HTTP 400) naming the limit and its setting. Both exit with 3 on the command line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from xml.parsers import expat

import pyoxigraph as ox

from pcm.errors import InputError, InputTooLarge
from pcm.settings import Settings

MB = 1024 * 1024
_PARSE_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns# parseType"  # as expat names it (namespace, space, name)
#: Deepest nesting a JSON-LD (objects and arrays) or RDF/XML (elements) document may have: data nests a handful of
#: levels, framed JSON-LD a few dozen, and at this depth neither parser's cost is noticeable (see above).
MAX_NESTING = 128
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_BRACKET_STEP = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # +1 and -1 as signed bytes
_STEPS_AT_ONCE = 1 << 20


@dataclass(frozen=True)
class RdfLimits:
    """How much RDF one file or one upload may hold. The defaults are :class:`~pcm.settings.Settings`' own."""

    max_bytes: int = Settings.max_rdf_mb * MB
    max_triples: int = Settings.max_rdf_triples
    max_literal_chars: int = Settings.max_literal_chars

    @classmethod
    def of(cls, settings: Settings) -> RdfLimits:
        return cls(settings.max_rdf_mb * MB, settings.max_rdf_triples, settings.max_literal_chars)


def check_size(size: int, limits: RdfLimits, name: str) -> None:
    """Refuse ``size`` bytes over the byte limit (before they are read, where the size is known first)."""
    if size > limits.max_bytes:
        raise InputTooLarge(
            f"{name}: {size:,} bytes is over the limit of {limits.max_bytes // MB:,} MB of RDF (PCM_MAX_RDF_MB); "
            "nothing was read into the memory"
        )


def read_file(path: Path, limits: RdfLimits) -> bytes:
    """The file's bytes, its size checked before it is read."""
    check_size(path.stat().st_size, limits, path.name)
    data = path.read_bytes()
    check_size(len(data), limits, path.name)  # it may have grown in between
    return data


def checked_triples(
    data: bytes, fmt: ox.RdfFormat, limits: RdfLimits, *, base_iri: str | None, name: str
) -> Iterator[ox.Quad | ox.Triple]:
    """Parse ``data`` as a stream, refusing it at the first triple past a limit.

    Parse errors are Oxigraph's (``SyntaxError``, ``ValueError``, ...), for the caller to word.
    """
    check_size(len(data), limits, name)
    if fmt == ox.RdfFormat.RDF_XML:
        check_xml(data, limits, name)
    elif fmt == ox.RdfFormat.JSON_LD:
        check_json_nesting(data, name)
    return _within(ox.parse(data, format=fmt, base_iri=base_iri), limits, name)


def too_many_triples(name: str, limit: int) -> InputTooLarge:
    return InputTooLarge(
        f"{name}: more than {limit:,} triples, the limit PCM_MAX_RDF_TRIPLES sets; nothing was read into the memory"
    )


def literal_too_long(name: str, chars: int, limit: int) -> InputTooLarge:
    return InputTooLarge(
        f"{name}: a literal of {chars:,} characters is over the limit of {limit:,} (PCM_MAX_LITERAL_CHARS); "
        "nothing was read into the memory"
    )


def _within(parsed: Iterable[ox.Quad | ox.Triple], limits: RdfLimits, name: str) -> Iterator[ox.Quad | ox.Triple]:
    for count, t in enumerate(parsed, 1):
        if count > limits.max_triples:
            raise too_many_triples(name, limits.max_triples)
        term = t.object
        while isinstance(term, ox.Triple):  # an RDF 1.2 triple term holds its own object
            term = term.object
        if isinstance(term, ox.Literal) and len(term.value) > limits.max_literal_chars:
            raise literal_too_long(name, len(term.value), limits.max_literal_chars)
        yield t


def check_json_nesting(data: bytes, name: str) -> None:
    """Refuse JSON nested deeper than :data:`MAX_NESTING`, before Oxigraph's JSON-LD parser sees it.

    Strings are dropped (a bracket in a string nests nothing), then the running depth of the brackets left is summed
    by numpy a million at a time: a Python loop over a 16 MB body of brackets took seconds. An unterminated string
    leaves its brackets counted, which can only refuse a document that is not JSON anyway.
    """
    import numpy as np  # here: only JSON-LD needs it, and the core modules load without it

    steps = np.frombuffer(_JSON_STRING.sub(b"", data).translate(None, _NOT_BRACKET).translate(_BRACKET_STEP), np.int8)
    depth = 0
    for start in range(0, len(steps), _STEPS_AT_ONCE):
        running = np.cumsum(steps[start:start + _STEPS_AT_ONCE], dtype=np.int64) + depth
        if int(running.max()) > MAX_NESTING:
            raise _too_deep(name, "JSON")
        depth = int(running[-1])


def _too_deep(name: str, what: str) -> InputError:
    return InputError(
        f"{name}: the {what} nests more than {MAX_NESTING} levels deep, which is refused (the parser's cost grows "
        "with the square of the depth): flatten it, or convert the file to Turtle"
    )


def check_xml(data: bytes, limits: RdfLimits, name: str) -> None:
    """Refuse RDF/XML that declares DTD entities, nests deeper than :data:`MAX_NESTING` elements, or whose
    ``rdf:parseType`` properties would grow past the limit.

    Expat reports a declaration as it reads it, before anything could refer to it, and its handler raises; expat
    itself never reads an external DTD here. Every element is read, for its depth (expat's pass costs about what
    Oxigraph's does: 0.34 s against 0.28 s for 25 MB). Each top element inside an element carrying
    ``rdf:parseType`` (any value: Oxigraph writes an unknown one the same way, and compares the value unescaped)
    gets a copy of every namespace declaration in scope, and that, with the text, is counted against the literal
    limit.
    """
    parser = expat.ParserCreate(namespace_separator=" ")
    declared: list[int] = []  # characters of each namespace declaration in scope, innermost last
    in_scope = 0
    depth = 0  # 0 outside a parseType element; 1 on it; 2 on its top elements; ...
    written = 0  # characters the current parseType element would hold
    elements = 0  # elements open

    def refuse_entity(entity: str, *_: object) -> None:
        raise InputError(
            f"{name}: the RDF/XML declares the DTD entity {entity!r}; DTD entities are never expanded (a few "
            "declarations can expand to gigabytes), so such a document is refused: write the values out, or convert "
            "the file to Turtle"
        )

    def start_namespace(prefix: str | None, uri: str | None) -> None:
        nonlocal in_scope
        size = len(prefix or "") + len(uri or "") + 10  # ` xmlns:p=""`
        declared.append(size)
        in_scope += size

    def end_namespace(prefix: str | None) -> None:
        nonlocal in_scope
        in_scope -= declared.pop()

    def start(tag: str, attributes: dict[str, str]) -> None:
        nonlocal depth, written, elements
        elements += 1
        if elements > MAX_NESTING:
            raise _too_deep(name, "RDF/XML")
        if depth:
            depth += 1
            if depth == 2:
                written += in_scope + len(tag)
                _check_literal(written, limits, name)
        elif _PARSE_TYPE in attributes:
            depth, written = 1, 0

    def end(tag: str) -> None:
        nonlocal depth, elements
        elements -= 1
        depth = max(0, depth - 1)

    def text(chars: str) -> None:
        nonlocal written
        if depth:
            written += len(chars)
            _check_literal(written, limits, name)

    parser.EntityDeclHandler = refuse_entity
    parser.UnparsedEntityDeclHandler = refuse_entity
    parser.StartNamespaceDeclHandler = start_namespace
    parser.EndNamespaceDeclHandler = end_namespace
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = text
    try:
        parser.Parse(data, True)
    except expat.ExpatError as exc:
        raise InputError(f"{name}: not valid rdfxml: {exc}") from exc


def _check_literal(chars: int, limits: RdfLimits, name: str) -> None:
    if chars > limits.max_literal_chars:
        raise InputTooLarge(
            f"{name}: an rdf:parseType property would hold more than {limits.max_literal_chars:,} characters, "
            "the limit PCM_MAX_LITERAL_CHARS sets (each of its elements repeats the namespaces in scope); "
            "nothing was read into the memory"
        )

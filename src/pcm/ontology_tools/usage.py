"""Which vocabulary terms a shape, a query or a prompt uses, and where.

``pcm ontology check`` must catch a term that the ontology lacks wherever it is written down: in ``shapes/``
(Turtle, with SPARQL inside ``sh:select``), in ``queries/`` (SPARQL text with ``{{placeholders}}``) and in the
prompts (Markdown with CURIEs). Each scanner returns :class:`TermUse` records with the file and line, so a report
points at the place to fix. The SPARQL scanner is a tokenizer, not a parser: templates are not valid SPARQL until
rendered, and a tokenizer that skips strings and comments is all a term check needs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pyoxigraph
import rdflib
from rdflib import URIRef
from rdflib.namespace import SH

from pcm.namespaces import PREFIXES


@dataclass(frozen=True)
class TermUse:
    """One IRI written in one file, at one line (1-based; 0 when unknown)."""

    iri: str
    path: Path
    line: int

    def where(self, root: Path | None = None) -> str:
        shown = self.path
        if root is not None:
            try:
                shown = self.path.resolve().relative_to(root.resolve())
            except ValueError:
                shown = self.path
        return f"{shown}:{self.line}" if self.line else str(shown)


_PREFIX_DECL = re.compile(r"(?i)(?:@|\b)PREFIX\s+([A-Za-z][\w.-]*)?:\s*<([^>]*)>")
_SPARQL_TOKEN = re.compile(
    r"""(?P<string>\"\"\"(?:[^"\\]|\\.|"(?!""))*\"\"\"|'''(?:[^'\\]|\\.|'(?!''))*'''|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')"""
    r"""|(?P<iri><[^<>"{}|^`\\\x00-\x20]*>)"""
    r"""|(?P<comment>\#[^\n]*)"""
    r"""|(?P<pname>(?<![\w?$.:-])(?P<prefix>[A-Za-z][\w-]*(?:\.[\w-]+)*)?:(?P<local>[\w-]+(?:\.[\w-]+)*)?)"""
)


def sparql_terms(text: str, path: Path, *, first_line: int = 1, prefixes: Mapping[str, str] | None = None) -> list[TermUse]:
    """IRIs written in SPARQL text (full IRIs and prefixed names), skipping strings and comments.

    Prefixes are the query's own ``PREFIX`` declarations, falling back to pcm's shared ones (the CLI adds those to
    queries that declare none). ``PREFIX`` declarations themselves are not uses.
    """
    declared = {m.group(1) or "": m.group(2) for m in _PREFIX_DECL.finditer(text)}
    known = {**PREFIXES, **(prefixes or {}), **declared}
    declaration_spans = [m.span() for m in _PREFIX_DECL.finditer(text)]
    uses: list[TermUse] = []
    for match in _SPARQL_TOKEN.finditer(text):
        if any(start <= match.start() < end for start, end in declaration_spans):
            continue
        line = first_line + text.count("\n", 0, match.start())
        if match.group("iri"):
            iri = match.group("iri")[1:-1]
            if ":" in iri:  # relative IRIs (resolved against BASE) are not vocabulary terms
                uses.append(TermUse(iri, path, line))
        elif match.group("pname") and match.group("local"):
            namespace = known.get(match.group("prefix") or "")
            if namespace is not None:
                uses.append(TermUse(namespace + match.group("local"), path, line))
    return uses


def query_terms(paths: Iterable[Path]) -> list[TermUse]:
    """Terms of every query file (``.rq`` and ``.ru``)."""
    uses: list[TermUse] = []
    for path in paths:
        uses += sparql_terms(path.read_text(encoding="utf-8"), path)
    return uses


def query_files(directory: Path) -> list[Path]:
    """Every SPARQL file under ``queries/``, competency questions included."""
    return sorted(p for p in directory.rglob("*") if p.suffix in (".rq", ".ru") and p.is_file())


def shapes_terms(paths: Iterable[Path]) -> list[TermUse]:
    """Every IRI of every shapes file, plus the terms of the SPARQL inside ``sh:select`` / ``sh:ask``."""
    uses: list[TermUse] = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        graph = rdflib.Graph()
        graph.parse(data=text, format="turtle", publicID=path.resolve().as_uri())
        locator = _Locator(text, dict(graph.namespaces()))
        for iri in sorted({str(n) for triple in graph for n in triple if isinstance(n, URIRef)}):
            uses.append(TermUse(iri, path, locator.line_of(iri)))
        for predicate in (SH.select, SH.ask, SH.construct, SH.update):
            for literal in graph.objects(None, predicate):
                query = str(literal)
                start = text.find(query.strip().splitlines()[0].strip()) if query.strip() else -1
                first = text.count("\n", 0, start) + 1 if start >= 0 else 0
                uses += sparql_terms(query, path, first_line=first)
    return uses


def fixture_terms(paths: Iterable[Path], header: str = "") -> list[TermUse]:
    """Every IRI of every TriG / Turtle data file (the competency fixtures), with the line that writes it.

    ``header`` holds the ``@prefix`` lines the files rely on without writing them (the competency runner's).
    Parsed with pyoxigraph: a :class:`SyntaxError` names what is wrong."""
    uses: list[TermUse] = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        fmt = pyoxigraph.RdfFormat.TRIG if path.suffix == ".trig" else pyoxigraph.RdfFormat.TURTLE
        quads = pyoxigraph.parse(header + text, format=fmt, base_iri=path.resolve().as_uri())
        iris = {n.value for q in quads for n in (q.subject, q.predicate, q.object) if isinstance(n, pyoxigraph.NamedNode)}
        namespaces = {m.group(1) or "": m.group(2) for m in _PREFIX_DECL.finditer(header + text)}
        locator = _Locator(text, namespaces)
        uses += [TermUse(iri, path, locator.line_of(iri)) for iri in sorted(iris)]
    return uses


#: A CURIE with one of pcm's shared prefixes, as written in Markdown prose or examples.
_MARKDOWN_CURIE = re.compile(
    r"(?<![\w/.:#-])(" + "|".join(re.escape(p) for p in PREFIXES) + r"):([A-Za-z_][\w-]*(?:\.[\w-]+)*)"
)
_MARKDOWN_IRI = re.compile(r"<(https?://[^<>\"{}|^`\\\s]+)>")


def markdown_terms(text: str, path: Path, *, skip: Iterable[tuple[int, int]] = ()) -> list[TermUse]:
    """CURIEs with a shared prefix and ``<http...>`` IRIs in a prompt; ``skip`` holds character ranges to ignore."""
    spans = list(skip)
    uses: list[TermUse] = []
    for pattern in (_MARKDOWN_CURIE, _MARKDOWN_IRI):
        for match in pattern.finditer(text):
            if any(start <= match.start() < end for start, end in spans):
                continue
            iri = PREFIXES[match.group(1)] + match.group(2) if pattern is _MARKDOWN_CURIE else match.group(1)
            uses.append(TermUse(iri, path, text.count("\n", 0, match.start()) + 1))
    return sorted(uses, key=lambda u: (u.line, u.iri))


_COMMENT = re.compile(r"(^|\s)#.*$")


class _Locator:
    """Finds the first line of a Turtle file that writes an IRI, either in full or as a prefixed name."""

    def __init__(self, text: str, namespaces: Mapping[str, object]) -> None:
        self._lines = text.splitlines()
        self._prefixes = sorted(((str(ns), p) for p, ns in namespaces.items() if p), key=lambda x: -len(x[0]))

    def line_of(self, iri: str) -> int:
        needles = [f"<{iri}>"]
        needles += [f"{p}:{iri[len(ns):]}" for ns, p in self._prefixes if iri.startswith(ns) and len(iri) > len(ns)]
        for number, line in enumerate(self._lines, 1):
            content = _COMMENT.sub("", line)
            for needle in needles:
                for found in _occurrences(content, needle):
                    end = found + len(needle)
                    if end == len(content) or not (content[end].isalnum() or content[end] in "_-"):
                        return number
        return 0


def _occurrences(text: str, needle: str) -> Iterator[int]:
    start = text.find(needle)
    while start >= 0:
        yield start
        start = text.find(needle, start + 1)

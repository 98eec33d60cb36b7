"""Restoring a pcm dump (N-Quads or TriG) at the speed of the engine's bulk loader, with bounded memory.

A large dump is never staged whole in memory. Its checks (syntax, input limits, graph names, the dump's namespace,
the vocabulary) read the file as a stream and keep only the distinct terms they meet:

- a dump that needs no rewriting (N-Quads of this memory's own layout and namespace) is bulk loaded byte for byte
  while a worker thread on idle CPU (:mod:`pcm.idle_share`) reads the same file for the checks, in chunks of whole
  lines; the loader releases the GIL and leaves gaps on both cores that the checks fill, and the chunks the worker
  has not done when the load is over the importing thread does itself;
- a dump that does (another memory's graph names or namespace, its ontology graph, ``http://schema.org/`` IRIs, TriG)
  is checked, then rewritten quad by quad into a spool file, checked again as rewritten, and the spool bulk loaded.

The bulk loader is not transactional, so a checkpoint of the store (hard links: cheap) is taken before it runs; a
file the checks or the loader refuse puts the store back as the checkpoint holds it, and nothing of the file remains.
A reader of the memory during the import may see the file's quads arrive before they are checked, and vanish again
when the file is refused; writes that others make to the memory during the import would be undone with it (an
embedded store has one writer, the importing process).
"""

from __future__ import annotations

import mmap
import shutil
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import pyoxigraph as ox

from pcm.backend import Backend, term_value
from pcm.errors import InputError, ValidationError
from pcm.idle_share import IdleShare
from pcm.layout import DatasetLayout, layout_of_graph
from pcm.namespaces import RDF, SCHEMA_HTTP
from pcm.rdfio import normalise_quad, rdf_format, syntax_error, worded
from pcm.rdflimits import RdfLimits, check_size, literal_too_long, too_many_triples

if TYPE_CHECKING:  # the ontology module imports rdflib, which commands without a model never load
    from pcm.ontology import Ontology

#: Files of at least this many bytes (about 100k quads of a dump) take the streaming bulk path; smaller ones are
#: staged in memory and written in one transaction.
BULK_BYTES = 16 << 20
#: The checks of a dump loaded as it is read it in chunks of about this many bytes (about 100k quads), so that
#: the importing thread can take over the ones a worker on idle CPU has not done when the load is over.
CHECK_CHUNK_BYTES = 16 << 20
#: Quads read from the head of a file to tell a pcm dump (one of its graphs named by a pcm layout) and whether it
#: can be loaded as it is.
HEAD_QUADS = 10_000
#: The directory of the checkpoint that undoes a refused bulk load, and the rewritten dump's spool, in the memory.
UNDO_DIR = ".import-undo"
SPOOL = ".restore.nq"

RDF_TYPE = RDF + "type"
MEMORY_OWNER = "https://w3id.org/pcm/ontology#MemoryOwner"
#: The history graph records superseded statements by RDF reification (docs/DESIGN.md §3), so a dump carries these.
_REIFICATION = frozenset(RDF + t for t in ("Statement", "subject", "predicate", "object"))
_TYPE = ox.NamedNode(RDF_TYPE)
_OWNER = ox.NamedNode(MEMORY_OWNER)
_T = TypeVar("_T")


@dataclass
class Restored:
    """What a restore wrote: the quads read from the file (after rewriting) and the named graphs they are in."""

    quads: int
    graphs: list[str]


@dataclass
class Survey:
    """The distinct terms of a stream of quads that the checks of a restore need, and the input limits on the way.

    One pass over the quads, keeping sets of distinct predicates, classes and graph names only."""

    layout: DatasetLayout
    limits: RdfLimits
    name: str
    quads: int = 0
    predicates: set[ox.NamedNode] = field(default_factory=set)
    classes: set[ox.NamedNode] = field(default_factory=set)
    graphs: set[str] = field(default_factory=set)
    layouts: set[DatasetLayout] = field(default_factory=set)
    """The pcm layouts that name the dump's graphs (this memory's among them when it names some)."""
    owners: list[str] = field(default_factory=list)
    default_graph: bool = False
    ontology_graph: bool = False
    schema_http: bool = False
    """The bytes hold an ``http://schema.org/`` IRI, which this memory's names rewrite to ``https``."""
    _last: ox.NamedNode | ox.BlankNode | ox.DefaultGraph | None = None

    def see(self, quads: Iterable[ox.Quad], stop: threading.Event | None = None) -> Iterator[ox.Quad]:
        """Each quad of ``quads``, passed on once it is counted (a limit passed raises :class:`InputTooLarge`)."""
        limit, longest = self.limits.max_triples, self.limits.max_literal_chars
        predicates, classes = self.predicates, self.classes
        for q in quads:
            self.quads += 1
            if self.quads > limit:
                raise too_many_triples(self.name, limit)
            if stop is not None and not self.quads & 0xFFFF and stop.is_set():
                return
            p, o = q.predicate, q.object
            predicates.add(p)
            if isinstance(o, ox.Literal):
                if len(o.value) > longest:
                    raise literal_too_long(self.name, len(o.value), longest)
            elif p == _TYPE and isinstance(o, ox.NamedNode):
                classes.add(o)
                if o == _OWNER and isinstance(q.subject, ox.NamedNode):
                    self.owners.append(q.subject.value)
            elif isinstance(o, ox.Triple):
                self._nested(o)
            g = q.graph_name
            if g != self._last:
                self._last = g
                self._graph(g)
            yield q

    def _nested(self, term: ox.Triple) -> None:
        """An RDF 1.2 triple term holds its own object, which the literal limit covers too."""
        inner: object = term
        while isinstance(inner, ox.Triple):
            inner = inner.object
        if isinstance(inner, ox.Literal) and len(inner.value) > self.limits.max_literal_chars:
            raise literal_too_long(self.name, len(inner.value), self.limits.max_literal_chars)

    def _graph(self, g: ox.NamedNode | ox.BlankNode | ox.DefaultGraph) -> None:
        if isinstance(g, ox.DefaultGraph):
            self.default_graph = True
            return
        if not isinstance(g, ox.NamedNode):
            return
        value = g.value
        if value in self.graphs:
            return
        self.graphs.add(value)
        layout = self.layout if self.layout.owns(value) else layout_of_graph(value)
        if layout is not None:
            self.layouts.add(layout)
            if value == layout.ontology:
                self.ontology_graph = True

    @classmethod
    def merged(cls, layout: DatasetLayout, limits: RdfLimits, name: str, parts: Iterable[Survey]) -> Survey:
        """One survey of a file from those of its chunks, in the file's order (the first owner stays first)."""
        whole = cls(layout, limits, name)
        for part in parts:
            whole.quads += part.quads
            whole.predicates |= part.predicates
            whole.classes |= part.classes
            whole.graphs |= part.graphs
            whole.layouts |= part.layouts
            whole.owners += part.owners
            whole.default_graph |= part.default_graph
            whole.ontology_graph |= part.ontology_graph
            whole.schema_http |= part.schema_http
        if whole.quads > limits.max_triples:
            raise too_many_triples(name, limits.max_triples)
        return whole

    @property
    def namespace(self) -> str | None:
        """The namespace of the memory that wrote the dump: its owner's IRI less ``owner``."""
        return next((o.removesuffix("owner") for o in self.owners if o.endswith("owner")), None)

    def needs_rewriting(self, namespace: str) -> bool:
        """The dump names graphs or individuals as another memory does, or carries an ontology graph (this memory's
        own stays authoritative), so it cannot be loaded as it is."""
        return bool(self.layouts - {self.layout}) or self.ontology_graph or self.namespace not in (None, namespace)

    def problems(self, ontology: Ontology) -> list[str]:
        """Predicates and classes the ontology does not define (the terms :class:`pcm.shapes.Validator` allows)."""
        from pcm.shapes import BUILTIN_TERMS

        return vocabulary_problems([p.value for p in self.predicates], [c.value for c in self.classes], ontology,
                                   BUILTIN_TERMS)


def line_chunks(path: Path, size: int) -> list[tuple[int, int]]:
    """The file's byte spans of about ``size`` bytes each, every one ending after a newline (or at the end)."""
    total = path.stat().st_size
    if total == 0:
        return []
    spans: list[tuple[int, int]] = []
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        start = 0
        while start < total:
            newline = data.find(b"\n", min(start + size, total) - 1)
            end = total if newline < 0 else newline + 1
            spans.append((start, end))
            start = end
    return spans


def vocabulary_problems(
    predicates: Iterable[str], classes: Iterable[str], ontology: Ontology, builtin: frozenset[str]
) -> list[str]:
    allowed = builtin | _REIFICATION
    problems = [f"unknown property {p}" for p in sorted(predicates) if p not in allowed and not ontology.defines(p)]
    problems += [f"unknown class {c}" for c in sorted(classes) if c not in allowed and not ontology.defines(c)]
    return problems


def refuse_problems(name: str, problems: list[str]) -> None:
    if problems:
        raise ValidationError(
            f"{name}: {len(problems)} problem(s), nothing imported; first: {problems[0]}", "\n".join(problems[:20])
        )


def refuse_default_graph(name: str) -> None:
    raise InputError(f"{name}: a pcm dump has no default-graph triples; import plain triples as Turtle")


@dataclass
class BulkRestore:
    """Restores one large dump into ``backend`` for the memory of ``layout`` and ``namespace``."""

    backend: Backend
    layout: DatasetLayout
    namespace: str
    ontology: Ontology
    directory: Path
    """The memory's directory: the checkpoint and the spool go there (the store's file system, for hard links)."""
    limits: RdfLimits
    mark_pending: Callable[[], None]
    """Marks the side index as behind, so a crash between the load and its sync replays at the next open."""

    def applies(self, path: Path, fmt: str) -> bool:
        """A large N-Quads or TriG file, into a store whose files pcm holds (a checkpoint can undo its bulk load)."""
        caps = self.backend.capabilities
        return (
            fmt in ("nquads", "trig") and caps.bulk_load == "native" and caps.files is not None
            and path.stat().st_size >= BULK_BYTES
        )

    def restore(self, path: Path, fmt: str, *, base_iri: str | None) -> Restored | None:
        """Restore the dump at ``path``; None when its head shows no pcm graph (it is not a dump: the caller
        imports it as triples, or refuses it, as it does smaller files)."""
        check_size(path.stat().st_size, self.limits, path.name)
        head = Survey(self.layout, self.limits, path.name)
        for _ in head.see(islice(self._parse(path, fmt, base_iri), HEAD_QUADS)):
            pass
        if not head.layouts:
            return None
        if fmt == "nquads" and not head.needs_rewriting(self.namespace):
            loaded = self._load_checked(path)
            if loaded is not None:
                return loaded
        return self._rewrite_and_load(path, fmt, base_iri)

    def _parse(self, path: Path, fmt: str, base_iri: str | None, *, lenient: bool = False) -> Iterator[ox.Quad]:
        """The file's quads as a stream; a syntax error is one :class:`InputError` line naming the file.
        ``lenient`` skips the parser's validation of IRIs and language tags (half the parse's CPU), for a reading
        beside a strict one."""
        with worded(fmt, path.name):
            yield from ox.parse(path=str(path), format=rdf_format(fmt), base_iri=base_iri, lenient=lenient)

    def _load_checked(self, path: Path) -> Restored | None:
        """Bulk load the file as it is while a worker on idle CPU checks it in line-aligned chunks (the rest once the
        load is done); None (and the load undone) when the checks find that it needs rewriting after all."""
        checks = IdleShare([partial(self._check_chunk, path, span) for span in line_chunks(path, CHECK_CHUNK_BYTES)],
                           name="pcm-import-check")
        with self._undoable() as undo:
            checks.start()
            try:
                self.backend.bulk_load(str(path), ox.RdfFormat.N_QUADS)
            except SyntaxError as exc:  # the loader reads strictly: a term the lenient checks let by, or bad syntax
                checks.cancel()
                undo()
                raise syntax_error("nquads", path.name, exc) from exc
            except BaseException:
                checks.cancel()
                undo()
                raise
            try:
                survey = Survey.merged(self.layout, self.limits, path.name, checks.finish())
                if survey.default_graph:
                    refuse_default_graph(path.name)
                if survey.schema_http or survey.needs_rewriting(self.namespace):
                    undo()
                    return None
                refuse_problems(path.name, survey.problems(self.ontology))
            except BaseException:
                undo()
                raise
        return Restored(survey.quads, sorted(survey.graphs))

    def _check_chunk(self, path: Path, span: tuple[int, int], stop: threading.Event) -> Survey:
        """The survey of the file's bytes in ``span`` (whole lines), read leniently: the loader beside the checks
        validates every term and refuses what they let by."""
        start, end = span
        with path.open("rb") as f:
            f.seek(start)
            data = f.read(end - start)
        survey = Survey(self.layout, self.limits, path.name)
        survey.schema_http = SCHEMA_HTTP.encode() in data  # a line never holds a newline, so neither does the IRI
        with worded("nquads", path.name):
            for _ in survey.see(ox.parse(data, format=ox.RdfFormat.N_QUADS, lenient=True), stop):
                pass
        return survey

    def _rewrite_and_load(self, path: Path, fmt: str, base_iri: str | None) -> Restored:
        """Read the dump twice as a stream: once for its graph layouts and namespace, once to rewrite it into this
        memory's names in a spool file (checked as rewritten); then bulk load the spool."""
        first = Survey(self.layout, self.limits, path.name)
        for _ in first.see(self._parse(path, fmt, base_iri, lenient=True)):  # the rewriting reads it strictly
            pass
        if first.default_graph:
            refuse_default_graph(path.name)
        sources: set[DatasetLayout | None] = set(first.layouts)
        ontologies = {layout.ontology for layout in first.layouts}
        source_ns = first.namespace
        rename = (source_ns, self.namespace) if source_ns is not None and source_ns != self.namespace else None
        target = self.layout
        other_layouts = bool(first.layouts - {target})

        def rewritten() -> Iterator[ox.Quad]:
            for q in self._parse(path, fmt, base_iri):
                g = q.graph_name
                if isinstance(g, ox.NamedNode) and g.value in ontologies:
                    continue  # this pcm's own ontology graph stays authoritative
                if other_layouts:
                    q = rehome_graphs(q, sources, target)
                if rename is not None:
                    q = rehome(q, rename)
                yield normalise_quad(q)

        second = Survey(self.layout, self.limits, path.name)
        spool = self.directory / SPOOL
        try:
            ox.serialize(second.see(rewritten()), output=str(spool), format=ox.RdfFormat.N_QUADS)
            refuse_problems(path.name, second.problems(self.ontology))
            with self._undoable() as undo:
                try:
                    self.backend.bulk_load(str(spool), ox.RdfFormat.N_QUADS)
                except BaseException:
                    undo()
                    raise
        finally:
            spool.unlink(missing_ok=True)
        return Restored(second.quads, sorted(second.graphs))

    def _undoable(self) -> _Checkpoint:
        return _Checkpoint(self.backend, self.directory / UNDO_DIR, self.mark_pending)


class _Checkpoint:
    """A checkpoint of the store for the length of a ``with``; calling the context's value puts it back."""

    def __init__(self, backend: Backend, path: Path, mark_pending: Callable[[], None]) -> None:
        self.backend, self.path, self.mark_pending = backend, path, mark_pending

    def __enter__(self) -> Callable[[], None]:
        shutil.rmtree(self.path, ignore_errors=True)  # left by a crash during an earlier import
        self.backend.checkpoint(self.path)
        self.mark_pending()
        return self.undo

    def undo(self) -> None:
        self.backend.replace_with(self.path)

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def dump_namespace(staging: ox.Store) -> str | None:
    """The namespace of the memory that wrote a staged dump: its owner's IRI less ``owner``."""
    for q in staging.quads_for_pattern(None, _TYPE, _OWNER, None):
        if isinstance(q.subject, ox.NamedNode) and q.subject.value.endswith("owner"):
            return q.subject.value[: -len("owner")]
    return None


def check_vocabulary_store(staging: ox.Store, ontology: Ontology) -> list[str]:
    """The vocabulary check over a staging store, with the distinct terms found by the engine."""
    from pcm.shapes import BUILTIN_TERMS

    found_p = staging.query("SELECT DISTINCT ?p WHERE { GRAPH ?g { ?s ?p ?o } }")
    found_c = staging.query(f"SELECT DISTINCT ?c WHERE {{ GRAPH ?g {{ ?s <{RDF_TYPE}> ?c }} FILTER(isIRI(?c)) }}")
    assert isinstance(found_p, ox.QuerySolutions) and isinstance(found_c, ox.QuerySolutions)
    predicates = [term_value(r[0]) for r in found_p if r[0] is not None]
    classes = [term_value(r[0]) for r in found_c if r[0] is not None]
    return vocabulary_problems(predicates, classes, ontology, BUILTIN_TERMS)


def rehome_term(term: _T, rename: tuple[str, str]) -> _T | ox.NamedNode:
    old, new = rename
    if isinstance(term, ox.NamedNode) and term.value.startswith(old):
        return ox.NamedNode(new + term.value[len(old) :])
    return term


def rehome_graphs(q: ox.Quad, sources: set[DatasetLayout | None], target: DatasetLayout) -> ox.Quad:
    """A dump's quad with the graph names of its memory (as graphs and as the subjects and objects of provenance)
    renamed to ``target``'s."""

    def term(t: _T) -> _T | ox.NamedNode:
        if isinstance(t, ox.NamedNode):
            for source in sources:
                if source is not None and source.owns(t.value):
                    return ox.NamedNode(target.rehome(t.value, source))
        return t

    return ox.Quad(term(q.subject), q.predicate, term(q.object), term(q.graph_name))


def rehome(q: ox.Quad, rename: tuple[str, str]) -> ox.Quad:
    return ox.Quad(
        rehome_term(q.subject, rename),
        rehome_term(q.predicate, rename),
        rehome_term(q.object, rename),
        q.graph_name,
    )


__all__ = [
    "BULK_BYTES", "BulkRestore", "Restored", "Survey", "check_vocabulary_store", "dump_namespace",
    "refuse_default_graph", "refuse_problems", "rehome", "rehome_graphs", "rehome_term", "vocabulary_problems",
]

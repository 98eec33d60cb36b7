"""The small storage interface under the dataset layout (docs/DESIGN.md §8).

Two implementations: :class:`pcm.backend_local.LocalBackend` (embedded pyoxigraph on disk) and
:class:`pcm.backend_remote.RemoteBackend` (any SPARQL 1.1 Protocol + Graph Store Protocol server). Everything above
this line speaks SPARQL text and pyoxigraph terms, so the two are interchangeable.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Protocol, cast

import pyoxigraph as ox

from pcm.errors import QueryTimeout
from pcm.layout import DatasetLayout

Term = ox.NamedNode | ox.BlankNode | ox.Literal | ox.Triple


def term_value(term: Term) -> str:
    """The text of a term pcm's own queries and writes produce: an IRI, a blank node's id, a literal's form.

    A solution value may be an RDF 1.2 triple term (a user's query can bind one, and the endpoint returns it),
    so :data:`Term` includes :class:`pyoxigraph.Triple`, which has no ``value``; pcm's own queries never bind
    one, so one here is a bug in the query and fails as such.
    """
    if isinstance(term, ox.Triple):
        raise TypeError(f"a triple term where a node or literal was expected: {term}")
    return term.value


def value_or_none(term: Term | None) -> str | None:
    """:func:`term_value` of a solution value that may be unbound (an ``OPTIONAL`` variable): None when it is."""
    return None if term is None else term_value(term)


def datetime_or_none(term: Term | None) -> datetime | None:
    """A date-time solution value (``dcterms:created``) as a datetime; None when unbound or not ISO 8601."""
    text = value_or_none(term)
    if not text:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def checked_triple(subject: object, predicate: object, object_: object) -> ox.Triple:
    """``ox.Triple(subject, predicate, object_)`` for terms whose position the checker cannot see: a query's
    ``?s ?p ?o``, or a term rewritten by code that keeps its kind. A term out of place is the same TypeError
    pyoxigraph raises."""
    if not (isinstance(subject, ox.NamedNode | ox.BlankNode | ox.Triple) and isinstance(predicate, ox.NamedNode)
            and isinstance(object_, ox.NamedNode | ox.BlankNode | ox.Literal | ox.Triple)):
        raise TypeError(f"not the terms of a triple: {subject!r} {predicate!r} {object_!r}")
    return ox.Triple(subject, predicate, object_)


@dataclass
class Solutions:
    """A materialised SELECT result: variables in order, one tuple per row (``None`` for unbound)."""

    variables: tuple[str, ...]
    rows: list[tuple[Term | None, ...]] = field(default_factory=list)

    def dicts(self) -> list[dict[str, Term]]:
        return [{v: t for v, t in zip(self.variables, row, strict=True) if t is not None} for row in self.rows]

    def values(self, variable: str) -> list[Term | None]:
        i = self.variables.index(variable)
        return [row[i] for row in self.rows]

    def __len__(self) -> int:
        return len(self.rows)


#: What a query returns: SELECT → Solutions, ASK → bool, CONSTRUCT/DESCRIBE → list of triples.
QueryResult = Solutions | bool | list[ox.Triple]


class QueryIsolation(enum.Enum):
    """How a query that runs past its time limit is stopped (it may block inside one step of the engine)."""

    #: In a worker process reading the store's files, killed at the limit (:mod:`pcm.query_safety`).
    WORKER = "worker"
    #: The engine is a process pcm owns; its watchdog restarts it when an abandoned query keeps it busy.
    ENGINE = "engine"
    #: The server's own timeout: pcm stops waiting and drops the connection, only the server bounds its work.
    SERVER = "server"
    #: In process, with the deadline checked between rows (an in-memory store: nothing to isolate it from).
    IN_PROCESS = "in-process"


class PurgeScope(enum.Enum):
    """What ``pcm purge`` can guarantee about forgotten data on this store."""

    #: The store's files are rewritten: forgotten text leaves the disk.
    FILES = "files"
    #: The memory's data is deleted through the protocol; the engine's own files (and whether it keeps deleted
    #: values in them) are the engine's, beyond pcm's reach.
    GRAPHS = "graphs"
    #: The files are held by a running server: stop it first.
    HELD = "held"


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do, so callers choose by capability instead of probing concrete types."""

    #: The store's directory on this machine when pcm owns its files (checkpoints, compaction, a query worker).
    files: Path | None
    isolation: QueryIsolation
    purge: PurgeScope
    #: How :meth:`Backend.bulk_load` loads: ``native`` (the engine's loader), ``graph-store`` (one Graph Store
    #: POST), ``batched`` (``INSERT DATA`` requests of :attr:`batch` quads).
    bulk_load: str
    #: One update request applies whole or not at all (False: a failure may leave part of it applied).
    transactions: bool
    #: Most quads one :meth:`Backend.extend` applies as one write (None: any number).
    batch: int | None = None

    def as_json(self) -> dict[str, object]:
        return {
            "files": str(self.files) if self.files else None, "query_isolation": self.isolation.value,
            "purge": self.purge.value, "bulk_load": self.bulk_load, "transactions": self.transactions,
            "batch": self.batch,
        }


class Backend(Protocol):
    """Where quads live. Every write method is atomic where :attr:`capabilities` says so (see
    :class:`Capabilities`): the embedded store always, a server within its transactions and batch size.

    ``layout`` names the memory's graphs: ``query`` and ``update`` fill the graph placeholders of the text with it
    (:meth:`pcm.layout.DatasetLayout.render`), and a store other memories may share scopes every query to them.
    """

    layout: DatasetLayout | None

    @property
    def capabilities(self) -> Capabilities: ...

    def fingerprint(self) -> str:
        """A short text that changes whenever the store's files are written ("" when pcm cannot see its files:
        then callers re-read what they cache)."""
        ...

    def query(self, sparql: str, *, timeout: float | None = None, limit: int | None = None) -> QueryResult:
        """Run a read query over the union of all graphs (the default graph is the union)."""
        ...

    def update(self, sparql: str) -> None:
        """Run a SPARQL Update atomically (used for deletes and mixed delete/insert writes)."""
        ...

    def extend(self, quads: Sequence[ox.Quad]) -> None:
        """Insert quads atomically."""
        ...

    def bulk_load(self, path: str, fmt: ox.RdfFormat, *, graph: str | None = None) -> None:
        """Load a large file fast; not atomic (used by import of big dumps only after validation)."""
        ...

    def quads(self, graph: str | None = None) -> Iterator[ox.Quad]:
        """Every quad (of one graph when given)."""
        ...

    def named_graphs(self) -> list[str]: ...

    def dump(self, fmt: ox.RdfFormat, *, graph: str | None = None) -> bytes: ...

    def compact(self) -> int:
        """Rewrite the store's files so deleted data leaves the disk; returns the quads kept (only where
        ``capabilities.purge`` is FILES)."""
        ...

    def checkpoint(self, destination: Path) -> None:
        """A consistent copy of the store's files at ``destination`` (only where ``capabilities.files`` is set)."""
        ...

    def replace_with(self, source: Path) -> int:
        """Make the store a copy of the store directory ``source`` (only where ``capabilities.files`` is set)."""
        ...

    def close(self) -> None: ...


def materialise(result: object, *, deadline: float | None, limit: int | None) -> QueryResult:
    """Turn a pyoxigraph result into our types, checking the deadline between rows.

    pyoxigraph evaluates lazily, so a runaway query that streams rows is stopped here; one that blocks inside
    a single step (a huge ORDER BY) is bounded only by the server engine's timeout (see ``pcm serve``).
    """
    if isinstance(result, ox.QueryBoolean):
        return bool(result)
    if isinstance(result, ox.QuerySolutions):
        variables = tuple(v.value for v in result.variables)
        rows: list[tuple[Term | None, ...]] = []
        for i, solution in enumerate(result):
            if deadline is not None and (i & 63) == 0 and time.monotonic() > deadline:
                raise QueryTimeout("query stopped: it ran past the time limit")
            if limit is not None and len(rows) >= limit:
                break
            rows.append(tuple(solution))  # positional, in ``variables`` order, None when unbound: no name lookups
        return Solutions(variables, rows)
    triples: list[ox.Triple] = []
    # CONSTRUCT/DESCRIBE: the engine's QueryTriples or a server's parsed triples (the form decides, not a type)
    for i, triple in enumerate(cast("Iterable[ox.Triple]", result)):
        if deadline is not None and (i & 63) == 0 and time.monotonic() > deadline:
            raise QueryTimeout("query stopped: it ran past the time limit")
        if limit is not None and len(triples) >= limit:
            break
        triples.append(triple)
    return triples


def quads_to_insert_data(quads: Iterable[ox.Quad]) -> str:
    """``INSERT DATA`` text for quads, grouped by graph (for backends that only take SPARQL Update)."""
    return _quads_data("INSERT DATA", quads)


def quads_to_delete_data(quads: Iterable[ox.Quad]) -> str:
    """``DELETE DATA`` text for quads (no blank nodes: DELETE DATA cannot name them)."""
    return _quads_data("DELETE DATA", quads)


def _quads_data(operation: str, quads: Iterable[ox.Quad]) -> str:
    by_graph: dict[str, list[str]] = {}
    for q in quads:
        g = "" if isinstance(q.graph_name, ox.DefaultGraph) else str(q.graph_name)
        by_graph.setdefault(g, []).append(f"{q.subject} {q.predicate} {q.object} .")
    parts = []
    for g, lines in by_graph.items():
        body = "\n".join(lines)
        parts.append(f"GRAPH {g} {{\n{body}\n}}" if g else body)
    return operation + " {\n" + "\n".join(parts) + "\n}"

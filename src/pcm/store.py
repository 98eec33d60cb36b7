"""The dataset layout of docs/DESIGN.md §3 over a :class:`~pcm.backend.Backend`.

This is the only module that knows which graph holds what. Writes for one utterance are one backend call, so a
crash leaves either all of it or none of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

import pyoxigraph as ox

from pcm.backend import Backend, Solutions, Term, datetime_or_none, term_value, value_or_none
from pcm.conversations import PostRecord
from pcm.layout import CONVERSATION, ONTOLOGY, PROVENANCE, DatasetLayout
from pcm.namespaces import PCM, RDF, RDFS, SIOC
from pcm.naming import Naming
from pcm.provenance import dt_literal
from pcm.resources import render_query
from pcm.sparql import iri_term, literal_term, values_clause

if TYPE_CHECKING:
    from pcm.models import Source

#: A stored utterance as the side index and the CLI see it (one type for both: the index is derived from the store).
PostInfo = PostRecord


@dataclass
class Stats:
    posts: int = 0
    sessions: int = 0
    status: dict[str, int] = field(default_factory=dict)
    entities_by_class: list[tuple[str, int]] = field(default_factory=list)
    graphs: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def triples(self) -> int:
        return sum(g["triples"] for g in self.graphs.values())

    def as_json(self) -> dict[str, object]:
        return {
            "posts": self.posts,
            "sessions": self.sessions,
            "extraction_status": self.status,
            "entities": sum(n for _, n in self.entities_by_class),
            "entities_by_class": dict(self.entities_by_class),
            "triples": self.triples,
            "graphs": self.graphs,
        }


def index_marker(layout: DatasetLayout) -> ox.Quad:
    """The index outbox marker in the memory's provenance graph (see below)."""
    return ox.Quad(
        ox.NamedNode("urn:pcm:side-index"),
        ox.NamedNode(RDFS + "comment"),
        ox.Literal("the side index may lag the store: it is reconciled on the next writable open"),
        ox.NamedNode(layout.provenance),
    )


"""The store's half of the index outbox (docs/DESIGN.md §5): inserted by every write that changes what the side index
mirrors (posts, extraction and import graphs), in that same atomic write, and removed once the index has caught
up. Inserting it again is a no-op, so a write pays one quad; ``rdfs:comment`` keeps dumps importable."""


def summaries_marker(layout: DatasetLayout) -> ox.Quad:
    """The summaries marker in the memory's provenance graph (see below)."""
    return ox.Quad(
        ox.NamedNode("urn:pcm:summaries"),
        ox.NamedNode(RDFS + "comment"),
        ox.Literal("a session summary may lag its posts: summaries are brought up to date on the next writable open"),
        ox.NamedNode(layout.provenance),
    )


"""Set in the same atomic write as a post (or a forget that drops summaries) and removed once the summaries of
the sessions touched are written: a crash in between leaves it, and the next writable open rebuilds the summaries
that are behind (:meth:`pcm.memory.Memory.open`). Summaries are derived data, so no marker means nothing to do."""


def _post_info(row: dict[str, Term]) -> PostInfo:
    """A post as the index and the faces see it, from a row of ``index_posts`` or ``messages_page``."""
    return PostInfo(
        iri=row["post"].value,
        session=row["session"].value,
        role=row["role"].value,
        speaker=value_or_none(row.get("speaker")),
        time=datetime_or_none(row.get("time")),
        text=row["text"].value,
        source_id=value_or_none(row.get("source_id")),
        position=int(row["position"].value),
    )


def window_filter(thread: str | None, since: datetime | None, until: datetime | None) -> str:
    """The clauses that keep the rows of one thread (any when None) said in [since, until), for a query that binds
    ``?thread`` and ``?time`` (the message and fact pages)."""
    parts = [values_clause("thread", [thread])] if thread is not None else []
    if since is not None:
        parts.append(f"FILTER(?time >= {dt_literal(since)})")
    if until is not None:
        parts.append(f"FILTER(?time < {dt_literal(until)})")
    return "\n  ".join(parts)


def page_clause(limit: int, offset: int) -> str:
    return f"LIMIT {int(limit)} OFFSET {int(offset)}"


def _count(term: Term | None) -> int:
    """A COUNT's value (0 when the engine left it unbound)."""
    return int(value_or_none(term) or 0)


class MemoryStore:
    def __init__(self, backend: Backend, naming: Naming) -> None:
        self.backend = backend
        self.naming = naming
        self.layout = naming.layout
        backend.layout = naming.layout  # pcm's SPARQL is rendered, and on a server scoped, for this memory's graphs
        self.index_marker = index_marker(naming.layout)
        """The index outbox marker quad (docs/DESIGN.md §5)."""
        self.summaries_marker = summaries_marker(naming.layout)
        """The summaries marker quad."""
        self.index_writes = 0
        """Writes in this process that set :data:`INDEX_PENDING`: lets the index tell whether one raced its own."""
        self.index_dirty = False
        """Set by :meth:`mark_index_pending`: the index is known to lack something that no later incremental index
        write will bring, so only a full reconcile (which calls :meth:`clear_index_pending`) may clear the marker."""

    # -- reading -------------------------------------------------------------------------------------------------

    def select(self, sparql: str, *, timeout: float | None = None, limit: int | None = None) -> Solutions:
        result = self.backend.query(sparql, timeout=timeout, limit=limit)
        assert isinstance(result, Solutions), "expected a SELECT query"
        return result

    def existing_posts(self, iris: Sequence[str]) -> set[str]:
        """Which of these post IRIs are already stored (re-imports add nothing)."""
        found: set[str] = set()
        for start in range(0, len(iris), 500):
            chunk = list(iris[start : start + 500])
            q = (
                f"SELECT ?p WHERE {{ {values_clause('p', chunk)} "
                f"GRAPH {CONVERSATION} {{ ?p a <{SIOC}Post> }} }}"
            )
            found.update(term_value(t) for t in self.select(q).values("p") if t is not None)
        return found

    def last_post_of_session(self, session_iri: str) -> tuple[str, int] | None:
        rows = self.select(render_query("session_posts", session=iri_term(session_iri))).rows
        if not rows:
            return None
        post, position = rows[-1]
        return value_or_none(post) or "", int(value_or_none(position) or 0)

    def session_posts(self, session_iri: str) -> list[str]:
        rows = self.select(render_query("session_posts", session=iri_term(session_iri))).rows
        return [value_or_none(r[0]) or "" for r in rows]

    def find_session(self, session_id: str) -> str | None:
        """The thread IRI for a session id as the user typed it (or the thread IRI itself)."""
        q = (
            f"SELECT ?t WHERE {{ GRAPH {CONVERSATION} {{ "
            f"?t a <{SIOC}Thread> ; <http://purl.org/dc/terms/identifier> {literal_term(session_id)} }} }}"
        )
        rows = self.select(q).rows
        if rows:
            return value_or_none(rows[0][0])
        if session_id.startswith(self.naming.namespace) and self.select(
            f"SELECT ?t WHERE {{ GRAPH {CONVERSATION} {{ ?t a <{SIOC}Thread> }} "
            f"VALUES ?t {{ {iri_term(session_id)} }} }}"
        ).rows:
            return session_id
        return None

    def find_post(self, post_id: str) -> list[str]:
        """Post IRIs for a post IRI or a source message id (which may repeat across sessions)."""
        if post_id.startswith(self.naming.namespace):
            return sorted(self.existing_posts([post_id]))
        q = (
            f"SELECT ?p WHERE {{ GRAPH {CONVERSATION} {{ "
            f"?p a <{SIOC}Post> ; <http://purl.org/dc/terms/identifier> {literal_term(post_id)} }} }} ORDER BY ?p"
        )
        return [value_or_none(t) or "" for t in self.select(q).values("p")]

    def posts(self, iris: Iterable[str] | None = None) -> Iterator[PostInfo]:
        chosen = list(iris) if iris is not None else None
        if chosen is not None and not chosen:
            return
        filt = values_clause("post", chosen) if chosen is not None else ""
        for row in self.select(render_query("index_posts", filter=filt)).dicts():
            yield _post_info(row)

    def page_posts(
        self, *, thread: str | None, since: datetime | None, until: datetime | None, limit: int, offset: int
    ) -> tuple[list[PostInfo], int]:
        """One page of posts, oldest first, of one thread (any when None) said in [since, until); and how many
        posts those filters keep over all pages. A post without a time is kept only when no time bound is given."""
        filt = window_filter(thread, since, until)
        total = _count(self.select(render_query("messages_count", filter=filt)).rows[0][0])
        rows = self.select(render_query("messages_page", filter=filt, page=page_clause(limit, offset))).dicts()
        return [_post_info(row) for row in rows], total

    def subjects_in_graphs(self, graphs: Sequence[str]) -> set[str]:
        """The IRIs the ``graphs`` describe (subjects of their triples)."""
        found: set[str] = set()
        for start in range(0, len(graphs), 500):
            q = render_query("graph_subjects", graphs=values_clause("g", list(graphs[start : start + 500])))
            found.update(row[0].value for row in self.select(q).rows if isinstance(row[0], ox.NamedNode))
        return found

    def entities(self, iris: Iterable[str] | None = None) -> Iterator[tuple[str, str, tuple[str, ...], tuple[str, ...]]]:
        """(iri, label, types, alternative labels) for labelled individuals of this memory."""
        chosen = list(iris) if iris is not None else None
        if chosen is not None and not chosen:
            return
        filt = values_clause("e", chosen) if chosen is not None else ""
        q = render_query("index_entities", namespace=literal_term(self.naming.namespace), filter=filt)
        for row in self.select(q).dicts():
            types = tuple(sorted(row["types"].value.split())) if "types" in row else ()
            alts = tuple(a for a in row["alts"].value.split("\x1f") if a) if "alts" in row else ()
            yield row["e"].value, row["label"].value, types, alts

    def stats(self) -> Stats:
        """Counts by kind. A row without its group key is skipped: some engines (rdflib's) answer a grouped count
        over nothing with one row whose key is unbound, rather than with no row."""
        stats = Stats()
        for row in self.select(render_query("stats_posts")).dicts():
            if "kind" not in row:
                continue
            kind, n = row["kind"].value, _count(row.get("n"))
            if kind == "posts":
                stats.posts = n
            elif kind == "sessions":
                stats.sessions = n
            else:
                stats.status[kind.removeprefix("status:")] = n
        stats.entities_by_class = [
            (row["class"].value, _count(row.get("n")))
            for row in self.select(render_query("stats_entities")).dicts() if "class" in row
        ]
        for row in self.select(render_query("stats_graphs")).dicts():
            if "kind" in row:
                stats.graphs[row["kind"].value] = {"graphs": _count(row.get("graphs")), "triples": _count(row.get("triples"))}
        return stats

    def why(self, iri: str) -> list[Source]:
        """Each stored message (or imported file) a fact or entity came from (the record every face shows)."""
        from pcm.models import Source  # pydantic only when asked: a command that never asks starts without it

        rows = self.select(render_query("why", iri=iri_term(iri))).dicts()
        return [
            Source(
                post=value_or_none(r.get("post")),
                graph=value_or_none(r.get("graph")),
                text=value_or_none(r.get("content")),
                thread=value_or_none(r.get("thread")),
                session=value_or_none(r.get("session")),
                time=datetime_or_none(r.get("time")),
                speaker=value_or_none(r.get("speaker")),
                role=value_or_none(r.get("role")),
                source_id=value_or_none(r.get("source_id")),
                file=value_or_none(r.get("file")),
            )
            for r in rows
        ]

    def ontology_version(self) -> str | None:
        q = (
            f"SELECT ?v WHERE {{ GRAPH {ONTOLOGY} {{ ?o a <http://www.w3.org/2002/07/owl#Ontology> ; "
            "<http://www.w3.org/2002/07/owl#versionInfo> ?v } }"
        )
        rows = self.select(q).rows
        return value_or_none(rows[0][0]) if rows else None

    # -- writing -------------------------------------------------------------------------------------------------

    def write(self, quads: Sequence[ox.Quad], *, mirrored: bool | None = None) -> None:
        """Insert quads in one atomic write, with the index outbox marker when they change what the side index
        mirrors. ``mirrored`` says so explicitly (``False`` for data no index row is built from, e.g. summaries);
        by default any quad outside the provenance graph counts."""
        if quads:
            if _touches_index(quads, self.layout) if mirrored is None else mirrored:
                self.index_writes += 1
                quads = [*quads, self.index_marker]
            self.backend.extend(quads)

    def apply(
        self,
        *,
        delete: Sequence[ox.Quad] = (),
        insert: Sequence[ox.Quad] = (),
        extra: Sequence[str] = (),
        mirrored: bool | None = None,
    ) -> None:
        """Delete and insert quads (plus optional extra update operations) in ONE atomic SPARQL update.

        Used where a write must also remove something: an extraction that replaces an earlier one, a statement
        that moves to the history graph. ``mirrored`` as in :meth:`write` (by default, update text that names a graph
        other than the provenance graph also counts).
        """
        from pcm.backend import quads_to_delete_data, quads_to_insert_data

        if not delete and not extra:
            self.write(insert, mirrored=mirrored)
            return
        parts = list(extra)
        if delete:
            parts.append(quads_to_delete_data(delete))
        if mirrored is None:
            mirrored = (
                _touches_index(delete, self.layout) or _touches_index(insert, self.layout)
                or any(_update_touches_index(e, self.layout) for e in extra)
            )
        if mirrored:
            self.index_writes += 1
            insert = [*insert, self.index_marker]
        if insert:
            parts.append(quads_to_insert_data(insert))
        self.backend.update(" ;\n".join(parts))

    def replace_ontology(self, quads: Sequence[ox.Quad]) -> None:
        """Swap the ontology graph for a new version in one update."""
        from pcm.backend import quads_to_insert_data

        self.backend.update(f"DROP SILENT GRAPH {ONTOLOGY} ;\n" + quads_to_insert_data(quads))

    def forget_posts(
        self,
        post_iris: Sequence[str],
        session_iri: str | None = None,
        *,
        delete: Sequence[ox.Quad] = (),
        insert: Sequence[ox.Quad] = (),
        extra: Sequence[str] = (),
    ) -> None:
        """Drop posts with their extraction graphs and provenance, in one atomic update.

        ``delete``, ``insert`` and ``extra`` (update operations, run after the drop, before ``delete``) join that
        same update: the restore of what the posts had superseded (``pcm.extraction.history.forget_delta``), so a
        crash cannot leave the posts gone and their history records stale.
        """
        from pcm.backend import quads_to_delete_data, quads_to_insert_data

        parts = [
            render_query("forget_post.ru", post=iri_term(p), graph=iri_term(self.naming.extraction_graph(p)))
            for p in post_iris
        ]
        if session_iri:
            parts.append(
                f"DELETE WHERE {{ GRAPH {CONVERSATION} {{ {iri_term(session_iri)} ?p ?o }} }}"
            )
        if not parts:
            if delete or insert or extra:
                self.apply(delete=delete, insert=insert, extra=extra)
            return
        parts += extra
        if delete:
            parts.append(quads_to_delete_data(delete))
        self.index_writes += 1
        parts.append(quads_to_insert_data([*insert, self.index_marker]))
        # PREFIX lines must come first in an update request, so strip the repeated ones and add them once.
        body = " ;\n".join(_strip_prologue(p) for p in parts)
        self.backend.update("PREFIX prov: <http://www.w3.org/ns/prov#>\n" + body)

    # -- the index outbox marker -------------------------------------------------------------------------------------

    def index_pending(self) -> bool:
        """Whether some write since the side index last caught up may be missing from it (one ASK)."""
        result = self.backend.query(f"ASK {{ GRAPH {PROVENANCE} {{ {_quad_pattern(self.index_marker)} }} }}")
        return bool(result)

    def mark_index_pending(self) -> None:
        """Set the marker by itself and keep it until a full reconcile (:attr:`index_dirty`).

        For a write that cannot carry it (a bulk load), so a crash still replays, and after an index write that
        failed, so a later successful index write does not clear a marker that still covers the failed one.
        """
        self.index_writes += 1
        self.index_dirty = True
        self.backend.extend([self.index_marker])

    def keep_index_pending(self) -> None:
        """An index write failed after store writes that set the marker: keep it until a full reconcile, so a later
        index write that succeeds does not clear it (no store write: the marker is there, and the disk may be full)."""
        self.index_dirty = True

    def clear_index_pending(self) -> None:
        """Remove the marker: call only once the index holds every write that set it."""
        from pcm.backend import quads_to_delete_data

        self.backend.update(quads_to_delete_data([self.index_marker]))
        self.index_dirty = False

    def summaries_pending(self) -> bool:
        """Whether a write since the summaries were last brought up to date may have left one behind (one ASK)."""
        result = self.backend.query(f"ASK {{ GRAPH {PROVENANCE} {{ {_quad_pattern(self.summaries_marker)} }} }}")
        return bool(result)

    def clear_summaries_pending(self) -> None:
        """Remove the summaries marker: call only once every session it covers has its summary updated."""
        from pcm.backend import quads_to_delete_data

        self.backend.update(quads_to_delete_data([self.summaries_marker]))

    def set_status(self, post_iri: str, status: str, report: str = "") -> list[str]:
        """Update text that replaces a post's extraction status (to be joined into a larger atomic update)."""
        p = iri_term(post_iri)
        g = PROVENANCE
        text = [
            f"DELETE WHERE {{ GRAPH {g} {{ {p} <{PCM}extractionStatus> ?s }} }}",
            f"DELETE WHERE {{ GRAPH {g} {{ {p} <{PCM}extractionReport> ?r }} }}",
            f"INSERT DATA {{ GRAPH {g} {{ {p} <{PCM}extractionStatus> {literal_term(status)} }} }}",
        ]
        if report:
            text.append(f"INSERT DATA {{ GRAPH {g} {{ {p} <{PCM}extractionReport> {literal_term(report)} }} }}")
        return text


def _touches_index(quads: Sequence[ox.Quad], layout: DatasetLayout) -> bool:
    """Whether quads reach beyond the provenance graph (extraction status and reports alone change no index row)."""
    provenance = ox.NamedNode(layout.provenance)
    return any(q.graph_name != provenance for q in quads)


def _update_touches_index(update: str, layout: DatasetLayout) -> bool:
    """Whether update text may change more than the provenance graph: it names another graph or drops/clears one."""
    rest = update.replace(f"GRAPH {PROVENANCE}", "").replace(f"GRAPH <{layout.provenance}>", "").upper()
    return any(word in rest for word in ("GRAPH", "DROP", "CLEAR", "LOAD", "COPY", "MOVE", " ADD "))


def _quad_pattern(quad: ox.Quad) -> str:
    return f"{quad.subject} {quad.predicate} {quad.object}"


def _strip_prologue(update: str) -> str:
    return "\n".join(
        line for line in update.splitlines() if not line.startswith("PREFIX ") and not line.startswith("#")
    )


RDF_TYPE = RDF + "type"

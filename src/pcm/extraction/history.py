"""How facts changed: ``pcm history IRI`` (from the history graph and the current graphs), and undoing the knowledge
updates of forgotten posts (:func:`forget_delta`, applied by ``Memory.forget`` within the forget's own update)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

import pyoxigraph as ox

from pcm.backend import Term, checked_triple, term_value, value_or_none
from pcm.extraction.queries import render
from pcm.extraction.supersede import StoredValue, history_record, parse_time, said_later, stored_values
from pcm.layout import HISTORY
from pcm.sparql import iri_term, values_clause

if TYPE_CHECKING:
    from pcm.context import MemoryContext

N = ox.NamedNode


def _no_graph(memory: MemoryContext) -> str:
    """A graph IRI of the memory's that no statement lives in (for "values in every graph but this one")."""
    return memory.naming.layout.prefix + "none"


@dataclass
class FactVersion:
    """One value a property had: when it was said (by which post) and, if it is over, what replaced it."""

    predicate: str
    value: str
    said_by: str | None = None
    said_at: str | None = None
    said: str | None = None
    superseded_at: str | None = None
    superseded_by: str | None = None
    superseded_by_text: str | None = None

    @property
    def current(self) -> bool:
        return self.superseded_by is None and self.superseded_at is None

    def as_json(self) -> dict[str, object]:
        return {**self.__dict__, "current": self.current}


@dataclass
class FactHistory:
    """Every property of the entity that ever changed, with its past values (oldest first) and current ones."""

    iri: str
    versions: list[FactVersion] = field(default_factory=list)

    def as_json(self) -> dict[str, object]:
        return {"iri": self.iri, "changes": [v.as_json() for v in self.versions]}


def fact_history(memory: MemoryContext, iri: str) -> FactHistory:
    """Past values from the history graph, followed per property by the values that hold now."""
    history = FactHistory(iri)
    past = memory.store.select(render("history", iri=iri_term(iri))).dicts()
    for row in past:
        history.versions.append(
            FactVersion(
                predicate=term_value(row["p"]),
                value=_show(row["o"]),
                said_by=value_or_none(row.get("from")),
                said_at=value_or_none(row.get("from_time")),
                said=value_or_none(row.get("from_content")),
                superseded_at=value_or_none(row.get("at")),
                superseded_by=value_or_none(row.get("by")),
                superseded_by_text=value_or_none(row.get("by_content")),
            )
        )
    predicates = sorted({v.predicate for v in history.versions})
    if predicates:
        q = render("current_values", iri=iri_term(iri), properties=values_clause("p", predicates))
        for row in memory.store.select(q).dicts():
            history.versions.append(
                FactVersion(
                    predicate=term_value(row["p"]),
                    value=_show(row["o"]),
                    said_by=value_or_none(row.get("post")),
                    said_at=value_or_none(row.get("time")),
                    said=value_or_none(row.get("content")),
                )
            )
    history.versions.sort(key=lambda v: (v.predicate, v.current, v.superseded_at or v.said_at or ""))
    return history


def _show(term: Term) -> str:
    """Literals by their text, IRIs as they are (the CLI shortens them)."""
    return term_value(term)


# ---------------------------------------------------------------------------------------------------- forgetting


@dataclass(frozen=True)
class _Record:
    """A history record touched by a forget: the superseded statement, where it lived, who said and replaced it."""

    node: str
    triple: ox.Triple
    source: str | None
    said_by: str | None
    said_at: datetime | None
    superseded_by: str | None


@dataclass
class RestoreDelta:
    """What undoing the knowledge updates of forgotten posts writes: to join the forget's own atomic update."""

    delete: list[ox.Quad] = field(default_factory=list)
    """Values that held and step down because a value a forgotten post had superseded comes back."""
    insert: list[ox.Quad] = field(default_factory=list)
    """Values that come back, and the history records that stay, re-pointed at who supersedes them now."""
    extra: list[str] = field(default_factory=list)
    """Update operations that drop every history record a forgotten post said or superseded."""
    restored: int = 0
    """How many superseded statements hold again."""


def forget_delta(memory: MemoryContext, post_iris: Sequence[str]) -> RestoreDelta:
    """The restore a forget of these posts needs, computed BEFORE the forget from the store as it is then.

    The posts count as gone: their extraction graphs are neither restored into nor read as holding values, so
    ``MemoryStore.forget_posts(..., delete=, insert=, extra=)`` can apply forget and restore in one atomic update
    (a crash between two updates would leave stale history records). What comes back, and why, is described at
    :func:`restore_after_forget`.
    """
    forgotten = set(post_iris)
    if not forgotten:
        return RestoreDelta()
    records = _touched_records(memory, forgotten)
    if not records:
        return RestoreDelta()
    gone = {memory.naming.extraction_graph(p) for p in forgotten}
    candidates = [r for r in records if r.superseded_by in forgotten and r.said_by not in forgotten]
    live = _live_graphs(memory, {r.source for r in candidates if r.source} - gone)
    groups: dict[tuple[str, str], list[_Record]] = {}
    for record in candidates:
        if record.source in live:
            groups.setdefault((term_value(record.triple.subject), record.triple.predicate.value), []).append(record)
    current = _current_values(memory, groups.keys(), gone)
    change = _Change()
    for key, group in sorted(groups.items()):
        change.settle(memory, group, current.get(key, []))
    drop = [f"DELETE WHERE {{ GRAPH {HISTORY} {{ {iri_term(r.node)} ?p ?o }} }}" for r in records]
    return RestoreDelta(change.delete, list(dict.fromkeys(change.insert)), drop, change.restored)


def restore_after_forget(memory: MemoryContext, forgotten_post_iris: Sequence[str]) -> int:
    """Undo the knowledge updates of posts already forgotten; returns how many superseded statements came back.

    ``Memory.forget`` does not call this: it applies :func:`forget_delta` within the forget itself. Posts still
    stored are ignored. Every history record a forgotten post said or superseded is removed: what a forgotten post
    said must not survive in history, and a record pointing to a forgotten post is stale. A value a forgotten post
    had superseded comes back into its own extraction graph when that graph still exists and no value said later
    holds now; of several, the newest post's values come back and the others stay in history, superseded by it.
    When a later value holds now, they stay superseded by that one. One atomic update.
    """
    forgotten = set(forgotten_post_iris)
    forgotten -= memory.store.existing_posts(sorted(forgotten)) if forgotten else set()
    delta = forget_delta(memory, sorted(forgotten))
    if delta.extra or delta.delete or delta.insert:
        memory.store.apply(delete=delta.delete, insert=delta.insert, extra=delta.extra)
    return delta.restored


@dataclass
class _Change:
    """What a forget does to the values of one (subject, property) after another."""

    delete: list[ox.Quad] = field(default_factory=list)
    insert: list[ox.Quad] = field(default_factory=list)
    restored: int = 0

    def settle(self, memory: MemoryContext, group: list[_Record], holding: list[StoredValue]) -> None:
        """``group``: the superseded values that may come back; ``holding``: the values the pair has now."""
        group = sorted(group, key=lambda r: (_seconds(r.said_at), r.node))
        newest = group[-1]
        winners = [r for r in group if (r.said_by, r.said_at) == (newest.said_by, newest.said_at)]
        later = [v for v in holding if v.time is not None and said_later(v.time, newest.said_at)]
        if later or (holding and newest.said_at is None):  # a later value holds now: they stay superseded by it
            latest = max(holding, key=lambda v: (_seconds(v.time), v.graph))
            self.insert += _restatements(memory, group, by=latest.post, at=latest.time)
            return
        for r in winners:  # what the newest remaining post said (several values, for laterValuesReplace)
            self.insert.append(ox.Quad(r.triple.subject, r.triple.predicate, r.triple.object, N(r.source or _no_graph(memory))))
        self.restored += len(winners)
        older = [r for r in group if r not in winners]
        self.insert += _restatements(memory, older, by=newest.said_by, at=newest.said_at)
        back = {r.triple for r in winners}
        for v in holding:  # an older value that still held (said with no time) steps down
            if v.triple not in back:
                self.delete.append(ox.Quad(v.triple.subject, v.triple.predicate, v.triple.object, N(v.graph)))
                self.insert += history_record(
                    memory, v.triple, by=newest.said_by, at=newest.said_at, origin=v.post, source=v.graph
                )


def _touched_records(memory: MemoryContext, forgotten: set[str]) -> list[_Record]:
    """History records whose value a forgotten post said or superseded."""
    out: dict[str, _Record] = {}
    posts = sorted(forgotten)
    for start in range(0, len(posts), 200):
        q = render("history_of_posts", posts=values_clause("post", posts[start : start + 200]))
        for row in memory.store.select(q).dicts():
            node = term_value(row["h"])
            out[node] = _Record(
                node,
                checked_triple(row["s"], row["p"], row["o"]),
                value_or_none(row.get("source")),
                value_or_none(row.get("from")),
                parse_time(row.get("from_time")),
                value_or_none(row.get("by")),
            )
    return sorted(out.values(), key=lambda r: r.node)


def _live_graphs(memory: MemoryContext, graphs: set[str]) -> set[str]:
    if not graphs:
        return set()
    q = render("live_graphs", graphs=values_clause("g", sorted(graphs)))
    return {term_value(row[0]) for row in memory.store.select(q).rows if row[0] is not None}


def _current_values(
    memory: MemoryContext, keys: Iterable[tuple[str, str]], gone: set[str]
) -> dict[tuple[str, str], list[StoredValue]]:
    """What each (subject, property) holds now, in any extraction or import graph but the ``gone`` ones."""
    found: dict[tuple[str, str], list[StoredValue]] = {}
    keys = list(keys)
    if keys:
        for stored in stored_values(memory, keys, graph=_no_graph(memory)):
            if stored.graph in gone:
                continue
            found.setdefault((term_value(stored.triple.subject), stored.triple.predicate.value), []).append(stored)
    return found


def _restatements(memory: MemoryContext, records: Sequence[_Record], *, by: str | None, at: datetime | None) -> list[ox.Quad]:
    """Records that stay in history, now superseded by ``by`` (their old records are dropped)."""
    out: list[ox.Quad] = []
    for r in records:
        out += history_record(memory, r.triple, by=by, at=at, origin=r.said_by, source=r.source or _no_graph(memory))
    return out


def _seconds(when: datetime | None) -> float:
    """Sort key of a message time (unknown first)."""
    return when.timestamp() if when is not None else float("-inf")

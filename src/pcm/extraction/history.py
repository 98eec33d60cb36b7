"""``pcm history IRI``: how the facts about one entity changed, from the history graph and the current graphs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pcm.extraction.queries import render
from pcm.sparql import iri_term, values_clause

if TYPE_CHECKING:
    from pcm.memory import Memory


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


def fact_history(memory: Memory, iri: str) -> FactHistory:
    """Past values from the history graph, followed per property by the values that hold now."""
    history = FactHistory(iri)
    past = memory.store.select(render("history", iri=iri_term(iri))).dicts()
    for row in past:
        history.versions.append(
            FactVersion(
                predicate=row["p"].value,
                value=_show(row["o"]),
                said_by=_value(row.get("from")),
                said_at=_value(row.get("from_time")),
                said=_value(row.get("from_content")),
                superseded_at=_value(row.get("at")),
                superseded_by=_value(row.get("by")),
                superseded_by_text=_value(row.get("by_content")),
            )
        )
    predicates = sorted({v.predicate for v in history.versions})
    if predicates:
        q = render("current_values", iri=iri_term(iri), properties=values_clause("p", predicates))
        for row in memory.store.select(q).dicts():
            history.versions.append(
                FactVersion(
                    predicate=row["p"].value,
                    value=_show(row["o"]),
                    said_by=_value(row.get("post")),
                    said_at=_value(row.get("time")),
                    said=_value(row.get("content")),
                )
            )
    history.versions.sort(key=lambda v: (v.predicate, v.current, v.superseded_at or v.said_at or ""))
    return history


def _value(term: object) -> str | None:
    return None if term is None else term.value  # type: ignore[attr-defined]


def _show(term: object) -> str:
    """Literals by their text, IRIs as they are (the CLI shortens them)."""
    return term.value  # type: ignore[attr-defined]

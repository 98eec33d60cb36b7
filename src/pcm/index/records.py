"""The rows the side index holds and the matches it gives, as plain frozen dataclasses; its recall hits are the
record every face shows (:class:`pcm.models.RecallHit`, imported by :mod:`pcm.index.sideindex`, so that opening
the store, which lists posts as :class:`PostRecord`, imports no pydantic).

The store (the source of truth) lists its posts as :class:`pcm.conversations.PostRecord` (re-exported here, the
index's row type) and turns its entities into these records; the index never reads RDF, so it can be rebuilt from
any store view (``reconcile``) and tested without one.
"""

from __future__ import annotations

from dataclasses import dataclass

from pcm.conversations import PostRecord


@dataclass(frozen=True)
class EntityRecord:
    """One individual of the memory: its labels, its types and a short text made from its label, types and facts."""

    iri: str
    label: str
    alt_labels: tuple[str, ...]
    types: tuple[str, ...]
    text: str


def entity_record(iri: str, label: str, types: tuple[str, ...], alts: tuple[str, ...]) -> EntityRecord:
    """The record of one entity as the store lists it (``MemoryStore.entities``): its text is its label followed
    by the local names of its types, which is what entity matching embeds."""
    names = " ".join(t.rsplit("/", 1)[-1].rsplit("#", 1)[-1] for t in types)
    return EntityRecord(iri, label, alts, types, f"{label} ({names})" if names else label)


@dataclass(frozen=True)
class EntityMatch:
    """A candidate vertex for a mention. ``how`` names the legs that found it, joined by ``+`` (``exact+vector``)."""

    iri: str
    label: str
    score: float
    how: str


__all__ = ["EntityMatch", "EntityRecord", "PostRecord", "entity_record"]

"""The rows the side index holds and the answers it gives, as plain frozen dataclasses.

The store (the source of truth) lists its posts as :class:`pcm.conversations.PostRecord` (re-exported here, the
index's row type) and turns its entities into these records; the index never reads RDF, so it can be rebuilt from
any store view (``reconcile``) and tested without one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

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
class RecallHit:
    """One post returned by episodic recall, with the fused score that ranked it."""

    post: str
    source_id: str | None
    session: str
    time: datetime | None
    speaker: str | None
    role: str
    text: str
    score: float

    def as_json(self) -> dict[str, Any]:
        """The keys of the dataclass, ``time`` as an ISO 8601 string (or ``None``): what ``pcm recall --json`` prints."""
        return {
            "post": self.post,
            "source_id": self.source_id,
            "session": self.session,
            "time": self.time.isoformat() if self.time is not None else None,
            "speaker": self.speaker,
            "role": self.role,
            "text": self.text,
            "score": self.score,
        }


@dataclass(frozen=True)
class EntityMatch:
    """A candidate vertex for a mention. ``how`` names the legs that found it, joined by ``+`` (``exact+vector``)."""

    iri: str
    label: str
    score: float
    how: str


__all__ = ["EntityMatch", "EntityRecord", "PostRecord", "RecallHit", "entity_record"]

"""The two halves of the index outbox (docs/DESIGN.md §5): a marker in the store and a sync record in the index.

Every store write that changes what the index mirrors also sets a marker quad, in the same atomic write
(:data:`pcm.store.INDEX_PENDING`). Once the index holds that write too, the marker is removed again. After a full
reconcile the index records a stamp of what it was reconciled against (namespace, ontology version, model).

On a writable open, an index whose stamp matches and a store without the marker are known to agree, so the open
skips the reconcile and the listing of every post and entity it needs (seconds at 100k posts). A crash between a
store write and its index write leaves the marker set, so the next open reconciles and replays what is missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


class OutboxStore(Protocol):
    """What the watcher needs of :class:`pcm.store.MemoryStore`."""

    index_writes: int

    def clear_index_pending(self) -> None: ...


class OutboxWatcher:
    """Clears the store's marker after an index write that covers every marked store write of this process.

    Store writes and their index writes run one after the other on the writing thread, so when an index write
    completes, the store writes before it are in the index. ``begin`` notes how many marked writes the store has
    made; if another one lands while the index write runs (another thread), ``done`` leaves the marker set and the
    next open reconciles. A marker an earlier process left (``pending``), or one this process set by itself
    because an index write failed (the store's ``index_dirty``), is cleared only by a full reconcile, which calls
    :meth:`clear` itself.
    """

    def __init__(self, store: OutboxStore, *, pending: bool) -> None:
        self._store = store
        self._cleared_at: int | None = None if pending else store.index_writes

    def begin(self) -> int:
        return self._store.index_writes

    def done(self, token: object) -> None:
        if self._cleared_at is None or token != self._store.index_writes or token == self._cleared_at:
            return  # marked by an earlier process (needs a reconcile), raced by a write, or nothing to clear
        if getattr(self._store, "index_dirty", False):
            return  # an index write failed in this process: only a full reconcile covers it
        self.clear(int(token))

    def clear(self, token: int) -> None:
        """Remove the marker (after a full reconcile, or an index write covering every marked write up to token)."""
        if token != self._store.index_writes:
            return
        self._store.clear_index_pending()
        self._cleared_at = token


def sync_stamp(*, namespace: str, ontology_version: str, model: str, dim: int) -> dict[str, Any]:
    """What a full reconcile was run against; a change in any of these means the next open reconciles again."""
    return {"namespace": namespace, "ontology_version": ontology_version, "model": model, "dim": dim}


@dataclass(frozen=True)
class IndexLag:
    """What a read-only open found when the outbox said the index may lag the store (a write was interrupted, or
    is still running in another process). A reader may not write the index, so it reports the lag instead."""

    missing: int
    """Posts the store has and the index lacks."""
    forgotten: int
    """Posts the index still holds that the store forgot."""
    searched: bool
    """Whether this process searches the missing posts anyway (by vector, from its in-memory copy of the index)."""

    def message(self) -> str:
        parts = []
        if self.missing:
            how = "searched by meaning only" if self.searched else "not searched"
            parts.append(f"{self.missing} post(s) not indexed yet ({how})")
        if self.forgotten:
            parts.append(f"{self.forgotten} forgotten post(s) still indexed (left out of results)")
        return (
            "the side index lags the store: " + ", ".join(parts)
            + "; the next writable open (any write, or `pcm reindex`) brings it up to date"
        )

    def as_json(self) -> dict[str, Any]:
        return {"kind": "index_lag", "missing_posts": self.missing, "forgotten_posts": self.forgotten,
                "missing_searched": self.searched, "message": self.message()}

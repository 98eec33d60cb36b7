"""Opening an index loads the posts mirror from the table's columns and makes a post's record only when it is asked
for: the mirror must hold what the one that wrote the rows holds, and writes after the load must keep the
neighbour context and the speaker counts right."""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import pytest

from pcm.index import SideIndex
from pcm.index.mirror import PostMirror, _Lazy
from tests.index.test_index_side import CHAT, HashEmbedder, post


def _state(mirror: PostMirror) -> tuple[object, ...]:
    slots = sorted(mirror.slot_of.items())
    return (
        [(iri, mirror.record_at(slot), mirror.digests[slot], mirror.search_hashes[slot]) for iri, slot in slots],
        dict(mirror.at),
        dict(mirror.speaker_counts),
        sorted(mirror.sessions.code_of),
        [(mirror.session_code[s], mirror.role_code[s], mirror.speaker_code[s], mirror.ts[s]) for _, s in slots],
    )


def test_a_loaded_mirror_holds_what_the_writer_held_and_makes_records_on_demand(tmp_path: Path) -> None:
    other = post(0, "A second session, another speaker.", session="s2", speaker="Cy", day=2)
    with SideIndex.open(tmp_path / "index", embedder=HashEmbedder()) as idx:
        idx.upsert_posts([*CHAT, other])
        written = idx._posts
        by_iri = {iri: written.vectors[slot].copy() for iri, slot in written.slot_of.items()}
        relabelled = _relabel(_state(written), written)
    with SideIndex.open(tmp_path / "index", embedder=HashEmbedder()) as idx:
        hits = idx.recall("beagle called Biscuit", 2)
        loaded = idx._posts
        assert isinstance(loaded.records, _Lazy)
        assert loaded.records._all is None, "a recall turned every row into a record"
        assert hits[0].post == CHAT[4].iri
        assert _relabel(_state(loaded), loaded) == relabelled
        for iri, vector in by_iri.items():
            np.testing.assert_array_equal(loaded.vectors[loaded.slot_of[iri]], vector)


def _relabel(state: tuple[object, ...], mirror: PostMirror) -> tuple[object, ...]:
    """``state`` with codes replaced by the values they stand for (a load may number them otherwise)."""
    records, at, counts, sessions, codes = state
    names = {
        kind: {code: value for value, code in table.code_of.items()}
        for kind, table in (("session", mirror.sessions), ("role", mirror.roles), ("speaker", mirror.speakers))
    }
    values = [
        (names["session"].get(int(s)), names["role"].get(int(r)), names["speaker"].get(int(p)), float(t))
        for s, r, p, t in codes  # type: ignore[attr-defined]
    ]
    return records, at, counts, sessions, values


def test_writes_after_a_load_keep_the_context_and_counts_right(tmp_path: Path) -> None:
    first, late = CHAT[:3], [CHAT[4]]
    with SideIndex.open(tmp_path / "a", embedder=HashEmbedder()) as idx:
        idx.upsert_posts([*first, *late])
    with SideIndex.open(tmp_path / "a", embedder=HashEmbedder()) as idx:
        idx.upsert_posts([CHAT[3]])  # the turn before a stored one: its context is refreshed
        idx.delete_posts([CHAT[0].iri])
        reopened = _relabel(_state(idx._posts), idx._posts)
    with SideIndex.open(tmp_path / "b", embedder=HashEmbedder()) as idx:
        idx.upsert_posts([*first, *late])
        idx.upsert_posts([CHAT[3]])
        idx.delete_posts([CHAT[0].iri])
        kept = _relabel(_state(idx._posts), idx._posts)
    assert reopened == kept
    assert reopened[2] == {"Ann": 2, "Bob": 2}


def test_a_large_mirror_is_frozen_out_of_the_garbage_collector(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once a mirror of ``FREEZE_ROWS`` rows or more is built, the objects then alive leave the collector's heap
    (every full collection after would scan them again); a smaller one leaves the collector as it was."""
    from pcm.index import sideindex

    with SideIndex.open(tmp_path / "index", embedder=HashEmbedder()) as idx:
        idx.upsert_posts(CHAT)
    gc.unfreeze()
    try:
        with SideIndex.open(tmp_path / "index", embedder=HashEmbedder()) as idx:
            assert len(idx._posts) == len(CHAT)
            assert gc.get_freeze_count() == 0, "a mirror of a few rows was frozen"
        monkeypatch.setattr(sideindex, "FREEZE_ROWS", len(CHAT))
        with SideIndex.open(tmp_path / "index", embedder=HashEmbedder()) as idx:
            assert len(idx._posts) == len(CHAT)
            assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()

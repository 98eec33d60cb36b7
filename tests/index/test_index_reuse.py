"""Reusing what the index already holds: a post's stored vector for entity matching, and plain appends of new rows."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from pcm.errors import UsageError
from pcm.extraction.context import ContextBuilder
from pcm.index import EntityRecord, SideIndex
from pcm.index.tables import Tables
from pcm.index.text import embed_text
from pcm.settings import ExtractionConfig
from tests.index.test_index_side import CHAT, PEOPLE, HashEmbedder, post


@pytest.fixture
def index(tmp_path: Path) -> SideIndex:
    idx = SideIndex.open(tmp_path / "index", embedder=HashEmbedder())
    yield idx
    idx.close()


def table_iris(idx: SideIndex, name: str) -> list[str]:
    assert idx._tables is not None
    return idx._tables.__dict__[name].to_arrow().column("iri").to_pylist()


class WriteSpy:
    """Records which Tables method each write went through, then lets it run."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[str] = []
        for method in ("upsert", "append"):
            original = getattr(Tables, method)

            def spy(tables: Tables, table: Any, data: Any, _m: str = method, _f: Any = original) -> None:
                self.calls.append(_m)
                _f(tables, table, data)

            monkeypatch.setattr(Tables, method, spy)


# -- post_vector ------------------------------------------------------------------------------------------------------
def test_post_vector_is_the_stored_vector_of_the_post_and_a_copy(index: SideIndex) -> None:
    index.upsert_posts(CHAT)
    stored = index.post_vector(CHAT[4].iri)
    assert stored is not None and stored.dtype == np.float32
    np.testing.assert_allclose(stored, index.embedder.encode([embed_text(CHAT[4])])[0], atol=1e-6)
    stored[:] = 0.0  # the caller's copy: the mirror keeps its row
    again = index.post_vector(CHAT[4].iri)
    assert again is not None and np.linalg.norm(again) == pytest.approx(1.0, abs=1e-5)
    assert index.post_vector("urn:post:missing") is None
    index.delete_posts([CHAT[4].iri])
    assert index.post_vector(CHAT[4].iri) is None


def test_post_vector_survives_reopening(tmp_path: Path) -> None:
    with SideIndex.open(tmp_path / "index", embedder=HashEmbedder()) as idx:
        idx.upsert_posts(CHAT)
        before = idx.post_vector(CHAT[2].iri)
    with SideIndex.open(tmp_path / "index", embedder=HashEmbedder()) as idx:
        after = idx.post_vector(CHAT[2].iri)
    assert before is not None and after is not None
    np.testing.assert_array_equal(before, after)


# -- match_entities(vector=) ------------------------------------------------------------------------------------------
def test_a_given_vector_replaces_embedding_the_mention(index: SideIndex) -> None:
    index.upsert_entities(PEOPLE)
    embedder = index.embedder
    assert isinstance(embedder, HashEmbedder)
    paris = embedder.encode(["a cafe in Paris"])[0]
    before = len(embedder.embedded)
    # the mention's words point at the beagle; the given vector points at the cafe, and wins
    best = index.match_entities("beagle puppy", 1, vector=paris)[0]
    assert best.iri == "urn:e:cafe" and "vector" in best.how
    assert len(embedder.embedded) == before  # nothing was embedded
    # without the vector, the mention is embedded and finds the beagle
    assert index.match_entities("beagle puppy", 1)[0].iri == "urn:e:biscuit"
    assert len(embedder.embedded) == before + 1


def test_a_given_vector_is_normalised_and_checked(index: SideIndex) -> None:
    index.upsert_entities(PEOPLE)
    puppy = index.embedder.encode(["beagle puppy"])[0]
    scaled = index.match_entities("zzz qqq", 2, vector=7.0 * puppy.astype(np.float64))
    plain = index.match_entities("zzz qqq", 2, vector=puppy)
    assert [(m.iri, round(m.score, 5)) for m in scaled] == [(m.iri, round(m.score, 5)) for m in plain]
    with pytest.raises(UsageError, match="64 dimensions"):
        index.match_entities("zzz qqq", 2, vector=np.ones(10, dtype=np.float32))


def test_labels_still_win_over_a_given_vector(index: SideIndex) -> None:
    index.upsert_entities(PEOPLE)
    puppy = index.embedder.encode(["beagle puppy"])[0]
    best = index.match_entities("Bob Lee", 1, vector=puppy)[0]
    assert best.iri == "urn:e:bob" and best.how.startswith("exact")


# -- plain appends ----------------------------------------------------------------------------------------------------
def test_new_rows_are_appended_and_known_ones_upserted_without_duplicates(
    index: SideIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = WriteSpy(monkeypatch)
    index.upsert_entities(PEOPLE)
    assert spy.calls == ["append"]
    changed = EntityRecord("urn:e:bob", "Bob Lee", ("Bobby",), ("foaf:Person",), "Bob Lee (Person), in Porto")
    index.upsert_entities([changed, EntityRecord("urn:e:new", "Newcomer", (), (), "Newcomer")])
    assert spy.calls == ["append", "upsert"]  # one known IRI in the batch: update-or-insert for all of it
    iris = table_iris(index, "entities")
    assert sorted(iris) == sorted({*(p.iri for p in PEOPLE), "urn:e:new"})
    assert index.match_entities("Bobby", 1)[0].iri == "urn:e:bob"

    spy.calls.clear()
    index.upsert_posts(CHAT[:3])
    assert spy.calls == ["append"]
    index.upsert_posts([post(1, "Nice! When did you start planning that trip?", speaker="Bob")])
    assert spy.calls == ["append", "upsert"]
    spy.calls.clear()
    index.upsert_posts(CHAT[3:])  # new posts, but CHAT[3] changes nothing already stored
    assert spy.calls == ["append"]
    assert sorted(table_iris(index, "posts")) == sorted(p.iri for p in CHAT)


def test_a_new_post_before_stored_ones_upserts_their_refreshed_context(
    index: SideIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    index.upsert_posts(CHAT[1:])
    spy = WriteSpy(monkeypatch)
    index.upsert_posts(CHAT[:1])  # the turn after it gets a new context row: not all rows are new
    assert spy.calls == ["upsert"]
    assert sorted(table_iris(index, "posts")) == sorted(p.iri for p in CHAT)
    assert "Lisbon" in index.recall("flight to Lisbon", 1, mode="fts")[0].text


# -- extraction passes the post's vector ------------------------------------------------------------------------------
class IndexSpy:
    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self.vectors = vectors
        self.calls: list[tuple[str, int, np.ndarray | None]] = []

    def post_vector(self, iri: str) -> np.ndarray | None:
        return self.vectors.get(iri)

    def match_entities(self, mention: str, k: int = 10, *, vector: np.ndarray | None = None) -> list[Any]:
        self.calls.append((mention, k, vector))
        return [SimpleNamespace(iri="urn:m:biscuit"), SimpleNamespace(iri="https://elsewhere/x")]


def test_extraction_context_matches_entities_with_the_posts_stored_vector() -> None:
    stored = np.ones(4, dtype=np.float32) / 2
    index = IndexSpy({CHAT[4].iri: stored})
    memory = SimpleNamespace(
        naming=SimpleNamespace(is_individual=lambda iri: iri.startswith("urn:m:")),
        settings=SimpleNamespace(index_enabled=True, extraction=ExtractionConfig()),
        index=index,
    )
    builder = ContextBuilder(memory, use_index=True)  # type: ignore[arg-type]
    assert builder._index_matches(CHAT[4]) == ["urn:m:biscuit"]
    assert builder._index_matches(CHAT[0]) == ["urn:m:biscuit"]
    (text, _, given), (_, _, missing) = index.calls
    assert text == CHAT[4].text and given is stored
    assert missing is None  # a post the index does not hold yet: its text is embedded as before

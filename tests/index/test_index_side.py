"""The side index on disk, with a deterministic stand-in embedder (no torch): writes, forgetting, crashes,
model records, filters, entities. The real model is exercised in ``test_index_model.py``."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

import pcm
from pcm.errors import MemoryVersionError, PcmError, UsageError
from pcm.index import EntityRecord, PostRecord, SideIndex
from pcm.index.embedder import Embedder
from pcm.index.tables import META_FILE


class HashEmbedder(Embedder):
    """Bag of hashed words: texts sharing words get similar vectors. Counts what it embeds."""

    name = "test/hash-bag-of-words"
    dim = 64

    def __init__(self) -> None:
        super().__init__()
        self.embedded: list[str] = []

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.embedded.extend(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().replace("?", " ").replace(".", " ").replace(",", " ").split():
                h = hashlib.blake2b(word.encode(), digest_size=4).digest()
                out[row, h[0] % self.dim] += 1.0 if h[1] % 2 else -1.0
            out[row, self.dim - 1] += 0.01
        return out / np.linalg.norm(out, axis=1, keepdims=True)


class RandomEmbedder(HashEmbedder):
    """Same name and dimension, meaningless vectors: nothing can be found by embedding."""

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        rng = np.random.default_rng(len(self.embedded))
        self.embedded.extend(texts)
        out = rng.standard_normal((len(texts), self.dim)).astype(np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


class OtherModel(HashEmbedder):
    name = "test/another-model"


def post(
    i: int, text: str, *, session: str = "s1", speaker: str = "Ann", day: int = 1, position: int | None = None
) -> PostRecord:
    role = "user" if speaker == "Ann" else "other"
    return PostRecord(
        f"urn:post:{session}:{i}",
        session,
        role,
        speaker,
        datetime(2024, 3, day, 12, 0),
        text,
        f"{session}:{i}",
        i if position is None else position,
    )


CHAT = [
    post(0, "Morning! I finally booked the flight to Lisbon."),
    post(1, "Nice! How long have you been planning that trip?", speaker="Bob"),
    post(2, "Almost two years, ever since my sister moved there."),
    post(3, "Did you adopt the puppy in the end?", speaker="Bob"),
    post(4, "Yes, a beagle called Biscuit; he already ate a sock."),
]


@pytest.fixture
def index(tmp_path: Path) -> SideIndex:
    idx = SideIndex.open(tmp_path / "index", embedder=HashEmbedder())
    yield idx
    idx.close()


def texts(hits: Sequence[object]) -> list[str]:
    return [h.text for h in hits]  # type: ignore[attr-defined]


def rows(idx: SideIndex) -> set[str]:
    assert idx._tables is not None
    return set(idx._tables.posts.to_arrow().column("iri").to_pylist())


# -- the model record ------------------------------------------------------------------------------------------------
def test_open_creates_the_index_and_records_model_dimension_and_layout(tmp_path: Path) -> None:
    SideIndex.open(tmp_path / "index", embedder=HashEmbedder()).close()
    meta = json.loads((tmp_path / "index" / META_FILE).read_text())
    assert meta == {"model": "test/hash-bag-of-words", "dim": 64, "format": 1}


def test_an_index_built_with_another_model_is_refused_until_rebuilt(tmp_path: Path) -> None:
    with SideIndex.open(tmp_path / "index", embedder=HashEmbedder()) as idx:
        idx.upsert_posts(CHAT)
    with pytest.raises(
        MemoryVersionError, match=r"built with test/hash-bag-of-words \(dim 64\).*pcm reindex"
    ):
        SideIndex.open(tmp_path / "index", embedder=OtherModel())

    class OtherDim(HashEmbedder):
        dim = 32

    with pytest.raises(MemoryVersionError, match="dim 32"):
        SideIndex.open(tmp_path / "index", embedder=OtherDim())
    with SideIndex.open(tmp_path / "index", embedder=OtherModel(), rebuild=True) as idx:
        assert idx.post_iris() == set()
    assert json.loads((tmp_path / "index" / META_FILE).read_text())["model"] == "test/another-model"


def test_an_index_from_a_newer_pcm_or_without_a_model_record_is_refused(tmp_path: Path) -> None:
    SideIndex.open(tmp_path / "index", embedder=HashEmbedder()).close()
    meta_path = tmp_path / "index" / META_FILE
    meta_path.write_text(json.dumps({"model": HashEmbedder.name, "dim": 64, "format": 99}))
    with pytest.raises(MemoryVersionError, match="upgrade pcm"):
        SideIndex.open(tmp_path / "index", embedder=HashEmbedder())
    meta_path.unlink()
    with pytest.raises(MemoryVersionError, match="no model record"):
        SideIndex.open(tmp_path / "index", embedder=HashEmbedder())


# -- writing and reading posts ---------------------------------------------------------------------------------------
def test_posts_come_back_whole_and_survive_reopening(tmp_path: Path) -> None:
    with SideIndex.open(tmp_path / "index", embedder=HashEmbedder()) as idx:
        idx.upsert_posts(CHAT)
    with SideIndex.open(tmp_path / "index", embedder=HashEmbedder()) as idx:
        assert idx.post_iris() == {p.iri for p in CHAT}
        for mode in ("hybrid", "fts", "vector"):
            hit = idx.recall("beagle called Biscuit", 1, mode=mode)[0]
            assert (hit.post, hit.source_id, hit.session, hit.speaker, hit.role, hit.text, hit.time) == (
                CHAT[4].iri,
                "s1:4",
                "s1",
                "Ann",
                "user",
                CHAT[4].text,
                datetime(2024, 3, 1, 12, 0),
            )
            assert hit.score > 0


def test_unchanged_posts_are_skipped_and_only_new_text_is_embedded(index: SideIndex) -> None:
    embedder = index.embedder
    assert isinstance(embedder, HashEmbedder)
    index.upsert_posts(CHAT)
    assert len(embedder.embedded) == len(CHAT)
    index.upsert_posts(CHAT)
    assert len(embedder.embedded) == len(CHAT)  # nothing changed, nothing embedded or written
    moved = PostRecord(CHAT[0].iri, "s2", "user", "Ann", CHAT[0].time, CHAT[0].text, "s2:0", 0)
    index.upsert_posts([moved])
    assert len(embedder.embedded) == len(CHAT)  # moved, same words: the vector is reused
    assert index.recall("Lisbon flight", 1, session="s2")[0].source_id == "s2:0"
    index.upsert_posts([post(0, "I booked the train to Porto instead.")])
    assert embedder.embedded[-1] == "Ann said: I booked the train to Porto instead."
    assert texts(index.recall("Porto train", 1)) == ["I booked the train to Porto instead."]


def test_a_reply_is_found_by_the_question_it_answers(index: SideIndex) -> None:
    index.upsert_posts(CHAT)
    hits = index.recall("how long planning the trip", 2, mode="fts")
    assert {h.source_id for h in hits} == {"s1:1", "s1:2"}  # the question and its answer


def test_a_post_arriving_before_the_turn_it_answers_gets_its_context_later(index: SideIndex) -> None:
    index.upsert_posts([CHAT[2]])
    assert index.recall("planning", 5, mode="fts") == []
    index.upsert_posts([CHAT[1]])
    assert {h.source_id for h in index.recall("planning", 5, mode="fts")} == {"s1:1", "s1:2"}


def test_forget_removes_rows_results_and_the_words_from_the_next_turns_context(tmp_path: Path) -> None:
    with SideIndex.open(tmp_path / "index", embedder=HashEmbedder()) as idx:
        idx.upsert_posts(CHAT)
        idx.delete_posts([CHAT[1].iri, "urn:post:never-indexed"])
        assert CHAT[1].iri not in idx.post_iris() and CHAT[1].iri not in rows(idx)
        for mode in ("hybrid", "fts", "vector"):
            assert all(
                h.post != CHAT[1].iri for h in idx.recall("How long have you been planning", 10, mode=mode)
            )
        # the reply no longer carries the forgotten question in its full-text column
        assert idx.recall("planning", 5, mode="fts") == []
    with SideIndex.open(tmp_path / "index", embedder=HashEmbedder()) as idx:
        assert idx.post_iris() == {p.iri for p in CHAT} - {CHAT[1].iri}
        assert idx.recall("planning", 5, mode="fts") == []


def test_filters_restrict_every_mode(index: SideIndex) -> None:
    index.upsert_posts([*CHAT, post(0, "Biscuit chewed my Lisbon guidebook.", session="s2", day=20)])
    for mode in ("hybrid", "fts", "vector"):
        assert {
            h.speaker for h in index.recall("Lisbon Biscuit trip puppy", 10, speaker="Bob", mode=mode)
        } == {"Bob"}
        assert {h.role for h in index.recall("Lisbon Biscuit trip puppy", 10, role="other", mode=mode)} == {
            "other"
        }
        assert {h.session for h in index.recall("Lisbon Biscuit", 10, session="s2", mode=mode)} == {"s2"}
        since = index.recall("Lisbon Biscuit", 10, since=datetime(2024, 3, 10), mode=mode)
        assert [h.session for h in since] == ["s2"]
        until = index.recall("Lisbon Biscuit", 10, until=datetime(2024, 3, 10), mode=mode)
        assert until and {h.session for h in until} == {"s1"}
        assert index.recall("Lisbon", 10, speaker="Nobody", mode=mode) == []


def test_recency_reranks_towards_newer_posts(index: SideIndex) -> None:
    old = post(0, "We walked the dog by the river.", session="old", day=1)
    new = post(0, "We walked the dog by the river.", session="new", day=28)
    mid = post(0, "The river walk with the dog was lovely.", session="mid", day=14)
    index.upsert_posts([old, mid, new])
    plain = index.recall("walked the dog by the river", 3)
    recent = index.recall("walked the dog by the river", 3, recency=5.0)
    assert recent[0].session == "new"
    assert [h.session for h in recent].index("old") > [h.session for h in recent].index("new")
    assert recent[0].score <= plain[0].score  # weights are at most 1
    with pytest.raises(UsageError):
        index.recall("dog", recency=-1.0)


def test_odd_queries_and_modes(index: SideIndex) -> None:
    index.upsert_posts(CHAT)
    assert index.recall("   ") == [] and index.recall("Lisbon", 0) == []
    assert index.recall("the of and", 3, mode="fts") == []  # nothing indexable left after stop words
    assert index.recall('O\'Brien said "hello" (twice): a-ok?', 3, mode="fts") == []
    with pytest.raises(UsageError, match="mode"):
        index.recall("Lisbon", mode="magic")


# -- consistency -----------------------------------------------------------------------------------------------------
def test_reconcile_replays_missing_deletes_extra_and_updates_changed(index: SideIndex) -> None:
    index.upsert_posts(CHAT[:3])
    index.upsert_entities([EntityRecord("urn:e:gone", "Gone", (), (), "Gone")])
    store_posts = [
        *CHAT[1:],
        post(2, "Almost three years, since my sister moved there."),
    ]  # 2 changed, 0 forgotten
    store_entities = [
        EntityRecord("urn:e:biscuit", "Biscuit", ("Bisc",), ("schema:Animal",), "Biscuit, a beagle")
    ]
    upserted, deleted = index.reconcile(store_posts, store_entities)
    assert (upserted, deleted) == (
        3 + 1,
        1 + 1,
    )  # posts 2 (changed), 3, 4 and one entity; post 0 and one entity
    assert index.post_iris() == {p.iri for p in CHAT[1:]}
    assert index.entity_iris() == {"urn:e:biscuit"}
    assert texts(index.recall("three years sister", 1)) == [
        "Almost three years, since my sister moved there."
    ]
    assert index.reconcile(store_posts, store_entities) == (0, 0)


def test_reconcile_repairs_a_stale_context(tmp_path: Path) -> None:
    with SideIndex.open(tmp_path / "index", embedder=HashEmbedder()) as idx:
        idx.upsert_posts(CHAT)
        # an interrupted write: the reply's row still carries a question that was since replaced
        assert idx._tables is not None
        from pcm.index.tables import PostRow, post_rows_table

        stale = PostRow(
            CHAT[2],
            "Ann: Almost two years\nBob: something forgotten",
            idx._posts.digest(CHAT[2].iri) or "",
            idx._posts.vector(CHAT[2].iri),
        )
        idx._tables.upsert(idx._tables.posts, post_rows_table([stale], 64))
    with SideIndex.open(tmp_path / "index", embedder=HashEmbedder()) as idx:
        assert idx.recall("forgotten", 3, mode="fts")
        assert idx.reconcile(CHAT, []) == (1, 0)
        assert idx.recall("forgotten", 3, mode="fts") == []
        assert {h.source_id for h in idx.recall("planning", 5, mode="fts")} == {"s1:1", "s1:2"}


CHILD = """
import sys
from datetime import datetime
from pathlib import Path
sys.path.insert(0, sys.argv[2])
import tests.index.test_index_side as t
from pcm.index import SideIndex
idx = SideIndex.open(Path(sys.argv[1]), embedder=t.HashEmbedder())
idx.optimize_every = 25
print("ready", flush=True)
for i in range(100000):
    idx.upsert_posts([t.post(i, f"turn {i} about tomatoes and the garden", session=f"s{i // 7}", position=i % 7)])
    print(i, flush=True)  # the parent counts these, then kills the writer while it writes the next
"""


@pytest.mark.slow
def test_a_writer_killed_mid_write_loses_nothing_after_reconcile(tmp_path: Path) -> None:
    """SIGKILL a process writing one post per commit (some land mid-commit or mid-optimize), reopen, reconcile
    with the store's view (which got further than the index, as when the store write lands first): complete."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(pcm.__file__).parents[1]), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path / "index"), str(Path(__file__).resolve().parents[2])],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        # past two optimizations (every 25 commits), so the index has compacted files and a tail of small ones
        while int(proc.stdout.readline()) < 60:
            pass
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    with SideIndex.open(tmp_path / "index", embedder=HashEmbedder()) as idx:
        written = len(idx.post_iris())
        assert written > 60  # every write the child announced is there
        store = [
            post(i, f"turn {i} about tomatoes and the garden", session=f"s{i // 7}", position=i % 7)
            for i in range(written + 10)
        ]  # the store holds ten posts the index never saw
        upserted, deleted = idx.reconcile(store, [])
        assert upserted >= 10 and deleted == 0
        assert idx.post_iris() == {p.iri for p in store}
        assert rows(idx) == {p.iri for p in store}
        last = store[-1]
        assert idx.recall(f"turn {written + 9}", 1, mode="fts")[0].post == last.iri
    with SideIndex.open(tmp_path / "index", embedder=HashEmbedder()) as idx:
        assert idx.reconcile(store, []) == (0, 0)


def test_rows_written_after_the_full_text_index_are_searchable_and_optimize_folds_them_in(
    index: SideIndex,
) -> None:
    index.version_retention = timedelta(0)
    index.optimize_every = 1000
    for record in CHAT:
        index.upsert_posts([record])
    assert index._tables is not None
    table = index._tables.posts
    assert texts(index.recall("beagle Biscuit", 1, mode="fts")) == [
        CHAT[4].text
    ]  # unindexed tail is searched
    versions = len(table.list_versions())
    index.optimize()
    stats = table.index_stats(table.list_indices()[0].name)
    assert stats is not None and stats.num_unindexed_rows == 0
    assert len(table.list_versions()) < versions
    assert texts(index.recall("beagle Biscuit", 1, mode="fts")) == [CHAT[4].text]


def test_optimize_runs_by_itself_every_so_many_writes(index: SideIndex) -> None:
    index.optimize_every = 3
    for record in CHAT[:3]:
        index.upsert_posts([record])
    assert index._tables is not None
    table = index._tables.posts
    assert table.index_stats(table.list_indices()[0].name).num_unindexed_rows == 0


def test_optimize_runs_by_itself_once_enough_text_is_written(index: SideIndex) -> None:
    """Every search pays for the text outside the full-text index: past ``fold_text_bytes`` of it the next write
    folds it in, however few writes it took."""
    index.optimize_every = 1000
    index.fold_text_bytes = 10**9
    index.upsert_posts(CHAT[:2])
    assert index._tables is not None
    table = index._tables.posts
    (full_text,) = [i.name for i in table.list_indices() if i.columns == ["search"]]

    def outside() -> int:
        return int(table.index_stats(full_text).num_unindexed_rows)

    assert outside() == 2
    index.fold_text_bytes = index._unfolded + 1  # the two posts' text (with their contexts) and one byte
    index.upsert_posts([CHAT[2]])
    assert outside() == 0
    index.upsert_posts([CHAT[3]])  # counted afresh after the fold: one post's text is below the bound
    assert outside() == 1


def test_writes_in_bulk_fold_their_text_once_at_the_end(index: SideIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ingest of many turns is not searched before it is done: its writes fold the text they add once, when
    the block ends (not when it raised)."""
    folds: list[int] = []
    optimize = index._optimize
    monkeypatch.setattr(index, "_optimize", lambda retain: folds.append(index._unfolded) or optimize(retain))
    index.optimize_every = 1000
    index.fold_text_bytes = 1  # every write alone would fold
    with index.writes_in_bulk():
        for record in CHAT[:3]:
            index.upsert_posts([record])
        assert not folds
    assert len(folds) == 1 and folds[0] > 0 and index._unfolded == 0
    with pytest.raises(RuntimeError), index.writes_in_bulk():
        index.upsert_posts([CHAT[3]])
        raise RuntimeError("stopped half way")
    assert len(folds) == 1  # left for the next write outside a block
    index.upsert_posts([CHAT[4]])
    assert len(folds) == 2


def test_clear_empties_both_tables_and_a_closed_index_refuses_work(tmp_path: Path) -> None:
    idx = SideIndex.open(tmp_path / "index", embedder=HashEmbedder())
    idx.upsert_posts(CHAT)
    idx.upsert_entities([EntityRecord("urn:e:b", "Biscuit", (), (), "Biscuit")])
    idx.clear()
    assert idx.post_iris() == set() and idx.entity_iris() == set() and rows(idx) == set()
    idx.upsert_posts(CHAT[:1])
    assert idx.post_iris() == {CHAT[0].iri}
    idx.close()
    with pytest.raises(PcmError, match="closed"):
        idx.recall("Lisbon")


# -- entities --------------------------------------------------------------------------------------------------------
PEOPLE = [
    EntityRecord("urn:e:ann", "Ann Lee", ("Annie",), ("foaf:Person",), "Ann Lee (Person), sister of Bob"),
    EntityRecord("urn:e:bob", "Bob Lee", (), ("foaf:Person",), "Bob Lee (Person), lives in Lisbon"),
    EntityRecord("urn:e:cafe", "Café Flore", (), ("schema:CafeOrCoffeeShop",), "Café Flore (Cafe), in Paris"),
    EntityRecord("urn:e:biscuit", "Biscuit", (), ("schema:Animal",), "Biscuit (Animal), a beagle puppy"),
]


def test_entities_are_matched_by_exact_and_normalised_labels_full_text_and_vectors(index: SideIndex) -> None:
    index.upsert_entities(PEOPLE)
    top = index.match_entities("ann lee", 3)[0]
    assert (top.iri, top.how.split("+")[0]) == ("urn:e:ann", "exact") and top.score >= 0.9
    assert index.match_entities("Annie")[0].iri == "urn:e:ann"  # alternative label
    cafe = index.match_entities("the cafe flore")[0]
    assert cafe.iri == "urn:e:cafe" and cafe.how.startswith("normalised") and 0.8 <= cafe.score < 0.9
    lee = {m.iri for m in index.match_entities("Lee", 5) if "fts" in m.how}
    assert lee == {"urn:e:ann", "urn:e:bob"}  # a part of a name, by full text
    assert index.match_entities("beagle puppy", 1)[0].iri == "urn:e:biscuit"
    assert "vector" in index.match_entities("beagle puppy", 1)[0].how
    # a known name needs no embedding: the mention is not encoded and no candidate comes from vectors
    embedder = index.embedder
    assert isinstance(embedder, HashEmbedder)
    before = len(embedder.embedded)
    assert all("vector" not in m.how for m in index.match_entities("Bob Lee", 5))
    assert len(embedder.embedded) == before
    assert index.match_entities("  ") == []


def test_an_exact_name_is_found_first_even_when_every_vector_is_far(tmp_path: Path) -> None:
    with SideIndex.open(tmp_path / "index", embedder=RandomEmbedder()) as idx:
        idx.upsert_entities(
            PEOPLE + [EntityRecord(f"urn:e:n{i}", f"Noise {i}", (), (), f"Noise {i}") for i in range(300)]
        )
        for record in PEOPLE:
            best = idx.match_entities(record.label, 5)[0]
            assert best.iri == record.iri and best.how.startswith("exact")


def test_entity_updates_and_deletes_follow_the_store(tmp_path: Path) -> None:
    with SideIndex.open(tmp_path / "index", embedder=HashEmbedder()) as idx:
        idx.upsert_entities(PEOPLE)
        idx.upsert_entities(
            [EntityRecord("urn:e:bob", "Robert Lee", ("Bob",), ("foaf:Person",), "Robert Lee")]
        )
        assert idx.match_entities("Robert Lee")[0].iri == "urn:e:bob"
        assert all(m.iri != "urn:e:bob" or "exact" not in m.how for m in idx.match_entities("Bob Lee"))
        idx.delete_entities(["urn:e:biscuit"])
        assert all(m.iri != "urn:e:biscuit" for m in idx.match_entities("Biscuit", 10))
    with SideIndex.open(tmp_path / "index", embedder=HashEmbedder()) as idx:
        assert idx.entity_iris() == {"urn:e:ann", "urn:e:bob", "urn:e:cafe"}
        assert idx.match_entities("Bob")[0].iri == "urn:e:bob"


def test_a_missing_full_text_index_is_rebuilt_on_open(tmp_path: Path) -> None:
    """A crash between creating a table and indexing it must not leave full-text search broken for good."""
    import lancedb

    with SideIndex.open(tmp_path / "index", embedder=HashEmbedder()) as idx:
        idx.upsert_posts(CHAT)
    table = lancedb.connect(str(tmp_path / "index")).open_table("utterances")
    (fts,) = [i for i in table.list_indices() if i.index_type == "FTS"]
    table.drop_index(fts.name)
    assert not any(i.index_type == "FTS" for i in table.list_indices())
    with SideIndex.open(tmp_path / "index", embedder=HashEmbedder()) as idx:
        assert texts(idx.recall("beagle Biscuit", 1, mode="fts")) == [CHAT[4].text]


def test_label_words_rank_by_rarity_and_common_words_do_not_gather_alone(
    index: SideIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pcm.index import mirror

    index.upsert_entities(
        [
            EntityRecord(f"urn:e:john{i}", f"John {name}", (), ("foaf:Person",), f"John {name}")
            for i, name in enumerate(["Smith", "Doe", "Zyx", "Brown"])
        ]
    )
    hits = index._entities.word_hits("zyx john", 10)
    assert hits[0] == ("urn:e:john2", pytest.approx(1.0))  # both words
    assert {iri for iri, _ in hits} == {f"urn:e:john{i}" for i in range(4)}
    assert all(score < 0.5 for _, score in hits[1:])  # "john" is common here, "zyx" rare
    monkeypatch.setattr(mirror, "_COMMON_WORD", 2)
    assert [iri for iri, _ in index._entities.word_hits("zyx john", 10)] == ["urn:e:john2"]
    assert len(index._entities.word_hits("john", 10)) == 4  # a common word alone still gathers
    assert index._entities.word_hits("nobody", 10) == []

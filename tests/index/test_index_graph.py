"""The term graph of episodic recall: terms read from the text, a walk that reaches the second hop of a question,
and the graph file beside the index that follows every write and is rebuilt when missing.

The conversation hides a two-hop answer: Bob names his new puppy Biscuit in one turn, and a later turn says what
breed Biscuit is, in words the question ("what breed is the puppy Bob adopted?") does not use, among turns about
other things. The walk goes from the question's terms (puppy, adopted) to the first turn, then through the name
Biscuit to the second.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from pcm.index import SideIndex
from pcm.index import recall as ranking
from pcm.index.graph import GRAPH_FILE, read_log, terms
from tests.index.test_index_attribution import _records
from tests.index.test_index_side import HashEmbedder
from tests.index.test_index_support import QUESTION, TURNS, turns_index

SECOND_HOP = "s2:3"


def _top(index: SideIndex, query: str, k: int, **filters: str) -> list[str]:
    return [h.source_id for h in index.recall(query, k, **filters)]


@pytest.fixture(autouse=True)
def graph_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """The leg is off by default (see ``GRAPH_WEIGHT``); these tests are about it switched on, beside a vector leg
    weighted as when the leg was measured (the hash embedder's vectors are bags of words, not meanings), and
    without the feedback round (its posts keep the first places, which the walk could not then reach)."""
    monkeypatch.setattr(ranking, "GRAPH_WEIGHT", 1.0)
    monkeypatch.setattr(ranking, "VECTOR_WEIGHT", 0.35)
    monkeypatch.setattr(ranking, "PRF_DOCS", 0)


@pytest.fixture
def index(tmp_path: Path) -> SideIndex:
    return turns_index(tmp_path)


def test_terms_are_names_and_stemmed_content_words() -> None:
    found = terms("Yesterday we drove to Lake Tahoe with Luna. Hiking there is amazing!")
    assert "n:lake tahoe" in found and "n:lake" in found and "n:luna" in found
    assert "w:hike" in found and "w:drove" in found
    assert "n:yesterday" not in found and "w:yesterday" not in found  # a stopword, even capitalised
    assert "n:hiking" in found  # opens a sentence but is no stopword: kept as a possible name
    assert terms("I think I know") == []


def test_the_walk_reaches_evidence_that_shares_no_word_with_the_question(
    index: SideIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert SECOND_HOP in _top(index, QUESTION, 3)
    monkeypatch.setattr(ranking, "GRAPH_WEIGHT", 0.0)
    assert SECOND_HOP not in _top(index, QUESTION, 3)


def test_the_walk_keeps_to_the_filters(index: SideIndex) -> None:
    assert set(_top(index, QUESTION, 10, session="s1")) <= {f"s1:{n}" for n in range(4)}


def test_the_graph_file_follows_writes_and_is_rebuilt_when_missing(tmp_path: Path) -> None:
    directory = tmp_path / "index"
    idx = SideIndex.open(directory, embedder=HashEmbedder())
    records = _records(TURNS)
    idx.upsert_posts(records)
    stored = read_log(directory / GRAPH_FILE)
    assert set(stored) == {r.iri for r in records}
    assert "n:biscuit" in stored["urn:t:s2:3"][1]
    before = _top(idx, QUESTION, 5)

    idx.delete_posts(["urn:t:s2:3"])
    assert "urn:t:s2:3" not in read_log(directory / GRAPH_FILE)
    assert SECOND_HOP not in _top(idx, QUESTION, 12)
    idx.upsert_posts([records[7]])
    idx.close()

    (directory / GRAPH_FILE).unlink()
    again = SideIndex.open(directory, embedder=HashEmbedder())
    assert _top(again, QUESTION, 5) == before
    assert set(read_log(directory / GRAPH_FILE)) == {r.iri for r in records}


def test_the_graph_is_read_from_its_file_and_a_stale_line_is_recomputed(tmp_path: Path) -> None:
    """Lines whose digest matches the post are trusted as they are; a line written for another version of the
    post (its digest differs) is recomputed from the text, and a torn last line is skipped."""
    directory = tmp_path / "index"
    idx = SideIndex.open(directory, embedder=HashEmbedder())
    idx.upsert_posts(_records(TURNS))
    idx.close()
    path = directory / GRAPH_FILE
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    forged = [[iri, digest, [t for t in found if not t.endswith("biscuit")]] for iri, digest, found in rows]
    path.write_text("\n".join(json.dumps(row) for row in forged) + '\n["urn:t:s1:0", "to', encoding="utf-8")
    trusted = SideIndex.open(directory, embedder=HashEmbedder())
    assert SECOND_HOP not in _top(trusted, QUESTION, 3)
    trusted.close()

    stale = [
        [iri, "stale" if iri in ("urn:t:s1:0", "urn:t:s2:3") else digest, found]
        for iri, digest, found in forged
    ]
    path.write_text("\n".join(json.dumps(row) for row in stale) + "\n", encoding="utf-8")
    recomputed = SideIndex.open(directory, embedder=HashEmbedder())
    assert SECOND_HOP in _top(recomputed, QUESTION, 3)
    assert "n:biscuit" in read_log(path)["urn:t:s1:0"][1]


def test_purge_leaves_no_forgotten_terms_in_the_graph_file(tmp_path: Path) -> None:
    directory = tmp_path / "index"
    idx = SideIndex.open(directory, embedder=HashEmbedder())
    idx.upsert_posts(_records(TURNS))
    idx.delete_posts(["urn:t:s2:3"])
    assert "retriev" in (directory / GRAPH_FILE).read_text(encoding="utf-8")  # forget appends a tombstone
    idx.optimize(timedelta(0))  # what `pcm purge` runs
    text = (directory / GRAPH_FILE).read_text(encoding="utf-8")
    assert "retriev" not in text and "urn:t:s2:3" not in text
    assert set(read_log(directory / GRAPH_FILE)) == {r.iri for r in _records(TURNS)} - {"urn:t:s2:3"}


def test_with_the_leg_off_no_graph_file_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ranking, "GRAPH_WEIGHT", 0.0)
    directory = tmp_path / "index"
    idx = SideIndex.open(directory, embedder=HashEmbedder())
    idx.upsert_posts(_records(TURNS))
    assert _top(idx, "Biscuit", 3)
    assert not (directory / GRAPH_FILE).exists()

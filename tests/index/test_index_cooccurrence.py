"""The entity co-occurrence graph of episodic recall: the nodes read from a text and from the index's entities,
the post-node graph built from the mirrors, and a personalised PageRank walk that reaches the second hop of a
question.

The conversation hides a two-hop answer: Bob names his new puppy Biscuit in one turn, and a later turn says what
breed Biscuit is, in words the question ("what breed is the puppy Bob adopted?") does not use. The question's
words find the first turn; the walk goes from it through the name Biscuit to the second.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pcm.index import EntityRecord, SideIndex, cooccurrence
from pcm.index import recall as ranking
from pcm.index.cooccurrence import CooccurrenceGraph, speaker_nodes, text_nodes
from tests.index.test_index_attribution import _records
from tests.index.test_index_side import HashEmbedder
from tests.index.test_index_support import QUESTION, TURNS, turns_index

FIRST_HOP = "urn:t:s1:0"
SECOND_HOP = "urn:t:s2:3"


@pytest.fixture(autouse=True)
def leg_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """The leg is off by default (see ``COOCCURRENCE_WEIGHT``); these tests are about it switched on, beside a
    vector leg weighted as the term graph's tests weight it (the hash embedder's vectors are bags of words), and
    without the feedback round (its posts keep the first places, which the walk could not then reach)."""
    monkeypatch.setattr(ranking, "COOCCURRENCE_WEIGHT", 1.0)
    monkeypatch.setattr(ranking, "VECTOR_WEIGHT", 0.35)
    monkeypatch.setattr(ranking, "PRF_DOCS", 0)


@pytest.fixture
def index(tmp_path: Path) -> SideIndex:
    return turns_index(tmp_path)


def _top(index: SideIndex, query: str, k: int, **filters: str) -> list[str]:
    return [h.post for h in index.recall(query, k, **filters)]


def test_nodes_are_names_phrases_and_known_entities() -> None:
    found = text_nodes("Yesterday we drove to Lake Tahoe with Luna. Adoption agencies are slow, I think.")
    assert "n:lake tahoe" in found and "n:luna" in found
    assert "p:adopt agenc" in found  # two adjacent content words, stemmed
    assert "n:yesterday" not in found and "n:adoption" not in found  # a stopword; a word opening a sentence
    assert not any(node.startswith("p:tahoe") for node in found)  # no phrase across a comma or sentence end
    assert text_nodes("I think I know") == []
    labelled = text_nodes("my sourdough starter died", {"sourdough starter": {"urn:e:starter"}})
    assert "e:urn:e:starter" in labelled
    assert "e:urn:e:x" not in text_nodes("hello there", {"the": {"urn:e:x"}})  # a stopword is no label
    assert speaker_nodes(["Mary Ann"]) == {"n:mary", "n:ann", "n:mary ann"}


def test_the_graph_links_posts_through_their_shared_nodes(index: SideIndex) -> None:
    posts = index._posts
    built = CooccurrenceGraph().build(posts, index._entities)
    assert built.holders("n:biscuit") == {posts.slot_of[FIRST_HOP], posts.slot_of[SECOND_HOP]}
    assert built.holders("n:lisbon") == {posts.slot_of["urn:t:s3:0"], posts.slot_of["urn:t:s3:1"]}
    assert built.holders("n:bob") == set()  # a speaker's name is no node


def test_an_index_entity_links_the_posts_that_mention_it(index: SideIndex) -> None:
    index.upsert_posts(
        _records([*TURNS, ("s4", "Alice", "my sourdough starter finally bubbled"), ("s5", "Bob", "feed the sourdough starter")])
    )
    index.upsert_entities([EntityRecord("urn:e:starter", "sourdough starter", (), (), "sourdough starter")])
    posts = index._posts
    built = CooccurrenceGraph().build(posts, index._entities)
    assert built.holders("e:urn:e:starter") == {posts.slot_of["urn:t:s4:0"], posts.slot_of["urn:t:s5:0"]}


def test_the_walk_ranks_a_post_two_hops_away_above_unrelated_ones(index: SideIndex) -> None:
    posts = index._posts
    mass = CooccurrenceGraph().walk(posts, index._entities, "", {posts.slot_of[FIRST_HOP]: 1.0})
    second = mass[posts.slot_of[SECOND_HOP]]
    unrelated = [posts.slot_of[f"urn:t:s3:{n}"] for n in range(4)] + [posts.slot_of["urn:t:s1:1"]]
    assert all(mass.get(slot, 0.0) < second for slot in unrelated)


def test_the_walk_starts_from_the_question_nodes(index: SideIndex) -> None:
    posts = index._posts
    mass = CooccurrenceGraph().walk(posts, index._entities, "Where is Lisbon?", {})
    assert set(mass) == {posts.slot_of["urn:t:s3:0"], posts.slot_of["urn:t:s3:1"]}


def test_the_leg_brings_the_second_hop_into_recall(index: SideIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the leg the second hop comes last of twelve; with it, fourth. The walk restarts from the 3 best
    fused posts (the default 10 would be almost the whole of this small conversation)."""
    monkeypatch.setattr(cooccurrence, "SEEDS", 3)
    assert SECOND_HOP in _top(index, QUESTION, 4)
    monkeypatch.setattr(ranking, "COOCCURRENCE_WEIGHT", 0.0)
    assert SECOND_HOP not in _top(index, QUESTION, 10)


def test_the_walk_keeps_to_the_filters_and_follows_writes(index: SideIndex) -> None:
    assert set(_top(index, QUESTION, 10, session="s1")) <= {f"urn:t:s1:{n}" for n in range(4)}
    index.delete_posts([SECOND_HOP])
    assert SECOND_HOP not in _top(index, QUESTION, 12)


def test_the_same_posts_give_the_same_ranking(tmp_path: Path) -> None:
    runs = []
    for name in ("a", "b"):
        idx = SideIndex.open(tmp_path / name, embedder=HashEmbedder())
        idx.upsert_posts(_records(TURNS))
        mass = CooccurrenceGraph().walk(idx._posts, idx._entities, QUESTION, {0: 1.0, 3: 0.5})
        runs.append((_top(idx, QUESTION, 12), sorted(mass.items())))
    assert runs[0] == runs[1]


def test_hub_nodes_carry_no_walk(index: SideIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cooccurrence, "MIN_HUB_DF", 1)
    monkeypatch.setattr(cooccurrence, "MAX_DF_SHARE", 0.0)
    built = CooccurrenceGraph().build(index._posts, index._entities)
    assert built.holders("n:biscuit") == set()  # held by two posts: a hub at this threshold


def test_phrase_heads_are_nodes_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not any(n.startswith("h:") for n in text_nodes("my horse painting and a nature painting"))
    monkeypatch.setattr(cooccurrence, "HEAD_NODES", True)
    found = text_nodes("my horse painting and a nature painting")
    assert "h:paint" in found and found.count("h:paint") == 1

"""With the side index on (MiniLM): extractive summaries by embedding centrality, summary-ranked posts, and the
episodic event chain ``event_context`` falls back to when a memory has no extracted events. One memory for all,
since loading the model is the cost."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pcm.memory import Memory
from pcm.retrieval.summaries import summary_context, summary_posts
from pcm.retrieval.traversal.events import event_context
from pcm.settings import Settings
from pcm.summaries import read_summary
from tests.summaries.test_summaries import BATCHES, GARDEN, turns


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    with Memory.init(Settings(memory=tmp_path_factory.mktemp("sum") / "mem"), owner="Dana") as memory:
        memory.ingest([turns("g", GARDEN), turns("s1", BATCHES[0] + BATCHES[1] + BATCHES[2])])
        yield memory


def dog_posts(mem: Memory) -> list[str]:
    return mem.store.session_posts(mem.store.find_session("s1") or "")


def test_minilm_extractive_summary_covers_the_session(mem: Memory) -> None:
    stored = read_summary(mem.context, mem.store.find_session("s1") or "")
    assert stored is not None and stored.method == "extractive" and stored.covered == set(dog_posts(mem))
    assert "Biscuit" in stored.text and len(stored.text.splitlines()) == 5


def test_summary_posts_and_context_follow_the_matching_session(mem: Memory) -> None:
    ranked = summary_posts(mem.context, "What is my puppy called?", k=4)
    assert len(ranked) == 4 and ranked[0] in dog_posts(mem)
    [(line, posts)] = summary_context(mem.context, "What is my puppy called?", k=1)
    assert line.startswith("Session s1") and posts and {p.session for p in posts} == {"s1"}


def test_event_context_without_events_is_the_episodic_chain(mem: Memory) -> None:
    lines = event_context(mem.context, "What happened after Biscuit chewed my shoes?", [], direction="after", depth=1)
    contents = [posts[0].text for _, posts in lines]
    chewed = BATCHES[1][0]
    assert chewed in contents
    assert contents[contents.index(chewed) + 1] == BATCHES[1][1]  # the turn that came next, right after it
    assert all(len(posts) == 1 and text.startswith("Session ") for text, posts in lines)

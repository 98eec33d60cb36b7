"""The relevance decision of episodic answers (:mod:`pcm.index.relevance`): a question about one named person whose
words belong to what someone else said about themselves is declined; an answerable one keeps its evidence.

The conversation is the two friends of ``test_index_attribution`` (Alice's pottery class and garden, Bob's
marathon and dog), plus turns where one friend asks the other about their own life: the asker's words are about
the listener, so Bob asking "how is your pottery class going?" does not make pottery Bob's.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pcm.conversations import Conversation, Utterance
from pcm.evaluation.metrics import says_not_in_memory
from pcm.index import SideIndex
from pcm.index import relevance as rules
from pcm.index.relevance import TermStats, content_terms, split_turn
from pcm.llm import ScriptedClient
from pcm.memory import Memory
from pcm.retrieval.answer import NOT_IN_MEMORY
from pcm.retrieval.ask import CachingClient, ask
from pcm.settings import Settings
from tests.index.test_index_attribution import TURNS, _records
from tests.index.test_index_side import HashEmbedder

ASKED = [
    ("s3", "Bob", "How is your pottery class going? Did you make another bowl?"),
    ("s3", "Alice", "I made a vase this week, my first one."),
    ("s3", "Bob", "My knee is better, I ran eight miles today."),
    ("s3", "Alice", "Glad your knee healed before the marathon."),
]
WHEN = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> SideIndex:
    idx = SideIndex.open(Path(tmp_path_factory.mktemp("relevance")) / "index", embedder=HashEmbedder())
    idx.upsert_posts(_records(TURNS + ASKED))
    idx.optimize()
    return idx


def test_questions_and_second_person_sentences_are_about_the_listener() -> None:
    own, addressed = split_turn("Glad your knee healed. I ran today! How is the marathon going? Rex barked.")
    assert addressed == "Glad your knee healed. How is the marathon going?"
    assert own == "I ran today! Rex barked."


def test_content_terms_drop_stop_words_and_names_and_stem() -> None:
    assert content_terms("What did Bob make in his pottery classes?", frozenset({"bob"})) == {"potteri", "class"}


@pytest.mark.parametrize(
    ("query", "relevant"),
    [
        ("What did Bob make in his pottery class?", False),  # only Alice (and Bob asking her) spoke of pottery
        ("What did Alice make in her pottery class?", True),
        ("How far did Alice run for the marathon?", False),
        ("How far did Bob run for the marathon?", True),
        ("Is Alice's knee healed?", False),  # Alice only said "your knee": the knee is Bob's
        ("What did someone make in pottery class?", True),  # names no one: nothing to attribute
        ("What did Alice and Bob make in pottery class?", True),  # names both
    ],
)
def test_a_question_is_declined_when_its_words_belong_to_someone_else(
    index: SideIndex, query: str, relevant: bool
) -> None:
    assert index.relevance(query).relevant is relevant


def test_the_decision_carries_its_figures_and_a_reason(index: SideIndex) -> None:
    declined = index.relevance("What did Bob make in his pottery class?")
    assert declined.speaker == "Bob" and declined.other_speaker == "Alice"
    assert declined.others > declined.coverage
    assert "Alice" in declined.reason and "Bob" in declined.reason
    kept = index.relevance("What did Alice make in her pottery class?")
    assert kept.coverage >= kept.others and kept.reason == ""


def test_the_threshold_is_what_decides(index: SideIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rules, "ATTRIBUTION_MARGIN", -10.0)
    assert index.relevance("What did Bob make in his pottery class?").relevant is True


def test_a_write_refreshes_the_decision(tmp_path: Path) -> None:
    idx = SideIndex.open(tmp_path / "index", embedder=HashEmbedder())
    idx.upsert_posts(_records(TURNS))
    assert idx.relevance("What did Bob make in his pottery class?").relevant is False
    bob = [
        ("s9", "Bob", "I made a mug in my own pottery class, a lopsided one."),
        ("s9", "Alice", "Ha, mine were lopsided at first too."),
        ("s9", "Bob", "My pottery class teacher made me make a second one."),
        ("s9", "Bob", "Next pottery class we make plates."),
    ]
    idx.upsert_posts(_records([*TURNS, *bob])[len(TURNS):])
    assert idx.relevance("What did Bob make in his pottery class?").relevant is True


def test_a_memory_with_one_speaker_never_declines(tmp_path: Path) -> None:
    idx = SideIndex.open(tmp_path / "index", embedder=HashEmbedder())
    idx.upsert_posts(_records([t for t in TURNS if t[1] == "Alice"]))
    assert idx.relevance("What did Bob make in his pottery class?").relevant is True


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    records = _records(TURNS + ASKED)
    conversations = [
        Conversation(session, [
            Utterance(session, n, r.role, r.text, r.speaker, WHEN, r.source_id)
            for n, r in enumerate(r for r in records if r.session == session)
        ])
        for session in ("s1", "s2", "s3")
    ]
    directory = Path(tmp_path_factory.mktemp("relevance-memory")) / "memory"
    memory = Memory.init(Settings(memory=directory, index_enabled=True), owner="Alice")
    memory.ingest(conversations)
    yield memory
    CachingClient.forget(memory.context)
    memory.close()


def test_episodic_ask_declines_with_its_reason_and_answers_with_evidence(memory: Memory) -> None:
    declined = ask(memory.context, "What did Bob make in his pottery class?", client=None, as_of=WHEN)
    assert declined.path == "none" and declined.answer.startswith(NOT_IN_MEMORY)
    assert says_not_in_memory(declined.answer)
    assert "what Alice said" in declined.answer  # the one-line reason
    assert "s1:0" in {p.source_id for p in declined.posts}  # Alice's pottery turn, shown as the nearest
    answered = ask(memory.context, "What did Alice make in her pottery class?", client=None, as_of=WHEN)
    assert answered.path == "episodic" and not says_not_in_memory(answered.answer)
    assert "s1:0" in {p.source_id for p in answered.posts}


def _finds_nothing() -> ScriptedClient:
    """A model that writes no graph query and finds no answer in any context it is shown."""
    return ScriptedClient([lambda s, m, op: "NO QUERY: nothing fits" if op == "nl2sparql" else "NOT IN MEMORY"] * 6)


def test_when_the_model_finds_nothing_an_answerable_question_still_cites_the_utterance(memory: Memory) -> None:
    client = _finds_nothing()
    result = ask(memory.context, "What did Alice make in her pottery class?", client=client, as_of=WHEN, plan=False)
    assert result.path == "episodic" and "as in episodic mode" in result.note
    assert result.answer.startswith("Not in memory as a stored fact. The closest thing said:")
    assert "s1:0" in {p.source_id for p in result.posts}
    assert client.requests[-1][2] == "answer"  # the model saw the recalled utterances, and found nothing


def test_when_the_model_finds_nothing_someone_elses_words_are_declined_as_in_episodic_mode(memory: Memory) -> None:
    question = "What did Bob make in his pottery class?"
    result = ask(memory.context, question, client=_finds_nothing(), as_of=WHEN, plan=False)
    episodic = ask(memory.context, question, client=None, as_of=WHEN)
    assert result.path == "none" and says_not_in_memory(result.answer)
    assert result.answer == episodic.answer  # one decision, one wording: "not in memory" and its reason
    assert "what Alice said" in result.answer and "not the person it asks about" in result.note
    assert "s1:0" in {p.source_id for p in result.posts}  # who did say it stays visible


def test_a_rebuild_tokenises_only_the_posts_that_changed() -> None:
    records = _records(TURNS)
    at = {(r.session, r.position): i for i, r in enumerate(records)}
    first = TermStats.build(((i, r, f"d{i}") for i, r in enumerate(records)), lambda s, p: at.get((s, p)))
    changed = replace(records[0], text="I glazed a teapot today.")
    again = [(0, changed, "new"), *((i, r, f"d{i}") for i, r in enumerate(records) if i)]
    second = TermStats.build(again, lambda s, p: at.get((s, p)), first)
    assert second.parts[records[1].iri] is first.parts[records[1].iri]  # reused, not re-tokenised
    assert "teapot" in second.units[0] and "potteri" not in second.units[0]
    assert second.df.get("teapot") == 1 and "teapot" not in first.df

"""Routing in ask (issue 10): "why" / "what happened after" questions try event chains before traversal, questions
about the conversations use session summaries, summaries support the episodic fallback, and missing modules are
tolerated. Stand-ins pin the calls; the last tests use the real event chains and summaries."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pyoxigraph as ox
import pytest

from pcm.conversations import Conversation, Utterance
from pcm.llm import ScriptedClient
from pcm.llm.base import Message
from pcm.memory import Memory
from pcm.namespaces import turtle_prefixes
from pcm.retrieval import ask as ask_module
from pcm.retrieval.answer import posts_of
from pcm.retrieval.ask import NO_LLM_NOTE, CachingClient, ask
from pcm.retrieval.wording import route
from pcm.settings import AskConfig, Settings
from tests.retrieval.test_ask_support import fresh_reply_cache, without_traversal

AS_OF = datetime(2025, 4, 1, 12, 0, tzinfo=UTC)
CAR = [
    "A storm knocked a tree onto the road.",
    "The fallen tree blocked my car in the driveway.",
    "So I missed my flight to Lisbon.",
    "I rebooked the flight for the next morning.",
]
GARDEN = [
    "My tomatoes are finally turning red in the garden.",
    "Great! Keep watering them in the morning.",
    "I also planted basil next to the tomatoes.",
]
FACTS = """
m:storm a schema:Event ; rdfs:label "storm" ; schema:startDate "2025-03-01" .
m:blocked a schema:Event ; rdfs:label "tree blocked the car" ; ob:causalContext m:storm ; schema:startDate "2025-03-02" .
m:missed a schema:Event ; rdfs:label "missed flight to Lisbon" ; ob:causalContext m:blocked ; schema:startDate "2025-03-02" .
m:rebook a schema:Action ; rdfs:label "rebooked flight" ; ob:causalContext m:missed ; schema:startDate "2025-03-03" .
"""


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    mem = Memory.init(Settings(memory=tmp_path_factory.mktemp("ask-routes") / "mem", index_enabled=False), owner="Dana")
    sessions = [("car", CAR, 2), ("garden", GARDEN, 20)]
    written = mem.ingest([
        Conversation(name, [Utterance(name, i, "user" if i % 2 == 0 else "assistant", text,
                                      timestamp=datetime(2025, 3, day, 10, i), source_id=f"{name}{i}")
                            for i, text in enumerate(texts)])
        for name, texts, day in sessions
    ]).posts
    text = turtle_prefixes() + f"@prefix m: <{mem.naming.namespace}> .\n@prefix ob: <https://w3id.org/ontobio/> .\n" + FACTS
    triples = list(ox.parse(text.encode(), format=ox.RdfFormat.TURTLE))
    quads = []
    for index, name in enumerate(("storm", "blocked", "missed", "rebook")):
        subject = ox.NamedNode(mem.naming.namespace + name)
        graph = ox.NamedNode(mem.naming.extraction_graph(written[index]))
        quads += [ox.Quad(t.subject, t.predicate, t.object, graph) for t in triples if t.subject == subject]
        quads.append(ox.Quad(subject, ox.NamedNode("http://www.w3.org/ns/prov#wasDerivedFrom"), ox.NamedNode(written[index]), graph))
    mem.store.write(quads)
    yield mem
    CachingClient.forget(mem.context)
    mem.close()


@pytest.fixture(autouse=True)
def no_traversal(monkeypatch: pytest.MonkeyPatch) -> None:
    without_traversal(monkeypatch)


@pytest.fixture(autouse=True)
def no_cached_replies(memory: Memory) -> Iterator[None]:
    with fresh_reply_cache(memory):
        yield


def post_of(memory: Memory, source_id: str) -> Any:
    iri = next(p.iri for p in memory.store.posts() if p.source_id == source_id)
    return posts_of(memory.context, [iri])[0]


def context_model(wanted: str, answer: str):  # type: ignore[no-untyped-def]
    """No graph query fits; on an answer prompt, cite the first context line containing ``wanted``."""
    def respond(system: str, messages: list[Message], operation: str) -> str:
        if operation == "nl2sparql":
            return "NO QUERY: the vocabulary has no term for that"
        lines = re.findall(r"^\[(\d+)\] (.*)$", messages[0].content, re.MULTILINE)
        cite = next((n for n, line in lines if wanted in line), None)
        return f"ANSWER: {answer} [cites: {cite}]" if cite else "NOT IN MEMORY"
    return respond


class Recorder:
    def __init__(self, lines: list[tuple[str, list[Any]]]) -> None:
        self.lines = lines
        self.calls: list[dict[str, Any]] = []

    def __call__(self, memory: Memory, question: str, *args: Any, **kwargs: Any) -> list[tuple[str, list[Any]]]:
        self.calls.append({"question": question, "args": args, **kwargs})
        return list(self.lines)


@pytest.mark.parametrize(("question", "kind"), [
    ("Why did I miss my flight?", "why"),
    ("What caused the delay?", "why"),
    ("What happened after the storm?", "after"),
    ("What did we talk about in March?", "conversation"),
    ("Which topics did we discuss last week?", "conversation"),
    ("What did I talk about with you in the last session?", "conversation"),
    ("Summarise our conversations from May.", "conversation"),
    ("What language does Dana speak?", "factual"),
    ("How many days after the picnic did I buy the bike?", "factual"),
    ("What kind of dog is Biscuit?", "factual"),
])
def test_keyword_router(question: str, kind: str) -> None:
    assert route(question) == kind


def test_a_why_question_routes_through_event_context(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    import pcm.retrieval.traversal.events as events

    blocked = post_of(memory, "car1")
    stand_in = Recorder([("tree blocked the car was caused by storm", [blocked])])
    monkeypatch.setattr(events, "event_context", stand_in)
    client = ScriptedClient([context_model("caused by storm", "A storm put a tree on the road.")] * 4)
    result = ask(memory.context, "Why was my car blocked in the driveway?", client=client, as_of=AS_OF, explain=True)
    assert result.path == "events" and "event chain (causes)" in result.note
    assert stand_in.calls and {c["direction"] for c in stand_in.calls} == {"causes"}
    assert [p.source_id for p in result.posts] == ["car1"]
    assert result.plan is not None and result.plan.kind == "why" and "kind why" in result.render()
    assert [op for _, _, op in client.requests] == ["nl2sparql", "answer"]  # answered before traversal


def test_what_happened_after_walks_forward(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    import pcm.retrieval.traversal.events as events

    stand_in = Recorder([("rebooked flight was caused by missed flight to Lisbon", [post_of(memory, "car3")])])
    monkeypatch.setattr(events, "event_context", stand_in)
    client = ScriptedClient([context_model("rebooked", "You rebooked the flight.")] * 4)
    result = ask(memory.context, "What happened after I missed my flight?", client=client, as_of=AS_OF)
    assert result.path == "events" and {c["direction"] for c in stand_in.calls} == {"after", "effects"}


def test_a_factual_question_does_not_walk_events(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    import pcm.retrieval.traversal.events as events

    stand_in = Recorder([("anything", [])])
    monkeypatch.setattr(events, "event_context", stand_in)
    result = ask(memory.context, "What colour is my car?", client=ScriptedClient([context_model("zzz", "x")] * 4), as_of=AS_OF)
    assert not stand_in.calls and result.path == "none"


def test_a_conversation_question_routes_through_summary_context(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    import pcm.retrieval.summaries as summaries

    stand_in = Recorder([("Session garden (2025-03-20, 3 turns), summary: tomatoes and basil", [post_of(memory, "garden0")])])
    monkeypatch.setattr(summaries, "summary_context", stand_in)
    client = ScriptedClient([context_model("tomatoes", "Your garden: tomatoes and basil.")])
    result = ask(memory.context, "What did we talk about in late March?", client=client, as_of=AS_OF)
    assert result.path == "summary" and result.answer == "Your garden: tomatoes and basil."
    assert [op for _, _, op in client.requests] == ["answer"]  # no graph query for a question about conversations
    assert [p.source_id for p in result.posts] == ["garden0"] and stand_in.calls


def test_summaries_support_the_episodic_fallback(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    import pcm.retrieval.summaries as summaries

    basil = post_of(memory, "garden2")
    hit = SimpleNamespace(post=basil.post, source_id=basil.source_id, text=basil.text, session=basil.session,
                          time=basil.time, speaker=basil.speaker, role=basil.role)
    monkeypatch.setattr(ask_module, "_recall", lambda memory, question, k: [hit])
    summary = Recorder([(f"Session garden, summary: line {i}", [post_of(memory, "garden0")]) for i in range(5)])
    monkeypatch.setattr(summaries, "summary_context", summary)
    client = ScriptedClient([context_model("summary: line", "Tomatoes, in the garden.")] * 4)
    result = ask(memory.context, "Which vegetables am I growing?", client=client, as_of=AS_OF)
    assert result.path == "episodic" and [p.source_id for p in result.posts] == ["garden0"]
    context = client.requests[-1][1][0].content
    assert context.count("summary: line") == AskConfig().summary_lines and "[1] (2025-03-20, user) I also planted basil" in context


def test_without_an_llm_a_conversation_question_gets_the_summary(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    import pcm.retrieval.summaries as summaries

    line = "Session garden (2025-03-20, 3 turns), summary: tomatoes and basil"
    monkeypatch.setattr(summaries, "summary_context", Recorder([(line, [post_of(memory, "garden0")])]))
    result = ask(memory.context, "What did we talk about in the garden session?", client=None, as_of=AS_OF)
    assert result.path == "summary" and result.answer == line
    assert result.note.startswith(NO_LLM_NOTE) and "session summary" in result.note


# ------------------------------------------------------------------------------------------------ the real ones


def test_real_event_chain_answers_a_why_question(memory: Memory) -> None:
    client = ScriptedClient([context_model("was caused by", "The fallen tree blocked your car.")] * 4)
    result = ask(memory.context, "Why did I miss my flight to Lisbon?", client=client, as_of=AS_OF, explain=True)
    assert result.path == "events", result.render()
    context = client.requests[-1][1][0].content
    assert "missed flight to Lisbon was caused by tree blocked the car" in context
    assert {p.source_id for p in result.posts} & {"car1", "car2"}


def test_real_summaries_answer_a_conversation_question(memory: Memory) -> None:
    client = ScriptedClient([context_model("tomatoes", "Your tomatoes and basil.")])
    result = ask(memory.context, "What did we talk about regarding the tomatoes in the garden?", client=client, as_of=AS_OF)
    assert result.path == "summary", result.render(explain=True)
    assert result.posts and {p.session for p in result.posts} == {result.posts[0].session}
    assert all(p.source_id.startswith("garden") for p in result.posts)  # type: ignore[union-attr]

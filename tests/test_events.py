"""Event chains: cause -> effect and before -> after walks from matched events, the depth bound, time order, the
episodic chain for memories without extracted events, and ``pcm retrieve --algorithm events``."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pyoxigraph as ox
import pytest
from click.testing import CliRunner

from pcm.conversations import Conversation, Utterance
from pcm.errors import UsageError
from pcm.memory import Memory
from pcm.retrieval.traversal.events import (
    episodic_chain,
    event_context,
    find_start_events,
    retrieve_events,
    walk_events,
)
from pcm.settings import Settings

T0 = datetime(2025, 3, 3, 10, 0)
TEXTS = [
    "A storm knocked a tree onto the road.",
    "The fallen tree blocked my car in the driveway.",
    "So I missed my flight to Lisbon.",
    "I rebooked the flight for the next morning.",
    "Unrelated: I bought basil seeds.",
]
# storm <- tree blocks car <- missed flight <- rebooked  (X ob:causalContext C: C caused X)
FACTS = """
@prefix m: <{ns}> .
@prefix schema: <https://schema.org/> .
@prefix ob: <https://w3id.org/ontobio/> .
@prefix pcm: <https://w3id.org/pcm/ontology#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
m:storm a schema:Event ; rdfs:label "storm" ; schema:startDate "2025-03-01" .
m:blocked a pcm:ProblemEvent ; rdfs:label "tree blocked the car" ; ob:causalContext m:storm ;
    schema:startDate "2025-03-02" ; schema:about m:car .
m:missed a schema:Event ; rdfs:label "missed flight to Lisbon" ; ob:causalContext m:blocked ;
    schema:startDate "2025-03-02" .
m:rebook a schema:Action ; rdfs:label "rebooked flight" ; ob:causalContext m:missed ; schema:agent m:owner ;
    schema:startDate "2025-03-03" ; schema:about m:car .
m:seeds a schema:BuyAction ; rdfs:label "bought basil seeds" ; schema:agent m:owner .
m:car a schema:Car ; rdfs:label "my car" .
"""
#: which utterance each event was said in
SAID = {"storm": 0, "blocked": 1, "missed": 2, "rebook": 3, "seeds": 4}


def _write_facts(memory: Memory, posts: list[str]) -> None:
    ns = memory.naming.namespace
    triples = list(ox.parse(FACTS.replace("{ns}", ns).encode(), format=ox.RdfFormat.TURTLE))
    quads = []
    for name, index in SAID.items():
        subject = ox.NamedNode(ns + name)
        graph = ox.NamedNode(memory.naming.extraction_graph(posts[index]))
        quads += [ox.Quad(t.subject, t.predicate, t.object, graph) for t in triples if t.subject == subject]
        quads.append(ox.Quad(subject, ox.NamedNode("http://www.w3.org/ns/prov#wasDerivedFrom"), ox.NamedNode(posts[index]), graph))
    car = ox.NamedNode(memory.naming.extraction_graph(posts[1]))
    quads += [ox.Quad(t.subject, t.predicate, t.object, car) for t in triples if t.subject == ox.NamedNode(ns + "car")]
    memory.store.write(quads)


def _build(path: Path) -> Memory:
    mem = Memory.init(Settings(memory=path, index_enabled=False), owner="Dana")
    utterances = [Utterance("s1", i, "user", t, timestamp=T0.replace(minute=i), source_id=f"m{i}")
                  for i, t in enumerate(TEXTS)]
    posts = mem.ingest([Conversation("s1", utterances)]).posts
    _write_facts(mem, posts)
    return mem


@pytest.fixture
def memory(tmp_path: Path) -> Memory:
    mem = _build(tmp_path / "mem")
    yield mem
    mem.close()


def iri(memory: Memory, name: str) -> str:
    return memory.naming.namespace + name


def chain_ends(result) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    return [(f.triple.s.value.rsplit("/", 1)[-1], f.triple.o.value.rsplit("/", 1)[-1]) for f in result.found]


def test_causes_walk_from_effect_back_to_root_cause(memory: Memory) -> None:
    result = walk_events(memory.context, [iri(memory, "rebook")], direction="causes", depth=3)
    assert chain_ends(result) == [("rebook", "missed"), ("missed", "blocked"), ("blocked", "storm")]
    deepest = result.found[-1].path
    assert deepest is not None and [s.forward for s in deepest.steps] == [True, True, True]
    assert "was caused by" in result.found[0].text


def test_effects_walk_goes_the_other_way(memory: Memory) -> None:
    result = walk_events(memory.context, [iri(memory, "storm")], direction="effects", depth=3)
    assert chain_ends(result) == [("blocked", "storm"), ("missed", "blocked"), ("rebook", "missed")]
    assert all(not s.forward for s in result.found[-1].path.steps)  # type: ignore[union-attr]


def test_depth_bounds_the_walk(memory: Memory) -> None:
    one = walk_events(memory.context, [iri(memory, "storm")], direction="effects", depth=1)
    two = walk_events(memory.context, [iri(memory, "storm")], direction="effects", depth=2)
    assert chain_ends(one) == [("blocked", "storm")]
    assert len(two.found) == 2 and max(len(f.path.steps) for f in two.found) == 2  # type: ignore[union-attr]


def test_both_directions_from_the_middle(memory: Memory) -> None:
    result = walk_events(memory.context, [iri(memory, "missed")], direction="both", depth=3, k=20)
    causal = {e for e, f in zip(chain_ends(result), result.found, strict=True) if ":" not in f.role}
    assert {("missed", "blocked"), ("blocked", "storm"), ("rebook", "missed")} <= causal


def test_time_order_links_events_sharing_a_participant(memory: Memory) -> None:
    result = walk_events(memory.context, [iri(memory, "blocked")], direction="after", depth=3)
    temporal = [f for f in result.found if f.role == "after:temporal"]
    assert [(f.triple.s.value, f.triple.o.value) for f in temporal] == [(iri(memory, "blocked"), iri(memory, "rebook"))]
    assert "(by date)" in temporal[0].text
    before = walk_events(memory.context, [iri(memory, "rebook")], direction="before", depth=3)
    assert [f.triple.o.value for f in before.found] == [iri(memory, "blocked")]
    # the seeds purchase (spoken of later) shares only the owner with the rebooking: the owner links nothing
    after = walk_events(memory.context, [iri(memory, "rebook")], direction="after", depth=3)
    assert after.found == []


def test_start_events_from_question_words_and_sources(memory: Memory) -> None:
    matches = find_start_events(memory.context, "Why did I miss my flight to Lisbon?")
    assert matches and matches[0].iri == iri(memory, "missed")
    result = retrieve_events(memory.context, "Why did I miss my flight to Lisbon?", direction="causes")
    assert chain_ends(result)[0] == ("missed", "blocked")
    assert [s.text for s in result.found[0].sources] == [TEXTS[2], TEXTS[1]]


def test_event_context_gives_lines_with_their_posts(memory: Memory) -> None:
    lines = event_context(memory.context, "What happened after the storm?", [], direction="effects", depth=2)
    assert lines[0][0].startswith("Event: storm")
    assert [p.text for p in lines[0][1]] == [TEXTS[0]]
    assert any("tree blocked the car was caused by storm" in text for text, _ in lines)
    assert all(posts for _, posts in lines)


def test_bad_direction_and_depth_are_usage_errors(memory: Memory) -> None:
    with pytest.raises(UsageError, match="direction"):
        walk_events(memory.context, [iri(memory, "storm")], direction="sideways")
    with pytest.raises(UsageError, match="depth"):
        walk_events(memory.context, [iri(memory, "storm")], depth=0)


def test_no_start_events_is_a_note_not_an_error(memory: Memory) -> None:
    result = retrieve_events(memory.context, "What about the weather in Oslo?")
    assert result.found == [] and "no start events" in result.notes[0]


def test_episodic_chain_adds_neighbouring_turns_in_order(memory: Memory) -> None:
    posts = memory.store.session_posts(memory.store.find_session("s1") or "")
    assert episodic_chain(memory.context, [posts[2]]) == posts[1:4]
    assert episodic_chain(memory.context, [posts[2]], before=0, after=2) == posts[2:5]
    # seeds in the order given, every post once; with no other session a window stops at the session's edge
    assert episodic_chain(memory.context, [posts[4], posts[0], posts[3]]) == [posts[3], posts[4], posts[0], posts[1], posts[2]]


def test_episodic_chain_crosses_into_the_neighbouring_sessions(memory: Memory) -> None:
    later = [Utterance("s2", i, "user", t, timestamp=T0.replace(day=5, minute=i), source_id=f"n{i}")
             for i, t in enumerate(["Next day: the road is clear.", "I drove to the airport."])]
    earlier = [Utterance("s0", 0, "user", "Forecast says a storm is coming.", timestamp=T0.replace(day=1))]
    memory.ingest([Conversation("s2", later), Conversation("s0", earlier)])
    s0, s1, s2 = (memory.store.session_posts(memory.store.find_session(s) or "") for s in ("s0", "s1", "s2"))
    assert episodic_chain(memory.context, [s1[4]], before=0, after=2) == [s1[4], *s2]
    assert episodic_chain(memory.context, [s1[0]], before=2, after=0) == [*s0, s1[0]]  # s0 has one post: all of it
    assert episodic_chain(memory.context, [s2[0]], before=1, after=0) == [s1[4], s2[0]]


def test_cli_retrieve_events_json(tmp_path: Path) -> None:
    from pcm.cli_retrieve import retrieve

    _build(tmp_path / "mem").close()
    path = str(tmp_path / "mem")
    env = {"PCM_INDEX": "off", "PCM_LLM": "none"}
    out = CliRunner().invoke(retrieve, ["--memory", path, "Why did I miss my flight to Lisbon?", "-a", "events",
                                        "--direction", "causes", "--depth", "2", "--json"], env=env)
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["algorithm"] == "events"
    assert [t["o"].rsplit("/", 1)[-1] for t in data["triples"]] == ["blocked", "storm"]
    text = CliRunner().invoke(retrieve, ["--memory", path, "Why did I miss my flight?", "-a", "events",
                                         "--direction", "causes"], env=env)
    assert text.exit_code == 0, text.output
    assert "missed flight to Lisbon was caused by tree blocked the car" in text.stdout

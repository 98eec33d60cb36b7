"""Queued extraction (docs/DESIGN.md §5): ingest stores and returns, the queue is drained later and survives a kill.

The model is the scripted one: ``PCM_LLM=scripted:FILE`` in child processes and the CLI, a :class:`ScriptedClient`
handed to the memory in process. Every utterance mentions the same cat, so one reply is grounded in each of them and
the replies need not follow the queue's order; which run extracted a post is read from its provenance (the activity
names the model, and a scripted model is named by its file), and in which order from the activities' start times.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from pcm.cli import main as pcm
from pcm.conversations import Conversation, Utterance
from pcm.endpoint.drain import STOPPED
from pcm.extraction import extract_posts, select_posts
from pcm.llm.base import Message
from pcm.llm.scripted import ScriptedClient
from pcm.memory import QUEUED, Memory
from pcm.retrieval.ask import ask
from pcm.settings import LLMSpec, Settings
from tests.endpoint.test_endpoint_support import AUTH, serving
from tests.fault_driver import install, restore

DRIVER = Path(__file__).resolve().parents[1] / "fault_driver.py"
T0 = datetime.fromisoformat("2025-05-02T09:00:00+02:00")
#: Two sessions of three turns about one cat; nothing below depends on their words but the cat's name.
SESSIONS = {
    "home": ["We adopted a grey kitten called Pebble.", "Pebble sleeps on the sofa all afternoon.",
             "Pebble knocked a glass off the kitchen table."],
    "vet": ["Pebble saw the vet on Monday.", "The vet said Pebble is healthy.",
            "Pebble gets her next vaccine in June."],
}
#: A reply grounded in every utterance above.
REPLY = 'm:pebble a pcm:Pet ; rdfs:label "Pebble" .\nm:owner pcm:hasPet m:pebble .'
#: What a model answers when nothing stored answers a question (every ask step reads it as "no answer here").
DECLINE = "NO QUERY: nothing stored answers this."
#: Seconds any wait on the worker or a child process may take before the test fails (a bound, not a pause).
BOUND = 120.0
PROV = "http://www.w3.org/ns/prov#"
PCM_NS = "https://w3id.org/pcm/ontology#"


class LocalScripted(ScriptedClient):
    """A scripted model that declares itself on this machine, as llama.cpp or Ollama on loopback do."""

    local = True


def conversations() -> list[Conversation]:
    return [
        Conversation(session, [
            Utterance(session, i, "user", text, timestamp=T0.replace(day=2 + n, hour=9 + i), source_id=f"{session}-{i}")
            for i, text in enumerate(texts)
        ])
        for n, (session, texts) in enumerate(SESSIONS.items())
    ]


def script_file(directory: Path, name: str, replies: list[str]) -> Path:
    path = directory / f"{name}.json"
    path.write_text(json.dumps(replies), encoding="utf-8")
    return path


def rows(memory: Memory, query: str) -> list[list[str]]:
    """The rows of a SELECT as the values' text (every variable bound)."""
    return [[str(getattr(term, "value", term)) for term in row] for row in memory.store.select(query).rows
            if all(term is not None for term in row)]


def statuses(memory: Memory) -> dict[str, str | None]:
    """Every post's extraction status (None: none recorded), in session and position order."""
    order = select_posts(memory.context, "all")
    q = (f"SELECT ?p ?s WHERE {{ GRAPH <{memory.naming.layout.provenance}> "
         f"{{ ?p <{PCM_NS}extractionStatus> ?s }} }}")
    found = {post: status for post, status in rows(memory, q)}
    return {post: found.get(post) for post in order}


def extractions(memory: Memory) -> dict[str, tuple[str, str]]:
    """Each extracted post's (model, start time) from its activity; the model of a scripted run is its file's stem."""
    q = (f"SELECT ?post ?model ?started WHERE {{ GRAPH <{memory.naming.layout.provenance}> {{ "
         f"?graph <{PROV}wasDerivedFrom> ?post ; <{PROV}wasGeneratedBy> ?activity . "
         f"?activity <{PCM_NS}model> ?model ; <{PROV}startedAtTime> ?started }} }}")
    return {post: (Path(model.removeprefix("scripted:")).stem, started) for post, model, started in rows(memory, q)}


def run_order(memory: Memory, run: str) -> list[str]:
    """The posts one run extracted, in the order it extracted them."""
    done = extractions(memory)
    return sorted((post for post, (model, _) in done.items() if model == run),
                  key=lambda post: datetime.fromisoformat(done[post][1]))


def in_session_order(memory: Memory, posts: list[str], *, whole_sessions: bool = True) -> bool:
    """Whether each session's posts come in position order in ``posts`` and, with ``whole_sessions``, one session
    after the other (sessions run side by side when ``PCM_LLM_CONCURRENCY`` allows it)."""
    info = {p.iri: (p.session, p.position) for p in memory.store.posts(sorted(posts))}
    keys = [info[post] for post in posts]
    by_session: dict[str, list[int]] = {}
    for session, position in keys:
        by_session.setdefault(session, []).append(position)
    runs = [session for n, (session, _) in enumerate(keys) if n == 0 or keys[n - 1][0] != session]
    ordered = all(positions == sorted(positions) for positions in by_session.values())
    return ordered and (not whole_sessions or len(runs) == len(by_session))


def queued_memory(path: Path, script: Path, *, index: bool = False) -> list[str]:
    """A memory at ``path`` holding both sessions, ingested with queued extraction; the posts in queue order."""
    settings = Settings(memory=path, index_enabled=index, llm=LLMSpec.parse(f"scripted:{script}")).with_(
        extraction_mode=QUEUED)
    with Memory.init(settings, owner="Dana Whitfield") as memory:
        report = memory.ingest(conversations())
        assert (report.mode, report.pending, report.extracted) == ("queued", 6, 0)
        return select_posts(memory.context, "pending")


@pytest.fixture
def stand_in_embedder() -> Iterator[None]:
    """The side index embeds with fault_driver's bag of words: the index is real, torch is not loaded."""
    previous = install()
    yield
    restore(previous)


# ------------------------------------------------------------------------------------------------ ingest


def test_auto_queues_for_a_model_on_this_machine_and_ingest_never_calls_it(
    tmp_path: Path, stand_in_embedder: None
) -> None:
    settings = Settings(memory=tmp_path / "memory", llm=LLMSpec("scripted", "in process"))
    assert settings.extraction.mode == "auto"
    with Memory.init(settings, owner="Dana Whitfield") as memory:
        model = LocalScripted([REPLY] * 10)
        memory._client = model  # the memory's own client: what ingest would extract and summarise with
        assert memory.extraction_mode() == QUEUED
        report = memory.ingest(conversations())
        assert (report.mode, report.added, report.pending, report.extracted, report.failed) == ("queued", 6, 6, 0, 0)
        assert model.requests == []  # neither extraction nor the session summaries asked the model
        assert set(statuses(memory).values()) == {"pending"} and extractions(memory) == {}
        assert sorted(select_posts(memory.context, "pending")) == sorted(report.posts)
        assert memory.index.post_iris() == set(report.posts)  # stored and indexed: recall finds them now
        assert memory.recall(SESSIONS["vet"][2], k=1)[0].post == report.posts[5]


def test_a_hosted_model_still_extracts_inline_and_the_setting_overrides_auto(tmp_path: Path) -> None:
    settings = Settings(memory=tmp_path / "memory", index_enabled=False, llm=LLMSpec("scripted", "in process"))
    with Memory.init(settings, owner="Dana Whitfield") as memory:
        model = ScriptedClient([REPLY] * 6)  # hosted: it declares nothing
        memory._client = model
        home, vet = conversations()
        report = memory.ingest([home])
        assert (report.mode, report.extracted, report.pending) == ("extraction (scripted:in process)", 3, 0)
        asked = [operation for _, _, operation in model.requests]
        assert asked == ["extract"] * 3 + ["summary"]  # as before: the facts and the summary by the model
        memory.settings = memory.settings.with_(extraction_mode=QUEUED)
        queued = memory.ingest([vet])
        assert (queued.mode, queued.extracted, queued.pending) == ("queued", 0, 3)
        assert len(model.requests) == len(asked)  # queued: no extraction and no summary by the model
        found = statuses(memory)
        assert [found[p] for p in report.posts + queued.posts] == ["extracted"] * 3 + ["pending"] * 3


def test_the_setting_is_read_from_the_environment_and_checked() -> None:
    from pcm.errors import UsageError

    assert Settings.from_env({"PCM_EXTRACTION": "Queued"}).extraction.mode == "queued"
    assert Settings.from_env({}).extraction.mode == "auto"
    with pytest.raises(UsageError, match="PCM_EXTRACTION"):
        Settings.from_env({"PCM_EXTRACTION": "later"})


def test_pcm_ingest_takes_the_flag_and_says_what_waits(tmp_path: Path) -> None:
    script = script_file(tmp_path, "none", [])
    conversation = tmp_path / "chat.json"
    conversation.write_text(json.dumps([{"conversation_id": "walk", "messages": [
        {"role": "user", "content": "I walked to the lake this morning.", "timestamp": "2025-05-01T08:00:00Z"},
        {"role": "user", "content": "The ducks were back.", "timestamp": "2025-05-01T08:05:00Z"},
    ]}]), encoding="utf-8")
    env = {"PCM_INDEX": "off", "PCM_LLM": f"scripted:{script}"}
    memory = tmp_path / "memory"
    out = CliRunner().invoke(pcm, ["ingest", "--memory", str(memory), "--init", "--extraction", "queued",
                                   str(conversation)], env=env, catch_exceptions=False)
    assert out.exit_code == 0, out.output
    assert "mode: queued" in out.stdout and "2 utterance(s) wait for extraction" in out.stdout
    with Memory.open(Settings(memory=memory, index_enabled=False), read_only=True) as opened:
        assert set(statuses(opened).values()) == {"pending"}


# ------------------------------------------------------------------------------------------------ pcm extract


def test_extract_pending_drains_the_queue_in_session_and_position_order(tmp_path: Path) -> None:
    posts = queued_memory(tmp_path / "memory", script_file(tmp_path, "none", []))
    env = {"PCM_INDEX": "off", "PCM_LLM": f"scripted:{script_file(tmp_path, 'a', [REPLY] * 6)}"}
    out = CliRunner().invoke(pcm, ["extract", "--memory", str(tmp_path / "memory"), "--pending", "--json"], env=env,
                             catch_exceptions=False)
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    assert (report["posts"], report["extracted"], report["calls"]) == (6, 6, 6)
    with Memory.open(Settings(memory=tmp_path / "memory", index_enabled=False), read_only=True) as memory:
        assert set(statuses(memory).values()) == {"extracted"}
        order = run_order(memory, "a")  # sessions side by side (PCM_LLM_CONCURRENCY 4), each in position order
        assert sorted(order) == sorted(posts) and in_session_order(memory, order, whole_sessions=False)
    again = CliRunner().invoke(pcm, ["extract", "--memory", str(tmp_path / "memory"), "--pending", "--json"], env=env)
    assert (json.loads(again.stdout)["posts"], json.loads(again.stdout)["calls"]) == (0, 0)  # nothing left


def _extract_in_child(memory: Path, script: Path, fault: str | None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PCM_MEMORY": str(memory), "PCM_LLM": f"scripted:{script}", "PCM_INDEX": "off",
           "PCM_LLM_CONCURRENCY": "1", "PYTHONPATH": os.pathsep.join([str(DRIVER.parent), *sys.path])}
    env.pop("PCM_FAULT_POINT", None)
    if fault is not None:
        env["PCM_FAULT_POINT"] = fault
    return subprocess.run([sys.executable, str(DRIVER), "extract", "--pending", "--json"], capture_output=True,
                          text=True, env=env, timeout=BOUND)


@pytest.mark.parametrize("kill_at", [1, 4])
def test_a_kill_during_the_drain_loses_nothing_and_reruns_nothing(tmp_path: Path, kill_at: int) -> None:
    path = tmp_path / "memory"
    posts = queued_memory(path, script_file(tmp_path, "none", []))
    killed = _extract_in_child(path, script_file(tmp_path, "a", [REPLY] * 6), f"store:{kill_at}")
    assert killed.returncode == -9, killed.stderr  # SIGKILL right after the kill_at-th durable write
    with Memory.open(Settings(memory=path, index_enabled=False), read_only=True) as memory:
        before = statuses(memory)
        done = run_order(memory, "a")
        assert len(done) == kill_at and in_session_order(memory, done)  # one atomic write per post, in order
        assert {post for post, status in before.items() if status == "extracted"} == set(done)
        assert {post for post, status in before.items() if status == "pending"} == set(posts) - set(done)
        first_run = {post: extractions(memory)[post] for post in done}

    rerun = _extract_in_child(path, script_file(tmp_path, "b", [REPLY] * 6), None)
    assert rerun.returncode == 0, rerun.stderr
    report = json.loads(rerun.stdout)
    left = len(posts) - len(done)
    assert (report["posts"], report["extracted"], report["calls"], report["failed"]) == (left, left, left, 0)
    with Memory.open(Settings(memory=path, index_enabled=False), read_only=True) as memory:
        assert set(statuses(memory).values()) == {"extracted"}
        after = extractions(memory)
        assert {post: after[post] for post in done} == first_run  # the same activity: not sent to the model again
        second = run_order(memory, "b")
        assert sorted(second) == sorted(set(posts) - set(done)) and in_session_order(memory, done + second)


# ------------------------------------------------------------------------------------------------ pcm serve


def _served(tmp_path: Path, script: Path) -> Settings:
    settings = Settings(memory=tmp_path / "memory", index_enabled=False, llm=LLMSpec.parse(f"scripted:{script}")).with_(
                        extraction_mode=QUEUED)
    Memory.init(settings, owner="Dana Whitfield").close()
    return settings


def _chat(session: str) -> dict[str, object]:
    return {"conversation_id": session, "messages": [
        {"role": "user", "content": text, "id": f"{session}-{i}", "timestamp": T0.replace(hour=9 + i).isoformat()}
        for i, text in enumerate(SESSIONS[session])
    ]}


def test_serve_drains_posts_ingested_through_it_in_the_background(tmp_path: Path) -> None:
    settings = _served(tmp_path, script_file(tmp_path, "a", [REPLY] * 6))
    with serving(settings) as server:
        worker, memory = server.extraction, server.memory
        assert worker is not None and memory is not None and worker.wait_idle(BOUND)  # nothing queued yet
        stored: list[str] = []
        for session in SESSIONS:  # the second chat comes after the first was drained: the worker picks it up
            answer = httpx.post(server.url + "/api/ingest", json=_chat(session), headers=AUTH, timeout=BOUND)
            assert answer.status_code == 200, answer.text
            body = answer.json()
            assert (body["mode"], body["stored"], body["pending"]) == ("queued", 3, 3)
            stored += body["posts"]
            assert worker.wait_idle(BOUND), worker.status()
        stats = httpx.get(server.url + "/api/stats", timeout=BOUND).json()
        assert stats["extraction_status"] == {"extracted": 6}
        assert stats["extraction_queue"] == {"state": "idle", "pending": 0, "done": 6, "failed": 0, "current": None,
                                             "errors": []}
        assert server.app is not None
        with server.app.memory_lock:
            assert run_order(memory, "a") == stored  # each chat in position order, the later one after


def _held(entered: threading.Event, release: threading.Event) -> Callable[[str, list[Message], str], str]:
    """A scripted reply that says it has been asked (``entered``) and answers only once ``release`` is set."""

    def slow(system: str, messages: list[Message], operation: str) -> str:
        entered.set()
        assert release.wait(BOUND)
        return REPLY

    return slow


def test_serve_ingests_while_the_model_answers_and_the_worker_picks_the_new_posts_up(tmp_path: Path) -> None:
    settings = _served(tmp_path, script_file(tmp_path, "unused", []))
    entered, release = threading.Event(), threading.Event()
    slow = _held(entered, release)
    with serving(settings) as server:
        worker, memory = server.extraction, server.memory
        assert worker is not None and memory is not None and server.app is not None
        memory._client = ScriptedClient([slow, *[REPLY] * 5])
        first = httpx.post(server.url + "/api/ingest", json=_chat("home"), headers=AUTH, timeout=BOUND)
        assert first.status_code == 200 and entered.wait(BOUND)
        # the model holds the worker, not the memory lock: this ingest is stored at once and counted as waiting
        second = httpx.post(server.url + "/api/ingest", json=_chat("vet"), headers=AUTH, timeout=BOUND)
        assert second.status_code == 200 and second.json()["pending"] == 3
        assert worker.status().pending == 6 and worker.status().current == first.json()["posts"][0]  # in hand too
        release.set()
        assert worker.wait_idle(BOUND), worker.status()
        assert worker.status().done == 6
        with server.app.memory_lock:
            order = run_order(memory, "scripted")
            assert set(statuses(memory).values()) == {"extracted"}
            assert sorted(order) == sorted(first.json()["posts"] + second.json()["posts"])
            assert in_session_order(memory, order, whole_sessions=False)  # the new chat may come in between


def test_serve_stops_the_worker_between_two_posts(tmp_path: Path) -> None:
    settings = _served(tmp_path, script_file(tmp_path, "unused", []))
    entered, release = threading.Event(), threading.Event()
    slow = _held(entered, release)
    with serving(settings) as server:
        worker, memory = server.extraction, server.memory
        assert worker is not None and memory is not None and server.app is not None
        model = ScriptedClient([slow, *[DECLINE] * 10])  # the ask below is declined: it falls back to the utterances
        memory._client = model  # before any post waits: the worker asks the memory for its client per selection
        answer = httpx.post(server.url + "/api/ingest", json=_chat("home"), headers=AUTH, timeout=BOUND)
        assert answer.status_code == 200, answer.text
        assert entered.wait(BOUND)
        assert worker.status().current == answer.json()["posts"][0]
        ask_while_busy = httpx.post(server.url + "/api/ask", json={"question": "What is the cat called?"},
                                    timeout=BOUND)  # the memory lock is free while the model answers
        assert ask_while_busy.status_code == 200, ask_while_busy.text
        worker.request_stop()  # while the model answers: its reply must not be written
        release.set()
        worker.stop(timeout=BOUND)
        extract_calls = [operation for _, _, operation in model.requests if operation == "extract"]
        assert worker.status().state == STOPPED and extract_calls == ["extract"]  # the next post was never started
        with server.app.memory_lock:
            assert set(statuses(memory).values()) == {"pending"} and extractions(memory) == {}


def test_serve_without_queued_extraction_runs_no_worker(tmp_path: Path) -> None:
    settings = _served(tmp_path, script_file(tmp_path, "a", [])).with_(extraction_mode="inline")
    with serving(settings) as server:
        assert server.extraction is None
        assert "extraction_queue" not in httpx.get(server.url + "/api/stats", timeout=BOUND).json()


# ------------------------------------------------------------------------------------------------ ask


def test_ask_names_the_cited_posts_not_yet_extracted(tmp_path: Path, stand_in_embedder: None) -> None:
    path = tmp_path / "memory"
    queued_memory(path, script_file(tmp_path, "none", []), index=True)
    question = "Where does Pebble sleep, and when is her vaccine?"
    with Memory.open(Settings(memory=path)) as memory:
        home = memory.store.session_posts(memory.store.find_session("home") or "")
        vet = memory.store.session_posts(memory.store.find_session("vet") or "")
        extract_posts(memory.context, home, client=ScriptedClient([REPLY] * 3))
        result = ask(memory.context, question, client=None, k=6)
        cited = [p.post for p in result.posts]
        assert set(cited) & set(home) and set(cited) & set(vet)
        assert result.pending == [p for p in cited if p in vet]
        assert result.as_json()["pending"] == result.pending

    script = script_file(tmp_path, "decline", [DECLINE] * 40)
    env = {"PCM_LLM": f"scripted:{script}"}
    out = CliRunner().invoke(pcm, ["ask", "--memory", str(path), "--k", "6", "--json", question], env=env)
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    cited = [p["post"] for p in data["citations"]]
    assert data["pending"] == [p for p in cited if p in vet] and data["pending"]
    text = CliRunner().invoke(pcm, ["ask", "--memory", str(path), "--k", "6", question], env=env)
    assert text.exit_code == 0, text.output
    n = len(data["pending"])
    line = f"{n} of the cited utterances {'is' if n == 1 else 'are'} not yet extracted; run `pcm extract --pending`"
    assert line in text.stdout

"""``pcm serve`` limits: a runaway query is stopped at the time limit (even the shapes the engine does not
cancel itself) while other clients are answered; bodies and results are capped."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from pcm.endpoint.server import PcmServer
from tests.endpoint.test_endpoint_support import AUTH, EX, ask, build_memory, serving

LIMIT = 2.0


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PcmServer]:
    """A server with a 2 s query limit, a small body cap and a small result cap."""
    settings = build_memory(tmp_path_factory.mktemp("limited") / "memory", facts=False)
    with serving(settings, query_timeout=LIMIT, grace=0.5, max_body=64 * 1024, max_result=20_000) as running:
        yield running


def test_oversized_body_is_refused_and_writes_nothing(limited: PcmServer) -> None:
    url = limited.url
    big = "INSERT DATA { " + " ".join(f"<{EX}s{i}> <{EX}p> {i} ." for i in range(5000)) + " }"
    assert len(big) > 64 * 1024
    response = httpx.post(url + "/update", content=big, headers={**AUTH, "Content-Type": "application/sparql-update"})
    assert response.status_code == 413 and "too large" in response.text
    assert not ask(url, f"ASK {{ <{EX}s1> ?p ?o }}")
    query = httpx.post(url + "/query", content="ASK {} #" + "x" * 70_000, headers={"Content-Type": "application/sparql-query"})
    assert query.status_code == 413

    def pieces() -> Iterator[bytes]:  # no Content-Length: the cap is applied while the chunks arrive
        yield big[: len(big) // 2].encode()
        yield big[len(big) // 2 :].encode()

    chunked = httpx.post(url + "/update", content=pieces(), headers={**AUTH, "Content-Type": "application/sparql-update"})
    assert chunked.status_code == 413 and "too large" in chunked.json()["error"]
    assert not ask(url, f"ASK {{ <{EX}s1> ?p ?o }}")
    assert ask(url, "ASK {}")  # the server still answers


def test_result_size_is_capped(limited: PcmServer) -> None:
    response = httpx.get(limited.url + "/query", params={"query": "SELECT * WHERE { ?s ?p ?o }"})
    assert response.status_code == 400 and "LIMIT" in response.text
    small = httpx.get(limited.url + "/query", params={"query": "SELECT * WHERE { ?s ?p ?o } LIMIT 5"})
    assert small.status_code == 200 and len(small.json()["results"]["bindings"]) == 5


@pytest.mark.parametrize(
    "runaway",
    [
        "SELECT * WHERE { ?a ?p ?b . ?c ?q ?d . ?e ?r ?f } ORDER BY ?a ?f",  # sorts forever, sends nothing
        "SELECT (COUNT(*) AS ?n) WHERE { ?a ?p ?b . ?c ?q ?d . ?e ?r ?f . ?g ?h ?i }",  # counts forever
        # streams forever, but finds nothing to send: the engine never learns the client has gone
        'SELECT * WHERE { ?a ?p ?b . ?c ?q ?d . ?e ?r ?f . ?g ?h ?i FILTER(STRLEN(CONCAT(STR(?a), STR(?i))) < 0) }',
    ],
)
@pytest.mark.timeout(90)
@pytest.mark.slow
def test_runaway_query_is_stopped_while_the_server_answers_others(limited: PcmServer, runaway: str) -> None:
    url = limited.url
    outcome: dict[str, object] = {}

    def run() -> None:
        response = httpx.post(url + "/query", content=runaway, headers={"Content-Type": "application/sparql-query"}, timeout=30)
        outcome.update(status=response.status_code, text=response.text)

    assert limited.watchdog is not None
    thread = threading.Thread(target=run)
    thread.start()
    while limited.watchdog.inflight == 0 and thread.is_alive():  # the runaway has reached the engine
        time.sleep(0.01)
    answered_meanwhile = 0
    while thread.is_alive():
        assert ask(url, "ASK { ?s a <http://rdfs.org/sioc/ns#Post> }")
        answered_meanwhile += thread.is_alive()
    thread.join()
    assert outcome["status"] == 503 and "time limit" in str(outcome["text"]), outcome
    # others were answered while it ran (how soon is benchmarks/bench_runaway.py's figure)
    assert answered_meanwhile >= 1
    # and the engine stops working on it (the watchdog restarts it, or it stops by itself); pytest's timeout
    # bounds the wait
    _wait_until_the_engine_is_idle(limited)


def _wait_until_the_engine_is_idle(server: PcmServer) -> None:
    """Return once the engine uses (almost) no CPU over a half-second sample."""
    assert server.engine is not None
    while True:
        before = sum(server.engine.thread_cpu().values())
        time.sleep(0.5)  # the sampling window of a CPU reading, not a wait for something to happen
        if sum(server.engine.thread_cpu().values()) - before < 0.05:
            return




def test_a_dead_engine_is_brought_back(limited: PcmServer) -> None:
    import os
    import signal

    assert limited.engine is not None
    # an earlier runaway test may have left the watchdog restarting the engine: wait until it runs (pytest's
    # timeout bounds every wait here)
    while limited.engine.pid is None:
        time.sleep(0.05)
    pid = limited.engine.pid
    os.kill(pid, signal.SIGKILL)
    while (response := httpx.get(limited.url + "/query", params={"query": "ASK { ?s ?p ?o }"})).status_code != 200:
        assert response.status_code == 503  # unavailable while it comes back, never a wrong answer
        time.sleep(0.05)
    assert ask(limited.url, "ASK { ?s a <http://rdfs.org/sioc/ns#Post> }")


# ------------------------------------------------------------------------------------------------ the watchdog's rule


class _FakeEngine:
    """Thread CPU as scripted: ``busy`` threads each use a full tick of CPU per sample."""

    def __init__(self, tick: float, samples: int) -> None:
        self.tick = tick
        self.busy = 0
        self.used = 0.0
        self.restarts = 0
        self.left = samples
        self.sampled = threading.Event()
        """Set once the watchdog has ticked ``samples`` times: the run's length in ticks, not in seconds."""
        self.reads = 0

    def thread_cpu(self) -> dict[int, float]:
        self.reads += 1
        self.used += self.tick
        return {1: 0.0, **{10 + i: self.used for i in range(self.busy)}}

    def alive(self) -> bool:  # asked once a tick
        self.left -= 1
        if self.left <= 0:
            self.sampled.set()
        return True

    def restart(self) -> None:
        self.restarts += 1
        self.busy = 0


def _watch(busy: int, *, abandon: bool, inflight: int = 0, samples: int = 20) -> tuple[int, int]:
    """Restarts over ``samples`` ticks of the watchdog (four times its grace of five ticks), and how often it read
    the engine's threads."""
    from pcm.endpoint.engine import Watchdog

    engine = _FakeEngine(tick=0.02, samples=samples)
    dog = Watchdog(engine, grace=0.1, tick=0.02)  # type: ignore[arg-type]
    engine.busy = busy
    with contextlib.ExitStack() as stack:
        for _ in range(inflight):
            stack.enter_context(dog.request())
        if abandon:
            dog.abandoned()
        dog.start()
        try:
            assert engine.sampled.wait(timeout=60)  # a bound for a dead watchdog thread, not a timing check
        finally:
            dog.stop()
    return engine.restarts, engine.reads


def test_watchdog_restarts_only_for_abandoned_work_that_keeps_running() -> None:
    assert _watch(busy=1, abandon=True)[0] == 1  # a query given up at its limit is still computing
    assert _watch(busy=0, abandon=True)[0] == 0  # it stopped when its connection closed
    assert _watch(busy=1, abandon=False)[0] == 0  # busy, but nothing was given up: legitimate work
    assert _watch(busy=1, abandon=True, inflight=1)[0] == 0  # one busy thread for one running request
    assert _watch(busy=2, abandon=True, inflight=1)[0] == 1  # one more busy thread than requests


def test_watchdog_reads_the_engine_threads_only_while_a_request_is_given_up() -> None:
    """The engine keeps a thread per query's time limit (thousands under load): reading them all every tick
    took about a third of the front's CPU under load."""
    assert _watch(busy=1, abandon=False)[1] == 0
    assert _watch(busy=0, abandon=True)[1] > 0

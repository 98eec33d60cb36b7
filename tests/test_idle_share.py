"""Work shared with a worker on idle CPU (pcm.idle_share): every piece done once in the results, in order, whoever
did it; the caller never waits on a worker the scheduler does not run; errors reach the caller."""

from __future__ import annotations

import os
import threading

import pytest

from pcm.idle_share import IdleShare


def test_every_piece_is_in_the_results_in_order() -> None:
    started = threading.Event()
    pieces = [lambda stop, n=n: (started.set(), n * n)[1] for n in range(50)]
    share = IdleShare(pieces, name="test-share")
    share.start()
    started.wait(5)
    assert share.finish() == [n * n for n in range(50)]


def test_the_caller_does_the_piece_a_starved_worker_holds_and_drops_its_late_result() -> None:
    holding, release = threading.Event(), threading.Event()
    worker_done = threading.Event()

    def first(stop: threading.Event) -> str:
        if threading.current_thread().name == "test-starved":
            holding.set()
            release.wait(10)  # the worker is stuck in the piece whatever the stop event says
            worker_done.set()
            return "worker"
        return "caller"

    share = IdleShare([first, lambda stop: "second"], name="test-starved")
    share.start()
    assert holding.wait(5)
    assert share.finish() == ["caller", "second"]  # returned while the worker still holds the first piece
    assert not worker_done.is_set()
    release.set()
    assert worker_done.wait(5)


@pytest.mark.parametrize("where", ["worker", "caller"])
def test_an_error_in_a_piece_reaches_the_caller(where: str) -> None:
    failed = threading.Event()

    def bad(stop: threading.Event) -> int:
        if where == "worker" and threading.current_thread().name != "test-errors":
            return 0
        failed.set()
        raise ValueError(f"bad piece in the {where}")

    share = IdleShare([bad], name="test-errors")
    if where == "worker":
        share.start()
        assert failed.wait(5)
    with pytest.raises(ValueError, match=f"bad piece in the {where}"):
        share.finish()


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="Linux's SCHED_IDLE policy")
def test_the_worker_runs_at_idle_priority_and_the_caller_does_not() -> None:
    seen: dict[str, int] = {}
    worked = threading.Event()

    def policy(stop: threading.Event) -> int:
        seen[threading.current_thread().name] = os.sched_getscheduler(0)
        worked.set()
        return 0

    share = IdleShare([policy, policy], name="test-policy")
    share.start()
    assert worked.wait(5)
    share.finish()
    assert seen["test-policy"] == os.SCHED_IDLE
    assert os.sched_getscheduler(0) != os.SCHED_IDLE  # the caller's own priority is left as it was

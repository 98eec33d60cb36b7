"""Long-running work the server does for a client in the background: today, rebuilding the side index.

``pcm reindex`` cannot open the store while ``pcm serve`` holds it, and an HTTP request cannot stay open for the
minutes a large reindex takes, so the server runs the rebuild in a thread and lets the client poll its state.
One job at a time: a second start while one runs is refused (the caller answers 409).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pcm.errors import PcmError

#: States a job goes through: idle (never started) -> running -> done | failed.
IDLE, RUNNING, DONE, FAILED = "idle", "running", "done", "failed"


@dataclass
class JobState:
    """What a client polling the job sees."""

    state: str = IDLE
    done: int = 0
    total: int | None = None
    result: int | None = None
    errors: list[str] = field(default_factory=list)
    started: str | None = None
    finished: str | None = None
    seconds: float | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "done": self.done,
            "total": self.total,
            "indexed": self.result,
            "errors": list(self.errors),
            "started": self.started,
            "finished": self.finished,
            "seconds": self.seconds,
        }


class AlreadyRunning(Exception):
    """A job was started while the previous one still runs."""


class BackgroundJob:
    """One named job, run at most once at a time in a daemon thread, whose progress any thread may read.

    ``work(progress)`` does the job and returns its result (a count); ``progress(n)`` adds ``n`` to ``done``.
    ``total`` is asked for before the work starts, so a client sees a bar from its first poll.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._state = JobState()
        self._thread: threading.Thread | None = None

    def start(self, work: Callable[[Callable[[int], None]], int], total: Callable[[], int | None]) -> JobState:
        """Start the job and return its first state; raises :class:`AlreadyRunning` while one runs."""
        with self._lock:
            if self._state.state == RUNNING:
                raise AlreadyRunning(f"a {self.name} is already running")
            self._state = JobState(state=RUNNING, started=_now())
            self._thread = threading.Thread(
                target=self._run, args=(work, total), name=f"pcm-{self.name}", daemon=True
            )
            self._thread.start()
            return self._copy()

    def status(self) -> JobState:
        with self._lock:
            return self._copy()

    def wait(self, timeout: float | None = None) -> JobState:
        """Block until the running job (if any) ends; for tests and shutdown."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        return self.status()

    def _copy(self) -> JobState:
        s = self._state
        return JobState(s.state, s.done, s.total, s.result, list(s.errors), s.started, s.finished, s.seconds)

    def _progress(self, n: int) -> None:
        with self._lock:
            self._state.done += n

    def _run(self, work: Callable[[Callable[[int], None]], int], total: Callable[[], int | None]) -> None:
        started = time.monotonic()
        result: int | None = None
        error: str | None = None
        try:
            counted = total()
            with self._lock:
                self._state.total = counted
            result = work(self._progress)
        except Exception as exc:  # the job's failure is its state, not a dead thread nobody sees
            error = str(exc) if isinstance(exc, PcmError) else f"{type(exc).__name__}: {exc}".strip()
        with self._lock:
            self._state.state = FAILED if error else DONE
            self._state.result = result
            if error:
                self._state.errors.append(error)
            self._state.finished = _now()
            self._state.seconds = round(time.monotonic() - started, 3)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")

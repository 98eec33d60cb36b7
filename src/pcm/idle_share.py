"""Work in pieces that a worker thread does on CPU time nothing else wants, the caller doing what is left.

A bulk import checks the file it loads. The loader keeps both cores of a laptop busy most of the time; a checking
thread at normal priority takes a third of the CPU from it while both run (a 10M-quad import went from 68-73 s to
79-82 s). At Linux's ``SCHED_IDLE`` the checks run only in the loader's gaps (66.7 s against 65.8-69.6 s bare). A
thread an unprivileged process put at idle priority cannot be put back, and on a machine busy with other work it may
not run at all, so the caller never waits on it: once its own wait is over it does every piece the worker has not
finished, the ones under way included, and the worker's late results are dropped.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar, cast

R = TypeVar("R")

#: A piece of work; it may return early once the event is set (its result is then dropped).
Piece = Callable[[threading.Event], R]


def idle_priority() -> None:
    """Run the calling thread only on CPU time no other thread wants (``SCHED_IDLE``); where the platform has no such
    policy, or refuses it, the thread keeps its priority and shares the cores with the caller's wait."""
    if hasattr(os, "sched_setscheduler") and hasattr(os, "SCHED_IDLE"):
        with contextlib.suppress(OSError):  # a sandbox that forbids the call: the worker runs at normal priority
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


class IdleShare(Generic[R]):
    """``pieces`` done in order by a worker at idle priority from :meth:`start`, and by the caller in :meth:`finish`."""

    def __init__(self, pieces: Sequence[Piece[R]], *, name: str) -> None:
        self._pieces = list(pieces)
        self._results: list[R | None] = [None] * len(self._pieces)
        self._done = [False] * len(self._pieces)
        self._next = 0
        self._error: BaseException | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._worker = threading.Thread(target=self._work, name=name, daemon=True)

    def start(self) -> None:
        self._worker.start()

    def _claim(self) -> int | None:
        with self._lock:
            if self._stop.is_set() or self._next >= len(self._pieces):
                return None
            self._next += 1
            return self._next - 1

    def _work(self) -> None:
        idle_priority()
        while (i := self._claim()) is not None:
            try:
                result = self._pieces[i](self._stop)
            except BaseException as exc:  # handed to the caller, which raises it from finish()
                with self._lock:
                    if not self._stop.is_set() and self._error is None:
                        self._error = exc
                    self._stop.set()
                return
            with self._lock:
                if not self._stop.is_set():
                    self._results[i], self._done[i] = result, True

    def finish(self) -> list[R]:
        """Every piece's result, in order: the caller does the pieces not yet claimed, then those the worker has not
        finished; a piece's error (the worker's, or the caller's own) is raised."""
        never = threading.Event()
        try:
            while (i := self._claim()) is not None:
                result = self._pieces[i](never)
                with self._lock:
                    self._results[i], self._done[i] = result, True
            with self._lock:
                self._stop.set()  # from here on the worker's result of a piece under way is dropped
                if self._error is not None:
                    raise self._error
                left = [i for i, done in enumerate(self._done) if not done]
            for i in left:
                self._results[i] = self._pieces[i](never)
        finally:
            self._stop.set()
        return cast("list[R]", list(self._results))

    def cancel(self) -> None:
        """Drop the work: the worker stops at its piece's next look at the event (it is never waited for)."""
        self._stop.set()

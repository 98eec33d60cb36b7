"""``pcm serve``'s extraction worker: the queued posts' facts, extracted in the background while the server serves.

With ``PCM_EXTRACTION`` queued (the default for a model on this machine), an ingest stores and indexes its posts and
returns; their ``pending`` status is the queue (docs/DESIGN.md §5). The worker drains it: one thread in the server
process, one post at a time in the queue's order (:meth:`pcm.memory.Memory.posts_to_extract`: session, then position;
a session ingested meanwhile may come in between, each session still in position order), each through
:meth:`pcm.memory.Memory.extract_queued` like ``pcm extract --pending``, so a post already extracted is never sent
again and a kill loses at most the post in hand (it stays pending).

The server has one writer: every write (and every use of the side index) happens under the front's memory lock.
The worker holds that lock for a post's reads and its write, and lets go of it while the model answers (a minute or
more for a local model), so asks, recalls and ingests are served between the calls instead of after the queue. A
stop asked for while the model answers is honoured when it returns, before anything of that post is written.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from pcm.errors import PcmError

if TYPE_CHECKING:
    from pcm.memory import Memory

_T = TypeVar("_T")

log = logging.getLogger(__name__)

#: Seconds the worker waits after an error that is not one post's own (the store unreachable, the engine
#: restarting) before it selects the queue again.
RETRY_AFTER_S = 30.0
#: Errors kept for the status (the latest last).
KEPT_ERRORS = 5
#: States of the worker: about to select the queue, waiting for posts, extracting, waiting to retry after an
#: error, stopped, ended by an unexpected error (its traceback went to stderr).
STARTING, IDLE, EXTRACTING, RETRYING, STOPPED, FAILED = "starting", "idle", "extracting", "retrying", "stopped", "failed"


class Stopping(Exception):  # noqa: N818 - a signal between two threads, not an error anyone reports
    """Raised in the worker when the model returns after a stop was asked: the post is left as it was."""


@dataclass
class QueueState:
    """What ``/api/stats`` shows of the worker."""

    state: str = IDLE
    pending: int = 0
    """Posts waiting, the one in hand included (as of the last selection, plus those ingested since)."""
    done: int = 0
    """Posts extracted by this server."""
    failed: int = 0
    """Posts whose extraction failed (status ``failed``: ``pcm extract --failed`` retries them)."""
    current: str | None = None
    """The post being extracted, if any."""
    errors: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"state": self.state, "pending": self.pending, "done": self.done, "failed": self.failed,
                "current": self.current, "errors": list(self.errors)}


class ExtractionWorker:
    """Drains the memory's extraction queue in one background thread (see the module docstring).

    ``lock`` is the front's memory lock (an ``RLock``). :meth:`notify` wakes the worker for posts just ingested
    (the memory calls it through :attr:`pcm.memory.Memory.queued_listeners`); :meth:`stop` ends it between two
    posts.
    """

    def __init__(self, memory: Memory, lock: Any) -> None:
        self.memory = memory
        self.lock = lock
        self._state = QueueState()
        self._left = 0
        """Posts of the last selection not yet worked on."""
        self._since = 0
        """Posts ingested since the last selection (not in it)."""
        self._guard = threading.Condition()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._calling = threading.Event()
        """Set while the model answers (the memory lock let go)."""
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._set(state=STARTING)
        self.memory.queued_listeners.append(self.notify)
        self._wake.set()  # posts queued before the server started
        self._thread = threading.Thread(target=self._run, name="pcm-extraction-queue", daemon=True)
        self._thread.start()

    def notify(self, queued: int = 0) -> None:
        """``queued`` new posts wait: count them now, select them after the post in hand."""
        with self._guard:
            self._since += queued
            self._state.pending = self._left + self._since
        self._wake.set()

    def status(self) -> QueueState:
        with self._guard:
            s = self._state
            return QueueState(s.state, s.pending, s.done, s.failed, s.current, list(s.errors))

    def wait_idle(self, timeout: float) -> bool:
        """Block until nothing waits and nothing is in hand (True), or ``timeout`` seconds pass (False)."""
        with self._guard:
            return self._guard.wait_for(self._idle, timeout)

    def request_stop(self) -> None:
        """Ask the worker to stop and return at once: it takes no new post, and writes nothing of the post whose
        model call is in progress. :meth:`stop` also waits for it."""
        if self.notify in self.memory.queued_listeners:
            self.memory.queued_listeners.remove(self.notify)
        self._stop.set()
        self._wake.set()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop between two posts: a write in progress ends first, and nothing of the worker is written after this
        returns. The thread is waited for up to ``timeout`` seconds, unless the model is answering: its reply would
        be dropped anyway (the post stays pending), so a shutdown does not wait minutes for a local model."""
        self.request_stop()
        with self.lock:  # the worker checks the flag whenever it takes the lock: no write of it can follow this
            calling = self._calling.is_set()
        if self._thread is not None and not calling:
            self._thread.join(timeout)
        self._set(state=STOPPED, current=None)

    # ------------------------------------------------------------------------------------------------ the thread

    def _idle(self) -> bool:
        s = self._state
        return s.state in (IDLE, STOPPED, FAILED) and s.pending == 0 and s.current is None

    def _set(self, **changes: Any) -> None:
        with self._guard:
            for name, value in changes.items():
                setattr(self._state, name, value)
            self._guard.notify_all()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._wake.wait()
                try:
                    self._drain()
                except Stopping:
                    break
                except PcmError as error:  # the store, the engine or the model's set-up, not one post's own
                    self._error(f"{type(error).__name__}: {error}")
                    if self._stop.wait(RETRY_AFTER_S):
                        break
                    self._wake.set()
        except Exception as error:  # a bug: say so in the status too, not only in the traceback on stderr
            self._error(f"{type(error).__name__}: {error}", retrying=False)
            self._set(state=FAILED, current=None)
            raise
        self._set(state=STOPPED, current=None)

    def _drain(self) -> None:
        """Extract every pending post, selecting again whenever new ones were ingested, until none waits."""
        while True:
            with self.lock:
                if self._stop.is_set():
                    raise Stopping
                self._wake.clear()  # what is ingested from here on either is in this selection or wakes the next
                posts = self.memory.posts_to_extract("pending")
                with self._guard:
                    self._left, self._since = len(posts), 0
                    self._state.pending = len(posts)
                    self._state.state = EXTRACTING if posts else IDLE
                    self._guard.notify_all()
            if not posts:
                state = self.status()
                log.info("extraction queue: empty (%d extracted, %d failed since the server started)",
                         state.done, state.failed)
                return
            for post in posts:
                if self._wake.is_set():
                    break  # posts were ingested: select again (each session still goes in position order)
                started = time.monotonic()
                with self.lock:
                    if self._stop.is_set():
                        raise Stopping
                    self._set(current=post)
                    report = self.memory.extract_queued([post], around_model=self._outside_lock)
                state = self._count(report.extracted, report.failed, report.failures)
                outcome = "extracted" if report.extracted else "failed" if report.failed else "passed over"
                log.info("extraction queue: %s %s in %.1f s (%d done, %d waiting)", outcome, post,
                         time.monotonic() - started, state.done, state.pending)

    def _outside_lock(self, call: Callable[[], _T]) -> _T:
        """A model call made with the memory lock let go (the worker holds it exactly once around a post), so the
        server answers between calls; a stop asked for meanwhile wins over the reply: nothing of the post is
        written."""
        self._calling.set()
        self.lock.release()
        try:
            return call()
        finally:
            self.lock.acquire()
            self._calling.clear()
            if self._stop.is_set():
                raise Stopping  # noqa: B012 - the stop wins over the reply: nothing of this post is written

    def _count(self, extracted: int, failed: int, failures: list[tuple[str, str]]) -> QueueState:
        with self._guard:
            s = self._state
            self._left = max(0, self._left - 1)
            s.done += extracted
            s.failed += failed
            s.current = None
            s.pending = self._left + self._since
            s.errors = (s.errors + [f"{post}: {reason}" for post, reason in failures])[-KEPT_ERRORS:]
            self._guard.notify_all()
        return self.status()

    def _error(self, message: str, *, retrying: bool = True) -> None:
        if retrying:
            log.warning("extraction queue: %s (selecting again in %.0f s)", message, RETRY_AFTER_S)
        with self._guard:
            self._state.errors = (self._state.errors + [message])[-KEPT_ERRORS:]
            self._state.current = None
            if retrying:
                self._state.state = RETRYING
            self._guard.notify_all()

"""How pcm waits for a model: silence deadlines, one request at a time to a local server, progress on stderr.

Why this exists: a small local model on a CPU can spend minutes reading a long prompt before its first token. A
deadline on the *total* time then fires during that prefill, and re-sending the request to a server that handles
one request at a time only queues a second copy behind the first. So every network client here

* streams its reply and gives up only after ``idle`` seconds of *silence* (no byte received), never because the
  whole answer took long;
* picks that deadline by where the model runs: a hosted API answers its first byte within seconds, a local server
  (a loopback URL) may legitimately stay silent for minutes;
* never re-sends a request the server may still be working on (a read deadline, a connection dropped mid-reply);
  only a refused connection or an explicit "busy, try later" status is retried;
* sends one request at a time to a local server (the gate below is shared by every client of one URL);
* prints a progress line on stderr while a long wait goes on, so a user of a slow model sees it working.
"""

from __future__ import annotations

import ipaddress
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from urllib.parse import urlsplit

#: Seconds of silence after which a hosted API is given up on (its first byte normally comes within seconds).
HOSTED_IDLE_TIMEOUT = 120.0
#: Seconds of silence after which a local server is given up on: a 6k-token prompt on a 2-core CPU takes minutes.
LOCAL_IDLE_TIMEOUT = 900.0
#: Seconds without a reply before the first progress line, and between two lines.
PROGRESS_AFTER = 10.0
PROGRESS_EVERY = 15.0

_GATES: dict[str, threading.Lock] = {}
_GATES_LOCK = threading.Lock()


def is_local(url: str) -> bool:
    """Whether ``url`` points at this machine (localhost or a loopback address): a local model server."""
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def idle_timeout(configured: float | None, *, local: bool) -> float:
    """The silence deadline: the configured one (``PCM_LLM_TIMEOUT``) or the default for where the model runs."""
    if configured is not None:
        return configured
    return LOCAL_IDLE_TIMEOUT if local else HOSTED_IDLE_TIMEOUT


def gate(url: str, *, local: bool) -> AbstractContextManager[object]:
    """One request at a time to a local server (shared by every client of that URL); no limit for hosted APIs."""
    if not local:
        return nullcontext()
    key = url.rstrip("/")
    with _GATES_LOCK:
        return _GATES.setdefault(key, threading.Lock())


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Wait:
    """The state of one request in flight, reported by a background line printer (see :func:`waiting`)."""

    def __init__(self, *, streaming: bool = True) -> None:
        self.started = time.monotonic()
        self.streaming = streaming
        """Whether pieces of the reply are seen as they come (a streamed reply), or only the whole at the end."""
        self.chunks = 0
        """Pieces of the reply received so far (0 while the model is still reading the prompt)."""

    def received(self, n: int = 1) -> None:
        self.chunks += n

    def describe(self, name: str) -> str:
        elapsed = time.monotonic() - self.started
        if not self.streaming:
            return f"pcm: {name}: {elapsed:.0f} s, the model is reading the prompt and writing its answer"
        if not self.chunks:
            return f"pcm: {name}: {elapsed:.0f} s, waiting for the first token (the model is reading the prompt)"
        return f"pcm: {name}: {elapsed:.0f} s, {self.chunks} piece(s) of the reply so far"


@contextmanager
def waiting(
    name: str,
    *,
    after: float = PROGRESS_AFTER,
    every: float = PROGRESS_EVERY,
    write: Callable[[str], None] | None = None,
    streaming: bool = True,
) -> Iterator[Wait]:
    """Report a long wait: after ``after`` seconds, then every ``every`` seconds, one line through ``write``."""
    state = Wait(streaming=streaming)
    done = threading.Event()
    out = write or _stderr

    def report() -> None:
        delay = after
        while not done.wait(delay):
            out(state.describe(name))
            delay = every

    ticker = threading.Thread(target=report, name="pcm-llm-progress", daemon=True)
    ticker.start()
    try:
        yield state
    finally:
        done.set()
        ticker.join()

"""The front's own cost per request, measured inside the front: what ``pcm serve`` adds on top of its engine.

Latency seen by a client mixes the engine, the network and the machine's load; the share spent in pcm's code is
the part we control, so it is measured where it happens. Every request that reaches the engine records two
durations: the engine's (from handing the request to the engine client to the last byte back, so the client's
own work is counted there) and the front's (everything else, from the request entering the application, its
head already parsed by uvicorn, to the answer handed back for writing). Clients see them per request in a ``Server-Timing`` header; ``GET /api/timings``
summarises the most recent ones.
"""

from __future__ import annotations

import collections
import threading
from typing import Any

#: How many recent requests the summary covers.
WINDOW = 4096


class Timings:
    """Recent front and engine durations (nanoseconds), safe to record from every handler thread."""

    def __init__(self, window: int = WINDOW) -> None:
        self._lock = threading.Lock()
        self._front: collections.deque[int] = collections.deque(maxlen=window)
        self._engine: collections.deque[int] = collections.deque(maxlen=window)
        self.count = 0

    def record(self, front_ns: int, engine_ns: int) -> None:
        with self._lock:
            self._front.append(front_ns)
            self._engine.append(engine_ns)
            self.count += 1

    def summary(self) -> dict[str, Any]:
        """Count since start, and mean/p50/p95/p99 in milliseconds over the window."""
        with self._lock:
            front, engine, count = sorted(self._front), sorted(self._engine), self.count
        return {"requests": count, "window": len(front), "front_ms": _figures(front), "engine_ms": _figures(engine)}


def _figures(values: list[int]) -> dict[str, float] | None:
    if not values:
        return None

    def pick(q: float) -> float:
        return round(values[min(len(values) - 1, int(q * len(values)))] / 1e6, 3)

    return {"mean": round(sum(values) / len(values) / 1e6, 3), "p50": pick(0.5), "p95": pick(0.95), "p99": pick(0.99)}


def server_timing(front_ns: int, engine_ns: int) -> str:
    """A ``Server-Timing`` header value: the front's share so far and the engine's, in milliseconds."""
    return f"front;dur={front_ns / 1e6:.3f}, engine;dur={engine_ns / 1e6:.3f}"

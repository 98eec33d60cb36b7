"""Deterministic crash points, for the fault-injection tests only (``PCM_FAULT_POINT=name:n``).

Crash safety is claimed for every moment between two durable writes; testing it with timed kills would hit
random moments and rarely the interesting ones. Instead, each durable write calls :func:`reached` with the name
of its kind (``store``, ``index``, ``compact``), and when ``PCM_FAULT_POINT`` names that kind and ``n`` the
process kills itself with SIGKILL the n-th time one is reached: no handler, no flush, exactly like ``kill -9``
right after that write. ``name:n`` may also be ``*:n`` (the n-th durable write of any kind).

Unset (every real run), :func:`reached` is one global lookup and a ``None`` test.
"""

from __future__ import annotations

import os
import signal

from pcm.errors import UsageError

_seen = 0


def _parse(raw: str | None) -> tuple[str, int] | None:
    if not raw:
        return None
    name, _, count = raw.rpartition(":")
    if not name or not count.isdigit() or int(count) < 1:
        raise UsageError(f"PCM_FAULT_POINT={raw!r}: expected NAME:N with N >= 1 (e.g. store:3)")
    return name, int(count)


_SPEC: tuple[str, int] | None = _parse(os.environ.get("PCM_FAULT_POINT"))


def reached(name: str) -> None:
    """A durable write of kind ``name`` just completed: die here if this is the configured crash point."""
    global _seen
    if _SPEC is None:
        return
    target, crash_at = _SPEC
    if target not in (name, "*"):
        return
    _seen += 1
    if _seen >= crash_at:
        os.kill(os.getpid(), signal.SIGKILL)

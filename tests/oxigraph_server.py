"""Run a real ``oxigraph serve`` for tests (the ``oxigraph`` PyPI package ships the binary).

Use it as a context manager, directly or inside a fixture::

    with start_oxigraph(tmp_path / "db", timeout_s=1) as base_url:
        backend = RemoteBackend(base_url + "/query")

The server is killed on exit, whatever happened inside. Tests are skipped, not failed, when the binary is absent.
"""

from __future__ import annotations

import collections
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

#: Bounded waits: for the server to answer after start, and for it to exit after terminate.
START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 5.0
_START_ATTEMPTS = 3


def _free_port() -> int:
    """A port free right now (another process may still take it: start retries on early exit)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _drain(stream: object, sink: collections.deque[str]) -> None:
    """Keep the server's stderr pipe from filling up; remember its last lines for error messages."""
    for line in stream:  # type: ignore[attr-defined]
        sink.append(line.decode("utf-8", "replace").rstrip())


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=STOP_TIMEOUT_S)


def wait_until_up(proc: subprocess.Popen[bytes], answers: Callable[[], bool], what: str, timeout_s: float) -> bool:
    """True once ``answers()`` (one bounded HTTP probe) says the server is ready; False if it exited first (port
    taken, bad location). A server says nothing else when it is ready, so readiness is its first good answer."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            if answers():
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not answer within {timeout_s:g} s")


@contextmanager
def start_oxigraph(
    location: Path | None, *, timeout_s: int | None = None, union_default_graph: bool = False
) -> Iterator[str]:
    """Start ``oxigraph serve`` on a free local port and yield its base URL (``http://127.0.0.1:PORT``).

    ``location`` None means an in-memory store. ``timeout_s`` sets the server's query time limit;
    ``union_default_graph`` makes every query see the union of graphs without asking for it.
    """
    binary = shutil.which("oxigraph")
    if binary is None:
        pytest.skip("the `oxigraph` server binary is not on PATH (it comes with `pip install oxigraph`)")
    for _attempt in range(_START_ATTEMPTS):
        port = _free_port()
        command = [binary, "serve", "--bind", f"127.0.0.1:{port}"]
        if location is not None:
            command += ["--location", str(location)]
        if timeout_s is not None:
            command += ["--timeout-s", str(timeout_s)]
        if union_default_graph:
            command.append("--union-default-graph")
        stderr_tail: collections.deque[str] = collections.deque(maxlen=20)
        proc = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        threading.Thread(target=_drain, args=(proc.stderr, stderr_tail), daemon=True).start()
        base_url = f"http://127.0.0.1:{port}"
        try:
            def answers(url: str = base_url) -> bool:
                return httpx.head(url + "/", timeout=0.5).status_code > 0  # any answer: it is serving

            if wait_until_up(proc, answers, "oxigraph serve", START_TIMEOUT_S):
                yield base_url
                return
        finally:
            _stop(proc)
    raise RuntimeError(f"oxigraph serve exited at start ({_START_ATTEMPTS} tries): {' | '.join(stderr_tail)}")

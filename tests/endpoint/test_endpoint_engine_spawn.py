"""The SPARQL engine is started, and restarted by the watchdog, without forking a process that has LanceDB loaded
(LanceDB's fork handler warns of a deadlock in the child), and it still dies with the process that started it."""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("oxigraph") is None, reason="the `oxigraph` server binary is not on PATH"),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the engine's parent-death signal is Linux's"),
]

#: A server's life in brief: the side index (LanceDB, its async runtime running) is open when the engine restarts.
SCRIPT = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path

    import lancedb

    from pcm.endpoint.engine import Engine

    tmp = Path(sys.argv[1])
    lancedb.connect(str(tmp / "index")).create_table("posts", data=[{"x": 1}])
    engine = Engine(tmp / "store", timeout_s=5)
    engine.start()
    first = engine.pid
    engine.restart()
    print(first, engine.pid, flush=True)
    if sys.argv[2] == "die":
        os.kill(os.getpid(), 9)  # no clean-up: only the parent-death signal can stop the engine now
    engine.stop()
    """
)


def _run(tmp_path: Path, ending: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-W", "default", "-c", SCRIPT, str(tmp_path), ending],
        capture_output=True, text=True, timeout=120, check=False,
    )


def test_engine_restart_with_lancedb_loaded_forks_nothing(tmp_path: Path) -> None:
    done = _run(tmp_path, "stop")
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.split()
    assert first != second, "the engine was restarted as a new process"
    assert "fork" not in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr


def test_engine_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    done = _run(tmp_path, "die")
    assert done.returncode == -9, done.stderr
    engine = int(done.stdout.split()[1])
    _wait_for_exit(engine, 10)
    assert not _running(engine), "the engine outlived pcm serve and would keep the store's lock"


def _wait_for_exit(pid: int, timeout: float) -> None:
    """Until ``pid`` has exited (a pidfd turns readable then, zombie or not) or ``timeout`` seconds pass."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        select.select([fd], [], [], timeout)
    finally:
        os.close(fd)


def _running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (a dead engine waits as one for init to reap it)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False

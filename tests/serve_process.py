"""`pcm serve` started as a user starts it, for the tests that need a real server process (one copy of the start
and stop every such test shares)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


@contextmanager
def serve_process(
    memory: Path, *flags: str, env: Mapping[str, str], stderr: IO[Any] | int,
    why: Callable[[subprocess.Popen[str]], str],
) -> Iterator[tuple[subprocess.Popen[str], dict[str, Any]]]:
    """``pcm serve --bind 127.0.0.1:0 --json FLAGS`` on ``memory``: the process and what it announced on stdout,
    once it has (``why(process)`` says what went wrong when it exits first); stopped with SIGTERM afterwards."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pcm.cli", "--memory", str(memory), "serve", "--bind", "127.0.0.1:0", "--json", *flags],
        env=dict(env), stdout=subprocess.PIPE, stderr=stderr, text=True,
    )
    try:
        assert proc.stdout is not None
        lines: list[str] = []
        while not lines or lines[-1].rstrip() != "}":
            line = proc.stdout.readline()
            assert line, why(proc)
            lines.append(line)
        yield proc, json.loads("".join(lines))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

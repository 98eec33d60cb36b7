"""`pcm serve` started as a user starts it, for the tests that need a real server process (one copy of the start
and stop every such test shares)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

SRC = Path(__file__).resolve().parents[1] / "src"


@dataclass
class Served:
    """A running ``pcm serve``: its URL, pid, and the file its stderr goes to."""

    url: str
    pid: int
    log: Path

    @property
    def address(self) -> tuple[str, int]:
        parts = urlsplit(self.url)
        assert parts.hostname and parts.port
        return parts.hostname, parts.port

    def connect(self) -> socket.socket:
        return socket.create_connection(self.address, timeout=30)

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


def serve_env(token: str) -> dict[str, str]:
    """This environment for a served test memory: no model, no index, ``token`` as the write token, and none of the
    caller's memory or store settings."""
    env = {**os.environ, "PYTHONPATH": str(SRC), "PCM_LLM": "none", "PCM_INDEX": "off", "PCM_TOKEN": token}
    env.pop("PCM_MEMORY", None)
    env.pop("PCM_STORE_URL", None)
    return env


@contextmanager
def served_with_log(memory: Path, log: Path, *flags: str, token: str) -> Iterator[Served]:
    """:func:`serve_process` with stderr in ``log``, as a :class:`Served`."""
    with log.open("w") as err, serve_process(
        memory, *flags, env=serve_env(token), stderr=err, why=lambda _: log.read_text()
    ) as (proc, announced):
        yield Served(announced["url"], proc.pid, log)


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

"""A supervisor for the slow-client tests: polls a server's health check until its stdin closes.

Usage: ``python tests/health_poll.py HOST PORT PID``. Every 50 ms it opens a connection, sends ``GET /api/health``
and reads the answer to the end, then prints one JSON line: the status, the seconds the check took, how much of
that the scheduler kept the server or this process waiting for a CPU (``starved``), and the server's resident
memory (``VmRSS`` of PID) in MB. It runs in its own process so that what it measures is the server, not the test's
own threads competing for the test process's interpreter lock. It stops when the test closes its stdin (waited on
with ``select``, which is also its pause between two checks).

``starved`` is the growth of the run-queue delay (the second field of ``/proc/…/schedstat``) of every thread of the
server and of this process during the check: time they were ready to run and no CPU was free. On a machine shared
with other work (two cores and a benchmark, at ``nice 19``), that delay alone reached half a second; it is the
machine's, not the server's, so a test may leave it out of a latency bound.
"""

from __future__ import annotations

import json
import select
import socket
import sys
import time
from pathlib import Path

REQUEST = b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"


def resident_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise SystemExit(f"no VmRSS for pid {pid}")


def waited_ns(pid: int) -> int:
    """Nanoseconds the server's threads and this process have spent ready to run without a CPU, so far."""
    total = int(Path("/proc/self/schedstat").read_text().split()[1])
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[1])
        except FileNotFoundError:  # a thread that ended meanwhile
            continue
    return total


def check(address: tuple[str, int], pid: int) -> dict[str, float]:
    waited = waited_ns(pid)
    started = time.perf_counter()
    with socket.create_connection(address, timeout=30) as sock:
        sock.sendall(REQUEST)
        answer = b""
        while piece := sock.recv(65536):
            answer += piece
    seconds = time.perf_counter() - started
    return {"status": int(answer.split(b" ", 2)[1]) if answer else 0, "seconds": seconds,
            "starved": (waited_ns(pid) - waited) / 1e9, "resident_mb": resident_mb(pid), "at": time.monotonic()}


def main(host: str, port: str, pid: str) -> None:
    while True:
        print(json.dumps(check((host, int(port)), int(pid))), flush=True)
        if select.select([sys.stdin], [], [], 0.05)[0]:  # readable: closed (the test writes nothing)
            return


if __name__ == "__main__":
    main(*sys.argv[1:4])

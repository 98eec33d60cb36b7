"""The SPARQL engine behind ``pcm serve``: Oxigraph's own server, on loopback, started and watched by pcm.

Why a child process rather than pyoxigraph inside the front: the engine must be stoppable. Oxigraph 0.5.13's
``--timeout-s`` cancels only some query shapes, and closing the connection stops a query only while it streams
rows; a big ``ORDER BY`` (or any operator that must see every input before its first output) keeps sorting, and
growing, after its client has gone. Nothing inside a process can stop such a query, so the hard time limit is
enforced on the process: :class:`Watchdog` restarts the engine when a query abandoned at the limit keeps a thread
busy. RocksDB is crash-safe and every write is one transaction, so a restart loses nothing that was committed.

An in-process fast path for SELECT/ASK (pyoxigraph ``Store.query`` beside the child) was considered for latency
and rejected: the child holds the store's lock, ``Store.read_only`` sees a snapshot frozen at open (stale after
any write), and a query run in-process cannot be stopped at its time limit, which the issue requires.
"""

from __future__ import annotations

import collections
import contextlib
import math
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import anyio.to_thread
import httpx

from pcm.endpoint import deathsig
from pcm.errors import MemoryLockedError, PcmError

#: Bounded waits for the engine to answer after start and to exit after a signal.
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 5.0


def free_port(host: str = "127.0.0.1") -> int:
    """A port free right now on ``host`` (the engine may still lose it to a race: start retries)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _dying_with_parent(command: list[str]) -> list[str]:
    """On Linux, ``command`` started through :mod:`pcm.endpoint.deathsig`, which has Linux SIGTERM the engine if
    ``pcm serve`` dies (no orphan keeps the store lock) and is started without forking the server."""
    if not sys.platform.startswith("linux"):
        return command
    return [sys.executable, "-I", "-S", str(Path(deathsig.__file__)), str(os.getpid()), *command]


def engine_binary(name: str = "oxigraph") -> str | None:
    """The engine's server binary, found from pcm's own installation first: the scripts directory of the Python
    environment pcm runs in (``bin`` of a virtual environment, where ``pip install oxigraph`` puts it), then the
    user scripts directory, then ``PATH``. An assistant that starts pcm by its absolute path (``/venv/bin/pcm
    serve``) rarely has that environment's ``bin`` on ``PATH``."""
    found = [sysconfig.get_path("scripts"), str(Path(sys.executable).parent)]
    user = f"{os.name}_user"
    if user in sysconfig.get_scheme_names():
        found.append(sysconfig.get_path("scripts", user))
    for directory in dict.fromkeys(found):
        binary = shutil.which(name, path=directory)
        if binary is not None:
            return binary
    return shutil.which(name)


class Engine:
    """One ``oxigraph serve`` child on ``127.0.0.1``, over the memory's store directory (or in memory)."""

    def __init__(self, location: Path | None, *, timeout_s: float, binary: str | None = None) -> None:
        self.location = location
        self.timeout_s = timeout_s
        self.binary = binary or engine_binary() or ""
        self.port = 0
        self.restarts = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: collections.deque[str] = collections.deque(maxlen=20)

    # -- addresses ---------------------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def query_url(self) -> str:
        return self.base_url + "/query"

    @property
    def idle_timeout_s(self) -> float | None:
        """Seconds after which the engine drops an idle keep-alive connection (None: not known).

        Oxigraph's server applies ``--timeout-s`` to idle connections too: when it runs out it writes an unasked
        ``500 Resource temporarily unavailable`` on the connection and closes it, so a client reusing that
        connection later reads the 500 as its own answer. Pools to the engine must expire connections sooner.
        """
        return float(max(1, math.ceil(self.timeout_s))) if self.timeout_s > 0 else None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    # -- lifecycle ---------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the engine on a free port (or on the port it had, after a restart)."""
        if not self.binary:
            raise PcmError("the `oxigraph` server binary is neither in pcm's environment nor on PATH (it comes with "
                           "`pip install oxigraph`)")
        keep_port = self.port != 0
        for _attempt in range(3):
            if not keep_port:
                self.port = free_port()
            self._spawn()
            if self._wait_until_up():
                return
            self._raise_if_locked()
        raise PcmError(f"the SPARQL engine did not start: {self._last_error()}")

    def _spawn(self) -> None:
        command = [self.binary, "serve", "--bind", f"127.0.0.1:{self.port}"]
        if self.location is not None:
            command += ["--location", str(self.location)]
        if self.timeout_s > 0:
            command += ["--timeout-s", str(max(1, math.ceil(self.timeout_s)))]
        self._stderr.clear()
        # no preexec_fn: it would make subprocess fork this process, LanceDB and all (docstring of deathsig)
        self._proc = subprocess.Popen(
            _dying_with_parent(command),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            close_fds=True,
        )
        threading.Thread(target=self._drain, args=(self._proc,), daemon=True).start()

    def _drain(self, proc: subprocess.Popen[bytes]) -> None:
        """Keep the stderr pipe from filling up; remember its last lines for error messages."""
        assert proc.stderr is not None
        with proc.stderr:  # closed at the engine's exit, by the thread that reads it
            for line in proc.stderr:
                text = line.decode("utf-8", "replace").rstrip()
                if text:
                    self._stderr.append(text)

    def _wait_until_up(self) -> bool:
        """True once the engine answers HTTP; False if it exited first (port taken, store locked)."""
        assert self._proc is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                self._proc.wait()
                time.sleep(0.05)  # let the drain thread collect the last lines
                return False
            try:
                httpx.head(self.base_url + "/", timeout=0.5)
                return True
            except httpx.HTTPError:
                time.sleep(0.03)
        self.stop()
        raise PcmError(f"the SPARQL engine did not answer within {START_TIMEOUT_S:g} s")

    def _last_error(self) -> str:
        errors = [line for line in self._stderr if line.startswith("Error")]
        return (errors or list(self._stderr) or ["it exited without a message"])[0]

    def _raise_if_locked(self) -> None:
        message = self._last_error()
        if "LOCK" in message or "lock" in message:
            raise MemoryLockedError(
                f"memory store {self.location} is locked by another process (a running pcm command?); stop it first"
            )

    def stop(self, *, kill: bool = False) -> None:
        """Stop the engine (SIGTERM, or SIGKILL at once with ``kill``: the store is crash-safe)."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        if kill:
            proc.kill()
        else:
            proc.terminate()
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=STOP_TIMEOUT_S)

    def restart(self) -> None:
        """Kill the engine (stopping whatever it was computing) and start it again on the same port."""
        self.stop(kill=True)
        self.restarts += 1
        self.start()

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    # -- what its threads are doing ----------------------------------------------------------------------------

    def thread_cpu(self) -> dict[int, float]:
        """CPU seconds used so far by each thread of the engine (Linux ``/proc``; empty elsewhere)."""
        pid = self.pid
        if pid is None:
            return {}
        ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        result: dict[int, float] = {}
        with contextlib.suppress(OSError):
            for tid in os.listdir(f"/proc/{pid}/task"):
                with contextlib.suppress(OSError, ValueError, IndexError):
                    with open(f"/proc/{pid}/task/{tid}/stat", encoding="ascii") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                    result[int(tid)] = (int(fields[11]) + int(fields[12])) / ticks
        return result


class Watchdog:
    """Restarts the engine when a query that was given up at the time limit keeps running inside it.

    Every request to the engine is counted while in flight (:meth:`request`). When one is abandoned at its
    deadline (:meth:`abandoned`), the watchdog samples the engine's threads: if more threads are busy than
    requests are in flight, for ``grace`` seconds in a row, the abandoned work is still running and the engine is
    restarted. If the engine goes idle first (streaming queries stop when their connection closes), the watch
    ends without a restart. Requests wait at a gate while a restart is under way.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        grace: float = 1.0,
        tick: float = 0.2,
        busy_share: float = 0.2,
        on_restart: Callable[[], None] | None = None,
    ) -> None:
        self.engine = engine
        self.grace = grace
        self.tick = tick
        self.busy_share = busy_share
        self.on_restart = on_restart
        self.generation = 0
        self._inflight = 0
        self._abandoned_at: float | None = None
        self._lock = threading.Lock()
        self._open = threading.Event()
        self._open.set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="pcm-engine-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    @contextlib.contextmanager
    def request(self) -> Iterator[int]:
        """Count one request to the engine while it runs; yields the engine generation it runs against."""
        self._open.wait(timeout=30)
        generation = self._enter()
        try:
            yield generation
        finally:
            self._leave()

    @contextlib.asynccontextmanager
    async def arequest(self) -> AsyncIterator[int]:
        """:meth:`request` for the event loop: waiting at the gate during a restart does not block the loop."""
        if not self._open.is_set():
            await anyio.to_thread.run_sync(self._open.wait, 30)
        generation = self._enter()
        try:
            yield generation
        finally:
            self._leave()

    def _enter(self) -> int:
        with self._lock:
            self._inflight += 1
            return self.generation

    def _leave(self) -> None:
        with self._lock:
            self._inflight -= 1

    def abandoned(self) -> None:
        """A request to the engine was given up at its time limit."""
        with self._lock:
            if self._abandoned_at is None:
                self._abandoned_at = time.monotonic()

    @property
    def inflight(self) -> int:
        with self._lock:
            return self._inflight

    def _run(self) -> None:
        # The engine's threads are sampled only while a request is given up: the engine runs a thread for every
        # query's time limit (``--timeout-s``), thousands at a few hundred queries a second, and reading each one's
        # /proc entry five times a second took about a third of the front's CPU under load.
        previous: dict[int, float] | None = None
        strikes = 0
        calm = 0
        while not self._stop.wait(self.tick):
            if not self.engine.alive():
                self._restart()  # it died (killed, out of memory): bring it back rather than answer 503 forever
                previous, strikes, calm = None, 0, 0
                continue
            with self._lock:
                watching = self._abandoned_at is not None
            if not watching:
                previous, strikes, calm = None, 0, 0
                continue
            current = self.engine.thread_cpu()
            if previous is None:  # the first sample of a watch: what the threads had used before it
                previous = current
                continue
            busy = sum(
                1 for tid, used in current.items() if used - previous.get(tid, used) >= self.busy_share * self.tick
            )
            previous = current
            with self._lock:
                inflight = self._inflight
            if busy > inflight:
                strikes, calm = strikes + 1, 0
            elif busy == 0:
                strikes, calm = 0, calm + 1
            else:
                strikes = calm = 0  # as many busy threads as requests: cannot tell yet, keep watching
            if strikes * self.tick >= self.grace:
                self._restart()
                previous, strikes, calm = None, 0, 0
            elif calm * self.tick >= self.grace:
                with self._lock:
                    self._abandoned_at = None
                calm = 0

    def _restart(self) -> None:
        self._open.clear()
        try:
            with self._lock:
                self.generation += 1
                self._abandoned_at = None
            self.engine.restart()
            if self.on_restart is not None:
                self.on_restart()
        except Exception as exc:  # the watchdog must outlive a failed start: it tries again next tick
            print(f"pcm serve: restarting the SPARQL engine failed: {exc}", file=sys.stderr)
        finally:
            self._open.set()

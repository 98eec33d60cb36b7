"""Run a real Virtuoso (Debian's ``virtuoso-opensource``) for tests, on loopback, over a temporary database.

Use it as a context manager, directly or inside a fixture::

    with start_virtuoso(tmp_path / "virtuoso") as base_url:
        backend = RemoteBackend(base_url, user=VIRTUOSO_USER, password=VIRTUOSO_PASSWORD)

A fresh database has the ``dba`` account with password ``dba``: writes go through Virtuoso's Digest-authenticated
endpoints (``/sparql-auth``, ``/sparql-graph-crud-auth``), reads may use ``/sparql``. Both ports are bound to
127.0.0.1. The server is stopped on exit, whatever happened inside. Tests are skipped, not failed, when the binary
is absent (``apt-get install virtuoso-opensource``; ``.ci/run`` does it).
"""

from __future__ import annotations

import collections
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.oxigraph_server import _drain, _free_port, _stop, wait_until_up

VIRTUOSO_USER = "dba"
VIRTUOSO_PASSWORD = "dba"
#: A fresh database builds its system tables first: about 10 s on a busy two-core machine.
START_TIMEOUT_S = 120.0
_START_ATTEMPTS = 3

_INI = """\
[Database]
DatabaseFile = {db}/virtuoso.db
ErrorLogFile = {db}/virtuoso.log
LockFile = {db}/virtuoso.lck
TransactionFile = {db}/virtuoso.trx
xa_persistent_file = {db}/virtuoso.pxa
ErrorLogLevel = 7
FileExtend = 200
MaxCheckpointRemap = 2000
Striping = 0
TempStorage = TempDatabase

[TempDatabase]
DatabaseFile = {db}/virtuoso-temp.db
TransactionFile = {db}/virtuoso-temp.trx
MaxCheckpointRemap = 2000
Striping = 0

[Parameters]
ServerPort = 127.0.0.1:{sql_port}
DisableUnixSocket = 1
CheckpointInterval = 60
NumberOfBuffers = 10000
MaxDirtyBuffers = 6000
DirsAllowed = .
ThreadsPerQuery = 1

[HTTPServer]
ServerPort = 127.0.0.1:{http_port}
ServerRoot = {db}/vsp
ServerThreads = 10
MaxKeepAlives = 10
KeepAliveTimeout = 10
Charset = UTF-8

[SPARQL]
ResultSetMaxRows = {max_rows}
MaxQueryExecutionTime = 60
"""


@contextmanager
def start_virtuoso(location: Path, *, max_rows: int = 1_000_000) -> Iterator[str]:
    """Start ``virtuoso-t`` over a new database in ``location`` and yield its base URL (``http://127.0.0.1:PORT``).

    ``max_rows``: Virtuoso's ``ResultSetMaxRows``, where it cuts every answer (10,000 in Debian's own ini).
    """
    binary = shutil.which("virtuoso-t")
    if binary is None:
        pytest.skip("the `virtuoso-t` binary is not on PATH (apt-get install virtuoso-opensource)")
    for attempt in range(_START_ATTEMPTS):
        db = location / f"db{attempt}"
        (db / "vsp").mkdir(parents=True)
        http_port, sql_port = _free_port(), _free_port()
        ini = db / "virtuoso.ini"
        ini.write_text(_INI.format(db=db, sql_port=sql_port, http_port=http_port, max_rows=max_rows), encoding="utf-8")
        stderr_tail: collections.deque[str] = collections.deque(maxlen=20)
        proc = subprocess.Popen(
            [binary, "+foreground", "+configfile", str(ini)],
            cwd=db,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        threading.Thread(target=_drain, args=(proc.stderr, stderr_tail), daemon=True).start()
        base_url = f"http://127.0.0.1:{http_port}"
        try:
            def answers(url: str = base_url + "/sparql") -> bool:
                return httpx.get(url, timeout=1.0).status_code == 200

            if wait_until_up(proc, answers, "virtuoso", START_TIMEOUT_S):
                yield base_url
                return
        finally:
            _stop(proc)
    raise RuntimeError(f"virtuoso exited at start ({_START_ATTEMPTS} tries): {' | '.join(stderr_tail)}")

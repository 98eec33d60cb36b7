"""``serve.json``: how a CLI command finds the ``pcm serve`` that holds its memory.

While a server runs, it owns the store lock; a command that opened the store itself would fail. The server writes
this small file into the memory directory when it is ready and removes it when it stops, so commands can go
through it instead. A file left behind by a killed server is recognised as stale (its pid is gone, or nothing
answers at its URL) and ignored.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

SERVE_FILE = "serve.json"


@dataclass(frozen=True)
class ServerInfo:
    """Where a running ``pcm serve`` answers, and whether it takes writes."""

    url: str
    """Base URL of the front (``http://127.0.0.1:7878``); the explorer is at ``url + "/"``."""
    pid: int
    token_required: bool
    """True when the owner configured a token: writes need it. False means the server is read-only over HTTP."""
    memory: str
    started: str
    read_token: str = ""
    """The token reads need when the server listens beyond loopback ("" when they need none), so the owner's
    commands read through it. Kept here because this file is the owner's alone, inside the owner's memory
    directory (pcm.private): whoever can read it can read the store's files themselves."""

    @property
    def query_url(self) -> str:
        """SPARQL query endpoint: give it to :class:`pcm.backend_remote.RemoteBackend` (``settings.engine_url``)."""
        return self.url + "/query"

    @property
    def update_url(self) -> str:
        return self.url + "/update"

    @property
    def store_url(self) -> str:
        """Graph Store Protocol endpoint."""
        return self.url + "/store"

    @property
    def api_url(self) -> str:
        return self.url + "/api"

    def as_json(self) -> dict[str, object]:
        """What a command may print: the read token left out."""
        shown = {k: v for k, v in asdict(self).items() if k != "read_token"}
        return {**shown, "query_url": self.query_url, "store_url": self.store_url, "api_url": self.api_url}

    def auth(self, token: str = "") -> dict[str, str]:
        """The ``Authorization`` header for a command's calls: its own token (the write token also reads), else
        the server's read token; none when neither is set."""
        chosen = token or self.read_token
        return {"Authorization": f"Bearer {chosen}"} if chosen else {}


def write_info(memory_path: Path, info: ServerInfo) -> Path:
    """Write ``serve.json`` atomically, readable by the owner only."""
    path = memory_path / SERVE_FILE
    tmp = path.with_suffix(".json.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(asdict(info), f, indent=2)
    os.replace(tmp, path)
    return path


def remove_info(memory_path: Path, pid: int) -> None:
    """Remove ``serve.json`` if it is this server's (a newer server may have replaced it)."""
    path = memory_path / SERVE_FILE
    info = read_info(path)
    if info is not None and info.pid == pid:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def read_info(path: Path) -> ServerInfo | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return ServerInfo(
            url=str(data["url"]).rstrip("/"),
            pid=int(data["pid"]),
            token_required=bool(data["token_required"]),
            memory=str(data.get("memory", "")),
            started=str(data.get("started", "")),
            read_token=str(data.get("read_token", "")),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def discover(memory_path: Path, *, probe: bool = True, timeout: float = 1.0) -> ServerInfo | None:
    """The server running for this memory, or None.

    ``probe`` asks the server itself (``GET /api/health``) and checks it serves this memory, so a stale file whose
    pid was reused by an unrelated process is not trusted.
    """
    info = read_info(Path(memory_path) / SERVE_FILE)
    if info is None or not pid_alive(info.pid):
        return None
    if not probe:
        return info
    import httpx  # only here: reading the file is on every command's path, probing is not

    try:
        response = httpx.get(info.url + "/api/health", headers=info.auth(), timeout=timeout)
        health = response.json()
    except (httpx.HTTPError, ValueError):
        return None
    if response.status_code != 200 or health.get("pid") != info.pid:
        return None
    return info

"""Limits and switches of one ``pcm serve``: safe defaults for a personal memory."""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass

from pcm.errors import UsageError

MB = 1024 * 1024
DEFAULT_BIND = "127.0.0.1:7878"


@dataclass(frozen=True)
class ServeConfig:
    """What the front enforces. Every default is the safe one: loopback, read-only, no CORS, bounded."""

    bind: str = DEFAULT_BIND
    #: Bearer token required for updates, Graph Store writes and ingest; empty means the server is read-only.
    token: str = ""
    #: Bearer token required for reads when the server listens beyond loopback (the write token is taken too).
    read_token: str = ""
    #: Beyond loopback, answer reads without a token: chosen on purpose (``--public-read``), never a default.
    public_read: bool = False
    #: Origin allowed to call the server from a browser page (``*`` for any); empty means CORS is off.
    cors: str = ""
    #: Hard limit for one query, enforced by the front (and by restarting the engine if it does not stop).
    query_timeout: float = 10.0
    #: Hard limit for one update or Graph Store write.
    update_timeout: float = 60.0
    #: Largest request body accepted.
    max_body: int = 16 * MB
    #: Largest query result returned; a bigger one is refused with a message asking for LIMIT.
    max_result: int = 32 * MB
    #: How long an abandoned query may keep the engine busy before the engine is restarted.
    grace: float = 1.0
    #: Serve MCP over streamable HTTP at ``/mcp`` (writes through it need the token, like every write).
    mcp: bool = True
    #: Connections and requests at once before new requests are answered 503 (uvicorn's ``limit_concurrency``).
    max_connections: int = 64
    #: Seconds an idle keep-alive connection is kept open (uvicorn's ``timeout_keep_alive``).
    idle_timeout: int = 60
    #: Seconds a request head may take, from the connection (or its first byte after an idle keep-alive).
    head_timeout: float = 10.0
    #: Seconds a request body may stall between two pieces before the request is answered 408.
    body_timeout: float = 30.0
    #: Largest request head (request line and headers) in bytes (h11's ``max_incomplete_event_size``).
    max_head: int = 64 * 1024
    #: Most bytes of request bodies received or held at once, over all requests; a body that would pass it is
    #: answered 503 before it is read (:mod:`pcm.endpoint.inflight`). Never less than ``max_body`` in effect.
    max_bodies_in_flight: int = 64 * MB

    @property
    def host(self) -> str:
        return split_bind(self.bind)[0]

    @property
    def port(self) -> int:
        return split_bind(self.bind)[1]

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)

    @property
    def writable(self) -> bool:
        return bool(self.token)

    @property
    def reads_need_token(self) -> bool:
        """Beyond loopback every read needs a token, unless reads were made public on purpose."""
        return not self.loopback and not self.public_read

    def check_access(self) -> None:
        """Refuse to serve beyond loopback with reads nobody chose to open or close."""
        if self.reads_need_token and not self.read_token:
            raise UsageError(
                f"--bind {self.bind} is beyond loopback, where every read needs a token: give --read-token "
                "(or PCM_READ_TOKEN), or --public-read to let anyone who reaches it read the memory"
            )


def split_bind(bind: str) -> tuple[str, int]:
    """``127.0.0.1:7878``, ``[::1]:7878``, ``localhost:7878`` or ``:7878`` (loopback) → (host, port)."""
    host, sep, port = bind.rpartition(":")
    if not sep:
        raise UsageError(f"--bind {bind!r}: expected HOST:PORT, e.g. 127.0.0.1:7878")
    host = host.strip("[]") or "127.0.0.1"
    try:
        number = int(port)
    except ValueError:
        raise UsageError(f"--bind {bind!r}: the port must be a number") from None
    if not 0 <= number <= 65535:
        raise UsageError(f"--bind {bind!r}: the port must be between 0 and 65535")
    return host, number


@functools.lru_cache(maxsize=64)
def is_loopback(host: str) -> bool:
    """Cached: every request's Host header is checked, and parsing an address costs more than the rest of the check."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False

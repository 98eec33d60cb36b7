"""The quick way from ``pcm ask`` and ``pcm recall`` to a running ``pcm serve``: the standard library's HTTP client.

A command answered by a warm server spends nearly all its time starting up. Importing httpx and building a client
(each one loads the CA bundle for TLS) costs about 0.2 CPU-seconds, more than the rest of the command together
(measured on the build machine: ``python -c "import httpx; httpx.Client()"`` 0.28-0.32 s of CPU against 0.07-0.09 s
for an empty interpreter and 0.09-0.11 s for ``import http.client, json``). For a plain-HTTP call to loopback that
the server answers in milliseconds, :mod:`http.client` is enough. Every other command keeps
:class:`pcm.endpoint.client.ServeClient`.

``serve.json`` is trusted as :func:`pcm.serve_file.discover` trusts it: only while its process is alive and
the server's ``/api/health`` answers with that pid.
"""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from pcm.errors import InputError, PcmError, error_for
from pcm.serve_file import SERVE_FILE, pid_alive, read_info

#: An answer may wait for an LLM; the same limit as :class:`pcm.endpoint.client.ServeClient`.
TIMEOUT = 600.0


@dataclass(frozen=True)
class Link:
    """The JSON API of one running server, for reads."""

    url: str
    host: str
    port: int
    token: str = ""

    def ask(self, question: str, *, k: int = 5, plan: bool | None = None, as_of: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"question": question, "k": k}
        if plan is not None:
            body["plan"] = plan
        if as_of is not None:
            body["as_of"] = as_of
        return dict(self._call("POST", "/api/ask", body=body))

    def recall(self, text: str, k: int = 10, **filters: object) -> list[dict[str, Any]]:
        params = {"q": text, "k": str(k)}
        for name, value in filters.items():
            if value is not None:
                params[name] = value.isoformat() if isinstance(value, datetime) else str(value)
        return list(self._call("GET", "/api/recall?" + urlencode(params)))

    def _call(self, method: str, path: str, *, body: object = None, timeout: float = TIMEOUT) -> Any:
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        payload = None
        if body is not None:
            payload = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        connection = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            connection.request(method, path, body=payload, headers=headers)
            response = connection.getresponse()
            status, raw = response.status, response.read()
        except (OSError, http.client.HTTPException) as exc:
            raise PcmError(f"cannot reach pcm serve at {self.url}: {exc}") from exc
        finally:
            connection.close()
        try:
            data = json.loads(raw)
        except ValueError:
            data = None
        if status < 400:
            if data is None:
                raise PcmError(f"pcm serve at {self.url} answered {path.split('?')[0]} with no JSON")
            return data
        message = str(data.get("error") or "") if isinstance(data, dict) else ""
        message = message or raw.decode("utf-8", "replace").strip()
        code = data.get("exit_code") if isinstance(data, dict) else None
        if isinstance(code, int):  # the server's own error: the same line and exit code as without a server
            raise error_for(code, status, message)
        if status == 400:
            raise InputError(message)
        raise PcmError(f"pcm serve at {self.url}: {message}")


def find(memory_path: Path, *, token: str = "", timeout: float = 1.0) -> Link | None:
    """The server running for this memory, checked as :func:`pcm.serve_file.discover` checks it (the same
    ``serve.json`` reading and pid check), but probed with the standard library's client, or None."""
    info = read_info(Path(memory_path) / SERVE_FILE)
    if info is None or not pid_alive(info.pid):
        return None
    parts = urlsplit(info.url)
    if parts.scheme != "http" or not parts.hostname:
        return None
    link = Link(info.url, parts.hostname, parts.port or 80, token or info.read_token)
    try:
        health = link._call("GET", "/api/health", timeout=timeout)
    except PcmError:
        return None
    return link if isinstance(health, dict) and health.get("pid") == info.pid else None


__all__ = ["Link", "find"]

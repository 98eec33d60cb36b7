"""A client for the JSON API of a running ``pcm serve``: what CLI commands use when :func:`discover` finds one.

Writes (ingest, forget, reindex) and index work (ask, recall) go to the server, which holds the store lock, the side index and the
embedding model; plain reads can also use :class:`pcm.backend_remote.RemoteBackend` on ``info.query_url``.
Errors come back as the same :class:`~pcm.errors.PcmError` classes the local path raises, with the server's message.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from pcm.errors import InputError, MemoryLockedError, PcmError, QueryError, UsageError, error_for
from pcm.serve_file import ServerInfo


class ServeClient:
    """JSON API calls to one running server, with the owner's token for writes."""

    def __init__(self, info: ServerInfo, *, token: str = "", timeout: float = 600.0) -> None:
        self.info = info
        headers = info.auth(token)
        self._http = httpx.Client(base_url=info.api_url, headers=headers, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ServeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise PcmError(f"cannot reach pcm serve at {self.info.url}: {exc}") from exc
        if response.status_code < 400:
            return response.json()
        raise _error(response, self.info)

    def ingest_file(
        self, path: Path, fmt: str | None = None, on_progress: Callable[[dict[str, Any]], None] | None = None
    ) -> dict[str, Any]:
        """Send a conversation file (any format ``pcm ingest`` reads) to the server's ingest, its progress (posts
        stored of the file's messages) streamed back to ``on_progress``."""
        data = Path(path).read_bytes()
        if fmt == "jsonl" or (fmt is None and Path(path).suffix.lower() == ".jsonl"):
            content, media_type = data, "application/x-ndjson"
        else:
            content, media_type = _wrap(data, fmt), "application/json"
        return _ingest_report(self._streamed("/ingest", None, on_progress, content=content, media_type=media_type))

    def ingest_text(
        self, text: str, *, session: str | None = None, role: str = "user", speaker: str | None = None,
        at: datetime | str | None = None, key: str | None = None,
        on_progress: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """One utterance, as ``pcm ingest --text`` takes it (``at`` as given: the server's memory reads it); its
        progress (0 of 1 until it is stored, extracted when inline and indexed) streamed back to ``on_progress``."""
        when = at.isoformat() if isinstance(at, datetime) else at
        body = {"text": text, "session": session, "role": role, "speaker": speaker, "at": when, "id": key}
        return _ingest_report(self._streamed("/ingest", {k: v for k, v in body.items() if v is not None}, on_progress))

    def ask(self, question: str, *, k: int = 5, plan: bool | None = None, as_of: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"question": question, "k": k}
        if plan is not None:
            body["plan"] = plan
        if as_of is not None:
            body["as_of"] = as_of
        return dict(self._call("POST", "/ask", json=body))

    def recall(self, text: str, k: int = 10, **filters: object) -> list[dict[str, Any]]:
        params: dict[str, str] = {"q": text, "k": str(k)}
        for name, value in filters.items():
            if value is not None:
                params[name] = value.isoformat() if isinstance(value, datetime) else str(value)
        return list(self._call("GET", "/recall", params=params))

    def forget(self, *, post: str | None = None, session: str | None = None, purge: bool = True) -> dict[str, Any]:
        """Forget a message or a session in the server (``POST /api/forget``): what ``pcm forget`` does there."""
        body: dict[str, Any] = {"purge": purge}
        if post is not None:
            body["post"] = post
        if session is not None:
            body["session"] = session
        return dict(self._call("POST", "/forget", json=body))

    def delete_fact(self, fact_id: str) -> dict[str, Any]:
        """Delete a fact in the server (``DELETE /api/fact``): what ``pcm fact --delete`` does there."""
        return dict(self._call("DELETE", "/fact", params={"id": fact_id}))

    def import_file(
        self, path: Path, fmt: str | None = None, on_progress: Callable[[dict[str, Any]], None] | None = None
    ) -> dict[str, Any]:
        """Import a file of RDF in the server (``POST /api/import``): what ``pcm import`` does there. Relative IRIs
        resolve against the file's own URI, as they would without the server."""
        try:
            data = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError as exc:
            raise InputError(f"{path}: no such file") from exc
        except UnicodeDecodeError as exc:
            raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
        body = {"data": data, "name": Path(path).name, "format": fmt, "base": Path(path).resolve().as_uri()}
        return self._streamed("/import", {k: v for k, v in body.items() if v is not None}, on_progress)

    def extract(
        self, selection: str, *, force: bool = False, on_progress: Callable[[dict[str, Any]], None] | None = None
    ) -> dict[str, Any]:
        """Extract facts in the server with its model (``POST /api/extract``): what ``pcm extract`` does there."""
        return self._streamed("/extract", {"selection": selection, "force": force}, on_progress)

    def _streamed(
        self, path: str, body: dict[str, Any] | None, on_progress: Callable[[dict[str, Any]], None] | None, *,
        content: bytes | None = None, media_type: str = "application/json",
    ) -> dict[str, Any]:
        """POST ``body`` (or raw ``content`` of ``media_type``) and read the JSON lines the server streams back:
        each progress event goes to ``on_progress``; the result event is returned, an error event raised as the
        error the server raised."""
        import json

        sent: dict[str, Any] = {"json": body} if content is None else {"content": content}
        headers = {"Accept": "application/x-ndjson", "Content-Type": media_type}
        try:
            with self._http.stream("POST", path, headers=headers, **sent) as response:
                if response.status_code >= 400:
                    response.read()
                    raise _error(response, self.info)
                for line in response.iter_lines():
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    if event.get("event") == "progress" and on_progress is not None:
                        on_progress(event)
                    elif event.get("event") == "result":
                        return dict(event.get("result") or {})
                    elif event.get("event") == "error":
                        code = event.get("exit_code")
                        message = str(event.get("error") or "")
                        raise error_for(code, 200, message) if isinstance(code, int) else PcmError(message)
        except httpx.HTTPError as exc:
            raise PcmError(f"cannot reach pcm serve at {self.info.url}: {exc}") from exc
        raise PcmError(f"pcm serve at {self.info.url} ended {path} without a result (see its log)")

    def start_reindex(self) -> dict[str, Any]:
        """Ask the server to rebuild its side index in the background; returns the job's first state.

        Raises :class:`~pcm.errors.MemoryLockedError` without the token, :class:`~pcm.errors.UsageError` when a
        reindex already runs there.
        """
        return dict(self._call("POST", "/reindex"))

    def reindex_status(self) -> dict[str, Any]:
        """The server's reindex job: ``state`` (idle, running, done, failed), ``done``/``total``, ``indexed``,
        ``errors``."""
        return dict(self._call("GET", "/reindex"))

    def reindex(self, on_progress: Callable[[dict[str, Any]], None] | None = None, *, poll: float = 0.25) -> dict[str, Any]:
        """Start a reindex and follow it to the end, calling ``on_progress`` with every state seen.

        Returns the final state; a failed job raises :class:`~pcm.errors.PcmError` with the server's error.
        """
        state = self.start_reindex()
        while True:
            if on_progress is not None:
                on_progress(state)
            if state.get("state") != "running":
                break
            time.sleep(poll)
            state = self.reindex_status()
        if state.get("state") == "failed":
            errors = "; ".join(state.get("errors") or []) or "no error message"
            raise PcmError(f"reindex in pcm serve at {self.info.url} failed: {errors}")
        return state


def _ingest_report(result: dict[str, Any]) -> dict[str, Any]:
    """The server's ingest answer with the counts named as ``pcm ingest --json`` names them without a server."""
    report = dict(result)
    report["added"], report["skipped"] = report.pop("stored"), report.pop("duplicates")
    return report


def _wrap(data: bytes, fmt: str | None) -> bytes:
    """A JSON file body, with its format when the caller named one."""
    if fmt is None:
        return data
    return b'{"format": "' + fmt.encode("ascii") + b'", "conversations": ' + data + b"}"


def _error(response: httpx.Response, info: ServerInfo) -> PcmError:
    try:
        data = response.json()
        message = str(data.get("error") or response.text)
        code = data.get("exit_code")
    except (ValueError, AttributeError):
        message, code = response.text.strip(), None
    status = response.status_code
    if isinstance(code, int):  # the server's own error: the same line and exit code as without a server
        return error_for(code, status, message)
    if status in (401, 403):  # the server holds the memory and refuses this write: "memory locked", as everywhere
        hint = "set PCM_TOKEN to the server's token" if info.token_required else "the server is read-only"
        return MemoryLockedError(f"pcm serve at {info.url} refused the write ({hint}): {message}")
    if status == 400:
        return InputError(message)
    if status == 409:
        return UsageError(f"pcm serve at {info.url}: {message}")
    if status == 503 and "time limit" in message:
        return QueryError(message)
    return PcmError(f"pcm serve at {info.url}: {message}")

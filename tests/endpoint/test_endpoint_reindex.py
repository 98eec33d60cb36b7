"""``pcm reindex`` through a running ``pcm serve``: the server rebuilds its own side index in a background job.

A real server over a real memory; the embedding model is replaced by the tests' bag-of-words embedder so the
rebuild takes milliseconds. The CLI finds the server through ``serve.json`` exactly as a user's shell would.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from pcm.cli import main as cli
from pcm.endpoint.jobs import AlreadyRunning, BackgroundJob
from pcm.endpoint.server import PcmServer
from pcm.settings import Settings
from tests.endpoint.test_endpoint_support import AUTH, TOKEN, build_memory, serving
from tests.retrieval.traversal.test_traversal import WordEmbedder

EMBEDDER = WordEmbedder()


def _patch(patch: pytest.MonkeyPatch) -> None:
    patch.setattr("pcm.index.get_embedder", lambda *args, **kwargs: EMBEDDER)
    for name in ("PCM_INDEX", "PCM_STORE_URL", "PCM_TOKEN", "PCM_MEMORY"):
        patch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def _embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    _patch(monkeypatch)


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return build_memory(tmp_path_factory.mktemp("reindex") / "memory", facts=False).with_(index_enabled=True)


@pytest.fixture(scope="module")
def server(settings: Settings) -> Iterator[PcmServer]:
    """One server for the module (reindex is idempotent); the embedder is patched before it starts."""
    with pytest.MonkeyPatch.context() as patch:
        _patch(patch)
        with serving(settings) as running:
            yield running


def _follow(url: str) -> dict[str, Any]:
    """Poll the job's state as a client does until it is no longer running (pytest's timeout bounds the wait)."""
    while (state := httpx.get(url + "/api/reindex").json())["state"] == "running":
        time.sleep(0.05)
    return dict(state)


def test_reindex_through_the_server_rebuilds_the_index(server: PcmServer) -> None:
    started = httpx.post(server.url + "/api/reindex", headers=AUTH)
    assert started.status_code == 202, started.text
    assert started.json()["state"] == "running"
    final = _follow(server.url)
    assert final["state"] == "done", final
    assert final["errors"] == []
    assert final["indexed"] >= 10  # the pets conversation's 10 posts (plus its entities, if any)
    assert final["done"] == final["total"] == final["indexed"]  # posts, then entities: the bar ends at 100%
    hits = httpx.get(server.url + "/api/recall", params={"q": "Biscuit socks", "k": 3})
    assert hits.status_code == 200, hits.text
    assert any("socks" in hit["text"] for hit in hits.json())


@pytest.mark.parametrize(
    ("headers", "status"), [({}, 401), ({"Authorization": "Bearer wrong"}, 401), ({"Authorization": TOKEN}, 401)]
)
def test_reindex_without_the_token_is_refused_and_nothing_is_rebuilt(
    server: PcmServer, headers: dict[str, str], status: int
) -> None:
    before = httpx.get(server.url + "/api/reindex").json()
    refused = httpx.post(server.url + "/api/reindex", headers=headers)
    assert refused.status_code == status
    assert refused.headers["www-authenticate"] == "Bearer"
    # a job started by mistake would show at once: starting one records its state before the reply is sent
    assert httpx.get(server.url + "/api/reindex").json() == before


def test_the_job_state_starts_idle(tmp_path: Path) -> None:
    with serving(build_memory(tmp_path / "fresh", facts=False).with_(index_enabled=True)) as server:
        state = httpx.get(server.url + "/api/reindex").json()
    assert state == {"state": "idle", "done": 0, "total": None, "indexed": None, "errors": [], "started": None,
                     "finished": None, "seconds": None}


def test_a_read_only_server_refuses_reindex(tmp_path: Path) -> None:
    settings = build_memory(tmp_path / "read-only", facts=False).with_(index_enabled=True)
    with serving(settings, token="") as server:
        refused = httpx.post(server.url + "/api/reindex", headers=AUTH)
        assert refused.status_code == 403
        assert httpx.get(server.url + "/api/reindex").json()["state"] == "idle"  # a server of its own


def test_a_second_reindex_while_one_runs_is_refused_with_409(server: PcmServer, monkeypatch: pytest.MonkeyPatch) -> None:
    assert server.memory is not None
    release = threading.Event()
    real = server.memory.reindex

    def slow(progress: Callable[[int], None] | None = None) -> int:
        release.wait(30)
        return real(progress=progress)

    monkeypatch.setattr(server.memory, "reindex", slow)
    try:
        assert httpx.post(server.url + "/api/reindex", headers=AUTH).status_code == 202
        second = httpx.post(server.url + "/api/reindex", headers=AUTH)
        assert second.status_code == 409
        assert "already running" in second.json()["error"] and second.json()["state"] == "running"
    finally:
        release.set()
    assert _follow(server.url)["state"] == "done"


def test_a_failed_reindex_reports_its_error(server: PcmServer, monkeypatch: pytest.MonkeyPatch) -> None:
    assert server.memory is not None

    def broken(progress: Callable[[int], None] | None = None) -> int:
        raise OSError("disk full")

    monkeypatch.setattr(server.memory, "reindex", broken)
    assert httpx.post(server.url + "/api/reindex", headers=AUTH).status_code == 202
    final = _follow(server.url)
    assert final["state"] == "failed" and final["errors"] == ["OSError: disk full"]
    assert final["indexed"] is None


def test_reindex_is_refused_when_the_server_runs_without_the_index(tmp_path: Path) -> None:
    settings = build_memory(tmp_path / "noindex", facts=False)
    with serving(settings) as server:
        refused = httpx.post(server.url + "/api/reindex", headers=AUTH)
        assert refused.status_code == 400 and "PCM_INDEX=off" in refused.json()["error"]


def test_cli_reindex_goes_through_the_running_server(server: PcmServer, settings: Settings) -> None:
    runner = CliRunner()
    env = {"PCM_TOKEN": TOKEN}
    result = runner.invoke(cli, ["--memory", str(settings.memory), "reindex"], env=env)
    assert result.exit_code == 0, result.output
    assert f"through pcm serve at {server.url}" in result.output
    as_json = runner.invoke(cli, ["--memory", str(settings.memory), "reindex", "--json"], env=env)
    assert as_json.exit_code == 0, as_json.output
    indexed = json.loads(as_json.stdout)["indexed"]
    assert indexed == httpx.get(server.url + "/api/reindex").json()["indexed"]
    assert indexed >= 10


def test_cli_reindex_without_the_token_says_so(server: PcmServer, settings: Settings) -> None:
    before = httpx.get(server.url + "/api/reindex").json()
    result = CliRunner().invoke(cli, ["--memory", str(settings.memory), "reindex"])
    assert result.exit_code != 0
    assert "PCM_TOKEN" in result.output
    assert httpx.get(server.url + "/api/reindex").json() == before


def test_background_job_counts_progress_and_refuses_a_second_start() -> None:
    job = BackgroundJob("test")
    gate = threading.Event()

    def work(progress: Callable[[int], None]) -> int:
        progress(2)
        gate.wait(10)
        progress(3)
        return 5

    first = job.start(work, lambda: 5)
    assert first.state == "running" and first.started is not None
    with pytest.raises(AlreadyRunning):
        job.start(work, lambda: 5)
    gate.set()
    final = job.wait(10)
    assert (final.state, final.done, final.total, final.result) == ("done", 5, 5, 5)
    assert job.start(lambda progress: 1, lambda: None).state == "running"  # a finished job may run again
    assert job.wait(10).result == 1


def test_cli_reindex_without_a_server_rebuilds_locally(tmp_path: Path) -> None:
    settings = build_memory(tmp_path / "local", facts=False)
    result = CliRunner().invoke(cli, ["--memory", str(settings.memory), "reindex", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["indexed"] >= 10

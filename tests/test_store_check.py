"""`pcm store check URL` against the real servers: `oxigraph serve` and Virtuoso (Debian's ``ResultSetMaxRows`` of
10,000), anonymous and as dba, and a port nothing listens on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pcm.backend_remote import RemoteBackend
from tests.oxigraph_server import _free_port, start_oxigraph
from tests.virtuoso_server import VIRTUOSO_PASSWORD, VIRTUOSO_USER, start_virtuoso

_CREDENTIALS = ("PCM_STORE_USER", "PCM_STORE_PASSWORD", "PCM_STORE_TOKEN", "PCM_STORE_ENGINE", "PCM_STORE_URL")


def check(url: str, *args: str, human: bool = False, **env: str) -> tuple[int, dict, str]:  # type: ignore[type-arg]
    """Run `pcm store check --json URL`: (exit code, the JSON report, and with ``human`` the output of the same
    check without ``--json``)."""
    base = {k: v for k, v in os.environ.items() if k not in _CREDENTIALS}
    run = [sys.executable, "-m", "pcm.cli", "store", "check", url, *args]
    out = subprocess.run([*run, "--json"], capture_output=True, text=True, env={**base, **env}, timeout=300)
    if not human:
        return out.returncode, json.loads(out.stdout), ""
    shown = subprocess.run(run, capture_output=True, text=True, env={**base, **env}, timeout=300)
    assert shown.returncode == out.returncode, shown.stderr
    return out.returncode, json.loads(out.stdout), shown.stdout


def by_name(report: dict) -> dict[str, dict]:  # type: ignore[type-arg]
    return {c["name"]: c for c in report["checks"]}


@pytest.fixture(scope="module")
def oxigraph(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with start_oxigraph(tmp_path_factory.mktemp("oxigraph") / "store") as url:
        yield url


@pytest.fixture(scope="module")
def virtuoso(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with start_virtuoso(tmp_path_factory.mktemp("virtuoso"), max_rows=10_000) as url:
        yield url


def _graphs(url: str, **auth: str) -> list[str]:
    with RemoteBackend(url, **auth) as backend:
        return backend.named_graphs()


def test_oxigraph_passes_every_check_and_keeps_nothing(oxigraph: str) -> None:
    code, report, human = check(oxigraph, human=True)
    assert code == 0 and report["ok"] and report["engine"] == "oxigraph"
    checks = by_name(report)
    assert {c["status"] for c in report["checks"]} == {"ok"}
    assert "detected" in checks["profile"]["detail"]
    assert "none announced" in checks["row limit"]["detail"]
    assert "nothing rewritten" in checks["paths"]["detail"]
    assert "one transaction" in checks["writes"]["detail"]
    assert len(human.splitlines()) == len(report["checks"])  # one line per check
    assert human.splitlines()[0].startswith("ok")
    assert _graphs(oxigraph) == []  # the scratch graph was dropped


def test_an_unreachable_server_is_one_failed_line(tmp_path: Path) -> None:
    code, report, human = check(f"http://127.0.0.1:{_free_port()}", human=True)
    assert code == 1 and not report["ok"]
    assert [c["name"] for c in report["checks"]] == ["reach"]
    assert "cannot reach" in human and len(human.splitlines()) == 1


def test_a_given_profile_is_tried_and_the_server_header_named(oxigraph: str) -> None:
    code, report, _ = check(oxigraph + "/query", "--engine", "generic")
    assert code == 0 and report["engine"] == "generic", report
    assert by_name(report)["profile"]["detail"] == "generic (given; the Server header says oxigraph)"


@pytest.mark.engine
def test_virtuoso_without_credentials_is_permission_denied(virtuoso: str) -> None:
    code, report, _ = check(virtuoso)
    checks = by_name(report)
    assert code == 1 and checks["query"]["status"] == "ok"
    assert checks["update"]["status"] == "fail" and checks["update"]["detail"].startswith("permission denied")
    assert "PCM_STORE_USER" in checks["update"]["detail"]
    assert checks["paths"]["status"] == "skip"


@pytest.mark.engine
def test_virtuoso_as_dba_names_its_row_limit_and_its_path_rewrite(virtuoso: str) -> None:
    code, report, _ = check(virtuoso, PCM_STORE_USER=VIRTUOSO_USER, PCM_STORE_PASSWORD=VIRTUOSO_PASSWORD)
    checks = by_name(report)
    assert code == 0 and report["engine"] == "virtuoso", report
    assert checks["row limit"]["status"] == "warn" and "10,000" in checks["row limit"]["detail"]
    assert "ResultSetMaxRows" in checks["row limit"]["detail"]
    assert "drops the zero-length part" in checks["paths"]["detail"] and "(yes)" in checks["paths"]["detail"]
    assert "between two variables" in checks["paths"]["detail"]
    assert "not rolled back" in checks["writes"]["detail"]
    assert _graphs(virtuoso, user=VIRTUOSO_USER, password=VIRTUOSO_PASSWORD) == []

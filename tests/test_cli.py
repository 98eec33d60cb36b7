"""The command line as a user (and a script) sees it: real processes, real memories on disk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def run(args: list[str], memory: Path, *, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PCM_MEMORY": str(memory), "PCM_LLM": "none", "PCM_INDEX": "off"}
    out = subprocess.run([sys.executable, "-m", "pcm.cli", *args], capture_output=True, text=True, env=env,
                         cwd=cwd, timeout=300)
    if check and out.returncode != 0:
        raise AssertionError(f"pcm {' '.join(args)} failed ({out.returncode}): {out.stderr}")
    return out


@pytest.fixture
def mem(tmp_path: Path) -> Path:
    memory = tmp_path / "mem"
    run(["init", "--owner", "Dana Whitfield"], memory, cwd=tmp_path)
    return memory


def test_works_from_any_directory_and_ingests_the_samples(mem: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    from pcm.conversations import sample_paths

    out = run(["ingest", *map(str, sample_paths()), "--json"], mem, cwd=elsewhere)
    report = json.loads(out.stdout)
    assert report["added"] > 100 and report["skipped"] == 0
    again = json.loads(run(["ingest", *map(str, sample_paths()), "--json"], mem, cwd=elsewhere).stdout)
    assert again["added"] == 0 and again["skipped"] == report["added"]
    stats = json.loads(run(["stats", "--json"], mem, cwd=elsewhere).stdout)
    assert stats["posts"] == report["added"] and stats["sessions"] == report["conversations"]


def test_ingest_text_then_why_and_sparql(mem: Path, tmp_path: Path) -> None:
    run(["ingest", "--text", "I adopted a beagle called Biscuit", "--at", "2025-03-02T10:00", "--session", "s1"],
        mem, cwd=tmp_path)
    run(["ingest", "--text", "He loves the park", "--at", "2025-03-02T10:05", "--session", "s1"], mem, cwd=tmp_path)
    q = "SELECT ?text ?pos WHERE { ?p a sioc:Post ; sioc:content ?text ; pcm:position ?pos } ORDER BY ?pos"
    rows = json.loads(run(["sparql", q, "--json"], mem, cwd=tmp_path).stdout)["rows"]
    assert [(r["text"], r["pos"]) for r in rows] == [("I adopted a beagle called Biscuit", "0"), ("He loves the park", "1")]
    csv_out = run(["sparql", q, "--output", "csv"], mem, cwd=tmp_path).stdout
    assert csv_out.splitlines()[0] == "text,pos"
    posts = json.loads(run(["sparql", "SELECT ?p WHERE { ?p a sioc:Post ; pcm:position 0 }", "--json"], mem,
                           cwd=tmp_path).stdout)["rows"]
    why = json.loads(run(["why", posts[0]["p"], "--json"], mem, cwd=tmp_path).stdout)
    assert why[0]["text"] == "I adopted a beagle called Biscuit" and why[0]["session"] == "s1"


def test_errors_are_one_line_with_distinct_exit_codes(mem: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('[{"conversation_id": "c", "messages": [{"role": "wizard", "content": "hi"}]}]')
    out = run(["ingest", str(bad)], mem, cwd=tmp_path, check=False)
    assert out.returncode == 3 and out.stderr.count("\n") == 1 and "wizard" in out.stderr
    out = run(["sparql", "DELETE WHERE { ?s ?p ?o }"], mem, cwd=tmp_path, check=False)
    assert out.returncode == 8 and "only read queries" in out.stderr
    out = run(["stats"], tmp_path / "nowhere", cwd=tmp_path, check=False)
    assert out.returncode == 6 and "pcm init" in out.stderr
    out = run(["init"], mem, cwd=tmp_path, check=False)
    assert out.returncode == 2 and "already exists" in out.stderr
    stats = json.loads(run(["stats", "--json"], mem, cwd=tmp_path).stdout)
    assert stats["posts"] == 0  # nothing changed after the failed ingest


@pytest.mark.slow
def test_export_import_and_forget(mem: Path, tmp_path: Path) -> None:
    run(["ingest", "--text", "hello there", "--at", "2025-01-01T09:00", "--session", "s1"], mem, cwd=tmp_path)
    dump = tmp_path / "dump.nq"
    run(["export", "--format", "nquads", "-o", str(dump)], mem, cwd=tmp_path)
    other = tmp_path / "other"
    run(["init"], other, cwd=tmp_path)
    imported = json.loads(run(["import", str(dump), "--json"], other, cwd=tmp_path).stdout)
    assert imported["mode"] == "restore"
    assert json.loads(run(["stats", "--json"], other, cwd=tmp_path).stdout)["posts"] == 1
    assert json.loads(run(["forget", "--session", "s1", "--json"], other, cwd=tmp_path).stdout)["forgotten"]
    assert json.loads(run(["stats", "--json"], other, cwd=tmp_path).stdout)["posts"] == 0


def test_help_shows_an_example(tmp_path: Path) -> None:
    for cmd in ("init", "ingest", "import", "export", "sparql", "stats", "why", "forget", "recall", "ask"):
        out = run([cmd, "--help"], tmp_path / "m", cwd=tmp_path)
        assert "Example" in out.stdout, cmd


@pytest.mark.slow
def test_commands_go_through_a_running_server(mem: Path, tmp_path: Path) -> None:
    """While `pcm serve` holds the memory's lock, CLI commands reach it through the server instead of failing."""
    from pcm.settings import Settings
    from tests.endpoint.test_endpoint_support import TOKEN, serving

    with serving(Settings(memory=mem, index_enabled=False)):
        env_token = {"PCM_TOKEN": TOKEN}
        out = _run_env(["ingest", "--text", "I adopted a beagle called Biscuit", "--at", "2025-03-02T10:00",
                        "--session", "s1", "--json"], mem, tmp_path, env_token)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["added"] == 1
        stats = _run_env(["stats", "--json"], mem, tmp_path, {})
        assert stats.returncode == 0, stats.stderr
        assert json.loads(stats.stdout)["posts"] == 1
        refused = _run_env(["forget", "--session", "s1"], mem, tmp_path, {})
        assert refused.returncode == 4 and "pcm serve" in refused.stderr
        purge = _run_env(["purge"], mem, tmp_path, env_token)  # the server holds the files it would rewrite
        assert purge.returncode == 4 and "stop `pcm serve`" in purge.stderr
        forgot = _run_env(["forget", "--session", "s1", "--json"], mem, tmp_path, env_token)
        assert forgot.returncode == 0, forgot.stderr
        report = json.loads(forgot.stdout)
        assert len(report["forgotten"]) == 1 and report["purged"] is False and "pcm purge" in report["note"]
    assert json.loads(run(["purge", "--json"], mem, cwd=tmp_path).stdout)["purged"] is True  # once it stopped


def _run_env(args: list[str], memory: Path, cwd: Path, extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PCM_MEMORY": str(memory), "PCM_LLM": "none", "PCM_INDEX": "off", **extra}
    return subprocess.run([sys.executable, "-m", "pcm.cli", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300)

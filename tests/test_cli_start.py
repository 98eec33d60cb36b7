"""Fast starts: commands that need no model import none of the model or index libraries, and `pcm ask` / `pcm recall`
as commands go through a running `pcm serve` (the warm path) without loading them either. Timings are printed by
benchmarks/bench_cli_start.py; these tests check what each command imports, which is what the timings rest on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pcm.memory import Memory
from pcm.settings import Settings
from tests.serve_process import serve_process

REPO = Path(__file__).resolve().parents[1]
MODEL_LIBRARIES = ("torch", "sentence_transformers", "transformers", "lancedb")

#: Runs one `pcm` command in this process, then prints (on stderr, last line) which heavy libraries it imported.
RUNNER = """
import sys
from pcm.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exit:
    code = exit.code
heavy = [m for m in ("torch", "sentence_transformers", "transformers", "lancedb", "rdflib", "pyshacl", "httpx")
         if m in sys.modules]
print("IMPORTED " + " ".join(heavy), file=sys.stderr)
sys.exit(code or 0)
"""


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "PCM_LLM": "none", **extra}
    for name in ("PCM_MEMORY", "PCM_STORE_URL", "PCM_TOKEN"):
        env.pop(name, None)
    return env


def _run(memory: Path, *args: str, codes: tuple[int, ...] = (0,)) -> tuple[str, set[str]]:
    out = subprocess.run([sys.executable, "-c", RUNNER, "--memory", str(memory), *args], capture_output=True,
                         text=True, env=_env(), timeout=600)
    assert out.returncode in codes, out.stderr
    imported = out.stderr.strip().splitlines()[-1].removeprefix("IMPORTED").split()
    return out.stdout, set(imported)


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("start") / "memory"
    with Memory.init(Settings(memory=path, index_enabled=False), owner="Dana") as memory:
        memory.remember("I adopted a beagle called Biscuit", at="2025-03-02T10:00", key="m-1")
    return path


def test_the_fast_ontology_read_agrees_with_the_full_one(tmp_path: Path) -> None:
    from pcm.ontology import load_ontology as full
    from pcm.ontology_files import file_facts

    assert file_facts() == (full().version, full().digest)
    (tmp_path / "broken.ttl").write_text("@prefix : <x> .\n: : ", encoding="utf-8")
    assert file_facts(tmp_path) == (None, "")  # matches no memory: the full loader then names the file
    from pcm.errors import PcmError

    with pytest.raises(PcmError, match="broken.ttl is not valid Turtle"):
        full(tmp_path)


@pytest.mark.parametrize(
    "args",
    [("stats", "--json"), ("sparql", "SELECT ?t WHERE { ?p sioc:content ?t }", "--json"), ("why", "m:biscuit"),
     ("export", "--format", "trig")],
)
def test_commands_without_a_model_import_no_model_and_no_rdflib(stored: Path, args: tuple[str, ...]) -> None:
    out, imported = _run(stored, *args, codes=(0, 1))  # why: 1 = nothing mentions it (no facts without an LLM)
    assert out.strip()
    assert not imported, f"pcm {args[0]} imported {sorted(imported)}"


def test_stats_names_entity_classes_and_still_needs_no_model(stored: Path) -> None:
    out, imported = _run(stored, "stats")
    assert "posts: 1" in out
    assert not imported & {*MODEL_LIBRARIES, "httpx"}


@pytest.fixture(scope="module")
def served(stored: Path) -> Iterator[str]:
    """`pcm serve` for the memory, as a user starts it; ready once it has announced itself on stdout."""
    def why(proc: subprocess.Popen[str]) -> str:
        return proc.stderr.read() if proc.stderr else "pcm serve printed nothing"

    with serve_process(stored, env=_env(), stderr=subprocess.PIPE, why=why) as (_, announced):
        yield announced["url"]


@pytest.mark.slow  # with the next test: one `pcm serve` for both
def test_ask_and_recall_go_through_a_running_server_without_loading_the_model(stored: Path, served: str) -> None:
    out, imported = _run(stored, "ask", "What is my dog called?")
    assert "Biscuit" in out and f"answered by pcm serve at {served}" in out
    assert not imported, f"pcm ask imported {sorted(imported)}"
    out, imported = _run(stored, "recall", "beagle", "--k", "1", "--json")
    [hit] = json.loads(out)
    assert hit["source_id"] == "m-1" and hit["text"] == "I adopted a beagle called Biscuit"
    assert not imported, f"pcm recall imported {sorted(imported)}"
    out, _ = _run(stored, "ask", "What is my dog called?", "--json")
    assert json.loads(out)["citations"][0]["source_id"] == "m-1"


@pytest.mark.slow
def test_a_server_error_is_one_line_with_its_exit_code(stored: Path, served: str) -> None:
    out = subprocess.run([sys.executable, "-m", "pcm.cli", "--memory", str(stored), "recall", " "],
                         capture_output=True, text=True, env=_env(), timeout=600)
    assert out.returncode == 3, out.stderr  # bad input: the server's 400 keeps its exit code
    assert out.stderr.startswith("pcm: error: ") and len(out.stderr.strip().splitlines()) == 1


def test_a_stale_serve_file_is_ignored(tmp_path: Path) -> None:
    from pcm.serve_link import find

    (tmp_path / "serve.json").write_text(json.dumps({"url": "http://127.0.0.1:9", "pid": 2**22 + 7}))
    assert find(tmp_path) is None
    (tmp_path / "serve.json").write_text("{not json")
    assert find(tmp_path) is None
    (tmp_path / "serve.json").write_text(json.dumps({"url": "http://127.0.0.1:9", "pid": os.getpid()}))
    assert find(tmp_path) is None  # alive, but nothing answers there

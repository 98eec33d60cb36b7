"""Every path that runs a person's or a model's query stops it at PCM_QUERY_TIMEOUT and under a memory bound.

The engine cannot be interrupted inside one step (a COUNT over a path closure yields no row until it is done), so
these queries run in the killable worker process of :mod:`pcm.query_safety`. Timing figures are printed by
``benchmarks/bench_runaway.py``; here we check that each shape is stopped, with the right error, from the Python
API, the CLI's ``sparql`` and ``ask``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pcm.conversations import parse_file, sample_paths
from pcm.errors import QueryError
from pcm.memory import Memory
from pcm.query_safety import QueryMemoryExceeded, QueryTimeout
from pcm.settings import Settings

#: Shapes that yield no row before they finish, each far beyond a second on the sample memory (~6k quads).
RUNAWAY = {
    # two undirected closures over every predicate but rdf:type, joined end to end, counted
    "path closure": "SELECT (COUNT(*) AS ?n) WHERE { ?a (!rdf:type|^!rdf:type)* ?b . ?b (!rdf:type|^!rdf:type)* ?c }",
    "cross product": "SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i }",
    "aggregate over a cross product": (
        "SELECT ?p (COUNT(*) AS ?n) WHERE { ?a ?p ?b . ?c ?q ?d . ?e ?r ?f } GROUP BY ?p ORDER BY DESC(?n)"
    ),
}
#: Materialises every pair of quads (~36M rows) before the first row can be returned.
MEMORY_HOG = "SELECT ?a ?b ?c ?d WHERE { ?a ?p ?b . ?c ?q ?d } ORDER BY ?a ?d LIMIT 1"


@pytest.fixture(scope="module")
def sample_memory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("runaway") / "memory"
    settings = Settings(memory=path, index_enabled=False, summaries_enabled=False)
    with Memory.init(settings, owner="Dana Whitfield") as memory:
        memory.ingest(c for p in sample_paths() for c in parse_file(p))
    return path


@pytest.mark.parametrize("shape", sorted(RUNAWAY))
def test_the_python_api_stops_a_runaway_query_at_the_deadline(sample_memory: Path, shape: str) -> None:
    settings = Settings(memory=sample_memory, index_enabled=False, query_timeout=1.0)
    with Memory.open(settings, read_only=True) as memory:
        with pytest.raises(QueryTimeout, match="time limit of 1 s"):
            memory.sparql("PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#>\n" + RUNAWAY[shape])
        # the worker was replaced: the next query answers
        assert memory.sparql("ASK { ?s ?p ?o }") is True


def test_a_writable_memory_stops_a_runaway_query_too(sample_memory: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "memory"
    shutil.copytree(sample_memory, copy)
    settings = Settings(memory=copy, index_enabled=False, query_timeout=1.0)
    with Memory.open(settings) as memory, pytest.raises(QueryTimeout):
        memory.sparql(RUNAWAY["cross product"])


def test_a_query_needing_more_memory_than_its_bound_is_stopped(sample_memory: Path) -> None:
    settings = Settings(memory=sample_memory, index_enabled=False, query_timeout=120.0, query_memory_mb=200)
    with Memory.open(settings, read_only=True) as memory:
        with pytest.raises(QueryMemoryExceeded, match="200 MB"):
            memory.sparql(MEMORY_HOG)
        assert memory.sparql("ASK { ?s ?p ?o }") is True


def _pcm(args: list[str], memory: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PCM_MEMORY": str(memory), "PCM_LLM": "none", "PCM_INDEX": "off", **env}
    # the harness timeout only keeps a regression from hanging the suite: nothing here is timed
    return subprocess.run([sys.executable, "-m", "pcm.cli", *args], capture_output=True, text=True, env=environment,
                          timeout=300)


@pytest.mark.parametrize("shape", ["path closure", "aggregate over a cross product"])
def test_pcm_sparql_stops_a_runaway_query_with_one_line_and_exit_8(sample_memory: Path, shape: str) -> None:
    out = _pcm(["sparql", RUNAWAY[shape]], sample_memory, PCM_QUERY_TIMEOUT="1")
    assert out.returncode == QueryError.exit_code, out.stderr
    assert out.stderr.strip().splitlines() == ["pcm: error: query stopped: it ran past the time limit of 1 s"]


def test_pcm_sparql_reports_the_memory_bound(sample_memory: Path) -> None:
    out = _pcm(["sparql", MEMORY_HOG], sample_memory, PCM_QUERY_TIMEOUT="120", PCM_QUERY_MEMORY_MB="200")
    assert out.returncode == QueryError.exit_code, out.stderr
    assert "200 MB" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.slow
def test_pcm_ask_stops_a_runaway_generated_query_and_says_so(sample_memory: Path, tmp_path: Path) -> None:
    script = tmp_path / "replies.json"
    runaway = RUNAWAY["aggregate over a cross product"]
    script.write_text(json.dumps([f"```sparql\n{runaway}\n```", "NO QUERY: nothing else to try"] * 3))
    out = _pcm(["ask", "Which predicate is used most?", "--json"], sample_memory,
               PCM_LLM=f"scripted:{script}", PCM_QUERY_TIMEOUT="1", PCM_REPAIR_ROUNDS="0")
    assert out.returncode == 0, out.stderr
    trace = json.loads(out.stdout)["trace"]
    assert trace[0]["outcome"] == "timeout" and "time limit of 1 s" in trace[0]["detail"]

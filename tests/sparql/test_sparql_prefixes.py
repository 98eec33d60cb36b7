"""The memory's prefixes are predeclared for a person's query on every face (one function, the lexer's: a real
PREFIX declaration, not the word inside a string or a comment), and a syntax error names the line of the query as
the person wrote it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from pcm.backend import Solutions
from pcm.cli import main
from pcm.errors import QueryError
from pcm.memory import Memory
from pcm.settings import Settings

BISCUIT = "I adopted a beagle called Biscuit"
QUERIES = {
    "no prefix declared": "SELECT ?t WHERE { ?p sioc:content ?t }",
    "PREFIX inside a string": 'SELECT ?t WHERE { ?p sioc:content ?t FILTER(!CONTAINS(?t, "PREFIX")) }',
    "PREFIX inside a comment": "# PREFIX is predeclared\nSELECT ?t WHERE { ?p sioc:content ?t }",
    "one declared, another not": "PREFIX ex: <http://example.org/>\nSELECT ?t WHERE { ?p sioc:content ?t }",
    "PREFIX in an IRI": "SELECT ?t WHERE { ?p sioc:content ?t FILTER(?p != <http://example.org/PREFIX>) }",
}


@pytest.fixture(scope="module")
def memory_path(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("sparql") / "m"
    with Memory.init(Settings(memory=path, index_enabled=False), owner="Dana") as m:
        m.remember(BISCUIT, at="2025-03-02T10:00")
    yield path


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_python_and_the_cli_predeclare_the_same_prefixes(memory_path: Path, name: str) -> None:
    with Memory.open(Settings(memory=memory_path, index_enabled=False), read_only=True) as m:
        result = m.sparql(QUERIES[name])
        assert isinstance(result, Solutions) and [r[0].value for r in result.rows] == [BISCUIT]  # type: ignore[union-attr]
    out = CliRunner().invoke(main, ["--memory", str(memory_path), "sparql", QUERIES[name], "--json"],
                             env={"PCM_LLM": "none", "PCM_INDEX": "off"})
    assert out.exit_code == 0 and BISCUIT in out.output, out.output


@pytest.mark.parametrize(("query", "line"), [
    ("SELECT ?s WHERE { ?s ?p ?o ", 1),
    ("SELECT ?s\nWHERE { ?s schema:name ?n ", 2),
    ("PREFIX ex: <http://example.org/>\nSELECT ?s\nWHERE { ?s ex:p ?o . ?s schema:name ", 3),
])
def test_a_syntax_error_names_the_line_of_the_query_as_written(memory_path: Path, query: str, line: int) -> None:
    with Memory.open(Settings(memory=memory_path, index_enabled=False), read_only=True) as m, \
            pytest.raises(QueryError, match=f"at {line}:"):
        m.sparql(query)
    out = CliRunner().invoke(main, ["--memory", str(memory_path), "sparql", query],
                             env={"PCM_LLM": "none", "PCM_INDEX": "off"})
    assert out.exit_code == 8 and f"at {line}:" in out.output, out.output

"""`pcm ontology test`: the competency questions pass, cover every area, and a wrong answer or fixture fails."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from pcm.cli_ontology import ontology as ontology_cli
from pcm.errors import InputError
from pcm.namespaces import SCHEMA, XSD
from pcm.ontology import AREAS
from pcm.ontology_tools.competency import (
    FIXTURE_NAMESPACE,
    competency_dir,
    expected_value,
    load_questions,
    run_competency,
)


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    """A private copy of the shipped suite, to break."""
    target = tmp_path / "competency"
    shutil.copytree(competency_dir(), target)
    return target


def test_the_shipped_questions_pass_and_cover_every_area() -> None:
    report = run_competency()
    assert report.ok, report.text()
    assert report.uncovered == []
    covered = {area for result in report.results for area in result.areas}
    assert covered == set(AREAS)
    assert len(report.results) >= 20


def test_a_wrong_expected_result_fails_with_both_answers(suite: Path) -> None:
    (suite / "plants.json").write_text('{"results": [{"plant": "cherry tomatoes", "species": "potato"}]}')
    report = run_competency(suite, names=["plants"])
    (result,) = report.results
    assert not result.passed and not report.ok
    assert result.problems[0].startswith('expected [{plant="cherry tomatoes", species="potato"}]')
    assert 'species="tomato"' in result.problems[1]


def test_a_fixture_that_breaks_the_shapes_fails(suite: Path) -> None:
    fixture = suite / "plants.trig"
    fixture.write_text(fixture.read_text().replace('"cherry tomatoes" ;', '"cherry tomatoes" ; schema:startDate "soon" ;'))
    (result,) = run_competency(suite, names=["plants"]).results
    assert not result.passed
    assert any("[date-literal]" in p for p in result.problems)
    (unchecked,) = run_competency(suite, names=["plants"], validate=False).results
    assert unchecked.passed


def test_an_area_without_a_question_is_reported(suite: Path) -> None:
    for path in suite.glob("plants.*"):
        path.unlink()
    report = run_competency(suite)
    assert report.uncovered == ["plants"]
    assert not report.ok and "areas without a competency question: plants" in report.text()


def test_order_matters_only_when_asked(suite: Path) -> None:
    expected = suite / "travel-2024.json"
    rows = json.loads(expected.read_text())["results"]
    expected.write_text(json.dumps({"ordered": True, "results": rows[::-1]}))
    assert not run_competency(suite, names=["travel-2024"]).ok
    expected.write_text(json.dumps({"ordered": False, "results": rows[::-1]}))
    assert run_competency(suite, names=["travel-2024"]).ok


def test_missing_files_and_question_lines_are_input_errors(suite: Path) -> None:
    (suite / "pets.json").unlink()
    with pytest.raises(InputError, match="pets has no pets.json"):
        load_questions(suite)
    (suite / "pets.rq").write_text("SELECT * { ?s ?p ?o }")
    with pytest.raises(InputError, match="question"):
        load_questions(suite)


def test_expected_values_use_turtle_spellings() -> None:
    assert expected_value("m:biscuit") == f"<{FIXTURE_NAMESPACE}biscuit>"
    assert expected_value("schema:Car") == f"<{SCHEMA}Car>"
    assert expected_value("Biscuit") == f'"Biscuit"^^<{XSD}string>'
    assert expected_value("10:30") == f'"10:30"^^<{XSD}string>'
    assert expected_value('"2024-03"^^xsd:gYearMonth') == f'"2024-03"^^<{XSD}gYearMonth>'
    assert expected_value('"chat"@EN') == '"chat"@en'
    assert expected_value(3) == f'"3"^^<{XSD}integer>'
    assert expected_value(None) is None


def test_cli_test_runs_one_question_and_fails_the_exit_code(suite: Path) -> None:
    runner = CliRunner()
    ok = runner.invoke(ontology_cli, ["test", "--dir", str(suite), "-k", "pets"])
    assert ok.exit_code == 0, ok.output
    assert ok.output.startswith("PASS pets:")
    (suite / "pets.json").write_text('{"results": []}')
    failed = runner.invoke(ontology_cli, ["test", "--dir", str(suite), "-k", "pets", "--json"])
    assert failed.exit_code == 1 and '"ok": false' in failed.output

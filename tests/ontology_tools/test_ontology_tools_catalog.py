"""The catalogue in prompt files: markers, areas, compact mode, staleness (the CI gate) and `--write`."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from pcm.cli_ontology import ontology as ontology_cli
from pcm.errors import InputError
from pcm.ontology import AREAS, COMPACT_LEGEND, Ontology, in_catalogue, load_ontology
from pcm.ontology_tools import catalog


def prompt(tmp_path: Path, body: str, name: str = "ask.v1.md") -> Path:
    path = tmp_path / "pkg" / "prompts" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body, encoding="utf-8")
    return path


def test_sections_read_areas_and_compact_and_refuse_bad_markers() -> None:
    text = "a\n<!-- catalogue:begin areas=pets,plants compact -->\nold\n<!-- catalogue:end -->\nb\n"
    (section,) = catalog.sections(text)
    assert section.areas == ("pets", "plants") and section.compact
    assert text[section.start : section.end] == "old\n"
    for bad, why in (
        ("<!-- catalogue:begin -->\nx\n", "without its catalogue:end"),
        ("x\n<!-- catalogue:end -->\n", "without catalogue:begin"),
        ("<!-- catalogue:begin colour=red -->\n<!-- catalogue:end -->\n", "unknown catalogue marker argument"),
        ("<!-- catalogue:begin -->\n<!-- catalogue:begin -->\n<!-- catalogue:end -->\n", "without its catalogue:end"),
    ):
        with pytest.raises(InputError, match=why):
            catalog.sections(bad, "p.md")
    # an area is known when the ontology declares it (its areas.toml), so it is checked on refresh
    with pytest.raises(InputError, match="p.md:1: unknown catalogue area"):
        catalog.refreshed("<!-- catalogue:begin areas=pets,unicorns -->\n<!-- catalogue:end -->\n", load_ontology(), "p.md")


def test_refresh_fills_each_section_from_the_ontology(onto: Ontology) -> None:
    text = (
        "head\n<!-- catalogue:begin areas=pets -->\nstale\n<!-- catalogue:end -->\nmiddle\n"
        "<!-- catalogue:begin areas=plants compact -->\n<!-- catalogue:end -->\ntail\n"
    )
    new = catalog.refreshed(text, onto)
    assert new == (
        "head\n<!-- catalogue:begin areas=pets -->\n" + onto.catalogue(["pets"]) + "<!-- catalogue:end -->\nmiddle\n"
        "<!-- catalogue:begin areas=plants compact -->\n" + onto.catalogue(["plants"], compact=True)
        + "<!-- catalogue:end -->\ntail\n"
    )
    assert catalog.refreshed(new, onto) == new  # idempotent


def test_compact_catalogue_is_smaller_and_keeps_every_term(onto: Ontology) -> None:
    full, compact = onto.catalogue(), onto.catalogue(compact=True)
    assert compact.startswith(COMPACT_LEGEND)
    assert len(compact) < 0.6 * len(full)
    for iri, term in onto.terms.items():
        assert (onto.curie(iri) in compact) == in_catalogue(term), onto.curie(iri)
    pets = onto.catalogue(["pets"], compact=True)
    assert "classes: pcm:Pet⊑schema:Thing" in pets
    assert "pcm:Pet: pcm:petBreed→xsd:string!, pcm:petSpecies→xsd:string!" in pets
    assert "schema:Person: pcm:hasPet⊑schema:owns→pcm:Pet" in pets
    assert "values of schema:DayOfWeek: schema:Friday" in onto.catalogue(["time"], compact=True)
    assert onto.catalogue(["no-such-area"], compact=True) == ""


def test_a_stale_prompt_is_found_and_write_fixes_it(tmp_path: Path, onto: Ontology) -> None:
    fresh = prompt(tmp_path, "x\n<!-- catalogue:begin areas=pets -->\n" + onto.catalogue(["pets"]) + "<!-- catalogue:end -->\n")
    stale = prompt(tmp_path, "y\n<!-- catalogue:begin areas=pets -->\npcm:Dodo\n<!-- catalogue:end -->\n", "old.v1.md")
    files = catalog.prompt_files(tmp_path)
    assert files == [fresh, stale]
    assert catalog.stale_prompts(onto, files) == [stale]
    assert catalog.write_prompts(onto, files) == [stale]
    assert catalog.stale_prompts(onto, files) == []
    assert "pcm:Dodo" not in stale.read_text(encoding="utf-8")


def test_cli_catalog_check_fails_on_a_stale_prompt_and_write_repairs_it(tmp_path: Path) -> None:
    stale = prompt(tmp_path, "<!-- catalogue:begin areas=plants -->\n<!-- catalogue:end -->\n")
    runner = CliRunner()
    checked = runner.invoke(ontology_cli, ["catalog", "--check", "--prompts-root", str(tmp_path)])
    assert checked.exit_code == 1
    assert str(stale) in checked.output
    written = runner.invoke(ontology_cli, ["catalog", "--write", "--prompts-root", str(tmp_path)])
    assert written.exit_code == 0 and "refreshed 1 of 1" in written.output
    again = runner.invoke(ontology_cli, ["catalog", "--check", "--prompts-root", str(tmp_path)])
    assert again.exit_code == 0, again.output
    both = runner.invoke(ontology_cli, ["catalog", "--check", "--write", "--prompts-root", str(tmp_path)])
    assert both.exit_code == 2


def test_cli_catalog_prints_areas_and_reports_its_size(onto: Ontology) -> None:
    runner = CliRunner()
    text = runner.invoke(ontology_cli, ["catalog", "--areas", "pets,plants"])
    assert text.exit_code == 0 and text.output == onto.catalogue(["pets", "plants"])
    sized = runner.invoke(ontology_cli, ["catalog", "--compact", "--json"])
    assert '"approx_tokens"' in sized.output and '"compact": true' in sized.output
    bad = runner.invoke(ontology_cli, ["catalog", "--areas", "pets,unicorns"])
    assert bad.exit_code == 2 and "unicorns" in bad.output


def test_committed_prompts_have_a_fresh_catalogue(onto: Ontology) -> None:
    """The CI gate: a prompt whose catalogue differs from the ontology's fails the build."""
    stale = catalog.stale_prompts(onto, catalog.prompt_files())
    assert stale == [], f"stale catalogue in {stale}: run `pcm ontology catalog --write`"


def test_every_area_renders_in_both_styles(onto: Ontology) -> None:
    for area in AREAS:
        assert onto.catalogue([area]).startswith(f"## {area}\n")
        assert f"\n\n## {area}\n" in onto.catalogue([area], compact=True)

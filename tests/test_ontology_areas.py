"""Areas are data: `pcm_ontology/areas.toml` declares them (order, extraction keywords), so a new area or term
touches no Python; `pcm ontology catalog --ontology DIR` works on another copy."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from pcm.catalogue_areas import select_areas
from pcm.cli_ontology import ontology as ontology_cli
from pcm.errors import PcmError
from pcm.ontology import AREAS, SHIPPED_AREAS, read_areas
from pcm.ontology_tools.check import lint_ontology
from pcm.ontology_tools.diff import load_version
from pcm.ontology_tools.vocab import load_vocabularies

REPO = Path(__file__).resolve().parents[1]
HOBBY = """
pcm:Hobby a owl:Class ;
    rdfs:label "hobby" ;
    rdfs:comment "Something done for pleasure in one's free time (knitting, chess, ...)." ;
    rdfs:subClassOf schema:Thing ;
    pcm:area "hobbies" .
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A copy of the ontology with a new area, "hobbies", declared after "activities", and a term in it."""
    target = tmp_path / "onto"
    shutil.copytree(REPO / "pcm_ontology", target)
    areas = (target / "areas.toml").read_text(encoding="utf-8")
    areas = areas.replace('name = "activities"\n', 'name = "activities"\n\n[[area]]\nname = "hobbies"\n'
                                                    'keywords = ["hobby", "hobbies", "knit", "chess"]\n')
    (target / "areas.toml").write_text(areas, encoding="utf-8")
    (target / "pcm.ttl").write_text((target / "pcm.ttl").read_text(encoding="utf-8") + HOBBY, encoding="utf-8")
    return target


def test_the_shipped_areas_come_from_the_areas_file() -> None:
    assert AREAS == tuple(a.name for a in read_areas(REPO / "pcm_ontology")) == tuple(a.name for a in SHIPPED_AREAS)
    assert AREAS[0] == "people" and "pets" in AREAS


def test_a_new_area_is_data_only(folder: Path) -> None:
    onto = load_version(folder)
    assert onto.areas.index("hobbies") == onto.areas.index("activities") + 1
    full = onto.catalogue()
    assert full.index("## activities") < full.index("## hobbies") < full.index("## events")
    assert "pcm:Hobby ⊑ schema:Thing" in onto.catalogue(["hobbies"])
    assert not [f for f in lint_ontology(onto, load_vocabularies(None)) if f.code == "unknown-area"]
    # extraction offers the area's terms when an utterance names it, from the declared keywords
    assert "hobbies" in select_areas("I started knitting last winter.", ontology=onto)
    assert "hobbies" not in select_areas("I bought a bike.", ontology=onto)


def test_catalog_works_on_another_ontology_folder(folder: Path) -> None:
    result = CliRunner().invoke(ontology_cli, ["catalog", "--ontology", str(folder), "--areas", "hobbies"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("## hobbies\npcm:Hobby ⊑ schema:Thing")
    shipped = CliRunner().invoke(ontology_cli, ["catalog", "--areas", "hobbies"])
    assert shipped.exit_code == 2 and "unknown area(s) hobbies" in shipped.stderr


def test_a_term_in_an_undeclared_area_is_one_finding(folder: Path) -> None:
    (folder / "pcm.ttl").write_text((folder / "pcm.ttl").read_text(encoding="utf-8").replace(
        'pcm:area "hobbies"', 'pcm:area "hobbys"'), encoding="utf-8")
    found = [f for f in lint_ontology(load_version(folder), load_vocabularies(None)) if f.code == "unknown-area"]
    assert [(f.where, f.message) for f in found] == [("pcm:Hobby", "pcm:area 'hobbys' is not declared in areas.toml")]


def test_a_malformed_areas_file_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "areas.toml").write_text('[[area]]\nname = "pets"\n[[area]]\nname = "pets"\n', encoding="utf-8")
    with pytest.raises(PcmError, match="declared twice: pets"):
        read_areas(tmp_path)
    (tmp_path / "areas.toml").write_text("[[area]]\nkeywords = 3\n", encoding="utf-8")
    with pytest.raises(PcmError, match="needs a name"):
        read_areas(tmp_path)

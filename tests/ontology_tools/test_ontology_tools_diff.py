"""`pcm ontology diff`: terms and axioms added, removed and changed; breaking changes confirmed by stored data."""

from __future__ import annotations

from pathlib import Path

import pyoxigraph as ox
import pytest
from click.testing import CliRunner

from pcm.cli_ontology import ontology as ontology_cli
from pcm.memory import Memory
from pcm.namespaces import PCM
from pcm.ontology import load_ontology
from pcm.ontology_tools.diff import data_from_file, diff_ontologies, load_version
from tests.snippets import BREED

REPO = Path(__file__).resolve().parents[2]

EDITS = [
    ('owl:versionInfo "0.1.0"', 'owl:versionInfo "0.2.0"'),
    (BREED, ""),  # removed
    ('rdfs:comment "dog, cat, parrot, ..." ;\n    rdfs:domain pcm:Pet ;\n    rdfs:range xsd:string ;',
     'rdfs:comment "dog, cat, parrot, ..." ;\n    rdfs:domain pcm:Pet ;\n    rdfs:range xsd:integer ;'),  # re-ranged
    ('rdfs:comment "The person keeps this pet." ;\n    rdfs:subPropertyOf schema:owns ;\n    rdfs:domain schema:Person ;\n'
     '    rdfs:range pcm:Pet ;',
     'rdfs:comment "The person keeps this pet." ;\n    rdfs:subPropertyOf schema:owns ;\n    rdfs:domain pcm:MemoryOwner ;\n'
     '    rdfs:range schema:Thing ;'),  # domain narrowed, range widened
    ('rdfs:comment "tomato, basil, orchid, ..."', 'rdfs:comment "tomato, basil, orchid, fern, ..."'),  # documentation
]
ADDED = """
pcm:Aquarium a owl:Class ; rdfs:label "Aquarium" ; rdfs:comment "A tank for fish." ; rdfs:subClassOf schema:Product ;
    pcm:area "pets" .
"""
DATA = """@prefix pcm: <https://w3id.org/pcm/ontology#> .
@prefix m: <https://pcm.invalid/m/test/> .
GRAPH <urn:pcm:graph:extraction:abc> {
  m:rex a pcm:Pet ; pcm:petSpecies "dog" ; pcm:petBreed "beagle" .
  m:tom a pcm:Pet ; pcm:petSpecies 3 .
}
"""


def version(tmp_path: Path, name: str, edits: list[tuple[str, str]], extra: str = "") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    for path in (REPO / "pcm_ontology").glob("*.ttl"):
        text = path.read_text(encoding="utf-8")
        if path.name == "pcm.ttl":
            for old, new in edits:
                assert old in text, old
                text = text.replace(old, new)
            text += extra
        (folder / path.name).write_text(text, encoding="utf-8")
    return folder


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    return version(tmp_path, "old", []), version(tmp_path, "new", EDITS, ADDED)


def test_identical_versions_have_no_difference(pair: tuple[Path, Path]) -> None:
    old = load_version(pair[0])
    result = diff_ontologies(old, load_version(pair[0]))
    assert (result.added, result.removed, result.changed, result.axioms_added, result.axioms_removed) == ([],) * 5
    assert result.potentially_breaking == []


def test_terms_and_axioms_are_compared(pair: tuple[Path, Path]) -> None:
    result = diff_ontologies(load_version(pair[0]), load_version(pair[1]))
    assert (result.old_version, result.new_version) == ("0.1.0", "0.2.0")
    assert [t.curie for t in result.added] == ["pcm:Aquarium"]
    assert [t.curie for t in result.removed] == ["pcm:petBreed"]
    changed = {t.curie: t.fields for t in result.changed}
    assert changed["pcm:petSpecies"] == {"range": ("xsd:string", "xsd:integer")}
    assert changed["pcm:hasPet"] == {"domain": ("schema:Person", "pcm:MemoryOwner"), "range": ("pcm:Pet", "schema:Thing")}
    assert set(changed["pcm:plantSpecies"]) == {"comment"}
    assert "pcm:petSpecies rdfs:range xsd:integer" in result.axioms_added
    assert "pcm:petSpecies rdfs:range xsd:string" in result.axioms_removed
    assert "pcm:Aquarium rdfs:subClassOf schema:Product" in result.axioms_added
    assert not any("plantSpecies" in a for a in result.axioms_added)  # a comment is documentation, not an axiom


def test_potentially_breaking_changes_without_data(pair: tuple[Path, Path]) -> None:
    result = diff_ontologies(load_version(pair[0]), load_version(pair[1]))
    reasons = {b.curie: b.reason for b in result.potentially_breaking}
    assert set(reasons) == {"pcm:petBreed", "pcm:petSpecies", "pcm:hasPet"}
    assert reasons["pcm:petBreed"] == "removed"
    assert reasons["pcm:petSpecies"].startswith("re-ranged from xsd:string to xsd:integer")
    assert reasons["pcm:hasPet"] == "domain narrowed from schema:Person to pcm:MemoryOwner"  # the wider range is fine
    assert result.breaking == [] and not result.data_checked
    assert "POTENTIALLY BREAKING pcm:petBreed: removed" in result.text()


def test_stored_data_confirms_which_changes_break(pair: tuple[Path, Path], tmp_path: Path) -> None:
    dump = tmp_path / "data.trig"
    dump.write_text(DATA, encoding="utf-8")
    result = diff_ontologies(load_version(pair[0]), load_version(pair[1]), data=data_from_file(dump))
    breaking = {b.curie: (b.uses, b.misfits) for b in result.breaking}
    assert breaking == {"pcm:petBreed": (1, None), "pcm:petSpecies": (2, 1)}  # "dog" no longer fits; 3 does
    assert "not breaking pcm:hasPet" in result.text()
    assert "BREAKING pcm:petSpecies: re-ranged" in result.text()


def test_a_memory_is_stored_data_too(pair: tuple[Path, Path], memory: Memory) -> None:
    ns = memory.manifest.namespace
    graph = ox.NamedNode(memory.naming.extraction_graph(memory.naming.post("k1")))
    pet = ox.NamedNode(ns + "rex")
    memory.store.write([ox.Quad(pet, ox.NamedNode(PCM + "petBreed"), ox.Literal("beagle"), graph)])
    result = diff_ontologies(load_version(pair[0]), load_version(pair[1]), data=memory.store.select)
    assert [(b.curie, b.uses) for b in result.breaking] == [("pcm:petBreed", 1)]


def test_cli_diff_exits_1_on_a_breaking_change(pair: tuple[Path, Path], tmp_path: Path) -> None:
    dump = tmp_path / "data.trig"
    dump.write_text(DATA, encoding="utf-8")
    runner = CliRunner()
    flagged = runner.invoke(ontology_cli, ["diff", str(pair[0]), str(pair[1]), "--data", str(dump)])
    assert flagged.exit_code == 1, flagged.output
    assert flagged.output.startswith("ontology 0.1.0 -> 0.2.0: 1 added, 1 removed")
    empty = tmp_path / "empty.trig"
    empty.write_text("", encoding="utf-8")
    harmless = runner.invoke(ontology_cli, ["diff", str(pair[0]), str(pair[1]), "--data", str(empty), "--json"])
    assert harmless.exit_code == 0, harmless.output
    assert '"breaking": []' in harmless.output


def test_a_single_file_and_the_shipped_folder_load(tmp_path: Path) -> None:
    shipped = load_version(REPO / "pcm_ontology")
    assert set(shipped.terms) == set(load_ontology().terms)
    single = tmp_path / "one.ttl"
    single.write_text('<https://w3id.org/pcm/ontology> a <http://www.w3.org/2002/07/owl#Ontology> ; '
                      '<http://www.w3.org/2002/07/owl#versionInfo> "1" .', encoding="utf-8")
    result = diff_ontologies(load_version(single), shipped)
    assert len(result.added) == len(shipped.terms) and result.potentially_breaking == []

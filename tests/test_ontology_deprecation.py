"""Deprecation in the manner of the ODK: owl:deprecated + dcterms:isReplacedBy, out of the catalogue, marked in the
docs, and a migration script generated for replaced terms."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from pcm.cli_ontology import ontology as ontology_cli
from pcm.memory import Memory
from pcm.namespaces import PCM
from pcm.ontology import load_ontology
from pcm.ontology_tools.check import lint_ontology, run_check
from pcm.ontology_tools.diff import load_version
from pcm.ontology_tools.docs import write_docs
from pcm.ontology_tools.migrate import migrate, replacement_script
from pcm.ontology_tools.vocab import load_vocabularies
from pcm.settings import Settings
from tests.conftest import VOCAB
from tests.ontology_tools.test_ontology_tools_migrate import fill

REPO = Path(__file__).resolve().parents[1]
SPECIES = """
pcm:species a owl:DatatypeProperty, owl:FunctionalProperty ;
    rdfs:label "species" ;
    rdfs:comment "What kind of animal a pet is (dog, cat, ...)." ;
    rdfs:domain pcm:Pet ;
    rdfs:range xsd:string ;
    pcm:area "pets" .
"""


def deprecating(folder: Path) -> Path:
    """Ontology 0.2.0: pcm:petSpecies deprecated, replaced by the new pcm:species."""
    folder.mkdir()
    for path in (REPO / "pcm_ontology").glob("*.ttl"):
        text = path.read_text(encoding="utf-8")
        if path.name == "pcm.ttl":
            text = text.replace('owl:versionInfo "0.1.0"', 'owl:versionInfo "0.2.0"').replace("ontology/0.1.0>", "ontology/0.2.0>")
            text = text.replace("pcm:petSpecies a owl:DatatypeProperty",
                                "pcm:petSpecies owl:deprecated true ;\n    dcterms:isReplacedBy pcm:species .\n"
                                "pcm:petSpecies a owl:DatatypeProperty") + SPECIES
        (folder / path.name).write_text(text, encoding="utf-8")
    return folder


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return deprecating(tmp_path / "onto")


def test_a_deprecated_term_stays_defined_but_leaves_the_catalogue(folder: Path) -> None:
    onto = load_version(folder)
    old, new = PCM + "petSpecies", PCM + "species"
    assert onto.terms[old].deprecated and onto.terms[old].replaced_by == (new,)
    assert onto.defines(old)  # stored data using it still validates
    assert [t.iri for t in onto.deprecated()] == [old]
    for compact in (False, True):
        text = onto.catalogue(compact=compact)
        assert "pcm:species" in text and "pcm:petSpecies" not in text
    assert "dcterms:isReplacedBy" not in onto.catalogue()  # a term about terms is never offered to the model
    assert "pcm:petSpecies" in load_ontology().catalogue()


def test_is_replaced_by_is_declared_and_replacements_are_linted(folder: Path) -> None:
    vocab = load_vocabularies(VOCAB)
    findings = lint_ontology(load_version(folder), vocab)
    assert not [f for f in findings if f.severity == "error"], [f.text() for f in findings]
    broken = folder / "pcm.ttl"
    broken.write_text(broken.read_text(encoding="utf-8").replace("dcterms:isReplacedBy pcm:species",
                                                                 "dcterms:isReplacedBy pcm:specis"), encoding="utf-8")
    codes = [(f.code, f.where) for f in lint_ontology(load_version(folder), vocab) if f.severity == "error"]
    assert ("replaced-by", "pcm:petSpecies") in codes


def test_a_query_using_a_deprecated_term_gets_a_warning(folder: Path, tmp_path: Path) -> None:
    queries = tmp_path / "queries"
    queries.mkdir()
    (queries / "species.rq").write_text(
        "PREFIX pcm: <https://w3id.org/pcm/ontology#>\nSELECT ?s WHERE { ?p pcm:petSpecies ?s }\n", encoding="utf-8")
    report = run_check(ontology_dir=folder, queries_dir=queries, prompts=[], reasoner=False,
                       vocab_dir=VOCAB)
    found = [f for f in report.findings if f.code == "deprecated-term"]
    assert len(found) == 1 and found[0].severity == "warning" and "use pcm:species" in found[0].message
    assert "species.rq" in found[0].where


def test_docs_mark_deprecated_terms_and_their_replacement(folder: Path, tmp_path: Path) -> None:
    md, page = write_docs(load_version(folder), tmp_path / "docs")
    text = md.read_text(encoding="utf-8") if md.suffix == ".md" else page.read_text(encoding="utf-8")
    html = page.read_text(encoding="utf-8") if page.suffix == ".html" else md.read_text(encoding="utf-8")
    assert "#### ~~pcm:petSpecies~~ (deprecated)" in text
    assert "- replaced by: [`pcm:species`](#pcm-species)" in text
    assert 'class="term deprecated" id="pcm-petSpecies"' in html and "DEPRECATED" in html


def test_the_generated_script_migrates_stored_data_to_the_replacement(
    folder: Path, settings: Settings
) -> None:
    onto = load_version(folder)
    script = replacement_script(onto)
    assert f"<{PCM}petSpecies>" in script and f"<{PCM}species>" in script
    result = CliRunner().invoke(ontology_cli, ["deprecated", "--ontology", str(folder), "--migration-from", "0.1.0",
                                               "--json"])
    assert result.exit_code == 0, result.output
    written = Path(json.loads(result.stdout)["written"])
    assert written == folder / "migrations" / "0.1.0-to-0.2.0.replaced.ru"
    again = CliRunner().invoke(ontology_cli, ["deprecated", "--ontology", str(folder), "--migration-from", "0.1.0"])
    assert again.exit_code == 2 and "already exists" in again.stderr

    with Memory.init(settings, owner="Dana Whitfield") as memory:
        fill(memory)
        report = migrate(memory.context, ontology=onto, migrations=folder / "migrations")
        assert report.scripts == [written.name] and report.applied
        assert report.after is not None and report.after.violations == 0
        assert memory.backend.query(f"ASK {{ ?pet <{PCM}species> 'dog' }}")
        assert not memory.backend.query(f"ASK {{ GRAPH ?g {{ ?pet <{PCM}petSpecies> ?s }} "
                                        "FILTER(?g != <urn:pcm:graph:ontology>) }")

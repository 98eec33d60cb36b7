"""`pcm ontology check`: parse errors, HermiT consistency, lint, and term use in shapes, queries and prompts."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
import rdflib
from click.testing import CliRunner

from pcm.cli_ontology import ontology as ontology_cli
from pcm.namespaces import PCM, turtle_prefixes
from pcm.ontology import load_ontology
from pcm.ontology_tools.check import Finding, lint_ontology, run_check
from pcm.ontology_tools.usage import markdown_terms, sparql_terms
from pcm.ontology_tools.vocab import load_vocabularies
from tests.conftest import VOCAB

needs_java = pytest.mark.skipif(shutil.which("java") is None, reason="HermiT needs java")

SMALL = turtle_prefixes() + """
<https://w3id.org/pcm/ontology> a owl:Ontology ; owl:versionInfo "9.0" .
pcm:area a owl:AnnotationProperty ; rdfs:label "area" ; rdfs:comment "Topic of a term." ; rdfs:range xsd:string ;
    pcm:area "general" .
schema:Person a owl:Class ; rdfs:label "Person" ; rdfs:comment "A person." ; pcm:area "people" .
pcm:Pet a owl:Class ; rdfs:label "Pet" ; rdfs:comment "A domestic animal." ; pcm:area "pets" .
pcm:Plant a owl:Class ; rdfs:label "Plant" ; rdfs:comment "A plant someone grows." ; pcm:area "plants" .
pcm:hasPet a owl:ObjectProperty ; rdfs:label "has pet" ; rdfs:comment "The person keeps this pet." ;
    rdfs:domain schema:Person ; rdfs:range pcm:Pet ; pcm:area "pets" .
pcm:petSpecies a owl:DatatypeProperty ; rdfs:label "pet species" ; rdfs:comment "dog, cat, ..." ;
    rdfs:domain pcm:Pet ; rdfs:range xsd:string ; pcm:area "pets" .
"""

SHAPES = """@prefix sh: <http://www.w3.org/ns/shacl#> .
@prefix pcm: <https://w3id.org/pcm/ontology#> .
@prefix ex: <https://example.org/shapes#> .

ex:PetShape a sh:NodeShape ;
    sh:targetClass pcm:Pet ;
    sh:property [ sh:path pcm:petSpecies ; sh:maxCount 1 ] .
"""


def small_project(tmp_path: Path, ontology: str = SMALL, shapes: str = SHAPES, query: str = "") -> dict[str, object]:
    """An ontology, shapes and queries folder in tmp_path, as run_check's keyword arguments."""
    for name in ("onto", "shapes", "queries"):
        (tmp_path / name).mkdir()
    (tmp_path / "onto" / "pcm.ttl").write_text(ontology, encoding="utf-8")
    (tmp_path / "shapes" / "shapes.ttl").write_text(shapes, encoding="utf-8")
    (tmp_path / "queries" / "pets.rq").write_text(
        query or "PREFIX pcm: <https://w3id.org/pcm/ontology#>\nSELECT ?p WHERE { ?o pcm:hasPet ?p }\n", encoding="utf-8"
    )
    return {
        "ontology_dir": tmp_path / "onto",
        "shapes_dir": tmp_path / "shapes",
        "queries_dir": tmp_path / "queries",
        "prompts": [],
        "vocab_dir": VOCAB,
        "workdir": tmp_path / "hermit",
    }


def codes(findings: list[Finding]) -> list[tuple[str, str]]:
    return [(f.code, f.where) for f in findings]


# ---------------------------------------------------------------------- the reasoner


@needs_java
@pytest.mark.engine
def test_a_clean_small_ontology_passes_with_the_reasoner(tmp_path: Path) -> None:
    saved = tempfile.tempdir
    report = run_check(**small_project(tmp_path), reasoner=True)  # type: ignore[arg-type]
    assert report.ok, report.text()
    assert report.version == "9.0" and report.counts["classes"] == 3
    assert report.timings["reasoner"] > 0
    assert (tmp_path / "hermit" / "ontology.nt").is_file()  # HermiT read N-Triples, not Turtle
    assert tempfile.tempdir == saved  # owlready2's temp directory was pointed at ours only for the call


@needs_java
@pytest.mark.engine
def test_an_inconsistent_axiom_is_caught(tmp_path: Path) -> None:
    broken = SMALL + """
pcm:Pet owl:disjointWith pcm:Plant .
pcm:rex a owl:NamedIndividual, pcm:Pet, pcm:Plant ; rdfs:label "Rex" ; rdfs:comment "A pet that is a plant." .
"""
    report = run_check(**small_project(tmp_path, broken), reasoner=True)  # type: ignore[arg-type]
    assert not report.ok
    assert [f.code for f in report.errors] == ["inconsistent"]
    # the explanation is the minimal set: the disjointness and the two types, nothing else
    assert report.errors[0].message.endswith(
        "because of these axioms together: pcm:Pet owl:disjointWith pcm:Plant ; "
        "pcm:rex rdf:type pcm:Pet ; pcm:rex rdf:type pcm:Plant"), report.errors[0].message


@needs_java
@pytest.mark.engine
def test_an_unsatisfiable_class_is_named(tmp_path: Path) -> None:
    broken = SMALL + """
pcm:Pet owl:disjointWith pcm:Plant .
pcm:Chimera a owl:Class ; rdfs:label "Chimera" ; rdfs:comment "Both a pet and a plant." ; pcm:area "pets" ;
    rdfs:subClassOf pcm:Pet, pcm:Plant .
"""
    report = run_check(**small_project(tmp_path, broken), reasoner=True)  # type: ignore[arg-type]
    assert codes(report.errors) == [("unsatisfiable", "pcm:Chimera")]
    assert report.errors[0].message.endswith(
        "because of these axioms together: pcm:Chimera rdfs:subClassOf pcm:Pet ; "
        "pcm:Chimera rdfs:subClassOf pcm:Plant ; pcm:Pet owl:disjointWith pcm:Plant"), report.errors[0].message


@needs_java
@pytest.mark.engine
@pytest.mark.slow
def test_an_unsatisfiable_class_is_explained_within_the_whole_ontology(tmp_path: Path) -> None:
    from pcm.ontology_tools.explain import explain_unsatisfiable

    graph = load_ontology().graph + rdflib.Graph().parse(data=turtle_prefixes() + """
pcm:Pet owl:disjointWith schema:Person .
pcm:Familiar a owl:Class ; rdfs:subClassOf pcm:Pet ;
    owl:equivalentClass [ a owl:Restriction ; owl:onProperty schema:knows ; owl:someValuesFrom schema:Person ] .
schema:knows rdfs:domain schema:Person .
""", format="turtle")
    found = explain_unsatisfiable(graph, PCM + "Familiar", curie=load_ontology().curie, workdir=tmp_path)
    # one justification of several (schema:knows has FOAF's domain too, through equivalences): the three axioms
    # every one of them needs are there, and the set is minimal
    assert found.minimal, found
    assert {"pcm:Familiar rdfs:subClassOf pcm:Pet", "pcm:Pet owl:disjointWith schema:Person"} <= set(found.axioms)
    assert any(a.startswith("pcm:Familiar owl:equivalentClass [") for a in found.axioms)
    assert len(found.axioms) <= 6 and any("rdfs:domain" in a for a in found.axioms)


def test_missing_java_is_a_reasoner_error_not_a_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import owlready2

    monkeypatch.setattr(owlready2, "JAVA_EXE", str(tmp_path / "no-such-java"))
    report = run_check(**small_project(tmp_path), reasoner=True)  # type: ignore[arg-type]
    assert [f.code for f in report.errors] == ["reasoner"]
    assert "Java" in report.errors[0].message


# ---------------------------------------------------------------------- parse and lint


def test_a_file_that_does_not_parse_is_named(tmp_path: Path) -> None:
    project = small_project(tmp_path)
    (tmp_path / "onto" / "broken.ttl").write_text("pcm:x a ", encoding="utf-8")
    report = run_check(**project, reasoner=False)  # type: ignore[arg-type]
    assert codes(report.errors) == [("parse", "broken.ttl")]
    assert "\n" not in report.errors[0].message


def test_lint_finds_undocumented_terms_and_missing_domains(tmp_path: Path) -> None:
    sloppy = SMALL + """
pcm:Bare a owl:Class ; pcm:area "pets" .
pcm:owns a owl:ObjectProperty ; rdfs:label "owns" ; rdfs:comment "Owns it." ; pcm:area "nowhere" .
pcm:weight a owl:DatatypeProperty ; rdfs:label "weight" ; rdfs:comment "Weight." ; rdfs:domain pcm:Pet ;
    rdfs:range pcm:Pet ; pcm:area "pets" .
"""
    report = run_check(**small_project(tmp_path, sloppy), reasoner=False)  # type: ignore[arg-type]
    found = set(codes(report.errors))
    assert {("missing-label", "pcm:Bare"), ("missing-comment", "pcm:Bare")} <= found
    assert {("missing-domain", "pcm:owns"), ("missing-range", "pcm:owns"), ("unknown-area", "pcm:owns")} <= found
    assert ("range-kind", "pcm:weight") in found


def test_a_term_the_standard_does_not_define_is_caught(tmp_path: Path) -> None:
    invented = SMALL + """
schema:RepairAction a owl:Class ; rdfs:label "Repair" ; rdfs:comment "Invented by mistake." ; pcm:area "services" .
"""
    report = run_check(**small_project(tmp_path, invented), reasoner=False)  # type: ignore[arg-type]
    assert [(f.code, f.where) for f in report.errors] == [("nonstandard-term", "pcm_ontology (schema:RepairAction)")]


def test_a_subproperty_inherits_domain_and_range(tmp_path: Path) -> None:
    inherited = SMALL + """
pcm:hasDog a owl:ObjectProperty ; rdfs:label "has dog" ; rdfs:comment "A dog kept." ; rdfs:subPropertyOf pcm:hasPet ;
    pcm:area "pets" .
"""
    report = run_check(**small_project(tmp_path, inherited), reasoner=False)  # type: ignore[arg-type]
    assert report.ok, report.text()


# ---------------------------------------------------------------------- shapes, queries, prompts


def test_an_undefined_term_in_a_shape_is_caught_with_its_line(tmp_path: Path) -> None:
    typo = SHAPES.replace("sh:targetClass pcm:Pet", "sh:targetClass pcm:Pett").replace("sh:maxCount", "sh:maxCout")
    report = run_check(**small_project(tmp_path, shapes=typo), reasoner=False)  # type: ignore[arg-type]
    undefined = [f for f in report.errors if f.code == "undefined-term"]
    assert [f.message.split(" ")[0] for f in undefined] == ["pcm:Pett"]
    assert undefined[0].where.endswith("shapes/shapes.ttl:6")
    assert any(f.code == "nonstandard-term" and "maxCout" in f.message for f in report.errors)


def test_terms_in_sparql_inside_shapes_and_in_queries_are_checked(tmp_path: Path) -> None:
    shapes = SHAPES + """
ex:Linked a sh:NodeShape ; sh:targetClass pcm:Pet ;
    sh:sparql [ sh:select \"\"\"SELECT $this WHERE { FILTER NOT EXISTS { ?x <https://w3id.org/pcm/ontology#hasPetz> $this } }\"\"\" ] .
"""
    query = "PREFIX schema: <https://schema.org/>\n# schema:InComment is not a use\nSELECT * { ?a schema:nmae \"pcm:inString\" }\n"
    report = run_check(**small_project(tmp_path, shapes=shapes, query=query), reasoner=False)  # type: ignore[arg-type]
    messages = [f.message for f in report.errors]
    assert any(m.startswith("pcm:hasPetz") for m in messages)
    assert any(m.startswith("schema:nmae") for m in messages)
    assert not any("InComment" in m or "inString" in m for m in messages)
    assert any(f.where.endswith("pets.rq:3") for f in report.errors)


def test_prompt_terms_are_checked_outside_the_generated_catalogue(tmp_path: Path) -> None:
    project = small_project(tmp_path)
    onto = load_ontology(tmp_path / "onto")
    prompt = tmp_path / "prompts" / "ask.v1.md"
    prompt.parent.mkdir()
    prompt.write_text(
        "Use pcm:hasPet and pcm:hasCat.\n<!-- catalogue:begin -->\n" + onto.catalogue() + "<!-- catalogue:end -->\n",
        encoding="utf-8",
    )
    report = run_check(**{**project, "prompts": [prompt]}, reasoner=False)  # type: ignore[arg-type]
    assert [(f.code, f.message.split(" ")[0]) for f in report.errors] == [("undefined-term", "pcm:hasCat")]
    prompt.write_text(prompt.read_text(encoding="utf-8").replace("## pets", "## pets (edited)"), encoding="utf-8")
    report = run_check(**{**project, "prompts": [prompt]}, reasoner=False)  # type: ignore[arg-type]
    assert "stale-catalogue" in [f.code for f in report.errors]


def test_http_schema_org_is_flagged(tmp_path: Path) -> None:
    query = "SELECT * { ?a <http://schema.org/name> ?n }\n"
    report = run_check(**small_project(tmp_path, query=query), reasoner=False)  # type: ignore[arg-type]
    assert [f.code for f in report.errors] == ["schema-http"]


def test_sparql_scanner_skips_strings_comments_variables_and_declarations() -> None:
    text = (
        'PREFIX pcm: <https://w3id.org/pcm/ontology#>\n'
        'SELECT ?pcm WHERE { ?x pcm:hasPet ?y . # pcm:notAUse\n'
        ' FILTER(?y != "pcm:alsoNot" && STRSTARTS(STR(?g), "urn:pcm:graph:x")) ?y a <https://schema.org/Thing> }\n'
        'ORDER BY ?y LIMIT {{limit}}\n'
    )
    uses = sparql_terms(text, Path("q.rq"))
    assert [(u.iri.rsplit("/", 1)[-1].rsplit("#", 1)[-1], u.line) for u in uses] == [("hasPet", 2), ("Thing", 3)]


def test_markdown_scanner_reads_curies_and_bracketed_iris() -> None:
    text = "Use schema:BuyAction, not schema.org or https://schema.org/Person;\nsee <https://schema.org/Car>. m:x too.\n"
    uses = markdown_terms(text, Path("p.md"))
    assert [(u.iri, u.line) for u in uses] == [("https://schema.org/BuyAction", 1), ("https://schema.org/Car", 2)]


# ---------------------------------------------------------------------- the shipped ontology


def test_the_shipped_ontology_is_documented_and_uses_real_terms() -> None:
    onto = load_ontology()
    vocab = load_vocabularies(VOCAB)
    assert [f for f in lint_ontology(onto, vocab) if f.severity != "info"] == []


def test_the_shipped_queries_use_only_defined_terms(tmp_path: Path) -> None:
    report = run_check(shapes_dir=tmp_path, prompts=[], reasoner=False)
    assert [f for f in report.errors if f.code != "parse"] == [], report.text()


def test_the_shipped_shapes_use_only_defined_terms() -> None:
    report = run_check(prompts=[], reasoner=False)
    assert report.ok, report.text()


# ---------------------------------------------------------------------- CLI


def test_cli_check_exits_non_zero_with_a_report_and_zero_when_clean(tmp_path: Path) -> None:
    project = small_project(tmp_path, shapes=SHAPES.replace("pcm:Pet ;", "pcm:Pett ;"))
    (tmp_path / "none.md").write_text("no terms here\n", encoding="utf-8")
    args = ["check", "--ontology", str(project["ontology_dir"]), "--queries", str(project["queries_dir"]),
            "--no-reasoner", "--prompt", str(tmp_path / "none.md")]
    result = CliRunner().invoke(ontology_cli, [*args, "--shapes", str(project["shapes_dir"])])
    assert result.exit_code == 1, result.output
    assert "[error undefined-term]" in result.output and "pcm:Pett" in result.output
    assert "FAILED: 1 error(s)" in result.output
    (tmp_path / "good-shapes").mkdir()
    (tmp_path / "good-shapes" / "s.ttl").write_text(SHAPES, encoding="utf-8")
    clean = CliRunner().invoke(ontology_cli, [*args, "--shapes", str(tmp_path / "good-shapes"), "--json"])
    assert clean.exit_code == 0, clean.output
    assert '"ok": true' in clean.output


# ---------------------------------------------------------------------- owl:imports, offline


IMPORTING = SMALL.replace(
    '<https://w3id.org/pcm/ontology> a owl:Ontology ; owl:versionInfo "9.0" .',
    '<https://w3id.org/pcm/ontology> a owl:Ontology ; owl:versionInfo "9.0" ; owl:imports <http://www.w3.org/ns/prov-o> .',
)


@needs_java
@pytest.mark.engine
def test_imports_are_read_through_an_xml_catalog_from_local_files(tmp_path: Path) -> None:
    project = small_project(tmp_path, IMPORTING.replace("http://www.w3.org/ns/prov-o", "http://www.w3.org/2004/02/skos/core"))
    (tmp_path / "onto" / "catalog-v001.xml").write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<catalog prefer="public" xmlns="urn:oasis:names:tc:entity:xmlns:xml:catalog">\n'
        f'  <uri name="http://www.w3.org/2004/02/skos/core" uri="{VOCAB / "skos.nq"}"/>\n'
        "</catalog>\n", encoding="utf-8")
    report = run_check(**project, reasoner=True)  # type: ignore[arg-type]
    assert report.ok, report.text()
    assert report.counts["imports"] == 1
    given = (tmp_path / "hermit" / "ontology.nt").read_text(encoding="utf-8")
    assert "<http://www.w3.org/2004/02/skos/core#broader>" in given  # the imported vocabulary reached the reasoner
    assert "owl#imports" not in given  # and nothing was left for it to download


@needs_java
@pytest.mark.engine
def test_the_reasoner_sees_the_imported_axioms_through_a_toml_catalog(tmp_path: Path) -> None:
    vocab = tmp_path / "vocab" / "kinds.ttl"
    vocab.parent.mkdir()
    vocab.write_text("@prefix owl: <http://www.w3.org/2002/07/owl#> .\n"
                     "<https://example.org/kinds> a owl:Ontology .\n"
                     "<https://w3id.org/pcm/ontology#Pet> owl:disjointWith <https://w3id.org/pcm/ontology#Plant> .\n",
                     encoding="utf-8")
    both = IMPORTING.replace("<http://www.w3.org/ns/prov-o>", "<https://example.org/kinds>") + (
        'pcm:Fern a owl:NamedIndividual, pcm:Pet, pcm:Plant ; rdfs:label "Fern" ; rdfs:comment "Fern." .\n')
    project = small_project(tmp_path, both)
    catalog = tmp_path / "catalog.toml"
    catalog.write_text('[imports]\n"https://example.org/kinds" = "vocab/kinds.ttl"\n', encoding="utf-8")
    alone = run_check(**project, reasoner=True)  # type: ignore[arg-type]
    assert [f.code for f in alone.errors] == ["import"], alone.text()  # unresolved, and consistent without it
    report = run_check(**project, reasoner=True, catalog_file=catalog)  # type: ignore[arg-type]
    assert [f.code for f in report.errors] == ["inconsistent"], report.text()


@pytest.mark.engine  # HermiT runs too (java), though the import finding is the point
def test_an_unresolved_import_is_one_finding_not_a_traceback(tmp_path: Path) -> None:
    project = small_project(tmp_path, IMPORTING)
    args = ["check", "--ontology", str(project["ontology_dir"]), "--queries", str(project["queries_dir"]),
            "--shapes", str(project["shapes_dir"])]
    result = CliRunner().invoke(ontology_cli, args)
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    found = [line for line in result.stdout.splitlines() if line.startswith("[error import]")]
    assert len(found) == 1 and "<http://www.w3.org/ns/prov-o>" in found[0] and "never downloads" in found[0]
    assert "Traceback" not in result.output


# ---------------------------------------------------------------------- the report (robot report's rules)


REPORTED = SMALL.replace(
    '<https://w3id.org/pcm/ontology> a owl:Ontology ; owl:versionInfo "9.0" .',
    "# Conventions\n# - No disjointness axioms: the ontology stays consistent\n#   whatever a conversation says.\n"
    "# - Terms are short.\n\n"
    '<https://w3id.org/pcm/ontology> a owl:Ontology ; owl:versionInfo "9.1" ;\n'
    "    owl:versionIRI <https://w3id.org/pcm/ontology/9.0> .",
) + """
pcm:Hobby a owl:Class ; rdfs:label "Pet" ; rdfs:comment "Something done for pleasure." ; pcm:area "activities" .
pcm:Garden a owl:Class ; rdfs:label "garden", "yard" ; rdfs:comment "Where plants grow." ; pcm:area "plants" ;
    owl:disjointWith pcm:Pet .
pcm:Pond a owl:Class ; rdfs:label "pond " ; rdfs:comment "A small  body of water." ; pcm:area "places" .
"""


def test_the_report_flags_what_robot_report_flags(tmp_path: Path) -> None:
    project = small_project(tmp_path, REPORTED, query="PREFIX pcm: <https://w3id.org/pcm/ontology#>\n"
                                                      "SELECT ?s WHERE { ?p pcm:petSpecis ?s }\n")
    report = run_check(**project, reasoner=False)  # type: ignore[arg-type]
    found = {(f.severity, f.code, f.where) for f in report.findings}
    assert ("error", "duplicate-label", "pcm:Hobby") in found or ("error", "duplicate-label", "pcm:Pet") in found
    assert ("error", "multiple-labels", "pcm:Garden") in found
    assert ("warning", "annotation-whitespace", "pcm:Pond") in found
    assert ("error", "version-mismatch", "<https://w3id.org/pcm/ontology>") in found
    line = REPORTED.splitlines().index("# - No disjointness axioms: the ontology stays consistent") + 1
    assert ("error", "convention", f"pcm.ttl:{line}") in found  # the stated convention's own line
    assert ("info", "convention", f"pcm.ttl:{line + 2}") in found  # stated, but no rule checks it
    misspelt = next(f for f in report.findings if f.code == "undefined-term" and "petSpecis" in f.message)
    assert misspelt.message.endswith("did you mean pcm:petSpecies?")
    convention = next(f for f in report.findings if f.code == "convention" and f.severity == "error")
    assert "disjointness axiom on pcm:Garden" in convention.message and "whatever a conversation" in convention.message


def test_the_report_as_tsv_and_json(tmp_path: Path) -> None:
    project = small_project(tmp_path, REPORTED)
    base = ["check", "--ontology", str(project["ontology_dir"]), "--queries", str(project["queries_dir"]),
            "--shapes", str(project["shapes_dir"]), "--no-reasoner"]
    tsv = CliRunner().invoke(ontology_cli, [*base, "--tsv"])
    assert tsv.exit_code == 1, tsv.output
    rows = [line.split("\t") for line in tsv.stdout.splitlines()]
    assert rows[0] == ["Level", "Rule Name", "Where", "Message"] and all(len(r) == 4 for r in rows)
    levels = [r[0] for r in rows[1:]]
    assert levels == sorted(levels, key=["ERROR", "WARNING", "INFO"].index) and "INFO" in levels
    assert rows[[r[1] for r in rows].index("multiple-labels")][:3] == ["ERROR", "multiple-labels", "pcm:Garden"]
    as_json = CliRunner().invoke(ontology_cli, [*base, "--json"])
    findings = json.loads(as_json.stdout)["findings"]
    assert {"code": "version-mismatch", "severity": "error"}.items() <= next(
        f for f in findings if f["code"] == "version-mismatch").items()
    text = CliRunner().invoke(ontology_cli, base)
    assert "[info " not in text.stdout and "info finding(s)" in text.stdout

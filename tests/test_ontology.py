"""The PCM ontology files and their loader: completeness, reuse of real terms, hierarchy, catalogue, consistency."""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

import pyoxigraph
import pytest
from rdflib import OWL, RDF, RDFS, Literal, URIRef

from pcm.errors import PcmError
from pcm.layout import LEGACY_LAYOUT
from pcm.namespaces import (
    DCTERMS,
    FOAF,
    OB,
    PCM,
    PROV,
    REL,
    SCHEMA,
    SCHEMA_HTTP,
    SIOC,
    SKOS,
    VOCABULARY_NAMESPACES,
    XSD,
)
from pcm.ontology import AREAS, META_AREAS, ONTOLOGY_IRI, Ontology, in_catalogue, load_ontology
from tests.conftest import VOCAB

REPO = Path(__file__).resolve().parents[1]
CHECKED_NAMESPACES = (SCHEMA, PROV, FOAF, SKOS, SIOC, DCTERMS)
DECLARATION_TYPES = (OWL.Class, OWL.ObjectProperty, OWL.DatatypeProperty, OWL.AnnotationProperty)


@pytest.fixture(scope="module")
def vocab_terms() -> frozenset[str]:
    """Every subject IRI of the published vocabularies, schema.org spelt https://schema.org/ as pcm spells it."""
    subject = re.compile(r"^<([^>]+)>", re.MULTILINE)
    found: set[str] = set()
    for path in VOCAB.glob("*.nq"):
        found.update(subject.findall(path.read_text(encoding="utf-8")))
    return frozenset(SCHEMA + iri[len(SCHEMA_HTTP):] if iri.startswith(SCHEMA_HTTP) else iri for iri in found)


def all_iris(onto: Ontology) -> set[str]:
    return {str(node) for triple in onto.graph for node in triple if isinstance(node, URIRef)}


def declared(onto: Ontology) -> set[URIRef]:
    return {s for t in DECLARATION_TYPES for s in onto.graph.subjects(RDF.type, t) if isinstance(s, URIRef)}


# ---------------------------------------------------------------------- files and documentation


def test_loads_with_version_and_many_terms(onto: Ontology) -> None:
    assert onto.version == "0.1.0"
    assert (URIRef(ONTOLOGY_IRI), RDF.type, OWL.Ontology) in onto.graph
    assert len(onto.classes) > 150
    assert len(onto.properties) > 150
    assert onto.classes.isdisjoint(onto.properties)


def test_every_pcm_term_has_label_comment_domain_and_range(onto: Ontology) -> None:
    problems = []
    for iri, term in onto.terms.items():
        if not iri.startswith(PCM):
            continue
        subject = URIRef(iri)
        if onto.graph.value(subject, RDFS.label) is None or not term.comment:
            problems.append(f"{onto.curie(iri)}: label or comment missing")
        if term.kind in ("object_property", "datatype_property") and (
            onto.graph.value(subject, RDFS.domain) is None or onto.graph.value(subject, RDFS.range) is None
        ):
            problems.append(f"{onto.curie(iri)}: rdfs:domain or rdfs:range missing")
    assert not problems, problems


def test_every_class_and_property_has_a_known_area(onto: Ontology) -> None:
    area = URIRef(PCM + "area")
    missing = [onto.curie(str(s)) for s in declared(onto) if not isinstance(onto.graph.value(s, area), Literal)]
    unknown = sorted({t.area for t in onto.terms.values()} - set(AREAS) - META_AREAS)
    assert not missing, f"no pcm:area on {sorted(missing)}"
    assert not unknown, f"areas not in AREAS: {unknown}"


def test_every_declared_term_has_a_label_and_comment(onto: Ontology) -> None:
    bare = [onto.curie(i) for i, t in onto.terms.items() if not t.comment or onto.graph.value(URIRef(i), RDFS.label) is None]
    assert not bare, f"undocumented terms: {sorted(bare)}"


def test_data_model_terms_have_the_agreed_names_and_types(onto: Ontology) -> None:
    t = onto.terms
    integer, string, date_time = XSD + "integer", XSD + "string", XSD + "dateTime"
    assert t[PCM + "position"].range == (integer,)
    assert t[PCM + "inputTokens"].range == t[PCM + "outputTokens"].range == (integer,)
    for name in ("role", "speakerName", "extractionStatus", "extractionReport", "model", "promptVersion",
                 "ontologyVersion", "summary"):
        assert t[PCM + name].kind == "datatype_property" and t[PCM + name].range == (string,), name
    assert t[PCM + "summary"].domain == (SIOC + "Thread",)
    assert t[PCM + "supersededAt"].range == (date_time,)
    assert t[PCM + "supersededBy"].kind == "object_property" and t[PCM + "supersededBy"].range == (SIOC + "Post",)
    assert t[PCM + "area"].kind == "annotation_property"
    assert t[PCM + "MemoryOwner"].parents == (FOAF + "Person",)
    assert t[PCM + "AssistantAgent"].parents == (PROV + "SoftwareAgent",)
    assert t[PCM + "ExtractionActivity"].parents == t[PCM + "ImportActivity"].parents == (PROV + "Activity",)


# ---------------------------------------------------------------------- reused terms are real


def test_reused_w3c_and_schema_terms_exist_in_the_published_vocabularies(
    onto: Ontology, vocab_terms: frozenset[str]
) -> None:
    used = {iri for iri in all_iris(onto) if iri.startswith(CHECKED_NAMESPACES)}
    missing = sorted(onto.curie(iri) for iri in used - vocab_terms)
    assert not missing, f"terms not in the published vocabularies (pcm/ontology_tools/standard_vocab): {missing}"
    assert len(used) > 300  # the check really covered the reused terms


def test_the_vocabulary_check_would_catch_an_invented_term(vocab_terms: frozenset[str]) -> None:
    assert SCHEMA + "BuyAction" in vocab_terms
    assert SCHEMA + "RepairAction" not in vocab_terms
    assert SCHEMA + "quantity" not in vocab_terms


def test_every_vocabulary_term_used_is_declared(onto: Ontology) -> None:
    """No dangling references: a parent, domain or range under a vocabulary namespace is itself declared."""
    dangling = sorted(
        onto.curie(iri) for iri in all_iris(onto) if iri.startswith(VOCABULARY_NAMESPACES) and not onto.defines(iri)
    )
    assert not dangling, f"used but not declared: {dangling}"


def test_requested_reused_terms_are_declared(onto: Ontology) -> None:
    expected = [
        SCHEMA + n for n in ("Person", "Place", "City", "Country", "Organization", "LocalBusiness", "Restaurant",
                             "Hospital", "Product", "Vehicle", "Car", "Event", "SportsEvent", "MusicEvent",
                             "SocialEvent", "CreativeWork", "Book", "Movie", "Schedule", "MonetaryAmount",
                             "QuantitativeValue", "agent", "participant", "object", "result", "location",
                             "startDate", "endDate", "startTime", "endTime", "actionStatus", "price",
                             "priceCurrency", "brand", "manufacturer", "model", "color", "size", "duration",
                             "birthDate", "homeLocation", "address", "worksFor", "alumniOf", "jobTitle", "knows",
                             "spouse", "children", "parent", "sibling", "relatedTo", "owns", "nationality", "email",
                             "telephone", "url", "recipient", "fromLocation", "toLocation", "instrument",
                             "repeatFrequency", "byDay", "CompletedActionStatus", "PotentialActionStatus",
                             "ActiveActionStatus", "FailedActionStatus")
    ] + [OB + n for n in ("hasFather", "hasMother", "hasParent", "hasChild", "hasSon", "hasDaughter", "hasSibling",
                          "hasBrother", "hasSister", "hasSpouse", "hasHusband", "hasWife", "hasGrandparent",
                          "hasGrandchild", "causalContext")
    ] + [REL + n for n in ("friendOf", "colleagueOf", "mentorOf", "apprenticeTo", "acquaintanceOf", "neighborOf",
                           "worksWith", "childOf", "parentOf", "siblingOf", "spouseOf")
    ] + [PROV + n for n in ("Entity", "Activity", "Agent", "SoftwareAgent", "wasDerivedFrom", "wasGeneratedBy",
                            "wasAttributedTo", "used", "startedAtTime", "endedAtTime", "generatedAtTime")
    ] + [SIOC + n for n in ("Post", "Thread", "Container", "content", "has_container", "has_creator",
                            "previous_by_date", "reply_of")
    ] + [DCTERMS + n for n in ("created", "identifier", "source", "title")
    ] + [SKOS + n for n in ("Concept", "prefLabel", "altLabel", "broader")]
    missing = [onto.curie(i) for i in expected if not onto.defines(i)]
    assert not missing, missing


# ---------------------------------------------------------------------- hierarchy and kinds


def test_action_hierarchy_is_schema_orgs(onto: Ontology) -> None:
    s = SCHEMA
    assert {s + "BuyAction", s + "TradeAction", s + "Action", s + "Thing"} <= onto.superclasses(s + "BuyAction")
    assert s + "TransferAction" not in onto.superclasses(s + "BuyAction")
    assert {s + "ReserveAction", s + "PlanAction", s + "OrganizeAction"} <= onto.superclasses(s + "ReserveAction")
    assert {s + "ReactAction", s + "AssessAction"} <= onto.superclasses(s + "LikeAction")
    assert s + "PlayAction" in onto.superclasses(s + "ExerciseAction")
    assert s + "MoveAction" in onto.superclasses(s + "TravelAction")
    assert s + "ConsumeAction" in onto.superclasses(s + "EatAction")
    assert s + "CreateAction" in onto.superclasses(s + "CookAction")


def test_repair_action_is_ours_and_schema_has_none(onto: Ontology) -> None:
    assert SCHEMA + "Action" in onto.superclasses(PCM + "RepairAction")
    assert PCM + "RepairAction" in onto.subclasses(SCHEMA + "Action")
    assert SCHEMA + "RepairAction" not in all_iris(onto)
    assert not onto.defines(SCHEMA + "RepairAction")
    for path in (REPO / "pcm_ontology").glob("*.ttl"):
        assert "schema:RepairAction" not in path.read_text(encoding="utf-8"), path.name


def test_hierarchy_walks_equivalences_and_stops_at_unknown_terms(onto: Ontology) -> None:
    assert {FOAF + "Person", FOAF + "Agent"} <= onto.superclasses(SCHEMA + "Person")
    assert SCHEMA + "Person" in onto.superclasses(PCM + "MemoryOwner")
    assert PCM + "FoodHabit" in onto.subclasses(PCM + "Habit")
    assert onto.superclasses("http://example.org/Unknown") == frozenset({"http://example.org/Unknown"})
    assert {OB + "hasParent", SCHEMA + "parent", REL + "childOf", SCHEMA + "relatedTo"} <= onto.superproperties(
        OB + "hasFather"
    )
    assert OB + "hasFather" in onto.subproperties(SCHEMA + "parent")


def test_kinds_individuals_and_functional_properties(onto: Ontology) -> None:
    assert SCHEMA + "CompletedActionStatus" in onto.individuals
    assert onto.terms[SCHEMA + "CompletedActionStatus"].parents == (SCHEMA + "ActionStatusType",)
    assert onto.is_class(SCHEMA + "BuyAction") and not onto.is_property(SCHEMA + "BuyAction")
    assert onto.is_property(SCHEMA + "agent") and onto.terms[SCHEMA + "agent"].kind == "object_property"
    assert onto.terms[SCHEMA + "startDate"].kind == "datatype_property"
    assert {SCHEMA + "birthDate", PCM + "position", PCM + "extractionStatus"} <= onto.functional_properties
    assert SCHEMA + "homeLocation" not in onto.functional_properties
    assert onto.functional_properties <= onto.properties


def test_domains_and_ranges_spell_out_unions_and_schema_includes(onto: Ontology) -> None:
    assert onto.terms[PCM + "affects"].domain == (PCM + "ProblemEvent", PCM + "ServiceEvent")
    assert onto.terms[SCHEMA + "startDate"].range == (XSD + "date", XSD + "dateTime")
    assert SCHEMA + "Action" in onto.terms[SCHEMA + "agent"].domain
    assert onto.terms[SCHEMA + "BuyAction"].parents == (SCHEMA + "TradeAction",)


# ---------------------------------------------------------------------- catalogue, quads, curie


def test_catalogue_lists_every_class_and_property_once_per_line(onto: Ontology) -> None:
    text = onto.catalogue()
    first_words = [line.split(" ", 1)[0] for line in text.splitlines() if line and not line.startswith("## ")]
    assert sorted(first_words) == sorted(onto.curie(i) for i, t in onto.terms.items() if in_catalogue(t))
    assert {t.area for t in onto.terms.values() if not in_catalogue(t)} <= META_AREAS  # nothing shipped is deprecated
    assert "schema:BuyAction ⊑ schema:TradeAction — buying something" in text
    assert "pcm:hasPet ⊑ schema:owns (schema:Person → pcm:Pet) — The person keeps this pet" in text
    assert "schema:CompletedActionStatus : schema:ActionStatusType" in text
    assert "schema:birthDate (schema:Person → xsd:date) [functional]" in text


def test_catalogue_is_deterministic_and_grouped_in_area_order(onto: Ontology, tmp_path: Path) -> None:
    for path in (REPO / "pcm_ontology").glob("*.ttl"):
        shutil.copy(path, tmp_path / path.name)
    fresh = load_ontology(tmp_path)
    assert fresh is not onto
    assert fresh.catalogue() == onto.catalogue()
    headers = [line[3:] for line in onto.catalogue().splitlines() if line.startswith("## ")]
    assert headers == [a for a in AREAS if a in headers]


def test_catalogue_can_be_restricted_to_areas(onto: Ontology) -> None:
    pets = onto.catalogue(["pets", "plants"])
    assert pets.startswith("## pets\n") and "## plants" in pets
    assert "pcm:hasPet" in pets and "schema:BuyAction" not in pets
    assert onto.catalogue(["no-such-area"]) == ""
    assert len(pets) < len(onto.catalogue()) / 10


def test_quads_land_in_the_ontology_graph_and_answer_hierarchy_queries(onto: Ontology) -> None:
    quads = onto.quads()
    assert len(quads) == len(onto.graph)
    assert {q.graph_name for q in quads} == {pyoxigraph.NamedNode(LEGACY_LAYOUT.ontology)}
    store = pyoxigraph.Store()
    store.extend(quads)
    prefixes = f"PREFIX schema: <{SCHEMA}> PREFIX pcm: <{PCM}> PREFIX rdfs: <{RDFS}> PREFIX owl: <{OWL}> PREFIX rdf: <{RDF}>"
    assert store.query(
        f"{prefixes} ASK {{ GRAPH <{LEGACY_LAYOUT.ontology}> {{ schema:BuyAction rdfs:subClassOf* schema:Action }} }}"
    )
    members = store.query(
        f"{prefixes} SELECT ?c {{ GRAPH <{LEGACY_LAYOUT.ontology}> "
        f"{{ pcm:affects rdfs:domain/owl:unionOf/rdf:rest*/rdf:first ?c }} }}"
    )
    assert {row["c"].value for row in members} == {PCM + "ProblemEvent", PCM + "ServiceEvent"}


def test_curie_uses_the_shared_prefixes(onto: Ontology) -> None:
    assert onto.curie(SCHEMA + "BuyAction") == "schema:BuyAction"
    assert onto.curie(PCM + "hasPet") == "pcm:hasPet"
    assert onto.curie(REL + "friendOf") == "rel:friendOf"
    assert onto.curie("http://example.org/x") == "<http://example.org/x>"


# ---------------------------------------------------------------------- loading


MINIMAL = f"""@prefix owl: <{OWL}> . @prefix pcm: <{PCM}> .
<{ONTOLOGY_IRI}> a owl:Ontology ; owl:versionInfo "9.9" .
pcm:Thing a owl:Class ; pcm:area "pets" .
"""


def test_load_is_cached_per_directory_and_reads_only_top_level_turtle(onto: Ontology, tmp_path: Path) -> None:
    assert load_ontology() is onto
    (tmp_path / "a.ttl").write_text(MINIMAL, encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.ttl").write_text(f"<{PCM}Other> a <{OWL}Class> .", encoding="utf-8")
    small = load_ontology(tmp_path)
    assert small.version == "9.9"
    assert set(small.terms) == {PCM + "Thing"}
    assert small.terms[PCM + "Thing"].label == "Thing"  # falls back to the local name
    assert load_ontology(tmp_path) is small


def test_load_errors_are_one_line_pcm_errors(tmp_path: Path) -> None:
    with pytest.raises(PcmError, match="does not exist"):
        load_ontology(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(PcmError, match="no .ttl file"):
        load_ontology(tmp_path / "empty")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "broken.ttl").write_text("this is not turtle", encoding="utf-8")
    with pytest.raises(PcmError, match="broken.ttl") as caught:
        load_ontology(tmp_path / "bad")
    assert "\n" not in str(caught.value)
    (tmp_path / "unversioned").mkdir()
    (tmp_path / "unversioned" / "a.ttl").write_text(MINIMAL.replace('owl:versionInfo "9.9" ', "owl:imports <x:y> "))
    with pytest.raises(PcmError, match="versionInfo"):
        load_ontology(tmp_path / "unversioned")


# ---------------------------------------------------------------------- OWL consistency


@pytest.mark.skipif(shutil.which("java") is None, reason="HermiT needs java")
@pytest.mark.engine
def test_ontology_is_owl_consistent_under_hermit(
    onto: Ontology, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    owlready2 = pytest.importorskip("owlready2")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # owlready2 hands HermiT a temporary file
    path = tmp_path / "pcm.nt"
    onto.graph.serialize(path, format="nt", encoding="utf-8")
    world = owlready2.World()
    loaded = world.get_ontology(path.as_uri()).load()
    with loaded:
        owlready2.sync_reasoner_hermit(world, infer_property_values=False, debug=0)  # raises if inconsistent
    assert list(world.inconsistent_classes()) == []
    # the reasoner really saw the axioms: MemoryOwner is a schema:Person through foaf:Person ≡ schema:Person
    assert world[SCHEMA + "Person"] in world[PCM + "MemoryOwner"].ancestors()

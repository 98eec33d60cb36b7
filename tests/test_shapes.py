"""The extraction rules (shapes/*.ttl + pcm.shapes) on small deltas: each rule conforms and is violated."""

from __future__ import annotations

from pathlib import Path

import pytest
import rdflib

from pcm.errors import UsageError
from pcm.namespaces import turtle_prefixes
from pcm.ontology import Ontology
from pcm.shapes import ValidationReport, Validator, Violation

NS = "https://memory.example/alice/"
PREFIXES = turtle_prefixes() + f"@prefix : <{NS}> .\n"

#: The owner and an existing car, as the caller would pull them from the store for the context.
CONTEXT_TTL = """
:me a schema:Person ; rdfs:label "Alice" .
:car a schema:Car ; rdfs:label "my Golf" .
"""


@pytest.fixture(scope="module")
def validator(onto: Ontology) -> Validator:
    return Validator(onto)


def graph(ttl: str) -> rdflib.Graph:
    return rdflib.Graph().parse(data=PREFIXES + ttl, format="turtle")


def check(validator: Validator, ttl: str, context: str | None = CONTEXT_TTL) -> ValidationReport:
    ctx = graph(context) if context is not None else None
    return validator.validate(graph(ttl), memory_namespace=NS, context=ctx)


def only(report: ValidationReport, rule: str) -> list[Violation]:
    return [v for v in report.violations if v.rule == rule]


def assert_conforms(report: ValidationReport) -> None:
    assert report.conforms, report.text()
    assert report.violations == []


# ---------------------------------------------------------------- realistic deltas
def test_realistic_purchase_repair_and_pet_conform(validator: Validator) -> None:
    report = check(
        validator,
        """
        :buy-bike a schema:BuyAction ; rdfs:label "bought a road bike" ; schema:agent :me ; schema:object :bike ;
            schema:price 1299.0 ; schema:priceCurrency "EUR" ; schema:startDate "2024-03-02"^^xsd:date ;
            schema:actionStatus schema:CompletedActionStatus .
        :bike a schema:Product ; rdfs:label "road bike" ; schema:brand :trek .
        :trek a schema:Brand ; rdfs:label "Trek" .
        :brake-fix a pcm:RepairAction ; rdfs:label "brake pads replaced" ; schema:agent :joes ; schema:object :car ;
            schema:startDate "2024-05"^^xsd:gYearMonth .
        :car-service a pcm:ServiceEvent ; rdfs:label "annual service" ; schema:agent :joes ; schema:object :car ;
            schema:startDate "2024-05-14T09:30:00"^^xsd:dateTime .
        :joes a schema:AutoRepair ; rdfs:label "Joe's Garage" .
        :rex a pcm:Pet ; rdfs:label "Rex" ; pcm:petSpecies "dog" ; schema:birthDate "2019"^^xsd:gYear .
        :me pcm:hasPet :rex .
        """,
    )
    assert_conforms(report)
    assert report.text() == "Conforms: the data satisfies every rule."


# ---------------------------------------------------------------- rule 1: action/event has an agent
def test_action_with_agent_conforms(validator: Validator) -> None:
    assert_conforms(check(validator, ':m a schema:MoveAction ; rdfs:label "moved" ; schema:agent :me .'))


def test_subclass_action_without_agent_is_reported(validator: Validator) -> None:
    # pcm:RepairAction is only an action through rdfs:subClassOf: the validator must bring the hierarchy along.
    report = check(validator, ':fix a pcm:RepairAction ; rdfs:label "fixed the car" ; schema:object :car .')
    [v] = report.violations
    assert (v.rule, v.focus, v.path) == ("action-has-agent", NS + "fix", "https://schema.org/agent")
    assert "schema:agent" in v.message and "pcm:RepairAction" in v.message


def test_event_subclass_without_agent_is_reported(validator: Validator) -> None:
    report = check(validator, ':flat a pcm:ProblemEvent ; rdfs:label "flat tyre" ; pcm:affects :car .')
    assert [v.rule for v in report.violations] == ["action-has-agent"]


def test_literal_agent_is_reported(validator: Validator) -> None:
    report = check(
        validator, ':m a schema:MoveAction ; rdfs:label "moved" ; schema:agent "Alice" ; schema:object :car .'
    )
    [v] = only(report, "action-has-agent")
    assert '"Alice"' in v.message


# ---------------------------------------------------------------- rule 2: problem affects
def test_problem_with_affects_conforms(validator: Validator) -> None:
    assert_conforms(
        check(
            validator, ':flat a pcm:ProblemEvent ; rdfs:label "flat" ; schema:agent :me ; pcm:affects :car .'
        )
    )


def test_problem_without_affects_is_reported(validator: Validator) -> None:
    report = check(validator, ':flat a pcm:ProblemEvent ; rdfs:label "flat" ; schema:agent :me .')
    [v] = report.violations
    assert (v.rule, v.path) == ("problem-affects", "https://w3id.org/pcm/ontology#affects")
    assert "pcm:affects" in v.message


# ---------------------------------------------------------------- rule 3: service/repair has an object
@pytest.mark.parametrize("cls", ["pcm:ServiceEvent", "pcm:RepairAction"])
def test_service_without_object_is_reported(validator: Validator, cls: str) -> None:
    report = check(
        validator, f':s a {cls} ; rdfs:label "service" ; schema:agent :me ; schema:location :car .'
    )
    [v] = report.violations
    assert (v.rule, v.focus, v.path) == ("service-has-object", NS + "s", "https://schema.org/object")
    assert "schema:object" in v.message


@pytest.mark.parametrize("cls", ["pcm:ServiceEvent", "pcm:RepairAction"])
def test_service_with_object_conforms(validator: Validator, cls: str) -> None:
    assert_conforms(
        check(validator, f':s a {cls} ; rdfs:label "service" ; schema:agent :me ; schema:object :car .')
    )


# ---------------------------------------------------------------- rule 4: individuals are labelled
def test_unlabelled_individual_is_reported(validator: Validator) -> None:
    report = check(validator, ":bike a schema:Product . :me schema:owns :bike .")
    [v] = report.violations
    assert (v.rule, v.focus, v.path) == ("individual-has-label", NS + "bike", str(rdflib.RDFS.label))
    assert "rdfs:label" in v.message


def test_existing_entity_gets_its_label_and_type_from_the_context(validator: Validator) -> None:
    delta = ':bike a schema:Product ; rdfs:label "bike" . :me schema:owns :bike .'
    assert_conforms(check(validator, delta))
    # Without the context the owner is an IRI nobody declared: flagged, not silently accepted.
    report = check(validator, delta, context=None)
    [v] = report.violations
    assert (v.rule, v.focus) == ("untyped-individual", NS + "me")
    assert NS + "me" in v.message


def test_existing_entity_without_label_in_store_is_reported(validator: Validator) -> None:
    report = check(
        validator,
        ':bike a schema:Product ; rdfs:label "bike" . :bob schema:owns :bike .',
        context=":bob a schema:Person .",
    )
    assert [(v.rule, v.focus) for v in report.violations] == [("individual-has-label", NS + "bob")]


def test_labels_are_not_required_outside_the_memory_namespace(validator: Validator) -> None:
    # A typed blank node (a price specification, say) is not an individual.
    assert_conforms(
        check(
            validator,
            ':buy a schema:BuyAction ; rdfs:label "buy" ; schema:agent :me ; schema:object [ a schema:Product ; schema:name "x" ] .',
        )
    )


# ---------------------------------------------------------------- rule 5: no isolated individual
def test_isolated_individual_is_reported(validator: Validator) -> None:
    report = check(
        validator,
        ':rex a pcm:Pet ; rdfs:label "Rex" ; schema:name "Rex" ; schema:birthDate "2019"^^xsd:gYear .',
    )
    [v] = report.violations
    assert (v.rule, v.focus, v.path) == ("isolated-individual", NS + "rex", None)
    assert "linked" in v.message


def test_individual_linked_only_as_object_is_not_isolated(validator: Validator) -> None:
    assert_conforms(check(validator, ':rex a pcm:Pet ; rdfs:label "Rex" . :me pcm:hasPet :rex .'))


def test_individual_linked_as_subject_is_not_isolated(validator: Validator) -> None:
    assert_conforms(check(validator, ':rex a pcm:Pet ; rdfs:label "Rex" ; schema:location :car .'))


def test_self_loop_does_not_count_as_a_link(validator: Validator) -> None:
    report = check(validator, ':bob a schema:Person ; rdfs:label "Bob" ; schema:knows :bob .')
    assert [v.rule for v in report.violations] == ["isolated-individual"]


def test_a_blank_node_counts_as_a_link(validator: Validator) -> None:
    assert_conforms(
        check(validator, ':rex a pcm:Pet ; rdfs:label "Rex" ; schema:location [ a schema:Place ; rdfs:label "yard" ] .')
    )


def test_isolated_message_names_the_node_and_its_types(validator: Validator) -> None:
    [v] = check(validator, ':rex a pcm:Pet ; rdfs:label "Rex" .').violations
    assert v.message.startswith(f"<{NS}rex> (a pcm:Pet) is isolated: an individual must be linked")


# ---------------------------------------------------------------- knowledge updates: one value per person
def test_a_person_with_two_homes_is_reported(validator: Validator) -> None:
    report = check(
        validator,
        ':me schema:homeLocation :pdx, :sea . :pdx a schema:City ; rdfs:label "Portland" . '
        ':sea a schema:City ; rdfs:label "Seattle" .',
    )
    [v] = report.violations
    assert (v.rule, v.focus, v.path) == ("single-valued", NS + "me", "https://schema.org/homeLocation")
    assert "more than one schema:homeLocation" in v.message and "one current home" in v.message


def test_two_homes_of_something_else_and_two_employers_of_a_person_conform(validator: Validator) -> None:
    assert_conforms(check(
        validator,
        ':rex a pcm:Pet ; rdfs:label "Rex" ; schema:homeLocation :pdx, :sea . :pdx a schema:City ; rdfs:label "P" . '
        ':sea a schema:City ; rdfs:label "S" . :me schema:worksFor :acme, :initech . '
        ':acme a schema:Organization ; rdfs:label "Acme" . :initech a schema:Organization ; rdfs:label "Initech" .',
    ))


# ---------------------------------------------------------------- rule 6: dates
@pytest.mark.parametrize(
    "literal",
    [
        '"2024-03-02"^^xsd:date',
        '"2024-03-02T10:00:00Z"^^xsd:dateTime',
        '"2024-03"^^xsd:gYearMonth',
        '"2024"^^xsd:gYear',
    ],
)
def test_typed_dates_conform(validator: Validator, literal: str) -> None:
    assert_conforms(
        check(
            validator,
            f':m a schema:MoveAction ; rdfs:label "moved" ; schema:agent :me ; schema:startDate {literal} .',
        )
    )


@pytest.mark.parametrize(
    ("prop", "literal"),
    [
        ("schema:startDate", '"2024-03-02"'),
        ("schema:endDate", '"March 2024"'),
        ("schema:startDate", '"2024-02-30"^^xsd:date'),  # typed, but no such day
        ("schema:startDate", "2024"),  # an xsd:integer
        ("schema:birthDate", '"2019-05-01"^^xsd:string'),
    ],
)
def test_untyped_or_invalid_dates_are_reported(validator: Validator, prop: str, literal: str) -> None:
    report = check(
        validator, f':m a schema:MoveAction ; rdfs:label "moved" ; schema:agent :me ; {prop} {literal} .'
    )
    [v] = report.violations
    assert (v.rule, v.focus) == ("date-literal", NS + "m")
    assert v.path is not None and v.path.endswith(prop.split(":")[1])
    assert "xsd:date" in v.message


def test_message_time_of_a_post_is_checked_too(validator: Validator) -> None:
    report = check(
        validator,
        ':m a schema:MoveAction ; rdfs:label "moved" ; schema:agent :me ; dcterms:created "yesterday" .',
    )
    assert [(v.rule, v.path) for v in report.violations] == [
        ("date-literal", "http://purl.org/dc/terms/created")
    ]


# ---------------------------------------------------------------- rule 7: action status
@pytest.mark.parametrize("status", ["Completed", "Potential", "Active", "Failed"])
def test_each_allowed_action_status_conforms(validator: Validator, status: str) -> None:
    # Guards against pyshacl's false sh:in violations (DESIGN.md §6).
    ttl = f':m a schema:MoveAction ; rdfs:label "moved" ; schema:agent :me ; schema:actionStatus schema:{status}ActionStatus .'
    assert_conforms(check(validator, ttl))


@pytest.mark.parametrize("status", ['"completed"', "<http://schema.org/CompletedActionStatus>", ":done"])
def test_other_action_status_values_are_reported(validator: Validator, status: str) -> None:
    ttl = f':m a schema:MoveAction ; rdfs:label "moved" ; schema:agent :me ; schema:actionStatus {status} .'
    report = check(validator, ttl, context=CONTEXT_TTL + ':done a schema:Thing ; rdfs:label "done" .')
    [v] = only(report, "action-status")
    assert (v.focus, v.path) == (NS + "m", "https://schema.org/actionStatus")
    assert "schema:CompletedActionStatus" in v.message


def test_two_action_statuses_are_reported(validator: Validator) -> None:
    ttl = ':m a schema:MoveAction ; rdfs:label "m" ; schema:agent :me ; schema:actionStatus schema:ActiveActionStatus, schema:FailedActionStatus .'
    [v] = check(validator, ttl).violations
    assert v.rule == "action-status" and "more than one" in v.message


# ---------------------------------------------------------------- rule 8: only ontology terms
def test_unknown_property_is_named(validator: Validator) -> None:
    report = check(
        validator,
        ':bike a schema:Product ; rdfs:label "bike" ; schema:colourOfFrame "red" . :me schema:owns :bike .',
    )
    [v] = report.violations
    assert (v.rule, v.focus, v.path) == ("unknown-term", NS + "bike", "https://schema.org/colourOfFrame")
    assert "https://schema.org/colourOfFrame" in v.message


def test_unknown_class_is_named_with_a_suggestion(validator: Validator) -> None:
    report = check(validator, ':m a schema:MoveActoin ; rdfs:label "moved" ; schema:agent :me .')
    [v] = only(report, "unknown-term")
    assert v.path == str(rdflib.RDF.type)
    assert "https://schema.org/MoveActoin" in v.message
    assert "did you mean schema:MoveAction" in v.message


def test_unknown_pcm_class_and_http_schema_are_reported(validator: Validator) -> None:
    report = check(validator, ':x a pcm:Gadget ; rdfs:label "x" ; <http://schema.org/owns> :me .')
    messages = " ".join(v.message for v in only(report, "unknown-term"))
    assert "https://w3id.org/pcm/ontology#Gadget" in messages
    assert "http://schema.org/owns" in messages and "did you mean schema:owns" in messages


def test_undefined_vocabulary_object_is_reported(validator: Validator) -> None:
    report = check(
        validator,
        ':bike a schema:Product ; rdfs:label "bike" ; schema:brand schema:NoSuchThing . :me schema:owns :bike .',
    )
    [v] = report.violations
    assert v.rule == "unknown-term" and "https://schema.org/NoSuchThing" in v.message


def test_class_used_as_property_is_reported(validator: Validator) -> None:
    report = check(validator, ':bike a schema:Product ; rdfs:label "bike" ; schema:Person :me .')
    assert [(v.rule, v.path) for v in report.violations] == [("unknown-term", "https://schema.org/Person")]


def test_property_invented_in_the_memory_namespace_is_unknown(validator: Validator) -> None:
    report = check(validator, ':rex a pcm:Pet ; rdfs:label "Rex" ; :bestFriendOf :me .')
    [v] = report.violations
    assert (v.rule, v.path) == ("unknown-term", NS + "bestFriendOf")
    assert NS + "bestFriendOf" in v.message


def test_links_to_the_web_are_not_vocabulary(validator: Validator) -> None:
    ttl = ':bike a schema:Product ; rdfs:label "bike" ; schema:url <https://www.trekbikes.com/> . :me schema:owns :bike .'
    assert_conforms(check(validator, ttl))


# ---------------------------------------------------------------- rule 9: individuals in the memory namespace
def test_foreign_subject_is_reported(validator: Validator) -> None:
    report = check(
        validator, '<https://elsewhere.example/bob> a schema:Person ; rdfs:label "Bob" ; schema:knows :me .'
    )
    [v] = report.violations
    assert (v.rule, v.focus) == ("foreign-individual", "https://elsewhere.example/bob")
    assert NS in v.message


def test_vocabulary_term_as_subject_is_reported(validator: Validator) -> None:
    report = check(validator, 'schema:Person rdfs:label "person" .')
    [v] = report.violations
    assert (v.rule, v.focus) == ("foreign-individual", "https://schema.org/Person")
    assert "vocabulary term" in v.message


def test_vocabulary_individuals_as_objects_and_blank_subjects_are_fine(validator: Validator) -> None:
    ttl = ':buy a schema:BuyAction ; rdfs:label "buy" ; schema:agent :me ; schema:object :car ; schema:actionStatus schema:CompletedActionStatus ; schema:result [ schema:price 5 ] .'
    assert_conforms(check(validator, ttl))


# ---------------------------------------------------------------- scope: what the delta answers for
def test_existing_node_extended_by_the_delta_is_not_rechecked_for_cardinality(validator: Validator) -> None:
    # The repair exists in the store (its agent and object live there); the delta only adds its end date.
    context = CONTEXT_TTL + ':fix a pcm:RepairAction ; rdfs:label "brake repair" .'
    assert_conforms(check(validator, ':fix schema:endDate "2024-05-20"^^xsd:date .', context=context))
    # ... but the values the delta brings are still checked.
    report = check(validator, ':fix schema:endDate "soon" .', context=context)
    assert [v.rule for v in report.violations] == ["date-literal"]


def test_context_nodes_are_not_focus_nodes(validator: Validator) -> None:
    context = CONTEXT_TTL + ":old a schema:MoveAction ."  # unlabelled, no agent: not this delta's business
    assert_conforms(
        check(validator, ':rex a pcm:Pet ; rdfs:label "Rex" ; schema:location :car .', context=context)
    )


def test_validate_leaves_its_inputs_untouched(validator: Validator) -> None:
    delta, ctx = (
        graph(':fix a pcm:RepairAction ; rdfs:label "x" ; schema:agent :me ; schema:object :car .'),
        graph(CONTEXT_TTL),
    )
    before = (set(delta), set(ctx))
    validator.validate(delta, memory_namespace=NS, context=ctx)
    assert (set(delta), set(ctx)) == before


def test_empty_namespace_is_refused(validator: Validator) -> None:
    with pytest.raises(UsageError):
        validator.validate(rdflib.Graph(), memory_namespace="")


def test_empty_delta_conforms(validator: Validator) -> None:
    assert_conforms(validator.validate(rdflib.Graph(), memory_namespace=NS))


# ---------------------------------------------------------------- report, shapes loading
def test_report_text_lists_rules_and_truncates(validator: Validator) -> None:
    ttl = "\n".join(f":p{i} a schema:Person ." for i in range(5))
    report = check(validator, ttl)
    assert not report.conforms and len(report.violations) == 10  # each: no label, isolated
    text = report.text(limit=3)
    assert text.splitlines()[0] == "10 violation(s):"
    assert "[individual-has-label]" in text and text.splitlines()[-1] == "... and 7 more"
    assert len(text.splitlines()) == 5


def test_violations_are_sorted_and_unique(validator: Validator) -> None:
    report = check(validator, ":b a schema:Product . :a a schema:Product .")
    keys = [(v.rule, v.focus) for v in report.violations]
    assert keys == sorted(set(keys), key=keys.index)
    assert keys[0] == ("individual-has-label", NS + "a")


def test_custom_shapes_dir(onto: Ontology, tmp_path: Path) -> None:
    (tmp_path / "one.ttl").write_text(
        turtle_prefixes()
        + """@prefix sh: <http://www.w3.org/ns/shacl#> . @prefix pcmsh: <https://w3id.org/pcm/shapes#> .
        pcmsh:NeedsName a sh:PropertyShape ; pcmsh:rule "needs-name" ; sh:targetClass schema:Person ;
            sh:path schema:name ; sh:minCount 1 ; sh:message "a person needs schema:name" .
        """,
        encoding="utf-8",
    )
    custom = Validator(onto, shapes_dir=tmp_path)
    report = custom.validate(
        graph(':bob a schema:Person ; rdfs:label "Bob" ; schema:knows :me .'),
        memory_namespace=NS,
        context=graph(CONTEXT_TTL),
    )
    # :me (context) has no name either, but only the delta's own nodes are reported.
    assert [(v.rule, v.focus) for v in report.violations] == [("needs-name", NS + "bob")]
    assert "schema:name" in report.violations[0].message


def test_missing_shapes_dir_is_an_error(onto: Ontology, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        Validator(onto, shapes_dir=tmp_path)


def test_default_validator_uses_the_shipped_ontology_and_shapes() -> None:
    report = Validator().validate(
        graph(':fix a pcm:RepairAction ; rdfs:label "fix" ; schema:object :car .'),
        memory_namespace=NS,
        context=graph(CONTEXT_TTL),
    )
    assert [v.rule for v in report.violations] == ["action-has-agent"]

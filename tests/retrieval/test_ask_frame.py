"""The question frame: its schema from the terms in use, reading a model's frame, every operation evaluated on the
sample memory's graph without a model, and ask routed by a scripted model that fills frames."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, date, datetime

import pytest

from pcm.errors import UsageError
from pcm.llm import ScriptedClient
from pcm.llm.base import Message
from pcm.memory import Memory
from pcm.namespaces import SCHEMA
from pcm.ontology import load_ontology
from pcm.retrieval.ask import CachingClient, ask
from pcm.retrieval.frame import (
    OPERATIONS,
    Frame,
    FrameReplyError,
    Terms,
    checked,
    frame_schema,
    frames_questions,
    parse_frame,
)
from pcm.retrieval.grounding import GroundedEntity, usage_stats
from pcm.retrieval.operations import Operations
from pcm.retrieval.traversal import TraversalEngine
from pcm.settings import Settings
from tests.retrieval.test_ask_support import build_sample_memory, cited_ids

AS_OF = datetime(2025, 10, 1, 12, 0, tzinfo=UTC)
PCM = "https://w3id.org/pcm/ontology#"
CV = "http://rdfs.org/resume-rdf/cv.rdfs#"
ONTOLOGY = load_ontology()


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    built = build_sample_memory(tmp_path_factory.mktemp("ask-frame") / "memory", index=True)
    CachingClient.forget(built.context)
    yield built
    CachingClient.forget(built.context)
    built.close()


@pytest.fixture(scope="module")
def ops(memory: Memory) -> Iterator[Operations]:
    engines: list[TraversalEngine] = []

    def vectors():  # type: ignore[no-untyped-def]
        if not engines:
            engines.append(TraversalEngine.for_memory(memory.context))
        return engines[0].vectors

    yield Operations(memory.context, ONTOLOGY, [], AS_OF.date(), vectors)
    for engine in engines:
        engine.close()


@pytest.fixture(scope="module")
def terms(memory: Memory) -> Terms:
    return Terms.of(usage_stats(memory.context), ONTOLOGY)


def frame_json(**fields: str) -> str:
    data = dict.fromkeys(("op", "subject", "class", "property", "anchor", "anchor2", "from", "to", "unit",
                          "relative"), "")
    data.update(fields)
    return json.dumps(data)


# ------------------------------------------------------------------------------------------------ schema and reply


def test_the_schema_offers_the_terms_in_use_and_every_operation(terms: Terms) -> None:
    schema = frame_schema(terms).schema
    properties = schema["properties"]
    assert isinstance(properties, dict)
    assert properties["op"]["enum"] == list(OPERATIONS)
    assert "schema:BuyAction" in properties["class"]["enum"] and "pcm:hasPet" in properties["property"]["enum"]
    # bookkeeping and terms the memory does not use are not offered
    assert "sioc:Post" not in properties["class"]["enum"] and "rdfs:label" not in properties["property"]["enum"]
    assert "schema:Volcano" not in properties["class"]["enum"]
    assert set(schema["required"]) == set(properties)  # type: ignore[arg-type]


def test_the_schema_converts_to_a_llama_cpp_grammar(terms: Terms) -> None:
    llama_cpp = pytest.importorskip("llama_cpp")
    grammar = llama_cpp.LlamaGrammar.from_json_schema(json.dumps(frame_schema(terms).schema), verbose=False)
    assert grammar is not None


def test_a_frame_reply_is_read_into_iris_and_dates(terms: Terms) -> None:
    frame = parse_frame("```json\n" + frame_json(op="window", subject="Dana", **{"class": "schema:TravelAction"},
                                                  **{"from": "2025-06-01", "to": "2025-06-30"}) + "\n```", terms)
    assert frame == Frame("window", "Dana", SCHEMA + "TravelAction", start=date(2025, 6, 1), end=date(2025, 6, 30))
    assert frame.as_json(ONTOLOGY)["class"] == "schema:TravelAction"


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ("I think it is a count", "no JSON object"),
        (frame_json(op="guess"), "'op'"),
        (frame_json(op="latest", **{"class": "schema:Volcano"}), "'class'"),
        (frame_json(op="window", **{"from": "2025-02-30"}), "calendar date"),
        ('{"op": 3}', "not a string"),
    ],
)
def test_a_frame_outside_the_schema_is_refused_in_one_line(terms: Terms, reply: str, problem: str) -> None:
    with pytest.raises(FrameReplyError) as error:
        parse_frame(reply, terms)
    assert problem in str(error.value) and "\n" not in str(error.value)


def test_frames_are_read_for_constraining_clients_unless_the_setting_says_otherwise() -> None:
    class Constrained:
        constrained = True

    assert frames_questions("auto", Constrained()) and not frames_questions("auto", ScriptedClient([]))
    assert frames_questions("on", ScriptedClient([])) and not frames_questions("off", Constrained())
    assert Settings.from_env({"PCM_ASK_FRAME": " On "}).ask.frame == "on"
    with pytest.raises(UsageError):
        Settings.from_env({"PCM_ASK_FRAME": "maybe"})


# ------------------------------------------------------------------------------------------------ the operations


def test_latest_and_earliest_pick_by_date_over_every_action_of_the_class(ops: Operations) -> None:
    latest = ops.evaluate(Frame("latest", "Dana", SCHEMA + "BuyAction"))
    earliest = ops.evaluate(Frame("earliest", "I", SCHEMA + "BuyAction"))
    assert latest is not None and latest.text.startswith("Rumours") and "18 July 2025" in latest.text
    assert earliest is not None and earliest.text.startswith("Breville Barista Express")


def test_latest_of_a_class_that_is_not_an_action_orders_its_dated_nodes(ops: Operations) -> None:
    found = ops.evaluate(Frame("latest", "Dana", CV + "WorkHistory"))
    assert found is not None and found.text.startswith("job at Cascade Health")


def test_total_sums_the_prices_of_what_was_bought_leaving_returns_out(ops: Operations) -> None:
    found = ops.evaluate(Frame("total", "Dana", SCHEMA + "BuyAction", SCHEMA + "price"))
    assert found is not None and found.text.startswith("$634 in total") and "712" not in found.text


def test_count_reads_a_property_or_the_members_of_a_class(ops: Operations) -> None:
    by_property = ops.evaluate(Frame("count", "Dana", prop=PCM + "hasPet"))
    by_class = ops.evaluate(Frame("count", "Dana", cls=PCM + "Pet"))
    assert by_property is not None and by_property.text == "2 (Biscuit, Mochi)."
    assert by_class is not None and by_class.text.startswith("2 (Biscuit, Mochi). ")  # with their lines
    assert "beagle" in by_class.text
    assert by_property.graphs
    # the property's values that are not of the class named leave the count to the class
    jobs = ops.evaluate(Frame("count", "Dana", cls=CV + "WorkHistory", prop=SCHEMA + "homeLocation"))
    assert jobs is not None and jobs.text.startswith("2 (")
    both = ops.evaluate(Frame("count", "Dana", cls=PCM + "Pet", prop=PCM + "hasPet"))
    assert both is not None and both.text.startswith("2 (Biscuit, Mochi).")


def test_a_count_of_a_kind_of_relative_counts_the_relatives_whatever_property_the_frame_names(ops: Operations) -> None:
    children = ops.evaluate(Frame("count", "Dana", prop=PCM + "hasPet", relative="child"))
    brothers = ops.evaluate(Frame("count", "Dana", relative="brother"))
    assert children is not None and children.text == "2 (Lily and Owen)." and children.graphs
    assert brothers is not None and brothers.text.startswith("Not in memory") and not brothers.graphs


def test_relatives_of_a_kind_named_or_not_in_memory(ops: Operations) -> None:
    children = ops.evaluate(Frame("relatives", "Dana", relative="child"))
    brother = ops.evaluate(Frame("relatives", "Dana", relative="brother"))
    sister = ops.evaluate(Frame("relatives", "Dana", prop=SCHEMA + "homeLocation", relative="sister"))
    # the names first, then what is stored about each of them
    assert children is not None and children.text.startswith("Lily and Owen. Lily") and "Owen (" in children.text
    assert brother is not None and brother.text.startswith("Not in memory") and not brother.graphs
    assert sister is not None and "Joanna" in sister.text and "Denver" in sister.text
    # a property no relative holds: what is stored about them instead of the bare names
    named = ops.evaluate(Frame("relatives", "Dana", prop=SCHEMA + "name", relative="sister"))
    assert named is not None and named.text.startswith("Joanna. Joanna") and "Denver" in named.text


def test_current_reads_the_value_said_last_with_its_containing_places(ops: Operations) -> None:
    home = ops.evaluate(Frame("current", "Dana", prop=SCHEMA + "homeLocation"))
    assert home is not None and home.text == "Ballard, Seattle."  # Portland was superseded
    job = ops.evaluate(Frame("current", "Dana", cls=CV + "WorkHistory"))
    assert job is not None and job.text.startswith("job at Cascade Health")


def test_current_with_an_anchor_naming_a_past_or_present_value_says_whether_it_still_holds(ops: Operations) -> None:
    """"Does she still work at Harbor Analytics?": the frame names the value asked about as its anchor."""
    job = ops.evaluate(Frame("current", "Dana", cls=CV + "WorkHistory", anchor="Harbor Analytics"))
    assert job is not None and job.text.startswith("No; now: job at Cascade Health")
    now = ops.evaluate(Frame("current", "Dana", cls=CV + "WorkHistory"))
    assert now is not None and set(now.graphs) < set(job.graphs)  # the old job's utterances are cited too
    still = ops.evaluate(Frame("current", "Dana", cls=CV + "WorkHistory", anchor="Cascade Health"))
    assert still is not None and still.text.startswith("Yes; now: job at Cascade Health")
    home = ops.evaluate(Frame("current", "Dana", prop=SCHEMA + "homeLocation", anchor="Portland"))
    assert home is not None and home.text == "No; now: Ballard, Seattle."
    here = ops.evaluate(Frame("current", "Dana", prop=SCHEMA + "homeLocation", anchor="Seattle"))
    assert here is not None and here.text == "Yes; now: Ballard, Seattle."
    # an anchor that names none of the values ("which city") asks for the value, not yes or no
    city = ops.evaluate(Frame("current", "Dana", prop=SCHEMA + "homeLocation", anchor="city"))
    assert city is not None and city.text == "Ballard, Seattle."


def test_before_and_after_an_anchor_take_the_nearest_node_of_its_kind(ops: Operations) -> None:
    before = ops.evaluate(Frame("before", "Dana", anchor="Cascade Health"))
    after = ops.evaluate(Frame("after", "Dana", CV + "WorkHistory", anchor="the Harbor Analytics job"))
    assert before is not None and before.text.startswith("job at Harbor Analytics")
    assert after is not None and after.text.startswith("job at Cascade Health")
    assert ops.evaluate(Frame("before", "Dana", anchor="the volcano eruption")) is None


def test_window_lists_what_happened_between_two_dates(ops: Operations) -> None:
    found = ops.evaluate(Frame("window", "Dana", SCHEMA + "TravelAction", start=date(2025, 6, 1), end=date(2025, 6, 30)))
    assert found is not None and "Lisbon" in found.text and "(planned)" in found.text
    assert ops.evaluate(Frame("window", "Dana", SCHEMA + "TravelAction", start=date(2019, 1, 1),
                              end=date(2019, 12, 31))) is None


def test_interval_counts_between_the_two_events_the_anchors_name(ops: Operations) -> None:
    found = ops.evaluate(Frame("interval", "Dana", anchor="buying the espresso machine", anchor2="the car broke down",
                               unit="days"))
    assert found is not None and found.text.startswith("26 days")
    weeks = ops.evaluate(Frame("interval", "Dana", anchor="Rachel's wedding", anchor2="ordering the jumpsuit",
                               unit="weeks"))
    assert weeks is not None and weeks.text.startswith("4.7 weeks")  # 33 days


def test_a_date_of_a_named_thing_is_read_from_its_node(ops: Operations) -> None:
    found = ops.evaluate(Frame("value", "Dana", SCHEMA + "BuyAction", SCHEMA + "startDate", anchor="the espresso machine"))
    assert found is not None and found.text == "Tuesday 4 February 2025 (buying the Breville Barista Express)."
    # a class guessed wrong (the promotion is stored as an event) leaves the anchor to name a node of any kind
    guessed = ops.evaluate(Frame("value", "Dana", SCHEMA + "TransferAction", SCHEMA + "startDate",
                                 anchor="Senior Data Analyst"))
    assert guessed is not None and "1 March 2025 (promotion to Senior Data Analyst)" in guessed.text
    assert ops.evaluate(Frame("value", "Dana", SCHEMA + "TravelAction", SCHEMA + "startDate", anchor="Tokyo")) is None


def test_operations_the_graph_does_not_settle_are_left_to_the_pipeline(ops: Operations) -> None:
    assert ops.evaluate(Frame("value", "Dana", prop=PCM + "allergicTo")) is None  # read by the model
    assert ops.evaluate(Frame("latest", "Zebulon", SCHEMA + "BuyAction")) is None  # nobody the memory knows
    assert ops.evaluate(Frame("count", "Dana", cls=SCHEMA + "Volcano")) is None
    assert ops.evaluate(Frame("yesno", "Dana")) is None


# ------------------------------------------------------------------------------------------------ routing


def _framing(memory: Memory, frames: dict[str, str], answer: str = "NOT IN MEMORY") -> tuple[ScriptedClient, list[str]]:
    """A scripted model that fills the frame scripted for each question and answers everything else with
    ``answer``; the operations it was asked for are listed."""
    operations: list[str] = []

    def respond(system: str, messages: list[Message], op: str) -> str:
        operations.append(op)
        if op == "frame":
            asked = next(line[10:] for line in messages[0].content.splitlines() if line.startswith("QUESTION: "))
            return frames[asked]
        if op == "nl2sparql":
            return "NO QUERY: nothing fits"
        return answer

    CachingClient.forget(memory.context)
    return ScriptedClient([respond] * 40), operations


def _framed(memory: Memory) -> Memory:
    return Memory.open(memory.settings.with_(ask_frame="on"), read_only=True)


def test_a_computed_operation_is_answered_in_code_in_any_language(memory: Memory) -> None:
    total = frame_json(op="total", subject="Dana", **{"class": "schema:BuyAction"})
    questions = {"What's the grand sum Dana forked out for her purchases?": total,
                 "¿Cuánto gastó Dana en total en sus compras?": total}
    framed = _framed(memory)
    try:
        for question in questions:
            client, operations = _framing(framed, questions)
            result = ask(framed.context, question, client=client, as_of=AS_OF, plan=False)
            assert result.path == "frame" and result.answer.startswith("$634 in total"), result.render()
            assert operations == ["frame"]  # one short call, no answer call
            assert {"d03-m01", "d11-m01"} <= cited_ids(result)
            assert result.frame is not None and result.frame["op"] == "total"
            assert "frame:" in result.render(explain=True)
    finally:
        framed.close()


def test_the_frame_not_the_wording_decides_the_path(memory: Memory) -> None:
    # the wording once routed to the latest purchase; a frame that reads it as a plain value sends it to the facts
    question = "What did Dana buy most recently?"
    framed = _framed(memory)
    client, operations = _framing(framed, {question: frame_json(op="value", subject="Dana")}, "NOT IN MEMORY")
    try:
        result = ask(framed.context, question, client=client, as_of=AS_OF, plan=False)
    finally:
        framed.close()
    assert result.path != "frame" and "latest" not in result.note and not result.answer.startswith("Rumours")
    assert operations[0] == "frame" and "answer" in operations


def test_only_a_frame_read_as_other_writes_a_free_graph_query(memory: Memory) -> None:
    # a placed question whose operation and stored facts find nothing goes to recall, not to a free query (the
    # slow tail); a question the frame cannot place ("other") still gets one
    placed = "What breed is Dana's cat Mochi?"
    unplaced = "Anything notable about the volcano society?"
    frames = {placed: frame_json(op="value", subject="Dana", anchor="Mochi"), unplaced: frame_json(op="other")}
    framed = _framed(memory)
    try:
        client, first_ops = _framing(framed, frames)
        first = ask(framed.context, placed, client=client, as_of=AS_OF, plan=False)
        client, second_ops = _framing(framed, frames)
        ask(framed.context, unplaced, client=client, as_of=AS_OF, plan=False)
    finally:
        framed.close()
    assert "nl2sparql" not in first_ops and "no free graph query for a question the frame reads as value" in first.note
    assert "nl2sparql" in second_ops


def test_an_unsettled_operation_or_a_malformed_frame_goes_on_to_the_stored_facts(memory: Memory) -> None:
    unknown = "How many days between the volcano trip and the boat sinking?"
    broken = "Where is Dana living these days?"
    frames = {unknown: frame_json(op="interval", subject="Dana", anchor="the volcano trip", anchor2="the boat sinking",
                                  unit="days"), broken: "the city she lives in"}
    framed = _framed(memory)
    try:
        client, _ = _framing(framed, frames, "ANSWER: Seattle [cites: 1]")
        first = ask(framed.context, unknown, client=client, as_of=AS_OF, plan=False)
        client, _ = _framing(framed, frames, "ANSWER: Seattle [cites: 1]")
        second = ask(framed.context, broken, client=client, as_of=AS_OF, plan=False)
    finally:
        framed.close()
    assert first.path != "frame" and "found no answer in the graph" in first.note
    assert second.path == "facts" and "did not parse" in second.note and second.answer == "Seattle", second.render()


def test_only_a_frame_that_says_separate_parts_asks_for_a_plan(memory: Memory) -> None:
    # two clauses in the wording; the frame, not the wording, decides whether the model is asked for a plan
    question = "Who is Joanna, and what does the volcano society do?"
    framed = _framed(memory)
    try:
        seen = {}
        for op in ("value", "other"):
            client, operations = _framing(framed, {question: frame_json(op=op, subject="Joanna")})
            ask(framed.context, question, client=client, as_of=AS_OF)
            seen[op] = operations
    finally:
        framed.close()
    assert "decompose" not in seen["value"]
    assert "decompose" in seen["other"]


def test_how_long_before_an_anchor_of_another_kind_counts_to_the_nearest_node_of_the_class(ops: Operations) -> None:
    found = ops.evaluate(Frame("before", "Dana", SCHEMA + "OrderAction", anchor="Rachel's wedding", unit="days"))
    assert found is not None and found.text.startswith("ordering the navy jumpsuit")
    assert found.text.endswith("33 days between them.")


def test_a_kind_of_relative_in_a_value_frame_reads_the_relatives(ops: Operations) -> None:
    found = ops.evaluate(Frame("value", "Dana", prop=SCHEMA + "homeLocation", relative="sister"))
    assert found is not None and found.text.startswith("Joanna") and "Denver" in found.text
    person = ops.evaluate(Frame("value", "Dana", cls=SCHEMA + "Person", relative="sister"))
    assert person is not None and person.text.startswith("Joanna")
    # a relatives frame about another kind of thing answers the relatives it finds, never that one is missing
    trip = ops.evaluate(Frame("relatives", "Dana", cls=SCHEMA + "TravelAction", relative="brother"))
    cousin = ops.evaluate(Frame("relatives", "Dana", cls=SCHEMA + "TravelAction", relative="cousin"))
    assert trip is None and cousin is not None and cousin.text.startswith("Rachel. ")
    # a relative filled in passing in a frame about another kind of thing (a pet's breed) reads no relatives
    assert ops.evaluate(Frame("value", "Dana", cls=PCM + "Pet", prop=PCM + "petBreed", relative="child")) is None


# ------------------------------------------------------------------------------------------------ frame checks


def test_fields_the_question_does_not_give_are_dropped() -> None:
    asked = date(2025, 10, 1)
    copied = checked(Frame("latest", "Dana", SCHEMA + "BuyAction", anchor="the guitar", anchor2="none",
                           start=asked, end=asked, unit="days"),
                     "What did Dana buy most recently?", as_of=asked, owner_name="Dana Whitfield")
    assert (copied.anchor, copied.anchor2, copied.start, copied.end, copied.unit) == ("", "", None, None, "")
    # the anchor's words are compared as words, in any language; a dropped first anchor gives way to the second
    kept = checked(Frame("value", "Dana", anchor="Dana Whitfield", anchor2="Espressomaschine"),
                   "An welchem Tag hat Dana die Espressomaschine gekauft?", as_of=asked, owner_name="Dana Whitfield")
    assert (kept.anchor, kept.anchor2) == ("Espressomaschine", "")
    june = checked(Frame("window", "Dana", start=date(2025, 6, 1), end=date(2025, 6, 30)),
                   "¿A qué ciudad viajó Dana en junio de 2025?", as_of=asked, owner_name="Dana Whitfield")
    assert (june.start, june.end) == (date(2025, 6, 1), date(2025, 6, 30))
    inverted = checked(Frame("before", "Dana", anchor="Cascade Health", start=asked, end=date(2025, 9, 30),
                             unit="months"), "Where did Dana work before Cascade Health?", as_of=asked,
                       owner_name="Dana Whitfield")
    assert (inverted.anchor, inverted.start, inverted.end, inverted.unit) == ("Cascade Health", None, None, "months")


def test_an_anchor_that_is_a_month_or_a_year_is_the_time_window(ops: Operations) -> None:
    """"Where did she travel in June 2025" read with the month as the anchor, in any of the frame's languages."""
    asked = date(2025, 10, 1)
    for anchor, question in (("junio de 2025", "¿A qué ciudad viajó Dana en junio de 2025?"),
                             ("June 2025", "Where did Dana travel in June 2025, and with whom?"),
                             ("im Juni 2025", "Wohin ist Dana im Juni 2025 gereist?")):
        read = checked(Frame("value", "Dana", SCHEMA + "TravelAction", SCHEMA + "toLocation", anchor=anchor),
                       question, as_of=asked, owner_name="Dana Whitfield")
        assert (read.anchor, read.start, read.end) == ("", date(2025, 6, 1), date(2025, 6, 30))
        found = ops.evaluate(read)
        assert found is not None and "Lisbon" in found.text
    year = checked(Frame("latest", "Dana", SCHEMA + "BuyAction", anchor="2024"), "What did Dana buy last in 2024?",
                   as_of=asked, owner_name="Dana Whitfield")
    assert (year.anchor, year.start, year.end) == ("", date(2024, 1, 1), date(2024, 12, 31))
    # a thing named with its year stays a thing; a window the model wrote itself is kept
    race = checked(Frame("value", "Dana", anchor="the 2025 Rose Run"), "When was the 2025 Rose Run?", as_of=asked,
                   owner_name="Dana Whitfield")
    assert (race.anchor, race.start) == ("the 2025 Rose Run", None)
    given = checked(Frame("value", "Dana", anchor="May 2024", start=date(2025, 6, 1), end=date(2025, 6, 30)),
                    "What happened in May 2024 and June 2025?", as_of=asked, owner_name="Dana Whitfield")
    assert (given.anchor, given.start) == ("May 2024", date(2025, 6, 1))


def test_a_kind_of_relative_as_the_anchor_of_a_current_value_asks_it_of_that_relative(ops: Operations) -> None:
    """"Dana's sister is based in which city?" read as the owner's current home with "Dana's sister" as the anchor."""
    read = checked(Frame("current", "Dana", prop=SCHEMA + "homeLocation", anchor="Dana's sister"),
                   "Dana's sister is based in which city?", as_of=date(2025, 10, 1), owner_name="Dana Whitfield")
    assert (read.relative, read.anchor) == ("sister", "")
    found = ops.evaluate(read)
    assert found is not None and "Joanna" in found.text and "Denver" in found.text


def test_an_anchored_latest_picks_among_the_nodes_the_anchor_names(ops: Operations) -> None:
    newest = ops.evaluate(Frame("latest", "Dana", SCHEMA + "BuyAction"))
    assert newest is not None and "Rumours" in newest.text
    named = ops.evaluate(Frame("latest", "Dana", SCHEMA + "BuyAction", anchor="espresso machine"))
    assert named is not None and "Breville" in named.text and "Rumours" not in named.text
    assert ops.evaluate(Frame("latest", "Dana", SCHEMA + "TravelAction", anchor="Tokyo")) is None


def test_a_time_the_frame_names_answers_when_its_operation_does_not(ops: Operations) -> None:
    trip = ops.evaluate(Frame("relatives", "Dana", SCHEMA + "TravelAction", SCHEMA + "toLocation",
                              start=date(2025, 6, 1), end=date(2025, 6, 30), relative="mother"))
    assert trip is not None and "Lisbon" in trip.text
    bought = ops.evaluate(Frame("value", "Dana", SCHEMA + "BuyAction", SCHEMA + "price", start=date(2025, 7, 1),
                                end=date(2025, 7, 31)))
    assert bought is not None and "Rumours" in bought.text and "Breville" not in bought.text


def test_an_interval_from_one_anchor_to_the_one_node_of_a_class(ops: Operations) -> None:
    found = ops.evaluate(Frame("interval", "Dana", SCHEMA + "OrderAction", anchor="Rachel's wedding", unit="days"))
    assert found is not None and found.text.startswith("33 days")


def test_an_interval_whose_other_event_is_the_subject_or_the_length_of_the_one_event_named(ops: Operations) -> None:
    """A small model writes the second event as the subject, or names one event whose length is asked."""
    found = ops.evaluate(Frame("interval", "Rachel's wedding", anchor="ordering the jumpsuit", unit="days"))
    assert found is not None and found.text.startswith("33 days")
    trip = ops.evaluate(Frame("interval", "Dana", anchor="the summer trip to Lisbon", unit="days"))
    assert trip is not None and trip.text.startswith("9 days (summer trip to Lisbon begins: Friday 20 June 2025")
    # one event without an end date has no length, and the owner as the subject names no second event
    assert ops.evaluate(Frame("interval", "Dana", anchor="buying the espresso machine", unit="days")) is None


def test_a_value_the_named_node_lacks_is_not_in_memory_from_the_graph(ops: Operations) -> None:
    breed = ops.evaluate(Frame("value", "Dana", PCM + "Pet", PCM + "petBreed", anchor="Mochi"))
    assert breed is not None and breed.text.startswith("Not in memory:") and breed.graphs
    price = ops.evaluate(Frame("value", "Dana", SCHEMA + "BuyAction", SCHEMA + "price", anchor="rain jacket"))
    assert price is not None and price.text.startswith("Not in memory:")
    # held by the named node: its value; held by no other node of its kind: the graph does not settle it
    biscuit = ops.evaluate(Frame("value", "Dana", PCM + "Pet", PCM + "petBreed", anchor="Biscuit"))
    assert biscuit is not None and biscuit.text.startswith("beagle. Biscuit (Pet)") and biscuit.graphs
    assert ops.evaluate(Frame("value", "Dana", PCM + "Pet", PCM + "favouriteToy", anchor="Mochi")) is None


def test_a_value_of_the_one_node_the_anchor_names_is_read_from_it(ops: Operations) -> None:
    """"Who came along on the Lisbon trip": the trip's participants, not every trip's; a property the named node
    does not state, or an anchor that names several nodes that state it, is left to the stored facts."""
    came = ops.evaluate(Frame("value", "Dana", prop=SCHEMA + "participant", anchor="Lisbon trip"))
    assert came is not None and came.text.startswith("Lily, Marcus, Owen. summer trip to Lisbon (TravelAction)")
    assert ops.evaluate(Frame("value", "Dana", prop=SCHEMA + "participant", anchor="Tokyo trip")) is None


def test_a_frame_with_a_copied_anchor_and_a_missing_value_route_in_code(memory: Memory) -> None:
    questions = {
        "Was hat Dana zuletzt gekauft?": frame_json(op="latest", subject="Dana", anchor="the guitar",
                                                   **{"class": "schema:BuyAction", "from": "2025-10-01",
                                                      "to": "2025-10-01"}),
        "Mochi: which breed?": frame_json(op="value", subject="Dana", property="pcm:petBreed", anchor="Mochi",
                                          **{"class": "pcm:Pet"}),
    }
    framed = _framed(memory)
    try:
        client, operations = _framing(framed, questions, answer="Biscuit is a beagle [1]")
        latest = ask(framed.context, "Was hat Dana zuletzt gekauft?", client=client, as_of=AS_OF)
        breed = ask(framed.context, "Mochi: which breed?", client=client, as_of=AS_OF)
    finally:
        framed.close()
    assert latest.path == "frame" and "Rumours" in latest.answer
    assert breed.path == "frame" and breed.answer.startswith("Not in memory:") and "beagle" not in breed.answer
    assert operations == ["frame", "frame"]


def test_a_total_of_two_named_things_sums_their_prices_whatever_their_class(ops: Operations) -> None:
    both = ops.evaluate(Frame("total", "Dana", SCHEMA + "BuyAction", SCHEMA + "price", anchor="the espresso machine",
                              anchor2="the alternator repair"))
    assert both is not None and both.text.startswith("$1261 in total") and "Rumours" not in both.text


def test_a_kind_of_relative_written_as_the_anchor_reads_the_relatives(ops: Operations) -> None:
    frame = checked(Frame("value", "Dana", prop=SCHEMA + "name", anchor="sister"),
                    "What is the name of Dana's sister?", as_of=date(2025, 10, 1), owner_name="Dana Whitfield")
    assert (frame.relative, frame.anchor) == ("sister", "")
    both = checked(Frame("relatives", "Dana", anchor="brother", relative="brother"),
                   "What is the name of Dana's brother?", as_of=date(2025, 10, 1), owner_name="Dana Whitfield")
    assert both.anchor == ""
    brother = ops.evaluate(both)
    assert brother is not None and brother.text.startswith("Not in memory")
    found = ops.evaluate(frame)
    assert found is not None and "Joanna" in found.text


def test_a_relative_filled_in_passing_beside_the_subjects_own_property_settles_nothing(ops: Operations) -> None:
    # "What is Dana allergic to?" read with a kind of relative copied from the prompt's examples
    assert ops.evaluate(Frame("relatives", "Dana", prop=PCM + "allergicTo", relative="aunt")) is None
    car = GroundedEntity(ops.memory.naming.namespace + "owner-car", "Dana's car", (), 0.9, "label")
    with_car = Operations(ops.memory, ops.ontology, [car], ops.today, ops.vectors)
    assert with_car.evaluate(Frame("relatives", "Dana", anchor="Dana's car", relative="grandparent")) is None
    # an anchor that names nothing the question mentions (the kind of relative in another language) leaves the
    # "no such relative" answer standing
    bruder = ops.evaluate(Frame("relatives", "Dana", anchor="Bruder", relative="brother"))
    assert bruder is not None and bruder.text.startswith("Not in memory")
    brother = ops.evaluate(Frame("relatives", "Dana", relative="brother"))
    assert brother is not None and brother.text.startswith("Not in memory")


def test_an_anchored_latest_that_asks_a_date_reads_the_date_of_the_named_thing(ops: Operations) -> None:
    found = ops.evaluate(Frame("latest", "Dana", CV + "WorkHistory", SCHEMA + "startDate", anchor="Senior Data Analyst"))
    assert found is not None and "1 March 2025" in found.text


def test_the_second_event_of_an_interval_the_frame_left_out_is_named_by_the_rest_of_the_question(
    ops: Operations,
) -> None:
    """One anchor and the question: the question's other words that name a stored event name the second one, in
    whatever language the rest is asked."""
    frame = Frame("interval", "Dana", SCHEMA + "OrderAction", anchor="jumpsuit", unit="days")
    assert ops.evaluate(frame) is None  # the frame alone does not settle it
    asked = replace(ops, question="How many days before Rachel's wedding did Dana order her jumpsuit?")
    found = asked.evaluate(frame)
    assert found is not None and found.text.startswith("33 days")
    german = replace(ops, question="Wie viele Tage vor Rachels Hochzeit hat Dana den Jumpsuit bestellt?")
    found = german.evaluate(frame)
    assert found is not None and found.text.startswith("33 days")


def test_a_window_whose_class_holds_nothing_then_reads_everything_dated_in_it(ops: Operations) -> None:
    found = ops.evaluate(Frame("window", "Dana", CV + "WorkHistory", start=date(2025, 6, 1), end=date(2025, 6, 30)))
    assert found is not None and "Lisbon" in found.text


def test_a_count_of_nodes_that_hold_numbers_shows_each_number(ops: Operations) -> None:
    """"How many records are in the collection" framed as a count of collections, or as the number stored with
    no collection named: each collection's own number is in the answer."""
    by_class = ops.evaluate(Frame("count", "Dana", cls=PCM + "Collection"))
    assert by_class is not None and by_class.text.startswith("2 (") and "240" in by_class.text
    stored = ops.evaluate(Frame("count", "Dana", cls=PCM + "Collection", prop=PCM + "collectionSize"))
    assert stored is not None and "240" in stored.text and "20" in stored.text
    # the question's own words pick the one collection they name
    asked = replace(ops, question="Roughly how many records does Dana's vinyl collection hold?")
    named = asked.evaluate(Frame("count", "Dana", cls=PCM + "Collection", prop=PCM + "collectionSize"))
    assert named is not None and named.text.startswith("240") and "houseplant" not in named.text


def test_a_time_filled_in_beside_another_operation_does_not_widen_to_every_dated_thing(ops: Operations) -> None:
    frame = Frame("value", "Dana", SCHEMA + "SocialEvent", SCHEMA + "name", anchor="family celebration",
                  start=date(2025, 3, 1), end=date(2025, 3, 31))
    assert ops.evaluate(frame) is None


def test_a_property_with_no_node_named_is_read_on_the_node_the_question_names(ops: Operations) -> None:
    """"How often does Dana run": a frequency and no anchor, whatever operation the model read; the running
    schedule, not the yoga one, because the question's words name the run."""
    frame = Frame("interval", "Dana", prop=SCHEMA + "repeatFrequency", unit="weeks")
    assert ops.evaluate(frame) is None  # nothing in the frame says which schedule
    found = replace(ops, question="How often does Dana run, and when?").evaluate(frame)
    assert found is not None and "Monday" in found.text and "Thursday" not in found.text
    # a frame whose class no holder of the property is settles nothing
    assert replace(ops, question="How often does Dana run?").evaluate(
        replace(frame, cls=PCM + "Plant")) is None

"""Exact post-processing: the compute line, date arithmetic, counts, sums, first/last, and how values read."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pyoxigraph as ox
import pytest

from pcm.llm import ScriptedClient
from pcm.retrieval.answer import answer_from_context, compose, parse_context_answer, unquoted_names
from pcm.retrieval.nl2sparql import parse_reply
from pcm.retrieval.postprocess import (
    Compute,
    ComputeError,
    apply,
    difference,
    format_term,
    parse_compute,
    to_date,
)

XSD = "http://www.w3.org/2001/XMLSchema#"
AS_OF = datetime(2025, 6, 15, 9, 0, tzinfo=UTC)


def d(value: str, datatype: str = "date") -> ox.Literal:
    return ox.Literal(value, datatype=ox.NamedNode(XSD + datatype))


def n(value: str, datatype: str = "integer") -> ox.Literal:
    return ox.Literal(value, datatype=ox.NamedNode(XSD + datatype))


def test_the_compute_line_is_parsed_from_the_query() -> None:
    query = "#pcm:compute between(?start, ?end, weeks)\nSELECT ?start ?end WHERE { ?x ?p ?start ; ?q ?end }"
    assert parse_compute(query) == Compute("between", ("?start", "?end", "weeks"))
    assert parse_compute("SELECT * WHERE { ?s ?p ?o }") is None
    with pytest.raises(ComputeError, match="unknown compute operation"):
        parse_compute("# pcm:compute average(?x)")


def test_date_differences_are_calendar_exact() -> None:
    assert difference(date(2025, 2, 4), date(2025, 3, 2), "days") == 26
    assert difference(date(2024, 2, 28), date(2024, 3, 1), "days") == 2  # leap year
    assert difference(date(2025, 1, 31), date(2025, 2, 28), "months") == 0  # a month counts once its day comes
    assert difference(date(2025, 1, 31), date(2025, 3, 31), "months") == 2
    assert difference(date(1990, 6, 16), date(2025, 6, 15), "years") == 34
    assert difference(date(1990, 6, 15), date(2025, 6, 15), "years") == 35
    assert difference(date(2025, 1, 1), date(2025, 1, 18), "weeks") == Decimal("2.4")


def test_between_since_and_until() -> None:
    rows = [{"start": d("2025-02-04"), "end": d("2025-03-02")}]
    done = apply(Compute("between", ("?start", "?end", "days")), rows, as_of=AS_OF)
    assert done.value == 26 and done.text == "26 days (from Tuesday 4 February 2025 to Sunday 2 March 2025)"
    since = apply(Compute("since", ("?born", "years")), [{"born": d("1990-06-16")}], as_of=AS_OF)
    assert since.value == 34
    until = apply(Compute("until", ("?trip",)), [{"trip": d("2025-06-20")}], as_of=AS_OF)
    assert until.text.startswith("5 days")
    one = apply(Compute("between", ("?a", "?b", "day")), [{"a": d("2025-01-01"), "b": d("2025-01-02")}], as_of=AS_OF)
    assert one.text.startswith("1 day ")


def test_dates_of_every_shape_are_read() -> None:
    assert to_date(d("2025-06", "gYearMonth")) == date(2025, 6, 1)
    assert to_date(d("2025", "gYear")) == date(2025, 1, 1)
    assert to_date(d("2025-03-03T17:10:00-08:00", "dateTime")) == date(2025, 3, 3)
    with pytest.raises(ComputeError, match="is not a date"):
        to_date(ox.Literal("last Tuesday"))


def test_counts_and_sums_are_exact_and_distinct() -> None:
    rows = [{"item": ox.NamedNode("urn:a"), "price": n("0.1", "decimal")},
            {"item": ox.NamedNode("urn:b"), "price": n("0.2", "decimal")},
            {"item": ox.NamedNode("urn:b"), "price": n("0.2", "decimal")}]  # the same row twice from a join
    assert apply(Compute("sum", ("?price",)), rows, as_of=AS_OF).value == Decimal("0.3")
    assert apply(Compute("count", ("?item",)), rows, as_of=AS_OF).value == 2
    assert apply(Compute("count", ()), rows, as_of=AS_OF).value == 2


def test_first_last_min_max_order_by_value_kind() -> None:
    rows = [{"city": ox.Literal("Lisbon"), "when": d("2025-06-20")},
            {"city": ox.Literal("Seattle"), "when": d("2025-09", "gYearMonth")},
            {"city": ox.Literal("Salem"), "when": d("2025-03-02")}]
    last = apply(Compute("last", ("?city", "?when")), rows, as_of=AS_OF)
    assert last.value == ox.Literal("Seattle") and last.text == "Seattle (September 2025)"
    assert last.row is rows[1]
    assert apply(Compute("first", ("?city", "?when")), rows, as_of=AS_OF).value == ox.Literal("Salem")
    prices = [{"p": n("85")}, {"p": n("549")}, {"p": n("712")}]
    assert apply(Compute("max", ("?p",)), prices, as_of=AS_OF).text == "712"
    assert apply(Compute("min", ("?p",)), prices, as_of=AS_OF).text == "85"  # numeric, not "549" < "85"


def test_compute_errors_name_what_is_missing() -> None:
    with pytest.raises(ComputeError, match=r"\?end is not bound"):
        apply(Compute("between", ("?start", "?end")), [{"start": d("2025-01-01")}], as_of=AS_OF)
    with pytest.raises(ComputeError, match="unknown unit"):
        apply(Compute("since", ("?x", "fortnights")), [{"x": d("2025-01-01")}], as_of=AS_OF)
    with pytest.raises(ComputeError, match="no rows"):
        apply(Compute("count", ()), [], as_of=AS_OF)


def test_values_read_like_an_answer() -> None:
    assert format_term(d("2025-02-04")) == "Tuesday 4 February 2025"
    assert format_term(n("549.00", "decimal")) == "549"
    assert format_term(n("5.5E2", "double")) == "550"
    assert format_term(d("06:00:00", "time")) == "06:00"
    assert format_term(ox.NamedNode("https://pcm.invalid/m/x/rosewood-auto-repair")) == "rosewood auto repair"
    assert format_term(ox.NamedNode("urn:x"), {"urn:x": "Rosewood"}) == "Rosewood"
    assert format_term(n("true", "boolean")) == "yes"


def test_answers_are_composed_from_bindings() -> None:
    from pcm.backend import Solutions

    one = Solutions(("name",), [(ox.Literal("Lily"),), (ox.Literal("Owen"),), (ox.Literal("Owen"),)])
    assert compose("What are my children's names?", one, None, {}) == "Lily and Owen."
    many = Solutions(("shop", "price"), [(ox.NamedNode("urn:shop"), n("712"))])
    assert compose("Which shop?", many, None, {"urn:shop": "Rosewood Auto Repair"}) == "Rosewood Auto Repair (price: 712)."
    assert compose("How many pets do I have?", Solutions(("pet",), [(ox.Literal("Biscuit"),), (ox.Literal("Mochi"),)]),
                   None, {}) == "2 (Biscuit and Mochi)."
    assert compose("Is it raining?", True, None, {}) == "Yes."
    assert compose("Anything?", Solutions(("x",), [(None,)]), None, {}).startswith("Not in memory")


def test_replies_are_parsed_with_or_without_fences() -> None:
    fenced = parse_reply("Here you go:\n```sparql\n#pcm:compute count(?x)\nSELECT ?x WHERE { ?x ?p ?o }\n```\n")
    assert fenced.sparql is not None and fenced.sparql.startswith("#pcm:compute") and fenced.compute == Compute("count", ("?x",))
    bare = parse_reply("SELECT ?x WHERE { ?x ?p ?o }")
    assert bare.sparql == "SELECT ?x WHERE { ?x ?p ?o }"
    assert parse_reply("NO QUERY: the ontology has no term for moods").no_query == "the ontology has no term for moods"
    assert parse_reply("I am not sure.").problem is not None
    assert parse_reply("```sparql\n#pcm:compute median(?x)\nSELECT ?x {}\n```").problem is not None


def test_fallback_answers_cite_context_items_or_abstain() -> None:
    answer = parse_context_answer("ANSWER: Keep laundry behind closed doors. [cites: 2, 9, 3]", 4)
    assert answer.text == "Keep laundry behind closed doors." and answer.cited == (2, 3)
    assert parse_context_answer("NOT IN MEMORY", 4).text is None
    assert parse_context_answer("I think maybe...", 4).text is None


def test_a_name_put_together_from_two_the_context_writes_is_not_an_answer() -> None:
    context = ["Sellwood Animal Clinic (VeterinaryCare): treats Biscuit", "moving to Seattle (MoveAction): agent Dana",
               "Subaru Outback (Car): owner Dana Whitfield"]
    assert unquoted_names("Seattle Animal Clinic", context) == ("Seattle Animal Clinic",)
    assert unquoted_names("the Subaru Seattle, and Sellwood Animal Clinic", context) == ("Subaru Seattle",)
    # quoted names, possessives, a sentence's first word, words the context never writes as a name: all kept
    for answer in ("Sellwood Animal Clinic", "Dana's Subaru Outback", "The Sellwood Animal Clinic", "Dana, Seattle",
                   "Danas Kinder heißen Biscuit und Seattle", "Monday 3 March 2025", "SELLWOOD animal clinic"):
        assert unquoted_names(answer, context) == (), answer


def test_an_answer_naming_what_the_context_does_not_write_is_refused() -> None:
    client = ScriptedClient(["ANSWER: Seattle Animal Clinic [cites: 1]", "ANSWER: Sellwood Animal Clinic [cites: 1]"])
    context = ["Sellwood Animal Clinic (VeterinaryCare): treats Biscuit", "moving to Seattle (MoveAction)"]
    when = datetime(2025, 10, 1, tzinfo=UTC)
    refused = answer_from_context(client, "Which vet did Dana find?", context, as_of=when, owner_name="Dana")
    assert refused.text is None and refused.unquoted == ("Seattle Animal Clinic",)
    kept = answer_from_context(client, "Which vet did Dana find?", context, as_of=when, owner_name="Dana")
    assert kept.text == "Sellwood Animal Clinic" and kept.cited == (1,)

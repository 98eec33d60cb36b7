"""The varied ask question set (``tests/fixtures/ask/varied.json``): its shape, and that its answers are stored.

The set scores whether ask understands questions in other words, other operations and other languages
(``benchmarks/bench_ask.py --set``). A value or an evidence id the sample memory does not hold would score a
right system wrong, so each is checked against the memory built from the sample conversations: a value must be
among the facts extracted from its evidence utterances (literals, and labels of what those facts name) or in
those utterances' text. A date may be given in the printed form ("4 February 2025") when its ISO form is stored;
computed values (intervals, sums, counts) name their inputs in ``derived``, which are checked and recomputed.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import date, datetime
from typing import Any

import pyoxigraph as ox
import pytest

from tests.retrieval.test_ask_support import FIXTURES, build_sample_memory, load_questions, utterance_ids

VARIED = FIXTURES / "varied.json"
#: Category → (least, most) questions.
COUNTS = {"reworded": (25, 999), "operation": (15, 999), "other-language": (10, 10), "abstain": (10, 10)}
FIELDS = {"question", "category", "values", "evidence", "abstain", "lang"}
OPTIONAL = {"note", "derived"}
DATE_FORMATS = ("%d %B %Y", "%B %d, %Y", "%Y-%m-%d")
YES_NO = ([["yes"]], [["no"]])

#: Per source id: the literals of its extraction graph (and of the history statements moved out of it, a later
#: utterance having superseded them) and the labels of the resources those facts name.
FACTS_QUERY = """
PREFIX prov: <http://www.w3.org/ns/prov#>
PREFIX dct: <http://purl.org/dc/terms/>
PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#>
PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
SELECT DISTINCT ?id ?o ?objectLabel ?subjectLabel WHERE {
  GRAPH <urn:pcm:graph:provenance> { ?g prov:wasDerivedFrom ?post }
  GRAPH <urn:pcm:graph:conversation> { ?post dct:identifier ?id }
  FILTER(STRSTARTS(STR(?g), "urn:pcm:graph:extraction:"))
  { GRAPH ?g { ?s ?p ?o } }
  UNION { GRAPH <urn:pcm:graph:history> { ?h dct:source ?g ; rdf:subject ?s ; rdf:object ?o } }
  OPTIONAL { GRAPH ?l1 { ?o rdfs:label ?objectLabel } }
  OPTIONAL { GRAPH ?l2 { ?s rdfs:label ?subjectLabel } }
}
"""

Question = dict[str, Any]  # JSON
Forms = list[str]


def forms(value: object) -> Forms:
    return [str(f) for f in (value if isinstance(value, list) else [value])]


def as_date(text: str) -> date | None:
    for fmt in DATE_FORMATS:
        try:
            return datetime.strptime(text, fmt).date()
        except ValueError:
            continue
    return None


def has_word(text: str, word: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(word.lower())}(?!\w)", text.lower()) is not None


@pytest.fixture(scope="module")
def questions() -> list[Question]:
    data = json.loads(VARIED.read_text(encoding="utf-8"))
    assert isinstance(data, list)
    return data


@pytest.fixture(scope="module")
def texts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Source id → the lower-cased facts extracted from it plus its utterance text, one item a line."""
    memory = build_sample_memory(tmp_path_factory.mktemp("ask-varied") / "memory", index=False)
    try:
        rows = memory.store.select(FACTS_QUERY).rows
    finally:
        memory.close()
    out: dict[str, list[str]] = {}
    for row in rows:
        found = out.setdefault(str(row[0].value), [])  # type: ignore[union-attr]
        found += [str(term.value) for term in row[1:] if isinstance(term, ox.Literal)]
    for utterance, source in utterance_ids().items():
        out.setdefault(source, []).append(utterance)
    return {source: "\n".join(items).lower() for source, items in out.items()}


def test_shape_counts_and_languages(questions: list[Question]) -> None:
    for q in questions:
        assert FIELDS <= set(q) <= FIELDS | OPTIONAL, q
        assert isinstance(q["question"], str) and q["question"].strip(), q
        assert isinstance(q["values"], list) and isinstance(q["evidence"], list), q
        assert isinstance(q["abstain"], bool), q
        assert all(isinstance(f, str) and f for v in q["values"] for f in forms(v)), q
        assert (q["category"] == "abstain") == q["abstain"], q
        assert (q["category"] == "other-language") == (q["lang"] != "en"), q
    counts = Counter(str(q["category"]) for q in questions)
    assert set(counts) == set(COUNTS) and len(questions) >= 64
    for category, (least, most) in COUNTS.items():
        assert least <= counts[category] <= most, (category, counts[category])
    assert {"fr", "de", "es"} <= {q["lang"] for q in questions if q["category"] == "other-language"}
    asked = [str(q["question"]) for q in questions]
    assert len(set(asked)) == len(asked), "a question is repeated"
    assert not set(asked) & {str(q["question"]) for q in load_questions()}, "a gold question is copied"


def test_evidence_ids_are_sample_utterances(questions: list[Question]) -> None:
    ids = set(utterance_ids().values())
    for q in questions:
        assert set(q["evidence"]) <= ids, q
        if q["abstain"]:
            assert q["values"] == [] and q["evidence"] == [] and "derived" not in q, q
        else:
            assert q["values"] and q["evidence"], q


def test_values_are_in_the_memory_or_the_evidence(questions: list[Question], texts: dict[str, str]) -> None:
    """Every accepted answer rests on what its evidence utterances said (stored facts or their words)."""
    for q in (q for q in questions if not q["abstain"]):
        text = "\n".join(texts.get(source, "") for source in q["evidence"])
        values = list(q["values"])
        if "derived" in q:
            check_derived(q, text)
            values = values[1:]  # the first value is the computed one
        if values in YES_NO:
            continue
        for value in values:
            dates = {as_date(f) for f in forms(value)} - {None}
            assert len(dates) <= 1, f"{q['question']}: forms of one value name different dates: {value}"
            found = any(f.lower() in text for f in forms(value))
            found = found or any(d.isoformat() in text for d in dates if d)
            assert found, f"{q['question']}: {value!r} is not in the facts or text of {q['evidence']}"


def check_derived(q: Question, text: str) -> None:
    """The inputs of a computed value are stored, and its first value holds the result."""
    derived = q["derived"]
    assert isinstance(derived, dict) and len(derived) == 1, q
    (kind, inputs), = derived.items()
    assert isinstance(inputs, list) and len(inputs) >= 2, q
    if kind in ("days", "weeks"):
        assert all(str(d) in text for d in inputs), f"{q['question']}: dates {inputs} not stored"
        days = (date.fromisoformat(inputs[1]) - date.fromisoformat(inputs[0])).days
        assert kind == "days" or days % 7 == 0, q
        result = days if kind == "days" else days // 7
    elif kind == "sum":
        assert all(has_word(text, str(n)) for n in inputs), f"{q['question']}: amounts {inputs} not stored"
        result = sum(inputs)
    elif kind == "count":
        assert all(str(label).lower() in text for label in inputs), f"{q['question']}: {inputs} not stored"
        result = len(inputs)
    else:
        raise AssertionError(f"{q['question']}: unknown derivation {kind!r}")
    first = q["values"][0]
    assert any(has_word(f, str(result)) for f in forms(first)), f"{q['question']}: {result} not in {first}"


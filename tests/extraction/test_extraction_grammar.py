"""The bounded extraction grammar (GBNF for llama.cpp): its language, and that every answer fits the output budget.

The grammar is read here by a small recogniser of the GBNF subset the generator writes (literals, character
classes, groups, alternatives, ``?`` and ``{m,n}``), so these tests need neither llama-cpp-python nor weights. The
grammar is acyclic (each nonterminal counts the budget left, and every piece costs at least one slot), which is
what makes both the recogniser and the longest-answer computation simple.
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

import pytest

from pcm.extraction.jsonld import (
    GRAMMAR_NAME,
    GRAMMAR_VALUES,
    answer_triples,
    extraction_grammar,
    extraction_schema,
    grammar_budget,
)
from pcm.ontology import CLASS, DATATYPE_PROPERTY, OBJECT_PROPERTY, load_ontology

NS = "https://example.org/memory/"
_TOKEN = re.compile(r'\s*(?:(?P<lit>"(?:\\.|[^"\\])*")|(?P<cls>\[(?:\\.|[^\]\\])*\])|(?P<rep>\{\d+(?:,\d*)?\})'
                    r"|(?P<op>[()|?*+])|(?P<ref>[a-z0-9-]+))")


def _unescape(body: str) -> str:
    return re.sub(r"\\(x[0-9a-fA-F]{2}|.)", lambda m: chr(int(m[1][1:], 16)) if m[1][0] == "x" else
                  {"n": "\n", "t": "\t", "r": "\r"}.get(m[1], m[1]), body)


class Grammar:
    """A recogniser and longest-sentence calculator for the generator's GBNF."""

    def __init__(self, text: str) -> None:
        self.rules: dict[str, Any] = {}
        for line in text.splitlines():
            name, body = line.split(" ::= ", 1)
            tokens = [m for m in _TOKEN.finditer(body) if m.group().strip()]
            self.rules[name], rest = self._alternatives(tokens, 0)
            assert rest == len(tokens), line

    def _alternatives(self, tokens: list[re.Match[str]], i: int) -> tuple[Any, int]:
        options = []
        while True:
            seq, i = self._sequence(tokens, i)
            options.append(seq)
            if i < len(tokens) and tokens[i]["op"] == "|":
                i += 1
                continue
            return ("alt", options), i

    def _sequence(self, tokens: list[re.Match[str]], i: int) -> tuple[Any, int]:
        items: list[Any] = []
        while i < len(tokens) and tokens[i]["op"] not in ("|", ")"):
            t = tokens[i]
            if t["op"] == "(":
                item, i = self._alternatives(tokens, i + 1)
                assert tokens[i]["op"] == ")"
            elif t["lit"]:
                item = ("lit", _unescape(t["lit"][1:-1]))
            elif t["cls"]:
                item = ("cls", re.compile("[" + t["cls"][1:-1].replace("\\x", "\\x") + "]"))
            else:
                item = ("ref", t["ref"])
            i += 1
            if i < len(tokens) and (tokens[i]["op"] == "?" or tokens[i]["rep"]):
                bounds = (tokens[i]["rep"] or "{0,1}")[1:-1].split(",")
                low, high = int(bounds[0]), int(bounds[-1])
                item = ("rep", item, low, high)
                i += 1
            items.append(item)
        return ("seq", items), i

    def ends(self, node: Any, text: str, start: int) -> frozenset[int]:
        """Positions where a match of ``node`` starting at ``start`` can end."""
        return self._ends(node if not isinstance(node, str) else ("ref", node), text, start)

    def _ends(self, node: Any, text: str, start: int) -> frozenset[int]:
        kind = node[0]
        if kind == "lit":
            return frozenset({start + len(node[1])}) if text.startswith(node[1], start) else frozenset()
        if kind == "cls":
            return frozenset({start + 1}) if start < len(text) and node[1].fullmatch(text[start]) else frozenset()
        if kind == "ref":
            return self._rule(node[1], text, start)
        if kind == "alt":
            return frozenset().union(*(self._ends(o, text, start) for o in node[1]))
        if kind == "seq":
            positions = frozenset({start})
            for item in node[1]:
                positions = frozenset().union(*(self._ends(item, text, p) for p in positions))
            return positions
        _, item, low, high = node
        positions, reached = frozenset({start}), frozenset({start}) if low == 0 else frozenset()
        for n in range(1, high + 1):
            positions = frozenset().union(*(self._ends(item, text, p) for p in positions))
            if n >= low:
                reached |= positions
            if not positions:
                break
        return reached

    def _rule(self, name: str, text: str, start: int) -> frozenset[int]:
        key = (name, text, start)
        if key not in self._memo:
            self._memo[key] = self._ends(self.rules[name], text, start)
        return self._memo[key]

    _memo: dict[tuple[str, str, int], frozenset[int]] = {}

    def accepts(self, text: str) -> bool:
        self._memo = {}
        return len(text) in self.ends("root", text, 0)

    def longest(self) -> int:
        """The length of the longest sentence (the grammar is acyclic)."""

        @cache
        def rule(name: str) -> int:
            return size(self.rules[name])

        def size(node: Any) -> int:
            kind = node[0]
            if kind == "lit":
                return len(node[1])
            if kind == "cls":
                return 1
            if kind == "ref":
                return rule(node[1])
            if kind == "alt":
                return max(size(o) for o in node[1])
            if kind == "seq":
                return sum(size(i) for i in node[1])
            return node[3] * size(node[1])

        for name in sorted(self.rules, key=lambda n: (n == "root", int(re.sub(r"\D", "", n) or 0))):
            rule(name)  # bottom up: the budget-indexed rules refer to lower budgets
        return rule("root")


@pytest.fixture(scope="module")
def ontology() -> Any:
    return load_ontology()


@cache
def grammar_for(max_tokens: int, known: tuple[str, ...] = ()) -> Grammar:
    return Grammar(extraction_grammar(load_ontology(), grammar_budget(max_tokens), known))


X = {"@id": "m:x", "@type": ["schema:Thing"], "rdfs:label": "x"}


def compact(document: dict[str, Any]) -> str:
    return json.dumps(document, separators=(",", ":"))


@pytest.mark.parametrize(("max_tokens", "known"), [(300, ()), (1000, ()), (3000, ()), (1000, ("m:owner",))])
def test_the_longest_answer_fits_the_token_budget(max_tokens: int, known: tuple[str, ...]) -> None:
    """Every sentence is at most max_tokens characters, so at most max_tokens tokens: a looping model must close
    the document before the limit instead of being cut mid-JSON (embedded nodes draw on the same budget)."""
    longest = grammar_for(max_tokens, known).longest()
    assert longest <= max_tokens
    assert longest > max_tokens * 0.8  # the budget is used, not wasted


def test_a_real_answer_is_accepted_and_reads_as_rdf(ontology: Any) -> None:
    document = {"@graph": [
        {"@id": "m:owner", "schema:owns": "m:breville"},
        {"@id": "m:buy-espresso", "@type": ["schema:BuyAction"], "rdfs:label": "buying the espresso machine",
         "schema:agent": "m:owner", "schema:object": "m:breville", "schema:price": 549,
         "schema:priceCurrency": "USD", "schema:actionStatus": "schema:CompletedActionStatus",
         "schema:startTime": "2024-03-02"},
        {"@id": "m:breville", "@type": ["schema:Product"], "rdfs:label": "Breville Barista Express"},
    ]}
    text = compact(document)
    assert grammar_for(3000, ("m:owner",)).accepts(text)
    assert len(answer_triples(text, namespace=NS, ontology=ontology)) >= 10
    assert grammar_for(3000).accepts('{"@graph":[]}')


def test_every_catalogue_term_is_reachable(ontology: Any) -> None:
    """Each class as a type, each property with a value of its range, each in a one-node answer."""
    grammar = grammar_for(1000)
    schema = extraction_schema(ontology).schema
    node = schema["$defs"]["node"]["properties"]
    classes = node["@type"]["items"]["enum"]
    for curie in classes:
        assert grammar.accepts(compact({"@graph": [{**X, "@type": [curie]}]})), curie
    samples: list[Any] = ["m:y", "schema:CompletedActionStatus", "schema:Monday", "2024-03-02", "2024",
                          "2024-03-02T10:00", "10:30", "P2D", 12, 12.5, True, "some text", "https://example.org/a"]
    terms = {ontology.curie(t.iri) for t in ontology.terms.values() if t.kind in (OBJECT_PROPERTY, DATATYPE_PROPERTY)}
    for key in node:
        if key in ("@id", "@type", "rdfs:label"):
            continue
        assert any(grammar.accepts(compact({"@graph": [{**X, key: v}]})) for v in samples), key
        terms.discard(key)
    assert {ontology.curie(t.iri) for t in ontology.terms.values() if t.kind == CLASS} >= set(classes)


def test_nothing_outside_the_catalogue_is_accepted() -> None:
    grammar = grammar_for(1000)
    assert grammar.accepts(compact({"@graph": [X]}))
    assert not grammar.accepts(compact({"@graph": [{**X, "@type": ["schema:Nonsense"]}]}))
    assert not grammar.accepts(compact({"@graph": [{**X, "schema:nonsense": "m:y"}]}))
    assert not grammar.accepts(compact({"@graph": [{**X, "@id": "pcm:user"}]}))  # individuals are m: names
    assert not grammar.accepts(compact({"@graph": [{**X, "schema:birthDate": "last spring"}]}))  # a date's form


NESTED = {"@id": "m:buy", "@type": ["schema:BuyAction"], "rdfs:label": "buying a car", "schema:agent": "m:owner",
          "schema:object": {"@id": "m:car", "@type": ["schema:Car"], "rdfs:label": "car", "schema:color": "red"},
          "schema:participant": [{"@id": "m:anna", "@type": ["schema:Person"], "rdfs:label": "Anna"},
                                 {"@id": "m:bob", "@type": ["schema:Person"], "rdfs:label": "Bob"}],
          "schema:price": 5}


def test_a_thing_can_be_described_where_it_is_referred_to(ontology: Any) -> None:
    """An object property takes an embedded node, alone or in a list, with the same opening keys, two levels deep
    (each embedded node's states return to where it was embedded, with the slots left)."""
    grammar = grammar_for(3000)
    text = compact({"@graph": [NESTED, X]})
    assert grammar.accepts(text)
    facts = {(t.subject.value, t.predicate.value, t.object.value)
             for t in answer_triples(text, namespace=NS, ontology=ontology)}
    assert (NS + "buy", "https://schema.org/object", NS + "car") in facts
    assert (NS + "car", "http://www.w3.org/2000/01/rdf-schema#label", "car") in facts
    def with_brand(brand: dict[str, Any]) -> str:
        return compact({"@graph": [{**NESTED, "schema:object": {**NESTED["schema:object"], "schema:brand": brand}}]})

    assert grammar.accepts(with_brand({**X, "@id": "m:honda"}))  # two levels: the purchase's car's brand
    assert not grammar.accepts(with_brand({**X, "@id": "m:honda", "schema:manufacturer": {**X, "@id": "m:hmc"}}))


@pytest.mark.parametrize(
    "node",
    [
        {"@id": "m:x", "rdfs:label": "x", "schema:about": "m:owner"},  # no type
        {"@id": "m:x", "@type": ["schema:Thing"], "schema:about": "m:owner"},  # no label
        {**X, "rdfs:label": ""},  # an empty label
        {"@id": "m:x", "rdfs:label": "x", "@type": ["schema:Thing"]},  # the opening keys out of order
        {**X, "@id": "m:712"},  # a number as an individual
        {**X, "schema:object": "m:712"},  # a number referred to as an individual
        {**X, "schema:object": {"@id": "m:car", "@type": ["schema:Car"]}},  # an embedded node without label
        {**X, "schema:description": {**X, "@id": "m:y"}},  # a node where a literal belongs
        {**X, "pcm:quantity": "m:y"},  # a name where a number belongs
        {"@id": "m:dana", "schema:owns": "m:y"},  # not a known entity: needs a type and a label
    ],
    ids=["untyped", "unlabelled", "empty-label", "out-of-order", "number-node", "number-reference",
         "nested-unlabelled", "node-as-literal", "name-as-number", "unknown-without-type"],
)
def test_what_shacl_refuses_is_not_in_the_grammar(node: dict[str, Any]) -> None:
    grammar = grammar_for(1000, ("m:owner",))
    assert grammar.accepts(compact({"@graph": [X, {"@id": "m:owner", "schema:owns": "m:x"}]}))
    assert not grammar.accepts(compact({"@graph": [node]}))


def test_a_known_entity_cannot_be_opened_as_a_new_node() -> None:
    """A known entity goes without type and label: the new-node opening refuses exactly the known names (a small
    model relabelled the owner with each utterance's text), at the top level and embedded, and nothing else."""
    grammar = grammar_for(1000, ("m:owner", "m:own", "m:biscuit"))

    def new(name: str) -> dict[str, Any]:
        return {"@id": name, "@type": ["schema:Thing"], "rdfs:label": "x"}

    for known in ("m:owner", "m:own", "m:biscuit"):
        assert not grammar.accepts(compact({"@graph": [new(known)]})), known
        assert not grammar.accepts(compact({"@graph": [{**X, "schema:owns": new(known)}]})), known
        assert grammar.accepts(compact({"@graph": [{"@id": known, "schema:owns": "m:x"}]})), known
        assert grammar.accepts(compact({"@graph": [{**X, "schema:owns": known}]})), known  # still a value
    for other in ("m:ow", "m:owne", "m:owners", "m:owner-car", "m:o", "m:biscuit2", "m:b", "m:x", "m:Owner",
                  "m:" + "o" * (GRAMMAR_NAME - 2)):
        assert grammar.accepts(compact({"@graph": [new(other)]})), other
    assert not grammar.accepts(compact({"@graph": [new("m:" + "o" * (GRAMMAR_NAME - 1))]}))  # too long, as before


def test_a_looping_answer_is_refused_past_the_budget_but_closes_within_it() -> None:
    """Repeating one node: accepted while it fits, refused once it would pass the budget."""
    grammar = grammar_for(300)
    node = {"@id": "m:biscuit", "@type": ["pcm:Pet"], "rdfs:label": "Biscuit"}
    fits = [n for n in range(1, 12) if grammar.accepts(compact({"@graph": [node] * n}))]
    assert fits and fits == list(range(1, len(fits) + 1))
    assert len(compact({"@graph": [node] * (fits[-1] + 1)})) > 0 and fits[-1] < 11


def test_lists_of_values_are_bounded() -> None:
    grammar = grammar_for(3000)
    many = {**X, "foaf:knows": [f"m:p{i}" for i in range(GRAMMAR_VALUES)]}
    assert grammar.accepts(compact({"@graph": [many]}))
    many["foaf:knows"] = [f"m:p{i}" for i in range(GRAMMAR_VALUES + 1)]
    assert not grammar.accepts(compact({"@graph": [many]}))


def test_the_pretty_printed_answer_of_the_prompt_example_is_accepted(ontology: Any) -> None:
    """The prompt shows JSON with spaces and indented lines; a grammar that refused them made a model close the
    document at once (an empty @graph for every utterance). The example is read from the prompt file."""
    from pcm.extraction.prompts import extract_prompt

    example = extract_prompt().parts["json_example"]
    document = example[example.index('{"@graph"'):].strip()
    assert grammar_for(3000).accepts(document)
    triples = answer_triples(document, namespace=NS, ontology=ontology)
    assert len(triples) == 16
    typed = {t.subject.value for t in triples if t.predicate.value.endswith("#type")}
    labelled = {t.subject.value for t in triples if t.predicate.value.endswith("#label")}
    assert typed == labelled == {t.subject.value for t in triples}  # every thing described where it is named

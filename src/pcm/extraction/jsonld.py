"""Constrained extraction output: a JSON Schema generated from the ontology, and the answer read back as JSON-LD.

Why: small models break free-form Turtle (syntax, invented terms, copied prompt lines) far more often than they
break JSON whose shape the server enforces while decoding. Every local server (llama.cpp, Ollama, vLLM, LM Studio)
and the hosted APIs can hold a model to a JSON Schema, so the schema here is generated from the same source as the
prompt's catalogue (the ontology, cut to the areas selected for the utterance) and never written by hand:

* the answer is ``{"@graph": [node, ...]}``, a JSON-LD document without its context;
* a node has an ``@id`` (an ``m:`` name starting with a letter, as in the Turtle prompt), an ``@type`` list drawn
  from the catalogue's classes and a non-empty ``rdfs:label`` (only the known entities the prompt offers go without
  them), and properties keyed by the catalogue's predicates (compact IRIs such as ``schema:price``);
* a value is shaped by the property's range: an object property takes an ``m:`` name (or one of the ontology's
  named values, such as ``schema:CompletedActionStatus``) or a node written in place (JSON-LD's embedded node); a
  datatype property takes a literal in its lexical form (dates as ``YYYY-MM-DD``, numbers as JSON numbers,
  booleans as JSON booleans);
* sizes are bounded (nodes, values per property, string lengths) so that a model that loops ends with a complete,
  valid document instead of JSON cut at the token limit.

The answer becomes RDF through pyoxigraph's JSON-LD parser, with a ``@context`` generated here (prefixes, and for
each predicate whether its values are node references or typed literals); the triples then go through the same
normalise → SHACL → repair path as Turtle (see :func:`pcm.extraction.normalise.normalise_triples`), after a bare
reference to a new name gets the node its property's range decides (:func:`complete_references`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import cache, lru_cache, partial
from itertools import product
from typing import Any

import pyoxigraph as ox

from pcm.backend import term_value
from pcm.catalogue_areas import RESERVED_AREAS
from pcm.llm.base import JsonSchema
from pcm.namespaces import OWL, PREFIXES, RDF, RDFS, SCHEMA, XSD
from pcm.ontology import AREAS, CLASS, DATATYPE_PROPERTY, INDIVIDUAL, OBJECT_PROPERTY, Ontology

#: Most nodes one answer may hold (a long utterance needs ~10).
MAX_NODES = 24
#: Most values one property of one node may hold.
MAX_VALUES = 8
#: Most types one node may carry.
MAX_TYPES = 3
#: Longest literal string, and longest name.
MAX_TEXT = 300
MAX_NAME = 80
SCHEMA_NAME = "extraction"

#: An individual of the memory, as the prompt writes it (``m:biscuit``, ``m:owner``).
NAME_PATTERN = r"^m:[A-Za-z][A-Za-z0-9._-]*$"
_LABEL = RDFS + "label"
_DATE = r"^[0-9]{4}(-[0-9]{2}(-[0-9]{2})?)?$"
_DATETIME = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{2}:[0-9]{2}(:[0-9]{2})?)?$"

#: Datatype → (JSON Schema of its lexical form, JSON-LD coercion or None for a plain/native literal).
_LITERALS: dict[str, tuple[dict[str, Any], str | None]] = {
    XSD + "string": ({"type": "string", "maxLength": MAX_TEXT}, None),
    RDFS + "Literal": ({"anyOf": [{"type": "string", "maxLength": MAX_TEXT}, {"type": "number"}, {"type": "boolean"}]},
                       None),
    XSD + "date": ({"type": "string", "pattern": _DATE, "maxLength": 10}, None),
    XSD + "dateTime": ({"type": "string", "pattern": _DATETIME, "maxLength": 19}, None),
    XSD + "gYear": ({"type": "string", "pattern": r"^[0-9]{4}$", "maxLength": 4}, XSD + "gYear"),
    XSD + "gYearMonth": ({"type": "string", "pattern": r"^[0-9]{4}-[0-9]{2}$", "maxLength": 7}, XSD + "gYearMonth"),
    XSD + "time": ({"type": "string", "pattern": r"^[0-9]{2}:[0-9]{2}(:[0-9]{2})?$", "maxLength": 8}, XSD + "time"),
    XSD + "duration": ({"type": "string", "pattern": r"^-?P[0-9YMWDTHS.]+$", "maxLength": 30}, XSD + "duration"),
    XSD + "integer": ({"type": "integer"}, None),
    XSD + "nonNegativeInteger": ({"type": "integer", "minimum": 0}, XSD + "nonNegativeInteger"),
    XSD + "decimal": ({"type": "number"}, None),
    XSD + "double": ({"type": "number"}, None),
    XSD + "float": ({"type": "number"}, None),
    XSD + "boolean": ({"type": "boolean"}, None),
    XSD + "anyURI": ({"type": "string", "pattern": r"^https?://[^ ]+$", "maxLength": MAX_TEXT}, XSD + "anyURI"),
}
_STRING = _LITERALS[XSD + "string"][0]
_NUMERIC = frozenset({XSD + "decimal", XSD + "double", XSD + "float", SCHEMA + "Number"})


class AnswerProblem(ValueError):
    """The answer is not a JSON document of the expected shape; the message is one line for the repair report."""


def extraction_schema(
    ontology: Ontology, areas: tuple[str, ...] | None = None, known: Iterable[str] = ()
) -> JsonSchema:
    """The JSON Schema of an extraction answer; ``known`` are the known entities' names the prompt offers
    (``m:owner``, ``m:biscuit``), the only nodes that may go without a type and a label.

    ``areas=None`` (what extraction uses) accepts the whole catalogue but pcm's own bookkeeping areas, as Turtle
    extraction does: the prompt lists the areas selected for the utterance, and the schema must not refuse a right
    term the keyword selection missed (on the sample conversations, a schema cut to the selected areas refused 21
    of the 53 gold answers; see ``benchmarks/bench_prompt_size.py``). Value shapes are shared through ``$defs``.

    What SHACL would refuse is made unsayable where a schema can say it: a new node has ``@type`` and a non-empty
    ``rdfs:label`` (``required``); a name starts with a letter (``m:712`` is a number, not an individual); a property
    whose range is a datatype takes literals only; a property whose range is a class takes a name or a whole node
    (``{"@id": ..., "@type": [...], "rdfs:label": ..., ...}``, JSON-LD's embedded node), so a new thing can be
    described where it is referred to. A bare name that has no node of its own is completed in code
    (:func:`complete_references`).
    """
    return _schema(ontology, areas, tuple(sorted(set(known))))


@lru_cache(maxsize=64)
def _schema(ontology: Ontology, areas: tuple[str, ...] | None, known: tuple[str, ...]) -> JsonSchema:
    classes, properties, values = _vocabulary(ontology, areas)
    defs: dict[str, Any] = {}
    members: dict[str, Any] = {}
    for iri in properties:
        name, value = _value_schema(ontology, iri, values)
        if ontology.terms[iri].kind == OBJECT_PROPERTY:
            name, value = name + "_or_node", {"anyOf": [value, {"$ref": "#/$defs/node"}]}
        if iri in ontology.functional_properties:
            defs.setdefault(name, value)
            members[ontology.curie(iri)] = {"$ref": f"#/$defs/{name}"}
        else:
            many = {"type": "array", "items": value, "minItems": 1, "maxItems": MAX_VALUES}
            defs.setdefault(name + "s", {"anyOf": [value, many]})
            members[ontology.curie(iri)] = {"$ref": f"#/$defs/{name}s"}
    defs["node"] = {
        "type": "object",
        "properties": {
            "@id": {"type": "string", "pattern": NAME_PATTERN, "maxLength": MAX_NAME},
            "@type": {
                "type": "array",
                "items": {"type": "string", "enum": [ontology.curie(c) for c in classes]},
                "minItems": 1,
                "maxItems": MAX_TYPES,
            },
            "rdfs:label": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT},
            **members,
        },
        "required": ["@id", "@type", "rdfs:label"],
        "additionalProperties": False,
    }
    item: dict[str, Any] = {"$ref": "#/$defs/node"}
    if known:
        defs["known_node"] = {
            "type": "object",
            "properties": {"@id": {"type": "string", "enum": list(known)}, **members},
            "required": ["@id"],
            "additionalProperties": False,
        }
        item = {"anyOf": [item, {"$ref": "#/$defs/known_node"}]}
    schema = {
        "type": "object",
        "properties": {"@graph": {"type": "array", "items": item, "maxItems": MAX_NODES}},
        "required": ["@graph"],
        "additionalProperties": False,
        "$defs": dict(sorted(defs.items())),
    }
    return JsonSchema(
        SCHEMA_NAME, schema,
        "Record the facts the current utterance states, as nodes of a JSON-LD graph (an empty @graph when there "
        "are none).",
        grammar=partial(_bounded_grammar, ontology, known) if areas is None else None,
    )


def _bounded_grammar(ontology: Ontology, known: tuple[str, ...], max_tokens: int) -> str:
    return extraction_grammar(ontology, grammar_budget(max_tokens), known)


def _vocabulary(
    ontology: Ontology, areas: Iterable[str] | None
) -> tuple[list[str], list[str], dict[str, list[str]]]:
    """Classes and properties of the areas (all but the reserved ones for ``None``), and the named values of each
    class (e.g. the action statuses), offered wherever their class is a property's range, whatever their area.
    """
    wanted = (set(AREAS) | {t.area for t in ontology.terms.values()} if areas is None else set(areas)) - RESERVED_AREAS
    terms = sorted(ontology.terms.values(), key=lambda t: ontology.curie(t.iri))
    classes = [t.iri for t in terms if t.kind == CLASS and t.area in wanted]
    properties = [
        t.iri for t in terms
        if t.kind in (OBJECT_PROPERTY, DATATYPE_PROPERTY) and t.area in wanted and t.iri != _LABEL
    ]
    values: dict[str, list[str]] = {}
    for t in terms:
        if t.kind == INDIVIDUAL and t.area not in RESERVED_AREAS:
            for parent in t.parents:
                values.setdefault(parent, []).append(ontology.curie(t.iri))
    return classes, properties, values


def _value_schema(ontology: Ontology, iri: str, values: dict[str, list[str]]) -> tuple[str, dict[str, Any]]:
    """``(name, JSON Schema)`` of one value of the property; equal shapes get equal names (shared ``$defs``)."""
    term = ontology.terms[iri]
    if term.kind == OBJECT_PROPERTY:
        name = {"type": "string", "pattern": NAME_PATTERN, "maxLength": MAX_NAME}
        named = sorted({v for r in term.range for c in ontology.subclasses(r) for v in values.get(c, [])})
        if not named:
            return "name", name
        label = "name_or_" + "_".join(sorted({_local(ontology, r) for r in term.range}))
        return label, {"anyOf": [{"type": "string", "enum": named}, name]}
    shapes: list[dict[str, Any]] = []
    labels: list[str] = []
    for datatype in term.range or (XSD + "string",):
        shape = _LITERALS.get(datatype, (_STRING, None))[0]
        if shape not in shapes:
            shapes.append(shape)
            labels.append(_local(ontology, datatype) if datatype in _LITERALS else "string")
    return "_or_".join(labels), shapes[0] if len(shapes) == 1 else {"anyOf": shapes}


def _local(ontology: Ontology, iri: str) -> str:
    return re.sub(r"\W", "_", ontology.curie(iri).split(":")[-1])


# ---------------------------------------------------------------------------------------------------- grammar

#: Characters one budget slot stands for: every piece of the answer costs its longest form, rounded up to slots.
SLOT = 8
#: Longest literal string and longest ``m:`` name in the grammar (tighter than the schema's: each is paid for at
#: its longest in the budget, so a generous bound would leave room for few facts).
GRAMMAR_TEXT = 120
#: A text value may also be paid for as short (most labels and names are), so short values cost what they are.
GRAMMAR_SHORT_TEXT = 32
GRAMMAR_NAME = 40
#: Longest list of values of one property in the grammar.
GRAMMAR_VALUES = 4
#: How deep nodes embed in the grammar (a purchase, its product, the product's brand: 2).
GRAMMAR_DEPTH = 2
#: The families of node states (see :func:`_node_states`): every path of ``q`` and ``r`` up to that depth.
_FAMILIES = tuple("".join(path) for depth in range(GRAMMAR_DEPTH + 1) for path in product("qr", repeat=depth))
#: Characters outside the budget: the document's opening and the closing brackets a full budget still needs.
#: Optional whitespace where a model habitually writes it (a space after ":" and ",", a newline and indent before
#: a node or member): forbidding it made a model used to pretty JSON close the document at once. Paid for too.
_WS = 4
_FRAME = len('{"@graph":[') + len(']}}]') + 5 * _WS
_ASCII_NAME_CHARS = "[A-Za-z0-9._-]"


@dataclass(frozen=True)
class _Shape:
    """One value shape in the grammar: its GBNF rule name, body and longest text in characters."""

    rule: str
    body: str
    longest: int


def extraction_grammar(ontology: Ontology, budget: int, known: Iterable[str] = ()) -> str:
    """A llama.cpp GBNF grammar for the extraction answer whose every sentence is at most ``budget`` characters.

    Why a grammar beside the JSON Schema: a JSON Schema bounds each part (nodes, values per property, string
    lengths) but not their product, so a model that loops (listing schema terms as nodes, repeating a value) runs
    to the token limit and its JSON is cut mid-document. The grammar carries a *total* budget instead: every piece
    of the answer (a node's opening, a further type, a property with its value, a further value in a list) costs
    its longest form in :data:`SLOT`-character slots, and the grammar's nonterminals count the slots left
    (``p37`` is "inside a node, 37 slots left"). When too few remain for another piece, the only continuation is
    closing the document, so a looping model ends with complete, valid JSON.

    What SHACL would refuse is unsayable: a node opens with ``"@id"`` (a name that starts with a letter, never
    ``m:712``), ``"@type"`` (catalogue classes) and a non-empty ``"rdfs:label"``, in that order, unless its ``@id``
    is one of ``known`` (the entities the prompt offers, which keep their types and labels: a known name opens
    only a node without them, see :func:`_names_except`); a datatype property
    takes literals only; a property whose range is a class takes a name or an embedded node of the same shape
    (one level deep, alone or in a list), so a new thing can be described where it is referred to. Nested nodes
    share the budget: their nonterminals form families (``q``: a node embedded as a value, which returns to its
    parent's ``p``; ``r``: one in a list, which returns to ``l``), each counting the same slots.

    The language is the schema's (same vocabulary, same value shapes, from :func:`extraction_schema`'s sources)
    with tighter strings (:data:`GRAMMAR_TEXT`, :data:`GRAMMAR_NAME`, no escapes) and at most one level of
    embedding. A token is at least one character, so ``budget`` characters is also a bound on tokens for ASCII
    text: pass the call's ``max_tokens`` (see :func:`grammar_budget`).
    """
    names = sorted({k for k in known if re.fullmatch(NAME_PATTERN, k) and len(k) <= GRAMMAR_NAME})
    body = _grammar(ontology, budget, bool(names))
    if not names:
        return body + "new-name ::= name\n"
    return body + "known ::= " + " | ".join(_quoted(k) for k in names) + "\n" + _names_except(names)


#: The characters of an ``m:`` name after its first (a letter), one by one (the complement rules list them).
_NAME_CHARS = "".join(sorted({chr(c) for c in range(128) if re.fullmatch(_ASCII_NAME_CHARS, chr(c))}))


def _names_except(known: Sequence[str]) -> str:
    """GBNF for ``new-name``: every ``m:`` name of the ``name`` rule but the ``known`` ones.

    Why: a known entity is written without type and label, but a new node's opening (``@id``, ``@type``,
    ``rdfs:label``) also took a known name, and a small model used it to relabel the owner with each utterance's
    text. GBNF has no negation, so the complement is spelled out over the trie of the known names: at each prefix
    the name may end (unless the prefix is itself known), go on with a character no known name takes there (then
    anything), or follow a known name's next character.
    """
    words = [k[2:] for k in known]  # "m:" is written by the rule; names start with a letter
    first = "".join(c for c in _NAME_CHARS if c.isalpha())
    root, rules = trie_complement(words, "new-name", first, _NAME_CHARS, _ASCII_NAME_CHARS, GRAMMAR_NAME - 2)
    return f'new-name ::= "\\"m:" {root} "\\""\n' + "\n".join(rules) + "\n"


def trie_complement(
    words: Sequence[str], rule: str, first: str, rest: str, rest_class: str, longest: int
) -> tuple[str, list[str]]:
    """GBNF for every name of at most ``longest`` characters (``first`` then ``rest`` characters) but ``words``:
    ``(root rule, rules)``, the rules named ``rule-N``.

    GBNF has no negation, so the complement is spelled out over the trie of the words: at each prefix the name may
    end (unless the prefix is itself a word), go on with a character no word takes there (then anything of
    ``rest_class``), or follow a word's next character. Both answer forms use it to keep a new node from taking a
    known entity's name.
    """
    rules: list[str] = []

    def node(prefix: str) -> str | None:
        depth = len(prefix)
        allowed = rest if depth else first
        nexts = sorted({w[depth] for w in words if w.startswith(prefix) and len(w) > depth})
        options = []
        others = "".join(c for c in allowed if c not in nexts)
        left = longest - depth - 1
        if others and left >= 0:
            options.append(_char_class(others) + (f" {rest_class}{{0,{left}}}" if left else ""))
        for c in nexts:
            child = node(prefix + c)
            if child is not None:
                options.append(f'"{c}" {child}')  # name characters need no escape
        ends = depth > 0 and prefix not in words
        if not options:
            return '""' if ends else None
        body = " | ".join(options)
        rules.append(f"{rule}-{len(rules)} ::= " + (f"( {body} )?" if ends else body))
        return f"{rule}-{len(rules) - 1}"

    root = node("")
    assert root is not None  # a letter no word starts with is always left
    return root, rules


def _char_class(chars: str) -> str:
    """A GBNF character class of ``chars`` (ASCII name characters), with runs as ranges and ``-`` last."""
    dash = "-" in chars
    codes = sorted(ord(c) for c in chars if c != "-")
    parts, i = [], 0
    while i < len(codes):
        j = i
        while j + 1 < len(codes) and codes[j + 1] == codes[j] + 1:
            j += 1
        parts.append(chr(codes[i]) + (f"-{chr(codes[j])}" if j - i >= 2 else "".join(chr(c) for c in codes[i + 1 : j + 1])))
        i = j + 1
    return "[" + "".join(parts) + ("-" if dash else "") + "]"


def grammar_budget(max_tokens: int) -> int:
    """The character budget whose answers always fit in ``max_tokens`` tokens (one character or more per token)."""
    return max(0, max_tokens - _FRAME)


def grammar_longest(ontology: Ontology, budget: int) -> int:
    """The longest answer the grammar for ``budget`` accepts, in characters (what a test checks against)."""
    return (budget // SLOT) * SLOT + _FRAME


@dataclass(frozen=True)
class _Costs:
    """Slots of the pieces of a node: its opening (``@id`` with the braces around the node), its first and every
    further type, its label (short or long), and the key of an object property that opens an embedded node."""

    id: int
    type: int
    label_short: int
    label_long: int
    object_key: int
    object_list: int

    @property
    def opening(self) -> int:
        """The cheapest new node: ``@id``, one type and a short label."""
        return self.id + self.type + self.label_short


@cache
def _grammar(ontology: Ontology, budget: int, known: bool) -> str:
    classes, properties, values = _vocabulary(ontology, None)
    slots = budget // SLOT
    shapes: dict[str, _Shape] = {}
    keys: dict[tuple[str, bool], list[str]] = {}
    object_keys: list[str] = []
    object_lists: list[str] = []
    for iri in properties:
        name, value = _value_schema(ontology, iri, values)
        if name not in shapes:
            rule = "v-" + re.sub(r"[^a-z0-9]+", "-", name.lower())
            shapes[name] = _Shape(rule, *_gbnf(value))
            short = _Shape(rule + "-short", *_gbnf(value, GRAMMAR_SHORT_TEXT))
            if short.body != shapes[name].body:
                shapes[name + "-short"] = short
        many = iri not in ontology.functional_properties
        keys.setdefault((name, many), []).append(ontology.curie(iri))
        if ontology.terms[iri].kind == OBJECT_PROPERTY:
            object_keys.append(ontology.curie(iri))
            if many:
                object_lists.append(ontology.curie(iri))
    label_head = len(',"rdfs:label":') + 2 + 2 * _WS
    object_head = max(len(c) for c in object_keys) + 2 + 2 + 2 * _WS  # the key, quoted, with "," and ":" and spaces
    costs = _Costs(
        id=_cost(_id_len()),
        type=_cost(max(len(ontology.curie(c)) for c in classes) + 2 + len(',"@type":[]') + 2 * _WS),
        label_short=_cost(label_head + GRAMMAR_SHORT_TEXT),
        label_long=_cost(label_head + GRAMMAR_TEXT),
        object_key=_cost(object_head),
        object_list=_cost(object_head + 2 + 2 * _WS),  # "[" and "]", with the spaces after "[" and before "]"
    )
    first = costs.id if known else costs.opening
    lines = [
        'root ::= "{\\"@graph\\":" w "[" w ( "]" w "}" ' + (f'| "{{" w n{slots} ' if slots >= first else "") + ")",
        'w ::= ( " " | "\\n" " "{0,3} )?',
        f'name ::= "\\"m:" [A-Za-z] {_ASCII_NAME_CHARS}{{0,{GRAMMAR_NAME - 3}}} "\\""',
        'text-char ::= [^"\\\\\\x00-\\x1f]',
        f'label ::= "\\"" text-char{{1,{GRAMMAR_TEXT}}} "\\""',
        f'label-short ::= "\\"" text-char{{1,{GRAMMAR_SHORT_TEXT}}} "\\""',
        "cls ::= " + " | ".join(_quoted(ontology.curie(c)) for c in classes),
        "o-key ::= " + " | ".join(_quoted(c) for c in sorted(object_keys)),
        "o-list ::= " + " | ".join(_quoted(c) for c in sorted(object_lists)),
    ]
    for shape in shapes.values():
        lines.append(f"{shape.rule} ::= {shape.body}")
    # A member (a property with its value, or with a list of 2..GRAMMAR_VALUES values) costs its longest form;
    # members of equal cost share a rule, so a state lists one alternative per cost, not per property.
    by_cost: dict[int, list[str]] = {}
    for (name, many), curies in sorted(keys.items()):
        rule = "k-" + shapes[name].rule[2:] + ("-many" if many else "")
        lines.append(f"{rule} ::= " + " | ".join(_quoted(c) for c in sorted(curies)))
        head = max(len(c) for c in curies) + 2 + 2 + 2 * _WS  # the key, quoted, with "," and ":" and spaces
        for variant in (shapes[name], shapes.get(name + "-short")):
            if variant is None:
                continue
            value_rule, longest = variant.rule, variant.longest
            by_cost.setdefault(_cost(head + longest), []).append(f'{rule} ":" w {value_rule}')
            for n in range(2, GRAMMAR_VALUES + 1) if many else ():
                listed = f'{rule} ":" w "[" {value_rule}' + f' "," w {value_rule}' * (n - 1) + ' "]"'
                by_cost.setdefault(_cost(head + 2 + n * (longest + 1 + _WS)), []).append(listed)
    for cost, bodies in sorted(by_cost.items()):
        lines.append(f"m{cost} ::= " + " | ".join(bodies))
    for k in range(slots + 1):
        member_costs = sorted(c for c in by_cost if c <= k)
        for family in _FAMILIES:
            lines += _node_states(family, k, costs, known and family == "", member_costs)
            if len(family) < GRAMMAR_DEPTH:  # after an embedded node in one of this family's lists
                embed = f' | "," w "{{" w n{family}r{k}' if k >= costs.opening else ""
                lines.append(f'l{family}{k} ::= w "]" p{family}{k}{embed}')
        lines.append(f'g{k} ::= w "]" w "}}"' + (f' | "," w "{{" w n{k}' if k >= first else ""))
    return "\n".join(lines) + "\n"


def _node_states(family: str, k: int, costs: _Costs, known: bool, member_costs: list[int]) -> list[str]:
    """The rules of one budget ``k`` of one family of node states: ``n`` after the node's ``{``, ``t`` in its
    ``@type`` list, ``p`` after a member. A family is the path from the top-level node (``""``): ``q`` a node
    embedded as a value, ``r`` one in a list, ``qr`` one in a list inside a node embedded as a value... Closing a
    node returns to where it was embedded, with the slots left. Nodes embed others down to :data:`GRAMMAR_DEPTH`;
    only top-level nodes may be a known entity without type and label."""
    lines = []
    opening = []
    if known and k >= costs.id:
        opening.append(f'"\\"@id\\":" w known p{k - costs.id}')
    if k >= costs.opening:
        opening.append(f'"\\"@id\\":" w new-name "," w "\\"@type\\":" w "[" cls t{family}{k - costs.id - costs.type}')
    if opening:
        lines.append(f"n{family}{k} ::= " + " | ".join(opening))
    if k >= costs.label_short:
        label = '"]" "," w "\\"rdfs:label\\":" w '
        types = [f"{label}label-short p{family}{k - costs.label_short}"]
        if k >= costs.label_long:
            types.append(f"{label}label p{family}{k - costs.label_long}")
        if k - costs.type >= costs.label_short:
            types.append(f'"," w cls t{family}{k - costs.type}')
        lines.append(f"t{family}{k} ::= " + " | ".join(types))
    parent = family[:-1]
    close = f'"}}" g{k}' if not family else f'"}}" p{parent}{k}' if family[-1] == "q" else f'"}}" l{parent}{k}'
    members = [close] + [f'"," w m{cost} p{family}{k - cost}' for cost in member_costs]
    if len(family) < GRAMMAR_DEPTH:
        if k - costs.object_key >= costs.opening:
            members.append(f'"," w o-key ":" w "{{" w n{family}q{k - costs.object_key}')
        if k - costs.object_list >= costs.opening:
            members.append(f'"," w o-list ":" w "[" w "{{" w n{family}r{k - costs.object_list}')
    lines.append(f"p{family}{k} ::= " + " | ".join(members))
    return lines


def _cost(characters: int) -> int:
    return -(-characters // SLOT)


def _id_len() -> int:
    return len('"@id":') + GRAMMAR_NAME + 2 + len("{},") + 3 * _WS


def _quoted(text: str) -> str:
    return '"\\"' + text.replace("\\", "\\\\").replace('"', '\\"') + '\\""'


_PATTERNS = {
    NAME_PATTERN: f'"\\"m:" [A-Za-z] {_ASCII_NAME_CHARS}{{0,{GRAMMAR_NAME - 3}}} "\\""',
    _DATE: '"\\"" [0-9]{4} ( "-" [0-9]{2} ( "-" [0-9]{2} )? )? "\\""',
    _DATETIME: '"\\"" [0-9]{4} "-" [0-9]{2} "-" [0-9]{2} ( "T" [0-9]{2} ":" [0-9]{2} ( ":" [0-9]{2} )? )? "\\""',
    r"^[0-9]{4}$": '"\\"" [0-9]{4} "\\""',
    r"^[0-9]{4}-[0-9]{2}$": '"\\"" [0-9]{4} "-" [0-9]{2} "\\""',
    r"^[0-9]{2}:[0-9]{2}(:[0-9]{2})?$": '"\\"" [0-9]{2} ":" [0-9]{2} ( ":" [0-9]{2} )? "\\""',
    r"^-?P[0-9YMWDTHS.]+$": '"\\"" "-"? "P" [0-9YMWDTHS.]{1,20} "\\""',
    r"^https?://[^ ]+$": f'"\\"http" "s"? "://" [^ "\\\\\\x00-\\x1f]{{1,{GRAMMAR_TEXT - 10}}} "\\""',
}
_PATTERN_LONGEST = {
    NAME_PATTERN: GRAMMAR_NAME + 2, _DATE: 12, _DATETIME: 21, r"^[0-9]{4}$": 6, r"^[0-9]{4}-[0-9]{2}$": 9,
    r"^[0-9]{2}:[0-9]{2}(:[0-9]{2})?$": 10, r"^-?P[0-9YMWDTHS.]+$": 24, r"^https?://[^ ]+$": GRAMMAR_TEXT,
}
_NUMBER = '"-"? [0-9]{1,12} ( "." [0-9]{1,6} )?'
_NUMBER_LONGEST = 20


def _gbnf(schema: dict[str, Any], text: int = GRAMMAR_TEXT) -> tuple[str, int]:
    """GBNF body and longest text of one value's JSON Schema (the shapes :func:`_value_schema` makes), with free
    text up to ``text`` characters."""
    if "anyOf" in schema:
        parts = [_gbnf(s, text) for s in schema["anyOf"]]
        return "( " + " | ".join(body for body, _ in parts) + " )", max(n for _, n in parts)
    kind = schema.get("type")
    if "enum" in schema:
        return "( " + " | ".join(_quoted(v) for v in schema["enum"]) + " )", max(len(v) + 2 for v in schema["enum"])
    if kind == "string" and "pattern" in schema:
        return _PATTERNS[schema["pattern"]], _PATTERN_LONGEST[schema["pattern"]]
    if kind == "string":
        return f'"\\"" text-char{{0,{text}}} "\\""', text + 2
    if kind == "integer":
        return '"-"? [0-9]{1,12}' if "minimum" not in schema else "[0-9]{1,12}", 13
    if kind == "number":
        return _NUMBER, _NUMBER_LONGEST
    if kind == "boolean":
        return '( "true" | "false" )', 5
    raise ValueError(f"no grammar for the value shape {schema!r}")


# ---------------------------------------------------------------------------------------------------- reading


@cache
def _context(ontology: Ontology, namespace: str) -> dict[str, Any]:
    """The JSON-LD ``@context`` that makes an answer RDF: prefixes, and per predicate how its values read."""
    context: dict[str, Any] = {"m": namespace}
    context.update({name: iri for name, iri in PREFIXES.items()})
    for iri, term in ontology.terms.items():
        curie = ontology.curie(iri)
        if curie.startswith("<"):
            continue
        if term.kind == OBJECT_PROPERTY:
            context[curie] = {"@id": iri, "@type": "@id"}
        elif term.kind == DATATYPE_PROPERTY:
            coercions = {_LITERALS.get(d, (None, None))[1] for d in term.range}
            if len(coercions) == 1 and None not in coercions:
                context[curie] = {"@id": iri, "@type": coercions.pop()}
    return context


def answer_triples(text: str, *, namespace: str, ontology: Ontology) -> list[ox.Triple]:
    """The triples of a JSON answer, read as JSON-LD; :class:`AnswerProblem` when it is not one.

    Lenient about wrapping only: a Markdown fence or prose around the JSON object is cut away, and a bare list of
    nodes is taken as the ``@graph``. Anything the model put in its own ``@context`` is replaced by ours.
    """
    document = _json_object(text)
    graph = document.get("@graph") if isinstance(document, dict) else document
    if isinstance(document, dict) and graph is None and "@id" in document:
        graph = [document]
    if not isinstance(graph, list):
        raise AnswerProblem("the answer must be a JSON object {\"@graph\": [nodes]}")
    nodes = [node for node in graph if isinstance(node, dict)]
    if len(nodes) != len(graph):
        raise AnswerProblem("every item of @graph must be a JSON object with an @id")
    for node in nodes:
        node.pop("@context", None)
    payload = json.dumps({"@context": _context(ontology, namespace), "@graph": nodes})
    try:
        quads = list(ox.parse(payload.encode("utf-8"), format=ox.RdfFormat.JSON_LD, base_iri=namespace))
    except (SyntaxError, ValueError) as error:
        raise AnswerProblem(f"the answer is not valid JSON-LD: {' '.join(str(error).split())[:300]}") from error
    return [_dated(_decimal(ox.Triple(q.subject, q.predicate, q.object), ontology), ontology) for q in quads]


_FENCE = re.compile(r"```[^\n`]*\n(.*?)(?:```|\Z)", re.DOTALL)


def _json_object(text: str) -> Any:
    fenced = _FENCE.findall(text)
    body = fenced[0] if fenced else text
    start = min((i for i in (body.find("{"), body.find("[")) if i >= 0), default=-1)
    if start < 0:
        raise AnswerProblem("the answer holds no JSON object; write {\"@graph\": [...]} (an empty list when the "
                            "utterance states no fact)")
    try:
        value, _ = json.JSONDecoder().raw_decode(body[start:])
    except ValueError as error:
        raise AnswerProblem(f"the answer is not valid JSON: {error}") from error
    return value


#: The lexical forms of the date datatypes, most specific first: a plain string of one of these forms on a date
#: property gets that datatype (here for JSON answers, in :mod:`pcm.extraction.normalise` for Turtle ones).
DATE_FORMS = (
    (re.compile(r"\d{4}-\d{2}-\d{2}"), XSD + "date"),
    (re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})?"), XSD + "dateTime"),
    (re.compile(r"\d{4}-\d{2}"), XSD + "gYearMonth"),
    (re.compile(r"\d{4}"), XSD + "gYear"),
)
_DATES = frozenset({XSD + "date", XSD + "dateTime", XSD + "gYear", XSD + "gYearMonth"})


def _dated(triple: ox.Triple, ontology: Ontology) -> ox.Triple:
    """A plain string on a property whose values are never plain text gets the datatype its form says.

    JSON has no dates or times: "2018" on a date property is a gYear, "06:00:00" on a time property an xsd:time.
    The context's coercion covers a property with one such datatype; this covers the ones with several.
    """
    o = triple.object
    if not (isinstance(o, ox.Literal) and o.datatype.value == XSD + "string" and not o.language):
        return triple
    term = ontology.terms.get(triple.predicate.value)
    if term is None or not term.range or {XSD + "string", RDFS + "Literal"} & set(term.range):
        return triple
    datatype = None
    if _DATES & set(term.range):
        datatype = next((dt for pattern, dt in DATE_FORMS if pattern.fullmatch(o.value)), None)
    for candidate in term.range:
        shape = _LITERALS.get(candidate, ({}, None))[0]
        if datatype is None and candidate not in _DATES and "pattern" in shape and re.search(shape["pattern"], o.value):
            datatype = candidate
    if datatype is None:
        return triple
    return ox.Triple(triple.subject, triple.predicate, ox.Literal(o.value, datatype=ox.NamedNode(datatype)))


def _decimal(triple: ox.Triple, ontology: Ontology) -> ox.Triple:
    """A JSON number on a decimal property reads as ``xsd:double`` in JSON-LD; store it as the decimal it is."""
    o = triple.object
    if not (isinstance(o, ox.Literal) and o.datatype.value == XSD + "double"):
        return triple
    term = ontology.terms.get(triple.predicate.value)
    if term is None or not _NUMERIC & set(term.range) or XSD + "double" in term.range:
        return triple
    number = Decimal(o.value)
    text = format(number.normalize(), "f") if number == number.to_integral_value() else format(number, "f")
    datatype = XSD + ("integer" if XSD + "integer" in term.range and "." not in text else "decimal")
    return ox.Triple(triple.subject, triple.predicate, ox.Literal(text, datatype=ox.NamedNode(datatype)))


def dangling_references(triples: Iterable[ox.Triple], namespace: str) -> set[str]:
    """The memory's names an answer refers to (as objects) without saying anything about them: no type, no label,
    no property of their own. Either known entities (already in the memory) or new things left undescribed."""
    described = {t.subject.value for t in triples if isinstance(t.subject, ox.NamedNode)}
    return {
        t.object.value for t in triples
        if isinstance(t.object, ox.NamedNode) and t.object.value.startswith(namespace)
        and t.object.value not in described and t.predicate.value != RDF + "type"
    }


def complete_references(
    triples: list[ox.Triple], names: Iterable[str], *, namespace: str, ontology: Ontology
) -> list[ox.Triple]:
    """``triples`` with a node for each of ``names`` (new things referred to but not described): typed with what the
    ranges of the properties pointing to it entail, labelled with its name's words (``m:rosewood-auto-repair`` →
    "rosewood auto repair"; a handle a small model wrote in camel case, ``harborAnalytics``, → "harbor Analytics",
    so the label is the words said and the grounding check and entity resolution can find them).

    Deterministic, and nothing but what the vocabulary says: a value of ``schema:object`` (range ``schema:Thing``)
    is a ``schema:Thing``; a value of ``schema:agent`` (a person or an organisation) is, whichever it is, a
    ``foaf:Agent`` and a ``schema:Thing`` (the most specific classes above every class of the range; ``owl:Thing``
    read as ``schema:Thing``). A name pointed to by a property without a range stays as it is, for SHACL's report.
    """
    wanted = set(names)
    entailed: dict[str, set[str]] = {}
    undecided: set[str] = set()
    for t in triples:
        if isinstance(t.object, ox.NamedNode) and t.object.value in wanted:
            implied = _entailed_types(ontology, t.predicate.value)
            if implied:
                entailed.setdefault(t.object.value, set()).update(implied)
            else:
                undecided.add(t.object.value)
    added = []
    for name, classes in sorted(entailed.items()):
        if name in undecided:
            continue
        local = name[len(namespace):]
        label = " ".join(w for w in re.split(r"[-_.]+|(?<=[a-z0-9])(?=[A-Z])", local) if w) or local
        specific = sorted(c for c in classes if not any(c != o and c in ontology.superclasses(o) for o in classes))
        added += [ox.Triple(ox.NamedNode(name), ox.NamedNode(RDF + "type"), ox.NamedNode(c)) for c in specific]
        added.append(ox.Triple(ox.NamedNode(name), ox.NamedNode(_LABEL), ox.Literal(label)))
    return triples + added


@cache
def _entailed_types(ontology: Ontology, predicate: str) -> frozenset[str]:
    """The most specific catalogue classes every value of ``predicate`` belongs to, whichever class of its range
    it is (empty when the property has no range, or its range classes share none)."""
    term = ontology.terms.get(predicate)
    if term is None or not term.range:
        return frozenset()
    ranges = [SCHEMA + "Thing" if r == OWL + "Thing" else r for r in term.range]
    if not all(ontology.is_class(r) for r in ranges):
        return frozenset()
    common = frozenset.intersection(*(ontology.superclasses(r) for r in ranges))
    common = frozenset(c for c in common if ontology.terms.get(c) is not None and ontology.terms[c].kind == CLASS)
    return frozenset(c for c in common if not any(c != o and c in ontology.superclasses(o) for o in common))


def as_answer(triples: Iterable[ox.Triple], *, namespace: str, ontology: Ontology) -> dict[str, Any]:
    """Triples in the answer shape (``{"@graph": [...]}``), as a constrained model would write them.

    The inverse of :func:`answer_triples` for triples pcm stores: used to check that the schema can say every
    fact a Turtle answer can (tests, ``benchmarks/bench_prompt_size.py``).
    """

    def name(iri: str) -> str:
        return "m:" + iri[len(namespace):] if iri.startswith(namespace) else ontology.curie(iri)

    nodes: dict[str, dict[str, Any]] = {}
    for t in triples:
        subject = term_value(t.subject)
        node = nodes.setdefault(subject, {"@id": name(subject)})
        p, o = t.predicate.value, t.object
        if p == RDF + "type":
            node.setdefault("@type", []).append(name(term_value(o)))
            continue
        key = "rdfs:label" if p == _LABEL else ontology.curie(p)
        value: Any
        if isinstance(o, ox.NamedNode):
            value = name(o.value)
        elif not isinstance(o, ox.Literal):
            raise TypeError(f"a stored value is a name or a literal, not {o}")
        elif o.datatype.value in (XSD + "integer", XSD + "nonNegativeInteger"):
            value = int(o.value)
        elif o.datatype.value in (XSD + "decimal", XSD + "double", XSD + "float"):
            value = float(o.value)
        elif o.datatype.value == XSD + "boolean":
            value = o.value == "true"
        else:
            value = o.value
        if key in node:
            before = node[key]
            node[key] = [*before, value] if isinstance(before, list) else [before, value]
        else:
            node[key] = value
    return {"@graph": list(nodes.values())}


__all__ = [
    "AnswerProblem",
    "answer_triples",
    "as_answer",
    "complete_references",
    "dangling_references",
    "extraction_grammar",
    "extraction_schema",
    "grammar_budget",
]

"""The compact extraction answer: one fact per line, for a small model on this machine that writes ~6 tokens a second.

Why: the JSON-LD answer (:mod:`pcm.extraction.jsonld`) spends most of its tokens on its frame: quoted keys, ``@id``,
``@type``, brackets, and an ``m:`` name repeated wherever a node is referred to. A local 1.5B model wrote 405-455
tokens of it per fact-bearing utterance, 40-70 s of output alone. The same facts as lines cost about a third::

    buy schema:BuyAction "buying the Breville Barista Express"
    machine schema:Product "Breville Barista Express"
    buy schema:agent me
    buy schema:object machine
    buy schema:price 549
    buy schema:startDate 2025-02-04
    buy schema:actionStatus schema:CompletedActionStatus

* A **declaration** ``handle Class [Class [Class]] "label"`` makes a new node. The handle is the answer's own short
  name for it (``buy``, ``machine``): the node's IRI is minted from its label (``m:breville-barista-express``), so
  two utterances that both say ``buy`` never merge two purchases, and a handle never needs to be descriptive (one
  token instead of five, on every line that names the node).
* A **fact** ``subject property value``: the subject is a handle, ``me`` (the speaker), ``you`` (whom the speaker
  addresses), ``owner``, ``assistant`` or a known entity's name as the prompt lists it without ``m:`` (a name used
  as a value without a declaration is completed as the JSON form completes a bare reference); the property
  is a catalogue term as a prefixed name; the value is a name (of a node, or one of the ontology's named values such
  as ``schema:CompletedActionStatus``), quoted text, a bare number, ``true``/``false``, or a bare ISO date, time or
  duration (``2025-02-04``, ``2025-02``, ``2025``, ``06:30``, ``PT2H``).
* ``nothing to extract`` when the utterance states no fact.

The lines are read into the JSON-LD answer the JSON form would be (:func:`read_compact`), and that document goes
through :func:`pcm.extraction.normalise.normalise_json`: the triples, and so validation, repair, salvage and
provenance, are exactly the JSON form's. A line that cannot be read is an
:class:`~pcm.extraction.normalise.OutputProblem` quoting the line, as a Turtle syntax error is.

:func:`compact_grammar` is the llama.cpp GBNF of the lines, generated from the same catalogue sources as the JSON
Schema (:func:`pcm.extraction.jsonld.extraction_schema`): class and property names are alternatives (only real
terms can be written), each property takes the value shapes of its range, a new handle cannot be a known name
(declaring ``me`` or a known entity again relabelled it, as the JSON grammar found), and a total budget bounds the
answer (every line costs its longest form, so every answer fits the call's ``max_tokens``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Any

import pyoxigraph as ox

from pcm.backend import term_value
from pcm.extraction.jsonld import (
    NAME_PATTERN,
    _value_schema,
    _vocabulary,
    complete_references,
    trie_complement,
)
from pcm.extraction.normalise import Normalised, OutputProblem, check_size, normalise_json
from pcm.llm.base import JsonSchema
from pcm.namespaces import PREFIXES, RDF, RDFS, XSD
from pcm.naming import Naming, digest, slugify
from pcm.ontology import CLASS, DATATYPE_PROPERTY, OBJECT_PROPERTY, Ontology

SCHEMA_NAME = "extraction_compact"
#: The whole answer when the utterance states no fact.
NOTHING = "nothing to extract"
#: Longest handle of a new node (the answer's own name for it; its IRI comes from the label).
MAX_HANDLE = 24
#: Most types one declaration may give.
MAX_TYPES = 3
#: Longest text value, and the short text a value may also be paid for as (most labels and values are short).
TEXT = 120
SHORT_TEXT = 32
#: Characters one budget slot stands for (see :func:`compact_grammar`).
SLOT = 8
#: The grammar's budget for one answer, whatever the call's token budget (see :func:`grammar_budget`; every line is
#: paid at its longest form, so an answer's own length is about half of it). The richest hand-written answer of the
#: fixtures (14 lines, 766 characters) needs 1,800; the answers of Qwen2.5-Coder-1.5B that looped (one line again and
#: again with a new date) ran to the former 3,000, ~1,000 tokens a round and 406 s for one utterance.
ANSWER_CHARS = 2000
#: Lines quoted in one problem report.
REPORTED_LINES = 6
#: Speaker words: ``me`` is whoever speaks, ``you`` whom they address.
ME, YOU = "me", "you"

_HANDLE = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
#: Values by which a model says it has no value: the line states nothing and is left out.
_NO_VALUE = frozenset({"null", "none", "nil", "unknown", "n/a", "na", "-", '""'})
_KNOWN_NAME = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_-])?")
_CURIE = re.compile(r"([a-z][a-z0-9]*):([A-Za-z_][A-Za-z0-9_.-]*)")
_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?")
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')
_LINE_TOKEN = re.compile(_QUOTED.pattern + r"|\S+")
_LABEL = RDFS + "label"
_RDF_TYPE = RDF + "type"
#: Handles' characters after the first (a letter), as GBNF classes.
_FIRST, _REST = "[A-Za-z]", "[A-Za-z0-9_-]"
_FIRST_CHARS = "".join(chr(c) for c in range(128) if re.fullmatch(_FIRST, chr(c)))
_REST_CHARS = "".join(chr(c) for c in range(128) if re.fullmatch(_REST, chr(c)))

#: The JSON Schema patterns of :mod:`pcm.extraction.jsonld` as bare (unquoted) GBNF, with their longest text.
_BARE_PATTERNS: dict[str, tuple[str, int]] = {
    r"^[0-9]{4}(-[0-9]{2}(-[0-9]{2})?)?$": ('[0-9]{4} ( "-" [0-9]{2} ( "-" [0-9]{2} )? )?', 10),
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{2}:[0-9]{2}(:[0-9]{2})?)?$": (
        '[0-9]{4} "-" [0-9]{2} "-" [0-9]{2} ( "T" [0-9]{2} ":" [0-9]{2} ( ":" [0-9]{2} )? )?', 19),
    r"^[0-9]{4}$": ("[0-9]{4}", 4),
    r"^[0-9]{4}-[0-9]{2}$": ('[0-9]{4} "-" [0-9]{2}', 7),
    r"^[0-9]{2}:[0-9]{2}(:[0-9]{2})?$": ('[0-9]{2} ":" [0-9]{2} ( ":" [0-9]{2} )?', 8),
    r"^-?P[0-9YMWDTHS.]+$": ('"-"? "P" [0-9YMWDTHS.]{1,20}', 22),
    r"^https?://[^ ]+$": (f'"http" "s"? "://" [^ "\\\\\\x00-\\x1f]{{1,{TEXT - 10}}}', TEXT),
}
_INTEGER, _NONNEGATIVE = '"-"? [0-9]{1,12}', "[0-9]{1,12}"
_DECIMAL = '"-"? [0-9]{1,12} ( "." [0-9]{1,6} )?'


# ---------------------------------------------------------------------------------------------------- names


def call_names(
    naming: Naming, speaker: str, offered: Iterable[str] = (), addressee: str | None = None
) -> dict[str, str]:
    """The names one call's answer may use without declaring them, and the IRIs they stand for.

    ``me`` is the speaker and ``you`` whom the speaker addresses (the owner talks to the assistant and the assistant
    to the owner; anyone else is taken to talk to the owner); ``owner`` and ``assistant`` always name those two; an
    offered entity of the memory is named as the prompt lists it, without ``m:`` (``biscuit`` for ``m:biscuit``).
    """
    if addressee is None:
        addressee = addressed(naming, speaker)
    names: dict[str, str] = {}
    for iri in (naming.owner, naming.assistant, speaker, *offered):
        local = bare_name(iri, naming.namespace)
        if local is not None:
            names.setdefault(local, iri)
    names.update({ME: speaker, YOU: addressee})
    return names


def addressed(naming: Naming, speaker: str) -> str:
    """Whom ``speaker`` talks to, ``you`` in its turn: the owner talks to the assistant, anyone else to the owner."""
    return naming.assistant if speaker == naming.owner else naming.owner


def bare_name(iri: str, namespace: str) -> str | None:
    """How the compact form names an existing individual: its local name (``biscuit``), or None when it has none
    that can be written bare."""
    if not iri.startswith(namespace):
        return None
    local = iri[len(namespace):]
    return local if _KNOWN_NAME.fullmatch(local) else None


# ---------------------------------------------------------------------------------------------------- reading


@dataclass
class CompactAnswer:
    """The lines read: the JSON-LD answer they stand for, and the IRI minted for each new node's handle."""

    document: dict[str, Any]
    minted: dict[str, str] = field(default_factory=dict)
    """Handle -> IRI of each declared node."""
    undeclared: set[str] = field(default_factory=set)
    """IRIs of the names used as values without a declaration, a known name or a stored node: new things the JSON
    form would also leave undescribed, completed as it completes them (:func:`normalise_answer`)."""
    skipped: tuple[str, ...] = ()
    """The lines left out as unreadable, each with why (only when read with ``skip_unreadable``)."""

    @property
    def handles(self) -> dict[str, str]:
        """IRI -> handle (what a report about a minted node should call it)."""
        return {iri: handle for handle, iri in self.minted.items()}


@dataclass
class _Line:
    number: int
    text: str
    tokens: list[str]


class _Problems:
    """Line problems, gathered so one repair round can fix them all."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, line: _Line, message: str) -> None:
        self.items.append(f"line {line.number} reads `{line.text[:160]}`: {message}")

    def raise_any(self) -> None:
        if not self.items:
            return
        shown = "; ".join(self.items[:REPORTED_LINES])
        more = f"; and {len(self.items) - REPORTED_LINES} more" if len(self.items) > REPORTED_LINES else ""
        raise OutputProblem(f"{len(self.items)} line(s) could not be read: {shown}{more}", kind="syntax")


def normalise_compact(
    text: str,
    *,
    namespace: str,
    ontology: Ontology,
    names: Mapping[str, str] | None = None,
    existing: Callable[[set[str]], set[str]] | None = None,
) -> Normalised:
    """A compact answer's triples, normalised exactly as the JSON form's (see :func:`read_compact`)."""
    answer = read_compact(text, namespace=namespace, ontology=ontology, names=names, existing=existing)
    return normalise_answer(answer, namespace=namespace, ontology=ontology)


def normalise_answer(answer: CompactAnswer, *, namespace: str, ontology: Ontology) -> Normalised:
    """The triples of lines already read, through the JSON form's path (nothing to extract: no triples).

    A name written as a value but never declared (``buy schema:seller stumptown``) is a new thing, typed with what
    the property's range says and labelled with the name's words, as the extractor completes a JSON answer's bare
    reference (:func:`pcm.extraction.jsonld.complete_references`): a small model names side things without
    declaring them, and a repair round for it cost a minute and rarely fixed it.
    """
    if not answer.document["@graph"]:
        return Normalised([])
    result = normalise_json(json.dumps(answer.document, ensure_ascii=False), namespace=namespace, ontology=ontology)
    typed = {term_value(t.subject) for t in result.triples if t.predicate.value == _RDF_TYPE}
    bare = answer.undeclared - typed
    if bare:
        result.triples = complete_references(result.triples, bare, namespace=namespace, ontology=ontology)
    return result


def read_compact(
    text: str,
    *,
    namespace: str,
    ontology: Ontology,
    names: Mapping[str, str] | None = None,
    existing: Callable[[set[str]], set[str]] | None = None,
    skip_unreadable: bool = False,
) -> CompactAnswer:
    """The JSON-LD answer (``{"@graph": [...]}``, as :func:`pcm.extraction.jsonld.answer_triples` reads it) that the
    lines state; :class:`OutputProblem` quoting each line that cannot be read.

    ``names`` are the names the answer may use undeclared (:func:`call_names`; without it, those of a user turn
    with no entity offered). ``existing(iris)`` says which of the memory's IRIs exist: a minted IRI that does
    (another node of the same label) gets a suffix, so two occurrences never share one; the write's entity
    resolution (:mod:`pcm.extraction.resolve`) merges things, not occurrences, by label afterwards. An undeclared
    name that is not in ``names`` but exists is taken as that node, as the JSON form takes a bare reference; any
    other undeclared name written as a value is a new node (``m:name``, :attr:`CompactAnswer.undeclared`) that
    :func:`normalise_answer` completes, and may then be a subject too. A subject that is none of these is a problem:
    nothing says what it is.

    Lenient where the grammar need not be (for a client without it): blank lines, Markdown fences and ``#`` comments
    are skipped, so is a fact whose value is ``null``, ``none`` or ``unknown`` (it states nothing; small models
    write such lines to fill a node's properties), ``m:name`` reads as ``name``, text may hold ``\\"`` and ``\\\\``, and a quoted value is read where
    the property takes a date or a number.

    ``skip_unreadable``: the lines that cannot be read (and the facts of a subject nothing declares) are left out and
    listed in :attr:`CompactAnswer.skipped` instead of raising, for an answer whose repair rounds are spent: its
    readable lines are facts as good as any other answer's, and they still go through grounding and validation.
    """
    check_size(text, f"write the fact lines, or '{NOTHING}'")
    naming = Naming(namespace)
    names = dict(names) if names is not None else call_names(naming, naming.owner)
    problems = _Problems()
    lines = _lines(text, problems)
    declarations, facts, ambiguous = _split(lines, ontology, names, problems)
    minted = _mint(declarations, names, namespace, existing)
    reader = _Reader(ontology, namespace, names, minted, existing)
    nodes: dict[str, dict[str, Any]] = {}
    for handle, (_, classes, label) in declarations.items():
        nodes[minted[handle]] = {"@id": _node_id(minted[handle], namespace), "@type": classes, "rdfs:label": label}
    unnamed: list[tuple[_Line, str]] = []
    for line in facts:
        subject_token, predicate_token, value_token = line.tokens
        twice = next((t for t in (subject_token, value_token) if _handle(t) in ambiguous), None)
        if twice is not None:  # which of its nodes the line means is not known, so it states nothing for sure
            problems.add(line, f"`{twice}` names two nodes (declared twice with different labels): give each its "
                               "own handle")
            continue
        subject = reader.node(subject_token)
        predicate = _term(predicate_token)
        if predicate is None:
            problems.add(line, _not_a_term(predicate_token))
            continue
        if subject is None:
            name = subject_token[2:] if subject_token.startswith("m:") else subject_token
            if not _HANDLE.fullmatch(name) or name in (ME, YOU):
                problems.add(line, reader.undeclared(subject_token))
                continue
            subject = namespace + name
            unnamed.append((line, subject))
        if predicate in (_LABEL, _RDF_TYPE):
            problems.add(line, "types and labels go in a declaration line (handle Class \"label\"), only for a new "
                               "node; a known entity keeps its own")
            continue
        if value_token.lower() in _NO_VALUE:
            continue
        value, why = reader.value(predicate, value_token)
        if why:
            problems.add(line, why)
            continue
        node = nodes.setdefault(subject, {"@id": _node_id(subject, namespace)})
        key = ontology.curie(predicate)
        node[key] = [*node[key], value] if isinstance(node.get(key), list) else (
            [node[key], value] if key in node else value)
    unknown: set[str] = set()
    for line, subject in unnamed:  # described, but neither declared nor a value anywhere: nothing says what it is
        if subject not in reader.referenced:
            problems.add(line, reader.undeclared(line.tokens[0]))
            unknown.add(subject)
    if not skip_unreadable:
        problems.raise_any()
    graph = [node for subject, node in nodes.items() if subject not in unknown]
    return CompactAnswer({"@graph": graph}, minted, reader.referenced, tuple(problems.items))


def _lines(text: str, problems: _Problems) -> list[_Line]:
    lines = []
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not stripped or stripped.startswith(("#", "```")) or stripped.lower().rstrip(".") == NOTHING:
            continue
        tokens = _LINE_TOKEN.findall(stripped)
        line = _Line(number, stripped, tokens)
        if any(t.startswith('"') and not _QUOTED.fullmatch(t) for t in tokens):
            problems.add(line, "a quoted text is not closed on its line")
            continue
        lines.append(line)
    return lines


def _split(
    lines: list[_Line], ontology: Ontology, names: Mapping[str, str], problems: _Problems
) -> tuple[dict[str, tuple[_Line, list[str], str]], list[_Line], set[str]]:
    """Declarations (handle -> its line, classes as written, label), fact lines in the answer's order, and the
    handles declared twice with different labels (``city "Portland"``, ``city "Lisbon"``): the first declaration
    stands, and no fact line that names such a handle is read, since it may mean either node."""
    declarations: dict[str, tuple[_Line, list[str], str]] = {}
    ambiguous: set[str] = set()
    facts = []
    for line in lines:
        tokens = line.tokens
        second = _term(tokens[1]) if len(tokens) > 1 else None
        if second is not None and _is_class(second, ontology):
            handle = _handle(tokens[0])
            classes, rest = [], tokens[1:]
            while rest and not rest[0].startswith('"'):
                term = _term(rest[0])
                if term is None or not _is_class(term, ontology):
                    break
                classes.append(ontology.curie(term) if ontology.defines(term) else rest[0])
                rest = rest[1:]
            if handle is None:
                problems.add(line, f"`{tokens[0]}` cannot name a new node: a handle is a letter, then letters, "
                                   "digits, - or _ (and never me or you)")
            elif handle in names:
                problems.add(line, f"`{handle}` is a known entity: write its facts without declaring it (it keeps "
                                   "its own type and label), or give a new node another handle")
            elif len(rest) != 1 or not rest[0].startswith('"'):
                problems.add(line, 'a new node is declared as: handle Class "label" (up to 3 classes, then its '
                                   "label in quotes)")
            elif len(classes) > MAX_TYPES:
                problems.add(line, f"at most {MAX_TYPES} classes per node")
            elif not _unquote(rest[0]).strip():
                problems.add(line, "the label is empty")
            elif handle in declarations and declarations[handle][2] != _unquote(rest[0]):
                problems.add(line, f"`{handle}` is declared twice with different labels: one handle per node")
                ambiguous.add(handle)
            else:
                before = declarations.get(handle, (line, [], ""))[1]
                declarations[handle] = (line, [*before, *(c for c in classes if c not in before)], _unquote(rest[0]))
            continue
        if len(tokens) != 3:
            problems.add(line, 'a line is either a declaration (handle Class "label") or one fact (subject '
                               'property value); text values are quoted')
            continue
        facts.append(line)
    return declarations, facts, ambiguous


def _mint(
    declarations: Mapping[str, tuple[_Line, list[str], str]],
    names: Mapping[str, str],
    namespace: str,
    existing: Callable[[set[str]], set[str]] | None,
) -> dict[str, str]:
    """An IRI per declared handle, from its label (``"Breville Barista Express"`` -> ``m:breville-barista-express``).

    A label without a letter or digit in ASCII (another script) gives the handle's slug and a digest of the label.
    An IRI already used (by another handle of the answer, a name the answer may use, pcm's owner or assistant, or a
    node of the memory when ``existing`` says so) gets ``-2``, ``-3``...
    """
    naming = Naming(namespace)
    reserved = {*names.values(), naming.owner, naming.assistant}
    bases = {}
    for handle, (_, _, label) in declarations.items():
        slug = slugify(label)
        if slug == "x" and not re.search(r"[A-Za-z0-9]", label):
            slug = f"{slugify(handle)}-{digest(label, length=6)}"
        bases[handle] = namespace + slug
    minted: dict[str, str] = {}
    suffix = dict.fromkeys(bases, 1)
    pending = dict(bases)
    while pending:
        taken = existing(set(pending.values())) if existing is not None else set()
        used = reserved | set(minted.values())
        clashes = {}
        for handle, iri in pending.items():
            if iri in used or iri in taken:
                suffix[handle] += 1
                clashes[handle] = f"{bases[handle]}-{suffix[handle]}"
            else:
                minted[handle] = iri
                used.add(iri)
        pending = clashes
    return minted


class _Reader:
    """Reads one answer's names and values."""

    def __init__(
        self, ontology: Ontology, namespace: str, names: Mapping[str, str], minted: Mapping[str, str],
        existing: Callable[[set[str]], set[str]] | None,
    ) -> None:
        self.ontology = ontology
        self.namespace = namespace
        self.names = names
        self.minted = minted
        self.existing = existing
        self._found: dict[str, bool] = {}
        self._values = _vocabulary(ontology, None)[2]
        #: IRIs of undeclared names written as values (new nodes the reading completes).
        self.referenced: set[str] = set()

    def node(self, token: str) -> str | None:
        """The IRI a name stands for: a handle of the answer, a name the call offers, or an existing node."""
        name = token[2:] if token.startswith("m:") else token
        if name in self.minted:
            return self.minted[name]
        if name in self.names:
            return self.names[name]
        lowered = {k.lower(): v for k, v in self.names.items()}
        if name.lower() in lowered:
            return lowered[name.lower()]
        if not _KNOWN_NAME.fullmatch(name) or self.existing is None:
            return None
        iri = self.namespace + name
        if iri not in self._found:
            self._found[iri] = iri in self.existing({iri})
        return iri if self._found[iri] else None

    def undeclared(self, token: str) -> str:
        return (f"`{token}` is neither declared in this answer nor a known entity: declare it first "
                f'({token} Class "label") or use a known entity\'s name')

    def value(self, predicate: str, token: str) -> tuple[Any, str]:
        """``(JSON value, "")``, or ``(None, why not)``: the value as the JSON form would hold it."""
        term = self.ontology.terms.get(predicate)
        shape = _value_schema(self.ontology, predicate, self._values)[1] if term is not None and term.kind in (
            OBJECT_PROPERTY, DATATYPE_PROPERTY) else None
        kinds = _kinds(shape) if shape is not None else None
        shown = self.ontology.curie(predicate)
        if token.startswith('"'):
            text = _unquote(token)
            if kinds is None or "text" in kinds or any(p.fullmatch(text) for p in kinds.get("patterns", ())):
                return text, ""
            if "number" in kinds and _NUMBER.fullmatch(text):
                return _number(text), ""
            return None, f"{shown} takes {_expected(kinds)}, not quoted text"
        if token in ("true", "false") and (kinds is None or "boolean" in kinds):
            return token == "true", ""
        if kinds is not None:
            if token in kinds.get("enum", ()):
                return {"@id": token}, ""
            if any(p.fullmatch(token) for p in kinds.get("patterns", ())):
                return token, ""
            if _NUMBER.fullmatch(token) and ("number" in kinds or "integer" in kinds and "." not in token):
                return _number(token), ""
            if _NUMBER.fullmatch(token) and "text" in kinds:
                return token, ""
            if "name" not in kinds:
                return None, f"{shown} takes {_expected(kinds)}" + (
                    "; text goes in quotes" if "text" in kinds else "")
        elif _NUMBER.fullmatch(token):
            return _number(token), ""
        elif _term(token) is not None:
            return {"@id": token}, ""
        elif re.fullmatch(r"[0-9]{4}-[0-9]{2}\S*|-?P[0-9]\S*", token):
            return token, ""
        node = self.node(token)
        if node is None:
            if _CURIE.fullmatch(token) and not token.startswith("m:"):
                return None, f"{token} is not one of the values {shown} takes ({_expected(kinds or {})})"
            name = token[2:] if token.startswith("m:") else token
            if not _HANDLE.fullmatch(name) or name in (ME, YOU):
                return None, self.undeclared(token)
            node = self.namespace + name
            self.referenced.add(node)
        return {"@id": _node_id(node, self.namespace)}, ""


def _kinds(shape: dict[str, Any]) -> dict[str, Any]:
    """What a JSON Schema value shape (:func:`pcm.extraction.jsonld._value_schema`) admits, as the reader asks it."""
    kinds: dict[str, Any] = {}
    for part in shape.get("anyOf", [shape]):
        if "anyOf" in part:
            for key, value in _kinds(part).items():
                kinds[key] = [*kinds.get(key, []), *value] if isinstance(value, list) else value
            continue
        kind = part.get("type")
        if "enum" in part:
            kinds["enum"] = [*kinds.get("enum", []), *part["enum"]]
        elif kind == "string" and part.get("pattern") == NAME_PATTERN:
            kinds["name"] = True
        elif kind == "string" and "pattern" in part:
            kinds.setdefault("patterns", []).append(re.compile(part["pattern"].strip("^$")))
        elif kind == "string":
            kinds["text"] = True
        elif kind in ("integer", "number", "boolean"):
            kinds[kind] = True
    return kinds


def _expected(kinds: Mapping[str, Any]) -> str:
    said = []
    if "name" in kinds or "enum" in kinds:
        said.append("the name of a node" + (f" or one of {', '.join(kinds['enum'])}" if "enum" in kinds else ""))
    if "text" in kinds:
        said.append("quoted text")
    if "patterns" in kinds:
        said.append("a date, time or duration written bare (2025-02-04, 2025-02, 2025, 06:30, PT2H)")
    if "number" in kinds or "integer" in kinds:
        said.append("a number")
    if "boolean" in kinds:
        said.append("true or false")
    return " or ".join(said) or "a value"


def _number(text: str) -> int | float:
    return float(text) if "." in text else int(text)


def _node_id(iri: str, namespace: str) -> str:
    return "m:" + iri[len(namespace):] if iri.startswith(namespace) else iri


def _term(token: str) -> str | None:
    """The IRI of a prefixed vocabulary name (``schema:price``), or None."""
    match = _CURIE.fullmatch(token)
    if match is None or match.group(1) not in PREFIXES:
        return None
    return PREFIXES[match.group(1)] + match.group(2)


def _is_class(iri: str, ontology: Ontology) -> bool:
    """A class of the ontology, or an undefined term named like one (capitalised): a declaration either way, whose
    unknown class validation reports with its "did you mean" hints."""
    if ontology.defines(iri):
        return ontology.terms[iri].kind == CLASS
    local = re.split(r"[#/:]", iri)[-1]
    return bool(local) and local[0].isupper()


def _handle(token: str) -> str | None:
    name = token[2:] if token.startswith("m:") else token
    return name if _HANDLE.fullmatch(name) and name not in (ME, YOU) else None


def _not_a_term(token: str) -> str:
    known = ", ".join(f"{p}:" for p in PREFIXES if p not in ("rdf", "rdfs", "owl", "xsd"))
    return f"`{token}` is not a vocabulary term: write a property of the catalogue as a prefixed name ({known})"


def _unquote(token: str) -> str:
    return re.sub(r'\\(["\\])', r"\1", token[1:-1])


# ---------------------------------------------------------------------------------------------------- writing


def as_compact(
    triples: Iterable[ox.Triple], *, namespace: str, ontology: Ontology, names: Mapping[str, str] | None = None
) -> tuple[str, dict[str, str]]:
    """Triples as a model would write them in the compact form: ``(text, IRI -> handle of each declared node)``.

    The inverse of :func:`read_compact` up to the IRIs it mints: used to measure the form on the hand-written
    extractions (``benchmarks/bench_output_form.py``) and to check that it says every fact the JSON form can. A
    node with a type and a label becomes a declaration with a short handle (its IRI's first word: ``buy`` for
    ``m:buy-breville-barista-express``); any other node of the memory is written by its name in ``names``
    (default: :func:`call_names` of a user turn, so ``m:owner`` is ``me``), else by its local name.
    """
    naming = Naming(namespace)
    names = dict(names) if names is not None else call_names(naming, naming.owner)
    by_iri: dict[str, str] = {}
    for given, iri in names.items():
        if given in (ME, YOU) or iri not in by_iri:
            by_iri[iri] = given
    listed = list(triples)
    types: dict[str, list[str]] = {}
    labels: dict[str, str] = {}
    for t in listed:
        s = term_value(t.subject)
        if t.predicate.value == _RDF_TYPE and isinstance(t.object, ox.NamedNode):
            types.setdefault(s, []).append(ontology.curie(t.object.value))
        elif t.predicate.value == _LABEL and isinstance(t.object, ox.Literal):
            labels.setdefault(s, t.object.value)
    declared = [s for s in dict.fromkeys(term_value(t.subject) for t in listed)
                if s in types and s in labels and s.startswith(namespace) and s not in by_iri]
    handles: dict[str, str] = {}
    taken = set(names)
    for iri in declared:
        words = [w for w in re.split(r"[^A-Za-z0-9]+", iri[len(namespace):]) if w]
        base = (words[0] if words and words[0][0].isalpha() else "n")[:12]
        handle, n = base, 2
        while handle in taken:
            handle, n = f"{base}{n}", n + 1
        taken.add(handle)
        handles[iri] = handle

    def name(iri: str) -> str:
        if iri in handles:
            return handles[iri]
        if iri in by_iri:
            return by_iri[iri]
        return bare_name(iri, namespace) or ontology.curie(iri)

    lines = [f"{handles[iri]} {' '.join(types[iri])} {_quote(labels[iri])}" for iri in declared]
    order = {iri: n for n, iri in enumerate(declared)}
    for t in sorted(listed, key=lambda t: order.get(term_value(t.subject), len(order))):  # a node's facts together
        s, p, o = term_value(t.subject), t.predicate.value, t.object
        if s in handles and p in (_RDF_TYPE, _LABEL):
            continue
        value = name(o.value) if isinstance(o, ox.NamedNode) else _literal(o) if isinstance(o, ox.Literal) else ""
        lines.append(f"{name(s)} {ontology.curie(p)} {value}")
    return ("\n".join(lines) + "\n" if lines else NOTHING + "\n"), handles


_BARE_DATATYPES = frozenset(
    XSD + d for d in ("integer", "nonNegativeInteger", "decimal", "double", "float", "boolean", "date", "dateTime",
                      "gYear", "gYearMonth", "time", "duration", "anyURI")
)


def _literal(literal: ox.Literal) -> str:
    if literal.datatype.value in _BARE_DATATYPES and " " not in literal.value:
        return literal.value
    return _quote(literal.value)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def in_handles(report: str, answer: CompactAnswer | None, namespace: str) -> str:
    """A repair report in the answer's own names: a minted node's IRI becomes its handle (``buy``), another node of
    the memory its bare name (``biscuit``), so the model finds the lines the report means."""
    handles = answer.handles if answer is not None else {}

    def shown(iri: str) -> str:
        return handles.get(iri) or bare_name(iri, namespace) or f"<{iri}>"

    text = re.sub(r"<(" + re.escape(namespace) + r"[^<>\s]*)>", lambda m: shown(m.group(1)), report)
    return re.sub(r"(?<![\w:])m:([A-Za-z0-9_][A-Za-z0-9_.-]*[A-Za-z0-9_-]|[A-Za-z0-9_])",
                  lambda m: shown(namespace + m.group(1)), text)


# ---------------------------------------------------------------------------------------------------- grammar


def compact_schema(
    ontology: Ontology, known: Iterable[str] = (), areas: Iterable[str] | None = None
) -> JsonSchema:
    """The constraint an extraction call in the compact form passes to its client: no JSON Schema (the answer is
    not JSON), only the bounded grammar of :func:`compact_grammar` for ``known`` names (:func:`call_names`) and the
    vocabulary of ``areas`` (every area for None), which a client that takes a GBNF grammar (the in-process
    llama.cpp one) applies as it is."""
    return _schema(ontology, tuple(sorted(set(known))), None if areas is None else tuple(sorted(set(areas))))


@lru_cache(maxsize=64)
def _schema(ontology: Ontology, known: tuple[str, ...], areas: tuple[str, ...] | None) -> JsonSchema:
    return JsonSchema(
        SCHEMA_NAME, {}, "Record the facts the current utterance states, one per line.",
        grammar=partial(_bounded, ontology, known, areas), line_set=True,
    )


def _bounded(ontology: Ontology, known: tuple[str, ...], areas: tuple[str, ...] | None, max_tokens: int) -> str:
    return compact_grammar(ontology, grammar_budget(max_tokens), known, areas)


def grammar_budget(max_tokens: int) -> int:
    """The character budget whose answers always fit in ``max_tokens`` tokens (a token is one character or more, for
    ASCII text), and never more than :data:`ANSWER_CHARS`: a loop ends there with a complete answer."""
    return max(0, min(max_tokens, ANSWER_CHARS))


def compact_grammar(
    ontology: Ontology, budget: int, known: Iterable[str] = (), areas: Iterable[str] | None = None
) -> str:
    """A llama.cpp GBNF grammar of compact answers at most ``budget`` characters long.

    Its language: ``nothing to extract``, or one line or more, each a declaration of a new node
    (``handle Class [Class [Class]] "label"``) or a fact (``name property value``), each ending in a newline; a
    blank line ends the answer. Why: Qwen's tokenizer writes a line end and a blank line as one token (``"\\n\\n"``),
    with which Qwen2.5-Coder-1.5B closes a block of lines: allowed between lines, it wrote the same block again and
    again to the budget (~390 tokens an answer); refused, it went on with further lines; as the end, it stops
    there (~110 tokens on the same utterances). The
    classes, properties and named values are the catalogue's (the areas the JSON Schema accepts:
    :func:`pcm.extraction.jsonld._vocabulary`); a property takes the value shapes of its range
    (:func:`pcm.extraction.jsonld._value_schema`) written bare, or quoted for text (no escapes; at most
    :data:`TEXT` characters). A new handle is any name but ``known`` ones (and never ``me``/``you``), so a known
    entity or the speaker is never declared again. ``areas`` (None: every area but the reserved ones) limits the
    classes and properties to those catalogue areas (:func:`pcm.catalogue_areas.select_areas`): a small model that
    may only write the terms of the kinds of facts an utterance is about does not fill a job's answer with a
    purchase's terms; the named values (action statuses, days) stay, whatever their area.

    The budget: every line costs its longest form in :data:`SLOT`-character slots, and the nonterminal ``n{k}``
    ("k slots left") offers only the lines that fit, so a model that loops ends with a complete answer instead of
    one cut at the token limit. Lines of equal cost share a rule, so the grammar grows with the number of distinct
    costs, not of terms (about 0.1 MB for 3,000 tokens).
    """
    names = tuple(sorted({k for k in known if _KNOWN_NAME.fullmatch(k)} | {ME, YOU}))
    return _grammar(ontology, budget // SLOT, names, None if areas is None else tuple(sorted(set(areas))))


def _cost(characters: int) -> int:
    return -(-characters // SLOT)


@lru_cache(maxsize=16)
def _grammar(ontology: Ontology, slots: int, known: tuple[str, ...], areas: tuple[str, ...] | None) -> str:
    classes, properties, values = _vocabulary(ontology, areas)
    ref_len = max([MAX_HANDLE, *(len(k) for k in known)])
    lines = [
        "known ::= " + " | ".join(_literal_gbnf(k) for k in known),
        f"handle ::= {_FIRST} {_REST}{{0,{MAX_HANDLE - 1}}}",
        "ref ::= known | handle",
        'tc ::= [^"\\\\\\x00-\\x1f]',
        f'text ::= "\\"" tc{{1,{TEXT}}} "\\""',
        f'text-short ::= "\\"" tc{{1,{SHORT_TEXT}}} "\\""',
    ]
    lines += _new_names(known)
    # a line's rest after its subject, by the line's cost: declarations after a new handle, facts after a name
    declaring: dict[int, list[str]] = {}
    stating: dict[int, list[str]] = {}
    # declarations: classes grouped by length, so a short class is paid for as short
    buckets: dict[int, list[str]] = {}
    for iri in classes:
        curie = ontology.curie(iri)
        buckets.setdefault(next(b for b in (12, 16, 24, 99) if len(curie) <= b), []).append(curie)
    longest_class = max(len(c) for group in buckets.values() for c in group)
    for size, curies in sorted(buckets.items()):
        rule = f"cls-{size}"
        lines.append(f"{rule} ::= " + " | ".join(_literal_gbnf(c) for c in sorted(curies)))
        width = max(len(c) for c in curies)
        for label, label_len in (("text-short", SHORT_TEXT + 2), ("text", TEXT + 2)):
            for extra in range(MAX_TYPES):
                more = ' " " cls' * extra
                chars = MAX_HANDLE + 1 + width + extra * (1 + longest_class) + 1 + label_len + 1
                declaring.setdefault(_cost(chars), []).append(f'{rule}{more} " " {label} "\\n"')
    lines.append("cls ::= " + " | ".join(f"cls-{size}" for size in sorted(buckets)))
    # facts: properties grouped by value shape and length
    shapes: dict[str, tuple[str, str, int]] = {}
    keys: dict[tuple[str, int], list[str]] = {}
    for iri in properties:
        name, schema = _value_schema(ontology, iri, values)
        if name not in shapes:
            rule = "v-" + re.sub(r"[^a-z0-9]+", "-", name.lower())
            body, longest = _bare(schema, ref_len, "text")
            short_body, short_longest = _bare(schema, ref_len, "text-short")
            shapes[name] = (rule, body, longest)
            if short_body != body:
                shapes[name + "-short"] = (rule + "-short", short_body, short_longest)
        curie = ontology.curie(iri)
        keys.setdefault((name, next(b for b in (12, 16, 24, 99) if len(curie) <= b)), []).append(curie)
    for rule, body, _ in shapes.values():
        lines.append(f"{rule} ::= {body}")
    for (name, size), curies in sorted(keys.items()):
        key = f"k-{shapes[name][0][2:]}-{size}"
        lines.append(f"{key} ::= " + " | ".join(_literal_gbnf(c) for c in sorted(curies)))
        width = max(len(c) for c in curies)
        for variant in (shapes[name], shapes.get(name + "-short")):
            if variant is None:
                continue
            rule, _, longest = variant
            stating.setdefault(_cost(ref_len + 1 + width + 1 + longest + 1), []).append(f'{key} " " {rule} "\\n"')
    for prefix, by_cost in (("dc", declaring), ("fc", stating)):
        lines += [f"{prefix}{cost} ::= " + " | ".join(bodies) for cost, bodies in sorted(by_cost.items())]
    # A line starts with its subject alone (a new handle, or a name), and only then branches on what it costs:
    # llama.cpp follows every alternative alive at once, so branching on the cost first kept hundreds of them.
    lines.append('n0 ::= ""')
    root = f'root ::= "{NOTHING}\\n" "\\n"?'
    for k in range(1, slots + 1):
        starts = []
        for prefix, rest, subject, by_cost in (("dc", "ds", "new", declaring), ("fc", "fs", "ref", stating)):
            fitting = [c for c in sorted(by_cost) if c <= k]
            if fitting:
                lines.append(f"{rest}{k} ::= " + " | ".join(f"{prefix}{c} n{k - c}" for c in fitting))
                starts.append(f'{subject} " " {rest}{k}')
        if starts:
            lines.append(f"f{k} ::= " + " | ".join(starts))
            root += f" | f{k}" if k == slots else ""
        # a blank line ends the answer (see the docstring)
        lines.append(f"n{k} ::= \"\" | \"\\n\"" + (f" | f{k}" if starts else ""))
    return "\n".join([root, *lines]) + "\n"


def _bare(schema: dict[str, Any], ref_len: int, text_rule: str) -> tuple[str, int]:
    """GBNF body and longest text of one value shape, written bare (text quoted)."""
    if "anyOf" in schema:
        parts = [_bare(s, ref_len, text_rule) for s in schema["anyOf"]]
        return "( " + " | ".join(body for body, _ in parts) + " )", max(n for _, n in parts)
    kind = schema.get("type")
    if "enum" in schema:
        return "( " + " | ".join(_literal_gbnf(v) for v in schema["enum"]) + " )", max(len(v) for v in schema["enum"])
    if kind == "string" and schema.get("pattern") == NAME_PATTERN:
        return "ref", ref_len
    if kind == "string" and "pattern" in schema:
        return _BARE_PATTERNS[schema["pattern"]]
    if kind == "string":
        return text_rule, (SHORT_TEXT if text_rule == "text-short" else TEXT) + 2
    if kind == "integer":
        return (_INTEGER, 13) if "minimum" not in schema else (_NONNEGATIVE, 12)
    if kind == "number":
        return _DECIMAL, 20
    if kind == "boolean":
        return '( "true" | "false" )', 5
    raise ValueError(f"no compact grammar for the value shape {schema!r}")


def _literal_gbnf(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _new_names(known: Sequence[str]) -> list[str]:
    """GBNF for ``new``: every handle but the ``known`` names (GBNF has no negation, so the complement is spelled
    out over the trie of the known names: at each prefix the name may end unless the prefix is known, go on with a
    character no known name takes there, then anything, or follow a known name's next character)."""
    words = sorted({k for k in known if _HANDLE.fullmatch(k) and len(k) <= MAX_HANDLE})
    root, rules = trie_complement(words, "new", _FIRST_CHARS, _REST_CHARS, _REST, MAX_HANDLE)
    return [f"new ::= {root}", *rules]


__all__ = [
    "NOTHING",
    "CompactAnswer",
    "as_compact",
    "addressed",
    "bare_name",
    "call_names",
    "compact_grammar",
    "compact_schema",
    "grammar_budget",
    "in_handles",
    "normalise_answer",
    "normalise_compact",
    "read_compact",
]

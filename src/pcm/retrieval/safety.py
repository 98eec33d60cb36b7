"""Safety before running a query someone else wrote (a model, a user): read-only, no federation, bounded.

Three layers, cheapest first:

1. **Tokens** (strings, IRIs and comments skipped): update keywords, ``LOAD`` and ``SERVICE`` are refused before
   anything parses the text, so no engine is ever handed an update or a federated query, not even an empty one.
2. **Parsers**: Oxigraph's parser decides validity (it is the engine that will run the query, and it follows the
   W3C grammar more closely than rdflib); rdflib's parser and algebra give the query's *shape*: its triple
   patterns and property paths. A ``*``/``+`` path with a variable at both ends would walk the whole graph from
   every node (and a zero-length path enumerates every term of the store), so it is refused with the reason; a
   path anchored to a constant (``?x a/rdfs:subClassOf* schema:Event``) is what type-first queries use and is fine.
3. **Bounds**: a ``LIMIT`` is added when missing and lowered when larger than the configured maximum; and every
   query runs under a hard time limit.

The time limit. pyoxigraph has no timeout of its own, and a query can block inside one step (a big ``ORDER BY``,
``COUNT`` or a join that filters everything out) without yielding a row, so a deadline checked between rows
(:func:`pcm.backend.materialise`) cannot stop it, and neither can a thread. What we chose: generated queries on a
local store run in a **worker process** holding a read-only handle on the same RocksDB directory; the worker is
started once and kept (so a query costs one pipe round trip, not a process start), re-opens its handle when the
store has changed on disk, and is killed when a query overruns: killing a process always works. A person's own
queries (``pcm sparql``, :meth:`pcm.memory.Memory.sparql`) go through the same worker (:meth:`pcm.context.MemoryContext.query_runner`). The
worker's heap is capped too (``RLIMIT_DATA``, ``PCM_QUERY_MEMORY_MB``), so a join that materialises gigabytes
stops with a clear error instead of swapping. Our own fixed queries, a remote store (whose server enforces its
own timeout) and an in-memory store run in-process with the deadline between rows.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import resource
import select
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import pyoxigraph as ox

from pcm.backend import QueryResult, Solutions
from pcm.errors import QueryError
from pcm.namespaces import PREFIXES

#: Longest query text accepted (a generated query is a few hundred characters; this only stops garbage).
MAX_QUERY_CHARS = 20_000

FORMS = ("SELECT", "ASK", "CONSTRUCT", "DESCRIBE")
_UPDATE_WORDS = frozenset({"INSERT", "DELETE", "CLEAR", "DROP", "CREATE", "ADD", "MOVE", "COPY", "WITH"})


class QueryRefused(QueryError):
    """A query the checker will not run. ``kind`` says why, for the repair loop and for tests:
    ``syntax``, ``form``, ``update``, ``load``, ``service``, ``path`` or ``size``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class QueryTimeout(QueryError):
    """A query ran past its time limit and was stopped."""


class QueryMemoryExceeded(QueryError):
    """A query needed more memory than its bound and was stopped."""

    def __init__(self, memory_mb: int) -> None:
        super().__init__(
            f"query stopped: it needed more than the {memory_mb} MB of memory a query may use (PCM_QUERY_MEMORY_MB)"
        )


# ---------------------------------------------------------------------------------------------------- tokens

_TOKEN = re.compile(
    r"""
     (?P<ws>\s+)
    |(?P<comment>\#[^\n]*)
    |(?P<string>\"\"\"(?:[^"\\]|\\.|"(?!""))*\"\"\"|'''(?:[^'\\]|\\.|'(?!''))*'''|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
    |(?P<iri><[^<>"{}|^`\\\x00-\x20]*>)
    |(?P<var>[?$][A-Za-z0-9_\u00B7-\uFFFF]+)
    |(?P<lang>@[A-Za-z]+(?:-[A-Za-z0-9]+)*)
    |(?P<dtype>\^\^)
    |(?P<number>\d*\.\d+(?:[eE][+-]?\d+)?|\d+\.?\d*[eE][+-]?\d+|\d+)
    |(?P<bnode>_:[A-Za-z0-9_\u00B7-\uFFFF](?:[\w.\-\u00B7-\uFFFF]*[\w\-\u00B7-\uFFFF])?)
    |(?P<pname>(?:[A-Za-z\u00C0-\uFFFF](?:[\w.\-\u00B7-\uFFFF]*[\w\-\u00B7-\uFFFF])?)?:(?:(?:[\w\-:%\u00B7-\uFFFF]|\\.)(?:(?:[\w\-.:%\u00B7-\uFFFF]|\\.)*(?:[\w\-:%\u00B7-\uFFFF]|\\.))?)?)
    |(?P<word>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<punct>\|\||&&|!=|<=|>=|[{}()\[\].,;*+?/|!=<>^-])
    |(?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)


@dataclass(frozen=True)
class Token:
    """One SPARQL token: its kind (a group name of the pattern above), text and span in the query."""

    kind: str
    text: str
    start: int
    end: int
    depth: int
    """Brace depth at the token (``{`` itself has the outer depth)."""

    @property
    def upper(self) -> str:
        return self.text.upper()


def tokenize(text: str) -> list[Token]:
    """Tokens without whitespace and comments. Not a parser: enough to find keywords, prefixes and LIMIT."""
    out: list[Token] = []
    depth = 0
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup or "other"
        if kind in ("ws", "comment"):
            continue
        value = match.group()
        if value == "}":
            depth = max(0, depth - 1)
        out.append(Token(kind, value, match.start(), match.end(), depth))
        if value == "{":
            depth += 1
    return out


# ---------------------------------------------------------------------------------------------------- checking


@dataclass
class SafeQuery:
    """A query that passed the checks, as it will run (prefixes added, LIMIT bounded), and what was changed."""

    text: str
    form: str
    original: str
    notes: list[str] = field(default_factory=list)
    """Human-readable changes made to make it safe ("LIMIT 1000000 lowered to 1000")."""

    @property
    def shape(self) -> QueryShape | None:
        return query_shape(self.text)


def check_query(
    sparql: str,
    *,
    max_limit: int = 1000,
    prefixes: Mapping[str, str] | None = None,
    base_iri: str | None = None,
    policy: bool = True,
) -> SafeQuery:
    """Refuse or bound a query; returns what to run. Raises :class:`QueryRefused` with one clear line.

    ``prefixes`` adds to pcm's known prefixes (e.g. ``m:`` for the memory's namespace) for queries that use a prefix
    without declaring it. ``policy=False`` keeps the read-only checks (forms, updates, SERVICE, syntax) and skips
    the path and LIMIT rules (what ``pcm sparql`` needs for a person's own query).
    """
    if len(sparql) > MAX_QUERY_CHARS:
        raise QueryRefused("size", f"query refused: {len(sparql)} characters is more than the {MAX_QUERY_CHARS} allowed")
    tokens = tokenize(sparql)
    _refuse_keywords(tokens)
    form = _form(tokens)
    text = _with_prefixes(sparql, tokens, {**PREFIXES, **(prefixes or {})})
    _parse(text, base_iri)
    notes: list[str] = []
    if text != sparql:
        notes.append("added PREFIX declarations for prefixes the query used without declaring")
    if policy:
        _refuse_runaway_paths(text)
        if form != "ASK":
            text, note = bound_limit(text, max_limit)
            if note:
                notes.append(note)
    return SafeQuery(text=text, form=form, original=sparql, notes=notes)


def check_read_only(sparql: str) -> str:
    """Drop-in for :func:`pcm.sparql.check_read_only` built on the parsers: returns the form, raises QueryError."""
    return check_query(sparql, policy=False).form


def _refuse_keywords(tokens: list[Token]) -> None:
    for token in tokens:
        if token.kind != "word":
            continue
        word = token.upper
        if word == "SERVICE":
            raise QueryRefused("service", "SERVICE is refused: a federated query could send your memory to any URL")
        if word == "LOAD":
            raise QueryRefused("load", "LOAD is refused: ask and sparql only read the memory, they never load data")
        if word in _UPDATE_WORDS:
            raise QueryRefused("update", f"{word} is refused: only read queries run here; the memory is never modified")


def _form(tokens: list[Token]) -> str:
    for token in tokens:
        if token.kind == "word" and token.upper in FORMS:
            return token.upper
        if token.kind == "word" and token.upper not in ("PREFIX", "BASE"):
            break
    raise QueryRefused("form", "not a SPARQL query: expected SELECT, ASK, CONSTRUCT or DESCRIBE")


def _with_prefixes(text: str, tokens: list[Token], known: Mapping[str, str]) -> str:
    """Declare the known prefixes a query uses without declaring them (models often forget ``PREFIX rdfs:``)."""
    declared: set[str] = set()
    used: set[str] = set()
    for i, token in enumerate(tokens):
        if token.kind == "word" and token.upper == "PREFIX" and i + 1 < len(tokens) and tokens[i + 1].kind == "pname":
            declared.add(tokens[i + 1].text.split(":", 1)[0])
        elif token.kind == "pname" and (i == 0 or tokens[i - 1].upper != "PREFIX"):
            used.add(token.text.split(":", 1)[0])
    missing = sorted(p for p in used - declared if p in known)
    if not missing:
        return text
    return "".join(f"PREFIX {p}: <{known[p]}>\n" for p in missing) + text


_EMPTY = ox.Store()


def _parse(text: str, base_iri: str | None) -> None:
    """Oxigraph's parser is the judge of syntax. Parsing needs a store; an empty one evaluates nothing."""
    try:
        _EMPTY.query(text, base_iri=base_iri)
    except SyntaxError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "invalid query"
        first = first if len(first) <= 160 else first[:159] + "…"
        raise QueryRefused("syntax", f"SPARQL syntax error: {first}") from exc
    except Exception:  # noqa: S110 - evaluation-time errors (an unknown extension function) are not syntax errors
        pass


def bound_limit(text: str, max_limit: int) -> tuple[str, str]:
    """Add ``LIMIT max_limit`` to the outer query, or lower a larger one; returns (text, note or "")."""
    tokens = tokenize(text)
    limits = [
        i for i, t in enumerate(tokens)
        if t.kind == "word" and t.upper == "LIMIT" and t.depth == 0 and i + 1 < len(tokens) and tokens[i + 1].kind == "number"
    ]
    if limits:
        number = tokens[limits[-1] + 1]
        value = int(float(number.text))
        if value <= max_limit:
            return text, ""
        return (
            text[: number.start] + str(max_limit) + text[number.end :],
            f"LIMIT {value} lowered to {max_limit} (the most rows a query may return)",
        )
    closed = [t.start for t in tokens if t.text == "}" and t.depth == 0]
    trailing = [
        t for t in tokens
        if t.kind == "word" and t.upper == "VALUES" and t.depth == 0 and closed and closed[0] < t.start
    ]
    if trailing:
        at = trailing[-1].start
        return text[:at] + f"LIMIT {max_limit}\n" + text[at:], f"LIMIT {max_limit} added"
    return text.rstrip() + f"\nLIMIT {max_limit}\n", f"LIMIT {max_limit} added"


_RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
_RDFS = "http://www.w3.org/2000/01/rdf-schema#"
_STATEMENT_END = frozenset({"FILTER", "OPTIONAL", "BIND", "MINUS", "VALUES", "GRAPH", "UNION"})


def expand_hierarchy(safe: SafeQuery, closure: Callable[[str, str], frozenset[str]]) -> SafeQuery:
    """Replace type-first hierarchy paths over the ontology by VALUES of the ontology's own closure.

    ``?x a/rdfs:subClassOf* C`` becomes ``?x a ?_cN`` with ``VALUES ?_cN { C and its subclasses }``, and a
    statement ``?r rdfs:subPropertyOf* P`` becomes ``VALUES ?r { P and its subproperties }``. Same answers (the
    ontology graph is the loaded ontology), but the engine starts from a handful of classes instead of walking the
    hierarchy from every typed node: at 1M triples a 100 ms query becomes a few milliseconds. ``closure(kind, iri)``
    gives the reflexive closure (``kind`` is ``class`` or ``property``). Anything it does not recognise stays.
    """
    tokens = tokenize(safe.text)
    prefixes = {**PREFIXES, **_declared_prefixes(tokens)}
    edits: list[tuple[int, int, str]] = []
    fresh = 0
    for i in range(len(tokens) - 4):
        if _subclass_path(tokens, i, prefixes) and (i == 0 or tokens[i - 1].text not in ("/", "|", "^", "(")):
            target = _expand_term(tokens[i + 4], prefixes)
            following = tokens[i + 5].text if i + 5 < len(tokens) else "}"
            if not target or following == ",":
                continue
            fresh += 1
            var = f"?_c{fresh}"
            members = " ".join(f"<{c}>" for c in sorted(closure("class", target)))
            end = _statement_end(tokens, i)
            edits.append((tokens[i].start, tokens[i + 4].end, f"a {var}"))
            edits.append((tokens[end].start, tokens[end].start, f" VALUES {var} {{ {members} }} "))
    for i in range(len(tokens) - 3):
        statement = tokens[i : i + 4]
        before = tokens[i - 1].text if i > 0 else "{"
        after = tokens[i + 4] if i + 4 < len(tokens) else None
        if (
            statement[0].kind == "var"
            and _expand_term(statement[1], prefixes) == _RDFS + "subPropertyOf"
            and statement[2].text == "*"
            and statement[3].kind in ("iri", "pname")
            and before in ("{", ".", "}", ")")
            and (after is None or after.text in (".", "}") or (after.kind == "word" and after.upper in _STATEMENT_END))
        ):
            target = _expand_term(statement[3], prefixes)
            if target:
                members = " ".join(f"<{p}>" for p in sorted(closure("property", target)))
                edits.append((statement[0].start, statement[3].end, f"VALUES {statement[0].text} {{ {members} }}"))
    if not edits:
        return safe
    text = safe.text
    for start, end, new in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        text = text[:start] + new + text[end:]
    return SafeQuery(text=text, form=safe.form, original=safe.original,
                     notes=[*safe.notes, "ontology hierarchy paths expanded to VALUES of the ontology's closure"])


def _subclass_path(tokens: list[Token], i: int, prefixes: Mapping[str, str]) -> bool:
    first, slash, sub, star, obj = tokens[i : i + 5]
    is_type = first.text == "a" or _expand_term(first, prefixes) == _RDF + "type"
    return (is_type and slash.text == "/" and _expand_term(sub, prefixes) == _RDFS + "subClassOf"
            and star.text == "*" and obj.kind in ("iri", "pname"))


def _statement_end(tokens: list[Token], i: int) -> int:
    """Index of the token that ends the triples statement holding token ``i`` (``.``, ``}`` or a keyword)."""
    depth, level = tokens[i].depth, 0
    for j in range(i + 1, len(tokens)):
        token = tokens[j]
        if token.text in ("[", "("):
            level += 1
        elif token.text in ("]", ")"):
            level -= 1
        elif level == 0 and (
            (token.text == "}" and token.depth == depth - 1)
            or (token.depth == depth and (token.text in (".", "{") or (token.kind == "word" and token.upper in _STATEMENT_END)))
        ):
            return j
    return len(tokens) - 1


def _declared_prefixes(tokens: list[Token]) -> dict[str, str]:
    out = {}
    for i in range(len(tokens) - 2):
        if tokens[i].kind == "word" and tokens[i].upper == "PREFIX" and tokens[i + 1].kind == "pname" and tokens[i + 2].kind == "iri":
            out[tokens[i + 1].text[:-1]] = tokens[i + 2].text[1:-1]
    return out


def _expand_term(token: Token, prefixes: Mapping[str, str]) -> str:
    if token.kind == "iri":
        return token.text[1:-1]
    if token.kind == "pname":
        prefix, _, local = token.text.partition(":")
        return prefixes[prefix] + local if prefix in prefixes and "\\" not in local else ""
    return ""


# ---------------------------------------------------------------------------------------------------- shape


@dataclass(frozen=True)
class PathUse:
    """A property path in a triple pattern; ``anchored`` when it cannot walk the whole graph."""

    subject: str
    path: str
    object: str
    anchored: bool


@dataclass
class QueryShape:
    """The graph patterns of a query: what the path rule checks and what evidence grounding fills in.

    Terms are strings: ``?name`` for variables, N-Triples for constants (``<iri>``, ``"v"^^<datatype>``).
    """

    patterns: list[tuple[str, str, str]]
    """Triple patterns whose predicate is an IRI or a variable (blank-node patterns and negated ones left out)."""
    paths: list[PathUse]
    projected: list[str]
    """Variables the outer SELECT projects by name (``*`` lists none); aliases of expressions are left out."""
    parser: str = "tokens"
    """``tokens`` (our parser) or ``rdflib`` (the fallback for constructs ours does not handle)."""


@lru_cache(maxsize=512)
def query_shape(text: str) -> QueryShape | None:
    """The shape of a (checked) query, or None when neither parser understands it (callers stay conservative).

    Our recursive-descent parser over :func:`tokenize` covers the graph-pattern grammar a generated query uses
    (groups, OPTIONAL, UNION, MINUS, GRAPH, FILTER [NOT] EXISTS, BIND, VALUES, subqueries, property paths, blank
    node property lists) in well under a millisecond; rdflib's parser and algebra (~40 ms) handle the rest.
    """
    try:
        return _ShapeParser(tokenize(text)).query()
    except _Unsupported:
        return _rdflib_shape(text)


class _Unsupported(Exception):
    """A construct the token parser does not handle (the rdflib fallback takes over)."""


_XSD = "http://www.w3.org/2001/XMLSchema#"
_RDF_TYPE = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "b": "\b", "f": "\f", '"': '"', "'": "'", "\\": "\\"}
_GROUP_KEYWORDS = frozenset({"OPTIONAL", "MINUS", "GRAPH", "SERVICE", "FILTER", "BIND", "VALUES", "UNION", "SELECT"})


class _ShapeParser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.i = 0
        self.prefixes: dict[str, str] = {}
        self.patterns: list[tuple[str, str, str]] = []
        self.paths: list[PathUse] = []
        self.negated = 0
        self.blanks = 0

    # -- token access
    def peek(self, ahead: int = 0) -> Token | None:
        j = self.i + ahead
        return self.tokens[j] if j < len(self.tokens) else None

    def is_word(self, *words: str, ahead: int = 0) -> bool:
        token = self.peek(ahead)
        return token is not None and token.kind == "word" and token.upper in words

    def is_text(self, *texts: str, ahead: int = 0) -> bool:
        token = self.peek(ahead)
        return token is not None and token.text in texts and token.kind in ("punct", "other")

    def take(self) -> Token:
        token = self.peek()
        if token is None:
            raise _Unsupported("unexpected end")
        self.i += 1
        return token

    def expect(self, text: str) -> None:
        if self.take().text != text:
            raise _Unsupported(f"expected {text}")

    # -- query
    def query(self) -> QueryShape:
        while self.is_word("PREFIX", "BASE"):
            if self.take().upper == "BASE":
                raise _Unsupported("BASE")
            name, iri = self.take(), self.take()
            if name.kind != "pname" or iri.kind != "iri":
                raise _Unsupported("prefix declaration")
            self.prefixes[name.text[:-1]] = iri.text[1:-1]
        form = self.take().upper
        projected: list[str] = []
        if form == "SELECT":
            projected = self.projection()
        elif form == "CONSTRUCT":
            if self.is_text("{"):
                self.skip_braces()
        elif form == "DESCRIBE":
            while self.peek() is not None and not self.is_text("{") and not self.is_word("WHERE", "FROM"):
                self.take()
        elif form != "ASK":
            raise _Unsupported(form)
        while self.is_word("FROM"):
            self.take()
            if self.is_word("NAMED"):
                self.take()
            self.take()
        if self.is_word("WHERE"):
            self.take()
        if self.is_text("{"):
            self.group()
        return QueryShape(self.patterns, self.paths, projected)

    def projection(self) -> list[str]:
        projected: list[str] = []
        if self.is_word("DISTINCT", "REDUCED"):
            self.take()
        while self.peek() is not None and not self.is_text("{") and not self.is_word("WHERE", "FROM"):
            token = self.take()
            if token.kind == "var":
                projected.append(token.text[1:])
            elif token.text == "(":
                self.skip_balanced("(", ")", started=True)
        return projected

    # -- groups
    def group(self) -> None:
        self.expect("{")
        if self.is_word("SELECT"):
            self.take()
            self.projection()
            if self.is_word("WHERE"):
                self.take()
            self.group()
            while not self.is_text("}"):  # the subquery's solution modifiers
                if self.take().text == "(":
                    self.skip_balanced("(", ")", started=True)
            self.expect("}")
            return
        while not self.is_text("}"):
            token = self.peek()
            if token is None:
                raise _Unsupported("unclosed group")
            if token.kind == "word" and token.upper in _GROUP_KEYWORDS:
                self.keyword(token.upper)
            elif token.text == "{":
                self.group()
            elif token.text == ".":
                self.take()
            else:
                self.triples()
        self.expect("}")

    def keyword(self, word: str) -> None:
        self.take()
        if word in ("OPTIONAL", "MINUS"):
            self.negated += word == "MINUS"
            self.group()
            self.negated -= word == "MINUS"
        elif word == "GRAPH":
            self.term()
            self.group()
        elif word == "UNION":
            self.group()
        elif word == "FILTER":
            self.constraint()
        elif word == "BIND":
            self.skip_balanced("(", ")")
        elif word == "VALUES":
            if self.is_text("("):
                self.skip_balanced("(", ")")
            else:
                self.take()
            self.skip_braces()
        else:
            raise _Unsupported(word)

    def constraint(self) -> None:
        """A FILTER: skip its expression, parsing the groups of any [NOT] EXISTS inside it."""
        if self.is_word("NOT", "EXISTS"):
            self.exists()
            return
        if not self.is_text("("):
            self.take()  # a function name: regex(...), CONTAINS(...), <iri>(...)
        self.expect("(")
        level = 1
        while level:
            if self.is_word("NOT", "EXISTS"):
                self.exists()
                continue
            token = self.take()
            level += (token.text == "(") - (token.text == ")")

    def exists(self) -> None:
        negated = self.take().upper == "NOT"
        if negated:
            if not self.is_word("EXISTS"):
                return  # NOT IN (...): an ordinary expression
            self.take()
        self.negated += negated
        self.group()
        self.negated -= negated

    def skip_balanced(self, open_: str, close: str, *, started: bool = False) -> None:
        if not started:
            self.expect(open_)
        level = 1
        while level:
            token = self.take()
            level += (token.text == open_) - (token.text == close)

    def skip_braces(self) -> None:
        self.skip_balanced("{", "}")

    # -- triples
    def triples(self) -> None:
        if self.is_text("["):
            subject = self.blank_list()
            if self.is_text(".", "}") or ((nxt := self.peek()) is not None and nxt.kind == "word" and nxt.upper in _GROUP_KEYWORDS):
                return
        else:
            subject = self.term()
        self.property_list(subject)

    def property_list(self, subject: str) -> None:
        while True:
            verb, path, unbounded = self.verb()
            while True:
                obj = self.object()
                self.record(subject, verb, path, unbounded, obj)
                if not self.is_text(","):
                    break
                self.take()
            if not self.is_text(";"):
                return
            while self.is_text(";"):
                self.take()
            if self.is_text(".", "}", "]") or (nxt := self.peek()) is None or (nxt.kind == "word" and nxt.upper in _GROUP_KEYWORDS and nxt.text != "a"):
                return

    def record(self, subject: str, verb: str, path: bool, unbounded: bool, obj: str) -> None:
        if path:
            anchored = not unbounded or _constant(subject) or _constant(obj)
            self.paths.append(PathUse(subject, verb, obj, anchored))
        elif not self.negated and not subject.startswith("_:") and not obj.startswith("_:"):
            self.patterns.append((subject, verb, obj))

    def verb(self) -> tuple[str, bool, bool]:
        """(predicate or path text, is a path, has * or +)."""
        token = self.peek()
        if token is not None and token.kind == "var":
            self.take()
            return "?" + token.text[1:], False, False
        start = self.i
        unbounded, elements = self.path_alternative()
        if elements == 1 and self.i - start == 1:
            return self.iri(self.tokens[start]), False, False
        text = " ".join(t.text for t in self.tokens[start : self.i])
        return text, True, unbounded

    def path_alternative(self) -> tuple[bool, int]:
        unbounded, count = self.path_sequence()
        while self.is_text("|"):
            self.take()
            more, n = self.path_sequence()
            unbounded, count = unbounded or more, count + n
        return unbounded, count

    def path_sequence(self) -> tuple[bool, int]:
        unbounded, count = self.path_element()
        while self.is_text("/"):
            self.take()
            more, n = self.path_element()
            unbounded, count = unbounded or more, count + n
        return unbounded, count

    def path_element(self) -> tuple[bool, int]:
        if self.is_text("^"):
            self.take()
        token = self.take()
        unbounded = False
        if token.text == "(":
            unbounded, _ = self.path_alternative()
            self.expect(")")
        elif token.text == "!":
            if self.is_text("("):
                self.skip_balanced("(", ")")
            else:
                if self.is_text("^"):
                    self.take()
                self.take()
        elif not (token.kind in ("iri", "pname") or token.text == "a"):
            raise _Unsupported("path element")
        if self.is_text("*", "+", "?"):
            unbounded = unbounded or self.take().text in ("*", "+")
            return unbounded, 2
        return unbounded, 1

    def object(self) -> str:
        if self.is_text("["):
            return self.blank_list()
        return self.term()

    def blank_list(self) -> str:
        self.expect("[")
        self.blanks += 1
        node = f"_:anon{self.blanks}"
        if not self.is_text("]"):
            self.property_list(node)
        self.expect("]")
        return node

    def term(self) -> str:
        token = self.take()
        if token.kind == "var":
            return "?" + token.text[1:]
        if token.kind in ("iri", "pname") or token.text == "a":
            return self.iri(token)
        if token.kind == "bnode":
            return token.text
        if token.kind == "string":
            return self.literal(token)
        if token.kind == "number":
            return _number(token.text)
        if token.text in ("+", "-") and (nxt := self.peek()) is not None and nxt.kind == "number":
            return _number(token.text + self.take().text)
        if token.kind == "word" and token.text.lower() in ("true", "false"):
            return str(ox.Literal(token.text.lower(), datatype=ox.NamedNode(_XSD + "boolean")))
        raise _Unsupported(f"term {token.text}")

    def iri(self, token: Token) -> str:
        if token.text == "a":
            return _RDF_TYPE
        if token.kind == "iri":
            value = token.text[1:-1]
        else:
            prefix, _, local = token.text.partition(":")
            if prefix not in self.prefixes or "\\" in local:
                raise _Unsupported("prefix")
            value = self.prefixes[prefix] + local
        if ":" not in value:
            raise _Unsupported("relative IRI")
        return f"<{value}>"

    def literal(self, token: Token) -> str:
        value = _unescape(token.text[3:-3] if token.text[:3] in ('"""', "'''") else token.text[1:-1])
        if (nxt := self.peek()) is not None and nxt.kind == "lang":
            return str(ox.Literal(value, language=self.take().text[1:]))
        if (nxt := self.peek()) is not None and nxt.kind == "dtype":
            self.take()
            datatype = self.iri(self.take())[1:-1]
            return str(ox.Literal(value, datatype=ox.NamedNode(datatype)))
        return str(ox.Literal(value))


def _constant(term: str) -> bool:
    return not term.startswith(("?", "_:"))


def _number(text: str) -> str:
    kind = "double" if "e" in text.lower() else "decimal" if "." in text else "integer"
    return str(ox.Literal(text.lstrip("+"), datatype=ox.NamedNode(_XSD + kind)))


def _unescape(body: str) -> str:
    def replace(match: re.Match[str]) -> str:
        code = match.group(1)
        if code[0] in "uU":
            return chr(int(code[1:], 16))
        return _ESCAPES.get(code, code)

    return re.sub(r"\\(u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|.)", replace, body)


def _rdflib_shape(text: str) -> QueryShape | None:
    try:
        from rdflib.plugins.sparql import algebra, parser

        return _shape(algebra.translateQuery(parser.parseQuery(text)).algebra)
    except Exception:
        return None


def _shape(root: Any) -> QueryShape:
    from rdflib.paths import Path as RdfPath
    from rdflib.term import URIRef, Variable

    patterns: list[tuple[str, str, str]] = []
    paths: list[PathUse] = []
    for node in _nodes(root):
        if getattr(node, "name", "") == "BGP":
            for s, p, o in node.get("triples", []):
                if isinstance(p, RdfPath):
                    paths.append(PathUse(_nt(s), p.n3(), _nt(o), _anchored(s, o) or not _unbounded(p)))
                elif isinstance(p, URIRef | Variable) and all(_nt(t) for t in (s, o)):
                    patterns.append((_nt(s), _nt(p), _nt(o)))
    projected = [str(v) for v in (root.get("PV") or [])]
    return QueryShape(patterns, paths, projected, parser="rdflib")


def _nt(term: Any) -> str:
    """An rdflib term as our shape strings ("" for blank nodes)."""
    from rdflib.term import Literal, URIRef, Variable

    if isinstance(term, Variable):
        return f"?{term}"
    if isinstance(term, URIRef):
        return f"<{term}>"
    if isinstance(term, Literal):
        if term.language:
            return str(ox.Literal(str(term), language=term.language))
        datatype = str(term.datatype) if term.datatype else _XSD + "string"
        return str(ox.Literal(str(term), datatype=ox.NamedNode(datatype)))
    return ""


def _nodes(node: Any) -> Iterator[Any]:
    """Every algebra node below ``node`` (CompValues are dicts; lists hold several)."""
    from rdflib.plugins.sparql.parserutils import CompValue

    stack = [node]
    seen: set[int] = set()
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, CompValue):
            yield current
            stack.extend(v for v in current.values() if isinstance(v, CompValue | list))
        elif isinstance(current, list):
            stack.extend(v for v in current if isinstance(v, CompValue | list))


def _anchored(s: Any, o: Any) -> bool:
    from rdflib.term import Literal, URIRef

    return isinstance(s, URIRef | Literal) or isinstance(o, URIRef | Literal)


def _unbounded(path: Any) -> bool:
    """Does the path contain ``*`` or ``+`` anywhere?"""
    from rdflib.paths import AlternativePath, InvPath, MulPath, SequencePath

    if isinstance(path, MulPath):
        return path.mod in ("*", "+") or _unbounded(path.path)
    if isinstance(path, SequencePath | AlternativePath):
        return any(_unbounded(p) for p in path.args)
    if isinstance(path, InvPath):
        return _unbounded(path.arg)
    return False


def _refuse_runaway_paths(text: str) -> None:
    shape = query_shape(text)
    if shape is None:
        if _token_paths(tokenize(text)):
            raise QueryRefused(
                "path", "a '*' or '+' property path could not be checked: anchor it to a constant IRI"
            )
        return
    for use in shape.paths:
        if not use.anchored:
            raise QueryRefused(
                "path",
                f"unbounded path {use.subject} {use.path} {use.object} joins two variables and could walk the whole "
                "graph: anchor one end to a constant IRI (e.g. ?x a/rdfs:subClassOf* schema:Event)",
            )


def _token_paths(tokens: list[Token]) -> bool:
    """Conservative fallback: a ``*`` or ``+`` right after an IRI, a prefixed name or ``a`` is a path modifier."""
    for previous, token in zip(tokens, tokens[1:], strict=False):
        if token.text in ("*", "+") and (previous.kind in ("iri", "pname") or previous.text == "a"):
            return True
    return False


# ---------------------------------------------------------------------------------------------------- running


def store_fingerprint(path: Path) -> str:
    """Changes whenever the RocksDB directory is written (WAL, SST, MANIFEST), read in well under a millisecond.

    The informational ``LOG`` files and the ``LOCK`` file are left out: they change when a process merely opens
    the store. A compaction changes it without changing any fact; that only costs a cache miss.
    """
    parts: list[str] = []
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                if entry.name.startswith("LOG") or entry.name == "LOCK" or not entry.is_file():
                    continue
                stat = entry.stat()
                parts.append(f"{entry.name}:{stat.st_size}:{stat.st_mtime_ns}")
    except OSError:
        return ""
    return "|".join(sorted(parts))


class QueryRunner:
    """Runs queries under a hard time limit and a memory bound (see the module docstring for how).

    ``memory_mb`` caps the worker's heap (``RLIMIT_DATA``): a query that needs more is stopped with
    :class:`QueryMemoryExceeded` instead of growing until the machine swaps.
    """

    def __init__(self, backend: Any, *, timeout: float, limit: int, memory_mb: int = 1024) -> None:
        self.backend = backend
        self.timeout = timeout
        self.limit = limit
        self.memory_mb = memory_mb
        path = getattr(backend, "path", None)
        self._path: Path | None = Path(path) if path is not None and type(backend).__name__ == "LocalBackend" else None
        self._worker: _Worker | None = None
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _stop_worker, self)

    @property
    def isolated(self) -> bool:
        """True when queries run in the killable worker process."""
        return self._path is not None

    def run(self, query: SafeQuery | str, *, timeout: float | None = None, limit: int | None = None) -> QueryResult:
        """Run ``query`` (a checked query, or text the caller has checked) and return its materialised result.

        The time limit counts from this call, so starting a worker (a fraction of a second) is inside it.
        """
        text = query.text if isinstance(query, SafeQuery) else query
        limit = limit or self.limit
        seconds = timeout or self.timeout
        if self._path is None:
            return self.backend.query(text, timeout=seconds, limit=limit)
        deadline = time.monotonic() + seconds
        with self._lock:
            if self._worker is None or not self._worker.alive:
                self._worker = _Worker(self._path, self.memory_mb)
            return self._worker.run(
                text, limit=limit, timeout=seconds, deadline=deadline, version=store_fingerprint(self._path)
            )

    def close(self) -> None:
        with self._lock:
            if self._worker is not None:
                self._worker.stop()
                self._worker = None


def _stop_worker(runner: QueryRunner) -> None:  # pragma: no cover - called by the finalizer
    runner.close()


_LIVE: weakref.WeakSet[_Worker] = weakref.WeakSet()


class _Worker:
    """One child process holding ``pyoxigraph.Store.read_only(path)``; JSON lines over pipes."""

    def __init__(self, path: Path, memory_mb: int) -> None:
        self.path = path
        self.memory_mb = memory_mb
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from pcm.retrieval.safety import _worker_main; _worker_main()", str(path),
             str(memory_mb)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        _LIVE.add(self)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def run(self, text: str, *, limit: int, timeout: float, deadline: float, version: str) -> QueryResult:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        request = json.dumps({"q": text, "limit": limit, "version": version}) + "\n"
        try:
            self.proc.stdin.write(request.encode("utf-8"))
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            self.stop()
            raise QueryError("the query worker stopped unexpectedly; run the question again") from exc
        ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            self.stop()
            raise QueryTimeout(f"query stopped: it ran past the time limit of {timeout:g} s")
        line = self.proc.stdout.readline()
        if not line:
            self.stop()
            if self.proc.returncode in (-signal.SIGABRT, -signal.SIGKILL, -signal.SIGSEGV):
                raise QueryMemoryExceeded(self.memory_mb)  # an allocation failed under RLIMIT_DATA: the engine aborts
            raise QueryError("the query worker stopped unexpectedly; run the question again")
        return _decode_result(json.loads(line), self.memory_mb)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


@atexit.register
def _stop_all() -> None:  # pragma: no cover - interpreter exit
    for worker in list(_LIVE):
        worker.stop()


def _decode_result(message: dict[str, Any], memory_mb: int) -> QueryResult:
    if "error" in message:
        kind = message["error"]
        text = message.get("message", "")
        if kind == "memory":
            raise QueryMemoryExceeded(memory_mb)
        if kind == "syntax":
            raise QueryError(f"SPARQL syntax error: {text}")
        raise QueryError(f"query failed: {text}")
    if message["kind"] == "boolean":
        return bool(message["value"])
    if message["kind"] == "solutions":
        rows = [tuple(_decode_term(t) for t in row) for row in message["rows"]]
        return Solutions(tuple(message["vars"]), rows)
    return [_decode_term(t) for t in message["triples"]]


def _encode_term(term: Any) -> Any:
    if term is None:
        return None
    if isinstance(term, ox.NamedNode):
        return ["i", term.value]
    if isinstance(term, ox.BlankNode):
        return ["b", term.value]
    if isinstance(term, ox.Literal):
        return ["l", term.value, term.datatype.value, term.language]
    return ["t", _encode_term(term.subject), _encode_term(term.predicate), _encode_term(term.object)]


def _decode_term(data: Any) -> Any:
    if data is None:
        return None
    kind = data[0]
    if kind == "i":
        return ox.NamedNode(data[1])
    if kind == "b":
        return ox.BlankNode(data[1])
    if kind == "l":
        if data[3]:
            return ox.Literal(data[1], language=data[3])
        return ox.Literal(data[1], datatype=ox.NamedNode(data[2]))
    return ox.Triple(_decode_term(data[1]), _decode_term(data[2]), _decode_term(data[3]))


def _evaluate(store: ox.Store, text: str, limit: int) -> dict[str, Any]:
    result = store.query(text, use_default_graph_as_union=True)
    if isinstance(result, ox.QueryBoolean):
        return {"kind": "boolean", "value": bool(result)}
    if isinstance(result, ox.QuerySolutions):
        variables = [v.value for v in result.variables]
        rows: list[list[Any]] = []
        for solution in result:
            if len(rows) >= limit:
                break
            rows.append([_encode_term(solution[v]) for v in variables])
        return {"kind": "solutions", "vars": variables, "rows": rows}
    triples: list[Any] = []
    for triple in result:
        if len(triples) >= limit:
            break
        triples.append(_encode_term(triple))
    return {"kind": "triples", "triples": triples}


def _worker_main() -> None:  # pragma: no cover - runs in the child process (exercised through QueryRunner)
    """The child: one read-only store handle, re-opened when the parent says the store changed.

    Its heap is capped first (``RLIMIT_DATA``, which counts what the engine allocates and not the store's mapped
    files); an allocation past it aborts this process, which the parent reports as :class:`QueryMemoryExceeded`.
    """
    path = sys.argv[1]
    cap = int(sys.argv[2]) * 2**20
    resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))
    store: ox.Store | None = None
    version: str | None = None
    for line in sys.stdin.buffer:
        request = json.loads(line)
        try:
            if store is None or request["version"] != version:
                store = None
                store = ox.Store.read_only(path)
                version = request["version"]
            reply = _evaluate(store, request["q"], int(request["limit"]))
        except MemoryError:
            reply = {"error": "memory"}
        except SyntaxError as exc:
            reply = {"error": "syntax", "message": str(exc).strip().splitlines()[0] if str(exc).strip() else "invalid"}
        except Exception as exc:
            reply = {"error": "execution", "message": (str(exc).strip().splitlines() or [type(exc).__name__])[0]}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


__all__ = [
    "FORMS",
    "MAX_QUERY_CHARS",
    "PathUse",
    "QueryMemoryExceeded",
    "QueryRefused",
    "QueryRunner",
    "QueryShape",
    "QueryTimeout",
    "SafeQuery",
    "Token",
    "bound_limit",
    "check_query",
    "check_read_only",
    "expand_hierarchy",
    "query_shape",
    "store_fingerprint",
    "tokenize",
]

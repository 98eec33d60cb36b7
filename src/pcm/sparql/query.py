"""The one query representation: a query's tokens, prologue, form and shape (its triple patterns and property
paths), parsed once per text and cached.

The shape comes from two parsers. A recursive-descent parser over :func:`pcm.sparql.lexer.tokenize` covers the
graph-pattern grammar a generated query uses (groups, OPTIONAL, UNION, MINUS, GRAPH, FILTER [NOT] EXISTS, BIND,
VALUES, subqueries, property paths, blank node property lists) in tens of microseconds; anything else (a
collection, BASE, a relative IRI, an escaped local name) makes it defer to rdflib's parser and algebra, which
cost milliseconds (``benchmarks/bench_sparql_parse.py`` prints both). The fast path is kept only because a
differential test holds it to rdflib over generated queries and the W3C syntax suites
(``tests/sparql/test_sparql_differential.py``): where both answer, they give the same shape.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

import pyoxigraph as ox

from pcm.sparql.lexer import (
    Token,
    declared_prefixes,
    expand,
    iri_value,
    string_value,
    tokenize,
    unescape_local,
)

FORMS = ("SELECT", "ASK", "CONSTRUCT", "DESCRIBE")


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
    """``tokens`` (the fast path) or ``rdflib`` (the fallback for constructs the fast path does not handle)."""


@dataclass(frozen=True, eq=False)
class Query:
    """One query text as the front end reads it: tokens once, the rest on demand. Get it from :func:`parse`."""

    text: str
    tokens: tuple[Token, ...] = field(repr=False)

    @cached_property
    def prefixes(self) -> dict[str, str]:
        """The query's own ``PREFIX`` declarations."""
        return declared_prefixes(self.tokens)

    @cached_property
    def form_index(self) -> int | None:
        """Index of the SELECT/ASK/CONSTRUCT/DESCRIBE keyword of the outer query (None when the text has none)."""
        return next((i for i, t in enumerate(self.tokens) if t.is_word(*FORMS)), None)

    @property
    def form(self) -> str:
        index = self.form_index
        return self.tokens[index].upper if index is not None else ""

    @cached_property
    def shape(self) -> QueryShape | None:
        """Triple patterns and paths, or None when neither parser understands the text (callers stay conservative)."""
        try:
            return _ShapeParser(list(self.tokens)).query()
        except _Unsupported:
            return self.rdflib_shape

    @cached_property
    def rdflib_shape(self) -> QueryShape | None:
        """The shape as rdflib's parser and algebra give it (None when rdflib cannot parse the text)."""
        parsed = _rdflib_parse(self.text)
        if parsed is None:
            return None
        try:
            return _shape(*parsed)
        except (ValueError, UnicodeError):  # a term rdflib read but RDF cannot hold (a lone surrogate escape)
            return None

    def where_group(self) -> tuple[str, str] | None:
        """(prologue, WHERE group text) of the outer query; None when the shape is unusual."""
        tokens, form = self.tokens, self.form_index
        if form is None:
            return None
        where = next((i for i in range(form, len(tokens)) if tokens[i].is_word("WHERE") and tokens[i].depth == 0), None)
        if where is None and tokens[form].upper == "CONSTRUCT":
            return None
        start = where if where is not None else form
        open_ = next((i for i in range(start, len(tokens)) if tokens[i].text == "{" and tokens[i].depth == 0), None)
        if open_ is None:
            return None
        close = next((i for i in range(open_ + 1, len(tokens)) if tokens[i].text == "}" and tokens[i].depth == 0), None)
        if close is None:
            return None
        return self.text[: tokens[form].start], self.text[tokens[open_].start : tokens[close].end]


@lru_cache(maxsize=1024)
def parse(text: str) -> Query:
    """The query representation of ``text``, cached: a query is checked, shaped, rewritten and bound for evidence
    by several modules, and each reads the same :class:`Query`."""
    return Query(text, tuple(tokenize(text)))


def query_shape(text: str) -> QueryShape | None:
    """The shape of a (checked) query, or None when neither parser understands it (see :attr:`Query.shape`)."""
    return parse(text).shape


def rdflib_algebra(text: str) -> Any | None:
    """rdflib's algebra of a query (its ``algebra`` node), cached; None when rdflib cannot parse it."""
    parsed = _rdflib_parse(text)
    return parsed[0] if parsed is not None else None


@lru_cache(maxsize=256)
def _rdflib_parse(text: str) -> tuple[Any, list[str]] | None:
    """(algebra, variables projected by name) by rdflib, or None when rdflib cannot parse the text."""
    from rdflib.plugins.sparql import algebra, parser

    # Only rdflib's own calls are caught (it raises pyparsing errors, ValueError, KeyError, even bare Exception for
    # what it cannot read); our reading of its parse tree stays outside, so a mistake there is not "unreadable".
    try:
        tree = parser.parseQuery(text)
    except Exception:  # noqa: BLE001
        return None
    query = tree[1]
    projection = query["projection"] if "projection" in query else []  # noqa: SIM401 - CompValue.get answers the key's name
    projected = [str(item["var"]) for item in projection if "var" in item]
    try:
        return algebra.translateQuery(tree).algebra, projected
    except Exception:  # noqa: BLE001
        return None


def rdflib_shape(text: str) -> QueryShape | None:
    """The shape of a query by rdflib alone (the fallback; the differential tests compare it with the fast path)."""
    return parse(text).rdflib_shape


class _Unsupported(Exception):
    """A construct the token parser does not handle (the rdflib fallback takes over)."""


_XSD = "http://www.w3.org/2001/XMLSchema#"
_RDF_TYPE = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
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
            self.prefixes[name.text[:-1]] = iri_value(iri.text)
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
        first, last = start, self.i - 1
        while elements == 1 and last - first >= 2 and self.tokens[first].text == "(" and self.tokens[last].text == ")":
            first, last = first + 1, last - 1  # ``(p)`` is the predicate p
        if elements == 1 and first == last:
            return self.iri(self.tokens[first]), False, False
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
            value = iri_value(token.text)
        else:
            value = expand(token, self.prefixes)  # local-name escapes (``s:a\\.b``) decoded, as the grammar says
            if not value:
                raise _Unsupported("prefix")
        if ":" not in value:
            raise _Unsupported("relative IRI")
        return f"<{value}>"

    def literal(self, token: Token) -> str:
        try:
            return self._literal(token)
        except ValueError as exc:  # a lone surrogate (``\\uD800``), an invalid language tag: the engine decides
            raise _Unsupported("literal") from exc

    def _literal(self, token: Token) -> str:
        value = string_value(token.text)
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


def _shape(root: Any, projected: list[str]) -> QueryShape:
    from rdflib.paths import Path as RdfPath
    from rdflib.plugins.sparql import algebra
    from rdflib.term import URIRef, Variable

    patterns: list[tuple[str, str, str]] = []
    paths: list[PathUse] = []
    for node, negated in _nodes(root):
        if getattr(node, "name", "") in ("BGP", "TriplesBlock"):  # TriplesBlock: an EXISTS group rdflib leaves untranslated
            found: list[tuple[Any, Any, Any]] = algebra.triples(node.get("triples") or [[]])  # typed without paths
            for s, p, o in found:
                if isinstance(p, RdfPath):
                    paths.append(PathUse(_nt(s), _path_text(p), _nt(o), _anchored(s, o) or not _unbounded(p)))
                elif not negated and isinstance(p, URIRef | Variable) and all(_nt(t) for t in (s, o)):
                    patterns.append((_nt(s), _nt(p), _nt(o)))
    return QueryShape(patterns, paths, projected, parser="rdflib")


def _path_text(path: Any) -> str:
    """A property path as SPARQL text (rdflib's own ``n3`` fails on a negated inverse set such as ``!(^p)``)."""
    try:
        return str(path.n3())
    except TypeError:
        return repr(path)


def _nt(term: Any) -> str:
    """An rdflib term as our shape strings ("" for blank nodes)."""
    from rdflib.term import Literal, URIRef, Variable

    if isinstance(term, Variable):
        return f"?{term}"
    if isinstance(term, URIRef):
        return f"<{unescape_local(str(term))}>"  # rdflib keeps a prefixed name's escapes; an IRI has no backslash
    if isinstance(term, Literal):
        if term.language:
            return str(ox.Literal(str(term), language=term.language))
        datatype = str(term.datatype) if term.datatype else _XSD + "string"
        return str(ox.Literal(str(term), datatype=ox.NamedNode(datatype)))
    return ""


def _nodes(node: Any) -> Iterator[tuple[Any, bool]]:
    """Every algebra node below ``node`` (CompValues are dicts; lists hold several), with whether it is negated:
    the right side of a MINUS or the group of a NOT EXISTS (patterns there are not what an answer used)."""
    from rdflib.plugins.sparql.parserutils import CompValue

    stack: list[tuple[Any, bool]] = [(node, False)]
    seen: set[tuple[int, bool]] = set()
    while stack:
        current, negated = stack.pop()
        if (id(current), negated) in seen:
            continue
        seen.add((id(current), negated))
        if isinstance(current, CompValue):
            yield current, negated
            for key, value in current.items():
                if isinstance(value, CompValue | list):
                    below = negated or current.name == "Builtin_NOTEXISTS" or (current.name == "Minus" and key == "p2")
                    stack.append((value, below))
        elif isinstance(current, list):
            stack.extend((v, negated) for v in current if isinstance(v, CompValue | list))


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


__all__ = ["FORMS", "PathUse", "Query", "QueryShape", "parse", "query_shape", "rdflib_algebra", "rdflib_shape"]

"""Checks before running a query someone else wrote (a model, a user): read-only, no federation, bounded.

Three layers, cheapest first:

1. **Tokens** (strings, IRIs and comments skipped by :func:`pcm.sparql.lexer.tokenize`): update keywords, ``LOAD``
   and ``SERVICE`` are refused before anything parses the text, so no engine is ever handed an update or a
   federated query, not even an empty one.
2. **Parsers**: Oxigraph's parser decides validity (it is the engine that will run the query, and it follows the
   W3C grammar more closely than rdflib); the query's *shape* (:mod:`pcm.sparql.query`) gives its triple patterns
   and property paths. A ``*``/``+`` path with a variable at both ends would walk the whole graph from every node
   (and a zero-length path enumerates every term of the store), so it is refused with the reason; a path anchored
   to a constant (``?x a/rdfs:subClassOf* schema:Event``) is what type-first queries use and is fine.
3. **Bounds**: a ``LIMIT`` is added when missing and lowered when larger than the configured maximum
   (:func:`pcm.sparql.rewrite.bound_limit`). The time limit is the query runner's
   (:mod:`pcm.query_safety`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import pyoxigraph as ox

from pcm.errors import QueryError
from pcm.namespaces import PREFIXES
from pcm.sparql.lexer import Token
from pcm.sparql.query import FORMS, QueryShape, parse, query_shape
from pcm.sparql.rewrite import bound_limit, expand_hierarchy_paths

#: Longest query text accepted (a generated query is a few hundred characters; this only stops garbage).
MAX_QUERY_CHARS = 20_000

_UPDATE_WORDS = frozenset({"INSERT", "DELETE", "CLEAR", "DROP", "CREATE", "ADD", "MOVE", "COPY", "WITH"})


class QueryRefused(QueryError):
    """A query the checker will not run. ``kind`` says why, for the repair loop and for tests:
    ``syntax``, ``form``, ``update``, ``load``, ``service``, ``path`` or ``size``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


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
    tokens = parse(sparql).tokens
    refuse_keywords(tokens)
    form = _form(tokens)
    text = with_prefixes(sparql, tokens, {**PREFIXES, **(prefixes or {})})
    _parse(text, base_iri, added_lines=text.count("\n") - sparql.count("\n"))
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
    """Refuse anything but SELECT/ASK/CONSTRUCT/DESCRIBE, updates, SERVICE and LOAD; returns the query form."""
    return check_query(sparql, policy=False).form


def expand_hierarchy(safe: SafeQuery, closure: Callable[[str, str], frozenset[str]]) -> SafeQuery:
    """The checked query with its ontology hierarchy paths expanded (:func:`pcm.sparql.rewrite.expand_hierarchy_paths`);
    ``safe`` itself when nothing applies. The caller checks the result again."""
    text = expand_hierarchy_paths(safe.text, closure)
    if text is safe.text:
        return safe
    return SafeQuery(text=text, form=safe.form, original=safe.original,
                     notes=[*safe.notes, "ontology hierarchy paths expanded to VALUES of the ontology's closure"])


def refuse_keywords(tokens: Sequence[Token]) -> None:
    """Refuse ``SERVICE``, ``LOAD`` and the update keywords wherever they appear as keywords."""
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


def _form(tokens: Sequence[Token]) -> str:
    for token in tokens:
        if token.is_word(*FORMS):
            return token.upper
        if token.kind == "word" and token.upper not in ("PREFIX", "BASE"):
            break
    raise QueryRefused("form", "not a SPARQL query: expected SELECT, ASK, CONSTRUCT or DESCRIBE")


def with_prefixes(text: str, tokens: Sequence[Token], known: Mapping[str, str]) -> str:
    """Declare the known prefixes a query uses without declaring them (models often forget ``PREFIX rdfs:``).

    The one place every face's query gets its predeclared prefixes (``Memory.sparql``, so the CLI, MCP and the
    HTTP API alike): ``tokens`` are the lexer's, so the word PREFIX inside a string, an IRI or a comment is not
    taken for a declaration, and a query that declares some prefixes still gets the others it uses. One line is
    added per prefix, before the query's first line."""
    declared: set[str] = set()
    used: set[str] = set()
    for i, token in enumerate(tokens):
        if token.is_word("PREFIX") and i + 1 < len(tokens) and tokens[i + 1].kind == "pname":
            declared.add(tokens[i + 1].text.split(":", 1)[0])
        elif token.kind == "pname" and (i == 0 or tokens[i - 1].upper != "PREFIX"):
            used.add(token.text.split(":", 1)[0])
    missing = sorted(p for p in used - declared if p in known)
    if not missing:
        return text
    return "".join(f"PREFIX {p}: <{known[p]}>\n" for p in missing) + text


@functools.cache
def _empty() -> ox.Store:
    return ox.Store()


#: Where the engine's parser says a syntax error is: ``at LINE:COLUMN``.
_AT = re.compile(r"\b(at )(\d+)(:\d+)")


def _parse(text: str, base_iri: str | None, *, added_lines: int = 0) -> None:
    """Oxigraph's parser is the judge of syntax. Parsing needs a store; an empty one evaluates nothing.

    ``added_lines`` is how many lines :func:`with_prefixes` put before the person's query: a syntax error is
    reported at the line of the text they wrote."""
    try:
        _empty().query(text, base_iri=base_iri)
    except SyntaxError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "invalid query"
        if added_lines:
            first = _AT.sub(lambda m: f"{m[1]}{max(1, int(m[2]) - added_lines)}{m[3]}", first)
        first = first if len(first) <= 160 else first[:159] + "…"
        raise QueryRefused("syntax", f"SPARQL syntax error: {first}") from exc
    except (RuntimeError, OSError):  # evaluation-time errors (an unknown extension function) are not syntax errors
        pass


def _refuse_runaway_paths(text: str) -> None:
    shape = query_shape(text)
    if shape is None:
        if _token_paths(parse(text).tokens):
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


def _token_paths(tokens: Sequence[Token]) -> bool:
    """Conservative fallback: a ``*`` or ``+`` right after an IRI, a prefixed name or ``a`` is a path modifier."""
    for previous, token in zip(tokens, tokens[1:], strict=False):
        if token.text in ("*", "+") and (previous.kind in ("iri", "pname") or previous.text == "a"):
            return True
    return False


__all__ = [
    "MAX_QUERY_CHARS",
    "QueryRefused",
    "SafeQuery",
    "check_query",
    "check_read_only",
    "expand_hierarchy",
    "refuse_keywords",
    "with_prefixes",
]

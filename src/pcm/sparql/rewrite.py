"""Rewrites of query text on tokens: the LIMIT bound and the ontology hierarchy expansion.

They edit spans of the original text rather than re-serialising a parse tree, so the query keeps its own layout
(the trace of ``pcm ask --explain`` shows what the model wrote, with the changes in place) and a rewrite costs
tens of microseconds; serialising rdflib's algebra back to text costs milliseconds and rewrites the whole query
(``benchmarks/bench_sparql_parse.py``). Every rewritten query goes through the checks again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from pcm.namespaces import PREFIXES
from pcm.sparql.lexer import Token, apply_edits, expand
from pcm.sparql.query import parse

_RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
_RDFS = "http://www.w3.org/2000/01/rdf-schema#"
_STATEMENT_END = frozenset({"FILTER", "OPTIONAL", "BIND", "MINUS", "VALUES", "GRAPH", "UNION"})


def bound_limit(text: str, max_limit: int) -> tuple[str, str]:
    """Add ``LIMIT max_limit`` to the outer query, or lower a larger one; returns (text, note or "")."""
    tokens = parse(text).tokens
    limits = [
        i for i, t in enumerate(tokens)
        if t.is_word("LIMIT") and t.depth == 0 and i + 1 < len(tokens) and tokens[i + 1].kind == "number"
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
    trailing = [t for t in tokens if t.is_word("VALUES") and t.depth == 0 and closed and closed[0] < t.start]
    if trailing:
        at = trailing[-1].start
        return text[:at] + f"LIMIT {max_limit}\n" + text[at:], f"LIMIT {max_limit} added"
    return text.rstrip() + f"\nLIMIT {max_limit}\n", f"LIMIT {max_limit} added"


def expand_hierarchy_paths(text: str, closure: Callable[[str, str], frozenset[str]]) -> str:
    """Replace type-first hierarchy paths over the ontology by VALUES of the ontology's own closure.

    ``?x a/rdfs:subClassOf* C`` becomes ``?x a ?_cN`` with ``VALUES ?_cN { C and its subclasses }``, and a
    statement ``?r rdfs:subPropertyOf* P`` becomes ``VALUES ?r { P and its subproperties }``. Same answers (the
    ontology graph is the loaded ontology), but the engine starts from a handful of classes instead of walking the
    hierarchy from every typed node: at 1M triples a 100 ms query becomes a few milliseconds. ``closure(kind, iri)``
    gives the reflexive closure (``kind`` is ``class`` or ``property``). Anything it does not recognise stays;
    the text comes back unchanged (the same object) when nothing applies.
    """
    query = parse(text)
    tokens = query.tokens
    prefixes = {**PREFIXES, **query.prefixes}
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
            and (after is None or after.text in (".", "}") or after.is_word(*_STATEMENT_END))
        ):
            target = _expand_term(statement[3], prefixes)
            if target:
                members = " ".join(f"<{p}>" for p in sorted(closure("property", target)))
                edits.append((statement[0].start, statement[3].end, f"VALUES {statement[0].text} {{ {members} }}"))
    if not edits:
        return text
    return apply_edits(text, edits)


def _expand_term(token: Token, prefixes: Mapping[str, str]) -> str:
    """An IRI or a prefixed name as an absolute IRI ("" for anything else, relative IRIs included)."""
    value = expand(token, prefixes)
    return value if ":" in value else ""


def _subclass_path(tokens: Sequence[Token], i: int, prefixes: Mapping[str, str]) -> bool:
    first, slash, sub, star, obj = tokens[i : i + 5]
    is_type = first.text == "a" or _expand_term(first, prefixes) == _RDF + "type"
    return (is_type and slash.text == "/" and _expand_term(sub, prefixes) == _RDFS + "subClassOf"
            and star.text == "*" and obj.kind in ("iri", "pname"))


def _statement_end(tokens: Sequence[Token], i: int) -> int:
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
            or (token.depth == depth and (token.text in (".", "{") or token.is_word(*_STATEMENT_END)))
        ):
            return j
    return len(tokens) - 1


__all__ = ["bound_limit", "expand_hierarchy_paths"]

"""The one SPARQL lexer: terminals of the SPARQL 1.1 grammar (§19.8), and the token-level helpers built on them.

Every module that reads query text (the safety checks, the repair relaxations, evidence binding, the endpoint's
protocol checks) finds keywords, prefixes and literals through :func:`tokenize`, so a keyword inside a string, an
IRI or a comment is never mistaken for one and an escape is decoded the same way everywhere. It is a lexer, not a
parser: validity is the engine's parser's to decide (:mod:`pcm.sparql.check`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# Character classes of the grammar's terminals (§19.8), as regular-expression fragments. ASCII is exact; every
# non-ASCII character counts as a name character. The grammar's exact Unicode ranges (PN_CHARS_BASE and its
# extensions) make this pattern take about half a second to compile, paid by every command that reads a query; and
# a non-ASCII character outside them is only ever a syntax error (SPARQL's whitespace is ASCII), which the engine's
# parser reports, so reading it as part of a name can hide no keyword from the checks.
_NON_ASCII = "[^\\x00-\\x7f]"  # a negated class: a positive one up to U+10FFFF is what compiles slowly
_PN_CHARS_BASE = f"(?:[A-Za-z]|{_NON_ASCII})"
_PN_CHARS_U = f"(?:[A-Za-z_]|{_NON_ASCII})"
_PN_CHARS = f"(?:[A-Za-z_0-9\\-]|{_NON_ASCII})"
_PN_CHARS_DOT = f"(?:[A-Za-z_0-9\\-.]|{_NON_ASCII})"
_UCHAR = r"\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8}"
_ECHAR = r"""\\[tbnrf\\"']"""
_PLX = r"%[0-9A-Fa-f]{2}|\\[_~.\-!$&'()*+,;=/?#@%]"
_PN_PREFIX = f"{_PN_CHARS_BASE}(?:{_PN_CHARS_DOT}*{_PN_CHARS})?"
_PN_LOCAL = (
    f"(?:[A-Za-z_:0-9]|{_NON_ASCII}|{_PLX})(?:(?:[A-Za-z_0-9\\-.:]|{_NON_ASCII}|{_PLX})*"
    f"(?:[A-Za-z_0-9\\-:]|{_NON_ASCII}|{_PLX}))?"
)
_VARNAME = f"(?:[A-Za-z_0-9]|{_NON_ASCII})+"
_EXPONENT = "[eE][+-]?[0-9]+"

_TOKEN = re.compile(
    rf"""
     (?P<ws>[\x20\t\r\n]+)
    |(?P<comment>\#[^\r\n]*)
    |(?P<string>\"\"\"(?:(?:"|"")?(?:[^"\\]|{_ECHAR}|{_UCHAR}))*\"\"\"
               |'''(?:(?:'|'')?(?:[^'\\]|{_ECHAR}|{_UCHAR}))*'''
               |"(?:[^"\\\n\r]|{_ECHAR}|{_UCHAR})*"
               |'(?:[^'\\\n\r]|{_ECHAR}|{_UCHAR})*')
    |(?P<iri><(?:[^<>"{{}}|^`\\\x00-\x20]|{_UCHAR})*>)
    |(?P<var>[?$]{_VARNAME})
    |(?P<lang>@[a-zA-Z]+(?:-[a-zA-Z0-9]+)*)
    |(?P<dtype>\^\^)
    |(?P<number>[+-]?(?:[0-9]+\.[0-9]*{_EXPONENT}|\.[0-9]+{_EXPONENT}|[0-9]+{_EXPONENT}|[0-9]*\.[0-9]+|[0-9]+))
    |(?P<bnode>_:(?:[A-Za-z_0-9]|{_NON_ASCII})(?:{_PN_CHARS_DOT}*{_PN_CHARS})?)
    |(?P<pname>(?:{_PN_PREFIX})?:(?:{_PN_LOCAL})?)
    |(?P<word>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<punct>\|\||&&|!=|<=|>=|[{{}}()\[\].,;*+?/|!=<>^-])
    |(?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)


@dataclass(frozen=True)
class Token:
    """One SPARQL token: its kind (``string``, ``iri``, ``var``, ``lang``, ``dtype``, ``number``, ``bnode``,
    ``pname``, ``word``, ``punct`` or ``other``), text and span in the query."""

    kind: str
    text: str
    start: int
    end: int
    depth: int
    """Brace depth at the token (``{`` itself has the outer depth)."""

    @property
    def upper(self) -> str:
        return self.text.upper()

    def is_word(self, *words: str) -> bool:
        """A keyword (or function name) among ``words`` (upper case), case-insensitively as SPARQL reads them."""
        return self.kind == "word" and self.upper in words


def tokenize(text: str) -> list[Token]:
    """Tokens without whitespace and comments. A character no terminal matches becomes an ``other`` token, so any
    text tokenizes (the engine's parser reports the error)."""
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


#: Longest text whose keywords are cached (a cache of huge texts would hold their memory).
_CACHED_TEXT = 16 * 1024


def keywords(text: str) -> frozenset[str]:
    """The words of a query or update in upper case (keywords and function names; never the inside of a string,
    an IRI, a prefixed name, a variable or a comment). Cached per text: clients send the same queries again."""
    return _keywords(text) if len(text) <= _CACHED_TEXT else _words(text)


@functools.lru_cache(maxsize=1024)
def _keywords(text: str) -> frozenset[str]:
    return _words(text)


def _words(text: str) -> frozenset[str]:
    """The ``word`` tokens of :func:`tokenize`, read from the matches without building the tokens (a front checks
    every query it forwards, most of them new texts the cache has not seen)."""
    return frozenset(match.group().upper() for match in _TOKEN.finditer(text) if match.lastgroup == "word")


# ------------------------------------------------------------------------------------------------ values of tokens

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "b": "\b", "f": "\f", '"': '"', "'": "'", "\\": "\\"}
_ESCAPE = re.compile(r"\\(u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|[tbnrf\\\"'])")
_LOCAL_ESCAPE = re.compile(r"\\([_~.\-!$&'()*+,;=/?#@%])")


def _unescape(match: re.Match[str]) -> str:
    code = match.group(1)
    if code[0] in "uU":
        return chr(int(code[1:], 16))
    return _ESCAPES[code]


def string_value(text: str) -> str:
    """The lexical value of a ``string`` token: quotes removed, ECHAR and UCHAR escapes decoded."""
    body = text[3:-3] if text[:3] in ('"""', "'''") else text[1:-1]
    return _ESCAPE.sub(_unescape, body)


def iri_value(text: str) -> str:
    """The IRI of an ``iri`` token, UCHAR escapes decoded (relative IRIs stay relative)."""
    return _ESCAPE.sub(_unescape, text[1:-1])


def unescape_local(text: str) -> str:
    """A prefixed name's local part with its reserved-character escapes (``\\.``, ``\\?``...) decoded."""
    return _LOCAL_ESCAPE.sub(r"\1", text)


def declared_prefixes(tokens: Sequence[Token]) -> dict[str, str]:
    """``PREFIX p: <iri>`` declarations of a query, in order (a later one wins, as in the grammar)."""
    out: dict[str, str] = {}
    for i in range(len(tokens) - 2):
        if tokens[i].is_word("PREFIX") and tokens[i + 1].kind == "pname" and tokens[i + 2].kind == "iri":
            out[tokens[i + 1].text.split(":", 1)[0]] = iri_value(tokens[i + 2].text)
    return out


def expand(token: Token, prefixes: Mapping[str, str]) -> str:
    """The IRI an ``iri`` or ``pname`` token names ("" for other tokens and undeclared prefixes); ``a`` is not
    expanded (callers that mean rdf:type check for it)."""
    if token.kind == "iri":
        return iri_value(token.text)
    if token.kind == "pname":
        prefix, _, local = token.text.partition(":")
        base = prefixes.get(prefix)
        return base + unescape_local(local) if base is not None else ""
    return ""


# ------------------------------------------------------------------------------------------------ spans of tokens


def matching(tokens: Sequence[Token], i: int, open_: str, close: str) -> int | None:
    """Index of the token closing the bracket at ``i`` (None when ``i`` is not ``open_`` or it never closes)."""
    if i >= len(tokens) or tokens[i].text != open_:
        return None
    level = 0
    for j in range(i, len(tokens)):
        if tokens[j].text == open_:
            level += 1
        elif tokens[j].text == close:
            level -= 1
            if level == 0:
                return j
    return None


def group_close(tokens: Sequence[Token], i: int) -> int:
    """Index of the ``}`` closing the group that holds token ``i`` (the last token when none does)."""
    depth = tokens[i].depth
    for j in range(i + 1, len(tokens)):
        if tokens[j].text == "}" and tokens[j].depth == depth - 1:
            return j
    return len(tokens) - 1


def filters(tokens: Sequence[Token]) -> list[tuple[int, int]]:
    """Token index spans of FILTER constraints: ``FILTER (...)``, ``FILTER f(...)``, ``FILTER [NOT] EXISTS {...}``."""
    spans: list[tuple[int, int]] = []
    for i, token in enumerate(tokens):
        if not token.is_word("FILTER") or i + 1 >= len(tokens):
            continue
        j = i + 1
        if tokens[j].is_word("NOT"):
            j += 1
        if j < len(tokens) and tokens[j].is_word("EXISTS"):
            end = matching(tokens, j + 1, "{", "}")
        elif j < len(tokens) and tokens[j].text == "(":
            end = matching(tokens, j, "(", ")")
        elif j + 1 < len(tokens) and tokens[j + 1].text == "(":
            end = matching(tokens, j + 1, "(", ")")
        else:
            continue
        if end is not None:
            spans.append((i, end))
    return spans


def apply_edits(text: str, edits: Sequence[tuple[int, int, str]]) -> str:
    """Replace character spans ``(start, end, new)`` of ``text``, back to front so earlier offsets stay valid."""
    for start, end, new in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        text = text[:start] + new + text[end:]
    return text


__all__ = [
    "Token",
    "apply_edits",
    "declared_prefixes",
    "expand",
    "filters",
    "group_close",
    "iri_value",
    "keywords",
    "matching",
    "string_value",
    "tokenize",
    "unescape_local",
]

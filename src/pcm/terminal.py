"""Stored text as a terminal shows it: control characters and bidi overrides escaped, never obeyed.

An utterance is whatever someone typed or pasted. Printed raw, an escape sequence (``ESC [2K``, a carriage return)
or a right-to-left override (U+202E) would rewrite what the line appears to say, and a newline would forge a record
of its own. Every human printer of the CLI goes through :func:`printable` (or :func:`echo`); ``--json`` output does
not, since JSON keeps the text exact and escapes C0 controls itself.
"""

from __future__ import annotations

import re

import click

#: C0 and C1 controls (tab excepted), DEL, bidi marks, embeddings, overrides and isolates, line and paragraph
#: separators, and lone surrogates (not characters: a terminal cannot even encode them).
_OTHERS = r"\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff"
_UNSAFE_LINE = re.compile(rf"[\x00-\x08\x0a-\x1f{_OTHERS}]")
_UNSAFE_BLOCK = re.compile(rf"[\x00-\x08\x0b-\x1f{_OTHERS}]")
_NAMED = {"\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object, *, newlines: bool = False) -> str:
    """``text`` with every character that could move the cursor or reorder the line written as an escape
    (``\\x1b``, ``\\u202e``, ``\\n``); ``newlines`` keeps line feeds, for blocks that are several lines by design."""
    return (_UNSAFE_BLOCK if newlines else _UNSAFE_LINE).sub(_escape, str(text))


def echo(text: object = "", *, newlines: bool = False, err: bool = False, nl: bool = True) -> None:
    """``click.echo`` of :func:`printable` text: the one way human output reaches the terminal."""
    click.echo(printable(text, newlines=newlines), err=err, nl=nl)


__all__ = ["echo", "printable"]

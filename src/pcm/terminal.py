"""Stored text as a terminal shows it: control characters and bidi overrides escaped, never obeyed.

An utterance is whatever someone typed or pasted. Printed raw, an escape sequence (``ESC [2K``, a carriage return)
or a right-to-left override (U+202E) would rewrite what the line appears to say, and a newline would forge a record
of its own. Every human printer of the CLI goes through :func:`printable` (or :func:`echo`); ``--json`` output does
not, since JSON keeps the text exact and escapes C0 controls itself.
"""

from __future__ import annotations

import re
import sys
import time
from types import TracebackType

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


class LineProgress:
    """Progress on a stderr that is not a terminal (a log file, a pipe, a job runner): one plain line every
    ``every`` seconds, and one at the end if any was written, where a progress bar would write nothing at all (or
    carriage returns into a log). Work that ends sooner prints nothing. The part of tqdm's interface the CLI uses:
    ``update``, ``total``, ``n``, ``refresh`` and the context manager."""

    def __init__(self, total: int | None, desc: str, *, every: float = 30.0, unit: str = "utt") -> None:
        self.total, self.n, self.desc, self.unit = total, 0, desc, unit
        self._every = every
        self._started = self._shown = time.monotonic()
        self._lines = 0

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._lines and kind is None:
            self._line("done")

    def update(self, count: int = 1) -> None:
        self.n += count
        now = time.monotonic()
        if now - self._shown >= self._every:
            self._shown = now
            self._line("")

    def refresh(self) -> None:
        """Nothing to redraw: lines are written as the work goes."""

    def _line(self, state: str) -> None:
        self._lines += 1
        of = f"/{self.total}" if self.total else ""
        share = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
        elapsed = time.monotonic() - self._started
        tail = f", {state}" if state else ""
        print(f"{self.desc}: {self.n}{of} {self.unit}{share} after {elapsed:.0f} s{tail}", file=sys.stderr, flush=True)

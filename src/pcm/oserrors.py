"""Which failures are the machine's refusals (a full disk, a quota, permissions, a read-only file system, memory
run out) and so a :class:`~pcm.errors.ResourceError`, and which are bugs that must keep their traceback.

The refusal does not always come as an ``OSError`` with its ``errno``: pyoxigraph hands RocksDB's failures over as
an ``OSError`` whose only trace of the cause is the text ("IO error: No space left on device: While appending to
file: ..."), and LanceDB as a ``RuntimeError`` ending in Rust's "(os error 28)". So an error without an errno is
read for the system's own wording of one of the refusals; an ``OSError`` with any other errno (a file not found,
a bad descriptor) is left alone, as is every other exception.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pcm.errors import ResourceError

#: The refusals, each with the words the one-line message starts with.
REFUSALS: dict[int, str] = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EROFS: "the file system is read-only",
}
#: The refusals that mean storage ran out (HTTP 507 rather than 500).
STORAGE_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})

_RUST_IO = re.compile(r"\(os error (\d+)\)")
_DETAIL_CHARS = 300


def resource_error(exc: BaseException) -> ResourceError | None:
    """``exc`` as a :class:`ResourceError` if it is one of the machine's refusals, else None (re-raise it)."""
    if isinstance(exc, ResourceError):
        return exc
    if isinstance(exc, MemoryError):
        detail = _one_line(str(exc))
        # also pyoxigraph's parser at its 16 MB token buffer ("Reached the buffer maximal size of 16777216")
        return ResourceError("out of memory" + (f" ({detail[:_DETAIL_CHARS]})" if detail else "")
                             + ": the operation needed more memory than it could get")
    if isinstance(exc, OSError) and exc.errno is not None:
        code: int | None = exc.errno if exc.errno in REFUSALS else None
    elif isinstance(exc, OSError | RuntimeError):
        code = refusal_named_in(str(exc))
    else:
        code = None
    if code is None:
        return None
    return ResourceError(f"{REFUSALS[code]} ({_detail(exc)})", storage_full=code in STORAGE_FULL)


def refusal_named_in(text: str) -> int | None:
    """The refusal whose errno (Rust's "(os error N)") or system wording ("No space left on device") ``text``
    carries, or None."""
    for match in _RUST_IO.finditer(text):
        if int(match.group(1)) in REFUSALS:
            return int(match.group(1))
    for code in REFUSALS:
        if os.strerror(code) in text:
            return code
    return None


def refused_in_text(text: str) -> ResourceError | None:
    """A :class:`ResourceError` for an error that crossed a process boundary as text (a SPARQL server's 5xx answer
    naming a full disk), or None."""
    code = refusal_named_in(text)
    if code is None:
        return None
    return ResourceError(f"{REFUSALS[code]} ({_one_line(text)[:_DETAIL_CHARS]})", storage_full=code in STORAGE_FULL)


@contextmanager
def resource_errors(note: Callable[[], str] | None = None) -> Iterator[None]:
    """Inside the block, a refusal of the machine's is raised as a :class:`ResourceError`, followed by ``note()``
    (what the block had done when it stopped); any other error passes unchanged."""
    try:
        yield
    except (OSError, MemoryError, RuntimeError, ResourceError) as exc:
        error = resource_error(exc)
        if error is None:
            raise
        if note is not None:
            error = error.after(note())
        if error is exc:
            raise
        raise error from exc


def _detail(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno is not None and exc.strerror:
        text = exc.strerror + (f": {exc.filename}" if exc.filename else "")
    else:
        text = str(exc)
    return _one_line(text)[:_DETAIL_CHARS]


def _one_line(text: str) -> str:
    return " ".join(text.split())

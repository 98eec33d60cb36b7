"""Errors the user can act on: one model for every face.

Each class carries what every face shows for it: the CLI prints ``pcm: error: <line>`` and exits with
``exit_code``; the HTTP API answers ``{"error": <line>}`` with ``http_status``; MCP returns a tool error whose text
is the line; Python raises the error itself, whose ``str`` is the line. :func:`one_line` is that line, so a face
never builds its own wording.
"""

from __future__ import annotations


class PcmError(Exception):
    """Base class: a clear, one-line message for the person at the keyboard."""

    exit_code = 1
    #: The HTTP status a JSON API answer carries for this error (whose fault it was: 4xx the caller's, 5xx ours).
    http_status = 500

    @property
    def line(self) -> str:
        """The message as one line, as every face shows it."""
        return one_line(str(self))


def one_line(message: str) -> str:
    """``message`` with its line breaks and runs of spaces folded into single spaces."""
    return " ".join(message.split())


class UsageError(PcmError):
    """The command was given something it cannot use (bad flag combination, unknown format)."""

    exit_code = 2
    http_status = 400


class OutOfRange(UsageError):
    """A number outside the bounds :mod:`pcm.limits` sets for it (``k`` of recall or ask, a row limit)."""


class MemoryClosedError(UsageError):
    """A memory, or its store, was used after ``close()``: open it again."""


class InputError(PcmError):
    """An input file, utterance or request body is malformed, too long, or names what the memory lacks; nothing
    was written."""

    exit_code = 3
    http_status = 400


class InputTooLarge(InputError):
    """An input is over a size limit (bytes, triples, a literal's length): the same exit code as any bad input;
    over HTTP, 413 rather than 400."""

    http_status = 413


class BadIri(InputError):
    """Text given as an IRI (``pcm why``, ``pcm history``, an entity page) that is not one, nor a CURIE or
    ``m:slug`` this memory can expand."""


class BadTime(InputError):
    """A date or time that cannot be read (an ``as_of``, ``--at``, ``since`` / ``until``, a message time)."""


class BadText(InputError):
    """Text that cannot be stored or printed: a byte that is not UTF-8, or a lone surrogate."""


class NotFound(InputError):
    """A message, session or fact named by the caller that this memory does not hold (nothing was changed).
    Over HTTP, 404."""

    http_status = 404


class MemoryLockedError(PcmError):
    """Another process holds the memory: its store lock, or a ``pcm serve`` that refuses a write without its token."""

    exit_code = 4
    http_status = 403


class TokenRefused(MemoryLockedError):
    """A write to a memory ``pcm serve`` holds, without the token the server was started with (or a wrong one).
    Over HTTP, 401 (403 when the server takes no writes at all: :class:`WritesOff`)."""

    http_status = 401


class WritesOff(MemoryLockedError):
    """A write to a ``pcm serve`` started without a token: it takes no writes at all."""


def write_refusal(*, takes_writes: bool) -> MemoryLockedError:
    """The one refusal of a write without the server's token, whichever face sent it: the CLI (before it sends
    anything), the HTTP API, MCP over HTTP."""
    if not takes_writes:
        return WritesOff("this pcm serve is read-only, it takes no writes: start it with --token (or PCM_TOKEN) "
                         "to allow them")
    return TokenRefused(
        "writes need the token `pcm serve` was started with: set PCM_TOKEN (over HTTP, send 'Authorization: "
        "Bearer <token>')"
    )


class MemoryVersionError(PcmError):
    """The memory was written by a newer pcm, indexed with another embedding model, needs ontology migrations, or
    its ``memory.toml`` was edited by hand."""

    exit_code = 5


class OntologyMigrationNeeded(MemoryVersionError):
    """The memory's ontology differs from this pcm's (version or content): it is read-only until
    ``pcm ontology migrate`` runs. Same exit code as the other version mismatches."""


class StorePermissionError(PcmError):
    """A SPARQL server refused a request because the account may not do it (no credentials, or a user without the
    right): "permission denied", whatever the server's own wording (Virtuoso answers 400 or 500, not 403)."""


class MemoryNotFoundError(PcmError):
    """No memory at the given path (run ``pcm init``)."""

    exit_code = 6


class ValidationError(PcmError):
    """RDF failed SHACL validation or the vocabulary check; nothing was written."""

    exit_code = 7
    http_status = 400

    def __init__(self, message: str, report: str = "") -> None:
        super().__init__(message)
        self.report = report


class QueryError(PcmError):
    """A SPARQL query was refused (not read-only, SERVICE, ...) or failed to run."""

    exit_code = 8
    http_status = 400


class QueryTimeout(QueryError):
    """A query ran past its time limit and was stopped: the server's state, not the query's text, so over HTTP 503."""

    http_status = 503


class LLMError(PcmError):
    """The language model could not be reached or answered unusably."""

    exit_code = 9


class ResourceError(PcmError):
    """The machine refused, not the input: the disk or the quota is full, a file may not be written (permissions,
    a read-only file system), or memory ran out. The message says what was done before it stopped; free the
    resource and run the command again. Over HTTP, 507 when storage is full, 500 otherwise."""

    exit_code = 10

    def __init__(self, message: str, *, storage_full: bool = False) -> None:
        super().__init__(message)
        self.storage_full = storage_full
        self.http_status = 507 if storage_full else 500

    def after(self, note: str) -> ResourceError:
        """The same refusal with what the interrupted operation had done (``note``) after its reason."""
        return ResourceError(f"{self}; {note}", storage_full=self.storage_full)


def error_for(exit_code: int, http_status: int, message: str) -> PcmError:
    """The error a client of ``pcm serve`` raises for the server's JSON error (its line, its exit code and its
    status): the class the server raised, as near as the two numbers tell, so a command that went through the
    server fails with the same line and exit code as one that did not."""
    refined: dict[tuple[int, int], type[PcmError]] = {
        (3, 413): InputTooLarge, (3, 404): NotFound, (8, 503): QueryTimeout, (4, 401): TokenRefused, (4, 403): WritesOff,
    }
    by_code: dict[int, type[PcmError]] = {
        2: UsageError, 3: InputError, 4: MemoryLockedError, 5: MemoryVersionError, 6: MemoryNotFoundError,
        7: ValidationError, 8: QueryError, 9: LLMError,
    }
    if exit_code == 10:
        return ResourceError(message, storage_full=http_status == 507)
    cls = refined.get((exit_code, http_status)) or by_code.get(exit_code, PcmError)
    return cls(message)

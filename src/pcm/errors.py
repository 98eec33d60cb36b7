"""Errors the user can act on. The CLI prints ``str(error)`` as one line and exits with ``exit_code``."""

from __future__ import annotations


class PcmError(Exception):
    """Base class: a clear, one-line message for the person at the keyboard."""

    exit_code = 1


class UsageError(PcmError):
    """The command was given something it cannot use (bad flag combination, unknown format)."""

    exit_code = 2


class MemoryClosedError(UsageError):
    """A memory, or its store, was used after ``close()``: open it again."""


class InputError(PcmError):
    """An input file, utterance or request body is malformed, too long, or names what the memory lacks; nothing
    was written."""

    exit_code = 3


class InputTooLarge(InputError):
    """An input is over a size limit (bytes, triples, a literal's length): the same exit code as any bad input;
    over HTTP, 413 rather than 400."""


class MemoryLockedError(PcmError):
    """Another process holds the memory: its store lock, or a ``pcm serve`` that refuses a write without its token."""

    exit_code = 4


class MemoryVersionError(PcmError):
    """The memory was written by a newer pcm, indexed with another embedding model, needs ontology migrations, or
    its ``memory.toml`` was edited by hand."""

    exit_code = 5


class OntologyMigrationNeeded(MemoryVersionError):
    """The memory's ontology differs from this pcm's (version or content): it is read-only until
    ``pcm ontology migrate`` runs. Same exit code as the other version mismatches."""


class MemoryNotFoundError(PcmError):
    """No memory at the given path (run ``pcm init``)."""

    exit_code = 6


class ValidationError(PcmError):
    """RDF failed SHACL validation or the vocabulary check; nothing was written."""

    exit_code = 7

    def __init__(self, message: str, report: str = "") -> None:
        super().__init__(message)
        self.report = report


class QueryError(PcmError):
    """A SPARQL query was refused (not read-only, SERVICE, ...) or failed to run."""

    exit_code = 8


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

    def after(self, note: str) -> ResourceError:
        """The same refusal with what the interrupted operation had done (``note``) after its reason."""
        return ResourceError(f"{self}; {note}", storage_full=self.storage_full)

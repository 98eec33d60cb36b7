"""The bounds every face applies to what it is asked, defined once.

The CLI, the HTTP API, MCP and the Python API all call :class:`pcm.memory.Memory`, which checks these bounds with
:func:`check_bounds`; the HTTP models and the MCP tool schemas describe them from the same constants (their
``minimum``/``maximum``), so a client reads the limits it is held to. Kept free of heavy imports: the CLI reads it
at start.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pcm.errors import OutOfRange

if TYPE_CHECKING:
    from pydantic import JsonValue


@dataclass(frozen=True)
class Bounds:
    """An inclusive range for one number, its default, and the name a refusal calls it by."""

    name: str
    low: int
    high: int
    default: int

    def check(self, value: object) -> int:
        """``value`` when it is a whole number in range; else :class:`OutOfRange` with one line saying the range."""
        if isinstance(value, bool) or not isinstance(value, int) or not self.low <= value <= self.high:
            raise OutOfRange(f"{self.name} must be a whole number from {self.low} to {self.high}, got {value!r}")
        return value

    def schema(self) -> dict[str, JsonValue]:
        """The bounds as JSON Schema keywords, for a model field that leaves the check to the facade."""
        return {"minimum": self.low, "maximum": self.high}


#: How many stored messages recall returns.
RECALL_K = Bounds("k (messages to recall)", 1, 1000, 10)
#: How many stored messages ask considers when the graph has no answer.
ASK_K = Bounds("k (messages to consider)", 1, 100, 5)
#: How many rows a SPARQL query returns (a face's own cap; the memory's ``PCM_QUERY_LIMIT`` applies too).
SPARQL_ROWS = Bounds("limit (rows)", 1, 10_000, 100)
#: How many messages or facts one page of a listing holds.
PAGE_SIZE = Bounds("limit (items per page)", 1, 1000, 50)
#: Where a page of a listing starts (how many items come before it).
PAGE_OFFSET = Bounds("offset", 0, 1_000_000_000, 0)

#: The largest dump (bytes) MCP's ``export`` tool returns as text: a bigger memory is refused in one line that points
#: to ``pcm export`` and ``GET /api/export``, which stream no such cap (an assistant's context holds far less).
MCP_EXPORT_BYTES = 8 * 1024 * 1024


__all__ = ["ASK_K", "MCP_EXPORT_BYTES", "PAGE_OFFSET", "PAGE_SIZE", "RECALL_K", "SPARQL_ROWS", "Bounds"]

"""The dataset layout: the name of every graph of one memory (docs/DESIGN.md §3).

A memory's graphs share one prefix. Memories made before the layout was recorded, and every embedded memory (an
embedded store holds one memory), use the fixed prefix ``urn:pcm:graph:``; a memory made on a SPARQL server gets
its id in the prefix (``urn:pcm:memory:<id>:graph:``), so several memories can share one server and each query is
scoped to one memory's graphs by that prefix alone (:mod:`pcm.scope`). ``memory.toml`` records which (``layout``).

The SPARQL pcm ships never spells a graph name: it writes placeholders (:data:`CONVERSATION`, ``{{graph:history}}``,
``{{prefix:extraction}}``, ...) that :meth:`DatasetLayout.render` fills where the text meets the store (the
backend's ``query`` and ``update``). Python code that needs a graph as a value asks the memory's layout.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: ``memory.toml``'s ``layout`` values: the fixed legacy names, or names carrying the memory id.
LEGACY = "fixed"
BY_ID = "memory-id"
LAYOUTS = (LEGACY, BY_ID)

LEGACY_PREFIX = "urn:pcm:graph:"
_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")

#: Placeholders for pcm's own SPARQL text; :meth:`DatasetLayout.render` turns them into IRIs or string literals.
ONTOLOGY = "{{graph:ontology}}"
CONVERSATION = "{{graph:conversation}}"
PROVENANCE = "{{graph:provenance}}"
HISTORY = "{{graph:history}}"
EXTRACTION_PREFIX = "{{prefix:extraction}}"
IMPORT_PREFIX = "{{prefix:import}}"
#: The prefix every graph of the memory starts with (as a string literal).
GRAPH_PREFIX = "{{prefix:all}}"

_PLACEHOLDER = re.compile(r"\{\{(graph|prefix):(\w+)\}\}")
_FIXED = ("ontology", "conversation", "provenance", "history")


@dataclass(frozen=True)
class DatasetLayout:
    """Graph names of one memory. ``memory_id`` None: the legacy fixed names."""

    memory_id: str | None = None

    def __post_init__(self) -> None:
        if self.memory_id is not None and not _ID.fullmatch(self.memory_id):
            raise ValueError(f"memory id {self.memory_id!r} cannot go into a graph name")

    @classmethod
    def of(cls, kind: str, memory_id: str) -> DatasetLayout:
        """The layout ``memory.toml`` records (``kind``) for the memory ``memory_id``."""
        if kind not in LAYOUTS:
            raise ValueError(f"unknown dataset layout {kind!r}: expected one of {', '.join(LAYOUTS)}")
        return cls(memory_id if kind == BY_ID else None)

    @property
    def kind(self) -> str:
        return LEGACY if self.memory_id is None else BY_ID

    @property
    def prefix(self) -> str:
        """Every graph of this memory, and only of this memory, starts with this."""
        return LEGACY_PREFIX if self.memory_id is None else f"urn:pcm:memory:{self.memory_id}:graph:"

    @property
    def ontology(self) -> str:
        return self.prefix + "ontology"

    @property
    def conversation(self) -> str:
        return self.prefix + "conversation"

    @property
    def provenance(self) -> str:
        return self.prefix + "provenance"

    @property
    def history(self) -> str:
        return self.prefix + "history"

    @property
    def extraction_prefix(self) -> str:
        return self.prefix + "extraction:"

    @property
    def import_prefix(self) -> str:
        return self.prefix + "import:"

    @property
    def fixed_graphs(self) -> tuple[str, str, str, str]:
        """The graphs that hold no facts: ontology, conversation, provenance, history."""
        return self.ontology, self.conversation, self.provenance, self.history

    def extraction(self, key: str) -> str:
        return self.extraction_prefix + key

    def import_graph(self, key: str) -> str:
        return self.import_prefix + key

    def owns(self, graph: str) -> bool:
        return graph.startswith(self.prefix)

    def is_fact_graph(self, graph: str) -> bool:
        """An extraction or import graph: what the memory holds as facts."""
        return graph.startswith((self.extraction_prefix, self.import_prefix))

    def rehome(self, graph: str, other: DatasetLayout) -> str:
        """``graph``, named by ``other``'s layout, under this one (unchanged when ``other`` does not own it)."""
        return self.prefix + graph[len(other.prefix) :] if other.owns(graph) else graph

    def render(self, text: str) -> str:
        """Fill the graph placeholders of pcm's own SPARQL with this memory's names (text without any is returned
        as it is); an unknown placeholder is a programming error."""
        if "{{" not in text:
            return text
        return _PLACEHOLDER.sub(self._fill, text)

    def _fill(self, match: re.Match[str]) -> str:
        kind, name = match.group(1), match.group(2)
        if kind == "graph" and name in _FIXED:
            return f"<{self.prefix}{name}>"
        if kind == "prefix" and name in ("extraction", "import"):
            return f'"{self.prefix}{name}:"'
        if kind == "prefix" and name == "all":
            return f'"{self.prefix}"'
        raise KeyError(f"unknown graph placeholder {match.group(0)}")


#: The layout of every embedded memory and of memories made before the layout was recorded.
LEGACY_LAYOUT = DatasetLayout()


def layout_of_graph(graph: str) -> DatasetLayout | None:
    """The layout whose names ``graph`` follows (a dump's graphs say which memory wrote them); None for others."""
    if graph.startswith(LEGACY_PREFIX):
        return LEGACY_LAYOUT
    match = re.match(r"urn:pcm:memory:([A-Za-z0-9_-]{1,64}):graph:", graph)
    return DatasetLayout(match.group(1)) if match else None

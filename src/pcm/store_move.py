"""The store-level half of ``pcm store move``: copy one memory's quads into another store, check the copy is the
same dataset, and drop one memory's graphs from a store. :meth:`pcm.memory.Memory.move_store` drives it (which
store the memory lives in is its ``memory.toml``'s business, and the side index its own).

A move copies the dataset as it is: the graph names (the memory's layout, sealed in ``memory.toml``), the
individuals' IRIs, the ontology graph, every provenance and history quad. So an export before and after is the same
sorted N-Quads, byte for byte, and nothing needs re-homing as ``pcm import`` of another memory's dump does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import pyoxigraph as ox

from pcm.backend import Backend
from pcm.errors import PcmError
from pcm.layout import DatasetLayout
from pcm.rdfio import canonical_blank_nodes

#: Graphs dropped per update request when a memory leaves a server (one update per graph would be thousands of
#: requests; one for all of them is more SQL than Virtuoso compiles).
DROP_BATCH = 200


def canonical_lines(quads: Iterable[ox.Quad]) -> list[str]:
    """The dataset as sorted N-Quads lines, blank nodes (which each store labels its own way) canonically named."""
    return sorted(f"{q} ." for q in canonical_blank_nodes(quads))


def owned_graphs(backend: Backend, layout: DatasetLayout) -> list[str]:
    """The graphs of ``layout``'s memory that ``backend`` holds."""
    return [g for g in backend.named_graphs() if layout.owns(g)]


def copy_into(target: Backend, quads: Sequence[ox.Quad], spool: Path) -> None:
    """Write ``quads`` into ``target`` through its bulk load (one Graph Store request on Oxigraph's server, batches of
    ``INSERT DATA`` elsewhere), from an N-Quads file at ``spool`` (removed after)."""
    try:
        with spool.open("wb") as out:
            ox.serialize(quads, out, format=ox.RdfFormat.N_QUADS)
        target.bulk_load(str(spool), ox.RdfFormat.N_QUADS)
    finally:
        spool.unlink(missing_ok=True)


def check_copy(expected: list[str], target: Backend, where: str) -> None:
    """Refuse a copy that is not the dataset it was made from (a server that cut, dropped or changed a quad)."""
    found = canonical_lines(target.quads())
    if found == expected:
        return
    missing = sorted(set(expected) - set(found))
    extra = sorted(set(found) - set(expected))
    first = f"first missing: {missing[0]}" if missing else f"first unexpected: {extra[0]}"
    raise PcmError(
        f"the copy on {where} is not the memory's dataset ({len(found)} quads for {len(expected)}; {len(missing)} "
        f"missing, {len(extra)} unexpected; {first[:300]}): the memory stays where it was"
    )


def drop_graphs(backend: Backend, graphs: Sequence[str]) -> None:
    """Drop ``graphs`` from ``backend``, :data:`DROP_BATCH` to a request."""
    for start in range(0, len(graphs), DROP_BATCH):
        part = graphs[start : start + DROP_BATCH]
        backend.update(" ;\n".join(f"DROP SILENT GRAPH <{g}>" for g in part))

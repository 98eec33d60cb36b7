"""How the shapes limit a property's values (``sh:maxCount 1``, ``pcmsh:laterValuesReplace``).

Read by knowledge updates (which values a later utterance replaces) and by the prompt catalogue of
:mod:`pcm.ontology` (which properties hold one value). A module apart from :mod:`pcm.shapes` because it needs only
rdflib and the shape files, while the validator needs the ontology: the catalogue reads these limits without
importing the validator, and the validator reads the ontology without a cycle back.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import rdflib
from rdflib import Literal, URIRef
from rdflib.namespace import SH

from pcm import resources

#: Namespace of our shapes and of their annotations (``pcmsh:rule``, ``pcmsh:laterValuesReplace``).
SHAPES_NS = "https://w3id.org/pcm/shapes#"


@dataclass(frozen=True)
class ValueLimit:
    """How the shapes limit the values of one property: read by knowledge updates and shown in the prompt catalogue.

    A property shape's targets are its own or those of the node shapes that hold it (``sh:property``). Only
    ``sh:targetClass`` and ``sh:targetSubjectsOf`` the same property are understood; other targets (nodes, objects
    of something) are ignored rather than read as "everywhere".
    """

    single_for: frozenset[str] = frozenset()
    """Classes (as declared, without subclasses) whose instances hold at most one value (``sh:maxCount 1``)."""
    replace_for: frozenset[str] = frozenset()
    """Classes where a later utterance's values replace earlier ones (``pcmsh:laterValuesReplace`` only)."""
    anywhere: bool = False
    """Limited on every subject of the property (``sh:targetSubjectsOf`` it)."""
    strict: bool = False
    """Of ``anywhere``: two values in one utterance are an error (``sh:maxCount 1``, not only later-values-replace)."""

    @property
    def classes(self) -> frozenset[str]:
        return self.single_for | self.replace_for


@lru_cache(maxsize=8)
def value_limits(directory: Path | None = None) -> dict[str, ValueLimit]:
    """Property IRI -> :class:`ValueLimit` for every property a shape bounds with ``sh:maxCount 1`` or marks
    ``pcmsh:laterValuesReplace`` (``directory`` defaults to the bundled ``shapes/``; parsed once per directory)."""
    graph = rdflib.Graph()
    for file in sorted((directory or resources.shapes_dir()).glob("*.ttl")):
        graph.parse(file, format="turtle")
    replace = URIRef(SHAPES_NS + "laterValuesReplace")
    found: dict[str, tuple[set[str], set[str], list[bool]]] = {}
    for shape in set(graph.subjects(SH.path, None)):
        path = graph.value(shape, SH.path)
        limited = any(str(c) == "1" for c in graph.objects(shape, SH.maxCount))
        if not isinstance(path, URIRef) or not (limited or graph.value(shape, replace) == Literal(True)):
            continue
        single, replacing, flags = found.setdefault(str(path), (set(), set(), [False, False]))
        for owner in [shape, *graph.subjects(SH.property, shape)]:
            (single if limited else replacing).update(str(c) for c in graph.objects(owner, SH.targetClass))
            if path in set(graph.objects(owner, SH.targetSubjectsOf)):
                flags[0] = True
                flags[1] = flags[1] or limited
    return {
        p: ValueLimit(frozenset(single), frozenset(replacing - single), flags[0], flags[1])
        for p, (single, replacing, flags) in found.items()
    }

"""Triples as short sentences, the text that is embedded and compared with the question.

``<subject name> <predicate words> <object name or value>``: "Dana buys Breville Barista Express" reads close
enough to "Which espresso machine did Dana buy?" for a sentence encoder. An entity-to-post link reads as
"X mentioned in: <what was said>", so an episodic step is compared by its content.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyoxigraph as ox

from pcm.retrieval.traversal.graph import EPISODIC_LINK, GraphView
from pcm.retrieval.traversal.model import Node, Triple, predicate_words


class Verbaliser:
    def __init__(self, graph: GraphView) -> None:
        self.graph = graph
        self._predicates: dict[str, str] = {}
        self._texts: dict[Triple, str] = {}

    def texts(self, triples: Sequence[Triple]) -> list[str]:
        """One sentence per triple (names looked up in one batch for all of them)."""
        known = self._texts
        out = [known.get(t) for t in triples]
        missing = [t for t, text in zip(triples, out, strict=True) if text is None]
        if missing:
            vertices: list[Node] = []
            for t in missing:
                vertices.append(t.s)
                if isinstance(t.o, ox.NamedNode):
                    vertices.append(t.o)
            names = self.graph.labels(vertices)
            for t in missing:
                known[t] = self._sentence(t, names)
            out = [known[t] for t in triples]
        return out  # type: ignore[return-value]  # every None was filled in above

    def text(self, triple: Triple) -> str:
        return self.texts([triple])[0]

    def _sentence(self, triple: Triple, names: dict[Node, str]) -> str:
        subject = names[triple.s]
        obj = names[triple.o] if isinstance(triple.o, ox.NamedNode) else triple.o.value
        if triple.p.value == EPISODIC_LINK:
            return f"{subject} mentioned in: {obj}"
        words = self._predicates.get(triple.p.value)
        if words is None:
            words = self._predicates[triple.p.value] = predicate_words(triple.p.value)
        return f"{subject} {words} {obj}"

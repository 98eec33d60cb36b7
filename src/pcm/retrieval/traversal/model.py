"""What traversal works with and hands back: vertex kinds, walked steps, paths and the triples found.

Terms stay pyoxigraph terms from the query results to the output: they are hashable, compare by value and
render back into SPARQL with ``str()``, so a triple found by one query can be named in the next one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple

import pyoxigraph as ox

from pcm.models import Source

Node = ox.NamedNode
Value = ox.NamedNode | ox.Literal


class Kind(StrEnum):
    """The three kinds of vertex of docs/DESIGN.md §7 (after PersonalAI's object / thesis / episodic memory)."""

    OBJECT = "o"
    THESIS = "t"
    EPISODIC = "e"

    @classmethod
    def parse_many(cls, text: str | None) -> frozenset[Kind]:
        """``"o,t"`` → {OBJECT, THESIS}; also accepts the full names (``object,thesis,episodic``)."""
        from pcm.errors import UsageError

        kinds: set[Kind] = set()
        for raw in (text or "").replace(" ", "").lower().split(","):
            if not raw:
                continue
            match = next((k for k in cls if raw in (k.value, k.name.lower())), None)
            if match is None:
                raise UsageError(f"--forbid {raw!r}: expected o, t or e (object, thesis, episodic)")
            kinds.add(match)
        return frozenset(kinds)


class Triple(NamedTuple):
    """One fact: subject and predicate IRIs, an IRI or literal object."""

    s: Node
    p: Node
    o: Value

    def key(self) -> tuple[str, str, str]:
        return (self.s.value, self.p.value, str(self.o))


class Step(NamedTuple):
    """A triple walked from one vertex to the next; ``forward`` when the walk went from subject to object.

    A named tuple, not a dataclass: BeamSearch makes one per candidate triple (hundreds of thousands a question at
    depth 10), and tuples are built, hashed and compared in C."""

    triple: Triple
    forward: bool

    @property
    def source(self) -> Node:
        return self.triple.s if self.forward else self.triple.o  # type: ignore[return-value]  # walked backwards from an IRI

    @property
    def target(self) -> Value:
        return self.triple.o if self.forward else self.triple.s


@dataclass(frozen=True)
class Path:
    """A walk from ``start``; ``score`` is the algorithm's own (higher is better), ``ended`` when it stopped early."""

    algorithm: str
    start: Node
    steps: tuple[Step, ...]
    score: float = 0.0
    ended: bool = False
    goal: Node | None = None

    @property
    def vertices(self) -> list[Value]:
        return [self.start, *(s.target for s in self.steps)]

    def text(self, labels: Callable[[Sequence[ox.NamedNode]], Mapping[ox.NamedNode, str]]) -> str:
        """The walk in words (``Dana -owns-> Trek bike <-repaired- Rosewood``), ``labels`` naming its vertices."""
        names = labels([v for v in self.vertices if isinstance(v, ox.NamedNode)])
        parts = [names[self.start]]
        for step in self.steps:
            target = step.target
            name = names[target] if isinstance(target, ox.NamedNode) else f'"{target.value}"'
            words = predicate_words(step.triple.p.value)
            parts.append(f"-{words}-> {name}" if step.forward else f"<-{words}- {name}")
        return " ".join(parts)

    def as_json(self, text_of: Any = None) -> dict[str, object]:
        def term(t: Value) -> str:
            return t.value if isinstance(t, ox.NamedNode) else str(t)

        return {
            "algorithm": self.algorithm,
            "start": self.start.value,
            "goal": self.goal.value if self.goal is not None else None,
            "score": round(self.score, 6),
            "ended": self.ended,
            "steps": [
                {"s": s.triple.s.value, "p": s.triple.p.value, "o": term(s.triple.o), "forward": s.forward}
                | ({"text": text_of(s.triple)} if text_of else {})
                for s in self.steps
            ],
        }


@dataclass
class Found:
    """One retrieved triple: how it was found, the path it came from, and (once attached) its sources."""

    triple: Triple
    role: str
    """``primary`` / ``secondary`` / ``thesis`` / ``episodic`` (WaterCircles), ``path`` (BeamSearch, A*)."""
    algorithms: set[str]
    path: Path | None = None
    rank: float = 0.0
    """Order within its algorithm's output (higher first)."""
    text: str = ""
    similarity: float | None = None
    sources: list[Source] = field(default_factory=list)

    def as_json(self, text_of: Any = None) -> dict[str, object]:
        o = self.triple.o
        return {
            "s": self.triple.s.value,
            "p": self.triple.p.value,
            "o": o.value if isinstance(o, ox.NamedNode) else o.value,
            "o_is_literal": isinstance(o, ox.Literal),
            "text": self.text,
            "role": self.role,
            "algorithms": sorted(self.algorithms),
            "similarity": None if self.similarity is None else round(self.similarity, 6),
            "path": self.path.as_json(text_of) if self.path is not None else None,
            "sources": [s.as_json() for s in self.sources],  # the record every face shows (pcm.models)
        }


@dataclass
class Stats:
    """What a run cost: SPARQL queries, rows read, vertices passed, wall time."""

    queries: int = 0
    rows: int = 0
    passed: int = 0
    embedded: int = 0
    ms: float = 0.0

    def as_json(self) -> dict[str, object]:
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


@dataclass
class Result:
    """What ``retrieve`` returns: the triples in order, the paths, and notes on anything bounded or skipped."""

    question: str
    algorithm: str
    starts: list[Node]
    found: list[Found]
    paths: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    stats: Stats = field(default_factory=Stats)
    matches: list[Any] = field(default_factory=list)
    """How the start vertices were found (:class:`~pcm.retrieval.traversal.starts.StartMatch`), when they were."""

    @property
    def triples(self) -> list[Found]:
        """The triples found, best first, each with its text, path and sources."""
        return self.found

    def as_json(self, text_of: Any = None) -> dict[str, object]:
        return {
            "question": self.question,
            "algorithm": self.algorithm,
            "starts": [s.value for s in self.starts],
            "matches": [m.as_json() for m in self.matches],
            "triples": [f.as_json(text_of) for f in self.found],
            "notes": self.notes,
            "stats": self.stats.as_json(),
        }


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def predicate_words(iri: str) -> str:
    """``https://schema.org/toLocation`` → ``to location``."""
    tail = iri.rsplit("/", 1)[-1].rsplit("#", 1)[-1]
    spaced = _CAMEL.sub(" ", tail).replace("_", " ").replace("-", " ")
    return " ".join(spaced.lower().split()) or tail

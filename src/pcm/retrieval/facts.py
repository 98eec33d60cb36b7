"""Stored facts that match a question, as lines a model reads: the first fallback when no graph query answered.

Why: a small local model seldom writes the query a two-join question needs, yet it reads a fact well when the fact
is in front of it. This context is built without the model, from the graph:

* the nodes the question is about: the entities grounding matched, the nodes whose label and types lie nearest the
  question in the side index (an event such as "buying a Breville espresso machine" for "How much did I pay for
  the espresso machine?"), and the owner;
* their neighbours one hop away (the purchase that points at the machine, the clinic the vet works for), except
  around the owner, who is next to almost everything;
* each node's facts from the extraction and import graphs, labels in place of IRIs, values as answers print them
  (dates as "Tuesday 4 February 2025"), so the model copies a value rather than reformatting it.

A node with few facts becomes one line (``Biscuit (Pet): pet breed beagle; age 4; treated by Dr. Alvarez``); a
node with many (the owner) gives one line per fact. Lines are ranked by the similarity of their text to the
question (a named node's own line first among equals) and the best ``fact_lines`` (:class:`~pcm.settings.AskConfig`) are kept, each with the
utterances its facts came from, which the answer then cites.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyoxigraph as ox

from pcm.errors import PcmError
from pcm.models import Message as Said
from pcm.namespaces import RDF
from pcm.retrieval.answer import labels_for, posts_of
from pcm.retrieval.postprocess import format_term, readable_iri
from pcm.retrieval.traversal.model import predicate_words

if TYPE_CHECKING:
    from pcm.context import MemoryContext
    from pcm.retrieval.grounding import GroundedEntity
    from pcm.retrieval.traversal.vectors import TextVectors

log = logging.getLogger(__name__)

CARD_FACTS = 10
"""A node with at most this many facts is one line; above it, one line per fact."""
GROUPED = 12
"""Values shown on a gathered line (``friend of A, B, ... and 40 more (52)``)."""
ROWS = 4000
"""Cap on the fact rows read for one question."""
LINE_CHARS = 400
_TYPE = RDF + "type"
#: A predicate with one of these words reads as a verb ("colleague of", "contained in place"; :func:`_is_verb`).
_PREPOSITIONS = frozenset({"of", "by", "to", "with", "from", "for", "in", "on", "at", "about"})


@dataclass(frozen=True)
class _Fact:
    phrase: str
    value: str
    outgoing: bool
    graph: str
    other: str | None
    """The IRI at the fact's other end, when it is a node."""
    predicate: str = ""
    term: ox.NamedNode | ox.BlankNode | ox.Literal | None = None
    """The value as stored (a date's literal, for the operations that order by it)."""

    def shown(self, name: str) -> str:
        """The fact as the line of the node called ``name`` prints it: ``pet breed beagle``; pointing at the node,
        ``agent of buying the rain jacket`` when the predicate is a noun, else the whole statement (``Dana has pet
        Biscuit``)."""
        if self.outgoing:
            return f"{self.phrase} {self.value}"
        if _is_verb(self.phrase):
            return f"{self.value} {self.phrase} {name}"
        return f"{self.phrase} of {self.value}"


@dataclass
class _Node:
    iri: str
    label: str = ""
    types: list[str] = field(default_factory=list)
    facts: list[_Fact] = field(default_factory=list)
    neighbours: list[str] = field(default_factory=list)
    """The node-valued other ends of its facts (for the one-hop expansion)."""


def fact_context(
    memory: MemoryContext, question: str, entities: Sequence[GroundedEntity], vectors: TextVectors, *,
    lines: int | None = None,
) -> list[tuple[str, list[Said]]]:
    """Lines of stored facts about what ``question`` asks, best first, each with the posts it came from.

    ``entities``: what grounding matched, best first; those matched by name (score at least the ask config's
    ``named_score``) are lifted in the ranking, the looser matches only seed it. ``lines``: how many are kept (the
    config's ``fact_lines`` unless given). Empty when the memory holds no facts near the
    question.
    Two rounds: the seeds (and their neighbours), ranked; then the nodes at the other end of the best lines (the
    purchase behind "Dana: agent of buying the Breville Barista Express"), so the line that holds the answer's
    details can rank too. ``vectors``: the memory's text vectors (a :class:`TraversalEngine`'s), which the caller
    may use again on the lines.
    """
    from pcm.index.text import vector_query, without_speakers

    owner, namespace = memory.naming.owner, memory.naming.namespace
    skip = frozenset({memory.naming.assistant})
    config = memory.settings.ask
    named = [e.iri for e in entities if e.score >= config.named_score]
    seeds = list(dict.fromkeys([*[e.iri for e in entities][: config.fact_seeds], *_nearest(memory, question)]))
    nodes = _facts(memory, [*seeds, owner])
    neighbours: list[str] = []
    for seed in seeds:
        if seed in nodes and seed != owner:
            neighbours += sorted({i for i in nodes[seed].neighbours if i not in nodes and i != owner})[: config.fact_neighbours]
    nodes.update(_facts(memory, list(dict.fromkeys(neighbours))))
    # the owner's name is in most questions and most lines: ranked without it, a line's content decides
    asked = vector_query(without_speakers(question, [memory.manifest.owner]))
    lifted = set(named)
    candidates = _candidates(nodes, owner, namespace, skip)
    scores = _scores(vectors, asked, candidates, lifted, config.named_bonus)
    for _ in range(config.fact_follow_rounds):
        best = sorted(range(len(candidates)), key=lambda i: (-scores[i], candidates[i].text))[: config.fact_follow]
        parent = {o: scores[i] for i in reversed(best) for o in candidates[i].others
                  if o not in nodes and o != owner and o.startswith(namespace) and o not in skip}
        if not parent:
            break
        nodes.update(_facts(memory, list(parent)))
        candidates = _candidates(nodes, owner, namespace, skip)
        scores = _scores(vectors, asked, candidates, lifted, config.named_bonus)
        # a node read because a line pointed at it holds that line's details: it ranks at least as high
        scores = [max(sc, parent.get(c.node, sc)) for sc, c in zip(scores, candidates, strict=True)]
    ranked = sorted(range(len(candidates)), key=lambda i: (-scores[i], candidates[i].text))
    chosen = _without_repeats([candidates[i] for i in ranked], owner, config.fact_lines if lines is None else lines)
    graphs = sorted({g for c in chosen for g in c.graphs})
    by_graph = graph_posts(memory, graphs)
    posts = {p.post: p for p in posts_of(memory, sorted({p for g in graphs for p in by_graph.get(g, ())}))}
    return [
        (c.text, [posts[p] for p in sorted({p for g in c.graphs for p in by_graph.get(g, ())}) if p in posts])
        for c in chosen
    ]


def _without_repeats(ranked: Sequence[_Line], owner: str, lines: int) -> list[_Line]:
    """The best ``lines`` lines, less the owner's one-fact lines that point at a node whose own line is among
    them ("Dana: agent of buying Rumours" beside the purchase's line, which names Dana as its agent)."""
    chosen = list(ranked[:lines])
    for _ in range(len(ranked)):
        shown = {c.node for c in chosen}
        kept = [c for c in chosen if not (c.node == owner and len(c.others) == 1 and c.others[0] in shown)]
        if len(kept) == len(chosen):
            break
        extra = [c for c in ranked if c not in chosen][: lines - len(kept)]
        chosen = [c for c in ranked if c in kept or c in extra]
    return chosen


@dataclass(frozen=True)
class _Line:
    text: str
    body: str
    """What is ranked: the text without its head when the node is the owner (whose name is everywhere)."""
    graphs: frozenset[str]
    node: str
    others: tuple[str, ...]
    """Nodes at the other end of the line's facts."""


def _candidates(nodes: dict[str, _Node], owner: str, namespace: str, skip: frozenset[str]) -> list[_Line]:
    """A line per node with few facts; for a node with many, a line per fact, with a predicate's values gathered
    into one line where it has several (``Dana: has pet Biscuit, Mochi``). Only the memory's own individuals get
    lines (a vocabulary value such as ``CompletedActionStatus`` is read on the lines that use it), and not ``skip``
    (the assistant, whose facts are what it said)."""
    out: list[_Line] = []
    for node in nodes.values():
        if not node.facts or not node.iri.startswith(namespace) or node.iri in skip:
            continue
        name = head = node.label or readable_iri(node.iri)
        if node.types:
            head += f" ({', '.join(dict.fromkeys(node.types))})"

        def line(facts: Sequence[_Fact], text: str, node: _Node = node, head: str = head) -> _Line:
            others = tuple(dict.fromkeys(f.other for f in facts if f.other))
            return _Line(_cut(f"{head}: {text}"), _cut(text) if node.iri == owner else _cut(f"{head}: {text}"),
                         frozenset(f.graph for f in facts), node.iri, others)

        if len(node.facts) <= CARD_FACTS:
            out.append(line(node.facts, "; ".join(f.shown(name) for f in node.facts)))
            continue
        groups: dict[tuple[str, bool], list[_Fact]] = {}
        for fact in node.facts:
            groups.setdefault((fact.phrase, fact.outgoing), []).append(fact)
        for (phrase, outgoing), facts in groups.items():
            if not outgoing or len(facts) == 1:
                out += [line([f], f.shown(name)) for f in facts]
                continue
            values = [f.value for f in facts]
            shown = ", ".join(values[:GROUPED]) + (f" and {len(values) - GROUPED} more" if len(values) > GROUPED else "")
            out.append(line(facts[:GROUPED], f"{phrase} {shown} ({len(values)})"))
    return out


def read_nodes(memory: MemoryContext, iris: Sequence[str]) -> dict[str, _Node]:
    """The facts of ``iris`` both ways, labels in place of IRIs (what :mod:`pcm.retrieval.operations` reads)."""
    return _facts(memory, iris)


def node_line(node: _Node) -> str:
    """The node as one line (``Biscuit (Pet): pet breed beagle; age 4``), whatever its number of facts."""
    name = head = node.label or readable_iri(node.iri)
    if node.types:
        head += f" ({', '.join(dict.fromkeys(node.types))})"
    return _cut(f"{head}: {'; '.join(f.shown(name) for f in node.facts)}")


def _facts(memory: MemoryContext, iris: Sequence[str]) -> dict[str, _Node]:
    from pcm.resources import render_query
    from pcm.sparql import values_clause

    found: dict[str, _Node] = {iri: _Node(iri) for iri in iris}
    if not iris:
        return found
    query = render_query("ask/node_facts", nodes=values_clause("n", list(iris)), limit=str(ROWS))
    words: dict[str, str] = {}
    rows: list[dict[str, Any]] = memory.store.select(query).dicts()
    for row in rows:
        node = found[row["n"].value]
        p, o = row["p"].value, row["o"]
        graph = row["graph"].value
        outgoing = row["dir"].value == "out"
        if p == _TYPE:
            if outgoing and isinstance(o, ox.NamedNode):
                node.types.append(readable_iri(o.value))
            continue
        label = row["label"].value if "label" in row else None
        other = o.value if isinstance(o, ox.NamedNode) else None
        if other is not None:
            node.neighbours.append(other)
        value = label if label is not None else format_term(o)
        phrase = words.get(p) or words.setdefault(p, predicate_words(p))
        node.facts.append(_Fact(phrase, value, outgoing, graph, other, p, o))
    labels = labels_for(memory, list(found))
    for iri, node in found.items():
        node.label = labels.get(iri, "")
    return found


def _is_verb(phrase: str) -> bool:
    """Whether a predicate reads as a verb ("has pet", "owns", "contained in place", "works for"), so a fact
    pointing at the node is written whole ("Dana owns Dana's car"), not as "owns of Dana", which reads the other way
    round; a noun ("agent", "to location") reads right with "of"."""
    words = phrase.split()
    first = words[0] if words else ""
    return (
        first in {"has", "is", "was"}
        or any(w in _PREPOSITIONS for w in words)
        or (first.endswith("s") and not first.endswith(("ss", "us")))
        or first.endswith("ed")
    )


def _nearest(memory: MemoryContext, question: str) -> list[str]:
    """The side index's entities nearest the whole question (labels, label words, vectors); none without an index."""
    if not memory.settings.index_enabled:
        return []
    try:
        return [m.iri for m in memory.index.match_entities(question, memory.settings.ask.fact_seeds)]
    except (PcmError, OSError) as error:
        log.info("side index unavailable for the fact context: %s", error)
        return []


def _scores(vectors: TextVectors, asked: str, candidates: Sequence[_Line], named: set[str], bonus: float) -> list[float]:
    """Each line's similarity to the question (lines about a named node lifted by ``bonus``)."""
    if not candidates:
        return []
    scores = vectors.get([c.body for c in candidates]) @ vectors.query(asked)
    return [float(sc) + (bonus if c.node in named else 0.0) for sc, c in zip(scores.tolist(), candidates, strict=True)]


def graph_posts(memory: MemoryContext, graphs: Sequence[str]) -> dict[str, list[str]]:
    """The utterances each extraction or import graph came from (its PROV-O provenance), by graph."""
    from pcm.resources import render_query
    from pcm.sparql import values_clause

    out: dict[str, list[str]] = {}
    if not graphs:
        return out
    rows: list[dict[str, Any]] = memory.store.select(
        render_query("ask/graph_posts", graphs=values_clause("g", list(graphs)))
    ).dicts()
    for row in rows:
        out.setdefault(row["g"].value, []).append(row["post"].value)
    return out


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= LINE_CHARS else text[: LINE_CHARS - 1] + "…"


__all__ = ["fact_context", "graph_posts", "node_line", "read_nodes"]

"""A question's frame (:mod:`pcm.retrieval.frame`) answered in code on the graph: the count, total, latest,
earliest, current value, neighbour before or after an anchor, things within a time window, interval between two
events, or relatives of a kind.

Why code: a small model reads a frame well and computes badly (it counted other people's pets, summed the wrong
purchases, named the older purchase as the latest). Each operation selects its nodes with one query form of
``queries/ask/frame_*.rq`` (members of a class, dated nodes, a subject's values; relatives through
``kin.rq``, priced actions through ``actions.rq``), reads their facts, and works the answer out deterministically,
naming what it rests on so a wrong pick shows; the answer cites the utterances of the graphs it used. Whatever an
operation cannot settle (no such class in the memory, an anchor matched twice, no date) returns None, and the
question goes on to the stored facts, the graph query and episodic recall as any question does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from typing import TYPE_CHECKING, Any

import pyoxigraph as ox

from pcm.namespaces import SCHEMA
from pcm.retrieval.actions import NOT_DONE, actions_of, latest_action, total_of
from pcm.retrieval.facts import node_line, read_nodes
from pcm.retrieval.frame import Frame
from pcm.retrieval.intervals import between
from pcm.retrieval.kinship import relatives_answer
from pcm.retrieval.postprocess import difference, format_date, format_duration
from pcm.retrieval.worked import Worked, content_words, person

if TYPE_CHECKING:
    from pcm.context import MemoryContext
    from pcm.ontology import Ontology
    from pcm.retrieval.grounding import GroundedEntity
    from pcm.retrieval.traversal.vectors import TextVectors

ROWS = 400
"""Nodes read for one operation."""
ABOUT_ROWS = 100_000
"""Nodes counted as about a subject (its neighbours, and theirs): 12,199 for the owner of a 1.1M-quad benchmark
memory, read in 0.7 s."""
MIN_MATCH = 0.3
"""Least cosine between an anchor and the line of the event it names (as :mod:`pcm.retrieval.intervals`)."""
MARGIN = 0.1
"""How much better the chosen event's line must match than the next one."""
TYPED_MATCH = 0.15
"""Least cosine when the candidates are of the class the question names (fewer, and all of the asked kind)."""
HOLDING_MARGIN = 0.02
"""How much better by meaning one of several cards that hold every word of the anchor must match."""
#: Datatypes of a date a node is about; partial ones (a month, a year) order as their first day.
_DATE_TYPES = {"http://www.w3.org/2001/XMLSchema#" + t for t in ("date", "dateTime", "gYearMonth", "gYear")}
_DATE_RANGES = _DATE_TYPES | {SCHEMA + "Date", SCHEMA + "DateTime"}
_CONTAINED = SCHEMA + "containedInPlace"
_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
_STATUS = SCHEMA + "actionStatus"
_ACTION = SCHEMA + "Action"
_PEOPLE = (SCHEMA + "Person", "http://xmlns.com/foaf/0.1/Person")
SHOWN_COUNTED = 5
"""Counted nodes shown whole beside a count (more are named only)."""
NOT_STORED = "Not in memory:"
"""How an operation's answer begins when the graph shows the fact asked was never stored."""


@dataclass(frozen=True)
class Card:
    """A node an operation chooses among: its line, the date it is about, its links and graphs."""

    iri: str
    label: str
    line: str
    day: date | None
    """The date the node is about: a start date first, else any date it carries (a month or year as its first
    day)."""
    full: bool
    """``day`` is a calendar day, not a month or a year."""
    end: date | None
    types: frozenset[str]
    others: frozenset[str]
    graphs: frozenset[str]
    status: str
    end_full: bool = False
    """``end`` is a calendar day."""

    @property
    def done(self) -> bool:
        return self.status not in NOT_DONE


@dataclass
class Operations:
    """What the operations need from ask: the memory, its ontology, who the question may name, the day it is
    asked, and the text vectors (loaded only by the operations that match an event by meaning)."""

    memory: MemoryContext
    ontology: Ontology
    entities: Sequence[GroundedEntity]
    today: date
    vectors: Callable[[], TextVectors]
    #: The question as asked: where the frame leaves out the second of two events, its words that name something
    #: stored name that event (:func:`_interval_from_question`).
    question: str = ""
    _about_cache: dict[str, dict[str, int]] = field(default_factory=dict)

    def evaluate(self, frame: Frame) -> Worked | None:
        """The frame's answer worked out on the graph, or None when its operation is not computed here or the
        graph does not settle it."""
        if frame.relative and frame.op in ("value", "list", "current", "other") and self._about_people(frame.cls):
            # a kind of relative in the frame is its own sign that relatives are asked; in a frame that did not
            # say so, only relatives that are stored answer (no "not in memory" for a field filled in passing), and
            # only when the class it names is people (a pet's breed asked with a relative filled in passing is not)
            found = _relatives(self, frame)
            if found is not None and found.graphs:
                return found
        handler = _HANDLERS.get(frame.op)
        found = handler(self, frame) if handler is not None else None
        if found is not None and not found.graphs and frame.op == "relatives" and (
                not self._about_people(frame.cls) or self._holds_itself(frame) or self._names_a_thing(frame)):
            # "no such relative" from a frame whose class is another kind of thing (a trip "and with whom" read
            # as a relative), whose property the subject holds itself (an allergy read with a relative filled in
            # passing), or whose anchor names a stored thing (the garage that fixed "Dana's car"): the frame
            # contradicts itself, so it settles nothing
            found = None
        if found is None and frame.op not in ("window", "interval") and (frame.start or frame.end):
            # a time the question names is the surest part of a frame ("where did she travel in June 2025" read as
            # a value or as relatives): what lies in that window, of the frame's class
            found = _window(self, frame)
        if found is None and frame.op in ("value", "list"):
            found = _unheld(self, frame)
        if found is None and frame.prop and not frame.anchor and frame.op not in ("count", "total", "relatives"):
            # a property named and no node: its value on the one node about the subject that the question's own
            # words name ("how often do I run": the running schedule's frequency), whatever operation was read
            found = _held_by_named(self, frame)
        return found

    def _names_a_thing(self, frame: Frame) -> bool:
        """Whether the frame's anchor names something the question mentions that the memory holds (an entity
        grounding matched, the subject aside): "Dana's car" does, "Bruder" (the kind of relative in the
        question's language) does not."""
        wanted = content_words(frame.anchor) - content_words(self.memory.manifest.owner)
        subject = self.subject(frame)
        return bool(wanted) and any(wanted & content_words(e.label) for e in self.entities if e.iri != subject)

    def _holds_itself(self, frame: Frame) -> bool:
        """Whether the frame's subject states a value of the frame's property itself."""
        subject = self.subject(frame)
        return bool(frame.prop and subject is not None and self.values(subject, frame.prop))

    def _about_people(self, cls: str) -> bool:
        """Whether a frame's class allows a question about people: none named, or a kind of person."""
        return not cls or _is_a(self, cls, *_PEOPLE)

    # ---------------------------------------------------------------------------------------------- the subject

    def subject(self, frame: Frame) -> str | None:
        """The IRI of the person or thing the frame names (the owner for "I" or an empty subject)."""
        return person(frame.subject or "I", owner=self.memory.naming.owner, owner_name=self.memory.manifest.owner,
                      entities=self.entities)

    def name_of(self, iri: str) -> str:
        if iri == self.memory.naming.owner:
            return self.memory.manifest.owner
        return next((e.label for e in self.entities if e.iri == iri), iri.rsplit("/", 1)[-1])

    # ---------------------------------------------------------------------------------------------- reading

    def members(self, cls: str, among: Sequence[str] | None = None) -> list[Card]:
        """Every node of ``cls`` (and its subclasses); with ``among``, only those nodes."""
        from pcm.resources import render_query
        from pcm.sparql import values_clause

        classes = sorted(self.ontology.subclasses(cls) | {cls})
        query = render_query("ask/frame_members", classes=values_clause("class", classes), limit=str(ROWS),
                             about=values_clause("node", list(among)) if among is not None else "")
        return self.cards(_iris(self.memory.store.select(query).dicts()))

    def dated(self, among: Sequence[str] | None = None) -> list[Card]:
        """Every node that carries a date through one of the ontology's date properties (with ``among``, of those)."""
        from pcm.resources import render_query
        from pcm.sparql import values_clause

        query = render_query("ask/frame_dated", dates=values_clause("dp", self.date_properties()), limit=str(ROWS),
                             about=values_clause("node", list(among)) if among is not None else "")
        return [c for c in self.cards(_iris(self.memory.store.select(query).dicts())) if c.day is not None]

    def about(self, read: Callable[[Sequence[str] | None], list[Card]], subject: str | None, *,
              reach: int = 1) -> list[Card]:
        """The cards ``read`` finds about ``subject``: linked to it (``reach`` 1), or also pointed at by a node
        linked to it (``reach`` 2: a CV about the person holds their jobs; the operations that pick by an anchor
        use it). With ``reach`` 1, the second ring is read when the first has none; and every card ``read``
        finds when none is about the owner, whose memory this is (a fact about them may name no link to them)."""
        if subject is None:
            return read(None)
        rings = self._rings(subject)
        first = [i for i, h in rings.items() if h == 1]
        if reach == 1 and first:
            near = read(first)
            if near:
                return near
        near = read(list(rings)) if rings else []
        if near or subject != self.memory.naming.owner:
            return near
        return read(None)

    def _rings(self, subject: str) -> dict[str, int]:
        from pcm.resources import render_query
        from pcm.sparql import iri_term

        key = subject
        if key not in self._about_cache:
            query = render_query("ask/frame_about", subject=iri_term(subject), limit=str(ABOUT_ROWS))
            rows: list[dict[str, Any]] = self.memory.store.select(query).dicts()
            self._about_cache[key] = {r["node"].value: int(r["hops"].value) for r in rows
                                      if isinstance(r.get("node"), ox.NamedNode) and r["node"].value != subject}
        return self._about_cache[key]

    def values(self, subject: str, prop: str) -> list[tuple[ox.NamedNode | ox.BlankNode | ox.Literal, str, str]]:
        """``(value, label, graph)`` of ``subject``'s ``prop`` (and its subproperties)."""
        from pcm.resources import render_query
        from pcm.sparql import iri_term, values_clause

        properties = sorted(self.ontology.subproperties(prop) | {prop})
        query = render_query("ask/frame_values", properties=values_clause("p", properties), subject=iri_term(subject),
                             limit=str(ROWS))
        rows: list[dict[str, Any]] = self.memory.store.select(query).dicts()
        return [(r["o"], r["label"].value if "label" in r else _shown(r["o"]), r["graph"].value) for r in rows]

    def past_values(self, subject: str, prop: str) -> list[tuple[ox.NamedNode | ox.BlankNode | ox.Literal, str, str]]:
        """``(value, label, "")`` of ``subject``'s ``prop`` (and its subproperties) that a later utterance
        superseded (the history graph); no graph of their own is cited."""
        from pcm.resources import render_query
        from pcm.sparql import iri_term, values_clause

        properties = sorted(self.ontology.subproperties(prop) | {prop})
        query = render_query("ask/frame_past", properties=values_clause("p", properties), subject=iri_term(subject),
                             limit=str(ROWS))
        rows: list[dict[str, Any]] = self.memory.store.select(query).dicts()
        return [(r["o"], r["label"].value if "label" in r else _shown(r["o"]), "") for r in rows]

    def held_elsewhere(self, cls: str, prop: str, node: str) -> bool:
        """Whether a node of ``cls`` other than ``node`` states a value of ``prop`` (subclasses and
        subproperties included)."""
        from pcm.resources import render_query
        from pcm.sparql import iri_term, values_clause

        query = render_query("ask/frame_held", classes=values_clause("class", sorted(self.ontology.subclasses(cls) | {cls})),
                             properties=values_clause("p", sorted(self.ontology.subproperties(prop) | {prop})),
                             node=iri_term(node))
        return bool(self.memory.store.select(query).rows)

    def holders(self, prop: str, among: Sequence[str] | None = None) -> list[Card]:
        """Every node that states a value of ``prop`` (and its subproperties); with ``among``, of those nodes."""
        from pcm.resources import render_query
        from pcm.sparql import values_clause

        query = render_query("ask/frame_holders", limit=str(ROWS),
                             properties=values_clause("p", sorted(self.ontology.subproperties(prop) | {prop})),
                             about=values_clause("node", list(among)) if among is not None else "")
        return self.cards(_iris(self.memory.store.select(query).dicts()))

    def date_properties(self) -> list[str]:
        return sorted(iri for iri in self.ontology.properties
                      if set(self.ontology.terms[iri].range) & _DATE_RANGES)

    def cards(self, iris: Sequence[str]) -> list[Card]:
        nodes = read_nodes(self.memory, list(dict.fromkeys(iris)))
        dates = set(self.date_properties())
        out = []
        for iri in sorted(nodes):
            node = nodes[iri]
            if not node.facts:
                continue
            starts: list[tuple[int, str, ox.Literal]] = []
            ends: list[ox.Literal] = []
            status = ""
            for fact in node.facts:
                if not fact.outgoing:
                    continue
                if fact.predicate == _STATUS and fact.other:
                    status = re.split(r"[/#]", fact.other)[-1]
                term = fact.term
                if fact.predicate in dates and isinstance(term, ox.Literal) and term.datatype.value in _DATE_TYPES:
                    local = re.split(r"[/#]", fact.predicate)[-1].lower()
                    if "end" in local:
                        ends.append(term)
                    else:
                        starts.append((0 if "start" in local else 1, local, term))
            first = min(starts, key=lambda s: (s[0], s[1], s[2].value))[2] if starts else None
            day, full = _day(first if first is not None else min(ends, key=lambda t: t.value) if ends else None)
            end, end_full = _day(min(ends, key=lambda t: t.value)) if ends else (None, False)
            types = frozenset(node.types)
            out.append(Card(iri, node.label, node_line(node), day, full, end, types,
                            frozenset(f.other for f in node.facts if f.other), frozenset(f.graph for f in node.facts),
                            status, end_full))
        return out

    def match(self, anchor: str, cards: Sequence[Card], *, typed: bool = False) -> Card | None:
        """The one card ``anchor`` names, read with what it points at (a purchase with the thing bought): the
        only one holding all the anchor's content words (the owner's name aside), else the only one whose label
        holds them, else the clearly nearest by meaning among those that hold them, else among all; None when that is not clear. ``typed``: the cards
        are of the class the question names, so a weaker match by meaning is enough."""
        owner_words = content_words(self.memory.manifest.owner)
        wanted = {w for w in content_words(anchor) if len(w) > 1} - owner_words
        if not wanted or not cards:  # an anchor that is only the owner's name names nothing
            return None
        texts = self._with_objects(cards)
        held = {c.iri: content_words(texts[c.iri]) for c in cards}
        # words no card holds ("the promotion taking effect") cannot tell the cards apart: the others name the card
        wanted = {w for w in wanted if any(w in words for words in held.values())} or wanted
        holding = [c for c in cards if wanted <= held[c.iri]]
        named = [c for c in holding if wanted <= content_words(c.label)]
        for chosen in (holding, named):
            if len(chosen) == 1:
                return chosen[0]
        from pcm.index.text import vector_query

        pool = holding or list(cards)
        if len(pool) == 1:
            return None
        floor, margin = (-1.0, HOLDING_MARGIN) if holding else ((TYPED_MATCH if typed else MIN_MATCH), MARGIN)
        vectors = self.vectors()
        asked = " ".join(w for w in re.findall(r"[\w'-]+", anchor) if w.lower() not in owner_words) or anchor
        scores = (vectors.get([texts[c.iri] for c in pool]) @ vectors.query(vector_query(asked))).tolist()
        order = sorted(range(len(pool)), key=lambda i: (-scores[i], pool[i].iri))
        best, rival = scores[order[0]], scores[order[1]]
        return pool[order[0]] if best >= floor and best - rival >= margin else None

    def named_by_question(self, cards: Sequence[Card], *, asked: Iterable[str] = (), besides: Iterable[str] = (),
                          typed: bool = True) -> Card | None:
        """The one card the question's own words name, where the frame names none: its words that occur in what
        is stored about the cards must pick one, as an anchor must (:meth:`match`; ``typed`` as there). Left aside:
        the owner's name, the words of the ``asked`` terms ("the name of my mother" names no account by "name"),
        and the words ``besides`` (another event's, a unit's).
        """
        texts = self._with_objects(cards)
        stored = set().union(*(content_words(t) for t in texts.values())) if texts else set()
        skip = content_words(self.memory.manifest.owner) | set(besides)
        for term in asked:
            local = re.split(r"[/#]", term)[-1]
            skip |= content_words(re.sub(r"(?<=[a-z])(?=[A-Z])", " ", local))
            if term in self.ontology.terms:
                skip |= content_words(self.ontology.terms[term].label)
        words = [w for w in re.findall(r"[\w-]{2,}", self.question) if (content_words(w) & stored) - skip]
        return self.match(" ".join(words), cards, typed=typed) if words else None

    def wanted(self, anchor: str) -> set[str]:
        """The content words of ``anchor`` that name something: the owner's name and one-letter words aside."""
        return {w for w in content_words(anchor) if len(w) > 1} - content_words(self.memory.manifest.owner)

    def holding(self, anchor: str, cards: Sequence[Card]) -> list[Card]:
        """The cards whose line (with what they point at) holds every content word of ``anchor`` (the owner's
        name aside); none when the anchor has no such word."""
        wanted = self.wanted(anchor)
        if not wanted:
            return []
        texts = self._with_objects(cards)
        return [c for c in cards if wanted <= content_words(texts[c.iri])]

    def named(self, anchor: str, cards: Sequence[Card]) -> list[Card]:
        """The cards ``anchor`` names by its words: those :meth:`holding` them, narrowed to those whose own line
        holds them, then to those whose label does, where any does (a job's line links the job before it, and a
        trip's booking holds the trip's words through the trip)."""
        wanted = self.wanted(anchor)
        found = self.holding(anchor, cards)
        for own in (lambda c: c.line, lambda c: c.label):
            found = [c for c in found if wanted <= content_words(own(c))] or found
        return found

    def _with_objects(self, cards: Sequence[Card]) -> dict[str, str]:
        """Each card's line followed by the lines of the nodes it points at (the subject and the owner aside)."""
        skip = {self.memory.naming.owner, self.memory.naming.assistant}
        pointed = sorted({o for c in cards for o in c.others if o not in skip
                          and o.startswith(self.memory.naming.namespace)} - {c.iri for c in cards})
        lines = {c.iri: c.line for c in self.cards(pointed)}
        return {c.iri: " ".join([c.line, *(lines[o] for o in sorted(c.others) if o in lines)]) for c in cards}


# ------------------------------------------------------------------------------------------------ the operations


def _relatives(ops: Operations, frame: Frame) -> Worked | None:
    agent = ops.subject(frame)
    if agent is None or not frame.relative:
        return None
    found = relatives_answer(ops.memory, agent, frame.relative, name=ops.name_of(agent))
    if found is None or not found.graphs:
        return found
    kin = _kin_of(ops, agent, frame.relative)
    # "my sister, and where does she live": each relative's value of the asked property
    extra = []
    graphs = set(found.graphs)
    for iri, label in kin if frame.prop else []:
        values = ops.values(iri, frame.prop)
        if values:
            extra.append(f"{label}: {', '.join(_with_places(ops, v) for v in values)}")
            graphs |= {g for *_, g in values}
    if extra:
        return Worked(found.text + " (" + "; ".join(extra) + ")", tuple(sorted(graphs)), found.note)
    # no property, or none of them holds it (a name asked as schema:name, which labels do not use): the names,
    # then what is stored about each relative
    cards = ops.cards([iri for iri, _ in kin])
    if not cards:
        return found
    return Worked(f"{found.text}. " + " ".join(c.line for c in cards),
                  tuple(sorted(graphs | set(_graphs(cards)))), found.note)


def _kin_of(ops: Operations, agent: str, kind: str) -> list[tuple[str, str]]:
    from pcm.namespaces import OB

    values = ops.values(agent, OB + "has" + kind.capitalize())
    return [(str(v[0].value), v[1]) for v in values if isinstance(v[0], ox.NamedNode)]


def _values_of_kind(
    ops: Operations, frame: Frame, subject: str, prop: str
) -> list[tuple[ox.NamedNode | ox.BlankNode | ox.Literal, str, str]]:
    """The subject's values of ``prop`` (the frame's); when the frame names a class too, only those of that kind.

    A frame names the kind counted and the link to it; values that are not of that kind ("the companies she worked
    for" read as her work places) leave the count to the members of the class.
    """
    values = ops.values(subject, prop)
    if values and frame.cls:
        named = [str(v[0].value) for v in values if isinstance(v[0], ox.NamedNode)]
        kind = {c.iri for c in ops.members(frame.cls, named)}
        values = [v for v in values if isinstance(v[0], ox.NamedNode) and v[0].value in kind]
    return values


def _count(ops: Operations, frame: Frame) -> Worked | None:
    subject = ops.subject(frame)
    if subject is None:
        return None
    if frame.relative:
        # "how many children": the relatives of the kind, named; "not in memory" when the family is stored
        # without them (the kind of relative is the frame's sign of what is counted, whatever property it names)
        return relatives_answer(ops.memory, subject, frame.relative, name=ops.name_of(subject), count=True)
    if frame.prop and _holds_numbers(ops, frame.prop):
        return _stored_number(ops, frame, subject)
    if frame.prop:
        values = _values_of_kind(ops, frame, subject, frame.prop)
        if values:
            names = sorted({label for _, label, _ in values})
            return Worked(f"{len(names)} ({', '.join(names)}).", tuple(sorted({g for *_, g in values})),
                          f"counted over {ops.name_of(subject)}'s values of {ops.ontology.curie(frame.prop)}")
    if frame.cls:
        cards = [c for c in ops.about(lambda among: ops.members(frame.cls, among), subject) if c.done]
        if cards:
            names = sorted({c.label or c.iri for c in cards})
            # a few counted nodes are shown whole: "how many records are in the collection" framed as a count of
            # collections is answered with each collection's own size beside the count
            shown = f" {_lines(sorted(cards, key=lambda c: c.iri))}" if len(cards) <= SHOWN_COUNTED else ""
            return Worked(f"{len(names)} ({', '.join(names)}).{shown}", _graphs(cards),
                          f"counted over the {ops.ontology.curie(frame.cls)} nodes about {ops.name_of(subject)}")
    return None


def _stored_number(ops: Operations, frame: Frame, subject: str) -> Worked | None:
    """"How many records are in the collection": the number stored on the subject, or on the one node of the
    frame's class about the subject (the one the anchor names, when there are several)."""
    own = [v for v in ops.values(subject, frame.prop) if isinstance(v[0], ox.Literal)]
    if own:
        return Worked(", ".join(v[1] for v in own) + ".", tuple(sorted({v[2] for v in own})),
                      f"the {ops.ontology.curie(frame.prop)} stored for {ops.name_of(subject)}")
    if not frame.cls:
        return None
    holders = [(c, vs) for c in ops.about(lambda among: ops.members(frame.cls, among), subject)
               if (vs := [v for v in ops.values(c.iri, frame.prop) if isinstance(v[0], ox.Literal)])]
    if len(holders) > 1 and frame.anchor:
        named = ops.match(frame.anchor, [c for c, _ in holders], typed=True)
        holders = [(c, vs) for c, vs in holders if named is not None and c.iri == named.iri]
    elif len(holders) > 1 and (named := ops.named_by_question([c for c, _ in holders])) is not None:
        holders = [(c, vs) for c, vs in holders if c.iri == named.iri]
    elif 1 < len(holders) <= SHOWN_COUNTED:
        # several nodes hold the number and the frame names none: each with its own ("the collection": records
        # 240, houseplants 20), for the question to be read against
        holders.sort(key=lambda h: h[0].iri)
        return Worked("; ".join(f"{c.label or c.iri}: {', '.join(v[1] for v in vs)}" for c, vs in holders) + ".",
                      tuple(sorted({v[2] for _, vs in holders for v in vs})),
                      f"the {ops.ontology.curie(frame.prop)} stored on each node of the class")
    if len(holders) != 1:
        return None
    card, values = holders[0]
    return Worked(f"{', '.join(v[1] for v in values)} ({card.label or card.iri}).",
                  tuple(sorted({v[2] for v in values})), f"the {ops.ontology.curie(frame.prop)} stored on the node")


def _holds_numbers(ops: Operations, prop: str) -> bool:
    """Whether the property's values are numbers (its range an XSD numeric type or schema:Number)."""
    numeric = {SCHEMA + "Number", SCHEMA + "Integer"} | {
        "http://www.w3.org/2001/XMLSchema#" + t for t in ("integer", "nonNegativeInteger", "positiveInteger",
                                                         "decimal", "double", "float", "int", "long")}
    term = ops.ontology.terms.get(prop)
    return term is not None and bool(set(term.range) & numeric)


def _total(ops: Operations, frame: Frame) -> Worked | None:
    subject = ops.subject(frame)
    if subject is None:
        return None
    if frame.anchor and frame.anchor2:
        # "what did the espresso machine and the alternator repair cost together": the two things the anchors
        # name, among every action of the subject whatever its class (a purchase and a payment)
        acts = actions_of(ops.memory, sorted(ops.ontology.subclasses(_ACTION) | {_ACTION}), subject)
        picked = [_named_act(ops, anchor, acts) for anchor in (frame.anchor, frame.anchor2)]
        if all(a is not None for a in picked) and len({a.iri for a in picked if a is not None}) == 2:
            return total_of([a for a in picked if a is not None])
    cls = frame.cls if frame.cls and _is_action(ops, frame.cls) else SCHEMA + "BuyAction"
    return total_of(actions_of(ops.memory, cls, subject))


def _named_act(ops: Operations, anchor: str, acts: Sequence[Any]) -> Any | None:
    """The priced action whose words (its label, what it acted on) share the most content words with ``anchor``
    ("the alternator repair" names "paying for the alternator replacement"); None on a tie or no shared word."""
    wanted = {w for w in content_words(anchor) if len(w) > 1} - content_words(ops.memory.manifest.owner)
    scored = sorted(((len(wanted & a.words()), a.iri, a) for a in acts if a.price is not None),
                    key=lambda t: (-t[0], t[1]))
    if not scored or scored[0][0] == 0 or (len(scored) > 1 and scored[1][0] == scored[0][0]):
        return None
    return scored[0][2]


def _extreme(ops: Operations, frame: Frame) -> Worked | None:
    subject = ops.subject(frame)
    if subject is None or not frame.cls:
        return None
    if frame.anchor and frame.prop in ops.date_properties():
        # "when did the promotion take effect" read as the latest job with the promotion as anchor and a date as
        # property: the date of the thing the anchor names
        dated = _date_of(ops, replace(frame, op="value"))
        if dated is not None:
            return dated
    latest = frame.op == "latest"
    if _is_action(ops, frame.cls) and not frame.anchor:
        found = latest_action(actions_of(ops.memory, frame.cls, subject), latest=latest, today=ops.today)
        if found is not None:
            return found
    cards = [c for c in ops.about(lambda among: ops.members(frame.cls, among), subject) if c.done and c.day and c.day <= ops.today]
    if frame.anchor:
        # "when did I last visit Lisbon": the latest of the nodes the anchor names, not of all; none named, and
        # the operation settles nothing (the stored facts and recall answer, or say it is not in memory)
        cards = ops.holding(frame.anchor, cards)
    if not cards:
        return None
    pick = max if latest else min
    day = pick(c.day for c in cards if c.day)
    chosen = [c for c in cards if c.day == day]
    return Worked(_lines(chosen, ops), _graphs(chosen),
                  f"the {frame.op} by date of {len(cards)} {ops.ontology.curie(frame.cls)} nodes")


def _current(ops: Operations, frame: Frame) -> Worked | None:
    """The latest node of the class that has not ended (a job, a home), else the value of the property said
    last: an order by the dates the facts carry is surer than by when they were said, since a value nobody
    took back ("works in Portland") stays stored.

    With an anchor that names one of the subject's values, past or present ("does she still work at Harbor
    Analytics", "does he still live in Boston"), the answer says yes or no: whether that value is the current one.
    """
    subject = ops.subject(frame)
    if subject is None:
        return None
    if frame.cls:
        cards = ops.about(lambda among: ops.members(frame.cls, among), subject)
        now = _current_cards(ops, cards)
        if now:
            found = Worked(_lines(now, ops), _graphs(now), f"the latest {ops.ontology.curie(frame.cls)} that has "
                           "not ended")
            named = ops.named(frame.anchor, cards)
            return _still(found, {c.iri for c in named}, {c.iri for c in now}, [g for c in named for g in c.graphs])
    if frame.prop:
        values = _values_of_kind(ops, frame, subject, frame.prop)
        if values:
            said = _said_times(ops, [g for *_, g in values])
            newest = max(said.get(g, "") for *_, g in values)
            kept = [v for v in values if said.get(v[2], "") == newest]
            found = Worked(", ".join(_with_places(ops, v) for v in kept) + ".", tuple(sorted({v[2] for v in kept})),
                           f"the value of {ops.ontology.curie(frame.prop)} said last (earlier values are history)")
            wanted = ops.wanted(frame.anchor)
            if not wanted:
                return found
            held = [v for v in [*values, *ops.past_values(subject, frame.prop)]
                    if wanted <= content_words(_with_places(ops, v))]
            return _still(found, {str(v[0]) for v in held}, {str(v[0]) for v in kept}, [v[2] for v in held if v[2]])
    return None


def _current_cards(ops: Operations, cards: Sequence[Card]) -> list[Card]:
    """The latest of ``cards`` that are done, dated by today and not ended."""
    open_ = [c for c in cards if c.done and c.day and c.day <= ops.today and (c.end is None or c.end >= ops.today)]
    if not open_:
        return []
    day = max(c.day for c in open_ if c.day)
    return [c for c in open_ if c.day == day]


def _still(found: Worked, named: set[str], current: set[str], graphs: Iterable[str]) -> Worked:
    """``found`` (the current value), preceded by yes or no when the question's anchor ``named`` some of the
    values, past or present: yes when one of them is ``current``. The named values' ``graphs`` are cited too (the
    old job)."""
    if not named:
        return found
    holds = bool(named & current)
    return Worked(f"{'Yes' if holds else 'No'}; now: {found.text}", tuple(sorted({*found.graphs, *graphs})),
                  f"{found.note}; the value the question names is {'the current one' if holds else 'history'}")


def _pool(ops: Operations, frame: Frame, reach: int = 1) -> list[Card]:
    """The nodes of the frame's class (else every dated node) about its subject (see :meth:`Operations.about`)."""
    cls = frame.cls
    if cls:
        return ops.about(lambda among: ops.members(cls, among), ops.subject(frame), reach=reach)
    return ops.about(ops.dated, ops.subject(frame), reach=reach)


def _anchored(ops: Operations, frame: Frame, pick: Callable[[int], Worked | None]) -> Worked | None:
    """``pick`` over the subject's own nodes, then over the nodes they point at too (a job in a CV): the anchor
    names one of them, and the nearer ring is read first so a large memory's other people do not crowd it out."""
    return pick(1) or pick(2)


def _side(ops: Operations, frame: Frame) -> Worked | None:
    return _anchored(ops, frame, lambda reach: _side_in(ops, frame, reach))


def _side_in(ops: Operations, frame: Frame, reach: int) -> Worked | None:
    pool = [c for c in _pool(ops, frame, reach) if c.day is not None]
    # the anchor may be of another kind than the class asked ("the order just before the wedding")
    dated = {c.iri: c for c in [*pool, *(ops.about(ops.dated, ops.subject(frame), reach=reach) if frame.cls else [])]}
    anchor = ops.match(frame.anchor, list(dated.values()))
    if anchor is None or anchor.day is None:
        return None
    kin = [c for c in pool if c.iri != anchor.iri and (frame.cls or c.types & anchor.types)]
    if frame.op == "before":
        side = [c for c in kin if c.day and c.day < anchor.day]
        chosen_day = max((c.day for c in side if c.day), default=None)
    else:
        side = [c for c in kin if c.day and c.day > anchor.day]
        chosen_day = min((c.day for c in side if c.day), default=None)
    chosen = [c for c in side if c.day == chosen_day]
    if len(chosen) != 1:
        return None
    text = f"{chosen[0].line} ({frame.op} {anchor.label or anchor.iri}: {format_date(anchor.day)})."
    if frame.unit and chosen[0].full and anchor.full and chosen[0].day is not None:
        # "how many days before the wedding did I order the jumpsuit": how long lay between them, too
        first, last = sorted((chosen[0].day, anchor.day))
        count = difference(first, last, frame.unit)
        if count < 1:
            count, unit = difference(first, last, "days"), "days"
        else:
            unit = frame.unit
        text += f" {format_duration(count, unit)} between them."
    return Worked(text, _graphs([chosen[0], anchor]), f"the nearest dated node of the anchor's kind {frame.op} it")


def _window(ops: Operations, frame: Frame) -> Worked | None:
    if frame.start is None and frame.end is None:
        return None
    start, end = frame.start or date.min, frame.end or date.max
    pool = _pool(ops, frame)
    inside = [c for c in pool if c.day is not None and c.day <= end and (c.end or c.day) >= start]
    if not inside:
        return None
    inside.sort(key=lambda c: (c.day or date.min, c.iri))
    text = " ".join(_planned(c) for c in inside)
    return Worked(text, _graphs(inside), f"dated between {start.isoformat()} and {end.isoformat()}")


def _window_or_dated(ops: Operations, frame: Frame) -> Worked | None:
    """A ``window`` frame: what of its class lies in the window, else whatever is dated in it. The class is the
    model's guess ("what was on my calendar in June" read as jobs) and the time the surer part, where the question
    asks for what lies in a time; a time filled in beside another operation does not widen it (:meth:`evaluate`)."""
    found = _window(ops, frame)
    if found is None and frame.cls:
        found = _window(ops, replace(frame, cls=""))
    return found


def _interval(ops: Operations, frame: Frame) -> Worked | None:
    """The time between two events the frame names, else how long the one event it names lasted.

    A small model does not always put the two events in ``anchor`` and ``anchor2``: it writes the class of the
    other one ("how many days before the wedding did I order the jumpsuit": one anchor and a class), or the other
    event as the subject ("Rachel's wedding was how many days after ...": a subject that is not the person the
    memory is about). Each reading is tried in turn; one that does not find exactly its events settles nothing.
    """
    if not frame.anchor:
        return None
    if frame.anchor2:
        return _anchored(ops, frame, lambda reach: _interval_in(ops, frame, reach))
    if frame.cls:
        found = _anchored(ops, frame, lambda reach: _interval_to_class(ops, frame, reach))
        if found is not None:
            return found
    if frame.subject and ops.subject(frame) != ops.memory.naming.owner:
        # the subject names the other event (or its person): both events are the owner's to match
        other = replace(frame, subject="", anchor2=frame.subject)
        found = _anchored(ops, other, lambda reach: _interval_in(ops, other, reach))
        if found is not None:
            return found
    found = _anchored(ops, frame, lambda reach: _duration_in(ops, frame, reach))
    if found is None and ops.question:
        found = _anchored(ops, frame, lambda reach: _interval_from_question(ops, frame, reach))
    return found


def _interval_from_question(ops: Operations, frame: Frame, reach: int) -> Worked | None:
    """The time between the event the anchor names and the one the rest of the question names.

    A small model often writes only one event of two ("how many days before Rachel's wedding did I order the
    jumpsuit" framed with the jumpsuit alone). The other event is then named by the question's words that the
    anchor does not hold and that occur in what is stored about the other dated nodes (in whatever order or
    language the question puts the rest): those words must pick one node, as an anchor must.
    """
    pool = [c for c in ops.about(ops.dated, ops.subject(frame), reach=reach) if c.full]
    first = ops.match(frame.anchor, pool)
    if first is None or first.day is None:
        return None
    # the words of the first event's own name and of the unit asked name nothing else
    besides = content_words(frame.anchor) | content_words(first.label) | content_words(frame.unit)
    second = ops.named_by_question([c for c in pool if c.iri != first.iri], besides=besides, typed=False)
    if second is None or second.day is None:
        return None
    a, b = sorted((first, second), key=lambda c: c.day or date.min)
    assert a.day is not None and b.day is not None
    text = between(a.label or a.iri, a.day, b.label or b.iri, b.day, frame.unit or "days")
    return Worked(text, _graphs([a, b]), "counted between the event the frame names and the one the rest of the "
                  "question names")


def _duration_in(ops: Operations, frame: Frame, reach: int) -> Worked | None:
    """How long the one event the anchor names lasted: from its start to its end date, both calendar days."""
    pool = [c for c in ops.about(ops.dated, ops.subject(frame), reach=reach) if c.full]
    card = ops.match(frame.anchor, pool)
    if card is None or card.day is None or card.end is None or not card.end_full or card.end <= card.day:
        return None
    text = between(f"{card.label or card.iri} begins", card.day, "ends", card.end, frame.unit or "days")
    return Worked(text, _graphs([card]), "counted from the start to the end date of the event the question names")


def _interval_to_class(ops: Operations, frame: Frame, reach: int) -> Worked | None:
    own = [c for c in _pool(ops, frame, reach) if c.full]
    if len(own) != 1:
        return None
    pool = [c for c in ops.about(ops.dated, ops.subject(frame), reach=reach) if c.full and c.iri != own[0].iri]
    first = ops.match(frame.anchor, pool)
    if first is None or first.day is None or own[0].day is None:
        return None
    a, b = sorted((first, own[0]), key=lambda c: c.day or date.min)
    assert a.day is not None and b.day is not None
    text = between(a.label or a.iri, a.day, b.label or b.iri, b.day, frame.unit or "days")
    return Worked(text, _graphs([a, b]), "counted between the event the question names and the one node of "
                  f"{ops.ontology.curie(frame.cls)}")


def _interval_in(ops: Operations, frame: Frame, reach: int) -> Worked | None:
    pool = [c for c in ops.about(ops.dated, ops.subject(frame), reach=reach) if c.full]
    first = ops.match(frame.anchor, pool)
    second = ops.match(frame.anchor2, [c for c in pool if first is None or c.iri != first.iri])
    if first is None or second is None or first.day is None or second.day is None:
        return None
    a, b = sorted((first, second), key=lambda c: c.day or date.min)
    assert a.day is not None and b.day is not None
    text = between(a.label or a.iri, a.day, b.label or b.iri, b.day, frame.unit or "days")
    return Worked(text, _graphs([a, b]), "counted between the dates of the two events the question names")


def _value(ops: Operations, frame: Frame) -> Worked | None:
    """A ``value`` frame about a named thing: its date (:func:`_date_of`), else the values of the asked property
    on the one node the anchor names ("who came along on the Lisbon trip": the trip's participants). Other values,
    and a thing named ambiguously, are read by the model from the stored facts."""
    found = _date_of(ops, frame)
    if found is None and frame.anchor and frame.prop:
        found = _anchored(ops, frame, lambda reach: _value_in(ops, frame, reach))
    return found


def _value_in(ops: Operations, frame: Frame, reach: int) -> Worked | None:
    """The asked property's values on the one node the anchor names (:meth:`Operations.named`; among those that
    state the property where that leaves several)."""
    stated = [(c, ops.values(c.iri, frame.prop)) for c in ops.named(frame.anchor, _pool(ops, frame, reach))]
    stated = [(c, v) for c, v in stated if v]
    if len(stated) != 1:
        return None
    card, values = stated[0]
    shown = ", ".join(_with_places(ops, v) for v in values)
    # the node's whole line follows: a question may ask a second thing of it ("which machine, and where"), and
    # an amount its currency
    return Worked(f"{shown}. {_lines([card], ops)}", tuple(sorted({v[2] for v in values} | card.graphs)),
                  f"the {ops.ontology.curie(frame.prop)} of the node the question names, with its other facts")


def _held_by_named(ops: Operations, frame: Frame) -> Worked | None:
    """The frame's property on the node the question names, among the nodes about the subject that state it and
    are of the frame's class (a holder of another kind than the frame names means the frame contradicts itself)."""
    holders = ops.about(lambda among: ops.holders(frame.prop, among), ops.subject(frame), reach=2)
    if frame.cls:
        kinds = ops.ontology.subclasses(frame.cls) | {frame.cls}
        holders = [c for c in holders if c.types & kinds]
    card = ops.named_by_question(holders, asked=(frame.prop,)) if holders else None
    if card is None:
        return None
    values = ops.values(card.iri, frame.prop)
    if not values:
        return None
    shown = ", ".join(_with_places(ops, v) for v in values)
    return Worked(f"{shown}. {_lines([card], ops)}", tuple(sorted({v[2] for v in values} | card.graphs)),
                  f"the {ops.ontology.curie(frame.prop)} of the node the question's words name, with its other facts")


def _date_of(ops: Operations, frame: Frame) -> Worked | None:
    """A ``value`` frame that asks a date of a named thing ("when did I buy the espresso machine"): the date read
    from the node the anchor names. Other values are read by the model from the stored facts."""
    if not frame.anchor or frame.prop not in ops.date_properties():
        return None
    found = _anchored(ops, frame, lambda reach: _date_in(ops, frame, reach))
    if found is None and frame.cls:
        # the class is the model's guess at how the thing was stored (a promotion as a transfer, a job or an
        # event): the dated nodes of any kind, matched by the anchor alone with the stricter untyped margin
        untyped = replace(frame, cls="")
        found = _anchored(ops, untyped, lambda reach: _date_in(ops, untyped, reach))
    return found


def _date_in(ops: Operations, frame: Frame, reach: int) -> Worked | None:
    pool = _pool(ops, frame, reach)
    card = ops.match(frame.anchor, [c for c in pool if c.day is not None] or pool, typed=bool(frame.cls))
    if card is None:
        return None
    values = [v for v in ops.values(card.iri, frame.prop) if isinstance(v[0], ox.Literal)]
    if not values:
        return None
    shown = ", ".join(_shown(v[0]) for v in values)
    return Worked(f"{shown} ({card.label or card.iri}).", tuple(sorted({v[2] for v in values})),
                  f"the {ops.ontology.curie(frame.prop)} of the node the question names")


def _unheld(ops: Operations, frame: Frame) -> Worked | None:
    """"Not in memory" from the graph: the node the anchor names by its words is stored, and neither it nor a
    node linked to it holds the property asked, which other nodes of its kind do hold (the cat is stored without
    a breed, the jacket's purchase without a price). The stored facts would otherwise hand a small model other
    values to answer with (the dog's breed). Only a node named by every content word of the anchor counts, not
    one near it by meaning, only the subject's own node (linked to it directly), and only a property its kind is
    known to carry: a wrong guess of either settles nothing."""
    if not (frame.anchor and frame.prop and frame.cls) or frame.relative:
        return None
    subject = ops.subject(frame)
    if subject is None:
        return None
    pool = [c for c in _pool(ops, frame, 2) if c.iri != subject]
    named = ops.named(frame.anchor, pool)
    if len(named) != 1:
        return None
    card = named[0]
    if ops._rings(subject).get(card.iri) != 1:
        # only the subject's own node (their pet, their purchase): a node reached through another (the schedule
        # of a habit) is a part of that thing, and the question may well be about the thing
        return None
    skip = {ops.memory.naming.owner, ops.memory.naming.assistant}
    near = [card.iri, *sorted(o for o in card.others if o not in skip and o.startswith(ops.memory.naming.namespace))]
    near += [c.iri for c in pool if card.iri in c.others and c.iri not in near]
    if any(ops.values(iri, frame.prop) for iri in near):
        return None
    if not ops.held_elsewhere(frame.cls, frame.prop, card.iri):
        return None
    prop = ops.ontology.curie(frame.prop)
    return Worked(f"{NOT_STORED} {card.label or card.iri} is stored, but not its {prop}.", _graphs([card]),
                  f"the node the question names holds no {prop}, which other {ops.ontology.curie(frame.cls)} "
                  "nodes hold")


_HANDLERS: dict[str, Callable[[Operations, Frame], Worked | None]] = {
    "value": _value, "relatives": _relatives, "count": _count, "total": _total, "latest": _extreme, "earliest": _extreme,
    "current": _current, "before": _side, "after": _side, "window": _window_or_dated, "interval": _interval,
}
#: The operations answered in code here (``value`` and ``list`` only for a date of a named thing, a time window,
#: or a property the named node lacks); the others go on through the pipeline.
COMPUTED = frozenset(_HANDLERS) | {"list"}


# ------------------------------------------------------------------------------------------------ helpers


def _is_a(ops: Operations, cls: str, *roots: str) -> bool:
    """Whether ``cls`` is one of ``roots`` or a subclass of one."""
    supers = ops.ontology.superclasses(cls)
    return any(cls == root or root in supers for root in roots)


def _is_action(ops: Operations, cls: str) -> bool:
    return _is_a(ops, cls, _ACTION)


def _day(term: ox.Literal | None) -> tuple[date | None, bool]:
    """The day a date literal is about (a month or a year as its first day) and whether it is a calendar day."""
    if term is None:
        return None, False
    text = term.value
    for size, shaped, full in ((10, text[:10], True), (7, text[:7] + "-01", False), (4, text[:4] + "-01-01", False)):
        if len(text) >= size:
            try:
                return date.fromisoformat(shaped), full
            except ValueError:
                continue
    return None, False


def _graphs(cards: Iterable[Card]) -> tuple[str, ...]:
    return tuple(sorted({g for c in cards for g in c.graphs}))


def _lines(cards: Sequence[Card], ops: Operations | None = None) -> str:
    """The cards' lines; with ``ops``, each followed by where the nodes it points at are (the employer's city)."""
    out = []
    for card in cards:
        text = card.line.rstrip(".")
        if ops is not None:
            places = [f"{label}: {place}" for label, place in _linked_places(ops, card)]
            if places:
                text += f" ({'; '.join(places)})"
        out.append(text + ".")
    return " ".join(out)


def _linked_places(ops: Operations, card: Card) -> list[tuple[str, str]]:
    """``(label, place)`` of the nodes the card points at that have a location (schema:location or a
    subproperty), the subject's own links aside."""
    skip = {ops.memory.naming.owner, ops.memory.naming.assistant}
    found = []
    for other in sorted(card.others - skip):
        if not other.startswith(ops.memory.naming.namespace):
            continue
        values = ops.values(other, SCHEMA + "location")
        if values:
            label = next((lbl for _, lbl, _ in ops.values(other, _LABEL)), other.rsplit("/", 1)[-1])
            found.append((label, ", ".join(_with_places(ops, v) for v in values)))
    return found[:3]


def _planned(card: Card) -> str:
    return card.line.rstrip(".") + (" (planned)." if not card.done else ".")


def _shown(term: object) -> str:
    from pcm.retrieval.postprocess import format_term

    return format_term(term)


def _iris(rows: Sequence[dict[str, Any]]) -> list[str]:
    return [r["node"].value for r in rows if isinstance(r.get("node"), ox.NamedNode)]


def _with_places(ops: Operations, value: tuple[Any, str, str]) -> str:
    """A value's label, with the places that contain it when it is a place ("Ballard, Seattle")."""
    term, label = value[0], value[1]
    if not isinstance(term, ox.NamedNode):
        return label
    names = [label]
    seen = {term.value}
    current = term.value
    for _ in range(3):
        outer = [v for v in ops.values(current, _CONTAINED) if isinstance(v[0], ox.NamedNode) and v[0].value not in seen]
        if not outer:
            break
        names.append(outer[0][1])
        current = outer[0][0].value
        seen.add(current)
    return ", ".join(names)


def _said_times(ops: Operations, graphs: Sequence[str]) -> dict[str, str]:
    """When each graph's utterance was said (ISO text; empty when unknown), for "the value said last"."""
    from pcm.retrieval.answer import posts_of
    from pcm.retrieval.facts import graph_posts

    by_graph = graph_posts(ops.memory, list(dict.fromkeys(graphs)))
    posts = {p.post: p for p in posts_of(ops.memory, sorted({p for ps in by_graph.values() for p in ps}))}
    out: dict[str, str] = {}
    for graph, said in by_graph.items():
        times = [t.isoformat() for p in said if p in posts and (t := posts[p].time) is not None]
        out[graph] = max(times, default="")
    return out


__all__ = ["COMPUTED", "Card", "Operations"]

"""What extracted facts mean, measured against hand-labelled gold facts (``tests/fixtures/extraction``).

Valid is not right: an extraction can pass SHACL and still say the wrong price, the wrong person or nothing the
utterance said. A label file holds, per utterance, whether it states anything worth remembering
(``fact_bearing``) and its essential facts, each ``{"entity", "class", "property", "value"}``: a typing fact
(class, no property) or a property fact (property and value). :func:`score` reads what a memory's extraction stored
for each labelled utterance and gives precision, recall and the gate figures (fact-bearing or not) per source.

How a stored node is matched to a gold entity. Gold entities are named as a person would say them ("Dana",
"Harbor Analytics", "buying the espresso machine"); the model's labels differ in wording, so names match by their
normalised form (:func:`pcm.extraction.resolve.normalise_label`) or by token containment ("the Trek bike" ~ "Trek
bike", "Dana" ~ the owner's "Dana Whitfield"), an exact match winning over containment. Nodes that stand for
something that happened or recurs (actions, events, habits, preferences, schedules, jobs: :data:`DESCRIBED_ROOTS`)
carry a description rather than a name, so a gold entity the label set types with such a class also matches any
node of that class (or a subclass) in the utterance's graph. Only nodes the utterance's graph mentions are looked at,
but their names and types are read from the whole memory: a card (type and label) is stored once, in the graph that
first said it (:mod:`pcm.extraction.cards`).

A typing fact matches when a candidate node has the class or a subclass of it (equivalent classes count). A property
fact matches a stored statement whose subject is a candidate, whose property is the gold one or a subproperty, read
also backwards for symmetric and inverse properties, and whose value agrees: numbers by value ("1,200" = 1200),
dates by their lexical prefix (gold "2025-03" accepts "2025-03-15", never the reverse: a day the text did not give
is invented, but a gold day not stored is missing), a thing by the candidates of its name or by its labels, a
vocabulary term (``schema:PotentialActionStatus``) by its IRI, text by the same name rule.

What counts as a stored fact: every triple of the post's extraction graph, plus those a later post superseded since
(moved to the history graph, they were still said here), except names (``rdfs:label`` and its kin: the matcher reads
them as the node's names), ``prov:`` and the memory's own bookkeeping (properties and classes of the ontology's
``provenance`` and ``conversation`` areas), and ``schema:actionStatus``: the extraction rules require it on every
action and event, so it is scaffolding for precision; where the gold states one, recall checks it (planned is not
done). Precision = stored facts matching a gold fact of the same utterance / stored facts; recall = gold facts
matched / gold facts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyoxigraph as ox
import rdflib
from rdflib.namespace import OWL

from pcm.conversations import Conversation, Utterance, parse_file, sample_paths
from pcm.errors import InputError, UsageError
from pcm.extraction.queries import render
from pcm.extraction.resolve import OCCURRENCE_ROOTS, normalise_label
from pcm.namespaces import CV, OPENCARE, PCM, PREFIXES, PROV, RDF, SCHEMA
from pcm.resources import render_query
from pcm.sparql import iri_term, values_clause
from pcm.words import STOPWORDS

if TYPE_CHECKING:
    from pcm.memory import Memory
    from pcm.naming import Naming
    from pcm.ontology import Ontology

FORMATS = ("json", "locomo")
"""Label file formats: ``json`` ids are ``<sample file stem>/<conversation id>/<message id or #position>``;
``locomo`` ids are the turn's ``dia_id`` (``D1:3``), whose number names the session."""

RDF_TYPE = RDF + "type"
ACTION_STATUS = SCHEMA + "actionStatus"

DESCRIBED_ROOTS = (
    *OCCURRENCE_ROOTS,
    PCM + "Habit",
    PCM + "Preference",
    PCM + "Collection",
    SCHEMA + "Schedule",
    CV + "WorkHistory",
    CV + "CV",
    CV + "Education",
    OPENCARE + "HealthRecord",
    OPENCARE + "TreatmentProcedure",
)
"""Classes whose members a model labels with a description ("buying the espresso machine", "morning run"), not a
name: a gold entity of such a class matches any node of the class in the utterance's graph."""

NAME_PROPERTIES = frozenset({
    "http://www.w3.org/2000/01/rdf-schema#label",
    SCHEMA + "name",
    SCHEMA + "alternateName",
    "http://xmlns.com/foaf/0.1/name",
    "http://www.w3.org/2004/02/skos/core#prefLabel",
    "http://www.w3.org/2004/02/skos/core#altLabel",
})
"""Properties that name a node: the matcher reads them as names, so they are not counted as facts."""

BOOKKEEPING_AREAS = frozenset({"provenance", "conversation"})
"""Ontology areas of the memory's own records (posts, activities, supersession), never facts about a life."""

_DATE = re.compile(r"\d{4}(-\d{2}(-\d{2})?)?")
_TIME = re.compile(r"(\d{1,2}):(\d{2})")
_CURIE = re.compile(r"([a-z][a-z0-9]*):([A-Za-z_][\w.-]*)")
_LOCOMO_ID = re.compile(r"D(\d+):\d+")


# ---------------------------------------------------------------------------------------------------------- labels


@dataclass(frozen=True)
class GoldFact:
    """One essential fact of an utterance: a typing fact (``cls``) or a property fact (``prop`` and ``value``)."""

    entity: str
    cls: str | None = None
    """The class IRI (expanded from the file's prefixed name)."""
    prop: str | None = None
    """The property IRI."""
    value: str | None = None
    """A literal as text, the name of the object entity, or a prefixed vocabulary term (``schema:Monday``)."""

    @property
    def is_typing(self) -> bool:
        return self.cls is not None

    def show(self, ontology: Ontology) -> str:
        if self.cls is not None:
            return f"{self.entity} a {ontology.curie(self.cls)}"
        return f"{self.entity} {ontology.curie(self.prop or '')} {self.value}"


@dataclass(frozen=True)
class Labelled:
    """One labelled utterance and where it is: session (conversation) id plus message id or position."""

    id: str
    source: str
    session: str
    message: str | None
    position: int | None
    role: str
    fact_bearing: bool
    facts: tuple[GoldFact, ...]
    file: str | None = None
    """The sample file stem (``json`` format), which the conversations are read from."""


@dataclass(frozen=True)
class LabelSet:
    """The labels of one source (one label file)."""

    source: str
    format: str
    owner: str
    """The owner's name to create the memory with: the gold calls the owner by (part of) it."""
    path: Path
    utterances: tuple[Labelled, ...]
    data: str | None = None
    """The conversation file, relative to the shared data folder; None: the bundled samples (by file stem)."""
    sample_id: str | None = None

    def fact_bearing_ids(self) -> frozenset[str]:
        """Ids of the utterances that state something worth remembering (what a gate should let through)."""
        return frozenset(u.id for u in self.utterances if u.fact_bearing)

    def non_fact_bearing_ids(self) -> frozenset[str]:
        return frozenset(u.id for u in self.utterances if not u.fact_bearing)

    def described(self, ontology: Ontology) -> dict[str, frozenset[str]]:
        """Normalised gold entity name -> the described classes (:data:`DESCRIBED_ROOTS`) the set types it with."""
        roots = frozenset().union(*(ontology.subclasses(r) for r in DESCRIBED_ROOTS))
        kinds: dict[str, set[str]] = {}
        for utterance in self.utterances:
            for fact in utterance.facts:
                if fact.cls is not None and fact.cls in roots:
                    kinds.setdefault(normalise_label(fact.entity), set()).add(fact.cls)
        return {name: frozenset(classes) for name, classes in kinds.items()}


def load_labels(path: Path) -> LabelSet:
    """One label file; a malformed one is one InputError line naming the file and the utterance."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise InputError(f"{path}: cannot read ({err.strerror or err})") from None
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: malformed JSON at line {err.lineno}: {err.msg}") from None
    if not isinstance(data, dict) or not isinstance(data.get("utterances"), list):
        raise InputError(f"{path}: expected an object with an 'utterances' list")
    fmt = data.get("format")
    if fmt not in FORMATS:
        raise InputError(f"{path}: format must be one of {', '.join(FORMATS)}, found {fmt!r}")
    source, owner = data.get("source"), data.get("owner")
    if not isinstance(source, str) or not source or not isinstance(owner, str) or not owner:
        raise InputError(f"{path}: 'source' and 'owner' must be non-empty text")
    sample_id = data.get("sample_id")
    if data.get("data") is not None and not isinstance(data["data"], str):
        raise InputError(f"{path}: 'data' must be a file path relative to the shared data folder")
    if fmt == "locomo" and (not isinstance(sample_id, str) or not isinstance(data.get("data"), str)):
        raise InputError(f"{path}: a locomo label file names its 'data' file and 'sample_id'")
    utterances = tuple(_utterance(path, source, fmt, sample_id, item) for item in data["utterances"])
    seen: set[str] = set()
    for utterance in utterances:
        if utterance.id in seen:
            raise InputError(f"{path}: utterance {utterance.id!r} is labelled twice")
        seen.add(utterance.id)
    return LabelSet(source, fmt, owner, path, utterances, data.get("data"), sample_id)


def load_label_dir(folder: Path) -> list[LabelSet]:
    """Every label file (``*.json``) of a folder, by file name."""
    return [load_labels(p) for p in sorted(Path(folder).glob("*.json"))]


def _utterance(path: Path, source: str, fmt: str, sample_id: str | None, item: Any) -> Labelled:
    if not isinstance(item, dict) or not isinstance(item.get("id"), str):
        raise InputError(f"{path}: every utterance needs an 'id'")
    uid = item["id"]
    where = f"{path}: utterance {uid!r}"
    facts = item.get("facts")
    if not isinstance(facts, list) or not isinstance(item.get("fact_bearing"), bool):
        raise InputError(f"{where}: needs 'fact_bearing' (true/false) and a 'facts' list")
    if item["fact_bearing"] != bool(facts):
        raise InputError(f"{where}: fact_bearing must be true exactly when facts are listed")
    role = item.get("role")
    if not isinstance(role, str):
        raise InputError(f"{where}: needs its 'role'")
    file = None
    if fmt == "json":
        parts = uid.split("/")
        if len(parts) < 3 or not all(parts):
            raise InputError(f"{where}: a json id is <file stem>/<conversation id>/<message id or #position>")
        file, session, message = parts[0], "/".join(parts[1:-1]), parts[-1]
    else:
        match = _LOCOMO_ID.fullmatch(uid)
        if match is None:
            raise InputError(f"{where}: a locomo id is a dia_id such as D1:3")
        session, message = f"{sample_id}:session_{match.group(1)}", uid
    position = None
    if message.startswith("#"):
        if not message[1:].isdigit():
            raise InputError(f"{where}: a position is written #<number>")
        position, message = int(message[1:]), None
    gold = tuple(_fact(f"{where}, fact {n}", fact) for n, fact in enumerate(facts))
    return Labelled(uid, source, session, message, position, role, item["fact_bearing"], gold, file)


def _fact(where: str, item: Any) -> GoldFact:
    if not isinstance(item, dict) or not isinstance(item.get("entity"), str) or not item["entity"].strip():
        raise InputError(f"{where}: needs an 'entity' name")
    cls, prop, value = item.get("class"), item.get("property"), item.get("value")
    if cls is not None and prop is None and value is None:
        return GoldFact(item["entity"], cls=expand(cls, where))
    if cls is None and isinstance(prop, str) and isinstance(value, str) and value.strip():
        return GoldFact(item["entity"], prop=expand(prop, where), value=value)
    raise InputError(f"{where}: a fact is either a class alone or a property with a text value")


def expand(name: Any, where: str = "label") -> str:
    """``schema:BuyAction`` -> its IRI; an unknown prefix is an InputError."""
    match = _CURIE.fullmatch(name) if isinstance(name, str) else None
    if match is None or match.group(1) not in PREFIXES:
        raise InputError(f"{where}: {name!r} is not a prefixed name with a known prefix")
    return PREFIXES[match.group(1)] + match.group(2)


def vocabulary_term(value: str) -> str | None:
    """The IRI a gold value names when it is a prefixed vocabulary term (``schema:Monday``), else None."""
    match = _CURIE.fullmatch(value)
    return PREFIXES[match.group(1)] + match.group(2) if match and match.group(1) in PREFIXES else None


# ---------------------------------------------------------------------------------------------------- conversations


def label_conversations(labels: LabelSet, data_dir: Path | None = None) -> list[Conversation]:
    """The conversations that hold the labelled utterances, read from their files (samples, or ``data_dir/data``).

    Only the sessions with a labelled utterance are returned, whole (their other turns are context).
    """
    if labels.data is None:  # the bundled samples, by file stem
        stems = {u.file for u in labels.utterances if u.file is not None}
        paths = [p for p in sample_paths() if p.stem in stems]
        missing = stems - {p.stem for p in paths}
        if missing:
            raise InputError(f"{labels.path}: no sample conversation file {sorted(missing)}")
    elif data_dir is None:
        raise UsageError(f"{labels.path}: its conversations are in the shared data folder: say where it is")
    else:
        paths = [Path(data_dir) / labels.data]
    sessions = {u.session for u in labels.utterances}
    return [c for p in paths for c in parse_file(p) if c.id in sessions]


def resolve(labels: LabelSet, conversations: Iterable[Conversation]) -> dict[str, Utterance]:
    """Labelled id -> the utterance it names; an id that names none is an InputError."""
    found: dict[tuple[str, str], Utterance] = {}
    for conversation in conversations:
        for u in conversation.utterances:
            found[(conversation.id, u.source_id if u.source_id is not None else f"#{u.position}")] = u
            found.setdefault((conversation.id, f"#{u.position}"), u)
    resolved, missing = {}, []
    for labelled in labels.utterances:
        key = labelled.message if labelled.message is not None else f"#{labelled.position}"
        utterance = found.get((labelled.session, key))
        if utterance is None:
            missing.append(labelled.id)
        else:
            resolved[labelled.id] = utterance
    if missing:
        raise InputError(f"{labels.path}: no utterance for {', '.join(missing)}")
    return resolved


def post_iri(naming: Naming, labelled: Labelled) -> str:
    """The post a labelled utterance became (post IRIs derive from session and message ids, docs/DESIGN.md §2)."""
    return naming.post(naming.post_key(labelled.session, labelled.message, labelled.position or 0))


# ----------------------------------------------------------------------------------------------------------- scores


@dataclass(frozen=True)
class StoredFact:
    """One counted statement of an utterance's extraction, shown with names for a report."""

    subject: str
    predicate: str
    object: str
    literal: bool

    def show(self, names: Mapping[str, Sequence[str]], ontology: Ontology) -> str:
        def name(iri: str) -> str:
            return (names.get(iri) or [ontology.curie(iri)])[0]

        value = repr(self.object) if self.literal else name(self.object)
        return f"{name(self.subject)} {ontology.curie(self.predicate)} {value}"


@dataclass(frozen=True)
class Tally:
    """Counts behind precision and recall; add tallies to pool utterances or sources."""

    stored: int = 0
    matched_stored: int = 0
    gold: int = 0
    matched_gold: int = 0

    def __add__(self, other: Tally) -> Tally:
        return Tally(self.stored + other.stored, self.matched_stored + other.matched_stored,
                     self.gold + other.gold, self.matched_gold + other.matched_gold)

    @property
    def precision(self) -> float | None:
        return self.matched_stored / self.stored if self.stored else None

    @property
    def recall(self) -> float | None:
        return self.matched_gold / self.gold if self.gold else None

    @property
    def f1(self) -> float | None:
        p, r = self.precision, self.recall
        return None if p is None or r is None or p + r == 0 else 2 * p * r / (p + r)


@dataclass(frozen=True)
class Gate:
    """Fact-bearing by the gold against "stored at least one fact": the figures an extraction gate is judged by."""

    kept: int = 0
    """Fact-bearing utterances with stored facts."""
    lost: int = 0
    """Fact-bearing utterances with none (failed, skipped or empty)."""
    spurious: int = 0
    """Utterances stating nothing worth remembering that got facts anyway."""
    quiet: int = 0
    """Utterances stating nothing that got nothing."""

    def __add__(self, other: Gate) -> Gate:
        return Gate(self.kept + other.kept, self.lost + other.lost, self.spurious + other.spurious,
                    self.quiet + other.quiet)


@dataclass
class UtteranceScore:
    """One labelled utterance: what was stored and which facts matched."""

    labelled: Labelled
    post: str
    status: str | None
    """The post's extraction status (``extracted``, ``failed``, ``skipped``, ``pending``)."""
    stored: list[StoredFact]
    stored_matched: list[bool]
    gold_matched: list[bool]
    names: dict[str, list[str]] = field(default_factory=dict)

    @property
    def tally(self) -> Tally:
        return Tally(len(self.stored), sum(self.stored_matched), len(self.gold_matched), sum(self.gold_matched))

    @property
    def gate(self) -> Gate:
        said = bool(self.stored)
        if self.labelled.fact_bearing:
            return Gate(kept=1) if said else Gate(lost=1)
        return Gate(spurious=1) if said else Gate(quiet=1)

    def missing(self) -> list[GoldFact]:
        return [f for f, ok in zip(self.labelled.facts, self.gold_matched, strict=True) if not ok]

    def unmatched(self) -> list[StoredFact]:
        return [f for f, ok in zip(self.stored, self.stored_matched, strict=True) if not ok]


@dataclass
class FactScore:
    """Scores of labelled utterances, pooled overall or per source."""

    utterances: list[UtteranceScore]

    @property
    def sources(self) -> list[str]:
        return list(dict.fromkeys(u.labelled.source for u in self.utterances))

    def tally(self, source: str | None = None) -> Tally:
        return sum((u.tally for u in self._of(source)), Tally())

    def gate(self, source: str | None = None) -> Gate:
        return sum((u.gate for u in self._of(source)), Gate())

    def fact_bearing_ids(self, source: str | None = None) -> frozenset[str]:
        return frozenset(u.labelled.id for u in self._of(source) if u.labelled.fact_bearing)

    def _of(self, source: str | None) -> list[UtteranceScore]:
        return [u for u in self.utterances if source is None or u.labelled.source == source]

    def __add__(self, other: FactScore) -> FactScore:
        return FactScore(self.utterances + other.utterances)

    def lines(self, ontology: Ontology | None = None) -> list[str]:
        """A printable report: one line per source and overall; with ``ontology``, each utterance's misses too."""
        out = []
        for source in [*self.sources, None]:
            t, g, n = self.tally(source), self.gate(source), len(self._of(source))
            out.append(
                f"{source or 'overall'}: {n} utterances; precision {_pct(t.precision)} ({t.matched_stored}/{t.stored}),"
                f" recall {_pct(t.recall)} ({t.matched_gold}/{t.gold}), F1 {_pct(t.f1)}; gate: fact-bearing with "
                f"facts {g.kept}/{g.kept + g.lost}, non-fact-bearing without facts {g.quiet}/{g.quiet + g.spurious}"
            )
        if ontology is not None:
            for u in self.utterances:
                missing, extra = u.missing(), u.unmatched()
                if missing or extra:
                    out.append(f"  {u.labelled.source} {u.labelled.id} ({u.status}):")
                    out += [f"    missing  {f.show(ontology)}" for f in missing]
                    out += [f"    unlabelled {f.show(u.names, ontology)}" for f in extra]
        return out


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def score(memory: Memory, label_sets: Sequence[LabelSet], *, only: Collection[str] | None = None) -> FactScore:
    """Score what ``memory`` extracted for the labelled utterances (``only``: these ids) against the gold.

    Every scored utterance must be stored in the memory (ingest its conversation first); one that was not extracted
    scores as storing nothing.
    """
    ontology = memory.ontology
    chosen = [(s, u) for s in label_sets for u in s.utterances if only is None or u.id in only]
    posts = {(s.source, u.id): post_iri(memory.naming, u) for s, u in chosen}
    absent = set(posts.values()) - memory.store.existing_posts(list(posts.values()))
    if absent:
        ids = sorted(f"{key[0]}:{key[1]}" for key, iri in posts.items() if iri in absent)
        raise UsageError(f"the memory holds no post for {', '.join(ids[:10])}: ingest their conversations first")
    statuses = _statuses(memory, list(posts.values()))
    matchers = {s.source: _Matcher(ontology, s.described(ontology)) for s in label_sets}
    results = []
    for label_set, labelled in chosen:
        post = posts[(label_set.source, labelled.id)]
        triples = _post_triples(memory, memory.naming.extraction_graph(post))
        cards = _cards(memory, {t for s, _, o, lit in triples for t in (s, None if lit else o) if t is not None})
        stored, stored_matched, gold_matched = matchers[label_set.source].utterance(labelled, triples, cards)
        results.append(UtteranceScore(labelled, post, statuses.get(post), stored, stored_matched, gold_matched,
                                      cards.names))
    return FactScore(results)


def _statuses(memory: Memory, posts: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for start in range(0, len(posts), 200):
        q = render("post_status", posts=values_clause("post", posts[start : start + 200]))
        for row in memory.store.select(q).rows:
            post, status = _text(row[0]), _text(row[1])
            if post is not None and status is not None:
                out[post] = status
    return out


_Triple = tuple[str, str, str, bool]
"""subject, predicate, object (IRI, blank node id or lexical form), object is a literal."""


def _post_triples(memory: Memory, graph: str) -> list[_Triple]:
    rows = memory.store.select(render_query("evaluation/post_facts", graph=iri_term(graph))).rows
    out = []
    for s, p, o in rows:
        subject, predicate, value = _text(s), _text(p), _text(o)
        if subject is not None and predicate is not None and value is not None:
            out.append((subject, predicate, value, isinstance(o, ox.Literal)))
    return list(dict.fromkeys(out))


def _text(term: object) -> str | None:
    """An IRI or a literal's lexical form; a blank node as ``_:id`` (never an IRI, so never looked up)."""
    if isinstance(term, ox.BlankNode):
        return f"_:{term.value}"
    if isinstance(term, ox.NamedNode | ox.Literal):
        return str(term.value)
    return None


@dataclass
class _Cards:
    names: dict[str, list[str]] = field(default_factory=dict)
    types: dict[str, set[str]] = field(default_factory=dict)


def _cards(memory: Memory, nodes: set[str]) -> _Cards:
    cards = _Cards()
    iris = sorted(n for n in nodes if not n.startswith("_:"))
    for start in range(0, len(iris), 200):
        q = render_query("evaluation/node_cards", nodes=values_clause("n", iris[start : start + 200]))
        for row in memory.store.select(q).rows:
            node, name, kind = _text(row[0]), _text(row[1]), _text(row[2])
            if node is None:
                continue
            if name is not None and name not in cards.names.setdefault(node, []):
                cards.names[node].append(name)
            if kind is not None:
                cards.types.setdefault(node, set()).add(kind)
    return cards


# --------------------------------------------------------------------------------------------------------- matching


class _Matcher:
    """Matches one label set's gold facts against stored triples (see the module docstring)."""

    def __init__(self, ontology: Ontology, described: dict[str, frozenset[str]]) -> None:
        self.ontology = ontology
        self.described = described
        self.relations = _relations(ontology)

    def utterance(
        self, labelled: Labelled, triples: list[_Triple], cards: _Cards
    ) -> tuple[list[StoredFact], list[bool], list[bool]]:
        """The counted stored facts, which of them match a gold fact, and which gold facts are found."""
        counted = [t for t in triples if self._counts(t)]
        nodes = list(dict.fromkeys(n for s, _, o, lit in triples for n in ((s,) if lit else (s, o))))
        candidates = _Candidates(self, nodes, cards)
        gold_matched = [self._gold_found(f, triples, candidates, cards) for f in labelled.facts]
        stored_matched = [
            any(self._matches(t, f, candidates, cards) for f in labelled.facts) for t in counted
        ]
        return [StoredFact(s, p, o, lit) for s, p, o, lit in counted], stored_matched, gold_matched

    def _counts(self, triple: _Triple) -> bool:
        _, p, o, lit = triple
        if p in NAME_PROPERTIES or p == ACTION_STATUS or p.startswith(PROV) or self._bookkeeping(p):
            return False
        return not (p == RDF_TYPE and not lit and (o.startswith(PROV) or self._bookkeeping(o)))

    def _bookkeeping(self, iri: str) -> bool:
        term = self.ontology.terms.get(iri)
        return term is not None and term.area in BOOKKEEPING_AREAS

    def _gold_found(self, fact: GoldFact, triples: list[_Triple], candidates: _Candidates, cards: _Cards) -> bool:
        if fact.cls is not None:
            wanted = self.ontology.subclasses(fact.cls)
            return any(cards.types.get(n, set()) & wanted for n in candidates.of(fact.entity))
        return any(self._matches(t, fact, candidates, cards) for t in triples)

    def _matches(self, triple: _Triple, fact: GoldFact, candidates: _Candidates, cards: _Cards) -> bool:
        s, p, o, lit = triple
        if fact.cls is not None:
            return (p == RDF_TYPE and not lit and o in self.ontology.subclasses(fact.cls)
                    and s in candidates.of(fact.entity))
        assert fact.prop is not None and fact.value is not None
        wanted = self.ontology.subproperties(fact.prop)
        for subject, predicate, value, literal in self._views(s, p, o, lit):
            if predicate in wanted and subject in candidates.of(fact.entity):
                if literal and literal_matches(value, fact.value):
                    return True
                if not literal and self._node_matches(value, fact.value, candidates, cards):
                    return True
        return False

    def _views(self, s: str, p: str, o: str, lit: bool) -> list[_Triple]:
        """The statement as written, and read backwards when its property is symmetric or has an inverse."""
        views = [(s, p, o, lit)]
        if not lit:
            if p in self.relations.symmetric:
                views.append((o, p, s, False))
            views += [(o, q, s, False) for q in self.relations.inverse.get(p, ())]
        return views

    def _node_matches(self, node: str, value: str, candidates: _Candidates, cards: _Cards) -> bool:
        term = vocabulary_term(value)
        if term is not None and self.ontology.defines(term):
            return node == term
        if node in candidates.of(value):
            return True
        return any(names_match(name, value) for name in cards.names.get(node, []))


class _Candidates:
    """The nodes of one utterance's graph that may be a gold entity (computed per name, once)."""

    def __init__(self, matcher: _Matcher, nodes: list[str], cards: _Cards) -> None:
        self.matcher, self.nodes, self.cards = matcher, nodes, cards
        self._memo: dict[str, frozenset[str]] = {}

    def of(self, name: str) -> frozenset[str]:
        if name not in self._memo:
            self._memo[name] = self._find(name)
        return self._memo[name]

    def _find(self, name: str) -> frozenset[str]:
        key = normalise_label(name)
        exact = {n for n in self.nodes if any(normalise_label(x) == key for x in self.cards.names.get(n, []))}
        found = exact or {n for n in self.nodes if any(names_match(x, name) for x in self.cards.names.get(n, []))}
        ontology = self.matcher.ontology
        for cls in self.matcher.described.get(key, ()):
            wanted = ontology.subclasses(cls)
            found |= {n for n in self.nodes if self.cards.types.get(n, set()) & wanted}
        return frozenset(found)


@dataclass(frozen=True)
class _Relations:
    symmetric: frozenset[str]
    inverse: dict[str, tuple[str, ...]]


@cache
def _relations(ontology: Ontology) -> _Relations:
    """Symmetric properties, and each property's inverses (``owl:inverseOf`` read both ways)."""
    graph = ontology.graph
    declared = {str(s) for s in graph.subjects(rdflib.RDF.type, OWL.SymmetricProperty)}
    # an equivalent of a symmetric property is symmetric too (schema:sibling = ob:hasSibling)
    symmetric = frozenset(q for p in declared for q in ontology.subproperties(p) & ontology.superproperties(p))
    inverse: dict[str, set[str]] = {}
    for a, b in graph.subject_objects(OWL.inverseOf):
        if isinstance(a, rdflib.URIRef) and isinstance(b, rdflib.URIRef):
            for one, two in ((str(a), str(b)), (str(b), str(a))):
                for sub in ontology.subproperties(one):  # a mother is a parent: her child's parent
                    inverse.setdefault(sub, set()).add(two)
    return _Relations(symmetric, {p: tuple(sorted(q)) for p, q in inverse.items()})


# ------------------------------------------------------------------------------------------------ names and values


def tokens(text: str) -> frozenset[str]:
    """Content words of a name, lightly stemmed: what two wordings of one name share. A possessor is not part of the
    name ("Owen's sock" is a sock, "Dana's car" ~ "my car"), so only the words after the last "'s" count."""
    words = normalise_label(text.replace("\u2019", "'")).split()
    if "s" in words[:-1]:
        words = words[len(words) - 1 - words[::-1].index("s") + 1 :]
    return frozenset(_stem(w) for w in words if w not in STOPWORDS and (len(w) > 1 or w.isdigit()))


def names_match(found: str, wanted: str) -> bool:
    """A stored name or text against a gold one: same normalised form, every gold word in the stored one ("manager"
    ~ "team manager"), or the stored words all in the gold ones and at least half of them ("Dana" ~ "Dana
    Whitfield", "Trek bike" ~ "the red Trek bike")."""
    if normalise_label(found) == normalise_label(wanted):
        return True
    have, want = tokens(found), tokens(wanted)
    if not have or not want:
        return False
    return want <= have or (have <= want and 2 * len(have) >= len(want))


def literal_matches(stored: str, gold: str) -> bool:
    """A stored literal against a gold value: dates by prefix, numbers by value, times by clock, else by name."""
    stored, gold = stored.strip(), gold.strip()
    if _DATE.fullmatch(gold):
        if stored.startswith(gold):
            return True
        if "-" in gold:
            return False  # a stored date less precise than the gold one leaves the gold day unsaid
    gold_number, stored_number = _number(gold), _number(stored)
    if gold_number is not None and stored_number is not None:
        return gold_number == stored_number
    if gold_number is not None and _DATE.match(stored):
        return False  # "20" is not the day of "2025-06-20"
    time = _TIME.fullmatch(gold)
    if time:
        return stored.startswith(f"{int(time.group(1)):02d}:{time.group(2)}")
    return names_match(stored, gold)


def _number(text: str) -> Decimal | None:
    cleaned = text.replace(",", "").replace("_", "").strip().lstrip("$€£").strip()
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


_SUFFIXES = ("ations", "ation", "ances", "ance", "ences", "ence", "ings", "ing", "ments", "ment", "ness",
             "ants", "ant", "ents", "ent", "ies", "ied", "ed", "es", "s")


def _stem(word: str) -> str:
    """Strip one common English suffix (plural, -ing, -ance, ...) so "intolerant" ~ "intolerance", "runs" ~ "running";
    both sides go through it, so what it does wrong it does wrong to both."""
    if word.isdigit():
        return word
    for suffix in _SUFFIXES:
        stem = word[: -len(suffix)]
        if not word.endswith(suffix) or len(stem) < 3:
            continue
        if suffix == "es" and not stem.endswith(("s", "x", "z", "ch", "sh")):
            continue
        if suffix in ("ies", "ied"):
            stem += "y"
        word = stem
        break
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiousl":
        word = word[:-1]
    return word

"""What the NL→SPARQL model is told about this memory besides the question (docs/DESIGN.md §7).

Four things, each because a query cannot be right without it:

* **The vocabulary** (the ontology catalogue): all of it while it is small, otherwise the areas the question, its
  entities and their types point to (the full compact catalogue is ~6k tokens; the prompt's budget is ~4k); or all
  of it in the fixed system prompt for a model that keeps its previous prompt (``whole``, see
  :func:`pcm.llm.base.catalogue_layout`), which then re-reads only the question's own tokens.
* **What this memory actually uses**, classes and properties with counts: a query over a term nobody used returns
  nothing, and the counts steer the model to the terms extraction really wrote. Computed with two aggregate
  queries, cached per memory version (in the process and on disk beside the memory), so it is refreshed after a
  write and costs nothing otherwise.
* **The entities the question mentions**, found by entity-to-vertex matching on its names and noun phrases (the
  side index when it is there, exact label lookups otherwise), up to 30, with their types: the model can then use
  ``m:biscuit`` instead of guessing how a name was spelt.
* **The question's date and the owner's IRI**: "last month" and "I" mean nothing without them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from pcm.context import CACHE_DIR
from pcm.errors import PcmError
from pcm.resources import render_query
from pcm.sparql import literal_term, values_clause
from pcm.words import CONTENT_STOPWORDS

if TYPE_CHECKING:
    from pcm.context import MemoryContext
    from pcm.index import SideIndex
    from pcm.ontology import Ontology

log = logging.getLogger(__name__)

#: Entities offered per question.
MAX_ENTITIES = 30
#: Mentions looked up per question (each costs one entity match).
MAX_MENTIONS = 8
#: Candidates per mention.
PER_MENTION = 5
#: Mentions matched through the side index: each costs an embedding of the mention plus a full-text and a vector
#: search (20-100 ms on a busy 2-core machine), the largest share of the non-LLM time; names are found by the
#: exact label lookups anyway. A fixed number, not a time budget, so the same question always gets the same prompt.
MAX_VECTOR_MENTIONS = 1
#: Score of an exact label hit (the index's exact tier is [0.9, 1.0]).
EXACT_SCORE = 0.95
#: Below the label tiers (exact ≥ 0.9, normalised ≥ 0.8), a full-text/vector match must score at least this.
MIN_FUZZY_SCORE = 0.3
#: The whole catalogue goes in while it is at most this many (approximate) tokens.
FULL_CATALOGUE_TOKENS = 1800
#: Otherwise the areas sent are cut to this budget (keeping the core and the areas of the matched entities' types),
#: so the whole prompt (~1.1k of instructions and examples, the catalogue, ~0.5k of grounding) stays under ~4k.
CATALOGUE_TOKENS = 2300
#: Used terms listed per kind, and of those how many from outside the catalogue areas sent.
MAX_USED_TERMS = 40
MAX_OTHER_USED_TERMS = 8
#: Core catalogue areas of every ask prompt (places only when the question or its entities point there).
ASK_CORE = ("people", "activities", "time", "general")
_PLACE_WORDS = re.compile(
    r"\b(where|city|cities|town|live[sd]?|living|mov(?:e|ed|ing)|travel\w*|trip|visit\w*|countr\w+|place|"
    r"located|address|park|office|home|neighbo\w+|went|go(?:es|ing)? to)\b",
    re.IGNORECASE,
)
BOOKKEEPING = frozenset({
    "http://www.w3.org/1999/02/22-rdf-syntax-ns#type", "http://www.w3.org/2000/01/rdf-schema#label",
    "http://www.w3.org/ns/prov#wasDerivedFrom", "http://www.w3.org/ns/prov#wasAttributedTo",
    "http://purl.org/dc/terms/identifier", "http://purl.org/dc/terms/created", "http://purl.org/dc/terms/title",
    "https://w3id.org/pcm/ontology#position", "https://w3id.org/pcm/ontology#role",
})
#: Areas never sent: pcm's own bookkeeping (posts are described in the prompt's prose).
HIDDEN_AREAS = frozenset({"conversation", "provenance"})
_REMOTE_VERSION_TTL = 5.0

_WORD = re.compile(r"[A-Za-z0-9À-ÿ][\w'’&.-]*")


@dataclass(frozen=True)
class GroundedEntity:
    """One individual the question probably mentions, as offered to the model."""

    iri: str
    label: str
    types: tuple[str, ...]
    score: float
    how: str


@dataclass(frozen=True)
class Usage:
    """Classes and properties with their counts in this memory (most used first)."""

    version: str
    classes: tuple[tuple[str, int], ...]
    properties: tuple[tuple[str, int], ...]


@dataclass
class Grounding:
    """Everything the prompt says about the memory for one question."""

    question: str
    as_of: datetime
    owner: str
    owner_name: str
    namespace: str
    areas: tuple[str, ...] | None
    """Catalogue areas sent, or None for the whole catalogue."""
    catalogue: str
    """The catalogue of the system prompt: the core areas, the same for every question of a memory (or everything,
    while the catalogue is small or in the whole layout), so a model's prompt cache keeps it from one question to
    the next."""
    usage: Usage
    vocabulary: str = ""
    """The question's own areas beyond the core (their catalogue blocks, no second legend), sent in the user turn
    after the fixed system prompt; empty when the core covers the question."""
    entities: list[GroundedEntity] = field(default_factory=list)
    seconds: float = 0.0

    def short(self, iri: str, ontology: Ontology) -> str:
        """``m:slug`` for this memory's individuals, a CURIE for vocabulary, ``<iri>`` otherwise."""
        if iri.startswith(self.namespace) and re.fullmatch(r"[A-Za-z0-9_-]+", iri[len(self.namespace) :]):
            return "m:" + iri[len(self.namespace) :]
        return ontology.curie(iri)

    def render_used(self, ontology: Ontology) -> str:
        """Terms in use with counts: those of the catalogue areas sent, then the most used others, bookkeeping
        (posts, provenance, rdf:type, labels) left out since the prompt's prose covers it."""
        classes = ", ".join(f"{ontology.curie(c)} {n}" for c, n in self._used(self.usage.classes, ontology))
        properties = ", ".join(f"{ontology.curie(p)} {n}" for p, n in self._used(self.usage.properties, ontology))
        return f"classes: {classes or '(none yet)'}\nproperties: {properties or '(none yet)'}"

    def _used(self, counts: Sequence[tuple[str, int]], ontology: Ontology) -> list[tuple[str, int]]:
        def area(iri: str) -> str:
            term = ontology.terms.get(iri)
            return term.area if term is not None else ""

        kept = [(t, n) for t, n in counts if t not in BOOKKEEPING and area(t) not in HIDDEN_AREAS]
        if self.areas is None:
            return kept[:MAX_USED_TERMS]
        inside = [(t, n) for t, n in kept if area(t) in self.areas]
        outside = [(t, n) for t, n in kept if area(t) not in self.areas][:MAX_OTHER_USED_TERMS]
        return (inside + outside)[:MAX_USED_TERMS]

    def render_entities(self, ontology: Ontology) -> str:
        lines = []
        for e in self.entities:
            types = ", ".join(ontology.curie(t) for t in e.types) or "untyped"
            label = " ".join(e.label.split()).replace('"', "'")
            lines.append(f'- {self.short(e.iri, ontology)} "{label}" ({types})')
        return "\n".join(lines) if lines else "(none found)"


# ------------------------------------------------------------------------------------------------ building


def build_grounding(
    memory: MemoryContext, question: str, *, as_of: datetime, ontology: Ontology | None = None, whole: bool = False
) -> Grounding:
    """Ground one question (see the module docstring); ``whole``: the whole catalogue, whatever the question."""
    from pcm.ontology import load_ontology

    started = time.perf_counter()
    ontology = ontology or load_ontology()
    entities = match_question_entities(memory, question)
    areas = None if whole else catalogue_areas(question, entities, ontology)
    catalogue, vocabulary = split_catalogue(ontology, areas)
    return Grounding(
        question=question,
        as_of=as_of,
        owner=memory.naming.owner,
        owner_name=memory.manifest.owner,
        namespace=memory.naming.namespace,
        areas=areas,
        catalogue=catalogue,
        vocabulary=vocabulary,
        usage=usage_stats(memory),
        entities=entities,
        seconds=time.perf_counter() - started,
    )


def catalogue_areas(question: str, entities: Sequence[GroundedEntity], ontology: Ontology) -> tuple[str, ...] | None:
    """None (everything) while the catalogue is small; otherwise the core plus the areas the question points to."""
    from pcm.catalogue_areas import select_areas
    from pcm.ontology import AREAS

    visible = tuple(a for a in AREAS if a not in HIDDEN_AREAS)
    if _approx_tokens(_catalogue(ontology, visible)) <= FULL_CATALOGUE_TOKENS:
        return None
    text = " ".join([question, *(e.label for e in entities)])
    types = [t for e in entities for t in e.types]
    chosen = set(select_areas(text, entity_types=types, ontology=ontology)) - HIDDEN_AREAS
    type_areas = {ontology.terms[t].area for t in types if t in ontology.terms}
    if "places" not in type_areas and not _PLACE_WORDS.search(question):
        chosen.discard("places")  # the extraction core includes places; an ask prompt needs it less often
    chosen.update(ASK_CORE)
    optional = sorted(chosen - set(ASK_CORE) - type_areas,
                      key=lambda a: (-len(_catalogue(ontology, (a,))), a))
    while optional and _approx_tokens(_catalogue(ontology, tuple(a for a in AREAS if a in chosen))) > CATALOGUE_TOKENS:
        chosen.discard(optional.pop(0))  # the biggest area only a keyword asked for goes first
    return tuple(a for a in AREAS if a in chosen)


def split_catalogue(ontology: Ontology, areas: tuple[str, ...] | None) -> tuple[str, str]:
    """``(system catalogue, user-turn vocabulary)`` for the chosen ``areas``.

    Why split: a local model re-reads a prompt only from the first token that differs from its previous one, so
    the part that changes from question to question (the areas beyond :data:`ASK_CORE`) goes in the user turn and
    the system prompt stays byte-identical across questions. ``None`` (the whole, small catalogue) stays whole.
    """
    if areas is None:
        return _catalogue(ontology, None), ""
    from pcm.ontology import AREAS

    core = tuple(a for a in AREAS if a in ASK_CORE)
    extra = tuple(a for a in areas if a not in ASK_CORE)
    if not extra:
        return _catalogue(ontology, core), ""
    return _catalogue(ontology, core), ontology.catalogue(extra, compact=True, legend=False)


def whole_catalogue(ontology: Ontology) -> str:
    """The compact catalogue of every area an ask prompt may show (all but pcm's bookkeeping)."""
    return _catalogue(ontology, None)


@lru_cache(maxsize=256)
def _catalogue(ontology: Ontology, areas: tuple[str, ...] | None) -> str:
    """The compact catalogue of some areas (None: all but the hidden ones), rendered once per selection."""
    if areas is None:
        from pcm.ontology import AREAS

        areas = tuple(a for a in AREAS if a not in HIDDEN_AREAS)
    return ontology.catalogue(areas, compact=True)


def _approx_tokens(text: str) -> int:
    return round(len(text) / 3.5)


# ------------------------------------------------------------------------------------------------ entities


def mentions(question: str, limit: int = MAX_MENTIONS, *, exclude: Iterable[str] = ()) -> list[str]:
    """Names and noun phrases worth matching: capitalised spans first, then content bigrams, then single words.

    ``exclude`` drops words that are known anyway (the owner's name: the owner's IRI is always in the prompt).
    """
    skip = {w.lower() for w in exclude}
    words = [w.rstrip(".'’").removesuffix("'s").removesuffix("’s") for w in _WORD.findall(question)]
    words = [w for w in words if w and w.lower() not in skip]
    spans: list[str] = []
    current: list[str] = []
    for i, word in enumerate(words):
        capital = word[0].isupper() and (i > 0 or word.lower() not in CONTENT_STOPWORDS)
        if capital and word.lower() not in CONTENT_STOPWORDS | {"i"}:
            current.append(word)
            continue
        if current:
            spans.append(" ".join(current))
            current = []
    if current:
        spans.append(" ".join(current))
    content = [w.lower() for w in words if w.lower() not in CONTENT_STOPWORDS and len(w) > 1]
    bigrams = [
        f"{a.lower()} {b.lower()}" for a, b in zip(words, words[1:], strict=False)
        if a.lower() not in CONTENT_STOPWORDS and b.lower() not in CONTENT_STOPWORDS and len(a) > 1 and len(b) > 1
    ]
    ordered: dict[str, str] = {}
    for mention in [*spans, *bigrams, *content]:
        ordered.setdefault(mention.lower(), mention)
    return list(ordered.values())[:limit]


def match_question_entities(memory: MemoryContext, question: str, *, limit: int = MAX_ENTITIES) -> list[GroundedEntity]:
    """Entity-to-vertex matching for the question's mentions, fused by best score.

    Two legs, for speed: exact labels of every mention in one indexed SPARQL lookup (names are never missed, and
    cost one query); then the side index's matching (labels, full text and vectors) for the first few mentions
    that no label matched, since each costs an embedding of the mention.
    """
    found: dict[str, tuple[float, str, str]] = {}
    skip = {memory.naming.owner, memory.naming.assistant}

    def keep(iri: str, label: str, score: float, how: str) -> None:
        if iri in skip or score < MIN_FUZZY_SCORE:
            return
        best = found.get(iri)
        if best is None or score > best[0]:
            found[iri] = (score, label, how)

    said = mentions(question, exclude=memory.manifest.owner.split())
    named: set[str] = set()
    for mention, iri, label in _label_lookup(memory, said):
        named.add(mention)
        keep(iri, label, EXACT_SCORE, "exact")
    index = _index(memory)
    if index is not None:
        fuzzy = [m for m in said if m not in named][:MAX_VECTOR_MENTIONS]
        many = getattr(index, "match_entities_many", None)  # one batched embedding, when the index offers it
        results = many(fuzzy, PER_MENTION) if many is not None else [index.match_entities(m, PER_MENTION) for m in fuzzy]
        for matches in results:
            for match in matches:
                keep(match.iri, match.label, match.score, match.how)
    ranked = sorted(found.items(), key=lambda item: (-item[1][0], item[1][1], item[0]))[:limit]
    types = entity_types(memory, [iri for iri, _ in ranked])
    return [
        GroundedEntity(iri, types.get(iri, (label, ()))[0] or label, types.get(iri, ("", ()))[1], round(score, 4), how)
        for iri, (score, label, how) in ranked
    ]


def _index(memory: MemoryContext) -> SideIndex | None:
    """The side index when it can be used; otherwise None (grounding keeps the exact label lookups)."""
    if not memory.settings.index_enabled:
        return None
    try:
        return memory.index
    except (PcmError, OSError) as error:
        log.info("side index unavailable for grounding: %s", error)
        return None


def _label_lookup(memory: MemoryContext, said: Sequence[str]) -> Iterable[tuple[str, str, str]]:
    """(mention, IRI, label) for individuals labelled exactly as a mention, in its usual capitalisations."""
    variants: dict[str, str] = {}
    for mention in said:
        for variant in (mention, mention.lower(), mention.title(), mention.capitalize()):
            variants.setdefault(variant, mention)
    if not variants:
        return
    clause = "VALUES ?label { " + " ".join(literal_term(v) for v in sorted(variants)) + " }"
    for row in memory.store.select(render_query("ask/label_lookup", labels=clause)).dicts():
        label = row["label"].value
        yield variants.get(label, label), row["e"].value, label


def entity_types(memory: MemoryContext, iris: Sequence[str]) -> dict[str, tuple[str, tuple[str, ...]]]:
    """(label, sorted types) per IRI, in one query."""
    if not iris:
        return {}
    query = render_query("ask/entity_types", entities=values_clause("e", list(iris)))
    out: dict[str, tuple[str, set[str]]] = {}
    for row in memory.store.select(query).dicts():
        label, types = out.setdefault(row["e"].value, ("", set()))
        if "label" in row and not label:
            label = row["label"].value
        if "type" in row:
            types.add(row["type"].value)
        out[row["e"].value] = (label, types)
    return {iri: (label, tuple(sorted(types))) for iri, (label, types) in out.items()}


# ------------------------------------------------------------------------------------------------ usage


def memory_version(memory: MemoryContext) -> str:
    """A short string that changes whenever what the memory holds changes (the key of ask's caches).

    It digests the counts of posts, activities and superseded statements and the latest activity time (one
    query, :file:`queries/ask/memory_version.rq`). On a local store that query runs only when the RocksDB files
    changed (their names, sizes and times are read in well under a millisecond), so an unchanged memory costs
    nothing and a compaction, which changes files but no fact, keeps the version. A remote store is re-read at
    most every few seconds.
    """
    fingerprint = memory.backend.fingerprint()
    now = time.monotonic()
    if fingerprint:
        key = f"{memory.settings.memory}|{fingerprint}"
        with memory.lock:
            if key in memory.versions:
                return memory.versions[key][1]
    else:
        key = str(memory.settings.store_url or memory.settings.memory)
        with memory.lock:
            cached = memory.versions.get(key)
            if cached and now - cached[0] < _REMOTE_VERSION_TTL:
                return cached[1]
    rows = memory.store.select(render_query("ask/memory_version")).rows
    values = [term.value if term is not None else "" for term in (rows[0] if rows else ())]
    version = hashlib.sha256("|".join([memory.naming.namespace, *values]).encode()).hexdigest()[:16]
    with memory.lock:
        if len(memory.versions) > 64:
            memory.versions.clear()
        memory.versions[key] = (now, version)
    return version


def usage_stats(memory: MemoryContext) -> Usage:
    """Classes and properties in use with counts, cached by memory version (process, then disk)."""
    version = memory_version(memory)
    key = f"{memory.settings.memory}|{version}"
    with memory.lock:
        if key in memory.usage:
            return memory.usage[key]
    usage = _read_cached_usage(memory, version) or _compute_usage(memory, version)
    with memory.lock:
        if len(memory.usage) > 16:
            memory.usage.clear()
        memory.usage[key] = usage
    return usage


def _compute_usage(memory: MemoryContext, version: str) -> Usage:
    classes = tuple(
        (row["class"].value, int(row["n"].value)) for row in memory.store.select(render_query("ask/usage_classes")).dicts()
    )
    properties = tuple(
        (row["property"].value, int(row["n"].value))
        for row in memory.store.select(render_query("ask/usage_predicates")).dicts()
    )
    usage = Usage(version, classes, properties)
    _write_cached_usage(memory, usage)
    return usage


def _usage_file(memory: MemoryContext) -> Path:
    return memory.settings.memory / CACHE_DIR / "usage.json"


def _read_cached_usage(memory: MemoryContext, version: str) -> Usage | None:
    try:
        data = json.loads(_usage_file(memory).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if data.get("version") != version:
        return None
    return Usage(version, tuple((c, int(n)) for c, n in data["classes"]), tuple((p, int(n)) for p, n in data["properties"]))


def _write_cached_usage(memory: MemoryContext, usage: Usage) -> None:
    """Best effort: a read-only memory directory simply gets no disk cache."""
    path = _usage_file(memory)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(
            json.dumps({"version": usage.version, "classes": usage.classes, "properties": usage.properties}),
            encoding="utf-8",
        )
        tmp.replace(path)
    except OSError as error:
        log.info("usage cache not written: %s", error)


__all__ = [
    "FULL_CATALOGUE_TOKENS",
    "GroundedEntity",
    "Grounding",
    "MAX_ENTITIES",
    "Usage",
    "build_grounding",
    "catalogue_areas",
    "entity_types",
    "match_question_entities",
    "memory_version",
    "mentions",
    "usage_stats",
    "whole_catalogue",
]

"""The PCM ontology: load it once, answer "is this a term?", walk its hierarchy, and write the prompt catalogue.

The ontology is every ``*.ttl`` file directly in ``pcm_ontology/``: the pcm: extensions plus the declarations of
each reused term (schema.org, FOAF, PROV-O, ...). Declaring reused terms here, rather than importing whole
vocabularies, keeps the vocabulary closed: extraction may only use what this module ``defines``, and the ontology
graph in the store is small enough for ``rdfs:subClassOf*`` queries.
"""

from __future__ import annotations

import re
import tomllib
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import pyoxigraph
import rdflib
from rdflib import OWL, RDF, RDFS, BNode, Literal, URIRef
from rdflib.collection import Collection

from pcm import resources
from pcm.errors import PcmError
from pcm.layout import LEGACY_LAYOUT, DatasetLayout
from pcm.namespaces import PCM, PREFIXES, SCHEMA
from pcm.ontology_files import ontology_digest

if TYPE_CHECKING:
    from pcm.shape_limits import ValueLimit

ONTOLOGY_IRI = "https://w3id.org/pcm/ontology"

AREAS_FILE = "areas.toml"


@dataclass(frozen=True)
class Area:
    """One topic terms are grouped by (``pcm:area``), declared in the ontology folder's ``areas.toml``."""

    name: str
    keywords: tuple[str, ...] = ()
    """Word stems that make extraction offer this area's terms (added to the ones it knows already)."""


def read_areas(folder: Path) -> tuple[Area, ...]:
    """The ``[[area]]`` entries of ``folder/areas.toml``, in order; :class:`PcmError` naming the file when malformed."""
    path = Path(folder) / AREAS_FILE
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise PcmError(f"{path}: {' '.join(str(error).split())}") from error
    entries = data.get("area")
    if not isinstance(entries, list) or not entries:
        raise PcmError(f"{path}: no [[area]] entry")
    areas = []
    for number, entry in enumerate(entries, 1):
        name, keywords = entry.get("name"), entry.get("keywords", [])
        if not isinstance(name, str) or not name.strip() or not isinstance(keywords, list) or not all(
                isinstance(k, str) and k for k in keywords):
            raise PcmError(f"{path}: [[area]] number {number} needs a name and, optionally, a list of keyword strings")
        areas.append(Area(name.strip(), tuple(keywords)))
    seen = [a.name for a in areas]
    twice = sorted({n for n in seen if seen.count(n) > 1})
    if twice:
        raise PcmError(f"{path}: area(s) declared twice: {', '.join(twice)}")
    return tuple(areas)


#: The shipped ontology's areas (``pcm_ontology/areas.toml``), in catalogue order. An ontology folder with its own
#: ``areas.toml`` has its own (:attr:`Ontology.areas`).
SHIPPED_AREAS: tuple[Area, ...] = read_areas(resources.ontology_dir())
#: The names of :data:`SHIPPED_AREAS`.
AREAS: tuple[str, ...] = tuple(a.name for a in SHIPPED_AREAS)
DEFAULT_AREA = "general"
#: Areas of terms that describe the ontology's own terms (``dcterms:isReplacedBy``), never a memory's data: not
#: declared in ``areas.toml``, so left out of the prompt catalogue, of extraction and of the competency suite's coverage.
META_AREAS: frozenset[str] = frozenset({"ontology"})

CLASS = "class"
OBJECT_PROPERTY = "object_property"
DATATYPE_PROPERTY = "datatype_property"
ANNOTATION_PROPERTY = "annotation_property"
INDIVIDUAL = "individual"
PROPERTY_KINDS = frozenset({OBJECT_PROPERTY, DATATYPE_PROPERTY, ANNOTATION_PROPERTY})
_KIND_ORDER = (CLASS, OBJECT_PROPERTY, DATATYPE_PROPERTY, ANNOTATION_PROPERTY, INDIVIDUAL)
_MAX_SIDE = 3  # domain / range classes shown per catalogue line; schema.org lists can be long
#: First line of a compact catalogue: the notation, so a model reading the prompt can decode it.
COMPACT_LEGEND = (
    "Notation: A⊑B = A is a subclass/subproperty of B (B&C: of both); \"D: p→R\" = property p is used on D "
    "with values R (X|Y = either, * = anything); ! = one value at a time."
)

_AREA = URIRef(PCM + "area")
IS_REPLACED_BY = URIRef("http://purl.org/dc/terms/isReplacedBy")
_DOMAIN_INCLUDES = URIRef(SCHEMA + "domainIncludes")
_RANGE_INCLUDES = URIRef(SCHEMA + "rangeIncludes")
# Which rdf:type makes a subject which kind of term; the first match in this order wins.
_KIND_BY_TYPE: tuple[tuple[URIRef, str], ...] = (
    (OWL.Class, CLASS),
    (OWL.ObjectProperty, OBJECT_PROPERTY),
    (OWL.DatatypeProperty, DATATYPE_PROPERTY),
    (OWL.AnnotationProperty, ANNOTATION_PROPERTY),
    (OWL.NamedIndividual, INDIVIDUAL),
)


@dataclass(frozen=True)
class Term:
    """One declared class, property or individual, flattened for prompts and checks."""

    iri: str
    kind: str
    """``class``, ``object_property``, ``datatype_property``, ``annotation_property`` or ``individual``."""
    label: str
    comment: str
    area: str
    parents: tuple[str, ...]
    """Direct superclasses / superproperties; for an individual, its classes."""
    domain: tuple[str, ...]
    """``rdfs:domain`` (union members spelt out) plus schema.org's non-logical ``schema:domainIncludes``."""
    range: tuple[str, ...]
    """``rdfs:range`` (union members spelt out) plus ``schema:rangeIncludes``."""
    deprecated: bool = False
    """``owl:deprecated true``: kept so stored data stays valid, but no longer offered to the model."""
    replaced_by: tuple[str, ...] = ()
    """``dcterms:isReplacedBy``: the term(s) to use instead (one makes a migration script possible)."""


class Ontology:
    """The loaded ontology. Build it with :func:`load_ontology`; treat it (and its graph) as read-only."""

    version: str
    """``owl:versionInfo`` of the ontology."""
    graph: rdflib.Graph
    """Every triple of every ontology file."""
    terms: dict[str, Term]
    classes: frozenset[str]
    properties: frozenset[str]
    """Object, datatype and annotation properties."""
    individuals: frozenset[str]
    functional_properties: frozenset[str]

    areas: tuple[str, ...]
    """Area names in catalogue order (the folder's ``areas.toml``, else the shipped ones)."""
    area_keywords: dict[str, tuple[str, ...]]
    """Area name -> keyword stems declared for it."""

    def __init__(self, graph: rdflib.Graph, areas: tuple[Area, ...] | None = None) -> None:
        self.graph = graph
        declared = SHIPPED_AREAS if areas is None else areas
        self.areas = tuple(a.name for a in declared)
        self.area_keywords = {a.name: a.keywords for a in declared if a.keywords}
        self.version = _version(graph)
        self.terms = {t.iri: t for t in _terms(graph)}
        self.classes = self._of_kind({CLASS})
        self.properties = self._of_kind(PROPERTY_KINDS)
        self.individuals = self._of_kind({INDIVIDUAL})
        self.functional_properties = frozenset(
            str(s) for s in graph.subjects(RDF.type, OWL.FunctionalProperty) if str(s) in self.properties
        )
        self._up = _links(graph, (RDFS.subClassOf, RDFS.subPropertyOf), (OWL.equivalentClass, OWL.equivalentProperty))
        self._down = _reverse(self._up)
        self._prefixes = sorted(PREFIXES.items(), key=lambda item: -len(item[1]))
        self._quads: tuple[pyoxigraph.Quad, ...] | None = None
        self._digest: str | None = None

    def _of_kind(self, kinds: Iterable[str]) -> frozenset[str]:
        wanted = set(kinds)
        return frozenset(iri for iri, term in self.terms.items() if term.kind in wanted)

    # ------------------------------------------------------------------ membership

    def defines(self, iri: str) -> bool:
        """True for a declared class, property or individual (what extraction may use)."""
        return iri in self.terms

    def is_class(self, iri: str) -> bool:
        return iri in self.classes

    def is_property(self, iri: str) -> bool:
        return iri in self.properties

    # ------------------------------------------------------------------ hierarchy

    def superclasses(self, iri: str) -> frozenset[str]:
        """``iri`` and every class above it (subClassOf, through equivalent classes), transitively."""
        return _closure(iri, self._up)

    def subclasses(self, iri: str) -> frozenset[str]:
        """``iri`` and every class below it, transitively."""
        return _closure(iri, self._down)

    def superproperties(self, iri: str) -> frozenset[str]:
        """``iri`` and every property above it (subPropertyOf, through equivalent properties), transitively."""
        return _closure(iri, self._up)

    def subproperties(self, iri: str) -> frozenset[str]:
        """``iri`` and every property below it, transitively."""
        return _closure(iri, self._down)

    # ------------------------------------------------------------------ output

    def curie(self, iri: str) -> str:
        """``schema:BuyAction`` for a known namespace, ``<iri>`` otherwise."""
        for prefix, namespace in self._prefixes:
            if iri.startswith(namespace) and len(iri) > len(namespace):
                return f"{prefix}:{iri[len(namespace):]}"
        return f"<{iri}>"

    def catalogue(
        self,
        areas: Iterable[str] | None = None,
        *,
        compact: bool = False,
        shapes_dir: Path | None = None,
        legend: bool = True,
    ) -> str:
        """Text listing of the terms for a prompt, grouped under ``## area`` headers.

        Full (the default): one line per term with its parents, domain → range and the first sentence of its
        comment. Compact (for the NL→SPARQL prompt's token budget): no comments, classes on one line per area and
        properties grouped by domain, after a one-line legend of the notation; about a third of the size.
        Deterministic: areas in :attr:`areas` order (others after, alphabetically), then classes, properties and
        individuals, each sorted by CURIE. ``areas`` restricts the listing (unknown names select nothing).
        Deprecated terms (``owl:deprecated true``) and terms of :data:`META_AREAS` are left out.

        A full line marks a property that holds one value at a time, so the model knows before a repair round:
        ``[functional]`` (the ontology), and from the shapes in ``shapes_dir`` (default: the bundled ones)
        ``[single-valued]`` / ``[single-valued for C]`` (``sh:maxCount 1``) and ``[later values replace]`` /
        ``[later values replace for C]`` (``pcmsh:laterValuesReplace``).

        ``legend=False`` leaves the compact legend out: for blocks that follow, in a later message, a catalogue that
        already gave it.
        """
        from pcm.shape_limits import value_limits

        limits = {} if compact else value_limits(shapes_dir)
        wanted = None if areas is None else set(areas)
        by_area: dict[str, list[Term]] = {}
        for term in self.terms.values():
            if not in_catalogue(term):
                continue
            if wanted is None or term.area in wanted:
                by_area.setdefault(term.area, []).append(term)
        order = [a for a in self.areas if a in by_area] + sorted(a for a in by_area if a not in self.areas)
        blocks = []
        for area in order:
            terms = sorted(by_area[area], key=lambda t: (_KIND_ORDER.index(t.kind), self.curie(t.iri)))
            lines = self._compact_lines(terms) if compact else [self._catalogue_line(t, limits.get(t.iri)) for t in terms]
            blocks.append("\n".join([f"## {area}", *lines]))
        if compact and legend and blocks:
            blocks.insert(0, COMPACT_LEGEND)
        return "\n\n".join(blocks) + ("\n" if blocks else "")

    def _compact_lines(self, terms: list[Term]) -> list[str]:
        """One line of classes, one line per domain listing its properties, then annotations and individuals."""
        lines = []
        classes = [self._compact_name(t) for t in terms if t.kind == CLASS]
        if classes:
            lines.append("classes: " + ", ".join(classes))
        by_domain: dict[str, list[str]] = {}
        for term in terms:
            if term.kind in (OBJECT_PROPERTY, DATATYPE_PROPERTY):
                functional = "!" if term.iri in self.functional_properties else ""
                entry = f"{self._compact_name(term)}→{self._side(term.range)}{functional}"
                by_domain.setdefault(self._side(term.domain), []).append(entry)
        lines += [f"{domain}: {', '.join(entries)}" for domain, entries in sorted(by_domain.items())]
        annotations = [self.curie(t.iri) for t in terms if t.kind == ANNOTATION_PROPERTY]
        if annotations:
            lines.append("annotations: " + ", ".join(annotations))
        by_class: dict[str, list[str]] = {}
        for term in terms:
            if term.kind == INDIVIDUAL:
                by_class.setdefault("&".join(self.curie(p) for p in term.parents) or "*", []).append(self.curie(term.iri))
        lines += [f"values of {cls}: {', '.join(names)}" for cls, names in sorted(by_class.items())]
        return lines

    def _compact_name(self, term: Term) -> str:
        parents = "&".join(self.curie(p) for p in term.parents)
        return f"{self.curie(term.iri)}⊑{parents}" if parents else self.curie(term.iri)

    def _catalogue_line(self, term: Term, limit: ValueLimit | None = None) -> str:
        name = self.curie(term.iri)
        parents = ", ".join(self.curie(p) for p in term.parents)
        if term.kind == INDIVIDUAL:
            line = f"{name} : {parents}"
        elif term.kind == ANNOTATION_PROPERTY:
            line = f"{name} (annotation)"
        else:
            line = f"{name} ⊑ {parents}" if parents else name
            if term.kind in PROPERTY_KINDS:
                if term.domain or term.range:
                    line += f" ({self._side(term.domain)} → {self._side(term.range)})"
                if term.iri in self.functional_properties:
                    line += " [functional]"
                elif limit is not None:
                    line += self._limit_marks(limit)
        gloss = _gloss(term)
        return f"{line} — {gloss}" if gloss else line

    def _limit_marks(self, limit: ValueLimit) -> str:
        """`` [single-valued for schema:Person]`` and the like: what the shapes say about the property's values."""
        if limit.anywhere:
            return " [single-valued]" if limit.strict else " [later values replace]"
        marks = ""
        for label, classes in (("single-valued", limit.single_for), ("later values replace", limit.replace_for)):
            if classes:
                marks += f" [{label} for {'|'.join(sorted(self.curie(c) for c in classes))}]"
        return marks

    def _side(self, iris: tuple[str, ...]) -> str:
        if not iris:
            return "*"
        shown = [self.curie(i) for i in iris[:_MAX_SIDE]]
        return "|".join(shown + (["…"] if len(iris) > _MAX_SIDE else []))

    def quads(self, layout: DatasetLayout = LEGACY_LAYOUT) -> list[pyoxigraph.Quad]:
        """Every triple of the ontology as a quad in the ontology graph of ``layout``, ready for ``Store.extend``."""
        if self._quads is None:
            graph_name = pyoxigraph.NamedNode(LEGACY_LAYOUT.ontology)
            blanks: dict[BNode, pyoxigraph.BlankNode] = {}
            self._quads = tuple(
                # an rdflib graph never holds a literal subject or a non-IRI predicate
                pyoxigraph.Quad(_ox(s, blanks), _ox(p, blanks), _ox(o, blanks), graph_name)  # type: ignore[arg-type]  # see above
                for s, p, o in sorted(self.graph, key=lambda triple: tuple(t.n3() for t in triple))
            )
        if layout == LEGACY_LAYOUT:
            return list(self._quads)
        graph = pyoxigraph.NamedNode(layout.ontology)
        return [pyoxigraph.Quad(q.subject, q.predicate, q.object, graph) for q in self._quads]

    def deprecated(self) -> list[Term]:
        """Deprecated terms, by IRI."""
        return sorted((t for t in self.terms.values() if t.deprecated), key=lambda t: t.iri)

    @property
    def digest(self) -> str:
        """A digest of the ontology's content (:func:`ontology_digest` of :meth:`quads`): it changes when any
        triple does, whether or not ``owl:versionInfo`` was bumped, and not when only the files' layout does."""
        if self._digest is None:
            self._digest = ontology_digest(self.quads())
        return self._digest


def in_catalogue(term: Term) -> bool:
    """Whether the prompt catalogue offers ``term`` to the model: not when it is deprecated (stored data may still
    use it), never when it describes terms rather than data (:data:`META_AREAS`)."""
    return not term.deprecated and term.area not in META_AREAS


# ---------------------------------------------------------------------- content digest


# ---------------------------------------------------------------------- loading


def load_ontology(directory: Path | None = None) -> Ontology:
    """The ontology in ``directory`` (default: the shipped ``pcm_ontology/``), parsed once per directory."""
    folder = resources.ontology_dir() if directory is None else Path(directory)
    return _load(folder.resolve())


@lru_cache(maxsize=8)
def _load(folder: Path) -> Ontology:
    if not folder.is_dir():
        raise PcmError(f"ontology directory {folder} does not exist")
    files = sorted(folder.glob("*.ttl"))
    if not files:
        raise PcmError(f"ontology directory {folder} holds no .ttl file")
    graph, errors = parse_turtle(files)
    for name, error in errors.items():
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise PcmError(f"ontology file {name} is not valid Turtle: {first_line}") from error
    return Ontology(graph, read_areas(folder) if (folder / AREAS_FILE).is_file() else None)


def parse_turtle(files: Sequence[Path]) -> tuple[rdflib.Graph, dict[str, Exception]]:
    """The files in one rdflib graph with pcm's prefixes bound, and each file's parse error by file name (every file
    is read, so a check can name each broken one)."""
    graph = rdflib.Graph()
    for prefix, namespace in PREFIXES.items():
        graph.bind(prefix, namespace, override=True)
    errors: dict[str, Exception] = {}
    for path in files:
        try:
            graph.parse(path, format="turtle")
        except Exception as error:  # rdflib raises several unrelated types for bad Turtle
            errors[path.name] = error
    return graph, errors


def _version(graph: rdflib.Graph) -> str:
    version = graph.value(URIRef(ONTOLOGY_IRI), OWL.versionInfo)
    if version is None:
        raise PcmError(f"the ontology has no owl:versionInfo on <{ONTOLOGY_IRI}>")
    return str(version)


def _terms(graph: rdflib.Graph) -> Iterable[Term]:
    """One Term per IRI subject declared as a class, property or named individual."""
    kinds: dict[URIRef, str] = {}
    for rdf_type, kind in reversed(_KIND_BY_TYPE):  # earlier entries overwrite later ones
        for subject in graph.subjects(RDF.type, rdf_type):
            if isinstance(subject, URIRef):
                kinds[subject] = kind
    for subject, kind in kinds.items():
        if kind == INDIVIDUAL:
            parents = _iris(o for o in graph.objects(subject, RDF.type) if o != OWL.NamedIndividual)
        else:
            parent_predicate = RDFS.subClassOf if kind == CLASS else RDFS.subPropertyOf
            parents = _iris(graph.objects(subject, parent_predicate))
        yield Term(
            iri=str(subject),
            kind=kind,
            label=_text(graph, subject, RDFS.label) or _local_name(str(subject)),
            comment=_text(graph, subject, RDFS.comment),
            area=_text(graph, subject, _AREA) or DEFAULT_AREA,
            parents=parents,
            domain=_class_list(graph, subject, RDFS.domain, _DOMAIN_INCLUDES),
            range=_class_list(graph, subject, RDFS.range, _RANGE_INCLUDES),
            deprecated=any(str(v).lower() in ("true", "1") for v in graph.objects(subject, OWL.deprecated)),
            replaced_by=_iris(graph.objects(subject, IS_REPLACED_BY)),
        )


def _text(graph: rdflib.Graph, subject: URIRef, predicate: URIRef) -> str:
    """The value of a literal annotation, preferring untagged or English text; "" when absent."""
    values = [o for o in graph.objects(subject, predicate) if isinstance(o, Literal)]
    values.sort(key=lambda lit: (lit.language not in (None, "en"), str(lit)))
    return str(values[0]) if values else ""


def _class_list(graph: rdflib.Graph, subject: URIRef, *predicates: URIRef) -> tuple[str, ...]:
    """IRIs of a domain or range: named classes directly, ``owl:unionOf`` members spelt out."""
    found: set[str] = set()
    for predicate in predicates:
        for value in graph.objects(subject, predicate):
            if isinstance(value, URIRef):
                found.add(str(value))
            elif isinstance(value, BNode):
                members = graph.value(value, OWL.unionOf)
                if members is not None:
                    found.update(str(m) for m in Collection(graph, members) if isinstance(m, URIRef))
    return tuple(sorted(found))


def _gloss(term: Term) -> str:
    """The comment's first sentence, or "" when it only restates the term's name ("A hospital." for Hospital)."""
    first = re.split(r"(?<=[a-z0-9)\"]{2}\.)\s+(?=[A-Z])", term.comment.strip(), maxsplit=1)[0]
    first = first[:-1] if first.endswith(".") and not first.endswith("..") else first
    words = [w for w in re.findall(r"[a-z0-9]+", first.lower()) if w not in ("a", "an", "the")]
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", _local_name(term.iri)).lower()
    label_words = re.findall(r"[a-z0-9]+", term.label.lower())
    if not words or words == name.split() or words == label_words:
        return ""
    return first


def _iris(values: Iterable[object]) -> tuple[str, ...]:
    return tuple(sorted({str(v) for v in values if isinstance(v, URIRef)}))


def _local_name(iri: str) -> str:
    return iri.rstrip("/#").rsplit("#", 1)[-1].rsplit("/", 1)[-1]


# ---------------------------------------------------------------------- hierarchy helpers


def _links(
    graph: rdflib.Graph, parent_predicates: Iterable[URIRef], equivalence_predicates: Iterable[URIRef]
) -> dict[str, set[str]]:
    """Upward edges: child -> parents, with equivalences as edges both ways."""
    up: dict[str, set[str]] = {}
    for predicate in parent_predicates:
        for child, parent in graph.subject_objects(predicate):
            if isinstance(child, URIRef) and isinstance(parent, URIRef):
                up.setdefault(str(child), set()).add(str(parent))
    for predicate in equivalence_predicates:
        for left, right in graph.subject_objects(predicate):
            if isinstance(left, URIRef) and isinstance(right, URIRef):
                up.setdefault(str(left), set()).add(str(right))
                up.setdefault(str(right), set()).add(str(left))
    return up


def _reverse(up: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """Downward edges from upward ones (equivalences, already both ways, stay symmetric)."""
    down: dict[str, set[str]] = {}
    for child, parents in up.items():
        for parent in parents:
            down.setdefault(parent, set()).add(child)
    return down


def _closure(start: str, edges: Mapping[str, set[str]]) -> frozenset[str]:
    seen = {start}
    queue = deque([start])
    while queue:
        for nxt in edges.get(queue.popleft(), ()):
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return frozenset(seen)


# ---------------------------------------------------------------------- rdflib -> pyoxigraph


_OxTerm = pyoxigraph.NamedNode | pyoxigraph.BlankNode | pyoxigraph.Literal


def _ox(term: object, blanks: dict[BNode, pyoxigraph.BlankNode]) -> _OxTerm:
    """One rdflib term as pyoxigraph's, keeping each blank node's identity across the whole graph."""
    if isinstance(term, URIRef):
        return pyoxigraph.NamedNode(str(term))
    if isinstance(term, BNode):
        if term not in blanks:
            blanks[term] = pyoxigraph.BlankNode()
        return blanks[term]
    if isinstance(term, Literal):
        if term.language:
            return pyoxigraph.Literal(str(term), language=term.language)
        if term.datatype is not None:
            return pyoxigraph.Literal(str(term), datatype=pyoxigraph.NamedNode(str(term.datatype)))
        return pyoxigraph.Literal(str(term))
    raise TypeError(f"unexpected RDF term {term!r}")

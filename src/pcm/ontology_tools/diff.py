"""``pcm ontology diff OLD NEW``: what changed between two versions of the ontology, and what it breaks.

Terms are compared field by field (kind, label, comment, area, parents, domain, range, functional); axioms (every
triple that is not documentation) are compared as graphs, blank-node structures (unions, lists) included, through
rdflib's canonical isomorphism. A change is *potentially breaking* when data written under the old version may no
longer fit the new one: a term removed, its kind changed, its range or domain changed to something that does not
include the old one, or a property made functional. With stored data to look at (a memory, or an RDF dump), a
potentially breaking change is *breaking* when the data uses the term; for a re-ranged property the values that no
longer fit the new range are counted too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pyoxigraph as ox
import rdflib
from rdflib import OWL, RDF, RDFS, BNode, Literal, URIRef
from rdflib.collection import Collection
from rdflib.compare import graph_diff, to_isomorphic

from pcm.backend import Solutions
from pcm.errors import InputError, PcmError
from pcm.layout import LEGACY_LAYOUT, layout_of_graph
from pcm.namespaces import PCM, PREFIXES, SCHEMA, SKOS, XSD
from pcm.ontology import AREAS_FILE, CLASS, DATATYPE_PROPERTY, OBJECT_PROPERTY, Ontology, Term, read_areas
from pcm.resources import render_query
from pcm.sparql import values_clause

#: Predicates that document a term rather than state an axiom about it.
ANNOTATIONS = frozenset({
    str(RDFS.label), str(RDFS.comment), PCM + "area", SKOS + "prefLabel", SKOS + "altLabel", SKOS + "definition",
    str(OWL.versionInfo), str(OWL.versionIRI), "http://purl.org/dc/terms/title", "http://purl.org/dc/terms/description",
    str(RDFS.isDefinedBy), str(RDFS.seeAlso),
})
_FIELDS = ("kind", "label", "comment", "area", "parents", "domain", "range", "functional")
_OWL_THING = str(OWL.Thing)
_LITERAL_RANGES = frozenset({str(RDFS.Literal)})

#: Runs a SELECT over stored data (a memory's backend, or a store loaded from a dump).
QueryRunner = Callable[[str], Solutions]


@dataclass(frozen=True)
class TermChange:
    iri: str
    curie: str
    change: str
    """``added``, ``removed`` or ``changed``."""
    fields: dict[str, tuple[str, str]] = field(default_factory=dict)
    """For a changed term: field -> (old, new), both as display text."""


@dataclass(frozen=True)
class BreakingChange:
    iri: str
    curie: str
    reason: str
    uses: int | None = None
    """Statements in the stored data that use the term; ``None`` when no data was given."""
    misfits: int | None = None
    """For a re-ranged property: stored values that do not fit the new range."""

    @property
    def confirmed(self) -> bool:
        return bool(self.uses)


@dataclass
class OntologyDiff:
    old_version: str
    new_version: str
    added: list[TermChange] = field(default_factory=list)
    removed: list[TermChange] = field(default_factory=list)
    changed: list[TermChange] = field(default_factory=list)
    axioms_added: list[str] = field(default_factory=list)
    axioms_removed: list[str] = field(default_factory=list)
    potentially_breaking: list[BreakingChange] = field(default_factory=list)
    data_checked: bool = False

    @property
    def breaking(self) -> list[BreakingChange]:
        """Changes that stored data confirms: the data uses the removed or changed term."""
        return [b for b in self.potentially_breaking if b.confirmed]

    def text(self) -> str:
        lines = [f"ontology {self.old_version} -> {self.new_version}: {len(self.added)} added, "
                 f"{len(self.removed)} removed, {len(self.changed)} changed term(s); {len(self.axioms_added)} axiom(s) "
                 f"added, {len(self.axioms_removed)} removed"]
        lines += [f"+ {t.curie}" for t in self.added]
        lines += [f"- {t.curie}" for t in self.removed]
        for t in self.changed:
            lines.append(f"~ {t.curie}")
            lines += [f"    {name}: {old or '(none)'} -> {new or '(none)'}" for name, (old, new) in t.fields.items()]
        lines += [f"+ axiom {a}" for a in self.axioms_added]
        lines += [f"- axiom {a}" for a in self.axioms_removed]
        for b in self.potentially_breaking:
            if not self.data_checked:
                lines.append(f"POTENTIALLY BREAKING {b.curie}: {b.reason} (no stored data given)")
            elif b.confirmed:
                misfit = f", {b.misfits} value(s) do not fit the new range" if b.misfits else ""
                lines.append(f"BREAKING {b.curie}: {b.reason}; stored data uses it {b.uses} time(s){misfit}")
            else:
                lines.append(f"not breaking {b.curie}: {b.reason}, but no stored data uses it")
        return "\n".join(lines)

    def as_json(self) -> dict[str, object]:
        return {
            "old_version": self.old_version,
            "new_version": self.new_version,
            "added": [t.curie for t in self.added],
            "removed": [t.curie for t in self.removed],
            "changed": {t.curie: {k: list(v) for k, v in t.fields.items()} for t in self.changed},
            "axioms_added": self.axioms_added,
            "axioms_removed": self.axioms_removed,
            "data_checked": self.data_checked,
            "potentially_breaking": [b.__dict__ for b in self.potentially_breaking],
            "breaking": [b.curie for b in self.breaking],
        }


def load_version(path: Path) -> Ontology:
    """An ontology from a directory (every top-level ``*.ttl``) or a single RDF file, without the loader's cache."""
    graph = rdflib.Graph()
    for prefix, namespace in PREFIXES.items():
        graph.bind(prefix, namespace, override=True)
    files = sorted(path.glob("*.ttl")) if path.is_dir() else [path]
    if not files or not all(f.is_file() for f in files):
        raise InputError(f"{path}: no ontology there (a directory of .ttl files or one RDF file)")
    for file in files:
        try:
            graph.parse(file, format=rdflib.util.guess_format(str(file)) or "turtle")
        except Exception as error:  # rdflib raises several unrelated types for bad input
            raise InputError(f"{file.name} does not parse: {' '.join(str(error).split())[:200]}") from error
    try:
        areas = read_areas(path) if path.is_dir() and (path / AREAS_FILE).is_file() else None
        return Ontology(graph, areas)
    except PcmError as error:
        raise InputError(f"{path}: {error}") from error


def diff_ontologies(old: Ontology, new: Ontology, *, data: QueryRunner | None = None) -> OntologyDiff:
    """Compare two versions; with ``data``, confirm which potentially breaking changes stored data runs into."""
    result = OntologyDiff(old.version, new.version)
    for iri in sorted(new.terms.keys() - old.terms.keys(), key=new.curie):
        result.added.append(TermChange(iri, new.curie(iri), "added"))
    for iri in sorted(old.terms.keys() - new.terms.keys(), key=old.curie):
        result.removed.append(TermChange(iri, old.curie(iri), "removed"))
    for iri in sorted(old.terms.keys() & new.terms.keys(), key=new.curie):
        fields = _changed_fields(old, new, iri)
        if fields:
            result.changed.append(TermChange(iri, new.curie(iri), "changed", fields))
    result.axioms_added, result.axioms_removed = _axiom_changes(old, new)
    result.potentially_breaking = _potentially_breaking(old, new, result)
    if data is not None:
        result.potentially_breaking = _confirm(result.potentially_breaking, new, data)
        result.data_checked = True
    return result


def _snapshot(onto: Ontology, term: Term) -> dict[str, str]:
    def names(iris: Iterable[str]) -> str:
        return ", ".join(sorted(onto.curie(i) for i in iris))

    return {
        "kind": term.kind,
        "label": term.label,
        "comment": term.comment,
        "area": term.area,
        "parents": names(term.parents),
        "domain": names(term.domain),
        "range": names(term.range),
        "functional": "yes" if term.iri in onto.functional_properties else "",
    }


def _changed_fields(old: Ontology, new: Ontology, iri: str) -> dict[str, tuple[str, str]]:
    before, after = _snapshot(old, old.terms[iri]), _snapshot(new, new.terms[iri])
    return {name: (before[name], after[name]) for name in _FIELDS if before[name] != after[name]}


# ---------------------------------------------------------------------- axioms


def _axiom_changes(old: Ontology, new: Ontology) -> tuple[list[str], list[str]]:
    """Non-documentation triples with an IRI subject, rendered with blank-node structures inline."""
    old_iso, new_iso = to_isomorphic(old.graph), to_isomorphic(new.graph)
    _both, only_old, only_new = graph_diff(old_iso, new_iso)
    return _render_axioms(only_new, new_iso, new), _render_axioms(only_old, old_iso, old)


def _render_axioms(triples: rdflib.Graph, context: rdflib.Graph, onto: Ontology) -> list[str]:
    lines = set()
    for s, p, o in triples:
        if isinstance(s, URIRef) and str(p) not in ANNOTATIONS:
            lines.add(f"{_show(s, context, onto)} {_show(p, context, onto)} {_show(o, context, onto)}")
    return sorted(lines)


def _show(node: object, graph: rdflib.Graph, onto: Ontology, depth: int = 0) -> str:
    if isinstance(node, URIRef):
        return "a" if node == RDF.type else onto.curie(str(node))
    if isinstance(node, Literal):
        return node.n3()
    if isinstance(node, BNode) and depth < 4:
        if graph.value(node, RDF.first) is not None:
            return "(" + " ".join(_show(m, graph, onto, depth + 1) for m in Collection(graph, node)) + ")"
        inner = [f"{_show(p, graph, onto, depth + 1)} {_show(o, graph, onto, depth + 1)}"
                 for p, o in sorted(graph.predicate_objects(node)) if p != RDF.type]
        return "[ " + " ; ".join(inner) + " ]"
    return "[]"


# ---------------------------------------------------------------------- breaking changes


def _potentially_breaking(old: Ontology, new: Ontology, result: OntologyDiff) -> list[BreakingChange]:
    found = [BreakingChange(t.iri, t.curie, "removed") for t in result.removed]
    for change in result.changed:
        iri, fields = change.iri, change.fields
        reasons = []
        if "kind" in fields:
            reasons.append(f"kind changed from {fields['kind'][0]} to {fields['kind'][1]}")
        before, after = old.terms[iri], new.terms[iri]
        if "range" in fields and not _covers(new, after.range, before.range):
            reasons.append(f"re-ranged from {fields['range'][0] or '(any)'} to {fields['range'][1] or '(any)'}")
        if "domain" in fields and not _covers(new, after.domain, before.domain):
            reasons.append(f"domain narrowed from {fields['domain'][0] or '(any)'} to {fields['domain'][1] or '(any)'}")
        if fields.get("functional") == ("", "yes"):
            reasons.append("made functional (one value at a time)")
        if reasons:
            found.append(BreakingChange(iri, change.curie, "; ".join(reasons)))
    return found


def _covers(onto: Ontology, new: tuple[str, ...], old: tuple[str, ...]) -> bool:
    """True when every old domain/range member is still allowed: equal, or below some new member."""
    if not new or _OWL_THING in new:
        return True
    if not old:
        return False
    allowed = set(new)
    return all(o in allowed or any(n in onto.superclasses(o) for n in new) for o in old)


def _confirm(changes: list[BreakingChange], new: Ontology, data: QueryRunner) -> list[BreakingChange]:
    if not changes:
        return changes
    uses = _usage_counts([c.iri for c in changes], data)
    confirmed = []
    for change in changes:
        count = uses.get(change.iri, 0)
        misfits = None
        if count and "re-ranged" in change.reason:
            misfits = _misfits(change.iri, new, data)
        confirmed.append(BreakingChange(change.iri, change.curie, change.reason, count, misfits))
    return confirmed


def _usage_counts(iris: list[str], data: QueryRunner) -> dict[str, int]:
    """Statements outside the ontology graph that use each term as predicate, class or value."""
    counts: dict[str, int] = {}
    for start in range(0, len(iris), 200):
        chunk = iris[start : start + 200]
        rows = data(render_query("term_usage", terms=values_clause("term", chunk))).dicts()
        for row in rows:
            counts[row["term"].value] = int(row["uses"].value)
    return counts


def _misfits(iri: str, new: Ontology, data: QueryRunner) -> int:
    """Stored values of a property that the new range does not admit (datatype or class, subclasses included)."""
    term = new.terms.get(iri)
    if term is None or not term.range or _OWL_THING in term.range:
        return 0
    datatypes = [r for r in term.range if r.startswith(XSD) or r in _LITERAL_RANGES]
    classes = sorted({c for r in term.range if r not in datatypes for c in new.subclasses(r)})
    any_literal = any(r in _LITERAL_RANGES for r in term.range)
    query = render_query(
        "range_misfits",
        property=f"<{iri}>",
        datatypes=values_clause("datatype", datatypes or [XSD + "__none__"]),
        classes=values_clause("class", classes or [SCHEMA + "__none__"]),
        any_literal="true" if any_literal else "false",
    )
    rows = data(query).rows
    return int(rows[0][0].value) if rows and rows[0][0] is not None else 0


# ---------------------------------------------------------------------- where the data comes from


def data_from_file(path: Path) -> QueryRunner:
    """A query runner over an RDF dump: TriG / N-Quads keep their graphs; triples go into one import graph."""
    from pcm.rdfio import detect_rdf_format, load_staging

    fmt = detect_rdf_format(path, None)
    staging = load_staging(path, fmt, name=path.name, base_iri=path.resolve().as_uri())
    store = ox.Store()
    target = ox.NamedNode(LEGACY_LAYOUT.import_graph("data"))

    def graph_of(q: ox.Quad) -> ox.NamedNode | ox.BlankNode:
        """The quad's graph, named by the fixed layout whatever memory wrote the dump."""
        if not isinstance(q.graph_name, ox.NamedNode):
            return target if isinstance(q.graph_name, ox.DefaultGraph) else q.graph_name
        source = layout_of_graph(q.graph_name.value)
        return ox.NamedNode(LEGACY_LAYOUT.rehome(q.graph_name.value, source)) if source else q.graph_name

    store.extend(ox.Quad(q.subject, q.predicate, q.object, graph_of(q)) for q in staging)
    store.remove_graph(ox.NamedNode(LEGACY_LAYOUT.ontology))

    def run(sparql: str) -> Solutions:
        result = store.query(LEGACY_LAYOUT.render(sparql), use_default_graph_as_union=True)
        assert isinstance(result, ox.QuerySolutions), "expected a SELECT query"
        variables = tuple(v.value for v in result.variables)
        return Solutions(variables, [tuple(s[v] for v in variables) for s in result])

    return run


__all__ = [
    "BreakingChange",
    "OntologyDiff",
    "QueryRunner",
    "TermChange",
    "data_from_file",
    "diff_ontologies",
    "load_version",
    "CLASS",
    "DATATYPE_PROPERTY",
    "OBJECT_PROPERTY",
]

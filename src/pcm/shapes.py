"""SHACL validation of a delta (new triples) against the extraction rules (docs/DESIGN.md §6).

Why this shape of code: validation runs on every utterance and every repair round, so the shapes are parsed and
harvested once, and each call hands pyshacl only a tiny rdflib Graph (the delta, the types and labels of the
existing nodes it points to, and the rdfs:subClassOf closure of the classes in play) with inference off. Two rules
need the ontology or the memory's namespace rather than the data alone, and are plain Python set checks:
``unknown-term`` (only terms the ontology defines) and ``foreign-individual`` (individuals live in the memory's
namespace). A third Python rule, ``untyped-individual``, catches a memory IRI that the delta uses but nobody
declared (typically a misspelt reference to an existing entity). ``isolated-individual`` is checked in Python on the
same data graph pyshacl sees: as a SHACL-SPARQL constraint it ran one query per typed node and was about half of
the validation time per utterance.

Rule ids reported in :class:`Violation.rule`:
``action-has-agent``, ``problem-affects``, ``service-has-object``, ``individual-has-label``, ``date-literal``,
``action-status``, ``single-valued`` (SHACL, ``shapes/*.ttl``), and ``unknown-term``, ``foreign-individual``,
``untyped-individual``, ``isolated-individual`` (Python, here).
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import rdflib
from pyshacl import Validator as _PyshaclValidator
from pyshacl.graph_abstraction import DataGraph
from pyshacl.shapes_graph import ShapesGraph
from rdflib import BNode, Literal, URIRef
from rdflib.namespace import RDF, RDFS, SH, NamespaceManager
from rdflib.plugins.sparql import prepareQuery
from rdflib.plugins.sparql.sparql import Query
from rdflib.term import Node

from pcm import resources
from pcm.errors import UsageError
from pcm.namespaces import PREFIXES, SCHEMA, SCHEMA_HTTP, VOCABULARY_NAMESPACES
from pcm.shape_limits import SHAPES_NS

if TYPE_CHECKING:
    from pcm.ontology import Ontology

#: The ``pcmsh:rule`` annotation that names the rule each shape encodes.
RULE_PREDICATE = URIRef(SHAPES_NS + "rule")

#: Terms every delta may use whether or not the ontology declares them (RDF/RDFS plumbing, not vocabulary).
BUILTIN_TERMS: frozenset[str] = frozenset({str(RDF.type), str(RDFS.label), str(RDFS.comment)})

#: Rules whose absence-of-data checks only make sense for nodes the delta creates: an existing node's agent, object
#: or links are in the store, and the context (types and labels only) cannot show them.
_NEW_NODE_RULES = frozenset(
    {"action-has-agent", "problem-affects", "service-has-object", "isolated-individual"}
)
#: Rules about individuals, which by definition live in the memory's namespace.
_INDIVIDUAL_RULES = frozenset({"individual-has-label", "isolated-individual"})

_RULE_ORDER = (
    "foreign-individual",
    "unknown-term",
    "untyped-individual",
    "individual-has-label",
    "isolated-individual",
    "single-valued",
    "action-has-agent",
    "problem-affects",
    "service-has-object",
    "date-literal",
    "action-status",
)


@dataclass(frozen=True)
class Violation:
    """One broken rule, located precisely enough for an LLM (or a person) to fix it."""

    rule: str
    focus: str
    path: str | None
    message: str


@dataclass
class ValidationReport:
    conforms: bool
    violations: list[Violation] = field(default_factory=list)

    def text(self, limit: int = 20) -> str:
        """A short readable report: used verbatim as LLM repair feedback and as the CLI's error detail."""
        if self.conforms:
            return "Conforms: the data satisfies every rule."
        lines = [f"{len(self.violations)} violation(s):"]
        lines += [f"- [{v.rule}] {v.message}" for v in self.violations[:limit]]
        if len(self.violations) > limit:
            lines.append(f"... and {len(self.violations) - limit} more")
        return "\n".join(lines)


@dataclass(frozen=True)
class _ShapeInfo:
    rule: str
    message: str


class Validator:
    """Validates deltas against ``shapes/*.ttl`` and the ontology; build once, call :meth:`validate` many times."""

    def __init__(self, ontology: Ontology | None = None, shapes_dir: Path | None = None) -> None:
        if ontology is None:
            from pcm.ontology import load_ontology

            ontology = load_ontology()
        self._onto = ontology
        self._shapes_rdf = _load_shapes(shapes_dir or resources.shapes_dir())
        self._shape_info = _shape_infos(self._shapes_rdf)
        self._shapes = ShapesGraph(self._shapes_rdf)
        _ = self._shapes.shapes  # harvest now, once, instead of on the first delta
        self._closure: dict[URIRef, tuple[tuple[Node, Node, Node], ...]] = {}
        self._known_objects: dict[str, bool] = {}
        self._vocab_terms = _terms_by_namespace(ontology.classes | ontology.properties)
        self._lock = threading.Lock()

    # ---------------------------------------------------------------- public API
    def validate(
        self, delta: rdflib.Graph, *, memory_namespace: str, context: rdflib.Graph | None = None
    ) -> ValidationReport:
        """Check ``delta`` (new triples); ``context`` holds types/labels of existing nodes the delta points to."""
        if not memory_namespace:
            raise UsageError("validation needs the memory's namespace (an IRI prefix), got an empty string")
        scope = _Scope.of(delta, context, memory_namespace)
        found = list(self._foreign_individuals(delta, memory_namespace))
        found += self._unknown_terms(delta)
        found += _untyped_individuals(scope)
        found += self._shacl_violations(delta, context, scope)
        violations = _sorted_unique(found)
        return ValidationReport(conforms=not violations, violations=violations)

    # ---------------------------------------------------------------- rule 9: foreign individuals
    def _foreign_individuals(self, delta: rdflib.Graph, ns: str) -> Iterator[Violation]:
        """Every IRI subject is minted in the memory's namespace; vocabulary terms are never described by a delta."""
        for s in sorted({s for s in delta.subjects() if isinstance(s, URIRef)}):
            iri = str(s)
            if iri.startswith(ns):
                continue
            if _vocabulary_namespace(iri) is not None:
                why = f"{_show(iri)} is a vocabulary term used as a subject; describe individuals with IRIs in <{ns}>"
            else:
                why = f"<{iri}> is outside the memory's namespace; individuals must have IRIs in <{ns}>"
            yield Violation("foreign-individual", iri, None, why)

    # ---------------------------------------------------------------- rule 8: unknown terms
    def _unknown_terms(self, delta: rdflib.Graph) -> list[Violation]:
        """Predicates, rdf:type objects and vocabulary-namespace objects must be terms the ontology knows."""
        out: list[Violation] = []
        for s, p, o in delta:
            focus, pred = _node_id(s), str(p)
            if pred not in BUILTIN_TERMS and not self._onto.defines(pred):
                out.append(self._unknown(focus, pred, pred, "property"))
            elif pred not in BUILTIN_TERMS and self._onto.is_class(pred) and not self._onto.is_property(pred):
                out.append(
                    Violation("unknown-term", focus, pred, f"{_show(pred)} is a class, not a property")
                )
            if p == RDF.type:
                out += self._check_type_object(focus, o)
            elif isinstance(o, URIRef) and not self._known_object(str(o)):
                out.append(self._unknown(focus, pred, str(o), "term"))
        return out

    def _check_type_object(self, focus: str, o: Node) -> list[Violation]:
        if not isinstance(o, URIRef):
            return [
                Violation(
                    "unknown-term",
                    focus,
                    str(RDF.type),
                    f"rdf:type of {_show(focus)} must be a class IRI, got {_show_node(o)}",
                )
            ]
        cls = str(o)
        if not self._onto.defines(cls):
            return [self._unknown(focus, str(RDF.type), cls, "class")]
        if self._onto.is_property(cls) and not self._onto.is_class(cls):
            return [
                Violation("unknown-term", focus, str(RDF.type), f"{_show(cls)} is a property, not a class")
            ]
        return []

    def _known_object(self, iri: str) -> bool:
        """Objects outside the vocabularies are links (individuals, web pages); inside, they must exist."""
        if _vocabulary_namespace(iri) is None:
            return True
        if iri not in self._known_objects:
            ref = URIRef(iri)
            self._known_objects[iri] = self._onto.defines(iri) or (ref, None, None) in self._onto.graph
        return self._known_objects[iri]

    def _unknown(self, focus: str, path: str, term: str, kind: str) -> Violation:
        message = f"unknown {kind} {_show(term)} <{term}> is not defined by the PCM ontology"
        hints = self._suggestions(term)
        if hints:
            message += f" (did you mean {', '.join(hints)}?)"
        return Violation("unknown-term", focus, path, message)

    def _suggestions(self, term: str) -> list[str]:
        if term.startswith(SCHEMA_HTTP) and self._onto.defines(SCHEMA + term[len(SCHEMA_HTTP) :]):
            return [_show(SCHEMA + term[len(SCHEMA_HTTP) :])]
        ns = _vocabulary_namespace(term)
        if ns is None:
            return []
        local = term[len(ns) :]
        names = self._vocab_terms.get(ns, ())
        lowered = {n.lower(): n for n in names}
        exact = [lowered[local.lower()]] if local.lower() in lowered else []
        close = difflib.get_close_matches(local, names, n=3, cutoff=0.75)
        return [_show(ns + n) for n in dict.fromkeys(exact + close)][:3]

    # ---------------------------------------------------------------- rules 1-7: SHACL
    def _shacl_violations(
        self, delta: rdflib.Graph, context: rdflib.Graph | None, scope: _Scope
    ) -> list[Violation]:
        data = _PreparedQueryGraph()
        for t in delta:
            data.add(t)
        if context is not None:
            for t in context:
                data.add(t)
        for cls in set(data.objects(None, RDF.type)):
            if isinstance(cls, URIRef):
                for t in self._class_closure(cls):
                    data.add(t)
        report = self._run_pyshacl(data)
        found = [*self._read_results(report, data), *_isolated_individuals(data)]
        return [v for v in found if scope.responsible(v)]

    def _class_closure(self, cls: URIRef) -> tuple[tuple[Node, Node, Node], ...]:
        """``cls rdfs:subClassOf S`` for each superclass: lets sh:targetClass see subclasses without inference."""
        if cls not in self._closure:
            supers = self._onto.superclasses(str(cls)) if self._onto.defines(str(cls)) else frozenset()
            self._closure[cls] = tuple(
                (cls, RDFS.subClassOf, URIRef(s)) for s in sorted(supers) if s != str(cls)
            )
        return self._closure[cls]

    def _run_pyshacl(self, data: rdflib.Graph) -> rdflib.Graph:
        """Run pyshacl in place on our throwaway graph, reusing the shapes harvested in ``__init__``."""
        runner = _PyshaclValidator(
            DataGraph.from_rdflib_graph(data),
            shacl_graph=self._shapes_rdf,
            options={"inference": "none", "inplace": True, "advanced": False},
        )
        runner.shacl_graph = self._shapes
        with self._lock:  # the harvested shapes are shared; pyshacl does not promise they are thread-safe
            _conforms, report, _text = runner.run()
        return report

    def _read_results(self, report: rdflib.Graph, data: rdflib.Graph) -> Iterator[Violation]:
        for result in report.objects(None, SH.result):
            source = report.value(result, SH.sourceShape)
            info = self._shape_info.get(source) if source is not None else None
            if info is None:
                continue
            focus = report.value(result, SH.focusNode)
            path = report.value(result, SH.resultPath)
            value = report.value(result, SH.value)
            component = report.value(result, SH.sourceConstraintComponent)
            yield Violation(
                info.rule,
                _node_id(focus),
                str(path) if isinstance(path, URIRef) else None,
                _result_message(info, focus, path, value, component, data),
            )


class _PreparedQueryGraph(rdflib.Graph):
    """An rdflib Graph that parses each SPARQL text once per process.

    pyshacl runs a SHACL-SPARQL constraint as one ``query(text, initBindings={"this": node})`` per focus node, and
    rdflib re-parses the text every time (~45 ms each); the text is constant per shape, so parsing it once turns
    the isolated-individual rule from the dominant cost into a negligible one.
    """

    def query(self, query_object: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(query_object, str):
            query_object = _prepared(query_object)
        return super().query(query_object, *args, **kwargs)


@lru_cache(maxsize=64)
def _prepared(text: str) -> Query:
    return prepareQuery(text)


@dataclass(frozen=True)
class _Scope:
    """Which focus nodes the delta answers for: its own subjects and objects, not the surrounding context."""

    namespace: str
    subjects: frozenset[str]
    nodes: frozenset[str]
    existing: frozenset[str]
    typed: frozenset[str]

    @classmethod
    def of(cls, delta: rdflib.Graph, context: rdflib.Graph | None, ns: str) -> _Scope:
        subjects = {_node_id(s) for s in delta.subjects()}
        objects = {
            _node_id(o) for p, o in delta.predicate_objects() if p != RDF.type and not isinstance(o, Literal)
        }
        ctx = context if context is not None else rdflib.Graph()
        typed = {_node_id(s) for s in delta.subjects(RDF.type)} | {
            _node_id(s) for s in ctx.subjects(RDF.type)
        }
        existing = {_node_id(s) for s in ctx.subjects()}
        return cls(
            ns, frozenset(subjects), frozenset(subjects | objects), frozenset(existing), frozenset(typed)
        )

    def responsible(self, v: Violation) -> bool:
        if v.rule in _INDIVIDUAL_RULES and not v.focus.startswith(self.namespace):
            return False
        if v.rule in _NEW_NODE_RULES:
            return v.focus in self.subjects and v.focus not in self.existing
        if v.rule == "individual-has-label":
            return v.focus in self.nodes
        return v.focus in self.subjects


def _untyped_individuals(scope: _Scope) -> Iterator[Violation]:
    """A memory IRI the delta uses must be declared, in the delta or (for existing entities) in the context."""
    for node in sorted(scope.nodes - scope.typed):
        if node.startswith(scope.namespace):
            yield Violation(
                "untyped-individual",
                node,
                None,
                f"<{node}> is used but has no rdf:type here or in the memory: declare it with rdf:type and "
                "rdfs:label, or refer to an existing entity by its exact IRI",
            )


_ISOLATED = _ShapeInfo(
    "isolated-individual",
    "an individual must be linked to at least one other node (not only typed, labelled and given literals)",
)
_LINKLESS = frozenset({RDF.type, RDFS.label})


def _isolated_individuals(data: rdflib.Graph) -> Iterator[Violation]:
    """Rule 5: a typed node is isolated unless a triple whose predicate is neither rdf:type nor rdfs:label links it
    to another node (IRI or blank node), as subject or as object. One pass over the data graph."""
    linked: set[Node] = set()
    for s, p, o in data:
        if p in _LINKLESS or isinstance(o, Literal) or s == o:
            continue
        linked.update((s, o))
    # rdflib's terms order among themselves at run time; its stubs give Node no ``__lt__``.
    for focus in sorted(set(data.subjects(RDF.type)) - linked):  # type: ignore[type-var]  # see above
        yield Violation(
            _ISOLATED.rule,
            _node_id(focus),
            None,
            _result_message(_ISOLATED, focus, None, None, SH.SPARQLConstraintComponent, data),
        )


# -------------------------------------------------------------------- shapes loading
def _load_shapes(directory: Path) -> rdflib.Graph:
    files = sorted(directory.glob("*.ttl"))
    if not files:
        raise FileNotFoundError(f"no SHACL shapes (*.ttl) in {directory}")
    graph = rdflib.Graph()
    for f in files:
        graph.parse(f, format="turtle")
    return graph


def _shape_infos(shapes: rdflib.Graph) -> dict[Node, _ShapeInfo]:
    """Map every shape that can appear as sh:sourceShape to its rule, including a rule shape's sh:property shapes."""
    infos: dict[Node, _ShapeInfo] = {}
    for shape, rule in shapes.subject_objects(RULE_PREDICATE):
        message = shapes.value(shape, SH.message) or next(
            (m for c in shapes.objects(shape, SH.sparql) for m in shapes.objects(c, SH.message)), ""
        )
        info = _ShapeInfo(str(rule), str(message))
        infos[shape] = info
        for prop in shapes.objects(shape, SH.property):
            infos.setdefault(prop, info)
        for constraint in shapes.objects(shape, SH.sparql):
            infos.setdefault(constraint, info)
    return infos


def _terms_by_namespace(terms: Iterable[str]) -> dict[str, list[str]]:
    """Local names of the ontology's classes and properties per vocabulary namespace, for "did you mean" hints."""
    out: dict[str, list[str]] = {}
    for term in terms:
        ns = _vocabulary_namespace(term)
        if ns is not None:
            out.setdefault(ns, []).append(term[len(ns) :])
    for names in out.values():
        names.sort()
    return out


# -------------------------------------------------------------------- messages
_COMPONENT_TEXT = {
    "MinCountConstraintComponent": "{focus}{types} has no {path}",
    "MaxCountConstraintComponent": "{focus}{types} has more than one {path}",
    "NodeKindConstraintComponent": "{focus}{types} {path} {value} has the wrong kind of value",
    "NodeConstraintComponent": "{focus} {path} {value} is not allowed",
    "InConstraintComponent": "{focus} {path} {value} is not allowed",
    "OrConstraintComponent": "{focus} {path} {value} is not allowed",
    "DatatypeConstraintComponent": "{focus} {path} {value} is not allowed",
    "SPARQLConstraintComponent": "{focus}{types} is isolated",
}


def _result_message(
    info: _ShapeInfo,
    focus: Node | None,
    path: Node | None,
    value: Node | None,
    component: Node | None,
    data: rdflib.Graph,
) -> str:
    name = str(component).rsplit("#", 1)[-1] if component is not None else ""
    template = _COMPONENT_TEXT.get(name, "{focus} {path} {value} violates the rule")
    types = (
        sorted(_show(str(t)) for t in data.objects(focus, RDF.type) if isinstance(t, URIRef)) if focus else []
    )
    head = template.format(
        focus=_show_node(focus),
        types=f" (a {', '.join(types)})" if types else "",
        path=_show_node(path) if path is not None else "",
        value=_show_node(value) if value is not None else "",
    )
    return f"{' '.join(head.split())}: {info.message}" if info.message else " ".join(head.split())


def _vocabulary_namespace(iri: str) -> str | None:
    return next((ns for ns in VOCABULARY_NAMESPACES if iri.startswith(ns)), None)


def _namespace_manager() -> NamespaceManager:
    nsm = NamespaceManager(rdflib.Graph(bind_namespaces="none"), bind_namespaces="none")
    for prefix, ns in PREFIXES.items():
        nsm.bind(prefix, ns)
    return nsm


_NAMESPACES = _namespace_manager()
_PREFIX_BY_NS = sorted(((ns, p) for p, ns in PREFIXES.items()), key=lambda item: -len(item[0]))


def _show(iri: str) -> str:
    """Prefixed name when a known prefix fits (what the LLM wrote), else the IRI in angle brackets."""
    for ns, prefix in _PREFIX_BY_NS:
        local = iri[len(ns) :]
        if iri.startswith(ns) and local and all(c.isalnum() or c in "_-." for c in local):
            return f"{prefix}:{local}"
    return iri if iri.startswith("_:") else f"<{iri}>"


def _show_node(node: Node | None) -> str:
    if node is None:
        return ""
    if isinstance(node, Literal):
        return node.n3(_NAMESPACES)
    return _show(_node_id(node))


def _node_id(node: Node | None) -> str:
    """IRI string, or ``_:id`` for a blank node (so it cannot be confused with an IRI)."""
    if isinstance(node, BNode):
        return f"_:{node}"
    return str(node)


def _sorted_unique(violations: list[Violation]) -> list[Violation]:
    order = {rule: i for i, rule in enumerate(_RULE_ORDER)}
    unique = dict.fromkeys(violations)
    return sorted(unique, key=lambda v: (order.get(v.rule, len(order)), v.focus, v.path or "", v.message))

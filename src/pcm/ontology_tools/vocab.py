"""The published standard vocabularies, to check that a reused term really exists.

pcm declares the schema.org, PROV-O, FOAF, ... terms it reuses in ``pcm_ontology/``; nothing stops a typo or an
invented term (``schema:RepairAction``) from being declared there, in a shape or in a query. The published
vocabularies, as N-Quads with the namespace as graph name (their term lists ship in ``standard_vocab/``, beside this
module, with their licences), are the reference:
a namespace is *covered* when one of the files is that vocabulary, and every term under a covered namespace must be
a subject in it. RDF and XSD are small fixed W3C lists, built in so that ``rdf:typo`` and ``xsd:strng`` are caught
even without the files. The SHACL vocabulary comes from the copy pyshacl ships (``pyshacl/assets/shacl.ttl``): the
shared ``sh.nq`` holds only the SHACL-AF node expressions, not ``sh:NodeShape`` or ``sh:path``.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from pcm.namespaces import RDF, SCHEMA, SCHEMA_HTTP, SH, XSD

_LINE = re.compile(r"^<([^>]+)>.*<([^>]+)>\s*\.\s*$")

_RDF_TERMS = (
    "type", "Property", "Statement", "subject", "predicate", "object", "value", "first", "rest", "nil", "List",
    "Bag", "Seq", "Alt", "langString", "HTML", "XMLLiteral", "JSON", "PlainLiteral", "CompoundLiteral",
    "dirLangString", "direction", "language", "reifies",
)
_XSD_TERMS = (
    "string", "boolean", "decimal", "integer", "double", "float", "date", "time", "dateTime", "dateTimeStamp",
    "gYear", "gMonth", "gDay", "gYearMonth", "gMonthDay", "duration", "yearMonthDuration", "dayTimeDuration",
    "byte", "short", "int", "long", "unsignedByte", "unsignedShort", "unsignedInt", "unsignedLong",
    "positiveInteger", "nonNegativeInteger", "negativeInteger", "nonPositiveInteger", "hexBinary", "base64Binary",
    "anyURI", "language", "normalizedString", "token", "NMTOKEN", "Name", "NCName", "QName", "anySimpleType",
    "anyAtomicType",
)


@dataclass(frozen=True)
class StandardVocabularies:
    """Terms of the published vocabularies we have, by namespace."""

    directory: Path | None
    """Where the N-Quads came from; ``None`` when only the built-in RDF and XSD lists are known."""
    namespaces: tuple[str, ...]
    """Covered namespaces, longest first (so the most specific one matches)."""
    terms: frozenset[str]

    def namespace_of(self, iri: str) -> str | None:
        """The covered namespace ``iri`` falls under, if any."""
        return next((ns for ns in self.namespaces if iri.startswith(ns) and len(iri) > len(ns)), None)

    def defines(self, iri: str) -> bool:
        return iri in self.terms

    def is_unknown(self, iri: str) -> bool:
        """True for a term under a covered namespace that its standard does not define."""
        return self.namespace_of(iri) is not None and iri not in self.terms


#: The term lists pcm ships (``standard_vocab/README.txt``: their sources, licences and how they were cut): one
#: declaration per term of each vocabulary, the same terms and namespaces as the full published files.
SHIPPED_VOCAB = Path(__file__).resolve().parent / "standard_vocab"


def default_vocab_dir() -> Path:
    """The vocabularies ``pcm ontology check`` reads unless ``--vocab`` names others: the shipped term lists."""
    return SHIPPED_VOCAB


def load_vocabularies(directory: Path | None = None) -> StandardVocabularies:
    """The vocabularies in ``directory`` (``*.nq``), plus RDF and XSD; parsed once per directory."""
    return _load(directory.resolve() if directory is not None else None)


@lru_cache(maxsize=4)
def _load(directory: Path | None) -> StandardVocabularies:
    namespaces = {RDF, XSD}
    terms = {RDF + t for t in _RDF_TERMS} | {XSD + t for t in _XSD_TERMS}
    if directory is not None:
        for path in sorted(directory.glob("*.nq")):
            graphs: Counter[str] = Counter()
            for line in path.read_text(encoding="utf-8").splitlines():
                match = _LINE.match(line)
                if match:
                    terms.add(match.group(1))
                    graphs[match.group(2)] += 1
            if graphs:
                namespaces.add(graphs.most_common(1)[0][0])
    shacl = _shacl_terms()
    if shacl:
        namespaces.add(SH)
        terms |= shacl
    if SCHEMA_HTTP in namespaces:  # pcm spells schema.org with https (docs/DESIGN.md §2); the dump uses http
        namespaces.add(SCHEMA)
        terms |= {SCHEMA + t[len(SCHEMA_HTTP):] for t in terms if t.startswith(SCHEMA_HTTP)}
    ordered = tuple(sorted(namespaces, key=lambda ns: (-len(ns), ns)))
    return StandardVocabularies(directory, ordered, frozenset(terms))


def _shacl_terms() -> frozenset[str]:
    """Subjects of the SHACL vocabulary bundled with pyshacl (empty if a pyshacl release stops shipping it)."""
    import pyshacl
    import rdflib

    path = Path(pyshacl.__file__).resolve().parent / "assets" / "shacl.ttl"
    if not path.is_file():
        return frozenset()
    graph = rdflib.Graph()
    graph.parse(path, format="turtle")
    return frozenset(str(s) for s in graph.subjects() if isinstance(s, rdflib.URIRef) and str(s).startswith(SH))

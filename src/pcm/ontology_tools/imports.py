"""``owl:imports`` resolved offline, through a catalog mapping import IRIs to local files.

pcm never downloads an ontology: a reasoner that follows ``owl:imports`` over the network makes ``check`` depend on
a web server, hang without one, and check a vocabulary that may have changed since. Instead, as in Protégé and the
ODK, a catalog maps each imported IRI to a file. Two catalog formats are read:

* ``catalog-v001.xml`` (OASIS XML catalog, what Protégé and the ODK write)::

      <catalog xmlns="urn:oasis:names:tc:entity:xmlns:xml:catalog">
        <uri name="http://www.w3.org/ns/prov-o" uri="../shared/vocab/prov.nq"/>
      </catalog>

* ``catalog.toml``: an ``[imports]`` table, ``"http://www.w3.org/ns/prov-o" = "../shared/vocab/prov.nq"``.

Paths are relative to the catalog file. The ontology folder's own catalog is used unless another one is given. An
import of an ontology IRI declared by one of the folder's own files needs no entry. An import that no entry maps,
or whose file is missing or unreadable, is one finding; it never becomes a traceback or a download.
"""

from __future__ import annotations

import tomllib
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import rdflib
from rdflib import OWL, RDF, URIRef

from pcm.errors import InputError

XML_CATALOG = "catalog-v001.xml"
TOML_CATALOG = "catalog.toml"
_CATALOG_NS = "{urn:oasis:names:tc:entity:xmlns:xml:catalog}"
_FORMATS = {".ttl": "turtle", ".nt": "nt", ".nq": "nquads", ".trig": "trig", ".owl": "xml", ".rdf": "xml",
            ".xml": "xml", ".jsonld": "json-ld", ".n3": "n3"}


@dataclass
class Catalog:
    """Import IRI -> local file."""

    path: Path | None
    """The catalog file read (``None``: no catalog)."""
    entries: dict[str, Path] = field(default_factory=dict)


def find_catalog(ontology_dir: Path) -> Path | None:
    """The ontology folder's own catalog, XML first (the ODK's name), then TOML."""
    for name in (XML_CATALOG, TOML_CATALOG):
        if (ontology_dir / name).is_file():
            return ontology_dir / name
    return None


def load_catalog(path: Path | None) -> Catalog:
    """Read an XML or TOML catalog; a malformed one is an :class:`InputError` naming the file."""
    if path is None:
        return Catalog(None)
    base = path.resolve().parent
    entries: dict[str, Path] = {}
    if path.suffix == ".toml":
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
            raise InputError(f"catalog {path}: {error}") from error
        table = data.get("imports", {})
        if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
            raise InputError(f"catalog {path}: expected an [imports] table of \"IRI\" = \"file\" entries")
        entries = {iri: base / file for iri, file in table.items()}
    else:
        try:
            root = ET.parse(path).getroot()
        except (OSError, ET.ParseError) as error:
            raise InputError(f"catalog {path}: {error}") from error
        for element in root.iter():
            if element.tag in (f"{_CATALOG_NS}uri", "uri") and element.get("name") and element.get("uri"):
                entries[element.get("name", "")] = base / element.get("uri", "")
    return Catalog(path, entries)


@dataclass
class ResolvedImports:
    graph: rdflib.Graph
    """The triples of every imported file (imports of imports included), without their ``owl:imports``."""
    resolved: dict[str, Path] = field(default_factory=dict)
    problems: list[tuple[str, str]] = field(default_factory=list)
    """``(import IRI, one-line reason)`` for each import that could not be read."""


def resolve_imports(graph: rdflib.Graph, catalog: Catalog) -> ResolvedImports:
    """Follow ``owl:imports`` from ``graph`` through ``catalog``, transitively, reading local files only."""
    result = ResolvedImports(rdflib.Graph())
    local = {str(s) for s in graph.subjects(RDF.type, OWL.Ontology)}
    queue = sorted({str(o) for o in graph.objects(None, OWL.imports) if isinstance(o, URIRef)})
    seen: set[str] = set()
    while queue:
        iri = queue.pop(0)
        if iri in seen or iri in local:
            continue
        seen.add(iri)
        path = catalog.entries.get(iri) or catalog.entries.get(iri.rstrip("#/"))
        if path is None:
            where = f"the catalog {catalog.path}" if catalog.path else f"a catalog (no {XML_CATALOG} or {TOML_CATALOG})"
            result.problems.append((iri, f"owl:imports <{iri}> is not mapped to a local file by {where}; "
                                         "add an entry (pcm never downloads imports)"))
            continue
        if not path.is_file():
            result.problems.append((iri, f"owl:imports <{iri}>: the catalog maps it to {path}, which does not exist"))
            continue
        imported = rdflib.Dataset() if _FORMATS.get(path.suffix) in ("nquads", "trig") else rdflib.Graph()
        try:
            imported.parse(path, format=_FORMATS.get(path.suffix, "turtle"))
        except Exception as error:  # rdflib raises several unrelated types for bad RDF
            reason = " ".join(str(error).split()) or type(error).__name__
            result.problems.append((iri, f"owl:imports <{iri}>: {path} is not readable RDF: {reason}"))
            continue
        result.resolved[iri] = path
        if isinstance(imported, rdflib.Dataset):
            triples = [(s, p, o) for s, p, o, _ in imported.quads((None, None, None, None))]
        else:
            triples = list(imported)
        for s, p, o in triples:
            if p == OWL.imports:
                if isinstance(o, URIRef):
                    queue.append(str(o))
                continue
            result.graph.add((s, p, o))
        local |= {str(s) for s in result.graph.subjects(RDF.type, OWL.Ontology)}
    return result


def without_imports(graph: rdflib.Graph) -> rdflib.Graph:
    """A copy of ``graph`` without ``owl:imports`` triples: what a reasoner may be given without it downloading."""
    copy = rdflib.Graph()
    for triple in graph:
        if triple[1] != OWL.imports:
            copy.add(triple)
    return copy

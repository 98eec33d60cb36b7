"""Namespace IRIs shared by every module (docs/DESIGN.md §2).

Graph names are not here: they belong to one memory (:mod:`pcm.layout`).
"""

from __future__ import annotations

PCM = "https://w3id.org/pcm/ontology#"
SCHEMA = "https://schema.org/"
SCHEMA_HTTP = "http://schema.org/"
PROV = "http://www.w3.org/ns/prov#"
FOAF = "http://xmlns.com/foaf/0.1/"
SIOC = "http://rdfs.org/sioc/ns#"
SKOS = "http://www.w3.org/2004/02/skos/core#"
REL = "http://purl.org/vocab/relationship/"
BIO = "http://purl.org/vocab/bio/0.1/"
CV = "http://rdfs.org/resume-rdf/cv.rdfs#"
OB = "https://w3id.org/ontobio/"
OPENCARE = "https://w3id.org/opencare/"
DCTERMS = "http://purl.org/dc/terms/"
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
OWL = "http://www.w3.org/2002/07/owl#"
XSD = "http://www.w3.org/2001/XMLSchema#"
SH = "http://www.w3.org/ns/shacl#"

#: Prefixes offered to the LLM, written into exported Turtle and accepted in queries.
PREFIXES: dict[str, str] = {
    "pcm": PCM,
    "schema": SCHEMA,
    "prov": PROV,
    "foaf": FOAF,
    "sioc": SIOC,
    "skos": SKOS,
    "rel": REL,
    "bio": BIO,
    "cv": CV,
    "ob": OB,
    "opencare": OPENCARE,
    "dcterms": DCTERMS,
    "rdf": RDF,
    "rdfs": RDFS,
    "owl": OWL,
    "xsd": XSD,
}

#: Namespaces whose terms must be declared by the PCM ontology before data may use them.
VOCABULARY_NAMESPACES: tuple[str, ...] = (PCM, SCHEMA, PROV, FOAF, SIOC, SKOS, REL, BIO, CV, OB, OPENCARE, DCTERMS)

def sparql_prefixes(names: tuple[str, ...] | None = None) -> str:
    """PREFIX lines for SPARQL text (all known prefixes unless ``names`` picks some)."""
    chosen = PREFIXES if names is None else {n: PREFIXES[n] for n in names}
    return "".join(f"PREFIX {p}: <{iri}>\n" for p, iri in chosen.items())


def turtle_prefixes(names: tuple[str, ...] | None = None) -> str:
    """@prefix lines for Turtle text."""
    chosen = PREFIXES if names is None else {n: PREFIXES[n] for n in names}
    return "".join(f"@prefix {p}: <{iri}> .\n" for p, iri in chosen.items())

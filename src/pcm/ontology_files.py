"""Facts about the shipped ontology files read with the store's own parser: the version and the content digest.

Every open of a memory compares both with what the memory was written against (``memory.toml``). Parsing the
ontology with rdflib for that (:func:`pcm.ontology.load_ontology`) costs most of a second and imports rdflib, which
commands such as ``pcm stats`` or ``pcm ask`` through a running server otherwise never need; pyoxigraph's parser
reads the files in milliseconds, and :func:`ontology_digest` names triples the same way whichever parser read them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

import pyoxigraph

from pcm import resources
from pcm.namespaces import OWL, PCM


def ontology_digest(quads: Iterable[pyoxigraph.Quad | pyoxigraph.Triple]) -> str:
    """``sha256:<hex>`` of a set of triples (graph names ignored), the same for the same content however it is
    written or stored.

    Blank nodes (unionOf lists, restrictions) have no stable names, so each is named by a hash of what it says
    (its outgoing triples, recursively). Two blank nodes saying the same thing then share a name, which can only
    hide a duplicated axiom, never a changed one. The parsed files and the store's ontology graph give the same
    digest, so a memory written before digests were recorded can be compared by reading its graph.
    """
    out: dict[pyoxigraph.BlankNode, list[tuple[str, object]]] = {}
    triples = [(q.subject, q.predicate, q.object) for q in quads]
    for s, p, o in triples:
        if isinstance(s, pyoxigraph.BlankNode):
            out.setdefault(s, []).append((str(p), o))
    names: dict[pyoxigraph.BlankNode, str] = {}

    def name(node: object, visiting: frozenset[pyoxigraph.BlankNode] = frozenset()) -> str:
        if not isinstance(node, pyoxigraph.BlankNode):
            return str(node)
        if node in names:
            return names[node]
        if node in visiting:  # a cycle through blank nodes: no content name exists, keep it stable anyway
            return "_:cycle"
        inner = visiting | {node}
        body = "\n".join(sorted(f"{p} {name(o, inner)}" for p, o in out.get(node, ())))
        names[node] = "_:" + hashlib.sha256(body.encode("utf-8")).hexdigest()[:32]
        return names[node]

    lines = sorted({f"{name(s)} {p} {name(o)}" for s, p, o in triples})
    return "sha256:" + hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


def file_facts(folder: Path | None = None) -> tuple[str | None, str]:
    """``(owl:versionInfo, content digest)`` of the ontology files in ``folder`` (default: the shipped ones).

    Remembered per set of files and their sizes and modification times, so an edited file is read again. The
    version is ``None`` when no file states it, and both are empty when a file cannot be read or parsed: callers
    then load the ontology the full way, whose loader names the file and the error.
    """
    folder = resources.ontology_dir() if folder is None else folder
    try:
        files = tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(folder.glob("*.ttl")))
        return _facts(files)
    except (SyntaxError, OSError):
        return None, ""  # matches no memory: the caller loads the ontology the full way, which names the file


@lru_cache(maxsize=8)
def _facts(files: tuple[tuple[str, int, int], ...]) -> tuple[str | None, str]:
    subject, predicate = pyoxigraph.NamedNode(PCM.rstrip("#")), pyoxigraph.NamedNode(OWL + "versionInfo")
    triples: list[pyoxigraph.Triple] = []
    version: str | None = None
    for path, _, _ in files:
        for triple in pyoxigraph.parse(path=path, format=pyoxigraph.RdfFormat.TURTLE):
            triples.append(triple)
            if version is None and triple.subject == subject and triple.predicate == predicate:
                version = str(triple.object.value)
    return version, ontology_digest(triples)

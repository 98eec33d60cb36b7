"""SHACL validation time of an import delta holding one long literal (1, 4 and 16 MB by default).

An import is validated on an rdflib graph. That graph used to be filled by writing the quads as N-Triples and
reading them back with rdflib's N-Triples reader, whose time grows with the square of a line's length (1 MB: 13.6 s,
4 MB: 138 s); it is now built term by term from the quads (``pcm.rdfbridge``). This prints, per size, the seconds
``Memory._validate`` takes on four triples (a pet, its label of that size, its species, the owner's link to it),
and, measured apart, the seconds building the rdflib graph alone takes.

The literal cap of an import (``PCM_RDF_MAX_LITERAL_CHARS``) refuses such a file before validation; this measures
validation itself, for a memory whose cap was raised.

Run: ``python benchmarks/bench_validate_literal.py [--mb 1 4 16]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pyoxigraph as ox

from pcm.memory import Memory
from pcm.settings import Settings

RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
PCM = "https://w3id.org/pcm/ontology#"


def delta(namespace: str, chars: int) -> list[ox.Quad]:
    """The import delta of ``tests/test_store.py``'s pet, its label ``chars`` characters long."""
    pet, owner = ox.NamedNode(namespace + "biscuit"), ox.NamedNode(namespace + "owner")
    label = ("Biscuit the beagle " * (chars // 19 + 1))[:chars]
    g = ox.DefaultGraph()
    return [
        ox.Quad(pet, ox.NamedNode(RDF_TYPE), ox.NamedNode(PCM + "Pet"), g),
        ox.Quad(pet, ox.NamedNode(RDFS_LABEL), ox.Literal(label), g),
        ox.Quad(pet, ox.NamedNode(PCM + "petSpecies"), ox.Literal("beagle"), g),
        ox.Quad(owner, ox.NamedNode(PCM + "hasPet"), pet, g),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, nargs="+", default=[1.0, 4.0, 16.0])
    options = parser.parse_args()
    from pcm.rdfbridge import to_rdflib

    with tempfile.TemporaryDirectory(prefix="pcm-bench-validate-") as tmp:
        memory = Memory.init(Settings(memory=Path(tmp) / "memory", index_enabled=False), owner="Dana")
        memory._validate(delta(memory.manifest.namespace, 10), "warm-up")  # shapes parsed once per process
        print(f"{'literal':>10} {'validate s':>11} {'graph alone s':>14}")
        for mb in options.mb:
            quads = delta(memory.manifest.namespace, int(mb * 1_000_000))
            started = time.perf_counter()
            to_rdflib(quads)
            built = time.perf_counter() - started
            started = time.perf_counter()
            memory._validate(quads, f"{mb:g} MB")
            print(f"{mb:>8g} MB {time.perf_counter() - started:11.3f} {built:14.3f}")
        memory.close()


if __name__ == "__main__":
    main()

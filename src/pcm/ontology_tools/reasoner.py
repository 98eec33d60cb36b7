"""OWL 2 consistency and class satisfiability with HermiT, through owlready2.

Three traps this module exists to avoid: owlready2 reads RDF/XML or N-Triples but loads Turtle as an *empty*
ontology without complaint (so the graph is written as N-Triples first, and the number of classes the reasoner
world holds is compared with ours); Pellet in owlready2 0.51 does not run on Java 17 (so HermiT); and owlready2
hands HermiT a temporary file in the process-wide temp directory with no parameter to move it (so the temp
directory is pointed at our own work directory for the duration of the call, under a lock).
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import rdflib
from rdflib import OWL, RDF, URIRef

from pcm.errors import PcmError

_TEMPDIR_LOCK = threading.Lock()


@dataclass(frozen=True)
class ReasonerResult:
    consistent: bool
    unsatisfiable: tuple[str, ...]
    """IRIs of named classes equivalent to ``owl:Nothing`` (empty when the ontology is inconsistent)."""
    classes: int
    """Named classes the reasoner's world held: proof that it read the ontology at all."""
    seconds: float


def java_available() -> bool:
    import owlready2

    return shutil.which(owlready2.JAVA_EXE) is not None


def run_hermit(graph: rdflib.Graph, workdir: Path | None = None) -> ReasonerResult:
    """Classify ``graph`` with HermiT; raise :class:`PcmError` when Java is missing or HermiT fails to run."""
    import owlready2

    if not java_available():
        raise PcmError(f"HermiT needs Java, and {owlready2.JAVA_EXE!r} is not on the PATH (install a JRE 11+)")
    started = time.perf_counter()
    with _work_directory(workdir) as folder:
        path = folder / "ontology.nt"
        graph.serialize(path, format="nt", encoding="utf-8")
        world = owlready2.World()
        try:
            try:
                loaded = world.get_ontology(path.as_uri()).load()
            except (TypeError, AttributeError, NameError, ValueError) as error:
                # owlready2's loader trips over some published vocabularies (FOAF's punned terms, say): one
                # finding, not a traceback
                raise PcmError(f"owlready2 could not load the ontology for HermiT: {type(error).__name__}: {error}") from error
            classes = sum(1 for c in world.classes() if isinstance(c, owlready2.ThingClass))
            expected = sum(1 for s in set(graph.subjects(RDF.type, OWL.Class)) if isinstance(s, URIRef))
            if expected and not classes:
                raise PcmError("owlready2 read no class from the N-Triples it was given; the reasoner saw nothing")
            consistent, unsatisfiable = _classify(owlready2, world, loaded, folder)
        finally:
            world.close()
    return ReasonerResult(consistent, unsatisfiable, classes, time.perf_counter() - started)


def _classify(owlready2: Any, world: Any, loaded: Any, folder: Path) -> tuple[bool, tuple[str, ...]]:
    with _TEMPDIR_LOCK:
        saved = tempfile.tempdir
        tempfile.tempdir = str(folder)
        try:
            with loaded:
                owlready2.sync_reasoner_hermit(world, infer_property_values=False, debug=0)
        except owlready2.OwlReadyInconsistentOntologyError:
            return False, ()
        except owlready2.OwlReadyJavaError as error:
            lines = [line for line in str(error).splitlines() if line.strip()]
            raise PcmError(f"HermiT failed: {lines[-1] if lines else 'no message'}") from error
        except (TypeError, AttributeError) as error:
            # owlready2 writes HermiT's classification back into Python objects, and fails on some punned terms
            # (PROV-O's properties typed as individuals): HermiT answered, owlready2 could not record the answer
            raise PcmError(f"owlready2 could not apply HermiT's results (often a punned term in an import): {error}") from error
        finally:
            tempfile.tempdir = saved
    unsatisfiable = sorted(
        c.iri for c in world.inconsistent_classes()
        if hasattr(c, "iri") and not c.iri.startswith(str(OWL))  # owl:Nothing is empty by definition
    )
    return True, tuple(unsatisfiable)


@contextmanager
def _work_directory(workdir: Path | None) -> Iterator[Path]:
    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)
        yield workdir
        return
    with tempfile.TemporaryDirectory(prefix="pcm-hermit-") as folder:
        yield Path(folder)

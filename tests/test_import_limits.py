"""RDF enters a memory under limits: DTD entities refused, bytes, triples and literal length capped, before staging.

The bombs are the issue's: nested internal entities in a kilobyte of RDF/XML (nine levels of ten references grew
``pcm import`` past 9 GB and aborted it; seven levels make one 30 MB literal), a 100 kB entity used 20,000 times,
and a ``rdf:parseType`` property whose every element repeats the namespaces in scope. ``pcm import`` runs as a real
process under an address-space limit, so a parser that starts expanding dies instead of swapping; through
``pcm serve`` the same bodies go to ``/store`` with the write token. Validation itself is linear in a literal's
length (the rdflib graph is built term by term, not read back from N-Triples).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pyoxigraph as ox
import pytest
import rdflib
from rdflib.compare import isomorphic

from pcm.errors import InputError, InputTooLarge
from pcm.memory import Memory
from pcm.rdfbridge import to_rdflib
from pcm.rdflimits import RdfLimits, check_xml
from pcm.settings import Settings
from tests.endpoint.test_endpoint_support import AUTH, EX, ask, build_memory, serving
from tests.memory_template import memory_copy

RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
ADDRESS_SPACE = 1536 * 1024 * 1024  # 1.5 GB: a parser that starts expanding an entity bomb dies well before swapping


def laughs(levels: int, refs: int, base: str) -> bytes:
    """A "billion laughs": entity n is ``refs`` references to entity n-1, the last one used once."""
    entities = [f'  <!ENTITY lol0 "{base}">']
    entities += [f'  <!ENTITY lol{i} "' + f"&lol{i - 1};" * refs + '">' for i in range(1, levels + 1)]
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE rdf:RDF [\n' + "\n".join(entities) + "\n]>\n"
        f'<rdf:RDF xmlns:rdf="{RDF}" xmlns:ex="{EX}">\n'
        f'  <rdf:Description rdf:about="{EX}s">\n    <ex:p>&lol{levels};</ex:p>\n  </rdf:Description>\n</rdf:RDF>\n'
    ).encode()


def big_entity(chars: int = 100_000, uses: int = 20_000) -> bytes:
    """One 100 kB entity used 20,000 times: 160 kB of file, 2 GB of literal."""
    return (
        '<?xml version="1.0"?>\n<!DOCTYPE rdf:RDF [ <!ENTITY e "' + "x" * chars + '"> ]>\n'
        f'<rdf:RDF xmlns:rdf="{RDF}" xmlns:ex="{EX}"><rdf:Description rdf:about="{EX}s">'
        "<ex:p>" + "&e;" * uses + "</ex:p></rdf:Description></rdf:RDF>\n"
    ).encode()


def namespace_literal(namespaces: int = 200, elements: int = 2000) -> bytes:
    """No DTD: an ``rdf:parseType="Literal"`` property whose every element gets all namespaces in scope written
    into it by the parser (20 kB of file, a 25 MB literal)."""
    declared = " ".join(f'xmlns:n{i}="http://example.org/a/rather/long/namespace/{i}/#"' for i in range(namespaces))
    return (
        f'<?xml version="1.0"?>\n<rdf:RDF xmlns:rdf="{RDF}" xmlns:ex="{EX}" {declared}>'
        f'<rdf:Description rdf:about="{EX}s"><ex:p rdf:parseType="Literal">' + "<a/>" * elements
        + "</ex:p></rdf:Description></rdf:RDF>\n"
    ).encode()


BOMBS = {
    "nine-levels.rdf": laughs(9, 10, "ha"),  # 1 kB of file, 2 GB expanded
    "seven-levels.rdf": laughs(7, 10, "lol"),  # one 30 MB literal
    "big-entity.rdf": big_entity(),
    "namespaces.rdf": namespace_literal(),
}

FACTS = """\
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix pcm: <https://w3id.org/pcm/ontology#> .
@prefix m: <{ns}> .
m:biscuit a pcm:Pet ; rdfs:label "{label}" ; pcm:petSpecies "beagle" .
m:owner pcm:hasPet m:biscuit .
"""


#: Runs argv[2:] under an address-space limit of argv[1] bytes and prints its CPU seconds and peak RSS (kB). A
#: small process of its own starts it: a child forked from this test process would start from this process's own
#: peak (Linux carries ``ru_maxrss`` over fork and exec), which an earlier test may have raised past a gigabyte.
_UNDER_LIMIT = (
    "import os, resource, subprocess, sys\n"
    "resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[1]),) * 2)\n"
    "child = subprocess.Popen(sys.argv[2:])\n"
    "_, status, usage = os.wait4(child.pid, 0)\n"
    "print(usage.ru_utime + usage.ru_stime, usage.ru_maxrss)\n"
    "sys.exit(os.waitstatus_to_exitcode(status))\n"
)


def pcm_import(path: Path, memory: Path, **env: str) -> tuple[int, str, float, float]:
    """``pcm import PATH`` as its own process under the address-space limit: (exit code, stderr, CPU seconds, peak
    RSS in MB), the resources of that process alone."""
    environ = {k: v for k, v in os.environ.items() if k != "PCM_TOKEN"}
    environ.update({"PCM_MEMORY": str(memory), "PCM_LLM": "none", "PCM_INDEX": "off", **env})
    with tempfile.TemporaryFile() as err:
        process = subprocess.Popen(
            [sys.executable, "-c", _UNDER_LIMIT, str(ADDRESS_SPACE), sys.executable, "-m", "pcm.cli", "import",
             str(path)], stdout=subprocess.PIPE, stderr=err, env=environ, cwd=path.parent, start_new_session=True)
        # a stop for a runaway parse (the old parser ran for minutes), far above what a loaded machine needs
        timer = threading.Timer(500, os.killpg, (process.pid, signal.SIGKILL))
        timer.start()
        try:
            out, _ = process.communicate()
        finally:
            timer.cancel()
        err.seek(0)
        last = out.strip().splitlines()[-1] if out.strip() else b"0 0"  # after what pcm printed, the wrapper's line
        cpu, peak_kb = last.split()
        return process.returncode, err.read().decode(), float(cpu), int(peak_kb) / 1024


def quads_of(memory: Path) -> list[str]:
    with Memory.open(Settings(memory=memory, index_enabled=False)) as opened:
        return sorted(map(str, opened.backend.quads()))


@pytest.fixture
def mem(template: Path, tmp_path: Path) -> Path:
    with memory_copy(template, tmp_path) as memory:
        return memory.settings.memory


# ------------------------------------------------------------------------------------------- pcm import (CLI)


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_a_bomb_is_refused_by_pcm_import_at_once_and_changes_nothing(name: str, mem: Path, tmp_path: Path) -> None:
    path = tmp_path / name
    path.write_bytes(BOMBS[name])
    before = quads_of(mem)
    code, stderr, cpu, rss = pcm_import(path, mem)
    assert code == 3, (code, stderr[-500:])
    assert stderr.count("\n") == 1 and name in stderr, stderr
    assert ("DTD entity" in stderr) != ("PCM_MAX_LITERAL_CHARS" in stderr), stderr
    assert cpu < 2.0, f"{cpu:.1f} s of CPU"
    assert rss < 300, f"{rss:.0f} MB peak"
    assert quads_of(mem) == before


def test_limits_are_one_line_naming_the_setting(mem: Path, tmp_path: Path) -> None:
    before = quads_of(mem)
    ns = _namespace(mem)
    long = tmp_path / "long.ttl"
    long.write_text(FACTS.format(ns=ns, label="Biscuit " * 200))  # 1,600 characters
    code, stderr, _, _ = pcm_import(long, mem, PCM_MAX_LITERAL_CHARS="1000")
    assert code == 3 and stderr.count("\n") == 1
    assert "1,600 characters" in stderr and "PCM_MAX_LITERAL_CHARS" in stderr
    many = tmp_path / "many.nt"
    many.write_text("".join(f'<{EX}s> <{EX}p> "{i}" .\n' for i in range(101)))
    code, stderr, _, _ = pcm_import(many, mem, PCM_MAX_RDF_TRIPLES="100")
    assert code == 3 and "more than 100 triples" in stderr and "PCM_MAX_RDF_TRIPLES" in stderr
    big = tmp_path / "big.nt"
    big.write_text(f'<{EX}s> <{EX}p> "{"x" * 1_100_000}" .\n')
    code, stderr, _, _ = pcm_import(big, mem, PCM_MAX_RDF_MB="1")
    assert code == 3 and stderr.count("\n") == 1
    assert "1,100," in stderr and "PCM_MAX_RDF_MB" in stderr
    code, stderr, _, _ = pcm_import(long, mem, PCM_MAX_RDF_TRIPLES="0")
    assert code == 2 and "PCM_MAX_RDF_TRIPLES must be at least 1" in stderr
    assert quads_of(mem) == before


def _namespace(memory: Path) -> str:
    with Memory.open(Settings(memory=memory, index_enabled=False)) as opened:
        return opened.manifest.namespace


def test_a_normal_import_still_works(mem: Path, tmp_path: Path) -> None:
    ns = _namespace(mem)
    facts = tmp_path / "pets.ttl"
    facts.write_text(FACTS.format(ns=ns, label="Biscuit"))
    code, stderr, _, _ = pcm_import(facts, mem)
    assert code == 0, stderr
    as_xml = tmp_path / "pets.rdf"  # RDF/XML with a DOCTYPE that declares nothing is fine
    as_xml.write_text(
        f'<?xml version="1.0"?>\n<!DOCTYPE rdf:RDF>\n<rdf:RDF xmlns:rdf="{RDF}" '
        'xmlns:rdfs="http://www.w3.org/2000/01/rdf-schema#" xmlns:pcm="https://w3id.org/pcm/ontology#">'
        f'<pcm:Pet rdf:about="{ns}quill"><rdfs:label>Quill</rdfs:label><pcm:petSpecies>hedgehog</pcm:petSpecies>'
        f'</pcm:Pet><rdf:Description rdf:about="{ns}owner"><pcm:hasPet rdf:resource="{ns}quill"/></rdf:Description>'
        "</rdf:RDF>\n"
    )
    code, stderr, _, _ = pcm_import(as_xml, mem)
    assert code == 0, stderr
    stored = quads_of(mem)
    assert any(f"<{ns}biscuit>" in q for q in stored) and any(f"<{ns}quill>" in q for q in stored)


# ------------------------------------------------------------------------------------------- in process


def test_the_checks_run_before_staging(settings: Settings, tmp_path: Path) -> None:
    """The Python API refuses the same way, and a refused file leaves the store as it was."""
    with Memory.init(settings.with_(max_literal_chars=50), owner="Dana") as memory:
        before = sorted(map(str, memory.backend.quads()))
        for name, data in BOMBS.items():
            path = tmp_path / name
            path.write_bytes(data)
            with pytest.raises(InputError):
                memory.import_rdf(path)
        path = tmp_path / "label.ttl"
        path.write_text(FACTS.format(ns=memory.manifest.namespace, label="B" * 51))
        with pytest.raises(InputTooLarge, match="51 characters"):
            memory.import_rdf(path)
        assert sorted(map(str, memory.backend.quads())) == before


def test_xml_check_reads_only_what_it_must() -> None:
    limits = RdfLimits(max_literal_chars=1_000)
    check_xml(b'<?xml version="1.0"?><!DOCTYPE r><r/>', limits, "plain")  # a DOCTYPE alone is fine
    with pytest.raises(InputError, match="DTD entity 'p'"):  # parameter entities too
        check_xml(b'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY % p "x">]><r/>', limits, "param")
    with pytest.raises(InputError, match="DTD entity 'ext'"):  # external ones are never fetched
        check_xml(b'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY ext SYSTEM "file:///dev/zero">]><r>&ext;</r>',
                  limits, "external")
    check_xml(namespace_literal(namespaces=2, elements=3), limits, "small")  # 630 characters: under the limit
    with pytest.raises(InputTooLarge, match="PCM_MAX_LITERAL_CHARS"):  # 1,050 characters
        check_xml(namespace_literal(namespaces=2, elements=5), RdfLimits(max_literal_chars=1_000), "five")


# ------------------------------------------------------------------------------------------- validation


def test_the_rdflib_graph_is_the_one_n_triples_gave() -> None:
    """Validation sees the same graph as through the old N-Triples round trip."""
    s, b = ox.NamedNode(EX + "s"), ox.BlankNode("b1")
    xsd = "http://www.w3.org/2001/XMLSchema#"
    objects = [
        ox.Literal("plain"), ox.Literal("chat", language="fr"), ox.Literal("01", datatype=ox.NamedNode(xsd + "integer")),
        ox.Literal("2025-03-02", datatype=ox.NamedNode(xsd + "date")), ox.Literal("x", datatype=ox.NamedNode(EX + "dt")),
        ox.Literal('quote " and \\ and \n'), b, ox.NamedNode(EX + "o"),
    ]
    quads = [ox.Quad(s, ox.NamedNode(EX + f"p{i}"), o, ox.DefaultGraph()) for i, o in enumerate(objects)]
    quads.append(ox.Quad(b, ox.NamedNode(EX + "p"), ox.Literal("in a blank node"), ox.DefaultGraph()))
    text = ox.serialize([q.triple for q in quads], format=ox.RdfFormat.N_TRIPLES)
    assert text is not None
    parsed = rdflib.Graph().parse(data=text.decode("utf-8"), format="nt")
    built = to_rdflib(quads)
    assert isomorphic(built, parsed)
    assert set(built.objects()) - {o for o in built.objects() if isinstance(o, rdflib.BNode)} == {
        o for o in parsed.objects() if not isinstance(o, rdflib.BNode)
    }
    with pytest.raises(ValueError, match="triple term"):
        to_rdflib([ox.Quad(s, ox.NamedNode(EX + "p"), ox.Triple(s, s, s), ox.DefaultGraph())])


def test_validation_is_linear_in_a_literal_length(settings: Settings) -> None:
    """A 2 MB label: the N-Triples round trip took ~9 s of CPU for it (2.3 s at 1 MB, 37 s at 4 MB)."""
    with Memory.init(settings, owner="Dana") as memory:
        ns = memory.manifest.namespace
        pet, g = ox.NamedNode(ns + "biscuit"), ox.DefaultGraph()
        pcm = "https://w3id.org/pcm/ontology#"
        quads = [
            ox.Quad(pet, ox.NamedNode(RDF + "type"), ox.NamedNode(pcm + "Pet"), g),
            ox.Quad(pet, ox.NamedNode("http://www.w3.org/2000/01/rdf-schema#label"), ox.Literal("B" * 2_000_000), g),
            ox.Quad(pet, ox.NamedNode(pcm + "petSpecies"), ox.Literal("beagle"), g),
            ox.Quad(ox.NamedNode(ns + "owner"), ox.NamedNode(pcm + "hasPet"), pet, g),
        ]
        short = ox.Quad(pet, quads[1].predicate, ox.Literal("Biscuit"), g)
        memory._validate([quads[0], short, *quads[2:]], "warm-up")  # the shapes are parsed once per process
        started = time.process_time()
        memory._validate(quads, "long label")
        assert time.process_time() - started < 2.0


# ------------------------------------------------------------------------------------------- pcm serve /store


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = build_memory(tmp_path_factory.mktemp("limits") / "memory", samples=(), facts=False)
    with serving(settings.with_(max_literal_chars=10_000, max_rdf_triples=1_000)) as server:
        yield server.url


def put(url: str, graph: str, body: bytes, content_type: str) -> httpx.Response:
    return httpx.put(url + "/store", params={"graph": graph}, content=body,
                     headers={**AUTH, "Content-Type": content_type}, timeout=60)


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_a_bomb_sent_to_the_graph_store_never_reaches_the_engine(url: str, name: str) -> None:
    graph = EX + "bomb-" + name
    started = time.perf_counter()
    response = put(url, graph, BOMBS[name], "application/rdf+xml")
    assert response.status_code == (413 if name == "namespaces.rdf" else 400), response.text
    assert "\n" not in response.text.strip() and ("DTD entity" in response.text or "PCM_MAX_LITERAL_CHARS" in response.text)
    assert time.perf_counter() - started < 5
    assert httpx.get(url + "/store", params={"graph": graph}).status_code == 404
    assert ask(url, "ASK {}")  # the engine is alive


def test_graph_store_uploads_are_held_to_the_limits(url: str) -> None:
    graph = EX + "limited"
    long = f'<{EX}s> <{EX}p> "{"x" * 10_001}" .\n'.encode()
    response = put(url, graph, long, "text/turtle")
    assert response.status_code == 413 and "PCM_MAX_LITERAL_CHARS" in response.text
    many = "".join(f'<{EX}s> <{EX}p> "{i}" .\n' for i in range(1_001)).encode()
    response = httpx.post(url + "/store", params={"graph": graph}, content=many,
                          headers={**AUTH, "Content-Type": "application/n-triples"})
    assert response.status_code == 413 and "PCM_MAX_RDF_TRIPLES" in response.text
    broken = put(url, graph, b"<a> <b> .", "text/turtle")
    assert broken.status_code == 400
    assert httpx.get(url + "/store", params={"graph": graph}).status_code == 404
    fine = put(url, graph, many[: many.index(b'"1000"')].rsplit(b"\n", 1)[0] + b"\n", "application/n-triples")
    assert fine.status_code in (201, 204), fine.text
    assert ask(url, f'ASK {{ GRAPH <{graph}> {{ <{EX}s> <{EX}p> "999" }} }}')

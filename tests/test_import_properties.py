"""Property test of ``pcm import`` over every RDF format it reads, under an address-space limit.

Generated documents: small graphs of pet facts (random slugs, labels of any printable text) serialised by pyoxigraph
or rdflib as Turtle, TriG, N-Quads, JSON-LD and RDF/XML; the same graphs as a pcm dump (restored, not imported);
triples in a graph that is not pcm's; a literal over ``PCM_MAX_LITERAL_CHARS`` (set small); RDF/XML that declares
DTD entities; nesting a few thousand levels deep (blank nodes, collections, JSON objects and lists, XML elements);
and any of those cut short or with bytes flipped or inserted.

Whatever the document, the command ends in success (exit 0, the valid ones always) or in a refusal: exit 3 (input)
with exactly one line, or exit 7 (validation) with its report and one ``pcm: error:`` line; never a signal, never a
traceback, and a refusal leaves the store's quads as they were. A batch of documents goes through one process
(``tests/import_driver.py``, ``pcm import`` in process) under the limit, against a fresh copy of one memory per
example: starting Python and loading pcm costs more than a small import.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import httpx
import pyoxigraph as ox
import pytest
import rdflib
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pcm.errors import InputError
from pcm.manifest import Manifest
from pcm.rdflimits import MAX_NESTING, RdfLimits, checked_triples
from pcm.settings import Settings
from tests.endpoint.test_endpoint_support import AUTH, ask, serving
from tests.memory_template import init_template

REPO = Path(__file__).resolve().parents[1]
DRIVER = REPO / "tests" / "import_driver.py"
ADDRESS_SPACE = 1536 * 1024 * 1024  # 1.5 GB: a parser that allocates without bound dies instead of swapping
LITERAL_LIMIT = 200  # PCM_MAX_LITERAL_CHARS for the driver: long literals are cheap to make
EX = "http://example.org/"
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
PCM = "https://w3id.org/pcm/ontology#"
FORMATS = {"turtle": ".ttl", "trig": ".trig", "nquads": ".nq", "jsonld": ".jsonld", "rdfxml": ".rdf"}
OX_FORMATS = {"turtle": ox.RdfFormat.TURTLE, "trig": ox.RdfFormat.TRIG, "nquads": ox.RdfFormat.N_QUADS,
              "jsonld": ox.RdfFormat.JSON_LD, "rdfxml": ox.RdfFormat.RDF_XML}
RDFLIB_FORMATS = {"turtle": "turtle", "trig": "trig", "nquads": "nquads", "jsonld": "json-ld", "rdfxml": "pretty-xml"}


@dataclass(frozen=True)
class Document:
    """One generated file and what must come of it: ``expect`` is the exit code a well-formed one must give (None:
    any ending the property allows), ``says`` a word its refusal must contain."""

    kind: str
    fmt: str
    data: bytes
    expect: int | None = None
    says: str = ""
    triples: int = 0

    def named(self, index: int) -> str:
        return f"doc-{index:02d}-{self.kind}{FORMATS[self.fmt]}"


# -- graphs -----------------------------------------------------------------------------------------------------------

# any printable text XML 1.0 can carry (no control character but tab and newline), with the characters each syntax
# must escape
text = st.text(
    st.one_of(st.characters(blacklist_categories=("Cs", "Cc", "Cn", "Co")), st.sampled_from('\t\n"\\<>&\']]{}@#')),
    min_size=1, max_size=30,
)
slugs = st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True)


@st.composite
def pet_graph(draw: st.DrawFn, ns: str, tag: str, long_label: bool = False) -> list[ox.Triple]:
    """The owner's pets, each typed, labelled and given a species: what the shapes accept. ``tag`` keeps one
    document's individuals apart from another's in the same memory."""
    names = draw(st.lists(slugs, min_size=1, max_size=3, unique=True))
    triples: list[ox.Triple] = []
    for i, name in enumerate(names):
        pet = ox.NamedNode(f"{ns}{tag}-{name}")
        label = "L" * draw(st.integers(LITERAL_LIMIT + 1, LITERAL_LIMIT * 20)) if long_label and i == 0 else draw(text)
        triples += [
            ox.Triple(pet, ox.NamedNode(RDF + "type"), ox.NamedNode(PCM + "Pet")),
            ox.Triple(pet, ox.NamedNode(RDFS + "label"), ox.Literal(label)),
            ox.Triple(pet, ox.NamedNode(PCM + "petSpecies"), ox.Literal(draw(text))),
            ox.Triple(ox.NamedNode(ns + "owner"), ox.NamedNode(PCM + "hasPet"), pet),
        ]
    return triples


def _rdflib_term(term: ox.NamedNode | ox.Literal | ox.BlankNode) -> rdflib.term.Node:
    if isinstance(term, ox.NamedNode):
        return rdflib.URIRef(term.value)
    if isinstance(term, ox.BlankNode):
        return rdflib.BNode(term.value)
    return rdflib.Literal(term.value)


def serialise(triples: list[ox.Triple], fmt: str, library: str, graph: str | None = None) -> bytes:
    """``triples`` in ``fmt``, by pyoxigraph or rdflib, in the default graph or in ``graph``."""
    name: ox.NamedNode | ox.DefaultGraph = ox.NamedNode(graph) if graph else ox.DefaultGraph()
    if library == "oxigraph":
        if OX_FORMATS[fmt].supports_datasets:
            data = ox.serialize([ox.Quad(t.subject, t.predicate, t.object, name) for t in triples], format=OX_FORMATS[fmt])
        else:
            data = ox.serialize(triples, format=OX_FORMATS[fmt])
        assert data is not None
        return data
    dataset = rdflib.Dataset()
    target = dataset.graph(rdflib.URIRef(graph)) if graph else dataset.default_graph
    for t in triples:
        target.add((_rdflib_term(t.subject), _rdflib_term(t.predicate), _rdflib_term(t.object)))  # type: ignore[arg-type]
    source = dataset if fmt in ("trig", "nquads", "jsonld") else target
    return source.serialize(format=RDFLIB_FORMATS[fmt], encoding="utf-8")


# -- documents --------------------------------------------------------------------------------------------------------

formats = st.sampled_from(sorted(FORMATS))
libraries = st.sampled_from(["oxigraph", "rdflib"])


@st.composite
def valid(draw: st.DrawFn, ns: str, tag: str, fmt: str | None = None) -> Document:
    fmt = fmt or draw(formats)
    triples = draw(pet_graph(ns, tag))
    return Document("valid", fmt, serialise(triples, fmt, draw(libraries)), expect=0, triples=len(set(triples)))


@st.composite
def dump(draw: st.DrawFn, ns: str, tag: str) -> Document:
    """The facts in a graph named as pcm names an import graph: a dump, restored graph by graph."""
    fmt = draw(st.sampled_from(["trig", "nquads"]))
    graph = "urn:pcm:graph:import:" + draw(st.from_regex(r"[0-9a-f]{16}", fullmatch=True))
    return Document("dump", fmt, serialise(draw(pet_graph(ns, tag)), fmt, draw(libraries), graph), expect=0)


@st.composite
def foreign_graph(draw: st.DrawFn, ns: str, tag: str) -> Document:
    fmt = draw(st.sampled_from(["trig", "nquads"]))
    data = serialise(draw(pet_graph(ns, tag)), fmt, draw(libraries), EX + "graph")
    return Document("foreign-graph", fmt, data, expect=3, says="named graphs")


@st.composite
def long_literal(draw: st.DrawFn, ns: str, tag: str) -> Document:
    fmt = draw(formats)
    data = serialise(draw(pet_graph(ns, tag, long_label=True)), fmt, draw(libraries))
    return Document("long-literal", fmt, data, expect=3, says="PCM_MAX_LITERAL_CHARS")


@st.composite
def entities(draw: st.DrawFn, ns: str, tag: str) -> Document:
    """RDF/XML with a DOCTYPE declaring entities (nested ones, a "billion laughs" kept small), one of them used."""
    xml = serialise(draw(pet_graph(ns, tag)), "rdfxml", draw(libraries)).decode("utf-8")
    levels, refs = draw(st.integers(0, 4)), draw(st.integers(1, 8))
    declared = ['<!ENTITY e0 "ha">'] + [f'<!ENTITY e{i} "' + f"&e{i - 1};" * refs + '">' for i in range(1, levels + 1)]
    if draw(st.booleans()):
        declared.append('<!ENTITY ext SYSTEM "file:///etc/passwd">')
    doctype = "<!DOCTYPE rdf:RDF [\n" + "\n".join(declared) + "\n]>\n"
    head, sep, rest = xml.partition("?>")
    xml = head + sep + "\n" + doctype + rest if sep else doctype + xml
    xml = xml.replace("<rdfs:label>", f"<rdfs:label>&e{levels};", 1)  # used, where a serialiser wrote that prefix
    return Document("entities", "rdfxml", xml.encode("utf-8"), expect=3, says="DTD entity")


#: A document nested ``d`` levels in each format, and how deep that is counted as JSON (brackets) or XML (elements).
NESTINGS: dict[str, Callable[[str, int], str]] = {
    "turtle": lambda ns, d: f"<{ns}root> <{EX}p> " + f"[ <{EX}p> " * d + '"x"' + " ]" * d + " .\n",
    "trig": lambda ns, d: f"{{ <{ns}root> <{EX}p> " + "( " * d + '"x"' + " )" * d + " . }\n",
    "nquads": lambda ns, d: f"<{ns}root> <{EX}p> _:b0 .\n" + "".join(f"_:b{i} <{EX}p> _:b{i + 1} .\n" for i in range(d)),
    "jsonld": lambda ns, d: f'{{"@id": "{ns}root", ' + f'"{EX}p": {{' * d + '"@value": "x"' + "}" * d + "}",
    "rdfxml": lambda ns, d: (
        f'<?xml version="1.0"?>\n<rdf:RDF xmlns:rdf="{RDF}" xmlns:ex="{EX}"><rdf:Description rdf:about="{ns}root">'
        + "<ex:p><rdf:Description>" * d + "<ex:q>x</ex:q>" + "</rdf:Description></ex:p>" * d
        + "</rdf:Description></rdf:RDF>\n"
    ),
}
COUNTED: dict[str, Callable[[int], int]] = {"jsonld": lambda d: d + 1, "rdfxml": lambda d: 2 * d + 3}


def json_lists(ns: str, d: int) -> str:
    """JSON-LD lists ``d`` deep: two brackets a level."""
    return f'{{"@id": "{ns}root", "{EX}p": ' + '{"@list": [' * d + '"x"' + "]}" * d + "}"


@st.composite
def nested(draw: st.DrawFn, ns: str, tag: str, fmt: str | None = None) -> Document:
    """Structures up to a few thousand levels deep; JSON-LD and RDF/XML deeper than ``MAX_NESTING`` are refused."""
    fmt = fmt or draw(formats)
    depth = draw(st.one_of(st.integers(1, 64), st.integers(64, 5000)))
    build, counted = NESTINGS[fmt], COUNTED.get(fmt)
    if fmt == "jsonld" and draw(st.booleans()):
        build, counted = json_lists, lambda d: 2 * d + 1
    too_deep = counted is not None and counted(depth) > MAX_NESTING
    return Document("nested", fmt, build(ns, depth).encode("utf-8"), expect=3 if too_deep else None,
                    says="levels deep" if too_deep else "")


@st.composite
def damaged(draw: st.DrawFn, ns: str, tag: str) -> Document:
    """Any of the others, cut short, or with bytes flipped or inserted (invalid UTF-8 among them)."""
    original = draw(st.one_of(valid(ns, tag), dump(ns, tag), long_literal(ns, tag), entities(ns, tag),
                              nested(ns, tag)))
    data = bytearray(original.data)
    how = draw(st.sampled_from(["truncate", "flip", "insert"]))
    if how == "truncate":
        del data[draw(st.integers(0, max(0, len(data) - 1))):]
    for _ in range(draw(st.integers(1, 3)) if how != "truncate" else 0):
        at = draw(st.integers(0, max(0, len(data) - 1)))
        if how == "flip" and data:
            data[at] ^= draw(st.integers(1, 255))
        else:
            data[at:at] = draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b"<", b'"', b"{", b"]"]))
    return Document(f"{original.kind}-{how}", original.fmt, bytes(data))


@st.composite
def batch(draw: st.DrawFn, ns: str) -> list[Document]:
    """A valid and a nested document of every format, then a few of the other kinds."""
    documents = [draw(kind(ns, f"{fmt}-{kind.__name__}", fmt)) for fmt in FORMATS for kind in (valid, nested)]
    others = [dump, foreign_graph, long_literal, entities, damaged, damaged, damaged]
    count = draw(st.integers(2, 5))
    return documents + [draw(draw(st.sampled_from(others))(ns, f"d{i}")) for i in range(count)]


# -- running them -----------------------------------------------------------------------------------------------------


def _limit_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def import_all(memory: Path, paths: list[Path]) -> list[dict[str, object]]:
    """One driver process under the address-space limit; its records, one per file, in order."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PCM_")}
    env.update({"PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)]), "PCM_LLM": "none",
                "PCM_INDEX": "off", "PCM_MAX_LITERAL_CHARS": str(LITERAL_LIMIT), "RUST_BACKTRACE": "0"})
    process = subprocess.run([sys.executable, str(DRIVER), str(memory), *map(str, paths)], capture_output=True,
                             text=True, env=env, cwd=memory.parent, preexec_fn=_limit_address_space, timeout=600)
    lines = [json.loads(line) for line in process.stdout.splitlines()]
    started = [line["started"] for line in lines if "started" in line]
    ended = f"the driver ended with {process.returncode} on {started[-1] if started else 'no file'}"
    assert process.returncode == 0, f"{ended}:\n{process.stderr[-3000:]}"  # negative: killed by a signal
    assert "Traceback" not in process.stderr, process.stderr[-3000:]
    return [line for line in lines if "code" in line]


def check(document: Document, record: dict[str, object]) -> None:
    """What every ending must be, and what this document's must be."""
    code, stderr = record["code"], str(record["stderr"])
    where = f"{record['file']}: exit {code}\n{stderr[-2000:]}{record['traceback']}"
    assert not record["traceback"] and "Traceback" not in stderr, where
    assert code in (0, 3, 7), where
    if document.expect is not None:
        assert code == document.expect, where
        assert document.says in stderr, where
    if code == 0:
        report = json.loads(str(record["stdout"]))
        if document.kind == "valid":
            assert report["mode"] == "facts" and report["quads"] == document.triples, (where, report)
        return
    lines = stderr.splitlines()
    errors = [line for line in lines if line.startswith("pcm: error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], where
    if code == 3:
        assert len(lines) == 1, where
    assert not record["changed"], f"{where}\nthe store changed: {record['quads_before']} → {record['quads_after']}"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return init_template(tmp_path_factory)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("import-properties")


@pytest.fixture(scope="module")
def namespace(template: Path) -> str:
    return Manifest.load(template).namespace


@contextmanager
def fresh(template: Path, scratch: Path) -> Iterator[Path]:
    """A copy of the template memory for one example, removed after it."""
    target = scratch / "memory"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(template, target)
    try:
        yield target
    finally:
        shutil.rmtree(target, ignore_errors=True)


def import_and_check(template: Path, scratch: Path, documents: list[Document]) -> None:
    """Every document through one driver process, against a fresh copy of the template memory."""
    folder = scratch / "documents"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    paths = []
    for index, document in enumerate(documents):
        paths.append(folder / document.named(index))
        paths[-1].write_bytes(document.data)
    with fresh(template, scratch) as memory:
        records = import_all(memory, paths)
    assert [r["file"] for r in records] == [p.name for p in paths]
    for document, record in zip(documents, records, strict=True):
        check(document, record)


@pytest.mark.slow
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                                 HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_an_import_succeeds_or_is_refused_in_one_line_and_changes_nothing(
    template: Path, scratch: Path, namespace: str, data: st.DataObject
) -> None:
    import_and_check(template, scratch, data.draw(batch(namespace)))


@pytest.mark.slow
def test_documents_nested_thousands_of_levels_deep_end_like_any_other(template: Path, scratch: Path,
                                                                     namespace: str) -> None:
    """The deepest the generator goes, every time: 5,000 levels of JSON-LD objects (100 kB) crashed ``pcm import``
    with SIGSEGV before the nesting limit; Turtle, TriG and N-Quads take it (and SHACL refuses the foreign terms)."""
    documents = [Document("nested", fmt, build(namespace, 5000).encode("utf-8")) for fmt, build in NESTINGS.items()]
    documents.append(Document("nested-lists", "jsonld", json_lists(namespace, 5000).encode("utf-8")))
    documents = [replace(d, expect=3, says="levels deep") if d.fmt in COUNTED else d for d in documents]
    import_and_check(template, scratch, documents)


# -- the nesting limit, at its edge -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("fmt", "build", "counted"), [
    ("jsonld", NESTINGS["jsonld"], COUNTED["jsonld"]),
    ("jsonld", json_lists, lambda d: 2 * d + 1),
    ("rdfxml", NESTINGS["rdfxml"], COUNTED["rdfxml"]),
])
def test_nesting_is_refused_just_past_the_limit(fmt: str, build: Callable[[str, int], str],
                                                counted: Callable[[int], int]) -> None:
    deepest = max(d for d in range(1, MAX_NESTING) if counted(d) <= MAX_NESTING)
    parse = OX_FORMATS[fmt]
    assert list(checked_triples(build(EX, deepest).encode(), parse, RdfLimits(), base_iri=None, name="at"))
    with pytest.raises(InputError, match=f"more than {MAX_NESTING} levels deep"):
        checked_triples(build(EX, deepest + 1).encode(), parse, RdfLimits(), base_iri=None, name="past")


def test_brackets_in_json_strings_nest_nothing() -> None:
    value = json.dumps('[{"' * 1000 + '\\" ]]')
    document = f'{{"@id": "{EX}s", "{EX}p": {value}}}'.encode()
    [triple] = checked_triples(document, ox.RdfFormat.JSON_LD, RdfLimits(), base_iri=None, name="strings")
    assert triple.object == ox.Literal(json.loads(value))


@pytest.mark.slow
def test_the_graph_store_refuses_deep_nesting_before_the_engine(template: Path, scratch: Path) -> None:
    """The front reads a Graph Store body under the same limits, in its own process: 5,000 levels of JSON-LD would
    have crashed ``pcm serve`` itself, not the engine."""
    with fresh(template, scratch) as memory, serving(Settings(memory=memory, index_enabled=False)) as server:
        for fmt, media in (("jsonld", "application/ld+json"), ("rdfxml", "application/rdf+xml")):
            answer = httpx.put(server.url + "/store", params={"graph": EX + fmt}, timeout=60,
                               content=NESTINGS[fmt](EX, 5000).encode(), headers={**AUTH, "Content-Type": media})
            assert answer.status_code == 400 and "levels deep" in answer.text, answer.text
        assert ask(server.url, "ASK {}")  # the front and the engine are alive

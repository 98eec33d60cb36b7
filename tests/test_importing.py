"""Restoring large dumps (pcm.importing): bulk loaded as they are or rewritten into this memory's names, checked as
a stream, and a refused file leaves nothing behind (the store as it was, no checkpoint or spool left).

The size from which a file takes the bulk path is made small here, so that small files exercise it."""

from __future__ import annotations

import threading
from pathlib import Path

import pyoxigraph as ox
import pytest

from pcm import importing
from pcm import memory as memory_module
from pcm.errors import InputError, InputTooLarge, ValidationError
from pcm.memory import Memory
from pcm.namespaces import PCM, PROV, RDFS, SCHEMA, SIOC
from pcm.rdflimits import RdfLimits
from pcm.settings import Settings
from tests.test_store import _canonical, conv

RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"


@pytest.fixture(autouse=True)
def bulk_from_any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importing, "BULK_BYTES", 0)
    monkeypatch.setattr(importing, "CHECK_CHUNK_BYTES", 1024)  # the checks of a small file in many chunks


def own_dump(memory: Memory, path: Path, posts: int, *, extra: str = "") -> Path:
    """A dump in ``memory``'s own graph names and namespace (no ontology graph): loaded as it is."""
    ns, layout = memory.manifest.namespace, memory.naming.layout
    conversation, provenance = f"<{layout.conversation}>", f"<{layout.provenance}>"
    lines = [f"<{ns}owner> <{RDF_TYPE}> <{PCM}MemoryOwner> {conversation} ."]
    for n in range(posts):
        post, graph, person = f"<{ns}post/p{n}>", f"<{layout.extraction(f'p{n}')}>", f"<{ns}person-{n}>"
        lines += [
            f"{post} <{RDF_TYPE}> <{SIOC}Post> {conversation} .",
            f'{post} <{SIOC}content> "utterance {n}" {conversation} .',
            f"{graph} <{PROV}wasDerivedFrom> {post} {provenance} .",
            f"{person} <{RDF_TYPE}> <{SCHEMA}Person> {graph} .",
            f'{person} <{RDFS}label> "Person {n}" {graph} .',
        ]
    path.write_text("\n".join(lines) + "\n" + extra)
    return path


def state(memory: Memory) -> set[str]:
    return _canonical(memory.export("nquads").decode())


def nothing_left(memory: Memory, before: set[str]) -> None:
    assert state(memory) == before
    assert not (memory.settings.memory / importing.UNDO_DIR).exists()
    assert not (memory.settings.memory / importing.SPOOL).exists()


def test_a_dump_in_the_memorys_own_names_is_loaded_as_it_is(
    memory: Memory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_rewriting(*args: object, **kwargs: object) -> None:
        raise AssertionError("a dump in the memory's own names needs no rewriting")

    monkeypatch.setattr(importing.BulkRestore, "_rewrite_and_load", no_rewriting)
    report = memory.import_rdf(own_dump(memory, tmp_path / "own.nq", 50))
    assert (report.mode, report.quads) == ("restore", 251)
    assert memory.naming.layout.extraction("p49") in report.graphs
    assert memory.store.select(f"SELECT ?p WHERE {{ ?p a <{SIOC}Post> }}").rows.__len__() == 50
    assert not (memory.settings.memory / importing.UNDO_DIR).exists()


def test_export_then_bulk_import_gives_an_isomorphic_dataset(memory: Memory, tmp_path: Path) -> None:
    memory.ingest([conv("s1", ("user", "I bought a Trek bike for $600."), ("assistant", "Nice."))])
    for fmt, ext in (("trig", "trig"), ("nquads", "nq")):
        path = tmp_path / f"dump.{ext}"
        path.write_bytes(memory.export(fmt))
        with Memory.init(Settings(memory=tmp_path / f"other-{fmt}", index_enabled=False),
                         owner="Dana Whitfield") as other:
            report = other.import_rdf(path)
            assert report.mode == "restore"
            restored = other.export("nquads").decode().replace(other.manifest.namespace, memory.manifest.namespace)
            assert not (other.settings.memory / importing.SPOOL).exists()
        assert _canonical(restored) == _canonical(memory.export("nquads").decode()), fmt


def test_another_memorys_owner_found_late_is_rehomed(memory: Memory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The head of the file looks like this memory's own: the load is undone and the dump rewritten."""
    monkeypatch.setattr(importing, "HEAD_QUADS", 5)
    ns, other = memory.manifest.namespace, "https://pcm.invalid/m/elsewhere/"
    path = own_dump(memory, tmp_path / "late.nq", 20)
    text = path.read_text().replace(ns, other)
    owner = f"<{other}owner> <{RDF_TYPE}> <{PCM}MemoryOwner> <{memory.naming.layout.conversation}> .\n"
    body = [line for line in text.splitlines(keepends=True) if "MemoryOwner" not in line]
    path.write_text("".join(body) + owner)
    memory.import_rdf(path)
    found = memory.store.select(f"SELECT ?p WHERE {{ ?p a <{SIOC}Post> }}")
    assert sorted(r["p"].value for r in found.dicts()) == sorted(f"{ns}post/p{n}" for n in range(20))
    assert not memory.store.select(f"SELECT ?s WHERE {{ GRAPH ?g {{ ?s ?p ?o }} FILTER(STRSTARTS(STR(?s), '{other}')) }}").rows


@pytest.mark.parametrize(
    ("case", "extra", "error", "words"),
    [
        ("unknown term", "<{ns}x> <https://example.org/unknownProperty> \"1\" <{conversation}> .\n", ValidationError,
         "problem(s), nothing imported; first: unknown property https://example.org/unknownProperty"),
        ("syntax", "<{ns}x> <{label}> \"unclosed <{conversation}> .\n", InputError, "not valid nquads"),
        ("default graph", "<{ns}x> <{label}> \"in the default graph\" .\n", InputError, "no default-graph triples"),
        ("literal", "<{ns}x> <{label}> \"" + "y" * 300 + "\" <{conversation}> .\n", InputTooLarge,
         "PCM_MAX_LITERAL_CHARS"),
    ],
)
def test_a_refused_dump_leaves_nothing_behind(
    case: str, extra: str, error: type[Exception], words: str, tmp_path: Path
) -> None:
    settings = Settings(memory=tmp_path / "memory", index_enabled=False, max_literal_chars=200)
    with Memory.init(settings, owner="Dana Whitfield") as memory:
        memory.ingest([conv("s1", ("user", "hello"))])
        before = state(memory)
        filled = extra.format(ns=memory.manifest.namespace, conversation=memory.naming.layout.conversation,
                              label=RDFS + "label")
        path = own_dump(memory, tmp_path / "bad.nq", 200, extra=filled)
        with pytest.raises(error) as refused:
            memory.import_rdf(path)
        assert words in str(refused.value) and "\n" not in str(refused.value), case
        nothing_left(memory, before)
    with Memory.open(settings) as again:  # and the store reopens as it was
        assert state(again) == before


def test_an_iri_only_the_loader_validates_is_refused_in_one_line(
    memory: Memory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the head, the checks read the file leniently (no IRI validation, half the parse): the loader beside
    them refuses the bad IRI, and its error is worded like theirs."""
    monkeypatch.setattr(importing, "HEAD_QUADS", 5)
    memory.ingest([conv("s1", ("user", "hello"))])
    before = state(memory)
    ns, conversation = memory.manifest.namespace, memory.naming.layout.conversation
    path = own_dump(memory, tmp_path / "iri.nq", 30, extra=f"<{ns}x> <{RDFS}label> <{ns}100%zz> <{conversation}> .\n")
    with pytest.raises(InputError, match=r"^iri\.nq: not valid nquads: .*percent encoding") as refused:
        memory.import_rdf(path)
    assert "\n" not in str(refused.value)
    nothing_left(memory, before)


def test_a_refused_dump_of_another_memory_leaves_nothing_behind(memory: Memory, tmp_path: Path) -> None:
    memory.ingest([conv("s1", ("user", "hello"))])
    before = state(memory)
    path = own_dump(memory, tmp_path / "other.nq", 30,
                    extra=f"<{memory.manifest.namespace}x> <https://example.org/nope> \"1\" "
                          f"<{memory.naming.layout.conversation}> .\n")
    path.write_text(path.read_text().replace(memory.manifest.namespace, "https://pcm.invalid/m/elsewhere/"))
    with pytest.raises(ValidationError, match="unknown property https://example.org/nope"):
        memory.import_rdf(path)
    nothing_left(memory, before)


def test_a_failed_bulk_load_is_undone(memory: Memory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The loader stopping half way (a full disk, say) leaves the store as the checkpoint holds it."""
    before = state(memory)
    load = memory.backend.bulk_load

    def half_then_fail(path: str, fmt: ox.RdfFormat, *, graph: str | None = None) -> None:
        load(path, fmt, graph=graph)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(memory.backend, "bulk_load", half_then_fail)
    with pytest.raises(OSError, match="No space left"):
        memory.import_rdf(own_dump(memory, tmp_path / "own.nq", 30))
    nothing_left(memory, before)


def test_a_refused_large_staged_dump_leaves_nothing_behind(
    memory: Memory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where no checkpoint can be taken the dump is staged; one over BULK_THRESHOLD that is refused writes nothing."""
    monkeypatch.setattr(importing, "BULK_BYTES", 1 << 40)
    monkeypatch.setattr(memory_module, "BULK_THRESHOLD", 10)
    before = state(memory)
    path = own_dump(memory, tmp_path / "bad.nq", 30,
                    extra=f"<{memory.manifest.namespace}x> <https://example.org/nope> \"1\" "
                          f"<{memory.naming.layout.conversation}> .\n")
    with pytest.raises(ValidationError, match="nothing imported"):
        memory.import_rdf(path)
    nothing_left(memory, before)
    report = memory.import_rdf(own_dump(memory, tmp_path / "good.nq", 30))
    assert report.quads == 151


def test_the_chunks_survey_a_file_as_one_reading_does(memory: Memory, tmp_path: Path) -> None:
    """Chunk edges fall after whole lines wherever the size points, and the merged survey is the file's."""
    path = own_dump(memory, tmp_path / "own.nq", 40)
    text = path.read_text()
    path.write_text(text + f"<{memory.manifest.namespace}late> <{RDF_TYPE}> <{PCM}MemoryOwner> "
                           f"<{memory.naming.layout.conversation}> .")  # the last line has no newline
    layout, limits = memory.naming.layout, RdfLimits()
    whole = importing.Survey(layout, limits, "own.nq")
    for _ in whole.see(ox.parse(path=str(path), format=ox.RdfFormat.N_QUADS)):
        pass
    data = path.read_bytes()
    for size in (1, 97, 1024, len(data) - 1, len(data), 10 * len(data)):
        spans = importing.line_chunks(path, size)
        assert b"".join(data[a:b] for a, b in spans) == data
        assert all(data[b - 1 : b] == b"\n" for _, b in spans[:-1])
        restore = importing.BulkRestore(memory.backend, layout, memory.manifest.namespace, memory.ontology,
                                        tmp_path, limits, lambda: None)
        merged = importing.Survey.merged(layout, limits, "own.nq",
                                         [restore._check_chunk(path, span, threading.Event()) for span in spans])
        assert (merged.quads, merged.predicates, merged.classes, merged.graphs, merged.owners) == (
            whole.quads, whole.predicates, whole.classes, whole.graphs, whole.owners), size


def test_a_triple_limit_passed_only_by_the_chunks_together_refuses_the_file(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importing, "HEAD_QUADS", 5)
    settings = Settings(memory=tmp_path / "memory", index_enabled=False, max_rdf_triples=200)
    with Memory.init(settings, owner="Dana Whitfield") as memory:
        before = state(memory)
        path = own_dump(memory, tmp_path / "many.nq", 50)  # 251 quads, about 5 to a chunk
        with pytest.raises(InputTooLarge, match="more than 200 triples"):
            memory.import_rdf(path)
        nothing_left(memory, before)


def test_the_importing_thread_checks_every_chunk_when_the_worker_never_runs(
    memory: Memory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a machine busy with other work a thread at idle priority may not run at all: the import does not wait."""
    monkeypatch.setattr(importing.IdleShare, "start", lambda self: None)
    report = memory.import_rdf(own_dump(memory, tmp_path / "own.nq", 50))
    assert (report.mode, report.quads) == ("restore", 251)
    before = state(memory)
    bad = own_dump(memory, tmp_path / "bad.nq", 50, extra=f"<{memory.manifest.namespace}x> <https://example.org/nope> "
                                                         f"\"1\" <{memory.naming.layout.conversation}> .\n")
    with pytest.raises(ValidationError, match="unknown property https://example.org/nope"):
        memory.import_rdf(bad)
    nothing_left(memory, before)

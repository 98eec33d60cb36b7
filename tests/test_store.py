"""The dataset layout, provenance, forgetting, atomic writes, import/export over the embedded store."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyoxigraph as ox
import pytest

from pcm.conversations import Conversation, Utterance
from pcm.errors import InputError, MemoryLockedError, MemoryVersionError, ValidationError
from pcm.layout import LEGACY_LAYOUT
from pcm.manifest import Manifest
from pcm.memory import Memory
from pcm.namespaces import PCM, PROV, RDFS, SCHEMA, SIOC
from pcm.settings import Settings


def conv(cid: str, *texts: tuple[str, str], day: int = 2) -> Conversation:
    return Conversation(
        id=cid,
        utterances=[
            Utterance(cid, i, role, text, timestamp=datetime(2025, 3, day, 10, i), source_id=f"{cid}:{i}")
            for i, (role, text) in enumerate(texts)
        ],
    )


def ask_bool(memory: Memory, q: str) -> bool:
    result = memory.backend.query(q)
    assert isinstance(result, bool)
    return result


def test_ingest_writes_posts_threads_and_pending_status(memory: Memory) -> None:
    report = memory.ingest([conv("s1", ("user", "I adopted a beagle called Biscuit."), ("assistant", "Lovely!"))])
    assert (report.added, report.skipped) == (2, 0)
    posts = list(memory.store.posts())
    assert [p.text for p in sorted(posts, key=lambda p: p.position)] == ["I adopted a beagle called Biscuit.", "Lovely!"]
    first, second = sorted(posts, key=lambda p: p.position)
    assert first.role == "user" and second.role == "assistant"
    # a time given without a zone is stored in the memory's zone (UTC by default)
    assert first.source_id == "s1:0" and first.time == datetime(2025, 3, 2, 10, 0, tzinfo=UTC)
    # user turns are attributed to the owner, assistant turns to the assistant; order is kept by previous_by_date
    assert ask_bool(memory, f"ASK {{ GRAPH <{LEGACY_LAYOUT.conversation}> {{ <{first.iri}> <{PROV}wasAttributedTo> <{memory.naming.owner}> }} }}")
    assert ask_bool(memory, f"ASK {{ GRAPH <{LEGACY_LAYOUT.conversation}> {{ <{second.iri}> <{PROV}wasAttributedTo> <{memory.naming.assistant}> ; <{SIOC}previous_by_date> <{first.iri}> }} }}")
    assert ask_bool(memory, f"ASK {{ GRAPH <{LEGACY_LAYOUT.provenance}> {{ <{first.iri}> <{PCM}extractionStatus> \"pending\" }} }}")
    assert memory.stats().posts == 2 and memory.stats().sessions == 1


def test_reingesting_the_same_conversation_adds_nothing(memory: Memory) -> None:
    c = conv("s1", ("user", "hello"), ("assistant", "hi"))
    memory.ingest([c])
    before = len(list(memory.backend.quads()))
    report = memory.ingest([c])
    assert (report.added, report.skipped) == (0, 2)
    assert len(list(memory.backend.quads())) == before


def test_continuing_a_session_links_to_its_last_post(memory: Memory) -> None:
    memory.ingest([conv("s1", ("user", "one"))])
    later = Conversation("s1", [Utterance("s1", 1, "user", "two", source_id="s1:1")])
    memory.ingest([later])
    posts = sorted(memory.store.posts(), key=lambda p: p.position)
    assert ask_bool(memory, f"ASK {{ <{posts[1].iri}> <{SIOC}previous_by_date> <{posts[0].iri}> }}")
    assert memory.stats().sessions == 1


FACTS = """
@prefix schema: <https://schema.org/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix pcm: <https://w3id.org/pcm/ontology#> .
@prefix m: <{ns}> .
m:biscuit a pcm:Pet ; rdfs:label "Biscuit" ; pcm:petSpecies "beagle" .
m:owner pcm:hasPet m:biscuit .
"""


def test_import_validates_and_records_the_file_as_source(memory: Memory, tmp_path: Path) -> None:
    memory.ingest([conv("s1", ("user", "unrelated"), ("assistant", "also unrelated"))])
    f = tmp_path / "pets.ttl"
    f.write_text(FACTS.format(ns=memory.manifest.namespace))
    report = memory.import_rdf(f)
    assert report.mode == "facts" and report.quads == 4
    sources = memory.why("m:biscuit")
    assert [s.file for s in sources] == ["pets.ttl"]
    # importing the same file again replaces its graph instead of duplicating it
    memory.import_rdf(f)
    assert memory.stats().graphs["import"]["graphs"] == 1


def test_import_refuses_unknown_terms_and_writes_nothing(memory: Memory, tmp_path: Path) -> None:
    f = tmp_path / "bad.ttl"
    f.write_text(FACTS.format(ns=memory.manifest.namespace).replace("pcm:petSpecies", "pcm:petFavouriteColour"))
    before = len(list(memory.backend.quads()))
    with pytest.raises(ValidationError) as err:
        memory.import_rdf(f)
    assert "petFavouriteColour" in (str(err.value) + err.value.report)
    assert len(list(memory.backend.quads())) == before


def test_malformed_turtle_is_one_clear_error(memory: Memory, tmp_path: Path) -> None:
    f = tmp_path / "broken.ttl"
    f.write_text("@prefix s: <https://schema.org/> .\n<a> s:name \"unterminated .\n")
    with pytest.raises(InputError) as err:
        memory.import_rdf(f)
    assert "broken.ttl" in str(err.value) and "\n" not in str(err.value)


def test_failed_write_leaves_nothing_behind(memory: Memory) -> None:
    before = sorted(map(str, memory.backend.quads()))
    good = ox.Quad(ox.NamedNode("urn:x:a"), ox.NamedNode("urn:x:p"), ox.Literal("v"), ox.NamedNode(LEGACY_LAYOUT.conversation))

    class Boom(Exception):
        pass

    def quads():  # a write that fails half way through producing its quads
        yield good
        raise Boom

    with pytest.raises(Boom):
        memory.backend.extend(quads())  # type: ignore[arg-type]
    assert sorted(map(str, memory.backend.quads())) == before


def test_forget_keeps_facts_supported_by_another_utterance(memory: Memory) -> None:
    memory.ingest([conv("s1", ("user", "My dog is Biscuit."), ("user", "Biscuit is a beagle."))])
    p1, p2 = (p.iri for p in sorted(memory.store.posts(), key=lambda p: p.position))
    biscuit = ox.NamedNode(memory.naming.namespace + "biscuit")
    label = ox.Quad(biscuit, ox.NamedNode(RDFS + "label"), ox.Literal("Biscuit"))
    for post in (p1, p2):  # the same fact, said twice, lives in two extraction graphs
        g = ox.NamedNode(memory.naming.extraction_graph(post))
        memory.store.write([
            ox.Quad(biscuit, ox.NamedNode(RDFS + "label"), ox.Literal("Biscuit"), g),
            ox.Quad(biscuit, ox.NamedNode(PROV + "wasDerivedFrom"), ox.NamedNode(post), g),
            ox.Quad(g, ox.NamedNode(PROV + "wasDerivedFrom"), ox.NamedNode(post), ox.NamedNode(LEGACY_LAYOUT.provenance)),
        ])
    assert {s.post for s in memory.why(biscuit.value)} == {p1, p2}
    forgotten = memory.forget(post="s1:0")
    assert forgotten == [p1]
    assert ask_bool(memory, f"ASK {{ {label.subject} {label.predicate} {label.object} }}")
    assert {s.post for s in memory.why(biscuit.value)} == {p2}
    assert not ask_bool(memory, f"ASK {{ <{p1}> ?p ?o }}") and not ask_bool(memory, f"ASK {{ ?s ?p <{p1}> }}")
    memory.forget(post="s1:1")
    assert not ask_bool(memory, f"ASK {{ {label.subject} {label.predicate} {label.object} }}")


def test_forget_session_removes_all_its_posts(memory: Memory) -> None:
    memory.ingest([conv("s1", ("user", "a"), ("user", "b")), conv("s2", ("user", "c"))])
    assert len(memory.forget(session="s1")) == 2
    assert [p.text for p in memory.store.posts()] == ["c"]
    assert memory.stats().sessions == 1
    with pytest.raises(InputError):
        memory.forget(session="nope")


def test_export_then_import_gives_an_isomorphic_dataset(memory: Memory, tmp_path: Path) -> None:
    memory.ingest([conv("s1", ("user", "I bought a Trek bike for $600."), ("assistant", "Nice."))])
    f = tmp_path / "pets.ttl"
    f.write_text(FACTS.format(ns=memory.manifest.namespace))
    memory.import_rdf(f)
    for fmt, ext in (("trig", "trig"), ("nquads", "nq"), ("jsonld", "jsonld")):
        dump = memory.export(fmt)
        path = tmp_path / f"dump.{ext}"
        path.write_bytes(dump)
        other_settings = Settings(memory=tmp_path / f"other-{fmt}", index_enabled=False)
        with Memory.init(other_settings, owner="Dana Whitfield") as other:
            other.import_rdf(path)
            # the restored memory re-homes individuals into its own namespace; map back and compare datasets
            restored = other.export("nquads").decode().replace(other.manifest.namespace, memory.manifest.namespace)
        original = memory.export("nquads").decode()
        assert _canonical(restored) == _canonical(original), fmt


def _canonical(nquads: str) -> set[str]:
    ds = ox.Dataset(ox.parse(nquads.encode(), format=ox.RdfFormat.N_QUADS))
    ds.canonicalize(ox.CanonicalizationAlgorithm.UNSTABLE)
    return {str(q) for q in ds}


def test_turtle_export_is_the_current_truth_without_the_ontology(memory: Memory) -> None:
    memory.ingest([conv("s1", ("user", "hello"))])
    text = memory.export("turtle").decode()
    assert "sioc:Post" in text and "owl:Ontology" not in text


def test_second_writer_is_refused_with_a_clear_error(memory: Memory, settings: Settings) -> None:
    import subprocess
    import sys

    code = (
        "import sys\nfrom pcm.memory import Memory\nfrom pcm.settings import Settings\nfrom pathlib import Path\n"
        "from pcm.errors import MemoryLockedError\n"
        f"try:\n    Memory.open(Settings(memory=Path({str(settings.memory)!r}), index_enabled=False))\n"
        "except MemoryLockedError as e:\n    print('LOCKED', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.startswith("LOCKED") and "locked by another process" in out.stdout
    assert MemoryLockedError.exit_code == 4


def test_memory_from_a_newer_pcm_is_refused(settings: Settings) -> None:
    Memory.init(settings).close()
    manifest = Manifest.load(settings.memory)
    manifest.schema_version = 99
    manifest.save(settings.memory)
    with pytest.raises(MemoryVersionError, match="newer"):
        Memory.open(settings)


def test_corrupt_manifest_is_refused(settings: Settings) -> None:
    Memory.init(settings).close()
    (settings.memory / "memory.toml").write_text("owner = [unclosed")
    with pytest.raises(InputError, match="corrupt"):
        Memory.open(settings)


def test_why_cites_each_source_with_session_and_time(memory: Memory) -> None:
    memory.ingest([conv("s1", ("user", "hello"))])
    post = next(memory.store.posts())
    [source] = memory.why(post.iri)
    assert (source.text, source.session, source.source_id) == ("hello", "s1", "s1:0")
    assert source.time is not None and source.time.isoformat().startswith("2025-03-02T10:00")


def test_sparql_is_read_only(memory: Memory) -> None:
    from pcm.errors import QueryError

    for q in ("INSERT DATA { <urn:a> <urn:b> <urn:c> }", "DROP ALL",
              "SELECT * WHERE { SERVICE <http://example.org/sparql> { ?s ?p ?o } }"):
        with pytest.raises(QueryError):
            memory.sparql(q)
    memory.ingest([conv("s1", ("user", "hello"))])
    result = memory.sparql(f"SELECT ?t WHERE {{ ?p a <{SIOC}Post> ; <{SIOC}content> ?t }}")
    assert [t.value for t in result.values("t")] == ["hello"]  # type: ignore[union-attr]
    # a variable called ?add or a string saying DELETE is not an update
    assert memory.sparql('SELECT ?add WHERE { BIND("DELETE everything" AS ?add) }').rows  # type: ignore[union-attr]


def test_schema_org_http_is_normalised_on_import(memory: Memory, tmp_path: Path) -> None:
    f = tmp_path / "http.ttl"
    f.write_text(FACTS.format(ns=memory.manifest.namespace).replace("https://schema.org/", "http://schema.org/")
                 + f"<{memory.manifest.namespace}biscuit> <http://schema.org/name> \"Biscuit\" .\n")
    memory.import_rdf(f)
    assert ask_bool(memory, f"ASK {{ ?s <{SCHEMA}name> \"Biscuit\" }}")


def test_ingest_with_an_llm_extracts_facts_that_cite_their_post(tmp_path: Path) -> None:
    import json

    from pcm.settings import LLMSpec

    script = tmp_path / "replies.json"
    settings = Settings(memory=tmp_path / "m", index_enabled=False, llm=LLMSpec("scripted", str(script)))
    with Memory.init(settings, owner="Dana Whitfield") as m:
        ns = m.manifest.namespace
    script.write_text(json.dumps([
        "```turtle\n@prefix pcm: <https://w3id.org/pcm/ontology#> .\n@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n"
        f"<{ns}biscuit> a pcm:Pet ; rdfs:label \"Biscuit\" ; pcm:petSpecies \"beagle\" .\n"
        f"<{ns}owner> pcm:hasPet <{ns}biscuit> .\n```"
    ]))
    with Memory.open(settings) as m:
        report = m.ingest([conv("s1", ("user", "I adopted a beagle called Biscuit."))])
        assert (report.added, report.extracted, report.failed) == (1, 1, 0)
        [source] = [s for s in m.why(f"{ns}biscuit") if s.post]
        assert source.text == "I adopted a beagle called Biscuit." and source.source_id == "s1:0"
        assert ask_bool(m, f'ASK {{ <{ns}biscuit> <{PCM}petSpecies> "beagle" }}')
        assert m.stats().status == {"extracted": 1}

"""`pcm ontology migrate`: re-validation, backup, atomic scripts, version bump, rollback, re-extraction."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyoxigraph as ox
import pytest
from click.testing import CliRunner

from pcm.cli_ontology import ontology as ontology_cli
from pcm.conversations import Conversation, Utterance
from pcm.errors import QueryError, UsageError, ValidationError
from pcm.layout import LEGACY_LAYOUT
from pcm.manifest import Manifest
from pcm.memory import Memory
from pcm.namespaces import PCM, PROV, RDF, RDFS
from pcm.ontology import Ontology
from pcm.ontology_tools.diff import load_version
from pcm.ontology_tools.migrate import (
    MigrationError,
    load_migrations,
    migrate,
    pending_migrations,
    plan_migrations,
)
from pcm.provenance import Activity, activity_quads
from pcm.settings import Settings
from tests.snippets import BREED

REPO = Path(__file__).resolve().parents[2]
N = ox.NamedNode
RENAME = """PREFIX pcm: <https://w3id.org/pcm/ontology#>
# pcm:petSpecies became pcm:species in 0.2.0
DELETE { GRAPH ?g { ?pet pcm:petSpecies ?s } }
INSERT { GRAPH ?g { ?pet pcm:species ?s } }
WHERE { GRAPH ?g { ?pet pcm:petSpecies ?s } FILTER(?g != <urn:pcm:graph:ontology>) } ;
"""


@pytest.fixture
def target(tmp_path: Path) -> Ontology:
    """Ontology 0.2.0: pcm:petSpecies renamed pcm:species, pcm:petBreed dropped (no script moves it)."""
    folder = tmp_path / "onto-0.2.0"
    folder.mkdir()
    for path in (REPO / "pcm_ontology").glob("*.ttl"):
        text = path.read_text(encoding="utf-8")
        if path.name == "pcm.ttl":
            text = text.replace('owl:versionInfo "0.1.0"', 'owl:versionInfo "0.2.0"').replace(BREED, "")
            text = text.replace("pcm:petSpecies a owl:DatatypeProperty", "pcm:species a owl:DatatypeProperty")
        (folder / path.name).write_text(text, encoding="utf-8")
    return load_version(folder)


@pytest.fixture
def scripts(tmp_path: Path) -> Path:
    folder = tmp_path / "migrations"
    folder.mkdir()
    (folder / "0.1.0-to-0.2.0.ru").write_text(RENAME, encoding="utf-8")
    return folder


@pytest.fixture
def filled(memory: Memory) -> tuple[Memory, list[str]]:
    return memory, fill(memory)


def fill(memory: Memory) -> list[str]:
    """Two posts with extracted facts: a pet with a species (moved by the script) and one with a breed (not)."""
    when = datetime(2024, 3, 2, 10, tzinfo=UTC)
    said = ["We adopted a dog called Rex.", "Luna is a beagle."]
    utterances = [Utterance("s1", i, "user", text, timestamp=when) for i, text in enumerate(said)]
    posts = memory.ingest([Conversation("s1", utterances)]).posts
    assert len(posts) == 2
    ns, owner = memory.manifest.namespace, N(memory.naming.owner)
    for post, (slug, name, predicate, value) in zip(
        posts, [("rex", "Rex", "petSpecies", "dog"), ("luna", "Luna", "petBreed", "beagle")], strict=True
    ):
        graph = memory.naming.extraction_graph(post)
        g, pet = N(graph), N(ns + slug)
        quads = [
            ox.Quad(owner, N(PCM + "hasPet"), pet, g),
            ox.Quad(pet, N(RDF + "type"), N(PCM + "Pet"), g),
            ox.Quad(pet, N(RDFS + "label"), ox.Literal(name), g),
            ox.Quad(pet, N(PCM + predicate), ox.Literal(value), g),
            ox.Quad(pet, N(PROV + "wasDerivedFrom"), N(post), g),
        ]
        quads += activity_quads(memory.naming, Activity("extraction", when, model="test"), graph, post)
        memory.store.write(quads)
    return posts


def data_quads(memory: Memory) -> set[ox.Quad]:
    return {q for q in memory.backend.quads() if q.graph_name != N(LEGACY_LAYOUT.ontology)}


def ask(memory: Memory, query: str) -> bool:
    return bool(memory.backend.query(f"PREFIX pcm: <{PCM}> ASK {{ {query} }}"))


def test_dry_run_lists_scripts_and_violations_and_writes_nothing(
    filled: tuple[Memory, list[str]], target: Ontology, scripts: Path
) -> None:
    memory, posts = filled
    before = data_quads(memory)
    report = migrate(memory.context, ontology=target, migrations=scripts, dry_run=True)
    assert report.scripts == ["0.1.0-to-0.2.0.ru"] and not report.applied and report.backup is None
    assert report.before is not None and report.before.graphs_checked == 2
    assert report.before.rules["unknown-term"].count == 2  # petSpecies and petBreed are not in 0.2.0
    assert report.reextract == sorted(posts)
    assert data_quads(memory) == before
    assert memory.manifest.ontology_version == "0.1.0"
    assert not (memory.settings.memory / "backups").exists()


def test_migrate_moves_the_data_keeps_a_backup_and_bumps_the_version(
    filled: tuple[Memory, list[str]], target: Ontology, scripts: Path
) -> None:
    memory, posts = filled
    memory.store.clear_index_pending()
    report = migrate(memory.context, ontology=target, migrations=scripts, reextract=True, allow_violations=True)
    assert report.applied
    assert memory.store.index_pending()  # the side index is reconciled on the next open
    assert ask(memory, "?pet pcm:species 'dog'") and not ask(memory, "?pet pcm:petSpecies ?s")
    assert memory.manifest.ontology_version == "0.2.0"
    assert Manifest.load(memory.settings.memory).ontology_version == "0.2.0"
    assert memory.store.ontology_version() == "0.2.0"
    assert ask(memory, f"GRAPH <{LEGACY_LAYOUT.provenance}> {{ ?a a <{PROV}Activity> ; pcm:ontologyVersion '0.2.0' }}")
    # the backup is a complete, openable copy of the memory as it was
    assert report.backup is not None and (report.backup / "memory.toml").is_file()
    saved = ox.Store.read_only(str(report.backup / "oxigraph"))
    assert next(iter(saved.quads_for_pattern(None, N(PCM + "petSpecies"), None, None)), None) is not None
    assert b'ontology_version = "0.1.0"' in (report.backup / "memory.toml").read_bytes()
    # what still breaks a rule is Luna's breed: that post, and only it, is marked for re-extraction
    assert report.after is not None and report.after.violations == 1
    assert report.reextract == [posts[1]] and report.marked_pending == 1
    assert ask(memory, f"GRAPH <{LEGACY_LAYOUT.provenance}> {{ <{posts[1]}> pcm:extractionStatus 'pending' }}")
    assert "marked 1 post(s) pending" in report.text()
    assert "broken facts kept (--allow-violations):" in report.text() and "petBreed" in report.text()


def test_a_failing_script_rolls_everything_back(
    filled: tuple[Memory, list[str]], target: Ontology, scripts: Path
) -> None:
    memory, _ = filled
    (scripts / "0.1.0-to-0.2.0.z-fails.ru").write_text("CREATE GRAPH <urn:pcm:graph:conversation>", encoding="utf-8")
    before, ontology_before = data_quads(memory), memory.store.ontology_version()
    with pytest.raises(MigrationError, match="rolled back") as caught:
        migrate(memory.context, ontology=target, migrations=scripts)
    assert "\n" not in str(caught.value)
    assert isinstance(caught.value.__cause__, QueryError)  # the store's refusal, in our words
    assert data_quads(memory) == before
    assert memory.store.ontology_version() == ontology_before == "0.1.0"
    assert Manifest.load(memory.settings.memory).ontology_version == "0.1.0"
    assert len(list((memory.settings.memory / "backups").iterdir())) == 1  # the backup is kept


def test_a_failure_that_is_not_the_updates_is_rolled_back_and_goes_on_unchanged(
    filled: tuple[Memory, list[str]], target: Ontology, scripts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory, _ = filled
    before = data_quads(memory)

    def broken_save(directory: Path) -> None:
        raise TypeError("a bug after the update")

    monkeypatch.setattr(memory.manifest, "save", broken_save)
    with pytest.raises(TypeError, match="a bug after the update"):
        migrate(memory.context, ontology=target, migrations=scripts)
    assert data_quads(memory) == before  # the update had run: this is the restored backup
    assert memory.store.ontology_version() == "0.1.0"


def test_a_migration_leaving_violations_is_rolled_back_listing_each_broken_fact(
    filled: tuple[Memory, list[str]], target: Ontology, scripts: Path, tmp_path: Path
) -> None:
    memory, posts = filled
    dump = tmp_path / "pets.ttl"
    dump.write_text(f"@prefix pcm: <{PCM}> .\n@prefix m: <{memory.manifest.namespace}> .\n"
                    "m:bella a pcm:Pet ; <http://www.w3.org/2000/01/rdf-schema#label> \"Bella\" ; pcm:petBreed \"collie\" .\n"
                    "<" + memory.naming.owner + "> pcm:hasPet m:bella .\n", encoding="utf-8")
    imported = memory.import_rdf(dump).graphs[0]
    before = data_quads(memory)
    with pytest.raises(ValidationError, match="rolled back") as caught:
        migrate(memory.context, ontology=target, migrations=scripts)
    message = str(caught.value)
    assert "2 violation(s) would remain" in message and "1 in imported facts" in message
    assert "--allow-violations" in message and "\n" not in message
    lines = caught.value.report.splitlines()
    luna = next(line for line in lines if "/luna>" in line)
    bella = next(line for line in lines if "/bella>" in line)
    assert "[unknown-term]" in luna and f"re-extractable from {posts[1]}" in luna
    assert "cannot be re-extracted (imported, no post)" in bella and imported in bella
    assert data_quads(memory) == before  # the update had succeeded: this is the restored backup
    assert memory.store.ontology_version() == "0.1.0"
    assert memory.manifest.ontology_version == "0.1.0"


def test_a_script_that_does_not_parse_is_refused_before_any_backup(
    filled: tuple[Memory, list[str]], target: Ontology, scripts: Path
) -> None:
    memory, _ = filled
    (scripts / "0.1.0-to-0.2.0.ru").write_text("DELET WHERE { ?s ?p ?o }", encoding="utf-8")
    with pytest.raises(UsageError, match="does not parse"):
        migrate(memory.context, ontology=target, migrations=scripts)
    assert not (memory.settings.memory / "backups").exists()


def test_an_up_to_date_memory_is_only_validated(memory: Memory) -> None:
    report = migrate(memory.context)
    assert report.scripts == [] and not report.applied and report.backup is None
    assert report.before is not None and report.before.violations == 0


def test_scripts_are_planned_in_version_order(tmp_path: Path) -> None:
    for name in ("0.2.0-to-0.3.0.ru", "0.1.0-to-0.2.0.b.ru", "0.1.0-to-0.2.0.a.ru", "0.3.0-to-1.0.0.ru"):
        (tmp_path / name).write_text("CLEAR SILENT GRAPH <urn:x>", encoding="utf-8")
    found = load_migrations(tmp_path)
    assert [m.name for m in plan_migrations("0.1.0", "0.3.0", found)] == [
        "0.1.0-to-0.2.0.a.ru", "0.1.0-to-0.2.0.b.ru", "0.2.0-to-0.3.0.ru"
    ]
    assert [m.name for m in pending_migrations("0.2.0", "1.0.0", tmp_path)] == ["0.2.0-to-0.3.0.ru", "0.3.0-to-1.0.0.ru"]
    assert pending_migrations("1.0.0", "1.0.0", tmp_path) == []
    (tmp_path / "0.1.0-to-0.3.0.ru").write_text("CLEAR SILENT GRAPH <urn:x>", encoding="utf-8")
    with pytest.raises(UsageError, match="overlap"):
        plan_migrations("0.1.0", "1.0.0", load_migrations(tmp_path))
    (tmp_path / "rename-things.ru").write_text("", encoding="utf-8")
    with pytest.raises(UsageError, match="name it"):
        load_migrations(tmp_path)


def test_the_shipped_migrations_folder_is_valid() -> None:
    assert all(m.path.suffix == ".ru" for m in load_migrations())


def test_cli_migrate_dry_run_and_run(settings: Settings, target: Ontology, scripts: Path, tmp_path: Path) -> None:
    with Memory.init(settings, owner="Dana Whitfield") as memory:
        fill(memory)
    runner = CliRunner()
    base = ["--memory", str(settings.memory), "--ontology", str(tmp_path / "onto-0.2.0"), "--migrations", str(scripts)]
    dry = runner.invoke(ontology_cli, ["migrate", "--dry-run", *base], env={"PCM_INDEX": "off"})
    assert dry.exit_code == 0, dry.output
    assert "(dry run: nothing written)" in dry.output and "unknown-term: 2" in dry.output
    refused = runner.invoke(ontology_cli, ["migrate", *base], env={"PCM_INDEX": "off"})
    assert refused.exit_code == ValidationError.exit_code == 7, refused.output
    assert "re-extractable from" in refused.stderr and "--allow-violations" in refused.stderr.splitlines()[-1]
    assert Manifest.load(settings.memory).ontology_version == "0.1.0"
    done = runner.invoke(ontology_cli, ["migrate", *base, "--json", "--allow-violations"], env={"PCM_INDEX": "off"})
    assert done.exit_code == 0, done.output
    assert '"applied": true' in done.output and '"from_version": "0.1.0"' in done.output
    assert Manifest.load(settings.memory).ontology_version == "0.2.0"


def test_a_script_syntax_error_names_the_file_line_and_column(
    filled: tuple[Memory, list[str]], target: Ontology, scripts: Path
) -> None:
    memory, _ = filled
    (scripts / "0.1.0-to-0.2.0.b-typo.ru").write_text(
        "PREFIX pcm: <https://w3id.org/pcm/ontology#>\n# a second step\n\nDELETE { ?s pcm:x ?o }\nWHER { ?s pcm:x ?o }\n",
        encoding="utf-8",
    )
    with pytest.raises(UsageError) as caught:
        migrate(memory.context, ontology=target, migrations=scripts)
    message = str(caught.value)
    assert message.startswith(f"{scripts / '0.1.0-to-0.2.0.b-typo.ru'}:5:"), message
    assert "migration script 0.1.0-to-0.2.0.b-typo.ru does not parse" in message and "\n" not in message
    assert not (memory.settings.memory / "backups").exists()

"""A memory whose ontology differs from this pcm's (by version or by content) is read-only until
`pcm ontology migrate`: nothing else replaces its ontology graph or bumps memory.toml, reads work and say so."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from pcm import resources
from pcm.cli import main
from pcm.errors import MemoryVersionError, OntologyMigrationNeeded
from pcm.layout import LEGACY_LAYOUT
from pcm.manifest import Manifest
from pcm.memory import Memory
from pcm.namespaces import PCM
from pcm.ontology import load_ontology, ontology_digest
from pcm.settings import Settings
from tests.ontology_tools.test_ontology_tools_migrate import RENAME, fill

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "pcm_ontology"
HOBBY = """
pcm:Hobby a owl:Class ;
    rdfs:label "hobby" ;
    rdfs:comment "Something done for pleasure in one's free time." ;
    rdfs:subClassOf schema:Thing ;
    pcm:area "activities" .
"""
ENV = {"PCM_INDEX": "off", "PCM_LLM": "none", "PCM_SUMMARIES": "off"}


def code_ontology(folder: Path, *, version: str = "0.1.0", rename: bool = False, extra: str = "") -> Path:
    """A copy of the shipped ontology as another pcm release would ship it, with an empty migrations folder."""
    folder.mkdir()
    (folder / "migrations").mkdir()
    for path in SHIPPED.glob("*.ttl"):
        text = path.read_text(encoding="utf-8")
        if path.name == "pcm.ttl":
            text = text.replace('owl:versionInfo "0.1.0"', f'owl:versionInfo "{version}"') + extra
            if rename:
                text = text.replace("pcm:petSpecies a owl:DatatypeProperty", "pcm:species a owl:DatatypeProperty")
        (folder / path.name).write_text(text, encoding="utf-8")
    return folder


@pytest.fixture
def ship(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Make this process's pcm ship the ontology (and migrations) in a given folder, as an upgrade would."""

    def use(folder: Path) -> None:
        monkeypatch.setattr(resources, "ontology_dir", lambda: folder)

    return use


def manifest_data(memory_dir: Path) -> dict[str, object]:
    return tomllib.loads((memory_dir / "memory.toml").read_text(encoding="utf-8"))


def stored_has(memory_dir: Path, pattern: str) -> bool:
    with Memory.open(Settings(memory=memory_dir, index_enabled=False), read_only=True, migrating=True) as memory:
        return bool(memory.backend.query(f"PREFIX pcm: <{PCM}> ASK {{ {pattern} }}"))


def run(*args: str) -> object:
    return CliRunner().invoke(main, list(args), env=ENV)


def test_init_records_the_ontology_version_and_content_digest(memory: Memory) -> None:
    shipped = load_ontology()
    data = manifest_data(memory.settings.memory)
    assert data["ontology_version"] == shipped.version
    assert data["ontology_digest"] == shipped.digest
    # the stored graph hashes to the same digest as the parsed files (used for memories without a recorded digest)
    assert ontology_digest(memory.backend.quads(LEGACY_LAYOUT.ontology)) == shipped.digest


def test_an_upgraded_pcm_never_silently_replaces_the_ontology_and_a_later_script_runs(
    settings: Settings, tmp_path: Path, ship
) -> None:
    with Memory.init(settings, owner="Dana Whitfield") as memory:
        fill(memory)  # Rex's species is stored with pcm:petSpecies (0.1.0)
    code = code_ontology(tmp_path / "code", version="0.2.0", rename=True)
    ship(code)
    where = str(settings.memory)

    refused = run("ingest", "--memory", where, "--text", "Rex chewed my slipper.")
    assert refused.exit_code == OntologyMigrationNeeded.exit_code == 5
    assert refused.stderr.count("\n") == 1 and "`pcm ontology migrate`" in refused.stderr
    assert "0.1.0" in refused.stderr and "0.2.0" in refused.stderr
    assert manifest_data(settings.memory)["ontology_version"] == "0.1.0"
    assert stored_has(settings.memory, f"GRAPH <{LEGACY_LAYOUT.ontology}> {{ ?o <http://www.w3.org/2002/07/owl#versionInfo> '0.1.0' }}")
    assert not stored_has(settings.memory, "?p <http://rdfs.org/sioc/ns#content> 'Rex chewed my slipper.'")

    # reads work, and say so: one line on stderr, and in --json
    stats = run("stats", "--memory", where, "--json")
    assert stats.exit_code == 0, stats.output
    assert stats.stderr.count("\n") == 1 and "reading only" in stats.stderr and "pcm ontology migrate" in stats.stderr
    drift = json.loads(stats.stdout)["ontology_drift"]
    assert drift["reason"] == "older" and drift["memory_version"] == "0.1.0" and drift["target_version"] == "0.2.0"

    # the script is written only now: the migration still runs it
    (code / "migrations" / "0.1.0-to-0.2.0.ru").write_text(RENAME, encoding="utf-8")
    done = run("ontology", "migrate", "--memory", where, "--json")
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert report["scripts"] == ["0.1.0-to-0.2.0.ru"] and report["applied"]
    assert stored_has(settings.memory, "?pet pcm:species 'dog'")
    assert not stored_has(settings.memory, "?pet pcm:petSpecies ?s")
    data = manifest_data(settings.memory)
    assert data["ontology_version"] == "0.2.0" and data["ontology_digest"] == load_ontology(code).digest
    assert Path(report["backup"], "memory.toml").is_file()

    again = run("ingest", "--memory", where, "--text", "Rex chewed my slipper.")
    assert again.exit_code == 0, again.output


def test_an_ontology_changed_without_a_version_bump_needs_a_migration(
    settings: Settings, tmp_path: Path, ship
) -> None:
    Memory.init(settings, owner="Dana Whitfield").close()
    ship(code_ontology(tmp_path / "code", extra=HOBBY))  # pcm:Hobby added, still 0.1.0
    with pytest.raises(OntologyMigrationNeeded, match="other content"):
        Memory.open(settings)
    with Memory.open(settings, read_only=True) as memory:
        assert memory.ontology_drift is not None and memory.ontology_drift.reason == "content"
    dry = run("ontology", "migrate", "--memory", str(settings.memory), "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "same version, other content" in dry.stdout
    assert not stored_has(settings.memory, f"GRAPH <{LEGACY_LAYOUT.ontology}> {{ pcm:Hobby a ?t }}")

    done = run("ontology", "migrate", "--memory", str(settings.memory))
    assert done.exit_code == 0, done.output
    assert stored_has(settings.memory, f"GRAPH <{LEGACY_LAYOUT.ontology}> {{ pcm:Hobby a ?t }}")
    assert manifest_data(settings.memory)["ontology_digest"] == load_ontology().digest
    with Memory.open(settings) as memory:
        assert memory.ontology_drift is None


def test_a_memory_without_a_recorded_digest_is_compared_by_its_stored_graph(
    settings: Settings, tmp_path: Path, ship
) -> None:
    Memory.init(settings, owner="Dana Whitfield").close()
    path = settings.memory / "memory.toml"
    unrecorded = "".join(line for line in path.read_text().splitlines(keepends=True) if "ontology_digest" not in line)
    path.write_text(unrecorded)
    # same content: it opens writable, and the digest is recorded (data and version untouched)
    with Memory.open(settings) as memory:
        assert memory.ontology_drift is None
    assert Manifest.load(settings.memory).ontology_digest == load_ontology().digest
    # other content: refused until migrated
    path.write_text(unrecorded)
    ship(code_ontology(tmp_path / "code", extra=HOBBY))
    with pytest.raises(OntologyMigrationNeeded):
        Memory.open(settings)
    assert "ontology_digest" not in path.read_text()


def test_a_memory_from_a_newer_ontology_is_readable_but_not_writable(settings: Settings) -> None:
    Memory.init(settings, owner="Dana Whitfield").close()
    path = settings.memory / "memory.toml"
    written_by_newer_pcm = Manifest.load(settings.memory)  # as a newer pcm writes it (a hand edit is refused)
    written_by_newer_pcm.ontology_version = "9.0.0"
    written_by_newer_pcm.save(settings.memory)
    with pytest.raises(MemoryVersionError, match="upgrade pcm"):
        Memory.open(settings)
    with Memory.open(settings, read_only=True) as memory:
        assert memory.ontology_drift is not None and memory.ontology_drift.reason == "newer"
        assert memory.post_count() == 0
    assert 'ontology_version = "9.0.0"' in path.read_text()


def test_read_only_preflight_works_while_a_migration_is_pending(settings: Settings, tmp_path: Path, ship) -> None:
    with Memory.init(settings, owner="Dana Whitfield") as memory:
        fill(memory)
    code = code_ontology(tmp_path / "code", version="0.2.0", rename=True)
    (code / "migrations" / "0.1.0-to-0.2.0.ru").write_text(RENAME, encoding="utf-8")
    ship(code)
    where = str(settings.memory)
    before = (settings.memory / "memory.toml").read_bytes()

    dry = run("ontology", "migrate", "--dry-run", "--memory", where)
    assert dry.exit_code == 0, dry.output
    assert "(dry run: nothing written)" in dry.stdout and "0.1.0-to-0.2.0.ru" in dry.stdout
    diff = run("ontology", "diff", str(SHIPPED), str(code), "--memory", where, "--json")
    assert diff.exit_code == 1, diff.output  # exit 1 = a breaking change: petSpecies is removed and used
    assert "petSpecies" in diff.stdout
    propose = run("ontology", "propose", "--memory", where)
    assert propose.exit_code == 0, propose.output
    stats = run("stats", "--memory", where)
    assert stats.exit_code == 0, stats.output
    assert "posts: 2" in stats.stdout
    for result in (dry, diff, propose, stats):
        assert "1 migration script(s) pending" in result.stderr
    assert (settings.memory / "memory.toml").read_bytes() == before
    assert not (settings.memory / "backups").exists()

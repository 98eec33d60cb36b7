"""`pcm ontology rename OLD NEW`: every file that writes the term, the version bump and the data's migration script;
`pcm ontology check` scans the competency fixtures too."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from pcm.cli_ontology import ontology as ontology_cli
from pcm.memory import Memory
from pcm.namespaces import PCM
from pcm.ontology_tools import catalog
from pcm.ontology_tools.check import run_check
from pcm.ontology_tools.diff import load_version
from pcm.ontology_tools.migrate import migrate
from pcm.settings import Settings
from tests.conftest import VOCAB
from tests.ontology_tools.test_ontology_tools_migrate import fill

REPO = Path(__file__).resolve().parents[2]


def project(tmp_path: Path) -> dict[str, Path]:
    """A copy of the ontology, shapes, queries and two prompts, as an ontology author's checkout."""
    dirs = {"onto": tmp_path / "onto", "shapes": tmp_path / "shapes", "queries": tmp_path / "queries",
            "prompts": tmp_path / "prompts"}
    shutil.copytree(REPO / "pcm_ontology", dirs["onto"])
    shutil.copytree(REPO / "shapes", dirs["shapes"])
    shutil.copytree(REPO / "queries", dirs["queries"])
    for path in catalogued_prompts():
        target = dirs["prompts"] / path.relative_to(REPO / "src" / "pcm")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    return dirs


def catalogued_prompts() -> list[Path]:
    """The package's prompt files that hold a generated catalogue section."""
    found = [p for p in catalog.prompt_files() if "catalogue:begin" in p.read_text(encoding="utf-8")]
    assert found
    return found


def args(dirs: dict[str, Path]) -> list[str]:
    return ["--ontology", str(dirs["onto"]), "--shapes", str(dirs["shapes"]), "--queries", str(dirs["queries"]),
            "--prompts-root", str(dirs["prompts"])]


def mentions(root: Path, text: str) -> list[str]:
    """Files under ``root`` writing ``text``, migration scripts and their README (history, not uses) aside."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "migrations" not in p.parts
                  and text in p.read_text(encoding="utf-8"))


def test_rename_rewrites_every_file_bumps_the_version_and_writes_the_script(tmp_path: Path, settings: Settings) -> None:
    dirs = project(tmp_path)
    dry = CliRunner().invoke(ontology_cli, ["rename", "pcm:petSpecies", "pcm:species", *args(dirs), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "+++ b/" in dry.stdout and "+pcm:species a owl:DatatypeProperty" in dry.stdout
    assert "would rename (dry run)" in dry.stdout
    assert mentions(tmp_path, "pcm:petSpecies")  # nothing written yet
    assert not list((dirs["onto"] / "migrations").glob("*.ru"))

    done = CliRunner().invoke(ontology_cli, ["rename", "pcm:petSpecies", "pcm:species", *args(dirs), "--json"])
    assert done.exit_code == 0, done.output
    result = json.loads(done.stdout)
    assert result["from_version"] == "0.1.0" and result["to_version"] == "0.2.0"
    changed = {str(Path(f).relative_to(tmp_path)) for f in result["files"]}
    prompts = {str(Path("prompts") / p.relative_to(REPO / "src" / "pcm")) for p in catalogued_prompts()}
    assert {"onto/pcm.ttl", "queries/competency/pets.rq", "queries/competency/pets.trig", *prompts} <= changed
    assert mentions(tmp_path, "petSpecies") == []
    assert any("test_ontology_tools_migrate.py" in m for m in result["python_mentions"])  # reported, not changed

    onto = load_version(dirs["onto"])
    assert onto.version == "0.2.0" and PCM + "species" in onto.terms and PCM + "petSpecies" not in onto.terms
    assert "owl:versionIRI <https://w3id.org/pcm/ontology/0.2.0>" in (dirs["onto"] / "pcm.ttl").read_text()
    assert catalog.stale_prompts(onto, catalog.prompt_files(dirs["prompts"])) == []
    report = run_check(ontology_dir=dirs["onto"], shapes_dir=dirs["shapes"], queries_dir=dirs["queries"],
                       prompts=catalog.prompt_files(dirs["prompts"]), reasoner=False,
                       vocab_dir=VOCAB)
    assert report.ok, report.text()

    script = Path(result["script"])
    assert script == dirs["onto"] / "migrations" / "0.1.0-to-0.2.0.rename-petSpecies.ru" and script.is_file()
    with Memory.init(settings, owner="Dana Whitfield") as memory:
        fill(memory)
        migrated = migrate(memory.context, ontology=onto, migrations=dirs["onto"] / "migrations")
        assert migrated.applied and migrated.after is not None and migrated.after.violations == 0
        assert memory.backend.query(f"ASK {{ ?pet <{PCM}species> 'dog' }}")


def test_rename_refuses_an_unknown_or_taken_name(tmp_path: Path) -> None:
    dirs = project(tmp_path)
    unknown = CliRunner().invoke(ontology_cli, ["rename", "pcm:noSuchTerm", "pcm:other", *args(dirs)])
    assert unknown.exit_code == 2 and "is not declared" in unknown.stderr
    taken = CliRunner().invoke(ontology_cli, ["rename", "pcm:petSpecies", "pcm:petBreed", *args(dirs)])
    assert taken.exit_code == 2 and "already declared" in taken.stderr
    assert mentions(tmp_path, "pcm:petSpecies")


def test_check_scans_competency_fixtures(tmp_path: Path) -> None:
    dirs = project(tmp_path)
    fixture = dirs["queries"] / "competency" / "pets.trig"
    fixture.write_text(fixture.read_text(encoding="utf-8").replace("pcm:petBreed", "pcm:petBred"), encoding="utf-8")
    report = run_check(ontology_dir=dirs["onto"], shapes_dir=dirs["shapes"], queries_dir=dirs["queries"],
                       prompts=[], reasoner=False, vocab_dir=None)
    found = [f for f in report.errors if f.code == "undefined-term"]
    assert len(found) == 1 and "pcm:petBred" in found[0].message
    assert "pets.trig:" in found[0].where and int(found[0].where.rsplit(":", 1)[1]) > 0
    assert report.counts["fixtures"] >= 20

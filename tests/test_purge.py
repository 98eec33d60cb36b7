"""Forgetting for real: the forget drops summaries in its own atomic update, and a purge rewrites the files so the
forgotten text is gone from the disk (store, side index, caches), with a crash-safe swap of the store."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pyoxigraph as ox
import pytest
from click.testing import CliRunner, Result

from pcm.backend_local import LocalBackend, compaction_paths
from pcm.backend_remote import RemoteBackend
from pcm.cli import main
from pcm.conversations import Conversation, Utterance
from pcm.errors import PcmError
from pcm.memory import Memory
from pcm.settings import Settings
from pcm.summaries import read_summary

SECRET = "zebracorn"
T0 = datetime(2025, 3, 3, 10, 0)
TURNS = [
    f"My childhood nickname was {SECRET} and I never tell anyone.",
    "That is a lovely nickname, your secret is safe.",
    "I planted tomatoes and basil in the garden this weekend.",
]


def conversation() -> Conversation:
    return Conversation("garden", [
        Utterance("garden", i, "user" if i % 2 == 0 else "assistant", text, timestamp=T0.replace(minute=i),
                  source_id=f"garden:{i}")
        for i, text in enumerate(TURNS)
    ])


def files_holding(root: Path, needle: str) -> list[str]:
    data = needle.encode()
    return sorted(str(f.relative_to(root)) for f in root.rglob("*") if f.is_file() and data in f.read_bytes())


def pcm(memory: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["--memory", str(memory), *args], env={"PCM_LLM": "none"})


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A memory with its side index and summaries, holding the secret in a store file and an index file."""
    path = tmp_path_factory.mktemp("purge") / "memory"
    with Memory.init(Settings(memory=path), owner="Dana") as memory:
        memory.ingest([conversation()])
        memory.index.optimize()
    return path


def copy_of(template: Path, tmp_path: Path) -> Path:
    import shutil

    path = tmp_path / "memory"
    shutil.copytree(template, path)
    return path


def test_forget_removes_the_text_from_every_file(indexed: Path, tmp_path: Path) -> None:
    memory = copy_of(indexed, tmp_path)
    (memory / "cache" / "ask" / "llm").mkdir(parents=True)
    (memory / "cache" / "ask" / "llm" / "reply.json").write_text(json.dumps({"text": f"Your nickname is {SECRET}"}))
    holding = files_holding(memory, SECRET)
    assert any(h.startswith("oxigraph/") for h in holding) and any(h.startswith("index/") for h in holding)

    done = pcm(memory, "forget", "--post", "garden:0", "--json")
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert report["purged"] is True and report["quads_kept"] > 0 and len(report["forgotten"]) == 1
    assert files_holding(memory, SECRET) == []

    found = pcm(memory, "recall", "tomatoes basil garden", "--json")  # the rest is intact and searchable
    assert found.exit_code == 0, found.output
    assert [h["source_id"] for h in json.loads(found.stdout)][0] == "garden:2"
    summary = pcm(memory, "summary", "--all", "--json")
    assert summary.exit_code == 0 and SECRET not in summary.stdout and "tomatoes" in summary.stdout


def test_a_failed_purge_after_a_forget_says_the_forget_holds(
    indexed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = copy_of(indexed, tmp_path)

    def disk_full(self: LocalBackend) -> int:
        raise OSError("No space left on device")

    monkeypatch.setattr(LocalBackend, "compact", disk_full)
    done = pcm(memory, "forget", "--post", "garden:0", "--json")
    assert done.exit_code == 10  # a full disk's own code: a script sees that not everything asked for was done
    report = json.loads(done.stdout)
    assert len(report["forgotten"]) == 1 and report["purged"] is False and "pcm purge" in report["note"]
    assert "No space left" in done.stderr
    assert SECRET not in pcm(memory, "recall", SECRET, "--json").stdout  # yet the forget itself holds


def test_no_purge_leaves_the_text_in_the_files_until_pcm_purge(indexed: Path, tmp_path: Path) -> None:
    memory = copy_of(indexed, tmp_path)
    done = pcm(memory, "forget", "--post", "garden:0", "--no-purge", "--json")
    assert done.exit_code == 0 and json.loads(done.stdout)["purged"] is False
    assert files_holding(memory, SECRET)  # gone from every answer, but the engine's files still hold it
    assert SECRET not in pcm(memory, "recall", SECRET, "--json").stdout

    purged = pcm(memory, "purge", "--json")
    assert purged.exit_code == 0, purged.output
    assert json.loads(purged.stdout)["purged"] is True
    assert files_holding(memory, SECRET) == []
    assert not (memory / "cache" / "ask").exists()


def test_a_migration_backup_holding_a_forgotten_post_is_deleted_by_the_purge(tmp_path: Path) -> None:
    from pcm.ontology_tools.migrate import make_backup

    with Memory.init(Settings(memory=tmp_path / "m", index_enabled=False), owner="Dana") as memory:
        memory.ingest([conversation()])
        before = make_backup(memory.context, None, "before-forget")
        memory.forget(post="garden:0")
        after = make_backup(memory.context, None, "after-forget")
        (tmp_path / "m" / "backups" / "junk").mkdir()  # not a backup pcm can read: reported, kept
        (tmp_path / "m" / "backups" / "junk" / "dataset.nq").write_text("this is not N-Quads <")
        report = memory.purge()
        assert report.backups_removed == [before.path.name] and report.backups_unreadable == ["junk"]
        assert not before.path.exists() and after.path.exists()
        assert files_holding(tmp_path / "m", SECRET) == []


def test_the_summary_drop_is_part_of_the_forget_update(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A crash right after the forget's update (before summaries are rebuilt) leaves no summary quoting the post."""
    with Memory.init(Settings(memory=tmp_path / "m", index_enabled=False), owner="Dana") as memory:
        memory.ingest([conversation()])
        thread = memory.store.find_session("garden") or ""
        assert SECRET in (read_summary(memory.context, thread) or pytest.fail("no summary")).text

        def crash(*args: object, **kwargs: object) -> None:
            raise RuntimeError("killed after the forget's update")

        monkeypatch.setattr("pcm.summaries.summarise.update_summaries", crash)
        with pytest.raises(RuntimeError):
            memory.forget(post="garden:0")
        monkeypatch.undo()
        assert read_summary(memory.context, thread) is None
        dump = b"".join(memory.backend.dump(ox.RdfFormat.N_QUADS, graph=g) for g in memory.backend.named_graphs())
        assert SECRET.encode() not in dump


def test_a_failing_forget_keeps_the_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Memory.init(Settings(memory=tmp_path / "m", index_enabled=False), owner="Dana") as memory:
        memory.ingest([conversation()])
        thread = memory.store.find_session("garden") or ""
        before = read_summary(memory.context, thread)

        def crash(text: str, *args: object, **kwargs: object) -> None:
            raise RuntimeError("crash mid-forget")

        monkeypatch.setattr(memory.backend, "update", crash)
        with pytest.raises(RuntimeError):
            memory.forget(post="garden:0")
        monkeypatch.undo()
        assert read_summary(memory.context, thread) == before


def _store_with(path: Path, label: str) -> None:
    store = ox.Store(str(path))
    store.add(ox.Quad(ox.NamedNode("urn:x"), ox.NamedNode("urn:label"), ox.Literal(label), ox.NamedNode("urn:g")))
    store.flush()
    del store


def _labels(backend: LocalBackend) -> set[str]:
    return {q.object.value for q in backend.quads()}


@pytest.mark.parametrize("stage", ["copied", "original-retired", "copy-in-place"])
def test_an_interrupted_swap_completes_on_open(tmp_path: Path, stage: str) -> None:
    path = tmp_path / "oxigraph"
    new, old, ready = compaction_paths(path)
    _store_with(path, "original")
    _store_with(new, "copy")
    ready.touch()  # the copy was complete when the process died
    if stage in ("original-retired", "copy-in-place"):
        path.rename(old)
    if stage == "copy-in-place":
        new.rename(path)
    backend = LocalBackend(path)
    assert _labels(backend) == {"copy"}
    assert not new.exists() and not old.exists() and not ready.exists()
    backend.close()


@pytest.mark.parametrize("stage", ["copied", "original-retired", "copy-in-place"])
def test_a_read_only_open_of_an_interrupted_swap_reads_the_finished_copy(tmp_path: Path, stage: str) -> None:
    path = tmp_path / "oxigraph"
    new, old, ready = compaction_paths(path)
    _store_with(path, "original")
    _store_with(new, "copy")
    ready.touch()
    if stage in ("original-retired", "copy-in-place"):
        path.rename(old)  # e.g. the process died between the two renames: no store at the usual place
    if stage == "copy-in-place":
        new.rename(path)
    reader = LocalBackend(path, read_only=True)
    assert _labels(reader) == {"copy"}  # what the next writable open will leave
    reader.close()
    assert ready.exists()  # a reader does not finish the swap
    backend = LocalBackend(path)  # a writable open does
    assert _labels(backend) == {"copy"}
    assert not new.exists() and not old.exists() and not ready.exists()
    backend.close()


def test_an_unfinished_copy_is_discarded_on_open(tmp_path: Path) -> None:
    path = tmp_path / "oxigraph"
    new, _, ready = compaction_paths(path)
    _store_with(path, "original")
    _store_with(new, "half a copy")  # no marker: the copy may be incomplete
    backend = LocalBackend(path)
    assert _labels(backend) == {"original"} and not new.exists() and not ready.exists()
    backend.close()


def test_compact_keeps_every_quad_and_the_store_stays_usable(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path / "oxigraph")
    quads = [ox.Quad(ox.NamedNode(f"urn:s{i}"), ox.NamedNode("urn:p"), ox.Literal(f"value number {i}"),
                     ox.NamedNode("urn:g")) for i in range(500)]
    backend.extend(quads)
    backend.update("DELETE WHERE { GRAPH <urn:g> { <urn:s7> ?p ?o } }")
    assert backend.compact() == 499
    assert set(backend.quads()) == set(quads) - {quads[7]}
    backend.extend([quads[7]])  # still writable after the swap
    assert len(list(backend.quads())) == 500
    backend.close()


def test_a_remote_store_cannot_be_purged_from_here() -> None:
    backend = RemoteBackend("http://127.0.0.1:9/query", engine="oxigraph")  # no probe: nothing listens there
    with pytest.raises(PcmError, match="pcm purge"):
        backend.compact()


KILLED_PURGE = """
import sys
from pathlib import Path
from pcm.memory import Memory
from pcm.settings import Settings
memory = Memory.open(Settings(memory=Path(sys.argv[1]), index_enabled=False))
print("purging", flush=True)
memory.purge()
print("done", flush=True)
"""


@pytest.mark.parametrize("point", ["copying", "compact:1", "compact:2", "compact:3", "compact:4"])
@pytest.mark.slow
def test_a_purge_killed_at_any_moment_loses_nothing(tmp_path: Path, point: str) -> None:
    """Killed while the copy is written (as soon as its directory appears), or right after each durable step of
    the swap (``PCM_FAULT_POINT=compact:n``: copy done, marked complete, original retired, copy renamed in)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    path = tmp_path / "m"
    with Memory.init(Settings(memory=path, index_enabled=False), owner="Dana") as memory:
        g = ox.NamedNode("urn:pcm:graph:import:bulk")
        memory.backend.extend([ox.Quad(ox.NamedNode(f"urn:x:{i}"), ox.NamedNode("urn:p"),
                                       ox.Literal(f"a value long enough to be stored as a string {i}"), g)
                               for i in range(60_000)])
        memory.backend.update("DELETE WHERE { GRAPH <urn:pcm:graph:import:bulk> { <urn:x:7> ?p ?o } }")
        before = set(memory.backend.quads())
    new, old, ready = compaction_paths(path / "oxigraph")
    env = {k: v for k, v in os.environ.items() if k != "PCM_FAULT_POINT"}
    if point != "copying":
        env["PCM_FAULT_POINT"] = point
    child = subprocess.Popen([sys.executable, "-c", KILLED_PURGE, str(path)], stdout=subprocess.PIPE, text=True, env=env)
    assert child.stdout is not None and child.stdout.readline().strip() == "purging"
    if point == "copying":
        while not new.exists() and child.poll() is None:  # the copy has begun (pytest's timeout bounds the wait)
            time.sleep(0.005)
        child.send_signal(signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL
    with Memory.open(Settings(memory=path, index_enabled=False)) as memory:
        assert set(memory.backend.quads()) == before
    assert not new.exists() and not old.exists() and not ready.exists()


def test_replace_with_a_backup_swaps_in_exactly_its_quads(tmp_path: Path) -> None:
    """The migration rollback: one swap to the backup's files (not CLEAR ALL and a reload that a crash could cut)."""
    _store_with(tmp_path / "backup", "as it was")
    backend = LocalBackend(tmp_path / "oxigraph")
    backend.extend([ox.Quad(ox.NamedNode("urn:y"), ox.NamedNode("urn:p"), ox.Literal("migrated"), ox.NamedNode("urn:g"))])
    assert backend.replace_with(tmp_path / "backup") == 1
    assert _labels(backend) == {"as it was"}
    assert (tmp_path / "backup").is_dir()  # the backup itself is kept
    backend.extend([ox.Quad(ox.NamedNode("urn:z"), ox.NamedNode("urn:p"), ox.Literal("after"), ox.NamedNode("urn:g"))])
    assert _labels(backend) == {"as it was", "after"}
    backend.close()

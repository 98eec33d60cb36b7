"""kill -9 at deterministic points of ingest, extraction, summaries, forget and purge; then the first open.

Each case runs one real ``pcm`` command in a child process (``tests/fault_driver.py``) that SIGKILLs itself right
after its n-th durable write (``PCM_FAULT_POINT``, see :mod:`pcm.faults`); the kill points of a command are spread
evenly over the writes a clean run of it makes (counted once per scenario). After each kill:

* the first open, read-only, either finds the side index equal to the store, or reports the lag exactly (posts
  missing, forgotten posts still indexed), still finds the missing posts and hides the forgotten ones;
* the next writable open brings the index equal to the store, clears both outbox markers and leaves no session
  summary behind its posts;
* nothing said is lost: every post stored before the command is still there (but the one being forgotten), and
  running the command again completes it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pcm.conversations import parse_file, samples_dir
from pcm.index import SideIndex
from pcm.layout import LEGACY_LAYOUT
from pcm.memory import INDEX_DIR, Memory
from pcm.namespaces import SIOC
from pcm.provenance import post_quads
from pcm.resources import render_query
from pcm.settings import Settings
from tests.fault_driver import install, restore

DRIVER = Path(__file__).with_name("fault_driver.py")
SAMPLES = samples_dir()
WORK, FAMILY, PURCHASE = SAMPLES / "01-work.json", SAMPLES / "02-family.json", SAMPLES / "03-purchase.json"
pytestmark = pytest.mark.slow  # every case kills a child process and reopens what it left
EXTRACTION = [f'm:item-{n} a pcm:Pet ; rdfs:label "Pet {n}" .\nm:owner pcm:hasPet m:item-{n} .'
              for n in range(8)] + ["Dana bought things and talked about them."]


@pytest.fixture(scope="module", autouse=True)
def stand_in_embedder() -> Iterator[None]:
    """The children embed with the bag-of-words stand-in (see fault_driver); this process must read alike."""
    previous = install()
    yield
    restore(previous)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory, stand_in_embedder: None) -> Path:
    """A memory with one ingested session (9 posts), its index reconciled and its summary written."""
    path = tmp_path_factory.mktemp("crash") / "memory"
    settings = Settings(memory=path)
    with Memory.init(settings, owner="Dana Whitfield") as memory:
        memory.ingest(parse_file(WORK))
        memory.index.optimize()
    return path


def run(memory: Path, args: list[str], point: str, script: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PCM_MEMORY": str(memory), "PCM_LLM": f"scripted:{script}" if script else "none",
           "PCM_LLM_CONCURRENCY": "1", "PCM_FAULT_POINT": point,
           "PYTHONPATH": os.pathsep.join([str(DRIVER.parent), *sys.path])}
    return subprocess.run([sys.executable, str(DRIVER), *args], capture_output=True, text=True, env=env, timeout=300)


def stored_posts(memory: Memory) -> set[str]:
    q = f"SELECT ?p WHERE {{ GRAPH <{LEGACY_LAYOUT.conversation}> {{ ?p a <{SIOC}Post> }} }}"
    return {t.value for t in memory.store.select(q).values("p") if t is not None}


def post_texts(memory: Memory, iris: set[str]) -> dict[str, str]:
    return {p.iri: p.text for p in memory.store.posts(sorted(iris))} if iris else {}


# ------------------------------------------------------------------------------------------------ scenarios


SCENARIOS = {
    # name: (command, kill points, scripted replies or None)
    "ingest": (["ingest", str(FAMILY)], 7, None),
    "extraction and model summary": (["ingest", str(PURCHASE)], 7, EXTRACTION),
    "forget one post": (["forget", "--post", "d01-m03", "--no-purge"], 5, None),
    "forget a session and purge": (["forget", "--session", "dana-01-work"], 6, None),
}


@pytest.fixture(scope="module")
def write_counts(template: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, int]:
    """How many durable writes a clean run of each scenario makes (the kill points are spread over them)."""
    counts = {}
    for name, (args, _, replies) in SCENARIOS.items():
        work = tmp_path_factory.mktemp("count")
        shutil.copytree(template, work / "memory")
        script = _script(work, replies)
        out = run(work / "memory", args, "*:1000000", script)
        assert out.returncode == 0, out.stderr
        counts[name] = int(out.stderr.rsplit("faults-seen ", 1)[1].split()[0])
    return counts


def _script(directory: Path, replies: list[str] | None) -> Path | None:
    if replies is None:
        return None
    script = directory / "replies.json"
    script.write_text(json.dumps(replies), encoding="utf-8")
    return script


def _cases() -> list[tuple[str, int]]:
    return [(name, i) for name, (_, points, _) in SCENARIOS.items() for i in range(points)]


def test_the_scenarios_give_at_least_twenty_kill_points() -> None:
    assert len(_cases()) >= 20


@pytest.mark.parametrize(("scenario", "index"), _cases(), ids=[f"{n}-{i}" for n, i in _cases()])
def test_a_kill_leaves_a_memory_whose_first_open_agrees_or_reports(
    template: Path, write_counts: dict[str, int], tmp_path: Path, scenario: str, index: int
) -> None:
    args, points, replies = SCENARIOS[scenario]
    total = write_counts[scenario]
    at = 1 + round(index * (total - 1) / max(1, points - 1)) if points > 1 else 1
    path = tmp_path / "memory"
    shutil.copytree(template, path)
    settings = Settings(memory=path)
    with Memory.open(settings, read_only=True) as before:
        posts_before = stored_posts(before)
        texts_before = post_texts(before, posts_before)
        forgettable = _forgettable(before, scenario)

    out = run(path, args, f"*:{at}", _script(tmp_path, replies))
    assert out.returncode == -9, f"expected a kill at durable write {at} of {total}: {out.stderr}"

    # the first open is read-only: it agrees with the store or reports the lag, and still finds the posts
    with SideIndex.open(path / INDEX_DIR) as raw:
        on_disk = raw.post_iris()
    with Memory.open(settings, read_only=True) as reader:
        stored = stored_posts(reader)
        missing, forgotten = stored - on_disk, on_disk - stored
        reader.index  # noqa: B018 - opening the index is what runs the reader's half of the outbox
        lag = reader.index_lag
        if not missing and not forgotten:
            assert lag is None
        else:
            assert lag is not None, f"index lags silently: {len(missing)} missing, {len(forgotten)} forgotten"
            assert (lag.missing, lag.forgotten, lag.searched) == (len(missing), len(forgotten), True)
            for iri, text in sorted(post_texts(reader, missing).items())[:3]:
                assert iri in {h.post for h in reader.recall(text, k=5, mode="vector")}  # by meaning only
            for iri in sorted(forgotten)[:3]:
                assert not forgotten & {h.post for h in reader.recall(texts_before[iri], k=5)}
        assert posts_before - stored <= forgettable

    # the next writable open reconciles the index and rebuilds summaries left behind
    with Memory.open(settings) as writer:
        assert writer.index.post_iris() == stored_posts(writer)
        assert not writer.store.index_pending() and not writer.store.summaries_pending()
        assert not writer.store.select(render_query("summaries/behind")).rows
    # nothing said is lost: running the command again completes it
    again = run(path, args, "*:1000000", _script(tmp_path, replies))
    assert again.returncode == 0 or "no post" in again.stderr or "no session" in again.stderr, again.stderr
    with Memory.open(settings) as after:
        final = stored_posts(after)
        assert after.index.post_iris() == final
        assert not after.store.select(render_query("summaries/behind")).rows
        if args[0] == "ingest":
            file_posts = {post_quads(after.naming, u, None)[0].iri for c in parse_file(Path(args[1]))
                          for u in c.utterances}
            assert final == posts_before | file_posts
        else:
            assert final == posts_before - forgettable


def _forgettable(memory: Memory, scenario: str) -> set[str]:
    """The posts the scenario's command forgets (none for an ingest)."""
    if scenario == "forget one post":
        return set(memory.store.find_post("d01-m03"))
    if scenario == "forget a session and purge":
        return set(memory.store.session_posts(memory.store.find_session("dana-01-work") or ""))
    return set()


# ------------------------------------------------------------------------------------------------ single defects


def test_recall_and_ask_after_a_crash_before_the_index_write_warn_and_still_find_the_posts(
    template: Path, tmp_path: Path
) -> None:
    path = tmp_path / "memory"
    shutil.copytree(template, path)
    assert run(path, ["ingest", str(FAMILY)], "store:3").returncode == -9  # three posts stored, none indexed
    with SideIndex.open(path / INDEX_DIR) as raw:
        indexed = raw.post_iris()
    with Memory.open(Settings(memory=path), read_only=True) as reader:
        late = post_texts(reader, stored_posts(reader) - indexed)
    assert len(late) == 3
    text = sorted(late.values())[0]
    recalled = run(path, ["recall", text, "--mode", "vector", "--k", "3", "--json"], "*:1000000")
    assert recalled.returncode == 0, recalled.stderr
    assert "pcm: warning: the side index lags the store: 3 post(s) not indexed yet" in recalled.stderr
    assert text in [hit["text"] for hit in json.loads(recalled.stdout)]
    asked = run(path, ["ask", "What did my family do?", "--json"], "*:1000000")
    assert asked.returncode == 0, asked.stderr
    (warning,) = json.loads(asked.stdout)["warnings"]
    assert (warning["kind"], warning["missing_posts"], warning["forgotten_posts"]) == ("index_lag", 3, 0)


def test_a_summary_an_interrupted_ingest_left_out_is_rebuilt_on_the_next_writable_open(
    template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pcm.summaries

    path = tmp_path / "memory"
    shutil.copytree(template, path)
    settings = Settings(memory=path)

    def crash(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt  # the process stops between the posts and their summary

    with Memory.open(settings) as memory:
        monkeypatch.setattr(pcm.summaries, "summarise_posts", crash)
        with pytest.raises(KeyboardInterrupt):
            memory.ingest(parse_file(FAMILY))
        monkeypatch.undo()
        thread = memory.store.find_session("dana-02-family")
        assert thread is not None and pcm.summaries.read_summary(memory.context, thread) is None
    with Memory.open(settings, read_only=True) as reader:
        assert pcm.summaries.read_summary(reader.context, thread) is None  # a reader does not write
    with Memory.open(settings) as memory:
        summary = pcm.summaries.read_summary(memory.context, thread)
        assert summary is not None and summary.covered == frozenset(memory.store.session_posts(thread))
        assert not memory.store.summaries_pending()

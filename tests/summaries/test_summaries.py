"""Session summaries: incremental LLM updates with provenance to every covered post, extractive summaries without
a model, forgetting, PCM_SUMMARIES=off, summaries as ask context, and ``pcm summary``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from pcm.conversations import Conversation, Utterance
from pcm.llm import ScriptedClient
from pcm.memory import Memory
from pcm.retrieval.summaries import summary_context, summary_posts
from pcm.settings import LLMSpec, Settings
from pcm.summaries import read_summary, update_summaries
from pcm.summaries.text import Sentence, central_sentences

REPO = Path(__file__).resolve().parents[2]
T0 = datetime(2025, 3, 3, 10, 0)
BATCHES = [
    ["I adopted a beagle called Biscuit last week.", "Congratulations, beagles are friendly dogs."],
    ["Biscuit chewed my running shoes this morning.", "Try giving him a chew toy instead."],
    ["I signed Biscuit up for puppy training on Saturdays.", "Training early is a great idea."],
]
GARDEN = [
    "I planted tomatoes and basil in the garden.",
    "The tomatoes need watering every evening in summer.",
    "My basil is growing fast next to the tomatoes.",
]


def turns(session: str, texts: list[str], start: int = 0) -> Conversation:
    return Conversation(session, [
        Utterance(session, start + i, "user" if (start + i) % 2 == 0 else "assistant", text,
                  timestamp=T0.replace(day=3 + (start + i) // 2, minute=start + i), source_id=f"{session}:{start + i}")
        for i, text in enumerate(texts)
    ])


@pytest.fixture
def memory(tmp_path: Path) -> Memory:
    mem = Memory.init(Settings(memory=tmp_path / "mem", index_enabled=False), owner="Dana")
    yield mem
    mem.close()


def covered_by_sparql(memory: Memory, session_id: str) -> set[str]:
    """The covered posts as anyone can query them: the summary activity's prov:used."""
    thread = memory.store.find_session(session_id)
    q = (
        "SELECT ?post WHERE { GRAPH <urn:pcm:graph:provenance> { ?a a <https://w3id.org/pcm/ontology#SummaryActivity> ;"
        f" <https://w3id.org/pcm/ontology#summarises> <{thread}> ; <http://www.w3.org/ns/prov#used> ?post }} }}"
    )
    return {row[0].value for row in memory.sparql(q).rows}  # type: ignore[union-attr]


def test_llm_summary_over_three_batches_keeps_provenance_to_every_post(memory: Memory) -> None:
    client = ScriptedClient(["Dana adopted Biscuit.", "Dana adopted Biscuit; he chewed shoes.",
                             "Dana adopted Biscuit, who chewed shoes and starts training."])
    memory.settings = memory.settings.with_(summaries_enabled=False)
    thread, posts = None, []
    for n, batch in enumerate(BATCHES):
        posts += memory.ingest([turns("s1", batch, start=2 * n)]).posts
        thread = memory.store.find_session("s1")
        report = update_summaries(memory.context, [thread or ""], client)
        assert (report.updated, report.llm_calls) == (1, 1)
        stored = read_summary(memory.context, thread or "")
        assert stored is not None and stored.covered == set(posts) == covered_by_sparql(memory, "s1")
        assert stored.method == client.name and stored.prompt_version.startswith("summary.v1@")
    assert read_summary(memory.context, thread or "").text == "Dana adopted Biscuit, who chewed shoes and starts training."  # type: ignore[union-attr]
    # each call got the previous summary and only the turns not yet covered
    second, third = client.requests[1][1][0].content, client.requests[2][1][0].content
    assert "Dana adopted Biscuit." in second and BATCHES[1][0] in second and BATCHES[0][0] not in second
    assert "he chewed shoes" in third and BATCHES[2][0] in third and BATCHES[1][0] not in third
    assert all(op == "summary" for _, _, op in client.requests)
    # nothing new: no call
    again = update_summaries(memory.context, [thread or ""], client)
    assert (again.unchanged, again.llm_calls) == (1, 0)


def test_ingest_with_an_llm_updates_the_summary_incrementally(memory: Memory) -> None:
    replies = iter(["first", "second", "third"])

    def reply(system: str, messages: list, operation: str) -> str:  # type: ignore[type-arg]
        return next(replies) if operation == "summary" else "# nothing to extract"

    memory.settings = memory.settings.with_(llm=LLMSpec("scripted", "unused"))
    memory._client = ScriptedClient([reply] * 20)
    posts: list[str] = []
    for n, batch in enumerate(BATCHES):
        posts += memory.ingest([turns("s1", batch, start=2 * n)]).posts
    stored = read_summary(memory.context, memory.store.find_session("s1") or "")
    assert stored is not None and stored.text == "third" and stored.covered == set(posts)
    summary_calls = [m[0].content for _, m, op in memory._client.requests if op == "summary"]
    assert len(summary_calls) == 3 and "second" in summary_calls[2] and BATCHES[1][1] not in summary_calls[2]


def test_a_failing_model_falls_back_to_an_extractive_summary(memory: Memory) -> None:
    memory.settings = memory.settings.with_(summaries_enabled=False)
    memory.ingest([turns("s1", BATCHES[0])])
    report = update_summaries(memory.context, [memory.store.find_session("s1") or ""], ScriptedClient([]))
    assert report.fallbacks == 1
    assert read_summary(memory.context, memory.store.find_session("s1") or "").method == "extractive"  # type: ignore[union-attr]


def test_extractive_summary_is_the_central_sentences_in_message_order(memory: Memory) -> None:
    texts = GARDEN + ["Ok.", "By the way, my cousin called from Oslo about the wedding plans."]
    posts = memory.ingest([turns("g", texts)]).posts
    stored = read_summary(memory.context, memory.store.find_session("g") or "")
    assert stored is not None and stored.method == "extractive" and stored.covered == set(posts)
    lines = stored.text.splitlines()
    assert "Ok." not in stored.text  # too short to stand for anything
    garden_lines = [i for i, line in enumerate(lines) if "tomatoes" in line or "basil" in line]
    assert garden_lines == sorted(garden_lines) and len(garden_lines) == 3
    assert lines[0] == "user: I planted tomatoes and basil in the garden."


def test_central_sentences_cap_and_drop_near_duplicates() -> None:
    same = [Sentence(f"p{i}", i, 0, "the tomatoes need water every evening", "u") for i in range(4)]
    other = [Sentence("q", 9, 0, "the basil needs water every evening too", "u")]
    chosen = central_sentences(same + other, limit=3)
    assert [s.post for s in chosen] == ["p0", "q"]
    assert len(central_sentences([Sentence(f"p{i}", i, 0, f"word{i} shared words here", "u") for i in range(9)],
                                 limit=5)) == 5


def test_rerun_summarises_nothing_when_every_post_is_covered(memory: Memory) -> None:
    memory.ingest([turns("g", GARDEN)])
    thread = memory.store.find_session("g") or ""
    before = read_summary(memory.context, thread)
    report = update_summaries(memory.context, [thread])
    assert (report.updated, report.unchanged) == (0, 1) and read_summary(memory.context, thread) == before
    memory.ingest([turns("g", ["The basil flowered, so I pinched the flowers off the basil."], start=3)])
    assert len(read_summary(memory.context, thread).covered) == 4  # type: ignore[union-attr]


def test_forgetting_a_post_re_summarises_without_it(memory: Memory) -> None:
    posts = memory.ingest([turns("g", GARDEN)]).posts
    thread = memory.store.find_session("g") or ""
    memory.forget(post="g:0")
    stored = read_summary(memory.context, thread)
    assert stored is not None and posts[0] not in stored.covered and stored.covered == set(posts[1:])
    assert "I planted" not in stored.text and covered_by_sparql(memory, "g") == set(posts[1:])


def test_forgetting_a_session_drops_its_summary_activity(memory: Memory) -> None:
    memory.ingest([turns("g", GARDEN), turns("s1", BATCHES[0])])
    memory.forget(session="g")
    q = "SELECT ?a WHERE { GRAPH ?g { ?a a <https://w3id.org/pcm/ontology#SummaryActivity> } }"
    assert len(memory.sparql(q).rows) == 1  # type: ignore[union-attr]
    ask_used = "ASK { GRAPH ?g { ?a <http://www.w3.org/ns/prov#used> ?p . FILTER NOT EXISTS { GRAPH ?c { ?p a <http://rdfs.org/sioc/ns#Post> } } } }"
    assert memory.sparql(ask_used) is False  # no summary claims a post that is gone


def test_forget_with_summaries_off_drops_the_summary(memory: Memory) -> None:
    memory.ingest([turns("g", GARDEN)])
    memory.settings = memory.settings.with_(summaries_enabled=False)
    memory.forget(post="g:1")
    assert read_summary(memory.context, memory.store.find_session("g") or "") is None


def test_summaries_off_by_environment(tmp_path: Path) -> None:
    settings = Settings.from_env({"PCM_SUMMARIES": "off", "PCM_INDEX": "off", "PCM_MEMORY": str(tmp_path / "m")})
    assert settings.summaries_enabled is False and Settings.from_env({}).summaries_enabled is True
    with Memory.init(settings, owner="Dana") as mem:
        mem.ingest([turns("g", GARDEN)])
        assert read_summary(mem.context, mem.store.find_session("g") or "") is None


def test_summary_context_picks_the_matching_session_with_its_posts(memory: Memory) -> None:
    memory.ingest([turns("g", GARDEN), turns("s1", BATCHES[0] + BATCHES[1])])
    context = summary_context(memory.context, "How are my tomatoes doing in the garden?", k=1)
    assert len(context) == 1
    line, posts = context[0]
    assert line.startswith("Session g (2025-03-03 to 2025-03-04, 3 turns), summary:") and "tomatoes" in line
    assert posts and all(p.session == "g" for p in posts)
    assert summary_posts(memory.context, "the beagle dog Biscuit", k=2)[0] in memory.store.session_posts(
        memory.store.find_session("s1") or "")


def test_extractive_path_does_not_import_torch_with_the_index_off(tmp_path: Path) -> None:
    code = (
        "import sys\nfrom pathlib import Path\nfrom pcm.memory import Memory\nfrom pcm.settings import Settings\n"
        "from pcm.conversations import Conversation, Utterance\n"
        f"m = Memory.init(Settings(memory=Path({str(tmp_path / 'm')!r}), index_enabled=False))\n"
        "m.ingest([Conversation('g', [Utterance('g', i, 'user', t) for i, t in enumerate("
        f"{GARDEN!r})])])\n"
        "from pcm.retrieval.summaries import summary_context\nsummary_context(m, 'tomatoes')\n"
        "print('torch' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "False"


def test_cli_summary(tmp_path: Path) -> None:
    from pcm.cli_summary import summary

    path = tmp_path / "mem"
    with Memory.init(Settings(memory=path, index_enabled=False), owner="Dana") as mem:
        mem.ingest([turns("g", GARDEN), turns("s1", BATCHES[0])])
    env = {"PCM_INDEX": "off", "PCM_LLM": "none"}
    runner = CliRunner()
    out = runner.invoke(summary, ["--memory", str(path), "g", "--json"], env=env)
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert (data["method"], data["covered_posts"], data["session_posts"]) == ("extractive", 3, 3)
    assert data["covered_first"].startswith("2025-03-03T10:00") and data["covered_last"].startswith("2025-03-04")
    text = runner.invoke(summary, ["--memory", str(path), "g"], env=env)
    assert "tomatoes" in text.stdout and "extractive, covers 3 of 3 posts" in text.stderr
    listed = runner.invoke(summary, ["--memory", str(path), "--all"], env=env)
    assert [line.split()[0] for line in listed.stdout.splitlines()] == ["g", "s1"]
    refreshed = runner.invoke(summary, ["--memory", str(path), "s1", "--refresh", "--json"], env=env)
    assert refreshed.exit_code == 0 and json.loads(refreshed.stdout)["covered_posts"] == 2
    missing = runner.invoke(summary, ["--memory", str(path), "nope"], env=env)
    assert missing.exit_code == 3 and "no session 'nope'" in missing.stderr
    assert runner.invoke(summary, ["--memory", str(path)], env=env).exit_code == 2


"""``pcm extract``, ``pcm history`` and ``pcm duplicates`` as a user runs them (scripted LLM through PCM_LLM)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from pcm.cli_extract import duplicates, extract, history
from pcm.conversations import Conversation, Utterance
from pcm.memory import Memory
from pcm.settings import Settings

T0 = datetime.fromisoformat("2025-03-03T17:10:00-08:00")
BEAGLE = 'm:biscuit a pcm:Pet ; rdfs:label "Biscuit" ; pcm:petBreed "beagle" .\nm:owner pcm:hasPet m:biscuit .'
BASSET = 'm:biscuit a pcm:Pet ; rdfs:label "Biscuit" ; pcm:petBreed "basset hound" .\nm:owner pcm:hasPet m:biscuit .'
PERSON = 'm:biscuit-person a schema:Person ; rdfs:label "biscuit" .\nm:owner rel:neighborOf m:biscuit-person .'


@pytest.fixture
def mem(tmp_path: Path) -> Path:
    path = tmp_path / "mem"
    with Memory.init(Settings(memory=path, index_enabled=False), owner="Dana Whitfield") as memory:
        texts = ["Biscuit is a beagle.", "Actually Biscuit is a basset hound.", "My neighbour is called Biscuit too."]
        utterances = [Utterance("s1", i, "user", t, timestamp=T0.replace(minute=10 + i), source_id=f"m{i}")
                      for i, t in enumerate(texts)]
        memory.ingest([Conversation("s1", utterances)])
    return path


def invoke(command, args: list[str], tmp_path: Path, replies: list[str] | None = None):  # type: ignore[no-untyped-def]
    env = {"PCM_INDEX": "off", "PCM_LLM": "none"}
    if replies is not None:
        script = tmp_path / "replies.json"
        script.write_text(json.dumps(replies), encoding="utf-8")
        env["PCM_LLM"] = f"scripted:{script}"
    return CliRunner().invoke(command, args, env=env, catch_exceptions=False)


def test_extract_pending_then_history_and_duplicates(mem: Path, tmp_path: Path) -> None:
    out = invoke(extract, ["--memory", str(mem), "--pending", "--json"], tmp_path, [BEAGLE, BASSET, PERSON])
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    assert (report["posts"], report["extracted"], report["calls"], report["supersessions"]) == (3, 3, 3, 1)

    again = invoke(extract, ["--memory", str(mem), "--all", "--json"], tmp_path, [])
    assert json.loads(again.stdout)["skipped"] == 3  # resumable: nothing left to do

    changes = json.loads(invoke(history, ["--memory", str(mem), "m:biscuit", "--json"], tmp_path).stdout)["changes"]
    assert [(c["value"], c["current"]) for c in changes] == [("beagle", False), ("basset hound", True)]
    text = invoke(history, ["--memory", str(mem), "m:biscuit"], tmp_path).stdout
    assert "pcm:petBreed" in text and '"beagle"' in text and "superseded 2025-03-03T17:11:00-08:00" in text
    assert '"basset hound"' in text and "current" in text

    pairs = json.loads(invoke(duplicates, ["--memory", str(mem), "--json"], tmp_path).stdout)
    assert [(p["label_a"], p["label_b"], p["reason"]) for p in pairs] == [
        ("Biscuit", "biscuit", "same label, different types")
    ]
    assert "m:biscuit \"Biscuit\"  ~  m:biscuit-person" in invoke(duplicates, ["--memory", str(mem)], tmp_path).stdout


def test_failed_posts_are_listed_and_can_be_retried(mem: Path, tmp_path: Path) -> None:
    out = invoke(extract, ["--memory", str(mem), "--pending"], tmp_path, ["nope"] * 3 + [BASSET, PERSON])
    assert out.exit_code == 0
    assert "extracted 2, failed 1" in out.stdout and "failed " in out.stderr
    retry = invoke(extract, ["--memory", str(mem), "--failed", "--json"], tmp_path, [BEAGLE])
    assert json.loads(retry.stdout)["extracted"] == 1


@pytest.mark.parametrize("flags", [[], ["--pending", "--all"]])
def test_extract_needs_exactly_one_selection(mem: Path, tmp_path: Path, flags: list[str]) -> None:
    out = invoke(extract, ["--memory", str(mem), *flags], tmp_path, [])
    assert out.exit_code == 2 and "exactly one of --pending, --failed, --gated or --all" in out.stderr


def test_extract_without_an_llm_says_how_to_configure_one(mem: Path, tmp_path: Path) -> None:
    out = invoke(extract, ["--memory", str(mem), "--pending"], tmp_path)
    assert out.exit_code == 2 and "no LLM configured" in out.stderr


def test_history_of_an_entity_without_changes(mem: Path, tmp_path: Path) -> None:
    out = invoke(history, ["--memory", str(mem), "m:owner"], tmp_path)
    assert out.exit_code == 0 and out.stdout.startswith("no recorded change for m:owner")


def test_extract_explain_lists_the_values_left_out(mem: Path, tmp_path: Path) -> None:
    invented = BEAGLE.replace('pcm:petBreed "beagle"', 'pcm:petBreed "beagle" ; schema:color "gold"')
    out = invoke(extract, ["--memory", str(mem), "--pending", "--explain"], tmp_path, [invented, BASSET, PERSON])
    assert out.exit_code == 0, out.output
    assert "1 value(s) not in the words said left out" in out.stdout
    assert 'm:biscuit schema:color "gold"' in out.stdout
    report = json.loads(invoke(extract, ["--memory", str(mem), "--all", "--force", "--json"], tmp_path,
                               [invented, BASSET, PERSON]).stdout)
    assert report["ungrounded"] == 1 and report["left_out"][0]["report"].startswith("left out 1 value(s)")

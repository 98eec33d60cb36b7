"""`ask` is one record on every face: the CLI's `--json`, the HTTP API, MCP (over the server's /mcp and in process)
and the Python API give the same answer, field by field (citations with `text`, facts, warnings, `as_of` with its
zone), with `as_of` absent, as ISO text without a zone, and as a naive `datetime` (Python) or its ISO text.

The model is the scripted one (``PCM_LLM=scripted:FILE``): it writes the same SPARQL query for every question, so
each face makes the same single call and answers from the graph.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from mcp import Client

from pcm.cli import main as pcm
from pcm.conversations import Conversation, Utterance
from pcm.mcp_server import build_server
from pcm.memory import Memory
from pcm.settings import LLMSpec, Settings
from tests.endpoint.test_endpoint_support import serving
from tests.retrieval.test_ask_repair import GOOD_BREED, UTTERANCES, reply, write_facts

QUESTION = "What breed is Biscuit?"
#: (as given to the Python API, as given to the other faces, the as_of every face answers with; None: now)
AS_OF: list[tuple[Any, str | None, str | None]] = [
    (None, None, None),
    ("2025-04-01", "2025-04-01", "2025-04-01T00:00:00+00:00"),
    (datetime(2025, 4, 1, 9, 30), "2025-04-01T09:30:00", "2025-04-01T09:30:00+00:00"),
]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("ask-parity")
    template = root / "template"
    with Memory.init(Settings(memory=template, index_enabled=False), owner="Dana Whitfield") as memory:
        memory.ingest([Conversation("small", [
            Utterance("small", i, "user", text, timestamp=datetime.fromisoformat(when), source_id=f"u{i}")
            for i, (when, text) in enumerate(UTTERANCES)
        ])])
        write_facts(memory)
    for face in ("cli", "http", "python"):
        shutil.copytree(template, root / face)
    (root / "script.json").write_text(json.dumps([reply(GOOD_BREED)] * 40), encoding="utf-8")
    yield root


def _settings(root: Path, face: str) -> Settings:
    return Settings(memory=root / face, index_enabled=False,
                    llm=LLMSpec.parse(f"scripted:{root / 'script.json'}")).with_(extraction_mode="inline")


def _python(root: Path) -> list[dict[str, Any]]:
    with Memory.open(_settings(root, "python")) as memory:
        return [memory.ask(QUESTION, as_of=given).as_json() for given, _, _ in AS_OF]


def _cli(root: Path) -> list[dict[str, Any]]:
    env = {"PCM_LLM": f"scripted:{root / 'script.json'}", "PCM_INDEX": "off", "PCM_EXTRACTION": "inline",
           "PCM_MEMORY": None, "PCM_STORE_URL": None, "PCM_TOKEN": None}
    answers = []
    for _, text, _ in AS_OF:
        args = ["--memory", str(root / "cli"), "ask", QUESTION, "--json", *(["--as-of", text] if text else [])]
        done = CliRunner().invoke(pcm, args, env=env)
        assert done.exit_code == 0, done.output
        answers.append(json.loads(done.stdout))
    return answers


def _mcp(target: Any) -> list[dict[str, Any]]:
    async def session() -> list[dict[str, Any]]:
        async with Client(target, read_timeout_seconds=300) as client:
            out = []
            for _, text, _ in AS_OF:
                result = await client.call_tool("ask", {"question": QUESTION, **({"as_of": text} if text else {})})
                assert not result.is_error, result.content
                out.append(dict(result.structured_content or {}))
            return out

    return asyncio.run(session())


@pytest.fixture(scope="module")
def answers(root: Path) -> dict[str, list[dict[str, Any]]]:
    faces = {"python": _python(root), "cli": _cli(root)}
    with serving(_settings(root, "http")) as server:
        faces["http"] = [
            httpx.post(server.url + "/api/ask", json={"question": QUESTION, **({"as_of": text} if text else {})},
                       timeout=300).json()
            for _, text, _ in AS_OF
        ]
        faces["mcp over http"] = _mcp(server.url + "/mcp")
        assert server.app is not None
        faces["mcp in process"] = _mcp(build_server(server.memory, lock=server.app.memory_lock))
    return faces


def test_ask_is_one_record_on_every_face(answers: dict[str, list[dict[str, Any]]]) -> None:
    reference = answers["python"]
    assert [a["answer"] for a in reference] == ["Beagle."] * len(AS_OF), reference
    assert all(a["citations"] and a["citations"][0]["text"].startswith("My dog Biscuit") for a in reference)
    for face, got in answers.items():
        assert len(got) == len(AS_OF), face
        for (given, _, read), want, have in zip(AS_OF, reference, got, strict=True):
            if read is None:  # now: each face asked at its own moment, with a zone
                assert datetime.fromisoformat(have["as_of"]).tzinfo is not None, face
                have, want = {**have, "as_of": None}, {**want, "as_of": None}
            else:
                assert have["as_of"] == read, (face, given, have["as_of"])
            assert set(have) == set(want), (face, sorted(set(have) ^ set(want)))
            for field in want:
                assert have[field] == want[field], (face, given, field, have[field], want[field])


def test_the_answer_times_carry_their_zone(answers: dict[str, list[dict[str, Any]]]) -> None:
    for face, got in answers.items():
        for answer in got:
            for cited in answer["citations"]:
                assert datetime.fromisoformat(cited["time"]).utcoffset() is not None, face
    assert datetime.fromisoformat(answers["python"][1]["as_of"]) == datetime(2025, 4, 1, tzinfo=UTC)

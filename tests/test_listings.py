"""List, get and delete for stored messages and for facts (what mem0's ``get_all`` / ``get`` / ``delete`` and the
reference MCP memory server's ``read_graph`` / ``open_nodes`` / ``delete_*`` give an assistant), on every face: the
Python API, the HTTP API of a real ``pcm serve``, and MCP through the SDK's client, with the same records
(:mod:`pcm.models`) field by field, and the same one line for what is not there."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from pcm.errors import InputError, NotFound, OutOfRange
from pcm.extraction import extract_posts
from pcm.llm import ScriptedClient
from pcm.memory import Memory
from pcm.models import Fact, Message
from pcm.namespaces import SCHEMA
from pcm.settings import Settings
from tests.memory_template import memory_copy
from tests.serve_process import served_with_log

TOKEN = "owner-secret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PORTLAND = 'm:owner schema:homeLocation m:portland .\nm:portland a schema:City ; rdfs:label "Portland" .'
SEATTLE = 'm:owner schema:homeLocation m:seattle .\nm:seattle a schema:City ; rdfs:label "Seattle" .'
BIKE = 'm:owner schema:owns m:bike .\nm:bike a schema:Product ; rdfs:label "blue Trek bike" .'


def fill(memory: Memory) -> list[str]:
    """Four messages in two sessions, three of them with facts: Portland, then Seattle (a knowledge update), a
    bike; the last message says nothing."""
    said = [
        ("I live in Portland", "2025-03-01T10:00", "s1", "k1", PORTLAND),
        ("I bought a blue Trek bike", "2025-03-02T10:00", "s1", "k2", BIKE),
        ("I moved to Seattle", "2025-03-09T10:00", "s2", "k3", SEATTLE),
        ("thanks, bye", "2025-03-10T10:00+02:00", "s2", "k4", None),
    ]
    posts = []
    for text, at, session, key, facts in said:
        post = memory.remember(text, at=at, session=session, key=key).post
        if facts is not None:
            extract_posts(memory.context, [post], client=ScriptedClient([facts]), concurrency=1)
        posts.append(post)
    return posts


@pytest.fixture
def memory(template: Path, tmp_path: Path) -> Iterator[Memory]:
    with memory_copy(template, tmp_path) as opened:
        yield opened


def test_messages_are_listed_in_pages_oldest_first_and_filtered_by_session_and_time(memory: Memory) -> None:
    posts = fill(memory)
    first = memory.messages(limit=3)
    assert [m.post for m in first.messages] == posts[:3]
    assert (first.total, first.offset, first.next_offset) == (4, 0, 3)
    rest = memory.messages(limit=3, offset=first.next_offset or 0)
    assert [m.post for m in rest.messages] == posts[3:] and rest.next_offset is None
    assert [m.text for m in memory.messages(session="s2").messages] == ["I moved to Seattle", "thanks, bye"]
    # a time without a zone is the memory's (UTC); the last message was said at 08:00 UTC
    window = memory.messages(since="2025-03-02T10:00", until=datetime_text(2025, 3, 10, 8, 30))
    assert [m.source_id for m in window.messages] == ["k2", "k3", "k4"]
    assert all(m.time is not None and m.time.tzinfo is not None for m in first.messages)


def datetime_text(*parts: int) -> str:
    return datetime(*parts, tzinfo=UTC).isoformat()


def test_a_message_is_got_by_its_post_iri_its_curie_or_its_message_id(memory: Memory) -> None:
    posts = fill(memory)
    got = memory.message("k2")
    assert isinstance(got, Message)
    assert got == memory.message(posts[1]) == memory.messages(limit=1, offset=1).messages[0]
    assert got.as_json() == {"post": posts[1], "source_id": "k2", "session": "s1", "time": "2025-03-02T10:00:00+00:00",
                             "speaker": None, "role": "user", "text": "I bought a blue Trek bike"}
    curie = "m:" + posts[1].removeprefix(memory.manifest.namespace)
    assert memory.message(curie) == got


@pytest.mark.parametrize(("call", "error", "line"), [
    (lambda m: m.message("no-such"), NotFound, "no post 'no-such' in this memory"),
    (lambda m: m.messages(session="nope"), NotFound, "no session 'nope' in this memory"),
    (lambda m: m.facts(session="nope"), NotFound, "no session 'nope' in this memory"),
    (lambda m: m.messages(limit=0), OutOfRange, "limit (items per page) must be a whole number from 1 to 1000, got 0"),
    (lambda m: m.facts(offset=-1), OutOfRange, "offset must be a whole number from 0 to 1000000000, got -1"),
    (lambda m: m.fact("not a fact"), InputError, "'not a fact' is not a fact id"),
    (lambda m: m.delete_fact("PGh0dHA6Ly9hL2I-IDxodHRwOi8vYS9wPiA8aHR0cDovL2EvYz4"), NotFound, "no fact"),
    (lambda m: m.delete_messages(post="no-such"), NotFound, "no post 'no-such' in this memory"),
])
def test_what_is_not_there_is_refused_in_one_line(memory: Memory, call: Any, error: type[Exception], line: str) -> None:
    fill(memory)
    with pytest.raises(error) as refused:
        call(memory)
    assert str(refused.value).startswith(line) and "\n" not in str(refused.value)


def test_facts_are_listed_got_and_deleted_with_the_deletion_in_history(memory: Memory) -> None:
    posts = fill(memory)
    page = memory.facts()
    # Portland was superseded by Seattle: the facts that hold now, said earliest first; cards are no facts
    assert [f.text for f in page.facts] == ["Dana Whitfield schema:owns blue Trek bike", "Dana Whitfield schema:homeLocation Seattle"]
    assert page.total == 2 and page.next_offset is None
    bike, home = page.facts
    assert [s.post for s in home.sources] == [posts[2]] and home.sources[0].session == "s2"
    assert memory.facts(session="s2").facts == [home]
    assert memory.facts(until="2025-03-05").facts == [bike]
    assert memory.facts(limit=1, offset=1).facts == [home]
    assert isinstance(memory.fact(home.id), Fact) and memory.fact(home.id) == home

    deleted = memory.delete_fact(home.id)
    assert deleted.fact == home
    assert memory.facts().facts == [bike]
    with pytest.raises(NotFound, match="no fact"):
        memory.delete_fact(home.id)  # refused, and nothing written twice
    changes = memory.history("m:owner").changes
    over = [v for v in changes if v.value.endswith("/seattle")]
    assert len(over) == 1 and over[0].superseded_by is None and over[0].said_by == posts[2]
    assert datetime.fromisoformat(over[0].superseded_at or "") == deleted.recorded
    assert not any(v.current for v in changes if v.predicate == SCHEMA + "homeLocation")
    # forgetting the message that said it leaves no record of what it said, the deletion included; Portland,
    # which that message had superseded, holds again
    assert memory.delete_messages(post="k3").posts == [posts[2]]
    assert not [v for v in memory.history("m:owner").changes if v.value.endswith("/seattle")]
    assert [f.text for f in memory.facts().facts] == ["Dana Whitfield schema:homeLocation Portland",
                                                       "Dana Whitfield schema:owns blue Trek bike"]


# -- the same through a real `pcm serve`: HTTP and MCP ----------------------------------------------------------------


@pytest.fixture(scope="module")
def expected(template: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A memory filled, and what the Python API answers on it (before a server holds it)."""
    path = tmp_path_factory.mktemp("listings") / "memory"
    shutil.copytree(template, path)
    with Memory.open(Settings(memory=path, index_enabled=False)) as memory:
        fill(memory)
        answers = {
            "posts": [m.post for m in memory.messages().messages],
            "messages": memory.messages(limit=2, offset=1).as_json(),
            "session": memory.messages(session="s2").as_json(),
            "message": memory.message("k2").as_json(),
            "facts": memory.facts().as_json(),
        }
    return path, answers


@pytest.mark.slow
def test_http_and_mcp_list_get_and_delete_as_python_does(expected: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    path, python = expected
    with served_with_log(path, tmp_path / "serve.log", token=TOKEN) as served:
        api = served.url + "/api"
        get = lambda route, **params: httpx.get(api + route, params=params, timeout=120)  # noqa: E731
        assert get("/messages", limit="2", offset="1").json() == python["messages"]
        assert get("/messages", session="s2").json() == python["session"]
        assert get("/message", post="k2").json() == python["message"]
        assert get("/facts").json() == python["facts"]
        home = python["facts"]["facts"][1]
        assert get("/fact", id=home["id"]).json() == home
        missing = get("/message", post="no-such")
        assert (missing.status_code, missing.json()["error"]) == (404, "no post 'no-such' in this memory")
        assert get("/messages", limit="0").status_code == 400
        # deletes need the token, and a fact deleted is not there to delete again
        assert httpx.delete(api + "/fact", params={"id": home["id"]}).status_code == 401
        deleted = httpx.delete(api + "/fact", params={"id": home["id"]}, headers=AUTH, timeout=120)
        assert deleted.status_code == 200 and deleted.json()["fact"] == home
        again = httpx.delete(api + "/fact", params={"id": home["id"]}, headers=AUTH, timeout=120)
        assert again.status_code == 404 and again.json()["error"].startswith("no fact")
        assert httpx.post(api + "/forget", json={"post": "k4"}).status_code == 401
        forgot = httpx.post(api + "/forget", json={"post": "k4"}, headers=AUTH, timeout=120)
        assert forgot.status_code == 200 and len(forgot.json()["posts"]) == 1
        gone = httpx.delete(api + "/message", params={"post": "k1"}, headers=AUTH, timeout=120)
        assert gone.status_code == 200 and gone.json()["posts"] == [python["posts"][0]]
        assert get("/messages").json()["total"] == 2

        async def session(headers: dict[str, str]) -> Any:
            http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(300.0))
            async with Client(streamable_http_client(served.url + "/mcp", http_client=http),
                              read_timeout_seconds=300) as client:
                names = {t.name for t in (await client.list_tools()).tools}
                assert {"list_messages", "get_message", "list_facts", "get_fact", "delete_fact"} <= names
                listed = (await client.call_tool("list_messages", {})).structured_content
                got = (await client.call_tool("get_message", {"post": "k2"})).structured_content
                facts = (await client.call_tool("list_facts", {"session": "s1"})).structured_content
                bike = facts["facts"][0]
                one = (await client.call_tool("get_fact", {"id": bike["id"]})).structured_content
                missing = await client.call_tool("get_message", {"post": "no-such"})
                delete = await client.call_tool("delete_fact", {"id": bike["id"]})
                return listed, got, facts, one, missing, delete

        listed, got, facts, one, missing, refused = asyncio.run(session({}))
        assert listed == get("/messages").json() and got == python["message"]
        assert facts == get("/facts", session="s1").json() and one == facts["facts"][0]
        assert missing.is_error and missing.content[0].text.endswith("no post 'no-such' in this memory")
        assert refused.is_error and "token" in refused.content[0].text
        *_, deleted_by_owner = asyncio.run(session(AUTH))
        assert not deleted_by_owner.is_error
        assert deleted_by_owner.structured_content["fact"]["id"] == one["id"]
        assert get("/facts", session="s1").json()["facts"] == []



def test_the_cli_json_prints_the_same_records(template: Path, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from pcm.cli import main

    with memory_copy(template, tmp_path) as memory:
        fill(memory)
        python = {"page": memory.messages(session="s2", limit=1).as_json(), "one": memory.message("k2").as_json(),
                  "facts": memory.facts().as_json()}
    path = str(tmp_path / "memory")
    runner = CliRunner(env={"PCM_INDEX": "off", "PCM_LLM": "none"})

    def run(*args: str, code: int = 0) -> Any:
        done = runner.invoke(main, ["--memory", path, *args], catch_exceptions=False)
        assert done.exit_code == code, done.output
        return json.loads(done.stdout) if code == 0 else done.stderr

    assert run("messages", "--session", "s2", "--limit", "1", "--json") == python["page"]
    assert run("message", "k2", "--json") == python["one"]
    assert run("facts", "--json") == python["facts"]
    home = python["facts"]["facts"][1]
    assert run("fact", home["id"], "--json") == home
    assert run("fact", home["id"], "--delete", "--json")["fact"] == home
    assert run("fact", home["id"], "--delete", "--json", code=3).startswith("pcm: error: no fact")
    assert run("messages", "--limit", "0", code=2).startswith("pcm: error: limit (items per page) must be")

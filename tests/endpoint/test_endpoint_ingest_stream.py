"""``POST /api/ingest`` asked for JSON lines streams its progress as ``/api/import`` does (a file's messages stored one
by one, one message as 0 then 1 of 1), then the result; without that ``Accept`` the answer is the result alone.
:class:`ServeClient` (what ``pcm ingest`` uses beside a running server) follows the stream."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from pcm.endpoint import discover
from pcm.endpoint.client import ServeClient
from tests.endpoint.test_endpoint_support import AUTH, TOKEN

STREAM = {**AUTH, "Accept": "application/x-ndjson"}


def _events(url: str, **request: Any) -> list[dict[str, Any]]:
    with httpx.stream("POST", url + "/api/ingest", timeout=120, **request) as answer:
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/x-ndjson")
        return [json.loads(line) for line in answer.iter_lines() if line.strip()]


def test_a_file_body_streams_each_stored_message_then_the_result(url: str) -> None:
    chat = {"conversation_id": "streamed-file", "messages": [
        {"id": f"s{n}", "role": "user", "content": f"Streamed note {n}.", "timestamp": f"2025-07-0{n + 1}T10:00:00Z"}
        for n in range(3)]}
    events = _events(url, json=chat, headers=STREAM)
    progress = [e for e in events if e["event"] == "progress"]
    assert progress[0] == {"event": "progress", "done": 0, "total": 3}, events
    assert [e["done"] for e in progress][-1] == 3 and events[-1]["event"] == "result", events
    assert events[-1]["result"]["stored"] == 3 and len(events[-1]["result"]["posts"]) == 3


def test_one_message_streams_and_a_plain_answer_stays_the_result(url: str) -> None:
    body = {"text": "The streamed heron came back to the pond.", "session": "streamed-text", "id": "heron-1"}
    events = _events(url, json=body, headers=STREAM)
    assert [(e["event"], e.get("done"), e.get("total")) for e in events[:-1]] == [("progress", 0, 1), ("progress", 1, 1)]
    assert events[-1]["event"] == "result" and events[-1]["result"]["stored"] == 1, events
    plain = httpx.post(url + "/api/ingest", json=body, headers=AUTH, timeout=120)
    assert plain.headers["content-type"].startswith("application/json") and plain.json()["duplicates"] == 1


def test_a_refused_body_is_the_same_one_line_error_streamed_or_not(url: str) -> None:
    """A body that cannot be read is refused before the stream starts; one the memory refuses (an unknown role)
    ends the stream with the error line and exit code the plain answer gives."""
    unreadable = httpx.post(url + "/api/ingest", content=b"not json", headers=STREAM, timeout=120)
    assert unreadable.status_code == 400 and unreadable.json()["error"].startswith("the body is not JSON")
    body = {"text": "x", "role": "narrator"}
    plain = httpx.post(url + "/api/ingest", json=body, headers=AUTH, timeout=120)
    assert plain.status_code == 400 and "role" in plain.json()["error"], plain.text
    events = _events(url, json=body, headers=STREAM)
    assert events[-1] == {"event": "error", **plain.json()}, events
    assert httpx.post(url + "/api/ingest", json={"text": "x"}, headers={"Accept": "application/x-ndjson"},
                      timeout=120).status_code == 401


def test_the_client_follows_the_stream_for_a_file_and_a_text(memory_settings: Any, url: str, tmp_path: Path) -> None:
    info = discover(memory_settings.memory)
    assert info is not None
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps({"conversation_id": "client-file", "messages": [
        {"id": "c1", "role": "user", "content": "The client sent this.", "timestamp": "2025-08-01T10:00:00Z"},
        {"id": "c2", "role": "user", "content": "And this one.", "timestamp": "2025-08-01T10:01:00Z"}]}))
    seen: list[dict[str, Any]] = []
    with ServeClient(info, token=TOKEN) as client:
        report = client.ingest_file(chat, on_progress=seen.append)
        assert (report["added"], report["skipped"]) == (2, 0)
        assert [e["done"] for e in seen] == [0, 1, 2] and seen[0]["total"] == 2
        seen.clear()
        said = client.ingest_text("A text through the client.", session="client-text", on_progress=seen.append)
        assert said["added"] == 1 and [e["done"] for e in seen] == [0, 1]


def test_cli_ingest_of_files_and_text_goes_through_the_server(memory_settings: Any, url: str, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from pcm.cli import main as cli

    files = []
    for n in range(2):
        files.append(tmp_path / f"cli-{n}.json")
        files[-1].write_text(json.dumps({"conversation_id": f"cli-file-{n}", "messages": [
            {"id": f"f{n}", "role": "user", "content": f"CLI file message {n}.", "timestamp": "2025-09-01T10:00:00Z"}]}))
    runner, env = CliRunner(), {"PCM_TOKEN": TOKEN}
    done = runner.invoke(cli, ["--memory", str(memory_settings.memory), "ingest", *map(str, files), "--json"], env=env)
    assert done.exit_code == 0, done.output
    assert (json.loads(done.stdout)["added"], json.loads(done.stdout)["utterances"]) == (2, 2)
    said = runner.invoke(cli, ["--memory", str(memory_settings.memory), "ingest", "--text", "CLI text message.",
                               "--session", "cli-text"], env=env)
    assert said.exit_code == 0 and f"through pcm serve at {url}" in said.stdout, said.output
    conversation = httpx.get(url + "/api/conversation", params={"id": "cli-text"}, timeout=120).json()
    assert [p["text"] for p in conversation["posts"]] == ["CLI text message."]

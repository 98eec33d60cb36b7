"""One error model on every face: the same bad input gives the same one line through the CLI (with and without
``--json``, after ``pcm: error: ``), the HTTP API of a real ``pcm serve`` (httpx), MCP (the SDK's client over
stdio, a real ``pcm mcp``; after the SDK's ``Error executing tool NAME: ``) and the Python API, with the exit code,
HTTP status and error class :mod:`pcm.errors` gives it, and no traceback.

Each face works on its own copy of one memory (a served memory and a memory ``pcm mcp`` holds cannot be shared).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client, StdioServerParameters

from pcm.errors import (
    BadIri,
    BadText,
    BadTime,
    InputError,
    InputTooLarge,
    NotFound,
    OutOfRange,
    PcmError,
    QueryError,
    TokenRefused,
)
from pcm.memory import Memory
from pcm.settings import Settings
from tests.serve_process import SRC, serve_process

pytestmark = pytest.mark.slow  # three processes started, and one CLI process per input and flag

TOKEN = "parity-secret"
MAX_CHARS = 1000
TOO_LONG = "x" * (MAX_CHARS + 500)
BAD = "caf\udcff"  # what Python makes of the byte 0xFF in an argument, and what JSON spells "caf\udcff"
BAD_ARG = b"caf\xff"


@dataclass
class Case:
    """One bad input: the operation, its arguments, and the error class every face must report."""

    name: str
    op: str
    args: dict[str, Any]
    error: type[PcmError]
    faces: tuple[str, ...] = ("cli", "http", "mcp", "python")
    expect: list[str] = field(default_factory=list)


CASES = [
    Case("iri with a space", "why", {"iri": "a b"}, BadIri),
    Case("iri in brackets with spaces", "why", {"iri": "<not an iri>"}, BadIri),
    Case("m: with no slug", "why", {"iri": "m:"}, BadIri),
    Case("history of an iri with a space", "history", {"iri": "a b"}, BadIri),
    Case("as_of not a date", "ask", {"question": "What is my dog called?", "as_of": "yesterday-ish"}, BadTime),
    Case("as_of a day that is none", "ask", {"question": "What is my dog called?", "as_of": "2025-02-30"}, BadTime),
    Case("since a month that is none", "recall", {"text": "dog", "since": "2025-13-01"}, BadTime),
    Case("at not a time", "remember", {"text": "I walked Biscuit", "at": "soon"}, BadTime),
    Case("ask k 0", "ask", {"question": "What is my dog called?", "k": 0}, OutOfRange),
    Case("ask k over the bound", "ask", {"question": "What is my dog called?", "k": 101}, OutOfRange),
    Case("recall k 0", "recall", {"text": "dog", "k": 0}, OutOfRange),
    Case("recall k over the bound", "recall", {"text": "dog", "k": 1001}, OutOfRange),
    Case("sparql limit 0", "sparql", {"query": "SELECT * WHERE { ?s ?p ?o }", "limit": 0}, OutOfRange,
         faces=("cli", "mcp", "python")),
    Case("unknown role", "remember", {"text": "I walked Biscuit", "role": "boss"}, InputError),
    # the MCP SDK's client cannot send a lone surrogate (it refuses to serialise one): three faces
    Case("invalid unicode in a question", "ask", {"question": BAD}, BadText, faces=("cli", "http", "python")),
    Case("invalid unicode in a message", "remember", {"text": BAD}, BadText, faces=("cli", "http", "python")),
    Case("invalid unicode in recall", "recall", {"text": BAD}, BadText, faces=("cli", "python")),
    Case("message too long", "remember", {"text": TOO_LONG}, InputTooLarge),
    Case("messages limit 0", "messages", {"limit": 0}, OutOfRange),
    Case("messages since not a date", "messages", {"since": "soon"}, BadTime),
    Case("messages of no such session", "messages", {"session": "nope"}, NotFound),
    Case("no such message", "message", {"post": "no-such"}, NotFound),
    Case("facts offset below 0", "facts", {"offset": -1}, OutOfRange),
    Case("not a fact id", "fact", {"id": "not a fact"}, InputError),
    Case("no such fact", "fact", {"id": "PGh0dHA6Ly9hL2I-IDxodHRwOi8vYS9wPiA8aHR0cDovL2EvYz4"}, NotFound),
    Case("sparql syntax error on line 1", "sparql", {"query": "SELECT ?s WHERE { ?s ?p ?o "}, QueryError,
         faces=("cli", "mcp", "python"), expect=["at 1:"]),
    Case("sparql syntax error on line 2", "sparql", {"query": "SELECT ?s\nWHERE { ?s schema:name ?n "}, QueryError,
         faces=("cli", "mcp", "python"), expect=["at 2:"]),
]


# -- the four faces ------------------------------------------------------------------------------------------------


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(SRC), "PCM_LLM": "none", "PCM_INDEX": "off",
           "PCM_MAX_UTTERANCE_CHARS": str(MAX_CHARS)}
    for name in ("PCM_MEMORY", "PCM_STORE_URL", "PCM_TOKEN"):
        env.pop(name, None)
    return env


def _cli_args(op: str, args: dict[str, Any]) -> list[str | bytes]:
    def arg(value: Any) -> str | bytes:
        return BAD_ARG if value == BAD else str(value)

    if op in ("why", "history"):
        return [op, arg(args["iri"])]
    if op in ("message", "fact"):
        return [op, arg(args["post" if op == "message" else "id"])]
    if op in ("messages", "facts"):
        return [op, *[part for name, value in args.items() for part in (f"--{name}", arg(value))]]
    if op == "ask":
        out: list[str | bytes] = ["ask", arg(args["question"])]
    elif op == "recall":
        out = ["recall", arg(args["text"])]
    elif op == "remember":
        out = ["ingest", "--text", arg(args["text"])]
    else:
        out = ["sparql", args["query"]]
    flags = {"k": "--k", "as_of": "--as-of", "since": "--since", "at": "--at", "role": "--role", "limit": "--limit"}
    for name, flag in flags.items():
        if name in args:
            out += [flag, arg(args[name])]
    return out


def cli(memory: Path, op: str, args: dict[str, Any], *, as_json: bool) -> tuple[int, str]:
    """The exit code and stderr of one `pcm` command."""
    command: list[str | bytes] = [sys.executable, "-m", "pcm.cli", "--memory", str(memory), *_cli_args(op, args)]
    if as_json:
        command.append("--json")
    done = subprocess.run(command, env=_env(), capture_output=True, timeout=300)
    return done.returncode, done.stderr.decode("utf-8", "replace")


def http(url: str, op: str, args: dict[str, Any], token: str | None = TOKEN) -> httpx.Response:
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    body = json.dumps(args).encode("ascii")  # a lone surrogate as JSON spells it, "\udcff" (httpx's own refuses it)
    if op in ("why", "history"):
        return httpx.get(f"{url}/api/{op}", params={"iri": args["iri"]}, timeout=120)
    if op in ("messages", "message", "facts", "fact"):
        return httpx.get(f"{url}/api/{op}", params={k: str(v) for k, v in args.items()}, timeout=120)
    if op == "ask":
        return httpx.post(url + "/api/ask", content=body, headers=headers, timeout=120)
    if op == "recall":
        params = {("q" if k == "text" else k): str(v) for k, v in args.items()}
        return httpx.get(url + "/api/recall", params=params, timeout=120)
    assert op == "remember"
    return httpx.post(url + "/api/ingest", content=body, headers=headers, timeout=120)


def mcp_call(op: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    listings = {"messages": "list_messages", "message": "get_message", "facts": "list_facts", "fact": "get_fact"}
    if op in listings:
        return listings[op], args
    if op == "recall":
        return "recall", {("query" if k == "text" else k): v for k, v in args.items()}
    if op == "remember":
        return "remember", {("time" if k == "at" else k): v for k, v in args.items()}
    return op, args


def python(memory: Memory, op: str, args: dict[str, Any]) -> Any:
    if op == "why":
        return memory.why(args["iri"])
    if op == "history":
        return memory.history(args["iri"])
    if op == "messages":
        return memory.messages(**args)
    if op == "message":
        return memory.message(args["post"])
    if op == "facts":
        return memory.facts(**args)
    if op == "fact":
        return memory.fact(args["id"])
    if op == "ask":
        return memory.ask(args["question"], k=args.get("k", 5), as_of=args.get("as_of"))
    if op == "recall":
        return memory.recall(args["text"], args.get("k", 10), since=args.get("since"))
    if op == "remember":
        return memory.remember(args["text"], at=args.get("at"), role=args.get("role", "user"))
    return memory.sparql(args["query"], limit=args.get("limit"))


# -- fixtures ------------------------------------------------------------------------------------------------------


@dataclass
class Faces:
    root: Path
    url: str
    lines: dict[str, dict[str, str]] = field(default_factory=dict)  # case -> face -> line

    def memory(self, name: str) -> Path:
        return self.root / name


@pytest.fixture(scope="module")
def faces(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Faces]:
    root = tmp_path_factory.mktemp("faces")
    template = root / "template"
    with Memory.init(Settings(memory=template, index_enabled=False), owner="Dana") as memory:
        memory.remember("I adopted a beagle called Biscuit", at="2025-03-02T10:00+00:00")
    for name in ("cli", "http", "mcp", "python"):
        shutil.copytree(template, root / name)
    env = {**_env(), "PCM_TOKEN": TOKEN}
    log = (root / "serve.log").open("w")
    with log, serve_process(root / "http", env=env, stderr=log, why=lambda _: (root / "serve.log").read_text()) as (
        _,
        announced,
    ):
        yield Faces(root, announced["url"])


def _one_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, text
    assert "Traceback" not in text, text
    return lines[0]


def _mcp_lines(memory: Path, cases: list[Case]) -> dict[str, str]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "pcm.cli", "--memory", str(memory), "mcp"],
                                   env=_env(), cwd=str(memory.parent))
    lines: dict[str, str] = {}

    async def session() -> None:
        async with Client(params, read_timeout_seconds=300) as client:
            for case in cases:
                tool, arguments = mcp_call(case.op, case.args)
                result = await client.call_tool(tool, arguments)
                assert result.is_error, (case.name, result)
                lines[case.name] = _one_line(result.content[0].text)  # type: ignore[union-attr]

    asyncio.run(session())
    return lines


# -- the tests -----------------------------------------------------------------------------------------------------


def test_at_least_fifteen_bad_inputs() -> None:
    assert len(CASES) >= 15


def test_every_bad_input_is_the_same_one_line_on_every_face(faces: Faces) -> None:
    expected: dict[str, tuple[str, PcmError]] = {}
    with Memory.open(Settings(memory=faces.memory("python"), index_enabled=False,
                              max_utterance_chars=MAX_CHARS)) as memory:
        for case in CASES:
            with pytest.raises(PcmError) as caught:
                python(memory, case.op, case.args)
            error = caught.value
            assert isinstance(error, case.error), (case.name, type(error), error)
            line = _one_line(str(error))
            for part in case.expect:
                assert part in line, (case.name, line)
            expected[case.name] = (line, error)

    mcp = _mcp_lines(faces.memory("mcp"), [c for c in CASES if "mcp" in c.faces])
    for case in CASES:
        line, error = expected[case.name]
        if "mcp" in case.faces:  # the SDK frames every tool error as the CLI frames it with "pcm: error: "
            tool = mcp_call(case.op, case.args)[0]
            assert mcp[case.name] == f"Error executing tool {tool}: {line}", (case.name, mcp[case.name], line)
        if "http" in case.faces:
            answer = http(faces.url, case.op, case.args)
            assert answer.status_code == error.http_status, (case.name, answer.status_code, answer.text)
            assert answer.json() == {"error": line, "exit_code": error.exit_code}, case.name
        for as_json in (False, True):
            code, stderr = cli(faces.memory("cli"), case.op, case.args, as_json=as_json)
            assert (code, _one_line(stderr)) == (error.exit_code, f"pcm: error: {line}"), (case.name, as_json)


def test_a_write_without_the_token_is_one_line_on_every_face(faces: Faces) -> None:
    """The served memory refuses a write without its token: over HTTP, from the CLI (before it sends anything) and
    from Python (which would go through the server)."""
    served = faces.memory("http")
    answer = http(faces.url, "remember", {"text": "I walked Biscuit"}, token=None)
    line = answer.json()["error"]
    assert answer.status_code == TokenRefused.http_status and answer.json()["exit_code"] == TokenRefused.exit_code
    code, stderr = cli(served, "remember", {"text": "I walked Biscuit"}, as_json=True)
    assert (code, _one_line(stderr)) == (TokenRefused.exit_code, f"pcm: error: {line}")
    with pytest.raises(TokenRefused) as refused:
        Memory.open(Settings(memory=served, index_enabled=False))
    assert str(refused.value) == line


def test_bad_input_through_a_running_server_keeps_its_line_and_exit_code(faces: Faces) -> None:
    """`pcm ask` goes through a running `pcm serve`: its refusal of `--k 0` is the line and exit code it would
    give without the server."""
    code, stderr = cli(faces.memory("http"), "ask", {"question": "What is my dog called?", "k": 0}, as_json=False)
    with Memory.open(Settings(memory=faces.memory("python"), index_enabled=False)) as memory, \
            pytest.raises(OutOfRange) as caught:
        memory.ask("What is my dog called?", k=0)
    assert (code, _one_line(stderr)) == (OutOfRange.exit_code, f"pcm: error: {caught.value}")


def test_the_bounds_are_in_the_schemas_every_client_reads(faces: Faces) -> None:
    """The HTTP API's OpenAPI and the MCP tool schemas state the bounds the memory checks, from one place."""
    from pcm.limits import ASK_K, RECALL_K

    spec = httpx.get(faces.url + "/openapi.json", timeout=60).json()
    schemas = spec["components"]["schemas"]
    assert (schemas["AskBody"]["properties"]["k"]["minimum"], schemas["AskBody"]["properties"]["k"]["maximum"]) == (
        ASK_K.low, ASK_K.high)
    assert schemas["RecallQuery"]["properties"]["k"]["maximum"] == RECALL_K.high




def test_as_of_is_read_by_every_face_in_the_memory_zone(faces: Faces) -> None:
    """`as_of` given as ISO text without a zone is the question's date in the memory's zone (UTC here) on every
    face: /api/ask used to ignore it, `Memory.ask` to raise AttributeError."""
    question, as_of, read = "What is my dog called?", "2025-04-01", "2025-04-01T00:00:00+00:00"
    with Memory.open(Settings(memory=faces.memory("python"), index_enabled=False)) as memory:
        assert memory.ask(question, as_of=as_of).as_of.isoformat() == read
        assert memory.ask(question, as_of=datetime(2025, 4, 1)).as_of.isoformat() == read
    answer = httpx.post(faces.url + "/api/ask", json={"question": question, "as_of": as_of}, timeout=120)
    assert answer.status_code == 200 and answer.json()["as_of"] == read
    done = subprocess.run([sys.executable, "-m", "pcm.cli", "--memory", str(faces.memory("cli")), "ask", question,
                           "--as-of", as_of, "--json"], env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and json.loads(done.stdout)["as_of"] == read, done.stderr
    params = StdioServerParameters(command=sys.executable, env=_env(),
                                   args=["-m", "pcm.cli", "--memory", str(faces.memory("mcp")), "mcp"])

    async def session() -> str:
        async with Client(params, read_timeout_seconds=300) as client:
            result = await client.call_tool("ask", {"question": question, "as_of": as_of})
            assert not result.is_error, result.content
            return str(result.structured_content["as_of"])  # type: ignore[index]

    assert asyncio.run(session()) == read


def test_an_entity_page_takes_a_curie_as_why_does(faces: Faces) -> None:
    """/api/entity?iri=m:owner answered an empty page (the CURIE was taken for an IRI); it is expanded as `pcm why`
    expands it."""
    page = httpx.get(faces.url + "/api/entity", params={"iri": "m:owner"}, timeout=120)
    assert page.status_code == 200, page.text
    assert page.json()["iri"].endswith("/owner") and page.json()["label"] == "Dana", page.json()

"""One set of results on every face: the same operations (remember, a duplicate, ingest a file, recall with and
without a time bound, ask with and without ``as_of``, sparql with predeclared and declared prefixes, why, history,
list and get messages and facts, stats, export, forget) through the Python API, the CLI's ``--json`` (in process),
the HTTP API of a ``pcm serve``, MCP at that server's ``/mcp`` and MCP over stdio (a real ``pcm mcp``), each face
on its own copy of one memory, give the same records field by field (where a face has the operation: the HTTP API
has no sparql record, and MCP no file ingest). The export is compared as the dump's sorted lines.

The side index is on (recall); there is no model, so ask answers from the recalled messages and the answer's
``as_of``, when not given, is the moment it was asked (left out of the comparison).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from mcp import Client, StdioServerParameters

from pcm.cli import main as pcm
from pcm.conversations import parse_file
from pcm.memory import Memory
from pcm.settings import LLMSpec, Settings
from tests.endpoint.test_endpoint_support import serving
from tests.serve_process import SRC

pytestmark = pytest.mark.slow  # an embedder, a server and a `pcm mcp` process

TOKEN = "results-secret"
BISCUIT, RIVER = "I adopted a beagle called Biscuit", "We walk along the river every Sunday"
CHAT = {"conversation_id": "file-chat", "messages": [
    {"id": "f1", "role": "user", "content": "My sister Ines lives in Lisbon.", "timestamp": "2025-06-01T10:00:00Z"},
    {"id": "f2", "role": "assistant", "content": "Lisbon is lovely in June.", "timestamp": "2025-06-01T10:00:05Z"}]}
QUESTION = "What is my dog called?"
PREFIXED = "SELECT ?t WHERE { ?p a sioc:Post ; sioc:content ?t } ORDER BY ?t"
DECLARED = "PREFIX s: <http://rdfs.org/sioc/ns#>\nSELECT ?t WHERE { ?p a s:Post ; s:content ?t FILTER(CONTAINS(?t, \"PREFIX\") = false) } ORDER BY ?t"

#: Each operation once, in order: (name, the arguments every face reads).
OPS: list[tuple[str, dict[str, Any]]] = [
    ("remember", {"text": BISCUIT, "at": "2025-03-02T10:00:00+00:00", "session": "s1", "key": "k1"}),
    ("remember another", {"text": RIVER, "at": "2025-03-02T10:02:00+00:00", "session": "s1", "key": "k2"}),
    ("remember again", {"text": BISCUIT, "at": "2025-03-02T10:00:00+00:00", "session": "s1", "key": "k1"}),
    ("ingest a file", {}),
    ("recall", {"text": "dog beagle", "k": 3}),
    ("recall since", {"text": "Lisbon", "k": 3, "since": "2025-05-01"}),
    ("ask", {"question": QUESTION}),
    ("ask as_of", {"question": QUESTION, "as_of": "2025-04-01"}),
    ("sparql", {"query": PREFIXED}),
    ("sparql declared", {"query": DECLARED}),
    ("why", {"iri": "m:biscuit"}),
    ("history", {"iri": "m:owner"}),
    ("messages", {"limit": 2, "offset": 1}),
    ("messages of a session", {"session": "s1"}),
    ("message", {"post": "k2"}),
    ("facts", {}),
    ("fact", {}),
    ("stats", {}),
    ("export", {}),
    ("forget", {"post": "k2"}),
    ("messages after forget", {}),
]


def _template(root: Path) -> Path:
    template = root / "template"
    with Memory.init(Settings(memory=template, llm=LLMSpec()), owner="Dana Whitfield") as memory:
        ns = memory.manifest.namespace
        facts = root / "pets.ttl"
        facts.write_text("@prefix pcm: <https://w3id.org/pcm/ontology#> .\n"
                         "@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n"
                         f'<{ns}biscuit> a pcm:Pet ; rdfs:label "Biscuit" .\n<{ns}owner> pcm:hasPet <{ns}biscuit> .\n'
                         f'<{ns}porto> a <http://schema.org/Place> ; rdfs:label "Porto" .\n'
                         f'<{ns}owner> <http://schema.org/homeLocation> <{ns}porto> .\n')
        memory.import_rdf(facts)
        # a fact deleted: the owner's history then holds a value that is over (and the one that holds)
        memory.delete_fact(next(f.id for f in memory.facts().facts if f.object.endswith("porto")))
    (root / "chat.json").write_text(json.dumps(CHAT), encoding="utf-8")
    return template


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PCM_")}
    return {**env, "PYTHONPATH": str(SRC), "PCM_LLM": "none"}


# -- each face runs OPS and answers with plain JSON ---------------------------------------------------------------


def _python(path: Path, chat: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with Memory.open(Settings(memory=path, llm=LLMSpec())) as memory:
        for name, args in OPS:
            if name.startswith("remember"):
                done = memory.remember(args["text"], at=args["at"], session=args["session"], key=args["key"])
                out[name] = (done.post, done.stored)
            elif name == "ingest a file":
                out[name] = memory.ingest(parse_file(chat)).added
            elif name.startswith("recall"):
                out[name] = [h.as_json() for h in memory.recall(args["text"], args["k"], since=args.get("since"))]
            elif name.startswith("ask"):
                out[name] = memory.ask(args["question"], as_of=args.get("as_of")).as_json()
            elif name.startswith("sparql"):
                result = memory.sparql(args["query"])
                out[name] = {"variables": list(result.variables),  # type: ignore[union-attr]
                             "rows": [{v: t.value for v, t in zip(result.variables, r, strict=True)}  # type: ignore[union-attr]
                                      for r in result.rows]}  # type: ignore[union-attr]
            elif name == "why":
                out[name] = [s.as_json() for s in memory.why(args["iri"])]
            elif name == "history":
                out[name] = memory.history(args["iri"]).as_json()
            elif name.startswith("messages"):
                out[name] = memory.messages(**args).as_json()
            elif name == "message":
                out[name] = memory.message(args["post"]).as_json()
            elif name == "facts":
                out[name] = memory.facts().as_json()
            elif name == "fact":
                out[name] = memory.fact(out["facts"]["facts"][0]["id"]).as_json()
            elif name == "stats":
                out[name] = memory.stats().as_json()
            elif name == "export":
                out[name] = memory.export("nquads").decode("utf-8")
            elif name == "forget":
                out[name] = memory.delete_messages(post=args["post"], purge=False).posts
    return out


def _cli(path: Path, chat: Path) -> dict[str, Any]:
    runner = CliRunner(env={"PCM_LLM": "none", "PCM_MEMORY": None, "PCM_STORE_URL": None, "PCM_TOKEN": None})

    def run(*args: str, as_json: bool = True) -> Any:
        done = runner.invoke(pcm, ["--memory", str(path), *args, *(["--json"] if as_json else [])])
        assert done.exit_code == 0, (args, done.output)
        return json.loads(done.stdout) if as_json else done.stdout

    out: dict[str, Any] = {}
    for name, args in OPS:
        if name.startswith("remember"):
            done = run("ingest", "--text", args["text"], "--at", args["at"], "--session", args["session"],
                       "--key", args["key"])
            out[name] = (done["post"], done["stored"])
        elif name == "ingest a file":
            out[name] = run("ingest", str(chat))["added"]
        elif name.startswith("recall"):
            out[name] = run("recall", args["text"], "--k", str(args["k"]), *(["--since", args["since"]] if "since" in args else []))
        elif name.startswith("ask"):
            out[name] = run("ask", args["question"], *(["--as-of", args["as_of"]] if "as_of" in args else []))
        elif name.startswith("sparql"):
            out[name] = run("sparql", args["query"])
        elif name in ("why", "history"):
            out[name] = run(name, args["iri"])
        elif name.startswith("messages"):
            out[name] = run("messages", *[part for k, v in args.items() for part in (f"--{k}", str(v))])
        elif name == "message":
            out[name] = run("message", args["post"])
        elif name == "facts":
            out[name] = run("facts")
        elif name == "fact":
            out[name] = run("fact", out["facts"]["facts"][0]["id"])
        elif name == "stats":
            out[name] = run("stats")
        elif name == "export":
            out[name] = run("export", "--format", "nquads", as_json=False)
        elif name == "forget":
            out[name] = run("forget", "--post", args["post"], "--no-purge")["forgotten"]
    return out


def _http(url: str, chat: Path, before_forget: Callable[[], None]) -> dict[str, Any]:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    out: dict[str, Any] = {}
    with httpx.Client(base_url=url + "/api", timeout=300) as http:
        def get(route: str, **params: Any) -> Any:
            answer = http.get(route, params={k: str(v) for k, v in params.items()})
            assert answer.status_code == 200, (route, answer.text)
            return answer.json()

        for name, args in OPS:
            if name.startswith("remember"):
                body = {"text": args["text"], "at": args["at"], "session": args["session"], "id": args["key"]}
                done = http.post("/ingest", json=body, headers=auth).json()
                out[name] = (done["posts"][0] if done["posts"] else _post_of(http, args["key"]), bool(done["stored"]))
            elif name == "ingest a file":
                out[name] = http.post("/ingest", content=chat.read_bytes(), headers=auth).json()["stored"]
            elif name.startswith("recall"):
                out[name] = get("/recall", q=args["text"], k=args["k"], **({"since": args["since"]} if "since" in args else {}))
            elif name.startswith("ask"):
                out[name] = http.post("/ask", json=args).json()
            elif name in ("why", "history"):
                out[name] = get("/" + name, iri=args["iri"])
            elif name == "export":
                dump = http.get("/export", params={"format": "nquads"})
                assert dump.status_code == 200, dump.text
                assert dump.headers["content-type"].startswith("application/n-quads"), dump.headers
                out[name] = dump.text
            elif name.startswith("messages"):
                out[name] = get("/messages", **args)
            elif name == "message":
                out[name] = get("/message", post=args["post"])
            elif name == "facts":
                out[name] = get("/facts")
            elif name == "fact":
                out[name] = get("/fact", id=out["facts"]["facts"][0]["id"])
            elif name == "stats":
                out[name] = get("/stats")
            elif name == "forget":
                before_forget()
                out[name] = http.post("/forget", json={"post": args["post"], "purge": False}, headers=auth).json()["posts"]
    return out


def _post_of(http: httpx.Client, key: str) -> str:
    return str(http.get("/message", params={"post": key}).json()["post"])


async def _mcp_session(client: Client, *, writes: bool) -> dict[str, Any]:
    async def call(tool: str, arguments: dict[str, Any]) -> Any:
        result = await client.call_tool(tool, arguments)
        assert not result.is_error, (tool, result.content)
        data = result.structured_content or {}
        return data.get("result", data) if set(data) == {"result"} else data

    out: dict[str, Any] = {}
    for name, args in OPS:
        if name.startswith("remember") and writes:
            done = await call("remember", {"text": args["text"], "time": args["at"], "session": args["session"],
                                           "key": args["key"]})
            out[name] = (done["post"], done["stored"])
        elif name.startswith("recall"):
            out[name] = await call("recall", {"query": args["text"], "k": args["k"],
                                              **({"since": args["since"]} if "since" in args else {})})
        elif name.startswith("ask"):
            out[name] = await call("ask", args)
        elif name.startswith("sparql"):
            found = await call("sparql", args)
            out[name] = {"variables": found["variables"], "rows": found["rows"]}
        elif name in ("why", "history"):
            out[name] = await call(name, args)
        elif name == "export":
            out[name] = await call("export", {"format": "nquads"})
        elif name.startswith("messages") and (writes or name != "messages after forget"):
            out[name] = await call("list_messages", args)
        elif name == "message":
            out[name] = await call("get_message", args)
        elif name == "facts":
            out[name] = await call("list_facts", {})
        elif name == "fact":
            out[name] = await call("get_fact", {"id": out["facts"]["facts"][0]["id"]})
        elif name == "stats":
            out[name] = await call("stats", {})
        elif name == "forget" and writes:
            out[name] = (await call("forget", {"post": args["post"], "purge": False}))["posts"]
    return out


def _mcp_stdio(path: Path, chat: Path) -> dict[str, Any]:
    """MCP has no file ingest: its copy gets the file through the Python API first (a file's posts are named by its
    session and message ids, not by when they were stored, so the memory ends the same)."""
    with Memory.open(Settings(memory=path, llm=LLMSpec())) as memory:
        memory.ingest(parse_file(chat))
    params = StdioServerParameters(command=sys.executable, args=["-m", "pcm.cli", "--memory", str(path), "mcp"],
                                   env=_env(), cwd=str(path.parent))

    async def session() -> dict[str, Any]:
        async with Client(params, read_timeout_seconds=600) as client:
            return await _mcp_session(client, writes=True)

    return asyncio.run(session())


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, Any]]]:
    root = tmp_path_factory.mktemp("face-results")
    template = _template(root)
    for face in ("python", "cli", "http", "mcp"):
        shutil.copytree(template, root / face)
    chat = root / "chat.json"
    faces = {"python": _python(root / "python", chat), "cli": _cli(root / "cli", chat)}
    faces["mcp stdio"] = _mcp_stdio(root / "mcp", chat)
    settings = Settings(memory=root / "http", llm=LLMSpec())
    with serving(settings, token=TOKEN) as server:

        async def over_http() -> dict[str, Any]:
            async with Client(server.url + "/mcp", read_timeout_seconds=600) as client:
                return await _mcp_session(client, writes=False)

        def read_over_mcp() -> None:  # the http face's memory, read before its forget
            faces["mcp http"] = asyncio.run(over_http())

        faces["http"] = _http(server.url, chat, read_over_mcp)
    yield faces


def _same(ours: Any, theirs: Any, path: str = "") -> list[str]:
    """Where two JSON values differ (field paths), floats compared to 1e-6."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        return [d for k in sorted(set(ours) | set(theirs)) for d in _same(ours.get(k), theirs.get(k), f"{path}.{k}")]
    if isinstance(ours, (list, tuple)) and isinstance(theirs, (list, tuple)):
        if len(ours) != len(theirs):
            return [f"{path}: {len(ours)} items vs {len(theirs)}"]
        return [d for n, (a, b) in enumerate(zip(ours, theirs, strict=True)) for d in _same(a, b, f"{path}[{n}]")]
    if isinstance(ours, float) and isinstance(theirs, float):
        return [] if abs(ours - theirs) < 1e-6 else [f"{path}: {ours} vs {theirs}"]
    return [] if ours == theirs else [f"{path}: {ours!r} vs {theirs!r}"]


def _export(text: str) -> list[str]:
    """The dump's lines in order, each activity's start time (when the face ran it) left out."""
    return sorted(re.sub(r'(prov#(?:started|ended)AtTime> )"[^"]*"', r"\1TIME", line) for line in text.splitlines())


#: Fields that are the moment of the call, not the memory's: left out where they are.
_NOW: dict[str, Callable[[Any], Any]] = {
    "export": _export,
    "ask": lambda a: {k: v for k, v in a.items() if k != "as_of"},
    "stats": lambda s: {k: s[k] for k in ("posts", "sessions", "triples", "entities_by_class", "extraction_status")},
}


@pytest.mark.parametrize("face", ["cli", "http", "mcp stdio", "mcp http"])
def test_every_face_gives_the_python_api_results(results: dict[str, dict[str, Any]], face: str) -> None:
    python, theirs = results["python"], results[face]
    assert len(theirs) >= 10, sorted(theirs)
    differences = {}
    for name, value in theirs.items():
        norm = _NOW.get(name.split()[0] if name.split()[0] in _NOW else name, lambda v: v)
        found = _same(norm(python[name]), norm(value))
        if found:
            differences[name] = found[:5]
    assert not differences, differences


def test_about_thirty_operations_are_compared(results: dict[str, dict[str, Any]]) -> None:
    compared = sum(len(r) for face, r in results.items() if face != "python")
    assert compared >= 30 * 2 and len(OPS) >= 20
    assert results["python"]["recall"][0]["text"] == BISCUIT and results["python"]["why"][0]["file"] == "pets.ttl"
    assert [c["current"] for c in results["python"]["history"]["changes"] if c["value"].endswith("porto")] == [False]
    assert "<http://rdfs.org/sioc/ns#content>" in results["python"]["export"]
    assert results["python"]["ask as_of"]["as_of"] == "2025-04-01T00:00:00+00:00"
    assert results["python"]["remember again"] == (results["python"]["remember"][0], False)

"""Shared pieces of the ask tests: the sample memory built through the real extraction pipeline, scripted clients.

The sample memory: the bundled conversations (``src/pcm/samples``) ingested, then extracted by the real pipeline
(normalisation, SHACL, entity resolution, supersession, provenance) with a :class:`ScriptedClient` whose reply is
the Turtle written for each message id in ``tests/fixtures/ask/extraction/<id>.ttl`` ("# nothing to extract" for
the others), the way a model would have answered. Other test files import from here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pcm.conversations import parse_file, sample_paths
from pcm.llm import ScriptedClient
from pcm.llm.base import Message
from pcm.memory import Memory
from pcm.retrieval import ask as ask_module
from pcm.retrieval.ask import CachingClient
from pcm.settings import Settings

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ask"
EXTRACTION = FIXTURES / "extraction"
NOTHING = "# nothing to extract"


def utterance_ids() -> dict[str, str]:
    """Sample utterance text → its message id."""
    ids: dict[str, str] = {}
    for path in sample_paths():
        for message in json.loads(path.read_text(encoding="utf-8"))["messages"]:
            ids[" ".join(message["content"].split())] = message["id"]
    return ids


def extraction_responder() -> Callable[[str, list[Message], str], str]:
    """Reply to an extraction prompt with the fixture Turtle of the utterance it is about."""
    ids = utterance_ids()
    turtle = {p.stem: p.read_text(encoding="utf-8") for p in EXTRACTION.glob("*.ttl")}

    def respond(system: str, messages: list[Message], operation: str) -> str:
        match = re.search(r"<utterance>\s*(.*?)\s*</utterance>", messages[0].content, re.DOTALL)
        text = " ".join(match.group(1).split()) if match else ""
        return turtle.get(ids.get(text, ""), NOTHING)

    return respond


def build_sample_memory(path: Path, *, index: bool) -> Memory:
    """A memory of the sample conversations with their facts extracted (see the module docstring)."""
    from pcm.extraction import extract_posts

    settings = Settings(memory=path, index_enabled=index)
    memory = Memory.init(settings, owner="Dana Whitfield")
    conversations = [c for p in sample_paths() for c in parse_file(p)]
    memory.ingest(conversations)
    fact_ids = {p.stem for p in EXTRACTION.glob("*.ttl")}
    posts = [p.iri for p in memory.store.posts() if p.source_id in fact_ids]
    client = ScriptedClient([extraction_responder()] * (3 * len(posts)))
    report = extract_posts(memory.context, posts, client=client, concurrency=1)
    if report.failed:
        raise AssertionError(f"fixture extraction failed: {report.failures}")
    return memory


def without_traversal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the traversal fallback find nothing: it has its own tests, and its first call loads the embedding
    model (~15 s), which tests of the other routes do not need."""
    monkeypatch.setattr(ask_module, "_traversal_context", lambda *args, **kwargs: [])


@contextmanager
def fresh_reply_cache(memory: Memory) -> Iterator[None]:
    """No model reply cached for ``memory`` leaks into the block or out of it (tests script different replies)."""
    CachingClient.forget(memory.context)
    try:
        yield
    finally:
        CachingClient.forget(memory.context)


def cited_ids(result: object) -> set[str]:
    """The source message ids of the posts an ask result cites."""
    return {p.source_id or "" for p in result.posts}  # type: ignore[attr-defined]


def load_questions() -> list[dict[str, object]]:
    return json.loads((FIXTURES / "questions.json").read_text(encoding="utf-8"))


GOLD_MODEL_QUESTIONS: dict[str, str] = {}
"""Question → gold query (filled below from the fixture)."""


def sparql_reply(query: str) -> str:
    return f"```sparql\n{query.strip()}\n```"


GOLD_MODEL_QUESTIONS.update({str(q["question"]): "\n".join(q["sparql"]) for q in load_questions()})  # type: ignore[arg-type]


def test_every_fixture_names_a_sample_message() -> None:
    ids = set(utterance_ids().values())
    stems = {p.stem for p in EXTRACTION.glob("*.ttl")}
    assert stems and stems <= ids


def test_question_set_covers_the_sample_questions() -> None:
    """Every question of ``src/pcm/samples/questions.json`` is in the set, citing at least its gold evidence."""
    from pcm.resources import samples_dir

    ours = {q["question"]: q for q in load_questions()}
    for gold in json.loads((samples_dir() / "questions.json").read_text(encoding="utf-8")):
        assert gold["question"] in ours, gold["question"]
        assert set(gold["evidence"]) <= set(ours[gold["question"]]["evidence"]), gold["question"]


@pytest.fixture(scope="module")
def sample_memory(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    memory = build_sample_memory(tmp_path_factory.mktemp("ask-sample") / "memory", index=False)
    yield memory
    memory.close()


def test_sample_extraction_lands_in_extraction_graphs(sample_memory: Memory) -> None:
    """Every fixture's facts are in its extraction graph, or moved to the history graph by a later post (a knowledge
    update: sample 14 moves house, so one graph's only fact is superseded)."""
    rows = sample_memory.store.select(
        "SELECT (COUNT(DISTINCT ?g) AS ?n) WHERE { { GRAPH ?g { ?s ?p ?o } } UNION "
        "{ GRAPH <urn:pcm:graph:history> { ?h <http://purl.org/dc/terms/source> ?g } } "
        "FILTER(STRSTARTS(STR(?g), 'urn:pcm:graph:extraction:')) }"
    ).rows
    assert int(rows[0][0].value) == len(list(EXTRACTION.glob("*.ttl")))  # type: ignore[union-attr]

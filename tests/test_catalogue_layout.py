"""Where the vocabulary catalogue goes (``PCM_LLM_CATALOGUE``): the whole of it in the fixed system prompt for a model
that keeps its previous prompt's tokens, each call's own areas in its user turn for every other client."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pcm.catalogue_areas import RESERVED_AREAS
from pcm.conversations import Conversation, Utterance
from pcm.errors import UsageError
from pcm.extraction import extract_posts
from pcm.llm import Message, ScriptedClient
from pcm.llm.base import catalogue_layout
from pcm.memory import Memory
from pcm.ontology import load_ontology
from pcm.retrieval.ask import CachingClient, ask
from pcm.settings import Settings
from tests.memory_template import init_template

T0 = datetime(2025, 3, 3, 17, 10, tzinfo=UTC)
AS_OF = datetime(2025, 10, 1, 12, 0, tzinfo=UTC)
_HEADING = re.compile(r"^## (\w+)$", re.MULTILINE)


class PrefixCacheClient(ScriptedClient):
    """A scripted model that declares what the in-process llama.cpp client declares."""

    prefix_cache = True

    def __init__(self, *args: object, context: int = 16384, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.context = context


def nothing(system: str, messages: list[Message], operation: str) -> str:
    """Nothing to extract, no query, not in memory: the prompts are what these tests look at."""
    if operation in ("extract", "repair"):
        return '{"@graph": []}' if "JSON answer" in messages[0].content else "# nothing to extract"
    return "NOT IN MEMORY" if operation == "answer" else "NO QUERY: a test"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return init_template(tmp_path_factory)


def opened(template: Path, tmp_path: Path, **settings: object) -> Memory:
    import shutil

    path = tmp_path / "memory"
    shutil.copytree(template, path)
    return Memory.open(Settings(memory=path, index_enabled=False).with_(**settings))


@pytest.fixture
def memory(template: Path, tmp_path: Path) -> Iterator[Memory]:
    with opened(template, tmp_path) as mem:
        yield mem


def ingest(memory: Memory, *texts: str) -> list[str]:
    utterances = [Utterance("s1", i, "user", text, timestamp=T0.replace(minute=10 + i), source_id=f"s1-{i}")
                  for i, text in enumerate(texts)]
    return memory.ingest([Conversation("s1", utterances)]).posts


def topics(user: str) -> str:
    """The areas layout's topic section of an extraction user message."""
    return user.split("MORE VOCABULARY (this utterance's topics):\n")[1].split("\n\nMessage time:")[0]


def visible_areas() -> set[str]:
    return {a for a in load_ontology().areas if a not in RESERVED_AREAS}


# ------------------------------------------------------------------------------------------------ the setting


def test_the_setting_parses_and_rejects_a_bad_value_in_one_line() -> None:
    assert Settings.from_env({}).extraction.catalogue == "auto"
    assert Settings.from_env({"PCM_LLM_CATALOGUE": " Whole "}).ask.catalogue == "whole"
    assert Settings.from_env({"PCM_LLM_CATALOGUE": "areas"}).extraction.catalogue == "areas"
    with pytest.raises(UsageError) as error:
        Settings.from_env({"PCM_LLM_CATALOGUE": "everything"})
    assert str(error.value) == "PCM_LLM_CATALOGUE='everything': expected auto, areas or whole"


def test_the_in_process_model_gets_a_window_the_whole_catalogue_fits() -> None:
    from pcm.llm.llamacpp_client import LlamaCppClient

    assert LlamaCppClient.prefix_cache is True
    assert Settings.from_env({}).llm_context == 16384


def test_auto_is_whole_only_for_a_client_with_a_prefix_cache_even_wrapped() -> None:
    class Wrapper:
        def __init__(self, client: object) -> None:
            self.client = client

    assert catalogue_layout("auto", ScriptedClient()) == "areas"
    assert catalogue_layout("auto", PrefixCacheClient()) == "whole"
    assert catalogue_layout("auto", Wrapper(PrefixCacheClient())) == "whole"
    assert catalogue_layout("areas", PrefixCacheClient()) == "areas"
    assert catalogue_layout("whole", ScriptedClient()) == "whole"  # a client that names no window is trusted


def test_a_window_too_small_falls_back_once_under_auto_and_is_an_error_when_whole_was_asked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    small = PrefixCacheClient(context=8192, name="small-window")
    with caplog.at_level(logging.WARNING, logger="pcm.llm.base"):
        assert catalogue_layout("auto", small, whole_tokens=lambda: 9000, what="a test call") == "areas"
        assert catalogue_layout("auto", small, whole_tokens=lambda: 9000, what="a test call") == "areas"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "PCM_LLM_CONTEXT" in warnings[0] and "9000" in warnings[0]
    assert catalogue_layout("auto", small, whole_tokens=lambda: 8192) == "whole"
    with pytest.raises(UsageError, match=r"8192 \(PCM_LLM_CONTEXT\).*PCM_LLM_CATALOGUE=areas"):
        catalogue_layout("whole", small, whole_tokens=lambda: 9000)


# ------------------------------------------------------------------------------------------------ extraction


@pytest.mark.parametrize("output", ["turtle", "json"])
def test_whole_extraction_prompts_share_the_system_prompt_and_carry_no_further_vocabulary(
    memory: Memory, output: str
) -> None:
    posts = ingest(memory, "My bike broke down on the way to work.", "I adopted a beagle called Biscuit.")
    client = PrefixCacheClient([nothing] * 4)
    report = extract_posts(memory.context, posts, client=client, concurrency=1, output=output)
    assert report.failed == 0
    (system0, messages0, _), (system1, messages1, _) = client.requests
    assert system0 == system1
    assert set(_HEADING.findall(system0)) == visible_areas()
    bike, beagle = messages0[0].content, messages1[0].content
    for user in (bike, beagle):
        assert "MORE VOCABULARY" not in user and not _HEADING.findall(user) and "classes:" not in user
    notes = beagle.split("NOTES ON THIS UTTERANCE'S TOPICS:\n")[1].split("\n\nMessage time:")[0]
    assert "- Pets are pcm:Pet" in notes  # the topic notes stay: a line or two
    assert "Pets are pcm:Pet" not in bike and "NOTES ON" not in bike
    assert bike.index("Message time:") < bike.index("<utterance>")


def test_the_json_schema_accepts_every_term_of_the_whole_catalogue(memory: Memory) -> None:
    """The catalogue of the whole layout and the answer's schema come from the same ontology and cover the same
    areas: a term the prompt offers is never refused by the grammar."""
    [post] = ingest(memory, "I adopted a beagle called Biscuit.")
    client = PrefixCacheClient([nothing])
    extract_posts(memory.context, [post], client=client, concurrency=1, output="json")
    system = client.requests[0][0]
    catalogue = system[system.index("\n## people\n"):]
    classes = {c.split("⊑")[0] for line in catalogue.splitlines() if line.startswith("classes: ")
               for c in line[len("classes: "):].split(", ")}
    properties = {
        item.split("⊑")[0].split("→")[0]
        for line in catalogue.splitlines()
        if ": " in line and not line.startswith(("classes: ", "values of ", "## ", "annotations: "))
        for item in line.split(": ", 1)[1].split(", ")
    }
    schema = client.schemas[0]
    assert schema is not None
    node = schema.schema["$defs"]["node"]  # type: ignore[index]
    assert len(classes) > 150 and classes <= set(node["properties"]["@type"]["items"]["enum"])
    assert len(properties) > 150 and properties <= set(node["properties"])


def test_areas_extraction_is_unchanged_for_a_client_without_a_prefix_cache(memory: Memory) -> None:
    posts = ingest(memory, "My bike broke down on the way to work.", "Thanks, bye!")
    client = ScriptedClient([nothing] * 2)
    extract_posts(memory.context, posts, client=client, concurrency=1, output="turtle", gate=False)  # both turns
    (system0, messages0, _), (system1, messages1, _) = client.requests
    assert system0 == system1 and set(_HEADING.findall(system0)) == {"people", "activities", "time", "general"}
    assert "\n## vehicles\n" in "\n" + topics(messages0[0].content) and topics(messages1[0].content) == "(none)"


def test_areas_wins_over_the_prefix_cache_when_set(template: Path, tmp_path: Path) -> None:
    with opened(template, tmp_path, llm_catalogue="areas") as mem:
        [post] = ingest(mem, "I adopted a beagle called Biscuit.")
        client = PrefixCacheClient([nothing])
        extract_posts(mem.context, [post], client=client, concurrency=1, output="turtle")
    assert "\n## pets\n" in topics(client.requests[0][1][0].content)
    assert "## pets" not in client.requests[0][0]


def test_a_window_too_small_for_the_whole_extraction_prompt_keeps_the_areas_layout(memory: Memory) -> None:
    [post] = ingest(memory, "I adopted a beagle called Biscuit.")
    client = PrefixCacheClient([nothing], context=8192)
    extract_posts(memory.context, [post], client=client, concurrency=1, output="turtle")
    assert "\n## pets\n" in topics(client.requests[0][1][0].content)


def test_whole_asked_for_with_a_window_too_small_is_one_clear_error(template: Path, tmp_path: Path) -> None:
    with opened(template, tmp_path, llm_catalogue="whole") as mem:
        [post] = ingest(mem, "I adopted a beagle called Biscuit.")
        with pytest.raises(UsageError, match="PCM_LLM_CONTEXT"):
            extract_posts(mem.context, [post], client=PrefixCacheClient([nothing], context=8192), concurrency=1)


# ------------------------------------------------------------------------------------------------ ask


QUESTIONS = ("How old is my beagle?", "When did my car break down at the repair shop?")


def nl2sparql_requests(client: ScriptedClient) -> list[tuple[str, str]]:
    return [(system, messages[0].content) for system, messages, operation in client.requests if operation == "nl2sparql"]


def first_requests(memory: Memory, client: ScriptedClient) -> list[tuple[str, str]]:
    """Ask each of :data:`QUESTIONS`; the (system, user) of each question's first NL->SPARQL call."""
    for question in QUESTIONS:
        ask(memory.context, question, client=CachingClient(client, memory.context), as_of=AS_OF)
    requests = nl2sparql_requests(client)
    return [next(r for r in requests if f"QUESTION: {q}" in r[1]) for q in QUESTIONS]


def test_whole_ask_prompts_share_the_system_prompt_and_carry_no_further_vocabulary(memory: Memory) -> None:
    firsts = first_requests(memory, PrefixCacheClient([nothing] * 20))
    assert firsts[0][0] == firsts[1][0]
    assert set(_HEADING.findall(firsts[0][0])) == visible_areas()
    for _, user in firsts:
        assert "MORE VOCABULARY" not in user and not _HEADING.findall(user) and user.startswith("PREFIX m: <")


def test_areas_ask_is_unchanged_for_a_client_without_a_prefix_cache(memory: Memory) -> None:
    firsts = first_requests(memory, ScriptedClient([nothing] * 20))
    assert firsts[0][0] == firsts[1][0] and "## pets" not in firsts[0][0] and "## vehicles" not in firsts[0][0]
    assert firsts[0][1].startswith("MORE VOCABULARY FOR THIS QUESTION:\n") and "## pets" in firsts[0][1]
    assert "## vehicles" in firsts[1][1]

"""The question set written for the bundled samples, end to end: real extraction, then ask with gold SPARQL.

The memory is built by :func:`test_ask_support.build_sample_memory` (the real extraction pipeline fed scripted
Turtle). The model is a :class:`ScriptedClient` replaying each question's gold query, so what is tested is
everything around the model: grounding, safety, execution, post-processing, evidence, the answer. Every answer
must hold the expected values and every citation must be exactly the expected utterances (a superset of the
sample set's own gold evidence, see ``test_question_set_covers_the_sample_questions``).

With a real model configured (``PCM_LLM=anthropic:...`` or ``openai:...``) the same set runs against it too.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from pcm.llm import ScriptedClient
from pcm.llm.base import Message
from pcm.memory import Memory
from pcm.retrieval.ask import CachingClient, ask
from pcm.settings import Settings
from tests.retrieval.test_ask_support import build_sample_memory, cited_ids, load_questions, sparql_reply

AS_OF = datetime(2025, 10, 1, 12, 0, tzinfo=UTC)
QUESTIONS = load_questions()
GOLD = {str(q["question"]): "\n".join(q["sparql"]) for q in QUESTIONS}  # type: ignore[arg-type]


def gold_model(system: str, messages: list[Message], operation: str) -> str:
    """The scripted model: the gold query of the question in the prompt; abstains on the fallback prompt."""
    if operation == "answer":
        return "NOT IN MEMORY"
    asked = next(line[len("QUESTION: "):] for line in messages[0].content.splitlines() if line.startswith("QUESTION: "))
    return sparql_reply(GOLD[asked])


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    memory = build_sample_memory(tmp_path_factory.mktemp("ask-e2e") / "memory", index=False)
    CachingClient.forget(memory.context)
    yield memory
    CachingClient.forget(memory.context)
    memory.close()


@pytest.mark.parametrize("item", QUESTIONS, ids=[str(q["question"])[:60] for q in QUESTIONS])
def test_gold_question(sample: Memory, item: dict[str, object]) -> None:
    client = ScriptedClient([gold_model] * 10)
    result = ask(sample.context, str(item["question"]), client=client, as_of=AS_OF)
    assert result.path == item["path"], result.render(explain=True)
    for expected in item["expect"]:  # type: ignore[attr-defined]
        assert str(expected).lower() in result.answer.lower(), f"{expected!r} missing from {result.answer!r}"
    assert cited_ids(result) == set(item["evidence"])  # type: ignore[arg-type]
    if result.path == "sparql":
        assert result.facts and all(f.posts for f in result.facts)
        assert {p for f in result.facts for p in f.posts} == {p.post for p in result.posts}


def test_prompts_stay_within_the_token_budget(sample: Memory) -> None:
    """The whole NL→SPARQL prompt (instructions, examples, catalogue, grounding) is at most ~4k tokens."""
    from pcm.retrieval.grounding import build_grounding
    from pcm.retrieval.nl2sparql import prompt_tokens, system_prompt, user_message

    sizes = []
    for item in QUESTIONS:
        grounding = build_grounding(sample.context, str(item["question"]), as_of=AS_OF)
        from pcm.ontology import load_ontology

        user = user_message(grounding, load_ontology())
        sizes.append(prompt_tokens(system_prompt(grounding.catalogue), [Message.user(user)]))
    assert max(sizes) <= 4000, sizes


def test_the_system_prompt_is_the_same_for_every_question(sample: Memory) -> None:
    """What varies between questions (their further areas) is in the user turn, so a prompt cache keeps the rest."""
    from pcm.ontology import load_ontology
    from pcm.retrieval.grounding import build_grounding
    from pcm.retrieval.nl2sparql import system_prompt, user_message

    groundings = [build_grounding(sample.context, str(item["question"]), as_of=AS_OF) for item in QUESTIONS]
    assert len({system_prompt(g.catalogue) for g in groundings}) == 1
    assert len({g.areas for g in groundings}) > 1  # the questions did choose different areas
    pets = next(g for g in groundings if g.areas is not None and "pets" in g.areas)
    user = user_message(pets, load_ontology())
    assert user.startswith("MORE VOCABULARY FOR THIS QUESTION:\n") and "pcm:Pet" in user
    assert "pcm:Pet:" not in system_prompt(pets.catalogue)
    plain = dataclasses.replace(pets, vocabulary="")  # the core covers the question: no such section
    assert user_message(plain, load_ontology()).startswith("PREFIX m: <")


def test_grounding_offers_the_entities_the_question_names(sample: Memory) -> None:
    from pcm.retrieval.grounding import build_grounding

    grounding = build_grounding(sample.context, "Where did Dana work before Cascade Health?", as_of=AS_OF)
    assert [e.label for e in grounding.entities][:1] == ["Cascade Health"]
    assert grounding.entities[0].iri == sample.naming.namespace + "cascade-health"
    assert "http://rdfs.org/resume-rdf/cv.rdfs#Company" in grounding.entities[0].types
    used = dict(grounding.usage.classes)
    assert used["https://schema.org/BuyAction"] == 3 and used["https://w3id.org/pcm/ontology#Pet"] == 2


@pytest.mark.skipif(
    Settings.from_env().llm.provider not in ("anthropic", "openai"),
    reason="no real LLM configured (set PCM_LLM=anthropic:MODEL or openai:URL#MODEL)",
)
def test_gold_set_against_the_configured_model(sample: Memory) -> None:
    from pcm.llm import make_client

    client = make_client(Settings.from_env())
    assert client is not None
    wrong = []
    for item in QUESTIONS:
        result = ask(sample.context, str(item["question"]), client=client, as_of=AS_OF)
        if not all(str(e).lower() in result.answer.lower() for e in item["expect"]):  # type: ignore[attr-defined]
            wrong.append(f"{item['question']} -> {result.answer} [{result.path}]")
    assert len(wrong) <= len(QUESTIONS) // 5, "\n".join(wrong)

"""The versioned prompt files of ask: their parts, their placeholders and their generated vocabulary block."""

from __future__ import annotations

from pcm.retrieval.answer import answer_prompt
from pcm.retrieval.nl2sparql import PROMPTS_DIR, prompt_file, prompt_version, repair_message, system_prompt


def test_the_nl2sparql_prompt_has_its_parts_and_version() -> None:
    prompt = prompt_file()
    assert prompt.version == "nl2sparql.v2" and prompt_version() == f"nl2sparql.v2@{prompt.digest}"
    assert set(prompt.parts) == {"system", "user", "repair", "json"}
    assert "JSON query form" in system_prompt("", "json") and "JSON query form" not in system_prompt("")
    assert "type first" in prompt.parts["system"].lower() and "COUNT(DISTINCT" in prompt.parts["system"]
    assert "schema:participant" in prompt.parts["system"] and "#pcm:compute" in prompt.parts["system"]
    assert repair_message("It returned no rows.", "Use m:biscuit.").startswith("It returned no rows.\nUse m:biscuit.\n")


def test_the_vocabulary_block_is_replaced_by_the_chosen_areas() -> None:
    text = system_prompt("## pets\nclasses: pcm:Pet")
    assert "## pets\nclasses: pcm:Pet\n" in text
    assert "catalogue:begin" not in text and "catalogue:end" not in text
    assert "## family" not in text  # the committed full block is gone


def test_the_committed_vocabulary_block_is_what_the_ontology_generates() -> None:
    """``pcm ontology catalog --check`` fails on a stale block; regenerate with ``pcm ontology catalog --write``."""
    from pcm.ontology import load_ontology
    from pcm.ontology_tools.catalog import refreshed

    path = PROMPTS_DIR / "nl2sparql.v2.md"
    text = path.read_text(encoding="utf-8")
    assert refreshed(text, load_ontology(), str(path)) == text


def test_the_answer_prompt_asks_for_an_answer_or_an_abstention() -> None:
    prompt = answer_prompt()
    assert prompt.version == "answer.v2" and set(prompt.parts) == {"system", "user"}
    assert "NOT IN MEMORY" in prompt.parts["system"] and "[cites:" in prompt.parts["system"]


def test_a_small_models_citation_style_is_read() -> None:
    from pcm.retrieval.answer import parse_context_answer

    assert parse_context_answer("ANSWER: Seattle [cites: [10], [11]]", 12).cited == (10, 11)
    assert parse_context_answer("ANSWER: Seattle [cites: 3, 40]", 12).cited == (3,)
    assert parse_context_answer("ANSWER: Seattle [cites: [10], [11]]", 12).text == "Seattle"


def test_a_model_answer_is_tidied_as_pcm_writes_answers() -> None:
    from pcm.retrieval.answer import tidy_answer

    assert tidy_answer("When did Dana buy it?", "On 2025-02-04, at Williams Sonoma") == (
        "On Tuesday 4 February 2025, at Williams Sonoma")
    assert tidy_answer("When?", "on 2025-02-31") == "on 2025-02-31"  # not a date: left as written
    # a reply that looped until its token limit says each item once (and an unrepeated list is left alone)
    looped = "Exercise-induced asthma, albuterol inhaler, exercise-induced asthma, albuterol inhaler, exercise-ind"
    assert tidy_answer("What was she diagnosed with?", looped) == "Exercise-induced asthma, albuterol inhaler, exercise-ind"
    assert tidy_answer("How often?", "every Thursday evening, every Thursday evening") == "every Thursday evening"
    assert tidy_answer("Who?", "Lily, Owen, and Marcus") == "Lily, Owen, and Marcus"
    # the days between two events are counted in code, whichever way round and however the dates are written
    asked = "How many days after buying the espresso machine did the car break down?"
    assert tidy_answer(asked, "from 2 March 2025 to Tuesday 4 February 2025") == (
        "26 days (from Tuesday 4 February 2025 to Sunday 2 March 2025).")
    assert tidy_answer(asked, "from 2025-02-04 to 2025-03-02").startswith("26 days")
    assert tidy_answer("How many weeks between them?", "from 2025-02-04 to 2025-03-04").startswith("4 weeks")
    # one date, or a question that counts something else: nothing is computed
    assert tidy_answer(asked, "on 2 March 2025") == "on 2 March 2025"
    assert tidy_answer("How many pets does Dana have?", "2, from 2025-02-04 to 2025-03-02").startswith("2, from")

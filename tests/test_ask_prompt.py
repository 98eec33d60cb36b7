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
    assert prompt.version == "answer.v1" and set(prompt.parts) == {"system", "user"}
    assert "NOT IN MEMORY" in prompt.parts["system"] and "[cites:" in prompt.parts["system"]

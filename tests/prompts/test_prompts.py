"""Every prompt the package ships loads through the one loader, names its version like its file, and is recorded
with a digest of its text."""

from __future__ import annotations

from pathlib import Path

import pytest

from pcm import prompts
from pcm.ontology_tools import catalog

SHIPPED = prompts.prompt_files()


def test_the_prompts_live_in_one_folder_per_pipeline() -> None:
    assert {p.parent.name for p in SHIPPED} == {"extraction", "retrieval", "summaries", "evaluation"}
    package = prompts.PROMPTS_DIR.parent
    elsewhere = [p for p in package.rglob("*.md") if prompts.PROMPTS_DIR not in p.parents]
    assert elsewhere == []
    assert catalog.prompt_files() == SHIPPED


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_prompt_loads_through_the_loader(path: Path) -> None:
    prompt = prompts.load(str(path.relative_to(prompts.PROMPTS_DIR)))
    assert path.name == f"{prompt.version}.md" and prompt.parts
    assert prompt.ref == f"{prompt.version}@{prompt.digest}" and len(prompt.digest) == 8
    assert all(text.strip() for text in prompt.parts.values())


def test_every_recorded_prompt_value_carries_a_digest() -> None:
    from pcm.evaluation.judge import judge_prompt
    from pcm.extraction.prompts import prompt_version as extraction
    from pcm.retrieval.answer import answer_prompt
    from pcm.retrieval.nl2sparql import prompt_version as nl2sparql
    from pcm.retrieval.plan import prompt_versions as plan
    from pcm.summaries.summarise import _prompt as summary

    recorded = [extraction(), nl2sparql(), plan(), answer_prompt().ref, summary().ref, judge_prompt("judge_locomo").ref]
    for value in recorded:
        for one in value.split("+"):
            version, _, digest = one.partition("@")
            assert version and len(digest) == 8, value


def test_a_missing_placeholder_value_raises(tmp_path: Path) -> None:
    path = tmp_path / "demo.v1.md"
    path.write_text("<!-- prompt: demo.v1 -->\n<!-- part: user -->\nHello {{name}} on {{day}}\n", encoding="utf-8")
    prompt = prompts.read_prompt(path)
    assert prompt.render("user", name="Dana", day="Monday") == "Hello Dana on Monday\n"
    with pytest.raises(KeyError, match="day"):
        prompt.render("user", name="Dana")


def test_the_catalogue_block_is_cut_out_without_its_markers() -> None:
    text = "head\n<!-- catalogue:begin areas=pets compact -->\nold\n<!-- catalogue:end -->\ntail\n"
    before, after = prompts.around_catalogue(text)
    assert (before, after) == ("head\n", "\ntail\n")
    with pytest.raises(ValueError, match="no"):
        prompts.around_catalogue("no markers")

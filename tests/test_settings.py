"""Settings: every path field is a Path, however the settings were made; the recall config comes by recipe."""

from __future__ import annotations

from pathlib import Path

import pytest

from pcm.errors import UsageError
from pcm.manifest import Manifest
from pcm.memory import Memory
from pcm.settings import RECALL_RECIPES, AskConfig, ExtractionConfig, GroundingConfig, RecallConfig, Settings


def test_memory_given_as_text_is_a_path(tmp_path: Path) -> None:
    text = str(tmp_path / "m")
    assert Settings.from_env({}, memory=text).memory == Path(text)
    assert isinstance(Settings.from_env({}, memory=text).memory, Path)
    assert isinstance(Settings(memory=text).memory, Path)  # type: ignore[arg-type]
    assert isinstance(Settings().with_(memory=text).memory, Path)


def test_memory_given_as_text_expands_the_home_directory() -> None:
    assert Settings.from_env({}, memory="~/m").memory == Path("~/m").expanduser()


def test_a_memory_made_and_opened_from_text_settings(tmp_path: Path) -> None:
    settings = Settings.from_env({"PCM_INDEX": "off"}, memory=str(tmp_path / "m"))
    Memory.init(settings, owner="Dana").close()
    assert Manifest.load(settings.memory).owner == "Dana"
    with Memory.open(settings, read_only=True) as memory:
        assert memory.settings.memory == tmp_path / "m"


def test_recall_recipe_is_read_from_the_environment() -> None:
    assert Settings.from_env({}).recall == RECALL_RECIPES["tuned"] == RecallConfig()
    plain = Settings.from_env({"PCM_RECALL_RECIPE": " Plain "}).recall
    assert plain == RECALL_RECIPES["plain"]
    assert plain.feedback_posts == 0 and plain.diversity == 0.0 and plain.other_role_factor == 1.0


def test_an_unknown_recall_recipe_or_field_is_one_line() -> None:
    with pytest.raises(UsageError, match="PCM_RECALL_RECIPE='deep': expected tuned or plain"):
        Settings.from_env({"PCM_RECALL_RECIPE": "deep"})
    with pytest.raises(UsageError, match="recall has no setting 'dept'"):
        RecallConfig().with_(dept=10)
    assert RecallConfig().with_(depth=10).depth == 10


def test_the_memory_opens_its_index_with_the_recall_config(tmp_path: Path) -> None:
    settings = Settings.from_env({"PCM_RECALL_RECIPE": "plain"}, memory=str(tmp_path / "m"))
    Memory.init(settings, owner="Dana").close()
    with Memory.open(settings) as memory:
        assert memory.index.recall_config == RECALL_RECIPES["plain"]


def test_extraction_and_ask_knobs_are_read_from_their_variables_into_their_configs() -> None:
    settings = Settings.from_env({
        "PCM_EXTRACTION": "queued", "PCM_LLM_OUTPUT": "json", "PCM_LLM_CATALOGUE": "whole", "PCM_REPAIR_ROUNDS": "3",
        "PCM_LLM_CONCURRENCY": "2", "PCM_EXTRACTION_GATE": "off", "PCM_EXTRACTION_GROUNDING": "0",
        "PCM_ASK_ORDER": "facts", "PCM_ASK_FRAME": "on", "PCM_TRAVERSAL": "bs",
    })
    assert settings.extraction == ExtractionConfig(mode="queued", output="json", catalogue="whole", repair_rounds=3,
                                                   concurrency=2, gate=False, grounding=GroundingConfig(enabled=False))
    # the variables extraction and ask share set both
    assert settings.ask == AskConfig(order="facts", frame="on", traversal="bs", output="json", catalogue="whole",
                                     repair_rounds=3)
    assert Settings.from_env({}).extraction == ExtractionConfig() and Settings.from_env({}).ask == AskConfig()


def test_flags_and_with_take_the_flat_names_and_leave_the_other_fields() -> None:
    """A CLI flag (``--order``, ``--extraction``) reaches a config field by its flat name, as ``with_`` does."""
    tuned = Settings().with_(ask=AskConfig(fact_lines=20))
    changed = tuned.with_(ask_order="graph", extraction_mode="inline", llm_output="turtle", repair_rounds=None)
    assert (changed.ask.order, changed.ask.fact_lines, changed.ask.output) == ("graph", 20, "turtle")
    assert (changed.extraction.mode, changed.extraction.output, changed.extraction.repair_rounds) == ("inline", "turtle", 2)
    assert Settings.from_env({}, ask_frame="off", traversal_algorithm="astar").ask.traversal == "astar"


def test_a_bad_extraction_or_ask_value_is_one_line() -> None:
    with pytest.raises(UsageError, match=r"PCM_EXTRACTION='sometimes': expected auto, inline or queued"):
        Settings.from_env({"PCM_EXTRACTION": "sometimes"})
    with pytest.raises(UsageError, match="ask has no setting 'lines'"):
        AskConfig().with_(lines=3)
    assert ExtractionConfig().with_(previous_turns=2).previous_turns == 2

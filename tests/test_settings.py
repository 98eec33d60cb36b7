"""Settings: every path field is a Path, however the settings were made; the recall config comes by recipe."""

from __future__ import annotations

from pathlib import Path

import pytest

from pcm.errors import UsageError
from pcm.manifest import Manifest
from pcm.memory import Memory
from pcm.settings import RECALL_RECIPES, RecallConfig, Settings


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

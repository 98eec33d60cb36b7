"""Settings: every path field is a Path, however the settings were made."""

from __future__ import annotations

from pathlib import Path

from pcm.manifest import Manifest
from pcm.memory import Memory
from pcm.settings import Settings


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

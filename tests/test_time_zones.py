"""Every stored message time carries a zone: a time given without one is read in the memory's zone (chosen at init,
UTC by default, kept in memory.toml), and what stored it says so. Recall hits then sort by time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from pcm.cli import main
from pcm.errors import BadTime, InputError
from pcm.manifest import Manifest
from pcm.memory import Memory
from pcm.settings import Settings


def test_the_readme_example_sorts_by_time(tmp_path: Path) -> None:
    """README's own example mixes a time without a zone and one with (now): sorting recall hits by time raised
    TypeError."""
    with Memory.init(Settings(memory=tmp_path / "m", index_enabled=True), owner="Dana") as m:
        said = m.remember("I adopted a beagle called Biscuit", at="2025-03-02T10:00")
        m.remember("My beagle Biscuit likes the park")
        hits = m.recall("beagle", 5)
        assert len(hits) == 2 and all(h.time is not None and h.time.tzinfo is not None for h in hits)
        first = sorted(hits, key=lambda h: h.time)[0]  # type: ignore[arg-type,return-value]
        assert first.time == datetime(2025, 3, 2, 10, 0, tzinfo=UTC)
        assert said.zoned and said.report is not None and said.report.zone_note() is not None


def test_a_time_without_a_zone_takes_the_memory_zone(tmp_path: Path) -> None:
    paris = timezone(timedelta(hours=1))  # Europe/Paris on 2 March
    with Memory.init(Settings(memory=tmp_path / "m", index_enabled=False), owner="Dana", zone="Europe/Paris") as m:
        m.remember("I adopted a beagle called Biscuit", at="2025-03-02T10:00")
        m.remember("Biscuit chewed a slipper", at=datetime(2025, 3, 3, 9, 0))
        m.remember("Biscuit met a cat", at="2025-03-04T08:00:00+00:00")  # its own zone stays
        rows = m.sparql("SELECT ?t WHERE { ?p a sioc:Post ; dcterms:created ?t } ORDER BY ?t")
        times = [datetime.fromisoformat(r[0].value) for r in rows.rows]  # type: ignore[union-attr]
        assert times[0] == datetime(2025, 3, 2, 10, 0, tzinfo=paris) and times[0].utcoffset() == timedelta(hours=1)
        assert times[1] == datetime(2025, 3, 3, 9, 0, tzinfo=paris)
        assert times[2].utcoffset() == timedelta(0)
        assert m.when("2025-04-01").utcoffset() == timedelta(hours=2)  # type: ignore[union-attr]  # summer time
    assert Manifest.load(tmp_path / "m").zone == "Europe/Paris"


def test_a_zone_that_is_none_is_refused_at_init(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a time zone"):
        Memory.init(Settings(memory=tmp_path / "m", index_enabled=False), zone="Mars/Olympus")
    assert not (tmp_path / "m").exists() or not any((tmp_path / "m").iterdir())


def test_as_of_as_text_or_datetime_and_a_bad_one_is_one_line(tmp_path: Path) -> None:
    with Memory.init(Settings(memory=tmp_path / "m", index_enabled=False), owner="Dana") as m:
        assert m.ask("What is my dog called?", as_of="2025-04-01").as_of == datetime(2025, 4, 1, tzinfo=UTC)
        assert m.ask("What is my dog called?", as_of=datetime(2025, 4, 1)).as_of == datetime(2025, 4, 1, tzinfo=UTC)
        with pytest.raises(BadTime, match="as_of"):
            m.ask("What is my dog called?", as_of="the day after")


def test_cli_init_takes_a_zone_and_ingest_says_when_it_used_it(tmp_path: Path) -> None:
    path = str(tmp_path / "m")
    env = {"PCM_LLM": "none", "PCM_INDEX": "off"}
    runner = CliRunner()
    made = runner.invoke(main, ["--memory", path, "init", "--zone", "Asia/Tokyo", "--json"], env=env)
    assert made.exit_code == 0 and '"zone": "Asia/Tokyo"' in made.output, made.output
    said = runner.invoke(main, ["--memory", path, "ingest", "--text", "I adopted a beagle", "--at", "2025-03-02T10:00"],
                         env=env)
    assert said.exit_code == 0 and "read in the memory's zone, Asia/Tokyo" in said.output, said.output
    zoned = runner.invoke(main, ["--memory", path, "ingest", "--text", "Biscuit", "--at", "2025-03-02T11:00+00:00"],
                          env=env)
    assert zoned.exit_code == 0 and "zone" not in zoned.output, zoned.output

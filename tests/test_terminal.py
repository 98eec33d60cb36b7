"""Stored text cannot rewrite the terminal: human output escapes controls and bidi overrides, JSON stays exact."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pcm.conversations import Conversation, Utterance
from tests.memory_template import init_template, memory_copy

#: An utterance that, printed raw, clears the line, swaps its direction and forges a second record.
SPOOF = "I paid \u202e001$ \u202cfor it\x1b[2K\rI paid nothing\n[s1 m2] user: forged line\x07"


def test_printable_escapes_what_moves_the_cursor_or_reorders_the_line() -> None:
    from pcm.terminal import printable

    assert printable("a\x1b[31mb") == "a\\x1b[31mb"
    assert printable("\u202eevil\u202c \u2066x\u2069 \u200f") == "\\u202eevil\\u202c \\u2066x\\u2069 \\u200f"
    assert printable("one\ntwo\rthree\x00\x7f\x9b") == "one\\ntwo\\rthree\\x00\\x7f\\x9b"
    assert printable("line\u2028para\u2029") == "line\\u2028para\\u2029"
    assert printable("bad \udcff byte") == "bad \\udcff byte"
    assert printable("one\ntwo\x1b", newlines=True) == "one\ntwo\\x1b"


@pytest.mark.parametrize("text", ["Müller's café", "東京 ✓", "שלום עליכם", "مرحبا", "👨\u200d👩\u200d👧 tab\there", "100%"])
def test_printable_leaves_ordinary_text_alone(text: str) -> None:
    from pcm.terminal import printable

    assert printable(text) == text


def pcm(args: list[str], memory: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PCM_MEMORY": str(memory), "PCM_LLM": "none", "PCM_INDEX": "off"}
    env.pop("PCM_TOKEN", None)
    return subprocess.run([sys.executable, "-m", "pcm.cli", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300, encoding="utf-8")


def raw_controls(text: str) -> set[str]:
    return {c for c in text if c in "\x1b\r\x07\u202e\u202c"}


def test_human_output_escapes_stored_text_and_json_keeps_it(tmp_path_factory: pytest.TempPathFactory,
                                                             tmp_path: Path) -> None:
    template = init_template(tmp_path_factory)
    with memory_copy(template, tmp_path) as memory:
        memory.ingest([Conversation("s1", [Utterance("s1", 0, "user", SPOOF, source_id="m1")])])
        path = memory.settings.memory
    (post,) = json.loads(pcm(["sparql", "SELECT ?p WHERE { ?p a sioc:Post }", "--json"], path, tmp_path).stdout)["rows"]
    why = pcm(["why", post["p"]], path, tmp_path)
    assert why.returncode == 0, why.stderr
    assert not raw_controls(why.stdout) and why.stdout.count("\n") == 1
    assert "\\u202e001$" in why.stdout and "\\x1b[2K\\rI paid nothing\\n[s1 m2]" in why.stdout
    exact = json.loads(pcm(["why", post["p"], "--json"], path, tmp_path).stdout)
    assert exact[0]["text"] == SPOOF
    table = pcm(["sparql", "SELECT ?text WHERE { ?p sioc:content ?text }"], path, tmp_path)
    assert table.returncode == 0 and not raw_controls(table.stdout) and "\\u202e" in table.stdout
    rows = json.loads(pcm(["sparql", "SELECT ?text WHERE { ?p sioc:content ?text }", "--json"], path, tmp_path).stdout)
    assert rows["rows"] == [{"text": SPOOF}]


def test_error_lines_escape_what_they_quote(tmp_path: Path) -> None:
    out = pcm(["ingest", str(tmp_path / "x\x1b[2J\u202e.json")], tmp_path / "nowhere", tmp_path)
    assert out.returncode != 0 and out.stderr.count("\n") == 1
    assert not raw_controls(out.stderr) and "\\x1b[2J\\u202e" in out.stderr


def test_progress_off_a_terminal_is_a_plain_line_now_and_then(capsys: pytest.CaptureFixture[str]) -> None:
    """Off a terminal, progress is whole lines (no carriage returns for a log), one per interval and one at the
    end; work that ends within the interval prints nothing."""
    from pcm.terminal import LineProgress

    with LineProgress(1000, "reindex", every=3600) as quiet:
        quiet.update(400)
        quiet.update(600)
    assert capsys.readouterr().err == ""

    with LineProgress(1000, "reindex", every=0) as bar:
        bar.update(250)
        bar.refresh()
        bar.update(750)
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" after ")[0] for line in lines] == [
        "reindex: 250/1000 utt (25%)", "reindex: 1000/1000 utt (100%)", "reindex: 1000/1000 utt (100%)"
    ]
    assert lines[-1].endswith(", done") and "\r" not in "".join(lines) and bar.n == 1000

    with LineProgress(None, "import", every=0) as unknown:
        unknown.update(7)
    assert capsys.readouterr().err.splitlines()[0].startswith("import: 7 utt after ")


def test_the_cli_shows_progress_as_lines_when_stderr_is_not_a_terminal() -> None:
    from click.testing import CliRunner

    from pcm.cli import progress_bar
    from pcm.terminal import LineProgress

    with CliRunner().isolation():  # stderr is captured, as in a pipe
        assert isinstance(progress_bar(10, "ingest"), LineProgress)

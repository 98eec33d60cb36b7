"""docs/ontology-workflow.md, run: every `$ pcm ...` line of its console blocks is executed in order on a copy of the
ontology, shapes, queries and prompts, every Turtle block it says to append or save is applied, and each output
line it shows must appear in what the command printed (``…`` stands for any text)."""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from pcm import memory as memory_module
from pcm import prompts, resources
from pcm.cli import main
from pcm.ontology import _load
from pcm.ontology_tools import catalog, rename
from pcm.shape_limits import value_limits

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "ontology-workflow.md"
ENV = {"PCM_INDEX": "off", "PCM_LLM": "none", "PCM_SUMMARIES": "off"}
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)
_EDIT = re.compile(r"(append to|save as) `([^`]+)`", re.I)


def steps(text: str) -> list[tuple[str, object]]:
    """("edit", (verb, file, turtle)) and ("run", (command, expected lines, exit code)), in document order."""
    out: list[tuple[str, object]] = []
    for match in _FENCE.finditer(text):
        kind, body = match.group(1), match.group(2)
        before = text[: match.start()].rstrip().splitlines()[-1] if text[: match.start()].strip() else ""
        edit = _EDIT.search(before)
        if kind == "turtle" and edit:
            out.append(("edit", (edit.group(1).lower(), edit.group(2), body)))
        elif kind == "console":
            for chunk in re.split(r"^\$ ", body, flags=re.M)[1:]:
                command, *expected = chunk.rstrip("\n").split("\n")
                code = next((int(m.group(1)) for line in expected if (m := re.fullmatch(r"\[exit (\d+)\]", line))), 0)
                shown = [line for line in expected if line.strip() and not re.fullmatch(r"\[exit \d+\]", line)]
                out.append(("run", (command, shown, code)))
    return out


def matches(expected: str, printed: str) -> bool:
    pattern = ".*".join(re.escape(part) for part in expected.strip().split("…"))
    return any(re.search(pattern, line) for line in printed.splitlines())


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A copy of the ontology author's files that pcm uses as its own, in a scratch working directory.

    Afterwards the per-process caches are emptied: they hold what was read from the checkout (the shapes' value
    limits, query texts, prompts), which the tests that run later must not see."""
    root = tmp_path / "checkout"
    shutil.copytree(REPO / "pcm_ontology", root / "pcm_ontology")
    shutil.copytree(REPO / "shapes", root / "shapes")
    shutil.copytree(REPO / "queries", root / "queries")
    for path in catalog.prompt_files():  # the prompts holding a generated catalogue section
        if "catalogue:begin" in path.read_text(encoding="utf-8"):
            target = root / "src" / path.relative_to(REPO / "src" / "pcm")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, target)
    monkeypatch.setattr(resources, "ontology_dir", lambda: root / "pcm_ontology")
    monkeypatch.setattr(resources, "shapes_dir", lambda: root / "shapes")
    monkeypatch.setattr(resources, "queries_dir", lambda: root / "queries")
    monkeypatch.setattr(prompts, "PROMPTS_DIR", root / "src" / "prompts")
    monkeypatch.setattr(rename, "_default_queries", lambda: [root / "queries"])
    monkeypatch.chdir(root)
    yield root
    _load.cache_clear()
    value_limits.cache_clear()
    resources.query_text.cache_clear()
    prompts.load.cache_clear()


def fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget what this process parsed once per process (each `pcm` command is a new process; the files changed)."""
    _load.cache_clear()
    value_limits.cache_clear()
    resources.query_text.cache_clear()
    prompts.load.cache_clear()
    monkeypatch.setattr(memory_module, "_VALIDATOR", None)


@pytest.mark.slow
def test_the_walkthrough_runs_as_written(checkout: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    memory = tmp_path / "dana-memory"
    ran = 0
    for kind, step in steps(DOC.read_text(encoding="utf-8")):
        if kind == "edit":
            verb, name, body = step  # type: ignore[misc]
            path = checkout / name
            path.write_text((path.read_text(encoding="utf-8") if verb == "append to" else "") + body, encoding="utf-8")
            continue
        command, expected, code = step  # type: ignore[misc]
        argv = shlex.split(command.replace("~/dana-memory", str(memory)))
        assert argv[0] == "pcm", command
        fresh_process(monkeypatch)
        result = CliRunner().invoke(main, argv[1:], env=ENV)
        printed = result.stdout + result.stderr
        assert result.exit_code == code, f"$ {command}\n{printed}"
        for line in expected:
            assert matches(line, printed), f"$ {command}\nexpected: {line}\nprinted:\n{printed}"
        ran += 1
    assert ran >= 15

"""The wheel carries the ontology, shapes, queries and samples: `pcm` works from any directory after install."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_ships_resources_and_runs_from_elsewhere(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "-q", "-w", str(tmp_path / "dist")],
        capture_output=True, text=True, timeout=300,
    )
    if built.returncode != 0:
        pytest.skip(f"could not build the wheel here: {built.stderr.strip()[-200:]}")
    [wheel] = (tmp_path / "dist").glob("pcm-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for required in ("pcm/_data/pcm_ontology/pcm.ttl", "pcm/_data/shapes/pcm-shapes.ttl", "pcm/_data/queries/why.rq",
                     "pcm/samples/05-pets.json", "pcm/py.typed", "pcm/endpoint/static/app.js",
                     "pcm/endpoint/static/vendor/yasqe/yasqe.min.js", "pcm/endpoint/static/vendor/yasqe/yasqe.min.css",
                     "pcm/endpoint/static/vendor/yasqe/LICENSE",
                     # pcm ontology check's default vocabularies, with their licences
                     "pcm/ontology_tools/standard_vocab/schema.nq", "pcm/ontology_tools/standard_vocab/README.txt",
                     "pcm/ontology_tools/standard_vocab/LICENSE-zazuko"):
        assert required in names, required
    from pcm.prompts import PROMPTS_DIR, prompt_files

    for prompt in prompt_files():  # every prompt pcm sends, loaded by pcm.prompts from the installed package
        assert f"pcm/prompts/{prompt.relative_to(PROMPTS_DIR).as_posix()}" in names, prompt
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site), "PCM_INDEX": "off", "PCM_LLM": "none"}
    code = "import pcm.resources as r; print(r.ontology_dir()); print(r.query_text('why')[:1])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=elsewhere, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].startswith(str(site)), "resources must come from the installed wheel"
    out = subprocess.run([sys.executable, "-m", "pcm.cli", "--memory", str(tmp_path / "m"), "init", "--json"],
                         capture_output=True, text=True, env=env, cwd=elsewhere, timeout=120)
    assert out.returncode == 0, out.stderr

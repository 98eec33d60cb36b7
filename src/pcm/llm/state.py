"""The model's state after a long, stable prompt beginning, saved on disk so a fresh process does not re-read it.

Why: every extraction (and NL->SPARQL) call of an in-process model starts with the same system prompt (rules and
the whole vocabulary catalogue, ~7k tokens). Within a process the model keeps its previous prompt's tokens, so a
warm call reads only its own few hundred; but a fresh process's first call read the whole prefix: 140-235 s on
two cores with a 1.5B model. Here the KV cache of that prefix is written once, and the next process's first call
with the same system prompt loads it (a few hundred MB read from disk) instead of computing it.

What is saved and when:

* Only the tokens of the **system prompt** are kept (the KV of the chat template's opening and the system text,
  up to its last token): the model is cut back to them before it is saved, so nothing of a user turn (an utterance,
  a question) reaches the file. pcm's long system prompts hold rules and the ontology catalogue.
* After the first call of a process with a system prompt of at least :data:`MIN_PREFIX_TOKENS` tokens for which no
  file exists. The model then re-reads that call's own turns at the next call (once per saved state, ever).
* Only the sequence's KV cells are saved (``llama_state_seq_get_data``), not llama-cpp-python's ``save_state()``:
  that one copies the ``scores`` array, ``n_batch x vocabulary`` floats (311 MB for Qwen's 152k tokens) that
  greedy decoding without ``logits_all`` never reads, and its ``load_state`` writes them back.

A file is used only when its key matches exactly: the model file (path, size, modification time), the context
size, the chat template, the system prompt (SHA-256) and the llama-cpp-python version. Files are written atomically
(a temporary file, fsync, rename), checked (format, key, length, SHA-256 of the payload) when read, and a file that
fails a check is ignored with one log line and replaced by the next save. The folder keeps the
:data:`STATES_KEPT` most recently used states.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import logging
import os
import struct
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

log = logging.getLogger(__name__)

#: The first bytes of a state file; the digit is the file layout's version.
MAGIC = b"PCMKVST1"
SUFFIX = ".kvstate"
#: States kept in the folder (the most recently saved or loaded); each is ~28 KB per token for a 1.5B Qwen model
#: (~200 MB for a 7k-token system prompt), ~12 KB per token for 0.5B.
STATES_KEPT = 4
#: Shorter system prompts are not saved: pcm's short ones (answer, summaries, judging) cost seconds to read, and
#: only the catalogue-holding prompts (extraction, NL->SPARQL, 2-7k tokens) are worth a file.
MIN_PREFIX_TOKENS = 1024
#: A temporary file this old (seconds) was left by a writer that died; the next prune removes it.
STALE_TEMPORARY = 3600.0
_HEADER_LENGTH = struct.Struct("<I")
_TOKEN = np.dtype("<i4")

Bytes = bytes | bytearray | memoryview


class StateError(Exception):
    """The model refused to give or take a saved state."""


@dataclass(frozen=True)
class StateKey:
    """Everything a saved prefix state depends on; a file is loaded only when all of it is equal."""

    model: str
    model_bytes: int
    model_mtime_ns: int
    context: int
    template: str
    system: str
    library: str

    @property
    def digest(self) -> str:
        text = json.dumps({"format": MAGIC.decode(), **asdict(self)}, sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    @property
    def filename(self) -> str:
        return self.digest[:40] + SUFFIX


@dataclass(frozen=True)
class SavedState:
    """A prefix's tokens and the model's sequence state after reading exactly them."""

    tokens: np.ndarray
    data: bytearray


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class StateStore:
    """The folder of saved states (``PCM_LLM_STATE_DIR``), one file per key."""

    def __init__(self, directory: Path, kept: int = STATES_KEPT) -> None:
        self.directory = Path(directory).expanduser()
        self.kept = kept

    def path(self, key: StateKey) -> Path:
        return self.directory / key.filename

    def load(self, key: StateKey) -> SavedState | None:
        """The state saved under ``key``, or None when there is none or the file fails a check (one log line)."""
        path = self.path(key)
        try:
            with path.open("rb") as source:
                state = _read(source, key, os.fstat(source.fileno()).st_size)
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("saved model state %s cannot be read (%s); the prompt is read in full", path, exc)
            return None
        except _BadFile as exc:
            log.warning("saved model state %s ignored: %s; the prompt is read in full and the state saved again",
                        path, exc)
            return None
        with contextlib.suppress(OSError):  # a read-only folder still serves its states
            os.utime(path)  # most recently used: the last to be pruned
        return state

    def save(self, key: StateKey, tokens: Sequence[int] | np.ndarray, data: Bytes) -> Path | None:
        """Write the state atomically (concurrent writers each rename a whole file; a reader never sees a part of
        one); None, after one log line, when the folder cannot be written: saving is an optimisation."""
        token_bytes = np.asarray(tokens, dtype=_TOKEN).tobytes()
        checksum = hashlib.sha256(token_bytes)
        checksum.update(data)
        header = json.dumps({
            "key": asdict(key), "digest": key.digest, "tokens": len(token_bytes) // _TOKEN.itemsize,
            "data_bytes": len(memoryview(data).cast("B")), "sha256": checksum.hexdigest(),
        }, sort_keys=True).encode("utf-8")
        path = self.path(key)
        temporary: str | None = None
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            descriptor, temporary = tempfile.mkstemp(dir=self.directory, prefix=".", suffix=".tmp")
            with os.fdopen(descriptor, "wb") as out:
                for part in (MAGIC, _HEADER_LENGTH.pack(len(header)), header, token_bytes, data):
                    out.write(part)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, path)
            temporary = None
            _sync_directory(self.directory)
        except OSError as exc:
            log.warning("the model state cannot be saved in %s (%s); the next process reads the prompt in full",
                        self.directory, exc)
            return None
        finally:
            if temporary is not None:
                Path(temporary).unlink(missing_ok=True)
        self.prune()
        return path

    def prune(self) -> None:
        """Keep the :attr:`kept` most recently used states; remove temporary files of writers that died."""
        dated: list[tuple[float, Path]] = []
        try:
            entries = list(self.directory.iterdir())
        except OSError:
            return
        now = time.time()
        for entry in entries:
            try:
                mtime = entry.stat().st_mtime
            except OSError:  # removed by another process meanwhile
                continue
            if entry.name.endswith(SUFFIX):
                dated.append((mtime, entry))
            elif entry.name.startswith(".") and entry.name.endswith(".tmp") and now - mtime > STALE_TEMPORARY:
                entry.unlink(missing_ok=True)
        dated.sort(key=lambda item: (item[0], item[1].name), reverse=True)
        for _, entry in dated[self.kept:]:
            try:
                entry.unlink(missing_ok=True)
            except OSError as exc:
                log.debug("cannot remove the old model state %s: %s", entry, exc)


class _BadFile(Exception):
    """A state file that fails a check (format, key, length or checksum)."""


def _read(source: Any, key: StateKey, size: int) -> SavedState:
    magic = source.read(len(MAGIC))
    if magic != MAGIC:
        raise _BadFile("not a state file of this pcm version" if magic[:5] == MAGIC[:5] else "not a state file")
    raw = source.read(_HEADER_LENGTH.size)
    if len(raw) != _HEADER_LENGTH.size:
        raise _BadFile("truncated header")
    (length,) = _HEADER_LENGTH.unpack(raw)
    if length > size:
        raise _BadFile("truncated header")
    try:
        header = json.loads(source.read(length).decode("utf-8"))
        stored_key, checksum = header["key"], str(header["sha256"])
        count, data_bytes = int(header["tokens"]), int(header["data_bytes"])
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise _BadFile(f"unreadable header ({exc})") from exc
    if stored_key != asdict(key):
        raise _BadFile("saved for another model, context, template, system prompt or library version")
    expected = len(MAGIC) + _HEADER_LENGTH.size + length + count * _TOKEN.itemsize + data_bytes
    if count < 1 or data_bytes < 1 or size != expected:
        raise _BadFile(f"{size} bytes where {expected} were expected (truncated or overwritten)")
    tokens = bytearray(count * _TOKEN.itemsize)
    data = bytearray(data_bytes)
    if source.readinto(tokens) != len(tokens) or source.readinto(data) != len(data):
        raise _BadFile("truncated")
    check = hashlib.sha256(tokens)
    check.update(data)
    if check.hexdigest() != checksum:
        raise _BadFile("checksum mismatch (corrupt)")
    return SavedState(np.frombuffer(bytes(tokens), dtype=_TOKEN), data)


def _sync_directory(directory: Path) -> None:
    """Make the rename durable (POSIX); elsewhere the rename alone is what is available."""
    if os.name != "posix":
        return
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


class StateAccess(Protocol):
    """What saving and loading a prefix needs from the model object (:class:`LlamaStateAccess` for llama.cpp)."""

    def library(self) -> str:
        """The library and its version (a state is loaded only by the version that wrote it)."""
        ...

    def template(self) -> str:
        """What turns messages into the prompt (the chat format's name and template text)."""
        ...

    def tokenize(self, text: str) -> list[int]:
        """``text``'s tokens as the chat handler tokenizes a prompt (special tokens read, no BOS added)."""
        ...

    def held(self) -> np.ndarray:
        """A copy of the tokens whose state the model holds now (the last prompt and its answer)."""
        ...

    def capture(self, count: int) -> Bytes:
        """Cut the model back to its first ``count`` held tokens and return its state for them."""
        ...

    def restore(self, tokens: np.ndarray, data: bytearray) -> bool:
        """Replace the model's state with ``data``, the state after ``tokens``; False when the model refuses it
        (the model then holds nothing)."""
        ...


def system_span(prompt: Sequence[int] | np.ndarray, system: Sequence[int]) -> int:
    """How many of the prompt's first tokens are stable: up to the system text's second-last token.

    The system text's tokens are found inside the prompt without their first and last token, which may merge with
    the template's text around them; what comes before them is the template's opening, the same for every call.
    0 when they are not found.
    """
    inner = np.asarray(system[1:-1], dtype=np.int64)
    tokens = np.asarray(prompt, dtype=np.int64)
    if inner.size == 0 or tokens.size < inner.size:
        return 0
    for start in np.flatnonzero(tokens[: tokens.size - inner.size + 1] == inner[0]):
        if np.array_equal(tokens[start : start + inner.size], inner):
            return int(start + inner.size)
    return 0


class PrefixStates:
    """Loads a saved state before a call with a long system prompt the model does not hold, or saves one after it.

    The client calls :meth:`before` and :meth:`after` around each call, under its lock. A process that switches
    between two long system prompts (the compact extraction form and its JSON fallback, extraction and ask) loads
    the other one's state again at each switch: about a second from the page cache, against 100-120 s to read
    7,500 prompt tokens again with Qwen2.5-Coder-1.5B on two cores.
    """

    def __init__(self, store: StateStore, access: StateAccess, *, model: Path, context: int,
                 min_tokens: int = MIN_PREFIX_TOKENS) -> None:
        stat = model.stat()
        self.store = store
        self.access = access
        self.min_tokens = min_tokens
        #: The key's parts that do not depend on the system prompt (``system`` is filled per call).
        self._key = StateKey(
            model=str(model.resolve()), model_bytes=stat.st_size, model_mtime_ns=stat.st_mtime_ns,
            context=context, template=digest(access.template()), system="", library=access.library(),
        )
        #: The prefix tokens of each system prompt (SHA-256) whose state is on disk: the model holds that state
        #: when its held tokens begin with them, and no file is read then.
        self._tokens: dict[str, np.ndarray] = {}
        #: System prompts with no usable file: saved after the next call that uses them.
        self._pending: dict[str, StateKey] = {}
        #: System prompts whose stable part is too short to be worth a file.
        self._unsaved: set[str] = set()
        #: Tokens restored from a file by the last load, and the last file written (for benchmarks and tests).
        self.restored = 0
        self.saved: Path | None = None

    def key(self, system: str) -> StateKey:
        return replace(self._key, system=digest(system))

    def before(self, system: str) -> None:
        """Load the saved state for ``system`` unless the model holds it already."""
        if len(system) < self.min_tokens:  # fewer characters than the tokens needed
            return
        key = self.key(system)
        if key.system in self._pending or key.system in self._unsaved:
            return
        known = self._tokens.get(key.system)
        if known is not None and self._holds(known):
            return
        saved = self.store.load(key)
        if saved is None:
            self._tokens.pop(key.system, None)
            self._pending[key.system] = key
            return
        self._tokens[key.system] = saved.tokens
        count = len(saved.tokens)
        if self._holds(saved.tokens):
            return
        started = time.perf_counter()
        if self.access.restore(saved.tokens, saved.data):
            self.restored = count
            log.info("loaded the model's state for the %d-token system prompt from %s in %.1f s", count,
                     self.store.path(key), time.perf_counter() - started)
        else:
            log.warning("the model refused the saved state %s; the prompt is read in full and the state saved "
                        "again", self.store.path(key))
            self._pending[key.system] = key

    def _holds(self, tokens: np.ndarray) -> bool:
        held = self.access.held()
        return len(held) >= len(tokens) and bool(np.array_equal(held[: len(tokens)], tokens))

    def after(self, system: str, prompt_tokens: int) -> None:
        """After a call of ``prompt_tokens`` tokens: save the system prompt's state when no file had it."""
        if not self._pending or len(system) < self.min_tokens:
            return
        key = self._pending.pop(digest(system), None)
        if key is None:
            return
        prompt = self.access.held()[: max(prompt_tokens, 0)]
        count = system_span(prompt, self.access.tokenize(system))
        if count < self.min_tokens:
            log.debug("the system prompt's %d stable tokens are not worth a saved state", count)
            self._unsaved.add(key.system)
            return
        started = time.perf_counter()
        try:
            data = self.access.capture(count)
        except StateError as exc:
            log.warning("the model's state cannot be saved: %s", exc)
            return
        self.saved = self.store.save(key, prompt[:count], data)
        if self.saved is not None:
            self._tokens[key.system] = np.array(prompt[:count])
            log.info("saved the model's state for the %d-token system prompt in %s (%.1f s)", count, self.saved,
                     time.perf_counter() - started)


class LlamaStateAccess:
    """:class:`StateAccess` on a ``llama_cpp.Llama`` (written against llama-cpp-python 0.3.36).

    It reaches past the public ``save_state``/``load_state`` (see the module docstring) to the sequence-state
    bindings, the context (``Llama._ctx``) and the held tokens (``input_ids``, ``n_tokens``); the constructor
    checks they are there.
    """

    BINDINGS = ("llama_state_seq_get_size", "llama_state_seq_get_data", "llama_state_seq_set_data")
    ATTRIBUTES = ("_ctx", "input_ids", "n_tokens", "tokenize", "metadata", "chat_format")

    def __init__(self, llama: Any) -> None:
        import llama_cpp

        missing = [name for name in self.BINDINGS if not hasattr(llama_cpp, name)]
        missing += [f"Llama.{name}" for name in self.ATTRIBUTES if not hasattr(llama, name)]
        if not missing and not hasattr(llama._ctx, "kv_cache_seq_rm"):
            missing.append("LlamaContext.kv_cache_seq_rm")
        if missing:
            raise StateError(f"llama-cpp-python {getattr(llama_cpp, '__version__', '?')} lacks {', '.join(missing)}")
        self.llama = llama
        self._lib = llama_cpp

    def library(self) -> str:
        return f"llama-cpp-python {self._lib.__version__}"

    def template(self) -> str:
        handler = getattr(self.llama, "chat_handler", None)
        own = "" if handler is None else f"handler {getattr(handler, '__qualname__', type(handler).__qualname__)}"
        return "\n".join((str(self.llama.chat_format), own, str(self.llama.metadata.get("tokenizer.chat_template", ""))))

    def tokenize(self, text: str) -> list[int]:
        return list(self.llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def held(self) -> np.ndarray:
        return np.array(self.llama.input_ids[: self.llama.n_tokens], dtype=_TOKEN)

    def capture(self, count: int) -> Bytes:
        llama, lib = self.llama, self._lib
        llama._ctx.kv_cache_seq_rm(0, count, -1)
        self._hold(count)
        size = lib.llama_state_seq_get_size(llama._ctx.ctx, 0)
        buffer = (ctypes.c_uint8 * size)()
        written = lib.llama_state_seq_get_data(llama._ctx.ctx, buffer, size, 0)
        if not 0 < written <= size:
            raise StateError(f"llama.cpp wrote {written} bytes of a {size}-byte sequence state")
        return memoryview(buffer).cast("B")[:written]

    def restore(self, tokens: np.ndarray, data: bytearray) -> bool:
        llama, lib = self.llama, self._lib
        buffer = (ctypes.c_uint8 * len(data)).from_buffer(data)
        if lib.llama_state_seq_set_data(llama._ctx.ctx, buffer, len(data), 0) != len(data):
            llama._ctx.kv_cache_seq_rm(0, -1, -1)
            self._hold(0)
            return False
        llama.input_ids[: len(tokens)] = tokens
        self._hold(len(tokens))
        return True

    def _hold(self, count: int) -> None:
        self.llama.n_tokens = count
        if hasattr(self.llama, "_requires_eval"):  # the logits are not those of the last held token any more
            self.llama._requires_eval = True

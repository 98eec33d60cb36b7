"""In-memory mirrors of the two LanceDB tables: records, fingerprints, vectors and filter columns by slot.

Flat LanceDB vector search over 100k rows took 120-220 ms on the development machine, a product over the same matrix
7-20 ms, so vector search runs here; LanceDB keeps the durable copy and does full-text search. Deleted rows free
their slot for the next insert, so the matrix does not grow with churn. Categorical columns (role, speaker,
session) are kept as integer codes so a filter is one vectorised comparison.

Opening keeps the posts' own fields (text, time, fingerprints) as the Arrow columns LanceDB returned and makes a
:class:`PostRecord` only for a slot that is asked for (a hit, a candidate's text): recall touches a few hundred
slots, and building every record up front cost more than the rest of the open (0.6 s of CPU at 100k posts, growing
with the memory). Operations over every post (reconciling, the relevance terms) turn the columns into objects once.
"""

from __future__ import annotations

import functools
import heapq
import math
import time
from collections import Counter
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pcm.index.records import EntityRecord, PostRecord
from pcm.index.text import label_keys, timestamp

_MISSING = -1
_COMMON_WORD = 2000
"""A label word held by more entities than this (a common first name) does not gather candidates by itself."""
_NO_MATCH = -2
_NO_SLOTS = np.zeros(0, dtype=np.int64)
_NO_SCORES = np.zeros(0, dtype=np.float32)
NEAR_ERROR_F16 = 0.002
"""How far a float16 product (:meth:`_Slots.near_products`) may be from the exact one, relative to the lengths of
the two vectors: rounding both to 11 significant bits is off by at most 2 * 2^-11 per term (summed in float32, so
at most that share of ``|p| |q|``), rounding the result by 2^-11 more, 0.0015 in all; the rest is slack for
float32 summation and for components rounded below float16's normal range (at most 2^-25 each, which the length
range :data:`NEAR_F16_LENGTHS` keeps under 4e-5 of ``|p| |q|``). 0.0003 the worst seen on 77k random and
clustered 384-d vectors."""
NEAR_ERROR_BF16 = 0.013
"""The same for a bfloat16 product: 8 significant bits, so rounding both vectors is off by at most 2 * 2^-8 per term
(torch sums in float32), rounding the result by 2^-8 more, 0.0117 in all, and the slack. bfloat16 has float32's
exponent range, so the length range loses nothing; it is kept for one rule."""
NEAR_F16_LENGTHS = (2.0**-6, 2.0**6)
"""Longest row length for which the float16 copy is used (unit vectors, as the embedder writes, are 1): no
component or product near float16's limit (65504), none lost below its normal range; outside it, float32."""
REMEMBERED_ROWS = 100_000
"""Rows a deferred matrix keeps from search results (150 MB of 384-d float32) before they are dropped: every search
brings its own rows again, so a long-running server does not gather the matrix row by row."""
NEAR_ERROR_FLOAT32 = 1e-4
"""The same for float32 products computed by BLAS in another order than numpy's (about 1e-6 for 384 terms)."""


R = TypeVar("R", PostRecord, EntityRecord)
T = TypeVar("T")


class _Column(Protocol[T]):
    """What the slot bookkeeping needs of a per-slot column: a plain list, or a :class:`_Lazy` one."""

    def __getitem__(self, slot: int) -> T: ...

    def __setitem__(self, slot: int, value: T) -> None: ...

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[T]: ...

    def append(self, value: T) -> None: ...


class _Lazy(Generic[T]):
    """A per-slot column read at open as Arrow arrays and turned into Python objects only where asked for.

    ``one(i)`` converts the value of loaded row ``i``, ``every()`` all loaded rows at once (the form a bulk
    reader wants); slots written since the load hold their own objects. Iterating converts every row once and
    keeps the list."""

    def __init__(self, size: int, one: Callable[[int], T], every: Callable[[], list[T]]) -> None:
        self._loaded = size
        self._one = one
        self._every = every
        self._written: dict[int, T] = {}
        self._size = size
        self._all: list[T] | None = None

    def __len__(self) -> int:
        return self._size if self._all is None else len(self._all)

    def __getitem__(self, slot: int) -> T:
        if self._all is not None:
            return self._all[slot]
        if not 0 <= slot < self._size:
            raise IndexError(slot)
        if slot in self._written:
            return self._written[slot]
        return self._one(slot)

    def __setitem__(self, slot: int, value: T) -> None:
        if self._all is not None:
            self._all[slot] = value
            return
        if not 0 <= slot < self._size:
            raise IndexError(slot)
        self._written[slot] = value

    def append(self, value: T) -> None:
        if self._all is not None:
            self._all.append(value)
            return
        self._written[self._size] = value
        self._size += 1

    def __iter__(self) -> Iterator[T]:
        return iter(self.materialised())

    def materialised(self) -> list[T]:
        """Every slot as a Python object (converted once, then kept)."""
        if self._all is None:
            values = self._every()
            values.extend([None] * (self._size - len(values)))  # type: ignore[list-item]  # written below
            for slot, value in self._written.items():
                values[slot] = value
            self._all, self._written = values, {}
        return self._all


class _Slots(Generic[R]):
    """Slot bookkeeping shared by both mirrors: iri -> slot, records, fingerprints, vector matrix, live mask.

    Subclasses add their own columns in ``_fill`` and ``_clear``; taking and freeing slots happens only here.
    """

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.records: _Column[R | None] = []
        self.slot_of: dict[str, int] = {}
        self.digests: _Column[str] = []
        self.search_hashes: _Column[str] = []
        self._vectors = np.zeros((0, dim), dtype=np.float32)
        self._norms = np.zeros(0, dtype=np.float32)
        self._deferred: Callable[[], np.ndarray] | None = None
        """Reads the matrix of the rows loaded (:meth:`_load_slots` with a reader): ``None`` once it is in memory."""
        self._known: dict[int, np.ndarray] = {}
        """Rows of a deferred matrix met in search results (:meth:`remember`), by slot: what recall through the
        vector index needs to score its candidates, without the whole matrix."""
        self._written: dict[int, np.ndarray] = {}
        """Rows written (put, or cleared) since a deferred matrix was loaded, by slot: laid over it when it is read,
        so a write to a lifetime memory does not read 1.5 GB first."""
        self.alive = np.zeros(0, dtype=bool)
        self._near: Any = None
        """A half-precision torch copy of ``vectors`` (:func:`near_dtype`) for the first pass of
        :meth:`top_by_vector`, made on first use and kept row by row; ``None`` until then and after the matrix is
        replaced."""
        self._free: list[int] = []
        self.generation = 0
        """Counts changes (put, remove, load), so a structure derived from the records knows when it is stale."""

    def __len__(self) -> int:
        return len(self.slot_of)

    @property
    def vectors(self) -> np.ndarray:
        """Every slot's vector, one row each (read now if the load deferred it)."""
        if self._deferred is not None:
            self._read_matrix()
        return self._vectors

    @vectors.setter
    def vectors(self, matrix: np.ndarray) -> None:
        self._vectors = matrix

    @property
    def norms(self) -> np.ndarray:
        """The length of each slot's vector (1 for a unit vector, 0 for a free slot): the error bound of the near
        products."""
        if self._deferred is not None:
            self._read_matrix()
        return self._norms

    @norms.setter
    def norms(self, lengths: np.ndarray) -> None:
        self._norms = lengths

    def deferred(self) -> bool:
        """Whether the vector matrix is still to be read (only rows met in search results are in memory)."""
        return self._deferred is not None

    def remember(self, slots: Sequence[int], vectors: np.ndarray) -> None:
        """Keep the stored vectors of ``slots`` (rows of ``vectors``, as a search read them from the table) while
        the matrix is deferred, so the slots can be scored without it."""
        if self._deferred is None:
            return
        for slot, vector in zip(slots, vectors, strict=True):
            self._known[int(slot)] = np.array(vector, dtype=np.float32)

    def holds(self, slot: int) -> bool:
        """Whether the vector of ``slot`` is in memory (the matrix read, or the row written or remembered)."""
        return self._deferred is None or slot in self._written or slot in self._known

    def forget_rows(self) -> None:
        """Drop the remembered rows once they pass :data:`REMEMBERED_ROWS` (called between searches, never within
        one recall: its later steps read the rows its first searches brought)."""
        if len(self._known) > REMEMBERED_ROWS:
            self._known = {}

    def rows(self, slots: np.ndarray | Sequence[int]) -> np.ndarray:
        """The vectors of ``slots``, one row each: from the remembered rows when the matrix is deferred and they
        hold them all, else from the matrix (read now if need be)."""
        wanted = np.asarray(slots, dtype=np.int64)
        if self._deferred is not None:
            known, written = self._known, self._written
            if all(int(slot) in written or int(slot) in known for slot in wanted.tolist()):
                if not len(wanted):
                    return np.zeros((0, self.dim), dtype=np.float32)
                return np.stack([written[slot] if slot in written else known[slot] for slot in wanted.tolist()])
        return self.vectors[wanted]

    def _norms_at(self, slots: np.ndarray) -> np.ndarray:
        """The lengths of the vectors of ``slots``, computed as the load computes them."""
        if self._deferred is None:
            return self.norms[slots]
        rows = self.rows(slots)
        return np.sqrt(np.einsum("ij,ij->i", rows, rows)).astype(np.float32)

    def __contains__(self, iri: object) -> bool:
        return iri in self.slot_of

    def iris(self) -> set[str]:
        return set(self.slot_of)

    def digest(self, iri: str) -> str | None:
        slot = self.slot_of.get(iri)
        return None if slot is None else self.digests[slot]

    def vector(self, iri: str) -> np.ndarray | None:
        slot = self.slot_of.get(iri)
        return None if slot is None else self.rows([slot])[0]

    def unit_vectors(self, slots: np.ndarray) -> np.ndarray:
        """The rows at ``slots`` scaled to length 1 (a cleared row, of norm 0, stays zero)."""
        norms = self._norms_at(slots)
        return self.rows(slots) / np.where(norms > 0, norms, 1.0)[:, None]

    def capacity(self) -> int:
        return len(self.digests)

    def top_by_vector(
        self,
        query: np.ndarray,
        n: int,
        mask: np.ndarray | None = None,
        weights: np.ndarray | None = None,
        *,
        near: tuple[np.ndarray, float] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Slots and cosine scores of the ``n`` live rows nearest ``query`` (unit vectors), restricted to ``mask``,
        best first (equal scores by slot). With ``weights`` the scores are ``max(cosine, 0) * weight`` (a prior per
        slot) before the cut. ``near`` is :meth:`near_products` of ``query``, when several searches share it.

        Two passes, one result: the near products of every row (:meth:`near_products`) find the rows that can
        make the cut, and only those are scored exactly (:meth:`_scores_at`), so slots, order and scores are what
        exact products of every row give, bit for bit. Each near score is within ``error`` of its exact one, so
        the exact ``n``-th best is within ``error`` of the near one and every row of the exact top ``n`` is within
        twice that of it. At 100k random unit vectors that re-scores a few hundred rows.
        """
        size = self.capacity()
        if size == 0 or n <= 0:
            return _NO_SLOTS, _NO_SCORES
        allowed = self._allowed(mask)
        candidates = int(np.count_nonzero(allowed))
        n = min(n, candidates)
        if n == 0:
            return _NO_SLOTS, _NO_SCORES
        query = np.asarray(query, dtype=np.float32)
        scores, error = self.near_products(query) if near is None else (near[0].copy(), near[1])
        if weights is not None:
            np.maximum(scores, 0.0, out=scores)
            scores *= weights[:size]
            error *= float(np.max(weights[:size], initial=0.0))
        if candidates < size:
            scores[~allowed] = -np.inf
        cut = np.partition(scores, size - n)[size - n]
        rows = np.flatnonzero(scores >= cut - np.float32(2 * error))
        return _best(rows, self._scores_at(rows, query, weights), n)

    def rescore(
        self,
        slots: np.ndarray,
        query: np.ndarray,
        n: int,
        mask: np.ndarray | None = None,
        weights: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ``n`` best of the candidate ``slots`` (from an approximate index), scored exactly as
        :meth:`top_by_vector` scores them, live rows that ``mask`` allows only, best first (equal scores by slot)."""
        rows = np.unique(np.asarray(slots, dtype=np.int64))
        if len(rows):
            rows = rows[self._allowed(mask)[rows]]
        if not len(rows) or n <= 0:
            return _NO_SLOTS, _NO_SCORES
        query = np.asarray(query, dtype=np.float32)
        return _best(rows, self._scores_at(rows, query, weights), n)

    def near_products(self, query: np.ndarray) -> tuple[np.ndarray, float]:
        """The product of every slot's vector with ``query`` (0 for a free slot), fast and approximate, and how far
        any of them may be from the exact product.

        Computed by torch on the thread pool the embedder already uses, over a half-precision copy of the matrix
        (half its memory) with the query scaled to length 1, float16 or bfloat16 as :func:`near_dtype` measured
        faster on this CPU: at 77k x 384 2.7 ms CPU on one thread in float16 against 8.7 ms in bfloat16 and 7.8 ms
        in float32 on one machine (float16 through the F16C instructions), 8.7 ms in float16 against 2.0 ms in
        bfloat16 and 4.2 ms in float32 on another (native bfloat16: AVX512-BF16); torch sums in float32 either
        way. numpy's own ``@`` is as fast as torch's float32 but wakes OpenBLAS's
        worker threads, whose spinning then slows the next query's embedding on the same cores (recall p50 25 ms
        against 15 ms measured). Rows longer or shorter than :data:`NEAR_F16_LENGTHS` allows are multiplied in
        float32.
        """
        import torch  # loaded with the embedder; imported here so opening an index does not pay for it

        size = self.capacity()
        rows = float(np.max(self.norms[:size], initial=0.0))
        length = float(np.linalg.norm(query))
        longest = rows * length
        query = np.array(query, dtype=np.float32)
        if NEAR_F16_LENGTHS[0] <= rows <= NEAR_F16_LENGTHS[1] and length > 0:
            matrix = self._near_matrix()
            unit = torch.from_numpy(query / np.float32(length)).to(matrix.dtype)
            near = torch.mv(matrix[:size], unit).to(torch.float32).numpy()
            near *= np.float32(length)
            return near, near_error(matrix.dtype) * longest
        near = torch.mv(torch.from_numpy(self.vectors[:size]), torch.from_numpy(query)).numpy()
        return near, NEAR_ERROR_FLOAT32 * max(longest, 1e-30)

    def _near_matrix(self) -> Any:
        """The half-precision copy of ``vectors``, made now if missing."""
        if self._near is None:
            self._near = _tensor(self.vectors).to(near_dtype())
        return self._near

    def _scores_at(self, rows: np.ndarray, query: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
        """The exact scores of ``rows``: each row's product with ``query`` summed by numpy's ``einsum``, which
        gives a row the same value whichever rows are scored beside it."""
        scores = np.einsum("ij,j->i", self.rows(rows), query, optimize=False)
        if weights is not None:
            np.maximum(scores, 0.0, out=scores)
            scores *= weights[rows]
        return scores

    def allowed_slots(self, mask: np.ndarray | None) -> np.ndarray:
        """The live slots ``mask`` allows, ascending."""
        return np.flatnonzero(self._allowed(mask))

    def _allowed(self, mask: np.ndarray | None) -> np.ndarray:
        size = self.capacity()
        return self.alive[:size] if mask is None else (self.alive[:size] & mask[:size])

    def record(self, iri: str) -> R | None:
        slot = self.slot_of.get(iri)
        return None if slot is None else self.records[slot]

    def record_at(self, slot: int) -> R:
        record = self.records[slot]
        assert record is not None, "slot of a deleted record"
        return record

    def live_records(self) -> Iterator[R]:
        return (r for r in list(self.records) if r is not None)

    def put(self, record: R, digest: str, search_hash: str, vector: np.ndarray) -> None:
        self.generation += 1
        self.remove(record.iri)
        slot = self._claim(record.iri)
        if slot == len(self.records):
            self.records.append(record)
        else:
            self.records[slot] = record
        self.digests[slot] = digest
        self.search_hashes[slot] = search_hash
        if self._deferred is not None:
            self._written[slot] = np.array(vector, dtype=np.float32).reshape(self.dim)
        else:
            self.vectors[slot] = vector
            self.norms[slot] = np.linalg.norm(self.vectors[slot])
            if self._near is not None:
                self._near[slot] = _tensor(self.vectors[slot])
        self._fill(slot, record)

    def remove(self, iri: str) -> R | None:
        slot = self.slot_of.get(iri)
        if slot is None:
            return None
        self.generation += 1
        record = self.records[slot]
        self._release(iri)
        self.records[slot] = None
        self._clear(slot, iri, record)
        return record

    def _fill(self, slot: int, record: R) -> None:
        """Subclass columns for a record just put in ``slot``."""

    def _clear(self, slot: int, iri: str, record: R | None) -> None:
        """Undo ``_fill`` for a record just removed from ``slot``."""

    def _load_slots(
        self,
        iris: Sequence[str],
        digests: _Column[str],
        hashes: _Column[str],
        vectors: np.ndarray | Callable[[], np.ndarray],
        *,
        own: bool = False,
    ) -> None:
        """Fill an empty mirror in one go (opening an index): slot i holds row i. With ``own`` the mirror takes
        ``vectors`` (a writable float32 array nobody else holds) as its matrix instead of a copy: at 1M posts the
        copy is 1.5 GB more at the peak. ``vectors`` may instead be a reader of that matrix (an owned array), called
        when the matrix is first needed: a recall through the vector index scores only the rows its searches
        return (:meth:`remember`), so it never is."""
        size = len(iris)
        self.generation += 1
        self.slot_of = dict(zip(iris, range(size), strict=True))
        self.digests, self.search_hashes = digests, hashes
        self._near = None
        self.alive = np.ones(size, dtype=bool)
        self._known = {}
        self._written = {}
        if callable(vectors):
            self._deferred = vectors
        else:
            self._deferred = None
            self._take_matrix(vectors, size, own)
        self._grow_columns(size)

    def _take_matrix(self, vectors: np.ndarray, size: int, own: bool) -> None:
        matrix = np.asarray(vectors, dtype=np.float32)
        usable = own and matrix.flags.writeable and matrix.flags.c_contiguous and matrix.size == size * self.dim
        self.vectors = (
            matrix.reshape(size, self.dim)
            if usable
            else np.array(matrix, dtype=np.float32, copy=True).reshape(size, self.dim)
        )  # writable, ours
        self.norms = np.sqrt(np.einsum("ij,ij->i", self.vectors, self.vectors)).astype(np.float32)

    def _read_matrix(self) -> None:
        """Read the deferred matrix (the rows loaded, slot for slot), widened to the slots claimed since, with the
        rows written since laid over it."""
        reader, self._deferred = self._deferred, None
        assert reader is not None
        self._install(reader())

    def deferred_reader(self) -> Callable[[], np.ndarray] | None:
        """What reads the deferred matrix (``None`` once it is in memory), for a caller that reads it on another
        thread and hands the result to :meth:`adopt_matrix`."""
        return self._deferred

    def adopt_matrix(self, reader: Callable[[], np.ndarray], matrix: np.ndarray) -> bool:
        """Take ``matrix``, what ``reader`` (:meth:`deferred_reader`) returned, as the matrix, with the rows
        written while it was read laid over it; False, and nothing changed, if the mirror no longer defers to that
        reader (it was read, or the mirror loaded again, meanwhile). Called under the same lock as the writes."""
        if self._deferred is not reader:
            return False
        self._deferred = None
        self._install(matrix)
        return True

    def _install(self, read: np.ndarray) -> None:
        size = len(self.alive)
        matrix = np.asarray(read, dtype=np.float32)
        if len(matrix) < size:
            matrix = np.concatenate([matrix, np.zeros((size - len(matrix), self.dim), dtype=np.float32)])
        elif not (matrix.flags.writeable and matrix.flags.c_contiguous):
            matrix = np.array(matrix, dtype=np.float32, copy=True)
        for slot, row in self._written.items():
            matrix[slot] = row
        self._take_matrix(matrix, size, True)
        self._known, self._written = {}, {}
        self._near = None

    def _claim(self, iri: str) -> int:
        """The slot for ``iri``: its own if present, else a freed one, else a new one (the matrix grows by half)."""
        slot = self.slot_of.get(iri)
        if slot is not None:
            return slot
        if self._free:
            slot = self._free.pop()
        else:
            slot = len(self.digests)
            self.digests.append("")
            self.search_hashes.append("")
            if slot >= len(self.alive):
                self._grow(slot + 1)
        self.slot_of[iri] = slot
        self.alive[slot] = True
        return slot

    def _grow(self, needed: int) -> None:
        size = max(needed, 64, len(self.alive) * 3 // 2)
        if self._deferred is None:  # a deferred matrix is widened when it is read
            vectors = np.zeros((size, self.dim), dtype=np.float32)
            vectors[: len(self._vectors)] = self._vectors
            self.vectors = vectors
            self.norms = _widen(self._norms, size, 0.0)
        self._near = None
        self.alive = _widen(self.alive, size, False)
        self._grow_columns(size)

    def _grow_columns(self, size: int) -> None:
        """Subclasses widen their own per-slot arrays."""

    def _release(self, iri: str) -> int | None:
        slot = self.slot_of.pop(iri, None)
        if slot is None:
            return None
        self.alive[slot] = False
        if self._deferred is not None:
            self._written[slot] = np.zeros(self.dim, dtype=np.float32)
            self._known.pop(slot, None)
        else:
            self.vectors[slot] = 0.0
            self.norms[slot] = 0.0
            if self._near is not None:
                self._near[slot] = 0.0
        self.digests[slot] = ""
        self.search_hashes[slot] = ""
        self._free.append(slot)
        return slot


class _Turns(MutableMapping[tuple[str, int], str]):
    """(session, position) -> post IRI, made a session at a time from the slots its session code marks, the first
    time one of its places is asked for: a write needs the turns around its own posts, and at 1M posts making the
    map from every record took 3.3 s of the write's 4.8. :meth:`complete` makes every session's at once, for a
    reader of them all (the relevance terms)."""

    def __init__(self, mirror: PostMirror) -> None:
        self._mirror = mirror
        self._sessions: dict[str, dict[int, str]] = {}
        self._complete = False

    def _session(self, session: str) -> dict[int, str]:
        turns = self._sessions.get(session)
        if turns is None:
            turns = self._sessions[session] = {}
            mirror = self._mirror
            code = mirror.sessions.lookup(session)
            if not self._complete:
                for slot in np.flatnonzero(mirror.session_code[: mirror.capacity()] == code).tolist():
                    record = mirror.records[slot]
                    if record is not None:
                        turns[record.position] = record.iri
        return turns

    def complete(self) -> _Turns:
        """Every session's turns made (from every record, in one pass)."""
        if not self._complete:
            self._sessions = {}
            for record in self._mirror.live_records():
                self._sessions.setdefault(record.session, {})[record.position] = record.iri
            self._complete = True
        return self

    def get(self, place: tuple[str, int], default: str | None = None) -> str | None:  # type: ignore[override]
        return self._session(place[0]).get(place[1], default)

    def __getitem__(self, place: tuple[str, int]) -> str:
        return self._session(place[0])[place[1]]

    def __setitem__(self, place: tuple[str, int], iri: str) -> None:
        self._session(place[0])[place[1]] = iri

    def __delitem__(self, place: tuple[str, int]) -> None:
        del self._session(place[0])[place[1]]

    def __iter__(self) -> Iterator[tuple[str, int]]:
        self.complete()
        return ((session, position) for session, turns in self._sessions.items() for position in turns)

    def __len__(self) -> int:
        self.complete()
        return sum(len(turns) for turns in self._sessions.values())


class _Codes:
    """A growing value -> small integer table, so categorical filters compare integers."""

    def __init__(self) -> None:
        self.code_of: dict[str, int] = {}

    def code(self, value: str | None) -> int:
        if value is None:
            return _MISSING
        code = self.code_of.get(value)
        if code is None:
            code = self.code_of[value] = len(self.code_of)
        return code

    def codes(self, values: Sequence[str | None] | pa.Array) -> np.ndarray:
        """The codes of many values at once: Arrow's dictionary encoding finds the distinct ones, so only those
        go through :meth:`code` (a call per row took 0.4 s of CPU for the three columns of 100k posts)."""
        column = values if isinstance(values, pa.Array) else pa.array(values, type=pa.string())
        encoded = column.dictionary_encode()
        distinct = encoded.dictionary.to_pylist()
        if not distinct:
            return np.full(len(values), _MISSING, dtype=np.int32)
        mapping = np.array([self.code(v) for v in distinct], dtype=np.int32)
        indices = encoded.indices.fill_null(0).to_numpy(zero_copy_only=False)
        out = mapping[indices]
        if encoded.null_count:
            out[pc.is_null(encoded.indices).to_numpy(zero_copy_only=False)] = _MISSING
        return out

    def lookup(self, value: str) -> int:
        """The code of a value; one no row has ever had gets a code that matches nothing."""
        return self.code_of.get(value, _NO_MATCH)


POST_FIELDS = (
    "iri",
    "session",
    "role",
    "speaker",
    "time",
    "text",
    "source_id",
    "position",
    "digest",
    "search_hash",
)
"""The columns :meth:`PostMirror.load_columns` takes (besides the vectors and times)."""


class PostMirror(_Slots[PostRecord]):
    """Posts by slot, plus what recall filters on and what neighbour context needs."""

    def __init__(self, dim: int) -> None:
        super().__init__(dim)
        self._at = _Turns(self)
        """(session, position) -> post IRI, a session at a time (:attr:`at`)."""
        self.sessions, self.roles, self.speakers = _Codes(), _Codes(), _Codes()
        self.session_code = np.zeros(0, dtype=np.int32)
        self.role_code = np.zeros(0, dtype=np.int32)
        self.speaker_code = np.zeros(0, dtype=np.int32)
        self.ts = np.zeros(0, dtype=np.float64)
        self.speaker_counts: Counter[str] = Counter()

    @property
    def at(self) -> _Turns:
        """(session, position) -> post IRI: the previous turn of a post is ``at[(session, position - 1)]``."""
        return self._at

    def _grow_columns(self, size: int) -> None:
        self.session_code = _widen(self.session_code, size, _MISSING)
        self.role_code = _widen(self.role_code, size, _MISSING)
        self.speaker_code = _widen(self.speaker_code, size, _MISSING)
        self.ts = _widen(self.ts, size, np.nan)

    def load(
        self,
        records: list[PostRecord],
        digests: list[str],
        hashes: list[str],
        vectors: np.ndarray,
        ts: np.ndarray,
    ) -> None:
        """Fill an empty mirror from records (the rows of a table, as :meth:`load_columns` takes them)."""
        fields = {
            "iri": [r.iri for r in records],
            "session": [r.session for r in records],
            "role": [r.role for r in records],
            "speaker": [r.speaker for r in records],
            "time": [r.time.isoformat() if r.time is not None else None for r in records],
            "text": [r.text for r in records],
            "source_id": [r.source_id for r in records],
            "position": pa.array([r.position for r in records], type=pa.int64()),
            "digest": digests,
            "search_hash": hashes,
        }
        columns = pa.table(
            {
                name: pa.array(values, type=pa.int64() if name == "position" else pa.string())
                for name, values in fields.items()
            }
        )
        self.load_columns(columns, vectors, ts)

    def load_columns(
        self,
        columns: pa.Table,
        vectors: np.ndarray | Callable[[], np.ndarray],
        ts: np.ndarray,
        *,
        own: bool = False,
    ) -> None:
        """Fill an empty mirror from a table's rows: ``columns`` holds :data:`POST_FIELDS`, ``vectors`` one row
        each (or their reader), ``ts`` each row's time as written by ``timestamp`` (NaN for none); ``own`` as in
        ``_load_slots``.

        The filter columns and the speaker counts are computed here, in Arrow; the records and fingerprints are
        made per slot when asked for (see the module docstring)."""
        # the columns stay in the chunks the table was read in (about a thousand rows each): a slot's value is
        # found by a binary search over the chunks, and joining them would copy every text (at 1M posts 0.7 s
        # of the first recall's CPU); only the three coded ones are joined, for Arrow's dictionary encoding
        named = {name: columns.column(name) for name in POST_FIELDS}
        coded = {name: named[name].combine_chunks() for name in ("session", "role", "speaker")}
        size = columns.num_rows
        iris = named["iri"].to_pylist()
        self._load_slots(
            iris,
            _Lazy(size, lambda i: named["digest"][i].as_py(), named["digest"].to_pylist),
            _Lazy(size, lambda i: named["search_hash"][i].as_py(), named["search_hash"].to_pylist),
            vectors,
            own=own,
        )
        fields = [named[name] for name in POST_FIELDS[:8]]

        def one(slot: int) -> PostRecord | None:
            return _post_record(*(column[slot].as_py() for column in fields))

        def every() -> list[PostRecord | None]:
            return [
                _post_record(*values)
                for values in zip(*(column.to_pylist() for column in fields), strict=True)
            ]

        self.records = _Lazy(size, one, every)
        self.session_code = self.sessions.codes(coded["session"])
        self.role_code = self.roles.codes(coded["role"])
        self.speaker_code = self.speakers.codes(coded["speaker"])
        self.ts = np.array(ts, dtype=np.float64)  # written with the row by ``timestamp``; NaN for no time
        self._at = _Turns(self)
        counts = pc.value_counts(coded["speaker"].drop_null())
        self.speaker_counts = Counter(
            {
                name: int(count)
                for name, count in zip(
                    counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True
                )
                if name
            }
        )

    def _fill(self, slot: int, record: PostRecord) -> None:
        self.session_code[slot] = self.sessions.code(record.session)
        self.role_code[slot] = self.roles.code(record.role)
        self.speaker_code[slot] = self.speakers.code(record.speaker)
        self.ts[slot] = timestamp(record.time) if record.time is not None else np.nan
        self.at[(record.session, record.position)] = record.iri
        if record.speaker:
            self.speaker_counts[record.speaker] += 1

    def _clear(self, slot: int, iri: str, record: PostRecord | None) -> None:
        self.session_code[slot] = self.role_code[slot] = self.speaker_code[slot] = _MISSING
        self.ts[slot] = np.nan
        if record is not None:
            if self.at.get((record.session, record.position)) == iri:
                del self.at[(record.session, record.position)]
            if record.speaker:
                self.speaker_counts[record.speaker] -= 1
                if self.speaker_counts[record.speaker] <= 0:
                    del self.speaker_counts[record.speaker]

    def previous(self, record: PostRecord) -> PostRecord | None:
        """The turn before ``record`` in its session, if the index holds it."""
        iri = self.at.get((record.session, record.position - 1))
        return None if iri is None else self.record(iri)

    def mask(
        self,
        *,
        role: str | None = None,
        speaker: str | None = None,
        session: str | None = None,
        since: float | None = None,
        until: float | None = None,
    ) -> np.ndarray | None:
        """Boolean mask of the slots that pass the filters (``None`` when there are none)."""
        size = self.capacity()
        mask = np.ones(size, dtype=bool)
        filtered = False
        for value, codes, column in (
            (role, self.roles, self.role_code),
            (speaker, self.speakers, self.speaker_code),
            (session, self.sessions, self.session_code),
        ):
            if value is not None:
                mask &= column[:size] == codes.lookup(value)
                filtered = True
        with np.errstate(invalid="ignore"):
            if since is not None:
                mask &= self.ts[:size] >= since
                filtered = True
            if until is not None:
                mask &= self.ts[:size] <= until
                filtered = True
        return mask if filtered else None

    def speaker_mask(self, name: str) -> np.ndarray:
        return self.speaker_code[: self.capacity()] == self.speakers.lookup(name)


class EntityMirror(_Slots[EntityRecord]):
    """Entities by slot, with exact and normalised label lookups so a known name is found without any search."""

    def __init__(self, dim: int) -> None:
        super().__init__(dim)
        self.exact: dict[str, set[str]] = {}
        self.normal: dict[str, set[str]] = {}
        self.words: dict[str, set[str]] = {}
        """Word of a normalised label -> IRIs: the full-text leg of matching, in memory (see ``word_hits``)."""

    def load(
        self,
        records: list[EntityRecord],
        digests: list[str],
        hashes: list[str],
        vectors: np.ndarray,
        keys: list[tuple[list[str], list[str]]],
    ) -> None:
        """Fill an empty mirror from the table's rows, with the label keys computed when they were written."""
        self._load_slots([r.iri for r in records], digests, hashes, vectors)
        self.records = list(records)
        exact_map, normal_map, words_map = self.exact, self.normal, self.words
        for record, (exact, normal) in zip(records, keys, strict=True):
            iri = record.iri
            for key in exact:
                holders = exact_map.get(key)
                if holders is None:
                    exact_map[key] = {iri}
                else:
                    holders.add(iri)
            for key in normal:
                holders = normal_map.get(key)
                if holders is None:
                    normal_map[key] = {iri}
                else:
                    holders.add(iri)
                for word in key.split():
                    holders = words_map.get(word)
                    if holders is None:
                        words_map[word] = {iri}
                    else:
                        holders.add(iri)

    def _fill(self, slot: int, record: EntityRecord) -> None:
        exact, normal = label_keys(record)
        for key in exact:
            self.exact.setdefault(key, set()).add(record.iri)
        for key in normal:
            self.normal.setdefault(key, set()).add(record.iri)
            for word in key.split():
                self.words.setdefault(word, set()).add(record.iri)

    def _clear(self, slot: int, iri: str, record: EntityRecord | None) -> None:
        if record is not None:
            exact, normal = label_keys(record)
            words = [word for key in normal for word in key.split()]
            for table, keys in ((self.exact, exact), (self.normal, normal), (self.words, words)):
                for key in keys:
                    holders = table.get(key)
                    if holders is not None:
                        holders.discard(iri)
                        if not holders:
                            del table[key]

    def word_hits(self, mention: str, limit: int) -> list[tuple[str, float]]:
        """Entities sharing label words with a normalised mention, scored by the idf-weighted share of the
        mention's words they hold (BM25 without length normalisation: labels are short). A word held by more
        than ``_COMMON_WORD`` entities does not gather candidates by itself unless the mention has no rarer one."""
        query = list(dict.fromkeys(mention.split()))
        if not query:
            return []
        size = max(len(self), 1)
        # a word no label has is the rarest of all: it lowers every candidate's share alike
        idf = {w: math.log(1.0 + size / (len(self.words[w]) if w in self.words else 0.5)) for w in query}
        total = sum(idf.values())
        known = sorted((w for w in query if w in self.words), key=lambda w: len(self.words[w]))
        seeds = {w for w in known if len(self.words[w]) <= _COMMON_WORD} or set(known[:1])
        candidates: set[str] = set().union(*(self.words[w] for w in seeds))
        # summed word by word in ``known`` order, each word walking the smaller of its postings and the candidates:
        # the cost follows the postings' lengths, not candidates times words (long utterances, common label words)
        acc = dict.fromkeys(candidates, 0.0)
        for w in known:
            holders = self.words[w]
            weight = idf[w]
            if w in seeds or len(holders) <= len(acc):
                for iri in holders:
                    if iri in acc:
                        acc[iri] += weight
            else:
                for iri in acc:
                    if iri in holders:
                        acc[iri] += weight
        return heapq.nsmallest(
            limit, ((iri, score / total) for iri, score in acc.items()), key=lambda item: (-item[1], item[0])
        )


def _post_record(
    iri: str,
    session: str,
    role: str,
    speaker: str | None,
    time: str | None,
    text: str,
    source_id: str | None,
    position: int,
) -> PostRecord:
    """A post as its row stores it (the time as ISO 8601 text)."""
    return PostRecord(
        iri,
        session,
        role,
        speaker,
        datetime.fromisoformat(time) if time else None,
        text,
        source_id,
        int(position),
    )


@functools.cache
def near_dtype() -> Any:
    """torch's float16 or bfloat16, whichever multiplies a 16k x 384 matrix by a vector faster here (the best of
    five each, once a process: a few milliseconds). Which one is fastest depends on the CPU, by a factor of three or
    four either way (:meth:`_Slots.near_products`); the results do not, since the near pass only picks the rows
    scored exactly, within the error of the type it used (:func:`near_error`). The matrix is a constant: the time
    of a product does not depend on its values, and random ones took 100 ms to make."""
    import torch

    timings = {}
    for dtype in (torch.float16, torch.bfloat16):
        matrix = torch.full((16_384, 384), 0.05, dtype=dtype)
        query = matrix[0].clone()
        torch.mv(matrix, query)
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter()
            torch.mv(matrix, query)
            best = min(best, time.perf_counter() - start)
        timings[dtype] = best
    return min(timings, key=timings.__getitem__)


def near_error(dtype: Any) -> float:
    """The stated error of a near product in ``dtype`` (float16 or bfloat16), as a share of the lengths' product."""
    import torch

    return NEAR_ERROR_BF16 if dtype == torch.bfloat16 else NEAR_ERROR_F16


def _tensor(row: np.ndarray) -> Any:
    import torch

    return torch.from_numpy(row)


def _best(slots: np.ndarray, scores: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``n`` best of ``slots`` (ascending) by ``scores``, best first, equal scores by slot: one order however
    many other slots were scored beside them."""
    if n <= 0:
        return _NO_SLOTS, _NO_SCORES
    if n < len(scores):
        kth = np.partition(scores, len(scores) - n)[len(scores) - n]
        keep = np.flatnonzero(scores >= kth)
        slots, scores = slots[keep], scores[keep]
    order = np.lexsort((slots, -scores))[:n]
    return slots[order].astype(np.int64, copy=False), scores[order].astype(np.float32, copy=False)


def _widen(array: np.ndarray, size: int, fill: float | bool) -> np.ndarray:
    wider = np.full(size, fill, dtype=array.dtype)
    wider[: len(array)] = array[:size]
    return wider

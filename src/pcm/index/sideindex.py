"""The LanceDB side index: derived from the store, keyed by IRI, never the source of truth.

The facade writes the store first and the index second. If the process dies in between, the index lacks what the
store has; :meth:`SideIndex.reconcile`, called with the store's view on open, replays it (and deletes what the store
forgot), so a crash loses nothing. Everything here can be thrown away and rebuilt with ``pcm reindex``.
"""

from __future__ import annotations

import gc
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from pcm.errors import MemoryVersionError, PcmError, UsageError
from pcm.index import ann, quantity
from pcm.index import entities as entity_ranking
from pcm.index import recall as ranking
from pcm.index.embedder import Embedder, get_embedder
from pcm.index.mirror import POST_FIELDS, EntityMirror, PostMirror
from pcm.index.records import EntityMatch, EntityRecord, PostRecord
from pcm.index.relevance import (
    Relevance,
    TermStats,
    assess,
    name_words,
)
from pcm.index.tables import (
    ENTITIES_TABLE,
    KEY_SEPARATOR,
    POSTS_TABLE,
    SYNC_FILE,
    EntityRow,
    Meta,
    PostRow,
    Tables,
    check_meta,
    entity_rows_table,
    post_rows_table,
    read_json,
    read_meta,
    wipe,
    write_json,
    write_meta,
)
from pcm.index.text import (
    embed_text,
    entity_digest,
    entity_embed_text,
    entity_search_text,
    exact_label,
    fts_query,
    named_speakers,
    normalise_label,
    post_digest,
    query_content,
    search_hash,
    search_text,
    sql_string,
    timestamp,
    vector_query,
    without_speakers,
)
from pcm.models import RecallHit
from pcm.settings import RecallConfig

log = logging.getLogger(__name__)

Progress = Callable[[int], None]
"""Called with the number of records just written (e.g. ``tqdm.update``)."""


class WriteWatcher(Protocol):
    """Told about every completed write, so the owner of the store can clear its half of the outbox marker.

    ``begin`` is called before a write starts and returns a token; ``done(token)`` after it has committed. A write
    that fails calls nothing more, so whatever the store marked stays marked.
    """

    def begin(self) -> object: ...

    def done(self, token: object) -> None: ...


_WRITE_CHUNK = 2048
"""Records embedded and committed together: bounds memory."""
_PROGRESS_STEP = 64
"""Records embedded between two progress reports: a rebuild of fewer records than a chunk still moves its bar
(reported per chunk, a reindex through the server sat at 0% and then jumped to 100%)."""
_QUERY_CACHE = 256
RESIDENT_AFTER = 64
"""Recalls with the posts' vector matrix deferred after which it is read and kept (:meth:`SideIndex._keep_resident`)."""
RESIDENT_MB = 1024
"""The default of ``Settings.index_resident_mb``."""
FAVOURED_DEPTH = 3
"""A vector search under a prior (:meth:`SideIndex._nearest` with ``weights``) first asks the index for this many
times the rows wanted, unfiltered; when they hold as many favoured rows as are wanted, the weighted best are among
them and the filtered search for the favoured rows is skipped. At 1M lifetime posts (half the owner's) a plain
search of 200 rows costs 21.7 ms CPU against 19.1 ms for 100, and the owner-filtered one 23-52 ms, run after it:
the questions that needed it were recall's p95. Three times the rows leaves it to fewer of them: on a quiet machine
at 1M, hybrid recall p95 50.2-56.8 ms at 2 against 31.2-35.4 ms at 3 (``bench_lifetime.py``, alternating runs),
p50 unchanged; R@10 against exact 0.693 / 0.963 against 0.693 / 0.964 (the feedback leg re-scores the larger
first-round pool)."""
LEGACY_GRAPH_FILE = "graph.jsonl"
"""Per-post terms an earlier pcm kept for a recall leg since removed; deleted when the index is cleared or purged."""


class SideIndex:
    """Utterances and entities with full-text and vector search, mirrored in memory for speed."""

    version_retention: timedelta = timedelta(minutes=10)
    """``optimize()`` drops table versions older than this (a reader in another process may still use recent ones)."""
    optimize_every: int = 200
    """Write calls between automatic ``optimize()`` runs, so the unindexed full-text tail and old versions stay small."""
    fold_text_bytes: int = 64 * 1024
    """Full-text bytes written since the last ``optimize()`` that bring the next one forward. LanceDB searches rows
    outside the full-text index flat, and every search pays for their text: at 1M posts about 0.08 ms of CPU per kB
    (the dev sets' 1,365 turns, 1.2 MB, put 92 ms on each full-text search; folded, 2 ms), so a search pays at most
    about 5 ms between folds. A fold at 1M costs about a second, which an ingest pays once at its end
    (:meth:`writes_in_bulk`)."""

    def __init__(
        self,
        directory: Path,
        tables: Tables,
        embedder: Embedder,
        *,
        ann_min_rows: int = ann.MIN_ROWS,
        recall_config: RecallConfig | None = None,
        resident_mb: int = RESIDENT_MB,
        resident_after: int = RESIDENT_AFTER,
    ) -> None:
        """Use :meth:`open`."""
        self.directory = directory
        self.embedder = embedder
        self.recall_config = RecallConfig() if recall_config is None else recall_config
        """How :meth:`recall` ranks (``Settings.recall``); a benchmark may swap it between recalls."""
        self.ann_min_rows = ann_min_rows
        """Rows of a table from which its vector searches go through LanceDB's vector index (built then) rather
        than the exact scan of the mirror (``Settings.index_ann_min_rows``)."""
        self._unindexed: dict[str, int | None] = {POSTS_TABLE: None, ENTITIES_TABLE: None}
        """Rows written to each table since its vector index last took them in (``None``: not counted yet)."""
        self._trained: dict[str, int] = {}
        """Rows each table's vector index was built over (or held when first counted in this process)."""
        self._builds: dict[str, Future[int]] = {}
        """The vector indexes being built off the write path (:meth:`_start_build`), by table name."""
        self._builder: ThreadPoolExecutor | None = None
        self._tables: Tables | None = tables
        self._lock = threading.RLock()
        self._beside_pool: ThreadPoolExecutor | None = None
        self._post_mirror: PostMirror | None = None
        self._entity_mirror: EntityMirror | None = None
        self._warming: Future[None] | None = None
        """The posts' vector index being loaded on a LanceDB thread while the first recall fills the mirror."""
        self.resident_mb = resident_mb
        """Most megabytes of the posts' vector matrix :meth:`_keep_resident` reads and keeps
        (``Settings.index_resident_mb``; 0: never)."""
        self.resident_after = resident_after
        """Recalls with the posts' vector matrix deferred after which it is read on a side thread and kept."""
        self._deferred_recalls = 0
        self._residing: Future[tuple[Callable[[], np.ndarray], np.ndarray]] | None = None
        """The deferred matrix being read beside the recalls (:meth:`_keep_resident`): its reader and the matrix."""
        self._resident_pool: ThreadPoolExecutor | None = None
        self._term_stats: tuple[int, int, TermStats] | None = None
        """The relevance decision's per-post terms, with the id and generation of the mirror they describe."""
        self._overlaid = False
        """Set once :meth:`overlay_posts` put posts in the mirror that the tables lack: no vector index is built
        then, since it would describe the tables."""
        self._writes = 0
        self._unfolded = 0
        """Full-text bytes written since the last optimize (:attr:`fold_text_bytes`)."""
        self._bulk = 0
        """Open :meth:`writes_in_bulk` blocks: while there are any, the text written waits for their end to fold."""
        self._query_cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self.watcher: WriteWatcher | None = None
        """Set by the memory facade that writes the store; ``None`` for a bare index."""

    # -- lifecycle ------------------------------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        directory: Path,
        *,
        embedder: Embedder | None = None,
        rebuild: bool = False,
        ann_min_rows: int | None = None,
        recall_config: RecallConfig | None = None,
        resident_mb: int = RESIDENT_MB,
        resident_after: int = RESIDENT_AFTER,
    ) -> SideIndex:
        """Open (creating if missing) the index in ``directory``.

        Raises :class:`~pcm.errors.MemoryVersionError` when the index was built with another embedding model or
        layout. ``rebuild=True`` first deletes everything in the directory (``pcm reindex`` after a model change);
        follow it with :meth:`reconcile`. ``ann_min_rows`` is :attr:`ann_min_rows` (default
        :data:`pcm.index.ann.MIN_ROWS`); ``recall_config`` is :attr:`recall_config` (default: the tuned recipe);
        ``resident_mb`` and ``resident_after`` are :attr:`resident_mb` and :attr:`resident_after`.
        """
        directory = Path(directory)
        embedder = embedder if embedder is not None else get_embedder()
        if rebuild:
            wipe(directory)
        directory.mkdir(parents=True, exist_ok=True)
        meta = read_meta(directory)
        if meta is None:
            if any(directory.glob("*.lance")):
                raise MemoryVersionError(f"the index in {directory} has no model record; run `pcm reindex`")
            write_meta(directory, Meta(embedder.name, embedder.dim))
        else:
            check_meta(directory, meta, embedder.name, embedder.dim)
        threshold = ann.MIN_ROWS if ann_min_rows is None else ann_min_rows
        return cls(
            directory, Tables(directory, embedder.dim), embedder, ann_min_rows=threshold, recall_config=recall_config,
            resident_mb=resident_mb, resident_after=resident_after,
        )

    def close(self) -> None:
        """Release the tables; the object cannot be used afterwards. A vector index build still running is waited
        for (LanceDB cannot stop one half-way, and an abandoned thread would write after the close)."""
        self.wait_for_vector_index()
        if self._resident_pool is not None:
            self._resident_pool.shutdown()  # a matrix being read is waited for: the read cannot stop half-way
        with self._lock:
            self._tables = None
            self._residing = None
            if self._beside_pool is not None:
                self._beside_pool.shutdown()
                self._beside_pool = None
            if self._builder is not None:
                self._builder.shutdown()
                self._builder = None

    def wait_for_vector_index(self) -> None:
        """Wait until no vector index build runs, and use the index it made. Reads and writes go on meanwhile
        (the wait holds no lock); for callers that want the index in place before they go on (bulk builds,
        benchmarks, tests)."""
        for build in list(self._builds.values()):
            with suppress(RuntimeError, OSError):  # reported by ``_adopt_builds`` below
                build.result()
        with self._lock:
            if self._tables is not None:
                self._adopt_builds()

    def _beside(self) -> ThreadPoolExecutor:
        """One worker thread for the full-text search of a hybrid recall, run beside its query embedding and
        vector search: at 100k posts the two took 10 ms each one after the other (`bench_index.py`)."""
        if self._beside_pool is None:
            self._beside_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pcm-recall-fts")
        return self._beside_pool

    def __enter__(self) -> SideIndex:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def clear(self) -> None:
        """Delete every row of both tables and record the current model (``pcm reindex`` then reconciles)."""
        self.wait_for_vector_index()
        with self._lock:
            tables = self._open_tables()
            (self.directory / SYNC_FILE).unlink(missing_ok=True)
            (self.directory / LEGACY_GRAPH_FILE).unlink(missing_ok=True)
            tables.drop_all()
            write_meta(self.directory, Meta(self.embedder.name, self.embedder.dim))
            self._tables = Tables(self.directory, self.embedder.dim)
            self._post_mirror = PostMirror(self.embedder.dim)
            self._entity_mirror = EntityMirror(self.embedder.dim)
            self._writes = 0
            self._unfolded = 0
            self._unindexed = {POSTS_TABLE: None, ENTITIES_TABLE: None}
            self._trained = {}

    def optimize(self, retain: timedelta | None = None) -> None:
        """Compact the tables, fold new rows into the full-text indexes and drop table versions older than
        ``retain`` (default :attr:`version_retention`; ``timedelta(0)`` for ``pcm purge``: deleted rows leave the
        files). Waits for a vector index build first: a compaction during one would pre-empt it."""
        self.wait_for_vector_index()
        self._optimize(retain)

    def _optimize_unless_building(self) -> None:
        """:meth:`optimize` now, unless a vector index build runs: then the writes counted since the last one stay
        counted, and a later write tries again."""
        self._adopt_builds()
        if not self._builds:
            self._optimize(None)

    def _optimize(self, retain: timedelta | None) -> None:
        with self._lock:
            tables = self._open_tables()
            tables.optimize(self.version_retention if retain is None else retain)
            self._writes = 0
            self._unfolded = 0
            for name, indexed in tables.vector_indexed.items():
                if indexed:
                    self._unindexed[name] = 0
            if retain is not None and not retain:
                # a term file an earlier pcm kept for its graph leg holds forgotten posts' words: it goes
                (self.directory / LEGACY_GRAPH_FILE).unlink(missing_ok=True)

    # -- the record of the last full reconcile ----------------------------------------------------------------------
    def sync_record(self) -> dict[str, Any] | None:
        """What :meth:`record_sync` last wrote (``None`` for a new or cleared index, or an unreadable record)."""
        return read_json(self.directory / SYNC_FILE)

    def record_sync(self, stamp: dict[str, Any]) -> None:
        """Note (atomically) that the index equals the store described by ``stamp`` after a full reconcile.

        The caller compares it with its own stamp on the next open: equal stamps plus a store with no pending
        write let it skip the reconcile, and with it the listing of every post and entity.
        """
        write_json(self.directory / SYNC_FILE, stamp)

    # -- what is indexed ------------------------------------------------------------------------------------------
    def post_iris(self) -> set[str]:
        with self._lock:
            return self._posts.iris()

    def entity_iris(self) -> set[str]:
        with self._lock:
            return self._entities.iris()

    # -- writes ---------------------------------------------------------------------------------------------------
    def upsert_posts(self, records: Sequence[PostRecord]) -> None:
        """Insert or replace posts (unchanged ones are skipped; a new text is embedded, a moved post is not)."""
        with self._lock, self._watched():
            latest = {r.iri: r for r in records}
            changed = [r for r in latest.values() if self._posts.digest(r.iri) != post_digest(r)]
            self._write_posts(changed, set())

    def delete_posts(self, iris: Iterable[str]) -> None:
        """Remove posts (the store forgot them); their words also leave the context of the turn after them."""
        with self._lock, self._watched():
            gone = {iri for iri in iris if iri in self._posts}
            self._write_posts([], gone)

    def upsert_entities(self, records: Sequence[EntityRecord]) -> None:
        """Insert or replace entities (unchanged ones are skipped)."""
        with self._lock, self._watched():
            latest = {r.iri: r for r in records}
            changed = [r for r in latest.values() if self._entities.digest(r.iri) != entity_digest(r)]
            self._write_entities(changed, set())

    def delete_entities(self, iris: Iterable[str]) -> None:
        with self._lock, self._watched():
            gone = {iri for iri in iris if iri in self._entities}
            self._write_entities([], gone)

    def reconcile(
        self,
        posts: Iterable[PostRecord],
        entities: Iterable[EntityRecord],
        *,
        progress: Progress | None = None,
    ) -> tuple[int, int]:
        """Make the index equal to the store's view: upsert what is missing or changed, delete what the store does
        not have, and repair any post whose neighbour context is stale. Returns ``(upserted, deleted)`` rows.

        Run on open with the store's posts and entities: what a crash kept from the index is replayed here.
        """
        with self._lock, self._watched():
            store_posts = {r.iri: r for r in posts}
            store_entities = {r.iri: r for r in entities}
            changed_posts = [r for r in store_posts.values() if self._posts.digest(r.iri) != post_digest(r)]
            changed_entities = [
                r for r in store_entities.values() if self._entities.digest(r.iri) != entity_digest(r)
            ]
            extra_posts = self._posts.iris() - store_posts.keys()
            extra_entities = self._entities.iris() - store_entities.keys()
            self._write_posts(changed_posts, extra_posts, progress=progress)
            self._write_entities(changed_entities, extra_entities, progress=progress)
            repaired = self._repair_contexts()
            upserted = len(changed_posts) + len(changed_entities) + repaired
            deleted = len(extra_posts) + len(extra_entities)
            if upserted or deleted:
                self._optimize_unless_building()
            return upserted, deleted

    def overlay_posts(self, records: Sequence[PostRecord], gone: Iterable[str]) -> None:
        """Make this process's reads see ``records`` and not ``gone`` without writing the tables.

        For a reader that found the index behind the store and may not write it (a read-only open): the posts are
        embedded into the in-memory mirror only, so recall finds them through its vector leg (the full-text leg
        reads the tables and cannot), and forgotten posts leave the mirror, which drops them from both legs.
        """
        with self._lock:
            self._open_tables()
            mirror = self._posts
            gone = list(gone)
            for iri in gone:
                mirror.remove(iri)
            chosen = sorted(records, key=lambda r: (r.session, r.position))
            vectors = self._post_vectors(chosen)
            for record in chosen:
                search = search_text(record, mirror.previous(record))
                mirror.put(record, post_digest(record), search_hash(search), vectors[record.iri])
            self._overlaid = True

    # -- reads ----------------------------------------------------------------------------------------------------
    def recall(
        self,
        query: str,
        k: int = 10,
        *,
        role: str | None = None,
        speaker: str | None = None,
        session: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        mode: str = "hybrid",
        recency: float | None = None,
    ) -> list[RecallHit]:
        """The ``k`` posts that best answer ``query``.

        ``mode`` is ``hybrid`` (full-text and vectors fused by weighted RRF), ``fts`` or ``vector``. Filters
        restrict both legs before ranking; ``since``/``until`` are inclusive. ``recency`` (a decay rate, e.g. 1.0)
        re-ranks by Memoria-style exponential recency over the candidates' message times.
        """
        if mode not in ranking.MODES:
            raise UsageError(f"recall mode {mode!r} is not one of {', '.join(ranking.MODES)}")
        if recency is not None and recency < 0:
            raise UsageError(f"recency decay must be >= 0, got {recency}")
        with self._lock:
            tables = self._open_tables()
            if k <= 0 or not query.strip():
                return []
            self._warm_vector_index(tables)
            if len(self._posts) == 0:
                return []
            if mode != "fts":
                self._keep_resident()
            self._posts.forget_rows()
            depth = max(self.recall_config.depth, 4 * k)
            since_ts = timestamp(since) if since is not None else None
            until_ts = timestamp(until) if until is not None else None
            mask = self._posts.mask(
                role=role, speaker=speaker, session=session, since=since_ts, until=until_ts
            )
            named = named_speakers(query, self._posts.speaker_counts)
            factors = self._speaker_prior(named) if speaker is None else None
            # the rows a prior favours, in SQL, for the vector index (see ``_nearest``)
            favoured = f"speaker = {sql_string(next(iter(named)))}" if factors is not None else None
            if speaker is None and role is None and not named and ranking.asks_about_owner(query):
                factors = self._owner_prior()
                favoured = f"role = {sql_string(ranking.OWNER_ROLE)}"
            where = _post_filter(role, speaker, session, since_ts, until_ts)
            legs: list[ranking.Leg] = []
            fts_hits: Future[tuple[list[tuple[str, float]], np.ndarray | None]] | None = None
            if mode != "vector":
                # the speaker prior re-orders the full-text hits after the cut, so cut deeper when it applies
                fts_depth = depth if factors is None else 2 * depth
                fts_args = (tables.posts, fts_query(without_speakers(query, named)), fts_depth, where)
                # with the matrix deferred the hits bring their vectors: feedback and diversity read them
                with_vectors = self._posts.deferred()
                if mode == "fts":
                    legs.append(self._fts_leg(tables.fts_rows(*fts_args, vectors=with_vectors), factors))
                else:
                    # LanceDB searches the words on its own threads while this one embeds the question
                    fts_hits = self._beside().submit(partial(tables.fts_rows, vectors=with_vectors), *fts_args)
            pool: list[int] = []
            if mode != "fts":
                vector = self._query_vector(vector_query(self._vector_text(query, named, keep_name=self.recall_config.named_speaker_in_vector)))
                slots, scores = self._nearest(
                    POSTS_TABLE, vector, depth, mask, factors, where=where, favoured=favoured, pool=pool
                )
                legs.append(ranking.rank_leg(slots, scores, self.recall_config.vector_weight))
            if fts_hits is not None:
                legs.insert(0, self._fts_leg(fts_hits.result(), factors))
            head: list[int] = []
            if mode == "hybrid" and self.recall_config.feedback_posts > 0:
                head, feedback = self._feedback_legs(
                    query, named, legs, vector, depth, mask, factors, where, favoured, pool
                )
                legs += feedback
                if not self.recall_config.feedback_keeps_head or recency is not None:
                    head = []  # a recency order re-ranks everything
            if mode == "hybrid":
                fused = ranking.rrf(legs)
                if self.recall_config.quantity_weight > 0 and fused:
                    unit = quantity.asked_unit(query)
                    if unit is not None:
                        legs.append(self._quantity_leg(unit, fused))
                        fused = ranking.rrf(legs)
            else:
                fused = dict(zip(legs[0].slots.tolist(), legs[0].scores.tolist(), strict=True))
            return self._hits(fused, k, recency, hybrid=mode == "hybrid", head=head)

    def said_by_others(self, query: str) -> bool:
        """Whether a question about one named speaker matches words that only other people said.

        LoCoMo-style questions about a conversation between friends ask "what did X do?"; when the nearest
        utterances are Y telling of Y's own life, the memory does not hold X's answer, however close the words,
        and recall (whose speaker prior lifts X's posts to the top) would cite the wrong person's turns. The posts
        are ranked as by :meth:`recall` on the question's content words alone (speaker names removed from both
        legs, no prior): the answer is ``True`` when at least ``attribution_rank`` posts by others outrank the
        named speaker's best one and the post nearest in meaning is not the named speaker's either. ``False``
        when the query names no speaker or several (nothing to attribute) or the memory has one speaker.
        """
        with self._lock:
            tables = self._open_tables()
            posts = self._posts
            if not query.strip() or sum(1 for n in posts.speaker_counts.values() if n > 0) < 2:
                return False
            posts.forget_rows()
            named = named_speakers(query, posts.speaker_counts)
            if len(named) != 1:
                return False
            (name,) = named
            said = posts.speaker_mask(name)
            content = without_speakers(query, named)
            depth = self.recall_config.attribution_depth
            slots, scores = self._nearest(POSTS_TABLE, self._query_vector(vector_query(content)), depth)
            if not len(slots) or said[slots[0]]:
                return False
            legs = [
                self._fts_leg((tables.fts(tables.posts, content, depth), None), None),
                ranking.rank_leg(slots, scores, self.recall_config.attribution_vector_weight),
            ]
            fused = ranking.rrf(legs)
            ranked = ranking.ranked(fused)
            return ranking.first_rank(ranked, said) >= self.recall_config.attribution_rank

    def relevance(self, query: str) -> Relevance:
        """Whether the memory holds something about the one speaker a question names, or only what others said
        (:mod:`pcm.index.relevance`); always relevant when the question names no speaker or several, or the
        memory has a single speaker."""
        with self._lock:
            self._open_tables()
            posts = self._posts
            posts.forget_rows()
            speakers = [n for n, c in posts.speaker_counts.items() if c > 0]
            named = named_speakers(query, posts.speaker_counts)
            if not query.strip() or len(speakers) < 2 or len(named) != 1:
                return Relevance(True)
            (name,) = named
            content = without_speakers(query, named)
            size = posts.capacity()
            vector = self._query_vector(vector_query(content))
            # one pass over the vectors for both speakers' best, unless the vector index finds them
            near = None if self._vector_ready(POSTS_TABLE) else posts.near_products(vector)
            named_mask = posts.speaker_mask(name)
            theirs = f"speaker = {sql_string(name)}"

            def nearest(mask: np.ndarray) -> float:
                if np.array_equal(mask, named_mask):
                    where: str | None = theirs
                elif np.array_equal(mask, ~named_mask):
                    where = f"(speaker IS NULL OR NOT ({theirs}))"
                else:
                    where = None
                _, scores = self._nearest(POSTS_TABLE, vector, 1, mask, where=where, near=near)
                return float(scores[0])

            ignore = name_words(speakers)
            return assess(
                self._relevance_terms(),
                content,
                ignore,
                lambda slot: posts.record_at(slot).speaker,
                name,
                nearest,
                named_mask,
                posts.alive[:size],
            )

    def _relevance_terms(self) -> TermStats:
        """The relevance decision's per-post terms, rebuilt when the posts mirror has changed since."""
        posts = self._posts
        key = (id(posts), posts.generation)
        if self._term_stats is None or self._term_stats[:2] != key:
            at = posts.at.complete()

            def slot_at(session: str, position: int) -> int | None:
                iri = at.get((session, position))
                return None if iri is None else posts.slot_of.get(iri)

            digests = list(posts.digests)  # every one is read: converted in one go
            slots = ((posts.slot_of[r.iri], r) for r in posts.live_records())
            triples = ((slot, r, digests[slot]) for slot, r in slots)
            previous = self._term_stats[2] if self._term_stats is not None else None
            self._term_stats = (*key, TermStats.build(triples, slot_at, previous))
        return self._term_stats[2]

    def post_records(self, iris: Iterable[str]) -> dict[str, PostRecord]:
        """The records of those of ``iris`` the index holds, by IRI: what the store lists of each post, read from
        memory instead of a query (an answer citing 200 posts of a 1M-post memory: 26-32 ms of SPARQL)."""
        with self._lock:
            self._open_tables()
            found = {}
            for iri in iris:
                record = self._posts.record(iri)
                if record is not None:
                    found[iri] = record
            return found

    def post_vector(self, iri: str) -> np.ndarray | None:
        """The stored vector of an indexed post (a copy), or ``None`` when the post is not indexed.

        Extraction matches entities against the utterance it is extracting, which ingest embedded moments before:
        reusing that vector saves a forward pass (~11 ms) per utterance.
        """
        with self._lock:
            self._open_tables()
            vector = self._posts.vector(iri)
            return None if vector is None else vector.copy()

    def match_entities(
        self, mention: str, k: int = 10, *, vector: np.ndarray | None = None
    ) -> list[EntityMatch]:
        """Candidate entity IRIs for a mention, best first: exact and normalised labels, label words, vectors.

        Everything runs on the in-memory mirror: the full-text leg (``how`` "fts") matches the words of labels,
        idf-weighted, because a LanceDB full-text query cost 5-10 ms here, most of the 15 ms budget at 100k
        entities. Vectors are consulted only when no label matches: a known name is the common case during
        extraction, the label tiers already rank it first, and embedding the mention is the slowest step.
        ``vector`` (a unit vector of the mention, e.g. :meth:`post_vector` of the post it comes from) is used
        instead of embedding ``mention`` when given.
        """
        with self._lock:
            self._open_tables()
            mention = " ".join(mention.split())
            mirror = self._entities
            if not mention or k <= 0 or len(mirror) == 0:
                return []
            depth = max(20, 2 * k)
            exact = mirror.exact.get(exact_label(mention), set())
            normalised = mirror.normal.get(normalise_label(mention), set())
            fts = mirror.word_hits(normalise_label(mention), depth)
            nearest: list[tuple[str, float]] = []
            if not exact and not normalised:
                query = self._query_vector(mention) if vector is None else _unit(vector, self.embedder.dim)
                slots, scores = self._nearest(ENTITIES_TABLE, query, depth)
                nearest = [
                    (mirror.record_at(s).iri, c) for s, c in zip(slots.tolist(), scores.tolist(), strict=True)
                ]
            return entity_ranking.combine(
                exact=exact,
                normalised=normalised,
                fts=fts,
                vector=nearest,
                label_of=lambda iri: mirror.record_at(mirror.slot_of[iri]).label,
                similarity=lambda iri: 0.0,
                k=k,
            )

    # -- internals: writing posts ---------------------------------------------------------------------------------
    def _write_posts(
        self, changed: list[PostRecord], removed: set[str], progress: Progress | None = None
    ) -> None:
        """Upsert ``changed`` and delete ``removed`` in as few commits as possible, refreshing the context of the
        turns that follow any post that appeared, moved, changed or went."""
        if not changed and not removed:
            return
        changed = sorted(changed, key=lambda r: (r.session, r.position))
        for start in range(0, max(len(changed), 1), _WRITE_CHUNK):
            chunk = changed[start : start + _WRITE_CHUNK]
            gone = removed if start + _WRITE_CHUNK >= len(changed) else set()
            self._write_post_chunk(chunk, gone, progress)
        self._note_written(POSTS_TABLE, len(changed) + len(removed))
        self._after_write()

    def _write_post_chunk(self, changed: list[PostRecord], removed: set[str], progress: Progress | None = None) -> None:
        tables = self._open_tables()
        view = _PostView(self._posts, changed, removed)
        vectors = self._post_vectors(changed, progress)
        rows = [self._post_row(r, view.previous(r), vectors[r.iri], post_digest(r)) for r in changed]
        written = {r.iri for r in changed}
        for follower in view.followers():
            if follower.iri in written:
                continue
            row = self._refreshed_row(follower, view.previous(follower))
            if row is not None:
                rows.append(row)
                written.add(follower.iri)
        if rows:
            iris = [row.record.iri for row in rows]
            _store_rows(tables, tables.posts, post_rows_table(rows, self.embedder.dim), self._posts, iris)
            self._unfolded += sum(len(row.search.encode()) for row in rows)
        if removed:
            tables.delete(tables.posts, removed)
        for iri in removed:
            self._posts.remove(iri)
        for row in rows:
            self._posts.put(row.record, row.digest, row.search_hash, row.vector)

    def _post_vectors(self, records: list[PostRecord], progress: Progress | None = None) -> dict[str, np.ndarray]:
        return self._vectors(self._posts, POSTS_TABLE, records, embed_text, progress)

    def _entity_vectors(self, records: list[EntityRecord], progress: Progress | None = None) -> dict[str, np.ndarray]:
        return self._vectors(self._entities, ENTITIES_TABLE, records, entity_embed_text, progress)

    def _vectors(
        self, mirror: PostMirror | EntityMirror, name: str, records: Sequence[Any], text: Callable[[Any], str],
        progress: Progress | None,
    ) -> dict[str, np.ndarray]:
        """Vectors for ``records``: reused when the embedded text is unchanged, else encoded; ``progress`` hears of
        every record, a step of encoding at a time."""
        kept: list[str] = []
        todo: list[Any] = []
        for record in records:
            old = mirror.record(record.iri)
            if old is not None and text(old) == text(record):
                kept.append(record.iri)
            else:
                todo.append(record)
        out = self._stored_vectors(mirror, name, kept)
        if progress is not None and len(out):
            progress(len(out))
        out.update(self._encoded(todo, text, progress))
        return out

    def _stored_vectors(self, mirror: PostMirror | EntityMirror, name: str, iris: Sequence[str]) -> dict[str, np.ndarray]:
        """The vectors the mirror holds for ``iris`` (copies); where its matrix is still unread, the rows not in
        memory are read from the table alone (one filtered scan for them all), so rewriting a few posts does not
        read every vector."""
        slots = [mirror.slot_of[iri] for iri in iris]
        missing = [iri for iri, slot in zip(iris, slots, strict=True) if not mirror.holds(slot)]
        if missing:
            tables = self._open_tables()
            found = tables.vectors_of(tables.table(name), missing)
            if found:
                mirror.remember([mirror.slot_of[iri] for iri in found], np.stack(list(found.values())))
        return {iri: row.copy() for iri, row in zip(iris, mirror.rows(slots), strict=True)}

    def _encoded(self, records: Sequence[Any], text: Callable[[Any], str], progress: Progress | None) -> dict[str, np.ndarray]:
        """``records`` encoded ``_PROGRESS_STEP`` at a time, with a progress report after each step (in one batch
        when nobody follows the progress)."""
        out: dict[str, np.ndarray] = {}
        step = _PROGRESS_STEP if progress is not None else max(len(records), 1)
        for start in range(0, len(records), step):
            batch = records[start : start + step]
            encoded = self.embedder.encode([text(r) for r in batch])
            out.update({r.iri: encoded[i] for i, r in enumerate(batch)})
            if progress is not None:
                progress(len(batch))
        return out

    def _post_row(
        self, record: PostRecord, previous: PostRecord | None, vector: np.ndarray, digest: str
    ) -> PostRow:
        return PostRow(record, search_text(record, previous), digest, vector)

    def _refreshed_row(self, record: PostRecord, previous: PostRecord | None) -> PostRow | None:
        """The row of an unchanged post with its context recomputed, or ``None`` when its context is current."""
        search = search_text(record, previous)
        slot = self._posts.slot_of[record.iri]
        if self._posts.search_hashes[slot] == search_hash(search):
            return None
        vector = self._stored_vectors(self._posts, POSTS_TABLE, [record.iri])[record.iri]
        return PostRow(record, search, self._posts.digests[slot], vector)

    def _repair_contexts(self) -> int:
        """Rewrite posts whose stored context no longer matches their previous turn (after an interrupted write)."""
        rows = [
            row
            for record in list(self._posts.live_records())
            if (row := self._refreshed_row(record, self._posts.previous(record))) is not None
        ]
        if rows:
            tables = self._open_tables()
            tables.upsert(tables.posts, post_rows_table(rows, self.embedder.dim))
            for row in rows:
                self._posts.put(row.record, row.digest, row.search_hash, row.vector)
        return len(rows)

    # -- internals: writing entities ------------------------------------------------------------------------------
    def _write_entities(
        self, changed: list[EntityRecord], removed: set[str], progress: Progress | None = None
    ) -> None:
        if not changed and not removed:
            return
        tables = self._open_tables()
        for start in range(0, len(changed), _WRITE_CHUNK):
            chunk = changed[start : start + _WRITE_CHUNK]
            vectors = self._entity_vectors(chunk, progress)
            rows = [EntityRow(r, entity_search_text(r), entity_digest(r), vectors[r.iri]) for r in chunk]
            data = entity_rows_table(rows, self.embedder.dim)
            _store_rows(tables, tables.entities, data, self._entities, [r.iri for r in chunk])
            self._unfolded += sum(len(row.search.encode()) for row in rows)
            for row in rows:
                self._entities.put(row.record, row.digest, row.search_hash, row.vector)
        if removed:
            tables.delete(tables.entities, removed)
            for iri in removed:
                self._entities.remove(iri)
        self._note_written(ENTITIES_TABLE, len(changed) + len(removed))
        self._after_write()

    @contextmanager
    def _watched(self) -> Iterator[None]:
        """Tell the watcher a write began and, once it has committed without error, that it is done."""
        watcher = self.watcher
        token = watcher.begin() if watcher is not None else None
        yield
        if watcher is not None:
            watcher.done(token)

    @contextmanager
    def writes_in_bulk(self) -> Iterator[None]:
        """Writes inside fold the text they add once, when the block ends, rather than every
        :attr:`fold_text_bytes`: an ingest of many turns is not searched before it is done, and at 1M posts a fold
        costs about a second (1,200 turns ingested in 11.5 s with one fold at the end, 15.8 s with one every 64 kB).
        Not on the way out of a block that raised."""
        with self._lock:
            self._bulk += 1
        try:
            yield
        finally:
            with self._lock:
                self._bulk -= 1
        with self._lock:
            if not self._bulk and self._unfolded >= self.fold_text_bytes:
                self._optimize_unless_building()

    def _after_write(self) -> None:
        self._writes += 1
        if self._writes >= self.optimize_every or (not self._bulk and self._unfolded >= self.fold_text_bytes):
            self._optimize_unless_building()
        for name in (POSTS_TABLE, ENTITIES_TABLE):
            self._keep_vector_index(name)

    def _note_written(self, name: str, rows: int) -> None:
        counted = self._unindexed[name]
        if counted is not None:
            self._unindexed[name] = counted + rows

    def _keep_vector_index(self, name: str) -> None:
        """Build the vector index of a table that has reached :attr:`ann_min_rows` rows, and fold the rows
        written since into it once they pass :data:`~pcm.index.ann.STALE_SHARE` of the table (LanceDB scans them
        flat until then, so they are found at once either way). A table that has grown
        :data:`~pcm.index.ann.RETRAIN_GROWTH` times since its index was built gets a new one, with partitions
        sized for it."""
        mirror = self._post_mirror if name == POSTS_TABLE else self._entity_mirror
        if mirror is None or len(mirror) < self.ann_min_rows:
            return
        self._adopt_builds()
        if name in self._builds:
            return  # no compaction beside the build: it would pre-empt it
        tables = self._open_tables()
        if not tables.vector_indexed[name]:
            self._start_build(name)
            return
        pending = self._unindexed[name]
        if pending is None:
            indexed_rows, pending = tables.vector_index_rows(name)
            self._trained.setdefault(name, indexed_rows)
            self._unindexed[name] = pending
        if pending <= ann.STALE_SHARE * len(mirror):
            return
        if len(mirror) > ann.RETRAIN_GROWTH * max(self._trained.get(name, 0), 1):
            self._start_build(name)
        else:
            tables.optimize(self.version_retention, only=name)
            self._unindexed[name] = 0

    def _start_build(self, name: str) -> None:
        """Build the vector index of one table on the builder thread, off the write path: at 100k posts a build
        takes minutes, and under the lock every read and write would wait for it. Until it is adopted
        (:meth:`_adopt_builds`) searches go the way they went before (the exact scan, or the older index)."""
        if self._builder is None:
            self._builder = ThreadPoolExecutor(max_workers=2, thread_name_prefix="pcm-vector-index")
        tables = self._open_tables()
        self._builds[name] = self._builder.submit(tables.build_vector_index_detached, name)

    def _adopt_builds(self) -> None:
        """Put finished builds to use (callers hold the lock): the table handle moves to the version with the
        index, and the rows written during the build are counted as not yet in it. A failed build is logged and
        tried again on a later write; searches keep the exact scan (or the older index) meanwhile."""
        for name, future in list(self._builds.items()):
            if not future.done():
                continue
            del self._builds[name]
            try:
                rows = future.result()
            except (RuntimeError, OSError) as exc:  # LanceDB reports its own failures as RuntimeError
                log.warning("building the vector index of %s failed (%s); a later write tries again", name, exc)
                continue
            self._open_tables().adopt_vector_index(name)
            self._trained[name] = rows
            self._unindexed[name] = None  # counted from the index's own figures on the next write

    def _vector_ready(self, name: str) -> bool:
        """Whether vector searches of a table go through its LanceDB index: it has one, the table has reached
        :attr:`ann_min_rows`, and (posts) the mirror holds nothing the tables lack (:meth:`overlay_posts`)."""
        tables = self._open_tables()
        self._adopt_builds()
        if not tables.vector_indexed[name]:
            return False
        if name == POSTS_TABLE:
            return not self._overlaid and len(self._posts) >= self.ann_min_rows
        return len(self._entities) >= self.ann_min_rows

    def _nearest(
        self,
        name: str,
        query: np.ndarray,
        n: int,
        mask: np.ndarray | None = None,
        weights: np.ndarray | None = None,
        *,
        where: str | None = None,
        favoured: str | None = None,
        near: tuple[np.ndarray, float] | None = None,
        pool: list[int] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Slots and exact scores of the ``n`` rows of a table nearest ``query``, as
        :meth:`~pcm.index.mirror.PostMirror.top_by_vector` gives them, through LanceDB's vector index when
        :meth:`_vector_ready`.

        ``where`` is the SQL of ``mask`` (a mask without one is searched exactly). ``weights`` must then take two
        values, the larger on the rows ``favoured`` (SQL) selects: the index is asked for the
        :data:`FAVOURED_DEPTH` ``* n`` nearest rows and, unless ``n`` of those are favoured, the ``n`` nearest
        favoured ones, which between them hold the weighted best ``n`` (a row outside both is beaten by ``n`` rows
        either way). A mask that leaves fewer than :attr:`ann_min_rows` rows is
        scored exactly over those rows alone, and so is a filter the index searched too few partitions to fill.
        ``pool`` (a list) receives every candidate the index returned, when the index chose them.
        """
        mirror: PostMirror | EntityMirror = self._posts if name == POSTS_TABLE else self._entities
        usable = (
            self._vector_ready(name)
            and (mask is None or where is not None)
            and (weights is None or favoured is not None)
        )
        if not usable:
            return self._scan(mirror, query, n, mask, weights, near)
        wanted = min(n, len(mirror))
        if mask is not None:
            allowed = mirror.allowed_slots(mask)
            if len(allowed) < self.ann_min_rows:
                return mirror.rescore(allowed, query, n, mask, weights)
            wanted = min(n, len(allowed))
        table = self._open_tables().table(name)
        deferred = mirror.deferred()
        slot_of = mirror.slot_of
        if name == POSTS_TABLE and self._warming is not None:
            warming, self._warming = self._warming, None
            warming.result()  # the index loaded beside the mirror (:meth:`_warm_vector_index`)

        def search(condition: str | None, limit: int) -> list[int]:
            iris, vectors = ann.search_rows(table, query, limit, where=condition, vectors=deferred)
            rows = [i for i, iri in enumerate(iris) if iri in slot_of]
            if vectors is not None:
                mirror.remember([slot_of[iris[i]] for i in rows], vectors[rows])
            return [slot_of[iris[i]] for i in rows]

        found_slots = search(where, n if weights is None else FAVOURED_DEPTH * n)
        if weights is not None:
            # n favoured rows among the plain nearest beat every row further out, favoured or not: the filtered
            # search (a prefilter over every row, ~3x a plain search at 1M) is needed only when they are fewer
            top = float(np.max(weights[: mirror.capacity()], initial=0.0))
            if int(np.count_nonzero(weights[np.asarray(found_slots, dtype=np.int64)] >= top)) < n:
                found_slots += search(f"({where}) AND ({favoured})" if where else favoured, n)
        found = np.asarray(found_slots, dtype=np.int64)
        slots, scores = mirror.rescore(found, query, n, mask, weights)
        if len(slots) < wanted:
            return self._scan(mirror, query, n, mask, weights, near)
        if pool is not None:
            pool.extend(found_slots)
        return slots, scores

    @staticmethod
    def _scan(
        mirror: PostMirror | EntityMirror,
        query: np.ndarray,
        n: int,
        mask: np.ndarray | None,
        weights: np.ndarray | None,
        near: tuple[np.ndarray, float] | None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The exact scan of every vector (:meth:`~pcm.index.mirror.PostMirror.top_by_vector`)."""
        if near is None:
            return mirror.top_by_vector(query, n, mask, weights)
        return mirror.top_by_vector(query, n, mask, weights, near=near)

    # -- internals: reading ---------------------------------------------------------------------------------------
    def _warm_vector_index(self, tables: Tables) -> None:
        """Before the posts mirror is first filled for a search, have LanceDB load the posts' vector index on the
        side thread, if searches will go through it: at 1M posts the load took 1.2-1.7 s of CPU, on LanceDB's
        threads, and the mirror 2 s on this one (Python); one after the other they made most of a fresh process's
        first recall. The vector search waits for the load (:meth:`_nearest`)."""
        if self._post_mirror is not None or self._warming is not None or self._overlaid:
            return
        if not tables.vector_indexed[POSTS_TABLE] or tables.posts.count_rows() < self.ann_min_rows:
            return
        self._warming = self._beside().submit(tables.posts.prewarm_index, ann.INDEX_NAME)

    def _keep_resident(self) -> None:
        """Once :attr:`resident_after` recalls have searched vectors with the posts' matrix deferred, read it on a
        side thread and keep it, if it fits :attr:`resident_mb`: a process that goes on answering (a server, an
        assistant's session) then scores the index's candidates from memory instead of reading their vectors back
        from the table with every search (hybrid recall wall p95 45.7-47.7 ms deferred against 36.3-37.4 ms with
        the matrix read, 1M English posts, warm; the read takes about 6 s at 1M). A one-off recall (the CLI) never
        gets there. The recalls meanwhile go on deferred; the first after the read adopts the matrix, with the
        rows written meanwhile laid over it (:meth:`~pcm.index.mirror.PostMirror.adopt_matrix`). A read that
        fails is dropped (the matrix stays deferred) and tried again after as many recalls."""
        mirror = self._posts
        if self._residing is not None:
            if not self._residing.done():
                return
            residing, self._residing = self._residing, None
            try:
                reader, matrix = residing.result()
            except (OSError, RuntimeError) as exc:  # LanceDB's read errors; recall goes on without the matrix
                log.warning("reading the posts' vector matrix into memory failed (%s); it stays deferred", exc)
                self._deferred_recalls = 0
                return
            mirror.adopt_matrix(reader, matrix)
            return
        deferred = mirror.deferred_reader()
        if deferred is None or len(mirror.alive) * self.embedder.dim * 4 > self.resident_mb * 2**20:
            return
        self._deferred_recalls += 1
        if self._deferred_recalls < self.resident_after:
            return
        self._deferred_recalls = 0
        if self._resident_pool is None:
            self._resident_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pcm-index-resident")
        self._residing = self._resident_pool.submit(lambda: (deferred, deferred()))

    @property
    def _posts(self) -> PostMirror:
        """The posts mirror, filled from the table on first use (recall never needs the entities mirror, nor
        entity matching the posts one). Where searches will go through the vector index (:meth:`_vector_ready`)
        the vector matrix is left unread until something needs it whole (an exact scan, a write): at 1M posts it
        is 1.5 GB, read in seconds, and recall through the index scores only the rows its searches return."""
        if self._post_mirror is None:
            tables = self._open_tables()
            rows = tables.posts.count_rows()
            defer = tables.vector_indexed[POSTS_TABLE] and not self._overlaid and rows >= self.ann_min_rows
            with _gc_paused():
                columns = (*POST_FIELDS, "ts") if defer else (*POST_FIELDS, "vector", "ts")
                data = tables.read_arrow(tables.posts, columns)
                ts = data.column("ts").to_numpy().astype(np.float64)
                mirror = PostMirror(self.embedder.dim)
                if defer:
                    iris = data.column("iri")
                    mirror.load_columns(data, partial(self._read_post_vectors, mirror, iris), ts)
                else:
                    mirror.load_columns(data, tables.vectors(data), ts, own=True)
                _settle(rows)
            self._post_mirror = mirror
        return self._post_mirror

    def _read_post_vectors(self, mirror: PostMirror, iris: Any) -> np.ndarray:
        """The matrix the posts mirror deferred: the ``iris`` it loaded (an Arrow array), slot for slot, read from
        the table now. Rows the table has since replaced come with their new vectors (the write that replaced
        them puts the same ones), rows it no longer holds stay zero (the write that deleted them clears them).

        The table is read a batch at a time into the matrix: read whole and then copied, the two held 3 GB at 1M
        posts, and the process kept most of it after (resident 5.0 GB, peak 5.3 GB, against 1.9 GB before)."""
        tables = self._open_tables()
        size = len(iris)
        matrix = np.zeros((size, self.embedder.dim), dtype=np.float32)
        slot_of, offset = mirror.slot_of, 0
        for batch in tables.batches(tables.posts, ("iri", "vector")):
            rows, now = batch.num_rows, batch.column("iri")
            vectors = tables.vectors(batch)
            if offset + rows <= size and iris.slice(offset, rows).equals(pa.chunked_array([now])):
                matrix[offset : offset + rows] = vectors  # in load order, as the table usually is
            else:
                for row, iri in enumerate(now.to_pylist()):
                    slot = slot_of.get(iri)
                    if slot is not None and slot < size:
                        matrix[slot] = vectors[row]
            offset += rows
        return matrix

    @property
    def _entities(self) -> EntityMirror:
        """The entities mirror, filled from the table on first use."""
        if self._entity_mirror is None:
            tables = self._open_tables()
            with _gc_paused():
                c = tables.read(tables.entities, _ENTITY_COLUMNS)
                keys = [
                    _split_keys(exact, normal)
                    for exact, normal in zip(c["exact_keys"], c["normal_keys"], strict=True)
                ]
                mirror = EntityMirror(self.embedder.dim)
                mirror.load(_entity_records(c), c["digest"], c["search_hash"], c["vector"], keys)
                _settle(len(keys))
            self._entity_mirror = mirror
        return self._entity_mirror

    def _hits(
        self,
        fused: dict[int, float],
        k: int,
        recency: float | None,
        *,
        hybrid: bool = False,
        head: Sequence[int] = (),
    ) -> list[RecallHit]:
        """The ``k`` best posts as hits, each with its own (recency-weighted) score. A ``hybrid`` order is
        re-ordered for content diversity with ``diversity`` on, so a hit's score may exceed the one before it."""
        if not fused:
            return []
        slots = np.fromiter(fused.keys(), dtype=np.int64, count=len(fused))
        scores = np.fromiter(fused.values(), dtype=np.float64, count=len(fused))
        if recency is not None:
            scores = scores * ranking.recency_weights(self._posts.ts[slots], recency)
        order = np.lexsort((slots, -scores))
        if head:
            first = {slot: i for i, slot in enumerate(head)}
            rank = np.array([first.get(int(slot), len(first)) for slot in slots.tolist()])
            order = order[np.argsort(rank[order], kind="stable")]
        if hybrid and self.recall_config.diversity > 0:
            order = self._diversified(order, slots, scores, fixed=len(head))
        hits = []
        for i in order[:k].tolist():
            record = self._posts.record_at(int(slots[i]))
            hits.append(
                RecallHit(
                    post=record.iri,
                    source_id=record.source_id,
                    session=record.session,
                    time=record.time,
                    speaker=record.speaker,
                    role=record.role,
                    text=record.text,
                    score=float(scores[i]),
                )
            )
        return hits

    def _diversified(self, order: np.ndarray, slots: np.ndarray, scores: np.ndarray, *, fixed: int) -> np.ndarray:
        """``order`` (positions into ``slots``/``scores``, best first) with its first ``diversity_pool`` positions
        re-ordered for content diversity (:func:`~pcm.index.recall.diversify`) over the posts' stored vectors; the
        first ``fixed`` (the feedback head) stay in place."""
        pool = order[: self.recall_config.diversity_pool]
        unit = self._posts.unit_vectors(slots[pool])
        picked = ranking.diversify(scores[pool], unit, self.recall_config.diversity, fixed=fixed)
        return np.concatenate([pool[picked], order[self.recall_config.diversity_pool :]])

    @staticmethod
    def _vector_text(query: str, named: set[str], *, keep_name: bool = False) -> str:
        """The query the vector leg embeds: without the name of the one speaker it names, unless
        ``keep_name`` (``RecallConfig.named_speaker_in_vector``) keeps it (the speaker prior already favours that
        speaker's posts)."""
        if keep_name or len(named) != 1:
            return query
        content = without_speakers(query, named)
        return content if query_content(content) else query

    def _feedback_legs(
        self,
        query: str,
        named: set[str],
        legs: list[ranking.Leg],
        vector: np.ndarray,
        depth: int,
        mask: np.ndarray | None,
        factors: np.ndarray | None,
        where: str | None,
        favoured: str | None = None,
        pool: Sequence[int] = (),
    ) -> tuple[list[int], list[ranking.Leg]]:
        """Pseudo-relevance feedback: the ``feedback_posts`` best fused posts, and the vector leg again with the query
        ``vector`` moved towards theirs.

        When the vector index chose the first vector leg's candidates (``pool``, see :meth:`_nearest`), the moved
        query is not searched again: its leg is the best of those candidates and the other legs' posts, re-scored
        exactly against it. The query moves a quarter of the way towards five of its own nearest posts, so its
        neighbours are the first search's; a second search of the index cost as much as the first (15-20 ms CPU
        at 1M posts, 23-45 ms under a prior whose filtered search runs)."""
        fused = ranking.rrf(legs)
        top = ranking.ranked(fused)[: self.recall_config.feedback_posts]
        if not top:
            return [], []
        posts = self._posts
        out: list[ranking.Leg] = []
        if self.recall_config.feedback_vector_weight > 0:
            moved = vector + self.recall_config.feedback_beta * posts.rows(top).mean(axis=0)
            moved = (moved / max(float(np.linalg.norm(moved)), 1e-9)).astype(np.float32)
            if pool:
                candidates = np.concatenate([np.asarray(pool, dtype=np.int64), *(leg.slots for leg in legs)])
                slots, scores = posts.rescore(candidates, moved, depth, mask, factors)
            else:
                slots, scores = self._nearest(POSTS_TABLE, moved, depth, mask, factors, where=where, favoured=favoured)
            out.append(ranking.rank_leg(slots, scores, self.recall_config.feedback_vector_weight))
        return top, out

    def _quantity_leg(self, unit: quantity.Unit, fused: dict[int, float]) -> ranking.Leg:
        """The fused candidates whose text states an amount of ``unit``, best fused first."""
        found = [slot for slot in ranking.ranked(fused) if quantity.states(self._posts.record_at(slot).text, unit)]
        slots = np.asarray(found, dtype=np.int64)
        return ranking.Leg(slots, np.array([fused[s] for s in found], dtype=np.float64), self.recall_config.quantity_weight)

    def _fts_leg(
        self, found: tuple[list[tuple[str, float]], np.ndarray | None], factors: np.ndarray | None
    ) -> ranking.Leg:
        """The full-text hits (and, with the matrix deferred, their vectors, which the mirror keeps) as a leg."""
        hits, vectors = found
        if vectors is not None:
            slot_of = self._posts.slot_of
            rows = [i for i, (iri, _) in enumerate(hits) if iri in slot_of]
            self._posts.remember([slot_of[hits[i][0]] for i in rows], vectors[rows])
        known = [(self._posts.slot_of[iri], score) for iri, score in hits if iri in self._posts]
        slots = np.array([slot for slot, _ in known], dtype=np.int64)
        scores = np.array([score for _, score in known], dtype=np.float64)
        return ranking.rank_leg(slots, scores, self.recall_config.fts_weight, factors)

    def _speaker_prior(self, named: set[str]) -> np.ndarray | None:
        """Per-slot factors favouring the one speaker a query names (``None`` when it names none or several)."""
        if len(named) != 1:
            return None
        (name,) = named
        return ranking.speaker_factors(
            self._posts.capacity(), self._posts.speaker_mask(name), self.recall_config.other_speaker_factor
        )

    def _owner_prior(self) -> np.ndarray:
        """Per-slot factors favouring the owner's posts, for a first-person question that names no one."""
        posts = self._posts
        size = posts.capacity()
        owner = posts.role_code[:size] == posts.roles.lookup(ranking.OWNER_ROLE)
        return ranking.role_factors(owner, self.recall_config.other_role_factor)

    def _query_vector(self, text: str) -> np.ndarray:
        """The vector of a query or mention; recent ones are cached (mentions recur during extraction)."""
        cached = self._query_cache.get(text)
        if cached is not None:
            self._query_cache.move_to_end(text)
            return cached
        vector = self.embedder.encode([text])[0]
        self._query_cache[text] = vector
        if len(self._query_cache) > _QUERY_CACHE:
            self._query_cache.popitem(last=False)
        return vector

    def _open_tables(self) -> Tables:
        if self._tables is None:
            raise PcmError(f"the index in {self.directory} is closed")
        return self._tables


class _PostView:
    """The posts as they will be once a write lands: the batch overrides the mirror, removed posts are gone."""

    def __init__(self, mirror: PostMirror, changed: list[PostRecord], removed: set[str]) -> None:
        self._mirror = mirror
        self._changed = changed
        self._removed = removed
        self._touched = removed | {r.iri for r in changed}
        self._at = {(r.session, r.position): r for r in changed}

    def at(self, session: str, position: int) -> PostRecord | None:
        record = self._at.get((session, position))
        if record is not None:
            return record
        iri = self._mirror.at.get((session, position))
        if iri is None or iri in self._touched:
            return None
        return self._mirror.record(iri)

    def previous(self, record: PostRecord) -> PostRecord | None:
        return self.at(record.session, record.position - 1)

    def followers(self) -> list[PostRecord]:
        """Posts whose previous turn is one that appeared, changed, moved or went."""
        places: set[tuple[str, int]] = set()
        for record in self._changed:
            places.add((record.session, record.position + 1))
            old = self._mirror.record(record.iri)
            if old is not None:
                places.add((old.session, old.position + 1))
        for iri in self._removed:
            old = self._mirror.record(iri)
            if old is not None:
                places.add((old.session, old.position + 1))
        found = (self.at(session, position) for session, position in sorted(places))
        return [r for r in found if r is not None and r.iri not in self._removed and r.iri in self._mirror]


_ENTITY_COLUMNS = (
    "iri",
    "label",
    "alt_labels",
    "types",
    "text",
    "search_hash",
    "exact_keys",
    "normal_keys",
    "digest",
    "vector",
)


def _entity_records(c: dict[str, Any]) -> list[EntityRecord]:
    fields = zip(c["iri"], c["label"], c["alt_labels"], c["types"], c["text"], strict=True)
    return [EntityRecord(i, label, tuple(a or ()), tuple(t or ()), x) for i, label, a, t, x in fields]


#: A mirror of at least this many rows is frozen out of the cyclic garbage collector once built (see
#: :func:`_settle`); smaller heaps are cheap to scan.
FREEZE_ROWS = 50_000


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a mirror is built: the hundreds of thousands of small objects
    trigger collection after collection over an ever larger heap (loading 100k entities took twice as long)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _settle(rows: int) -> None:
    """Move the objects alive once a mirror of ``rows`` rows is built out of the collector's reach
    (:func:`gc.freeze`), when it is large: they live as long as the index, and every full collection after would
    scan them again. At 1M posts the entities mirror (77,702 rows) left ~850k objects, and a full collection over
    them took 100-340 ms of CPU, 9 times in 60 asks: the tail of ask's latency. Frozen, 5-13 ms. An object still
    frees itself when its last reference goes; only a reference cycle among them would stay."""
    if rows >= FREEZE_ROWS:
        gc.freeze()


def _store_rows(
    tables: Tables, table: Any, data: Any, mirror: PostMirror | EntityMirror, iris: list[str]
) -> None:
    """Write rows in one commit: a plain append when the mirror holds none of their IRIs (new posts at ingest,
    new entities after extraction): one new entity next to 5,000 took 4.8 ms to append against 13.1 ms to
    update-or-insert (median). Else an upsert.

    The mirror is the table's exact copy (every write of the one writing process goes through it, and a crash is
    reconciled on open), so "not in the mirror" means "not in the table" and the append cannot duplicate a row.
    """
    if any(iri in mirror for iri in iris):
        tables.upsert(table, data)
    else:
        tables.append(table, data)


def _unit(vector: np.ndarray, dim: int) -> np.ndarray:
    """``vector`` as a float32 unit vector of the index's dimension (a caller's vector is checked, not trusted)."""
    flat = np.asarray(vector, dtype=np.float32).reshape(-1)
    if flat.shape[0] != dim:
        raise UsageError(f"a mention vector must have {dim} dimensions, got {flat.shape[0]}")
    norm = float(np.linalg.norm(flat))
    return flat / norm if norm > 0 else flat


def _split_keys(exact: str | None, normal: str | None) -> tuple[list[str], list[str]]:
    return (exact.split(KEY_SEPARATOR) if exact else [], normal.split(KEY_SEPARATOR) if normal else [])


def _post_filter(
    role: str | None, speaker: str | None, session: str | None, since: float | None, until: float | None
) -> str | None:
    """The SQL prefilter of the full-text leg, the same restriction the vector leg applies in memory."""
    parts = [
        f"{column} = {sql_string(value)}"
        for column, value in (("role", role), ("speaker", speaker), ("session", session))
        if value is not None
    ]
    if since is not None:
        parts.append(f"ts >= {since!r}")
    if until is not None:
        parts.append(f"ts <= {until!r}")
    return " AND ".join(parts) or None

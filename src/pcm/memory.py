"""The facade: one object per open memory (docs/DESIGN.md §1, §8). The CLI, the endpoint and tests go through it.

Data flows one way: utterance → post (+ extraction when an LLM is configured, before ingest returns or queued for
later: :meth:`Memory.extraction_mode`) → store → side index.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyoxigraph as ox

from pcm.backend import Backend, PurgeScope, QueryResult, Solutions, term_value
from pcm.context import CACHE_DIR, VECTORS_DIR, MemoryContext
from pcm.conversations import (
    Conversation,
    check_conversations,
    check_id,
    check_text,
    parse_text_utterance,
    parse_timestamp,
)
from pcm.errors import (
    BadIri,
    BadTime,
    InputError,
    MemoryClosedError,
    MemoryLockedError,
    MemoryVersionError,
    NotFound,
    OntologyMigrationNeeded,
    PcmError,
    ResourceError,
    UsageError,
    ValidationError,
    write_refusal,
)
from pcm.importing import (
    BulkRestore,
    check_vocabulary_store,
    dump_namespace,
    refuse_default_graph,
    refuse_problems,
    rehome,
    rehome_graphs,
)
from pcm.index.records import entity_record
from pcm.layout import BY_ID, CONVERSATION, DatasetLayout, layout_of_graph
from pcm.limits import ASK_K, PAGE_OFFSET, PAGE_SIZE, RECALL_K, SPARQL_ROWS
from pcm.manifest import MANIFEST, Manifest, zone_of
from pcm.namespaces import (
    PREFIXES,
    RDF,
    SCHEMA_HTTP,
    SIOC,
)
from pcm.naming import Naming
from pcm.oserrors import resource_errors
from pcm.private import Hold, hold
from pcm.provenance import Activity, PostRef, activity_quads, fixed_agent_quads, post_quads, session_quads
from pcm.rdfbridge import to_rdflib
from pcm.rdfio import canonical_blank_nodes, detect_rdf_format, load_staging, serialize
from pcm.rdflimits import RdfLimits, read_file
from pcm.resources import render_query
from pcm.settings import Settings
from pcm.sparql import check_query
from pcm.store import MemoryStore, PostInfo, Stats
from pcm.store_binding import STORE_DIR, bind, check_holds, record

if TYPE_CHECKING:
    import rdflib

    from pcm.explore import Explorer
    from pcm.extraction.duplicates import DuplicatePair
    from pcm.extraction.pipeline import ExtractionRunReport
    from pcm.index import RecallHit, SideIndex
    from pcm.index.outbox import IndexLag
    from pcm.llm import Completion, LLMClient
    from pcm.models import (
        Answer,
        EntityPage,
        Fact,
        FactDeleted,
        FactHistory,
        FactPage,
        Forgotten,
        Message,
        MessagePage,
        Source,
    )
    from pcm.ontology import Ontology
    from pcm.ontology_tools.migrate import OntologyDrift
    from pcm.serve_file import ServerInfo
    from pcm.shapes import Validator
    from pcm.summaries.store import StoredSummary, SummaryRow

INDEX_DIR = "index"
#: A read-only open that finds at most this many posts missing from the side index embeds them in memory so recall
#: still finds them (~2-5 ms a post); beyond it, it only says they are missing.
READ_ONLY_CATCH_UP = 2000
#: Restores above this many quads use the engine's bulk loader (transactional writes run at ~35k quads/s).
BULK_THRESHOLD = 100_000

Progress = Callable[[int], None]
#: What each text a caller hands the facade is called in the one line that refuses it (name, where): a face that
#: must read a text before the facade does (a typed request body) refuses it with these words too.
ASK_TEXT = ("the question", "ask")
RECALL_TEXT = ("the text to recall", "recall")
MESSAGE_TEXT = ("content", "the message")
RDF_TYPE = RDF + "type"


#: What :meth:`Memory.extraction_mode` answers: no model configured, extraction before ingest returns, or later.
EPISODIC, INLINE, QUEUED = "episodic", "inline", "queued"


@dataclass
class IngestReport:
    conversations: int = 0
    utterances: int = 0
    added: int = 0
    skipped: int = 0
    extracted: int = 0
    failed: int = 0
    pending: int = 0
    """Posts of this ingest whose facts are not extracted yet (all of them in episodic and queued modes)."""
    mode: str = EPISODIC
    """``episodic`` (no model), ``extraction (MODEL)`` (extracted before returning) or ``queued`` (to be extracted
    by ``pcm extract --pending`` or a running ``pcm serve``)."""
    posts: list[str] = field(default_factory=list)
    extraction: dict[str, object] = field(default_factory=dict)
    zone: str = "UTC"
    """The memory's zone, in which times given without one were read."""
    zoned: int = 0
    """Message and session times given without a zone, read in :attr:`zone` (0: every time carried its own)."""

    def as_json(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if k != "posts"}

    def zone_note(self) -> str | None:
        """The line that says times were read in the memory's zone, when any were."""
        if not self.zoned:
            return None
        return f"{self.zoned} time(s) given without a zone were read in the memory's zone, {self.zone}"


@dataclass(frozen=True)
class RememberReport:
    """What :meth:`Memory.remember` did with one message."""

    post: str
    """The post IRI the message is stored as (the earlier one when nothing new was stored)."""
    stored: bool
    """False when the message was already stored (a retry with the same key): nothing new was written."""
    session: str
    """The session id the post belongs to."""
    mode: str = ""
    """The ingest's :attr:`IngestReport.mode` (what happens to the message's facts); empty when nothing was stored."""
    report: IngestReport | None = None
    """The ingest that stored it (None when nothing was stored): its counts, and whether its time was given
    without a zone (:attr:`IngestReport.zoned`)."""

    @property
    def zoned(self) -> bool:
        """Whether the time was given without a zone and read in the memory's."""
        return bool(self.report is not None and self.report.zoned)

    def as_json(self) -> dict[str, object]:
        return {"post": self.post, "stored": self.stored, "session": self.session}


@dataclass(frozen=True)
class SessionSummary:
    """A session's stored summary, how many posts the session has and the time span the summary covers."""

    stored: StoredSummary
    session_posts: int
    covered_first: str | None
    covered_last: str | None

    def as_json(self) -> dict[str, object]:
        return self.stored.as_json() | {"session_posts": self.session_posts, "covered_first": self.covered_first,
                                        "covered_last": self.covered_last}


@dataclass
class ImportReport:
    file: str
    mode: str  # "facts" (triples into an import graph) or "restore" (a pcm dataset dump)
    quads: int
    graphs: list[str]

    def as_json(self) -> dict[str, object]:
        return dict(self.__dict__)


def _open_backend(settings: Settings, *, read_only: bool) -> Backend:
    """The memory's store: pcm's own server over its files (``engine_url``, with ``pcm serve``'s token), a SPARQL
    server (``store_url``, with the store's own credentials), else the embedded store."""
    if settings.engine_url or settings.store_url:
        from pcm.backend_remote import RemoteBackend

        timeout = max(settings.query_timeout, 30.0)
        if settings.engine_url:
            return RemoteBackend(settings.engine_url, token=settings.token, batch=settings.store_batch,
                                 timeout=timeout, write_timeout=settings.store_write_timeout)
        return RemoteBackend(
            settings.store_url,
            update_url=settings.store_update_url,
            gsp_url=settings.store_gsp_url,
            token=settings.store_token,
            user=settings.store_user,
            password=settings.store_password,
            engine=settings.store_engine,
            batch=settings.store_batch,
            timeout=timeout,
            write_timeout=settings.store_write_timeout,
        )
    from pcm.backend_local import LocalBackend

    return LocalBackend(settings.memory / STORE_DIR, read_only=read_only)


@dataclass
class MoveReport:
    """What :meth:`Memory.move_store` did."""

    source: str
    """Where the memory was: a server's URL (without credentials) or ``embedded``."""
    target: str
    """Where it is now, the same way."""
    engine: str
    """The target's engine profile, or ``embedded``."""
    quads: int
    graphs: int
    source_kept: bool
    """The source still holds the memory's graphs (``keep_source``): pcm no longer reads them."""
    index_added: int = 0
    index_removed: int = 0

    def as_json(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass
class PurgeReport:
    """What :meth:`Memory.purge` did, and what it can and cannot guarantee on this store."""

    quads: int | None
    """Quads in the rewritten store (None: the store is a server's, its files were not pcm's to rewrite)."""
    backups_removed: list[str] = field(default_factory=list)
    """Migration backups deleted because they held a forgotten post."""
    backups_unreadable: list[str] = field(default_factory=list)
    """Backups that could not be read to tell (kept; check or delete them by hand)."""
    scope: str = "files"
    """The backend's purge scope (:class:`pcm.backend.PurgeScope`): ``files`` or ``graphs``."""

    @property
    def guaranteed(self) -> list[str]:
        common = [
            "older versions of the side index are dropped",
            "the reply and vector caches are emptied",
            "migration backups holding a forgotten post are deleted, the others rewritten",
        ]
        if self.scope == "files":
            return ["the store's files are rewritten: forgotten text is gone from them", *common]
        return ["forgotten posts and what was extracted from them are deleted from the memory's graphs "
                "(no query to the server returns them)", *common]

    @property
    def not_guaranteed(self) -> list[str]:
        if self.scope == "files":
            return []
        return ["the server's own files: its engine may keep deleted values on disk (string dictionary, logs, "
                "its backups) until it is compacted or rebuilt where it runs"]

    def as_json(self) -> dict[str, object]:
        return {"quads_kept": self.quads, "backups_removed": self.backups_removed,
                "backups_unreadable": self.backups_unreadable, "scope": self.scope,
                "guaranteed": self.guaranteed, "not_guaranteed": self.not_guaranteed}


class Memory:
    """One person's memory: manifest, store and side index, opened together and refused together."""

    def __init__(self, settings: Settings, manifest: Manifest, backend: Backend, *, read_only: bool) -> None:
        self.held_by_server = False
        """Opened through a running ``pcm serve`` (its engine holds the store's files, so no purge now)."""
        naming = Naming(manifest.namespace, DatasetLayout.of(manifest.layout, manifest.memory_id))
        self.context = MemoryContext(
            settings, manifest, naming, backend, MemoryStore(backend, naming), read_only, open_index=lambda: self.index
        )
        """What the pipelines are given instead of the facade; it holds every per-memory cache and resource."""
        self._index: SideIndex | None = None
        self._closed = False
        self._client: LLMClient | None = None
        self._client_lock = threading.Lock()
        self.queued_listeners: list[Callable[[int], None]] = []
        """Called with the number of posts an ingest left queued for extraction (``pcm serve``'s worker listens)."""
        self.ontology_drift: OntologyDrift | None = None
        """Set on a read-only open of a memory whose ontology differs from this pcm's (writes are refused)."""
        self.index_lag: IndexLag | None = None
        """Set when a read-only open found the side index behind the store (see :meth:`_catch_up_read_only`)."""
        self._private: Hold | None = None
        """This memory's share of the owner-only umask (:mod:`pcm.private`), given back at :meth:`close`."""

    # The facade's parts are its context's, so the facade and the pipelines never see two values.

    @property
    def settings(self) -> Settings:
        return self.context.settings

    @settings.setter
    def settings(self, value: Settings) -> None:
        self.context.settings = value

    @property
    def manifest(self) -> Manifest:
        return self.context.manifest

    @manifest.setter
    def manifest(self, value: Manifest) -> None:
        self.context.manifest = value

    @property
    def backend(self) -> Backend:
        return self.context.backend

    @backend.setter
    def backend(self, value: Backend) -> None:
        self.context.backend = value

    @property
    def naming(self) -> Naming:
        return self.context.naming

    @property
    def store(self) -> MemoryStore:
        return self.context.store

    @property
    def read_only(self) -> bool:
        return self.context.read_only

    # -- lifecycle -----------------------------------------------------------------------------------------------

    @classmethod
    def init(
        cls, settings: Settings, *, owner: str = "me", namespace: str | None = None, share_store: bool = False,
        zone: str = "UTC",
    ) -> Memory:
        """Create a memory. On a remote store that already holds another memory (another owner's namespace) this is
        refused unless ``share_store``. A memory made on a remote store names its graphs with its id
        (docs/DESIGN.md §3, dataset layout), so memories sharing a store read only their own graphs. ``zone`` is
        the zone times given without one are read in (an IANA name, default UTC)."""
        zone_of(zone)  # a zone that is none is refused before anything is made
        path = settings.memory
        if (path / MANIFEST).exists():
            raise UsageError(f"a memory already exists at {path}")
        if path.exists() and any(p.name not in {STORE_DIR, INDEX_DIR} for p in path.iterdir()):
            raise UsageError(f"{path} exists and is not empty; choose a new directory for the memory")
        from pcm.ontology import load_ontology

        ontology = load_ontology()
        manifest = Manifest(owner=owner, ontology_version=ontology.version, ontology_digest=ontology.digest, zone=zone)
        if settings.store_url:
            manifest.layout = BY_ID  # a server may hold other memories: this one's graphs carry its id
        if namespace:
            manifest.namespace = namespace if namespace.endswith(("/", "#")) else namespace + "/"
        private = hold(path)  # before the first create: the directory and every file in it are the owner's only
        try:
            path.mkdir(parents=True, exist_ok=True)
            backend = _open_backend(settings, read_only=False)
        except BaseException:
            private.release()
            raise
        if settings.store_url and not share_store:
            try:
                _refuse_shared_store(backend, settings.store_url, manifest.namespace)
            except BaseException:
                backend.close()
                private.release()
                raise
        memory = cls(settings, manifest, backend, read_only=False)
        memory._private = private
        try:
            memory.store.replace_ontology(ontology.quads(memory.naming.layout))
            memory.store.write(fixed_agent_quads(memory.naming, owner))
        except PcmError as exc:
            note = _undo_init(memory) if settings.store_url else ""
            memory.close()
            if not note:
                raise
            raise (exc.after(note) if isinstance(exc, ResourceError) else type(exc)(f"{exc}; {note}")) from exc
        except BaseException:
            memory.close()
            raise
        if settings.store_url:  # every later command finds the server here, PCM_STORE_URL or not
            record(manifest, settings, getattr(backend, "engine", settings.store_engine))
        manifest.save(path)  # last: a memory without memory.toml is not a memory, so a failed init is retried
        return memory

    @classmethod
    def create(
        cls, path: str | os.PathLike[str], *, owner: str = "me", namespace: str | None = None, zone: str = "UTC"
    ) -> Memory:
        """Create a memory in the directory ``path`` (other settings from ``PCM_*``) and return it open."""
        return cls.init(Settings.from_env(memory=Path(path).expanduser()), owner=owner, namespace=namespace, zone=zone)

    @classmethod
    def open(
        cls, settings: Settings | str | os.PathLike[str], *, read_only: bool = False, migrating: bool = False
    ) -> Memory:
        """Open an existing memory, given its settings or its directory (other settings from ``PCM_*``).

        A memory whose ontology differs from this pcm's (version or content) opens read-only only: a writable open
        is refused (:class:`OntologyMigrationNeeded`) and a read-only one says so in :attr:`ontology_drift`. Nothing
        here replaces the stored ontology graph or the recorded version: only ``pcm ontology migrate`` does, after
        a backup and a validation. ``migrating`` is for that command alone: it skips the check.
        """
        if not isinstance(settings, Settings):
            settings = Settings.from_env(memory=Path(settings).expanduser())
        manifest = Manifest.load(settings.memory)
        settings = bind(settings, manifest)  # the server memory.toml records; PCM_STORE_URL must agree with it
        adopted = bool(settings.store_url) and not manifest.store_url  # made on a server before pcm recorded it
        held = False
        if not settings.store_url and not settings.engine_url:
            direct = settings
            settings = _through_running_server(settings, read_only=read_only)
            held = settings is not direct
        private = hold(settings.memory)  # owner-only files from here on, and a wider tree repaired (pcm.private)
        try:
            backend = _open_backend(settings, read_only=read_only)
        except BaseException:
            private.release()
            raise
        memory = cls(settings, manifest, backend, read_only=read_only)
        memory._private = private
        memory.held_by_server = held
        try:
            if settings.store_url:
                check_holds(backend, memory.naming, settings, manifest)
            if not migrating:
                memory._check_ontology()
        except BaseException:
            backend.close()
            private.release()
            raise
        if not read_only and adopted:
            record(manifest, settings, getattr(backend, "engine", settings.store_engine))
            manifest.save(settings.memory)
        elif not read_only and not manifest.seal and not settings.store_url and not settings.engine_url:
            manifest.save(settings.memory)  # a memory made before the seal is sealed on its first writable open
        if not read_only and not migrating:
            memory._catch_up_summaries()
        return memory

    @classmethod
    def move_store(
        cls, settings: Settings, target: str, *, engine: str = "auto", keep_source: bool = False,
        progress: Progress | None = None,
    ) -> MoveReport:
        """Move the memory to another store: the SPARQL server at ``target``, or ``"embedded"``, its own store in its
        directory. Every quad goes as it is (graph names, IRIs, the ontology, provenance and history), so its export is
        the same before and after; the copy is checked against the source before ``memory.toml`` is pointed at it,
        and the memory is left where it was if anything fails. Then the source's graphs are dropped (kept with
        ``keep_source``: an embedded store is renamed ``oxigraph.moved``) and the side index is reconciled with the
        new store. Credentials for either server come from ``PCM_STORE_USER`` / ``PCM_STORE_PASSWORD`` /
        ``PCM_STORE_TOKEN`` or the target URL itself; no credential is written down.
        """
        from pcm.store_binding import has_local_store, same_store, without_credentials
        from pcm.store_move import canonical_lines, check_copy, copy_into, drop_graphs, owned_graphs

        embedded = target == "embedded"
        with cls.open(settings) as memory:
            if memory.held_by_server:
                raise MemoryLockedError(
                    f"`pcm serve` holds memory {memory.settings.memory}: stop it before moving the memory's store"
                )
            here = memory.settings
            source = without_credentials(here.store_url) if here.store_url else "embedded"
            if embedded and not here.store_url:
                raise UsageError(f"memory {here.memory} is already in its embedded store")
            if not embedded and here.store_url and same_store(target, here.store_url):
                raise UsageError(f"memory {here.memory} already lives on {source}")
            if embedded and has_local_store(here.memory):
                raise UsageError(
                    f"{here.memory / STORE_DIR} (or a purge's copy of it) already exists beside this memory on a server: "
                    "move it away first"
                )
            layout = memory.naming.layout
            quads = list(memory.backend.quads())
            expected = canonical_lines(quads)
            there = here.with_(store_url="" if embedded else target, store_engine=engine, store_update_url="",
                               store_gsp_url="", engine_url="")
            destination = _open_backend(there, read_only=False)
            destination.layout = layout
            where = "the embedded store" if embedded else without_credentials(target)
            try:
                taken = owned_graphs(destination, layout)
                if taken:
                    raise UsageError(
                        f"{where} already holds {len(taken)} graph(s) under <{layout.prefix}>, this memory's graph names "
                        "(a memory with the same names, or a move that did not finish): drop them there first"
                    )
                try:
                    copy_into(destination, quads, here.memory / ".move.nq")
                    check_copy(expected, destination, where)
                except BaseException:
                    _undo_copy(destination, layout, embedded, here.memory)
                    raise
                engine_name = "embedded" if embedded else getattr(destination, "engine", engine)
                manifest = memory.manifest
                if embedded:
                    for name in ("store_url", "store_update_url", "store_gsp_url"):
                        setattr(manifest, name, "")
                    manifest.store_engine = "embedded"
                else:
                    record(manifest, there, engine_name)
                manifest.save(here.memory)  # from here on every command reaches the new store
            finally:
                destination.close()
            graphs = len({q.graph_name for q in quads})
            if here.store_url and not keep_source:
                drop_graphs(memory.backend, owned_graphs(memory.backend, layout))
        if not here.store_url:
            old = here.memory / STORE_DIR
            if keep_source:
                old.rename(here.memory / (STORE_DIR + ".moved"))
            else:
                shutil.rmtree(old)
        report = MoveReport(source, without_credentials(target) if not embedded else "embedded", engine_name,
                            len(quads), graphs, keep_source)
        reopen = settings.with_(store_url="", store_engine="auto", store_update_url="", store_gsp_url="")
        if not embedded:
            reopen = reopen.with_(store_url=target)  # its credentials, if the URL carries them
        with cls.open(reopen) as moved:
            if moved.settings.index_enabled:
                report.index_added, report.index_removed = moved.sync_index(progress)
        return report

    def close(self) -> None:
        """Stop the query worker, close the side index and the store; a second call does nothing. A closed memory
        used again raises :class:`MemoryClosedError`, from here or from its store."""
        if self._closed:
            return
        self._closed = True
        try:
            self.context.close()
            if self._index is not None:
                self._index.close()
                self._index = None
        finally:
            try:
                self.backend.close()
            finally:  # a close that fails (a full disk at the last flush) still gives the umask back
                if self._private is not None:
                    self._private.release()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        try:
            self.close()
        except ResourceError:
            if exc is None:
                raise
            # the error under way says more (a full disk that stopped an ingest also refuses the flush at close)

    def _check_ontology(self) -> None:
        """Refuse a writable open of a memory whose ontology differs from this pcm's; note it on a read-only one.

        A memory written before digests were recorded, whose stored ontology graph is this pcm's, gets the digest
        recorded on its first writable open (its data and version are left as they are).
        """
        from pcm.ontology_files import file_facts

        if (self.manifest.ontology_version, self.manifest.ontology_digest) == file_facts():
            return  # the common case, decided without loading the ontology (rdflib) or the migration tools
        from pcm.ontology import load_ontology, ontology_digest
        from pcm.ontology_tools.migrate import ontology_drift

        shipped = load_ontology()
        drift = ontology_drift(self.manifest, shipped, lambda: ontology_digest(self.backend.quads(self.naming.layout.ontology)))
        if drift is None:
            if not self.read_only and not self.manifest.ontology_digest:
                self.manifest.ontology_digest = shipped.digest
                self.manifest.save(self.settings.memory)
            return
        if not self.read_only:
            if drift.reason == "newer":
                raise MemoryVersionError(drift.refusal(self.settings.memory))
            raise OntologyMigrationNeeded(drift.refusal(self.settings.memory))
        self.ontology_drift = drift

    def _catch_up_summaries(self) -> None:
        """Rebuild the session summaries a crash left behind their posts (the store's summaries marker is set).

        Extractive, so an open never waits on a model; the next ingest with a model redoes them its way. One ASK
        when nothing was interrupted.
        """
        if not self.settings.summaries_enabled or not self.store.summaries_pending():
            return
        from pcm.summaries import update_summaries

        behind = [term_value(t) for t in self.store.select(render_query("summaries/behind")).values("session") if t is not None]
        if behind:
            update_summaries(self.context, behind, None)
        self.store.clear_summaries_pending()

    @property
    def ontology(self) -> Ontology:
        from pcm.ontology import load_ontology

        return load_ontology()

    # -- side index ----------------------------------------------------------------------------------------------

    @property
    def index(self) -> SideIndex:
        """The LanceDB side index, opened on first use and brought up to date with the store (the outbox replay).

        A writable open reconciles only when the store's outbox marker is set or the index's sync record does not
        match this memory (see :mod:`pcm.index.outbox`): when nothing changed, opening lists no post or entity.
        """
        if self._index is None:
            index = self._open_index()
            if not self.read_only:
                from pcm.index.outbox import OutboxWatcher

                pending = index.sync_record() != self._sync_stamp() or self.store.index_pending()
                index.watcher = OutboxWatcher(self.store, pending=pending)
                if pending:
                    self.sync_index()
            else:
                self.index_lag = self._catch_up_read_only(index)
        assert self._index is not None
        return self._index

    def _catch_up_read_only(self, index: SideIndex) -> IndexLag | None:
        """A reader's half of the outbox: when the marker or the sync record says the index may lag, compare
        post IRIs, search the missing posts from memory (up to :data:`READ_ONLY_CATCH_UP` of them) and hide the
        forgotten ones, and return what lags so the caller can say so. One ASK and a file read when nothing does.
        """
        from pcm.index.outbox import IndexLag

        if index.sync_record() == self._sync_stamp() and not self.store.index_pending():
            return None
        q = f"SELECT ?p WHERE {{ GRAPH {CONVERSATION} {{ ?p a <{SIOC}Post> }} }}"
        stored = {term_value(t) for t in self.store.select(q).values("p") if t is not None}
        indexed = index.post_iris()
        missing, forgotten = stored - indexed, indexed - stored
        if not missing and not forgotten:
            return None
        records = list(self.store.posts(sorted(missing))) if len(missing) <= READ_ONLY_CATCH_UP else []
        index.overlay_posts(records, forgotten)
        return IndexLag(len(missing), len(forgotten), searched=bool(records) or not missing)

    def _open_index(self) -> SideIndex:
        """Open the side index without bringing it up to date (callers reconcile, or only read)."""
        if self._closed:
            raise MemoryClosedError(f"the memory {self.settings.memory} is closed; open it again")
        if self._index is None:
            if not self.settings.index_enabled:
                # the request is fine and nothing failed: this memory was opened without what it needs
                raise UsageError("the side index is turned off (PCM_INDEX=off): recall and entity matching need it")
            from pcm.index import SideIndex, get_embedder

            embedder = get_embedder(self.settings)
            if (self.manifest.embedding_model, self.manifest.embedding_dim) != (embedder.name, embedder.dim):
                raise MemoryVersionError(
                    f"memory {self.settings.memory} was indexed with {self.manifest.embedding_model} "
                    f"(dim {self.manifest.embedding_dim}); this pcm embeds with {embedder.name} (dim {embedder.dim}); "
                    "run `pcm reindex`"
                )
            self._index = SideIndex.open(
                self.settings.memory / INDEX_DIR,
                embedder=embedder,
                ann_min_rows=self.settings.index_ann_min_rows,
                recall_config=self.settings.recall,
                resident_mb=self.settings.index_resident_mb,
            )
        return self._index

    def _sync_stamp(self) -> dict[str, object]:
        from pcm.index.outbox import sync_stamp

        return sync_stamp(
            namespace=self.manifest.namespace,
            ontology_version=self.manifest.ontology_version,
            model=self.manifest.embedding_model,
            dim=self.manifest.embedding_dim,
        )

    def sync_index(self, progress: Progress | None = None) -> tuple[int, int]:
        """Replay what the store has and the index lacks (or holds stale), and drop what the store forgot.

        Always a full reconcile (it lists every post and entity). On a writable memory the index then records what
        it was reconciled against and the store's outbox marker is cleared, unless a store write raced the listing.
        """
        from pcm.index.outbox import OutboxWatcher

        index = self._open_index()
        if self.read_only:
            posts = list(self.store.posts())
            return index.reconcile(posts, [entity_record(*e) for e in self.store.entities()], progress=progress)
        watcher = index.watcher if isinstance(index.watcher, OutboxWatcher) else OutboxWatcher(self.store, pending=True)
        index.watcher = watcher
        before = watcher.begin()
        posts = list(self.store.posts())
        entities = [entity_record(*e) for e in self.store.entities()]
        result = index.reconcile(posts, entities, progress=progress)
        if self.store.index_writes == before:
            index.record_sync(self._sync_stamp())
            watcher.clear(before)
        return result

    def reindex(self, progress: Progress | None = None) -> int:
        """Rebuild the side index from the store (after a model change or a corrupt index)."""
        if self._index is not None:
            self._index.close()
            self._index = None
        shutil.rmtree(self.settings.memory / INDEX_DIR, ignore_errors=True)
        from pcm.index import get_embedder

        embedder = get_embedder(self.settings)
        self.manifest.embedding_model, self.manifest.embedding_dim = embedder.name, embedder.dim
        self.manifest.save(self.settings.memory)
        added, _ = self.sync_index(progress)
        self.index.optimize()
        return added

    # -- writing -------------------------------------------------------------------------------------------------

    def _writable(self) -> None:
        if self.read_only:
            raise UsageError("this memory was opened read-only")

    def ingest(self, conversations: Iterable[Conversation], progress: Progress | None = None) -> IngestReport:
        """Store every utterance as a post, one atomic write each (on a server, a conversation's posts one request
        of up to the store's batch); re-ingesting the same turns adds nothing.

        The whole batch is checked first (:func:`~pcm.conversations.check_conversations`, the side index's model),
        so a refusal (InputError, MemoryVersionError) leaves the memory as it was. With a model, facts are then
        extracted before returning, or left queued (status ``pending``) for ``pcm extract --pending`` or a running
        ``pcm serve``: :meth:`extraction_mode` decides.
        """
        self._writable()
        conversations = list(conversations)
        # Everything is checked before the first write, so a bad message anywhere leaves the memory untouched.
        check_conversations(conversations, max_chars=self.settings.max_utterance_chars)
        conversations, zoned = _zoned(conversations, self.zone)
        planned = [[post_quads(self.naming, u, None)[0] for u in conv.utterances] for conv in conversations]
        for conv in conversations:
            session_quads(self.naming, conv.id, conv.title, conv.started)
        self._refuse_changed_turns(conversations, planned)
        if self.settings.index_enabled and any(planned):
            _ = self.index  # an index built with another embedding model is refused before a post is stored
        report = IngestReport(zone=self.manifest.zone, zoned=zoned)
        to_index: list[PostInfo] = []
        last_stored = ""  # the message stored last, named for the person if a full disk stops the ingest
        every_post_stored = False
        # a full disk (or memory, quota, permissions) stops the ingest with what it had stored: each post is one
        # atomic write, and the side index and summaries catch up on the next open (the markers those writes set)
        # On a SPARQL server the memory lives in, each write is a request: the posts of a conversation go together,
        # up to the store's batch of quads per request (one transaction on Oxigraph's server; on Virtuoso a request
        # of posts that lands or not as one). The embedded store, and `pcm serve`'s own engine over it on loopback,
        # write each post on its own.
        per_write = (self.backend.capabilities.batch or 0) if self.settings.store_url else 0
        held: list[tuple[PostInfo, str]] = []  # posts written with the next write, and how to name each
        pending: list[ox.Quad] = []

        def flush() -> None:
            nonlocal last_stored, to_index, pending
            if not held:
                return
            if self.settings.summaries_enabled:
                pending.append(self.store.summaries_marker)  # the posts and "their summary is behind" land together
            self.store.write(pending)
            for info, name in held:
                report.added += 1
                report.pending += 1
                report.posts.append(info.iri)
                last_stored = name
                to_index.append(info)
                if progress:
                    progress(1)
            held.clear()
            pending = []
            if len(to_index) >= 256:
                self._index_posts(to_index)
                to_index = []

        bulk: AbstractContextManager[None] = (
            self.index.writes_in_bulk() if self.settings.index_enabled and any(planned) else nullcontext()
        )
        with resource_errors(lambda: _ingest_stopped(report, last_stored, every_post_stored)), bulk:
            for conv, refs in zip(conversations, planned, strict=True):
                report.conversations += 1
                session_iri = self.naming.session(conv.id)
                existing = self.store.existing_posts([r.iri for r in refs])
                last = self.store.last_post_of_session(session_iri)
                previous = last[0] if last else None
                thread_written = last is not None
                for u, ref in zip(conv.utterances, refs, strict=True):
                    report.utterances += 1
                    if ref.iri in existing:
                        report.skipped += 1
                        previous = ref.iri
                        continue
                    _, quads = post_quads(self.naming, u, previous)
                    if not thread_written:
                        quads = session_quads(self.naming, conv.id, conv.title, conv.started) + quads
                        thread_written = True
                    if held and len(pending) + len(quads) + 2 > per_write:
                        flush()
                    pending.extend(quads)
                    held.append((
                        PostInfo(ref.iri, conv.id, u.role, u.speaker, u.timestamp, u.content, u.source_id, u.position),
                        f"conversation {conv.id!r}, message {u.source_id or u.position!r}",
                    ))
                    previous = ref.iri
                flush()  # a conversation's posts are stored before the next one reads what the store holds
            every_post_stored = True
            self._index_posts(to_index)
            mode = self.extraction_mode() if report.posts else EPISODIC
            if mode == INLINE:
                self._extract(report, progress)
            elif mode == QUEUED:
                report.mode = QUEUED  # every new post keeps its "pending" status: that status is the queue
            if self.settings.summaries_enabled and report.posts:
                from pcm.summaries import summarise_posts

                # once per touched session per batch; extractive unless the model extracts here too (a queued
                # ingest must not wait on the model for a summary either)
                summarise_posts(self.context, report.posts, self._client if mode == INLINE else None)
                self.store.clear_summaries_pending()
        if mode == QUEUED:
            for listener in list(self.queued_listeners):
                listener(report.pending)
        return report

    def extraction_mode(self) -> str:
        """When ingest extracts facts: :data:`EPISODIC` (no model), :data:`INLINE` or :data:`QUEUED`.

        ``PCM_EXTRACTION`` decides; ``auto`` queues for a model on this machine (one utterance costs it a minute or
        more, so extracting before ingest returns would hold a file's ingest for hours) and extracts inline with a
        hosted one. An in-process model (``llamacpp``) runs here by construction: it is not loaded to learn that.
        """
        llm = self.settings.llm
        if not llm.enabled:
            return EPISODIC
        if self.settings.extraction.mode in (INLINE, QUEUED):
            return self.settings.extraction.mode
        if llm.provider == "llamacpp":
            return QUEUED
        from pcm.llm.base import runs_here

        return QUEUED if runs_here(self.llm_client()) else INLINE

    def llm_client(self) -> LLMClient | None:
        """The configured model's client (None without one), made on first use and shared by ingest, ask and
        ``pcm serve``'s extraction worker, so an in-process model is loaded once."""
        with self._client_lock:
            if self._client is None and self.settings.llm.enabled:
                from pcm.llm import make_client

                self._client = make_client(self.settings)
            return self._client

    def use_llm(self, client: LLMClient | None) -> None:
        """Answer and extract with ``client`` from here on, instead of a client of the configured model.

        For a driver that owns its model: an evaluation run makes the model under test once (or its recording or
        replay, with usage counters of its own) and gives it to each fresh memory it builds. Ingest still decides
        by the settings whether to extract (:meth:`extraction_mode`), so such a driver extracts with :meth:`extract`.
        """
        with self._client_lock:
            self._client = client

    def remember(
        self,
        text: str,
        *,
        at: datetime | str | None = None,
        speaker: str | None = None,
        session: str | None = None,
        role: str = "user",
        key: str | None = None,
    ) -> RememberReport:
        """Store one message said at ``at`` (default: now), continuing ``session`` (default: one per day).

        ``key`` is the client's id for the message (a message id or an idempotency key); it is kept as the post's
        ``dcterms:identifier``. A message whose key is already stored is not stored again (a client retrying is
        told ``stored=False``); the same key with different text is refused, since it would silently drop the new
        text. Without a key every call stores a post, so two messages with the same text are two posts.

        ``at`` is ISO 8601 text or a ``datetime``; one without a zone is read in the memory's :attr:`zone`.
        """
        self._writable()
        # a time without a zone stays so until ingest reads it in the memory's zone and counts it (the report says so)
        when = _parse_time(at, "at") or datetime.now(self.zone).replace(microsecond=0)
        sid = session if session is not None else f"cli-{when.date().isoformat()}"
        utterance = parse_text_utterance(text, session=sid, role=role, at=when, speaker=speaker, where=MESSAGE_TEXT[1])
        if key is not None:
            key = check_id(key, "message key (idempotency key)", "utterance")
            earlier = self._post_with_key(key)
            if earlier is not None:
                if earlier.text != utterance.content:
                    raise InputError(
                        f"message key {key!r} was already used for a different message; use a new key per message"
                    )
                return RememberReport(earlier.iri, False, earlier.session)
        last = self.store.last_post_of_session(self.naming.session(utterance.session))
        utterance = replace(utterance, source_id=key, position=last[1] + 1 if last else 0)
        report = self.ingest([Conversation(id=utterance.session, utterances=[utterance])])
        iri = post_quads(self.naming, utterance, None)[0].iri
        return RememberReport(iri, bool(report.added), utterance.session, report.mode, report)

    def _post_with_key(self, key: str) -> PostInfo | None:
        """The stored post whose message id is ``key`` (the first, if a file reused the id across sessions)."""
        iris = [i for i in self.store.find_post(key) if i.startswith(self.naming.post(""))]
        return next(iter(self.store.posts(iris[:1])), None) if iris else None

    def _refuse_changed_turns(self, conversations: Sequence[Conversation], planned: Sequence[Sequence[PostRef]]) -> None:
        """A message already stored with other text or role is refused, not skipped: re-ingesting the same turns
        adds nothing, but skipping an edited one would drop the new text without a word."""
        stored = sorted(self.store.existing_posts([ref.iri for refs in planned for ref in refs]))
        said: dict[str, tuple[str, str]] = {}
        for start in range(0, len(stored), 500):
            said.update({p.iri: (p.role, p.text) for p in self.store.posts(stored[start : start + 500])})
        for conv, refs in zip(conversations, planned, strict=True):
            for u, ref in zip(conv.utterances, refs, strict=True):
                if ref.iri in said and said[ref.iri] != (u.role, u.content):
                    origin = f"{conv.source}: " if conv.source else ""
                    message = repr(u.source_id) if u.source_id is not None else str(u.position)
                    raise InputError(
                        f"{origin}conversation {conv.id!r}, message {message}: already stored with other text or role; "
                        f"to replace it, forget it first (`pcm forget --post {u.source_id or ref.iri}`)"
                    )

    def _extract(self, report: IngestReport, progress: Progress | None) -> None:
        """Second write per post: its extraction graph, provenance and status (the post itself is already safe)."""
        from pcm.extraction import extract_posts

        client = self.llm_client()
        assert client is not None, "inline extraction is chosen only with a model configured"
        run = extract_posts(self.context, report.posts, client=client)
        report.mode = f"extraction ({self.settings.llm})"
        report.extracted, report.failed = run.extracted, run.failed
        report.pending = report.added - run.extracted - run.failed - run.skipped - run.gated
        report.extraction = run.as_json()

    def _index_posts(self, posts: Sequence[PostInfo]) -> None:
        if posts and self.settings.index_enabled:
            try:
                self.index.upsert_posts(list(posts))
            except BaseException:
                self.store.keep_index_pending()  # a later index write must not clear the marker these posts set
                raise

    def import_rdf(
        self, path: Path, fmt: str | None = None, *, base_iri: str | None = None, progress: Progress | None = None,
    ) -> ImportReport:
        """Import RDF: plain triples become an import graph (validated); a pcm dataset dump is restored.

        A bad file changes nothing. A large dump is restored by :mod:`pcm.importing` (checked as a stream, bulk
        loaded, undone from a checkpoint when refused); other files are parsed and checked on an in-memory staging
        store first. ``base_iri`` (default: the file's own URI) resolves relative IRIs: a server importing a
        client's file from a copy resolves them as the client would have. ``progress`` hears of the quads written,
        then of the side index's rows as they are embedded.
        """
        self._writable()
        fmt = detect_rdf_format(path, fmt)
        if not path.is_file():
            raise InputError(f"{path}: no such file")
        limits = RdfLimits.of(self.settings)
        base_iri = base_iri or path.resolve().as_uri()
        bulk = BulkRestore(self.backend, self.naming.layout, self.manifest.namespace, self.ontology,
                           self.settings.memory, limits, self.store.mark_index_pending)
        if bulk.applies(path, fmt):
            restored = bulk.restore(path, fmt, base_iri=base_iri)
            if restored is not None:
                return self._restored(ImportReport(path.name, "restore", restored.quads, restored.graphs), progress)
        data = read_file(path, limits)  # its size checked before it is read
        staging = load_staging(data, fmt, name=path.name, base_iri=base_iri, limits=limits)
        named = [g.value for g in staging.named_graphs() if isinstance(g, ox.NamedNode)]
        if any(layout_of_graph(g) is not None for g in named):
            # an N-Quads dump that needs no rewriting can go straight from the file to the bulk loader
            direct = fmt == "nquads" and SCHEMA_HTTP.encode() not in data
            return self._restore(path, staging, direct=direct, progress=progress)
        if named or any(True for _ in staging.named_graphs()):
            raise InputError(
                f"{path.name}: named graphs other than pcm's are not imported; give the triples as Turtle or N-Triples"
            )
        plain = list(staging)
        graph = self.naming.import_graph(hashlib.sha256(data).hexdigest()[:16])
        self._validate(plain, path.name)
        target = ox.NamedNode(graph)
        new = [ox.Quad(q.subject, q.predicate, q.object, target) for q in plain]
        activity = Activity("import", datetime.now(UTC), ontology_version=self.manifest.ontology_version, source=path.name)
        new += activity_quads(self.naming, activity, graph, None)
        self.backend.update(f"DROP SILENT GRAPH <{graph}>")
        self.store.write(new)
        if progress is not None:
            progress(len(plain))
        if self._index is not None:
            self.sync_index(progress)
        return ImportReport(path.name, "facts", len(plain), [graph])

    def _restore(
        self, path: Path, staging: ox.Store, *, direct: bool = False, progress: Progress | None = None
    ) -> ImportReport:
        """Restore a pcm dump (TriG / N-Quads) staged in memory, re-homing its individuals into this memory's
        namespace.

        Small dumps are written in one transaction. Large ones (on a store whose files pcm does not hold, where
        :mod:`pcm.importing` cannot take a checkpoint) are checked in full on the staging store and then bulk
        loaded; if that load fails, the graphs it created are dropped again.
        """
        layouts = {layout_of_graph(g.value) for g in staging.named_graphs() if isinstance(g, ox.NamedNode)} - {None}
        for source in layouts:
            assert source is not None
            if staging.contains_named_graph(ox.NamedNode(source.ontology)):
                staging.remove_graph(ox.NamedNode(source.ontology))  # this pcm's own ontology graph stays authoritative
                direct = False
        if layouts - {self.naming.layout}:  # a dump of a memory with other graph names: renamed to this one's
            renamed = [rehome_graphs(q, layouts, self.naming.layout) for q in staging]
            staging = ox.Store()
            staging.extend(renamed)
            direct = False
        if next(iter(staging.quads_for_pattern(None, None, None, ox.DefaultGraph())), None) is not None:
            refuse_default_graph(path.name)
        source_ns = dump_namespace(staging)
        if source_ns and source_ns != self.manifest.namespace:
            rehomed = [rehome(q, (source_ns, self.manifest.namespace)) for q in staging]
            staging = ox.Store()
            staging.extend(rehomed)
            direct = False
        refuse_problems(path.name, check_vocabulary_store(staging, self.ontology))
        graphs = sorted(g.value for g in staging.named_graphs() if isinstance(g, ox.NamedNode))
        count = len(staging)
        if count <= BULK_THRESHOLD:
            self.store.write(list(staging))
        else:
            before = set(self.backend.named_graphs())
            spool = self.settings.memory / ".restore.nq"
            self.store.mark_index_pending()  # a crash between the bulk load and the index sync replays on open
            try:
                if direct:  # the checked file itself, byte for byte
                    self.backend.bulk_load(str(path), ox.RdfFormat.N_QUADS)
                else:
                    staging.dump(str(spool), format=ox.RdfFormat.N_QUADS)
                    self.backend.bulk_load(str(spool), ox.RdfFormat.N_QUADS)
            except Exception:
                for g in set(graphs) - before:
                    self.backend.update(f"DROP SILENT GRAPH <{g}>")
                raise
            finally:
                spool.unlink(missing_ok=True)
        return self._restored(ImportReport(path.name, "restore", count, graphs), progress)

    def _restored(self, report: ImportReport, progress: Progress | None) -> ImportReport:
        """A restore's last steps, whichever path wrote it: its quads reported, then the side index brought up."""
        if progress is not None:
            progress(report.quads)
        if self.settings.index_enabled:
            self.sync_index(progress)
        return report

    def _validate(self, quads: Sequence[ox.Quad], name: str, *, vocabulary_only: bool = False) -> None:
        """SHACL on an import delta; for a restore or a very large file, the vocabulary check alone.

        pyshacl on a million triples would take many minutes; the vocabulary and namespace rules are the ones a
        dump from another tool breaks, and they run over distinct terms only.
        """
        if vocabulary_only or len(quads) > 50_000:
            problems = check_vocabulary(quads, self.ontology, self.naming)
            if problems:
                raise ValidationError(
                    f"{name}: {len(problems)} problem(s), nothing imported; first: {problems[0]}", "\n".join(problems[:20])
                )
            return
        try:
            graph = to_rdflib(quads)  # term by term: a text round trip grew with the square of a literal's length
        except ValueError as exc:
            raise InputError(f"{name}: {exc}; nothing imported") from exc
        report = _validator().validate(graph, memory_namespace=self.manifest.namespace, context=self._context_for(graph))
        if not report.conforms:
            raise ValidationError(
                f"{name}: {len(report.violations)} SHACL violation(s), nothing imported; first: {report.violations[0].message}",
                report.text(),
            )

    def _context_for(self, graph: rdflib.Graph) -> rdflib.Graph:
        """Types and labels of existing memory nodes the delta points to, so they are not flagged as unknown."""
        import rdflib

        objects = {
            str(o) for o in graph.objects() if isinstance(o, rdflib.URIRef) and self.naming.is_individual(str(o))
        } | {str(s) for s in graph.subjects() if isinstance(s, rdflib.URIRef)}
        context = rdflib.Graph()
        iris = sorted(i for i in objects if self.naming.is_individual(i))
        for start in range(0, len(iris), 400):
            chunk = iris[start : start + 400]
            q = (
                "CONSTRUCT { ?n a ?t ; <http://www.w3.org/2000/01/rdf-schema#label> ?l } WHERE { "
                + "VALUES ?n { " + " ".join(f"<{i}>" for i in chunk) + " } "
                "{ ?n a ?t } UNION { ?n <http://www.w3.org/2000/01/rdf-schema#label> ?l } }"
            )
            result = self.backend.query(q)
            if isinstance(result, list) and result:
                to_rdflib(result, context)
        return context

    def _sync_entities_after_write(self) -> None:
        if self._index is not None:
            self.sync_index()

    def forget(self, *, post: str | None = None, session: str | None = None) -> list[str]:
        """Forget posts (by IRI or source id) or a whole session; returns the forgotten post IRIs.

        One atomic update drops the posts, their extraction graphs and provenance, restores the values they had
        superseded, and drops every session summary built from them (a crash cannot leave a summary repeating a
        forgotten sentence). Summaries of sessions with posts left are then rebuilt. The text stays in the
        store's files until :meth:`purge` rewrites them (``pcm forget`` does both).
        """
        self._writable()
        if bool(post) == bool(session):
            raise UsageError("give exactly one of --post or --session")
        session_iri = None
        if post:
            posts = self._find_posts(post)
        else:
            session_iri = self.store.find_session(session or "")
            if not session_iri:
                raise NotFound(f"no session {session!r} in this memory")
            posts = self.store.session_posts(session_iri)
        from pcm.extraction.cards import orphaned_cards
        from pcm.extraction.history import forget_delta
        from pcm.summaries import after_forget, summary_clearing

        # values the forgotten posts had superseded hold again, in the forget's own atomic update
        delta = forget_delta(self.context, posts)
        # an entity other posts still mention keeps the type and label only forgotten graphs held
        cards = orphaned_cards(self.context, [self.naming.extraction_graph(p) for p in posts])
        summarised, clear = summary_clearing(self.context, posts)
        rebuild = [self.store.summaries_marker] if summarised and self.settings.summaries_enabled else []
        indexed = self.settings.index_enabled and (self.settings.memory / INDEX_DIR).exists()
        # the entities whose cards the forget can change: those the forgotten graphs describe, and those whose
        # values it deletes or restores (a card depends on its entity's own triples only)
        touched = self.store.subjects_in_graphs([self.naming.extraction_graph(p) for p in posts]) if indexed else set()
        touched.update(term_value(q.subject) for q in (*delta.delete, *delta.insert, *cards)
                       if isinstance(q.subject, ox.NamedNode))
        self.store.forget_posts(
            posts, session_iri, delete=delta.delete, insert=[*delta.insert, *cards, *rebuild],
            extra=[*delta.extra, *clear],
        )
        if indexed:
            self.index.delete_posts(posts)
            self._refresh_entities(touched)
        after_forget(self.context, summarised)
        if rebuild:
            self.store.clear_summaries_pending()
        return posts

    def _refresh_entities(self, iris: set[str]) -> None:
        """The index's entities among ``iris`` made as the store now holds them (unchanged ones are skipped, those
        no longer labelled dropped). Not a full reconcile, which lists every post and entity: at 1M posts one
        forgotten post took over ten minutes and 5 GB that way."""
        records = [entity_record(*e) for e in self.store.entities(sorted(iris))] if iris else []
        kept = {r.iri for r in records}
        self.index.upsert_entities(records)
        self.index.delete_entities([iri for iri in iris if iri not in kept])

    def purge(self) -> PurgeReport:
        """Rewrite the memory's files so what was forgotten leaves the disk, not only the answers.

        A forget removes data from every query at once, but the store keeps old values in its files (Oxigraph's
        string dictionary is append-only), the side index keeps old table versions, the caches keep replies and
        embedded triples built from forgotten facts, and a migration backup keeps the whole store as it was. This
        rewrites the store, drops every old index version, empties both caches, deletes the backups that hold a
        forgotten post and rewrites the others. On a server's store (``capabilities.purge`` GRAPHS) the forget
        already deleted the data through the protocol and the engine's files are the engine's: everything else is
        done, and the report says what that leaves. Refused while ``pcm serve`` holds the files.
        """
        self._writable()
        from pcm.ontology_tools.migrate import purge_backups

        scope = self.backend.capabilities.purge
        if scope is PurgeScope.HELD or self.held_by_server:
            raise MemoryLockedError("a served memory is not purged while the server runs: stop `pcm serve`, then `pcm purge`")
        self.context.stop_runner()  # the query worker reads the store's files: stop it before they are replaced
        kept = self.backend.compact() if scope is PurgeScope.FILES else None  # first: a failure touches nothing else
        holding, unreadable = purge_backups(self.context)
        self.context.drop_caches()  # replies, counts and vectors built from forgotten facts; on disk below
        shutil.rmtree(self.settings.memory.joinpath(*VECTORS_DIR), ignore_errors=True)
        shutil.rmtree(self.settings.memory / CACHE_DIR, ignore_errors=True)
        if self.settings.index_enabled and (self.settings.memory / INDEX_DIR).exists():
            self.index.optimize(timedelta(0))
        return PurgeReport(kept, [b.name for b in holding], [b.name for b in unreadable], scope.value)

    def delete_messages(self, *, post: str | None = None, session: str | None = None, purge: bool = True) -> Forgotten:
        """:meth:`forget` these messages, then (``purge``) :meth:`purge` the files: the delete of the HTTP API and
        MCP. The forget holds even when the purge cannot run (a served memory's files are its server's): the
        record says so."""
        from pcm.models import Forgotten  # pydantic: paid by the faces that show records, not at every open

        posts = self.forget(post=post, session=session)
        if not purge:
            return Forgotten(posts=posts, purged=False, note="not purged: the files keep the text until a purge")
        try:
            report = self.purge()
        except PcmError as exc:
            return Forgotten(posts=posts, purged=False, note=f"forgotten, but the files were not purged: {exc}")
        unsure = "; ".join(report.not_guaranteed)  # an external store: its engine's files are its own
        return Forgotten(posts=posts, purged=True, note=f"not guaranteed: {unsure}" if unsure else None)

    def delete_fact(self, fact_id: str) -> FactDeleted:
        """Delete a fact (its ``id`` as :meth:`facts` lists it) from every graph that states it; each removal is
        recorded in the history graph (``history`` shows the value as over). A fact that is not there is one
        :class:`NotFound` line, and nothing is written."""
        self._writable()
        from pcm.extraction.facts import delete_fact

        done = delete_fact(self.context, fact_id, self.zone)
        self._sync_entities_after_write()
        return done

    # -- reading -------------------------------------------------------------------------------------------------

    def export(self, fmt: str) -> bytes:
        """The whole dataset (TriG, N-Quads, JSON-LD) or the current-truth union of graphs (Turtle)."""
        quads = list(self.backend.quads())
        if fmt == "turtle":
            seen: set[tuple[object, object, object]] = set()
            triples = []
            for q in quads:
                g = q.graph_name
                if isinstance(g, ox.NamedNode) and g.value == self.naming.layout.ontology:
                    continue
                key = (q.subject, q.predicate, q.object)
                if key not in seen:
                    seen.add(key)
                    triples.append(ox.Quad(q.subject, q.predicate, q.object, ox.DefaultGraph()))
            return serialize(triples, "turtle", prefixes={**PREFIXES, "m": self.manifest.namespace})
        if fmt not in ("trig", "nquads", "jsonld"):
            raise UsageError(f"export format {fmt!r}: choose trig, nquads, turtle or jsonld")
        prefixes = {**PREFIXES, "m": self.manifest.namespace} if fmt == "trig" else None
        # blank nodes canonically named: the same memory exports the same bytes from any store (pcm store move)
        return serialize(canonical_blank_nodes(quads), fmt, prefixes=prefixes)

    def sparql(self, query: str, *, limit: int | None = None) -> QueryResult:
        """A read-only query over the union of graphs, bounded in time, rows and memory.

        The memory's prefixes (``schema:``, ``pcm:``, ``m:`` ...) are predeclared unless the query declares its own
        (:func:`pcm.sparql.check.with_prefixes`), as the CLI and MCP always did; a syntax error names the line
        and column in ``query`` as given. On a local store it runs in the killable query worker
        (:mod:`pcm.query_safety`): the engine cannot be interrupted inside one step, so only a separate process
        keeps ``PCM_QUERY_TIMEOUT`` for any query.
        """
        check_text(query, "the query", "sparql")
        if limit is not None:
            SPARQL_ROWS.check(limit)
        safe = check_query(query, policy=False, prefixes={"m": self.manifest.namespace})
        return self.context.query_runner().run(safe, limit=limit or self.settings.query_limit)

    def stats(self) -> Stats:
        return self.store.stats()

    def messages(
        self, *, session: str | None = None, since: datetime | str | None = None, until: datetime | str | None = None,
        limit: int = PAGE_SIZE.default, offset: int = PAGE_OFFSET.default,
    ) -> MessagePage:
        """One page of stored messages, oldest first: of one ``session`` (its id, IRI or ``m:`` CURIE), said at or
        after ``since`` and before ``until`` (ISO text or datetime; without a zone, the memory's). An unknown
        session is one :class:`NotFound` line."""
        from pcm.models import MessagePage

        PAGE_SIZE.check(limit)
        PAGE_OFFSET.check(offset)
        thread = self._thread(session)
        start, end = self.when(since, "since"), self.when(until, "until")
        posts, total = self.store.page_posts(thread=thread, since=start, until=end, limit=limit, offset=offset)
        after = offset + len(posts)
        return MessagePage(messages=[self._message(p) for p in posts], total=total, offset=offset, limit=limit,
                           next_offset=after if after < total else None)

    def message(self, post: str) -> Message:
        """The stored message ``post`` names (its post IRI, an ``m:`` CURIE, or the client's message id); one that
        is not there is one :class:`NotFound` line, as is a message id several sessions reuse."""
        iris = self._find_posts(post)
        if len(iris) > 1:
            raise NotFound(f"message id {post!r} names {len(iris)} stored messages: give the post IRI "
                           f"(one of {', '.join(iris[:3])})")
        return self._message(next(iter(self.store.posts(iris))))

    def facts(
        self, *, session: str | None = None, since: datetime | str | None = None, until: datetime | str | None = None,
        limit: int = PAGE_SIZE.default, offset: int = PAGE_OFFSET.default,
    ) -> FactPage:
        """One page of facts (statements extracted from messages or imported; entity cards left out), those said
        earliest first: of messages of one ``session``, said at or after ``since`` and before ``until``."""
        PAGE_SIZE.check(limit)
        PAGE_OFFSET.check(offset)
        from pcm.extraction.facts import list_facts

        thread = self._thread(session)
        start, end = self.when(since, "since"), self.when(until, "until")
        return list_facts(self.context, thread=thread, since=start, until=end, limit=limit, offset=offset,
                          zone=self.zone)

    def fact(self, fact_id: str) -> Fact:
        """The fact with this ``id`` (as :meth:`facts` lists it), with every graph that states it; one that is not
        there is one :class:`NotFound` line."""
        from pcm.extraction.facts import get_fact

        check_text(fact_id, "the fact id", "fact")
        return get_fact(self.context, fact_id, self.zone)

    def _thread(self, session: str | None) -> str | None:
        """The thread IRI of a session filter (None: no filter); a session this memory lacks is refused."""
        if session is None:
            return None
        check_text(session, "the session", "session")
        thread = self.find_session(session)
        if thread is None:
            raise NotFound(f"no session {session!r} in this memory")
        return thread

    def _find_posts(self, post: str) -> list[str]:
        """The post IRIs ``post`` names (an IRI, an ``m:`` CURIE or a message id), or one :class:`NotFound` line."""
        check_text(post, "the message", "post")
        iris = self.store.find_post(post) if post.strip() else []
        if not iris and ":" in post:
            try:
                iris = self.store.find_post(self.expand_iri(post))
            except BadIri:
                iris = []
        if not iris:
            raise NotFound(f"no post {post!r} in this memory")
        return iris

    def _message(self, post: PostInfo) -> Message:
        """A stored post as the record every face shows, its time in the memory's zone when stored without one."""
        from pcm.models import Message

        when = post.time
        if when is not None and when.tzinfo is None:
            when = when.replace(tzinfo=self.zone)
        return Message(post=post.iri, source_id=post.source_id, session=post.session, time=when,
                       speaker=post.speaker, role=post.role, text=post.text)

    def expand_iri(self, iri: str) -> str:
        """``iri`` as a full IRI (a CURIE, ``m:slug`` or ``<IRI>`` expanded), or one :class:`BadIri` line."""
        return expand_iri(iri, self.manifest.namespace)

    def why(self, iri: str) -> list[Source]:
        """Each stored message (or imported file) a fact or an entity came from; every time carries a zone."""
        return [s.model_copy(update={"time": self._zoned(s.time)}) for s in self.store.why(self.expand_iri(iri))]

    def _zoned(self, when: datetime | None) -> datetime | None:
        """A stored time with its zone: one stored without one is read in :attr:`zone`."""
        return when.replace(tzinfo=self.zone) if when is not None and when.tzinfo is None else when

    def history(self, iri: str) -> FactHistory:
        """How the facts about an entity changed: past values, when and by what they were replaced (the record
        every face shows: ``pcm history --json``, ``/api/history``, MCP's ``history``)."""
        from pcm.extraction import fact_history
        from pcm.models import FactHistory

        return FactHistory.model_validate(fact_history(self.context, self.expand_iri(iri)).as_json())

    @property
    def zone(self) -> tzinfo:
        """The memory's zone (``memory.toml``'s ``zone``, chosen at init, UTC by default): a time given without
        an offset (a naive ``datetime``, ``2025-03-02T10:00``) is read in it, on every face."""
        return zone_of(self.manifest.zone)

    def when(self, value: datetime | str | None, what: str = "time") -> datetime | None:
        """``value`` (ISO 8601 text or a ``datetime``) as a zone-aware time, a naive one read in :attr:`zone`; None
        stays None. Text that is no time is one :class:`BadTime` line naming ``what``."""
        when = _parse_time(value, what)
        return when if when is None or when.tzinfo is not None else when.replace(tzinfo=self.zone)

    def recall(
        self, text: str, k: int = RECALL_K.default, *, since: datetime | str | None = None,
        until: datetime | str | None = None, **filters: object,
    ) -> list[RecallHit]:
        """The stored messages nearest ``text``, best first; ``since`` / ``until`` (ISO text or datetime) bound
        their time. Every hit's time carries a zone (a time stored without one is read in :attr:`zone`), so hits
        sort by time."""
        check_text(text, *RECALL_TEXT)  # the embedder fails on a lone surrogate: say why instead
        RECALL_K.check(k)
        start, end = self.when(since, "since"), self.when(until, "until")
        hits = self.context.recall(text, k, since=start, until=end, **filters)
        zone = self.zone
        return [h.model_copy(update={"time": h.time.replace(tzinfo=zone)}) if h.time is not None and h.time.tzinfo is None
                else h for h in hits]

    def ask(
        self, question: str, *, k: int = ASK_K.default, as_of: datetime | str | None = None, explain: bool = False,
        plan: bool | None = None,
    ) -> Answer:
        """Answer from memory (grounded NL→SPARQL with repair; traversal and episodic recall as fallbacks).

        ``as_of`` (ISO text or datetime; a naive one in :attr:`zone`) is the question's date, for "last month".
        Without an LLM: the utterances that best match, and the answer says so. The answer cites the stored
        messages it rests on and carries a warning when the side index lags the store; ``explain`` adds every
        query tried and the timings.
        """
        from pcm.models import AnswerWarning
        from pcm.retrieval.ask import ask

        check_text(question, *ASK_TEXT)
        if not question.strip():
            raise InputError("ask: the question is empty")
        ASK_K.check(k)
        when = self.when(as_of, "as_of")
        result = ask(self.context, question, client=self.llm_client(), as_of=when, explain=explain, k=k, plan=plan)
        result.posts = [p.model_copy(update={"time": self._zoned(p.time)}) for p in result.posts]
        lag = [AnswerWarning.model_validate(self.index_lag.as_json())] if self.index_lag is not None else []
        return result.record(stats=explain, warnings=lag)

    def show_iri(self, iri: str) -> str:
        """``m:slug`` for the memory's individuals, a CURIE for vocabulary terms, ``<iri>`` otherwise: how a face
        shows an IRI to a person."""
        from pcm.extraction.context import show_iri

        return show_iri(iri, self.manifest.namespace, self.ontology)

    def curie(self, iri: str) -> str:
        """A vocabulary term's CURIE (``schema:Person``), for naming classes and properties."""
        return self.ontology.curie(iri)

    # -- the pipelines a face drives (extraction, duplicates, summaries, graph walks) -------------------------------

    def posts_to_extract(self, selection: str) -> list[str]:
        """The post IRIs ``pcm extract --pending | --failed | --gated | --all`` would extract, in order."""
        from pcm.extraction import select_posts

        return select_posts(self.context, selection)

    def extract_selection(
        self,
        selection: str,
        *,
        force: bool = False,
        progress: Progress | None = None,
        total: Callable[[int], None] | None = None,
    ) -> ExtractionRunReport:
        """``pcm extract --pending | --failed | --gated | --all``: the selected posts extracted in order, ``total``
        told their number first. Without a model it refuses before any post is read; the gated selection goes to
        the model past the gate that held it back."""
        if self.llm_client() is None:
            self.extract([])  # the one refusal without a model
        posts = self.posts_to_extract(selection)
        if total is not None:
            total(len(posts))
        return self.extract(posts, progress=progress, force=force, gate=False if selection == "gated" else None)

    def extract(
        self, posts: Sequence[str], *, progress: Progress | None = None, force: bool = False, gate: bool | None = None
    ) -> ExtractionRunReport:
        """Extract the facts of these posts with the configured model (a UsageError without one)."""
        from pcm.extraction import extract_posts

        client = self.llm_client()
        if client is None:
            raise UsageError(
                "no LLM configured: set PCM_LLM or --llm (anthropic:MODEL, or openai:BASE_URL#MODEL for a local "
                "model such as Ollama); see docs/llm.md"
            )
        return extract_posts(self.context, posts, client=client, progress=progress, force=force, gate=gate)

    def extract_queued(
        self, posts: Sequence[str], *, around_model: Callable[[Callable[[], Completion]], Completion]
    ) -> ExtractionRunReport:
        """Extract these posts one at a time (one worker) with the configured model, each model call made through
        ``around_model``: ``pcm serve``'s queue worker lets go of the memory lock while the model answers, and
        drops a reply that comes back after a stop (it raises, and nothing of that post is written)."""
        from pcm.extraction import extract_posts
        from pcm.llm.base import CallsThrough

        client = self.llm_client()
        if client is None:
            self.extract([])  # the one refusal without a model
        assert client is not None
        return extract_posts(self.context, posts, client=CallsThrough(client, around_model), concurrency=1)

    def duplicates(self) -> list[DuplicatePair]:
        """Entities that may be the same thing, most similar first (never merged automatically)."""
        from pcm.extraction import find_duplicates

        return find_duplicates(self.context)

    def find_session(self, session: str) -> str | None:
        """The thread IRI of a session given by its id (as in the source), its IRI or an ``m:`` CURIE; None when
        this memory has no such session."""
        found = self.store.find_session(session)
        if found is None and session:
            try:
                found = self.store.find_session(self.expand_iri(session))
            except BadIri:
                return None
        return found

    def summaries(self, *, refresh: bool = False) -> list[SummaryRow]:
        """Every summarised session, oldest first; ``refresh`` redoes them first with the configured model
        (extractive without one)."""
        from pcm.summaries import all_summaries, update_summaries

        if refresh:
            update_summaries(self.context, [r.session for r in all_summaries(self.context)], self.llm_client(),
                             refresh=True)
        return all_summaries(self.context)

    def summary(self, thread: str, *, refresh: bool = False) -> SessionSummary | None:
        """The stored summary of a thread (None when it has none), with the time span and posts it covers;
        ``refresh`` redoes it first."""
        from pcm.summaries import read_summary, update_summaries
        from pcm.summaries.store import covered_range, session_range

        if refresh:
            update_summaries(self.context, [thread], self.llm_client(), refresh=True)
        stored = read_summary(self.context, thread)
        if stored is None:
            return None
        first, last = covered_range(self.context, thread)
        return SessionSummary(stored, session_range(self.context, thread)[2], first, last)

    def retrieve(self, question: str, **options: Any) -> Any:
        """The triples around the entities ``question`` mentions, found by walking the graph
        (:func:`pcm.retrieval.traversal.retrieve`; ``options`` as it takes them, ``forbid`` also as ``pcm retrieve
        --forbid`` spells it: ``"o,t"`` or ``"object,thesis"``)."""
        from pcm.retrieval.traversal import Kind, retrieve

        if isinstance(options.get("forbid"), str):
            options["forbid"] = Kind.parse_many(options["forbid"])
        return retrieve(self.context, question, **options)

    def retrieve_events(self, question: str, **options: Any) -> Any:
        """Event chains from the events ``question`` mentions (:func:`pcm.retrieval.traversal.events.retrieve_events`)."""
        from pcm.retrieval.traversal.events import retrieve_events

        return retrieve_events(self.context, question, **options)

    def graph_engine(self) -> Any:
        """The graph-walk engine of this memory (labels and triple text for showing walk results)."""
        from pcm.retrieval.traversal import engine_for

        return engine_for(self.context)

    def competency_questions(self) -> list[dict[str, str]]:
        """The questions the ontology is built to answer, each with its SPARQL."""
        from pcm.ontology_tools.competency import load_questions

        return [{"name": q.name, "question": q.question, "sparql": q.query} for q in load_questions()]

    # -- the explorer's pages ------------------------------------------------------------------------------------

    def _explorer(self, timeout: float | None) -> Explorer:
        from pcm.explore import Explorer

        return Explorer(self.backend, self.manifest.namespace,
                        timeout=self.settings.query_timeout if timeout is None else timeout)

    def entity_page(self, iri: str, *, timeout: float | None = None) -> EntityPage:
        """An entity's page (an IRI, a CURIE or ``m:slug``): its types, labels, facts each with the messages that
        state it, related entities, and the posts that mention it; ``timeout`` bounds each query (default
        ``query_timeout``)."""
        from pcm.models import EntityPage

        return EntityPage.model_validate(self._explorer(timeout).entity(self.expand_iri(iri)))

    def conversation_page(self, thread: str, *, timeout: float | None = None) -> dict[str, object]:
        """A conversation (a thread IRI, see :meth:`find_session`): its posts in order, each with its facts."""
        return self._explorer(timeout).conversation(thread)

    def conversation_list(self, *, timeout: float | None = None) -> list[dict[str, object]]:
        """Every conversation, with its title, time span and number of posts."""
        return self._explorer(timeout).conversations()

    def search_text(self, text: str, k: int, *, timeout: float | None = None) -> dict[str, object]:
        """Substring search over messages and entity labels: the explorer's search without the side index."""
        return self._explorer(timeout).search_text(text, k)

    def post_count(self) -> int:
        q = f"SELECT (COUNT(?p) AS ?n) WHERE {{ GRAPH {CONVERSATION} {{ ?p a <{SIOC}Post> }} }}"
        count = self.store.select(q).rows[0][0]
        return 0 if count is None else int(term_value(count))


_VALIDATOR = None

def _parse_time(value: datetime | str | None, what: str) -> datetime | None:
    """``value`` (ISO 8601 text or a datetime) as a datetime, its zone (or none) as given; a bad one is one
    :class:`BadTime` line naming ``what``."""
    if value is None or isinstance(value, datetime):
        return value
    if not isinstance(value, str):
        raise BadTime(f"{what}: expected an ISO 8601 date or time, got {type(value).__name__}")
    return parse_timestamp(value, what)


def _zoned(conversations: list[Conversation], zone: tzinfo) -> tuple[list[Conversation], int]:
    """The conversations with every time that has no zone read in ``zone``, and how many such times there were:
    stored times all carry a zone, so they compare and sort (a naive and an aware time do not)."""
    count = 0

    def fix(when: datetime | None) -> datetime | None:
        nonlocal count
        if when is None or when.tzinfo is not None:
            return when
        count += 1
        return when.replace(tzinfo=zone)

    fixed = []
    for conv in conversations:
        utterances = [replace(u, timestamp=fix(u.timestamp)) if u.timestamp is not None and u.timestamp.tzinfo is None
                      else u for u in conv.utterances]
        fixed.append(replace(conv, utterances=utterances, started=fix(conv.started)))
    return fixed, count


def _ingest_stopped(report: IngestReport, last_stored: str, every_post_stored: bool) -> str:
    """What an ingest a full disk (or memory, ...) stopped had stored, for the one line that reports it."""
    if every_post_stored:
        return (f"all {report.added} new utterance(s) were stored ({report.skipped} already were); the side index and "
                "summaries catch up at the next open")
    if not report.added:
        return "no new utterance was stored: run the ingest again once there is room"
    return (f"{report.added} new utterance(s) were stored before it stopped (the last: {last_stored}), the rest were "
            "not: run the same ingest again once there is room (what is stored is skipped)")


def check_vocabulary(quads: Sequence[ox.Quad], ontology: Ontology, naming: Naming) -> list[str]:
    """Every predicate and class used must be defined by the ontology (distinct terms only, so it is fast).

    The same terms are allowed as in :class:`pcm.shapes.Validator` (``BUILTIN_TERMS`` plus the ontology's).
    """
    from pcm.shapes import BUILTIN_TERMS

    predicates: set[str] = set()
    classes: set[str] = set()
    rdf_type = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
    for q in quads:
        predicates.add(q.predicate.value)
        if q.predicate.value == rdf_type and isinstance(q.object, ox.NamedNode):
            classes.add(q.object.value)
    problems = [
        f"unknown property {p}" for p in sorted(predicates)
        if p not in BUILTIN_TERMS and not ontology.defines(p)
    ]
    problems += [
        f"unknown class {c}" for c in sorted(classes)
        if c not in BUILTIN_TERMS and not ontology.defines(c)
    ]
    return problems


def _validator() -> Validator:
    """Shapes are parsed once per process."""
    global _VALIDATOR
    if _VALIDATOR is None:
        from pcm.shapes import Validator

        _VALIDATOR = Validator()
    return _VALIDATOR


def _through_running_server(settings: Settings, *, read_only: bool) -> Settings:
    """A memory held by a running ``pcm serve`` is reached through it instead of failing on the store lock."""
    from pcm.serve_file import SERVE_FILE

    if not (settings.memory / SERVE_FILE).exists():
        return settings  # no server has announced itself: spare every command the HTTP client's import
    from pcm.serve_file import discover

    info = discover(settings.memory)
    if info is None:
        return settings
    if not read_only:
        refuse_write_without_token(settings, info)
    # reads through a server beyond loopback need a token: the command's own, else the one serve.json holds
    return settings.with_(engine_url=info.query_url, token=settings.token or info.read_token or None)


def refuse_write_without_token(settings: Settings, info: ServerInfo) -> None:
    """A write to a memory ``pcm serve`` holds goes through the server, with its token; without one it is refused
    here, with the error (exit 4) and the line the server itself gives a write without its token."""
    if not (info.token_required and settings.token):
        raise write_refusal(takes_writes=info.token_required)


def expand_iri(iri: str, namespace: str) -> str:
    """Accept a full IRI, ``<IRI>``, a CURIE with a known prefix, or ``m:slug`` for this memory's individuals.

    What is none of these (a space, a bare ``<``, an empty string) is one :class:`BadIri` line, the same on every
    face, never the store's ``ValueError``."""
    given = check_text(iri, "the value", "IRI")  # a byte that is not UTF-8 is named as such, not as a bad IRI
    iri = iri.strip().removeprefix("<").removesuffix(">")
    prefix, sep, local = iri.partition(":")
    refused = BadIri(f"{_shown(given)} is not an IRI: give a full IRI, a CURIE (schema:Person) or m:slug")
    if not iri or (sep and prefix == "m" and not local):
        raise refused
    if sep and not local.startswith("//"):
        if prefix == "m":
            iri = namespace + local
        elif prefix in PREFIXES:
            iri = PREFIXES[prefix] + local
    if "://" not in iri and not iri.startswith("urn:"):
        iri = namespace + iri
    try:
        ox.NamedNode(iri)
    except ValueError:
        raise refused from None
    return iri


def _shown(text: str, limit: int = 80) -> str:
    """``text`` quoted for an error line, cut to ``limit`` characters."""
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def _undo_copy(backend: Backend, layout: DatasetLayout, embedded: bool, directory: Path) -> None:
    """Take back a move's copy that failed or did not match: the target keeps nothing of the memory."""
    from pcm.store_move import drop_graphs, owned_graphs

    if embedded:
        backend.close()
        shutil.rmtree(directory / STORE_DIR, ignore_errors=True)
        return
    drop_graphs(backend, owned_graphs(backend, layout))


def _undo_init(memory: Memory) -> str:
    """Drop what an init the server did not finish wrote there (a write that ran past PCM_STORE_WRITE_TIMEOUT may
    still land), so no orphan graph is left for the next init to take for another memory; the note for its error.

    The drop waits longer than a write (a server that applies updates in order answers it after the write it is
    still busy with); what is found left after it is named, for the person to drop."""
    from pcm.backend_remote import RemoteBackend

    backend, layout = memory.backend, memory.naming.layout
    assert isinstance(backend, RemoteBackend)
    refused: PcmError | None = None
    try:
        graphs = sorted({*layout.fixed_graphs, *backend.named_graphs()})
        drop = " ;\n".join(f"DROP SILENT GRAPH <{graph}>" for graph in graphs)
        try:
            backend.update(drop, timeout=max(4 * memory.settings.store_write_timeout, 60.0))
        except PcmError as exc:  # e.g. an account that may not write: then nothing was written either
            refused = exc
        left = backend.named_graphs()
    except PcmError as exc:
        return f"graphs of the unfinished memory may be left on the server under <{layout.prefix}> ({exc}): drop them"
    if left:
        why = f" (pcm could not drop them: {refused})" if refused else ""
        return f"{len(left)} graph(s) of the unfinished memory are left on the server under <{layout.prefix}>{why}: drop them"
    return "no memory was made, and the server keeps nothing of it"


def _refuse_shared_store(backend: Backend, url: str, namespace: str) -> None:
    """Refuse a store that holds another memory: its owner (``pcm:MemoryOwner``) has another namespace."""
    found = backend.query(
        "SELECT DISTINCT ?o WHERE { GRAPH ?g { ?o a <https://w3id.org/pcm/ontology#MemoryOwner> } }"
    )
    assert isinstance(found, Solutions)
    others = sorted(term_value(t).removesuffix("owner") for t in found.values("o") if t is not None)
    others = [ns for ns in others if ns != namespace]
    if others:
        raise UsageError(
            f"the store at {url} already holds another memory (namespace {others[0]}): pass --share-store "
            "(share_store=True) to keep both there, each reading only its own graphs, or use another store"
        )


__all__ = ["EPISODIC", "INLINE", "QUEUED", "ImportReport", "IngestReport", "Memory", "RememberReport", "check_vocabulary"]

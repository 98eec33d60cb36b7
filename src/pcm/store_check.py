"""``pcm store check URL``: what works on a SPARQL server, tried before a memory is made on it or moved to it.

Each check is one line: whether the server answers and which engine profile pcm takes for it (detected from its
``Server`` header, or given), whether it answers queries, whether the account may write (a refusal for want of
rights is reported as "permission denied", whatever the server's wording), whether a graph written is read back
whole, how ``*`` and ``?`` paths fare under pcm's per-memory scope rewrite (the engine's own answer, and the
profile's), where the server cuts answers (its row limit), how writes are sent, and which pcm memories it holds
already. The writes go to one scratch graph of a memory id no memory has (``urn:pcm:memory:check-...``), dropped
at the end; nothing else on the server is touched.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx
import pyoxigraph as ox

from pcm.backend import Solutions
from pcm.backend_remote import ENGINES, PROFILES, RemoteBackend, probe
from pcm.errors import PcmError, QueryError, StorePermissionError
from pcm.layout import LEGACY_PREFIX, DatasetLayout
from pcm.scope import ScopeError, scope_query
from pcm.settings import Settings
from pcm.store_binding import without_credentials

OK, WARN, FAIL, SKIP = "ok", "warn", "fail", "skip"
#: A row limit below this cuts ``pcm export`` of a memory of a few thousand utterances (its conversation graph).
SMALL_ROW_LIMIT = 1_000_000
_EX = "https://pcm.invalid/check/"
_RDFS_SUBCLASS = ox.NamedNode("http://www.w3.org/2000/01/rdf-schema#subClassOf")
_RDF_TYPE = ox.NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#type")
#: The memory-id graph prefix (:mod:`pcm.layout`), for listing the memories a server holds.
_BY_ID_PREFIX = "urn:pcm:memory:"
#: The path checks: (query, the subjects it must find). ``rex`` is a Dog, Dog a subclass of Pet, ``tom`` a Pet
#: itself: only the zero-length part of the path finds ``tom``.
_PATHS = (
    (f"SELECT ?x WHERE {{ ?x a/<{_RDFS_SUBCLASS.value}>* <{_EX}Pet> }}", {"rex", "tom"}),
    (f"SELECT ?x WHERE {{ ?x a/<{_RDFS_SUBCLASS.value}>? <{_EX}Pet> }}", {"rex", "tom"}),
)
_REFUSED_SHAPES = (
    "a zero-length part between two variables (`?a rdfs:subClassOf* ?b`)",
    "a `+` path between two variables (`?a rdfs:subClassOf+ ?b`)",
    "`+` or `*` over a group holding `*`, `?` or `+` (`((:p)*)*`)",
    "a `*`, `?` or `+` path inside a GRAPH ?g written in the query",
)


@dataclass
class Check:
    name: str
    status: str
    detail: str
    exit_code: int = 0

    def as_json(self) -> dict[str, object]:
        return {"name": self.name, "status": self.status, "detail": self.detail}


@dataclass
class StoreReport:
    url: str
    engine: str = ""
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.status != FAIL for c in self.checks)

    @property
    def exit_code(self) -> int:
        """The exit code of the first failed check (the CLI's meanings: 1 unreachable or refused, 8 a query
        refused), 0 when none failed."""
        return next((c.exit_code or 1 for c in self.checks if c.status == FAIL), 0)

    def as_json(self) -> dict[str, object]:
        return {"url": self.url, "engine": self.engine, "ok": self.ok, "checks": [c.as_json() for c in self.checks]}


def check_store(url: str, settings: Settings, *, engine: str = "auto") -> StoreReport:
    """Run every check against the server at ``url`` with the store credentials in ``settings``; a check that
    cannot run because an earlier one failed is ``skip``. Never raises for what the server answers."""
    shown = without_credentials(url)
    report = StoreReport(shown)
    add = report.checks.append
    timeout = max(settings.query_timeout, 10.0)
    try:
        with httpx.Client(timeout=timeout) as client:
            detected, _ = probe(url, client=client)
    except PcmError as exc:
        add(Check("reach", FAIL, exc.line, exc.exit_code))
        return report
    add(Check("reach", OK, f"{shown} answers"))
    try:
        backend = RemoteBackend(
            url,
            update_url=settings.store_update_url,
            gsp_url=settings.store_gsp_url,
            token=settings.store_token,
            user=settings.store_user,
            password=settings.store_password,
            engine=detected if engine == "auto" else engine,
            batch=settings.store_batch,
            timeout=timeout,
            write_timeout=settings.store_write_timeout,
        )
    except PcmError as exc:
        add(Check("profile", FAIL, exc.line, exc.exit_code))
        return report
    with backend:
        if engine == "auto":
            add(Check("profile", OK, f"{detected} (detected from the server's Server header)"))
        else:
            note = "" if detected == engine else f"; the Server header says {detected}"
            add(Check("profile", OK if detected == engine or engine == "generic" else WARN, f"{engine} (given{note})"))
        report.engine = backend.engine
        add(Check("endpoints", OK, f"query {backend.query_url}, update {backend.update_url}, graph store "
                                   f"{backend.gsp_url or 'none (graphs read with CONSTRUCT)'}"))
        with _scoped(backend, None):
            if not _query(backend, add):
                for name in ("update", "read back", "paths", "row limit", "memories"):
                    add(Check(name, SKIP, "the server answers no query"))
                return report
            _memories(backend, add)
            _row_limit(backend, add)
        _writes(backend, add)
        layout = DatasetLayout(f"check-{uuid.uuid4().hex[:12]}")
        graph = layout.prefix + "check"
        if not _update(backend, graph, add):
            add(Check("read back", SKIP, "nothing could be written"))
            add(Check("paths", SKIP, "nothing could be written to try them on"))
            return report
        try:
            _read_back(backend, graph, add)
            _paths(backend, layout, add)
        finally:
            _drop(backend, graph, add)
    return report


@contextmanager
def _scoped(backend: RemoteBackend, layout: DatasetLayout | None) -> Iterator[None]:
    """The backend's layout set for a block (None: queries go unscoped, over the whole store)."""
    before, backend.layout = backend.layout, layout
    try:
        yield
    finally:
        backend.layout = before


def _query(backend: RemoteBackend, add: Callable[[Check], None]) -> bool:
    try:
        backend.query("SELECT ?s WHERE { ?s ?p ?o } LIMIT 1")
        asked = backend.query("ASK { }")
    except StorePermissionError as exc:
        add(Check("query", FAIL, f"permission denied: {exc.line}", exc.exit_code))
        return False
    except PcmError as exc:
        add(Check("query", FAIL, exc.line, exc.exit_code))
        return False
    if asked is not True:
        add(Check("query", FAIL, f"`ASK {{ }}` answered {asked!r}, not true", QueryError.exit_code))
        return False
    add(Check("query", OK, "answers SELECT and ASK"))
    return True


def _memories(backend: RemoteBackend, add: Callable[[Check], None]) -> None:
    try:
        graphs = backend.named_graphs()
    except PcmError as exc:
        add(Check("memories", WARN, f"cannot list the server's graphs: {exc.line}"))
        return
    ids = sorted({g[len(_BY_ID_PREFIX) :].split(":graph:")[0] for g in graphs if g.startswith(_BY_ID_PREFIX)})
    ids = [i for i in ids if not i.startswith("check-")]
    fixed = any(g.startswith(LEGACY_PREFIX) for g in graphs)
    if not ids and not fixed:
        add(Check("memories", OK, f"no pcm memory here ({len(graphs)} other graph(s))"))
        return
    found = [f"id {i}" for i in ids] + (["one with the fixed graph names (urn:pcm:graph:)"] if fixed else [])
    note = "; a memory with the fixed graph names cannot be moved here" if fixed else ""
    add(Check("memories", OK, f"{len(found)} pcm memor{'y' if len(found) == 1 else 'ies'} here: {', '.join(found)} "
                              f"(each reads only its own graphs{note})"))


def _row_limit(backend: RemoteBackend, add: Callable[[Check], None]) -> None:
    try:
        cap = backend.row_cap(SMALL_ROW_LIMIT)
    except PcmError as exc:
        add(Check("row limit", WARN, f"not found out: {exc.line}"))
        return
    if cap is None:
        add(Check("row limit", OK, f"none announced for an answer of {SMALL_ROW_LIMIT:,} rows"))
        return
    utterances = cap // 9  # the conversation graph holds about nine triples per utterance
    add(Check("row limit", WARN, f"the server cuts every answer at {cap:,} rows: `pcm export` and the Virtuoso graph "
                                 f"reads stop at a graph of more (about {utterances:,} utterances); raise it "
                                 "(Virtuoso: ResultSetMaxRows in virtuoso.ini's [SPARQL] section)"))


def _writes(backend: RemoteBackend, add: Callable[[Check], None]) -> None:
    caps = backend.capabilities
    atomic = ("one request is one transaction" if caps.transactions
              else "a request is not rolled back when a later part of it fails")
    add(Check("writes", OK, f"up to {caps.batch:,} quads per request ({atomic}); bulk load: {caps.bulk_load}"))


def _update(backend: RemoteBackend, graph: str, add: Callable[[Check], None]) -> bool:
    ex = _EX
    text = (f"INSERT DATA {{ GRAPH <{graph}> {{ <{ex}rex> a <{ex}Dog> . <{ex}Dog> <{_RDFS_SUBCLASS.value}> <{ex}Pet> . "
            f"<{ex}tom> a <{ex}Pet> }} }}")
    try:
        backend.update(text)
    except StorePermissionError as exc:
        add(Check("update", FAIL, f"permission denied: {exc.line}", exc.exit_code))
        return False
    except PcmError as exc:
        add(Check("update", FAIL, exc.line, exc.exit_code))
        return False
    add(Check("update", OK, f"the account may write (a scratch graph <{graph}>, dropped at the end)"))
    return True


def _read_back(backend: RemoteBackend, graph: str, add: Callable[[Check], None]) -> None:
    try:
        quads = list(backend.quads(graph))
    except PcmError as exc:
        add(Check("read back", FAIL, exc.line, exc.exit_code))
        return
    how = "the graph store" if backend.gsp_url else "CONSTRUCT"
    if len(quads) != 3:
        add(Check("read back", FAIL, f"{how} gave {len(quads)} of the 3 triples written"))
        return
    add(Check("read back", OK, f"the graph written is read back whole ({how})"))


def _paths(backend: RemoteBackend, layout: DatasetLayout, add: Callable[[Check], None]) -> None:
    """The ``*`` and ``?`` paths, as the engine answers them under the scope rewrite and as the profile has them."""
    profile = backend.profile
    engine_drops = []
    profile_wrong = []
    for text, expected in _PATHS:
        scoped = scope_query(text, layout.prefix, zero_length=True)  # the rewrite without the profile's path rewrite
        try:
            with _scoped(backend, None):
                raw = _subjects(backend.query(scoped))
            with _scoped(backend, layout):
                given = _subjects(backend.query(text))
        except PcmError as exc:
            add(Check("paths", FAIL, exc.line, exc.exit_code))
            return
        if raw != expected:
            engine_drops.append(text.split("?x ")[1].split(" <")[0])
        if given != expected:
            profile_wrong.append(text.split("?x ")[1].split(" <")[0])
    if profile_wrong:
        add(Check("paths", FAIL, f"the {profile.name} profile answers {', '.join(profile_wrong)} wrongly on this server"
                                 " (it drops the zero-length match): use PCM_STORE_ENGINE=virtuoso if it is one",
                  QueryError.exit_code))
        return
    try:
        with _scoped(backend, layout):
            backend.query(f"SELECT * WHERE {{ ?a <{_RDFS_SUBCLASS.value}>* ?b }}")
        refused = ""
    except ScopeError:
        refused = "; refused in one line: " + "; ".join(_REFUSED_SHAPES)
    if not profile.quirks.zero_length_paths:
        add(Check("paths", OK, f"the engine drops the zero-length part of `*` and `?` paths inside GRAPH ?g "
                               f"({'yes' if engine_drops else 'not on this server'}): the {profile.name} profile "
                               f"rewrites them, and `+` paths as walks over the memory's graphs{refused}"))
    else:
        add(Check("paths", OK, "`*` and `?` paths give their zero-length matches under the scope rewrite; "
                               "nothing rewritten or refused"))


def _subjects(result: object) -> set[str]:
    assert isinstance(result, Solutions)
    return {t.value[len(_EX):] for t in result.values("x") if isinstance(t, ox.NamedNode)}


def _drop(backend: RemoteBackend, graph: str, add: Callable[[Check], None]) -> None:
    try:
        backend.update(f"DROP SILENT GRAPH <{graph}>")
    except PcmError as exc:
        add(Check("clean-up", WARN, f"the scratch graph <{graph}> is left on the server ({exc.line}): drop it"))


__all__ = ["ENGINES", "PROFILES", "Check", "StoreReport", "check_store"]

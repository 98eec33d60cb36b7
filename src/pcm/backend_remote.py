"""A :class:`pcm.backend.Backend` over HTTP: the SPARQL 1.1 Protocol for queries and updates, the Graph Store
Protocol (per graph) for reads, and engine profiles for the deviations of known servers.

Three URLs: query, update and Graph Store. Each may be set (``PCM_STORE_URL``, ``PCM_STORE_UPDATE_URL``,
``PCM_STORE_GSP_URL``); those not set come from the engine's layout (:func:`resolve_endpoints`), so the root URL a
server prints on start works as well as its query URL, or, on a generic server, from its service description (an
endpoint that lists ``sd:SPARQL11Update`` takes updates at its own URL). Without a Graph Store URL, graphs are read with
``CONSTRUCT`` queries, so a query and an update endpoint are all a standard server needs.

The profile (``PCM_STORE_ENGINE``: ``auto`` detects it from the ``Server`` header) carries what the standard leaves
open or what an engine gets wrong:

* ``oxigraph`` (``oxigraph serve``): the default graph of a query is made the union of all graphs with the
  ``union-default-graph`` URL parameter; the whole dataset is read and bulk-loaded with one Graph Store request
  (an Oxigraph extension); ``--timeout-s`` cancels a query *after* it answered ``200``: the body then ends with
  "The SPARQL operation has been cancelled" (often mid-document), which we detect and raise as :class:`QueryError`;
* ``virtuoso`` (Virtuoso 7.2): queries and updates are POSTed form-encoded (its ``application/sparql-query``
  POSTs never answer); blank nodes are skolemised before ``INSERT DATA`` (it refuses them there) and turned back
  into blank nodes when graphs are read; at most :data:`VIRTUOSO_BATCH` quads per request; ``GRAPH ?g {}`` lists
  no graph there, so graphs are listed from their triples, without Virtuoso's own system graphs; it answers an
  ASK with a one-column table, read back as the boolean. Its default graph is already the union of all graphs;
* ``generic``: the standard alone. The server must make the default graph of a query the union of the named
  graphs itself (Fuseki: ``tdb2:unionDefaultGraph true``; GraphDB, Stardog and Virtuoso do by default).

Atomicity: a write of at most ``batch`` quads (``PCM_STORE_BATCH``; the profile's limit when smaller) is one
request, which Oxigraph applies in one transaction. A larger write is split into several requests, each applied
on its own: if one fails, the ones before it stay, and the error says how many quads landed. Blank nodes joined by
triples are kept in one request, since the same label in two requests names two different nodes. Virtuoso does
not roll back a request whose later operation fails at run time (only one refused at compile time).

Results are parsed while they stream in, so ``limit`` and ``timeout`` stop reading early exactly as
:func:`pcm.backend.materialise` does for the embedded store; closing the connection makes Oxigraph stop
evaluating. A query that blocks inside one step (an aggregate over a huge join) sends nothing: the HTTP read
timeout bounds our wait, but only the server's own timeout bounds its work. Each query asks for the format of its
form (results for SELECT and ASK, N-Triples for CONSTRUCT and DESCRIBE); an answer in the other kind is an error.
"""

from __future__ import annotations

import io
import os
import re
import time
import uuid
from collections.abc import Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, cast

import httpx
import pyoxigraph as ox

from pcm.backend import (
    Capabilities,
    PurgeScope,
    QueryIsolation,
    QueryResult,
    Solutions,
    materialise,
    quads_to_insert_data,
    term_value,
    value_or_none,
)
from pcm.errors import (
    InputError,
    MemoryClosedError,
    MemoryLockedError,
    PcmError,
    QueryError,
    QueryTimeout,
    StorePermissionError,
    UsageError,
)
from pcm.layout import LEGACY_LAYOUT, DatasetLayout
from pcm.oserrors import refused_in_text
from pcm.scope import STANDARD, Quirks, scope_query, strip_hidden
from pcm.scope import VIRTUOSO as VIRTUOSO_QUIRKS
from pcm.sparql.lexer import apply_edits, tokenize
from pcm.sparql.query import parse

#: What Oxigraph writes into a response body when its ``--timeout-s`` cancels a running query.
CANCELLED_MARKER = "The SPARQL operation has been cancelled"
_ACCEPT_RESULTS = "application/sparql-results+json"
_ACCEPT_GRAPH = "application/n-triples, text/turtle;q=0.9"
_ACCEPT_ANY = "application/sparql-results+json, application/n-triples"
_TIME_LIMIT = "query stopped: it ran past the time limit"
_MAX_MESSAGE = 300
#: Engines ``PCM_STORE_ENGINE`` names; ``auto`` detects one of the others.
ENGINES = ("auto", "oxigraph", "virtuoso", "generic")
#: Quads per write request unless ``PCM_STORE_BATCH`` says otherwise.
DEFAULT_BATCH = 50_000
#: Virtuoso 7.2 refuses an ``INSERT DATA`` somewhere past 1,000-1,500 triples.
VIRTUOSO_BATCH = 1_000
#: The one column of the table Virtuoso answers an ASK with (one row ``1`` for true, no row for false).
_VIRTUOSO_ASK = "__ASK_RETVAL"
#: How a server says the account may not do what was asked: Virtuoso's SR186 (no right to run the procedure behind
#: an update, e.g. "SR186:SECURITY: No permission to execute procedure DB.DBA.SPARQL_INSERT_DICT_CONTENT with user ID
#: 107", a write sent without dba's credentials) and SR619 ("SPARUL INSERT access denied: database user 107 (SPARQL)
#: has no write permission on graph ...").
_DENIED = re.compile(r"\bSR186\b|\bSR619\b|No permission to execute|has no write permission", re.IGNORECASE)
#: Service descriptions longer than this are not read (a root URL may answer with anything).
_MAX_DESCRIPTION = 1_000_000
_SD_LANGUAGE = ox.NamedNode("http://www.w3.org/ns/sparql-service-description#supportedLanguage")
_SD_UPDATE = ox.NamedNode("http://www.w3.org/ns/sparql-service-description#SPARQL11Update")
#: The header with which Virtuoso says it cut an answer at its ``ResultSetMaxRows`` (it says nothing for graphs).
_MAX_ROWS_HEADER = "x-sparql-maxrows"
#: Virtuoso's ``ResultSetMaxRows``, as its ini file sets it (an empty string or 0: no limit).
_VIRTUOSO_MAX_ROWS = (
    "SELECT (bif:cfg_item_value(bif:virtuoso_ini_path(), 'SPARQL', 'ResultSetMaxRows') AS ?n) WHERE { }"
)
#: Where skolemised blank nodes live (RDF 1.1 §3.5 skolem IRIs, under pcm's own authority).
SKOLEM_PREFIX = "https://w3id.org/pcm/.well-known/genid/"
#: Graphs Virtuoso keeps for itself in every database; never a memory's.
VIRTUOSO_SYSTEM_GRAPHS = (
    "http://www.openlinksw.com/",
    "http://www.w3.org/ns/ldp#",
    "http://localuriqaserver/",
    "http://www.w3.org/2002/07/owl#",
)


def _one_line(text: str) -> str:
    """Server messages can span lines (Oxigraph lists expected tokens); our errors are one line."""
    line = " ".join(text.split())
    return line if len(line) <= _MAX_MESSAGE else line[: _MAX_MESSAGE - 3] + "..."


def _media_type(response: httpx.Response) -> str:
    return response.headers.get("content-type", "").split(";")[0].strip().lower()


def query_form(sparql: str) -> str | None:
    """``SELECT``, ``ASK``, ``CONSTRUCT`` or ``DESCRIBE``: the first such keyword outside strings, IRIs and
    comments (a prologue holds none of them); None when there is none (the server will say what is wrong)."""
    return parse(sparql).form or None


@dataclass(frozen=True)
class Profile:
    """What an engine needs beyond the standard protocols (see the module docstring)."""

    name: str
    #: Send Oxigraph's ``union-default-graph`` parameter with every query.
    union_parameter: bool = False
    #: POST queries and updates as ``application/x-www-form-urlencoded`` instead of their own media types.
    form_encoded: bool = False
    #: Replace blank nodes by skolem IRIs on the way in, back on the way out.
    skolemise: bool = False
    #: Most quads one write request may carry (None: only the configured batch size).
    batch_limit: int | None = None
    #: Whole-dataset Graph Store GET and POST (not in the standard).
    dataset_store: bool = False
    #: ``GRAPH ?g {}`` lists every named graph (Virtuoso lists none).
    empty_graph_pattern: bool = True
    #: Graph-name prefixes that belong to the engine, not to any client.
    system_graphs: tuple[str, ...] = ()
    #: Check each graph read against the graph's triple count (the engine may cut answers silently).
    count_graphs: bool = False
    #: One update request is one transaction (all of it applied or none).
    transactions: bool = False
    #: What the engine answers otherwise than the standard under the scope rewrite, which the rewrite writes around
    #: (:class:`pcm.scope.Quirks`: Virtuoso 7.2's ``*``, ``?`` and ``+`` paths and its FILTER inside OPTIONAL).
    quirks: Quirks = STANDARD
    #: Columns the engine adds to an answer on its own (Virtuoso answers ``SELECT *`` over a pattern without
    #: variables with a ``_star_fake`` column): dropped.
    own_columns: tuple[str, ...] = ()
    #: The engine pads the fraction of an ``xsd:dateTime``'s seconds (Virtuoso: ``35.82971Z`` comes back
    #: ``35.829710Z``): graphs read are given the canonical form back, which the embedded store and Oxigraph keep.
    pads_seconds: bool = False


PROFILES = {
    "oxigraph": Profile("oxigraph", union_parameter=True, dataset_store=True, transactions=True),
    "virtuoso": Profile(
        "virtuoso",
        form_encoded=True,
        skolemise=True,
        batch_limit=VIRTUOSO_BATCH,
        empty_graph_pattern=False,
        system_graphs=VIRTUOSO_SYSTEM_GRAPHS,
        count_graphs=True,
        quirks=VIRTUOSO_QUIRKS,
        own_columns=("_star_fake",),
        pads_seconds=True,
    ),
    "generic": Profile("generic"),
}


@dataclass(frozen=True)
class Endpoints:
    query: str
    update: str
    #: Empty: no Graph Store endpoint; graphs are read with CONSTRUCT.
    gsp: str


def _strip(url: str, suffixes: Sequence[str]) -> str:
    url = url.rstrip("/")
    for suffix in suffixes:
        if url.endswith(suffix):
            return url[: -len(suffix)]
    return url


def resolve_endpoints(
    url: str, engine: str, *, update_url: str = "", gsp_url: str = "", authenticated: bool = False
) -> Endpoints:
    """The three URLs from the one given (a server root or a query URL) and the engine's layout; URLs set
    explicitly win. ``authenticated``: Virtuoso answers authenticated requests at ``-auth`` addresses only."""
    if engine == "oxigraph":
        base = _strip(url, ("/query",))
        derived = Endpoints(base + "/query", base + "/update", base + "/store")
    elif engine == "virtuoso":
        base = _strip(url, ("/sparql-auth", "/sparql"))
        auth = "-auth" if authenticated else ""
        derived = Endpoints(f"{base}/sparql{auth}", f"{base}/sparql{auth}", f"{base}/sparql-graph-crud{auth}")
    else:
        query, update, _ = derive_urls(url)
        derived = Endpoints(query, update, "")
    return Endpoints(derived.query, update_url or derived.update, gsp_url or derived.gsp)


def derive_urls(query_url: str) -> tuple[str, str, str]:
    """(query, update, GSP) URLs from a query URL by the common layout: ``.../query`` → ``.../update``,
    ``.../store``; any other URL (``.../sparql``, a Fuseki dataset URL) is used for all three."""
    url = query_url.rstrip("/")
    if url.endswith("/query"):
        base = url[: -len("/query")]
        return url, base + "/update", base + "/store"
    return url, url, url


def detect_engine(url: str, *, client: httpx.Client) -> str:
    """``oxigraph``, ``virtuoso`` or ``generic``, from the ``Server`` header of a GET on ``url`` (the service
    description at a SPARQL endpoint, a page at a root). A server that cannot be reached is reported here."""
    return probe(url, client=client)[0]


def probe(url: str, *, client: httpx.Client) -> tuple[str, bool]:
    """(engine, whether the service description at ``url`` offers SPARQL 1.1 Update there).

    SPARQL 1.1 Service Description: a GET on an endpoint without a query describes it; ``sd:supportedLanguage
    sd:SPARQL11Update`` says the same URL takes updates. A description that cannot be read offers nothing.
    """
    try:
        with client.stream("GET", url, headers={"Accept": "text/turtle, application/n-triples;q=0.9, */*;q=0.1"}) as response:
            server = response.headers.get("server", "").lower()
            fmt = ox.RdfFormat.from_media_type(_media_type(response)) if response.status_code == 200 else None
            body = b""
            if fmt is not None:
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > _MAX_DESCRIPTION:
                        body = b""
                        break
    except httpx.HTTPError as exc:
        reason = _one_line(str(exc)) or type(exc).__name__
        raise PcmError(f"cannot reach the SPARQL server at {url}: {reason}") from exc
    engine = next((name for name in ("oxigraph", "virtuoso") if name in server), "generic")
    updates = False
    if fmt is not None and body:
        try:
            updates = any(
                q.predicate == _SD_LANGUAGE and q.object == _SD_UPDATE for q in ox.parse(body, fmt, base_iri=url)
            )
        except SyntaxError:
            updates = False
    return engine, updates


class ChallengeAuth(httpx.Auth):
    """User and password sent the way the server's challenge asks: Basic or Digest (Virtuoso asks for Digest).

    The first request goes without credentials (and, for Digest, once more to fetch the nonce); once the scheme is
    known it is used from the start (Digest reuses the server's nonce, so later requests need no extra round trip).
    """

    requires_request_body = True

    def __init__(self, user: str, password: str) -> None:
        self._basic = httpx.BasicAuth(user, password)
        self._digest = httpx.DigestAuth(user, password)
        self._scheme: httpx.Auth | None = None

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        if self._scheme is not None:
            yield from self._scheme.auth_flow(request)
            return
        response = yield request
        if response.status_code != 401:
            return
        challenge = response.headers.get("www-authenticate", "").split(" ", 1)[0].lower()
        if challenge == "digest":
            self._scheme = self._digest
        elif challenge == "basic":
            self._scheme = self._basic
        else:
            return
        yield from self._scheme.auth_flow(request)


class _StreamReader(io.RawIOBase):
    """A file-like view of a streaming response, so pyoxigraph parses rows as they arrive.

    It remembers the tail of the body (to spot Oxigraph's cancellation message) and any transport error
    raised while pyoxigraph was reading (pyoxigraph would otherwise report it as a parse error).
    """

    def __init__(self, response: httpx.Response) -> None:
        super().__init__()
        self._chunks = response.iter_bytes()
        self._buffer = b""
        self._tail = b""
        self.error: httpx.HTTPError | None = None

    def readable(self) -> bool:
        return True

    @property
    def binary(self) -> BinaryIO:
        """This reader as the binary file pyoxigraph's parsers are typed to take (they call ``read``, which a raw
        file serves through :meth:`readinto`)."""
        return cast(BinaryIO, self)

    def readinto(self, target: bytearray | memoryview) -> int:  # type: ignore[override]  # what read() hands it
        while not self._buffer:
            try:
                chunk = next(self._chunks)
            except StopIteration:
                return 0
            except httpx.HTTPError as exc:
                self.error = exc
                raise
            self._tail = (self._tail + chunk)[-(len(CANCELLED_MARKER) + 64) :]
            self._buffer = chunk
        n = min(len(target), len(self._buffer))
        target[:n] = self._buffer[:n]
        self._buffer = self._buffer[n:]
        return n

    @property
    def cancelled(self) -> bool:
        return CANCELLED_MARKER.encode() in self._tail


class RemoteBackend:
    """Quads behind a SPARQL 1.1 Protocol server (one pooled HTTP connection set); see the module docstring."""

    def __init__(
        self,
        query_url: str,
        *,
        update_url: str | None = None,
        gsp_url: str | None = None,
        token: str = "",
        user: str = "",
        password: str = "",
        timeout: float = 30.0,
        write_timeout: float | None = None,
        engine: str = "auto",
        batch: int | None = None,
        union_default_graph: bool | None = None,
        keepalive_expiry: float | None = None,
    ) -> None:
        """``timeout``: seconds to wait for any answer (a query's own limit may be shorter); ``write_timeout``: for
        the answer to a write (an update, a load; ``timeout`` when None), which a slow server takes longer to give.
        ``keepalive_expiry``: seconds a pooled connection may sit idle (httpx's default when None); shorter than
        the server's own idle timeout when that server answers an idle connection with an unasked error."""
        if engine not in ENGINES:
            raise UsageError(f"store engine {engine!r}: expected one of {', '.join(ENGINES)}")
        if token and user:
            raise UsageError("a remote store takes a bearer token or a user and password, not both")
        self._timeout = timeout
        self._write_timeout = timeout if write_timeout is None else write_timeout
        self._anonymous = not (token or user)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        auth = ChallengeAuth(user, password) if user else None
        limits = httpx.Limits(keepalive_expiry=keepalive_expiry) if keepalive_expiry else httpx.Limits()
        self._client = httpx.Client(headers=headers, auth=auth, timeout=httpx.Timeout(timeout), limits=limits)
        if engine == "auto" or engine == "generic" and not update_url:
            detected, updates_here = probe(query_url, client=self._client)
            engine = detected if engine == "auto" else engine
            if engine == "generic" and updates_here and not update_url:
                update_url = query_url.rstrip("/")  # the service description says this URL takes updates
        self.profile = PROFILES[engine]
        endpoints = resolve_endpoints(
            query_url, engine, update_url=update_url or "", gsp_url=gsp_url or "", authenticated=bool(user)
        )
        self.query_url, self.update_url, self.gsp_url = endpoints.query, endpoints.update, endpoints.gsp
        self.union_default_graph = (
            self.profile.union_parameter if union_default_graph is None else union_default_graph
        )
        self.layout: DatasetLayout | None = None
        """The memory's graph names: they fill the placeholders of the SPARQL sent, and every query is scoped to
        them (:mod:`pcm.scope`), since other memories may share the server. None (before a memory is bound): the
        fixed names, and queries read the whole store."""
        limit = self.profile.batch_limit
        wanted = batch if batch and batch > 0 else DEFAULT_BATCH
        self.batch = min(wanted, limit) if limit else wanted

    @property
    def engine(self) -> str:
        return self.profile.name

    @property
    def capabilities(self) -> Capabilities:
        """A server's store: it bounds its own queries and owns its files; pcm reaches the data only through the
        protocols, so a purge can delete the memory's graphs but not rewrite the engine's files."""
        return Capabilities(
            files=None,
            isolation=QueryIsolation.SERVER,
            purge=PurgeScope.GRAPHS,
            bulk_load="graph-store" if self.profile.dataset_store else "batched",
            transactions=self.profile.transactions,
            batch=self.batch,
        )

    def fingerprint(self) -> str:
        return ""  # the files are the server's: nothing here sees them change

    # -- HTTP plumbing -------------------------------------------------------------------------------------

    def _send(
        self, method: str, url: str, what: str, *, read_timeout: float | None = None, **kwargs: Any
    ) -> httpx.Response:
        """Send a request and return the (still streaming) response; transport failures become PcmError.

        A query that sends nothing before the read timeout is reported as having run past the time limit.
        """
        if self._client.is_closed:
            raise MemoryClosedError(f"the connection to the SPARQL server at {url} is closed; open the memory again")
        read = read_timeout if read_timeout is not None else self._timeout
        timeout = httpx.Timeout(self._timeout, read=read)
        request = self._client.build_request(method, url, timeout=timeout, **kwargs)
        try:
            return self._client.send(request, stream=True)
        except httpx.ReadTimeout as exc:
            if what == "query":
                raise QueryTimeout(_TIME_LIMIT) from exc
            setting = " (PCM_STORE_WRITE_TIMEOUT)" if method == "POST" else ""
            raise PcmError(f"the SPARQL server at {url} did not answer the {what} within {read:g} s{setting}") from exc
        except httpx.HTTPError as exc:
            reason = _one_line(str(exc)) or type(exc).__name__
            raise PcmError(f"cannot reach the SPARQL server at {url}: {reason}") from exc

    def _refusal(self, response: httpx.Response, what: str) -> PcmError:
        """The error for a 4xx/5xx answer, with the server's own message on one line."""
        try:
            message = _one_line(response.read().decode("utf-8", "replace"))
        except httpx.HTTPError:
            message = ""
        finally:
            response.close()
        status = response.status_code
        if CANCELLED_MARKER in message:
            return QueryTimeout(f"{_TIME_LIMIT} of the SPARQL server at {response.request.url.host}")
        if _DENIED.search(message):  # the account may not do this (Virtuoso answers 400 or 500, not 403)
            fix = "give a user allowed to write" if what != "query" else "give a user allowed to read"
            return StorePermissionError(
                f"the SPARQL server at {response.request.url.host} refused the {what}: the account has no permission "
                f"for it ({message}); {fix} (PCM_STORE_USER and PCM_STORE_PASSWORD)"
            )
        if self.profile.name == "virtuoso" and self._anonymous and what != "query":
            # Virtuoso's anonymous account may not write: a big update fails to compile before the rights are checked
            # (SP031, "the length of generated SQL text has exceeded ..."), so its message need not say why
            return StorePermissionError(
                f"the SPARQL server at {response.request.url.host} refused the {what} sent without credentials "
                f"(HTTP {status}: {message or response.reason_phrase}); Virtuoso's anonymous account has no permission "
                "to write: give a user allowed to write (PCM_STORE_USER and PCM_STORE_PASSWORD)"
            )
        refused = refused_in_text(message) if status >= 500 else None
        if refused is not None:  # the server's disk is full (or its files read-only): not the query's fault
            return refused
        if status in (401, 403):
            return StorePermissionError(
                f"the SPARQL server at {response.request.url} refused the {what} (HTTP {status}): check the token, or the user and password"
            )
        if status == 400 and what in ("query", "update"):
            kind = "SPARQL syntax error" if what == "query" else "SPARQL Update syntax error"
            return QueryError(f"{kind}: {message or 'HTTP 400'}")
        cls = QueryError if what in ("query", "update") else PcmError
        return cls(
            f"the SPARQL server refused the {what} (HTTP {status}): {message or response.reason_phrase}"
        )

    # -- queries ---------------------------------------------------------------------------------------------

    def _operation(self, kind: str, text: str) -> dict[str, Any]:
        """Request body and Content-Type of a query or update, as the profile sends them."""
        if self.profile.form_encoded:
            return {"data": {kind: text}}
        return {
            "content": text.encode("utf-8"),
            "headers": {"Content-Type": f"application/sparql-{kind}"},
        }

    def query(self, sparql: str, *, timeout: float | None = None, limit: int | None = None) -> QueryResult:
        """Run a read query; the default graph is the union of all graphs (see the module docstring)."""
        deadline = time.monotonic() + timeout if timeout else None
        read_timeout = min(timeout, self._timeout) if timeout else self._timeout
        url = self.query_url
        sparql = (self.layout or LEGACY_LAYOUT).render(sparql)
        if self.layout is not None:
            # reads no graph but the memory's: no union needed
            sparql = scope_query(sparql, self.layout.prefix, quirks=self.profile.quirks)
        elif self.union_default_graph:
            url += ("&" if "?" in url else "?") + "union-default-graph"
        form = query_form(sparql)
        accept = {"SELECT": _ACCEPT_RESULTS, "ASK": _ACCEPT_RESULTS, "CONSTRUCT": _ACCEPT_GRAPH}.get(
            form or "", _ACCEPT_GRAPH if form == "DESCRIBE" else _ACCEPT_ANY
        )
        request = self._operation("query", sparql)
        headers = {**request.pop("headers", {}), "Accept": accept}
        response = self._send("POST", url, "query", read_timeout=read_timeout, headers=headers, **request)
        if response.status_code >= 400:
            raise self._refusal(response, "query")
        try:
            result = self._read_result(response, form=form, deadline=deadline, limit=limit)
        finally:
            response.close()
        if isinstance(result, Solutions) and self.profile.own_columns and set(result.variables) & set(self.profile.own_columns):
            keep_own = [k for k, v in enumerate(result.variables) if v not in self.profile.own_columns]
            result = Solutions(
                tuple(result.variables[k] for k in keep_own), [tuple(row[k] for k in keep_own) for row in result.rows]
            )
        if isinstance(result, Solutions) and (keep := strip_hidden(result.variables)) is not None:
            result = Solutions(
                tuple(result.variables[k] for k in keep), [tuple(row[k] for k in keep) for row in result.rows]
            )
        cap = response.headers.get(_MAX_ROWS_HEADER, "")
        if cap.isdigit() and not isinstance(result, bool) and len(result) >= int(cap) and (limit is None or limit > int(cap)):
            raise QueryError(
                f"the SPARQL server cut the answer at {cap} rows (Virtuoso: raise ResultSetMaxRows in virtuoso.ini)"
            )
        return result

    def _read_result(
        self, response: httpx.Response, *, form: str | None, deadline: float | None, limit: int | None
    ) -> QueryResult:
        """Parse a query answer by its Content-Type while it streams, mapping every failure to QueryError.

        An answer of the wrong kind for the query's form (a results table for a CONSTRUCT) is an error: reading
        it as empty would silently lose what the query found.
        """
        media_type = _media_type(response)
        reader = _StreamReader(response)
        try:
            results_format = ox.QueryResultsFormat.from_media_type(media_type) if media_type else None
            rdf_format = ox.RdfFormat.from_media_type(media_type) if media_type and results_format is None else None
            if results_format is None and rdf_format is None:
                raise QueryError(f"the SPARQL server answered with an unexpected content type {media_type!r}")
            if form in ("SELECT", "ASK") and results_format is None or form in ("CONSTRUCT", "DESCRIBE") and rdf_format is None:
                raise QueryError(f"the SPARQL server answered a {form} query with {media_type!r}")
            if results_format is not None:
                parsed: object = ox.parse_query_results(reader.binary, results_format)
            else:
                assert rdf_format is not None
                parsed = (quad.triple for quad in ox.parse(reader.binary, rdf_format))
            result = materialise(parsed, deadline=deadline, limit=limit)
        except (SyntaxError, ValueError, OSError, httpx.HTTPError) as exc:
            if reader.cancelled:
                raise QueryTimeout(f"{_TIME_LIMIT} of the SPARQL server") from exc
            if isinstance(reader.error, httpx.TimeoutException):
                raise QueryTimeout(_TIME_LIMIT) from exc
            if reader.error is not None:
                raise PcmError(
                    f"lost the connection to the SPARQL server at {self.query_url}: {reader.error}"
                ) from exc
            raise QueryError(f"unreadable answer from the SPARQL server: {_one_line(str(exc))}") from exc
        if reader.cancelled:
            raise QueryTimeout(f"{_TIME_LIMIT} of the SPARQL server")
        if form == "ASK" and isinstance(result, Solutions) and result.variables == (_VIRTUOSO_ASK,):
            return any(isinstance(row[0], ox.Literal) and row[0].value in ("1", "true") for row in result.rows)
        if form == "ASK" and not isinstance(result, bool) or form == "SELECT" and isinstance(result, bool):
            raise QueryError(f"the SPARQL server answered a {form} query with a {type(result).__name__} result")
        return result

    def row_cap(self, rows: int = 1_000_000) -> int | None:
        """The row count at which the server cuts every answer (Virtuoso's ``ResultSetMaxRows``), as it announces it
        on an answer of ``rows`` rows made from nothing (no data read); None when it announces none. Only the head of
        the answer is read: the connection is closed after it, which stops Oxigraph's evaluation. Virtuoso builds such
        an answer whole before it cuts it (seconds): its setting is read from its ini file instead, which its own
        function gives any account."""
        if self.profile.name == "virtuoso":
            found = self.query(_VIRTUOSO_MAX_ROWS)
            assert isinstance(found, Solutions)
            text = value_or_none(next(iter(found.values("n")), None))
            return int(text) if text is not None and text.isdigit() and int(text) > 0 else None
        digits = len(str(max(rows - 1, 1)))
        values = " ".join(str(d) for d in range(10))
        body = " ".join(f"VALUES ?d{k} {{ {values} }}" for k in range(digits))
        request = self._operation("query", f"SELECT * WHERE {{ {body} }}")
        headers = {**request.pop("headers", {}), "Accept": _ACCEPT_RESULTS}
        response = self._send("POST", self.query_url, "query", headers=headers, **request)
        try:
            if response.status_code >= 400:
                raise self._refusal(response, "query")
            cap = response.headers.get(_MAX_ROWS_HEADER, "")
        finally:
            response.close()
        return int(cap) if cap.isdigit() else None

    def named_graphs(self) -> list[str]:
        """Every named graph, without the engine's own (Virtuoso lists graphs only from their triples)."""
        if self.profile.empty_graph_pattern:
            text = "SELECT DISTINCT ?g WHERE { GRAPH ?g {} }"
        else:  # GROUP BY, not DISTINCT: Virtuoso 7.2 takes ~0.1 s per graph for the DISTINCT form, 1,000x this one
            text = "SELECT ?g WHERE { GRAPH ?g { ?s ?p ?o } } GROUP BY ?g"
        solutions = self.query(text)
        assert isinstance(solutions, Solutions)
        graphs = {g.value for g in solutions.values("g") if isinstance(g, ox.NamedNode)}
        return sorted(g for g in graphs if not g.startswith(self.profile.system_graphs or ("\0",)))

    # -- writes ----------------------------------------------------------------------------------------------

    def update(self, sparql: str, *, timeout: float | None = None) -> None:
        """POST a SPARQL Update: one request, which Oxigraph applies in one transaction (see the module
        docstring for Virtuoso). Blank nodes in it are skolemised first where the profile asks. ``timeout``: seconds
        to wait for the answer, instead of the write timeout."""
        sparql = (self.layout or LEGACY_LAYOUT).render(sparql)
        if self.profile.skolemise:
            sparql = skolemise_text(sparql)
        response = self._send("POST", self.update_url, "update", read_timeout=timeout or self._write_timeout,
                              **self._operation("update", sparql))
        if response.status_code >= 400:
            raise self._refusal(response, "update")
        response.read()
        response.close()

    def extend(self, quads: Sequence[ox.Quad]) -> None:
        """Insert quads with ``INSERT DATA``: one request up to :attr:`batch` quads (all or nothing), several above
        (each all or nothing; see the module docstring)."""
        _check_quads(quads)
        if self.profile.skolemise:
            quads = skolemise(quads)
        done = 0
        for part in batches(quads, self.batch):
            try:
                self.update(quads_to_insert_data(part))
            except PcmError as exc:
                if done:
                    raise type(exc)(f"{exc} ({done} of {len(quads)} quads were written before)") from exc
                raise
            done += len(part)

    def bulk_load(self, path: str, fmt: ox.RdfFormat, *, graph: str | None = None) -> None:
        """Load a file: one Graph Store POST on Oxigraph, batches of ``INSERT DATA`` elsewhere (not atomic;
        meant for validated big imports).

        Dataset formats go to their own graphs, triple formats to the default graph, unless ``graph`` is given.
        The read timeout of the one POST grows with the file (a second per MB) because the server answers after
        loading. The batched load streams the file: memory holds one batch, plus the quads with blank nodes.
        """
        if not self.profile.dataset_store:
            target = ox.NamedNode(graph) if graph else None
            chunk: list[ox.Quad] = []
            blank: list[ox.Quad] = []  # sent last, together, so no group of blank nodes is cut between chunks
            for quad in ox.parse(path=path, format=fmt):
                quad = ox.Quad(quad.subject, quad.predicate, quad.object, target) if target else quad
                if isinstance(quad.subject, ox.BlankNode) or isinstance(quad.object, ox.BlankNode):
                    blank.append(quad)
                    continue
                chunk.append(quad)
                if len(chunk) >= self.batch:
                    self.extend(chunk)
                    chunk = []
            self.extend(chunk + blank)
            return
        params = {"graph": graph} if graph else ({} if fmt.supports_datasets else {"default": ""})
        size_mb = os.path.getsize(path) / 1e6
        with open(path, "rb") as body:
            response = self._send(
                "POST",
                self.gsp_url,
                f"load of {path}",
                read_timeout=max(self._write_timeout, size_mb),
                params=params,
                content=body,
                headers={"Content-Type": fmt.media_type},
            )
            if response.status_code >= 400:
                raise self._refusal(response, f"load of {path}")
            response.read()
            response.close()

    # -- reads ----------------------------------------------------------------------------------------------------

    def _get_graph_store(self, fmt: ox.RdfFormat, graph: str | None) -> httpx.Response | None:
        """GET the dataset (``graph`` None, Oxigraph) or one graph; None when that graph does not exist (404)."""
        if graph is None and not fmt.supports_datasets:
            raise UsageError(f"{fmt.name} cannot hold named graphs: name a graph or use N-Quads or TriG")
        params = {"graph": graph} if graph else {}
        response = self._send(
            "GET", self.gsp_url, "graph store read", params=params, headers={"Accept": fmt.media_type}
        )
        if response.status_code == 404 and graph is not None:
            response.close()
            return None
        if response.status_code >= 400:
            raise self._refusal(response, "graph store read")
        return response

    def quads(self, graph: str | None = None) -> Iterator[ox.Quad]:
        """Every quad (of one graph when given), parsed while the answer streams in.

        Oxigraph: one Graph Store GET of the whole dataset (the default graph included). Elsewhere: one read per
        named graph (a Graph Store GET, or a CONSTRUCT without a Graph Store URL); the default graph is left out,
        since on those servers it is the union of the others. Blank-node labels are scoped to one read there, so a
        blank node shared by two graphs comes back as two (pcm writes none such).
        """
        if graph is None and self.profile.dataset_store:
            response = self._get_graph_store(ox.RdfFormat.N_QUADS, None)
            assert response is not None
            quads = self._stream_quads(response, ox.RdfFormat.N_QUADS, None)
            if self.layout is None:
                return quads
            owns = self.layout.owns  # the store may hold other memories: only this one's graphs are its data
            return (q for q in quads if isinstance(q.graph_name, ox.NamedNode) and owns(q.graph_name.value))
        if graph is None and self.profile.count_graphs:
            return self._counted_quads()
        if graph is None:
            return (q for g in self.named_graphs() for q in self._graph_quads(g))
        return self._graph_quads(graph)

    def _counted_quads(self) -> Iterator[ox.Quad]:
        """Every graph's quads, each read checked against the graph's size: Virtuoso cuts a CONSTRUCT or Graph
        Store answer at ``ResultSetMaxRows`` without a word, and an export must not lose data silently."""
        counts = self.query("SELECT ?g (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } } GROUP BY ?g")
        assert isinstance(counts, Solutions)
        for g, n in counts.rows:
            if not isinstance(g, ox.NamedNode) or g.value.startswith(self.profile.system_graphs or ("\0",)):
                continue
            read = 0
            for quad in self._graph_quads(g.value):
                read += 1
                yield quad
            if n is not None and read < int(term_value(n)):
                raise PcmError(
                    f"the SPARQL server sent {read} of the {term_value(n)} triples of graph <{g.value}> "
                    "(Virtuoso: raise ResultSetMaxRows in virtuoso.ini)"
                )

    def _graph_quads(self, graph: str) -> Iterator[ox.Quad]:
        if self.gsp_url:
            response = self._get_graph_store(ox.RdfFormat.N_TRIPLES, graph)
            quads = iter(()) if response is None else self._stream_quads(response, ox.RdfFormat.N_TRIPLES, graph)
        else:
            name = ox.NamedNode(graph)
            found = self.query(f"CONSTRUCT {{ ?s ?p ?o }} WHERE {{ GRAPH {name} {{ ?s ?p ?o }} }}")
            assert isinstance(found, list)
            quads = iter([ox.Quad(t.subject, t.predicate, t.object, name) for t in found])
        quads = deskolemise(quads) if self.profile.skolemise else quads
        return unpad_seconds(quads) if self.profile.pads_seconds else quads

    def _stream_quads(
        self, response: httpx.Response, fmt: ox.RdfFormat, graph: str | None
    ) -> Iterator[ox.Quad]:
        answered = ox.RdfFormat.from_media_type(_media_type(response)) or fmt
        target = ox.NamedNode(graph) if graph else None
        try:
            for quad in ox.parse(_StreamReader(response).binary, answered):
                yield ox.Quad(quad.subject, quad.predicate, quad.object, target) if target else quad
        except (SyntaxError, OSError, httpx.HTTPError) as exc:
            raise PcmError(
                f"unreadable graph store answer from {self.gsp_url}: {_one_line(str(exc))}"
            ) from exc
        finally:
            response.close()

    def dump(self, fmt: ox.RdfFormat, *, graph: str | None = None) -> bytes:
        """The dataset (or one graph) in ``fmt``: from Oxigraph's Graph Store as it serialises it, else from
        :meth:`quads` serialised here."""
        if graph is None and not fmt.supports_datasets:
            raise UsageError(f"{fmt.name} cannot hold named graphs: name a graph or use N-Quads or TriG")
        if not self.profile.dataset_store or graph is None and self.layout is not None:
            quads = list(self.quads(graph))
            if graph is not None:
                return ox.serialize([q.triple for q in quads], format=fmt) or b"" if quads else b""
            return ox.serialize(quads, format=fmt) or b""
        response = self._get_graph_store(fmt, graph)
        if response is None:
            return b""
        try:
            data = response.read()
        except httpx.HTTPError as exc:
            raise PcmError(f"lost the connection to the SPARQL server at {self.gsp_url}: {exc}") from exc
        finally:
            response.close()
        answered = ox.RdfFormat.from_media_type(_media_type(response))
        if answered == fmt:
            return data
        if answered is None:
            raise PcmError(
                f"the graph store at {self.gsp_url} answered {_media_type(response)!r}, not {fmt.media_type}"
            )
        return ox.serialize(ox.parse(data, answered), format=fmt) or b""

    def compact(self) -> int:
        """Refused: the server owns its files, so only it (or whoever runs it) can rewrite them."""
        raise MemoryLockedError(
            f"the store at {self.query_url} is a server's: its files can only be purged where it runs "
            "(for a served memory: stop `pcm serve`, then run `pcm purge`)"
        )

    def checkpoint(self, destination: Path) -> None:
        raise UsageError(f"the store at {self.query_url} is a server's: dump it instead of copying its files")

    def replace_with(self, source: Path) -> int:
        raise UsageError(f"the store at {self.query_url} is a server's: load a dump instead of copying files")

    def close(self) -> None:
        """Close the pooled connections; a second call does nothing (httpx's close is idempotent)."""
        self._client.close()

    def __enter__(self) -> RemoteBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_quads(quads: Iterable[object]) -> None:
    """Refuse what ``INSERT DATA`` cannot carry before anything is sent (so a bad batch writes nothing)."""
    for item in quads:
        if not isinstance(item, ox.Quad):
            raise TypeError(f"extend() takes pyoxigraph Quads, got {type(item).__name__}")
        if isinstance(item.graph_name, ox.BlankNode):
            raise InputError(
                f"a quad in blank-node graph {item.graph_name} cannot be written over SPARQL Update"
            )


def batches(quads: Sequence[ox.Quad], size: int) -> Iterator[list[ox.Quad]]:
    """``quads`` in lists of about ``size``, blank nodes joined by triples in the same list (a label names one node
    within one request only). A group larger than ``size`` goes alone, whole."""
    if len(quads) <= size:
        if quads:
            yield list(quads)
        return
    parent: dict[str, str] = {}

    def root(label: str) -> str:
        while parent.setdefault(label, label) != label:
            parent[label] = parent[parent[label]]
            label = parent[label]
        return label

    for q in quads:
        labels = [t.value for t in (q.subject, q.object) if isinstance(t, ox.BlankNode)]
        for other in labels[1:]:
            parent[root(other)] = root(labels[0])
    groups: dict[str, list[ox.Quad]] = {}
    current: list[ox.Quad] = []
    for q in quads:
        blank = next((t.value for t in (q.subject, q.object) if isinstance(t, ox.BlankNode)), None)
        if blank is None:
            current.append(q)
            if len(current) >= size:
                yield current
                current = []
        else:
            groups.setdefault(root(blank), []).append(q)
    for group in groups.values():
        if current and len(current) + len(group) > size:
            yield current
            current = []
        current.extend(group)
    if current:
        yield current


def skolemise(quads: Sequence[ox.Quad]) -> list[ox.Quad]:
    """Blank nodes replaced by skolem IRIs, one per label within this call (a fresh salt per call, as a fresh
    request would make fresh nodes)."""
    salt = uuid.uuid4().hex

    def term(t: ox.NamedNode | ox.BlankNode | ox.Literal | ox.Triple) -> ox.NamedNode | ox.Literal | ox.Triple:
        if isinstance(t, ox.BlankNode):
            return ox.NamedNode(f"{SKOLEM_PREFIX}{salt}-{t.value}")
        return t

    if not any(isinstance(q.subject, ox.BlankNode) or isinstance(q.object, ox.BlankNode) for q in quads):
        return list(quads)
    return [ox.Quad(term(q.subject), q.predicate, term(q.object), q.graph_name) for q in quads]  # type: ignore[arg-type]  # term() keeps a node a node


def skolemise_text(update: str) -> str:
    """``_:label`` outside strings, IRIs and comments replaced by a skolem IRI (one salt per request)."""
    if "_:" not in update:
        return update
    salt = uuid.uuid4().hex
    labels = [t for t in tokenize(update) if t.kind == "bnode"]
    return apply_edits(update, [(t.start, t.end, f"<{SKOLEM_PREFIX}{salt}-{t.text[2:]}>") for t in labels])


_XSD_DATETIME = ox.NamedNode("http://www.w3.org/2001/XMLSchema#dateTime")
_PADDED_SECONDS = re.compile(r"(T\d\d:\d\d:\d\d)(\.\d*?)0+(?=Z|[+-]\d\d:\d\d|$)")


def unpad_seconds(quads: Iterable[ox.Quad]) -> Iterator[ox.Quad]:
    """``xsd:dateTime`` objects with the trailing zeros of their seconds' fraction dropped (and the point, when
    nothing is left after it): the canonical form, as stored elsewhere, of the value Virtuoso gives back padded."""
    for q in quads:
        o = q.object
        if isinstance(o, ox.Literal) and o.datatype == _XSD_DATETIME and "." in o.value:
            value = _PADDED_SECONDS.sub(lambda m: m.group(1) + (m.group(2) if m.group(2) != "." else ""), o.value)
            if value != o.value:
                q = ox.Quad(q.subject, q.predicate, ox.Literal(value, datatype=_XSD_DATETIME), q.graph_name)
        yield q


def deskolemise(quads: Iterable[ox.Quad]) -> Iterator[ox.Quad]:
    """Skolem IRIs back into blank nodes (the same IRI into the same node within one read)."""
    nodes: dict[str, ox.BlankNode] = {}

    def term(t: object) -> object:
        if isinstance(t, ox.NamedNode) and t.value.startswith(SKOLEM_PREFIX):
            return nodes.setdefault(t.value, ox.BlankNode())
        return t

    for q in quads:
        yield ox.Quad(term(q.subject), q.predicate, term(q.object), q.graph_name)  # type: ignore[arg-type]  # term() keeps a node a node

"""A :class:`pcm.backend.Backend` over HTTP: SPARQL 1.1 Protocol for queries and updates, Graph Store Protocol
for bulk reads and writes.

Written against Oxigraph's server (``oxigraph serve``) and kept to the standard protocols so that other stores
(Fuseki, GraphDB, ...) work too. Two Oxigraph-specific touches, both documented where they happen:

* the default graph of a query is made the union of all graphs with the ``union-default-graph`` URL parameter.
  Other servers ignore or refuse it: pass ``union_default_graph=False`` and configure the union on the server
  (Fuseki: ``tdb2:unionDefaultGraph true``; GraphDB and Stardog: their default already includes named graphs);
* Oxigraph's ``--timeout-s`` cancels a query *after* it answered ``200``: the body then ends with
  "The SPARQL operation has been cancelled" (often mid-document). We detect it and raise :class:`QueryError`.

Results are parsed while they stream in, so ``limit`` and ``timeout`` stop reading early exactly as
:func:`pcm.backend.materialise` does for the embedded store; closing the connection makes Oxigraph stop
evaluating. A query that blocks inside one step (an aggregate over a huge join) sends nothing: the HTTP read
timeout bounds our wait, but only the server's own timeout bounds its work.
"""

from __future__ import annotations

import io
import os
import time
from collections.abc import Iterable, Iterator, Sequence

import httpx
import pyoxigraph as ox

from pcm.backend import QueryResult, materialise, quads_to_insert_data
from pcm.errors import InputError, MemoryLockedError, PcmError, QueryError, UsageError

#: What Oxigraph writes into a response body when its ``--timeout-s`` cancels a running query.
CANCELLED_MARKER = "The SPARQL operation has been cancelled"
_ACCEPT_QUERY = "application/sparql-results+json, application/n-triples"
_TIME_LIMIT = "query stopped: it ran past the time limit"
_NAMED_GRAPHS = "SELECT DISTINCT ?g WHERE { GRAPH ?g {} }"
_MAX_MESSAGE = 300


def _one_line(text: str) -> str:
    """Server messages can span lines (Oxigraph lists expected tokens); our errors are one line."""
    line = " ".join(text.split())
    return line if len(line) <= _MAX_MESSAGE else line[: _MAX_MESSAGE - 3] + "..."


def _media_type(response: httpx.Response) -> str:
    return response.headers.get("content-type", "").split(";")[0].strip().lower()


def derive_urls(query_url: str) -> tuple[str, str, str]:
    """(query, update, GSP) URLs from a query URL, Oxigraph style: ``.../query`` → ``.../update``, ``.../store``.

    A URL not ending in ``/query`` or ``/sparql`` is used for all three (a SPARQL 1.1 service may accept
    queries, updates and graph-store requests at one address, as Fuseki does at its dataset URL).
    """
    url = query_url.rstrip("/")
    for suffix in ("/query", "/sparql"):
        if url.endswith(suffix):
            base = url[: -len(suffix)]
            return url, base + "/update", base + "/store"
    return url, url, url


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

    def readinto(self, target: bytearray | memoryview) -> int:  # type: ignore[override]
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
    """Quads behind a SPARQL 1.1 Protocol + Graph Store Protocol server (one pooled HTTP connection set)."""

    def __init__(
        self,
        query_url: str,
        *,
        update_url: str | None = None,
        gsp_url: str | None = None,
        token: str = "",
        timeout: float = 30.0,
        union_default_graph: bool = True,
    ) -> None:
        derived_query, derived_update, derived_gsp = derive_urls(query_url)
        self.query_url = derived_query
        self.update_url = update_url or derived_update
        self.gsp_url = gsp_url or derived_gsp
        self.union_default_graph = union_default_graph
        self._timeout = timeout
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._client = httpx.Client(headers=headers, timeout=httpx.Timeout(timeout))

    # -- HTTP plumbing -------------------------------------------------------------------------------------

    def _send(
        self, method: str, url: str, what: str, *, read_timeout: float | None = None, **kwargs: object
    ) -> httpx.Response:
        """Send a request and return the (still streaming) response; transport failures become PcmError.

        A query that sends nothing before the read timeout is reported as having run past the time limit.
        """
        read = read_timeout if read_timeout is not None else self._timeout
        timeout = httpx.Timeout(self._timeout, read=read)
        request = self._client.build_request(method, url, timeout=timeout, **kwargs)  # type: ignore[arg-type]
        try:
            return self._client.send(request, stream=True)
        except httpx.ReadTimeout as exc:
            if what == "query":
                raise QueryError(_TIME_LIMIT) from exc
            raise PcmError(f"the SPARQL server at {url} did not answer the {what} within {read:g} s") from exc
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
            return QueryError(f"{_TIME_LIMIT} of the SPARQL server at {response.request.url.host}")
        if status in (401, 403):
            return PcmError(
                f"the SPARQL server at {response.request.url} refused the {what} (HTTP {status}): check the token"
            )
        if status == 400 and what in ("query", "update"):
            kind = "SPARQL syntax error" if what == "query" else "SPARQL Update syntax error"
            return QueryError(f"{kind}: {message or 'HTTP 400'}")
        cls = QueryError if what in ("query", "update") else PcmError
        return cls(
            f"the SPARQL server refused the {what} (HTTP {status}): {message or response.reason_phrase}"
        )

    # -- queries ---------------------------------------------------------------------------------------------

    def query(self, sparql: str, *, timeout: float | None = None, limit: int | None = None) -> QueryResult:
        """Run a read query; the default graph is the union of all graphs (see the module docstring)."""
        deadline = time.monotonic() + timeout if timeout else None
        read_timeout = min(timeout, self._timeout) if timeout else self._timeout
        url = self.query_url
        if self.union_default_graph:
            url += ("&" if "?" in url else "?") + "union-default-graph"
        response = self._send(
            "POST",
            url,
            "query",
            read_timeout=read_timeout,
            content=sparql.encode("utf-8"),
            headers={"Content-Type": "application/sparql-query", "Accept": _ACCEPT_QUERY},
        )
        if response.status_code >= 400:
            raise self._refusal(response, "query")
        try:
            return self._read_result(response, deadline=deadline, limit=limit)
        finally:
            response.close()

    def _read_result(
        self, response: httpx.Response, *, deadline: float | None, limit: int | None
    ) -> QueryResult:
        """Parse a query answer by its Content-Type while it streams, mapping every failure to QueryError."""
        media_type = _media_type(response)
        reader = _StreamReader(response)
        try:
            results_format = ox.QueryResultsFormat.from_media_type(media_type) if media_type else None
            if results_format is not None:
                parsed: object = ox.parse_query_results(reader, results_format)
            else:
                rdf_format = ox.RdfFormat.from_media_type(media_type) if media_type else None
                if rdf_format is None:
                    raise QueryError(
                        f"the SPARQL server answered with an unexpected content type {media_type!r}"
                    )
                parsed = (quad.triple for quad in ox.parse(reader, rdf_format))
            result = materialise(parsed, deadline=deadline, limit=limit)
        except (SyntaxError, ValueError, OSError, httpx.HTTPError) as exc:
            if reader.cancelled:
                raise QueryError(f"{_TIME_LIMIT} of the SPARQL server") from exc
            if isinstance(reader.error, httpx.TimeoutException):
                raise QueryError(_TIME_LIMIT) from exc
            if reader.error is not None:
                raise PcmError(
                    f"lost the connection to the SPARQL server at {self.query_url}: {reader.error}"
                ) from exc
            raise QueryError(f"unreadable answer from the SPARQL server: {_one_line(str(exc))}") from exc
        if reader.cancelled:
            raise QueryError(f"{_TIME_LIMIT} of the SPARQL server")
        return result

    def named_graphs(self) -> list[str]:
        solutions = self.query(_NAMED_GRAPHS)
        assert not isinstance(solutions, bool | list)
        return sorted(g.value for g in solutions.values("g") if isinstance(g, ox.NamedNode))

    # -- writes ----------------------------------------------------------------------------------------------

    def update(self, sparql: str) -> None:
        """POST a SPARQL Update: one request, which Oxigraph applies in one transaction."""
        response = self._send(
            "POST",
            self.update_url,
            "update",
            content=sparql.encode("utf-8"),
            headers={"Content-Type": "application/sparql-update"},
        )
        if response.status_code >= 400:
            raise self._refusal(response, "update")
        response.read()
        response.close()

    def extend(self, quads: Sequence[ox.Quad]) -> None:
        """Insert quads with one ``INSERT DATA`` (one request, so all or nothing)."""
        _check_quads(quads)
        if quads:
            self.update(quads_to_insert_data(quads))

    def bulk_load(self, path: str, fmt: ox.RdfFormat, *, graph: str | None = None) -> None:
        """Stream a file to the Graph Store (not atomic across servers; meant for validated big imports).

        Dataset formats go to the dataset endpoint, triple formats to the default graph, unless ``graph`` is
        given. The read timeout grows with the file (a second per MB) because the server answers after loading.
        """
        params = {"graph": graph} if graph else ({} if fmt.supports_datasets else {"default": ""})
        size_mb = os.path.getsize(path) / 1e6
        with open(path, "rb") as body:
            response = self._send(
                "POST",
                self.gsp_url,
                f"load of {path}",
                read_timeout=max(self._timeout, size_mb),
                params=params,
                content=body,
                headers={"Content-Type": fmt.media_type},
            )
            if response.status_code >= 400:
                raise self._refusal(response, f"load of {path}")
            response.read()
            response.close()

    # -- reads through the Graph Store Protocol -----------------------------------------------------------------

    def _get_graph_store(self, fmt: ox.RdfFormat, graph: str | None) -> httpx.Response | None:
        """GET the dataset (``graph`` None) or one graph; None when that graph does not exist (HTTP 404)."""
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
        """Every quad (of one graph when given), parsed while the GSP answer streams in."""
        fmt = ox.RdfFormat.N_TRIPLES if graph else ox.RdfFormat.N_QUADS
        response = self._get_graph_store(fmt, graph)
        if response is None:
            return iter(())
        return self._stream_quads(response, fmt, graph)

    def _stream_quads(
        self, response: httpx.Response, fmt: ox.RdfFormat, graph: str | None
    ) -> Iterator[ox.Quad]:
        answered = ox.RdfFormat.from_media_type(_media_type(response)) or fmt
        target = ox.NamedNode(graph) if graph else None
        try:
            for quad in ox.parse(_StreamReader(response), answered):
                yield ox.Quad(quad.subject, quad.predicate, quad.object, target) if target else quad
        except (SyntaxError, OSError, httpx.HTTPError) as exc:
            raise PcmError(
                f"unreadable graph store answer from {self.gsp_url}: {_one_line(str(exc))}"
            ) from exc
        finally:
            response.close()

    def dump(self, fmt: ox.RdfFormat, *, graph: str | None = None) -> bytes:
        """The dataset (or one graph) serialised by the server in ``fmt``; re-serialised here if it chose another."""
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

    def close(self) -> None:
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

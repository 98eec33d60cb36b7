"""SPARQL 1.1 Protocol requests as the front reads them, before anything reaches the engine.

The front parses every request itself (GET, form POST, direct POST; one operation; UTF-8 only) so that the
engine only ever sees clean requests, and so that the safety rules apply whatever the client sent: no ``SERVICE``
(federation would let a query reach any URL from the owner's machine), no ``LOAD`` (the same for updates), and the
base IRI is the front's own address, not the engine's hidden port.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode, urljoin

import pyoxigraph as ox

from pcm.sparql.lexer import keywords

QUERY_TYPE = "application/sparql-query"
UPDATE_TYPE = "application/sparql-update"
FORM_TYPE = "application/x-www-form-urlencoded"
QUERY_DATASET = ("default-graph-uri", "named-graph-uri")
UPDATE_DATASET = ("using-graph-uri", "using-named-graph-uri")
#: Oxigraph's flag, accepted for clients written against it (pcm's RemoteBackend sends it); union is the default.
UNION_FLAG = "union-default-graph"
#: What the engine is asked for when the client states no preference: JSON results, Turtle graphs.
DEFAULT_ACCEPT = "application/sparql-results+json, text/turtle;q=0.9"

_FEDERATION = ("SERVICE", "LOAD")
_BROWSER_TYPES = {"*/*", "text/html", "application/xhtml+xml", "application/xml", "image/webp", "image/avif"}


class ProtocolError(Exception):
    """A request the SPARQL Protocol says to refuse; ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str, *, allow: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.allow = allow


@dataclass
class Operation:
    """One query or update, with its protocol dataset parameters."""

    kind: str  # "query" | "update"
    text: str
    dataset: list[tuple[str, str]] = field(default_factory=list)
    union: bool = True
    #: The keywords of the text (:func:`pcm.sparql.lexer.keywords`: never inside strings, IRIs or comments).
    words: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if not self.words:
            self.words = keywords(self.text)

    def engine_target(self, path: str) -> str:
        """Path and query string for the engine: the dataset parameters, plus the union flag when it applies."""
        params = list(self.dataset)
        if self.kind == "query" and self.union and not params and "FROM" not in self.words:
            params.append((UNION_FLAG, ""))
        if not params:
            return path
        return path + "?" + "&".join(f"{k}={_quote(v)}" if v else k for k, v in params)

    def with_base(self, base: str) -> str:
        """The text with the front's address as base IRI (a later ``BASE`` in the text still wins).

        It goes on the first line, so error positions the engine reports keep their line numbers; the columns of
        the first line are put back with :func:`user_positions`.
        """
        return base_prefix(base) + self.text


def store_target(base: str, params: list[tuple[str, str]]) -> str:
    """The Graph Store Protocol path and query string for the engine: a relative ``graph=`` IRI is resolved
    against ``base``, the front's own ``/store`` address (RFC 3986, as the protocol resolves it against the request
    URI), so the engine's hidden port never names a graph nor appears in an error."""
    resolved = [(k, urljoin(base, v) if k == "graph" and v else v) for k, v in params]
    if not resolved:
        return "/store"
    return "/store?" + "&".join(f"{k}={_quote(v)}" if v else k for k, v in resolved)


def base_prefix(base: str) -> str:
    """What :meth:`Operation.with_base` puts before the user's text."""
    return f"BASE <{base}> "


#: A position in an engine error message: ``line:column`` after "at" or in a ``from-to`` range.
_POSITION = re.compile(r"(?<=\bat )(\d+):(\d+)|(?<=-)(\d+):(\d+)")


def user_positions(message: str, shift: int) -> str:
    """The engine's error message with first-line columns moved back by ``shift`` (the prepended ``BASE``), so
    ``SELEKT`` at column 1 of the user's text is reported at 1:1."""

    def fix(match: re.Match[str]) -> str:
        line, column = (match.group(1), match.group(2)) if match.group(1) else (match.group(3), match.group(4))
        if line != "1":
            return match.group(0)
        return f"1:{max(1, int(column) - shift)}"

    return _POSITION.sub(fix, message)


def _quote(value: str) -> str:
    return urlencode({"": value})[1:]


def parse_operation(
    endpoint: str, method: str, url_params: list[tuple[str, str]], content_type: str, body: bytes
) -> Operation | None:
    """Read one operation from a request to ``/query``, ``/update`` or ``/sparql``.

    Returns None for a plain GET (or HEAD) of ``/query`` or ``/sparql`` (the client wants the service description).
    """
    if method not in ("GET", "HEAD", "POST"):
        raise ProtocolError(405, f"{method} is not a SPARQL Protocol method: use GET or POST", allow="GET, HEAD, POST")
    params = list(url_params)
    if method in ("GET", "HEAD"):  # HEAD answers what GET would, without the body
        if _names(params) & {"update"}:
            raise ProtocolError(400, "an update cannot be sent with GET: POST it")
        if "query" not in _names(params):
            if endpoint == "update":
                raise ProtocolError(405, "POST updates to this endpoint", allow="POST")
            return None
        return _finish(endpoint, "query", _one(params, "query"), params)
    media_type, charset = _media_type(content_type)
    if charset and charset not in ("utf-8", "utf8"):
        raise ProtocolError(400, f"only UTF-8 is accepted (the request says charset={charset})")
    if media_type == FORM_TYPE:
        form = _form(body)
        kinds = _names(form) & {"query", "update"}
        if len(kinds) != 1:
            raise ProtocolError(400, "a form must carry exactly one 'query' or one 'update' field")
        kind = kinds.pop()
        return _finish(endpoint, kind, _one(form, kind), params + [p for p in form if p[0] != kind])
    if media_type in (QUERY_TYPE, UPDATE_TYPE):
        kind = "query" if media_type == QUERY_TYPE else "update"
        return _finish(endpoint, kind, _utf8(body), params)
    if not media_type:
        raise ProtocolError(400, f"no Content-Type: send {QUERY_TYPE}, {UPDATE_TYPE} or {FORM_TYPE}")
    raise ProtocolError(415, f"unsupported Content-Type {media_type!r}: send {QUERY_TYPE}, {UPDATE_TYPE} or {FORM_TYPE}")


def _finish(endpoint: str, kind: str, text: str, params: list[tuple[str, str]]) -> Operation:
    if endpoint == "query" and kind == "update":
        raise ProtocolError(400, "this is the query endpoint: send updates to /update")
    if endpoint == "update" and kind == "query":
        raise ProtocolError(400, "this is the update endpoint: send queries to /query")
    allowed = QUERY_DATASET if kind == "query" else UPDATE_DATASET
    other = UPDATE_DATASET if kind == "query" else QUERY_DATASET
    wrong = sorted(_names(params) & set(other))
    if wrong:
        raise ProtocolError(400, f"{wrong[0]} does not apply to a SPARQL {kind}")
    dataset = [(k, v) for k, v in params if k in allowed]
    if not text.strip():
        raise ProtocolError(400, f"the {kind} is empty")
    refuse_federation(text)
    return Operation(kind, text, dataset)


def refuse_federation(text: str) -> None:
    """Refuse ``SERVICE`` and ``LOAD``: either would make the engine fetch any URL on the owner's behalf."""
    words = keywords(text)
    found = [w for w in _FEDERATION if w in words]
    if found:
        word = found[0]
        raise ProtocolError(
            400, f"{word} is refused by this server: it would let a request reach any URL from your memory"
        )


def _names(params: list[tuple[str, str]]) -> set[str]:
    return {k for k, _ in params}


def _one(params: list[tuple[str, str]], name: str) -> str:
    values = [v for k, v in params if k == name]
    if len(values) != 1:
        raise ProtocolError(400, f"exactly one '{name}' parameter is allowed, {len(values)} were sent")
    return values[0]


def _utf8(body: bytes) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError(400, f"the body is not UTF-8 (byte {exc.start})") from exc


def _form(body: bytes) -> list[tuple[str, str]]:
    try:
        return parse_qsl(_utf8(body), keep_blank_values=True, strict_parsing=False, errors="strict")
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(400, f"malformed form body: {exc}") from exc


def _media_type(content_type: str) -> tuple[str, str]:
    """(media type, charset) in lower case; empty strings when absent."""
    parts = [p.strip() for p in content_type.split(";")]
    charset = ""
    for part in parts[1:]:
        key, _, value = part.partition("=")
        if key.strip().lower() == "charset":
            charset = value.strip().strip('"').lower()
    return parts[0].lower(), charset


def engine_accept(accept: str) -> str:
    """The Accept header to forward: the client's, unless it states no real preference (absent, ``*/*``, a
    browser's HTML list), in which case JSON results and Turtle graphs."""
    types = {p.split(";")[0].strip().lower() for p in accept.split(",") if p.strip()}
    if not types or types <= _BROWSER_TYPES:
        return DEFAULT_ACCEPT
    return accept


# -- service description ----------------------------------------------------------------------------------------

SD = "http://www.w3.org/ns/sparql-service-description#"
FORMATS = "http://www.w3.org/ns/formats/"
_RESULT_FORMATS = (
    "SPARQL_Results_JSON",
    "SPARQL_Results_XML",
    "SPARQL_Results_CSV",
    "SPARQL_Results_TSV",
    "Turtle",
    "N-Triples",
    "JSON-LD",
    "RDF_XML",
)
_DESCRIPTION_FORMATS = (
    ("text/turtle", ox.RdfFormat.TURTLE),
    ("application/n-triples", ox.RdfFormat.N_TRIPLES),
    ("application/ld+json", ox.RdfFormat.JSON_LD),
    ("application/rdf+xml", ox.RdfFormat.RDF_XML),
)


def service_description(endpoint: str, *, writable: bool, accept: str) -> tuple[str, bytes]:
    """(content type, body) of the SPARQL service description of ``endpoint``, in the format the client prefers."""
    n = ox.NamedNode
    service = n(endpoint + "#service")
    a = n("http://www.w3.org/1999/02/22-rdf-syntax-ns#type")
    triples = [
        ox.Triple(service, a, n(SD + "Service")),
        ox.Triple(service, n(SD + "endpoint"), n(endpoint)),
        ox.Triple(service, n(SD + "supportedLanguage"), n(SD + "SPARQL11Query")),
        ox.Triple(service, n(SD + "feature"), n(SD + "UnionDefaultGraph")),
        ox.Triple(
            service,
            n("http://purl.org/dc/terms/description"),
            ox.Literal(
                "pcm personal memory: the default graph is the union of all graphs; SERVICE and LOAD are refused"
                + ("; updates need the owner's bearer token" if writable else "; read-only")
            ),
        ),
    ]
    if writable:
        triples.append(ox.Triple(service, n(SD + "supportedLanguage"), n(SD + "SPARQL11Update")))
    triples += [ox.Triple(service, n(SD + "resultFormat"), n(FORMATS + f)) for f in _RESULT_FORMATS]
    media_type, fmt = negotiate(accept, _DESCRIPTION_FORMATS)
    prefixes = {"sd": SD, "formats": FORMATS} if fmt in (ox.RdfFormat.TURTLE, ox.RdfFormat.RDF_XML) else None
    body = ox.serialize(triples, format=fmt, prefixes=prefixes) if prefixes else ox.serialize(triples, format=fmt)
    return media_type, body or b""


def negotiate(accept: str, offers: tuple[tuple[str, ox.RdfFormat], ...]) -> tuple[str, ox.RdfFormat]:
    """The offer with the highest q in ``accept`` (first offer on ties or when nothing matches)."""
    best: tuple[float, int] = (-1.0, 0)
    for part in accept.split(","):
        media, *attrs = [s.strip() for s in part.split(";")]
        q = 1.0
        for attr in attrs:
            key, _, value = attr.partition("=")
            if key.strip() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        for index, (offer, _fmt) in enumerate(offers):
            if q > best[0] and q > 0 and _matches(media.lower(), offer):
                best = (q, index)
    return offers[best[1]]


def _matches(pattern: str, offer: str) -> bool:
    if pattern in ("*/*", offer):
        return True
    return pattern.endswith("/*") and offer.startswith(pattern[:-1])

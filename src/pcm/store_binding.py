"""Which store a memory lives in: the SPARQL server its ``memory.toml`` records, or its own embedded store.

A memory made on a server records the server's URL and engine in ``memory.toml`` (never a credential: a user and
password or a token stay in ``PCM_STORE_USER``, ``PCM_STORE_PASSWORD``, ``PCM_STORE_TOKEN``), so every command
reaches that server without ``PCM_STORE_URL`` and none makes an embedded store beside it. ``PCM_STORE_URL`` given
anyway must name that server, and is refused for an embedded memory: either way a command would read and write a
store that does not hold the memory, showing it empty without a word.

The URL is not sealed (:data:`pcm.manifest.SEALED`): it says where the data is, not what the data is, so a memory
whose server moved is pointed at the new address by editing ``store_url``. An open checks that the server holds
the memory (:func:`check_holds`) before trusting the address. A memory made on a server before pcm recorded it has
the ``memory-id`` layout (or no embedded store at all): ``PCM_STORE_URL`` set once is recorded by its next writable
open (:func:`record`).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from pcm.backend import Backend
from pcm.errors import MemoryNotFoundError, UsageError
from pcm.layout import BY_ID
from pcm.manifest import Manifest
from pcm.naming import Naming
from pcm.settings import Settings

#: ``store_engine`` of a memory moved into its embedded store: with its graph names kept, a memory made on a server
#: (the ``memory-id`` layout) is embedded too, which its layout alone no longer says.
EMBEDDED = "embedded"
#: The embedded store's directory inside a memory.
STORE_DIR = "oxigraph"
#: What an embedded store leaves in the memory's directory, itself or a purge's copies of it (pcm.backend_local).
_LOCAL_STORE_NAMES = (STORE_DIR, STORE_DIR + ".compact", STORE_DIR + ".retired")
#: Endpoint paths that name the same server as its root (Oxigraph's query URL, Virtuoso's two SPARQL URLs).
_ENDPOINT_SUFFIXES = ("/query", "/sparql-auth", "/sparql")
_DEFAULT_PORTS = {"http": 80, "https": 443}
_MEMORY_OWNER = "https://w3id.org/pcm/ontology#MemoryOwner"


def without_credentials(url: str) -> str:
    """``url`` without a user or password in it (what ``memory.toml`` and error messages may show)."""
    url = url.strip()
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=host))


def same_store(a: str, b: str) -> bool:
    """Whether two URLs name one store: credentials, case, a default port, a trailing slash and the engine's query
    path (``/query``, ``/sparql``) aside, so the root a server prints and its query URL agree."""
    return _identity(a) == _identity(b)


def _identity(url: str) -> tuple[str, str, int | None, str, str]:
    parts = urlsplit(without_credentials(url))
    scheme = parts.scheme.lower()
    try:
        port = parts.port or _DEFAULT_PORTS.get(scheme)
    except ValueError as exc:
        raise UsageError(f"{without_credentials(url)!r} is not a URL: its port is not a number") from exc
    path = parts.path.rstrip("/")
    for suffix in _ENDPOINT_SUFFIXES:
        if path.endswith(suffix):
            path = path[: -len(suffix)]
            break
    return scheme, (parts.hostname or "").lower(), port, path, parts.query


def has_local_store(directory: Path) -> bool:
    """Whether the memory at ``directory`` has an embedded store (or a purge's copy of one) beside its manifest."""
    return any((directory / name).exists() for name in _LOCAL_STORE_NAMES)


def bind(settings: Settings, manifest: Manifest) -> Settings:
    """``settings`` pointed at the store the memory lives in, or a one-line :class:`UsageError` when the
    environment names another (exit 2).

    A recorded server is used whether or not ``PCM_STORE_URL`` is set (set, it must name the same server: its
    credentials, if any, are kept); its engine and endpoint URLs fill the settings left unset. Without a record, a
    URL is taken for a memory made on a server before pcm recorded it (the ``memory-id`` layout, or no embedded
    store), and refused for an embedded one.
    """
    where = settings.memory
    given, recorded = settings.store_url, manifest.store_url
    if recorded:
        if given and not same_store(given, recorded):
            raise UsageError(
                f"PCM_STORE_URL={without_credentials(given)} is not the server memory {where} lives in ({recorded}, "
                "recorded in its memory.toml): unset PCM_STORE_URL (if the server moved, change store_url there)"
            )
        engine = settings.store_engine
        if manifest.store_engine and engine not in ("auto", manifest.store_engine):
            raise UsageError(
                f"PCM_STORE_ENGINE={engine} is not the engine memory {where} was made on ({manifest.store_engine}, "
                "recorded in its memory.toml): unset PCM_STORE_ENGINE"
            )
        return settings.with_(
            store_url=given or recorded,
            store_engine=manifest.store_engine or engine,
            store_update_url=settings.store_update_url or manifest.store_update_url,
            store_gsp_url=settings.store_gsp_url or manifest.store_gsp_url,
        )
    if manifest.store_engine == EMBEDDED:  # moved into its own store (`pcm store move embedded`), whatever its layout
        if given:
            raise UsageError(
                f"memory {where} is embedded (its store is {where / STORE_DIR}), but PCM_STORE_URL="
                f"{without_credentials(given)} names a SPARQL server: unset PCM_STORE_URL for this memory"
            )
        return settings
    if not given:
        if manifest.layout == BY_ID:
            raise UsageError(
                f"memory {where} was made on a SPARQL server that its memory.toml (written by an older pcm) does not "
                "name: set PCM_STORE_URL to that server once, and a writable open records it"
            )
        return settings
    if manifest.layout == BY_ID or not has_local_store(where):
        return settings  # made on a server before pcm recorded it: taken, and recorded once the server holds it
    raise UsageError(
        f"memory {where} is embedded (its store is {where / STORE_DIR}), but PCM_STORE_URL="
        f"{without_credentials(given)} names a SPARQL server: unset PCM_STORE_URL for this memory"
    )


def record(manifest: Manifest, settings: Settings, engine: str) -> None:
    """Write into ``manifest`` the server ``settings`` reach and its ``engine`` profile, without credentials (the
    caller saves it)."""
    manifest.store_url = without_credentials(settings.store_url)
    manifest.store_engine = engine
    manifest.store_update_url = without_credentials(settings.store_update_url)
    manifest.store_gsp_url = without_credentials(settings.store_gsp_url)


def check_holds(backend: Backend, naming: Naming, settings: Settings, manifest: Manifest) -> None:
    """Refuse a server that does not hold the memory (its owner is not in the memory's graphs): ``store_url`` was
    pointed at another server, or the memory's graphs were dropped there. Exit 6, as for a missing memory."""
    found = backend.query(f"ASK {{ GRAPH ?g {{ <{naming.owner}> a <{_MEMORY_OWNER}> }} }}")
    if found is not True:
        raise MemoryNotFoundError(
            f"the SPARQL server at {without_credentials(settings.store_url)} does not hold memory {settings.memory} "
            f"(id {manifest.memory_id}: no owner in its graphs there): check store_url in its memory.toml, or "
            "PCM_STORE_URL"
        )

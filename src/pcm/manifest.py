"""``memory.toml``: who the memory belongs to and what wrote it (docs/DESIGN.md §1).

It is read before anything else is opened, so a memory written by a newer pcm, or indexed with another
embedding model, is refused before a single byte of it is touched.
"""

from __future__ import annotations

import hashlib
import tomllib
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, tzinfo
from pathlib import Path

import tomli_w

from pcm.errors import InputError, MemoryNotFoundError, MemoryVersionError
from pcm.layout import LAYOUTS, LEGACY
from pcm.version import SCHEMA_VERSION, __version__

MANIFEST = "memory.toml"
DEFAULT_EMBEDDING_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_EMBEDDING_DIM = 384
#: Fields pcm alone writes: they say what the store and the index hold, so a value edited by hand would make pcm
#: trust something the data is not. Each is sealed with a digest of the value pcm wrote.
SEALED = ("memory_id", "namespace", "embedding_model", "embedding_dim", "ontology_version", "schema_version", "layout")
#: Fields that say which SPARQL server holds the memory (none for an embedded memory): see :mod:`pcm.store_binding`.
STORE_FIELDS = ("store_url", "store_engine", "store_update_url", "store_gsp_url")


@dataclass
class Manifest:
    owner: str
    memory_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    namespace: str = ""
    embedding_model: str = DEFAULT_EMBEDDING_MODEL
    embedding_dim: int = DEFAULT_EMBEDDING_DIM
    ontology_version: str = ""
    ontology_digest: str = ""
    """Content digest of the ontology the data was written against (:attr:`pcm.ontology.Ontology.digest`), so an
    ontology changed without a version bump is noticed too. Empty in memories written before it was recorded."""
    schema_version: int = SCHEMA_VERSION
    created: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    pcm_version: str = __version__
    layout: str = LEGACY
    """How the store names this memory's graphs (:mod:`pcm.layout`): ``fixed`` (every embedded memory, and any made
    before this was recorded) or ``memory-id`` (a memory made on a SPARQL server, which other memories may share)."""
    store_url: str = ""
    """The SPARQL server the memory lives in (:mod:`pcm.store_binding`), without credentials; empty for an embedded
    memory (and any made before pcm recorded it). Not sealed: it says where the data is, not what it is, so a
    memory whose server moved is pointed at its new address here (an open checks the server holds the memory)."""
    store_engine: str = ""
    """That server's engine profile (:data:`pcm.backend_remote.PROFILES`), as detected or given when it was made."""
    store_update_url: str = ""
    store_gsp_url: str = ""
    """Its update and Graph Store URLs, when they were given rather than derived from ``store_url``."""
    zone: str = "UTC"
    """The zone a time given without one is read in (an IANA name such as ``Europe/Paris``, or ``UTC``), chosen at
    init. Not sealed: it says how to read times still to come, not what is stored (stored times carry their own)."""
    seal: dict[str, str] = field(default_factory=dict)
    """Digest of each :data:`SEALED` field as pcm last wrote it (empty in memories made before the seal)."""

    def __post_init__(self) -> None:
        if not self.namespace:
            # `.invalid` is reserved (RFC 2606): these IRIs name things in one person's memory and never resolve.
            self.namespace = f"https://pcm.invalid/m/{self.memory_id}/"

    @classmethod
    def load(cls, directory: Path) -> Manifest:
        path = directory / MANIFEST
        if not path.is_file():
            raise MemoryNotFoundError(f"no memory at {directory} (missing {MANIFEST}); create one with `pcm init`")
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise InputError(f"{path} is corrupt: {exc}") from exc
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(data) - known
        version = data.get("schema_version")
        if not isinstance(version, int):
            raise InputError(f"{path} has no valid schema_version")
        if version > SCHEMA_VERSION:
            raise MemoryVersionError(
                f"memory {directory} has schema version {version}, newer than this pcm ({SCHEMA_VERSION}); upgrade pcm"
            )
        if "owner" not in data:
            raise InputError(f"{path} has no owner")
        manifest = cls(**{k: v for k, v in data.items() if k not in unknown})
        wrong = [name for name in STORE_FIELDS if not isinstance(getattr(manifest, name), str)]
        if wrong:
            raise InputError(f"{path}: {wrong[0]} must be a string (a URL, or the engine's name)")
        if manifest.layout not in LAYOUTS:
            raise InputError(f"{path}: unknown layout {manifest.layout!r} (expected one of {', '.join(LAYOUTS)})")
        try:
            zone_of(manifest.zone)
        except InputError as exc:
            raise InputError(f"{path}: {exc}") from None
        manifest._check_seal(path)
        return manifest

    def _check_seal(self, path: Path) -> None:
        """Refuse a sealed field whose value is not the one pcm wrote (exit 5, like any version mismatch)."""
        if not isinstance(self.seal, dict):
            raise MemoryVersionError(f"{path}: 'seal' was changed outside pcm; restore the file pcm wrote")
        edited = [name for name in SEALED if name in self.seal and self.seal[name] != _digest(getattr(self, name))]
        if edited:
            shown = ", ".join(f"{name} (now {getattr(self, name)!r})" for name in edited)
            raise MemoryVersionError(
                f"{path}: {shown} changed outside pcm; pcm records these itself to say what the store and the index "
                "hold, so it will not open the memory on a value it did not write: restore the value pcm wrote"
            )

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.seal = {name: _digest(getattr(self, name)) for name in SEALED}
        tmp = directory / (MANIFEST + ".tmp")
        # an embedded memory's file carries no empty store fields (it reads the same as one written before them)
        data = {k: v for k, v in asdict(self).items() if v or k not in STORE_FIELDS}
        tmp.write_text(tomli_w.dumps(data), encoding="utf-8")
        tmp.replace(directory / MANIFEST)


def zone_of(name: object) -> tzinfo:
    """The zone named ``name`` (an IANA name or ``UTC``), or one InputError line."""
    if name == "UTC":
        return UTC
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(str(name)) if isinstance(name, str) and name else _no_zone(name)
    except (ZoneInfoNotFoundError, ValueError):
        return _no_zone(name)


def _no_zone(name: object) -> tzinfo:
    raise InputError(f"zone {name!r} is not a time zone: give an IANA name such as Europe/Paris, or UTC")


def _digest(value: object) -> str:
    return hashlib.sha256(f"{type(value).__name__}:{value}".encode()).hexdigest()[:16]

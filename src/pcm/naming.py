"""IRIs for the individuals, posts, sessions and graphs of one memory (docs/DESIGN.md §2–3).

Post and session IRIs are derived from the source's own ids, so importing the same conversation twice lands on
the same IRIs and adds nothing. Individuals get a readable slug; the owner and the assistant have fixed IRIs.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass, field

from pcm.layout import LEGACY_LAYOUT, DatasetLayout

_SLUG_STRIP = re.compile(r"[^a-z0-9]+")
# Characters that may not appear inside an IRIREF in SPARQL/Turtle.
_IRI_FORBIDDEN = re.compile(r'[\x00-\x20<>"{}|^`\\]')


def slugify(text: str, *, max_length: int = 48) -> str:
    """ASCII lowercase slug: "Dr. Müller's Clinic" → "dr-muller-s-clinic"."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    slug = _SLUG_STRIP.sub("-", ascii_text.lower()).strip("-")
    return slug[:max_length].rstrip("-") or "x"


def digest(*parts: str, length: int = 16) -> str:
    h = hashlib.sha1("\x1f".join(parts).encode("utf-8"))
    return h.hexdigest()[:length]


def check_iri(iri: str) -> str:
    """Refuse text that would break out of ``<...>`` when written into SPARQL or Turtle."""
    if not iri or _IRI_FORBIDDEN.search(iri) or ":" not in iri:
        raise ValueError(f"not a usable IRI: {iri!r}")
    return iri


@dataclass(frozen=True)
class Naming:
    """IRI minting for one memory, whose individuals live under ``namespace`` and whose graphs ``layout`` names."""

    namespace: str
    layout: DatasetLayout = field(default=LEGACY_LAYOUT)

    @property
    def owner(self) -> str:
        return f"{self.namespace}owner"

    @property
    def assistant(self) -> str:
        return f"{self.namespace}assistant"

    def session(self, session_id: str) -> str:
        return f"{self.namespace}session/{slugify(session_id, max_length=32)}-{digest(session_id, length=8)}"

    def post_key(self, session_id: str, source_id: str | None, position: int) -> str:
        return digest(session_id, source_id if source_id is not None else f"#{position}")

    def post(self, key: str) -> str:
        return f"{self.namespace}post/{key}"

    def extraction_graph(self, post_iri: str) -> str:
        return self.layout.extraction(post_iri.rsplit("/", 1)[-1])

    def post_of_graph(self, graph_iri: str) -> str | None:
        prefix = self.layout.extraction_prefix
        if not graph_iri.startswith(prefix):
            return None
        return self.post(graph_iri[len(prefix) :])

    def import_graph(self, content_digest: str) -> str:
        return self.layout.import_graph(content_digest)

    def activity(self, kind: str, key: str) -> str:
        return f"{self.namespace}activity/{kind}/{key}"

    def person(self, name: str) -> str:
        """A person known only by a speaker name (e.g. LoCoMo's second speaker)."""
        return f"{self.namespace}{slugify(name)}"

    def entity(self, label: str, taken: set[str] | None = None) -> str:
        """A new individual from its label, with a short disambiguator when the slug is taken."""
        base = f"{self.namespace}{slugify(label)}"
        if not taken or base not in taken:
            return base
        n = 2
        while f"{base}-{n}" in taken:
            n += 1
        return f"{base}-{n}"

    def is_individual(self, iri: str) -> bool:
        return iri.startswith(self.namespace)

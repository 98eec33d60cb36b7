"""pcm: a personal conversational memory on RDF.

Every remembered fact is typed by the PCM ontology, validated with SHACL, stored in Oxigraph and traceable
through PROV-O to the utterance it came from.

``from pcm import Memory`` is the Python API (see :class:`pcm.memory.Memory`). It is imported on first use, so
``import pcm`` (and every ``pcm`` command, which imports this package first) stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pcm.memory import Memory, RememberReport

from pcm.version import SCHEMA_VERSION, __version__

__all__ = ["SCHEMA_VERSION", "Memory", "RememberReport", "__version__"]


def __getattr__(name: str) -> Any:
    if name in ("Memory", "RememberReport"):
        from pcm import memory

        return getattr(memory, name)
    raise AttributeError(f"module 'pcm' has no attribute {name!r}")

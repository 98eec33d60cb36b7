"""The LanceDB side index: episodic recall over utterances and entity-to-vertex matching (issue 4).

Importing this package is cheap: LanceDB is imported with :class:`SideIndex`, torch and sentence-transformers only
when something is embedded. It defers LanceDB's REST namespace client (:mod:`pcm.index.deferred`) before any
module of pcm imports LanceDB.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pcm.index.deferred import defer_namespace_client
from pcm.index.embedder import MODEL_DIM, MODEL_NAME, Embedder, get_embedder
from pcm.index.records import EntityMatch, EntityRecord, PostRecord

if TYPE_CHECKING:
    from pcm.index.sideindex import SideIndex
    from pcm.models import RecallHit

defer_namespace_client()

__all__ = [
    "MODEL_DIM",
    "MODEL_NAME",
    "Embedder",
    "EntityMatch",
    "EntityRecord",
    "PostRecord",
    "RecallHit",
    "SideIndex",
    "get_embedder",
]


def __getattr__(name: str) -> Any:
    if name == "SideIndex":
        from pcm.index.sideindex import SideIndex

        return SideIndex
    if name == "RecallHit":  # the faces' record (pydantic), imported when asked for
        from pcm.models import RecallHit

        return RecallHit
    raise AttributeError(f"module 'pcm.index' has no attribute {name!r}")

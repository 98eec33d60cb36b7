"""Where a session summary lives: ``<session> pcm:summary "..."`` in the conversation graph, and one
``pcm:SummaryActivity`` per session in the provenance graph naming every post it covers (``prov:used``), their
count, the method (``pcm:model``: a model name or ``extractive``), the prompt version and the time.

One activity per session, rewritten with its summary in one atomic update, so "which posts does this summary
cover" is one query and a summary never claims a post it was not made from (a forget re-summarises or drops it).

The reads of a session's turns and the cached sentence vectors live here too: the summariser and ask's summary
matching (:mod:`pcm.retrieval.summaries`) share them, and ask reads summaries without importing the summariser.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import numpy as np
import pyoxigraph as ox

from pcm.backend import datetime_or_none
from pcm.namespaces import PCM, PROV, RDF
from pcm.provenance import dt_literal, int_literal
from pcm.resources import render_query
from pcm.sparql import iri_term, values_clause
from pcm.summaries.text import Turn

if TYPE_CHECKING:
    from pcm.context import MemoryContext

EXTRACTIVE = "extractive"
#: Text vectors kept per memory (sentences of extractive summaries, summaries matched to questions).
_VECTOR_CACHE = 50_000
N = ox.NamedNode


@dataclass(frozen=True)
class StoredSummary:
    """A session's summary as stored: what it says, how it was made, and the posts it covers."""

    session: str
    text: str
    method: str
    prompt_version: str
    covered: frozenset[str] = field(default_factory=frozenset)
    time: datetime | None = None

    def as_json(self) -> dict[str, object]:
        return {
            "session": self.session,
            "summary": self.text,
            "method": self.method,
            "prompt_version": self.prompt_version or None,
            "covered_posts": len(self.covered),
            "time": self.time.isoformat() if self.time else None,
        }


def activity_iri(memory: MemoryContext, session: str) -> str:
    """The summary activity of a session: fixed per session, so a rewrite replaces it."""
    return memory.naming.activity("summary", session.rsplit("/", 1)[-1])


def read_summary(memory: MemoryContext, session: str) -> StoredSummary | None:
    """The stored summary of a thread IRI (None when it has none)."""
    activity = activity_iri(memory, session)
    rows = memory.store.select(
        render_query("summaries/state", session=iri_term(session), activity=iri_term(activity))
    ).dicts()
    if not rows:
        return None
    row = rows[0]
    covered = frozenset(
        t.value for t in memory.store.select(render_query("summaries/covered", activity=iri_term(activity))).values("post")
        if t is not None
    )
    time = datetime.fromisoformat(row["time"].value) if "time" in row else None
    return StoredSummary(
        session, row["summary"].value, row["method"].value if "method" in row else "",
        row["prompt"].value if "prompt" in row else "", covered, time,
    )


def write_summary(
    memory: MemoryContext, session: str, text: str, covered: Sequence[str], *, method: str, prompt_version: str = "",
    when: datetime | None = None,
) -> StoredSummary:
    """Replace a session's summary and its activity in one update."""
    activity = activity_iri(memory, session)
    when = when or datetime.now(UTC)
    s, act = N(session), N(activity)
    g_conv, g_prov = N(memory.naming.layout.conversation), N(memory.naming.layout.provenance)
    posts = sorted(set(covered))
    quads = [
        ox.Quad(s, N(PCM + "summary"), ox.Literal(text), g_conv),
        ox.Quad(act, N(RDF + "type"), N(PCM + "SummaryActivity"), g_prov),
        ox.Quad(act, N(PCM + "summarises"), s, g_prov),
        ox.Quad(act, N(PCM + "model"), ox.Literal(method), g_prov),
        ox.Quad(act, N(PCM + "coveredPosts"), int_literal(len(posts)), g_prov),
        ox.Quad(act, N(PROV + "startedAtTime"), dt_literal(when), g_prov),
    ]
    if prompt_version:
        quads.append(ox.Quad(act, N(PCM + "promptVersion"), ox.Literal(prompt_version), g_prov))
    quads += [ox.Quad(act, N(PROV + "used"), N(p), g_prov) for p in posts]
    memory.store.apply(extra=[_clear(session, activity)], insert=quads, mirrored=False)
    return StoredSummary(session, text, method, prompt_version, frozenset(posts), when)


def drop_summary(memory: MemoryContext, session: str) -> None:
    """Remove a session's summary and its activity (the session itself stays)."""
    memory.backend.update(clear_update(memory, session))


def clear_update(memory: MemoryContext, session: str) -> str:
    """The update removing a session's summary and its activity (to run alone or inside a larger update)."""
    return _clear(session, activity_iri(memory, session))


def _clear(session: str, activity: str) -> str:
    return render_query("summaries/clear.ru", session=iri_term(session), activity=iri_term(activity))


def summaries_using(memory: MemoryContext, posts: Sequence[str]) -> list[str]:
    """Sessions whose summary covers any of these posts."""
    return _sessions_by_posts(memory, "summaries/using_posts", posts)


def sessions_of_posts(memory: MemoryContext, posts: Sequence[str]) -> list[str]:
    """The threads holding these posts (the sessions an ingest touched)."""
    return _sessions_by_posts(memory, "summaries/sessions_of", posts)


def _sessions_by_posts(memory: MemoryContext, query: str, posts: Sequence[str]) -> list[str]:
    """The ``?session`` values of ``query`` run with a VALUES clause on ``?post``, 400 posts a request."""
    sessions: set[str] = set()
    chosen = list(dict.fromkeys(posts))
    for start in range(0, len(chosen), 400):
        q = render_query(query, posts=values_clause("post", chosen[start : start + 400]))
        sessions.update(t.value for t in memory.store.select(q).values("session") if t is not None)
    return sorted(sessions)


@dataclass(frozen=True)
class SummaryRow:
    """One line of ``pcm summary --all``."""

    session: str
    session_id: str | None
    title: str | None
    started: str | None
    text: str
    method: str
    covered: int

    def as_json(self) -> dict[str, object]:
        return dict(self.__dict__)


def all_summaries(memory: MemoryContext) -> list[SummaryRow]:
    """Every summarised session, oldest first."""
    rows = []
    for r in memory.store.select(render_query("summaries/all")).dicts():
        rows.append(SummaryRow(
            r["session"].value, r["id"].value if "id" in r else None, r["title"].value if "title" in r else None,
            r["started"].value if "started" in r else None, r["summary"].value,
            r["method"].value if "method" in r else "", int(r["covered"].value) if "covered" in r else 0,
        ))
    return rows


def session_range(memory: MemoryContext, session: str) -> tuple[str | None, str | None, int]:
    """First and last message time of a session, and its post count."""
    rows = memory.store.select(render_query("summaries/range", session=iri_term(session))).dicts()
    if not rows:
        return None, None, 0
    row = rows[0]
    return (
        row["first"].value if "first" in row else None,
        row["last"].value if "last" in row else None,
        int(row["posts"].value) if "posts" in row else 0,
    )


def covered_range(memory: MemoryContext, session: str) -> tuple[str | None, str | None]:
    """First and last message time of the posts a session's summary covers."""
    q = render_query("summaries/covered_range", activity=iri_term(activity_iri(memory, session)))
    rows = memory.store.select(q).dicts()
    row = rows[0] if rows else {}
    return (row["first"].value if "first" in row else None, row["last"].value if "last" in row else None)


# -------------------------------------------------------------------- reads the summariser and ask share
def session_turns(memory: MemoryContext, session: str) -> list[Turn]:
    """A session's posts in order, with who spoke each and when."""
    turns = []
    for row in memory.store.select(render_query("summaries/session_turns", session=iri_term(session))).dicts():
        speaker = row["speaker"].value if "speaker" in row else row["role"].value
        turns.append(
            Turn(row["post"].value, int(row["position"].value), row["text"].value, speaker, datetime_or_none(row.get("time")))
        )
    return turns


def cached_vectors(memory: MemoryContext, texts: Sequence[str]) -> np.ndarray:
    """MiniLM vectors of ``texts``, one row each, kept on the memory's context (``_VECTOR_CACHE`` entries at most).

    Re-summarising a growing session embeds only its new sentences, and matching questions to the same summaries
    embeds each summary once. The model runs outside the lock, so concurrent callers do not wait on each other.
    """
    from pcm.index import get_embedder

    kept = memory.text_vectors
    with memory.lock:
        known = {t: kept[t] for t in texts if t in kept}
    missing = [t for t in dict.fromkeys(texts) if t not in known]
    if missing:
        fresh = dict(zip(missing, get_embedder().encode(missing), strict=True))
        known.update(fresh)
        with memory.lock:
            if len(kept) + len(fresh) > _VECTOR_CACHE:
                kept.clear()
            kept.update(fresh)
    return np.stack([known[t] for t in texts])

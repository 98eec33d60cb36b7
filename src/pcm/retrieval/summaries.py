"""Summaries as retrieval context: the sessions whose summary best matches a question.

Used by ``ask`` for questions about conversations themselves ("what did we talk about in May?") and as evidence
next to facts. Matching is MiniLM cosine when the side index is on (summary vectors are kept per process, keyed by
the summary text, so a changed summary is embedded again) and TF-IDF cosine over the summaries otherwise.

:func:`summary_posts` turns the match into a ranked list of posts for the retrieval benchmark: episodic recall's
hits, re-ranked by reciprocal-rank fusion with the rank of their session's summary, and complemented by the best
posts of each matched session that recall alone missed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from pcm.models import Message as Said
from pcm.retrieval.answer import posts_of
from pcm.summaries.store import SummaryRow, all_summaries, cached_vectors, session_range, session_turns
from pcm.summaries.text import tfidf_vectors

if TYPE_CHECKING:
    from pcm.context import MemoryContext

#: Representative posts given with each summary.
POSTS_PER_SUMMARY = 3
#: Reciprocal-rank constant of the fusion in :func:`summary_posts` (as in the side index).
RRF_C = 60.0
#: Weight of the session's summary rank against the post's recall rank. Small on purpose: on LoCoMo conv-26 a
#: weight of 1 drops R@10 from 0.71 to 0.41 (a matched session's weak posts outrank strong hits elsewhere); 0.03
#: reorders only near-ties (0.71 to 0.72, one question either way). See benchmarks/bench_events_summaries.py.
SESSION_WEIGHT = 0.03
#: Matched sessions whose posts join the ranking in :func:`summary_posts`.
SESSIONS = 3


@dataclass(frozen=True)
class SessionMatch:
    row: SummaryRow
    score: float


def match_sessions(memory: MemoryContext, question: str, k: int = 3) -> list[SessionMatch]:
    """The ``k`` summarised sessions whose summary is closest to the question, best first."""
    rows = all_summaries(memory)
    if not rows or k <= 0 or not question.strip():
        return []
    texts = [_summary_document(r) for r in rows]
    if memory.settings.index_enabled:
        matrix = cached_vectors(memory, texts)
        from pcm.index import get_embedder

        query = get_embedder().encode([question])[0]
    else:
        matrix = tfidf_vectors(texts, vocabulary_from=texts)
        query = tfidf_vectors([question], vocabulary_from=texts)[0]
        matrix = matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-9)
        query = query / max(float(np.linalg.norm(query)), 1e-9)
    scores = matrix @ query
    order = sorted(range(len(rows)), key=lambda i: (-float(scores[i]), rows[i].session))
    return [SessionMatch(rows[i], float(scores[i])) for i in order[:k] if float(scores[i]) > 0]


def summary_context(memory: MemoryContext, question: str, k: int = 3) -> list[tuple[str, list[Said]]]:
    """The best matching sessions' summaries as context lines, each with a few representative posts."""
    context = []
    for match in match_sessions(memory, question, k):
        row = match.row
        first, last, count = session_range(memory, row.session)
        when = _span(first, last)
        head = f"Session {row.session_id or row.session}" + (f" ({when}, {count} turns)" if when else f" ({count} turns)")
        line = f"{head}, summary: " + " ".join(row.text.split())
        posts = posts_of(memory, _representative(memory, row, question))
        context.append((line, posts))
    return context


def summary_posts(
    memory: MemoryContext, question: str, k: int = 10, *, depth: int | None = None, weight: float = SESSION_WEIGHT,
    sessions: int = SESSIONS,
) -> list[str]:
    """Post IRIs for ``question``: recall hits re-ranked and complemented by the summary-matched sessions.

    Needs the side index (the posts are ranked by episodic recall); without it the matched sessions'
    representative posts are returned in session order.
    """
    matches = match_sessions(memory, question, sessions)
    if not memory.settings.index_enabled:
        return [p for m in matches for p in _representative(memory, m.row, question)][:k]
    hits = memory.recall(question, depth or max(4 * k, 40))
    session_rank = {m.row.session_id: rank for rank, m in enumerate(matches) if m.row.session_id}
    scores = {hit.post: 1.0 / (RRF_C + rank) for rank, hit in enumerate(hits)}
    session_of = {hit.post: hit.session for hit in hits}
    for session_id in session_rank:
        for rank, hit in enumerate(memory.recall(question, POSTS_PER_SUMMARY, session=session_id)):
            scores.setdefault(hit.post, 1.0 / (RRF_C + len(hits) + rank))  # complement: below every recall hit
            session_of[hit.post] = session_id
    for post in scores:
        session_at = session_rank.get(session_of.get(post, ""))
        if session_at is not None:
            scores[post] += weight / (RRF_C + session_at)
    return [p for p, _ in sorted(scores.items(), key=lambda item: (-item[1], item[0]))][:k]


def _representative(memory: MemoryContext, row: SummaryRow, question: str) -> list[str]:
    """A few posts of the session: those best matching the question (index on), else those the summary quotes."""
    if memory.settings.index_enabled and row.session_id:
        return [h.post for h in memory.recall(question, POSTS_PER_SUMMARY, session=row.session_id)]
    turns = session_turns(memory, row.session)
    quoted = [t.post for t in turns if any(_quotes(line, t.text) for line in row.text.splitlines())]
    return (quoted or [t.post for t in turns])[:POSTS_PER_SUMMARY]


def _quotes(line: str, text: str) -> bool:
    said = line.split(": ", 1)[-1].rstrip("…").strip()
    return bool(said) and said in " ".join(text.split())


def _summary_document(row: SummaryRow) -> str:
    return " ".join(x for x in (row.title, row.text) if x)


def _span(first: str | None, last: str | None) -> str:
    if not first:
        return ""
    a, b = first[:10], (last or first)[:10]
    return a if a == b else f"{a} to {b}"

"""Session summaries, updated as turns arrive (after Memoria's session-level summaries).

With a language model: the previous summary plus the turns it does not cover yet go to ``summary.v1.md``; the
reply replaces the summary, and the covered posts grow by exactly the turns sent. Long backlogs go in batches of
``LLM_BATCH`` turns, so a prompt stays bounded and each batch is one incremental update.

Without one: the session's most central sentences (:mod:`pcm.summaries.text`), recomputed over the whole session
when it has posts the summary does not cover (centrality is a property of the whole session, and it is cheap).

Either way a session whose summary already covers every post is left alone, and a summary made by another method
than the one asked for is redone from the session's first turn rather than extended.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from pcm.errors import LLMError
from pcm.llm.base import LLMClient, Message, Request
from pcm.prompts import PromptFile, load
from pcm.summaries.store import (
    EXTRACTIVE,
    StoredSummary,
    cached_vectors,
    clear_update,
    drop_summary,
    read_summary,
    session_turns,
    sessions_of_posts,
    summaries_using,
    write_summary,
)
from pcm.summaries.text import Encoder, Turn, central_sentences, sentences, summary_text

if TYPE_CHECKING:
    from pcm.context import MemoryContext

PROMPT_FILE = "summaries/summary.v1.md"
OPERATION = "summary"
#: Turns sent to the model in one incremental update.
LLM_BATCH = 40
#: Length asked of a model-written summary.
MAX_WORDS = 150
#: Characters of one turn sent to the model.
MAX_TURN_CHARS = 1500


@dataclass
class SummaryReport:
    """What one :func:`update_summaries` run did."""

    sessions: int = 0
    updated: int = 0
    unchanged: int = 0
    dropped: int = 0
    llm_calls: int = 0
    fallbacks: int = 0
    """Sessions summarised extractively because the model failed."""
    method: str = EXTRACTIVE
    summaries: list[StoredSummary] = field(default_factory=list)

    def as_json(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if k != "summaries"}


def update_summaries(
    memory: MemoryContext, sessions: Sequence[str], client: LLMClient | None = None, *, refresh: bool = False
) -> SummaryReport:
    """Bring the summaries of these sessions (thread IRIs) up to date with their posts.

    ``refresh`` redoes a summary from the first turn even when it covers everything already.
    """
    method = client.name if client is not None else EXTRACTIVE
    report = SummaryReport(method=method)
    for session in dict.fromkeys(sessions):
        report.sessions += 1
        turns = session_turns(memory, session)
        if not turns:  # a forgotten session: its thread (and pcm:summary) may be gone, its activity is not
            drop_summary(memory, session)
            report.dropped += 1
            continue
        stored = read_summary(memory, session)
        if stored is not None and stored.method != method:
            stored = None  # another method's summary is not extended, it is replaced
        if refresh:
            stored = None
        covered = stored.covered if stored is not None else frozenset()
        new = [t for t in turns if t.post not in covered]
        if not new and stored is not None and covered <= {t.post for t in turns}:
            report.unchanged += 1
            report.summaries.append(stored)
            continue
        if client is None:
            written = _extractive(memory, session, turns)
        else:
            try:
                written, calls = _with_model(memory, session, stored, turns, new, client)
                report.llm_calls += calls
            except LLMError:  # a summary is a convenience: a failing model must not fail the ingest
                report.fallbacks += 1
                written = _extractive(memory, session, turns)
        report.updated += 1
        report.summaries.append(written)
    return report


def summarise_posts(memory: MemoryContext, posts: Sequence[str], client: LLMClient | None = None) -> SummaryReport:
    """Update the summaries of the sessions these (newly written) posts belong to: the ingest hook (with the
    memory's model when one is configured, extractive otherwise)."""
    return update_summaries(memory, sessions_of_posts(memory, posts), client)


def summary_clearing(memory: MemoryContext, posts: Sequence[str]) -> tuple[list[str], list[str]]:
    """The sessions whose summary covers any of ``posts``, and the updates dropping those summaries (for the
    forget's own atomic update: a summary never outlives a post it repeats)."""
    sessions = summaries_using(memory, posts)
    return sessions, [clear_update(memory, session) for session in sessions]


def after_forget(memory: MemoryContext, sessions: Sequence[str]) -> SummaryReport:
    """Rebuild (extractively) the summaries a forget dropped, for the sessions that still have posts; with
    summaries off they stay dropped."""
    if not memory.settings.summaries_enabled:
        return SummaryReport(sessions=len(sessions), dropped=len(sessions))
    return update_summaries(memory, sessions, None, refresh=True)


def _extractive(memory: MemoryContext, session: str, turns: Sequence[Turn]) -> StoredSummary:
    chosen = central_sentences(sentences(turns), _encoder(memory))
    return write_summary(memory, session, summary_text(chosen), [t.post for t in turns], method=EXTRACTIVE)


def _encoder(memory: MemoryContext) -> Encoder | None:
    """MiniLM when the side index is on (its model is the one already loaded), else None (TF-IDF, no torch)."""
    return partial(cached_vectors, memory) if memory.settings.index_enabled else None


def _with_model(
    memory: MemoryContext, session: str, stored: StoredSummary | None, turns: Sequence[Turn], new: Sequence[Turn],
    client: LLMClient,
) -> tuple[StoredSummary, int]:
    """Fold the uncovered turns into the summary, one batch per call; the covered set grows batch by batch.

    A summary that covers a post no longer in the session (forgotten) cannot be trusted to have dropped what that
    post said, so it is started over from the session's first turn.
    """
    present = {t.post for t in turns}
    if stored is not None and not stored.covered <= present:
        stored, new = None, list(turns)
    previous = stored.text if stored is not None else ""
    covered = set(stored.covered) if stored is not None else set()
    prompt = _prompt()
    written = stored
    calls = 0
    for start in range(0, len(new), LLM_BATCH):
        batch = new[start : start + LLM_BATCH]
        system = prompt.render("system", max_words=str(MAX_WORDS))
        user = prompt.render(
            "user", session=session, previous=previous or "(none yet)", turns=_turn_lines(batch),
        )
        reply = client.complete(Request(system=system, messages=[Message.user(user)], operation=OPERATION, max_tokens=600))
        calls += 1
        previous = " ".join(reply.text.split()) or previous
        covered.update(t.post for t in batch)
        written = write_summary(
            memory, session, previous, sorted(covered), method=client.name, prompt_version=prompt.ref
        )
    assert written is not None
    return written, calls


def _turn_lines(turns: Sequence[Turn]) -> str:
    lines = []
    for t in turns:
        text = t.text if len(t.text) <= MAX_TURN_CHARS else t.text[:MAX_TURN_CHARS] + "…"
        when = f" ({t.time.isoformat()})" if t.time is not None else ""
        lines.append(f"[{t.position}] {t.speaker}{when}: {text}")
    return "\n".join(lines)


def _prompt() -> PromptFile:
    return load(PROMPT_FILE)

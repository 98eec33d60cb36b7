"""Session summaries (issue 10 part 1): one per ``sioc:Thread``, with provenance to every post it covers.

    update_summaries(memory, [thread_iri], client)   # incremental: previous summary + uncovered turns
    summary_context(memory, "what did we talk about in May?")   # best matching sessions' summaries for ask
"""

from __future__ import annotations

from pcm.summaries.store import StoredSummary, all_summaries, read_summary
from pcm.summaries.summarise import (
    SummaryReport,
    after_forget,
    summarise_posts,
    summary_clearing,
    update_summaries,
)

__all__ = [
    "StoredSummary",
    "SummaryReport",
    "after_forget",
    "all_summaries",
    "read_summary",
    "summarise_posts",
    "summary_clearing",
    "update_summaries",
]

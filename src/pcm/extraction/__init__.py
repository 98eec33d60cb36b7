"""LLM extraction: utterance → PCM Turtle, checked and repaired, with entity reuse and knowledge updates.

Entry point: :func:`extract_posts` (what ``Memory.ingest`` and ``pcm extract`` call). The pieces, in the order an
utterance meets them: :mod:`~pcm.extraction.context` (previous turns, known entities, message time),
:mod:`~pcm.extraction.prompts` (versioned prompt files, generated catalogue), :mod:`~pcm.extraction.extractor`
(model call and repair loop), :mod:`~pcm.extraction.normalise` (from model text to triples),
:mod:`~pcm.extraction.resolve` (merges), :mod:`~pcm.extraction.supersede` (knowledge updates),
:mod:`~pcm.extraction.write` (the one atomic write), :mod:`~pcm.extraction.pipeline` (concurrency, resumability,
run report). :mod:`~pcm.extraction.history` and :mod:`~pcm.extraction.duplicates` back ``pcm history`` and
``pcm duplicates``; :func:`restore_after_forget` undoes the knowledge updates of forgotten posts.
"""

from pcm.extraction.duplicates import DuplicatePair, find_duplicates
from pcm.extraction.extractor import Extraction, Extractor
from pcm.extraction.history import FactHistory, FactVersion, fact_history, restore_after_forget
from pcm.extraction.pipeline import ExtractionRunReport, extract_posts, select_posts
from pcm.extraction.prompts import prompt_version, refresh_catalogue

__all__ = [
    "DuplicatePair",
    "Extraction",
    "ExtractionRunReport",
    "Extractor",
    "FactHistory",
    "FactVersion",
    "extract_posts",
    "fact_history",
    "find_duplicates",
    "prompt_version",
    "refresh_catalogue",
    "restore_after_forget",
    "select_posts",
]

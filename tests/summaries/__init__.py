"""Tests of ``pcm.summaries``."""

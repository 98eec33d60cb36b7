"""Tests of ``pcm.retrieval``."""

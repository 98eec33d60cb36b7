"""Tests of ``pcm.retrieval.traversal``."""

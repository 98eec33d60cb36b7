"""Tests of ``pcm.index``."""

"""Tests of ``pcm.extraction``."""

"""Tests of ``pcm.evaluation``."""

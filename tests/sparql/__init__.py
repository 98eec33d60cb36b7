"""Tests of ``pcm.sparql``."""

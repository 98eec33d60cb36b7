"""Tests of ``pcm.endpoint``."""

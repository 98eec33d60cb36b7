"""Tests of ``pcm.llm``."""

"""Tests of ``pcm.prompts``."""

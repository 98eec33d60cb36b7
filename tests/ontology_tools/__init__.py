"""Tests of ``pcm.ontology_tools``."""

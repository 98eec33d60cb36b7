"""The SPARQL that extraction runs, as files beside it (``*.rq`` / ``*.ru``), rendered like ``pcm.resources``.

They live here rather than in the top-level ``queries/`` only because that folder is shared; the lead may move them.
Values are spliced in already rendered (``pcm.sparql.iri_term`` / ``literal_term`` / ``values_clause``).
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

_DIR = Path(__file__).resolve().parent


@cache
def _text(name: str) -> str:
    filename = name if "." in name else f"{name}.rq"
    return (_DIR / filename).read_text(encoding="utf-8")


def render(name: str, **terms: str) -> str:
    """Fill ``{{name}}`` placeholders; a missing value raises (it is a programming error, not a user's)."""
    text = _text(name)
    for key, value in terms.items():
        text = text.replace("{{" + key + "}}", value)
    missing = sorted(set(re.findall(r"\{\{(\w+)\}\}", text)))
    if missing:
        raise KeyError(f"query {name} needs values for {missing}")
    return text

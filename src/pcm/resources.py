"""Where the ontology, shapes, queries and samples live, installed or in a checkout.

In a wheel they are force-included under ``pcm/_data``; in an editable install or a checkout they sit at the
repository's top level. Callers never build these paths themselves.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


@cache
def data_dir(name: str) -> Path:
    """Directory of one shipped resource tree: ``pcm_ontology``, ``shapes`` or ``queries``."""
    installed = _PACKAGE_DIR / "_data" / name
    if installed.is_dir():
        return installed
    checkout = _PACKAGE_DIR.parent.parent / name
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(f"pcm resource directory {name!r} is missing from this installation")


def ontology_dir() -> Path:
    return data_dir("pcm_ontology")


def shapes_dir() -> Path:
    return data_dir("shapes")


def queries_dir() -> Path:
    return data_dir("queries")


def samples_dir() -> Path:
    """Sample conversations written for this project (shipped inside the package)."""
    return _PACKAGE_DIR / "samples"


@cache
def query_text(name: str) -> str:
    """Text of ``queries/<name>`` (``.rq`` unless another suffix is given).

    The SPARQL we write ourselves lives there, not in Python strings.
    """
    filename = name if "." in name else f"{name}.rq"
    return (queries_dir() / filename).read_text(encoding="utf-8")


def render_query(name: str, **terms: str) -> str:
    """Fill ``{{name}}`` placeholders with already-rendered SPARQL terms (see :func:`pcm.sparql.iri_term`)."""
    text = query_text(name)
    for key, value in terms.items():
        text = text.replace("{{" + key + "}}", value)
    missing = sorted(set(re.findall(r"\{\{(\w+)\}\}", text)))  # graph placeholders are the layout's to fill
    if missing:
        raise KeyError(f"query {name} needs values for {missing}")
    return text

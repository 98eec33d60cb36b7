"""The lifetime memory of the scale benchmarks (``benchmarks/make_lifetime.py``) has the shape extraction gives a
memory: an individual's card is written once (``pcm.extraction.cards``), and every post still derives each entity
its facts name. A card restated in every graph multiplied the rows of each query over the union default graph by
the mentions (a friend's purchases at one shop: 13,333 rows for 4 answers at 1M posts)."""

from __future__ import annotations

import importlib
import re
from collections import Counter
from pathlib import Path
from types import ModuleType

import pyoxigraph as ox
import pytest

from pcm.extraction.cards import CARD_PREDICATES
from pcm.namespaces import PROV
from pcm.naming import Naming

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
NAMESPACE = "https://pcm.invalid/m/lifetime-test/"
INDIVIDUAL = re.compile(re.escape(NAMESPACE) + r"(friend|item|store|buy|city|trip|pet|event)-\d+")


@pytest.fixture(scope="module")
def quads() -> list[ox.Quad]:
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(BENCHMARKS))
        make_lifetime: ModuleType = importlib.import_module("make_lifetime")
        return [q for chunk in make_lifetime.generate(Naming(NAMESPACE), 3000, 5) for q in chunk]


def test_each_card_is_written_once(quads: list[ox.Quad]) -> None:
    cards = Counter(
        (q.subject, q.predicate, q.object)
        for q in quads
        if INDIVIDUAL.fullmatch(q.subject.value) and q.predicate.value in CARD_PREDICATES
    )
    assert cards, "the generator wrote no cards"
    assert max(cards.values()) == 1
    # and the friends do come up again: their later acts name them without their card
    agents = Counter(q.object.value for q in quads if q.predicate.value == "https://schema.org/agent")
    assert max(agents.values()) > 1


def test_every_post_derives_the_entities_it_names(quads: list[ox.Quad]) -> None:
    derived = {(q.subject.value, q.object.value) for q in quads if q.predicate.value == PROV + "wasDerivedFrom"}
    naming = Naming(NAMESPACE)
    named: dict[str, set[str]] = {}
    for q in quads:
        if not isinstance(q.graph_name, ox.NamedNode):
            continue
        post = naming.post_of_graph(q.graph_name.value)
        if post is None:
            continue
        for term in (q.subject, q.object):
            if isinstance(term, ox.NamedNode) and INDIVIDUAL.fullmatch(term.value):
                named.setdefault(post, set()).add(term.value)
    assert named, "the generator wrote no extraction graphs"
    missing = [(entity, post) for post, entities in named.items() for entity in entities if (entity, post) not in derived]
    assert not missing[:5]

"""Grounding's reads of the graph: what a question's entities are called and what they are."""

from __future__ import annotations

from pathlib import Path

import pyoxigraph as ox

from pcm.memory import Memory
from pcm.namespaces import RDF, RDFS, SCHEMA
from pcm.resources import render_query
from pcm.retrieval.grounding import entity_types
from pcm.settings import Settings
from pcm.sparql import values_clause

FOAF_PERSON = "http://xmlns.com/foaf/0.1/Person"


def test_an_entity_stated_in_many_graphs_is_read_once_per_label_and_per_type(tmp_path: Path) -> None:
    """A friend named in every extraction graph that mentions them: over the union of the graphs each statement is
    read once per graph, and the query must not multiply them (60 graphs gave 60 x 60 x 2 rows before)."""
    with Memory.init(Settings(memory=tmp_path / "m", index_enabled=False), owner="Robin") as memory:
        friend = ox.NamedNode(memory.naming.namespace + "friend-1")
        quads = []
        for i in range(60):
            graph = ox.NamedNode(memory.naming.import_graph(f"{i:016x}"))
            quads += [
                ox.Quad(friend, ox.NamedNode(RDF + "type"), ox.NamedNode(SCHEMA + "Person"), graph),
                ox.Quad(friend, ox.NamedNode(RDF + "type"), ox.NamedNode(FOAF_PERSON), graph),
                ox.Quad(friend, ox.NamedNode(RDFS + "label"), ox.Literal("Alex Nguyen"), graph),
            ]
        memory.store.write(quads)
        query = render_query("ask/entity_types", entities=values_clause("e", [friend.value]))
        assert len(memory.store.select(query).rows) == 3
        assert entity_types(memory.context, [friend.value, memory.naming.namespace + "nobody"]) == {
            friend.value: ("Alex Nguyen", tuple(sorted((FOAF_PERSON, SCHEMA + "Person")))),
        }

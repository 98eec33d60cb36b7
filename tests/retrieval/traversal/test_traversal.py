"""Traversal retrieval (WaterCircles, BeamSearch, A*, mixtures) on small graphs whose right answers are known.

Every test runs twice: on the embedded store and on a real ``oxigraph serve`` over HTTP (the same SPARQL). Texts
are embedded by a bag-of-words hashing embedder, so similarity is word overlap and the best beam is known in
advance; the real model is exercised by the CLI tests and the benchmark.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pyoxigraph as ox
import pytest

from pcm.backend import Backend
from pcm.backend_local import LocalBackend
from pcm.backend_remote import RemoteBackend
from pcm.errors import UsageError
from pcm.layout import LEGACY_LAYOUT
from pcm.namespaces import DCTERMS, PCM, PROV, RDF, RDFS, SCHEMA, SIOC
from pcm.naming import Naming
from pcm.ontology import load_ontology
from pcm.retrieval.traversal import (
    AStarConfig,
    BeamSearchConfig,
    Kind,
    Restrictions,
    TraversalConfig,
    TraversalEngine,
    WaterCirclesConfig,
    mentions,
    parse_algorithm,
)
from pcm.retrieval.traversal.model import predicate_words
from pcm.retrieval.traversal.vectors import TextVectors
from tests.oxigraph_server import start_oxigraph

NS = "https://pcm.invalid/m/traversal-test/"
NAMING = Naming(NS)
N = ox.NamedNode
A = N(RDF + "type")
LABEL = N(RDFS + "label")


def m(local: str) -> ox.NamedNode:
    return N(NS + local)


def s(local: str) -> ox.NamedNode:
    return N(SCHEMA + local)


OWNER = N(NAMING.owner)
BIKE, SHOP, BUY, PORTLAND = m("trek-bike"), m("city-bikes"), m("buying-the-bike"), m("portland")
ROSEWOOD, REPAIR, CAR = m("rosewood-auto-repair"), m("repairing-the-subaru"), m("subaru-outback")
TREK, FACTORY, REGION, SEATTLE = m("trek"), m("trek-factory"), m("pacific-northwest"), m("seattle")
# a separate component for BeamSearch: S branches to A (words of the question) and Z (unrelated words)
B_START, B_A1, B_A2, B_Z1, B_Z2, B_DEAD = (m(x) for x in ("b-start", "b-a1", "b-a2", "b-z1", "b-z2", "b-dead"))
RELATED = s("relatedTo")


class WordEmbedder:
    """Bag-of-words hashing: cosine is word overlap. Deterministic, instant, and good enough to know the answer."""

    name = "test/bag-of-words"
    dim = 512

    def __init__(self) -> None:
        self.calls = 0
        self.texts = 0

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        self.texts += len(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row, 0] = 0.05  # every text has a little of everything: no zero vectors
            for word in re.findall(r"[a-z0-9]+", text.lower()):
                out[row, 1 + int(hashlib.md5(word.encode()).hexdigest(), 16) % (self.dim - 1)] += 1.0
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def post(key: str, text: str, facts: list[tuple[ox.NamedNode, ox.NamedNode, ox.NamedNode | ox.Literal]]) -> list[ox.Quad]:
    """One utterance as pcm writes it: the post, its extraction graph (with entity derivations), its provenance."""
    iri = N(NAMING.post(key))
    graph = N(NAMING.extraction_graph(iri.value))
    conv, prov = N(LEGACY_LAYOUT.conversation), N(LEGACY_LAYOUT.provenance)
    thread = N(NAMING.session("s1"))
    quads = [
        ox.Quad(iri, A, N(SIOC + "Post"), conv),
        ox.Quad(iri, N(SIOC + "content"), ox.Literal(text), conv),
        ox.Quad(iri, N(SIOC + "has_container"), thread, conv),
        ox.Quad(iri, N(PROV + "wasAttributedTo"), OWNER, conv),
        ox.Quad(iri, N(DCTERMS + "identifier"), ox.Literal(key), conv),
        ox.Quad(thread, N(DCTERMS + "identifier"), ox.Literal("s1"), conv),
        ox.Quad(graph, N(PROV + "wasDerivedFrom"), iri, prov),
    ]
    quads += [ox.Quad(a, b, c, graph) for a, b, c in facts]
    subjects = {a for a, _, _ in facts if a != OWNER}
    quads += [ox.Quad(x, N(PROV + "wasDerivedFrom"), iri, graph) for x in sorted(subjects, key=lambda n: n.value)]
    return quads


def graph_quads() -> list[ox.Quad]:
    quads = [
        ox.Quad(OWNER, A, s("Person"), N(LEGACY_LAYOUT.conversation)),
        ox.Quad(OWNER, LABEL, ox.Literal("Dana"), N(LEGACY_LAYOUT.conversation)),
    ]
    quads += post("p1", "I bought a Trek bike at City Bikes for 600 dollars.", [
        (BUY, A, s("BuyAction")), (BUY, LABEL, ox.Literal("buying the Trek bike")),
        (BUY, s("agent"), OWNER), (BUY, s("object"), BIKE), (BUY, s("seller"), SHOP),
        (BUY, s("price"), ox.Literal("600")),
        (BIKE, A, N(PCM + "Bicycle")), (BIKE, LABEL, ox.Literal("Trek bike")),
        (SHOP, A, s("Store")), (SHOP, LABEL, ox.Literal("City Bikes")),
    ])
    quads += post("p2", "City Bikes is in Portland.", [
        (SHOP, s("containedInPlace"), PORTLAND), (PORTLAND, A, s("City")), (PORTLAND, LABEL, ox.Literal("Portland")),
    ])
    quads += post("p3", "Rosewood Auto Repair in Portland fixed my Subaru for 712 dollars.", [
        (REPAIR, A, N(PCM + "RepairAction")), (REPAIR, LABEL, ox.Literal("repairing the Subaru")),
        (REPAIR, s("agent"), OWNER), (REPAIR, s("object"), CAR), (REPAIR, s("provider"), ROSEWOOD),
        (REPAIR, s("price"), ox.Literal("712")),
        (CAR, A, s("Car")), (CAR, LABEL, ox.Literal("Subaru Outback")),
        (ROSEWOOD, A, s("AutoRepair")), (ROSEWOOD, LABEL, ox.Literal("Rosewood Auto Repair")),
        (ROSEWOOD, s("containedInPlace"), PORTLAND),
    ])
    # a five-hop detour from the bike to Rosewood: bike - Trek - factory - region - Portland - Rosewood
    quads += post("p4", "Trek bikes are made in the Trek factory in the Pacific Northwest, like Portland.", [
        (BIKE, s("brand"), TREK), (TREK, A, s("Organization")), (TREK, LABEL, ox.Literal("Trek")),
        (TREK, s("location"), FACTORY), (FACTORY, A, s("Place")), (FACTORY, LABEL, ox.Literal("Trek factory")),
        (FACTORY, s("containedInPlace"), REGION), (REGION, A, s("Place")),
        (REGION, LABEL, ox.Literal("Pacific Northwest")), (PORTLAND, s("containedInPlace"), REGION),
    ])
    # what is no longer true, and what is not a fact at all, must never be walked
    quads += [
        ox.Quad(ROSEWOOD, s("containedInPlace"), SEATTLE, N(LEGACY_LAYOUT.history)),
        ox.Quad(SEATTLE, LABEL, ox.Literal("Seattle"), N(LEGACY_LAYOUT.history)),
        ox.Quad(BIKE, s("relatedTo"), SEATTLE, N(LEGACY_LAYOUT.provenance)),
    ]
    imported = N(NAMING.import_graph("beam-test"))  # imported facts: walked like extracted ones, no posts
    quads += [ox.Quad(a, b, c, imported) for a, b, c in (
        (B_START, LABEL, ox.Literal("origin")), (B_A1, LABEL, ox.Literal("alpha")),
        (B_A2, LABEL, ox.Literal("beta gamma")), (B_Z1, LABEL, ox.Literal("zulu")),
        (B_Z2, LABEL, ox.Literal("yankee")), (B_DEAD, LABEL, ox.Literal("delta")),
        (B_START, RELATED, B_A1), (B_A1, RELATED, B_A2), (B_START, RELATED, B_Z1), (B_Z1, RELATED, B_Z2),
        (B_START, RELATED, B_DEAD),
    )]
    return quads


@pytest.fixture(scope="module", params=["local", "remote"])
def backend(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    data = load_ontology().quads() + graph_quads()
    if request.param == "local":
        local = LocalBackend(tmp_path_factory.mktemp("store") / "oxigraph")
        local.extend(data)
        yield local
        local.close()
        return
    with start_oxigraph(None) as url:
        remote = RemoteBackend(url + "/query")
        remote.extend(data)
        yield remote
        remote.close()


@pytest.fixture
def engine(backend: Backend) -> TraversalEngine:
    return TraversalEngine(
        backend, post_prefix=NAMING.post(""), hubs=(NAMING.owner, NAMING.assistant), embedder=WordEmbedder()
    )


def run(engine: TraversalEngine, starts: Sequence[ox.NamedNode], algorithm: str, question: str = "", **kw: object):  # type: ignore[no-untyped-def]
    config = TraversalConfig(top_n=None, **kw)  # type: ignore[arg-type]
    return engine.retrieve(question, starts, algorithm, config=config)


def keys(result) -> set[tuple[str, str, str]]:  # type: ignore[no-untyped-def]
    return {(f.triple.s.value, f.triple.p.value, f.triple.o.value) for f in result.found}


def no_episodic(**kw: object) -> dict[str, object]:
    return {"restrictions": Restrictions(forbid=frozenset({Kind.EPISODIC})), **kw}


BIKE_TO_ROSEWOOD = {
    (BUY.value, SCHEMA + "object", BIKE.value),
    (BUY.value, SCHEMA + "seller", SHOP.value),
    (SHOP.value, SCHEMA + "containedInPlace", PORTLAND.value),
    (ROSEWOOD.value, SCHEMA + "containedInPlace", PORTLAND.value),
}


# ---------------------------------------------------------------------------------------------- WaterCircles
def test_circles_meet_and_the_chain_joining_the_starts_is_primary(engine: TraversalEngine) -> None:
    result = run(engine, [BIKE, ROSEWOOD], "wc", **no_episodic())
    primary = {(f.triple.s.value, f.triple.p.value, f.triple.o.value) for f in result.found if f.role == "primary"}
    assert primary == BIKE_TO_ROSEWOOD
    chain = next(p for p in result.paths if p.goal == ROSEWOOD)
    assert chain.vertices == [BIKE, BUY, SHOP, PORTLAND, ROSEWOOD]
    roles = [f.role for f in result.found]
    assert roles[: len(primary)] == ["primary"] * len(primary)  # primary first, then fragments, then secondary


def test_circles_do_not_meet_through_the_owner_unless_hubs_may_be_crossed(engine: TraversalEngine) -> None:
    blocked = run(engine, [BIKE, ROSEWOOD], "wc", **no_episodic())
    assert not any(OWNER in (f.triple.s, f.triple.o) for f in blocked.found if f.role == "primary")
    assert all(OWNER not in p.vertices[1:-1] for p in blocked.paths)
    crossed = run(engine, [BIKE, ROSEWOOD], "wc", restrictions=Restrictions(frozenset({Kind.EPISODIC}), cross_hubs=True))
    assert any(OWNER in p.vertices for p in crossed.paths if p.goal is not None)


def test_circles_respect_their_depth(engine: TraversalEngine) -> None:
    result = run(engine, [BIKE, ROSEWOOD], "wc", wc=WaterCirclesConfig(max_depth=1), **no_episodic())
    assert not any(f.role == "primary" for f in result.found)
    assert any("did not meet" in n for n in result.notes)


def test_thesis_fragments_touching_more_question_entities_come_first(engine: TraversalEngine) -> None:
    result = run(engine, [BIKE, SHOP], "wc", **no_episodic())
    fragments = [f for f in result.found if f.role == "thesis"]
    assert fragments, "the purchase is a thesis vertex crossed from both starts"
    assert fragments[0].triple.s == BUY  # touches both the bike and the shop
    assert (BUY.value, SCHEMA + "price", "600") in keys(result)  # the fragment carries its attributes


def test_forbidding_thesis_vertices_keeps_walks_off_events_and_actions(engine: TraversalEngine) -> None:
    result = run(engine, [BIKE, ROSEWOOD], "wc", restrictions=Restrictions(frozenset({Kind.THESIS, Kind.EPISODIC})))
    vertices = {v for p in result.paths for v in p.vertices}
    assert BUY not in vertices and REPAIR not in vertices
    assert all(f.triple.s not in (BUY, REPAIR) for f in result.found)


def test_episodic_vertices_are_crossed_through_posts_and_can_be_forbidden(engine: TraversalEngine) -> None:
    with_posts = run(engine, [BIKE], "wc", wc=WaterCirclesConfig(max_depth=1))
    assert any(f.role == "episodic" for f in with_posts.found)
    assert any(f.triple.p.value == PROV + "wasDerivedFrom" for f in with_posts.found)
    without = run(engine, [BIKE], "wc", wc=WaterCirclesConfig(max_depth=1), **no_episodic())
    assert not any(f.triple.p.value == PROV + "wasDerivedFrom" for f in without.found)
    assert not any(v.value.startswith(NAMING.post("")) for p in without.paths for v in p.vertices)


def test_history_provenance_and_ontology_are_never_walked(engine: TraversalEngine) -> None:
    result = run(engine, [ROSEWOOD, BIKE], "all", question="where is it", wc=WaterCirclesConfig(max_depth=3))
    seen = {t for f in result.found for t in (f.triple.s, f.triple.o)}
    assert SEATTLE not in seen  # only the history graph (and the provenance graph) connect Seattle
    assert not any(v.value.startswith("urn:pcm:graph:") for v in seen if isinstance(v, ox.NamedNode))
    assert not any(f.triple.p.value in (RDF + "type", RDFS + "subClassOf", RDFS + "label") for f in result.found)


# ---------------------------------------------------------------------------------------------- BeamSearch
def test_the_beam_keeps_the_path_closest_to_the_question(engine: TraversalEngine) -> None:
    result = run(engine, [B_START], "bs", question="alpha beta gamma", bs=BeamSearchConfig(max_depth=2, max_paths=1))
    assert len(result.paths) == 1
    assert result.paths[0].vertices == [B_START, B_A1, B_A2]
    assert keys(result) == {(B_START.value, RELATED.value, B_A1.value), (B_A1.value, RELATED.value, B_A2.value)}


def test_a_wider_beam_keeps_both_branches_best_first(engine: TraversalEngine) -> None:
    result = run(engine, [B_START], "bs", question="alpha beta gamma zulu", bs=BeamSearchConfig(max_depth=2, max_paths=2))
    assert [p.vertices for p in result.paths] == [[B_START, B_A1, B_A2], [B_START, B_Z1, B_Z2]]  # not delta
    assert result.paths[0].score > result.paths[1].score


def test_final_sorting_puts_ended_or_continuous_paths_first(engine: TraversalEngine) -> None:
    # origin -> delta is a dead end (ended after one hop); the alpha and zulu branches are still going at depth 2
    def paths(sorting: str, depth: int = 2) -> list[tuple[str, bool]]:
        config = BeamSearchConfig(max_depth=depth, max_paths=4, final_sorting=sorting)
        result = run(engine, [B_START], "bs", question="zulu yankee", bs=config)
        return [(p.vertices[-1].value, p.ended) for p in result.paths]

    # mixed ranks by score alone: one poor hop (delta) beats two poor hops (alpha, beta gamma) at mean_alpha 0.75
    assert paths("mixed") == [(B_Z2.value, False), (B_DEAD.value, True), (B_A2.value, False)]
    assert paths("ended_first") == [(B_DEAD.value, True), (B_Z2.value, False), (B_A2.value, False)]
    assert paths("continuous_first") == [(B_Z2.value, False), (B_A2.value, False), (B_DEAD.value, True)]
    assert all(not ended for _, ended in paths("mixed", depth=1))
    assert all(ended for _, ended in paths("mixed", depth=3))


def test_paths_may_not_share_vertices_when_told_not_to(engine: TraversalEngine) -> None:
    shared = run(engine, [BIKE], "bs", question="bike shop Portland",
                 bs=BeamSearchConfig(max_depth=3, max_paths=6), **no_episodic())
    apart = run(engine, [BIKE], "bs", question="bike shop Portland",
                bs=BeamSearchConfig(max_depth=3, max_paths=6, share_vertices=False), **no_episodic())

    def overlaps(result) -> int:  # type: ignore[no-untyped-def]
        inner = [set(p.vertices[1:]) for p in result.paths]
        return sum(len(a & b) > 0 for i, a in enumerate(inner) for b in inner[i + 1 :] if a != b)

    assert overlaps(apart) <= overlaps(shared)
    no_revisit = run(engine, [BIKE], "bs", question="bike shop Portland",
                     bs=BeamSearchConfig(max_depth=5, max_paths=6, revisit_vertices=False), **no_episodic())
    assert all(len(set(p.vertices)) == len(p.vertices) for p in no_revisit.paths)


def test_beam_depth_is_bounded_and_candidate_vectors_are_embedded_once(engine: TraversalEngine) -> None:
    embedder = engine.vectors.embedder
    first = run(engine, [BIKE], "bs", question="bike shop", bs=BeamSearchConfig(max_depth=2, max_paths=5))
    assert all(len(p.steps) <= 2 for p in first.paths)
    texts_before = embedder.texts  # type: ignore[attr-defined]
    run(engine, [BIKE], "bs", question="bike shop", bs=BeamSearchConfig(max_depth=2, max_paths=5))
    assert embedder.texts == texts_before + 1  # type: ignore[attr-defined]  # only the question again


def test_a_vertex_with_too_many_facts_is_scored_on_a_bounded_sample(engine: TraversalEngine) -> None:
    full = run(engine, [BIKE], "bs", question="bike", bs=BeamSearchConfig(max_depth=1, max_paths=50))
    sampled = run(engine, [BIKE], "bs", question="bike", bs=BeamSearchConfig(max_depth=1, max_paths=50, max_fanout=3))
    assert any("sample" in n for n in sampled.notes)
    assert 0 < len(sampled.paths) < len(full.paths)
    assert {f.triple for f in sampled.found} <= {f.triple for f in full.found}


# ---------------------------------------------------------------------------------------------- A*
@pytest.mark.parametrize("heuristic", ["ip", "weighted_short_path", "avg_weighted_short_path"])
def test_a_star_finds_the_shortest_path(engine: TraversalEngine, heuristic: str) -> None:
    result = run(engine, [BIKE, ROSEWOOD], "astar", astar=AStarConfig(heuristic=heuristic), **no_episodic())
    (path,) = result.paths
    assert path.vertices == [BIKE, BUY, SHOP, PORTLAND, ROSEWOOD]  # not the 5-hop detour, not through the owner
    assert keys(result) == BIKE_TO_ROSEWOOD
    # six hops: past what the two ends' rings can join, so the open set is walked vertex by vertex
    far = run(engine, [TREK, CAR], "astar", astar=AStarConfig(heuristic=heuristic, expand_batch=1), **no_episodic())
    assert far.paths[0].vertices == [TREK, FACTORY, REGION, PORTLAND, ROSEWOOD, REPAIR, CAR]
    assert far.stats.passed > 3
    assert not run(engine, [TREK, CAR], "astar", astar=AStarConfig(heuristic=heuristic, max_depth=5), **no_episodic()).found


def test_a_star_respects_depth_and_passed_node_bounds(engine: TraversalEngine) -> None:
    shallow = run(engine, [BIKE, ROSEWOOD], "astar", astar=AStarConfig(max_depth=3), **no_episodic())
    assert not shallow.found and "no path" in shallow.notes[0]
    starved = run(engine, [BIKE, ROSEWOOD], "astar", astar=AStarConfig(max_passed_nodes=2, expand_batch=1), **no_episodic())
    assert not starved.found
    with_posts = run(engine, [BIKE, ROSEWOOD], "astar")  # the post about Trek mentions the bike and Portland
    assert with_posts.paths[0].vertices == [BIKE, N(NAMING.post("p4")), PORTLAND, ROSEWOOD]


def test_a_star_through_posts_when_episodic_vertices_are_allowed(engine: TraversalEngine) -> None:
    result = run(engine, [BIKE, SHOP], "astar")
    assert len(result.paths[0].steps) == 2  # via the purchase or via the post that mentions both


# ---------------------------------------------------------------------------------------------- mixtures, filter, sources
def test_mixtures_are_the_deduplicated_union(engine: TraversalEngine) -> None:
    wc = run(engine, [BIKE, ROSEWOOD], "wc", **no_episodic())
    astar = run(engine, [BIKE, ROSEWOOD], "astar", **no_episodic())
    both = run(engine, [BIKE, ROSEWOOD], "astar+wc", **no_episodic())
    assert keys(both) == keys(wc) | keys(astar)
    assert len(both.found) == len(keys(both))
    shared = [f for f in both.found if f.triple.key() in {(a, b, f"<{c}>") for a, b, c in BIKE_TO_ROSEWOOD}]
    assert all(f.algorithms == {"wc", "astar"} for f in shared)
    assert parse_algorithm("all") == ("wc", "bs", "astar")
    with pytest.raises(UsageError):
        parse_algorithm("wc+dfs")


def test_the_triples_filter_keeps_the_n_most_similar(engine: TraversalEngine) -> None:
    result = engine.retrieve("price 600", [BIKE, SHOP], "wc", config=TraversalConfig(top_n=3), forbid={Kind.EPISODIC})
    assert len(result.found) == 3
    assert result.found[0].triple == (BUY, s("price"), ox.Literal("600"))
    assert [f.similarity for f in result.found] == sorted((f.similarity for f in result.found), reverse=True)


def test_each_triple_comes_with_its_text_path_and_source_utterances(engine: TraversalEngine) -> None:
    result = engine.retrieve("bike and Portland", [BIKE, ROSEWOOD], "wc", forbid={Kind.EPISODIC})
    seller = next(f for f in result.found if f.triple.p == s("seller"))
    assert seller.text == "buying the Trek bike seller City Bikes"
    assert seller.path is not None and seller.path.start == BIKE
    assert [src.text for src in seller.sources] == ["I bought a Trek bike at City Bikes for 600 dollars."]
    assert seller.sources[0].source_id == "p1" and seller.sources[0].session == "s1"
    data = result.as_json(engine.text_of)
    assert data["triples"][0]["sources"] and data["triples"][0]["path"]["steps"]


def test_no_starts_and_unknown_starts_give_empty_results(engine: TraversalEngine) -> None:
    assert run(engine, [], "all", question="x").found == []
    lonely = run(engine, [m("nobody")], "all", question="x")
    assert lonely.found == [] and lonely.paths == []


# ---------------------------------------------------------------------------------------------- small parts
def test_vectors_are_cached_on_disk_and_dropped_when_the_model_changes(tmp_path: Path) -> None:
    embedder = WordEmbedder()
    cache = TextVectors(embedder, tmp_path / "cache")
    first = cache.get(["trek bike", "city bikes", "trek bike"])
    assert embedder.texts == 2 and np.allclose(first[0], first[2])
    cache.flush()
    again = TextVectors(WordEmbedder(), tmp_path / "cache")
    assert np.allclose(again.get(["city bikes"]), first[1]) and again.embedder.texts == 0  # type: ignore[attr-defined]

    class Other(WordEmbedder):
        name = "test/another-model"

    other = TextVectors(Other(), tmp_path / "cache")
    other.get(["city bikes"])
    assert other.embedder.texts == 1  # type: ignore[attr-defined]


def test_mentions_prefer_names_and_longer_phrases() -> None:
    found = mentions('Which shop did Rosewood Auto Repair send my "Subaru Outback" to?')
    names = [text for text, proper in found if proper]
    assert names[:2] == ["Subaru Outback", "Rosewood Auto Repair"] or set(names[:2]) == {"Subaru Outback", "Rosewood Auto Repair"}
    assert "Which" not in [t for t, _ in found]
    assert ("shop", False) in found


def test_predicates_read_as_words_and_forbid_flags_parse() -> None:
    assert predicate_words(SCHEMA + "containedInPlace") == "contained in place"
    assert predicate_words(PCM + "has_preference") == "has preference"
    assert Kind.parse_many("o, thesis") == frozenset({Kind.OBJECT, Kind.THESIS})
    with pytest.raises(UsageError):
        Kind.parse_many("x")

"""An entity co-occurrence graph over utterances, walked by personalised PageRank (HippoRAG 2 style, no LLM).

HippoRAG 2 links passages to the phrases an LLM extracts from them and ranks passages by a PageRank walk that
restarts at the question's phrases and at the passages dense retrieval found. Here the phrases come from the text
and the index alone, deterministically:

- ``n:`` names: a capitalised word or a run of them, away from the start of a sentence ("Boston", "Pride
  Parade"), where every word is capitalised;
- ``e:`` entities of the side index whose label (normalised, one to four words) occurs in the text;
- ``p:`` key phrases: two adjacent content words, stemmed ("adopt agenc", "pottery class"), a stand-in for the
  noun phrases a tagger would find.

Unlike the term graph (:mod:`pcm.index.graph`) single common words are not nodes: a post is joined to another only
by a name, a known entity or a two-word phrase they share, so the walk crosses sessions along what a person keeps
talking about rather than along every shared word. A node held by more than ``MAX_DF_SHARE`` of the posts (and
more than ``MIN_HUB_DF``) is a hub (a speaker's name, a greeting) and is left out, as HippoRAG drops
over-connected nodes; so is a node naming a speaker (the speaker prior does that job).

The graph is a list of post-node edges, built lazily on the first walk and rebuilt when the posts or entities
change; each post's nodes are cached by digest, so a rebuild re-reads only the posts that changed. The walk is a
power iteration of personalised PageRank on the bipartite graph (``STEPS`` post-node-post rounds, damping
``DAMPING``): two ``numpy.bincount`` passes over the edges a round, no Python loop over posts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from pcm.index import recall as ranking
from pcm.index.mirror import EntityMirror, PostMirror
from pcm.index.text import TERM_STOPWORDS, WORD_TOKEN, normalise_label, stem

MAX_DF_SHARE = 0.02
"""A node held by more than this share of the posts (and more than ``MIN_HUB_DF`` posts) is a hub and left out."""
MIN_HUB_DF = 20
DAMPING = 0.5
"""Share of the walk's mass that moves on at each step; the rest restarts (HippoRAG 2 uses 0.5)."""
STEPS = 6
"""Post-node-post rounds of the power iteration: at damping 0.5 the mass left after six is under 2%."""
QUERY_NODE_MASS = 0.5
"""Share of the restart mass on the question's own nodes (each by its specificity, 1/df); the rest goes to the
seed posts in proportion to their fused scores."""
HEAD_NODES = False
"""Whether the last word of each two-word phrase (its head, in English compounds: "pottery *class*") is a node
too (``h:``), so phrases about the same thing meet ("horse painting", "nature painting")."""
MAX_ENTITY_WORDS = 4
"""Longest entity label, in words, looked for in a text."""
MAX_ENTITY_HOLDERS = 5
"""A label shared by more entities than this (a common first name) is too ambiguous to be a node."""

_SENTENCE_END = re.compile(r"[.!?:;\"“”()\n-]\s*$")


def text_nodes(text: str, entities: Mapping[str, set[str]] | None = None) -> list[str]:
    """The nodes of a text, each once, in order of first appearance: ``n:`` names, ``p:`` two-word phrases and,
    given the index's normalised labels (``EntityMirror.normal``), ``e:`` entity IRIs whose label occurs in it."""
    out: dict[str, None] = {}
    run: list[str] = []
    previous: str | None = None
    for match in WORD_TOKEN.finditer(text):
        word = match.group(0)
        base = word.casefold().replace("’", "'").split("'", 1)[0]
        gap = text[max(0, match.start() - 3) : match.start()]
        opens = match.start() == 0 or bool(_SENTENCE_END.search(gap))
        content = base not in TERM_STOPWORDS and len(base) > 2
        if word[:1].isupper() and base != "i" and base not in TERM_STOPWORDS and not opens:
            run.append(base)
        else:
            _close(run, out)
            run = []
        joined = not re.search(r"[^\w\s'’]", gap) if previous is not None else False
        stemmed = stem(base) if content else None
        if stemmed is not None and previous is not None and joined:
            out.setdefault(f"p:{previous} {stemmed}", None)
            if HEAD_NODES:
                out.setdefault(f"h:{stemmed}", None)
        previous = stemmed
    _close(run, out)
    if entities:
        for iri in _entity_iris(text, entities):
            out.setdefault("e:" + iri, None)
    return list(out)


def _close(run: list[str], out: dict[str, None]) -> None:
    if run:
        out.setdefault("n:" + " ".join(run), None)


def _entity_iris(text: str, entities: Mapping[str, set[str]]) -> list[str]:
    """IRIs of the entities whose normalised label is a run of one to ``MAX_ENTITY_WORDS`` words of ``text``."""
    words = normalise_label(text).split()
    found: dict[str, None] = {}
    for size in range(1, MAX_ENTITY_WORDS + 1):
        for start in range(len(words) - size + 1):
            if size == 1 and (words[start] in TERM_STOPWORDS or len(words[start]) < 3):
                continue
            holders = entities.get(" ".join(words[start : start + size]))
            if holders and len(holders) <= MAX_ENTITY_HOLDERS:
                for iri in sorted(holders):
                    found.setdefault(iri, None)
    return list(found)


def speaker_nodes(speakers: Iterable[str]) -> set[str]:
    """The name nodes that would name a speaker (each word of the name, and the whole name)."""
    out: set[str] = set()
    for name in speakers:
        words = [w.casefold() for w in WORD_TOKEN.findall(name)]
        out.update("n:" + w for w in words)
        if words:
            out.add("n:" + " ".join(words))
    return out


@dataclass
class Built:
    """The graph of one generation of the posts and entities mirrors, as its list of post-node edges."""

    key: tuple[int, int, int, int]
    node_id: dict[str, int]
    df: np.ndarray
    """Posts per node; 0 for a hub, which keeps no edge."""
    post: np.ndarray
    """The post slot of each edge."""
    node: np.ndarray
    """The node id of each edge."""
    to_node: np.ndarray
    """Share of its post's mass an edge carries to its node (1 / the post's edges)."""
    to_post: np.ndarray
    """Share of its node's mass an edge carries to its post (1 / the node's df)."""
    size: int
    """Slots of the posts mirror when built."""

    def holders(self, node: str) -> set[int]:
        """The slots of the posts linked to ``node`` (none for a hub or a node no post has)."""
        nid = self.node_id.get(node)
        if nid is None:
            return set()
        return set(self.post[self.node == nid].tolist())


class CooccurrenceGraph:
    """The post-node graph of one side index, rebuilt lazily when its mirrors change."""

    def __init__(self) -> None:
        self._nodes: dict[int, tuple[str, list[str]]] = {}
        """Slot -> (digest, nodes) of the posts read so far: a rebuild re-reads only changed posts."""
        self._entity_key: tuple[int, int] | None = None
        self._built: Built | None = None

    def walk(
        self,
        posts: PostMirror,
        entities: EntityMirror,
        query: str,
        seeds: Mapping[int, float],
        *,
        allowed: np.ndarray | None = None,
    ) -> dict[int, float]:
        """PageRank mass per post (slot -> mass, posts with none left out), restarting at the query's nodes and
        at ``seeds`` (slot -> weight, e.g. the fused scores of the best posts): the walk's state after ``STEPS``
        rounds. A query node is weighted by its specificity (1/df), as HippoRAG 2 weights its phrases. ``allowed``
        (a boolean mask by slot) keeps the walk off filtered-out posts."""
        built = self.build(posts, entities)
        size, nodes = built.size, len(built.df)
        if size == 0:
            return {}
        query_ids = [
            nid
            for node in text_nodes(query, entities.normal)
            if (nid := built.node_id.get(node)) is not None and built.df[nid] > 0
        ]
        restart_posts = np.zeros(size)
        for slot, weight in seeds.items():
            if slot < size and weight > 0:
                restart_posts[slot] = weight
        restart_nodes = np.zeros(nodes)
        for nid in query_ids:
            restart_nodes[nid] = 1.0 / built.df[nid]
        post_total, node_total = restart_posts.sum(), restart_nodes.sum()
        if post_total <= 0 and node_total <= 0:
            return {}
        node_share = QUERY_NODE_MASS if post_total > 0 and node_total > 0 else (1.0 if node_total > 0 else 0.0)
        if node_total > 0:
            restart_nodes *= node_share / node_total
        if post_total > 0:
            restart_posts *= (1.0 - node_share) / post_total
        blocked = None if allowed is None else ~allowed[:size]
        # one round: posts -> nodes (plus the node restart), nodes -> posts (plus the post restart)
        on_posts = restart_posts.copy()
        for _ in range(STEPS):
            moved = np.bincount(built.node, weights=on_posts[built.post] * built.to_node, minlength=nodes)
            on_nodes = DAMPING * moved + restart_nodes
            moved = np.bincount(built.post, weights=on_nodes[built.node] * built.to_post, minlength=size)
            on_posts = DAMPING * moved + restart_posts
            if blocked is not None:
                on_posts[blocked] = 0.0
        found = np.flatnonzero(on_posts > 0)
        return dict(zip(found.tolist(), on_posts[found].tolist(), strict=True))

    def build(self, posts: PostMirror, entities: EntityMirror) -> Built:
        """The graph of the mirrors as they are now: the cached one unless a post or an entity changed since."""
        key = (id(posts), posts.generation, id(entities), entities.generation)
        if self._built is not None and self._built.key == key:
            return self._built
        entity_key = (id(entities), entities.generation)
        if entity_key != self._entity_key:
            self._nodes.clear()  # an entity came or went: every post's ``e:`` nodes may differ
            self._entity_key = entity_key
        ignore = speaker_nodes(posts.speaker_counts)
        size = posts.capacity()
        node_id: dict[str, int] = {}
        rows: list[int] = []
        cols: list[int] = []
        fresh: dict[int, tuple[str, list[str]]] = {}
        for slot in range(size):
            record = posts.records[slot]
            if record is None:
                continue
            digest = posts.digests[slot]
            cached = self._nodes.get(slot)
            if cached is None or cached[0] != digest:
                cached = (digest, text_nodes(record.text, entities.normal))
            fresh[slot] = cached
            for name in cached[1]:
                if name in ignore:
                    continue
                rows.append(slot)
                cols.append(node_id.setdefault(name, len(node_id)))
        self._nodes = fresh
        post = np.asarray(rows, dtype=np.int64)
        node = np.asarray(cols, dtype=np.int64)
        df = np.bincount(node, minlength=len(node_id)).astype(np.float64)
        hub = max(MIN_HUB_DF, int(MAX_DF_SHARE * len(posts)))
        kept = df[node] <= hub  # a hub keeps no edge
        post, node = post[kept], node[kept]
        df = np.where(df <= hub, df, 0.0)
        per_post = np.bincount(post, minlength=size).astype(np.float64)
        self._built = Built(key, node_id, df, post, node, 1.0 / per_post[post], 1.0 / df[node], size)
        return self._built


SEEDS = 10
"""Best fused posts the walk restarts from."""


def leg(
    graph: CooccurrenceGraph,
    posts: PostMirror,
    entities: EntityMirror,
    query: str,
    fused: Mapping[int, float],
    mask: np.ndarray | None,
    factors: np.ndarray | None,
) -> ranking.Leg:
    """The co-occurrence leg of the fusion: posts by the walk's mass from the question's nodes and the ``SEEDS``
    best fused posts, after the speaker prior, the ``DEPTH`` best, weighted ``COOCCURRENCE_WEIGHT``."""
    seeds = {slot: fused[slot] for slot in ranking.ranked(fused)[:SEEDS]}
    mass = graph.walk(posts, entities, query, seeds, allowed=mask)
    slots = np.fromiter(mass.keys(), dtype=np.int64, count=len(mass))
    values = np.fromiter(mass.values(), dtype=np.float64, count=len(mass))
    ranked = ranking.rank_leg(slots, values, ranking.COOCCURRENCE_WEIGHT, factors)
    return ranking.Leg(ranked.slots[: ranking.DEPTH], ranked.scores[: ranking.DEPTH], ranked.weight)

"""A lifetime memory for the scale benchmarks: N utterances in ~N/100 sessions over ten years, with vectors,
extraction graphs and provenance, deterministic in its seed.

    python benchmarks/make_lifetime.py [--posts 1000000] [--memory DIR] [--seed 37] [--texts made-up|english]

The store is written with pcm's own quad builders (:func:`pcm.provenance.post_quads`, ``session_quads``,
``activity_quads``, ``entity_derivation_quads``), so every post, session, extraction graph and provenance record
has the shape ``pcm ingest`` and extraction give it, spooled to N-Quads and bulk loaded. One post in ten has an
extraction graph (a friend of the owner and a purchase, a trip, a pet or a party, as in ``bench_ask.py``) and the
status ``extracted``; the others are ``pending``. An individual's card (its type and label) is written once, in the
first graph that states it, as extraction stores it (``pcm.extraction.cards``): a friend's later acts, and the
thousands of purchases at one shop, name the entity without restating its card. The side index is then filled by
the memory's own reconcile (``Memory.sync_index``), so its rows, search text and sync record are what ``pcm
reindex`` writes.

The vectors are synthetic, not the embedding model's: a text's vector is the normalised sum of fixed random
vectors of its words (seeded), plus a little noise. Texts of one topic share words, so the vectors are clustered
as sentence embeddings are, and the index sees realistic neighbourhoods; embedding a million texts with the model
would take about an hour on two cores and does not change what search costs. The memory records the real model's
name and dimension, so it opens with the real model, which then embeds the questions.

``--texts english`` writes English utterances instead (``lifetime_english.py``: everyday topics in templated
sentences) and lets the real model embed them, as ``pcm reindex`` would (about 25 minutes for 1M posts on two
cores): a corpus where a question's vector meets thousands of distractors on its own topic, which the made-up words
cannot give. The facts, sessions and provenance are the same.

An existing memory at DIR built with the same ``--posts``, ``--seed`` and ``--texts`` (and cards written once) is
reused (``lifetime.json`` records them).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyoxigraph as ox

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

import lifetime_english  # noqa: E402
from pcm.conversations import Utterance  # noqa: E402
from pcm.extraction.cards import CARD_PREDICATES  # noqa: E402
from pcm.index import embedder as embedder_module  # noqa: E402
from pcm.index.embedder import MODEL_DIM, MODEL_NAME, Embedder  # noqa: E402
from pcm.memory import Memory  # noqa: E402
from pcm.naming import Naming  # noqa: E402
from pcm.provenance import (  # noqa: E402
    STATUS,
    Activity,
    activity_quads,
    entity_derivation_quads,
    post_quads,
    session_quads,
)
from pcm.settings import Settings  # noqa: E402
from pcm.terminal import LineProgress  # noqa: E402

RECORD = "lifetime.json"
TEXTS = ("made-up", "english")
PER_SESSION = 100
YEARS = 10
GRAPH_EVERY = 10
"""One post in this many has an extraction graph."""
SCHEMA = "https://schema.org/"
PCM = "https://w3id.org/pcm/ontology#"
REL = "http://purl.org/vocab/relationship/"
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
CARDS = "once"
"""How the memory's cards are written (``lifetime.json``): memories made before cards were written once restate
them in every graph and are rebuilt."""
XSD = "http://www.w3.org/2001/XMLSchema#"
FIRST = ("Alex", "Sam", "Jordan", "Taylor", "Morgan", "Casey", "Riley", "Jamie", "Avery", "Quinn", "Rowan", "Elliot")
LAST = ("Nguyen", "Garcia", "Smith", "Kowalski", "Okafor", "Haddad", "Lindqvist", "Moreau", "Tanaka", "Rossi")
CITIES = ("Vienna", "Osaka", "Lyon", "Bergen", "Austin", "Halifax", "Porto", "Ghent", "Tartu", "Bologna")
THINGS = ("kayak", "tent", "camera", "guitar", "blender", "drone", "lamp", "backpack", "helmet", "printer")
COMMON = (
    "I", "you", "the", "a", "and", "to", "was", "it", "that", "we", "my", "for", "with", "on", "about", "really",
    "think", "maybe", "today", "yesterday", "week", "again", "good", "great", "some", "more", "time", "just",
)
TOPICS = 60
TOPIC_WORDS = 25


def _vocabulary(seed: int) -> list[list[str]]:
    """``TOPICS`` lists of made-up topic words (pronounceable, distinct), the same for a seed."""
    rng = random.Random(seed)
    syllables = ["ka", "lo", "mi", "ra", "ne", "su", "ta", "vi", "do", "pe", "li", "an", "ber", "ton", "mar", "el"]
    seen: set[str] = set()
    topics = []
    for _ in range(TOPICS):
        words: list[str] = []
        while len(words) < TOPIC_WORDS:
            word = "".join(rng.choice(syllables) for _ in range(rng.randint(2, 4)))
            if word not in seen:
                seen.add(word)
                words.append(word)
        topics.append(words)
    return topics


class SyntheticEmbedder(Embedder):
    """The real model's name and dimension; a text's vector is the normalised sum of its words' fixed random
    vectors plus noise seeded by the text, so texts sharing words are near (see the module docstring)."""

    name = MODEL_NAME
    dim = MODEL_DIM

    def __init__(self, seed: int) -> None:
        super().__init__()
        self._seed = seed
        self._words: dict[str, np.ndarray] = {}

    def _word(self, word: str) -> np.ndarray:
        vector = self._words.get(word)
        if vector is None:
            rng = np.random.default_rng([self._seed, *word.encode()])
            vector = self._words[word] = rng.standard_normal(self.dim).astype(np.float32)
        return vector

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            words = [w.strip(".,?!:;'\"").lower() for w in text.split()]
            words = [w for w in words if w and w not in _COMMON_LOWER]
            row = np.sum([self._word(w) for w in words], axis=0) if words else np.zeros(self.dim, np.float32)
            noise = np.random.default_rng([self._seed, len(text), *text[:16].encode()]).standard_normal(self.dim)
            row = row + 0.3 * np.sqrt(max(len(words), 1)) * noise.astype(np.float32)
            out[i] = row / max(float(np.linalg.norm(row)), 1e-9)
        return out


_COMMON_LOWER = {w.lower() for w in COMMON}


def _lit(value: object, datatype: str | None = None) -> ox.Literal:
    return ox.Literal(str(value), datatype=ox.NamedNode(XSD + datatype)) if datatype else ox.Literal(str(value))


def _sentence(rng: random.Random, topic: list[str], length: int) -> str:
    words = [rng.choice(topic) if rng.random() < 0.45 else rng.choice(COMMON) for _ in range(length)]
    return " ".join(words).capitalize() + rng.choice((".", ".", "?", "!"))


def _facts(rng: random.Random, ns: str, k: int, people: int) -> list[ox.Triple]:
    """One utterance's worth of facts about a friend of the owner: a purchase, a trip, a pet or a party."""
    N = ox.NamedNode  # noqa: N806 - reads like the RDF it builds
    friend = k % people
    person = N(f"{ns}friend-{friend}")
    name = f"{FIRST[friend % len(FIRST)]} {LAST[(friend // len(FIRST)) % len(LAST)]} {friend}"
    day = (datetime(2016, 1, 1) + timedelta(days=rng.randrange(3650))).date().isoformat()
    out = [
        ox.Triple(person, N(RDF_TYPE), N(SCHEMA + "Person")),
        ox.Triple(person, N(LABEL), _lit(name)),
        ox.Triple(N(ns + "owner"), N(REL + "friendOf"), person),
    ]
    kind = k % 4
    if kind == 0:
        thing, store, act = N(f"{ns}item-{k}"), N(f"{ns}store-{k % 300}"), N(f"{ns}buy-{k}")
        out += [
            ox.Triple(thing, N(RDF_TYPE), N(SCHEMA + "Product")),
            ox.Triple(thing, N(LABEL), _lit(f"{rng.choice(THINGS)} {k}")),
            ox.Triple(store, N(RDF_TYPE), N(SCHEMA + "Store")),
            ox.Triple(store, N(LABEL), _lit(f"Shop {k % 300}")),
            ox.Triple(act, N(RDF_TYPE), N(SCHEMA + "BuyAction")),
            ox.Triple(act, N(SCHEMA + "agent"), person),
            ox.Triple(act, N(SCHEMA + "object"), thing),
            ox.Triple(act, N(SCHEMA + "seller"), store),
            ox.Triple(act, N(SCHEMA + "price"), _lit(rng.randrange(5, 900), "integer")),
            ox.Triple(act, N(SCHEMA + "startDate"), _lit(day, "date")),
        ]
    elif kind == 1:
        city, act = N(f"{ns}city-{k % 500}"), N(f"{ns}trip-{k}")
        out += [
            ox.Triple(city, N(RDF_TYPE), N(SCHEMA + "City")),
            ox.Triple(city, N(LABEL), _lit(f"{CITIES[k % len(CITIES)]} {k % 500}")),
            ox.Triple(act, N(RDF_TYPE), N(SCHEMA + "TravelAction")),
            ox.Triple(act, N(SCHEMA + "agent"), person),
            ox.Triple(act, N(SCHEMA + "toLocation"), city),
            ox.Triple(act, N(SCHEMA + "startDate"), _lit(day, "date")),
        ]
    elif kind == 2:
        pet = N(f"{ns}pet-{k}")
        out += [
            ox.Triple(pet, N(RDF_TYPE), N(PCM + "Pet")),
            ox.Triple(pet, N(LABEL), _lit(f"Pet {k}")),
            ox.Triple(pet, N(PCM + "petSpecies"), _lit(rng.choice(("dog", "cat", "rabbit")))),
            ox.Triple(person, N(PCM + "hasPet"), pet),
        ]
    else:
        event = N(f"{ns}event-{k}")
        out += [
            ox.Triple(event, N(RDF_TYPE), N(SCHEMA + "SocialEvent")),
            ox.Triple(event, N(LABEL), _lit(f"{name}'s party {k}")),
            ox.Triple(event, N(SCHEMA + "agent"), person),
            ox.Triple(event, N(SCHEMA + "startDate"), _lit(day, "date")),
        ]
    return out


def generate(naming: Naming, posts: int, seed: int, texts: str = "made-up") -> Iterator[list[ox.Quad]]:
    """The quads of the lifetime, one session at a time (what ingest and extraction write for it)."""
    rng = random.Random(seed)
    topics = _vocabulary(seed)
    english = sorted(lifetime_english.TOPICS)
    sessions = max(1, -(-posts // PER_SESSION))
    start = datetime(2015, 1, 1, 8, 0, tzinfo=UTC)
    span = timedelta(days=365 * YEARS) / sessions
    people = max(50, posts // 400)
    ns = naming.namespace
    carded: set[ox.Triple] = set()  # cards already written (see the module docstring)
    k = 0
    for s in range(sessions):
        session_id = f"life-{s:06d}"
        began = start + span * s + timedelta(minutes=rng.randrange(max(1, int(span.total_seconds() // 120))))
        quads = session_quads(naming, session_id, None, began)
        topic = topics[rng.randrange(TOPICS)]
        subject = english[rng.randrange(len(english))]
        previous: str | None = None
        count = min(PER_SESSION, posts - s * PER_SESSION)
        when = began
        for position in range(count):
            role = "user" if position % 2 == 0 else "assistant"
            if texts == "english":
                text = lifetime_english.english_text(rng, subject)
            else:
                text = " ".join(_sentence(rng, topic, rng.randint(5, 16)) for _ in range(rng.randint(1, 3)))
            when += timedelta(seconds=rng.randint(20, 240))
            utterance = Utterance(session_id, position, role, text, None, when, f"m{s}-{position}")
            ref, post = post_quads(naming, utterance, previous)
            previous = ref.iri
            extracted = (s * PER_SESSION + position) % GRAPH_EVERY == 0
            if extracted:
                post = [q for q in post if q.predicate != STATUS]
                post.append(ox.Quad(ox.NamedNode(ref.iri), STATUS, ox.Literal("extracted"), post[0].graph_name))
                graph = ref.graph
                said = _facts(rng, ns, k, people)
                facts = [t for t in said if t not in carded]
                carded.update(t for t in facts if t.predicate.value in CARD_PREDICATES)
                g = ox.NamedNode(graph)
                post += [ox.Quad(t.subject, t.predicate, t.object, g) for t in facts]
                # the post still derives every entity it names, its card written here or not
                subjects = {t.subject.value for t in said if t.subject.value != ns + "owner"}
                post += entity_derivation_quads(subjects, ref.iri, graph)
                activity = Activity("extraction", when + timedelta(seconds=5), model="lifetime-synthetic")
                post += activity_quads(naming, activity, graph, ref.iri)
                k += 1
            quads += post
        yield quads


def built(directory: Path, posts: int, seed: int, texts: str = "made-up") -> dict[str, object] | None:
    """The build record of a memory at ``directory`` made with these ``posts``, ``seed`` and ``texts``, else
    ``None``."""
    try:
        record = json.loads((directory / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    same = (record.get("posts") == posts and record.get("seed") == seed and record.get("texts", "made-up") == texts
            and record.get("cards") == CARDS)
    return record if same else None


def build(directory: Path, posts: int, seed: int = 37, texts: str = "made-up") -> dict[str, object]:
    """Build the lifetime memory in ``directory`` (or reuse it); returns its build record."""
    found = built(directory, posts, seed, texts)
    if found is not None:
        print(f"reusing {directory}: {found['posts']} posts, {found['quads']} quads")
        return found
    if directory.exists() and any(directory.iterdir()):
        raise SystemExit(f"{directory} holds something else; remove it or choose another --memory")
    if texts == "made-up":
        embedder_module._default = SyntheticEmbedder(seed)  # the memory's reconcile embeds with it
    started = time.perf_counter()
    memory = Memory.init(Settings(memory=directory, summaries_enabled=False), owner="Robin")
    spool = directory / "lifetime.nq"
    quads = 0
    with spool.open("wb") as out:
        for chunk in generate(memory.naming, posts, seed, texts):
            quads += len(chunk)
            out.write(ox.serialize(chunk, format=ox.RdfFormat.N_QUADS))
    generated = time.perf_counter()
    memory.backend.bulk_load(str(spool), ox.RdfFormat.N_QUADS)
    spool.unlink()
    loaded = time.perf_counter()
    with LineProgress(None, "indexed", every=120, unit="records") as progress:  # posts, then entities
        memory.sync_index(progress=progress.update)
    memory.index.optimize()
    indexed = time.perf_counter()
    memory.close()
    record = {
        "posts": posts,
        "seed": seed,
        "texts": texts,
        "cards": CARDS,
        "sessions": -(-posts // PER_SESSION),
        "quads": quads,
        "seconds": {
            "generate": round(generated - started, 1),
            "bulk_load": round(loaded - generated, 1),
            "index": round(indexed - loaded, 1),
        },
        "vectors": "synthetic (bag of seeded random word vectors), not the embedding model's"
        if texts == "made-up" else f"the embedding model's ({MODEL_NAME})",
    }
    (directory / RECORD).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(
        f"built {directory}: {posts} posts in {record['sessions']} sessions, {quads} quads; generate "
        f"{generated - started:.0f} s, bulk load {loaded - generated:.0f} s, index {indexed - loaded:.0f} s"
    )
    return record


def default_directory(posts: int) -> Path:
    return Path(tempfile.gettempdir()) / f"pcm-lifetime-{posts}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posts", type=int, default=1_000_000)
    parser.add_argument("--memory", type=Path, default=None, help="default: <tmp>/pcm-lifetime-<posts>")
    parser.add_argument("--seed", type=int, default=37)
    parser.add_argument("--texts", choices=TEXTS, default="made-up",
                        help="english: English utterances embedded by the real model (see above)")
    args = parser.parse_args()
    build(args.memory or default_directory(args.posts), args.posts, args.seed, args.texts)


if __name__ == "__main__":
    main()

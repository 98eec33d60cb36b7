"""The label-word leg of entity matching gives exactly the scores its definition says, however it sums them."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from pcm.index.mirror import _COMMON_WORD, EntityMirror


@dataclass
class Postings:
    """The two things ``word_hits`` reads of a mirror: its size and its word -> entities postings."""

    words: dict[str, set[str]]
    size: int

    def __len__(self) -> int:
        return self.size


def by_definition(mirror: Postings, mention: str, limit: int) -> list[tuple[str, float]]:
    """Candidates: holders of the mention's words held by at most _COMMON_WORD entities (else of its rarest word);
    score: the idf of the mention's words an entity holds over the idf of all its words; best first, then IRI."""
    query = list(dict.fromkeys(mention.split()))
    idf = {w: math.log(1.0 + max(len(mirror), 1) / len(mirror.words.get(w, ())) if w in mirror.words else
                       1.0 + max(len(mirror), 1) / 0.5) for w in query}
    known = sorted((w for w in query if w in mirror.words), key=lambda w: len(mirror.words[w]))
    seeds = [w for w in known if len(mirror.words[w]) <= _COMMON_WORD] or known[:1]
    candidates = set().union(*(mirror.words[w] for w in seeds)) if seeds else set()
    scored = [(e, sum(idf[w] for w in known if e in mirror.words[w]) / sum(idf.values())) for e in candidates]
    return sorted(scored, key=lambda item: (-item[1], item[0]))[:limit]


def test_word_hits_match_the_definition_on_random_label_sets() -> None:
    rng = random.Random(7)
    vocabulary = [f"w{i}" for i in range(200)]
    for _ in range(60):
        size = rng.randrange(1, 6000)
        words: dict[str, set[str]] = {}
        for e in range(size):
            for w in rng.sample(vocabulary[: rng.randrange(3, 200)], rng.randrange(1, 4)):
                words.setdefault(w, set()).add(f"urn:e:{e}")
        mirror = Postings(words, size)
        mention = " ".join(rng.choice([*vocabulary, "absent"]) for _ in range(rng.randrange(1, 30)))
        got = EntityMirror.word_hits(mirror, mention, 20)  # type: ignore[arg-type]
        assert got == by_definition(mirror, mention, 20)

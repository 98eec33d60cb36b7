"""Extractive summaries without a language model: a session's most central sentences, in message order.

Centrality is the cosine of a sentence to the session's centroid (the mean of its sentence vectors): a sentence
close to what the whole session is about stands for it best. It is damped for sentences with few content words,
which are close to every centroid and say little. Vectors are MiniLM embeddings when the side index is
on (the model is loaded anyway) and TF-IDF vectors otherwise, so ``PCM_INDEX=off`` never imports torch. Chosen
sentences that repeat an earlier choice (cosine above ``NEAR_DUPLICATE``) are skipped, so five slots say five
things.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from pcm.words import STOPWORDS

#: Sentences kept in an extractive summary.
MAX_SENTENCES = 5
#: Characters kept of one sentence (a 2,000-character paste is not a summary line).
MAX_SENTENCE_CHARS = 300
#: A candidate this close to a sentence already chosen says the same thing.
NEAR_DUPLICATE = 0.92
#: Sentences shorter than this many words ("Wow!", "Thanks.") are only used when nothing longer exists.
MIN_WORDS = 4
#: Content words at which a sentence counts as fully substantial (see ``_substance``).
FULL_WORDS = 8

_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[\"'“(\[A-Z0-9])")
_TOKEN = re.compile(r"[a-z0-9][a-z0-9'’-]*")

Encoder = Callable[[Sequence[str]], np.ndarray]


@dataclass(frozen=True)
class Turn:
    """One post of a session as a summary sees it."""

    post: str
    position: int
    text: str
    speaker: str
    time: datetime | None = None
    """When it was said (``dcterms:created``), if known."""


@dataclass(frozen=True)
class Sentence:
    post: str
    position: int
    order: int
    """Order of the sentence within its post."""
    text: str
    speaker: str

    def line(self) -> str:
        return f"{self.speaker}: {self.text}" if self.speaker else self.text


def sentences(turns: Sequence[Turn]) -> list[Sentence]:
    """Every sentence of every turn, in message order, each cut to ``MAX_SENTENCE_CHARS``."""
    found: list[Sentence] = []
    for turn in turns:
        for order, raw in enumerate(_SPLIT.split(" ".join(turn.text.split()))):
            text = raw.strip()
            if not text:
                continue
            if len(text) > MAX_SENTENCE_CHARS:
                text = text[: MAX_SENTENCE_CHARS - 1].rsplit(" ", 1)[0] + "…"
            found.append(Sentence(turn.post, turn.position, order, text, turn.speaker))
    return found


def central_sentences(
    candidates: Sequence[Sentence], encode: Encoder | None = None, limit: int = MAX_SENTENCES
) -> list[Sentence]:
    """The ``limit`` most central sentences (MiniLM vectors via ``encode``, else TF-IDF), back in message order."""
    if not candidates:
        return []
    long_enough = [s for s in candidates if len(s.text.split()) >= MIN_WORDS]
    pool = long_enough or list(candidates)
    texts = [s.text for s in pool]
    vectors = _normalise(encode(texts) if encode is not None else tfidf_vectors(texts))
    centroid = vectors.mean(axis=0)
    norm = float(np.linalg.norm(centroid))
    scores = vectors @ (centroid / norm) if norm > 0 else np.zeros(len(pool))
    scores = scores * np.array([_substance(s.text) for s in pool], dtype=np.float32)
    chosen: list[int] = []
    for i in sorted(range(len(pool)), key=lambda i: (-float(scores[i]), i)):
        if len(chosen) == limit:
            break
        if any(float(vectors[i] @ vectors[j]) > NEAR_DUPLICATE for j in chosen):
            continue
        chosen.append(i)
    return sorted((pool[i] for i in chosen), key=lambda s: (s.position, s.order))


def tfidf_vectors(texts: Sequence[str], vocabulary_from: Sequence[str] | None = None) -> np.ndarray:
    """Log-scaled TF-IDF rows for ``texts``; IDF comes from ``vocabulary_from`` (default: the texts themselves)."""
    docs = [content_words(t) for t in texts]
    basis = [content_words(t) for t in vocabulary_from] if vocabulary_from is not None else docs
    df: Counter[str] = Counter()
    for doc in basis:
        df.update(set(doc))
    terms = {term: i for i, term in enumerate(sorted(df))}
    n = len(basis)
    idf = np.array([math.log((1 + n) / (1 + df[t])) + 1.0 for t in sorted(df)], dtype=np.float32)
    matrix = np.zeros((len(docs), max(len(terms), 1)), dtype=np.float32)
    for row, doc in enumerate(docs):
        for term, count in Counter(doc).items():
            col = terms.get(term)
            if col is not None:
                matrix[row, col] = (1.0 + math.log(count)) * idf[col]
    return matrix


def _substance(text: str) -> float:
    """Up to 1 with the number of content words (``FULL_WORDS`` or more): "Good to see you!" is central to
    every chat and says nothing, so a short sentence must be much more central to win a place."""
    return math.sqrt(min(len(content_words(text)), FULL_WORDS) / FULL_WORDS)


def content_words(text: str) -> list[str]:
    """Content words, crudely singular ("dogs" and "dog's" match "dog")."""
    words = (t.removesuffix("'s").removesuffix("’s") for t in _TOKEN.findall(text.lower()))
    return [w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w for w in words if w not in STOPWORDS]


def _normalise(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


def summary_text(chosen: Sequence[Sentence]) -> str:
    """One line per sentence, with who said it."""
    return "\n".join(s.line() for s in chosen)

"""What the index writes into its text and vector columns, and how it reads a query: pure string functions.

Choices here are what moved episodic recall on LoCoMo (see ``benchmarks/bench_recall_locomo.py``), and each is a
property of conversations in general, not of one benchmark:

- a post is embedded as ``Speaker said: text``: questions name people, and the name is a strong cue for the encoder;
- its full-text column also carries the session date (``(8 May 2023)``) and the previous turn of the same session,
  because the answer to "how long have you been married?" is the reply, and the reply does not repeat the question
  (the post's own line is written twice, so its own words still count most);
- the query sent to the encoder drops the question word and auxiliary (``When did``) and possessive ``'s``, which
  carry no content and pull the vector towards other questions;
- the query sent to the full-text leg drops the names of speakers it mentions: every post of a speaker carries the
  name, so it would match them all; a speaker prior does that job (``recall.py``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import threading
import unicodedata
from collections.abc import Iterable
from datetime import UTC, datetime

import snowballstemmer

from pcm.index.records import EntityRecord, PostRecord
from pcm.words import STOPWORDS, TIME_WORDS

_WH = r"(?:what|when|where|who|whom|whose|which|why|how(?:\s+(?:many|much|long|often|old|far|come))?)"
_AUX = r"(?:is|are|was|were|am|do|does|did|has|have|had|can|could|will|would|shall|should|might|may|must)"
_WH_AUX = re.compile(rf"^\s*{_WH}\s+{_AUX}\b\s*", re.IGNORECASE)
_WH_ONLY = re.compile(rf"^\s*{_WH}\b\s*", re.IGNORECASE)
_AUX_ONLY = re.compile(rf"^\s*{_AUX}\b\s*", re.IGNORECASE)
_POSSESSIVE = re.compile(r"(?<=\w)['’]s\b")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_LEADING_ARTICLE = re.compile(r"^(?:the|a|an)\s+")
_NUMBER = re.compile(r"\b\d\w*")
_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
#: What the term graph and the co-occurrence nodes never take as a name or a phrase word: the stop words, the
#: time words, and the contractions' leftovers ("d", "m", "s", "t").
TERM_STOPWORDS = STOPWORDS | TIME_WORDS | frozenset(["always", "d", "feel", "felt", "go", "m", "many", "s", "t"])
WORD_TOKEN = re.compile(r"[^\W\d_][^\W_]*(?:['’][^\W\d_]+)?", re.UNICODE)
"""A word: letters first, then letters or digits, with one apostrophe part ("don't", "Caroline's")."""
_STEMMERS = threading.local()


@functools.lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """The English Snowball stem of a lower-case word ("hours" -> "hour", "calories" -> "calori"): the one stemmer
    of the side index's word readers, one per thread because a Snowball stemmer keeps its state while it works.
    Cached: the pure-Python stemmer takes ~80 µs a word, and a conversation repeats its words."""
    stemmer = getattr(_STEMMERS, "english", None)
    if stemmer is None:
        stemmer = _STEMMERS.english = snowballstemmer.stemmer("english")
    return str(stemmer.stemWord(word))


_NAME_PARTICLES = frozenset({"the", "and", "von", "van", "der", "den", "del", "mrs", "miss"})


def who(record: PostRecord) -> str:
    """The name a post is said by: its speaker, or its role when the source names nobody."""
    return record.speaker or record.role


EMBED_SPEAKER_MIN_WORDS = 0
"""A post's embedded text starts with ``NAME said:`` only when the post has at least this many words (0: always).
Measured by re-embedding the posts (``bench_recall_memories.py --reembed``): LoCoMo conv-26 R@10 stays 0.740 with
no prefix at all, or from 8 or 15 words (multi-hop 0.250 in every case; no prefix: R@5 0.667 -> 0.660, open-domain
R@20 0.545 -> 0.455). Since the vector query lost the named speaker, the prefix no longer pulls chatter up."""


def embed_text(record: PostRecord) -> str:
    """The text whose vector represents a post: ``Caroline said: ...`` (a sentence, which the encoder reads
    better than a ``Caroline:`` chat prefix: LoCoMo conv-26 vector R@10 0.48 against 0.42)."""
    if EMBED_SPEAKER_MIN_WORDS and len(record.text.split()) < EMBED_SPEAKER_MIN_WORDS:
        return record.text
    return f"{who(record)} said: {record.text}"


def date_words(when: datetime | None) -> str:
    """``8 May 2023``: how people write dates in questions, so the full-text leg can match them."""
    if when is None:
        return ""
    return f"{when.day} {_MONTHS[when.month - 1]} {when.year}"  # not strftime: that follows the locale


def search_text(record: PostRecord, previous: PostRecord | None) -> str:
    """The full-text column of a post: its own line and date, its own line again, then the turn it answers.

    The own line is written twice so that, under BM25, a post's own words weigh more than its neighbour's: the
    reply is found by its question, but a post is still found first by what it says itself.
    """
    own = f"{who(record)}: {record.text}"
    day = date_words(record.time)
    lines = [f"{own} ({day})" if day else own, own]
    if previous is not None:
        lines.append(f"{who(previous)}: {previous.text}")
    return "\n".join(lines)


def entity_search_text(record: EntityRecord) -> str:
    """The full-text column of an entity: every label, then its descriptive text."""
    labels = " ; ".join(dict.fromkeys((record.label, *record.alt_labels)))
    return f"{labels}\n{record.text}" if record.text else labels


def entity_embed_text(record: EntityRecord) -> str:
    """The text whose vector represents an entity: its short description, or its label when it has none."""
    return record.text.strip() or record.label


def vector_query(query: str) -> str:
    """The query as the encoder should see it: no leading question word or auxiliary, no possessive ``'s``."""
    return query_content(query) or query.strip().rstrip("?!. ").strip()


def query_content(query: str) -> str:
    """What :func:`vector_query` keeps of a query, empty when nothing but a question word and auxiliary is left."""
    text = query.strip().rstrip("?!. ").strip()
    stripped = _WH_AUX.sub("", text, count=1)
    if stripped == text:
        stripped = _AUX_ONLY.sub("", _WH_ONLY.sub("", text, count=1), count=1)
    return _POSSESSIVE.sub("", stripped).strip()


def named_speakers(query: str, speakers: Iterable[str]) -> set[str]:
    """Speakers the query names: by any word of their name, or by a capitalised prefix of at least three letters
    of their first name (``Mel`` for ``Melanie``), the way people shorten names in chat."""
    return set(_speaker_words(query, speakers))


def without_speakers(query: str, speakers: Iterable[str]) -> str:
    """The query minus the words that name a speaker (and their ``'s``), for the full-text leg.

    Every post of a speaker carries the name in its full-text column, so the name matches them all and buries the
    content words; the speaker prior does that job instead.
    """
    words = {w for found in _speaker_words(query, speakers).values() for w in found}
    if not words:
        return query
    pattern = re.compile(
        r"\b(?:" + "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True)) + r")(?:['’]s)?\b",
        re.IGNORECASE,
    )
    return " ".join(pattern.sub(" ", query).split())


FTS_CONTENT_ONLY = 0
"""What :func:`fts_query` drops from the full-text query: 0 nothing, 1 the leading question word and auxiliary
(as :func:`query_content`), 2 every conversation stop word. The full-text index drops only a short English stop
list, so "what does" in a question matches every post that asks "what does it mean to you?". Off because that
match is often right: the answer is the reply, and its full-text column holds the turn it answers. On LoCoMo
conv-26 R@10 0.740 -> 0.733 at 1 and at 2 (multi-hop 0.250 -> 0.281, single-hop 0.929 -> 0.900 at 1 and 0.914 at
2, open-domain 0.364 -> 0.273 at 2): "how long has Melanie been creating art?" loses its answer, whose previous
turn asks "how long have you been creating art?"."""


def fts_query(query: str) -> str:
    """The words of a query the full-text leg searches for (:data:`FTS_CONTENT_ONLY`); the query unchanged when
    nothing else is left."""
    if FTS_CONTENT_ONLY == 1:
        return query_content(query) or query
    if FTS_CONTENT_ONLY == 2:
        words = [w for w in WORD_TOKEN.findall(query) if _folded(w) not in STOPWORDS]
        words += _NUMBER.findall(query)
        return " ".join(words) if words else query
    return query


def _folded(word: str) -> str:
    return word.casefold().replace("’", "'").split("'", 1)[0]


def _speaker_words(query: str, speakers: Iterable[str]) -> dict[str, set[str]]:
    words = _WORD.findall(query)
    found: dict[str, set[str]] = {}
    for name in speakers:
        parts = [
            p.casefold() for p in _WORD.findall(name) if len(p) >= 3 and p.casefold() not in _NAME_PARTICLES
        ]
        if not parts:
            continue
        hits = {w for w in words if w.casefold() in parts}
        hits |= {w for w in words if w[:1].isupper() and len(w) >= 3 and parts[0].startswith(w.casefold())}
        if hits:
            found[name] = hits
    return found


def normalise_label(text: str) -> str:
    """A label folded for loose equality: accents, case, punctuation, possessives and a leading article removed."""
    folded = text
    if not text.isascii():
        folded = unicodedata.normalize("NFKD", text)
        folded = "".join(c for c in folded if not unicodedata.combining(c))
    folded = _POSSESSIVE.sub("", folded).casefold()
    folded = " ".join(_WORD.findall(folded))
    return _LEADING_ARTICLE.sub("", folded)


def exact_label(text: str) -> str:
    """A label as compared for an exact match: case and surrounding or repeated spaces do not count."""
    return " ".join(text.split()).casefold()


def sql_string(value: str) -> str:
    """A SQL string literal for a LanceDB filter."""
    return "'" + value.replace("'", "''") + "'"


def timestamp(when: datetime) -> float:
    """Seconds since the epoch; a naive time is taken as written (as if UTC) so naive times compare among
    themselves the way they read."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def digest(*parts: object) -> str:
    """A short stable fingerprint of a record, to tell a changed record from an unchanged one."""
    payload = json.dumps(parts, ensure_ascii=False, default=str, separators=(",", ":"))
    return hashlib.blake2b(payload.encode("utf-8"), digest_size=12).hexdigest()


def search_hash(text: str) -> str:
    """Fingerprint of a full-text column, to tell whether a post's stored neighbour context is still current."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=12).hexdigest()


def label_keys(record: EntityRecord) -> tuple[list[str], list[str]]:
    """The exact and the normalised lookup keys of every label of an entity."""
    labels = [label for label in dict.fromkeys((record.label, *record.alt_labels)) if label.strip()]
    exact = list(dict.fromkeys(exact_label(label) for label in labels))
    normal = list(dict.fromkeys(key for label in labels if (key := normalise_label(label))))
    return exact, normal


def post_digest(record: PostRecord) -> str:
    return digest(
        "post",
        record.iri,
        record.session,
        record.role,
        record.speaker,
        record.time.isoformat() if record.time else None,
        record.text,
        record.source_id,
        record.position,
    )


def entity_digest(record: EntityRecord) -> str:
    return digest(
        "entity", record.iri, record.label, list(record.alt_labels), list(record.types), record.text
    )

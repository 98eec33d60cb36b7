"""Answers worked out in code from the stored facts (:mod:`pcm.retrieval.actions`, :mod:`pcm.retrieval.kinship`):
their shape, and the person a question names.

Why a module of its own: each kind of worked answer reads "Dana", "I" or "Dana's" the same way and hands ask the
same thing (a text, the graphs it rests on, a note), so the kinds share this rather than one another.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pcm.words import STOPWORDS

if TYPE_CHECKING:
    from pcm.retrieval.grounding import GroundedEntity

NAMED_SCORE = 0.8
"""Grounding's score from which a match counts as the person the question names (see :mod:`pcm.retrieval.facts`)."""
_OWNER_WORDS = frozenset({"i", "me", "we", "us", "my", "our"})
_CONTENT = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class Worked:
    """An answer worked out in code from stored facts, with the graphs it rests on (their utterances are cited)."""

    text: str
    graphs: tuple[str, ...]
    note: str


def person(who: str, *, owner: str, owner_name: str, entities: Sequence[GroundedEntity]) -> str | None:
    """The IRI of the person the question names: the owner for "I" or the owner's name (or part of it), else the
    one entity grounding matched by name; None when it is not clear who."""
    said = words(re.sub(r"['’]s$", "", who.strip()))
    if not said:
        return None
    # a genitive without an apostrophe ("Danas Sammlung", "Robins fiets") names the same person
    bare = {w[:-1] if len(w) > 3 and w.endswith("s") else w for w in said}
    for asked in (said, bare):
        if asked <= _OWNER_WORDS or asked <= words(owner_name):
            return owner
        named = {e.iri for e in entities if e.score >= NAMED_SCORE and asked <= words(e.label)}
        if named:
            return named.pop() if len(named) == 1 else None
    return None


def words(text: str) -> set[str]:
    """The lower-case words of ``text`` (apostrophes and hyphens kept inside a word)."""
    return {w.lower() for w in re.findall(r"[\w'-]+", text)}


def content_words(text: str) -> set[str]:
    """Lower-case words less articles, pronouns and prepositions, plurals made singular (``machines`` ->
    ``machine``): what matches "the espresso machine" to a purchase, or "Cascade Health" to a job's line."""
    out = set()
    for word in _CONTENT.findall(text.lower()):
        if word in STOPWORDS:
            continue
        out.add(word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word)
    return out


__all__ = ["NAMED_SCORE", "Worked", "content_words", "person", "words"]

"""Which parts of the vocabulary catalogue one model call gets (an extraction, or an ask's query writing).

A service of the ontology, beside :mod:`pcm.ontology`, so that extraction (writing) and ask (reading) choose
areas the same way without one pipeline importing the other.

Why: the full catalogue is ~10k tokens, most of it irrelevant to any one utterance ("I bought a bike" needs no
health or family terms). Each call gets the core areas every utterance may need (people, places, actions, time and
general values) plus the areas its words, its context and the types of the entities it mentions point to.
A missed area costs little: the model falls back to a general term, or the repair round's "did you mean" hint
names the right one. The areas ``conversation`` and ``provenance`` are never sent: those terms are pcm's own
bookkeeping and an extraction may not write them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache

from pcm.ontology import Ontology

#: Sent on every call.
CORE_AREAS: tuple[str, ...] = ("people", "places", "activities", "time", "general")
#: Sent on every extraction call: the core without places, which the words of the utterance (or a capitalised name
#: after "in", "at", "to"...) pull in, to keep the extraction prompt small (its 26 place classes are ~430 tokens).
EXTRACTION_CORE: tuple[str, ...] = ("people", "activities", "time", "general")
#: Never sent, and refused in extraction output (see :mod:`pcm.extraction.normalise`).
RESERVED_AREAS: frozenset[str] = frozenset({"conversation", "provenance"})

#: Word stems that pull an area in. Matched at word starts, case-insensitively, on the utterance and its context.
KEYWORDS: dict[str, tuple[str, ...]] = {
    "places": (
        "city", "town", "village", "country", "park", "museum", "restaurant", "cafe", "café", "store", "shop", "mall",
        "market", "gym", "beach", "airport", "address", "street", "avenue", "downtown", "neighborhood",
        "neighbourhood", "moved", "visit", "mountain", "lake", "library", "church", "temple", "stadium", "arena",
        "theater", "theatre", "cinema", "venue", "hotel",
    ),
    "family": (
        "mom", "mum", "mother", "dad", "father", "parent", "son", "daughter", "kid", "child", "baby", "brother",
        "sister", "sibling", "husband", "wife", "spouse", "partner", "married", "marri", "wedding", "divorc",
        "aunt", "uncle", "cousin", "niece", "nephew", "grand", "family", "in-law", "fianc", "engaged", "born",
        "pregnan",
    ),
    "social": (
        "friend", "neighbo", "colleague", "coworker", "co-worker", "met ", "meet", "club", "team", "group",
        "instagram", "tiktok", "youtube", "facebook", "twitter", "linkedin", "follower", "account", "post",
        "invite", "party", "call", "text", "message", "chat", "boss", "roommate",
    ),
    "travel": (
        "trip", "travel", "flight", "fly", "flew", "airport", "vacation", "holiday", "visit", "hotel", "drive",
        "drove", "train", "bus", "plane", "taxi", "subway", "ferry", "cruise", "abroad", "tour", "journey",
        "itinerar", "return",
    ),
    "residence": ("home", "house", "apartment", "flat", "rent", "mortgage", "moved", "move", "live", "lived", "neighborhood"),
    "work": (
        "job", "work", "office", "boss", "manager", "career", "promot", "hired", "fired", "quit", "salary",
        "company", "employ", "colleague", "project", "client", "meeting", "interview", "resign", "start",
    ),
    "education": ("school", "class", "course", "degree", "universit", "college", "study", "studied", "exam", "teacher", "lesson", "learn"),
    "health": (
        "doctor", "dr.", "dentist", "hospital", "clinic", "sick", "ill", "pain", "hurt", "injur", "fever", "cold",
        "flu", "allerg", "asthma", "diagnos", "prescri", "medic", "pill", "inhaler", "therap", "surgery", "health",
        "symptom", "headache", "appointment", "checkup", "check-up", "vaccin", "blood", "covid", "diet",
    ),
    "food": (
        "eat", "ate", "food", "meal", "breakfast", "lunch", "dinner", "snack", "cook", "recipe", "restaurant",
        "cafe", "coffee", "tea", "drink", "pizza", "sushi", "vegan", "vegetarian", "gluten", "dish", "bake",
        "espresso", "wine", "beer",
    ),
    "habits": (
        "every", "daily", "weekly", "usually", "always", "routine", "habit", "each morning", "each week",
        "morning", "evening", "on mondays", "on weekends", "regularly", "often", "times a",
    ),
    "purchases": (
        "buy", "bought", "purchas", "order", "paid", "pay", "price", "cost", "$", "€", "£", "dollar", "euro",
        "sold", "sell", "shop", "store", "rent", "return", "refund", "subscription", "deal",
    ),
    "products": ("brand", "model", "product", "phone", "laptop", "machine", "device", "gadget", "camera", "watch", "tv"),
    "vehicles": ("car", "bike", "bicycle", "motorcycle", "scooter", "truck", "van", "vehicle", "subaru", "toyota", "honda", "tesla"),
    "services": (
        "repair", "fix", "broke", "broken", "service", "mechanic", "plumber", "electrician", "shop", "tow",
        "maintenance", "haircut", "salon", "cleaning", "problem", "issue", "fail", "replac",
    ),
    "pets": ("dog", "cat", "puppy", "kitten", "pet", "vet", "bird", "parrot", "fish", "hamster", "rabbit", "beagle", "breed"),
    "plants": ("plant", "garden", "grow", "basil", "tomato", "flower", "tree", "orchid", "seed", "succulent", "herb"),
    "clothing": ("wear", "wore", "shirt", "jacket", "dress", "shoes", "sneaker", "boots", "coat", "jeans", "hat", "cloth", "outfit", "size"),
    "collections": ("collect", "collection", "stamps", "coins", "vinyl", "records", "cards", "figurine"),
    "media": (
        "book", "read", "novel", "movie", "film", "show", "series", "watch", "music", "song", "album", "band",
        "podcast", "listen", "game", "paint", "photo", "write", "wrote", "review", "netflix", "concert",
    ),
    "events": (
        "event", "party", "concert", "festival", "wedding", "funeral", "birthday", "anniversary", "meeting",
        "conference", "show", "game", "match", "exhibition", "screening", "ceremony", "graduat", "died", "passed away",
        "born", "celebrat", "happened", "accident", "broke", "after", "before", "because",
    ),
    "preferences": (
        "like", "love", "hate", "prefer", "favorite", "favourite", "enjoy", "dislike", "can't stand", "fan of",
        "rather", "best", "worst", "recommend", "suggest",
    ),
}


def _pattern(stems: Iterable[str]) -> re.Pattern[str]:
    """One regex per area: each stem at a word start (stems that begin with a symbol, like "$", anywhere)."""
    words = sorted((re.escape(s) for s in stems if s[0].isalnum()), key=len, reverse=True)
    symbols = [re.escape(s) for s in stems if not s[0].isalnum()]
    return re.compile("|".join([r"\b(?:" + "|".join(words) + ")", *symbols]))


_PATTERNS: dict[str, re.Pattern[str]] = {area: _pattern(stems) for area, stems in KEYWORDS.items()}
#: Patterns of the keywords an ontology declares for its areas, compiled once per list.
_declared_pattern = cache(_pattern)


#: A capitalised name after a preposition of place ("in Denver", "at Rosewood Auto Repair"): a place, probably.
_PLACE_NAME = re.compile(r"\b(?:in|at|to|from|near|around|visiting|visited)\s+(?:the\s+)?[A-Z][a-z]")
#: Going to or coming back from a named place ("went to Lisbon", "back from Denver"): a trip, probably. Going to
#: something unnamed ("went to a support group", "going to try") is not: as plain keywords these phrases drew the
#: travel area, and its example, into turns about anything one goes to or is going to do.
_TRIP = re.compile(r"\b(?:(?:go|goes|going|gone|went|headed|heading|flying|driving)\s+(?:back\s+)?to|back\s+from)\s+[A-Z][a-z]")


def select_areas(
    text: str, *, entity_types: Iterable[str] = (), ontology: Ontology, core: Iterable[str] = CORE_AREAS
) -> list[str]:
    """Catalogue areas for one call, in catalogue order: the core, the keyword hits, the areas of mentioned types."""
    chosen = set(core)
    lowered = " " + " ".join(text.lower().split()) + " "
    chosen.update(area for area, pattern in _PATTERNS.items() if pattern.search(lowered))
    # areas (and keywords) the ontology declares in its areas.toml: a new area needs no edit here
    chosen.update(area for area, stems in ontology.area_keywords.items() if _declared_pattern(stems).search(lowered))
    if _PLACE_NAME.search(text):
        chosen.add("places")
    if _TRIP.search(text):
        chosen.add("travel")
    for iri in entity_types:
        term = ontology.terms.get(iri)
        if term is not None:
            chosen.add(term.area)
    return [a for a in ontology.areas if a in chosen and a not in RESERVED_AREAS]

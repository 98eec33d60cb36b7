"""Every value grounded in the words said: a deterministic check between parsing a model's answer and SHACL.

Why: a small model's answer can be valid and still untrue. Asked for an address it writes "123 Main St"; asked for a
date it writes a whole day when the words say "in 2010"; it types a greeting as an action and stores the same
pendant three times. SHACL checks the shape, not the truth, so this check compares each value with what was said
(the utterance, the previous turns the prompt showed, the known entities' names) and drops what is not there.
It follows the method of google/langextract's alignment: a value is placed in the source text exactly, then by a
normalised and fuzzy match of its tokens (case, accents, plurals and other inflections, "2,000" = "2000", number
words), and a value that cannot be placed is not guessed at: it is left out, counted and named in the report
that provenance keeps (``pcm:extractionReport``).

What it does, in order:
1. Speech acts are not facts: a question, greeting or thanks between the two sides of the conversation (a
   communicate action whose agent and recipients are the owner, the assistant, the speaker or whom the speaker
   addresses, and which is about nothing else, or any question they ask each other) is dropped with the node.
2. An action whose object is its own agent, or a node that points at itself, says nothing: dropped.
3. Each literal is checked by its kind. In any text value, every number and every capitalised word (a proper
   name: "Main", "Anytown", "Smith") must be found; beyond those, a name or a plain value needs half its content
   words (``GroundingConfig.name_coverage``), and a node whose name is not found is dropped whole; descriptions and the
   labels of what the model names in its own words (actions, events, a work history, an account: "job at Harbor
   Analytics") need a third (``description_coverage``). A number must be a number said (digits or words); a
   date must follow from the words and the message time at the precision said, and a day the words do not give is
   cut back to the month or year they do give; a duration's numbers and a time's hour must be said; a currency
   code needs its symbol or name; a value that only classifies what was said ("positive", "dog") is kept
   (:data:`CATEGORY_PROPERTIES`). A new node none of whose values was said goes whole, with its links. A name
   that is a sentence copied from the utterance (sentence marks, more than :data:`NAME_WORDS` words) names
   nothing; a name or value made of an owner and a thing ("Melanie's house", "Melanie's city") needs the thing
   said, not only the owner; a value with letters of a script no one used was not said.
4. One entity per thing said: new nodes of the same kind whose names are one and the same thing ("pendant",
   "heart-shaped pendant") become one node.

It never adds a value and never calls a model. Booleans and the vocabulary's own terms (IRIs) are not checked here:
the ontology and SHACL check those.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from difflib import SequenceMatcher
from typing import TYPE_CHECKING

import pyoxigraph as ox

from pcm.backend import checked_triple
from pcm.extraction.resolve import GENERIC_TYPES, OCCURRENCE_ROOTS
from pcm.extraction.said_dates import DAY, MONTH, YEAR, SaidDates, said_dates
from pcm.index.text import stem
from pcm.namespaces import FOAF, PCM, PROV, RDF, RDFS, SCHEMA, SKOS, XSD
from pcm.settings import GroundingConfig
from pcm.words import STOPWORDS, contains_run, fold

if TYPE_CHECKING:
    from pcm.ontology import Ontology

#: Values named in the report (the count is always complete).
REPORTED = 12

_TYPE = RDF + "type"
NAME_PROPERTIES = frozenset({
    RDFS + "label", SCHEMA + "name", FOAF + "name", FOAF + "nick", SCHEMA + "givenName", SCHEMA + "familyName",
    SKOS + "prefLabel", SKOS + "altLabel", SCHEMA + "alternateName",
})
DESCRIPTION_PROPERTIES = frozenset({
    SCHEMA + "description", RDFS + "comment", SCHEMA + "disambiguatingDescription", PCM + "purpose",
    SKOS + "note", SCHEMA + "text",
})
#: Properties whose value classifies what was said rather than repeating it ("positive" for "I love it", "dog" for
#: "my beagle", "female" for "she"): a short value is kept without its words being said. Everything else that is
#: a value must be said.
CATEGORY_PROPERTIES = frozenset({
    PCM + "polarity", PCM + "preferenceType", PCM + "problemType", PCM + "serviceCategory", PCM + "petSpecies",
    PCM + "clothingType", PCM + "collectionType", PCM + "mealType", PCM + "housingTenure", SCHEMA + "gender",
})
#: Kinds of node the model names in its own words ("liking teal", "buying the espresso machine", "Dana's work
#: history"): their labels are held to ``description_coverage``, not to ``name_coverage``. An address is
#: an intangible too, but its name is its street and number, which the number and proper-name rule still holds.
DESCRIBED_ROOTS = (
    *OCCURRENCE_ROOTS, SCHEMA + "Intangible", FOAF + "OnlineAccount", "http://rdfs.org/resume-rdf/cv.rdfs#CV",
    "http://rdfs.org/resume-rdf/cv.rdfs#WorkHistory", "http://rdfs.org/resume-rdf/cv.rdfs#Education",
)
_COMMUNICATE = SCHEMA + "CommunicateAction"
_ASK = SCHEMA + "AskAction"
_AGENT, _OBJECT, _RECIPIENT, _ABOUT = SCHEMA + "agent", SCHEMA + "object", SCHEMA + "recipient", SCHEMA + "about"
_PARTICIPANT = SCHEMA + "participant"
_PEOPLE = frozenset({FOAF + "Person", SCHEMA + "Person", FOAF + "Agent", SCHEMA + "Organization", FOAF + "Group"})
_DATES = {XSD + "date": DAY, XSD + "dateTime": DAY, XSD + "gYearMonth": MONTH, XSD + "gYear": YEAR}
_NUMBERS = frozenset(XSD + n for n in (
    "integer", "decimal", "double", "float", "int", "long", "short", "nonNegativeInteger", "positiveInteger",
    "negativeInteger", "nonPositiveInteger", "unsignedInt", "unsignedLong",
))
_TEXT_TYPES = frozenset({XSD + "string", RDF + "langString", XSD + "normalizedString", XSD + "token"})
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_DIGITS = re.compile(r"\d+(?:[.,]\d+)*")
_SCALED = re.compile(r"(\d+(?:[.,]\d+)?)\s*(k|m|bn|thousand|million|billion|grand)\b")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)[YMWDHS]")
_DURATION_TEXT = re.compile(r"P(?:\d+(?:\.\d+)?[YMWD])*(?:T(?:\d+(?:\.\d+)?[HMS])+)?")
_TIME_TEXT = re.compile(r"\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:\d{2})?")
_CLOCK = re.compile(r"\b(\d{1,2})(?::(\d{2}))?\s*(?:am|pm|h\b|uhr)|\b(\d{1,2}):(\d{2})\b")

#: Number words that stand for a value said ("two dogs", "a dozen eggs", "twice"), in the languages the date
#: reader covers. "a"/"an" are not here: one is always allowed (a thing said once is one of it).
NUMBER_WORDS: dict[str, float] = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
    "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
    "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100, "thousand": 1000, "million": 1_000_000,
    "half": 0.5, "dozen": 12, "couple": 2, "pair": 2, "both": 2, "twice": 2, "double": 2, "twins": 2,
    "triple": 3, "thrice": 3, "once": 1, "single": 1, "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5,
    "un": 1, "une": 1, "deux": 2, "trois": 3, "quatre": 4, "cinq": 5, "sept": 7, "huit": 8, "neuf": 9, "dix": 10,
    "vingt": 20, "cent": 100, "mille": 1000, "eins": 1, "zwei": 2, "drei": 3, "vier": 4, "funf": 5, "sechs": 6,
    "sieben": 7, "acht": 8, "neun": 9, "zehn": 10, "zwanzig": 20, "hundert": 100, "tausend": 1000, "uno": 1,
    "dos": 2, "tres": 3, "cuatro": 4, "cinco": 5, "seis": 6, "siete": 7, "ocho": 8, "nueve": 9, "diez": 10,
    "veinte": 20, "cien": 100, "mil": 1000, "due": 2, "tre": 3, "quattro": 4, "sei": 6, "sette": 7, "otto": 8,
    "nove": 9, "dieci": 10, "dois": 2, "duas": 2, "quatro": 4, "oito": 8, "dez": 10,
}
#: ISO currency codes and what says them in a text (symbols and names, folded).
CURRENCIES: dict[str, tuple[str, ...]] = {
    "USD": ("$", "dollar", "dollars", "usd", "bucks", "buck"),
    "EUR": ("€", "euro", "euros", "eur"),
    "GBP": ("£", "pound", "pounds", "quid", "gbp"),
    "JPY": ("¥", "yen", "jpy"),
    "CNY": ("¥", "yuan", "rmb", "cny"),
    "INR": ("₹", "rupee", "rupees", "inr"),
    "CAD": ("$", "cad", "canadian dollar"),
    "AUD": ("$", "aud", "australian dollar"),
    "CHF": ("chf", "franc", "francs"),
    "MXN": ("$", "peso", "pesos", "mxn"),
    "KRW": ("₩", "won", "krw"),
    "BRL": ("r$", "real", "reais", "brl"),
}
#: Words that carry no content in a name, beyond the conversation stop words (a few other languages' articles).
_FILLER = STOPWORDS | frozenset(
    ["le", "la", "les", "l", "de", "du", "des", "d", "un", "une", "et", "en", "au", "aux", "der", "die", "das", "den", "dem", "des", "ein", "eine", "und", "el", "los", "las", "del", "y", "lo", "il", "gli", "di", "da", "e", "o", "os", "as", "do", "dos"]
)


@dataclass
class Said:
    """What the model was shown as said: the words of the utterance and of its context, their numbers and dates."""

    text: str
    """Everything said, folded (lower case, no accents)."""
    words: frozenset[str]
    stems: frozenset[str]
    numbers: frozenset[float]
    dates: SaidDates
    clock_hours: frozenset[int]
    fuzzy_word: float = GroundingConfig.fuzzy_word
    """``GroundingConfig.fuzzy_word``: how alike two words must be to be one word misspelt or inflected."""
    scripts: frozenset[str] = frozenset()
    """The writing systems of what was said: a value with letters of another was not said."""

    @classmethod
    def of(cls, utterance: str, when: datetime | None, *, context: Iterable[tuple[str, datetime | None]] = (),
           names: Iterable[str] = (), fuzzy_word: float = GroundingConfig.fuzzy_word) -> Said:
        """The utterance said at ``when``, the previous turns shown with it (text, time) and the names it may use
        (the speaker's, the owner's, the known entities' labels)."""
        parts = [(utterance, when), *context]
        dates = SaidDates()
        for i, (text, time) in enumerate(parts):
            dates.update(said_dates(text, time.date() if time is not None else None, present=i == 0))
        folded = fold(" \n ".join([*(t for t, _ in parts), *names]))
        words = frozenset(_TOKEN.findall(folded))
        return cls(
            text=folded, words=words, stems=frozenset(stem(w) for w in words), numbers=frozenset(_numbers(folded)),
            dates=dates, clock_hours=frozenset(_hours(folded)), fuzzy_word=fuzzy_word, scripts=_scripts(folded),
        )

    def has_word(self, word: str, *, short_forms: bool = True) -> bool:
        """Whether ``word`` (folded) was said: as it is, by its stem, by a short form said for it (``short_forms``;
        never a filler word: "any" is not said for "anytown"), or within a typo of a said word."""
        if word in self.words or stem(word) in self.stems:
            return True
        if short_forms and len(word) >= 6 and any(
            word.startswith(w) for w in self.words if len(w) >= 3 and w not in _FILLER
        ):
            return True  # a short form said for the full word: "vet" for "veterinarian", "info" for "information"
        if len(word) < 5:
            return False
        return any(
            len(w) >= 5 and w[:3] == word[:3] and (w.startswith(word) or word.startswith(w)
                                                   or SequenceMatcher(None, w, word).ratio() >= self.fuzzy_word)
            for w in self.words
        )

    def coverage(self, value: str) -> float:
        """Share of the value's content words (numbers included) found in what was said; 1.0 for no content."""
        content = _content_tokens(value)
        if not content:
            return 1.0
        return sum(1 for t in content if self._has(t)) / len(content)

    def supports(self, value: str, need: float, *, first_is_name: bool = True) -> bool:
        """Whether a text value was said: every number and capitalised word in it found, and at least ``need`` of
        its content words. ``first_is_name``: a capitalised first word counts as a name (off for labels the model
        writes as a phrase, "Buying the ...")."""
        text = unicodedata.normalize("NFKC", value)
        if _scripts(fold(text)) - self.scripts:
            return False  # "self-care" written half in Chinese by a model that was shown English
        if not all(self.has_any_number(n) for n in _DIGITS.findall(text)):
            return False
        for i, token in enumerate(_TOKEN.findall(_DIGITS.sub(" ", text))):
            # a name is said as it is written (or within a typo): a short form is a word's, not a name's
            if (token[:1].isupper() and (i > 0 or first_is_name) and len(token) > 1
                    and not self.has_word(fold(token), short_forms=False)):
                return False
        return self.coverage(value) >= need - 1e-9

    def _has(self, token: str) -> bool:
        return self.has_any_number(token) if token[:1].isdigit() else self.has_word(token)

    def has_any_number(self, text: str) -> bool:
        """A number as written in a value ("60,000", "2.5"): said in any of its readings."""
        return any(r == 1 or any(abs(r - n) < 1e-9 for n in self.numbers) for r in _readings(text))

    def has_number(self, text: str) -> bool:
        try:
            value = float(text)
        except ValueError:
            return False
        return value == 1 or any(abs(value - n) < 1e-9 for n in self.numbers)


def _numbers(text: str) -> set[float]:
    """Every number the text says: digits (with thousands separators either way), scaled ("2k", "1.5 million")
    and spelt out ("twenty-five", "two hundred")."""
    out: set[float] = set()
    for m in _DIGITS.finditer(text):
        raw = m.group(0)
        out.update(_readings(raw))
    for m in _SCALED.finditer(text):
        scale = {"k": 1e3, "thousand": 1e3, "grand": 1e3, "m": 1e6, "million": 1e6, "bn": 1e9, "billion": 1e9}[m[2]]
        out.update(r * scale for r in _readings(m[1]))
    words = _TOKEN.findall(text)
    total: float | None = None
    for word in [*words, ""]:
        value = NUMBER_WORDS.get(word)
        if value is None:
            if total is not None:
                out.add(total)
            total = None
            continue
        out.add(value)
        if total is None:
            total = value
        elif value in (100, 1000, 1_000_000) and total < value:
            total *= value
        else:
            total += value
    return out


def _readings(raw: str) -> set[float]:
    """``2,000`` is 2000; ``2.5`` is 2.5; ``2.000`` may be 2000 (a thousands point) or 2: both are what was said."""
    out: set[float] = set()
    for thousands, decimal in ((",", "."), (".", ",")):
        text = raw.replace(thousands, "").replace(decimal, ".")
        try:
            out.add(float(text))
        except ValueError:
            continue
    return out


def _hours(text: str) -> set[int]:
    out: set[int] = set()
    for m in _CLOCK.finditer(text):
        hour = int(m[1] or m[3])
        out.update({hour % 24, (hour + 12) % 24})
    return out


@dataclass
class Grounded:
    """The triples whose values were said, and what was left out (readable lines, for the report)."""

    triples: list[ox.Triple]
    dropped: list[str] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)

    def report(self) -> str:
        """One line for provenance: how many values were left out and which, and what was merged."""
        parts = []
        if self.dropped:
            shown = "; ".join(self.dropped[:REPORTED]) + (f"; and {len(self.dropped) - REPORTED} more"
                                                          if len(self.dropped) > REPORTED else "")
            parts.append(f"left out {len(self.dropped)} value(s) not in the words said: {shown}")
        if self.merged:
            parts.append(f"merged {len(self.merged)} repeated node(s): {'; '.join(self.merged[:REPORTED])}")
        return ". ".join(parts)


class Grounding:
    """The check for one memory's ontology and fixed people (owner, assistant); thread-safe (no state per call)."""

    def __init__(
        self,
        ontology: Ontology,
        *,
        parties: Iterable[str],
        show: Callable[[str], str] | None = None,
        config: GroundingConfig | None = None,
    ) -> None:
        self.ontology = ontology
        self.config = GroundingConfig() if config is None else config
        #: The two sides of the conversation (the owner and the assistant): what they ask or tell each other is
        #: the conversation itself, not a fact about the world.
        self.parties = frozenset(parties)
        self._show: Callable[[str], str] = show or (lambda iri: iri)

    def ground(self, triples: Sequence[ox.Triple], said: Said, *, known: Iterable[str] = (),
               speaker: str | None = None, addressee: str | None = None) -> Grounded:
        """The triples whose values ``said`` supports; ``known`` are the existing entities the prompt offered
        (their names are not checked again), ``speaker`` who said the utterance and ``addressee`` whom to (what
        they ask or thank each other for is the conversation, like the owner's exchanges with the assistant)."""
        parties = self.parties | {p for p in (speaker, addressee) if p}
        known_set = frozenset(known) | parties
        types, links = _index(triples)
        result = Grounded([])
        gone: set[str] = set()
        for node in types:
            why = self._pointless(node, types, links, parties)
            if why:
                gone.add(node)
                result.dropped.append(f"{self._show(node)} ({why})")
        kept: list[ox.Triple] = []
        said_values: dict[str, int] = {}  # per node: its literals, less each one left out
        names = _names(triples)
        for t in triples:
            s, o = _node(t.subject), _node(t.object)
            if s in gone or o in gone:
                continue
            if s == o and s:
                result.dropped.append(f"{self._show(s)} {self._curie(t.predicate.value)} itself")
                continue
            if not isinstance(t.object, ox.Literal):
                kept.append(t)
                continue
            own_name = t.predicate.value not in NAME_PROPERTIES | DESCRIPTION_PROPERTIES and (
                fold(t.object.value).strip() in names.get(s, ()))
            checked = None if own_name else self._literal(t, said, types.get(s, set()), known=s in known_set)
            said_values[s] = said_values.get(s, 0) + (checked is not None)
            if checked is None:
                whole = t.predicate.value in NAME_PROPERTIES and s not in known_set
                result.dropped.append(f"{self._show(s)} {self._curie(t.predicate.value)} {_quote(t.object)}"
                                      + (" (and the node it names)" if whole else ""))
                if whole:
                    gone.add(s)
                continue
            kept.append(checked)
        for node, count in said_values.items():
            # a new node all of whose values were left out (an address of invented street and town) was made of
            # what no one said: what is left of it is a type and links, and it goes with them
            if count == 0 and node not in known_set and node not in gone:
                gone.add(node)
                result.dropped.append(f"{self._show(node)} (no value of it was said)")
        kept = [t for t in kept if _node(t.subject) not in gone and _node(t.object) not in gone]
        result.triples, merged = self._merge(kept, known_set)
        result.merged = merged
        return result

    # ------------------------------------------------------------------------------------------------ nodes

    def _curie(self, iri: str) -> str:
        return self.ontology.curie(iri)

    def _is_a(self, types: Iterable[str], root: str) -> bool:
        return any(t == root or root in self.ontology.superclasses(t) for t in types if self.ontology.defines(t))

    def _occurrence(self, types: Iterable[str]) -> bool:
        return any(self._is_a(types, root) for root in OCCURRENCE_ROOTS)

    def _pointless(self, node: str, types: dict[str, set[str]], links: dict[str, dict[str, set[str]]],
                   parties: frozenset[str]) -> str:
        """Why a node states no fact ("" when it does): a speech act of the conversation, or a self-reference."""
        kinds = types.get(node, set())
        out = links.get(node, {})
        agents, objects = out.get(_AGENT, set()), out.get(_OBJECT, set())
        if agents and agents & objects:
            return "an action on its own agent"
        if not self._is_a(kinds, _COMMUNICATE):
            return ""
        recipients = out.get(_RECIPIENT, set()) | out.get(_PARTICIPANT, set())
        between_parties = agents <= parties and recipients <= parties
        if not between_parties:
            return ""
        if self._is_a(kinds, _ASK):
            return "a question asked in the conversation"
        about = (out.get(_ABOUT, set()) | objects) - parties
        return "" if about else "a speech act of the conversation"

    # ------------------------------------------------------------------------------------------------ literals

    def _literal(self, t: ox.Triple, said: Said, node_types: set[str], *, known: bool) -> ox.Triple | None:
        """The triple as it may be kept (a date cut to the precision said), or None when its value was not said."""
        literal = t.object
        assert isinstance(literal, ox.Literal)
        datatype = literal.datatype.value if literal.datatype is not None else XSD + "string"
        value = literal.value
        predicate = t.predicate.value
        if datatype in _DATES:
            return _dated(t, value, datatype, said)
        if datatype in _NUMBERS:
            return t if said.has_number(value) else None
        if datatype == XSD + "duration":
            return _duration(t, value, said)
        if datatype == XSD + "time":
            return t if _time_said(value, said) else None
        if datatype == XSD + "boolean":
            return t
        if datatype == XSD + "anyURI":
            return t if fold(value).rstrip("/") in said.text else None
        if datatype not in _TEXT_TYPES:
            return t if fold(value) in said.text else None
        if predicate in NAME_PROPERTIES:
            if not known and _copied_speech(value):
                return None
            described = not known and any(self._is_a(node_types, root) for root in DESCRIBED_ROOTS)
            need = self.config.description_coverage if described else self.config.name_coverage
            if not said.supports(value, need, first_is_name=not described):
                return None
            return t if described or known or _owned_said(value, said, need) else None
        if predicate in CATEGORY_PROPERTIES and len(_TOKEN.findall(value)) <= self.config.category_words:
            return t
        if predicate in DESCRIPTION_PROPERTIES:
            return t if said.supports(value, self.config.description_coverage, first_is_name=False) else None
        if _DURATION_TEXT.fullmatch(value.strip()):
            return _duration(t, value, said)
        if _TIME_TEXT.fullmatch(value.strip()):
            return t if _time_said(value, said) else None
        need = self.config.name_coverage
        return t if _said_text(value, said, need) and _owned_said(value, said, need) else None

    # ------------------------------------------------------------------------------------------------ merging

    def _merge(self, triples: list[ox.Triple], known: frozenset[str]) -> tuple[list[ox.Triple], list[str]]:
        """New nodes of one kind named for one thing become one node (the one stated most, then the shortest
        name): what a small model does when it names the same thing twice in one answer."""
        types, _ = _index(triples)
        labels: dict[str, str] = {}
        weight: dict[str, int] = {}
        for t in triples:
            s = _node(t.subject)
            weight[s] = weight.get(s, 0) + 1
            if t.predicate.value == RDFS + "label" and isinstance(t.object, ox.Literal):
                labels.setdefault(s, t.object.value)
        candidates = sorted(
            (n for n in types if n in labels and n not in known and not self._occurrence(types[n])),
            key=lambda n: (-weight.get(n, 0), len(labels[n]), n),
        )
        into: dict[str, str] = {}
        for i, a in enumerate(candidates):
            if a in into:
                continue
            for b in candidates[i + 1 :]:
                if b not in into and self._same_thing(labels[a], types[a], labels[b], types[b]):
                    into[b] = a
        if not into:
            return triples, []
        merged = [f"{self._show(b)} into {self._show(a)}" for b, a in sorted(into.items())]
        out: list[ox.Triple] = []
        seen: set[tuple[str, str, str]] = set()
        for t in triples:
            s, o = _node(t.subject), _node(t.object)
            if s in into and t.predicate.value in NAME_PROPERTIES:
                continue  # the kept node keeps its own name
            subject = _rename(t.subject, into)
            obj = _rename(t.object, into)
            if _node(subject) and _node(subject) == _node(obj) and o:
                continue
            key = (str(subject), t.predicate.value, str(obj))
            if key not in seen:
                seen.add(key)
                out.append(checked_triple(subject, t.predicate, obj))
        return out, merged

    def _same_thing(self, label_a: str, types_a: set[str], label_b: str, types_b: set[str]) -> bool:
        specific_a, specific_b = types_a - GENERIC_TYPES, types_b - GENERIC_TYPES
        if not specific_a or not specific_b:
            return False
        related = any(
            x == y or x in self.ontology.superclasses(y) or y in self.ontology.superclasses(x)
            for x in specific_a for y in specific_b if self.ontology.defines(x) and self.ontology.defines(y)
        ) or bool(specific_a & specific_b)
        if not related:
            return False
        a, b = _content(label_a), _content(label_b)
        if not a or not b:
            return False
        if a == b or SequenceMatcher(None, " ".join(a), " ".join(b)).ratio() >= 0.9:
            return True
        if self._is_a(specific_a | specific_b, FOAF + "Agent") or (specific_a | specific_b) & _PEOPLE:
            return False  # "my mother" and "my mother's friend" are two people
        short, long_ = (a, b) if len(a) <= len(b) else (b, a)
        return contains_run(short, long_)


#: A name made of an owner and the thing owned ("Melanie's house", "Dana's new car").
_POSSESSED = re.compile(r"^(?P<owner>[^'’]+)['’]s\s+(?P<thing>\S.*)$")
#: Sentence marks no name carries: a question, an exclamation, or a full stop between two sentences.
_SPEECH = re.compile(r"[?!¿¡]|(?<![^\W\d_])[^\W\d_]*[a-z]{3}\.\s+\S")
#: Words beyond which a label is no longer a name but a sentence copied from the utterance.
NAME_WORDS = 20


def _names(triples: Iterable[ox.Triple]) -> dict[str, set[str]]:
    """Each node's names in the answer, folded: a node's own name given again as another of its values ("charity
    race" as the charity race's transport mode) says nothing about it."""
    out: dict[str, set[str]] = {}
    for t in triples:
        if t.predicate.value in NAME_PROPERTIES and isinstance(t.object, ox.Literal):
            out.setdefault(_node(t.subject), set()).add(fold(t.object.value).strip())
    return out


def _owned_said(value: str, said: Said, need: float) -> bool:
    """A name of an owned thing ("Melanie's house", "Melanie's city") is said only when the thing is: the owner's
    name, said or known, does not say that she has a house or which city it is in."""
    owned = _POSSESSED.match(value.strip())
    return owned is None or said.supports(owned["thing"], need)


def _copied_speech(value: str) -> bool:
    """Whether a name is what someone said rather than a name for a thing: a small model copying the utterance
    ("love that painting! So cool you found such a helpful group") into a label it then hangs facts on. The
    words are all said, so only the shape tells it: sentence marks, or more words than a name has."""
    return bool(_SPEECH.search(value.strip())) or len(_TOKEN.findall(value)) > NAME_WORDS


def _scripts(text: str) -> frozenset[str]:
    """The writing systems of the letters in ``text`` (LATIN, CJK, CYRILLIC, ...), by their Unicode names."""
    found = set()
    for ch in set(text):
        if ch.isalpha():
            name = unicodedata.name(ch, "")
            found.add(name.split(" ", 1)[0] if name else "?")
    return frozenset(found)


def _content(label: str) -> list[str]:
    tokens = _TOKEN.findall(fold(label))
    return [stem(t) for t in tokens if t not in _FILLER] or [stem(t) for t in tokens]


def _said_text(value: str, said: Said, need: float) -> bool:
    """A plain value (a colour, a brand, a place, a currency code): its words were said, or its code's symbol."""
    code = value.strip().upper()
    if code in CURRENCIES:
        return any(sign in said.text if not sign.isalpha() else sign in said.words for sign in CURRENCIES[code]) or (
            code.lower() in said.words
        )
    if said.supports(value, need):
        return True
    compact = re.sub(r"[\s().-]", "", value)
    return bool(compact) and compact.isdigit() and compact in re.sub(r"[\s().-]", "", said.text)


def _duration(t: ox.Triple, value: str, said: Said) -> ox.Triple | None:
    numbers = _DURATION.findall(value)
    return t if numbers and all(said.has_number(n) for n in numbers) else None


def _time_said(value: str, said: Said) -> bool:
    """A time of day ("06:00:00") is said when its hour is ("at 6 am", "18:00")."""
    return int(value.strip()[:2]) in said.clock_hours


def _content_tokens(value: str) -> list[str]:
    """The words and numbers of a value that carry content: no filler words and no single letters (the "s" of
    "Dana's"); a number is one token ("60,000")."""
    folded = fold(value)
    numbers = _DIGITS.findall(folded)
    tokens = numbers + [t for t in _TOKEN.findall(_DIGITS.sub(" ", folded)) if len(t) > 1]
    return [t for t in tokens if t not in _FILLER] or tokens


def _dated(t: ox.Triple, value: str, datatype: str, said: Said) -> ox.Triple | None:
    """A date kept at the precision the words give it: cut back from a day to its month or year when only those
    were said, dropped when none was."""
    parsed = _parse_date(value, datatype)
    if parsed is None:
        return t  # not a date SHACL will accept either: the shapes report it, which is the model's to repair
    precision = _DATES[datatype]
    if datatype == XSD + "dateTime" and said.dates.supports(parsed, DAY):
        hour = _hour(value)
        if hour is None or hour in said.clock_hours:
            return t
        return _with(t, parsed.isoformat(), XSD + "date")
    for level, form, dt in (
        (DAY, parsed.isoformat(), XSD + "date"),
        (MONTH, f"{parsed.year:04d}-{parsed.month:02d}", XSD + "gYearMonth"),
        (YEAR, f"{parsed.year:04d}", XSD + "gYear"),
    ):
        if _finer_or_same(precision, level) and said.dates.supports(parsed, level, from_days=level == precision):
            return t if level == precision and datatype != XSD + "dateTime" else _with(t, form, dt)
    return None


def _finer_or_same(precision: str, level: str) -> bool:
    order = (DAY, MONTH, YEAR)
    return order.index(level) >= order.index(precision)


def _parse_date(value: str, datatype: str) -> date | None:
    try:
        if datatype == XSD + "gYear":
            return date(int(value[:4]), 1, 1)
        if datatype == XSD + "gYearMonth":
            return date(int(value[:4]), int(value[5:7]), 1)
        return date.fromisoformat(value[:10])
    except ValueError:
        return None


def _hour(value: str) -> int | None:
    m = re.search(r"T(\d{2}):(\d{2})", value)
    if m is None or (m[1], m[2]) == ("00", "00"):
        return None
    return int(m[1])


def _with(t: ox.Triple, value: str, datatype: str) -> ox.Triple:
    return ox.Triple(t.subject, t.predicate, ox.Literal(value, datatype=ox.NamedNode(datatype)))


def _quote(literal: ox.Literal) -> str:
    text = literal.value if len(literal.value) <= 60 else literal.value[:59] + "…"
    return '"' + text.replace('"', "'") + '"'


def _node(term: object) -> str:
    if isinstance(term, ox.BlankNode):
        return f"_:{term.value}"
    return term.value if isinstance(term, ox.NamedNode) else ""


def _rename(term: object, into: dict[str, str]) -> object:
    name = _node(term)
    if name in into:
        target = into[name]
        return ox.BlankNode(target[2:]) if target.startswith("_:") else ox.NamedNode(target)
    return term


def _index(triples: Sequence[ox.Triple]) -> tuple[dict[str, set[str]], dict[str, dict[str, set[str]]]]:
    """``(types of each declared node, its links: predicate -> objects that are nodes)``."""
    types: dict[str, set[str]] = {}
    links: dict[str, dict[str, set[str]]] = {}
    for t in triples:
        s = _node(t.subject)
        if t.predicate.value == _TYPE and isinstance(t.object, ox.NamedNode):
            types.setdefault(s, set()).add(t.object.value)
        elif (o := _node(t.object)) and t.predicate.value != PROV + "wasDerivedFrom":
            links.setdefault(s, {}).setdefault(t.predicate.value, set()).add(o)
    return types, links

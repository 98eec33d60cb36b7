"""Stop words: the one list of words that never say what a text or a question is about.

Every part that picks content words (recall's keyword leg and term graph, entity grounding of an utterance or a
question, traversal starts, summaries, the facts benchmark's matching) starts from :data:`STOPWORDS`; a part that
needs more adds one of the named sets below rather than keeping a list of its own.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

#: Function words and the small talk of chat ("wow", "great", "gonna"), lower case.
STOPWORDS = frozenset([
    "a", "about", "above", "after", "again", "against", "all", "almost", "also", "am", "an", "and", "any", "anyone",
    "anything", "are", "aren", "as", "at", "back", "be", "because", "been", "before", "being", "below", "between",
    "both", "but", "by", "can", "cannot", "could", "couldn", "did", "didn", "do", "does", "doesn", "doing", "don",
    "down", "during", "each", "either", "else", "even", "ever", "every", "everyone", "everything", "few", "for",
    "from", "further", "get", "gets", "getting", "going", "gonna", "good", "got", "great", "had", "hadn", "has",
    "hasn", "have", "haven", "having", "he", "hello", "her", "here", "hers", "herself", "hey", "hi", "him",
    "himself", "his", "how", "i", "if", "in", "into", "is", "isn", "it", "its", "itself", "just", "kind", "know",
    "let", "lets", "like", "ll", "look", "looking", "looks", "lot", "lots", "made", "make", "makes", "me", "might",
    "mine", "more", "most", "much", "must", "my", "myself", "nice", "no", "nor", "not", "now", "of", "off", "oh",
    "ok", "okay", "on", "once", "one", "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own",
    "quite", "rather", "re", "really", "said", "same", "say", "says", "see", "seen", "shall", "she", "should",
    "shouldn", "so", "some", "someone", "something", "sort", "still", "such", "sure", "tell", "than", "thank",
    "thanks", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they", "thing",
    "things", "think", "this", "those", "though", "through", "to", "told", "too", "under", "until", "up", "upon",
    "us", "ve", "very", "wanna", "want", "was", "wasn", "way", "we", "well", "were", "weren", "what", "whatever",
    "when", "where", "whether", "which", "while", "who", "whom", "whose", "why", "will", "with", "won", "would",
    "wouldn", "wow", "yeah", "yes", "yet", "you", "your", "yours", "yourself", "yourselves",
])

#: Relative time words: they place a question or an utterance in time, they do not name what it is about.
TIME_WORDS = frozenset([
    "ago", "day", "days", "first", "last", "month", "months", "new", "next", "time", "times", "today", "tomorrow",
    "week", "weeks", "year", "years", "yesterday",
])

#: The words a request to remember wraps its subject in ("please remind me what ...", "name the type of ...").
QUESTION_WORDS = frozenset([
    "another", "came", "come", "done", "go", "less", "many", "may", "name", "names", "old", "per", "please", "recall",
    "remember", "remind", "since", "two", "type", "went",
])

#: The words a question or an utterance names its subject among: grounding, traversal starts, extraction's mentions.
CONTENT_STOPWORDS = STOPWORDS | TIME_WORDS | QUESTION_WORDS

#: Month names in the languages pcm's question frames are read in (English, German, French, Spanish, Italian,
#: Portuguese, Dutch), lower case, without accents where a writer often drops them too, each to its number. A
#: question frame's anchor made only of a month and a year ("June 2025", "junio de 2025") names a time window, not
#: a thing (:func:`pcm.retrieval.frame.checked`).
MONTH_NUMBERS: dict[str, int] = {
    name: number
    for names in (
        ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
         "november", "december"),
        ("januar", "februar", "märz", "april", "mai", "juni", "juli", "august", "september", "oktober", "november",
         "dezember"),
        ("janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août", "septembre", "octobre", "novembre",
         "décembre"),
        ("enero", "febrero", "marzo", "abril", "mayo", "junio", "julio", "agosto", "septiembre", "octubre",
         "noviembre", "diciembre"),
        ("gennaio", "febbraio", "marzo", "aprile", "maggio", "giugno", "luglio", "agosto", "settembre", "ottobre",
         "novembre", "dicembre"),
        ("janeiro", "fevereiro", "março", "abril", "maio", "junho", "julho", "agosto", "setembro", "outubro",
         "novembro", "dezembro"),
        ("januari", "februari", "maart", "april", "mei", "juni", "juli", "augustus", "september", "oktober",
         "november", "december"),
    )
    for number, name in enumerate(names, start=1)
} | {"maerz": 3, "fevrier": 2, "aout": 8, "decembre": 12, "marco": 3}  # the same months written without accents


def contains_run(words: Sequence[str], text: Sequence[str]) -> bool:
    """Whether ``words`` occur in ``text`` (both lists of words) one after another, in that order."""
    n = len(words)
    return any(text[i : i + n] == words for i in range(len(text) - n + 1))


def fold(text: str) -> str:
    """Case-folded, accents removed, apostrophes made straight ("Génial" -> "genial", "Tschüß" -> "tschuss"): the
    form the patterns and word lists are written in. Letters of other scripts stay as they are (an ASCII-only fold
    would erase a Russian or Japanese utterance, and every value checked against it)."""
    decomposed = unicodedata.normalize("NFKD", text.replace("’", "'").casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))

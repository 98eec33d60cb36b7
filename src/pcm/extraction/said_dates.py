"""The dates a text says, at the precision it says them, resolved against the time it was said.

Why: a model asked for a date writes a whole day even when the words say "in 2010"; the grounding check
(:mod:`pcm.extraction.grounding`) keeps a date only when the words support it, and at the precision they support.
So this module answers one question: which days, months and years does this text name? It reads what people
write in a message: ISO and numeric dates, month names with or without a day and a year, bare years, and the
relative expressions that a message time anchors ("yesterday", "last Tuesday", "three weeks ago", "last month",
"next year"), in English and, for the common expressions, in French, German, Spanish, Italian and Portuguese.

A vague expression gives a span, not a day: "last week" is the seven days of the previous week, and a day inside
it is accepted, since the schema has no week type and a day there is as close as the words allow. Nothing here
guesses: an expression it cannot read names no date, and the grounding check then drops the value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, timedelta

from pcm.words import fold

DAY, MONTH, YEAR = "day", "month", "year"

#: Month names and their common abbreviations, by month number, in the languages the relative expressions cover.
MONTH_NAMES: dict[str, int] = {}
for _names in (
    "january february march april may june july august september october november december",
    "janvier fevrier mars avril mai juin juillet aout septembre octobre novembre decembre",
    "januar februar marz april mai juni juli august september oktober november dezember",
    "enero febrero marzo abril mayo junio julio agosto septiembre octubre noviembre diciembre",
    "gennaio febbraio marzo aprile maggio giugno luglio agosto settembre ottobre novembre dicembre",
    "janeiro fevereiro marco abril maio junho julho agosto setembro outubro novembro dezembro",
    "jan feb mar apr may jun jul aug sep oct nov dec",
):
    for _n, _name in enumerate(_names.split(), start=1):
        MONTH_NAMES.setdefault(_name, _n)
MONTH_NAMES.update({"sept": 9, "janv": 1, "fevr": 2, "juil": 7, "ene": 1, "dic": 12, "mrz": 3, "okt": 10, "dez": 12})

#: Weekday names (Monday = 0).
WEEKDAYS: dict[str, int] = {}
for _names in (
    "monday tuesday wednesday thursday friday saturday sunday",
    "lundi mardi mercredi jeudi vendredi samedi dimanche",
    "montag dienstag mittwoch donnerstag freitag samstag sonntag",
    "lunes martes miercoles jueves viernes sabado domingo",
    "lunedi martedi mercoledi giovedi venerdi sabato domenica",
    "segunda terca quarta quinta sexta sabado domingo",
):
    for _n, _name in enumerate(_names.split()):
        WEEKDAYS.setdefault(_name, _n)
# abbreviations; not "mon", "sat" or "sun", which are words first ("mon" is French for "my")
for _abbr, _n in (("tue", 1), ("tues", 1), ("wed", 2), ("thu", 3), ("thur", 3), ("thurs", 3), ("fri", 4)):
    WEEKDAYS[_abbr] = _n

#: Seasons, by the months they span in the northern hemisphere (a season said names its months, at month
#: precision, in the message's year or the one before or after).
SEASONS: dict[str, tuple[int, ...]] = {}
for _months, _names in (
    ((3, 4, 5), "spring springtime printemps fruhling fruhjahr primavera"),
    ((6, 7, 8), "summer summertime ete sommer verano estate verao"),
    ((9, 10, 11), "autumn fall automne herbst otono autunno outono"),
    ((12, 1, 2), "winter wintertime hiver invierno inverno"),
):
    for _name in _names.split():
        SEASONS[_name] = _months

#: Single words that name a day relative to the message (days added to it).
RELATIVE_DAYS: dict[str, int] = {
    "today": 0, "tonight": 0, "yesterday": -1, "tomorrow": 1,
    "aujourd'hui": 0, "aujourdhui": 0, "hier": -1, "demain": 1,
    "heute": 0, "gestern": -1, "morgen": 1, "vorgestern": -2, "ubermorgen": 2,
    "hoy": 0, "ayer": -1, "manana": 1, "anteayer": -2,
    "oggi": 0, "ieri": -1, "domani": 1,
    "hoje": 0, "ontem": -1, "amanha": 1,
}
#: Phrases for today that are not one word ("this morning", "ce soir").
_TODAY_PHRASES = re.compile(
    r"\b(?:this (?:morning|afternoon|evening)|earlier today|just now|ce (?:matin|soir)|cet apres-midi|heute "
    r"(?:morgen|abend)|esta (?:manana|tarde|noche)|stamattina|stasera)\b"
)
_LAST_NIGHT = re.compile(r"\blast night\b|\bhier soir\b|\bgestern abend\b|\banoche\b|\bieri sera\b|\bontem a noite\b")
#: A day of the month said without its month ("on the 21st", "le 3"): the month around the message it falls in.
_DAY_ALONE = re.compile(
    r"\b(?:the|on)\s+(\d{1,2})(?:st|nd|rd|th)\b|\b(?:le|am|el|il)\s+(\d{1,2})(?:er|e|\.)?(?=\s|$)(?!\s*(?:%|:|[.,]\d))"
)
_BEFORE_YESTERDAY = re.compile(r"\bday before yesterday\b|\bavant-hier\b")
_AFTER_TOMORROW = re.compile(r"\bday after tomorrow\b|\bapres-demain\b|\bpasado manana\b")

#: Words for "last" and "next" before a unit or a weekday, and for "this".
_LAST = r"(?:last|past|previous|dernier|derniere|passe|passee|letzte|letzten|letzter|letztes|vergangene|vergangenen|pasado|pasada|scorso|scorsa|passado|passada)"
_NEXT = r"(?:next|coming|prochain|prochaine|nachste|nachsten|nachstes|kommende|kommenden|proximo|proxima|prossimo|prossima)"
_THIS = r"(?:this|ce|cette|diese|diesen|dieses|este|esta|questo|questa)"
#: Units of relative expressions, by language, to one of day / week / month / year / weekend.
UNITS: dict[str, str] = {
    "day": "day", "days": "day", "jour": "day", "jours": "day", "tag": "day", "tagen": "day", "tage": "day",
    "dia": "day", "dias": "day", "giorno": "day", "giorni": "day",
    "week": "week", "weeks": "week", "semaine": "week", "semaines": "week", "woche": "week", "wochen": "week",
    "semana": "week", "semanas": "week", "settimana": "week", "settimane": "week",
    "month": "month", "months": "month", "mois": "month", "monat": "month", "monaten": "month", "monate": "month",
    "mes": "month", "meses": "month", "mese": "month", "mesi": "month",
    "year": "year", "years": "year", "an": "year", "ans": "year", "annee": "year", "annees": "year",
    "jahr": "year", "jahren": "year", "jahre": "year", "ano": "year", "anos": "year", "anno": "year", "anni": "year",
    "weekend": "weekend", "week-end": "weekend", "wochenende": "weekend", "fin de semana": "weekend",
}
#: Number words for "N units ago" (the grounding check has its own, wider table for values).
_COUNT_WORDS: dict[str, int] = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "couple": 2, "few": 3, "un": 1, "une": 1, "deux": 2,
    "trois": 3, "quatre": 4, "cinq": 5, "ein": 1, "einem": 1, "einer": 1, "zwei": 2, "drei": 3, "vier": 4,
    "funf": 5, "uno": 1, "una": 1, "dos": 2, "tres": 3, "cuatro": 4, "cinco": 5, "due": 2, "tre": 3, "dois": 2,
    "duas": 2,
}
_UNIT = "|".join(sorted((re.escape(u) for u in UNITS), key=len, reverse=True))
_COUNT = r"(\d+|" + "|".join(sorted(_COUNT_WORDS, key=len, reverse=True)) + r")"
_AGO = re.compile(rf"\b{_COUNT}\s+(?:{_UNIT})\s+(?:ago|back|earlier)\b|\b(?:il y a|hace|vor|fa)\s+{_COUNT}\s+({_UNIT})\b")
_AGO_UNIT = re.compile(rf"\b{_COUNT}\s+({_UNIT})\s+(?:ago|back|earlier)\b")
_IN_UNITS = re.compile(rf"\b(?:in|dans|en|in)\s+{_COUNT}\s+({_UNIT})\b")
_LAST_UNIT = re.compile(rf"\b{_LAST}\s+({_UNIT})\b|\b({_UNIT})\s+{_LAST}\b")
_NEXT_UNIT = re.compile(rf"\b{_NEXT}\s+({_UNIT})\b|\b({_UNIT})\s+{_NEXT}\b")
_THIS_UNIT = re.compile(rf"\b{_THIS}\s+({_UNIT})\b")
_WEEKDAY = "|".join(sorted(WEEKDAYS, key=len, reverse=True))
_MONTH = "|".join(sorted(MONTH_NAMES, key=len, reverse=True))
_WEEKDAY_WORD = re.compile(rf"\b({_WEEKDAY})s?\b")
_ISO_DAY = re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b")
_ISO_MONTH = re.compile(r"\b(\d{4})-(\d{1,2})\b(?!-\d)")
_NUMERIC = re.compile(r"\b(\d{1,2})[/.](\d{1,2})(?:[/.](\d{2,4}))?\b")
_YEAR = re.compile(r"(?<![\d.,/-])((?:19|20)\d{2})(?![\d])")
_SHORT_YEAR = re.compile(r"(?:^|\s)['’](\d{2})\b")
_DAY_NUMBER = r"(\d{1,2})(?:st|nd|rd|th|er|e|º|\.)?"
_DAY_MONTH = re.compile(rf"\b{_DAY_NUMBER}\s+(?:of\s+|de\s+)?({_MONTH})\.?(?:,?\s+(?:de\s+)?(\d{{4}}))?\b")
_MONTH_DAY = re.compile(rf"\b({_MONTH})\.?\s+{_DAY_NUMBER}\b(?:,?\s+(\d{{4}}))?")
_MONTH_YEAR = re.compile(rf"\b({_MONTH})\.?,?\s+(?:de\s+|of\s+)?(\d{{4}})\b")
_MONTH_ALONE = re.compile(rf"\b({_MONTH})\b")


@dataclass
class SaidDates:
    """What a text says of dates: exact days, months and years, and spans of days (a vague "last week")."""

    days: set[date] = field(default_factory=set)
    months: set[tuple[int, int]] = field(default_factory=set)
    years: set[int] = field(default_factory=set)
    spans: list[tuple[date, date]] = field(default_factory=list)

    def supports(self, value: date, precision: str, *, from_days: bool = True) -> bool:
        """Whether the text says ``value`` at ``precision`` (day, month or year). ``from_days``: a month or year
        also counts as said when a day said lies in it (off when the question is whether the text says a month
        or a year by itself, as when a day that was not said is cut back)."""
        days = self.days if from_days else set()
        if precision == YEAR:
            return (
                value.year in self.years or any(d.year == value.year for d in days)
                or any(y == value.year for y, _ in self.months) or any(a.year <= value.year <= b.year for a, b in self.spans)
            )
        if precision == MONTH:
            key = (value.year, value.month)
            return key in self.months or any((d.year, d.month) == key for d in days) or any(
                (a.year, a.month) <= key <= (b.year, b.month) for a, b in self.spans
            )
        return value in self.days or any(a <= value <= b for a, b in self.spans)

    def update(self, other: SaidDates) -> None:
        self.days |= other.days
        self.months |= other.months
        self.years |= other.years
        self.spans += other.spans


def said_dates(text: str, when: date | None, *, present: bool = True) -> SaidDates:
    """The dates ``text`` names; relative ones only when the message time ``when`` is known. ``present``: whether
    "just", "now" and "currently" name the message's own day (off for the previous turns shown with an utterance:
    "now the hard work starts" in one turn dates nothing the next turn says)."""
    t = fold(text)
    out = SaidDates()
    _absolute(t, when, out)
    if when is not None:
        _relative(t, when, out, present=present)
    return out


def _valid(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _years_for(month: int, when: date | None) -> list[int]:
    """A month named without a year: the message's year, or the year before or after (people name a past or a
    coming month without its year)."""
    if when is None:
        return []
    return [when.year - 1, when.year, when.year + 1]


def _absolute(t: str, when: date | None, out: SaidDates) -> None:
    for m in _ISO_DAY.finditer(t):
        if (d := _valid(int(m[1]), int(m[2]), int(m[3]))) is not None:
            out.days.add(d)
    for m in _ISO_MONTH.finditer(t):
        if 1 <= int(m[2]) <= 12:
            out.months.add((int(m[1]), int(m[2])))
    for m in _NUMERIC.finditer(t):
        a, b = int(m[1]), int(m[2])
        years = [_full_year(m[3])] if m[3] else ([when.year - 1, when.year, when.year + 1] if when else [])
        for year in years:
            for month, day in ((a, b), (b, a)):  # 3/5 is March 5 or 3 May: both are what was written
                if (d := _valid(year, month, day)) is not None:
                    out.days.add(d)
    for m in _YEAR.finditer(t):
        out.years.add(int(m[1]))
    for m in _SHORT_YEAR.finditer(t):
        out.years.add(2000 + int(m[1]) if int(m[1]) < 50 else 1900 + int(m[1]))
    for m in _DAY_MONTH.finditer(t):
        _day_of_month(int(m[1]), MONTH_NAMES[m[2]], m[3], when, out)
    for m in _MONTH_DAY.finditer(t):
        _day_of_month(int(m[2]), MONTH_NAMES[m[1]], m[3], when, out)
    for m in _MONTH_YEAR.finditer(t):
        out.months.add((int(m[2]), MONTH_NAMES[m[1]]))
    words = set(re.findall(r"[a-z]+", t))
    for name in words & SEASONS.keys():
        if name == "fall" and not re.search(r"\b(?:the|this|last|next|in|early|late)\s+fall\b", t):
            continue  # "fall" the verb
        for year in _years_for(0, when):
            out.months.update((year, month) for month in SEASONS[name])
    for m in _MONTH_ALONE.finditer(t):
        if m[1] in ("may", "mar", "sat", "sun", "an", "jan") and not _month_context(t, m.start()):
            continue  # "may" the verb, "mar" a word in Spanish: a month only beside a day, a year or "in"
        for year in _years_for(MONTH_NAMES[m[1]], when):
            out.months.add((year, MONTH_NAMES[m[1]]))


def _month_context(t: str, start: int) -> bool:
    before = t[max(0, start - 8) : start]
    return bool(re.search(r"\b(?:in|en|im|since|until|early|late|mid|last|next|this)\s+$", before))


def _full_year(text: str) -> int:
    year = int(text)
    if len(text) == 2:
        return 2000 + year if year < 50 else 1900 + year
    return year


def _day_of_month(day: int, month: int, year: str | None, when: date | None, out: SaidDates) -> None:
    for y in [int(year)] if year else _years_for(month, when):
        if (d := _valid(y, month, day)) is not None:
            out.days.add(d)
    if year:
        out.months.add((int(year), month))


def _count(word: str) -> int:
    return int(word) if word.isdigit() else _COUNT_WORDS.get(word, 0)


def _relative(t: str, when: date, out: SaidDates, *, present: bool = True) -> None:
    words = set(re.findall(r"[a-z']+", t))
    for word, shift in RELATIVE_DAYS.items():
        if word in words:
            out.days.add(when + timedelta(shift))
    if _TODAY_PHRASES.search(t) or (present and re.search(r"\b(?:just|now|currently)\b", t)):
        out.days.add(when)
    if _LAST_NIGHT.search(t):
        out.days.update({when - timedelta(1), when})
    for m in _DAY_ALONE.finditer(t):
        for shift in (-1, 0, 1):
            month = when.year * 12 + when.month - 1 + shift
            if (d := _valid(month // 12, month % 12 + 1, int(m[1] or m[2]))) is not None:
                out.days.add(d)
    if _BEFORE_YESTERDAY.search(t):
        out.days.add(when - timedelta(2))
    if _AFTER_TOMORROW.search(t):
        out.days.add(when + timedelta(2))
    for m in _WEEKDAY_WORD.finditer(t):
        weekday = WEEKDAYS[m[1]]
        back = (when.weekday() - weekday) % 7 or 7
        ahead = (weekday - when.weekday()) % 7 or 7
        out.days.update({when - timedelta(back), when + timedelta(ahead), when - timedelta(back + 7)})
        if weekday == when.weekday():
            out.days.add(when)
    for m in _AGO.finditer(t):
        n = _count(m[1] or m[2] or "0")
        unit = _AGO_UNIT.search(m[0])
        name = unit[2] if unit else (m[3] or "")
        _shifted(when, -n, UNITS.get(name, ""), out)
    for m in _IN_UNITS.finditer(t):
        _shifted(when, _count(m[1]), UNITS.get(m[2], ""), out)
    for pattern, shift in ((_LAST_UNIT, -1), (_NEXT_UNIT, 1), (_THIS_UNIT, 0)):
        for m in pattern.finditer(t):
            _shifted(when, shift, UNITS.get(m[1] or m[2] or "", ""), out)


def _shifted(when: date, n: int, unit: str, out: SaidDates) -> None:
    """The day, span, month or year ``n`` units from ``when``."""
    if unit == "day":
        out.days.add(when + timedelta(n))
    elif unit in ("week", "weekend"):
        monday = when - timedelta(when.weekday()) + timedelta(7 * n)
        out.spans.append((monday, monday + timedelta(6)) if unit == "week" else (monday + timedelta(4), monday + timedelta(6)))
        if n and unit == "week":  # "two weeks ago" also counts back from the day itself
            out.spans.append((when + timedelta(7 * n - 3), when + timedelta(7 * n + 3)))
    elif unit == "month":
        month = when.year * 12 + when.month - 1 + n
        out.months.add((month // 12, month % 12 + 1))
    elif unit == "year":
        out.years.add(when.year + n)

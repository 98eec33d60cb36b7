"""Exact arithmetic on query results, in code: date differences, counts, sums, first/last ordering.

Why: a model that subtracts dates or adds prices in its head gets them wrong often enough to matter, and an
answer that depends on it cannot be checked. The NL→SPARQL prompt asks for *dates rather than durations*: the
query selects the values, and names the computation in one comment line, e.g.::

    #pcm:compute between(?bought, ?repaired, days)
    #pcm:compute since(?started, years)        -- up to the question's date
    #pcm:compute count(?pet) | sum(?price) | first(?city, ?date) | last(?city, ?date) | min(?x) | max(?x)

This module parses that line and computes the value exactly (``Decimal`` for numbers, calendar arithmetic for
months and years), and formats RDF values for the answer text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from typing import overload

import pyoxigraph as ox

from pcm.backend import Term
from pcm.namespaces import XSD

OPERATIONS = ("between", "since", "until", "count", "sum", "min", "max", "first", "last")
UNITS = ("days", "weeks", "months", "years")
_DIRECTIVE = re.compile(r"#\s*pcm:compute\s+(?P<op>[a-z_]+)\s*\((?P<args>[^)]*)\)", re.IGNORECASE)
_NUMERIC = {XSD + t for t in ("integer", "decimal", "double", "float", "int", "long", "short", "nonNegativeInteger",
                             "positiveInteger", "negativeInteger", "nonPositiveInteger", "unsignedInt", "byte")}
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

Row = Mapping[str, Term]
"""One result row: variable name → pyoxigraph term (unbound variables absent)."""


class ComputeError(ValueError):
    """The compute line names something the results cannot give (fed back to the model as a repair hint)."""


@dataclass(frozen=True)
class Compute:
    """One parsed ``#pcm:compute`` directive."""

    op: str
    args: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.op}({', '.join(self.args)})"


@dataclass(frozen=True)
class Computed:
    """The exact result and the sentence fragment that states it."""

    compute: Compute
    value: object
    text: str
    row: Row | None = None
    """For first/last/min/max: the result row chosen (the evidence is that row's, not every candidate's)."""


def parse_compute(sparql: str) -> Compute | None:
    """The first ``#pcm:compute op(args)`` line of a query, or None. Unknown operations raise ComputeError."""
    match = _DIRECTIVE.search(sparql)
    if match is None:
        return None
    op = match.group("op").lower()
    args = tuple(a.strip() for a in match.group("args").split(",") if a.strip())
    if op not in OPERATIONS:
        raise ComputeError(f"unknown compute operation {op!r}: use one of {', '.join(OPERATIONS)}")
    return Compute(op, args)


def apply(compute: Compute, rows: Sequence[Row], *, as_of: datetime) -> Computed:
    """Run the computation over the result rows (see the module docstring for the operations)."""
    if not rows:
        raise ComputeError("no rows to compute on")
    handler = _HANDLERS[compute.op]
    return handler(compute, rows, as_of)


# ------------------------------------------------------------------------------------------------ operations


# A required variable (the default) is a name or a ComputeError, never None.
@overload
def _var(compute: Compute, index: int, rows: Sequence[Row]) -> str: ...
@overload
def _var(compute: Compute, index: int, rows: Sequence[Row], *, required: bool) -> str | None: ...
def _var(compute: Compute, index: int, rows: Sequence[Row], *, required: bool = True) -> str | None:
    if index >= len(compute.args):
        if required:
            raise ComputeError(f"{compute.op} needs a variable as argument {index + 1}")
        return None
    name = compute.args[index].lstrip("?$")
    if not any(name in row for row in rows):
        raise ComputeError(f"{compute.op}: ?{name} is not bound in any result row; select it")
    return name


def _unit(compute: Compute, index: int) -> str:
    if index >= len(compute.args):
        return "days"
    unit = compute.args[index].strip().lower()
    unit = unit if unit.endswith("s") else unit + "s"
    if unit not in UNITS:
        raise ComputeError(f"unknown unit {compute.args[index]!r}: use one of {', '.join(UNITS)}")
    return unit


def _between(compute: Compute, rows: Sequence[Row], as_of: datetime) -> Computed:
    start_var, end_var = _var(compute, 0, rows), _var(compute, 1, rows)
    unit = _unit(compute, 2)
    row = next((r for r in rows if start_var in r and end_var in r), None)
    if row is None:
        raise ComputeError(f"no row binds both ?{start_var} and ?{end_var}")
    start, end = to_date(row[start_var]), to_date(row[end_var])
    amount = difference(start, end, unit)
    return Computed(compute, amount, f"{format_duration(amount, unit)} (from {format_date(start)} to {format_date(end)})")


def _since(compute: Compute, rows: Sequence[Row], as_of: datetime) -> Computed:
    var = _var(compute, 0, rows)
    unit = _unit(compute, 1)
    start = to_date(next(r[var] for r in rows if var in r))
    amount = difference(start, as_of.date(), unit)
    return Computed(compute, amount, f"{format_duration(amount, unit)} (from {format_date(start)} to {format_date(as_of.date())})")


def _until(compute: Compute, rows: Sequence[Row], as_of: datetime) -> Computed:
    var = _var(compute, 0, rows)
    unit = _unit(compute, 1)
    end = to_date(next(r[var] for r in rows if var in r))
    amount = difference(as_of.date(), end, unit)
    return Computed(compute, amount, f"{format_duration(amount, unit)} (from {format_date(as_of.date())} to {format_date(end)})")


def _count(compute: Compute, rows: Sequence[Row], as_of: datetime) -> Computed:
    var = _var(compute, 0, rows, required=False)
    if var is None:
        n = len({tuple(sorted((k, str(v)) for k, v in r.items())) for r in rows})
    else:
        n = len({str(r[var]) for r in rows if var in r})
    return Computed(compute, n, str(n))


def _sum(compute: Compute, rows: Sequence[Row], as_of: datetime) -> Computed:
    var = _var(compute, 0, rows)
    distinct = {tuple(sorted((k, str(v)) for k, v in r.items())): r for r in rows}
    total = Decimal(0)
    for row in distinct.values():
        if var in row:
            total += to_number(row[var])
    return Computed(compute, total, format_number(total))


def _extreme(compute: Compute, rows: Sequence[Row], as_of: datetime) -> Computed:
    value_var = _var(compute, 0, rows)
    key_var = (_var(compute, 1, rows, required=False) if compute.op in ("first", "last") else None) or value_var
    candidates = [r for r in rows if value_var in r and key_var in r]
    if not candidates:
        raise ComputeError(f"no row binds ?{value_var} and ?{key_var}")
    ordered = sorted(candidates, key=lambda r: (sort_key(r[key_var]), str(r[value_var])))
    chosen = ordered[0] if compute.op in ("first", "min") else ordered[-1]
    value = chosen[value_var]
    text = format_term(value)
    if key_var != value_var:
        text += f" ({format_term(chosen[key_var])})"
    return Computed(compute, value, text, chosen)


_HANDLERS = {
    "between": _between,
    "since": _since,
    "until": _until,
    "count": _count,
    "sum": _sum,
    "min": _extreme,
    "max": _extreme,
    "first": _extreme,
    "last": _extreme,
}


# ------------------------------------------------------------------------------------------------ values


def to_date(term: object) -> date:
    """A calendar date from an xsd:date, xsd:dateTime, xsd:gYearMonth (first of the month) or xsd:gYear literal."""
    text = term.value if isinstance(term, ox.Literal) else str(term)
    text = text.strip()
    try:
        if re.fullmatch(r"-?\d{4}", text):
            return date(int(text), 1, 1)
        if re.fullmatch(r"\d{4}-\d{2}", text):
            return date(int(text[:4]), int(text[5:7]), 1)
        if "T" in text:
            return datetime.fromisoformat(text.replace("Z", "+00:00")).date()
        return date.fromisoformat(text[:10])
    except ValueError as exc:
        raise ComputeError(f"{text!r} is not a date") from exc


def to_number(term: object) -> Decimal:
    text = term.value if isinstance(term, ox.Literal) else str(term)
    try:
        return Decimal(text.replace(",", "").lstrip("$€£"))
    except InvalidOperation as exc:
        raise ComputeError(f"{text!r} is not a number") from exc


def difference(start: date, end: date, unit: str) -> int | Decimal:
    """Whole calendar months/years (a month counts once its day is reached), exact days, weeks to one decimal."""
    if unit == "days":
        return (end - start).days
    if unit == "weeks":
        return (Decimal((end - start).days) / Decimal(7)).quantize(Decimal("0.1"))
    months = (end.year - start.year) * 12 + (end.month - start.month)
    if months > 0 and end.day < start.day:
        months -= 1
    elif months < 0 and end.day > start.day:
        months += 1
    return months if unit == "months" else int(months / 12)


def sort_key(term: object) -> tuple[int, object]:
    """Order numbers numerically, dates chronologically, anything else as text (each kind after the previous)."""
    if isinstance(term, ox.Literal):
        if term.datatype.value in _NUMERIC:
            try:
                return (0, to_number(term))
            except ComputeError:
                pass
        try:
            return (1, to_date(term))
        except ComputeError:
            pass
        return (2, term.value)
    return (2, str(term))


def format_duration(value: int | Decimal, unit: str) -> str:
    """``26 days``, ``1 week``, ``2.5 weeks``: a counted difference as answers write it."""
    number = format_number(Decimal(value))
    singular = Decimal(value) in (Decimal(1), Decimal(-1))
    return f"{number} {unit[:-1] if singular else unit}"


def format_number(value: Decimal) -> str:
    """549 rather than 549.0 or 5.49E+2; two decimals only when cents are there."""
    if value == value.to_integral_value():
        return str(int(value))
    return format(value.normalize(), "f")


_WRITTEN_DATE = re.compile(
    r"\b(?:(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday),?\s+)?(\d{1,2})\s+(" + "|".join(MONTHS)
    + r")\s+(\d{4})\b|\b(\d{4})-(\d{2})-(\d{2})\b"
)


def written_dates(text: str) -> list[tuple[int, date]]:
    """The calendar dates ``text`` writes (``Tuesday 4 February 2025``, ``4 February 2025``, ``2025-02-04``), each
    with where it starts; a month without a day names no date."""
    found: list[tuple[int, date]] = []
    for match in _WRITTEN_DATE.finditer(text):
        try:
            if match.group(1):
                found.append((match.start(), date(int(match.group(3)), MONTHS.index(match.group(2)) + 1, int(match.group(1)))))
            else:
                found.append((match.start(), date(int(match.group(4)), int(match.group(5)), int(match.group(6)))))
        except ValueError:
            continue
    return found


def format_date(value: date) -> str:
    return f"{_WEEKDAYS[value.weekday()]} {value.day} {MONTHS[value.month - 1]} {value.year}"


def format_term(term: object, labels: Mapping[str, str] | None = None) -> str:
    """How a value reads in an answer: labels for IRIs, calendar dates, tidy numbers."""
    if isinstance(term, ox.NamedNode):
        if labels and term.value in labels:
            return labels[term.value]
        return readable_iri(term.value)
    if isinstance(term, ox.Literal):
        datatype = term.datatype.value
        if datatype == XSD + "date":
            try:
                return format_date(to_date(term))
            except ComputeError:
                return term.value
        if datatype == XSD + "gYearMonth":
            try:
                d = to_date(term)
                return f"{MONTHS[d.month - 1]} {d.year}"
            except ComputeError:
                return term.value
        if datatype == XSD + "dateTime":
            try:
                moment = datetime.fromisoformat(term.value.replace("Z", "+00:00"))
                return f"{format_date(moment.date())} {moment:%H:%M}"
            except ValueError:
                return term.value
        if datatype == XSD + "time":
            return term.value[:5] if re.fullmatch(r"\d{2}:\d{2}:00(?:\.0+)?", term.value) else term.value
        if datatype in _NUMERIC:
            try:
                return format_number(to_number(term))
            except ComputeError:
                return term.value
        if datatype == XSD + "boolean":
            return "yes" if term.value in ("true", "1") else "no"
        return term.value
    if term is None:
        return ""
    return str(term)


def readable_iri(iri: str) -> str:
    """A last resort for an IRI without a label: its last segment with dashes as spaces."""
    local = iri.rstrip("/#").rsplit("#", 1)[-1].rsplit("/", 1)[-1]
    return local.replace("-", " ").replace("_", " ") or iri


__all__ = [
    "Compute",
    "ComputeError",
    "Computed",
    "OPERATIONS",
    "UNITS",
    "apply",
    "difference",
    "MONTHS",
    "format_date",
    "format_duration",
    "format_number",
    "format_term",
    "parse_compute",
    "readable_iri",
    "sort_key",
    "to_date",
    "to_number",
]

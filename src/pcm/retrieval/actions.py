"""What a person did of one kind, worked out over every such action: "What did I buy most recently?", "How much has
Dana spent on the things she bought?", "On what date did Dana buy the espresso machine?".

Why: the fact context holds the lines nearest the question, which is what a question about one thing needs; a
question about the latest, the first or the total of a kind of action needs every action of the kind. Over the ask
gold set a 1.5B model answered "How much has Dana spent on the things she bought?" with the alternator repair's
$712 (neither purchase was among the nearest lines), named the older purchase as the most recent, and answered "not
in memory" beside the purchase line that carried the date. The ontology names its action classes for their verbs
(``BuyAction``, ``OrderAction``, ``pcm:RepairAction``), so the question's verb picks the class, the graph gives
every action of it whose agent is the person (:file:`queries/ask/actions.rq`), and the answer is worked out in code.
It names each action it rests on, so a wrong pick shows; anything it cannot settle (no class for the verb, a person
it cannot place, two actions that match "the espresso machine" equally) is left to the model.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pyoxigraph as ox

from pcm.retrieval.postprocess import ComputeError, format_date, format_number, format_term, to_number
from pcm.retrieval.wording import AskedAction, action_classes, asked_action
from pcm.retrieval.worked import Worked, content_words, person

if TYPE_CHECKING:
    from pcm.context import MemoryContext
    from pcm.retrieval.grounding import GroundedEntity

ROWS = 2000
"""Cap on the rows read for one question (an action with two objects and two dates gives four)."""
NOT_DONE = frozenset({"PotentialActionStatus", "FailedActionStatus"})
"""Statuses of an action that did not happen: a planned purchase is not among the things bought."""

_SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£"}


@dataclass
class _Act:
    iri: str
    label: str = ""
    objects: list[str] = field(default_factory=list)
    descriptions: list[str] = field(default_factory=list)
    when: ox.Literal | None = None
    price: Decimal | None = None
    currency: str = ""
    status: str = ""
    returned: bool = False
    """The person also returned the thing acted on (a purchase taken back)."""
    graphs: set[str] = field(default_factory=set)

    @property
    def name(self) -> str:
        """What the answer names: the thing acted on (``Rumours``), else the action itself."""
        return ", ".join(self.objects) or self.label

    @property
    def day(self) -> date | None:
        """The action's calendar day when its date is a full one (a year alone cannot be ordered by the day)."""
        if self.when is None or not re.match(r"\d{4}-\d{2}-\d{2}", self.when.value):
            return None
        try:
            return date.fromisoformat(self.when.value[:10])
        except ValueError:
            return None

    def words(self) -> set[str]:
        return content_words(" ".join([self.label, *self.objects, *self.descriptions]))


def action_answer(
    memory: MemoryContext, question: str, entities: Sequence[GroundedEntity], classes: Iterable[str],
    *, today: date,
) -> Worked | None:
    """The worked answer, or None when the question is not of these kinds or the graph does not settle it."""
    asked = asked_action(question, action_classes(classes))
    if asked is None:
        return None
    agent = person(asked.who, owner=memory.naming.owner, owner_name=memory.manifest.owner, entities=entities)
    if agent is None:
        return None
    acts = [a for a in _actions(memory, asked.action_class, agent) if a.status not in NOT_DONE]
    if not acts:
        return None
    if asked.kind == "total":
        return _total(acts, asked)
    if asked.kind == "when":
        return _when(acts, asked)
    return _extreme(acts, asked, today)


def actions_of(memory: MemoryContext, action_class: str | Sequence[str], agent: str) -> list[_Act]:
    """``agent``'s actions of ``action_class`` (or of any of several classes) that happened (a planned or failed
    one is not among them)."""
    return [a for a in _actions(memory, action_class, agent) if a.status not in NOT_DONE]


def latest_action(acts: Sequence[_Act], *, latest: bool, today: date, verb: str = "") -> Worked | None:
    """The latest (or earliest) of ``acts`` by full date, up to ``today``."""
    return _extreme(acts, AskedAction("latest" if latest else "earliest", "", "", verb), today)


def total_of(acts: Sequence[_Act]) -> Worked | None:
    """The sum of the prices of ``acts`` (those taken back left out), per currency."""
    return _total(acts, AskedAction("total", "", "", ""))


def _extreme(acts: Sequence[_Act], asked: AskedAction, today: date) -> Worked | None:
    dated = [(d, a) for a in acts if (d := a.day) is not None and d <= today]
    if not dated:
        return None
    pick = max if asked.kind == "latest" else min
    chosen_day = pick(d for d, _ in dated)
    chosen = sorted((a for d, a in dated if d == chosen_day), key=lambda a: a.iri)
    text = "; ".join(f"{a.name} ({a.label or asked.verb}: {format_date(chosen_day)}" + (", since returned)" if a.returned else ")")
                     for a in chosen)
    unplaced = [a for a in acts if a.day is None]
    if unplaced:
        shown = ", ".join(f"{a.label or a.name}" + (f" ({format_term(a.when)})" if a.when is not None else "")
                          for a in unplaced)
        text += f". Not ordered by date (no full date stored): {shown}"
    order = "latest" if asked.kind == "latest" else "earliest"
    return Worked(text + ".", _graphs(chosen), f"the {order} of the person's {len(acts)} stored actions of this kind")


def _total(acts: Sequence[_Act], asked: AskedAction) -> Worked | None:
    kept = [a for a in acts if not a.returned]
    priced = [a for a in kept if a.price is not None]
    if not priced:
        return None
    sums: dict[str, Decimal] = {}
    for act in priced:
        assert act.price is not None
        sums[act.currency] = sums.get(act.currency, Decimal(0)) + act.price
    total = " and ".join(_money(amount, currency) for currency, amount in sorted(sums.items()))
    parts = "; ".join(f"{a.name} {_money(a.price, a.currency)}" for a in priced if a.price is not None)
    text = f"{total} in total ({parts})"
    unpriced = [a for a in kept if a.price is None]
    if unpriced:
        text += ". No price stored for: " + ", ".join(a.label or a.name for a in unpriced)
    returned = [a for a in acts if a.returned]
    if returned:
        text += ". Returned, so not counted: " + ", ".join(a.label or a.name for a in returned)
    return Worked(text + ".", _graphs(priced), f"summed over the person's {len(priced)} priced actions of this kind")


def _when(acts: Sequence[_Act], asked: AskedAction) -> Worked | None:
    wanted = content_words(asked.what)
    if not wanted:
        return None
    scored = sorted(((len(wanted & a.words()), a.iri, a) for a in acts), key=lambda t: (-t[0], t[1]))
    best = scored[0]
    if best[0] == 0 or (len(scored) > 1 and scored[1][0] == best[0]):
        return None
    act = best[2]
    if act.when is None:
        return None
    return Worked(f"{format_term(act.when)} ({act.label or act.name}).", _graphs([act]),
                  "the date of the person's stored action that matches the question")


def _actions(memory: MemoryContext, action_class: str | Sequence[str], agent: str) -> list[_Act]:
    from pcm.resources import render_query
    from pcm.sparql import iri_term, values_clause

    classes = [action_class] if isinstance(action_class, str) else list(action_class)
    query = render_query("ask/actions", classes=values_clause("class", classes), agent=iri_term(agent),
                         limit=str(ROWS))
    rows: list[dict[str, Any]] = memory.store.select(query).dicts()
    acts: dict[str, _Act] = {}
    for row in rows:
        act = acts.setdefault(row["action"].value, _Act(row["action"].value))
        act.graphs.add(row["graph"].value)
        if "label" in row and not act.label:
            act.label = row["label"].value
        if "object" in row:
            shown = row["objectLabel"].value if "objectLabel" in row else format_term(row["object"])
            if shown not in act.objects:
                act.objects.append(shown)
        act.returned = act.returned or "return" in row
        if "objectDescription" in row and row["objectDescription"].value not in act.descriptions:
            act.descriptions.append(row["objectDescription"].value)
        when = row.get("start") or row.get("end")
        if isinstance(when, ox.Literal) and (act.when is None or when.value < act.when.value):
            act.when = when
        if "price" in row and act.price is None:
            with contextlib.suppress(ComputeError):
                act.price = to_number(row["price"])
            act.currency = row["currency"].value if "currency" in row else ""
        if "status" in row:
            act.status = re.split(r"[/#]", row["status"].value)[-1]
    return [acts[k] for k in sorted(acts)]


def _graphs(acts: Iterable[_Act]) -> tuple[str, ...]:
    return tuple(sorted({g for a in acts for g in a.graphs}))


def _money(amount: Decimal | None, currency: str) -> str:
    number = format_number(amount if amount is not None else Decimal(0))
    symbol = _SYMBOLS.get(currency.upper())
    if symbol:
        return f"{symbol}{number}"
    return f"{number} {currency}".strip()


__all__ = ["action_answer", "actions_of", "latest_action", "total_of",]

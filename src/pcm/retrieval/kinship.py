"""Who a person's brother, daughter or wife is, read from the kinship facts; and "not in memory" when the person's
relatives are stored and that one is not.

Why: over the ask gold set a 1.5B model asked "What is the name of Dana's brother?" beside "Dana Whitfield: has
sister Joanna" answered "Joanna". Which relative the question asks is a word the ontology names (OntoBio's
``hasBrother``, ``hasSister``, ...), so the question is answered from the person's facts through that predicate:
the relatives it names when it has them; "not in memory" when the person has other relatives stored but none of
this kind and none in the kind's gender-neutral form (``hasSibling``, ``schema:sibling``), which a brother could
hide behind; otherwise (nothing stored about the family, or only the neutral form) the model reads the facts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pcm.namespaces import BIO, OB, REL, SCHEMA
from pcm.retrieval.wording import asked_kin
from pcm.retrieval.worked import Worked, person

if TYPE_CHECKING:
    from pcm.context import MemoryContext
    from pcm.retrieval.grounding import GroundedEntity

#: A relative asked for by kind, with the gender-neutral kind that may hold it.
KINDS: dict[str, str] = {
    "brother": "sibling", "sister": "sibling", "son": "child", "daughter": "child", "mother": "parent",
    "father": "parent", "husband": "spouse", "wife": "spouse", "aunt": "", "uncle": "", "cousin": "",
    "grandparent": "", "grandchild": "", "sibling": "sibling", "child": "child", "parent": "parent",
    "spouse": "spouse",
}
#: Predicates of each gender-neutral kind beyond OntoBio's ``has<Kind>``.
NEUTRAL: dict[str, tuple[str, ...]] = {
    "sibling": (SCHEMA + "sibling", REL + "siblingOf"),
    "child": (SCHEMA + "children", REL + "parentOf"),
    "parent": (SCHEMA + "parent", REL + "childOf"),
    "spouse": (SCHEMA + "spouse", REL + "spouseOf", REL + "lifePartnerOf", BIO + "partner"),
}
@dataclass(frozen=True)
class _Asked:
    who: str
    kind: str
    alone: bool
    """Nothing else is asked ("..., and where does she live?" is not alone)."""


def kin_answer(memory: MemoryContext, question: str, entities: Sequence[GroundedEntity]) -> Worked | None:
    """The relatives of the asked kind, "not in memory" when the family is stored without them, else None."""
    asked = asked_kin(question, KINDS)
    if asked is None:
        return None
    agent = person(asked.who, owner=memory.naming.owner, owner_name=memory.manifest.owner, entities=entities)
    if agent is None:
        return None
    name = memory.manifest.owner if agent == memory.naming.owner else next(
        (e.label for e in entities if e.iri == agent), asked.who)
    return relatives_answer(memory, agent, asked.kind, name=name, alone=asked.alone)


def relatives_answer(memory: MemoryContext, agent: str, kind: str, *, name: str, alone: bool = True,
                     count: bool = False) -> Worked | None:
    """``agent``'s relatives of ``kind`` (a key of :data:`KINDS`), "not in memory" when the family is stored
    without them, else None. ``alone``: nothing else is asked, so the names are the whole answer. ``count``: how
    many there are, then their names."""
    asked = _Asked(name, kind, alone)
    relatives = _relatives(memory, agent)
    general = KINDS[asked.kind]
    if general == asked.kind:  # "children": sons and daughters too
        wanted = {_has(k) for k, g in KINDS.items() if g == general} | set(NEUTRAL.get(general, ()))
        hiding: set[str] = set()
    else:
        wanted = {_has(asked.kind)}
        hiding = {_has(general), *NEUTRAL.get(general, ())} if general else set()
    named = [r for r in relatives if r[0] in wanted]
    if named:
        if not asked.alone:
            return None
        graphs = tuple(sorted({g for *_, g in named}))
        names = list(dict.fromkeys(label for _, label, _ in named))
        if count:
            return Worked(f"{len(names)} ({_listed(names)}).", graphs, f"counted over the person's {asked.kind} facts")
        return Worked(_listed(names), graphs, f"read from the person's {asked.kind} facts")
    if not relatives or any(p in hiding for p, _, _ in relatives):
        return None
    stored = "; ".join(f"{_kind_word(p)} {label}" for p, label, _ in relatives)
    # an abstention cites nothing: the relatives are named only to show what is stored
    return Worked(f"Not in memory: no {asked.kind} of {name} is stored (stored relatives: {stored}).", (),
                  f"the person's relatives are stored and none is a {asked.kind}")


def _has(kind: str) -> str:
    return OB + "has" + kind.capitalize()


def _listed(names: Sequence[str]) -> str:
    unique = list(dict.fromkeys(names))
    return unique[0] if len(unique) == 1 else ", ".join(unique[:-1]) + " and " + unique[-1]


def _relatives(memory: MemoryContext, agent: str) -> list[tuple[str, str, str]]:
    """``(predicate, label, graph)`` of each relative the person's facts name."""
    from pcm.resources import render_query
    from pcm.sparql import iri_term, values_clause

    predicates = sorted({_has(k) for k in KINDS} | {p for ps in NEUTRAL.values() for p in ps})
    query = render_query("ask/kin", person=iri_term(agent), predicates=values_clause("p", predicates))
    rows: list[dict[str, Any]] = memory.store.select(query).dicts()
    return [(r["p"].value, r["label"].value if "label" in r else r["kin"].value, r["graph"].value) for r in rows]


def _kind_word(predicate: str) -> str:
    local = re.split(r"[/#]", predicate)[-1]
    return re.sub(r"^has", "", local).lower() if local.startswith("has") else local.lower()


__all__ = ["KINDS", "kin_answer", "relatives_answer"]

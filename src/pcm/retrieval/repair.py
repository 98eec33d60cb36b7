"""The repair loop: run the model's query, tell failures apart, relax deterministically, then ask again.

Outcomes are told apart because each needs a different fix: a **parse error** or a **refusal** (the checker's
reason), an **execution error** or a **timeout**, an **empty result**, and a **suspicious result** (bare IRIs where
values were asked; ``pcm:Preference`` nodes where the question compares dates; a compute line naming a variable the
query does not bind; many rows from a query tied to nothing the memory names, which answers for everyone). Before the model is asked again about an empty result, cheap deterministic relaxations are
tried, cumulatively: exact strings become case-insensitive ``CONTAINS`` over labels, classes take their subclasses,
and then one constraint at a time is dropped (a FILTER, or a constant-valued property). Every query tried and its
outcome is kept in the trace (``pcm ask --explain``).

The relaxations rewrite the query text at the token level (see :mod:`pcm.sparql.lexer`); every
rewritten query goes through the safety checks again, so a rewrite can never produce something unsafe.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING

import pyoxigraph as ox

from pcm.backend import QueryResult, Solutions
from pcm.errors import QueryError
from pcm.layout import EXTRACTION_PREFIX, IMPORT_PREFIX
from pcm.llm.base import LLMClient, Message
from pcm.namespaces import PCM, PREFIXES, RDF, RDFS, SCHEMA, SKOS
from pcm.query_safety import QueryRunner, QueryTimeout
from pcm.retrieval.nl2sparql import Draft, QueryForm, ask_model, repair_message
from pcm.retrieval.postprocess import Compute, ComputeError, apply
from pcm.sparql.check import QueryRefused, SafeQuery, check_query, expand_hierarchy
from pcm.sparql.lexer import (
    Token,
    apply_edits,
    expand,
    filters,
    group_close,
    string_value,
)
from pcm.sparql.query import parse

if TYPE_CHECKING:
    from pcm.context import MemoryContext
    from pcm.ontology import Ontology

OK, REFUSED, PARSE_ERROR, EXECUTION_ERROR, TIMEOUT, EMPTY, SUSPICIOUS, NO_QUERY, BAD_REPLY = (
    "ok", "refused", "parse_error", "execution_error", "timeout", "empty", "suspicious", "no_query", "bad_reply",
)
#: Relaxed variants tried per empty result (each is one query).
MAX_RELAXATIONS = 8
#: Suspicions the pipeline can live with when rounds run out (labels are resolved in code).
TOLERABLE = frozenset({"bare_iris"})

_LABELS = (RDFS + "label", SKOS + "prefLabel", SKOS + "altLabel", SCHEMA + "name", SCHEMA + "alternateName",
           "http://xmlns.com/foaf/0.1/name", "http://xmlns.com/foaf/0.1/nick")
_LABEL_PATH = "(" + "|".join(f"<{p}>" for p in (RDFS + "label", SKOS + "altLabel", SCHEMA + "name",
                                                  "http://xmlns.com/foaf/0.1/name")) + ")"
#: Rows from which a query tied to no individual of the memory and no name (see :meth:`RepairLoop.suspicious`)
#: is suspicious: a personal memory's questions are about its owner or something named, and "which espresso
#: machine did I buy" answered with every purchase anyone in the memory made is wrong, however well it ran.
UNANCHORED_ROWS = 5
_NAME_TEST = re.compile(r"\b(CONTAINS|STRSTARTS|STRENDS|REGEX|SAMETERM)\s*\(|=\s*\"|\bVALUES\b", re.IGNORECASE)
_AGGREGATE = re.compile(r"\b(COUNT|SUM|AVG|MIN|MAX|SAMPLE|GROUP_CONCAT)\s*\(", re.IGNORECASE)
_TEMPORAL = re.compile(
    r"\b(when|date|dates|day|before|after|first|last|earliest|latest|since|until|ago|how long|year|month|week)\b",
    re.IGNORECASE,
)


@dataclass
class TraceStep:
    """One query tried, and what came of it."""

    round: int
    source: str
    """``model``, ``relaxation: <what>`` or ``cache``."""
    sparql: str
    outcome: str
    detail: str = ""
    rows: int = 0
    ms: float = 0.0

    def as_json(self) -> dict[str, object]:
        return {
            "round": self.round,
            "source": self.source,
            "sparql": self.sparql,
            "outcome": self.outcome,
            "detail": self.detail,
            "rows": self.rows,
            "ms": round(self.ms, 1),
        }


@dataclass
class Attempt:
    """A query that ran, with its result (``suspicion`` set when the result looks wrong)."""

    safe: SafeQuery
    result: QueryResult
    compute: Compute | None
    suspicion: str | None = None
    suspicion_detail: str = ""


@dataclass
class RepairResult:
    """The accepted attempt (None when nothing usable came out) and everything tried on the way."""

    attempt: Attempt | None
    trace: list[TraceStep] = field(default_factory=list)
    calls: int = 0
    prompt_tokens: list[int] = field(default_factory=list)
    no_query: str | None = None


# ------------------------------------------------------------------------------------------------ the loop


@dataclass
class RepairLoop:
    """Everything one question's loop needs; :meth:`run` drives it."""

    memory: MemoryContext
    ontology: Ontology
    runner: QueryRunner
    client: LLMClient
    question: str
    system: str
    user: str
    rounds: int
    max_limit: int
    as_of: datetime
    context_hint: Callable[[], str] = lambda: ""
    """Extra grounding for an empty result (the properties around the matched entities), built only when needed."""
    form: QueryForm | None = None
    """Ask for the constrained JSON query form (compiled to SPARQL in code) instead of free SPARQL."""

    def run(self) -> RepairResult:
        out = RepairResult(None)
        messages = [Message.user(self.user)]
        fallback: Attempt | None = None
        for round_ in range(self.rounds):
            draft, tokens = ask_model(self.client, self.system, messages, self.form,
                                      max_tokens=self.memory.settings.ask.query_tokens)
            out.calls += 1
            out.prompt_tokens.append(tokens)
            if draft.no_query is not None:
                out.trace.append(TraceStep(round_, "model", "", NO_QUERY, draft.no_query))
                out.no_query = draft.no_query
                break
            if draft.problem is not None or draft.sparql is None:
                out.trace.append(TraceStep(round_, "model", draft.sparql or draft.raw[:400], BAD_REPLY, draft.problem or ""))
                messages = self._next(messages, draft, draft.problem or "the reply could not be used", "")
                continue
            attempt, step = self.execute(draft.sparql, draft.compute, round_, "model")
            out.trace.append(step)
            if step.outcome == OK and attempt is not None:
                out.attempt = attempt
                return out
            if step.outcome == EMPTY:
                relaxed = self.relax(draft, round_, out.trace)
                if relaxed is not None:
                    out.attempt = relaxed
                    return out
            if step.outcome == SUSPICIOUS and attempt is not None and attempt.suspicion in TOLERABLE:
                fallback = fallback or attempt
            problem, hint = self.describe(step, attempt)
            following = self._next(messages, draft, problem, hint)
            if following == messages:
                break  # the same prompt again would get the same reply: nothing left to try
            messages = following
        out.attempt = fallback
        return out

    def _next(self, messages: list[Message], draft: Draft, problem: str, hint: str) -> list[Message]:
        """Keep the first question, the last reply and the new feedback (older rounds add tokens, not help)."""
        return [messages[0], Message.assistant(draft.raw[:6000] or "(empty reply)"), Message.user(repair_message(problem, hint))]

    # -------------------------------------------------------------------------------------------- one query

    def execute(self, sparql: str, compute: Compute | None, round_: int, source: str) -> tuple[Attempt | None, TraceStep]:
        started = time.perf_counter()
        step = TraceStep(round_, source, sparql, OK)
        try:
            safe = check_query(sparql, max_limit=self.max_limit, prefixes={"m": self.memory.naming.namespace})
        except QueryRefused as refused:
            step.outcome = PARSE_ERROR if refused.kind == "syntax" else REFUSED
            step.detail = str(refused)
            step.ms = (time.perf_counter() - started) * 1000
            return None, step
        safe = faster(safe, self.ontology, self.memory.naming.namespace, self.max_limit)
        step.sparql = safe.text
        try:
            result = self.runner.run(safe)
        except QueryTimeout as error:
            step.outcome, step.detail = TIMEOUT, str(error)
            step.ms = (time.perf_counter() - started) * 1000
            return None, step
        except QueryError as error:
            step.outcome, step.detail = EXECUTION_ERROR, str(error)
            step.ms = (time.perf_counter() - started) * 1000
            return None, step
        attempt = Attempt(safe, result, compute)
        step.rows = _row_count(result)
        if safe.notes:
            step.detail = "; ".join(safe.notes)
        if is_empty(result):
            step.outcome = EMPTY
        else:
            suspicion, detail = self.suspicious(attempt)
            if suspicion is not None:
                attempt.suspicion, attempt.suspicion_detail = suspicion, detail
                step.outcome, step.detail = SUSPICIOUS, detail
        step.ms = (time.perf_counter() - started) * 1000
        return attempt, step

    def relax(self, draft: Draft, round_: int, trace: list[TraceStep]) -> Attempt | None:
        assert draft.sparql is not None
        for name, text in relaxations(draft.sparql, self.ontology, prefixes={"m": self.memory.naming.namespace}):
            attempt, step = self.execute(text, draft.compute, round_, f"relaxation: {name}")
            trace.append(step)
            if step.outcome == OK and attempt is not None:
                return attempt
        return None

    def suspicious(self, attempt: Attempt) -> tuple[str | None, str]:
        """A result that ran but probably does not answer the question (see the module docstring)."""
        result = attempt.result
        if attempt.compute is not None and isinstance(result, Solutions):
            try:
                apply(attempt.compute, result.dicts(), as_of=self.as_of)
            except ComputeError as error:
                return "compute", f"the compute line {attempt.compute} failed: {error}"
        if not isinstance(result, Solutions):
            return None, ""
        values = [t for row in result.rows for t in row if t is not None]
        if values and all(isinstance(t, ox.NamedNode | ox.BlankNode) for t in values):
            return "bare_iris", "the result holds only IRIs; select their rdfs:label or the literal values asked for"
        if len(result.rows) > UNANCHORED_ROWS and not anchored(attempt.safe.text, self.memory.naming.namespace):
            return (
                "unanchored",
                f"it returned {len(result.rows)} rows about anyone: no pattern names m:owner or a matched entity, and "
                "no FILTER matches a name; tie it to m:owner (schema:agent m:owner) or to what the question names",
            )
        if _TEMPORAL.search(self.question):
            iris = sorted({t.value for t in values if isinstance(t, ox.NamedNode)})[:50]
            if iris and self._preferences(iris):
                return (
                    "preference_dates",
                    "the result holds pcm:Preference nodes but the question is about dates; preferences carry no "
                    "dates: query the actions or events (with schema:startDate) instead",
                )
        return None, ""

    def _preferences(self, iris: Sequence[str]) -> bool:
        from pcm.retrieval.grounding import entity_types

        preference = self.ontology.subclasses(PCM + "Preference")
        return any(set(types) & preference for _, types in entity_types(self.memory, iris).values())

    def describe(self, step: TraceStep, attempt: Attempt | None) -> tuple[str, str]:
        """The repair message for one failed step: what happened, and a hint for the fix."""
        if step.outcome == PARSE_ERROR:
            return f"Your query does not parse: {step.detail}", "Check braces, dots, semicolons and prefixes."
        if step.outcome == REFUSED:
            return f"Your query was refused: {step.detail}", "Write one read-only SELECT or ASK query."
        if step.outcome == TIMEOUT:
            return (
                f"Your query was stopped: {step.detail}.",
                "Start from m:owner or the matched entity IRIs; avoid variable predicates and patterns that share "
                "no variable (cross products).",
            )
        if step.outcome == EXECUTION_ERROR:
            return f"Running your query failed: {step.detail}", "Fix the part of the query the error names."
        if step.outcome == EMPTY:
            hint = (
                "Check every class and property against USED IN THIS MEMORY, use the matched entity IRIs, match "
                "names with CONTAINS on rdfs:label, and make details OPTIONAL."
            )
            around = self.context_hint()
            if around:
                hint += "\nWhat is stated around the matched entities:\n" + around
            tried = " Case-insensitive labels, subclasses and dropping one constraint at a time were tried too."
            return "Your query returned no rows." + tried, hint
        if step.outcome == SUSPICIOUS:
            return f"Your query ran, but its result looks wrong: {step.detail}.", "Rewrite it so it selects what the question asks."
        return step.detail or "The reply could not be used.", ""


def anchored(sparql: str, namespace: str) -> bool:
    """Whether a query is tied to something: an individual of the memory (``m:owner``, a matched entity) outside
    the prologue, or a test on a name or value (CONTAINS, REGEX, ``= "..."``, VALUES)."""
    body = "\n".join(line for line in sparql.splitlines() if not line.lstrip().upper().startswith(("PREFIX", "BASE")))
    return bool(re.search(r"(?<![\w:])m:[A-Za-z0-9_]", body) or f"<{namespace}" in body or _NAME_TEST.search(body))


def faster(safe: SafeQuery, ontology: Ontology, namespace: str, max_limit: int) -> SafeQuery:
    """The checked query with its hierarchy paths expanded (:func:`pcm.sparql.check.expand_hierarchy`),
    checked again; the query as it was when the expansion does not apply or would not parse."""
    expanded = expand_hierarchy(safe, lambda kind, iri: hierarchy_closure(ontology, kind, iri))
    if expanded is safe:
        return safe
    try:
        again = check_query(expanded.text, max_limit=max_limit, prefixes={"m": namespace})
    except QueryRefused:
        return safe
    return SafeQuery(text=again.text, form=again.form, original=safe.original, notes=expanded.notes)


@lru_cache(maxsize=4096)
def hierarchy_closure(ontology: Ontology, kind: str, iri: str) -> frozenset[str]:
    """``iri`` and everything below it by rdfs:subClassOf / rdfs:subPropertyOf in the ontology graph (what
    ``rdfs:subClassOf*`` matches in the store's ontology graph, without the equivalences of Ontology.subclasses)."""
    from rdflib import RDFS, URIRef

    predicate = RDFS.subClassOf if kind == "class" else RDFS.subPropertyOf
    return frozenset(str(t) for t in ontology.graph.transitive_subjects(predicate, URIRef(iri)))


def is_empty(result: QueryResult) -> bool:
    """No rows, or only rows of unbound values and zero counts (an aggregate over nothing)."""
    if isinstance(result, bool):
        return False
    if isinstance(result, list):
        return not result
    for row in result.rows:
        for term in row:
            if term is None:
                continue
            if isinstance(term, ox.Literal) and term.value in ("0", "0.0") and term.datatype.value.endswith(
                ("integer", "decimal", "double")
            ):
                continue
            return False
    return True


def _row_count(result: QueryResult) -> int:
    if isinstance(result, bool):
        return 1
    return len(result)


# ------------------------------------------------------------------------------------------------ relaxations


def relaxations(sparql: str, ontology: Ontology, *, prefixes: Mapping[str, str] | None = None) -> Iterator[tuple[str, str]]:
    """Deterministic relaxations of a query, cumulative: labels, then subclasses, then one constraint dropped.

    Labels and subclasses only widen how names and classes match. Dropping a constraint changes the question, so
    it is not tried on aggregates (a relaxed count answers another question) and never drops what pins the query
    to the memory's own individuals (``schema:agent m:owner``: whose purchase it was is not optional), nor the
    name filters the label relaxation wrote.
    """
    known = {**PREFIXES, **(prefixes or {})}
    current = sparql
    produced = 0
    for name, rewrite in (("case-insensitive labels", contains_labels), ("subclasses", lambda t: subclasses(t, ontology, known))):
        relaxed = rewrite(current)
        if relaxed != current:
            current = relaxed
            produced += 1
            yield name, current
    if _AGGREGATE.search(sparql):
        return
    for name, text in drop_one(current, namespace=known.get("m", "")):
        if produced >= MAX_RELAXATIONS:
            return
        produced += 1
        yield name, text


def contains_labels(sparql: str) -> str:
    """Exact label strings and ``?x = "text"`` filters become case-insensitive CONTAINS over labels."""
    query = parse(sparql)
    tokens = query.tokens
    prefixes = {**PREFIXES, **query.prefixes}
    edits: list[tuple[int, int, str]] = []
    inserts: dict[int, list[str]] = {}
    fresh = 0
    for i, token in enumerate(tokens):
        if token.kind != "string" or i == 0:
            continue
        previous = tokens[i - 1]
        end = _literal_end(tokens, i)
        needle = string_value(token.text).lower()
        if expand(previous, prefixes) in _LABELS and _is_object(tokens, i):
            fresh += 1
            var = f"?_label{fresh}"
            edits.append((previous.start, tokens[end].end, f"{_LABEL_PATH} {var}"))
            close = group_close(tokens, i)
            inserts.setdefault(close, []).append(f" FILTER(CONTAINS(LCASE(STR({var})), {_quote(needle)}))")
        elif previous.text == "=" and i >= 2:
            span = _operand_before(tokens, i - 1)
            if span is not None:
                start, var = span
                edits.append((tokens[start].start, tokens[end].end, f"CONTAINS(LCASE(STR({var})), {_quote(needle)})"))
    if not edits:
        return sparql
    return _apply(sparql, edits, inserts, tokens)


def subclasses(sparql: str, ontology: Ontology, prefixes: Mapping[str, str]) -> str:
    """``?x a C`` becomes ``?x a/rdfs:subClassOf* C`` for each class C that has subclasses."""
    query = parse(sparql)
    tokens = query.tokens
    declared = {**PREFIXES, **prefixes, **query.prefixes}
    edits: list[tuple[int, int, str]] = []
    for i, token in enumerate(tokens[:-1]):
        is_type = token.text == "a" or expand(token, declared) == RDF + "type"
        if not is_type or (i > 0 and tokens[i - 1].text in ("/", "^", "|")) or tokens[i + 1].text in ("/", "|", "*", "+", "?"):
            continue
        cls = expand(tokens[i + 1], declared)
        if cls and len(ontology.subclasses(cls)) > 1:
            edits.append((token.start, token.end, f"<{RDF}type>/<{RDFS}subClassOf>*"))
    if not edits:
        return sparql
    return _apply(sparql, edits, {}, tokens)


def drop_one(sparql: str, *, namespace: str = "") -> Iterator[tuple[str, str]]:
    """Each FILTER, then each property with a constant value whose subject stays constrained, dropped alone
    (constraints naming one of the memory's individuals, ``m:...`` or ``<namespace...>``, and our own label filters
    are kept)."""
    tokens = parse(sparql).tokens
    for start, end in filters(tokens):
        shown = " ".join(sparql[tokens[start].start : tokens[end].end].split())
        if "?_label" in shown:
            continue
        yield f"dropped {_short(shown)}", sparql[: tokens[start].start] + sparql[tokens[end].end :]
    for (start, end), shown in _constant_pairs(tokens, sparql):
        value = shown.split()[-1]
        if value.startswith("m:") or (namespace and value.startswith(f"<{namespace}")):
            continue
        yield f"dropped {_short(shown)}", sparql[:start] + sparql[end:]


# ------------------------------------------------------------------------------------------------ token helpers


def _quote(value: str) -> str:
    return str(ox.Literal(value))


def _literal_end(tokens: Sequence[Token], i: int) -> int:
    """Index of the last token of the literal starting at ``i`` (string plus @lang or ^^datatype)."""
    if i + 1 < len(tokens) and tokens[i + 1].kind == "lang":
        return i + 1
    if i + 2 < len(tokens) and tokens[i + 1].kind == "dtype":
        return i + 2
    return i


def _is_object(tokens: Sequence[Token], i: int) -> bool:
    """The string is an object: followed by ``.``, ``;``, ``,``, ``}`` or a FILTER (not inside an expression)."""
    end = _literal_end(tokens, i)
    following = tokens[end + 1].text if end + 1 < len(tokens) else "}"
    return following in (".", ";", ",", "}", "]") or following.upper() in ("FILTER", "OPTIONAL", "BIND", "MINUS")


def _operand_before(tokens: Sequence[Token], eq: int) -> tuple[int, str] | None:
    """The left operand of ``=`` when it is ``?v`` or ``F(?v)`` / ``F(G(?v))``: (start index, variable)."""
    before = tokens[eq - 1]
    if before.kind == "var":
        return eq - 1, before.text
    if before.text != ")":
        return None
    level = 0
    for j in range(eq - 1, -1, -1):
        if tokens[j].text == ")":
            level += 1
        elif tokens[j].text == "(":
            level -= 1
            if level == 0:
                if j == 0 or tokens[j - 1].kind != "word" or tokens[j - 1].upper not in ("STR", "LCASE", "UCASE"):
                    return None
                inner = [t for t in tokens[j:eq] if t.kind == "var"]
                if len(inner) != 1 or any(t.kind not in ("var", "word", "punct") for t in tokens[j:eq]):
                    return None
                return j - 1, inner[0].text
    return None


def _apply(text: str, edits: list[tuple[int, int, str]], inserts: Mapping[int, list[str]], tokens: Sequence[Token]) -> str:
    """Apply span replacements and insertions (before the tokens at the given indexes)."""
    changes = [(start, end, new) for start, end, new in edits]
    changes += [(tokens[i].start, tokens[i].start, "".join(parts) + " ") for i, parts in inserts.items()]
    return apply_edits(text, changes)


_SUBJECT_KINDS = ("var", "iri", "pname", "bnode")
_ENDS = frozenset({"FILTER", "OPTIONAL", "BIND", "MINUS", "VALUES", "GRAPH", "SERVICE", "UNION", "SELECT"})


def _constant_pairs(tokens: Sequence[Token], text: str) -> Iterator[tuple[tuple[int, int], str]]:
    """Character spans of ``verb constant`` pairs whose removal leaves a valid query with the subject still bound.

    Only pairs of statements with at least two pairs are offered, so the subject keeps a pattern of its own.
    """
    for segments in _statements(tokens):
        if len(segments) < 2:
            continue
        for n, (a, b) in enumerate(segments):
            if not _constant_pair(tokens[a : b + 1]):
                continue
            shown = " ".join(text[tokens[a].start : tokens[b].end].split())
            if n == 0:
                yield (tokens[a].start, tokens[segments[1][0]].start), shown
            else:
                yield (tokens[a - 1].start, tokens[b].end), shown  # the ';' before the pair goes with it


def _constant_pair(pieces: Sequence[Token]) -> bool:
    """``verb object``: a plain IRI (or ``a``) verb and one constant object (IRI, number, boolean or literal)."""
    if len(pieces) < 2 or (pieces[0].kind not in ("iri", "pname") and pieces[0].text != "a"):
        return False
    rest = pieces[1:]
    first = rest[0]
    if len(rest) == 1:
        return first.kind in ("iri", "pname", "number", "string") or first.text.lower() in ("true", "false")
    return first.kind == "string" and (
        (len(rest) == 2 and rest[1].kind == "lang") or (len(rest) == 3 and rest[1].kind == "dtype")
    )


def _statements(tokens: Sequence[Token]) -> Iterator[list[tuple[int, int]]]:
    """Simple triples blocks: per block, the (first, last) token indexes of each ``;``-separated verb/object pair.

    A block with brackets or parentheses (blank-node lists, collections, grouped paths) is skipped: that only means
    fewer relaxations are tried, never a wrong rewrite.
    """
    filter_ends = {end for _, end in filters(tokens)}
    n = len(tokens)
    i = 0
    while i < n:
        token = tokens[i]
        previous = tokens[i - 1] if i > 0 else None
        starts = token.kind in _SUBJECT_KINDS and (
            previous is None or previous.text in ("{", ".", "}") or (i - 1) in filter_ends
        )
        if not starts:
            i += 1
            continue
        depth = token.depth
        j = i + 1
        while j < n and not (
            tokens[j].depth == depth and (tokens[j].text in (".", "}", "{") or (tokens[j].kind == "word" and tokens[j].upper in _ENDS))
        ):
            j += 1
        body = tokens[i + 1 : j]
        if body and not any(t.text in ("(", ")", "[", "]") for t in body):
            segments: list[tuple[int, int]] = []
            start = i + 1
            for k in range(i + 1, j + 1):
                if k == j or tokens[k].text == ";":
                    if k > start:
                        segments.append((start, k - 1))
                    start = k + 1
            yield segments
        i = max(j, i + 1)


def _short(text: str, width: int = 70) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def around_entities(memory: MemoryContext, iris: Sequence[str], ontology: Ontology, short: Callable[[str], str]) -> str:
    """For an empty result: which properties the matched entities actually have (out and in), one line each."""
    if not iris:
        return ""
    from pcm.sparql import values_clause

    query = (
        "SELECT ?e ?p ?dir (COUNT(*) AS ?n) WHERE { " + values_clause("e", list(iris)[:12]) + " "
        "{ GRAPH ?g { ?e ?p ?o } BIND(\"out\" AS ?dir) } UNION { GRAPH ?g { ?o ?p ?e } BIND(\"in\" AS ?dir) } "
        f"FILTER(STRSTARTS(STR(?g), {EXTRACTION_PREFIX}) || STRSTARTS(STR(?g), {IMPORT_PREFIX})) "
        "} GROUP BY ?e ?p ?dir ORDER BY ?e ?dir ?p LIMIT 200"
    )
    lines: dict[str, list[str]] = {}
    for row in memory.store.select(query).dicts():
        name = ontology.curie(row["p"].value)
        lines.setdefault(row["e"].value, []).append(name if row["dir"].value == "out" else f"^{name}")
    return "\n".join(f"- {short(e)}: {', '.join(props)}" for e, props in lines.items())


__all__ = [
    "Attempt",
    "RepairLoop",
    "RepairResult",
    "TraceStep",
    "anchored",
    "around_entities",
    "contains_labels",
    "drop_one",
    "is_empty",
    "relaxations",
    "subclasses",
]


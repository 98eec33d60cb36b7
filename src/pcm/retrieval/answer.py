"""The answer and its evidence: a short sentence from the bindings, the facts used, the utterances they came from.

Evidence for a SPARQL answer is *the triples the query matched*, not a guess: the query's WHERE group is run again
as ``SELECT *`` (so every variable is visible), the rows that agree with the answer rows are kept, each triple
pattern is filled in with a row's values, and the graphs holding those triples are looked up. An extraction graph
names its utterance (docs/DESIGN.md §3), a superseded statement in the history graph names the utterance it came from
and the one that replaced it, and a post matched directly is its own evidence. So a citation points at the
utterance where the fact was said, and a fact said twice cites both.

The sentence is composed in code from the bindings (labels for IRIs, dates written out, exact numbers), so the same
result always reads the same. The model is only asked to write prose on the fallback paths (traversal facts or
recalled utterances, ``pcm/prompts/retrieval/answer.v2.md``), where it must also say when the context does not answer the question;
what it writes is then tidied in code (:func:`tidy_answer`): ISO dates written out as everywhere else, and the days
between two dates counted for a "how many days after/before" question, which the prompt tells the model not to
compute.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

import pyoxigraph as ox

from pcm.backend import QueryResult, Solutions, datetime_or_none
from pcm.errors import QueryError
from pcm.layout import HISTORY
from pcm.llm.base import LLMClient, Message, Request
from pcm.models import EvidenceFact
from pcm.models import Message as Said
from pcm.namespaces import PROV
from pcm.prompts import PromptFile, load
from pcm.query_safety import QueryRunner
from pcm.retrieval.postprocess import (
    Computed,
    difference,
    format_date,
    format_duration,
    format_term,
    written_dates,
)
from pcm.sparql.check import SafeQuery, check_query
from pcm.sparql.query import parse, query_shape
from pcm.words import STOPWORDS, contains_run, fold

if TYPE_CHECKING:
    from pcm.context import MemoryContext
    from pcm.index import RecallHit
    from pcm.ontology import Ontology
    from pcm.settings import AskConfig

#: Rows written out in an answer sentence.
ANSWER_ROWS = 10
NOT_IN_MEMORY = "Not in memory: nothing stored answers this question."
OPERATION = "answer"


# ------------------------------------------------------------------------------------------------ evidence


def sparql_evidence(
    memory: MemoryContext, runner: QueryRunner, safe: SafeQuery, result: QueryResult, ontology: Ontology, labels: Mapping[str, str]
) -> tuple[list[EvidenceFact], list[Said]]:
    """The facts a query's answer used and the posts they came from (see the module docstring)."""
    config = memory.settings.ask
    shape = query_shape(safe.text)
    rows = _evidence_rows(runner, safe, result, shape.projected if shape else [], config)
    if shape is None or rows is None:
        return [], posts_of(memory, _derived_posts(memory, _iris(result)))
    ground = _ground(shape.patterns, rows, config.evidence_facts)
    located = _locate(memory, ground)
    layout = memory.naming.layout
    history = _history_posts(memory, {s for (s, _, _), g in located if g == layout.history})
    named = {t[1:-1] for (s, _, o), _ in located for t in (s, o) if t.startswith("<")}
    labels = {**labels_for(memory, named - set(labels)), **labels}
    facts: list[EvidenceFact] = []
    for (s, p, o), graph in located:
        posts = _posts_for(memory, s, graph, history)
        if graph == layout.conversation and not posts:
            continue
        if not (layout.is_fact_graph(graph) or graph in (layout.history, layout.conversation)):
            continue
        facts.append(EvidenceFact(subject=s, predicate=p, object=o, graph=graph, posts=list(posts),
                                   text=_fact_text(s, p, o, ontology, labels)))
    facts.sort(key=lambda f: (f.posts, f.subject, f.predicate, f.object))
    post_iris = list(dict.fromkeys(p for f in facts for p in f.posts))
    if not post_iris:
        post_iris = _derived_posts(memory, _iris(result))
    return facts, posts_of(memory, post_iris)


def where_group(text: str) -> tuple[str, str] | None:
    """(prologue, WHERE group text) of a query (:meth:`pcm.sparql.query.Query.where_group`)."""
    return parse(text).where_group()


def _evidence_rows(
    runner: QueryRunner, safe: SafeQuery, result: QueryResult, projected: Sequence[str], config: AskConfig
) -> list[dict[str, Any]] | None:
    """The matches behind the answer rows: the WHERE group as ``SELECT *`` (at most ``config.evidence_rows``), its
    answer variables bound by VALUES (when there are at most ``config.evidence_values`` answers).

    Binding the answer's values makes the engine start from them (a 100 ms group becomes a 0.2 ms lookup) and
    keeps only the matches of the rows that were answered (the chosen row of an ORDER BY ... LIMIT 1, say).
    """
    parts = where_group(safe.text)
    if parts is None:
        return None
    prologue, group = parts
    answers = result.dicts() if isinstance(result, Solutions) else []
    shared = [v for v in projected if isinstance(result, Solutions) and v in result.variables]
    values = _values(shared, answers) if shared and 0 < len(answers) <= config.evidence_values else ""
    try:
        # the group already passed the path checks as part of the answered query: only the read-only checks again
        evidence = check_query(f"{prologue}SELECT * WHERE {{ {values} {group} }} LIMIT {config.evidence_rows}", policy=False)
        found = runner.run(evidence)
    except QueryError:
        return None
    if not isinstance(found, Solutions):
        return None
    rows = found.dicts()
    if not isinstance(result, Solutions):
        return rows if result is not False else []
    shared = [v for v in shared if v in found.variables]
    if not shared:
        return rows
    # a set of the answers that bind every shared variable: thousands of evidence rows against hundreds of answers
    # are then one lookup a row, not a comparison with every answer
    complete = {tuple(a[v] for v in shared) for a in answers if all(v in a for v in shared)}
    partial = [a for a in answers if not all(v in a for v in shared)]

    def kept(row: Mapping[str, Any]) -> bool:
        if all(v in row for v in shared):
            return tuple(row[v] for v in shared) in complete or any(_agrees(row, a, shared) for a in partial)
        return any(_agrees(row, a, shared) for a in answers)

    return [row for row in rows if kept(row)]


def _values(variables: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> str:
    """``VALUES (?a ?b) { ... }`` of the answer rows (UNDEF where a row leaves a variable unbound)."""
    lines = []
    for row in rows:
        cells = []
        for v in variables:
            term = row.get(v)
            cells.append("UNDEF" if term is None or isinstance(term, ox.BlankNode | ox.Triple) else str(term))
        lines.append("(" + " ".join(cells) + ")")
    return "VALUES (" + " ".join(f"?{v}" for v in variables) + ") { " + " ".join(dict.fromkeys(lines)) + " }"


def _agrees(row: Mapping[str, Any], answer: Mapping[str, Any], shared: Sequence[str]) -> bool:
    return all(v not in row or v not in answer or row[v] == answer[v] for v in shared)


def _ground(
    patterns: Sequence[tuple[str, str, str]], rows: Sequence[Mapping[str, Any]], most: int
) -> list[tuple[str, str, str]]:
    """Triple patterns filled in with each row's values, as N-Triples terms (patterns left partly open are skipped),
    up to ``most``."""
    out: dict[tuple[str, str, str], None] = {}
    for row in rows:
        for pattern in patterns:
            terms = []
            for term in pattern:
                if term.startswith("?"):
                    value = row.get(term[1:])
                    if value is None or isinstance(value, ox.BlankNode | ox.Triple):
                        break
                    terms.append(str(value))
                elif term.startswith("_:"):
                    break
                else:
                    terms.append(term)
            else:
                out[(terms[0], terms[1], terms[2])] = None
                if len(out) >= most:
                    return list(out)
    return list(out)


def _locate(memory: MemoryContext, triples: Sequence[tuple[str, str, str]]) -> list[tuple[tuple[str, str, str], str]]:
    """The named graphs holding each ground triple."""
    found: list[tuple[tuple[str, str, str], str]] = []
    for start in range(0, len(triples), 100):
        chunk = [t for t in triples[start : start + 100] if not t[0].startswith('"')]
        if not chunk:
            continue
        values = " ".join(f"({s} {p} {o})" for s, p, o in chunk)
        query = f"SELECT ?s ?p ?o ?g WHERE {{ VALUES (?s ?p ?o) {{ {values} }} GRAPH ?g {{ ?s ?p ?o }} }}"
        for row in memory.store.select(query).rows:
            s, p, o, g = row
            found.append(((str(s), str(p), str(o)), g.value))
    return sorted(set(found))


def _history_posts(memory: MemoryContext, subjects: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """For rdf:Statement records in the history graph: the posts that said and that replaced the old value."""
    iris = sorted(s for s in subjects if s.startswith("<"))
    if not iris:
        return {}
    query = (
        "SELECT ?st ?post WHERE { VALUES ?st { " + " ".join(iris) + " } GRAPH " + HISTORY + " { "
        f"?st (<{PROV}wasDerivedFrom>|<https://w3id.org/pcm/ontology#supersededBy>) ?post }} }}"
    )
    out: dict[str, list[str]] = {}
    for row in memory.store.select(query).rows:
        out.setdefault(str(row[0]), []).append(row[1].value)
    return {k: tuple(sorted(set(v))) for k, v in out.items()}


def _posts_for(memory: MemoryContext, subject: str, graph: str, history: Mapping[str, tuple[str, ...]]) -> tuple[str, ...]:
    layout = memory.naming.layout
    if graph.startswith(layout.extraction_prefix):
        post = memory.naming.post_of_graph(graph)
        return (post,) if post else ()
    if graph == layout.history:
        return history.get(subject, ())
    if graph == layout.conversation:
        iri = subject[1:-1]
        return (iri,) if iri.startswith(memory.naming.post("")) else ()
    return ()


def _iris(result: QueryResult) -> list[str]:
    if not isinstance(result, Solutions):
        return []
    return sorted({t.value for row in result.rows for t in row if isinstance(t, ox.NamedNode)})


def _derived_posts(memory: MemoryContext, iris: Sequence[str]) -> list[str]:
    """Entity-level provenance (``?entity prov:wasDerivedFrom ?post``) when triple-level evidence is unavailable."""
    if not iris:
        return []
    from pcm.sparql import values_clause

    query = f"SELECT DISTINCT ?post WHERE {{ {values_clause('e', list(iris)[:200])} ?e <{PROV}wasDerivedFrom> ?post }}"
    return [row[0].value for row in memory.store.select(query).rows if row[0] is not None]


def posts_of(memory: MemoryContext, iris: Sequence[str]) -> list[Said]:
    """The stored posts, in conversation order (time, then session and position).

    The side index holds the record the store lists of every post it has indexed, so those come from memory; the
    others (no index, or a post not yet in it) from our own query rather than ``MemoryStore.posts``, which filters
    after scanning every post (see posts.rq).
    """
    chosen = list(dict.fromkeys(iris))[:200]
    if not chosen:
        return []
    records = memory.index.post_records(chosen) if memory.settings.index_enabled else {}
    found = [
        (r.time, r.position, Said(post=r.iri, source_id=r.source_id, text=r.text, session=r.session, time=r.time,
                                  speaker=r.speaker, role=r.role))
        for r in records.values()
    ]
    found += _stored_posts(memory, [iri for iri in chosen if iri not in records])
    found.sort(key=lambda item: (item[0].timestamp() if item[0] else 0.0, item[2].session, item[1], item[2].post))
    return [post for _, _, post in found]


def _stored_posts(memory: MemoryContext, iris: Sequence[str]) -> list[tuple[datetime | None, int, Said]]:
    from pcm.resources import render_query
    from pcm.sparql import values_clause

    if not iris:
        return []
    found = []
    for row in memory.store.select(render_query("ask/posts", posts=values_clause("post", list(iris)))).dicts():
        when = datetime_or_none(row.get("time"))
        found.append((
            when,
            int(row["position"].value),
            Said(
                post=row["post"].value, source_id=row["source_id"].value if "source_id" in row else None,
                text=row["text"].value, session=row["session"].value, time=when,
                speaker=row["speaker"].value if "speaker" in row else None, role=row["role"].value,
            ),
        ))
    return found


def posts_from_hits(hits: Sequence[RecallHit]) -> list[Said]:
    """The messages recall found, as an answer cites them (without the score that ranked them)."""
    return [Said(post=h.post, source_id=h.source_id, text=h.text, session=h.session, time=h.time, speaker=h.speaker,
                 role=h.role) for h in hits]


def _fact_text(s: str, p: str, o: str, ontology: Ontology, labels: Mapping[str, str]) -> str:
    def show(term: str) -> str:
        if term.startswith("<"):
            iri = term[1:-1]
            return labels.get(iri) or ontology.curie(iri)
        parsed = _literal(term)
        return format_term(parsed) if parsed is not None else term

    return f"{show(s)} {ontology.curie(p[1:-1])} {show(o)}"


def _literal(text: str) -> ox.Literal | None:
    try:
        return next(iter(ox.parse(f"<urn:x:s> <urn:x:p> {text} .", format=ox.RdfFormat.N_TRIPLES))).object
    except (SyntaxError, StopIteration, ValueError):
        return None


def labels_for(memory: MemoryContext, iris: Iterable[str]) -> dict[str, str]:
    """rdfs:label of each IRI that has one (one query)."""
    from pcm.retrieval.grounding import entity_types

    chosen = sorted(set(iris))[:500]
    return {iri: label for iri, (label, _) in entity_types(memory, chosen).items() if label}


def result_iris(result: QueryResult) -> list[str]:
    return _iris(result)


# ------------------------------------------------------------------------------------------------ the sentence


def compose(question: str, result: QueryResult, computed: Computed | None, labels: Mapping[str, str]) -> str:
    """A short answer from the bindings (see the module docstring)."""
    if computed is not None:
        return _sentence(computed.text)
    if isinstance(result, bool):
        return "Yes." if result else "No."
    if isinstance(result, list):
        shown = [f"{format_term(t.subject, labels)} {format_term(t.predicate, labels)} {format_term(t.object, labels)}" for t in result[:ANSWER_ROWS]]
        return _sentence("; ".join(shown)) if shown else NOT_IN_MEMORY
    variables = [v for v in result.variables if not v.startswith("_")]
    # each term formatted once (a city or a shop recurs down a thousand-row answer) and repeated rows dropped
    # through a set: at 1M posts a friend's trips are a thousand rows, and formatting every cell twice and
    # comparing each row with every row before it was most of the answer's time
    formatted: dict[object, str] = {}
    seen: set[tuple[tuple[str, str], ...]] = set()
    rows: list[list[tuple[str, str]]] = []
    for row in result.dicts():
        cells = []
        for v in variables:
            if v not in row:
                continue
            term = row[v]
            text = formatted.get(term)
            if text is None:
                text = formatted[term] = format_term(term, labels)
            if text:
                cells.append((v, text))
        key = tuple(cells)
        if cells and key not in seen:
            seen.add(key)
            rows.append(cells)
    if not rows:
        return NOT_IN_MEMORY
    if re.match(r"\s*how many\b", question, re.IGNORECASE) and not (len(rows) == 1 and len(rows[0]) == 1 and rows[0][0][1].replace(".", "").isdigit()):
        firsts = list(dict.fromkeys(cells[0][1] for cells in rows))
        return _sentence(f"{len(firsts)} ({_join(firsts)})")
    if all(len(cells) == 1 for cells in rows):
        return _sentence(_join([cells[0][1] for cells in rows][:ANSWER_ROWS]) + _more(len(rows)))
    parts = []
    for cells in rows[:ANSWER_ROWS]:
        head, rest = cells[0][1], cells[1:]
        parts.append(head + (" (" + ", ".join(f"{_words(v)}: {val}" for v, val in rest) + ")" if rest else ""))
    return _sentence("; ".join(parts) + _more(len(rows)))


def _join(values: Sequence[str]) -> str:
    values = list(values)
    if len(values) <= 1:
        return "".join(values)
    return ", ".join(values[:-1]) + " and " + values[-1]


def _more(n: int) -> str:
    return f" (and {n - ANSWER_ROWS} more)" if n > ANSWER_ROWS else ""


def _words(variable: str) -> str:
    return re.sub(r"(?<=[a-z])(?=[A-Z])", " ", variable).replace("_", " ").lower()


def _sentence(text: str) -> str:
    text = text.strip()
    if not text:
        return NOT_IN_MEMORY
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


# ------------------------------------------------------------------------------------------------ fallback prose


def answer_prompt() -> PromptFile:
    return load("retrieval/answer.v2.md")


@dataclass(frozen=True)
class ContextAnswer:
    """What the model made of fallback context: an answer citing context items, or nothing (not in memory)."""

    text: str | None
    cited: tuple[int, ...]
    unquoted: tuple[str, ...] = ()
    """Names the model wrote that the context does not write (the answer was refused for them)."""


# ``[cites: 2, 3]``; small models also write ``[cites: [2], [3]]``
_ANSWER = re.compile(r"ANSWER:\s*(?P<text>.*?)\s*(?:\[\s*cites?\s*:?\s*(?P<cites>[\d,\s\[\]]*)\])?\s*$", re.IGNORECASE | re.DOTALL)


def answer_from_context(
    client: LLMClient, question: str, context: Sequence[str], *, as_of: datetime, owner_name: str
) -> ContextAnswer:
    """Ask the model to answer from numbered context lines only, or to say the memory does not hold the answer."""
    prompt = answer_prompt()
    numbered = "\n".join(f"[{i}] {line}" for i, line in enumerate(context, 1))
    user = prompt.render("user", date=f"{as_of.date().isoformat()} ({as_of:%A})", owner_name=owner_name,
                         context=numbered or "(nothing)", question=" ".join(question.split()))
    reply = client.complete(Request(system=prompt.parts["system"], messages=[Message.user(user)], operation=OPERATION, max_tokens=400))
    found = parse_context_answer(reply.text, len(context))
    if found.text is None:
        return found
    unquoted = unquoted_names(found.text, [*context, question])
    if unquoted:
        return ContextAnswer(None, (), unquoted)
    return ContextAnswer(tidy_answer(question, found.text), found.cited)


#: A name in an answer: two or more capitalised words in a row (no comma, bracket or "and" between them).
_NAME_BREAK = re.compile(r"[,;:()\[\]{}.!?\"“”«»]|\s(?:and|und|et|y|e)\s", re.IGNORECASE)
_WORD = re.compile(r"[^\W\d_][\w'’-]*|\d+")


def unquoted_names(answer: str, context: Sequence[str]) -> tuple[str, ...]:
    """The names in ``answer`` put together from names in ``context`` that the context never writes in that order.

    A small model answering from context lines sometimes builds a name out of two it was shown ("Seattle Animal
    Clinic" from "Sellwood Animal Clinic" and a move to Seattle): every word is in the context, so a check of words
    passes it, yet no one said the name. A name here is two or more capitalised words in a row (a possessive ends
    one: "Dana's Subaru" is two names); it is quoted when its words occur in that order in the context (case,
    accents and the possessive aside). Only names made wholly of words the context writes capitalised are judged:
    a word the context does not write as a name is the answer's own wording (a sentence's first word, a German
    noun, a weekday written out), not part of a name put together from the context's.
    """
    said = _folded_words(" \n ".join(context))
    named = {_fold_word(t) for line in context for t in _WORD.findall(line) if t[:1].isupper()}
    found: list[str] = []
    for part in _NAME_BREAK.split(answer):
        run: list[str] = []
        for token in [*_WORD.findall(part), ""]:
            if token[:1].isupper():
                run.append(token)
                if not re.search(r"['’]s$", token):
                    continue
            while run and (_fold_word(run[0]) in STOPWORDS or _fold_word(run[0]) not in named):
                run.pop(0)
            words = [_fold_word(t) for t in run]
            if len(words) >= 2 and all(w in named for w in words) and not contains_run(words, said):
                found.append(" ".join(run))
            run = []
    return tuple(dict.fromkeys(found))


def _fold_word(token: str) -> str:
    return re.sub(r"'s$", "", fold(token))


def _folded_words(text: str) -> list[str]:
    return [_fold_word(t) for t in _WORD.findall(text)]


_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_HOW_MANY = re.compile(r"\bhow\s+many\s+(days|weeks|months|years)\b", re.IGNORECASE)


def tidy_answer(question: str, text: str) -> str:
    """A model's answer as pcm writes answers: ISO dates written out (``Tuesday 4 February 2025``); for a question
    asking how many days (weeks, months, years) lie between two things, when the answer gives exactly two dates,
    the difference counted in code and put first (the prompt asks the model for the dates, not the arithmetic)."""
    dates = [found for _, found in written_dates(text)]
    text = _ISO_DATE.sub(lambda m: _written(m) or m.group(0), without_repeats(text))
    unit = _HOW_MANY.search(question)
    if unit is not None and len(set(dates)) == 2:
        start, end = sorted(set(dates))
        count = difference(start, end, unit.group(1).lower())
        return f"{format_duration(count, unit.group(1).lower())} (from {format_date(start)} to {format_date(end)})."
    return text


def without_repeats(text: str) -> str:
    """The answer with items it repeats in a comma-separated list said once: a small model at temperature 0 can
    fall into a loop ("asthma, peanuts, asthma, peanuts, ...") until its token limit."""
    items = text.split(", ")
    kept: list[str] = []
    for item in items:
        if item.strip(" .").lower() not in {k.strip(" .").lower() for k in kept}:
            kept.append(item)
    return text if len(kept) == len(items) else ", ".join(kept).rstrip(",")


def _written(match: re.Match[str]) -> str | None:
    try:
        return format_date(date(int(match.group(1)), int(match.group(2)), int(match.group(3))))
    except ValueError:
        return None


def parse_context_answer(text: str, size: int) -> ContextAnswer:
    if re.search(r"NOT IN MEMORY", text, re.IGNORECASE) and not re.search(r"ANSWER:", text, re.IGNORECASE):
        return ContextAnswer(None, ())
    match = _ANSWER.search(text)
    if match is None or not match.group("text").strip():
        return ContextAnswer(None, ())
    cites = tuple(sorted({int(n) for n in re.findall(r"\d+", match.group("cites") or "") if 1 <= int(n) <= size}))
    return ContextAnswer(match.group("text").strip(), cites)


def utterance_line(post: Said) -> str:
    when = post.time.date().isoformat() if post.time else "unknown date"
    who = post.speaker or post.role
    return f"({when}, {who}) {' '.join(post.text.split())}"


__all__ = [
    "ContextAnswer",
    "EvidenceFact",
    "NOT_IN_MEMORY",
    "answer_from_context",
    "compose",
    "labels_for",
    "parse_context_answer",
    "tidy_answer",
    "posts_from_hits",
    "posts_of",
    "result_iris",
    "sparql_evidence",
    "utterance_line",
    "where_group",
]

"""Event chains (issue 10 part 3, after HLGraphRAG's event routing): from the events a question matches, walk
cause -> effect and before -> after.

Links walked, one SPARQL round per step (``queries/events/hop.rq``), up to ``depth`` steps:

- ``causes``: ``X ob:causalContext C`` means C caused X, so the causes of X are reached subject -> object;
- ``effects``: the inverse, object -> subject (what the event led to);
- ``after`` / ``before``: ``ob:followedBy`` / ``ob:precededBy`` either way round, then time order: events that
  share a participant with the start (not the owner or the assistant, who take part in everything), ordered by ``schema:startDate`` (else the earliest post they were derived
  from), the ``depth`` nearest on that side, chained (these steps have role ``temporal``: inferred from dates, not
  stored links);
- ``both``: each of the four walks from the same starts (a walk never turns round: the other effects of a cause
  are not its "chain").

As in :mod:`pcm.retrieval.traversal.graph`, steps are rounds of one-hop queries rather than one ``K/K?/K?`` path:
a chain is made of the triples between its ends, which a property path does not return.

Without extracted events (episodic mode) there is nothing to walk; :func:`episodic_chain` is the stand-in: the
turns just before and after the posts recall matched, in message order, going on into the previous or next
session (session order) at a session's edge.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import pyoxigraph as ox

from pcm.errors import UsageError
from pcm.namespaces import OB
from pcm.resources import render_query
from pcm.retrieval.traversal.model import Found, Result, Source, Step, Triple
from pcm.retrieval.traversal.model import Path as WalkPath
from pcm.retrieval.traversal.starts import StartMatch, find_starts
from pcm.sparql import iri_term, is_true, values_clause

if TYPE_CHECKING:
    from pcm.context import MemoryContext
    from pcm.models import Message as Said

ALGORITHM = "events"
DIRECTIONS = ("causes", "effects", "before", "after", "both")
DEFAULT_DEPTH = 3
CAUSAL = OB + "causalContext"
FOLLOWED_BY = OB + "followedBy"
PRECEDED_BY = OB + "precededBy"
#: (walked subject -> object, walked object -> subject) per direction.
LINKS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "causes": ((CAUSAL,), ()),
    "effects": ((), (CAUSAL,)),
    "after": ((FOLLOWED_BY,), (PRECEDED_BY,)),
    "before": ((PRECEDED_BY,), (FOLLOWED_BY,)),
}
#: Events considered for time order around one start.
RELATED_LIMIT = 500
#: Start events matched from a question.
MAX_STARTS = 5
#: Share of an event label's words the question must contain for a label match.
LABEL_OVERLAP = 0.5
_NONE = "<urn:pcm:none>"
_WORDS = {CAUSAL: ("was caused by", "caused"), FOLLOWED_BY: ("was followed by", "came after"),
          PRECEDED_BY: ("came after", "was followed by")}


# ------------------------------------------------------------------------------------------------ start events


def event_classes(memory: MemoryContext) -> list[str]:
    """schema:Event, schema:Action and their subclasses in the memory's ontology graph."""
    rows = memory.store.select(render_query("events/classes")).values("c")
    return sorted(t.value for t in rows if t is not None)


def events_with_labels(memory: MemoryContext, iris: Sequence[str] | None = None) -> dict[str, str]:
    """Event IRI -> label (or the IRI's last segment) for every event, or for these IRIs."""
    filt = values_clause("e", list(iris)) if iris else ""
    if iris is not None and not iris:
        return {}
    q = render_query("events/events", filter=filt, classes=_iri_list(event_classes(memory)))
    return {
        r["e"].value: r["label"].value if "label" in r else r["e"].value.rsplit("/", 1)[-1]
        for r in memory.store.select(q).dicts()
    }


def find_start_events(memory: MemoryContext, question: str, k: int = MAX_STARTS) -> list[StartMatch]:
    """Events the question speaks of: the side index's entity matches that are events, plus label-word matches."""
    events = events_with_labels(memory)
    if not events:
        return []
    chosen: dict[str, StartMatch] = {}
    if memory.settings.index_enabled:
        for m in find_starts(memory.index, question, max_starts=2 * k):
            if m.iri in events:
                chosen[m.iri] = m
    asked = set(_tokens(question))
    for iri, label in events.items():
        words = set(_tokens(label))
        if not words or iri in chosen:
            continue
        overlap = len(words & asked) / len(words)
        if overlap >= LABEL_OVERLAP:
            chosen[iri] = StartMatch(label, iri, label, overlap, "label-words")
    return sorted(chosen.values(), key=lambda m: (-m.score, m.iri))[:k]


# ------------------------------------------------------------------------------------------------ the walk


def walk_events(
    memory: MemoryContext, starts: Sequence[str], *, direction: str = "both", depth: int = DEFAULT_DEPTH, k: int = 10,
    question: str = "", sources: bool = True,
) -> Result:
    """The chains from ``starts``: each triple found once, nearer steps first, at most ``k``."""
    if direction not in DIRECTIONS:
        raise UsageError(f"--direction {direction!r}: expected one of {', '.join(DIRECTIONS)}")
    if depth < 1:
        raise UsageError(f"--depth must be at least 1, got {depth}")
    started = time.perf_counter()
    nodes = [ox.NamedNode(s) for s in dict.fromkeys(starts)]
    result = Result(question, ALGORITHM, nodes, [])
    if not nodes:
        result.notes.append("no start events: nothing in the memory's events matched the question")
        return result
    found: dict[Triple, Found] = {}
    walks = ("causes", "effects", "before", "after") if direction == "both" else (direction,)
    for name in walks:
        for item in _links(memory, nodes, name, depth, result) + _by_time(memory, nodes, name, depth, result):
            if item.triple not in found:
                found[item.triple] = item
    ordered = sorted(found.values(), key=lambda f: (-f.rank, walks.index(f.role.split(":")[0])))
    result.found = ordered[:k]
    if len(ordered) > k:
        result.notes.append(f"{len(ordered) - k} more chain steps beyond k={k}")
    result.paths = [f.path for f in result.found if f.path is not None]
    _describe(memory, result.found)
    if sources:
        _attach_sources(memory, result.found)
    result.stats.ms = (time.perf_counter() - started) * 1000
    return result


def _links(memory: MemoryContext, starts: list[ox.NamedNode], name: str, depth: int, result: Result) -> list[Found]:
    """Stored links (causal context, followed/preceded by), one round per step, never revisiting a vertex."""
    forward, backward = LINKS[name]
    paths = {s: WalkPath(ALGORITHM, s, ()) for s in starts}
    seen = set(starts)
    out: list[Found] = []
    for level in range(depth):
        if not paths:
            break
        q = render_query(
            "events/hop", frontier=" ".join(str(v) for v in paths), forward=_iri_list(forward),
            backward=_iri_list(backward),
        )
        rows = memory.store.select(q).dicts()
        result.stats.queries += 1
        result.stats.rows += len(rows)
        frontier: dict[ox.NamedNode, WalkPath] = {}
        for row in sorted(rows, key=lambda r: (r["from"].value, r["p"].value, r["x"].value)):
            # the walk query binds ?from, ?p and ?x to IRIs only
            source, predicate, target = (cast(ox.NamedNode, row[v]) for v in ("from", "p", "x"))
            forward_step = is_true(row["fwd"])
            if target in seen:
                continue
            triple = Triple(source, predicate, target) if forward_step else Triple(target, predicate, source)
            parent = paths[source]
            path = WalkPath(ALGORITHM, parent.start, (*parent.steps, Step(triple, forward_step)), 1.0 / (level + 1))
            seen.add(target)
            frontier[target] = path
            out.append(Found(triple, name, {ALGORITHM}, path, rank=1.0 / (level + 1)))
        paths = frontier
    return out


def _by_time(memory: MemoryContext, starts: list[ox.NamedNode], name: str, depth: int, result: Result) -> list[Found]:
    """The ``depth`` nearest events on one side in time among those sharing a participant with a start."""
    if name not in ("before", "after"):
        return []
    q = render_query(
        "events/related", events=values_clause("s", [s.value for s in starts]),
        classes=_iri_list(event_classes(memory)), limit=str(RELATED_LIMIT),
        hubs=_iri_list([memory.naming.owner, memory.naming.assistant]),
    )
    related: dict[str, set[str]] = {}
    for row in memory.store.select(q).dicts():
        related.setdefault(row["s"].value, set()).add(row["e"].value)
    result.stats.queries += 1
    times = event_times(memory, [s.value for s in starts] + [e for es in related.values() for e in es])
    out: list[Found] = []
    for start in starts:
        t0 = times.get(start.value)
        if t0 is None:
            continue
        side = [(times[e], e) for e in related.get(start.value, ()) if e in times and e != start.value]
        if name == "after":
            chain = sorted(x for x in side if x[0] > t0)[:depth]
        else:
            chain = sorted((x for x in side if x[0] < t0), reverse=True)[:depth]
        predicate = ox.NamedNode(FOLLOWED_BY if name == "after" else PRECEDED_BY)
        steps: tuple[Step, ...] = ()
        current = start
        for level, (_, event) in enumerate(chain):
            target = ox.NamedNode(event)
            step = Step(Triple(current, predicate, target), True)
            steps = (*steps, step)
            path = WalkPath(ALGORITHM, start, steps, 0.5 / (level + 1))
            out.append(Found(step.triple, f"{name}:temporal", {ALGORITHM}, path, rank=0.5 / (level + 1)))
            current = target
    return out


def event_times(memory: MemoryContext, events: Sequence[str]) -> dict[str, str]:
    """When each event happened (ISO text: its start date, else when it was first spoken of)."""
    chosen = list(dict.fromkeys(events))
    times: dict[str, str] = {}
    for start in range(0, len(chosen), 400):
        q = render_query("events/times", events=values_clause("e", chosen[start : start + 400]))
        for row in memory.store.select(q).dicts():
            value = row["date"].value if "date" in row else row["spoken"].value if "spoken" in row else None
            if value:
                times[row["e"].value] = value
    return times


def _describe(memory: MemoryContext, found: Sequence[Found]) -> None:
    """Readable text for each step: labels, the link in words, and the dates when known."""
    iris = sorted({t.value for f in found for t in (f.triple.s, f.triple.o) if isinstance(t, ox.NamedNode)})
    labels = _labels(memory, iris)
    times = event_times(memory, iris)
    for item in found:
        s, p, o = item.triple
        words = _WORDS.get(p.value, (p.value.rsplit("/", 1)[-1], ""))[0]
        a, b = labels.get(s.value, s.value), labels.get(o.value, str(o))
        when = [f"{label} {times[x]}" for x, label in ((s.value, a), (o.value, b)) if x in times]
        hint = " (by date)" if item.role.endswith(":temporal") else ""
        item.text = f"{a} {words} {b}{hint}" + (f" [{'; '.join(when)}]" if when else "")


def _labels(memory: MemoryContext, iris: Sequence[str]) -> dict[str, str]:
    if not iris:
        return {}
    q = render_query("traversal/labels", iris=" ".join(iri_term(i) for i in iris))
    out = {}
    for row in memory.store.select(q).dicts():
        text = row["label"].value if "label" in row else row["content"].value if "content" in row else None
        if text:
            out[row["x"].value] = text
    return out


def derived_posts(memory: MemoryContext, iris: Sequence[str]) -> dict[str, list[str]]:
    """The posts each vertex was derived from."""
    chosen = list(dict.fromkeys(iris))
    if not chosen:
        return {}
    out: dict[str, list[str]] = {}
    for row in memory.store.select(render_query("events/derived", iris=values_clause("x", chosen))).dicts():
        out.setdefault(row["x"].value, []).append(row["post"].value)
    return {k: sorted(v) for k, v in out.items()}


def _attach_sources(memory: MemoryContext, found: Sequence[Found]) -> None:
    from pcm.retrieval.answer import posts_of

    ends = [t.value for f in found for t in (f.triple.s, f.triple.o) if isinstance(t, ox.NamedNode)]
    derived = derived_posts(memory, ends)
    posts = {p.post: p for p in posts_of(memory, [p for ps in derived.values() for p in ps])}
    for item in found:
        seen: list[str] = []
        for end in (item.triple.s, item.triple.o):
            seen += [p for p in derived.get(end.value, []) if p not in seen]
        item.sources = [
            Source(post=p, text=posts[p].text, session=posts[p].session, time=posts[p].time,
                   speaker=posts[p].speaker, role=posts[p].role, source_id=posts[p].source_id)
            for p in seen if p in posts
        ]


# ------------------------------------------------------------------------------------------------ entry points


def retrieve_events(
    memory: MemoryContext, question: str, *, start: Sequence[str] | None = None, direction: str = "both",
    depth: int = DEFAULT_DEPTH, k: int = 10, sources: bool = True,
) -> Result:
    """``pcm retrieve --algorithm events``: start events from the question (or ``start``), then the walk."""
    matches = [] if start is not None else find_start_events(memory, question)
    starts = list(start) if start is not None else [m.iri for m in matches]
    result = walk_events(memory, starts, direction=direction, depth=depth, k=k, question=question, sources=sources)
    result.matches = matches
    return result


def event_context(
    memory: MemoryContext, question: str, start_iris: Sequence[str], *, direction: str = "both", depth: int = DEFAULT_DEPTH,
    k: int = 10,
) -> list[tuple[str, list[Said]]]:
    """Context lines for ``ask`` on why / what-happened-after questions, each with the posts it rests on.

    ``start_iris`` empty: the start events are matched from the question. No events (episodic mode, or none
    matched): the episodic chain around the best recalled posts instead.
    """
    from pcm.retrieval.answer import posts_of

    starts = list(start_iris) or [m.iri for m in find_start_events(memory, question)]
    result = walk_events(memory, starts, direction=direction, depth=depth, k=k, question=question)
    if result.found:
        derived = derived_posts(memory, starts)
        labels = _labels(memory, starts)
        times = event_times(memory, starts)
        lines: list[tuple[str, list[Said]]] = []
        for s in starts:
            when = f" ({times[s]})" if s in times else ""
            lines.append((f"Event: {labels.get(s, s)}{when}", posts_of(memory, derived.get(s, []))))
        by_post = {p.post: p for p in posts_of(memory, [src.post for f in result.found for src in f.sources if src.post])}
        for item in result.found:
            lines.append((item.text, [by_post[src.post] for src in item.sources if src.post in by_post]))
        return lines[:k]
    return _episodic_context(memory, question, direction, depth, k)


def _episodic_context(
    memory: MemoryContext, question: str, direction: str, depth: int, k: int
) -> list[tuple[str, list[Said]]]:
    from pcm.retrieval.answer import posts_of

    if not memory.settings.index_enabled:
        return []
    seeds = [h.post for h in memory.recall(question, 3)]
    before = depth if direction in ("causes", "before", "both") else 0
    after = depth if direction in ("effects", "after", "both") else 0
    posts = posts_of(memory, episodic_chain(memory, seeds, before=before, after=after))
    lines = []
    for p in posts[:k]:
        when = f" ({p.time.isoformat()})" if p.time else ""
        lines.append((f"Session {p.session}{when}, {p.speaker or p.role}: {p.text}", [p]))
    return lines


def episodic_chain(memory: MemoryContext, post_iris: Sequence[str], *, before: int = 1, after: int = 1) -> list[str]:
    """The posts around each seed (``before`` turns before, ``after`` after), seed by seed in the order given, each
    window in message order; every post once. A window that runs past its session's first or last turn goes on
    into the previous or next session (session order: start time, else earliest message)."""
    seeds = list(dict.fromkeys(post_iris))
    before, after = max(before, 0), max(after, 0)
    if not seeds:
        return []
    q = render_query("events/episodic", seeds=values_clause("seed", seeds), before=str(before), after=str(after))
    windows: dict[str, list[tuple[int, str]]] = {}
    session_of: dict[str, str] = {}
    for row in memory.store.select(q).dicts():
        windows.setdefault(row["seed"].value, []).append((int(row["offset"].value), row["post"].value))
        session_of[row["seed"].value] = row["session"].value
    crossing = _SessionOrder(memory)
    out: dict[str, None] = {}
    for seed in seeds:
        window = sorted(windows.get(seed, []))
        if not window:
            continue
        first, last = window[0][0], window[-1][0]
        session = session_of[seed]
        earlier = crossing.tail(session, before + first) if first > -before else []
        later = crossing.head(session, after - last) if last < after else []
        for post in [*earlier, *(p for _, p in window), *later]:
            out.setdefault(post, None)
    return list(out)


class _SessionOrder:
    """Neighbouring sessions, read once per chain and only when a window reaches a session's edge."""

    def __init__(self, memory: MemoryContext) -> None:
        self.memory = memory
        self._order: list[str] | None = None

    def _neighbour(self, session: str, step: int) -> str | None:
        if self._order is None:
            rows = self.memory.store.select(render_query("events/session_order")).values("session")
            self._order = [t.value for t in rows if t is not None]
        at = self._order.index(session) + step if session in self._order else -1
        return self._order[at] if 0 <= at < len(self._order) else None

    def tail(self, session: str, n: int) -> list[str]:
        """The last ``n`` posts of the session before this one."""
        previous = self._neighbour(session, -1)
        return self.memory.store.session_posts(previous)[-n:] if previous and n > 0 else []

    def head(self, session: str, n: int) -> list[str]:
        """The first ``n`` posts of the session after this one."""
        following = self._neighbour(session, 1)
        return self.memory.store.session_posts(following)[:n] if following and n > 0 else []


def _iri_list(iris: Sequence[str]) -> str:
    return ", ".join(iri_term(i) for i in iris) or _NONE


def _tokens(text: str) -> list[str]:
    """Content words of three letters or more (the shared stop list and crude singulars of the summaries)."""
    from pcm.summaries.text import content_words

    return [w for w in content_words(text) if len(w) > 2]


__all__ = [
    "DIRECTIONS",
    "derived_posts",
    "episodic_chain",
    "event_context",
    "find_start_events",
    "retrieve_events",
    "walk_events",
]

"""``pcm ask``: grounded NL→SPARQL with repair, exact post-processing, and answers that cite utterances.

The pipeline (docs/DESIGN.md §7)::

    question ─ grounding ─ NL→SPARQL ─ safety ─ run ─ repair loop ─┬─ post-processing ─ answer + evidence
                                                                   └─ (nothing) ─ [event chains] ─ stored facts ─
                                                                      traversal ─ episodic recall (+ summaries) ─
                                                                      "not in memory"

Before it, :mod:`pcm.retrieval.plan` reads the question: a keyword router picks its kind (``why`` and ``after``
questions try event chains before traversal; ``conversation`` questions try session summaries first), and a
question that may have several parts is shown to the model, which may split it into sub-questions with search
plans; each step of a plan is one run of the pipeline above (:func:`answer_step`), and the findings are combined.

Without an LLM (``PCM_LLM=none``) it answers with the utterances that best match the question, and says so (a
question about the conversations themselves gets the best matching session summary instead, when there is one).
``ask`` never modifies the memory: every query it runs goes through :mod:`pcm.query_safety`.

Determinism: the same memory and question give the same SPARQL, result and evidence; model replies are cached by
memory version and prompt (in the process and in ``<memory>/cache/ask/llm``), so asking again costs no LLM call.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pcm.backend import Solutions, term_value
from pcm.context import CACHE_DIR
from pcm.errors import LLMError, PcmError, UsageError
from pcm.llm.base import (
    WHOLE,
    Completion,
    LLMClient,
    Request,
    Usage,
    catalogue_layout,
    estimate_tokens,
    output_format,
    runs_here,
)
from pcm.models import Answer, AnswerWarning, EvidenceFact
from pcm.models import Message as Said
from pcm.models import TraceStep as TraceRecord
from pcm.resources import render_query
from pcm.retrieval import answer as answers
from pcm.retrieval.actions import action_answer
from pcm.retrieval.counts import count_answer
from pcm.retrieval.frame import Frame, FrameReplyError, Terms, checked, frames_questions, read_frame
from pcm.retrieval.grounding import (
    GroundedEntity,
    Grounding,
    build_grounding,
    memory_version,
    whole_catalogue,
)
from pcm.retrieval.intervals import interval_answer
from pcm.retrieval.kinship import kin_answer
from pcm.retrieval.nl2sparql import QueryForm, prompt_version, system_prompt, user_message
from pcm.retrieval.operations import COMPUTED, Operations
from pcm.retrieval.plan import (
    DIRECTIONS,
    Bounds,
    Decomposition,
    PlanReplyError,
    PlanTrace,
    SubQuestion,
    decompose,
    prompt_versions,
    run_plan,
)
from pcm.retrieval.postprocess import Computed, ComputeError, apply
from pcm.retrieval.repair import RepairLoop, RepairResult, TraceStep, around_entities
from pcm.retrieval.sequence import neighbour_answer
from pcm.retrieval.wording import may_decompose, route
from pcm.sparql import values_clause

if TYPE_CHECKING:
    from pcm.context import MemoryContext
    from pcm.ontology import Ontology

log = logging.getLogger(__name__)

PATHS = ("sparql", "events", "summary", "facts", "traversal", "episodic", "plan", "none")
DECLINED_NOTE = "the question's words match what other people said, not the person it asks about"
NO_LLM_NOTE = (
    "No LLM is configured (PCM_LLM=none): pcm runs in episodic mode and answers with the stored utterances that "
    "best match the question, not with a composed answer."
)


@dataclass
class AskResult:
    """One answered question: the answer, which path produced it, the evidence and the trace of queries tried."""

    question: str
    answer: str
    path: str
    as_of: datetime
    note: str = ""
    sparql: str | None = None
    computed: str | None = None
    trace: list[TraceStep] = field(default_factory=list)
    facts: list[EvidenceFact] = field(default_factory=list)
    posts: list[Said] = field(default_factory=list)
    explain: bool = False
    plan: PlanTrace | None = None
    """How the question was read (kind, decomposition) and, for a planned answer, every step, check and revision."""
    stats: dict[str, Any] = field(default_factory=dict)
    """Timings (ms), LLM calls, cache hits and prompt tokens: useful, but not part of the deterministic output."""
    frame: dict[str, object] | None = None
    """The question read into a typed frame (:mod:`pcm.retrieval.frame`), when it was."""
    pending: list[str] = field(default_factory=list)
    """The cited posts whose facts are not extracted yet (no extraction status, or ``pending``), in citation order:
    an answer from the graph cannot have used them (queued extraction, docs/DESIGN.md §5)."""

    def record(self, *, stats: bool | None = None, warnings: Sequence[AnswerWarning] = ()) -> Answer:
        """The answer as every face shows it (:class:`pcm.models.Answer`); ``stats`` (default: when asked with
        explain) adds the timings, which vary run to run."""
        return Answer(
            question=self.question, answer=self.answer, path=self.path, as_of=self.as_of, note=self.note,
            sparql=self.sparql, computed=self.computed, citations=list(self.posts), facts=list(self.facts),
            pending=list(self.pending), warnings=list(warnings),
            trace=[TraceRecord.model_validate(_step_json(s)) for s in self.trace],
            plan=self.plan.as_json() if self.plan is not None else None, frame=self.frame,
            stats=dict(self.stats) if (self.explain if stats is None else stats) else None,
        )

    def as_json(self, *, stats: bool = False) -> dict[str, object]:
        return self.record(stats=stats).as_json()

    def render(self, explain: bool | None = None) -> str:
        """The human form: answer, path and note, cited utterances; with ``explain``, every query tried."""
        shown = self.explain if explain is None else explain
        return self.record(stats=shown).render(shown)


def _step_json(step: TraceStep) -> dict[str, object]:
    data = step.as_json()
    data.pop("ms", None)
    return data


# ------------------------------------------------------------------------------------------------ the pipeline


def ask(
    memory: MemoryContext,
    question: str,
    *,
    client: LLMClient | None,
    as_of: datetime | None = None,
    explain: bool = False,
    k: int = 5,
    plan: bool | None = None,
) -> AskResult:
    """Answer ``question`` from ``memory`` (see the module docstring). Never writes to the memory.

    ``plan``: None lets the model decide whether a question with several parts needs a search plan; True asks for
    a plan whatever the question looks like; False never plans (and then ask makes no extra model call).
    """
    question = " ".join(question.split())
    if not question:
        raise UsageError("ask needs a question")
    as_of = as_of or datetime.now().astimezone().replace(microsecond=0)
    if as_of.tzinfo is None:
        as_of = as_of.astimezone()
    started = time.perf_counter()
    kind = route(question)
    if client is None:
        result = _episodic_without_llm(memory, question, as_of, k, kind)
        result.explain = explain
        result.plan = PlanTrace("keywords", kind)
        result.pending = pending_posts(memory, [p.post for p in result.posts])
        result.stats["total_ms"] = round((time.perf_counter() - started) * 1000, 1)
        return result
    cache = client if isinstance(client, CachingClient) else CachingClient(client, memory)
    framing = frames_questions(memory.settings.ask.frame, cache)
    if framing:
        # the frame decides: its operation gives the kind, and "other" (separate parts) a plan when the question
        # read as one finds nothing; no pattern over the wording is consulted
        kind = "factual"
    trace, decomposition = _read_question(memory, question, cache, as_of, kind, False if framing and plan is None
                                          else plan)
    if decomposition is not None:
        result = _planned(memory, question, cache, as_of, k, trace, decomposition, started)
    else:
        pipeline = _Pipeline(memory, question, cache, as_of, explain, k, trace.kind)
        result = pipeline.run(started)
        if (plan is None and pipeline.frame is not None and pipeline.frame.op == "other"
                and result.path in ("none", "episodic") and not runs_here(cache)):
            trace, decomposition = _read_question(memory, question, cache, as_of, pipeline.kind, None,
                                                  worded=False)
            if decomposition is not None:
                planned = _planned(memory, question, cache, as_of, k, trace, decomposition, started)
                if planned.path != "none":
                    result = planned
        if framing and trace.mode == "keywords":
            trace.mode, trace.kind = "frame", pipeline.kind
            trace.notes = [n for n in trace.notes if "single clause" not in n]
        if cache.calls or cache.hits:  # the decomposition call counts too
            result.stats.update({"llm_calls": cache.calls, "cache_hits": cache.hits, "llm_ms": round(cache.ms, 1),
                                 "non_llm_ms": round(result.stats.get("total_ms", 0.0) - cache.ms, 1)})
    result.plan = trace
    result.explain = explain
    result.pending = pending_posts(memory, [p.post for p in result.posts])
    return result


def pending_posts(memory: MemoryContext, posts: Sequence[str]) -> list[str]:
    """Those of ``posts`` whose facts are not extracted yet (no extraction status, or ``pending``), in their order."""
    if not posts:
        return []
    chosen = list(dict.fromkeys(posts))
    found: set[str] = set()
    done: set[str] = set()
    for row in memory.store.select(render_query("ask/post_status", posts=values_clause("post", chosen))).dicts():
        found.add(term_value(row["post"]))
        if "status" in row and term_value(row["status"]) != "pending":
            done.add(term_value(row["post"]))
    return [p for p in chosen if p in found and p not in done]


def answer_step(memory: MemoryContext, question: str, client: CachingClient, *, as_of: datetime, k: int = 5,
                kind: str = "factual") -> AskResult:
    """One run of the single-question pipeline (grounding, SPARQL with repair, fallbacks): a step of a plan."""
    return _Pipeline(memory, question, client, as_of, False, k, kind).run(time.perf_counter())


def _read_question(
    memory: MemoryContext, question: str, cache: CachingClient, as_of: datetime, kind: str, plan: bool | None,
    *, worded: bool = True,
) -> tuple[PlanTrace, Decomposition | None]:
    """The question's kind and, when it is to be planned, its decomposition (None: answer it as one question).
    ``worded``: a question whose wording shows one clause is not shown to the model (without it, the frame said
    the question has separate parts)."""
    if plan is False or (plan is None and worded and not may_decompose(question)):
        trace = PlanTrace("keywords", kind)
        if plan is None:
            trace.notes.append("single clause: not shown to the model for decomposition")
        return trace, None
    if plan is None and runs_here(cache):
        # Measured with a 1.5B model on 2 cores: the 5 gold questions it planned took 330-408 s each and all came
        # out wrong, while the stored facts answered two-part questions in one pass. A local model plans on request.
        trace = PlanTrace("keywords", kind)
        trace.notes.append("a model on this machine: answered as one question (ask with --plan for a search plan)")
        return trace, None
    trace = PlanTrace("forced" if plan else "model", kind)
    bounds = Bounds.from_settings(memory.settings)
    try:
        decomposition = decompose(cache, question, as_of=as_of, owner_name=memory.manifest.owner, bounds=bounds)
    except PlanReplyError as error:
        trace.notes.append(f"malformed decomposition reply ({error}): answered as a single question")
        return trace, None
    if kind == "factual" and decomposition.kind is not None:
        trace.kind = decomposition.kind
    trace.multi_hop = decomposition.multi_hop
    if not (decomposition.multi_hop or plan):
        return trace, None
    if not decomposition.sub_questions:
        if not plan:
            trace.notes.append("marked multi-hop without sub-questions: answered as a single question")
            return trace, None
        decomposition = Decomposition(decomposition.multi_hop, decomposition.kind, (SubQuestion(question, (question,)),))
    return trace, decomposition


def _planned(
    memory: MemoryContext, question: str, cache: CachingClient, as_of: datetime, k: int, trace: PlanTrace,
    decomposition: Decomposition, started: float,
) -> AskResult:
    """Run the plan (each step through :func:`answer_step`) and combine the findings into one result."""
    steps: list[AskResult] = []

    def run_step(asked: str) -> AskResult:
        kind = route(asked)
        if kind == "factual" and trace.kind in DIRECTIONS:  # a step of a why / after question may walk events too
            kind = trace.kind
        found = answer_step(memory, asked, cache, as_of=as_of, k=k, kind=kind)
        steps.append(found)
        return found

    outcome = run_plan(question, decomposition, run_step=run_step, client=cache, trace=trace, as_of=as_of,
                       owner_name=memory.manifest.owner, bounds=Bounds.from_settings(memory.settings))
    summary = (f"{len(trace.sub_questions)} sub-question(s), {len(trace.steps)} step(s), "
               f"{len(trace.revisions)} revision(s)")
    if outcome.answer is None:
        result = AskResult(question, answers.NOT_IN_MEMORY, "none", as_of,
                           note=f"answered by a search plan ({summary}); {trace.notes[-1]}")
    else:
        result = AskResult(question, outcome.answer, "plan", as_of, note=f"answered by a search plan ({summary})",
                           posts=_ordered(outcome.posts))
        cited = {p.post for p in result.posts}
        result.facts = [f for step in steps for f in step.facts if cited & set(f.posts)]
    total = (time.perf_counter() - started) * 1000
    prompt_tokens: list[int] = [n for step in steps for n in (step.stats.get("prompt_tokens") or [])]
    result.stats.update({
        "steps": len(steps),
        "grounding_ms": round(sum(s.stats.get("grounding_ms", 0.0) for s in steps), 1),
        "queries_ms": round(sum(s.stats.get("queries_ms", 0.0) for s in steps), 1),
        "answer_ms": round(sum(s.stats.get("answer_ms", 0.0) for s in steps), 1),
        "llm_ms": round(cache.ms, 1),
        "total_ms": round(total, 1),
        "non_llm_ms": round(total - cache.ms, 1),
        "llm_calls": cache.calls,
        "cache_hits": cache.hits,
        "prompt_tokens": prompt_tokens,
        "prompt_version": prompt_version(),
        "plan_prompt_version": prompt_versions(),
    })
    return result


class _Pipeline:
    def __init__(self, memory: MemoryContext, question: str, cache: CachingClient, as_of: datetime, explain: bool, k: int,
                 kind: str = "factual") -> None:
        from pcm.ontology import load_ontology

        self.memory = memory
        self.question = question
        self.as_of = as_of
        self.explain = explain
        self.k = k
        self.kind = kind
        self.ontology: Ontology = load_ontology()
        self.cache = cache
        #: Whether the question is read into a typed frame (``PCM_ASK_FRAME``); then no pattern over its wording
        #: decides anything, and the frame's operation replaces the keyword kind.
        self.framing = frames_questions(memory.settings.ask.frame, cache)
        self.frame: Frame | None = None
        self.notes: list[str] = []

    def run(self, started: float) -> AskResult:
        calls_before, hits_before, llm_before_all = self.cache.calls, self.cache.hits, self.cache.ms
        config = self.memory.settings.ask
        json_form = output_format(config.output, self.cache) == "json"
        form = "json" if json_form else "sparql"
        whole = catalogue_layout(
            config.catalogue, self.cache, what="an NL->SPARQL call",
            whole_tokens=lambda: estimate_tokens(system_prompt(whole_catalogue(self.ontology), form))
            + config.question_tokens + 2 * config.query_tokens,
        ) == WHOLE
        grounding: Grounding | None = None
        if self.framing:
            grounding = build_grounding(self.memory, self.question, as_of=self.as_of, ontology=self.ontology,
                                        whole=whole)
            framed = self._from_frame(grounding)
            if framed is not None:
                return self._finish(framed, started, grounding, [], calls_before, hits_before, llm_before_all)
        if self.kind == "conversation":
            found = self._from_summaries(started)
            if found is not None:
                return found
        if grounding is None:
            grounding = build_grounding(self.memory, self.question, as_of=self.as_of, ontology=self.ontology,
                                        whole=whole)
        facts_first = ask_order(config.order, self.cache) == "facts"
        if facts_first:
            llm_before = self.cache.ms
            answer_started = time.perf_counter()
            early = self._from_stored(grounding, "stored facts first (PCM_ASK_ORDER)")
            if early is not None:
                early.stats.update({"queries_ms": 0.0, "answer_ms": round(self._own_ms(answer_started, llm_before), 1)})
                return self._finish(early, started, grounding, [], calls_before, hits_before, llm_before_all)
        if self.frame is not None and self.frame.op != "other":
            # the frame placed the question among the operations, so a free query has nothing to add to what the
            # operation and the stored facts found: recall answers next (the slow tail was this query's repairs)
            why = f"no free graph query for a question the frame reads as {self.frame.op}"
            answer_started, llm_before = time.perf_counter(), self.cache.ms
            result = self._fallback(grounding, why, facts_tried=facts_first)
            result.stats.update({"queries_ms": 0.0, "answer_ms": round(self._own_ms(answer_started, llm_before), 1)})
            return self._finish(result, started, grounding, [], calls_before, hits_before, llm_before_all)
        system = system_prompt(grounding.catalogue, form)
        user = user_message(grounding, self.ontology)
        loop = RepairLoop(
            memory=self.memory,
            ontology=self.ontology,
            runner=self.memory.query_runner(),
            client=self.cache,
            question=self.question,
            system=system,
            user=user,
            rounds=max(1, config.repair_rounds + 1),
            max_limit=self.memory.settings.query_limit,
            as_of=self.as_of,
            context_hint=lambda: around_entities(
                self.memory, [e.iri for e in grounding.entities], self.ontology, lambda i: grounding.short(i, self.ontology)
            ),
            form=QueryForm(grounding.namespace, self.ontology) if json_form else None,
        )
        llm_before = self.cache.ms
        loop_started = time.perf_counter()
        repaired = loop.run()
        queries_ms = self._own_ms(loop_started, llm_before)
        answer_started, llm_before = time.perf_counter(), self.cache.ms
        if repaired.attempt is not None:
            result = self._from_sparql(repaired)
        else:
            why = ("the graph query found nothing" if repaired.no_query is None
                   else f"no graph query fits ({repaired.no_query})")
            result = self._fallback(grounding, why, facts_tried=facts_first)
        result.stats["queries_ms"] = round(queries_ms, 1)
        result.stats["answer_ms"] = round(self._own_ms(answer_started, llm_before), 1)
        result.trace = repaired.trace
        return self._finish(result, started, grounding, repaired.prompt_tokens, calls_before, hits_before, llm_before_all)

    def _own_ms(self, started: float, llm_before: float) -> float:
        """Milliseconds since ``started`` (a ``perf_counter`` reading) less the model's calls since the cache's
        clock read ``llm_before``: pcm's own share of a stage."""
        return (time.perf_counter() - started) * 1000 - (self.cache.ms - llm_before)

    def _finish(self, result: AskResult, started: float, grounding: Grounding, prompt_tokens: list[int],
                calls_before: int, hits_before: int, llm_before_all: float) -> AskResult:
        """The result with its timings, call counts and prompt versions (``--explain``, ``--json``)."""
        result.explain = self.explain
        if self.frame is not None:
            result.frame = self.frame.as_json(self.ontology)
        if self.notes:
            result.note = "; ".join([result.note, *self.notes]) if result.note else "; ".join(self.notes)
        total = (time.perf_counter() - started) * 1000
        llm_ms = self.cache.ms - llm_before_all
        result.stats.update(
            {
                "grounding_ms": round(grounding.seconds * 1000, 1),
                "llm_ms": round(llm_ms, 1),
                "total_ms": round(total, 1),
                "non_llm_ms": round(total - llm_ms, 1),
                "llm_calls": self.cache.calls - calls_before,
                "cache_hits": self.cache.hits - hits_before,
                "prompt_tokens": prompt_tokens,
                "entities": len(grounding.entities),
                "catalogue_areas": list(grounding.areas) if grounding.areas is not None else "all",
                "prompt_version": prompt_version(),
            }
        )
        return result

    # -------------------------------------------------------------------------------------------- the frame

    def _from_frame(self, grounding: Grounding) -> AskResult | None:
        """Read the question into a frame (one constrained call) and answer a computed operation in code; None
        when the operation is not computed or the graph does not settle it (the pipeline goes on, with the
        frame's kind)."""
        terms = Terms.of(grounding.usage, self.ontology)
        llm_before, started = self.cache.ms, time.perf_counter()
        try:
            self.frame = checked(read_frame(self.cache, self.question, terms, as_of=self.as_of,
                                            owner_name=self.memory.manifest.owner, entities=grounding.entities),
                                 self.question, as_of=self.as_of.date(), owner_name=self.memory.manifest.owner)
        except FrameReplyError as error:
            self.kind = "factual"
            self.notes.append(f"the question's frame did not parse ({error}): read as a factual question")
            return None
        self.kind = self.frame.kind
        if self.frame.op not in COMPUTED:
            return None
        from pcm.retrieval.facts import graph_posts
        from pcm.retrieval.traversal import TraversalEngine

        engines: list[TraversalEngine] = []

        def vectors() -> Any:
            if not engines:
                engines.append(TraversalEngine.for_memory(self.memory))
            return engines[0].vectors

        operations = Operations(self.memory, self.ontology, grounding.entities, self.as_of.date(), vectors,
                                question=self.question)
        try:
            worked = operations.evaluate(self.frame)
        except (PcmError, OSError) as error:
            log.info("frame operation unavailable: %s", error)
            worked = None
        finally:
            for engine in engines:
                engine.close()
        if worked is None:
            self.notes.append(f"the frame's {self.frame.op} found no answer in the graph")
            return None
        by_graph = graph_posts(self.memory, worked.graphs)
        posts = answers.posts_of(self.memory, sorted({p for g in worked.graphs for p in by_graph.get(g, ())}))
        result = AskResult(self.question, worked.text, "frame", self.as_of,
                           note=f"answered in code from the question's frame ({self.frame.op}): {worked.note}",
                           posts=_ordered(posts))
        result.stats.update({"queries_ms": 0.0, "answer_ms": round(self._own_ms(started, llm_before), 1)})
        return result

    # -------------------------------------------------------------------------------------------- SPARQL path

    def _from_sparql(self, repaired: RepairResult) -> AskResult:
        attempt = repaired.attempt
        assert attempt is not None
        computed: Computed | None = None
        if attempt.compute is not None and isinstance(attempt.result, Solutions):
            try:
                computed = apply(attempt.compute, attempt.result.dicts(), as_of=self.as_of)
            except ComputeError as error:
                log.info("compute line failed after repair: %s", error)
        labels = answers.labels_for(self.memory, answers.result_iris(attempt.result))
        text = answers.compose(self.question, attempt.result, computed, labels)
        used = attempt.result
        if computed is not None and computed.row is not None and isinstance(used, Solutions):
            used = Solutions(used.variables, [tuple(computed.row.get(v) for v in used.variables)])
        facts, posts = answers.sparql_evidence(self.memory, self.memory.query_runner(), attempt.safe, used, self.ontology, labels)
        last = repaired.trace[-1] if repaired.trace else None
        note = "answered from the memory graph (SPARQL)"
        if last is not None and last.source.startswith("relaxation"):
            note += f" after a deterministic {last.source}"
        if attempt.suspicion:
            note += f"; the result may be incomplete: {attempt.suspicion_detail}"
        return AskResult(
            self.question, text, "sparql", self.as_of, note=note, sparql=attempt.safe.text,
            computed=str(attempt.compute) + " = " + computed.text if computed else None, facts=facts, posts=posts,
        )

    # -------------------------------------------------------------------------------------------- fallbacks

    def _from_stored(self, grounding: Grounding, why: str) -> AskResult | None:
        """The event chain (for ``why`` / ``after`` questions), then the stored facts nearest the question; None
        when neither exists or the model finds no answer in them."""
        if self.kind in DIRECTIONS:
            walks = DIRECTIONS[self.kind]
            chain = _event_context(self.memory, self.question, [e.iri for e in grounding.entities], walks, 2 * self.k)
            if chain:
                found = self._from_context(chain, "events", f"{why}; answered from the event chain ({', '.join(walks)})")
                if found is not None:
                    return found
        stored, worked = _fact_context(self.memory, self.question, grounding.entities, self.ontology.classes,
                                       self.as_of.date(), worded=not self.framing)
        if worked is not None:
            return AskResult(self.question, worked.text, "facts", self.as_of, note=f"{why}; {worked.note}",
                             posts=_ordered(worked.posts))
        if not stored:
            return None
        return self._from_context(stored, "facts", f"{why}; answered from the stored facts nearest the question")

    def _fallback(self, grounding: Grounding, why: str, *, facts_tried: bool = False) -> AskResult:
        if facts_tried:
            why = f"the stored facts held no answer and {why}"
        starts = [e.iri for e in grounding.entities]
        found = None if facts_tried else self._from_stored(grounding, why)
        if found is not None:
            return found
        facts = _traversal_context(self.memory, self.question, starts, self.k)
        if facts:
            found = self._from_context(facts, "traversal", f"{why}; answered from facts around the matched entities")
            if found is not None:
                return found
        hits = _recall(self.memory, self.question, self.k)
        posts = answers.posts_from_hits(hits)
        items = [(answers.utterance_line(p), [p]) for p in posts]
        if items:  # summaries support recalled utterances; they do not answer alone here (see _from_summaries)
            lines = self.memory.settings.ask.summary_lines
            items += _summary_context(self.memory, self.question, lines)[:lines]
            found = self._from_context(items, "episodic", f"{why}; answered from recalled utterances")
            if found is not None:
                return found
        # Never worse than episodic mode: what was said that matches the question is still shown, as pcm without
        # a model would show it, unless the relevance decision finds the question's words in what someone other
        # than the person it asks about said (the same decision and wording as episodic mode).
        if not hits:
            return AskResult(self.question, answers.NOT_IN_MEMORY, "none", self.as_of,
                             note=f"{why}, and nothing was recalled")
        declined = _declined(self.memory, self.question)
        if declined is not None:
            return AskResult(self.question, declined, "none", self.as_of,
                             note=f"{why}, and the model found no answer in the recalled utterances; {DECLINED_NOTE}",
                             posts=posts)
        return AskResult(
            self.question, closest_said(hits[0]), "episodic", self.as_of,
            note=f"{why}, and the model found no answer in the recalled utterances: shown are the utterances "
                 "that best match the question, as in episodic mode",
            posts=posts,
        )

    def _from_summaries(self, started: float) -> AskResult | None:
        """A question about the conversations themselves: the best matching session summaries, before SPARQL."""
        items = _summary_context(self.memory, self.question, 3)
        if not items:
            return None
        llm_before = self.cache.ms
        found = self._from_context(items, "summary", "a question about the conversations: answered from session summaries")
        if found is not None:
            total = (time.perf_counter() - started) * 1000
            found.explain = self.explain
            found.stats.update({"total_ms": round(total, 1), "non_llm_ms": round(total - (self.cache.ms - llm_before), 1),
                                "llm_ms": round(self.cache.ms - llm_before, 1), "prompt_tokens": [],
                                "grounding_ms": 0.0, "queries_ms": 0.0, "answer_ms": 0.0})
        return found

    def _from_context(self, items: Sequence[tuple[str, list[Said]]], path: str, note: str) -> AskResult | None:
        """The model answers from numbered context lines (or abstains); the cited lines' posts are the evidence."""
        lines = [line for line, _ in items]
        reply = answers.answer_from_context(self.cache, self.question, lines, as_of=self.as_of, owner_name=self.memory.manifest.owner)
        if reply.unquoted:
            self.notes.append(f"the model's answer from the {path} named {', '.join(map(repr, reply.unquoted))}, "
                              "which the context does not write: not used")
        if reply.text is None:
            return None
        chosen = reply.cited or tuple(range(1, len(items) + 1))
        cited = [post for i in chosen for post in items[i - 1][1]]
        result = AskResult(self.question, reply.text, path, self.as_of, note=note, posts=_ordered(cited))
        result.stats["answer_prompt_version"] = answers.answer_prompt().ref
        return result


def ask_order(setting: str, client: object) -> str:
    """``graph`` or ``facts``: what ask tries first (``PCM_ASK_ORDER``; see :attr:`AskConfig.order <pcm.settings.AskConfig.order>`).

    ``auto`` is ``facts`` for a model on this machine. Measured with a 1.5B model on 2 cores over the 25 gold
    questions: its two query-writing calls took 40-90 s per question, and the stored facts gave every answer it got
    right but one; answering from those facts first takes one short call.
    """
    if setting == "auto":
        return "facts" if runs_here(client) else "graph"
    return setting


def _ordered(posts: Sequence[Said]) -> list[Said]:
    unique = {p.post: p for p in posts}
    return sorted(unique.values(), key=lambda p: (p.time.timestamp() if p.time else 0.0, p.session, p.post))


def _episodic_without_llm(memory: MemoryContext, question: str, as_of: datetime, k: int, kind: str = "factual") -> AskResult:
    if kind == "conversation":
        summaries = _summary_context(memory, question, 1)
        if summaries:
            line, posts = summaries[0]
            # the session's turns that best match the question back the summary, best first: a question about a
            # past chat often asks for one detail of it, which a few representative turns miss
            sessions = sorted({p.session for p in posts})
            best = [e for s in sessions for e in answers.posts_from_hits(_recall(memory, question, k, session=s))]
            cited = list({e.post: e for e in [*best, *posts]}.values())
            note = NO_LLM_NOTE + " The question is about the conversations: the answer is the best matching session summary."
            return AskResult(question, line, "summary", as_of, note=note, posts=cited)
    hits = _recall(memory, question, k)
    if not hits:
        return AskResult(question, answers.NOT_IN_MEMORY, "none", as_of, note=NO_LLM_NOTE)
    declined = _declined(memory, question)
    if declined is not None:
        # the nearest turns stay as evidence: the asker sees who did say it, and a wrong decline still shows them
        note = f"{NO_LLM_NOTE} {DECLINED_NOTE[0].upper()}{DECLINED_NOTE[1:]}."
        return AskResult(question, declined, "none", as_of, note=note, posts=answers.posts_from_hits(hits))
    best = hits[0]
    who = best.speaker or best.role
    when = best.time.date().isoformat() if best.time else "unknown time"
    text = f'{who} said ({when}, session {best.session}): "{best.text}"'
    return AskResult(question, text, "episodic", as_of, note=NO_LLM_NOTE, posts=answers.posts_from_hits(hits))


def closest_said(hit: Any) -> str:
    """The answer when only recall found something: says there is no answer, then the closest utterance."""
    who = hit.speaker or hit.role
    when = hit.time.date().isoformat() if hit.time else "unknown date"
    return f'Not in memory as a stored fact. The closest thing said: {who} ({when}): "{" ".join(hit.text.split())}"'


def _summary_context(memory: MemoryContext, question: str, k: int) -> list[tuple[str, list[Said]]]:
    """Session summaries matching the question (:mod:`pcm.retrieval.summaries`); empty when unavailable."""
    from pcm.retrieval.summaries import summary_context

    try:
        return list(summary_context(memory, question, k=k))
    except (PcmError, OSError, ValueError) as error:
        log.info("session summaries unavailable: %s", error)
        return []


def _event_context(
    memory: MemoryContext, question: str, starts: Sequence[str], directions: Sequence[str], k: int
) -> list[tuple[str, list[Said]]]:
    """Event chains (:mod:`pcm.retrieval.traversal.events`) walked each way in ``directions`` from the matched
    entities, else from the events the question's words name (the matched entities may be things rather than
    events: the car, not its breakdown); lines deduplicated, at most ``k``; empty when unavailable."""
    from pcm.retrieval.traversal.events import event_context

    lines: dict[str, list[Said]] = {}
    try:
        for direction in directions:
            found = list(event_context(memory, question, list(starts), direction=direction, k=k)) if starts else []
            found = found or list(event_context(memory, question, [], direction=direction, k=k))
            for line, posts in found:
                lines.setdefault(line, list(posts))
    except (PcmError, OSError, ValueError) as error:
        log.info("event chains unavailable: %s", error)
    return list(lines.items())[:k]


def _recall(memory: MemoryContext, question: str, k: int, *, session: str | None = None) -> list[Any]:
    try:
        return list(memory.recall(question, k, session=session))
    except (PcmError, OSError) as error:
        log.info("episodic recall unavailable: %s", error)
        return []


def _declined(memory: MemoryContext, question: str) -> str | None:
    """The answer when the relevance decision (:mod:`pcm.index.relevance`) finds that the one person the question
    asks about never said what it asks, only others did: "not in memory" and the decision's one-line reason.
    ``None`` when the question stands (or the index is unavailable, so recall's answer stands). Both the episodic
    mode and the model's last resort answer through this, so they decline the same questions in the same words."""
    try:
        decision = memory.index.relevance(question)
    except (PcmError, OSError) as error:
        log.info("relevance decision unavailable: %s", error)
        return None
    if decision.relevant:
        return None
    return f"{answers.NOT_IN_MEMORY} {decision.reason}"


@dataclass(frozen=True)
class _Worked:
    """An answer worked out in code from the stored facts, with the utterances it rests on."""

    text: str
    posts: list[Said]
    note: str


def _fact_context(
    memory: MemoryContext, question: str, entities: Sequence[GroundedEntity], classes: Iterable[str], today: date,
    *, worded: bool = True,
) -> tuple[list[tuple[str, list[Said]]], _Worked | None]:
    """Stored facts nearest the question (:mod:`pcm.retrieval.facts`), each with its posts, and the answer worked
    out in code where the question is of a kind code answers better than a small model: the latest, first or total
    of a person's actions of one kind, or the date of one (:mod:`pcm.retrieval.actions`), a person's relatives of
    one kind (:mod:`pcm.retrieval.kinship`; both over the whole graph, so no lines are read for them), how many of a thing a person has (:mod:`pcm.retrieval.counts`), what came just
    before or after a thing of the same kind (:mod:`pcm.retrieval.sequence`), how long lay between two events
    (:mod:`pcm.retrieval.intervals`). Empty when the memory holds none or the graph cannot be
    read. ``worded``: those worked answers are chosen by patterns over the question's English wording; without it
    (a question read into a frame, which chose its operation already) only the lines are returned."""
    from pcm.retrieval.facts import fact_context, graph_posts
    from pcm.retrieval.traversal import TraversalEngine

    try:
        if not worded:
            with TraversalEngine.for_memory(memory) as engine:
                return fact_context(memory, question, entities, engine.vectors), None
        acted = action_answer(memory, question, entities, classes, today=today) or kin_answer(memory, question, entities)
        if acted is not None:
            by_graph = graph_posts(memory, acted.graphs)
            posts = answers.posts_of(memory, sorted({p for g in acted.graphs for p in by_graph.get(g, ())}))
            return [], _Worked(acted.text, posts, acted.note)
        with TraversalEngine.for_memory(memory) as engine:
            items = fact_context(memory, question, entities, engine.vectors)
            lines = [line for line, _ in items]
            number = count_answer(question, lines, owner_name=memory.manifest.owner)
            if number is not None:
                return items, _Worked(number.text, items[number.line][1],
                                      "counted on the stored facts' line for the person and the thing")
            neighbour = neighbour_answer(question, lines)
            if neighbour is not None:
                return items, _Worked(neighbour.text, [p for i in neighbour.lines for p in items[i][1]],
                                      "the nearest dated fact of the same kind on the asked side")
            interval = interval_answer(question, lines, engine.vectors) if items else None
            if interval is not None:
                return items, _Worked(interval.text, [p for i in interval.lines for p in items[i][1]],
                                      "counted between the dated facts of the question's two events")
            return items, None
    except (PcmError, OSError) as error:
        log.info("fact context unavailable: %s", error)
        return [], None


def _traversal_context(memory: MemoryContext, question: str, start: Sequence[str], k: int) -> list[tuple[str, list[Said]]]:
    """Facts around the matched entities from :mod:`pcm.retrieval.traversal` (WaterCircles unless the settings
    name another algorithm), each with the posts it came from; empty when traversal is unavailable."""
    if not start:
        return []
    from pcm.retrieval.traversal import TraversalEngine
    from pcm.retrieval.traversal.service import configured_algorithm

    algorithm = configured_algorithm(memory)
    try:
        with TraversalEngine.for_memory(memory) as engine:
            found = engine.retrieve(question, list(start), algorithm).triples[: 4 * k]
            lines = [item.text or engine.text_of(item.triple) for item in found]
    except (PcmError, OSError, ValueError) as error:
        log.info("traversal fallback unavailable: %s", error)
        return []
    posts = {p.post: p for p in answers.posts_of(memory, [s.post for item in found for s in item.sources if s.post])}
    return [
        (line, [posts[s.post] for s in item.sources if s.post in posts])
        for line, item in zip(lines, found, strict=True)
    ]


# ------------------------------------------------------------------------------------------------ runner and cache


class CachingClient:
    """Wraps an LLM client: a reply is reused for the same memory version, model, operation and prompt.

    Kept in the process and on disk (``<memory>/cache/ask/llm/<key>.json``, best effort), so asking the same
    question of an unchanged memory costs no LLM call and gives the same answer.
    """

    def __init__(self, client: LLMClient, memory: MemoryContext) -> None:
        self._memo = memory.llm_replies  # the memory's own: another memory in the process never sees these
        self._lock = memory.lock
        self.client = client
        self.name = client.name
        self.usage: Usage = client.usage
        self.version = memory_version(memory)
        self.directory: Path = memory.settings.memory / CACHE_DIR / "llm"
        self.calls = 0
        self.hits = 0
        self.ms = 0.0

    @staticmethod
    def forget(memory: MemoryContext) -> None:
        """Drop the memory's cached replies, kept in this process and on disk."""
        import shutil

        with memory.lock:
            memory.llm_replies.clear()
        shutil.rmtree(memory.settings.memory / CACHE_DIR / "llm", ignore_errors=True)

    def key(self, request: Request) -> str:
        parts: list[object] = [self.version, self.name, request.operation, request.system,
                               [(m.role, m.content) for m in request.messages]]
        if request.schema is not None:
            parts.append(request.schema.name)
        payload = json.dumps(parts)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]

    def complete(self, request: Request) -> Completion:
        key = self.key(request)
        cached = self._lookup(key)
        if cached is not None:
            self.hits += 1
            return Completion(text=cached, model=self.name, input_tokens=0, output_tokens=0, stop_reason="cached")
        started = time.perf_counter()
        try:
            completion = self.client.complete(request)
        finally:
            self.ms += (time.perf_counter() - started) * 1000
        self.calls += 1
        if completion.text is None:  # pragma: no cover - defensive
            raise LLMError(f"{self.name}: empty reply")
        self._store(key, completion.text)
        return completion

    def _lookup(self, key: str) -> str | None:
        with self._lock:
            if key in self._memo:
                return self._memo[key]
        try:
            data = json.loads((self.directory / f"{key}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        text = data.get("text") if isinstance(data, dict) else None
        if isinstance(text, str):
            with self._lock:
                self._memo[key] = text
        return text if isinstance(text, str) else None

    def _store(self, key: str, text: str) -> None:
        with self._lock:
            self._memo[key] = text
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            tmp = self.directory / f"{key}.tmp"
            tmp.write_text(json.dumps({"model": self.name, "text": text}), encoding="utf-8")
            tmp.replace(self.directory / f"{key}.json")
        except OSError as error:
            log.info("LLM reply cache not written: %s", error)


__all__ = ["AskResult", "CachingClient", "NO_LLM_NOTE", "PATHS", "answer_step", "ask"]

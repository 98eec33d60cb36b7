"""Question decomposition and search plans for ``pcm ask`` (issue 10 part 2, after PersonalAI 2.0 §III).

A question the model judges multi-hop is split into independent sub-questions, each with a short plan of search
steps. Each step runs the whole ask pipeline (SPARQL with repair, then events/traversal, then recall); after a
step the model checks what was found against the sub-question ("enough to answer?", "revise the remaining
steps?"); and one last call combines the findings into the answer, citing the posts of the steps it used.

Why the bounds (:class:`Bounds`): every step is a full pipeline run (one or more model calls), so a plan costs at
most ``sub_questions x (steps + checks)`` runs plus two calls, and a revision may happen once per sub-question.

Routing without a model call lives in :mod:`pcm.retrieval.wording`: ``route`` is a keyword router (why / what
happened after / what did we talk about) that picks the extra context (event chains, session summaries) when the
question is not read into a frame; ``may_decompose`` is a cheap filter so a single-clause question costs no
decomposition call (the model still decides for every question that might have several parts). Replies are JSON parsed into typed records; a malformed reply is never fatal: ask falls back to
the single-question pipeline (or keeps the remaining steps) and says so in the ``--explain`` trace.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from pcm.llm.base import LLMClient, Message, Request
from pcm.models import Message as Said
from pcm.prompts import PromptFile, load, refs
from pcm.retrieval.answer import ContextAnswer, parse_context_answer

if TYPE_CHECKING:
    from pcm.settings import Settings

DECOMPOSE_FILE, CHECK_FILE, COMBINE_FILE = "decompose.v1.md", "plan_check.v1.md", "combine.v1.md"
KINDS = ("factual", "why", "after", "conversation")
#: Event-chain walks (``pcm.retrieval.traversal.events`` directions) per question kind: "what happened after"
#: is both what followed in time and what the event led to.
DIRECTIONS: dict[str, tuple[str, ...]] = {"why": ("causes",), "after": ("after", "effects")}
MAX_SUB_QUESTIONS = 3
MAX_STEPS = 3
MAX_REVISIONS = 1
#: Output budgets: a plan or a check is a small JSON object; the combined answer is one line.
DECOMPOSE_TOKENS, CHECK_TOKENS, COMBINE_TOKENS = 600, 400, 400

_JSON = re.compile(r"\{.*\}", re.DOTALL)


# ------------------------------------------------------------------------------------------------ routing


@dataclass(frozen=True)
class Bounds:
    """How big a plan may get (module defaults; Settings may override with ``plan_max_*`` fields)."""

    sub_questions: int = MAX_SUB_QUESTIONS
    steps: int = MAX_STEPS
    revisions: int = MAX_REVISIONS

    @classmethod
    def from_settings(cls, settings: Settings) -> Bounds:
        def bound(name: str, default: int) -> int:
            value = getattr(settings, name, None)
            return max(1, int(value)) if isinstance(value, int) else default

        return cls(bound("plan_max_sub_questions", MAX_SUB_QUESTIONS), bound("plan_max_steps", MAX_STEPS),
                   max(0, int(getattr(settings, "plan_max_revisions", MAX_REVISIONS) or 0)))


# ------------------------------------------------------------------------------------------------ replies


class PlanReplyError(ValueError):
    """A decomposition or check reply that is not the JSON object the prompt asks for."""


@dataclass(frozen=True)
class SubQuestion:
    question: str
    steps: tuple[str, ...]

    def as_json(self) -> dict[str, object]:
        return {"question": self.question, "plan": list(self.steps)}


@dataclass(frozen=True)
class Decomposition:
    """The model's reading of a question: multi-hop or not, its kind, and the sub-questions with their plans."""

    multi_hop: bool
    kind: str | None
    sub_questions: tuple[SubQuestion, ...]


@dataclass(frozen=True)
class Check:
    """The model's verdict after a step: enough to answer, and the new remaining steps when it revises them."""

    enough: bool
    revise: bool
    steps: tuple[str, ...]
    reason: str


def _json_object(text: str) -> dict[str, Any]:
    match = _JSON.search(text)
    if match is None:
        raise PlanReplyError("the reply holds no JSON object")
    try:
        data = json.loads(match.group(0))
    except ValueError as error:
        raise PlanReplyError(f"the reply is not valid JSON ({error})") from error
    if not isinstance(data, dict):
        raise PlanReplyError("the reply is not a JSON object")
    return data


def _strings(value: object, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PlanReplyError(f"{what} must be a list of strings")
    return tuple(" ".join(v.split()) for v in value if v.strip())


def _flag(data: dict[str, Any], name: str) -> bool:
    value = data.get(name, False)
    if not isinstance(value, bool):
        raise PlanReplyError(f"{name!r} must be true or false")
    return value


def parse_decomposition(text: str, bounds: Bounds = Bounds()) -> Decomposition:
    """Parse the decompose reply; sub-questions are objects ``{question, plan}`` or plain strings (then a
    top-level ``plan`` list gives their steps: a list of lists, or one flat list for a single sub-question)."""
    data = _json_object(text)
    multi_hop = _flag(data, "multi_hop")
    kind = data.get("kind")
    if kind is not None and kind not in KINDS:
        raise PlanReplyError(f"unknown kind {kind!r}")
    raw = data.get("sub_questions") or []
    if not isinstance(raw, list):
        raise PlanReplyError("'sub_questions' must be a list")
    top = data.get("plan") or []
    if not isinstance(top, list):
        raise PlanReplyError("'plan' must be a list")
    subs: list[SubQuestion] = []
    for i, item in enumerate(raw[: bounds.sub_questions]):
        if isinstance(item, dict):
            question = item.get("question")
            steps = _strings(item.get("plan", item.get("steps")), "a sub-question's plan")
        elif isinstance(item, str):
            question = item
            aligned = top[i] if i < len(top) and isinstance(top[i], list) else (top if len(raw) == 1 else [])
            steps = _strings(aligned if all(isinstance(s, str) for s in aligned) else None, "'plan'")
        else:
            raise PlanReplyError("a sub-question must be a string or an object")
        if not isinstance(question, str) or not question.strip():
            raise PlanReplyError("a sub-question has no question text")
        question = " ".join(question.split())
        subs.append(SubQuestion(question, steps[: bounds.steps] or (question,)))
    return Decomposition(multi_hop, kind, tuple(subs))


def parse_check(text: str, budget: int) -> Check:
    data = _json_object(text)
    steps = _strings(data.get("steps"), "'steps'")[: max(0, budget)]
    reason = data.get("reason")
    return Check(_flag(data, "enough"), _flag(data, "revise"), steps, " ".join(str(reason or "").split()))


# ------------------------------------------------------------------------------------------------ the trace


@dataclass
class StepRecord:
    """One search step as run: the step, the question the pipeline got, and what it found."""

    sub: int
    index: int
    step: str
    asked: str
    path: str
    answer: str
    note: str
    posts: list[Said]
    facts: int = 0
    sparql: str | None = None

    @property
    def found(self) -> bool:
        return self.path != "none"

    def as_json(self) -> dict[str, object]:
        return {
            "sub": self.sub, "index": self.index, "step": self.step, "asked": self.asked, "path": self.path,
            "answer": self.answer, "note": self.note, "facts": self.facts, "sparql": self.sparql,
            "posts": [p.post for p in self.posts],
            "evidence": [{"post": p.post, "source_id": p.source_id, "text": p.text} for p in self.posts],
        }


@dataclass(frozen=True)
class Revision:
    sub: int
    after_step: int
    reason: str
    steps: tuple[str, ...]

    def as_json(self) -> dict[str, object]:
        return {"sub": self.sub, "after_step": self.after_step, "reason": self.reason, "steps": list(self.steps)}


@dataclass
class PlanTrace:
    """How ask read the question and, when it planned, every step, revision and check: the ``--explain`` part."""

    mode: str
    """``keywords`` (no model call), ``frame`` (read into a typed frame, :mod:`pcm.retrieval.frame`), ``model``
    (decomposition asked), ``forced`` (``--plan``)."""
    kind: str
    multi_hop: bool = False
    planned: bool = False
    sub_questions: list[SubQuestion] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    revisions: list[Revision] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, object]:
        return {
            "mode": self.mode, "kind": self.kind, "multi_hop": self.multi_hop, "planned": self.planned,
            "sub_questions": [s.as_json() for s in self.sub_questions],
            "steps": [s.as_json() for s in self.steps],
            "revisions": [r.as_json() for r in self.revisions],
            "notes": list(self.notes),
        }


# ------------------------------------------------------------------------------------------------ model calls


def _prompt(name: str) -> PromptFile:
    return load(f"retrieval/{name}")


def prompt_versions() -> str:
    """What a planned answer records of the three plan prompts: ``name.vN@digest`` each."""
    return refs(*(_prompt(n) for n in (DECOMPOSE_FILE, CHECK_FILE, COMBINE_FILE)))


def _date(as_of: datetime) -> str:
    return f"{as_of.date().isoformat()} ({as_of:%A})"


def decompose(client: LLMClient, question: str, *, as_of: datetime, owner_name: str, bounds: Bounds = Bounds()) -> Decomposition:
    """One cheap call (operation ``decompose``): multi-hop or not, the kind, sub-questions and their plans."""
    prompt = _prompt(DECOMPOSE_FILE)
    user = prompt.render("user", date=_date(as_of), owner_name=owner_name, question=question)
    reply = client.complete(Request(system=prompt.parts["system"], messages=[Message.user(user)], operation="decompose",
                            max_tokens=DECOMPOSE_TOKENS))
    return parse_decomposition(reply.text, bounds)


def check_step(client: LLMClient, question: str, records: Sequence[StepRecord], remaining: Sequence[str], budget: int) -> Check:
    """After a step (operation ``plan_check``): enough to answer?  revise the remaining steps?"""
    prompt = _prompt(CHECK_FILE)
    findings = "\n".join(f"{i}. {r.step} -> {r.answer if r.found else 'found nothing'}" for i, r in enumerate(records, 1))
    rest = "\n".join(f"- {s}" for s in remaining) or "(none)"
    user = prompt.render("user", question=question, findings=findings or "(none)", remaining=rest)
    reply = client.complete(Request(system=prompt.render("system", budget=str(budget)), messages=[Message.user(user)],
                            operation="plan_check", max_tokens=CHECK_TOKENS))
    return parse_check(reply.text, budget)


def combine(
    client: LLMClient, question: str, records: Sequence[StepRecord], *, as_of: datetime, owner_name: str, subs: Sequence[SubQuestion]
) -> ContextAnswer:
    """The final answer from the numbered findings (operation ``combine``), citing the findings it rests on."""
    prompt = _prompt(COMBINE_FILE)
    lines = []
    for i, r in enumerate(records, 1):
        about = subs[r.sub - 1].question if 0 < r.sub <= len(subs) else ""
        lines.append(f"[{i}] ({about}) {r.step}: {r.answer}")
    user = prompt.render("user", date=_date(as_of), owner_name=owner_name, findings="\n".join(lines), question=question)
    reply = client.complete(Request(system=prompt.parts["system"], messages=[Message.user(user)], operation="combine",
                            max_tokens=COMBINE_TOKENS))
    return parse_context_answer(reply.text, len(records))


# ------------------------------------------------------------------------------------------------ running a plan


class StepResult(Protocol):
    """What a step needs from an ask result (``pcm.retrieval.ask.AskResult``)."""

    path: str
    answer: str
    note: str
    posts: list[Said]
    facts: list[Any]
    sparql: str | None


@dataclass
class PlanOutcome:
    """A planned answer: the combined text (None: not in memory) and the posts of the findings it cites."""

    answer: str | None
    posts: list[Said]


def step_question(step: str, earlier: Sequence[StepRecord]) -> str:
    """The question a step asks the pipeline: the step, with what earlier steps of its sub-question found (so a
    step like "where is the shop found before" is grounded on the shop's name)."""
    known = [r.answer.rstrip(".") for r in earlier if r.found]
    return f"{step} (known: {'; '.join(known)})" if known else step


def run_plan(
    question: str,
    decomposition: Decomposition,
    *,
    run_step: Callable[[str], StepResult],
    client: LLMClient,
    trace: PlanTrace,
    as_of: datetime,
    owner_name: str,
    bounds: Bounds = Bounds(),
) -> PlanOutcome:
    """Run every sub-question's plan (bounded, see :class:`Bounds`), then combine the findings."""
    trace.planned = True
    trace.sub_questions = list(decomposition.sub_questions[: bounds.sub_questions])
    for number, sub in enumerate(trace.sub_questions, 1):
        _run_sub(number, sub, run_step=run_step, client=client, trace=trace, bounds=bounds)
    found = [r for r in trace.steps if r.found]
    if not found:
        trace.notes.append("no step found anything")
        return PlanOutcome(None, [])
    reply = combine(client, question, found, as_of=as_of, owner_name=owner_name, subs=trace.sub_questions)
    if reply.text is None:
        trace.notes.append("the findings do not answer the question")
        return PlanOutcome(None, [])
    chosen = reply.cited or tuple(range(1, len(found) + 1))
    return PlanOutcome(reply.text, [p for i in chosen for p in found[i - 1].posts])


def _run_sub(number: int, sub: SubQuestion, *, run_step: Callable[[str], StepResult], client: LLMClient,
             trace: PlanTrace, bounds: Bounds) -> None:
    remaining = list(sub.steps[: bounds.steps])
    records: list[StepRecord] = []
    revisions = 0
    while remaining and len(records) < bounds.steps:
        step = remaining.pop(0)
        asked = step_question(step, records)
        result = run_step(asked)
        record = StepRecord(number, len(records) + 1, step, asked, result.path, result.answer, result.note,
                            list(result.posts), len(result.facts), result.sparql)
        records.append(record)
        trace.steps.append(record)
        budget = bounds.steps - len(records)
        if budget <= 0 or (record.found and not remaining):
            break
        try:
            check = check_step(client, sub.question, records, remaining, budget)
        except PlanReplyError as error:
            trace.notes.append(f"sub-question {number}, step {record.index}: check reply ignored ({error})")
            continue
        if check.enough:
            trace.notes.append(f"sub-question {number}: enough after step {record.index}"
                               + (f" ({check.reason})" if check.reason else ""))
            break
        if check.revise and revisions < bounds.revisions:
            revisions += 1
            remaining = list(check.steps[:budget])
            trace.revisions.append(Revision(number, record.index, check.reason, tuple(remaining)))


__all__ = [
    "Bounds",
    "Check",
    "DIRECTIONS",
    "Decomposition",
    "KINDS",
    "PlanOutcome",
    "PlanReplyError",
    "PlanTrace",
    "Revision",
    "StepRecord",
    "SubQuestion",
    "check_step",
    "combine",
    "decompose",
    "parse_check",
    "parse_decomposition",
    "prompt_versions",
    "run_plan",
    "step_question",
]

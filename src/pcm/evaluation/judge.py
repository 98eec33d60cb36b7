"""LLM judges with the benchmarks' own grading prompts (versioned files in ``pcm/prompts/evaluation/``).

LongMemEval: its official per-type prompts (off-by-one days tolerated for temporal reasoning, the updated answer
counts for knowledge updates, a rubric for preferences, and the abstention prompt for ``_abs`` questions); a verdict
is correct when the reply says "yes", as in its ``evaluate_qa.py``. LoCoMo: the widely used "J" prompt (generous
CORRECT/WRONG grading, reply as JSON ``{"label": ...}``). LoCoMo adversarial questions are never sent to a judge:
they are correct exactly when the answer says the memory does not hold it (the rule of LoCoMo's own scoring code).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from pcm.evaluation.datasets import LONGMEMEVAL_TYPES, EvalQuestion
from pcm.evaluation.metrics import says_not_in_memory
from pcm.llm.base import LLMClient, Message, Request
from pcm.prompts import PROMPTS_DIR as _ALL_PROMPTS
from pcm.prompts import PromptFile, load

PROMPTS_DIR = _ALL_PROMPTS / "evaluation"
OPERATION = "judge"
_LABEL = re.compile(r"\b(CORRECT|WRONG)\b")


@dataclass(frozen=True)
class Verdict:
    """A judged answer: ``correct`` is ``None`` when no judge ran (no LLM configured)."""

    correct: bool | None
    method: str
    """``llm:<prompt version>@<digest>``, ``rule:declines`` (adversarial) or ``skipped``."""
    reply: str = ""

    def as_json(self) -> dict[str, object]:
        return {"correct": self.correct, "method": self.method, "reply": self.reply}


SKIPPED = Verdict(None, "skipped", "no judge LLM configured")


def prompt_name(dataset: str, question: EvalQuestion) -> str:
    """The prompt file stem for a question (``judge_locomo`` or ``judge_longmemeval_<type>``)."""
    if dataset == "locomo":
        return "judge_locomo"
    if question.abstention:
        return "judge_longmemeval_abstention"
    if question.category not in LONGMEMEVAL_TYPES:
        raise ValueError(f"no LongMemEval judge prompt for question type {question.category!r}")
    return "judge_longmemeval_" + question.category.replace("-", "_")


def judge_prompt(name: str) -> PromptFile:
    return load(f"evaluation/{name}.v1.md")


def needs_llm(dataset: str, question: EvalQuestion) -> bool:
    """LoCoMo adversarial questions are scored by rule; everything else needs the judge model."""
    return not (dataset == "locomo" and question.abstention)


def judge(client: LLMClient | None, dataset: str, question: EvalQuestion, answer: str) -> Verdict:
    """Grade ``answer`` against the gold of ``question`` (see the module docstring)."""
    if not needs_llm(dataset, question):
        return Verdict(says_not_in_memory(answer), "rule:declines")
    if client is None:
        return SKIPPED
    prompt = judge_prompt(prompt_name(dataset, question))
    user = prompt.render("user", question=question.text, gold=question.gold, answer=answer)
    reply = client.complete(
        Request(system=prompt.parts["system"].strip(), messages=[Message.user(user)], operation=OPERATION, max_tokens=200)
    ).text
    correct = parse_locomo_label(reply) if dataset == "locomo" else "yes" in reply.lower()
    return Verdict(correct, f"llm:{prompt.ref}", reply.strip())


def parse_locomo_label(reply: str) -> bool:
    """``{"label": "CORRECT"}`` (possibly inside prose or a code fence), else the last CORRECT/WRONG word."""
    for match in re.finditer(r"\{[^{}]*\}", reply):
        try:
            label = json.loads(match.group(0)).get("label")
        except (ValueError, AttributeError):
            continue
        if isinstance(label, str):
            return label.strip().upper() == "CORRECT"
    words = _LABEL.findall(reply.upper())
    return bool(words) and words[-1] == "CORRECT"


__all__ = ["OPERATION", "SKIPPED", "Verdict", "judge", "judge_prompt", "needs_llm", "parse_locomo_label", "prompt_name"]

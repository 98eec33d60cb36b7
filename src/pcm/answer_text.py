"""The human form of an answer (``pcm ask`` without ``--json``), from its JSON (:class:`pcm.models.Answer`).

Kept apart from the model and written against its JSON, with the standard library only: ``pcm ask`` answered by a
running ``pcm serve`` prints the server's JSON this way without importing pydantic, which costs a warm command
more time than the rest of its start.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any


def answer_text(answer: Mapping[str, Any], explain: bool = False) -> str:
    """Answer, path and note, cited messages; with ``explain``, the facts used, the frame, the computation, the plan,
    every query tried and the timings."""
    lines = [str(answer["answer"]), f"(path: {answer['path']}{'; ' + answer['note'] if answer.get('note') else ''})"]
    citations = answer.get("citations") or []
    if citations:
        lines.append("evidence:")
        for p in citations:
            when = datetime.fromisoformat(p["time"]).isoformat(sep=" ", timespec="minutes") if p.get("time") else "?"
            lines.append(f"  [{p['session']} {p.get('source_id') or ''} {when}] {p.get('speaker') or p['role']}: "
                         f"{' '.join(p['text'].split())}")
    if not explain:
        return "\n".join(lines)
    facts = answer.get("facts") or []
    if facts:
        lines.append("facts:")
        lines += [f"  {f['text']}" for f in facts[:40]]
    frame = answer.get("frame")
    if frame is not None:
        lines.append("frame: " + json.dumps({k: v for k, v in frame.items() if v}, ensure_ascii=False))
    if answer.get("computed"):
        lines.append(f"computed: {answer['computed']}")
    if answer.get("plan") is not None:
        lines += _plan_lines(answer["plan"])
    for step in answer.get("trace") or []:
        lines.append(f"-- round {step['round'] + 1}, {step['source']}: {step['outcome']} ({step['rows']} rows)"
                     + (f": {step['detail']}" if step.get("detail") else ""))
        if step.get("sparql"):
            lines += [f"   {line}" for line in step["sparql"].strip().splitlines()]
    if answer.get("stats"):
        lines.append("stats: " + json.dumps(answer["stats"], sort_keys=True))
    return "\n".join(lines)


def _plan_lines(plan: Mapping[str, Any]) -> list[str]:
    """How the question was read, each sub-question with its planned steps, each step run and each revision."""
    head = f"plan: {plan.get('mode')}, kind {plan.get('kind')}, " + (
        "multi-hop" if plan.get("multi_hop") else "single question")
    lines = [head] + [f"  note: {n}" for n in plan.get("notes") or ()]
    for i, sub in enumerate(plan.get("sub_questions") or (), 1):
        lines.append(f"  sub-question {i}: {sub.get('question')}")
        lines += [f"    planned step {j}: {s}" for j, s in enumerate(sub.get("plan") or (), 1)]
        for record in (r for r in plan.get("steps") or () if r.get("sub") == i):
            lines.append(f"    ran step {record.get('index')}: {record.get('asked')} -> [{record.get('path')}] "
                         f"{record.get('answer')}")
            lines += _evidence(record.get("evidence") or ())
            for revision in (r for r in plan.get("revisions") or ()
                             if r.get("sub") == i and r.get("after_step") == record.get("index")):
                lines.append(f"    revised after step {record.get('index')} "
                             f"({revision.get('reason') or 'no reason given'}): " + " | ".join(revision.get("steps") or ()))
    return lines


def _evidence(said: Sequence[Mapping[str, Any]]) -> list[str]:
    return [f"      evidence: {e.get('source_id') or e.get('post')} {' '.join(str(e.get('text')).split())[:100]}"
            for e in said]


__all__ = ["answer_text"]

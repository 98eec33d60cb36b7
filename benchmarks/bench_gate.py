"""The small-talk gate (pcm.extraction.gate) on labelled and unlabelled conversations: what it keeps from the model.

    python benchmarks/bench_gate.py [--labels DIR] [--data DIR] [--json] [--all-gated]

1. Labelled utterances (``tests/fixtures/extraction/*.json``, ``fact_bearing`` true/false): precision and recall of
   the gate with "gated" as the negative class. Recall is the share of fact-bearing utterances that pass (the
   requirement is >= 0.95); precision the share of passed utterances that are fact-bearing; also the share of the
   non-fact-bearing ones gated. Each wrong decision is listed (id, reason, text).
2. Every utterance of LoCoMo conv-26 and of the sample conversations (src/pcm/samples): the share gated, and the
   evidence utterances of their questions that were gated (should be none; a gated question whose answer, the next
   turn, passes is harmless: the answer's extraction reads it as context). The LongMemEval slice too, when present:
   the share gated and the answer turns (``has_answer``) gated.
3. The gated texts of conv-26, one a line, for a person to eyeball wrong gates (``--all-gated`` adds the samples').

Each utterance is judged as the extraction pipeline judges it: told the session's speakers and the turn before when
someone else said it. The data under ../shared/data is read at run time, never copied.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from pcm.conversations import Conversation, parse_file, sample_paths  # noqa: E402
from pcm.evaluation.facts import label_conversations, load_label_dir, resolve  # noqa: E402
from pcm.extraction.gate import GATE, GateDecision  # noqa: E402

DATA = REPO.parent / "shared" / "data"
LOCOMO = Path("locomo") / "locomo-conv-26.json"
LONGMEMEVAL = Path("longmemeval") / "longmemeval-oracle-dev48.json"
LABELS = REPO / "tests" / "fixtures" / "extraction"
QUESTIONS = REPO / "src" / "pcm" / "samples" / "questions.json"


@dataclass(frozen=True)
class Judged:
    conversation: str
    position: int
    message: str
    text: str
    decision: GateDecision


def judge(conversations: Sequence[Conversation]) -> list[Judged]:
    """Every utterance through the gate, in order, with the context the pipeline gives it."""
    out = []
    for conversation in conversations:
        names = sorted({u.speaker for u in conversation.utterances if u.speaker})
        before = None
        for u in sorted(conversation.utterances, key=lambda u: u.position):
            other = before is not None and (before.role, before.speaker) != (u.role, u.speaker)
            decision = GATE.decide(u.content, names=names, previous=before.content if other and before else None)
            out.append(Judged(conversation.id, u.position, u.source_id or f"#{u.position}", u.content, decision))
            before = u
    return out


def labelled(labels_dir: Path, data: Path) -> dict[str, Any]:
    """Precision/recall of the gate on every label file (gated = negative)."""
    tp = fp = fn = tn = 0
    wrong: list[dict[str, str]] = []
    for labels in load_label_dir(labels_dir):
        conversations = label_conversations(labels, data)
        utterances = resolve(labels, conversations)
        by_place = {(j.conversation, j.position): j for j in judge(conversations)}
        for item in labels.utterances:
            decision = by_place[(utterances[item.id].session, utterances[item.id].position)].decision
            if decision.passes and item.fact_bearing:
                tp += 1
                continue
            if not decision.passes and not item.fact_bearing:
                tn += 1
                continue
            if decision.passes:
                fp += 1
            else:
                fn += 1
            wrong.append({"id": f"{labels.source}/{item.id}", "kind": "small talk passed" if decision.passes else
                          "fact gated", "reason": decision.reason, "text": utterances[item.id].content})
    return {
        "utterances": tp + fp + fn + tn,
        "fact_bearing": tp + fn,
        "recall": _ratio(tp, tp + fn),
        "precision": _ratio(tp, tp + fp),
        "non_fact_gated": _ratio(tn, tn + fp),
        "wrong": wrong,
    }


def _ratio(a: int, b: int) -> float | None:
    return round(a / b, 3) if b else None


def shares(name: str, judged: list[Judged], evidence: set[str]) -> dict[str, Any]:
    """Share gated, and the evidence turns gated; of those, the ones whose next turn is gated too (a question
    held back is harmless when its answer, the next turn, reaches the model with it as context)."""
    gated = [j for j in judged if not j.decision.passes]
    place = {(j.conversation, j.position): j for j in judged}
    lost = [j.message for j in gated if j.message in evidence
            and (nxt := place.get((j.conversation, j.position + 1))) is not None and not nxt.decision.passes]
    return {
        "source": name,
        "utterances": len(judged),
        "gated": len(gated),
        "share_gated": _ratio(len(gated), len(judged)),
        "evidence": len(evidence),
        "evidence_gated": sorted(j.message for j in gated if j.message in evidence),
        "evidence_gated_with_next_turn": sorted(lost),
    }


def longmemeval(path: Path) -> dict[str, Any]:
    """Share of LongMemEval turns gated, and the answer turns (``has_answer``) gated, each session read in order."""
    turns = answers = 0
    gated: list[str] = []
    answer_gated: list[str] = []
    for question in json.loads(path.read_text(encoding="utf-8")):
        for session in question["haystack_sessions"]:
            before = None
            for turn in session:
                other = before is not None and before["role"] != turn["role"]
                passes = GATE.passes(turn["content"], previous=before["content"] if other and before else None)
                turns += 1
                answers += bool(turn.get("has_answer"))
                if not passes:
                    gated.append(turn["content"])
                    if turn.get("has_answer"):
                        answer_gated.append(turn["content"])
                before = turn
    return {"source": "longmemeval", "utterances": turns, "gated": len(gated),
            "share_gated": _ratio(len(gated), turns),
            "answers": answers, "answers_gated": answer_gated, "gated_texts": gated}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", type=Path, default=LABELS, help="folder of label files (*.json)")
    parser.add_argument("--data", type=Path, default=DATA, help="the shared data folder (LoCoMo)")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of text")
    parser.add_argument("--all-gated", action="store_true", help="list the samples' gated texts too")
    args = parser.parse_args()

    result: dict[str, Any] = {}
    if any(args.labels.glob("*.json")):
        result["labelled"] = labelled(args.labels, args.data)
    locomo_path = args.data / LOCOMO
    judged: dict[str, list[Judged]] = {}
    if locomo_path.exists():
        judged["conv-26"] = judge(parse_file(locomo_path))
        raw = json.loads(locomo_path.read_text(encoding="utf-8"))
        evidence = {e for sample in raw for q in sample.get("qa", []) for e in q.get("evidence", [])}
        result["conv-26"] = shares("conv-26", judged["conv-26"], evidence)
    if (args.data / LONGMEMEVAL).exists():
        result["longmemeval"] = longmemeval(args.data / LONGMEMEVAL)
    judged["samples"] = judge([c for p in sample_paths() for c in parse_file(p)])
    questions = json.loads(QUESTIONS.read_text(encoding="utf-8"))
    result["samples"] = shares("samples", judged["samples"], {e for q in questions for e in q["evidence"]})
    texts = [j.text for js in judged.values() for j in js]
    started = time.perf_counter()
    for text in texts:
        GATE.decide(text)
    result["ms_per_utterance"] = round((time.perf_counter() - started) * 1000 / max(1, len(texts)), 4)
    listed = ["conv-26", "samples"] if args.all_gated else ["conv-26"]
    result["gated_texts"] = {
        name: [f"{j.message}\t{j.text}" for j in judged[name] if not j.decision.passes]
        for name in listed if name in judged
    }
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
        return
    _print(result)


def _print(result: dict[str, Any]) -> None:
    if "labelled" in result:
        lab = result["labelled"]
        print(f"labelled: {lab['utterances']} utterances, {lab['fact_bearing']} fact-bearing; recall {lab['recall']} "
              f"(>= 0.95 required), precision {lab['precision']}, non-fact gated {lab['non_fact_gated']}")
        for w in lab["wrong"]:
            print(f"  {w['kind']:17} {w['id']:45} {w['reason']:30} {w['text'][:100]!r}")
    else:
        print("labelled: no label files yet")
    for name in ("conv-26", "samples"):
        if name in result:
            s = result[name]
            print(f"{name}: gated {s['gated']} of {s['utterances']} ({s['share_gated']}); evidence utterances gated: "
                  f"{len(s['evidence_gated'])} of {s['evidence']} {s['evidence_gated'] or ''}; with their next turn: "
                  f"{len(s['evidence_gated_with_next_turn'])} {s['evidence_gated_with_next_turn'] or ''}")
    if "longmemeval" in result:
        lme = result["longmemeval"]
        print(f"longmemeval: gated {lme['gated']} of {lme['utterances']} ({lme['share_gated']}); answer turns gated: "
              f"{len(lme['answers_gated'])} of {lme['answers']}")
    print(f"speed: {result['ms_per_utterance']} ms an utterance")
    for name, lines in result["gated_texts"].items():
        print(f"\ngated texts of {name} ({len(lines)}):")
        for line in lines:
            print("  " + line)


if __name__ == "__main__":
    main()

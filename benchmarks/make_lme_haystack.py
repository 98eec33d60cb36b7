"""An S-like LongMemEval haystack from an oracle file: each question's own sessions plus seeded distractor sessions.

LongMemEval-S (about 50 sessions, ~115k tokens per question) is not reachable here; the oracle files hold only each
question's evidence sessions, where finding the right session is trivial. This script gives every question
``--distractors`` sessions drawn (seeded, per question) from the other questions' haystacks, merged with its own in
date order. Distractor turns lose their ``has_answer`` flags, so evidence stays the question's own turns; a
distractor keeps its own date (some fall after the question date, which recall ignores and LongMemEval-S avoids).

    python benchmarks/make_lme_haystack.py ../shared/data/longmemeval/longmemeval-oracle-dev48.json /tmp/s-like.json
    pcm eval longmemeval /tmp/s-like.json --llm none --out /tmp/run-s-like
    python benchmarks/bench_recall_memories.py longmemeval /tmp/s-like.json /tmp/run-s-like
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

DISTRACTORS = 45
SEED = 21


def build(records: list[dict[str, Any]], distractors: int = DISTRACTORS, seed: int = SEED) -> list[dict[str, Any]]:
    """The records with distractor sessions added (the input is not modified)."""
    pool = [
        (n, sid, date, session)
        for n, r in enumerate(records)
        for sid, date, session in zip(r["haystack_session_ids"], r["haystack_dates"], r["haystack_sessions"], strict=True)
    ]
    out = []
    for n, record in enumerate(records):
        own = set(record["haystack_session_ids"])
        others = [p for p in pool if p[0] != n and p[1] not in own]
        chosen = random.Random(f"{seed}:{record['question_id']}").sample(others, min(distractors, len(others)))
        sessions = list(zip(record["haystack_session_ids"], record["haystack_dates"], record["haystack_sessions"], strict=True))
        seen = set(own)
        for _, sid, date, session in chosen:
            if sid in seen:
                continue
            seen.add(sid)
            plain = [{k: v for k, v in turn.items() if k != "has_answer"} for turn in session]
            sessions.append((sid, date, plain))
        sessions.sort(key=lambda s: s[1])
        out.append({
            **record,
            "haystack_session_ids": [s[0] for s in sessions],
            "haystack_dates": [s[1] for s in sessions],
            "haystack_sessions": [s[2] for s in sessions],
        })
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("oracle", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--distractors", type=int, default=DISTRACTORS)
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args()
    records = json.loads(args.oracle.read_text(encoding="utf-8"))
    built = build(records, args.distractors, args.seed)
    args.out.write_text(json.dumps(built, ensure_ascii=False), encoding="utf-8")
    words = [sum(len(t["content"].split()) for s in r["haystack_sessions"] for t in s) for r in built]
    sessions = [len(r["haystack_sessions"]) for r in built]
    print(
        f"{len(built)} questions, {sum(sessions) / len(built):.1f} sessions and about "
        f"{1.3 * sum(words) / len(built) / 1000:.0f}k tokens (1.3 per word) each -> {args.out}"
    )


if __name__ == "__main__":
    main()

"""Scores that need no LLM: LoCoMo's token F1, evidence recall@k, and the aggregates the summaries print.

Token F1 follows LoCoMo's official ``task_eval/evaluation.py``: lowercase, drop commas and punctuation, drop the
articles a/an/the and the word "and", then F1 over the token multisets; multi-hop answers (category 1) are lists
scored gold item by gold item, open-domain golds keep their first ``;`` alternative, adversarial questions score 1
when the answer says the information is not there. The official code also Porter-stems every token (nltk); nltk is
not a pcm dependency, so tokens are compared unstemmed here, which can only lower F1 slightly (``went``/``go`` never
matched anyway; ``paintings``/``painting`` no longer do).

Evidence recall@k: a question counts as a hit at k only when ALL its evidence ids are among the first k retrieved.
"""

from __future__ import annotations

import re
import statistics
import string
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence

KS = (5, 10, 20)
_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
#: Phrases by which an answer declines: LoCoMo's own two, and pcm's "not in memory" wording.
_DECLINES = ("no information available", "not mentioned", "not in memory")


def normalize_answer(text: str) -> str:
    """LoCoMo's normalisation: lowercase, no commas or punctuation, no articles, single spaces."""
    text = str(text).replace(",", "").lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def token_f1(prediction: str, gold: str) -> float:
    """F1 of the normalised token multisets (0.0 when they share nothing, or when either is empty)."""
    predicted = normalize_answer(prediction).split()
    expected = normalize_answer(gold).split()
    same = sum((Counter(predicted) & Counter(expected)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(expected)
    return 2 * precision * recall / (precision + recall)


def multi_answer_f1(prediction: str, gold: str) -> float:
    """LoCoMo multi-hop: each comma-separated gold item takes its best-matching predicted item; the mean of those."""
    predictions = [p.strip() for p in str(prediction).split(",")]
    golds = [g.strip() for g in str(gold).split(",")]
    return statistics.fmean(max(token_f1(p, g) for p in predictions) for g in golds)


def says_not_in_memory(answer: str) -> bool:
    """Whether an answer declines (how an adversarial question is answered correctly)."""
    lowered = answer.lower()
    return any(phrase in lowered for phrase in _DECLINES)


def locomo_f1(prediction: str, gold: str, category: str) -> float:
    """The per-question score of LoCoMo's official QA evaluation, by category name."""
    if category == "adversarial":
        return 1.0 if says_not_in_memory(prediction) else 0.0
    if category == "multi-hop":
        return multi_answer_f1(prediction, gold)
    if category == "open-domain":
        gold = gold.split(";")[0].strip()
    return token_f1(prediction, gold)


# -- retrieval -------------------------------------------------------------------------------------------------------


def ranked_unique(values: Iterable[str | None]) -> list[str]:
    """Drop empty ids and repeats, keeping the first (best) rank of each."""
    return list(dict.fromkeys(v for v in values if v))


def hits_at(ranked: Sequence[str], evidence: Iterable[str], ks: Sequence[int] = KS) -> dict[int, bool]:
    """For each k: are all evidence ids among the first k ranked ids? (Empty evidence is never a hit.)"""
    wanted = set(evidence)
    return {k: bool(wanted) and wanted <= set(ranked[:k]) for k in ks}


def recall_table(rows: Iterable[tuple[str, Mapping[int, bool]]], ks: Sequence[int] = KS) -> dict[str, dict[str, float]]:
    """``{category: {"n": questions, "R@k": share of hits}}`` plus ``"all"``, from ``(category, hits_at)`` rows."""
    buckets: dict[str, list[Mapping[int, bool]]] = defaultdict(list)
    for category, hits in rows:
        buckets[category].append(hits)
        buckets["all"].append(hits)
    table: dict[str, dict[str, float]] = {}
    for category in sorted(buckets, key=lambda c: (c == "all", c)):
        rows_of = buckets[category]
        table[category] = {
            "n": len(rows_of), **{f"R@{k}": round(statistics.fmean(bool(h.get(k)) for h in rows_of), 4) for k in ks}
        }
    return table


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile (0.0 for no values): what p50/p95 latencies report."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


def mean_by(rows: Iterable[tuple[str, float | None]]) -> dict[str, dict[str, float | int | None]]:
    """``{category: {"n", "mean"}}`` plus ``"all"``; ``None`` values (not scored) are left out of the mean."""
    buckets: dict[str, list[float]] = defaultdict(list)
    seen: set[str] = set()
    for category, value in rows:
        seen.update((category, "all"))
        if value is not None:
            buckets[category].append(float(value))
            buckets["all"].append(float(value))
    return {
        c: {"n": len(buckets[c]), "mean": round(statistics.fmean(buckets[c]), 4) if buckets[c] else None}
        for c in sorted(seen, key=lambda c: (c == "all", c))
    }


__all__ = [
    "KS",
    "hits_at",
    "locomo_f1",
    "mean_by",
    "multi_answer_f1",
    "normalize_answer",
    "percentile",
    "ranked_unique",
    "recall_table",
    "says_not_in_memory",
    "token_f1",
]

"""LoCoMo and LongMemEval as evaluation items: the turns to ingest, the questions, their gold and evidence.

One :class:`EvalItem` is what gets a fresh memory: a LoCoMo conversation (sample) with all its questions, or one
LongMemEval question with its own haystack. The turns come from :mod:`pcm.conversations` (the same parsers
``pcm ingest`` uses), so the evidence ids below are exactly the ``source_id`` of the stored posts: LoCoMo ``dia_id``
(``D8:6``) and LongMemEval ``<session id>:<turn position>``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pcm.conversations import Conversation, list_field, longmemeval_sessions, parse_locomo, parse_timestamp
from pcm.errors import InputError, UsageError

DATASETS = ("locomo", "longmemeval")
LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
LONGMEMEVAL_TYPES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "temporal-reasoning",
    "knowledge-update",
)
#: What LoCoMo's adversarial questions expect: that the memory says it does not hold the answer.
ADVERSARIAL_GOLD = "Not mentioned in the conversation"


@dataclass(frozen=True)
class EvalQuestion:
    """One question with what scoring needs: gold answer, category, evidence turn ids and answer sessions."""

    id: str
    item: str
    text: str
    gold: str
    category: str
    evidence: frozenset[str] = frozenset()
    """Turn ids (post ``source_id``) holding the answer; a question counts for recall@k only when it has some."""
    sessions: frozenset[str] = frozenset()
    """Sessions holding the answer (LongMemEval ``answer_session_ids``; LoCoMo: the evidence turns' sessions)."""
    abstention: bool = False
    """The memory does not hold the answer: LoCoMo category 5, LongMemEval ``_abs`` questions."""
    as_of: datetime | None = None


@dataclass
class EvalItem:
    """What one fresh memory holds, and the questions asked of it."""

    id: str
    conversations: list[Conversation]
    questions: list[EvalQuestion] = field(default_factory=list)

    @property
    def utterances(self) -> int:
        return sum(len(c.utterances) for c in self.conversations)


def load_items(dataset: str, path: Path) -> list[EvalItem]:
    """All items of a LoCoMo or LongMemEval file, questions in file order."""
    if dataset not in DATASETS:
        raise UsageError(f"unknown dataset {dataset!r}: expected locomo or longmemeval")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{path} is not valid JSON ({exc})") from exc
    records = data if isinstance(data, list) else [data]
    if not all(isinstance(r, dict) for r in records):
        raise InputError(f"{path}: expected a list of {dataset} objects")
    return [_locomo_item(path, r) for r in records] if dataset == "locomo" else [_longmemeval_item(path, r) for r in records]


# -- LoCoMo --------------------------------------------------------------------------------------------------------


def locomo_evidence_ids(evidence: Iterable[Any]) -> set[str]:
    """LoCoMo evidence entries as turn ids: ``["D8:6; D9:17"]`` is two ids (entries are sometimes joined)."""
    return {e.strip() for item in evidence for e in re.split(r"[;,]", str(item)) if e.strip()}


def _locomo_item(path: Path, sample: dict[str, Any]) -> EvalItem:
    conversations = parse_locomo(path, sample)
    item_id = str(sample.get("sample_id"))
    known = {u.source_id: u.session for c in conversations for u in c.utterances if u.source_id}
    as_of = _after_last(conversations)
    questions = []
    qas = sample.get("qa", [])
    if not isinstance(qas, list):
        raise InputError(f"{path}: sample {item_id!r}: 'qa' must be a list of questions")
    for n, qa in enumerate(qas, 1):
        where = f"{path}: sample {item_id!r}, question {n}"
        if not isinstance(qa, dict) or not isinstance(qa.get("question"), str) or not qa["question"].strip():
            raise InputError(f"{where}: expected an object with a 'question' text")
        category = qa.get("category", 0)
        if isinstance(category, bool) or not isinstance(category, int | str) or not str(category).strip().isdigit():
            raise InputError(f"{where}: category must be a whole number, found {category!r:.40}")
        category = int(category)
        cited = qa.get("evidence", [])
        if not isinstance(cited, list):
            raise InputError(f"{where}: evidence must be a list of turn ids")
        evidence = frozenset(locomo_evidence_ids(cited) & known.keys())
        adversarial = category == 5
        gold = ADVERSARIAL_GOLD if adversarial else str(qa.get("answer", ""))
        questions.append(
            EvalQuestion(
                id=f"{item_id}:q{n:03d}",
                item=item_id,
                text=qa["question"],
                gold=gold,
                category=LOCOMO_CATEGORIES.get(category, str(category)),
                evidence=evidence,
                sessions=frozenset(known[e] for e in evidence),
                abstention=adversarial,
                as_of=as_of,
            )
        )
    return EvalItem(item_id, conversations, questions)


def _after_last(conversations: Sequence[Conversation]) -> datetime | None:
    """The day after the last turn: LoCoMo questions carry no date, and answers must not depend on today."""
    times = [u.timestamp for c in conversations for u in c.utterances if u.timestamp is not None]
    return _aware(max(times) + timedelta(days=1)) if times else None


def _aware(moment: datetime) -> datetime:
    """Naive source times are read as UTC, so the date in a prompt does not depend on the machine's zone."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


# -- LongMemEval -----------------------------------------------------------------------------------------------------


def _longmemeval_item(path: Path, record: dict[str, Any]) -> EvalItem:
    qid = str(record.get("question_id"))
    where = f"{path}: question {qid!r}"
    conversations = longmemeval_sessions(where, record)
    sessions = list_field(record, "haystack_sessions", where)
    ids = [str(s) for s in list_field(record, "haystack_session_ids", where)]
    evidence = frozenset(
        f"{sid}:{position}"
        for sid, turns in zip(ids, sessions, strict=True)
        for position, turn in enumerate(turns)
        if isinstance(turn, dict) and turn.get("has_answer") is True
    )
    answer_sessions = record.get("answer_session_ids") or []
    if isinstance(answer_sessions, str):
        answer_sessions = list_field(record, "answer_session_ids", where)
    if not isinstance(answer_sessions, list):
        raise InputError(f"{where}: answer_session_ids must be a list")
    if not isinstance(record.get("question"), str) or not record["question"].strip():
        raise InputError(f"{where}: expected a 'question' text")
    date = record.get("question_date")
    question = EvalQuestion(
        id=qid,
        item=qid,
        text=record["question"],
        gold=str(record.get("answer", "")),
        category=str(record.get("question_type", "")),
        evidence=evidence,
        sessions=frozenset(str(s) for s in answer_sessions) & set(ids),
        abstention=qid.endswith("_abs"),
        as_of=_aware(parse_timestamp(date)) if isinstance(date, str) and date.strip() else _after_last(conversations),
    )
    return EvalItem(qid, conversations, [question])


# -- selection -------------------------------------------------------------------------------------------------------


def parse_types(dataset: str, values: Iterable[str]) -> frozenset[str] | None:
    """``--types`` as category names: LoCoMo numbers or names, LongMemEval ``question_type`` values (or ``abstention``)."""
    wanted = {v.strip() for value in values for v in value.split(",") if v.strip()}
    if not wanted:
        return None
    names: set[str] = set()
    for value in wanted:
        if dataset == "locomo":
            found = LOCOMO_CATEGORIES.get(int(value)) if value.isdigit() else value
            if found is None or found not in LOCOMO_CATEGORIES.values():
                choices = ", ".join(f"{n} {c}" for n, c in LOCOMO_CATEGORIES.items())
                raise UsageError(f"unknown LoCoMo category {value!r}: expected one of {choices}")
            name = found
        else:
            name = value
            if name not in (*LONGMEMEVAL_TYPES, "abstention"):
                raise UsageError(f"unknown LongMemEval type {value!r}: expected one of {', '.join(LONGMEMEVAL_TYPES)}, abstention")
        names.add(name)
    return frozenset(names)


def category_of(question: EvalQuestion) -> str:
    """The summary bucket: LongMemEval abstention questions are scored apart from their nominal type."""
    return "abstention" if question.abstention and question.category in LONGMEMEVAL_TYPES else question.category


def select(items: Sequence[EvalItem], types: frozenset[str] | None, limit: int | None) -> list[EvalItem]:
    """Items keeping only the wanted questions, at most ``limit`` questions in all; items left empty are dropped."""
    chosen: list[EvalItem] = []
    left = limit if limit is not None else -1
    for item in items:
        questions = [q for q in item.questions if types is None or q.category in types or category_of(q) in types]
        if left >= 0:
            questions = questions[:left]
            left -= len(questions)
        if questions:
            chosen.append(EvalItem(item.id, item.conversations, questions))
        if left == 0:
            break
    return chosen


__all__ = [
    "ADVERSARIAL_GOLD",
    "DATASETS",
    "LOCOMO_CATEGORIES",
    "LONGMEMEVAL_TYPES",
    "EvalItem",
    "EvalQuestion",
    "category_of",
    "load_items",
    "locomo_evidence_ids",
    "parse_types",
    "select",
]

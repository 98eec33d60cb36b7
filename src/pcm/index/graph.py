"""A term co-occurrence graph over utterances, walked by personalised PageRank from a question (HippoRAG 2 style).

Nodes are posts and the terms they contain: names (capitalised words and runs of them, away from the start of a
sentence) and stemmed content words. No model reads the text: the terms come from the words themselves, so the
graph is cheap to keep current at ingest. A question's evidence that shares no word with the question but shares
a name or a rare word with the posts the question does find (the second hop of a multi-hop question) is reached by
a walk that restarts at the question's own terms and at the best posts of the ordinary ranking.

The walk is a truncated personalised PageRank on the bipartite post-term graph: restart mass on the question's
terms and the seed posts, two post-to-term-to-post steps, damping ``GRAPH_DAMPING``. Terms held by more than
``MAX_DF_SHARE`` of the posts (greetings, the speakers' names) are hubs that would spread the walk everywhere and
are skipped, as HippoRAG drops its over-connected nodes. The graph is kept by slot, beside the posts mirror.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from pcm.index.text import TERM_STOPWORDS, WORD_TOKEN, stem

MAX_DF_SHARE = 0.02
"""A term in more than this share of the posts (and more than ``MIN_HUB_DF`` posts) is not walked through."""
MIN_HUB_DF = 20
GRAPH_STEPS = 2
"""Post-term-post steps of the walk."""
FRONTIER = 50
"""Posts whose mass a step pushes on."""
DAMPING = 0.5
"""Share of the walk's mass that moves on at each step (the rest restarts)."""
QUERY_TERM_MASS = 0.5
"""Share of the restart mass on the question's own terms; the rest goes to the seed posts."""

_TOKEN = WORD_TOKEN
_SENTENCE_END = re.compile(r"[.!?:;\"“”()\n-]\s*$")


def terms(text: str) -> list[str]:
    """The graph terms of a text: ``n:`` names (a capitalised word or run of them, not opening a sentence, and
    the run joined when it has several words) and ``w:`` stemmed content words, each once, in order.

    A capitalised word that opens a sentence is taken as a name only when it is not a stopword ("Yesterday"),
    and it is always also a content word, so "Pottery is fun" and "I love pottery" meet on ``w:potteri``.
    """
    out: dict[str, None] = {}
    run: list[str] = []
    for match in _TOKEN.finditer(text):
        word = match.group(0)
        folded = word.casefold().replace("’", "'")
        base = folded.split("'", 1)[0]
        opens = match.start() == 0 or bool(
            _SENTENCE_END.search(text[max(0, match.start() - 3) : match.start()])
        )
        capital = word[:1].isupper() and base not in TERM_STOPWORDS and (not opens or len(base) > 2)
        if capital and base != "i":
            run.append(base)
        else:
            _close(run, out)
            run = []
        if base not in TERM_STOPWORDS and len(base) > 2:
            out.setdefault("w:" + stem(base), None)
    _close(run, out)
    return list(out)


def _close(run: list[str], out: dict[str, None]) -> None:
    for name in run:
        out.setdefault("n:" + name, None)
    if len(run) > 1:
        out.setdefault("n:" + " ".join(run), None)


class TermGraph:
    """Posts (by mirror slot) and their terms, with each term's postings; updated one post at a time."""

    def __init__(self) -> None:
        self.term_id: dict[str, int] = {}
        self.postings: list[set[int]] = []
        self.of_slot: dict[int, np.ndarray] = {}
        self.slot_of: dict[str, int] = {}
        self._arrays: dict[int, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.of_slot)

    def put(self, iri: str, slot: int, post_terms: Iterable[str]) -> None:
        """Index (or re-index) post ``iri``, which the posts mirror holds in ``slot``."""
        self.remove(iri)
        ids = []
        for term in post_terms:
            tid = self.term_id.get(term)
            if tid is None:
                tid = len(self.postings)
                self.term_id[term] = tid
                self.postings.append(set())
            self.postings[tid].add(slot)
            self._arrays.pop(tid, None)
            ids.append(tid)
        self.of_slot[slot] = np.asarray(ids, dtype=np.int64)
        self.slot_of[iri] = slot

    def remove(self, iri: str) -> None:
        slot = self.slot_of.pop(iri, None)
        if slot is None:
            return
        for tid in self.of_slot.pop(slot).tolist():
            self.postings[tid].discard(slot)
            self._arrays.pop(tid, None)

    def walk(
        self,
        query: str,
        seeds: Mapping[int, float],
        *,
        allowed: np.ndarray | None = None,
    ) -> dict[int, float]:
        """Personalised PageRank mass per post over ``GRAPH_STEPS`` post-term-post steps, restarting at the
        query's terms and at ``seeds`` (slot -> weight, e.g. fused scores of the ordinary ranking).

        Each step pushes mass from the ``FRONTIER`` posts holding the most (a push approximation of the walk:
        the long tail carries little mass and would cost a Python step per post). ``allowed`` (a boolean mask by
        slot) keeps the walk off filtered-out posts.
        """
        hub = max(MIN_HUB_DF, int(MAX_DF_SHARE * len(self.of_slot)))
        query_ids = [
            tid
            for t in terms(query)
            if (tid := self.term_id.get(t)) is not None and 0 < len(self.postings[tid]) <= hub
        ]
        total = sum(seeds.values())
        restart = {s: (1 - QUERY_TERM_MASS) * w / total for s, w in seeds.items()} if total > 0 else {}
        term_restart = {tid: QUERY_TERM_MASS / len(query_ids) for tid in query_ids} if query_ids else {}
        if not term_restart and not restart:
            return {}
        size = max(self.of_slot) + 1 if self.of_slot else 0
        score = np.zeros(size)
        frontier: dict[int, float] = dict(restart)
        for _ in range(GRAPH_STEPS):
            term_mass = dict(term_restart)
            for slot, mass in frontier.items():
                ids = self.of_slot.get(slot)
                kept = [] if ids is None else [t for t in ids.tolist() if len(self.postings[t]) <= hub]
                for tid in kept:
                    term_mass[tid] = term_mass.get(tid, 0.0) + DAMPING * mass / len(kept)
            reached = np.zeros(size)
            for tid, mass in term_mass.items():
                holders = self._holders(tid)
                if len(holders):
                    reached[holders] += mass / len(holders)
            if allowed is not None:
                reached[~allowed[:size]] = 0.0
            score += reached
            top = (
                np.argpartition(-reached, min(FRONTIER, size - 1))[:FRONTIER]
                if size > FRONTIER
                else np.arange(size)
            )
            frontier = {int(s): float(reached[s]) for s in top if reached[s] > 0}
            for slot, mass in restart.items():
                frontier[slot] = frontier.get(slot, 0.0) + mass
        found = np.flatnonzero(score)
        return dict(zip(found.tolist(), score[found].tolist(), strict=True))

    def _holders(self, tid: int) -> np.ndarray:
        cached = self._arrays.get(tid)
        if cached is None:
            cached = np.fromiter(self.postings[tid], dtype=np.int64, count=len(self.postings[tid]))
            self._arrays[tid] = cached
        return cached


GRAPH_FILE = "graph.jsonl"
"""The graph's terms per post, beside the index tables: ``[iri, digest, [terms]]`` lines, appended at every write
(``[iri, null]`` when a post goes), last line per IRI wins. A missing or stale line only costs recomputing that
post's terms from its text on the next open, so the file needs no commit protocol of its own."""


def read_log(path: Path) -> dict[str, tuple[str, list[str]]]:
    """The live entries of a graph file (IRI -> digest and terms); a torn or unreadable line is skipped."""
    entries: dict[str, tuple[str, list[str]]] = {}
    try:
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(row, list) or len(row) < 2 or not isinstance(row[0], str):
                    continue
                if row[1] is None:
                    entries.pop(row[0], None)
                elif len(row) == 3 and isinstance(row[1], str) and isinstance(row[2], list):
                    entries[row[0]] = (row[1], [t for t in row[2] if isinstance(t, str)])
    except FileNotFoundError:
        pass
    return entries


def append_log(path: Path, rows: Iterable[list[Any]]) -> None:
    """Append entries (``[iri, digest, terms]`` or ``[iri, None]``) to a graph file."""
    text = "".join(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n" for row in rows)
    if text:
        with path.open("a", encoding="utf-8") as out:
            out.write(text)


def write_log(path: Path, entries: Mapping[str, tuple[str, list[str]]]) -> None:
    """Rewrite a graph file with exactly ``entries`` (atomically: temporary file, then rename)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    append_log(tmp, ([iri, d, t] for iri, (d, t) in entries.items()))
    tmp.touch()
    os.replace(tmp, path)

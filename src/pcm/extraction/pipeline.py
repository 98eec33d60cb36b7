"""Batch extraction: concurrent LLM calls, one writer, resumable, with a run report.

Shape of a run. Posts are grouped by session and each session is worked through in position order by one worker
thread: build the context, call the model (and repair), then hand the result to the writer and wait for it to be
written before the next turn, so entity reuse and "it"/"she" see the earlier turns of the same session. Sessions
run in parallel, up to ``concurrency`` at once. All store writes happen on the calling thread, one at a time, in
the order results arrive; the progress callback is called there too. With one session, or ``concurrency=1``,
there is nothing to overlap and everything runs on the calling thread (no thread handoffs per utterance).

Resumable: a post already extracted with the same prompt and ontology versions is skipped unless ``force``; a run
interrupted half-way is simply run again.

The small-talk gate (:mod:`pcm.extraction.gate`, :attr:`ExtractionConfig.gate <pcm.settings.ExtractionConfig.gate>`) comes before the model: a post that
states nothing ("thanks!", "how are you?") costs no call; it is written with the status ``gated`` and the report
:data:`~pcm.extraction.gate.GATED_REPORT`. Gated posts are not pending, count as up to date while the gate is on, and
``pcm extract --gated`` sends them to the model with the gate off. Like a failure, gating changes only the status: an
earlier extraction of the post stays (a forced re-run never loses facts to the gate).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from pcm.backend import Solutions, term_value
from pcm.errors import PcmError, UsageError
from pcm.extraction.context import speaker_iri
from pcm.extraction.extractor import EXTRACTED, FAILED, GATED, SKIPPED, Extraction, Extractor
from pcm.extraction.gate import GATE, GATED_REPORT
from pcm.extraction.prompts import prompt_version
from pcm.extraction.queries import render
from pcm.extraction.write import Written, update_index, write_extraction, write_failure_status
from pcm.llm.base import LLMClient
from pcm.sparql import iri_term, literal_term, values_clause
from pcm.store import PostInfo

if TYPE_CHECKING:
    from pcm.context import MemoryContext

log = logging.getLogger(__name__)

Progress = Callable[[int], None]
#: How many failures the run report lists by name.
LISTED_FAILURES = 20
SELECTIONS = ("pending", "failed", "gated", "all")
#: Posts written between two side-index updates of their entities (one embedding batch each).
INDEX_BATCH = 32


@dataclass
class ExtractionRunReport:
    """What a run did: counts, LLM use, and the vocabulary terms the model wanted but the ontology lacks."""

    posts: int = 0
    extracted: int = 0
    failed: int = 0
    skipped: int = 0
    gated: int = 0
    """Posts the small-talk gate kept from the model (:mod:`pcm.extraction.gate`)."""
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    estimated_prompt_tokens: int = 0
    """Prompt size estimated from characters (len/4): what a benchmark reports when the client counts nothing."""
    repairs: int = 0
    merges: int = 0
    supersessions: int = 0
    ungrounded: int = 0
    """Values the model wrote that were not in the words said, left out (:mod:`pcm.extraction.grounding`)."""
    forgotten: int = 0
    """Posts forgotten while their extraction ran: nothing was written for them."""
    unknown_terms: Counter[str] = field(default_factory=Counter)
    failures: list[tuple[str, str]] = field(default_factory=list)
    """(post IRI, first line of its report) for the first failures."""
    left_out: list[tuple[str, str]] = field(default_factory=list)
    """(post IRI, its report) for the first extracted posts stored without something the model wrote: values not
    said, nodes it could not link, repeated nodes merged (``pcm extract --explain``)."""
    seconds: float = 0.0

    def as_json(self) -> dict[str, object]:
        return {
            "posts": self.posts,
            "extracted": self.extracted,
            "failed": self.failed,
            "skipped": self.skipped,
            "gated": self.gated,
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "estimated_prompt_tokens": self.estimated_prompt_tokens,
            "repairs": self.repairs,
            "merges": self.merges,
            "supersessions": self.supersessions,
            "ungrounded": self.ungrounded,
            "forgotten": self.forgotten,
            "unknown_terms": dict(self.unknown_terms.most_common()),
            "failures": [{"post": p, "report": r} for p, r in self.failures],
            "left_out": [{"post": p, "report": r} for p, r in self.left_out],
            "seconds": round(self.seconds, 3),
        }

    def add(self, extraction: Extraction, written: Written | None) -> None:
        self.calls += extraction.calls
        self.input_tokens += extraction.input_tokens
        self.output_tokens += extraction.output_tokens
        self.estimated_prompt_tokens += extraction.estimated_prompt_tokens
        self.repairs += extraction.repairs
        self.ungrounded += len(extraction.ungrounded)
        self.unknown_terms.update(extraction.unknown_terms)
        status = written.status if written is not None else FAILED
        if status == EXTRACTED:
            self.extracted += 1
            if extraction.report and len(self.left_out) < LISTED_FAILURES:
                self.left_out.append((extraction.post.iri, extraction.report))
        elif status == SKIPPED:
            self.skipped += 1
        elif status == GATED:
            self.gated += 1
        else:
            self.failed += 1
            if len(self.failures) < LISTED_FAILURES:
                self.failures.append((extraction.post.iri, (extraction.report or "failed").splitlines()[-1]))
        if written is not None:
            self.merges += len(written.merged)
            self.supersessions += written.superseded


@dataclass
class _Session:
    posts: list[PostInfo]
    """The posts to extract, in position order."""
    context: list[PostInfo]
    """Every post of the session, in position order (the previous turns come from it)."""
    names: list[str] = field(init=False)
    """The speakers of the session (the gate reads a name said to one of them as no fact)."""
    before: dict[str, PostInfo] = field(init=False)
    """Each post's previous turn, by post IRI."""

    def __post_init__(self) -> None:
        self.names = sorted({p.speaker for p in self.context if p.speaker})
        self.before = {later.iri: earlier for earlier, later in zip(self.context, self.context[1:], strict=False)}


@dataclass
class _Job:
    extraction: Extraction
    done: Future[Written | None] = field(default_factory=Future)


def select_posts(memory: MemoryContext, selection: str) -> list[str]:
    """Post IRIs for ``pcm extract --pending | --failed | --gated | --all``, in session and position order.

    ``pending`` is what was never tried (no status, or ``pending``): posts the gate held back are not in it.
    """
    if selection not in SELECTIONS:
        raise UsageError(f"unknown selection {selection!r}: choose one of {', '.join(SELECTIONS)}")
    filters = {
        "pending": "FILTER(!BOUND(?status) || ?status = " + literal_term("pending") + ")",
        "failed": "FILTER(BOUND(?status) && ?status = " + literal_term("failed") + ")",
        "gated": "FILTER(BOUND(?status) && ?status = " + literal_term(GATED) + ")",
        "all": "",
    }
    rows = memory.store.select(render("posts_for_extraction", filter=filters[selection])).rows
    return [term_value(row[0]) for row in rows if row[0] is not None]


def extract_posts(
    memory: MemoryContext,
    post_iris: Sequence[str],
    *,
    client: LLMClient,
    progress: Progress | None = None,
    concurrency: int | None = None,
    force: bool = False,
    output: str | None = None,
    gate: bool | None = None,
) -> ExtractionRunReport:
    """Extract facts from stored posts (see the module docstring). ``progress(n)`` is called as posts finish.

    ``output`` (``turtle``, ``json``, ``compact`` or ``auto``) overrides ``settings.extraction.output`` for this run;
    ``gate`` overrides ``settings.extraction.gate`` (``pcm extract --gated`` turns it off to extract what it held
    back).
    """
    if memory.read_only:
        raise UsageError("this memory was opened read-only")
    started = time.monotonic()
    gate_on = memory.settings.extraction.gate if gate is None else gate
    runner = _Run(memory, client, progress=progress, output=output, gate=gate_on)
    iris = list(dict.fromkeys(post_iris))
    report = runner.report
    report.posts = len(iris)
    sessions = runner.plan(iris, force=force)
    runner.run(sessions, concurrency=max(1, concurrency or memory.settings.extraction.concurrency))
    report.seconds = time.monotonic() - started
    return report


def _post_infos(result: Solutions) -> list[PostInfo]:
    """Rows of ``posts_info`` / ``session_posts_info`` as :class:`PostInfo` (what ``MemoryStore.posts`` returns)."""
    out = []
    for row in result.dicts():
        time_ = row.get("time")
        try:
            when = datetime.fromisoformat(term_value(time_)) if time_ is not None else None
        except ValueError:
            when = None
        out.append(PostInfo(
            iri=term_value(row["post"]), session=term_value(row["session"]), role=term_value(row["role"]),
            speaker=term_value(row["speaker"]) if "speaker" in row else None, time=when, text=term_value(row["text"]),
            source_id=term_value(row["source_id"]) if "source_id" in row else None, position=int(term_value(row["position"])),
        ))
    return out


class _Run:
    """One extraction run: planning, the worker threads and the single writer."""

    def __init__(
        self,
        memory: MemoryContext,
        client: LLMClient,
        *,
        progress: Progress | None,
        output: str | None = None,
        gate: bool = True,
    ) -> None:
        self.memory = memory
        self.gate = gate
        self.extractor = Extractor(memory, client, output=output)
        self.ontology = self.extractor.ontology
        self.prompt_version = prompt_version(self.extractor.output)
        self.progress = progress
        self.report = ExtractionRunReport()
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._index_queue: set[str] = set()
        self._writes_since_flush = 0

    # ------------------------------------------------------------------------------------------------ planning

    def plan(self, iris: Sequence[str], *, force: bool) -> list[_Session]:
        """Group the posts to extract by session; count the up-to-date and unknown ones as skipped."""
        todo = set(iris) if force else set(iris) - self._up_to_date(iris)
        infos = self._posts(sorted(todo))
        skipped = len(iris) - len(infos)
        if skipped:
            self.report.skipped += skipped
            self._tick(skipped)
        by_session: dict[str, list[PostInfo]] = {}
        for info in infos:
            by_session.setdefault(info.session, []).append(info)
        sessions = []
        for session_id in sorted(by_session):
            posts = sorted(by_session[session_id], key=lambda p: p.position)
            sessions.append(_Session(posts, self._session_posts(session_id)))
        return sessions

    def _up_to_date(self, iris: Sequence[str]) -> set[str]:
        """Posts extracted with this prompt and ontology version, and, while the gate is on, posts it held back: what
        a resumed run skips. With the gate off, a gated post was never extracted, so it is not up to date."""
        done: set[str] = set()
        current = (self.prompt_version, self.ontology.version)
        for start in range(0, len(iris), 500):
            values = values_clause("post", list(iris[start : start + 500]))
            status = {
                term_value(row[0]): term_value(row[1]) for row in self.memory.store.select(render("post_status", posts=values)).rows
                if row[0] is not None and row[1] is not None
            }
            if self.gate:
                done.update(post for post, value in status.items() if value == GATED)
            extracted = {post for post, value in status.items() if value == EXTRACTED}
            for row in self.memory.store.select(render("post_versions", posts=values)).rows:
                post, prompt, onto = (term_value(t) if t is not None else None for t in row)
                if post in extracted and (prompt, onto) == current:
                    done.add(post)
        return done

    def _posts(self, iris: Sequence[str]) -> list[PostInfo]:
        found: list[PostInfo] = []
        for start in range(0, len(iris), 500):
            q = render("posts_info", posts=values_clause("post", list(iris[start : start + 500])))
            found.extend(_post_infos(self.memory.store.select(q)))
        return found

    def _session_posts(self, session_id: str) -> list[PostInfo]:
        thread = self.memory.naming.session(session_id)
        posts = _post_infos(self.memory.store.select(render("session_posts_info", thread=iri_term(thread))))
        return sorted(posts, key=lambda p: p.position)

    # ------------------------------------------------------------------------------------------------ running

    def run(self, sessions: list[_Session], *, concurrency: int) -> None:
        """Workers extract; this thread writes. An error in either stops the run after the current write."""
        if not sessions:
            return
        if self.memory.settings.index_enabled:
            self._open_index()
        try:
            if concurrency == 1 or len(sessions) == 1:
                self._run_inline(sessions)
            else:
                self._run_threads(sessions, concurrency)
        finally:
            self._flush_index()  # also after an error: what was written is indexed

    def _run_threads(self, sessions: list[_Session], concurrency: int) -> None:
        with ThreadPoolExecutor(max_workers=min(concurrency, len(sessions)), thread_name_prefix="pcm-extract") as pool:
            workers = [pool.submit(self._work, session) for session in sessions]
            try:
                self._write_until_done(len(workers))
            except BaseException:
                self._halt()
                raise
        for worker in workers:
            worker.result()  # re-raise a worker's unexpected error

    def _run_inline(self, sessions: list[_Session]) -> None:
        """Nothing to overlap (one session, or one call at a time): extract and write on this thread, no handoffs."""
        for session in sessions:
            for post in session.posts:
                self._write(self._extract(post, session))

    def _extract(self, post: PostInfo, session: _Session) -> Extraction:
        if self.gate and post.role != "system" and not self._states_fact(post, session):
            return Extraction(post, GATED, speaker_iri(post, self.memory.naming), report=GATED_REPORT)
        try:
            return self.extractor.extract(post, session.context)
        except PcmError as error:  # the store or the model failed in a way extract() does not absorb
            return Extraction(post, FAILED, "", report=f"extraction error: {error}")

    @staticmethod
    def _states_fact(post: PostInfo, session: _Session) -> bool:
        """The gate's verdict on a post, told who takes part in the session (a name said to them is no fact) and
        the turn before when someone else said it (a bare "yes" answering a question with content passes)."""
        before = session.before.get(post.iri)
        other = before is not None and (before.role, before.speaker) != (post.role, post.speaker)
        return GATE.passes(post.text, names=session.names, previous=before.text if other and before else None)

    def _work(self, session: _Session) -> None:
        try:
            for post in session.posts:
                if self._stop.is_set():
                    return
                job = _Job(self._extract(post, session))
                with self._lock:
                    if self._stop.is_set():
                        return
                    self._jobs.put(job)
                if job.done.result() is None:  # wait: the next turn must see this one's entities
                    return
        finally:
            self._jobs.put(None)  # this worker is done

    def _write_until_done(self, workers: int) -> None:
        finished = 0
        while finished < workers:
            job = self._jobs.get()
            if job is None:
                finished += 1
                continue
            try:
                written: Written | None = self._write(job.extraction)
            except BaseException:
                job.done.set_result(None)
                raise
            job.done.set_result(written)

    def _halt(self) -> None:
        """Stop the workers: no new jobs are queued, and queued ones are released unwritten."""
        with self._lock:
            self._stop.set()
            while True:
                try:
                    job = self._jobs.get_nowait()
                except queue.Empty:
                    return
                if job is not None:
                    job.done.set_result(None)

    def _write(self, extraction: Extraction) -> Written:
        if not self.memory.store.existing_posts([extraction.post.iri]):
            # forgotten while the model answered (a server's worker lets go of the memory between reads and the
            # write): writing now would bring back facts of an utterance the person asked to forget
            self.report.forgotten += 1
            self._tick(1)
            return Written(SKIPPED)
        try:
            written = write_extraction(
                self.memory, extraction, ontology=self.ontology, prompt_version=self.prompt_version,
                single_valued=self.extractor.single_valued,
            )
        except PcmError as error:
            log.warning("could not write the extraction of %s: %s", extraction.post.iri, error)
            extraction.status, extraction.report = FAILED, f"write error: {error}"
            write_failure_status(self.memory, extraction.post.iri, FAILED, extraction.report)
            written = Written(FAILED)
        self._index_queue.update(written.entities)
        self._writes_since_flush += 1
        if self._writes_since_flush >= INDEX_BATCH:
            self._flush_index()
        self.report.add(extraction, written)
        self._tick(1)
        return written

    def _flush_index(self) -> None:
        """Entity rows for the side index go in batches: one embedding call and one table write per batch."""
        if self._index_queue:
            update_index(self.memory, sorted(self._index_queue))
        self._index_queue.clear()
        self._writes_since_flush = 0

    def _open_index(self) -> None:
        """Open (and catch up) the side index here, once, before the workers share it."""
        try:
            _ = self.memory.index
        except PcmError as error:
            log.info("side index unavailable during extraction: %s", error)

    def _tick(self, n: int) -> None:
        if self.progress is not None and n:
            self.progress(n)

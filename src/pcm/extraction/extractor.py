"""One utterance through the model: prompt, call, normalise, validate, and repair until it passes or rounds run out.

Nothing here writes to the store: the result is an :class:`Extraction` that the single writer applies (see
:mod:`pcm.extraction.write`). That split is what lets LLM calls run concurrently while writes stay serial.

Repair: the model gets its previous output back with a short readable report (parse error with the line quoted,
refusals, SHACL violations with "did you mean" hints) and writes the whole Turtle again, up to
``settings.extraction.repair_rounds`` times, or until the model writes the same output twice (the next request would repeat
the last one word for word). Output that is too large is refused without a repair round (echoing it back would
cost more than it could save). When the rounds are spent and all the answer still breaks is how some new nodes are
linked (isolated, an action without an agent), those nodes are left out and the rest is stored, with a report that
names them (:meth:`Extractor.salvage`). A compact answer that still fails then is written again in the fallback form
(json by default: :meth:`Extractor.extract`). An LLM error (timeout after the client's own retries, refusal, bad key) ends the
attempt: the post keeps its place with status ``failed`` and the error as its report.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING

import pyoxigraph as ox

from pcm.catalogue_areas import CORE_AREAS, EXTRACTION_CORE, RESERVED_AREAS, select_areas
from pcm.errors import LLMError
from pcm.extraction.compact import call_names, compact_schema, in_handles, normalise_answer, read_compact
from pcm.extraction.context import (
    ContextBuilder,
    TurnContext,
    node_context,
    render_user_message,
    show_iri,
    speaker_iri,
)
from pcm.extraction.grounding import Grounding, Said
from pcm.extraction.jsonld import complete_references, dangling_references, extraction_schema
from pcm.extraction.kinds import misplaced_facts, node_types
from pcm.extraction.normalise import Normalised, OutputProblem, normalise_json, normalise_output
from pcm.extraction.prompts import (
    OUTPUTS,
    compact_examples,
    notes_section,
    repair_message,
    system_prompt,
    topic_section,
    topic_vocabulary,
)
from pcm.extraction.supersede import single_valued_properties
from pcm.extraction.terms import graph_of
from pcm.llm.base import (
    AREAS,
    WHOLE,
    JsonSchema,
    LLMClient,
    Message,
    Request,
    catalogue_layout,
    estimate_tokens,
    output_format,
)
from pcm.namespaces import RDF
from pcm.store import PostInfo

if TYPE_CHECKING:
    from pcm.context import MemoryContext
    from pcm.ontology import Ontology
    from pcm.shapes import Validator, Violation

log = logging.getLogger(__name__)

#: Characters of the previous output echoed back in a repair round.
ECHO_CHARS = 12_000
#: Lines of a repair report.
REPORT_LINES = 20
#: Areas whose terms a compact answer may always write, beside the utterance's own (see :meth:`Extractor._constraint`):
#: the rules make whatever the assistant recommends or explains a ``schema:InformAction`` (social), in any turn, and
#: ``schema:Event`` (events) and ``schema:Product`` (products) are as general as ``schema:Action``: "getting married"
#: names no event keyword, and a purchase of "headphones" no product keyword.
GRAMMAR_AREAS: tuple[str, ...] = ("social", "events", "products")
_TRUNCATED = frozenset({"max_tokens", "length"})
_RDF_TYPE = RDF + "type"
_NOTHING = "nothing to extract"
_WORD = re.compile(r"[a-z0-9]+")
#: Words by which an utterance refers back to something named earlier.
_REFERRING = frozenset(
    {"it", "its", "he", "him", "his", "she", "her", "they", "them", "their", "there", "that", "this", "those",
     "these", "one", "same"}
)

EXTRACTED, FAILED, SKIPPED = "extracted", "failed", "skipped"
#: A post the small-talk gate kept from the model (:mod:`pcm.extraction.gate`): it states nothing worth a call.
GATED = "gated"
#: Rules about a new node's links (and a node named but never given a type): once the repair rounds are spent,
#: the nodes that break them are left out and the rest of the answer is kept (:meth:`Extractor.salvage`).
_DROPPABLE = frozenset(
    {"isolated-individual", "untyped-individual", "action-has-agent", "problem-affects", "service-has-object"}
)
#: The shapes' rule for a property that holds one value on a subject of some class (``sh:maxCount 1``): once the
#: rounds are spent, a subject's clashing values of it are left out (:meth:`Extractor.salvage`).
_SINGLE_VALUED = "single-valued"


@dataclass
class Extraction:
    """The outcome of one post's extraction, before it is written."""

    post: PostInfo
    status: str
    speaker: str
    triples: list[ox.Triple] = field(default_factory=list)
    report: str = ""
    unknown_terms: set[str] = field(default_factory=set)
    offered: frozenset[str] = frozenset()
    model: str = ""
    started: datetime = field(default_factory=lambda: datetime.now(UTC))
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    estimated_prompt_tokens: int = 0
    repairs: int = 0
    ungrounded: list[str] = field(default_factory=list)
    """Values the model wrote that were not in the words said, left out (:mod:`pcm.extraction.grounding`)."""
    llm_error: bool = False
    """The attempt ended on an error of the model's client (timeout, refusal, bad key), not on what it wrote."""


@dataclass
class Verdict:
    """What one model output is worth: triples to keep, or a report to send back (``fatal``: do not retry)."""

    triples: list[ox.Triple]
    report: str = ""
    unknown_terms: set[str] = field(default_factory=set)
    fatal: bool = False
    ungrounded: list[str] = field(default_factory=list)
    grounding_report: str = ""

    @property
    def accepted(self) -> bool:
        return not self.report


class Extractor:
    """Extracts posts of one memory with one client; thread-safe (the worker threads share it)."""

    def __init__(
        self,
        memory: MemoryContext,
        client: LLMClient,
        *,
        ontology: Ontology | None = None,
        repair_rounds: int | None = None,
        use_index: bool | None = None,
        output: str | None = None,
        catalogue: str | None = None,
    ) -> None:
        from pcm.ontology import load_ontology

        self.memory = memory
        self.client = client
        self.ontology = ontology or load_ontology()
        config = memory.settings.extraction
        self.config = config
        self.repair_rounds = config.repair_rounds if repair_rounds is None else repair_rounds
        self.contexts = ContextBuilder(memory, use_index=use_index)
        self.validator = _validator(self.ontology)
        self.single_valued = single_valued_properties(self.ontology)
        naming = memory.naming
        self.grounding = (
            Grounding(self.ontology, parties=(naming.owner, naming.assistant), show=self._show,
                      config=config.grounding)
            if config.grounding.enabled else None
        )
        #: ``turtle``, ``json`` or ``compact``: what the model is asked to write (see :func:`output_format`).
        self.output = output_format(output or config.output, client, forms=OUTPUTS)
        #: The compact form's names of the call on this thread and its last answer read: :meth:`extract` sets them,
        #: :meth:`_normalise` and the repair round read them (:meth:`check` is given the text alone).
        self._turn = threading.local()
        #: ``areas`` or ``whole``: where the catalogue goes (see :func:`catalogue_layout` and :meth:`prompt`).
        self.catalogue = catalogue_layout(
            catalogue or config.catalogue, client, what="an extraction call",
            whole_tokens=lambda: estimate_tokens(_system(self.ontology, self.output, WHOLE)) + config.user_tokens
            + 2 * config.max_output_tokens,
        )
        #: The form an utterance is written in again when the model cannot write this one within the repair rounds
        #: (:meth:`extract`): the compact lines' only, and only where ``config.fallback`` names a form.
        self.fallback = (
            Extractor(memory, client, ontology=self.ontology, repair_rounds=repair_rounds, use_index=use_index,
                      output=config.fallback, catalogue=catalogue)
            if self.output == "compact" and config.fallback and config.fallback != "compact" else None
        )

    # ------------------------------------------------------------------------------------------------ public

    def extract(self, post: PostInfo, session: Sequence[PostInfo]) -> Extraction:
        """Run the model on one post (its ``session`` gives the previous turns) and check what it wrote; in the
        compact form, a post whose lines still fail once the rounds are spent is written again in the fallback form.

        Why a fallback: a small model writes most utterances' compact lines in a fifth of the JSON form's tokens, but
        for about one in six (Qwen2.5-Coder-1.5B on the labelled samples) it names nodes it never declares or one
        handle for three things, round after round; the JSON form, whose schema holds every node's type and label
        in place, fails far less often. Both calls are counted in the one extraction.
        """
        result = self._extract(post, session)
        if result.status != FAILED or result.llm_error or self.fallback is None:
            return result
        second = self.fallback.extract(post, session)
        first_problem = next((line.strip("- ") for line in result.report.splitlines() if line.strip()), "")
        second.report = _joined(
            f"the compact lines failed ({first_problem[:200]}); written in the {self.fallback.output} form instead",
            second.report,
        )
        second.started = result.started
        second.calls += result.calls
        second.input_tokens += result.input_tokens
        second.output_tokens += result.output_tokens
        second.estimated_prompt_tokens += result.estimated_prompt_tokens
        second.repairs += result.repairs
        second.unknown_terms |= result.unknown_terms
        return second

    def _extract(self, post: PostInfo, session: Sequence[PostInfo]) -> Extraction:
        if post.role == "system":
            return Extraction(post, SKIPPED, speaker_iri(post, self.memory.naming), report="system messages are not extracted")
        context = self.contexts.build(post, session)
        result = Extraction(post, FAILED, context.speaker, offered=frozenset(e.iri for e in context.entities))
        system, first = self.prompt(context)
        messages = [Message.user(first)]
        self._turn.names, self._turn.answer = self._names(context), None
        schema = self._constraint(context)
        previous: str | None = None
        for round_ in range(self.repair_rounds + 1):
            try:
                completion = self.client.complete(Request(
                    system=system, messages=messages, operation="extract" if round_ == 0 else "repair",
                    max_tokens=self.config.max_output_tokens, schema=schema,
                ))
            except LLMError as error:
                result.report, result.llm_error = f"LLM error: {error}", True
                return result
            result.calls += 1
            result.model = completion.model or self.client.name
            result.input_tokens += completion.input_tokens
            result.output_tokens += completion.output_tokens
            result.estimated_prompt_tokens += (len(system) + sum(len(m.content) for m in messages)) // 4
            verdict = self.check(completion.text, truncated=completion.stop_reason in _TRUNCATED, context=context)
            result.unknown_terms |= verdict.unknown_terms
            result.ungrounded = verdict.ungrounded
            if verdict.accepted:
                result.status, result.triples, result.report = EXTRACTED, verdict.triples, verdict.grounding_report
                return result
            result.report = verdict.report
            # the same output again would make the next request the same as this one: at temperature 0 it could
            # only bring the same answer back, so the rounds end here
            last = round_ == self.repair_rounds or completion.text == previous
            previous = completion.text
            if last and self.output == "compact" and not verdict.triples and not verdict.fatal:
                # the rounds are spent: the lines it can read stand on their own (Extractor.check)
                verdict = self.check(completion.text, truncated=completion.stop_reason in _TRUNCATED,
                                     context=context, skip_unreadable=True)
                result.ungrounded = verdict.ungrounded
                if verdict.accepted and verdict.triples:
                    result.status, result.triples, result.report = EXTRACTED, verdict.triples, verdict.grounding_report
                    return result
            if last and not verdict.fatal:
                kept, dropped, values = self.salvage(verdict.triples, clashes=True)
                if kept:
                    result.status, result.triples = EXTRACTED, kept
                    result.report = _joined(
                        f"kept without {len(dropped)} node(s) it could not link: {', '.join(dropped)}" if dropped else "",
                        f"kept without the values of {len(values)} single-valued propert(ies) given more than one: "
                        + ", ".join(values) if values else "",
                        verdict.grounding_report,
                    )
                    return result
            if verdict.fatal or last:
                return result
            result.repairs += 1
            echo = completion.text[:ECHO_CHARS] if completion.text.strip() else "(empty output)"
            messages = [
                Message.user(first),
                Message.assistant(echo),
                Message.user(repair_message(self.output, self._in_answer_names(verdict.report))),
            ]
        return result

    def prompt(self, context: TurnContext) -> tuple[str, str]:
        """``(system prompt, first user message)`` for one post.

        The system prompt is the same for every post (rules and a catalogue), so a prompt cache keeps all of it from
        one utterance to the next (and both it and the first user message in a repair round). In the ``areas``
        layout it holds the core areas' catalogue and the areas the post adds go into the user message, before its
        context and the utterance: the smallest prompt. In the ``whole`` layout it holds every area a post may use,
        and the user message only the topic notes of the post's areas: a model that keeps its previous prompt's
        tokens then re-reads just the post's own.
        """
        extra = tuple(a for a in self._areas(context) if a not in EXTRACTION_CORE)
        topics = notes_section(extra) if self.catalogue == WHOLE else topic_section(_topic_vocabulary(self.ontology, extra))
        if self.output == "compact":
            topics += compact_examples(self._example_areas(context), context.post.role)
        user = render_user_message(context, memory=self.memory, ontology=self.ontology, output=self.output, topics=topics)
        return _system(self.ontology, self.output, self.catalogue), user

    def _constraint(self, context: TurnContext) -> JsonSchema | None:
        """What holds the answer to its form: the JSON Schema (json) or the compact lines' grammar (compact), each
        naming the known entities the prompt offers; nothing for Turtle."""
        if self.output == "json":
            return extraction_schema(self.ontology, known=self._known(context))
        if self.output == "compact":
            areas = (*self._areas(context, core=CORE_AREAS), *GRAMMAR_AREAS)
            return compact_schema(self.ontology, known=self._names(context) or {}, areas=areas)
        return None

    def _names(self, context: TurnContext) -> dict[str, str] | None:
        """The compact form's names for one call (``me``, ``you``, the offered entities: :func:`call_names`)."""
        if self.output != "compact":
            return None
        return call_names(self.memory.naming, context.speaker, (e.iri for e in context.entities),
                          addressee=context.addressee)

    def _in_answer_names(self, report: str) -> str:
        """A repair report as the model's answer names things: a compact answer's handles instead of the IRIs
        minted for them (:func:`pcm.extraction.compact.in_handles`)."""
        if self.output != "compact":
            return report
        return in_handles(report, getattr(self._turn, "answer", None), self.memory.naming.namespace)

    def _existing(self, iris: set[str]) -> set[str]:
        """Which of the memory's IRIs name a node already stored."""
        return {str(s) for s in node_context(self.memory, iris).subjects()}

    def _known(self, context: TurnContext) -> tuple[str, ...]:
        """The names of the known entities the prompt offers, as it writes them (``m:biscuit``): the nodes a JSON
        answer may write without a type and a label."""
        ns = self.memory.naming.namespace
        return tuple(show_iri(e.iri, ns, self.ontology) for e in context.entities if e.iri.startswith(ns))

    def _areas(self, context: TurnContext, core: Sequence[str] = EXTRACTION_CORE) -> tuple[str, ...]:
        """Areas of the utterance's own words and of the entities it (or its session so far) mentions, with ``core``.

        The previous turns' words are left out: they pulled in three times the catalogue for no gold fact on the
        sample conversations. A known entity's types count when the utterance names it (shares a word with its
        label) or refers back with a pronoun ("it", "she", "there"), whose referent may be any of them.
        """
        text = context.post.text
        words = set(_WORD.findall(text.lower()))
        referring = bool(words & _REFERRING)
        types = [
            t for e in context.entities
            if referring or words & set(_WORD.findall(e.label.lower())) - _REFERRING
            for t in e.types
        ]
        return tuple(select_areas(text, entity_types=types, ontology=self.ontology, core=core))

    def _example_areas(self, context: TurnContext) -> tuple[str, ...]:
        """Areas of the utterance's own words alone, which choose its examples.

        The known entities' types widen the vocabulary (:meth:`_areas`) but not the examples: a pronoun brings in
        every type of the session so far, so one trip stored early drew the travel example into each later turn
        that said "it", and the model, which copies what it is shown, wrote a trip for each of them.
        """
        return tuple(select_areas(context.post.text, ontology=self.ontology, core=EXTRACTION_CORE))

    def _normalise(self, text: str, *, skip_unreadable: bool = False) -> Normalised:
        ns = self.memory.naming.namespace
        if self.output == "compact":
            self._turn.answer = None
            self._turn.answer = read_compact(text, namespace=ns, ontology=self.ontology, existing=self._existing,
                                             names=getattr(self._turn, "names", None), skip_unreadable=skip_unreadable)
            return normalise_answer(self._turn.answer, namespace=ns, ontology=self.ontology)
        if self.output == "json":
            return normalise_json(text, namespace=ns, ontology=self.ontology)
        return normalise_output(text, namespace=ns, ontology=self.ontology)

    def said(self, context: TurnContext) -> Said:
        """What the model was shown as said for one post: the utterance, the previous turns, the known names."""
        names = [e.label for e in context.entities if e.label]
        names += [self.memory.manifest.owner, *(p.speaker for p in (context.post, *context.previous) if p.speaker)]
        return Said.of(
            context.post.text,
            context.post.time,
            context=[(p.text, p.time) for p in context.previous],
            names=names,
            fuzzy_word=self.config.grounding.fuzzy_word,
        )

    def check(
        self, text: str, *, truncated: bool = False, context: TurnContext | None = None, skip_unreadable: bool = False
    ) -> Verdict:
        """Normalise and validate one output; the report is what the model gets back if it fails.

        ``skip_unreadable`` (the compact form, once the repair rounds are spent): lines that cannot be read are left
        out and named in the grounding report, and the rest is checked as any answer is.

        With the post's ``context`` the values are first checked against the words said
        (:mod:`pcm.extraction.grounding`): what was not said is left out before validation, and is not the model's
        to repair. When leaving it out breaks only how the remaining new nodes are linked, those nodes go too
        (:meth:`salvage`) instead of a repair round: the model wrote nothing wrong there that it could fix.
        """
        try:
            normalised = self._normalise(text, skip_unreadable=skip_unreadable)
        except OutputProblem as problem:
            return Verdict([], _report([f"[{problem.kind}] {problem}"], truncated), fatal=problem.fatal)
        if normalised.problems:
            lines = [f"[refused] {p}" for p in normalised.problems]
            return Verdict([], _report(lines, truncated), normalised.unknown_terms)
        if self.output == "json":
            normalised.triples = self._complete(normalised.triples)
        if not normalised.triples:
            if self.output == "json" or _says_nothing(text):
                return Verdict([], _report([], truncated))
            return Verdict([], _report(["[no-turtle] the output holds no Turtle triples; write Turtle, or "
                                        "'# nothing to extract' when the utterance states no fact"], truncated))
        triples, ungrounded = normalised.triples, []
        answer = getattr(self._turn, "answer", None) if skip_unreadable else None
        skipped = answer.skipped if answer is not None else ()
        grounding_report = f"left out {len(skipped)} line(s) it could not read: {'; '.join(skipped)}" if skipped else ""
        if context is not None and self.grounding is not None:
            grounded = self.grounding.ground(
                triples, self.said(context), known=(e.iri for e in context.entities), speaker=context.speaker,
                addressee=context.addressee,
            )
            triples, ungrounded = grounded.triples, grounded.dropped
            grounding_report = _joined(grounding_report, grounded.report())
            if not triples:
                return Verdict([], "", normalised.unknown_terms, ungrounded=ungrounded, grounding_report=grounding_report)
        misplaced = self._misplaced(triples)
        if misplaced:
            triples = [t for t in triples if t not in misplaced]
            grounding_report = _joined(
                grounding_report,
                f"left out {len(misplaced)} fact(s) that make a person what a person is not: "
                + "; ".join(self._show_triple(t) for t in misplaced),
            )
            if not triples:
                return Verdict([], "", normalised.unknown_terms, ungrounded=ungrounded, grounding_report=grounding_report)
        lines = self._violations(triples)
        if lines and (ungrounded or misplaced):
            kept, dropped, _ = self.salvage(triples)
            if kept:
                note = f"left out {len(dropped)} node(s) no longer linked: {', '.join(dropped)}" if dropped else ""
                return Verdict(kept, "", normalised.unknown_terms, ungrounded=ungrounded,
                               grounding_report=_joined(grounding_report, note))
        return Verdict(triples, _report(lines, truncated), normalised.unknown_terms, ungrounded=ungrounded,
                       grounding_report=grounding_report)

    # ------------------------------------------------------------------------------------------------ checks

    def _complete(self, triples: list[ox.Triple]) -> list[ox.Triple]:
        """A JSON answer's bare references to new names get the node they lack, where the range says its type."""
        ns = self.memory.naming.namespace
        dangling = dangling_references(triples, ns)
        if not dangling:
            return triples
        existing = {str(s) for s in node_context(self.memory, dangling).subjects()}
        return complete_references(triples, dangling - existing, namespace=ns, ontology=self.ontology)

    def salvage(self, triples: list[ox.Triple], *, clashes: bool = False) -> tuple[list[ox.Triple], list[str], list[str]]:
        """What an answer still holds once the repair rounds are spent: ``(triples, dropped nodes, dropped values)``, the triples
        without the new nodes that break a rule about what a new node must be linked to (isolated, an action
        without an agent, a problem affecting nothing, a service without an object) or that are named without a
        type (nothing says what they are), and without what only they
        held up; with ``clashes``, a subject's values of a single-valued property it was given several of are
        left out too (before the rounds are spent, the model is asked to choose). Empty when anything else is wrong
        or nothing is left.

        Why: small models name a side thing (``m:neighbor``, ``m:plant``) and never link it, round after round,
        and refusing the whole answer for it loses the utterance's other facts. The rules stay as they are:
        nothing unlinked is stored.
        """
        dropped: list[str] = []
        values: list[str] = []
        while triples:
            violations = self._checked(triples)
            strict = self._strict_clashes(triples)
            clashing = (set(strict) | self._shape_clashes(triples, violations)) if clashes else set()
            if clashing:
                # two values for what holds one, and rounds spent without the model choosing: which one is true is
                # not known, so neither is stored (the rest of the answer is)
                values += sorted(f"{self._show(s)} {self.ontology.curie(p)}" for s, p in clashing)
                triples = [t for t in triples if (_node_id(t.subject), t.predicate.value) not in clashing]
                continue
            if strict or any(v.rule not in _DROPPABLE for v in violations):
                return [], [], []
            if not violations:
                return triples, sorted(dropped), values
            names = {v.focus for v in violations}
            dropped += sorted(self._show(n) for n in names)
            triples = [t for t in triples if _node_id(t.subject) not in names and _node_id(t.object) not in names]
        return [], [], []

    def _strict_clashes(self, triples: list[ox.Triple]) -> dict[tuple[str, str], set[str]]:
        """The values of ``(subject, property)`` pairs given several, for the properties single-valued for every
        subject (checked here; the class-scoped ones of the shapes, ``sh:maxCount 1`` on people, are checked by
        SHACL, which knows the subjects' types)."""
        values: dict[tuple[str, str], set[str]] = {}
        for t in triples:
            if t.predicate.value in self.single_valued.strict:
                values.setdefault((_node_id(t.subject), t.predicate.value), set()).add(str(t.object))
        return {key: found for key, found in values.items() if len(found) > 1}

    @staticmethod
    def _shape_clashes(triples: list[ox.Triple], violations: list[Violation]) -> set[tuple[str, str]]:
        """The ``(subject, property)`` pairs the shapes hold to one value (rule ``single-valued``) given several."""
        asked = {(v.focus, v.path) for v in violations if v.rule == _SINGLE_VALUED and v.path}
        values: dict[tuple[str, str], set[str]] = {}
        for t in triples:
            key = (_node_id(t.subject), t.predicate.value)
            if key in asked:
                values.setdefault(key, set()).add(str(t.object))
        return {key for key, found in values.items() if len(found) > 1}

    def _show(self, iri: str) -> str:
        return show_iri(iri, self.memory.naming.namespace, self.ontology)

    def _show_triple(self, t: ox.Triple) -> str:
        value = self._show(t.object.value) if isinstance(t.object, ox.NamedNode) else str(t.object)
        return f"{self._show(_node_id(t.subject))} {self.ontology.curie(t.predicate.value)} {value}"

    def _misplaced(self, triples: list[ox.Triple]) -> set[ox.Triple]:
        """Facts that give a person a property of another kind of thing, or a happening as a value where none
        belongs (:mod:`pcm.extraction.kinds`), with the
        types of the memory's nodes the answer names."""
        named = {
            t.value for tr in triples for t in (tr.subject, tr.object)
            if isinstance(t, ox.NamedNode) and t.value.startswith(self.memory.naming.namespace)
        }
        known: dict[str, set[str]] = {}
        for s, p, o in node_context(self.memory, named) if named else ():
            if str(p) == _RDF_TYPE:
                known.setdefault(str(s), set()).add(str(o))
        return set(misplaced_facts(triples, node_types(triples, known), self.ontology))

    def _checked(self, triples: list[ox.Triple]) -> list[Violation]:
        ns = self.memory.naming.namespace
        nodes = {
            t.value for tr in triples for t in (tr.subject, tr.object) if isinstance(t, ox.NamedNode)
            and t.value.startswith(ns)
        }
        report = self.validator.validate(
            graph_of(triples), memory_namespace=ns, context=node_context(self.memory, nodes)
        )
        return report.violations

    def _violations(self, triples: list[ox.Triple]) -> list[str]:
        lines = [f"[{v.rule}] {v.message}" for v in self._checked(triples)]
        return lines + self._multiple_values(triples)

    def _multiple_values(self, triples: list[ox.Triple]) -> list[str]:
        """A single-valued property given two values for one subject in one utterance cannot be right."""
        return [
            f"[single-valued] {s if s.startswith('_:') else f'<{s}>'} has {len(v)} values for "
            f"{self.ontology.curie(p)}, which holds one value at a time: keep the one the utterance states as current"
            for (s, p), v in sorted(self._strict_clashes(triples).items())
        ]


def _node_id(term: object) -> str:
    """A node as a violation names its focus: an IRI, or ``_:id`` for a blank node (a literal is no node: "")."""
    if isinstance(term, ox.BlankNode):
        return f"_:{term.value}"
    return term.value if isinstance(term, ox.NamedNode) else ""


def _joined(*parts: str) -> str:
    return ". ".join(p for p in parts if p)


def _report(lines: list[str], truncated: bool) -> str:
    if truncated:
        lines = ["[truncated] the output was cut off at the token limit: write fewer, essential triples", *lines]
    if not lines:
        return ""
    shown = [f"- {line}" for line in lines[:REPORT_LINES]]
    if len(lines) > REPORT_LINES:
        shown.append(f"- ... and {len(lines) - REPORT_LINES} more")
    return f"{len(lines)} problem(s):\n" + "\n".join(shown)


def _says_nothing(text: str) -> bool:
    """An output with no triples is fine when it says so, or holds nothing but comments and prefixes."""
    if _NOTHING in text.lower():
        return True
    return all(
        not line.strip() or line.lstrip().startswith(("#", "@prefix", "PREFIX", "@base", "BASE", "```"))
        for line in text.splitlines()
    )


@cache
def _validator(ontology: Ontology) -> Validator:
    """Shapes are parsed once per process and ontology."""
    from pcm.shapes import Validator

    return Validator(ontology)


@cache
def _system(ontology: Ontology, output: str, layout: str = AREAS) -> str:
    """The system prompt: rules, example and the compact catalogue, the same for every utterance (so a prompt cache
    reuses all of it): of the core areas, or (``whole``) of every area but pcm's bookkeeping, which is also what
    the extraction JSON Schema accepts."""
    areas = tuple(a for a in ontology.areas if (a not in RESERVED_AREAS if layout == WHOLE else a in EXTRACTION_CORE))
    return system_prompt(_without_annotations(ontology.catalogue(areas, compact=True)), output)


@cache
def _topic_vocabulary(ontology: Ontology, areas: tuple[str, ...]) -> str:
    """The user message's catalogue blocks of the utterance's own areas (beyond the core), with their topic notes;
    the legend is left out (the system prompt's catalogue carries it)."""
    blocks = ontology.catalogue(areas, compact=True, legend=False) if areas else ""
    return topic_vocabulary(_without_annotations(blocks), areas)


def _without_annotations(catalogue: str) -> str:
    """The compact catalogue without its ``annotations:`` lines (pcm:area, schema:rangeIncludes...: terms about the
    vocabulary, never written by an extraction)."""
    return "".join(line for line in catalogue.splitlines(keepends=True) if not line.startswith("annotations: "))

"""What the model is told besides the utterance: who speaks, when, the turns before, and the entities it may mean.

Three problems are solved here, before the model is called:

* Reference ("it", "she", "the same one"): the previous few turns of the session come along as read-only context,
  and the entities extracted from them are offered first among the known entities.
* Entity reuse: the entities the utterance probably mentions are found by exact label lookups of its word n-grams
  (indexed, so cheap on a large memory) and, when the side index is available, by its entity matching. Their IRIs,
  types and labels go into the prompt so the model writes ``m:biscuit`` instead of minting ``m:biscuit-2``.
* Time: the message time and the concrete dates of "yesterday", last week's and next week's days are spelt out, so
  "last Friday" or "next Monday" resolve against when it was said, never against the machine's clock.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from pcm.backend import term_value
from pcm.errors import PcmError
from pcm.extraction.queries import render
from pcm.naming import Naming
from pcm.sparql import literal_term, values_clause
from pcm.store import PostInfo
from pcm.words import CONTENT_STOPWORDS

if TYPE_CHECKING:
    import rdflib

    from pcm.context import MemoryContext
    from pcm.ontology import Ontology

log = logging.getLogger(__name__)

#: Characters of each previous turn shown.
TURN_CHARS = 400
_MAX_LABEL_LOOKUPS = 400
_WORD = re.compile(r"[^\W_][\w'’.&-]*[^\W_]|[^\W_]", re.UNICODE)
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


@dataclass(frozen=True)
class Entity:
    """An existing individual offered to the model: exactly what it needs to reuse the IRI."""

    iri: str
    label: str
    types: tuple[str, ...]


@dataclass
class TurnContext:
    """Everything one extraction call is told about the utterance's surroundings."""

    post: PostInfo
    speaker: str
    """IRI of who said it: the owner, the assistant, or a named person."""
    previous: list[PostInfo]
    entities: list[Entity]
    addressee: str
    """IRI of whom the speaker talks to ("you" in the utterance): :func:`addressee_iri`."""


def addressee_iri(post: PostInfo, session: Sequence[PostInfo], naming: Naming) -> str:
    """Whom ``post``'s speaker talks to: in a conversation between the owner and another person (LoCoMo's two
    friends, a chat export), the owner's "you" is that person, the nearest other speaker of the session (before
    the post, else after it), not the assistant; anyone else talks to the owner. Without it, the owner's
    thanks to a friend read as thanks to the assistant, and the friend became a new node beside her own."""
    if post.role != "user":
        return naming.owner
    before = [p for p in session if p.position < post.position][::-1]
    after = [p for p in session if p.position > post.position]
    for other in (*before, *after):
        if other.role == "other":
            return naming.person(other.speaker or "someone")
        if other.role == "assistant":
            break
    return naming.assistant


def speaker_iri(post: PostInfo, naming: Naming) -> str:
    """The agent a post is attributed to (the same rule as :func:`pcm.provenance.agent_for`)."""
    if post.role == "user":
        return naming.owner
    if post.role in ("assistant", "system"):
        return naming.assistant
    return naming.person(post.speaker or "someone")


class ContextBuilder:
    """Finds the context of posts of one memory; safe to share between the extraction worker threads."""

    def __init__(self, memory: MemoryContext, *, use_index: bool | None = None) -> None:
        self.memory = memory
        self.naming = memory.naming
        self._use_index = memory.settings.index_enabled if use_index is None else use_index
        #: Previous turns shown, and known entities offered (found three ways, each up to this many) per call.
        self._turns = memory.settings.extraction.previous_turns
        self._entities = memory.settings.extraction.context_entities
        self._index_lock = threading.Lock()

    def build(self, post: PostInfo, session: Sequence[PostInfo]) -> TurnContext:
        """Context of ``post``; ``session`` is its session's posts in order (the previous turns come from it)."""
        previous = [p for p in session if p.position < post.position][-self._turns :]
        speaker = speaker_iri(post, self.naming)
        ranked: dict[str, None] = dict.fromkeys(self._derived_from(previous))
        ranked.update(dict.fromkeys(self._label_matches(post.text)))
        ranked.update(dict.fromkeys(self._index_matches(post)))
        addressee = addressee_iri(post, session, self.naming)
        fixed = {self.naming.owner, self.naming.assistant, speaker, addressee}
        iris = [i for i in ranked if i not in fixed][: self._entities]
        cards = entity_cards(self.memory, [*sorted(fixed), *iris])
        entities = [cards[i] for i in [*sorted(fixed), *iris] if i in cards]
        return TurnContext(post, speaker, previous, entities, addressee)

    def _derived_from(self, previous: Sequence[PostInfo]) -> list[str]:
        if not previous:
            return []
        q = render(
            "derived_from", posts=values_clause("post", [p.iri for p in previous]), limit=str(self._entities)
        )
        return [term_value(row[0]) for row in self.memory.store.select(q).rows if row[0] is not None]

    def _label_matches(self, text: str) -> list[str]:
        labels = sorted(label_variants(text))[:_MAX_LABEL_LOOKUPS]
        if not labels:
            return []
        q = render(
            "label_candidates",
            labels=" ".join(literal_term(label) for label in labels),
            namespace=literal_term(self.naming.namespace),
            limit=str(self._entities),
        )
        return sorted(term_value(row[0]) for row in self.memory.store.select(q).rows if row[0] is not None)

    def _index_matches(self, post: PostInfo, k: int = 5) -> list[str]:
        """Entities the side index matches to the utterance (embedding + fuzzy label), when the index is on.

        The utterance's own vector, stored when ingest indexed the post, stands in for embedding its text again
        (a forward pass, ~11 ms per utterance); a post not indexed yet is embedded as before.
        """
        if not self._use_index:
            return []
        try:
            with self._index_lock:
                index = self.memory.index
                matches = index.match_entities(post.text, k, vector=index.post_vector(post.iri))
        except PcmError as error:
            log.info("entity matching through the side index is unavailable: %s", error)
            self._use_index = False
            return []
        return [m.iri for m in matches if self.naming.is_individual(m.iri)]


def entity_cards(memory: MemoryContext, iris: Sequence[str]) -> dict[str, Entity]:
    """Label and types of each individual (those with neither are left out: they do not exist).

    Two queries rather than one with two OPTIONALs: an entity said in many graphs would multiply its labels by its
    types in the union of graphs.
    """
    labels: dict[str, str] = {}
    types: dict[str, set[str]] = {}
    unique = list(dict.fromkeys(iris))
    for start in range(0, len(unique), 200):
        values = values_clause("e", unique[start : start + 200])
        for row in memory.store.select(render("entity_labels", entities=values)).rows:
            if row[0] is not None and row[1] is not None:
                labels[term_value(row[0])] = term_value(row[1])
        for row in memory.store.select(render("entity_types", entities=values)).rows:
            if row[0] is not None and row[1] is not None:
                types.setdefault(term_value(row[0]), set()).add(term_value(row[1]))
    return {
        iri: Entity(iri, labels.get(iri, ""), tuple(sorted(types.get(iri, ()))))
        for iri in unique
        if iri in labels or iri in types
    }


def node_context(memory: MemoryContext, iris: Iterable[str]) -> rdflib.Graph:
    """Types and labels of existing nodes, as the rdflib Graph :class:`pcm.shapes.Validator` takes as context."""
    import rdflib

    from pcm.extraction.terms import term_to_rdflib

    graph = rdflib.Graph()
    chosen = sorted(set(iris))
    for start in range(0, len(chosen), 200):
        q = render("node_context", entities=values_clause("n", chosen[start : start + 200]))
        for row in memory.store.select(q).rows:
            n, p, o = row
            if n is not None and p is not None and o is not None:
                graph.add((term_to_rdflib(n), term_to_rdflib(p), term_to_rdflib(o)))
    return graph


# ---------------------------------------------------------------------------------------------------- mentions


def label_variants(text: str) -> set[str]:
    """Word n-grams (1-4) of the text in the casings labels are written in, without stopword-only grams."""
    words = [w.rstrip(".") for w in _WORD.findall(text)]
    words = [w.replace("’", "'") for w in words if w]
    found: set[str] = set()
    for n in range(1, 5):
        for i in range(len(words) - n + 1):
            gram = words[i : i + n]
            if all(w.lower() in CONTENT_STOPWORDS for w in gram) or gram[0].lower() in CONTENT_STOPWORDS and n > 1:
                continue
            if gram[-1].lower() in CONTENT_STOPWORDS:
                continue
            phrase = " ".join(gram)
            if n == 1 and len(phrase) < 3:
                continue
            for grams in (gram, [g.removesuffix("'s") for g in gram]):
                variant = " ".join(grams)
                found.update({variant, variant.lower(), variant.title(), variant[:1].upper() + variant[1:]})
    return {f for f in found if f}


# ---------------------------------------------------------------------------------------------------- rendering


def message_time(time: datetime | None) -> tuple[str, str]:
    """``(message time line, relative date hints)`` for the prompt; both say so when the time is unknown."""
    if time is None:
        return (
            "unknown",
            "Relative dates cannot be resolved for this message: leave out dates that are not stated in full.",
        )
    day = time.date()
    weekday = _WEEKDAYS[day.weekday()]
    past = ", ".join(f"{_WEEKDAYS[d.weekday()][:3]} {d.isoformat()}" for d in (day - timedelta(n) for n in range(1, 8)))
    future = ", ".join(f"{_WEEKDAYS[d.weekday()][:3]} {d.isoformat()}" for d in (day + timedelta(n) for n in range(1, 8)))
    hints = (
        f"Dates relative to the message: today {weekday} {day.isoformat()}; yesterday {(day - timedelta(1)).isoformat()}; "
        f"tomorrow {(day + timedelta(1)).isoformat()}; the past 7 days: {past}; the next 7 days: {future}."
    )
    return f"{time.isoformat()} ({weekday})", hints


def show_iri(iri: str, namespace: str, ontology: Ontology) -> str:
    """``m:slug`` for the memory's individuals, a CURIE for vocabulary terms, ``<iri>`` otherwise."""
    if iri.startswith(namespace):
        local = iri[len(namespace) :]
        if re.fullmatch(r"[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_-])?", local):
            return f"m:{local}"
        return f"<{iri}>"
    return ontology.curie(iri)


def render_user_message(
    context: TurnContext, *, memory: MemoryContext, ontology: Ontology, output: str = "turtle", topics: str | None = None
) -> str:
    """The user message of the extraction prompt (``part: user`` of ``extract.v3.md``); ``topics`` is its section
    on the utterance's own topics: their catalogue (:func:`pcm.extraction.prompts.topic_section`, the default an
    empty one) or, when the system prompt holds the whole catalogue, their notes alone
    (:func:`pcm.extraction.prompts.notes_section`)."""
    from pcm.extraction.prompts import extract_prompt, task_line, topic_section

    ns = memory.naming.namespace
    when, hints = message_time(context.post.time)
    # the compact form names the memory's nodes as its answer writes them: me, you, biscuit
    show = _compact_names(context, memory.naming) if output == "compact" else show_iri
    return extract_prompt().render(
        "user",
        topics=topic_section("") if topics is None else topics,
        message_time=when,
        date_hints=hints,
        speaker=_speaker_line(context, memory, ontology, show),
        entities=_entities_block(context.entities, memory, ontology, show),
        previous=_previous_block(context.previous, memory.naming, ns, ontology, show),
        role=context.post.role if context.post.role != "other" else f"other: {context.post.speaker or 'someone'}",
        utterance=_fence_safe(context.post.text),
        task=task_line(output),
    )


#: How a prompt shows a node: ``show_iri`` (``m:biscuit``), or ``_bare`` for the compact form (``biscuit``).
_Show = Callable[[str, str, "Ontology"], str]


def _bare(iri: str, namespace: str, ontology: Ontology) -> str:
    shown = show_iri(iri, namespace, ontology)
    return shown[2:] if shown.startswith("m:") else shown


def _compact_names(context: TurnContext, naming: Naming) -> _Show:
    """``me`` and ``you`` for the turn's speaker and whom it addresses, the memory's other nodes without ``m:``: the
    names a compact answer writes (:func:`pcm.extraction.compact.call_names`), so the prompt shows no other."""
    from pcm.extraction.compact import ME, YOU

    parties = {context.speaker: ME, context.addressee: YOU}
    return lambda iri, namespace, ontology: parties.get(iri) or _bare(iri, namespace, ontology)


def _speaker_line(context: TurnContext, memory: MemoryContext, ontology: Ontology, show: _Show = show_iri) -> str:
    iri = show(context.speaker, memory.naming.namespace, ontology)
    if context.speaker == memory.naming.owner:
        return f"{iri} ({memory.manifest.owner}, the memory's owner)"
    if context.speaker == memory.naming.assistant:
        return f"{iri} (the AI assistant)"
    return f"{iri} ({context.post.speaker or 'someone'})"


def _entities_block(
    entities: Sequence[Entity], memory: MemoryContext, ontology: Ontology, show: _Show = show_iri
) -> str:
    ns = memory.naming.namespace
    lines = []
    for e in entities:
        types = ", ".join(show_iri(t, ns, ontology) for t in e.types) or "untyped"
        lines.append(f"- {show(e.iri, ns, ontology)} \"{_one_line(e.label)}\" ({types})")
    return "\n".join(lines) if lines else "(none)"


def _previous_block(
    previous: Sequence[PostInfo], naming: Naming, ns: str, ontology: Ontology, show: _Show = show_iri
) -> str:
    lines = []
    for p in previous:
        who = show(speaker_iri(p, naming), ns, ontology)
        when = f", {p.time.isoformat(sep=' ', timespec='minutes')}" if p.time else ""
        text = _one_line(p.text)
        text = text if len(text) <= TURN_CHARS else text[: TURN_CHARS - 1] + "…"
        lines.append(f"- [{p.role} {who}{when}] {_fence_safe(text)}")
    return "\n".join(lines) if lines else "(none: this is the first turn of the session)"


def _fence_safe(text: str) -> str:
    """The utterance cannot close its own ``<utterance>`` fence."""
    return re.sub(r"</?\s*utterance\s*>", lambda m: m.group(0).replace("utterance", "utterance\u200b"), text, flags=re.I)


def _one_line(text: str) -> str:
    return " ".join(text.split())

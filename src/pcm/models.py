"""The records every face shows, defined once: a stored message, a recall hit, a fact and their pages, an answer
with its citations and warnings, where a fact or entity came from (``why``, the entity page), and an error.

The Python API returns these (``Memory.messages``, ``Memory.message``, ``Memory.recall``, ``Memory.facts``, ...),
``pcm ... --json`` prints their JSON, the HTTP API answers with them (its OpenAPI document is generated from them)
and the MCP tools return them (their output schemas too). So a field has one name and one meaning everywhere: the
words of a message are ``text``, its post IRI ``post``, its session id ``session``, its time ``time``.

Kept below the pipelines (next to :mod:`pcm.errors` and :mod:`pcm.limits`) so that the side index and the
pipelines can build them directly. Pydantic is imported here, so the CLI imports this module only when a command
runs, never at start.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer

#: A time with its zone, written as ``datetime.isoformat()`` writes it (``+00:00``, not ``Z``) in every face's JSON.
Time = Annotated[datetime, PlainSerializer(lambda t: t.isoformat(), return_type=str, when_used="json")]


class Record(BaseModel):
    """A record a face shows: immutable, and its JSON is what every face prints."""

    model_config = ConfigDict(frozen=True)

    def as_json(self) -> dict[str, Any]:
        """The record as the JSON every face gives (times as ISO 8601 text)."""
        return self.model_dump(mode="json")


class Message(Record):
    """A stored message (a ``sioc:Post``): what was said, by whom, when, in which session."""

    post: str = Field(description="The post IRI the message is stored as: what `get` and `delete` take.")
    source_id: str | None = Field(description="The client's id for the message (its message id or idempotency "
                                              "key), if it gave one.")
    session: str = Field(description="The id of the session (conversation) the message belongs to.")
    time: Time | None = Field(description="When it was said (ISO 8601 with its zone), if known.")
    speaker: str | None = Field(description="Who said it, when known beyond the role.")
    role: str = Field(description="user, assistant, system or other.")
    text: str = Field(description="What was said.")


class RecallHit(Message):
    """A stored message found by recall, with the score that ranked it."""

    score: float | None = Field(description="The fused score that ranked it, higher is nearer (null for a text "
                                            "search, which does not rank).")


class FactSource(Record):
    """Where a fact is stated: the extraction graph of one message, or the graph of an imported file."""

    graph: str = Field(description="The named graph that states the fact.")
    post: str | None = Field(description="The post IRI of the message it was extracted from (null for an import).")
    session: str | None = Field(description="The session id of that message (null for an import).")
    time: Time | None = Field(description="When that message was said (ISO 8601), if known.")


class Fact(Record):
    """One statement the memory holds about the world (subject, property, value), with where it came from.

    Entity cards (a type, a label) describe entities rather than state facts: the entity page shows them."""

    id: str = Field(description="The fact's id: what `get` and `delete` take. Stable: the same statement has the "
                                "same id wherever and whenever it is listed.")
    subject: str = Field(description="The IRI of the entity the fact is about.")
    predicate: str = Field(description="The IRI of the property.")
    object: str = Field(description="The value: an IRI, or a literal's text.")
    object_type: Literal["iri", "literal"] = Field(description="Whether `object` is an IRI or a literal.")
    datatype: str | None = Field(default=None, description="The literal's datatype IRI (null for an IRI).")
    lang: str | None = Field(default=None, description="The literal's language tag, if any.")
    text: str = Field(description="The fact as a reader sees it: labels where the entities have them.")
    sources: list[FactSource] = Field(description="Every graph that states it, earliest message first.")


class MessagePage(Record):
    """One page of stored messages, oldest first (then by session and position)."""

    messages: list[Message] = Field(description="The messages of this page.")
    total: int = Field(description="How many messages match the filters, over all pages.")
    offset: int = Field(description="How many matching messages come before this page.")
    limit: int = Field(description="The page size asked for.")
    next_offset: int | None = Field(description="The offset of the next page (null: this is the last).")


class FactPage(Record):
    """One page of facts, those said earliest first (facts from imported files, which have no time, first)."""

    facts: list[Fact] = Field(description="The facts of this page.")
    total: int = Field(description="How many facts match the filters, over all pages.")
    offset: int = Field(description="How many matching facts come before this page.")
    limit: int = Field(description="The page size asked for.")
    next_offset: int | None = Field(description="The offset of the next page (null: this is the last).")


class Forgotten(Record):
    """What deleting (forgetting) messages did."""

    posts: list[str] = Field(description="The post IRIs forgotten.")
    purged: bool = Field(description="Whether the memory's files were then rewritten so the text left the disk.")
    note: str | None = Field(default=None, description="Why the files were not purged, or what the purge cannot "
                                                        "guarantee on an external store; null when nothing to say.")


class FactDeleted(Record):
    """What deleting a fact did."""

    fact: Fact = Field(description="The fact deleted, as it was.")
    recorded: Time = Field(description="When the deletion was recorded in the history graph (ISO 8601): `history` "
                                      "on the subject shows the value as over since then.")


class FactChange(Record):
    """One value a property of an entity had or has: when it was said (by which post) and, if it is over, when and
    by what it was replaced. What ``history`` lists."""

    predicate: str = Field(description="The property's IRI.")
    value: str = Field(description="The value: an IRI, or a literal's text.")
    said_by: str | None = Field(description="The post IRI of the message that said it, when known.")
    said_at: str | None = Field(description="When that message was said (ISO 8601, as stored), when known.")
    said: str | None = Field(description="What was said in that message, when known.")
    superseded_at: str | None = Field(description="When the value was replaced or removed (ISO 8601); null while "
                                                  "it holds.")
    superseded_by: str | None = Field(description="The post IRI of the message that replaced it; null while it "
                                                  "holds.")
    superseded_by_text: str | None = Field(description="What was said in that replacing message, when known.")
    current: bool = Field(description="True when the value holds now (never replaced nor removed).")


class FactHistory(Record):
    """How the facts about an entity changed: every property that ever changed, its past values and the ones that
    hold now, by property, oldest first."""

    iri: str = Field(description="The entity's IRI, expanded.")
    changes: list[FactChange] = Field(description="The values, by property, past ones first; empty when no value "
                                                  "of the entity ever changed.")


class Source(Record):
    """Where a fact or an entity came from: a stored message (its words and where it was said), or an imported
    file. What ``why`` lists and what each fact of an entity page cites."""

    graph: str | None = Field(default=None, description="The named graph that states it (an extraction or import "
                                                        "graph).")
    post: str | None = Field(default=None, description="The post IRI of the message it came from (null for an "
                                                       "import).")
    text: str | None = Field(default=None, description="What was said in that message (null for an import).")
    thread: str | None = Field(default=None, description="The thread IRI of that message's session.")
    session: str | None = Field(default=None, description="The session id of that message.")
    time: Time | None = Field(default=None, description="When that message was said (ISO 8601 with its zone), if "
                                                        "known.")
    speaker: str | None = Field(default=None, description="Who said it, when known beyond the role.")
    role: str | None = Field(default=None, description="user, assistant, system or other.")
    source_id: str | None = Field(default=None, description="The client's id for that message, if it gave one.")
    file: str | None = Field(default=None, description="The file it was imported from (an import graph).")


class Term(Record):
    """An RDF term as an entity page shows it: its value, and how a reader sees it."""

    type: Literal["uri", "bnode", "literal", "triple"] = Field(description="What kind of term it is.")
    value: str = Field(description="The IRI, the blank node's id, the literal's text, or the quoted triple.")
    curie: str | None = Field(default=None, description="The IRI shortened with a known prefix (m:, schema:, ...).")
    label: str | None = Field(default=None, description="The IRI's rdfs:label, when it has one.")
    lang: str | None = Field(default=None, description="The literal's language tag, if any.")
    datatype: str | None = Field(default=None, description="The literal's datatype IRI, if any.")


class EntityFact(Record):
    """A fact as an entity page shows it: in or out of the entity, with the messages it came from."""

    direction: Literal["in", "out"] = Field(description="out: the entity is the subject; in: it is the value.")
    predicate: Term = Field(description="The property.")
    value: Term = Field(description="The other end: the value (out) or the subject (in).")
    sources: list[Source] = Field(description="The messages (or imported files) that state it.")


class EntityPage(Record):
    """One entity: its names, types, facts (each with its sources) and the entities it is linked to."""

    iri: str = Field(description="The entity's IRI.")
    curie: str = Field(description="The IRI as a reader sees it (m:slug, schema:Person, ...).")
    label: str = Field(description="The entity's name: its label, or its CURIE.")
    labels: list[str] = Field(description="Every label it has.")
    types: list[Term] = Field(description="Its classes.")
    facts: list[EntityFact] = Field(description="The facts about it, with where each came from.")
    related: list[Term] = Field(description="The entities its facts link it to.")
    mentioned_in: list[str] = Field(description="The post IRIs of the messages that mention it.")
    truncated: bool = Field(description="Whether there were more facts than a page shows.")


class EvidenceFact(Record):
    """A stored statement an answer used, the graph that holds it, and the messages it came from."""

    subject: str = Field(description="The statement's subject (N-Triples form).")
    predicate: str = Field(description="The statement's property (N-Triples form).")
    object: str = Field(description="The statement's value (N-Triples form: an IRI in brackets, or a literal).")
    graph: str = Field(description="The named graph that holds it.")
    posts: list[str] = Field(description="The post IRIs of the messages it came from.")
    text: str = Field(description="The statement as a reader sees it: labels and CURIEs.")


class TraceStep(Record):
    """One SPARQL query an answer tried, and what came of it (``--explain``)."""

    round: int = Field(description="The repair round (0 for the first query).")
    source: str = Field(description="Where the query came from: model, relaxation: <what>, or cache.")
    sparql: str | None = Field(default=None, description="The query.")
    outcome: str = Field(description="What came of it (answered, empty, refused, error, ...).")
    detail: str = Field(default="", description="Why, when it did not answer.")
    rows: int = Field(default=0, description="How many rows it gave.")


class AnswerWarning(Record):
    """Something the reader of an answer should know that is not part of it: the side index lagging the store."""

    kind: Literal["index_lag"] = Field(description="What it is about: index_lag, the side index lags the store.")
    message: str = Field(description="The warning, on one line.")
    missing_posts: int = Field(description="Posts the store has and the index lacks.")
    forgotten_posts: int = Field(description="Posts the index still holds that the store forgot.")
    missing_searched: bool = Field(description="Whether the missing posts were searched anyway (by meaning).")


class Answer(Record):
    """An answer from memory: the sentence, how it was found, and the stored messages it rests on."""

    question: str = Field(description="The question, as asked.")
    answer: str = Field(description="The answer, in words.")
    path: str = Field(description="How it was answered: frame, sparql, events, summary, facts, traversal, "
                                  "episodic, plan or none.")
    as_of: Time = Field(description="The question's date the answer was read at (ISO 8601, with its zone).")
    note: str = Field(default="", description="What the reader should know about how it was answered.")
    sparql: str | None = Field(default=None, description="The query that produced the answer, on the sparql path.")
    computed: str | None = Field(default=None, description="What was computed in code from the query's rows "
                                                          "(a count, a duration), if anything.")
    citations: list[Message] = Field(description="The stored messages the answer rests on, in conversation order.")
    facts: list[EvidenceFact] = Field(default_factory=list, description="The stored statements the answer used.")
    pending: list[str] = Field(default_factory=list, description="The cited posts whose facts are not extracted "
                                                                 "yet (`pcm extract --pending`).")
    warnings: list[AnswerWarning] = Field(default_factory=list, description="What the reader should know that is "
                                                                           "not part of the answer.")
    trace: list[TraceStep] = Field(default_factory=list, description="Every SPARQL query tried, in order.")
    plan: dict[str, Any] | None = Field(default=None, description="How the question was read and, for a planned "
                                                                  "answer, each step.")
    frame: dict[str, Any] | None = Field(default=None, description="The question read into a typed frame, when "
                                                                   "it was.")
    stats: dict[str, Any] | None = Field(default=None, description="Timings, model calls and prompt tokens (asked "
                                                                   "with explain only: they vary run to run).")

    def render(self, explain: bool = False) -> str:
        """The human form (``pcm ask``): see :func:`pcm.answer_text.answer_text`."""
        from pcm.answer_text import answer_text

        return answer_text(self.as_json(), explain)


class ErrorBody(Record):
    """Every error a user can cause, as data (the HTTP API's error answers): one line saying what went wrong and
    what to do. The same line is what the CLI prints after ``pcm: error:``, what an MCP tool error says, and the
    text of the :class:`pcm.errors.PcmError` the Python API raises."""

    error: str = Field(description="What went wrong and what to do, on one line.")
    exit_code: int | None = Field(
        default=None, description="The exit code `pcm` gives the same error (pcm.errors), for a client that runs "
        "commands through this server; absent for errors of the HTTP exchange itself."
    )


__all__ = ["Answer", "AnswerWarning", "EntityFact", "EntityPage", "ErrorBody", "EvidenceFact", "Fact", "FactChange",
           "FactDeleted", "FactHistory", "FactPage", "FactSource", "Forgotten", "Message", "MessagePage", "RecallHit", "Record", "Source", "Term",
           "Time", "TraceStep"]

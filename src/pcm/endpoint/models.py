"""The JSON API's requests and answers as typed models: what the handlers check bodies and parameters with, what
they answer with, and what ``/openapi.json`` is generated from (:mod:`pcm.endpoint.openapi`).

One model per shape, one name per field: the text of a stored message is ``text`` wherever it appears (recall
hits, ask evidence, conversation pages, the sources of a fact). The records every face shows (a stored message, a
recall hit, a fact, their pages) are :mod:`pcm.models`'; they are named here too, for the handlers and the OpenAPI
document. Request bodies are checked strictly (JSON has the
right types: a number where a number is expected), query parameters leniently (they arrive as strings).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pcm.limits import ASK_K, PAGE_OFFSET, PAGE_SIZE, RECALL_K
from pcm.models import Answer as Answer
from pcm.models import AnswerWarning as AnswerWarning
from pcm.models import EntityFact as EntityFact
from pcm.models import EntityPage as EntityPage
from pcm.models import ErrorBody as ErrorBody
from pcm.models import EvidenceFact as EvidenceFact
from pcm.models import Fact as Fact
from pcm.models import FactChange as FactChange
from pcm.models import FactDeleted as FactDeleted
from pcm.models import FactHistory as FactHistory
from pcm.models import FactPage as FactPage
from pcm.models import FactSource as FactSource
from pcm.models import Forgotten as Forgotten
from pcm.models import Message as Message
from pcm.models import MessagePage as MessagePage
from pcm.models import RecallHit as RecallHit
from pcm.models import Source as Source
from pcm.models import Term as Term
from pcm.models import TraceStep as TraceStep

# -- requests ----------------------------------------------------------------------------------------------------------


class Body(BaseModel):
    """A JSON request body: types are checked as sent; unknown keys are ignored (a client may send more)."""

    model_config = ConfigDict(strict=True, extra="ignore")


class Query(BaseModel):
    """Query parameters: they arrive as text, so numbers are read from it."""

    model_config = ConfigDict(extra="ignore")


class IngestText(Body):
    """One message, as ``pcm ingest --text`` takes it (and ``Memory.remember``)."""

    text: str = Field(description="What was said.")
    at: str | None = Field(default=None, description="When it was said (ISO 8601); default: now.")
    session: str | None = Field(default=None, description="The session it continues; default: one per day (cli-YYYY-MM-DD).")
    role: str = Field(default="user", description="user, assistant, system or other.")
    speaker: str | None = Field(default=None, description="Who said it, when the role does not say enough.")
    id: str | None = Field(
        default=None,
        description="The client's id for this message. Sending the same id again stores nothing new; the "
        "Idempotency-Key header does the same when the body has no id.",
    )


class ChatMessage(Body):
    """One message of a chat, as assistants' APIs send it."""

    role: str = Field(description="user, assistant, system or other (also Human, AI, ...).")
    content: str | list[dict[str, Any]] = Field(
        description="The text, or OpenAI-style content parts (only the text parts are stored)."
    )
    id: str | int | None = Field(default=None, description="The client's message id; a message already stored under it is not stored again.")
    timestamp: str | int | float | None = Field(default=None, description="When it was said (ISO 8601 or Unix seconds).")
    speaker: str | None = Field(default=None, description="Who said it, when the role does not say enough.")


class IngestChat(Body):
    """A chat: ``{"messages": [{"role": ..., "content": ...}, ...]}``, with or without a conversation id.

    Without ``conversation_id`` the session is named from the ``Idempotency-Key`` header, or else from the
    messages themselves: the same body sent twice stores nothing new; two chats are two sessions."""

    messages: list[ChatMessage] = Field(description="The chat's messages, in order.")
    conversation_id: str | int | None = Field(default=None, description="The chat's id: its messages continue that session.")
    title: str | None = Field(default=None, description="The chat's title, kept with its session.")
    started: str | int | float | None = Field(default=None, description="When the chat started (ISO 8601 or Unix seconds), for messages without a time.")


class IngestFile(Body):
    """Conversations in any format ``pcm ingest`` reads (json, jsonl, locomo, longmemeval), detected unless named."""

    conversations: list[Any] | dict[str, Any] = Field(description="The file's content: a list of conversations or one object, as the format has it.")
    format: Literal["json", "jsonl", "locomo", "longmemeval"] | None = Field(default=None, description="The format; default: detected from the content.")


class AskBody(Body):
    question: str = Field(min_length=1, description="The question, in words.")
    k: int = Field(default=ASK_K.default, json_schema_extra=ASK_K.schema(),
                   description="How many stored messages to consider (the memory checks the bounds).")
    plan: bool | None = Field(
        default=None, description="true: always plan the search; false: never; absent: the model decides."
    )
    as_of: str | None = Field(
        default=None, description="The question's date (ISO 8601; without a zone, the memory's zone), for 'last "
        "month' and 'how long ago'; default: now."
    )


class RecallQuery(Query):
    q: str = Field(min_length=1, description="The text to recall messages for.")
    k: int = Field(default=RECALL_K.default, json_schema_extra=RECALL_K.schema(),
                   description="How many messages to return (the memory checks the bounds).")
    role: str | None = Field(default=None, description="Only messages of this role: user, assistant, system or other.")
    speaker: str | None = Field(default=None, description="Only messages said by this speaker.")
    session: str | None = Field(default=None, description="Only messages of this session (its id, or its thread IRI).")
    mode: Literal["hybrid", "fts", "vector"] | None = Field(default=None, description="Which legs of recall to use.")
    since: str | None = Field(default=None, description="Only messages said at or after this time (ISO 8601).")
    until: str | None = Field(default=None, description="Only messages said before this time (ISO 8601).")


class SearchQuery(Query):
    q: str = Field(min_length=1, description="The text to search for.")
    k: int = Field(default=RECALL_K.default, json_schema_extra=RECALL_K.schema(),
                   description="How many messages and entities to return (the memory checks the bounds).")


class EntityQuery(Query):
    iri: str = Field(min_length=1, description="The entity's IRI.")


class WhyQuery(Query):
    iri: str = Field(min_length=1, description="A fact's graph, an entity or a message: a full IRI, m:slug for an "
                                               "individual of this memory, or a CURIE.")


class HistoryQuery(Query):
    iri: str = Field(min_length=1, description="The entity: a full IRI, m:slug for an individual of this memory, or "
                                               "a CURIE.")


#: The dump formats ``Memory.export`` writes, each with the media type ``/api/export`` answers with.
EXPORT_MEDIA_TYPES = {
    "nquads": "application/n-quads",
    "trig": "application/trig",
    "turtle": "text/turtle",
    "jsonld": "application/ld+json",
}


class ExportQuery(Query):
    format: Literal["nquads", "trig", "turtle", "jsonld"] = Field(
        default="nquads", description="The dump's format, as `pcm export --format` takes it: nquads, trig or jsonld "
                                      "(every graph), or turtle (the current-truth union of graphs).")


class ConversationQuery(Query):
    iri: str | None = Field(default=None, description="The thread IRI.")
    id: str | None = Field(default=None, description="The session id (give this or iri).")


class PageQuery(Query):
    """A page of a listing, narrowed by session and time."""

    session: str | None = Field(default=None, description="Only those of this session (its id, or its thread IRI).")
    since: str | None = Field(default=None, description="Only those said at or after this time (ISO 8601; without "
                                                        "a zone, the memory's).")
    until: str | None = Field(default=None, description="Only those said before this time (ISO 8601; without a "
                                                        "zone, the memory's).")
    limit: int = Field(default=PAGE_SIZE.default, json_schema_extra=PAGE_SIZE.schema(),
                       description="How many to return (the memory checks the bounds).")
    offset: int = Field(default=PAGE_OFFSET.default, json_schema_extra=PAGE_OFFSET.schema(),
                        description="How many to skip: the `next_offset` of the page before.")


class MessagesQuery(PageQuery):
    """A page of stored messages, oldest first."""


class FactsQuery(PageQuery):
    """A page of facts, those said earliest first; session and time narrow the messages they came from."""


class MessageQuery(Query):
    post: str = Field(min_length=1, description="The message: its post IRI, or the client's message id.")


class MessageDelete(MessageQuery):
    purge: bool = Field(default=True, description="Also rewrite the memory's files so the text leaves the disk "
                                                  "(not done while the server holds them: the answer says so).")


class FactQuery(Query):
    id: str = Field(min_length=1, description="The fact's id, as a listing of facts gives it.")


class ForgetBody(Body):
    """Forget one message or a whole session, with what was learnt from it alone (``pcm forget``)."""

    post: str | None = Field(default=None, description="The message: its post IRI, or the client's message id.")
    session: str | None = Field(default=None, description="A whole session: its id, or its thread IRI.")
    purge: bool = Field(default=True, description="Also rewrite the memory's files so the text leaves the disk "
                                                  "(not done while the server holds them: the answer says so).")


class ImportBody(Body):
    """A file of RDF to import (``pcm import``): plain triples become an import graph, a pcm dump is restored."""

    data: str = Field(description="The file's text (Turtle, TriG, N-Quads, N-Triples or JSON-LD).")
    name: str = Field(min_length=1, description="The file's name: kept as the import's source, and its suffix "
                                                "tells the format when `format` is absent.")
    format: Literal["turtle", "trig", "nquads", "ntriples", "jsonld"] | None = Field(
        default=None, description="The RDF format; default: from the name's suffix.")
    base: str | None = Field(default=None, description="The base IRI relative IRIs resolve against (`pcm import` "
                                                       "sends the file's own file: URI).")


class ExtractBody(Body):
    """Which stored posts to extract the facts of (``pcm extract``), with the server's model."""

    selection: Literal["pending", "failed", "gated", "all"] = Field(
        description="pending: never extracted; failed: whose last extraction failed; gated: those the small-talk "
                    "gate kept from the model; all: every post not yet extracted with this prompt and ontology.")
    force: bool = Field(default=False, description="Re-extract even posts already extracted with the same versions.")


# -- answers -----------------------------------------------------------------------------------------------------------


class Health(BaseModel):
    status: Literal["ok"] = Field(description="ok whenever the server answers.")
    pid: int = Field(description="The server's process id.")
    memory: str = Field(description="The memory directory the server holds.")
    engine_restarts: int = Field(description="How many times the store engine was restarted since the server started.")


class Limits(BaseModel):
    query_timeout_s: float = Field(description="Seconds a query may run.")
    update_timeout_s: float = Field(description="Seconds an update may run.")
    max_body_bytes: int = Field(description="The largest request body accepted.")
    max_result_bytes: int = Field(description="The largest query answer sent.")


class Endpoints(BaseModel):
    query: str = Field(description="The SPARQL query endpoint.")
    update: str = Field(description="The SPARQL update endpoint (the token required).")
    graph_store: str = Field(description="The Graph Store Protocol endpoint.")


class Info(BaseModel):
    memory: str = Field(description="The memory directory.")
    owner: str = Field(description="The owner's name.")
    owner_iri: str = Field(description="The owner's IRI (m:owner).")
    namespace: str = Field(description="The namespace of the memory's individuals (the m: prefix).")
    prefixes: dict[str, str] = Field(description="The prefixes the SPARQL editor completes.")
    writable: bool = Field(description="Whether writes are allowed (with the token).")
    index: bool = Field(description="Whether the side index (recall, hybrid search) is on.")
    limits: Limits = Field(description="What the server accepts and answers.")
    endpoints: Endpoints = Field(description="The SPARQL endpoints beside the JSON API.")


class GraphCount(BaseModel):
    graphs: int = Field(description="Graphs of this kind.")
    triples: int = Field(description="Triples in them.")


class ExtractionQueue(BaseModel):
    """The server's extraction worker, which extracts the facts of queued posts in the background."""

    state: Literal["starting", "idle", "extracting", "retrying", "stopped", "failed"] = Field(description="What the worker is doing.")
    pending: int = Field(description="Posts waiting for extraction, the one in hand included.")
    done: int = Field(description="Posts extracted by this server since it started.")
    failed: int = Field(description="Posts whose extraction failed since it started (`pcm extract --failed` retries).")
    current: str | None = Field(description="The post being extracted, if any.")
    errors: list[str] = Field(description="The latest errors, oldest first.")


class MemoryStats(BaseModel):
    """What the memory holds (``pcm stats``)."""

    posts: int = Field(description="Stored messages.")
    sessions: int = Field(description="Sessions (conversations).")
    extraction_status: dict[str, int] = Field(description="Posts by extraction status (pending, extracted, ...).")
    entities: int = Field(description="Entities the facts are about.")
    entities_by_class: dict[str, int] = Field(description="Entities by class IRI.")
    triples: int = Field(description="Triples in every graph.")
    graphs: dict[str, GraphCount] = Field(description="Graphs and triples by kind of graph.")
    extraction_queue: ExtractionQueue | None = Field(
        default=None, description="The background extraction worker, when this server runs one (queued extraction)."
    )


class Figures(BaseModel):
    mean: float = Field(description="The mean.")
    p50: float = Field(description="The median.")
    p95: float = Field(description="The 95th percentile.")
    p99: float = Field(description="The 99th percentile.")


class Timings(BaseModel):
    """The front's own time per request next to the engine's, in milliseconds, over the most recent requests."""

    requests: int = Field(description="Requests timed since the server started.")
    window: int = Field(description="How many of the latest requests the figures cover.")
    front_ms: Figures | None = Field(description="The front's own time per request (null: none yet).")
    engine_ms: Figures | None = Field(description="The engine's time per request (null: none yet).")
    engine_restarts: int = Field(description="How many times the store engine was restarted.")


class IngestResult(BaseModel):
    """What an ingest stored. A retry (same message ids, same Idempotency-Key, same chat) stores nothing new:
    its messages are counted in ``duplicates``."""

    stored: int = Field(description="Messages stored as new posts by this request.")
    duplicates: int = Field(description="Messages already stored (a retry): nothing new was written for them.")
    conversations: int = Field(description="Conversations (sessions) in the body.")
    utterances: int = Field(description="Messages in the body.")
    posts: list[str] = Field(description="The post IRIs stored by this request.")
    mode: str = Field(description="episodic (stored only), extraction with the LLM that extracted the facts, or "
                                  "queued (the facts are extracted later, in the background).")
    extraction: dict[str, Any] = Field(
        description="The extraction run's counts when this request extracted facts from a batch; else empty."
    )
    pending: int | None = Field(default=None, description="Messages stored by this request whose facts are not "
                                                          "extracted yet.")


class EntityMatch(BaseModel):
    iri: str = Field(description="The entity's IRI.")
    label: str = Field(description="Its name.")
    score: float | None = Field(description="How near it is (null for a text match).")
    how: str = Field(description="How it was matched (vector, name, ...).")


class SearchResult(BaseModel):
    mode: Literal["hybrid", "text"] = Field(description="hybrid (side index) or text (substring search).")
    hits: list[RecallHit] = Field(description="The stored messages found, best first.")
    entities: list[EntityMatch] = Field(description="The entities found, best first.")
    note: str | None = Field(default=None, description="Why a hybrid search fell back to text search.")


class Triple(BaseModel):
    s: Term = Field(description="The subject.")
    p: Term = Field(description="The property.")
    o: Term = Field(description="The value.")


class ConversationPost(BaseModel):
    post: str = Field(description="The post IRI.")
    position: int = Field(description="Its place in the session, from 0.")
    role: str | None = Field(description="user, assistant, system or other.")
    speaker: str | None = Field(description="Who said it, when known beyond the role.")
    time: str | None = Field(description="When it was said (ISO 8601), if known.")
    text: str = Field(description="What was said.")
    source_id: str | None = Field(description="The client's id for the message, if it gave one.")
    status: str | None = Field(description="Its extraction status (pending, extracted, gated, failed), if any.")
    facts: list[Triple] = Field(description="The facts extracted from it.")


class ConversationPage(BaseModel):
    iri: str = Field(description="The thread IRI.")
    id: str | None = Field(description="The session id.")
    title: str | None = Field(description="The session's title, if any.")
    created: str | None = Field(description="When the session started (ISO 8601), if known.")
    posts: list[ConversationPost] = Field(description="Its messages, in order.")


class ConversationSummary(BaseModel):
    iri: str = Field(description="The thread IRI.")
    id: str | None = Field(description="The session id.")
    title: str | None = Field(description="The session's title, if any.")
    posts: int = Field(description="How many messages it holds.")
    first: str | None = Field(description="When its first message was said (ISO 8601), if known.")


class ProgressEvent(BaseModel):
    """One line of a streamed answer (``application/x-ndjson``): progress while the work runs, then one result or
    one error."""

    event: Literal["progress", "result", "error"] = Field(description="What the line tells.")
    done: int | None = Field(default=None, description="progress: how many items are done so far.")
    total: int | None = Field(default=None, description="progress: how many items there are, once known.")
    result: dict[str, Any] | None = Field(default=None, description="result: what the work did, as the command's "
                                                                    "--json prints it.")
    error: str | None = Field(default=None, description="error: what went wrong, on one line.")
    exit_code: int | None = Field(default=None, description="error: the exit code `pcm` gives the same error.")


class ReindexState(BaseModel):
    """A side-index rebuild: idle (never started), running, done or failed."""

    state: Literal["idle", "running", "done", "failed"] = Field(description="idle (never started), running, done or failed.")
    done: int = Field(description="Rows written so far.")
    total: int | None = Field(description="Rows to write, once counted.")
    indexed: int | None = Field(description="Rows the finished rebuild wrote.")
    errors: list[str] = Field(description="Why it failed, if it did.")
    started: str | None = Field(description="When it started (ISO 8601).")
    finished: str | None = Field(description="When it finished (ISO 8601).")
    seconds: float | None = Field(description="How long it took.")


class ReindexBusy(ReindexState, ErrorBody):
    """A second rebuild refused while one runs: the error, and the running job's state."""

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
from pcm.models import Fact as Fact
from pcm.models import FactDeleted as FactDeleted
from pcm.models import FactPage as FactPage
from pcm.models import FactSource as FactSource
from pcm.models import Forgotten as Forgotten
from pcm.models import Message as Message
from pcm.models import MessagePage as MessagePage
from pcm.models import RecallHit as RecallHit

# -- every error -----------------------------------------------------------------------------------------------------


class ErrorBody(BaseModel):
    """Every JSON API error, whatever the status (400, 401, 403, 404, 405, 409, 413, 500, 503): one line saying what
    went wrong and what to do."""

    error: str = Field(description="What went wrong and what to do, on one line.")
    exit_code: int | None = Field(
        default=None, description="The exit code `pcm` gives the same error (pcm.errors), for a client that runs "
        "commands through this server; absent for errors of the HTTP exchange itself."
    )


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
    speaker: str | None = None


class IngestChat(Body):
    """A chat: ``{"messages": [{"role": ..., "content": ...}, ...]}``, with or without a conversation id.

    Without ``conversation_id`` the session is named from the ``Idempotency-Key`` header, or else from the
    messages themselves: the same body sent twice stores nothing new; two chats are two sessions."""

    messages: list[ChatMessage]
    conversation_id: str | int | None = None
    title: str | None = None
    started: str | int | float | None = None


class IngestFile(Body):
    """Conversations in any format ``pcm ingest`` reads (json, jsonl, locomo, longmemeval), detected unless named."""

    conversations: list[Any] | dict[str, Any]
    format: Literal["json", "jsonl", "locomo", "longmemeval"] | None = None


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
    role: str | None = None
    speaker: str | None = None
    session: str | None = None
    mode: Literal["hybrid", "fts", "vector"] | None = Field(default=None, description="Which legs of recall to use.")
    since: str | None = Field(default=None, description="Only messages said at or after this time (ISO 8601).")
    until: str | None = Field(default=None, description="Only messages said before this time (ISO 8601).")


class SearchQuery(Query):
    q: str = Field(min_length=1, description="The text to search for.")
    k: int = Field(default=RECALL_K.default, json_schema_extra=RECALL_K.schema(),
                   description="How many messages and entities to return (the memory checks the bounds).")


class EntityQuery(Query):
    iri: str = Field(min_length=1, description="The entity's IRI.")


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


# -- answers -----------------------------------------------------------------------------------------------------------


class Health(BaseModel):
    status: Literal["ok"]
    pid: int
    memory: str
    engine_restarts: int


class Limits(BaseModel):
    query_timeout_s: float
    update_timeout_s: float
    max_body_bytes: int
    max_result_bytes: int


class Endpoints(BaseModel):
    query: str
    update: str
    graph_store: str


class Info(BaseModel):
    memory: str
    owner: str
    owner_iri: str
    namespace: str
    prefixes: dict[str, str] = Field(description="The prefixes the SPARQL editor completes.")
    writable: bool = Field(description="Whether writes are allowed (with the token).")
    index: bool = Field(description="Whether the side index (recall, hybrid search) is on.")
    limits: Limits
    endpoints: Endpoints


class GraphCount(BaseModel):
    graphs: int
    triples: int


class ExtractionQueue(BaseModel):
    """The server's extraction worker, which extracts the facts of queued posts in the background."""

    state: Literal["starting", "idle", "extracting", "retrying", "stopped", "failed"]
    pending: int = Field(description="Posts waiting for extraction, the one in hand included.")
    done: int = Field(description="Posts extracted by this server since it started.")
    failed: int = Field(description="Posts whose extraction failed since it started (`pcm extract --failed` retries).")
    current: str | None = Field(description="The post being extracted, if any.")
    errors: list[str] = Field(description="The latest errors, oldest first.")


class MemoryStats(BaseModel):
    """What the memory holds (``pcm stats``)."""

    posts: int
    sessions: int
    extraction_status: dict[str, int] = Field(description="Posts by extraction status (pending, extracted, ...).")
    entities: int
    entities_by_class: dict[str, int]
    triples: int
    graphs: dict[str, GraphCount] = Field(description="Graphs and triples by kind of graph.")
    extraction_queue: ExtractionQueue | None = Field(
        default=None, description="The background extraction worker, when this server runs one (queued extraction)."
    )


class Figures(BaseModel):
    mean: float
    p50: float
    p95: float
    p99: float


class Timings(BaseModel):
    """The front's own time per request next to the engine's, in milliseconds, over the most recent requests."""

    requests: int
    window: int
    front_ms: Figures | None
    engine_ms: Figures | None
    engine_restarts: int


class IngestResult(BaseModel):
    """What an ingest stored. A retry (same message ids, same Idempotency-Key, same chat) stores nothing new:
    its messages are counted in ``duplicates``."""

    stored: int = Field(description="Messages stored as new posts by this request.")
    duplicates: int = Field(description="Messages already stored (a retry): nothing new was written for them.")
    conversations: int
    utterances: int = Field(description="Messages in the body.")
    posts: list[str] = Field(description="The post IRIs stored by this request.")
    mode: str = Field(description="episodic (stored only), extraction with the LLM that extracted the facts, or "
                                  "queued (the facts are extracted later, in the background).")
    extraction: dict[str, Any] = Field(
        description="The extraction run's counts when this request extracted facts from a batch; else empty."
    )
    pending: int | None = Field(default=None, description="Messages stored by this request whose facts are not "
                                                          "extracted yet.")


class EvidenceFact(BaseModel):
    subject: str
    predicate: str
    object: str = Field(description="N-Triples form of the object.")
    graph: str
    posts: list[str]
    text: str = Field(description="The triple as a reader sees it.")


class Evidence(BaseModel):
    facts: list[EvidenceFact]
    posts: list[Message]


class TraceStep(BaseModel):
    round: int
    source: str
    sparql: str | None
    outcome: str
    detail: str
    rows: int


class Answer(BaseModel):
    question: str
    answer: str
    path: str = Field(description="How it was answered: sparql, events, summary, facts, traversal, episodic, plan or none.")
    as_of: str
    note: str
    sparql: str | None
    computed: str | None
    trace: list[TraceStep]
    evidence: Evidence
    plan: dict[str, Any] | None = Field(description="How the question was read and, for a planned answer, each step.")
    pending: list[str] = Field(default_factory=list, description="The cited posts whose facts are not extracted "
                                                                 "yet (`pcm extract --pending`).")


class EntityMatch(BaseModel):
    iri: str
    label: str
    score: float | None
    how: str


class SearchResult(BaseModel):
    mode: Literal["hybrid", "text"] = Field(description="hybrid (side index) or text (substring search).")
    hits: list[RecallHit]
    entities: list[EntityMatch]
    note: str | None = Field(default=None, description="Why a hybrid search fell back to text search.")


class Term(BaseModel):
    type: Literal["uri", "bnode", "literal", "triple"]
    value: str
    curie: str | None = None
    label: str | None = None
    lang: str | None = None
    datatype: str | None = None


class Source(BaseModel):
    """A message (or imported file) a fact came from."""

    graph: str | None
    post: str | None
    text: str | None
    thread: str | None
    session: str | None
    time: str | None
    speaker: str | None
    role: str | None
    source_id: str | None
    file: str | None


class EntityFact(BaseModel):
    """A fact as an entity page shows it: in or out of the entity, with the messages it came from."""

    direction: Literal["in", "out"]
    predicate: Term
    value: Term
    sources: list[Source]


class EntityPage(BaseModel):
    iri: str
    curie: str
    label: str
    labels: list[str]
    types: list[Term]
    facts: list[EntityFact]
    related: list[Term]
    mentioned_in: list[str]
    truncated: bool


class Triple(BaseModel):
    s: Term
    p: Term
    o: Term


class ConversationPost(BaseModel):
    post: str
    position: int
    role: str | None
    speaker: str | None
    time: str | None
    text: str
    source_id: str | None
    status: str | None
    facts: list[Triple]


class ConversationPage(BaseModel):
    iri: str
    id: str | None
    title: str | None
    created: str | None
    posts: list[ConversationPost]


class ConversationSummary(BaseModel):
    iri: str
    id: str | None
    title: str | None
    posts: int
    first: str | None


class ReindexState(BaseModel):
    """A side-index rebuild: idle (never started), running, done or failed."""

    state: Literal["idle", "running", "done", "failed"]
    done: int
    total: int | None
    indexed: int | None
    errors: list[str]
    started: str | None
    finished: str | None
    seconds: float | None


class ReindexBusy(ReindexState, ErrorBody):
    """A second rebuild refused while one runs: the error, and the running job's state."""

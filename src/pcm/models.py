"""The records every face shows, defined once: a stored message, a recall hit, a fact, and their pages.

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


__all__ = ["Fact", "FactDeleted", "FactPage", "FactSource", "Forgotten", "Message", "MessagePage", "RecallHit",
           "Record", "Time"]

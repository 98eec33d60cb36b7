"""``/openapi.json``: the JSON API's OpenAPI 3.1 description, generated from the typed models the handlers use.

:data:`OPERATIONS` says, for every ``/api`` route, which model its body and query parameters are checked with and
which model each status answers with; :func:`openapi_document` turns that into the document, with every model's
JSON Schema (pydantic's, draft 2020-12, which OpenAPI 3.1 uses as is) under ``components/schemas``. Nothing in
the document is written by hand but the prose, so it cannot drift from what the handlers check and answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, RootModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from pcm.endpoint import models as m

#: Refusals any request may get before its handler runs (the front's Guard) or from a bug (500).
GUARD_ERRORS = {
    400: "Bad input: the body or a parameter is not what this operation takes (the error says which).",
    403: "The Host header is not a loopback name (DNS-rebinding protection), or the server is read-only.",
    413: "The request body is over the server's limit.",
    500: "An internal error (the server logs the details).",
}
AUTH_ERRORS = {
    401: "A valid bearer token is required for writes.",
    403: "The server is read-only (started without a token), or the Host header was refused.",
}


class RecallHits(RootModel[list[m.RecallHit]]):
    """Stored messages, best first."""


class Sources(RootModel[list[m.Source]]):
    """The stored messages (or imported files) behind it, earliest first."""


class Dump(RootModel[str]):
    """The memory's dump in the format asked for, in that format's RDF media type."""


class Conversations(RootModel[list[m.ConversationSummary]]):
    """The memory's conversations."""


class IngestBody(RootModel[m.IngestText | m.IngestChat | m.IngestFile | list[dict[str, Any]] | dict[str, Any]]):
    """One message (``text``), a chat (``messages``), conversations wrapped with their format (``conversations``),
    or a conversation file as ``pcm ingest`` reads it (json, locomo, longmemeval: detected)."""


class OpenApiDocument(RootModel[dict[str, Any]]):
    """This document."""


@dataclass(frozen=True)
class Operation:
    """One method on one path: what it takes and what it answers with, by status."""

    method: str
    summary: str
    ok: dict[int, type[BaseModel]]
    description: str = ""
    body: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    errors: dict[int, str] = field(default_factory=dict)
    write: bool = False
    #: Extra answers with another model than the error shape (e.g. 409 with the running job's state).
    other: dict[int, tuple[type[BaseModel], str]] = field(default_factory=dict)
    idempotency_key: bool = False
    jsonl: bool = False
    #: The 200 answer is JSON lines (``application/x-ndjson``) of the ``ok`` model, streamed as the work runs.
    streamed: bool = False
    #: The 200 answer is also offered as JSON lines of progress events (asked for with ``Accept``).
    streams_on_accept: bool = False
    #: The 200 answer is text in one of these media types (which one, a parameter says), not JSON.
    media_types: tuple[str, ...] = ()


_NO_INDEX = {500: "The side index is off or unusable here (the error says why)."}
_TIME_LIMIT = {503: "A query ran past the server's time limit."}

#: Every JSON API route; the front's ``api_routes`` must serve exactly these paths (a test holds them together).
OPERATIONS: dict[str, list[Operation]] = {
    "/api/health": [Operation("get", "Is the server up", {200: m.Health})],
    "/api/info": [Operation("get", "The memory, its owner, its limits and its endpoints", {200: m.Info})],
    "/api/stats": [Operation("get", "What the memory holds: posts, sessions, triples, graphs", {200: m.MemoryStats})],
    "/api/timings": [
        Operation(
            "get", "The front's own time per request next to the engine's (also a Server-Timing header)",
            {200: m.Timings},
        )
    ],
    "/api/ingest": [
        Operation(
            "post",
            "Store messages (owner's token required)",
            {200: m.IngestResult},
            description=(
                "Idempotent: a message already stored is not stored again and is counted in `duplicates`. One "
                "message (`text`) is known by its `id`, else by the `Idempotency-Key` header; without either, "
                "every request stores a new post (two messages may have the same text). A chat without a "
                "`conversation_id` is named from the key, or else from its messages, so posting the same chat "
                "twice stores it once; in a conversation (a chat with its id, a file) a message is known by its "
                "`id`, else by its position. Everything is checked before the first write: a refused body "
                "stores nothing. With `Accept: application/x-ndjson` the answer is JSON lines, as `/api/import`'s: "
                "progress events (messages stored of those the body holds), then one result event holding what the "
                "plain answer holds, or one error event with the plain answer's error line and exit code."
            ),
            body=IngestBody,
            errors={400: "Bad input (the error names the conversation and message); nothing was stored."},
            write=True,
            streams_on_accept=True,
            idempotency_key=True,
            jsonl=True,
        )
    ],
    "/api/ask": [
        Operation(
            "post", "Answer a question from memory, citing the stored messages it rests on", {200: m.Answer},
            body=m.AskBody, errors={**_NO_INDEX, **_TIME_LIMIT},
        )
    ],
    "/api/recall": [
        Operation(
            "get", "The stored messages that best match a text", {200: RecallHits}, query=m.RecallQuery,
            errors=_NO_INDEX,
        )
    ],
    "/api/search": [
        Operation(
            "get", "The explorer's search: messages and entities (hybrid, or text search without the index)",
            {200: m.SearchResult}, query=m.SearchQuery, errors=_TIME_LIMIT,
        )
    ],
    "/api/entity": [
        Operation(
            "get", "An entity: its types, its facts with the messages each came from, its neighbours",
            {200: m.EntityPage}, query=m.EntityQuery, errors=_TIME_LIMIT,
        )
    ],
    "/api/why": [
        Operation(
            "get", "Where a fact, entity or message came from: the stored messages (or imported files) behind it",
            {200: Sources}, query=m.WhyQuery,
            description="`pcm why` and the MCP tool `why` over HTTP: the same sources, field by field.",
        )
    ],
    "/api/history": [
        Operation(
            "get", "How the facts about an entity changed: past values, when and by what they were replaced",
            {200: m.FactHistory}, query=m.HistoryQuery,
            description="`pcm history` and the MCP tool `history` over HTTP: the same record, field by field.",
        )
    ],
    "/api/export": [
        Operation(
            "get", "The memory's dump: every graph (N-Quads, TriG, JSON-LD) or the current truth (Turtle)",
            {200: Dump}, query=m.ExportQuery, media_types=tuple(m.EXPORT_MEDIA_TYPES.values()),
            description="`pcm export` over HTTP: the same statements, blank nodes named canonically; the answer's "
                        "media type is the format's (`application/n-quads` for `nquads`, ...).",
        )
    ],
    "/api/conversation": [
        Operation(
            "get", "One conversation: its messages in order, with the facts each produced",
            {200: m.ConversationPage}, query=m.ConversationQuery,
            errors={400: "No iri or id given, or no such conversation.", **_TIME_LIMIT},
        )
    ],
    "/api/conversations": [Operation("get", "The memory's conversations", {200: Conversations})],
    "/api/reindex": [
        Operation("get", "The side-index rebuild's state", {200: m.ReindexState}),
        Operation(
            "post", "Start rebuilding the side index in the background (owner's token required)",
            {202: m.ReindexState}, write=True,
            errors={400: "The side index is off in this server: nothing to rebuild."},
            other={409: (m.ReindexBusy, "A rebuild is already running: follow it with GET.")},
        ),
    ],
    "/api/messages": [
        Operation("get", "A page of stored messages, oldest first, narrowed by session and time",
                  {200: m.MessagePage}, query=m.MessagesQuery,
                  errors={404: "No such session in this memory."}),
    ],
    "/api/message": [
        Operation("get", "One stored message", {200: m.Message}, query=m.MessageQuery,
                  errors={404: "No such message in this memory."}),
        Operation(
            "delete", "Forget one stored message (owner's token required)", {200: m.Forgotten},
            description="The same forget as `pcm forget --post` and MCP's `forget`: the message goes with what was "
                        "learnt from it alone; values it had replaced hold again.",
            query=m.MessageDelete, write=True, errors={404: "No such message in this memory; nothing changed."},
        ),
    ],
    "/api/forget": [
        Operation(
            "post", "Forget one message or a whole session (owner's token required)", {200: m.Forgotten},
            description="`pcm forget` over HTTP: give `post` or `session`.", body=m.ForgetBody, write=True,
            errors={404: "No such message or session in this memory; nothing changed."},
        ),
    ],
    "/api/import": [
        Operation(
            "post", "Import a file of RDF (owner's token required), its progress streamed back", {200: m.ProgressEvent},
            description="`pcm import` over HTTP: plain triples become an import graph, a pcm dump is restored. The "
                        "answer is JSON lines: progress events, then one result (what `pcm import --json` prints) "
                        "or one error (its line and exit code).",
            body=m.ImportBody, write=True, streamed=True,
        ),
    ],
    "/api/extract": [
        Operation(
            "post", "Extract the facts of stored posts with this server's model (owner's token required), its "
                    "progress streamed back", {200: m.ProgressEvent},
            description="`pcm extract` over HTTP. The answer is JSON lines: progress events (posts done of the "
                        "total), then one result (what `pcm extract --json` prints) or one error.",
            body=m.ExtractBody, write=True, streamed=True,
        ),
    ],
    "/api/facts": [
        Operation("get", "A page of facts, those said earliest first, narrowed by session and time",
                  {200: m.FactPage}, query=m.FactsQuery, errors={404: "No such session in this memory."}),
    ],
    "/api/fact": [
        Operation("get", "One fact, with every graph that states it", {200: m.Fact}, query=m.FactQuery,
                  errors={404: "No such fact in this memory."}),
        Operation(
            "delete", "Delete one fact (owner's token required)", {200: m.FactDeleted},
            description="The statement leaves every graph that states it; each removal is recorded in the history "
                        "graph, so the entity's history shows the value as over.",
            query=m.FactQuery, write=True, errors={404: "No such fact in this memory; nothing changed."},
        ),
    ],
    "/openapi.json": [Operation("get", "This description of the JSON API", {200: OpenApiDocument})],
}


def _models() -> list[tuple[type[BaseModel], JsonSchemaMode]]:
    chosen: dict[type[BaseModel], JsonSchemaMode] = {m.ErrorBody: "serialization"}
    for operations in OPERATIONS.values():
        for op in operations:
            for model in (op.body, op.query):
                if model is not None:
                    chosen[model] = "validation"
            for model in (*op.ok.values(), *(o[0] for o in op.other.values())):
                chosen.setdefault(model, "serialization")
    return list(chosen.items())


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _parameters(op: Operation, schemas: dict[str, Any]) -> list[dict[str, Any]]:
    params: list[dict[str, Any]] = []
    if op.query is not None:
        schema = schemas[op.query.__name__]
        required = set(schema.get("required", ()))
        for name, prop in schema["properties"].items():
            prop = dict(prop)
            description = prop.pop("description", None)
            prop.pop("title", None)
            options = [o for o in prop.pop("anyOf", ()) if o.get("type") != "null"]
            if options:  # an optional parameter is absent, never null
                prop = {**(options[0] if len(options) == 1 else {"anyOf": options}), **prop}
                if prop.get("default", ...) is None:
                    del prop["default"]
            param = {"name": name, "in": "query", "required": name in required, "schema": prop}
            if description:
                param["description"] = description
            params.append(param)
    if op.idempotency_key:
        params.append(
            {
                "name": "Idempotency-Key",
                "in": "header",
                "required": False,
                "schema": {"type": "string", "minLength": 1},
                "description": "The client's key for this message or chat: a retry with the same key stores "
                "nothing new (the same key for a different message is refused).",
            }
        )
    return params


def _operation(path: str, op: Operation, schemas: dict[str, Any]) -> dict[str, Any]:
    responses: dict[str, Any] = {}
    for status, model in op.ok.items():
        said = model.__doc__.strip().splitlines()[0] if model.__doc__ else "OK"
        responses[str(status)] = (
            {"description": said, "content": {"application/x-ndjson": {"schema": _ref(model)}}} if op.streamed
            else {"description": said, "content": {t: {"schema": _ref(model)} for t in op.media_types}}
            if op.media_types else _json(_ref(model), said)
        )
        if op.streams_on_accept:
            responses[str(status)]["content"]["application/x-ndjson"] = {"schema": _ref(m.ProgressEvent)}
    errors = {**GUARD_ERRORS, **(AUTH_ERRORS if op.write else {}), **op.errors}
    if op.body is not None or op.query is not None:
        errors.setdefault(400, GUARD_ERRORS[400])
    for status, (model, description) in op.other.items():
        responses[str(status)] = _json(_ref(model), description)
    for status in sorted(errors):
        responses.setdefault(str(status), _json(_ref(m.ErrorBody), errors[status]))
    responses["default"] = _json(_ref(m.ErrorBody), "Any other error (for one, 405: a method this path does not take).")
    out: dict[str, Any] = {
        "operationId": op.method + "_" + path.strip("/").replace("/", "_").replace(".", "_"),
        "summary": op.summary,
        "responses": responses,
    }
    if op.description:
        out["description"] = op.description
    params = _parameters(op, schemas)
    if params:
        out["parameters"] = params
    if op.body is not None:
        content: dict[str, Any] = {"application/json": {"schema": _ref(op.body)}}
        if op.jsonl:
            content["application/x-ndjson"] = {
                "schema": {"type": "string", "description": "JSON lines: one message object a line."}
            }
        out["requestBody"] = {"required": True, "content": content}
    if op.write:
        out["security"] = [{"bearer": []}]
    return out


def openapi_document(version: str, servers: Sequence[str] = ()) -> dict[str, Any]:
    """The OpenAPI 3.1 document of :data:`OPERATIONS`, its schemas generated from the models."""
    _, top = models_json_schema(_models(), ref_template="#/components/schemas/{model}")
    schemas: dict[str, Any] = top.get("$defs", {})
    paths = {
        path: {op.method: _operation(path, op, schemas) for op in operations} for path, operations in OPERATIONS.items()
    }
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "pcm JSON API",
            "version": version,
            "description": (
                "The JSON API of `pcm serve`: store messages, ask, recall, and explore a personal conversational "
                "memory. Every error is `{\"error\": \"...\"}` with its status. Writes need the owner's token as "
                "`Authorization: Bearer ...`. The SPARQL Protocol (/query, /update, /sparql), the Graph Store "
                "Protocol (/store) and MCP (/mcp) are served beside it and described by their own standards."
            ),
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "The owner's token."}},
        },
    }
    if servers:
        document["servers"] = [{"url": url} for url in servers]
    return document

"""pcm as an MCP server: the face an assistant uses (Model Context Protocol, with the official ``mcp`` SDK).

Tools with typed arguments and results: ``remember``, ``recall``, ``ask``, ``why``, ``history``, ``forget``,
``sparql`` (read-only), ``stats``, ``export`` (the dump as text, up to :data:`pcm.limits.MCP_EXPORT_BYTES`), and the listings of an assistant's memory API: ``list_messages``, ``get_message``,
``list_facts``, ``get_fact`` and ``delete_fact``. Resources: the ontology catalogue the answering prompts use, and the ontology's
competency questions with their SPARQL. Two transports:

- ``pcm mcp`` speaks MCP over stdio to the one client that started it (Claude Desktop, an IDE); that client is the
  owner, so every tool is allowed.
- :func:`streamable_http_app` returns the ASGI application for MCP over streamable HTTP, for a web front to mount
  at ``/mcp``. Over HTTP anyone who can reach the port may call; writes (``remember``, ``forget``,
  ``delete_fact``) need the
  owner's token as ``Authorization: Bearer ...``, like the rest of the front.

Every tool holds one lock while it uses the memory: the side index and the embedding model serve one caller at a
time, and the SDK runs synchronous tools on worker threads.
"""

from __future__ import annotations

import hmac
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from pcm import __version__
from pcm.errors import PcmError, UsageError, write_refusal
from pcm.limits import ASK_K, MCP_EXPORT_BYTES, PAGE_OFFSET, PAGE_SIZE, RECALL_K, SPARQL_ROWS
from pcm.models import (
    Answer,
    Fact,
    FactDeleted,
    FactHistory,
    FactPage,
    Forgotten,
    Message,
    MessagePage,
    RecallHit,
    Source,
)

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from pcm.memory import Memory

T = TypeVar("T")

INSTRUCTIONS = (
    "pcm is the user's personal conversational memory. Call `remember` with what the user says that is worth "
    "keeping (one message per call, with its time; pass `key` so a retry stores nothing twice). Call `ask` to answer "
    "a question from memory: the answer cites the stored messages it rests on. `recall` lists the best-matching "
    "stored messages; `why` shows where a fact or entity came from, `history` how its facts changed; `forget` removes a message or a whole session. "
    "`list_messages` / `get_message` and `list_facts` / `get_fact` page through what is stored; `delete_fact` "
    "removes a fact that is wrong."
)


# -- typed results -------------------------------------------------------------------------------------------------
# A stored message, a recall hit, a fact and their pages are the records every face shows (pcm.models).


class Remembered(BaseModel):
    """What storing one message did."""

    post: str = Field(description="The post IRI the message is stored as.")
    stored: bool = Field(description="False when a message with this key was already stored: nothing new.")
    session: str = Field(description="The id of the session the message belongs to.")


class SparqlResult(BaseModel):
    """A SELECT gives ``variables`` and ``rows`` (IRIs and literal values as text), ASK gives ``boolean``,
    CONSTRUCT / DESCRIBE give ``triples`` as N-Triples text."""

    variables: list[str] | None = Field(default=None, description="SELECT: the variables, in order.")
    rows: list[dict[str, str | None]] | None = Field(
        default=None, description="SELECT: one object a row, each variable's value as text (null: unbound).")
    boolean: bool | None = Field(default=None, description="ASK: the answer.")
    triples: str | None = Field(default=None, description="CONSTRUCT or DESCRIBE: the triples as N-Triples text.")


class Stats(BaseModel):
    """How much the memory holds."""

    posts: int = Field(description="Stored messages.")
    sessions: int = Field(description="Sessions (conversations).")
    triples: int = Field(description="Triples in every graph.")
    entities: int = Field(description="Entities the facts are about.")
    extraction_status: dict[str, int] = Field(description="Messages by extraction status (pending, extracted, ...).")
    entities_by_class: dict[str, int] = Field(description="Entities by class IRI.")


# -- the server ----------------------------------------------------------------------------------------------------


def build_server(memory: Memory, *, token: str = "", lock: threading.RLock | None = None) -> MCPServer:
    """The MCP server for one open memory.

    ``token`` is what HTTP callers must present for writes (empty: no writes over HTTP). ``lock`` is shared with
    whatever else uses ``memory`` in this process (the web front's memory lock), so calls do not interleave.
    """
    guard = lock or threading.RLock()
    server = MCPServer(
        name="pcm",
        title="pcm: personal conversational memory",
        instructions=INSTRUCTIONS,
        version=__version__,
        log_level="WARNING",  # the SDK configures the root logger when none is set; INFO would narrate every call
    )

    def run(action: Callable[[], T]) -> T:
        """Our errors (bad input, no such post, refused query) and the machine's refusals (a full disk) go back to
        the assistant as the one line every face gives them (:attr:`pcm.errors.PcmError.line`)."""
        try:
            with guard:
                return action()
        except PcmError as exc:
            raise ToolError(exc.line) from exc
        except (OSError, MemoryError) as exc:
            from pcm.oserrors import resource_error

            refused = resource_error(exc)
            if refused is None:
                raise
            raise ToolError(refused.line) from exc

    def owner_only(ctx: Context, what: str) -> None:
        refused = _write_refusal(ctx.headers, token, what)
        if refused:
            raise ToolError(refused)

    read = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                             open_world_hint=False))
    def remember(
        text: Annotated[str, Field(description="What was said.")],
        ctx: Context,
        time: str | None = Field(None, description="When it was said (ISO 8601; without a zone, the memory's); "
                                                   "default now."),
        speaker: str | None = Field(None, description="Who said it, when the role does not say enough."),
        session: str | None = Field(None, description="The session it continues; default: one per day."),
        role: str = Field("user", description="user, assistant, system or other (the memory checks it)."),
        key: str | None = Field(None, description="Your id for this message: the same key again stores nothing "
                                                  "new."),
    ) -> Remembered:
        """Store one message in the memory.

        `time` is when it was said (ISO 8601; default now). `session` groups messages into a conversation
        (default: one per day). `key` is your id for this message: sending the same key again stores nothing new
        (stored=false), so a retry is safe.
        """
        owner_only(ctx, "remember")
        report = run(lambda: memory.remember(text, at=time, speaker=speaker, session=session, role=role, key=key))
        return Remembered.model_validate(report.as_json())

    @server.tool(annotations=read)
    def recall(
        query: Annotated[str, Field(description="The text to recall messages for.")],
        k: int = Field(RECALL_K.default, json_schema_extra=RECALL_K.schema(),
                       description="How many messages to return (the memory checks the bounds)."),
        session: str | None = Field(None, description="Only messages of this session (its id, or its thread IRI)."),
        speaker: str | None = Field(None, description="Only messages said by this speaker."),
        role: str | None = Field(None, description="Only messages of this role: user, assistant, system or other."),
        since: str | None = Field(None, description="Only messages said at or after this time (ISO 8601; without "
                                                    "a zone, the memory's)."),
        until: str | None = Field(None, description="Only messages said before this time (ISO 8601; without a "
                                                    "zone, the memory's)."),
    ) -> list[RecallHit]:
        """The stored messages that best match `query` (hybrid vector and full-text search), best first.

        Optional filters: `session`, `speaker`, `role`, and `since` / `until` (ISO 8601 times; without a zone,
        the memory's)."""

        def hits() -> list[RecallHit]:
            return memory.recall(query, k, session=session, speaker=speaker, role=role, since=since, until=until)

        return run(hits)

    @server.tool(annotations=read)
    def ask(
        question: Annotated[str, Field(description="The question, in words.")],
        k: int = Field(ASK_K.default, json_schema_extra=ASK_K.schema(),
                       description="How many stored messages to consider (the memory checks the bounds)."),
        as_of: str | None = Field(None, description="The question's date (ISO 8601; without a zone, the memory's), "
                                                    "for 'last month' and 'how long ago'; default now."),
    ) -> Answer:
        """Answer a question from memory, citing the stored messages the answer rests on.

        `as_of` is the question's date (ISO 8601; without a zone, the memory's) for relative times such as "last
        month"; default now."""

        return run(lambda: memory.ask(question, k=k, as_of=as_of))

    @server.tool(annotations=read)
    def why(
        iri: Annotated[str, Field(description="A full IRI, m:slug for an individual of this memory, or a CURIE.")],
    ) -> list[Source]:
        """Where a fact, entity or message came from: the stored messages (or imported files) behind it.

        `iri` is a full IRI, `m:slug` for an individual of this memory, or a CURIE such as `schema:Person`."""
        return run(lambda: memory.why(iri))

    @server.tool(annotations=read)
    def history(
        iri: Annotated[str, Field(description="The entity: a full IRI, m:slug for an individual of this memory, or "
                                              "a CURIE.")],
    ) -> FactHistory:
        """How the facts about an entity changed: every property that ever changed, its past values (when said,
        when and by which message replaced) and the values that hold now."""
        return run(lambda: memory.history(iri))

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True,
                                             open_world_hint=False))
    def forget(
        ctx: Context,
        post: str | None = Field(None, description="The message: its post IRI, or your message id."),
        session: str | None = Field(None, description="A whole session: its id, or its thread IRI."),
        purge: bool = Field(True, description="Also rewrite the memory's files so the text leaves the disk."),
    ) -> Forgotten:
        """Forget one message (`post`: its IRI or message id) or a whole `session`, with everything learnt from it
        alone. Facts another message also supports stay. With `purge` (the default) the memory's files are then
        rewritten so the text leaves the disk, as `pcm forget` does."""
        owner_only(ctx, "forget")
        return run(lambda: memory.delete_messages(post=post, session=session, purge=purge))

    page_size = Field(PAGE_SIZE.default, json_schema_extra=PAGE_SIZE.schema(),
                      description="How many to return (the memory checks the bounds).")
    page_offset = Field(PAGE_OFFSET.default, json_schema_extra=PAGE_OFFSET.schema(),
                        description="How many to skip: the `next_offset` of the page before.")
    in_session = Field(None, description="Only those of this session (its id, or its thread IRI).")
    said_since = Field(None, description="Only those said at or after this time (ISO 8601; without a zone, the "
                                         "memory's).")
    said_until = Field(None, description="Only those said before this time (ISO 8601; without a zone, the memory's).")

    @server.tool(annotations=read)
    def list_messages(
        session: str | None = in_session, since: str | None = said_since, until: str | None = said_until,
        limit: int = page_size, offset: int = page_offset,
    ) -> MessagePage:
        """A page of the stored messages, oldest first, narrowed by session and time; `next_offset` is where the
        next page starts (null: this is the last)."""
        return run(lambda: memory.messages(session=session, since=since, until=until, limit=limit, offset=offset))

    @server.tool(annotations=read)
    def get_message(
        post: str = Field(description="The message: its post IRI, or your message id (the `key` of `remember`)."),
    ) -> Message:
        """One stored message. `forget` deletes one."""
        return run(lambda: memory.message(post))

    @server.tool(annotations=read)
    def list_facts(
        session: str | None = in_session, since: str | None = said_since, until: str | None = said_until,
        limit: int = page_size, offset: int = page_offset,
    ) -> FactPage:
        """A page of the facts the memory holds (statements learnt from messages or imported), those said earliest
        first, narrowed by the session and time of the messages they came from."""
        return run(lambda: memory.facts(session=session, since=since, until=until, limit=limit, offset=offset))

    @server.tool(annotations=read)
    def get_fact(id: str = Field(description="The fact's id, as `list_facts` gives it.")) -> Fact:  # noqa: A002
        """One fact, with every message (or imported file) that states it."""
        return run(lambda: memory.fact(id))

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False,
                                             open_world_hint=False))
    def delete_fact(ctx: Context, id: str = Field(description="The fact's id, as `list_facts` gives it.")) -> FactDeleted:  # noqa: A002
        """Delete one fact that is wrong. It leaves every graph that states it, and the removal is recorded in the
        memory's history (the messages stay: `forget` removes a message)."""
        owner_only(ctx, "delete_fact")
        return run(lambda: memory.delete_fact(id))

    @server.tool(annotations=read)
    def sparql(
        query: Annotated[str, Field(description="A read-only SPARQL 1.1 query (common prefixes predeclared).")],
        limit: int = Field(SPARQL_ROWS.default, json_schema_extra=SPARQL_ROWS.schema(),
                           description="At most this many rows (the memory checks the bounds)."),
    ) -> SparqlResult:
        """Run a read-only SPARQL 1.1 query over the memory (the union of its graphs), bounded in time and rows.

        Prefixes such as sioc:, schema:, pcm:, prov:, dcterms: and m: are predeclared. Updates are refused."""
        return run(lambda: _sparql_result(memory.sparql(query, limit=limit)))

    @server.tool(annotations=read)
    def stats() -> Stats:
        """How much the memory holds: messages, sessions, triples, entities by class, extraction status."""
        data = run(lambda: memory.stats().as_json())
        return Stats.model_validate({name: data[name] for name in Stats.model_fields})

    @server.tool(annotations=read)
    def export(
        format: Literal["nquads", "trig", "turtle", "jsonld"] = Field(  # noqa: A002
            "nquads", description="nquads, trig or jsonld (every graph), or turtle (the current-truth union)."),
    ) -> str:
        """The memory's dump as text, as `pcm export` writes it (blank nodes named canonically). A dump over
        the tool's size limit is refused: `pcm export` or the HTTP API's `/api/export` give it whole."""

        def dump() -> str:
            data = memory.export(format)
            if len(data) > MCP_EXPORT_BYTES:
                raise UsageError(f"the {format} dump is {len(data)} bytes, over the {MCP_EXPORT_BYTES} an MCP answer "
                                 "may hold: use `pcm export` or GET /api/export")
            return data.decode("utf-8")

        return run(dump)

    @server.resource("pcm://ontology/catalogue", name="ontology-catalogue", mime_type="text/markdown",
                     description="Every class and property of the PCM ontology, by area, as the answering prompts "
                                 "list them: write SPARQL for the `sparql` tool with these terms.")
    def catalogue() -> str:
        return memory.ontology.catalogue()

    @server.resource("pcm://ontology/competency-questions", name="competency-questions",
                     mime_type="application/json",
                     description="The questions the ontology is built to answer, each with its SPARQL query.")
    def competency_questions() -> list[dict[str, str]]:
        return memory.competency_questions()

    return server


def streamable_http_app(
    memory: Memory, token: str = "", *, lock: threading.RLock | None = None, path: str = "/mcp",
    allowed_hosts: list[str] | None = None,
) -> Starlette:
    """The ASGI application for MCP over streamable HTTP, answering at ``path``.

    The application's lifespan runs the SDK's session manager: a front that includes it must run that lifespan
    in its own (``async with mcp_app.router.lifespan_context(mcp_app): ...``) and route ``path`` to it (e.g. a
    final ``Mount("/", app=mcp_app)``). The SDK refuses Host and Origin headers other than loopback names (DNS
    rebinding) unless ``allowed_hosts`` lists others (``"example.org:*"``).
    """
    from mcp.server.transport_security import TransportSecuritySettings

    security = None
    if allowed_hosts:
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*", *allowed_hosts],
            allowed_origins=[f"{scheme}://{host}" for host in ["127.0.0.1:*", "localhost:*", "[::1]:*", *allowed_hosts]
                             for scheme in ("http", "https")],
        )
    server = build_server(memory, token=token, lock=lock)
    return server.streamable_http_app(streamable_http_path=path, transport_security=security)


def run_stdio(memory: Memory) -> None:
    """Serve ``memory`` over stdio until the client closes the pipe."""
    build_server(memory).run("stdio")


def run_stdio_through(url: str, headers: Mapping[str, str]) -> None:
    """Serve MCP on stdio by passing every request to the MCP endpoint of the running ``pcm serve`` at ``url``
    (``.../mcp``), with ``headers`` (the owner's token): the server holds the memory and is its only writer, so
    ``pcm mcp`` started beside it answers through it, tool for tool, error line for error line, instead of
    failing on the store lock. Without the token, the server refuses writes with its one line."""
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server
    from mcp.types import (
        CallToolRequestParams,
        CallToolResult,
        ListResourcesResult,
        ListToolsResult,
        PaginatedRequestParams,
        ReadResourceRequestParams,
        ReadResourceResult,
    )

    async def serve() -> None:
        http = httpx2.AsyncClient(headers=dict(headers), timeout=httpx2.Timeout(600.0))
        async with http, Client(streamable_http_client(url, http_client=http), read_timeout_seconds=600) as upstream:

            async def list_tools(_ctx: Any, _params: PaginatedRequestParams | None) -> ListToolsResult:
                return await upstream.list_tools()

            async def call_tool(_ctx: Any, params: CallToolRequestParams) -> CallToolResult:
                return await upstream.call_tool(params.name, params.arguments or {})

            async def list_resources(_ctx: Any, _params: PaginatedRequestParams | None) -> ListResourcesResult:
                return await upstream.list_resources()

            async def read_resource(_ctx: Any, params: ReadResourceRequestParams) -> ReadResourceResult:
                return await upstream.read_resource(params.uri)

            server: Server[Any] = Server(
                "pcm", title="pcm: personal conversational memory", version=__version__, instructions=INSTRUCTIONS,
                on_list_tools=list_tools, on_call_tool=call_tool, on_list_resources=list_resources,
                on_read_resource=read_resource,
            )
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)


# -- helpers -------------------------------------------------------------------------------------------------------


def _write_refusal(headers: Mapping[str, str] | None, token: str, what: str) -> str | None:
    """Why an HTTP caller may not write, or None. Over stdio (no headers) the caller is the owner who started us."""
    if headers is None:
        return None
    if not token:
        return write_refusal(takes_writes=False).line
    scheme, _, given = (headers.get("authorization") or "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
        return write_refusal(takes_writes=True).line
    return None


def _sparql_result(result: Any) -> SparqlResult:
    import pyoxigraph as ox

    from pcm.memory import Solutions
    from pcm.rdfio import serialize

    def text(term: Any) -> str | None:
        return None if term is None else str(term) if isinstance(term, ox.Triple) else str(term.value)

    if isinstance(result, bool):
        return SparqlResult(boolean=result)
    if isinstance(result, Solutions):
        return SparqlResult(
            variables=list(result.variables),
            rows=[{v: text(t) for v, t in zip(result.variables, row, strict=True)} for row in result.rows],
        )

    quads = [ox.Quad(t.subject, t.predicate, t.object) for t in result]
    return SparqlResult(triples=serialize(quads, "ntriples").decode("utf-8"))


__all__ = ["build_server", "run_stdio", "run_stdio_through", "streamable_http_app"]

"""The ``pcm`` command line. Each command is a thin shell over :class:`pcm.memory.Memory`.

Exit codes scripts can trust, one meaning each across commands (the table in docs/DESIGN.md §8): 0 ok, 1 generic
failure, 2 usage, 3 bad input, 4 memory locked (a write while `pcm serve` holds the memory, without its token,
included), 5 version or model mismatch (a write to a memory whose ontology differs from this pcm's included: run
`pcm ontology migrate`), 6 no memory, 7 validation failed, 8 query refused or failed, 9 LLM error, 10 the machine
refused (disk or quota full, permissions, read-only file system, out of memory).
Human output goes through :func:`pcm.terminal.echo`, which escapes control characters in stored text.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, ParamSpec, TypeVar

import click

from pcm.errors import MemoryLockedError, PcmError, UsageError
from pcm.limits import RECALL_K
from pcm.terminal import LineProgress, echo

if TYPE_CHECKING:
    from pcm.endpoint.client import ServeClient
    from pcm.memory import PurgeReport
    from pcm.serve_link import Link
    from pcm.settings import Settings

F = TypeVar("F", bound=Callable[..., Any])
P = ParamSpec("P")
R = TypeVar("R")


def _fail(message: str, code: int) -> NoReturn:
    echo(f"pcm: error: {message}", err=True)
    sys.exit(code)


def handle_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Every error becomes one line on stderr and an exit code from :mod:`pcm.errors`."""

    @wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            _check_arguments(kwargs)
            return func(*args, **kwargs)
        except PcmError as exc:
            report = getattr(exc, "report", "")
            if report:
                echo(report, err=True, newlines=True)
            _fail(exc.line, exc.exit_code)
        except (OSError, MemoryError, RuntimeError) as exc:  # a full disk, a quota, permissions, memory: one line
            from pcm.oserrors import resource_error

            refused = resource_error(exc)
            if refused is None:
                raise  # any other failure is a bug, and keeps its traceback
            _fail(str(refused), refused.exit_code)
        except KeyboardInterrupt:
            _fail("interrupted", 130)

    return wrapper


#: Arguments a command hands to :class:`pcm.memory.Memory` as they are, which checks them itself: their refusal is
#: the facade's line, the same over HTTP, MCP and Python.
CHECKED_BY_MEMORY = {("ask", "question"), ("recall", "text"), ("ingest", "text"), ("sparql", "query"),
                     ("why", "iri"), ("history", "iri")}


def _check_arguments(values: dict[str, Any]) -> None:
    """Refuse an argument with a byte that is not UTF-8 (Python hands it over as a lone surrogate, which no store,
    query or terminal takes) as one line naming the option, before the command does anything."""
    from pcm.conversations import check_text

    context = click.get_current_context(silent=True)
    labels = {p.name: (p.opts[0] if isinstance(p, click.Option) else p.human_readable_name)
              for p in (context.command.params if context is not None else [])}
    command = context.command.name if context is not None else None
    for name, value in values.items():
        if (command, name) in CHECKED_BY_MEMORY:
            continue
        for text in value if isinstance(value, tuple) else (value,):
            if isinstance(text, str):
                check_text(text, "the value", labels.get(name, name))


def memory_option(func: F) -> F:
    return click.option(
        "--memory",
        "memory_path",
        type=click.Path(path_type=Path, file_okay=False),
        default=None,
        help="Memory directory (default: $PCM_MEMORY or the user data dir).",
    )(func)


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")(func)


def settings_for(ctx: click.Context, memory_path: Path | None, **overrides: object) -> Settings:
    from pcm.settings import LLMSpec, Settings

    root = ctx.find_root().obj or {}
    llm = overrides.pop("llm", None) or root.get("llm")
    return Settings.from_env(
        None,  # the process environment
        memory=memory_path or root.get("memory"),
        llm=LLMSpec.parse(llm) if isinstance(llm, str) else None,
        **overrides,
    )


@contextmanager
def opened(ctx: click.Context, memory_path: Path | None, *, read_only: bool = False, **overrides: object) -> Iterator[Any]:
    from pcm.memory import Memory

    memory = Memory.open(settings_for(ctx, memory_path, **overrides), read_only=read_only)
    if memory.ontology_drift is not None:  # reads work on a memory waiting for `pcm ontology migrate`; say so once
        echo(f"pcm: note: {memory.ontology_drift.note(memory.settings.memory)}", err=True)
    try:
        yield memory
    finally:
        memory.close()
    if memory.index_lag is not None:  # a read-only open found the index behind the store: say so, once
        click.echo(f"pcm: warning: {memory.index_lag.message()}", err=True)


def emit_json(data: object) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=2, default=_json_default))


def _json_default(value: object) -> object:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def progress_bar(total: int | None, desc: str) -> Any:
    """A tqdm bar on a terminal's stderr, otherwise a line every half minute (:class:`LineProgress`: a reindex of a
    lifetime memory runs for half an hour with its output in a log); ``Any`` because tqdm's ``update`` (returning
    bool) is passed where progress callbacks are typed to return None."""
    if not sys.stderr.isatty():
        return LineProgress(total, desc)
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="utt", file=sys.stderr, dynamic_ncols=True)


def follow(bar: Any, offset: int | None = None) -> Callable[[dict[str, Any]], None]:
    """A progress event of `pcm serve` (``done`` so far, ``total`` once known) shown on ``bar``; with ``offset``
    (what earlier requests on the same bar did) the bar's total is the caller's, and ``done`` counts from there."""

    def show(state: dict[str, Any]) -> None:
        if offset is None and state.get("total") is not None and bar.total != state["total"]:
            bar.total = state["total"]
            bar.refresh()
        bar.update(max(0, (offset or 0) + int(state.get("done") or 0) - bar.n))

    return show


#: Commands that live beside the code they drive: name -> "module:attribute", imported only when used, so
#: `pcm --help` stays fast and those modules may import the helpers above without a cycle.
LAZY_COMMANDS: dict[str, str] = {
    "ontology": "pcm.cli_ontology:ontology",
    "serve": "pcm.cli_serve:serve",
    "ask": "pcm.cli_ask:ask",
    "eval": "pcm.cli_eval:eval_command",
    "extract": "pcm.cli_extract:extract",
    "history": "pcm.cli_extract:history",
    "duplicates": "pcm.cli_extract:duplicates",
    "retrieve": "pcm.cli_retrieve:retrieve",
    "summary": "pcm.cli_summary:summary",
    "mcp": "pcm.cli_mcp:mcp",
    "store": "pcm.cli_store:store",
}


def running_server(ctx: click.Context, memory_path: Path | None, *, write: bool = False) -> ServeClient | None:
    """A ServeClient when `pcm serve` holds this memory (commands then go through it), else None.

    ``write``: the command will write, so without the server's token it is refused now (MemoryLockedError, exit 4,
    as when any other write finds the memory held). A write goes through the server even when the memory lives on a
    SPARQL server of its own: the running `pcm serve` is the single writer (its side index follows every write)."""
    from pcm.serve_file import discover

    settings = settings_for(ctx, memory_path)
    if on_server(settings) and not write:
        return None
    info = discover(settings.memory)
    if info is None:
        return None
    if write:
        from pcm.memory import refuse_write_without_token

        refuse_write_without_token(settings, info)
    from pcm.endpoint.client import ServeClient

    return ServeClient(info, token=settings.token)


def refuse_if_served(ctx: click.Context, memory_path: Path | None, instead: str) -> None:
    """A write the JSON API does not take is refused while `pcm serve` holds the memory, in one line naming the
    server (MemoryLockedError, exit 4): the server is the memory's single writer, and a write beside it would
    change the store and the side index under it. ``instead`` says what to do."""
    from pcm.serve_link import SERVE_FILE

    settings = settings_for(ctx, memory_path)
    if not (settings.memory / SERVE_FILE).exists():
        return  # no server has announced itself: spare the command the probe
    from pcm.serve_file import discover

    info = discover(settings.memory)
    if info is not None:
        raise MemoryLockedError(f"pcm serve at {info.url} holds this memory and is its only writer: {instead}")


def warm_server(ctx: click.Context, memory_path: Path | None) -> Link | None:
    """A :class:`pcm.serve_link.Link` to the `pcm serve` holding this memory, for the reads that must start fast
    (ask, recall), else None."""
    from pcm.serve_link import find

    settings = settings_for(ctx, memory_path)
    return None if on_server(settings) else find(settings.memory, token=settings.token)


def on_server(settings: Settings) -> bool:
    """Whether the memory lives on a SPARQL server (given, or recorded in its memory.toml): commands then reach
    that server themselves, never a `pcm serve` over it."""
    from pcm.manifest import MANIFEST, Manifest

    if settings.store_url:
        return True
    return (settings.memory / MANIFEST).is_file() and bool(Manifest.load(settings.memory).store_url)


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *LAZY_COMMANDS])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in LAZY_COMMANDS:
            import importlib

            module, _, attr = LAZY_COMMANDS[cmd_name].partition(":")
            return getattr(importlib.import_module(module), attr)
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.option("--memory", "memory_path", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Memory directory (default: $PCM_MEMORY or the user data dir).")
@click.option("--llm", default=None, help="LLM: none | anthropic:MODEL | openai:BASE_URL#MODEL (default: $PCM_LLM).")
@click.version_option(package_name="pcm")
@click.pass_context
def main(ctx: click.Context, memory_path: Path | None, llm: str | None) -> None:
    """pcm: a personal conversational memory on RDF.

    \b
    Example:
      pcm --memory ~/mem init --owner "Dana"
      pcm --memory ~/mem ingest chats.json
      pcm --memory ~/mem ask "What car do I drive?"
      pcm --memory ~/mem why m:dana-s-car
    """
    ctx.obj = {"memory": memory_path, "llm": llm}


@main.command()
@memory_option
@click.option("--owner", default="me", show_default=True, help="Name of the person this memory belongs to.")
@click.option("--namespace", default=None, help="IRI namespace for this memory's individuals.")
@click.option("--share-store", is_flag=True, help="Create it even on a remote store that holds another memory (each reads only its own graphs).")
@click.option("--zone", default="UTC", show_default=True,
              help="The zone times given without one are read in (an IANA name such as Europe/Paris).")
@json_option
@click.pass_context
@handle_errors
def init(
    ctx: click.Context, memory_path: Path | None, owner: str, namespace: str | None, share_store: bool, zone: str,
    as_json: bool,
) -> None:
    """Create a new, empty memory.

    \b
    Example:
      pcm init --memory ~/mem --owner "Dana Whitfield"
    """
    from pcm.memory import Memory

    settings = settings_for(ctx, memory_path)
    with Memory.init(settings, owner=owner, namespace=namespace, share_store=share_store, zone=zone) as memory:
        info = {"memory": str(settings.memory), "owner": owner, "namespace": memory.manifest.namespace,
                "ontology_version": memory.manifest.ontology_version, "zone": memory.manifest.zone}
    if as_json:
        emit_json(info)
    else:
        echo(f"created memory {info['memory']} for {owner} (namespace {info['namespace']}; times without a zone are "
             f"read in {info['zone']})")


@main.command()
@memory_option
@click.argument("files", nargs=-1, type=click.Path(path_type=Path, dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["json", "jsonl", "locomo", "longmemeval"]), default=None,
              help="Input format (detected when omitted).")
@click.option("--text", default=None, help="Ingest one utterance given on the command line.")
@click.option("--session", default=None, help="Session id for --text (default: one session per day).")
@click.option("--role", default="user", show_default=True, help="Role for --text: user, assistant, system, other.")
@click.option("--speaker", default=None, help="Speaker name for --text.")
@click.option("--at", "at", default=None, help="When --text was said (ISO 8601; default: now).")
@click.option("--key", default=None,
              help="Your id for --text (a message id or idempotency key): the same key again stores nothing new.")
@click.option("--init", "create", is_flag=True, help="Create the memory first if it does not exist.")
@click.option("--extraction", type=click.Choice(["auto", "inline", "queued"]), default=None,
              help="Extract facts before returning (inline) or leave them to `pcm extract --pending` or `pcm serve` "
                   "(queued); auto: queued for a model on this machine [env PCM_EXTRACTION; default auto; a running "
                   "`pcm serve` uses its own].")
@json_option
@click.pass_context
@handle_errors
def ingest(ctx: click.Context, memory_path: Path | None, files: tuple[Path, ...], fmt: str | None, text: str | None,
           session: str | None, role: str, speaker: str | None, at: str | None, key: str | None, create: bool,
           extraction: str | None, as_json: bool) -> None:
    """Store conversations (every user and assistant turn) in the memory.

    Re-ingesting the same conversation adds nothing. Without an LLM (PCM_LLM=none) pcm runs in episodic mode:
    utterances are stored, indexed and searchable, and extraction waits until a model is configured. With a model
    on this machine (minutes per utterance) extraction is queued by default: ingest returns once the utterances are
    stored and indexed, and `pcm extract --pending` (or a running `pcm serve`) extracts their facts.

    \b
    Examples:
      pcm ingest chats.json
      pcm ingest locomo10.json --format locomo
      pcm ingest --text "I bought a blue Trek bike for 600 dollars" --at 2025-03-02T10:00
    """
    from pcm.conversations import check_conversations, parse_file
    from pcm.memory import Memory

    if bool(files) == (text is not None):
        raise UsageError("give FILES to ingest or --text, not both and not neither")
    if key is not None and text is None:
        raise UsageError("--key names the message of --text: give --text too")
    conversations = [c for path in files for c in parse_file(path, fmt)]
    settings = settings_for(ctx, memory_path, extraction_mode=extraction)
    # all files together, before any is sent to a running server (which sees one file per request)
    check_conversations(conversations, max_chars=settings.max_utterance_chars)
    server = None if create else running_server(ctx, memory_path, write=True)
    if server is not None:
        # the server stores, extracts (when inline) and indexes; how far it got is streamed back to the bar
        total = 1 if text is not None else sum(len(c.utterances) for c in conversations)
        with server, progress_bar(total, "ingest") as bar:
            if text is not None:  # the server's Memory.remember reads it, as it would here
                result = server.ingest_text(text, session=session, role=role, speaker=speaker, at=at, key=key,
                                            on_progress=follow(bar))
            else:
                # one request a file, each counting from where the files before it ended
                results = [server.ingest_file(path, fmt, on_progress=follow(bar, bar.n)) for path in files]
                counts = ("conversations", "utterances", "added", "skipped", "pending")
                result = {k: sum(int(r.get(k) or 0) for r in results) for k in counts}
                result["mode"] = results[-1].get("mode", "") if results else ""
        if as_json:
            emit_json(result)
        else:
            echo(f"ingested {result.get('added', 0)} new utterance(s) through pcm serve at {server.info.url}")
            if result.get("mode") == "queued":
                echo("their facts are extracted in the background by pcm serve (GET /api/stats shows the queue)")
        return
    if create and not (settings.memory / "memory.toml").exists():
        Memory.init(settings).close()
    with Memory.open(settings) as memory:
        if text is not None:
            remembered = memory.remember(text, at=at, speaker=speaker, session=session, role=role, key=key)
            if as_json:
                emit_json({**(remembered.report.as_json() if remembered.report else {}), **remembered.as_json()})
            else:
                echo(f"ingested {int(remembered.stored)} new utterance(s) from 1 conversation(s) "
                     f"({int(not remembered.stored)} already stored); mode: {remembered.mode or 'episodic'}")
                if at is not None and remembered.zoned:
                    echo(f"--at {at} has no zone: read in the memory's zone, {memory.manifest.zone}")
            return
        total = sum(len(c.utterances) for c in conversations)
        with progress_bar(total, "ingest") as bar:
            report = memory.ingest(conversations, progress=bar.update)
        # said before the close, whose flush a full disk can refuse after every post was stored
        if as_json:
            emit_json(report.as_json())
        else:
            echo(
                f"ingested {report.added} new utterance(s) from {report.conversations} conversation(s)"
                f" ({report.skipped} already stored); mode: {report.mode}"
            )
            note = report.zone_note()
            if note:
                echo(note)
            if not settings.llm.enabled:
                echo("no LLM configured (PCM_LLM=none): facts are not extracted yet; recall and ask use the utterances")
            elif report.mode == "queued" and report.pending:
                echo(f"{report.pending} utterance(s) wait for extraction: run `pcm extract --pending`, or leave "
                     "`pcm serve` running to extract them in the background")


@main.command(name="import")
@memory_option
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["turtle", "trig", "nquads", "ntriples", "jsonld"]), default=None)
@json_option
@click.pass_context
@handle_errors
def import_(ctx: click.Context, memory_path: Path | None, file: Path, fmt: str | None, as_json: bool) -> None:
    """Import RDF: triples are validated against the shapes and kept with the file as their source.

    A pcm dump (TriG / N-Quads from `pcm export`) is restored graph by graph.

    \b
    Example:
      pcm import facts.ttl
      pcm import backup.trig
    """
    server = running_server(ctx, memory_path, write=True)
    if server is not None:  # the server is the memory's single writer: it imports, and says how far it got
        with server, progress_bar(None, "import") as bar:
            done = server.import_file(file, fmt, on_progress=follow(bar))
        where = f" through pcm serve at {server.info.url}"
    else:
        with opened(ctx, memory_path) as memory, progress_bar(None, "import") as bar:
            done = memory.import_rdf(file, fmt, progress=bar.update).as_json()
        where = ""
    if as_json:
        emit_json(done)
    else:
        echo(f"imported {done['quads']} quad(s) from {done['file']} ({done['mode']}) into {len(done['graphs'])} "
             f"graph(s){where}")


@main.command()
@memory_option
@click.option("--format", "fmt", type=click.Choice(["trig", "nquads", "turtle", "jsonld"]), default="trig", show_default=True)
@click.option("--output", "-o", type=click.Path(path_type=Path, dir_okay=False), default=None, help="File to write (default: stdout).")
@click.pass_context
@handle_errors
def export(ctx: click.Context, memory_path: Path | None, fmt: str, output: Path | None) -> None:
    """Export the memory: the whole dataset (TriG, N-Quads, JSON-LD) or the facts as Turtle.

    \b
    Example:
      pcm export --format trig -o backup.trig
    """
    with opened(ctx, memory_path, read_only=True) as memory:
        data = memory.export(fmt)
    if output:
        output.write_bytes(data)
    else:
        sys.stdout.buffer.write(data)


@main.command()
@memory_option
@click.argument("query", required=False)
@click.option("--file", "query_file", type=click.Path(path_type=Path, dir_okay=False), default=None, help="Read the query from a file.")
@click.option("--output", "out_format", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True)
@json_option
@click.option("--limit", type=int, default=None, help="Maximum rows (default: PCM_QUERY_LIMIT, 1000).")
@click.pass_context
@handle_errors
def sparql(ctx: click.Context, memory_path: Path | None, query: str | None, query_file: Path | None,
           out_format: str, as_json: bool, limit: int | None) -> None:
    """Run a read-only SPARQL query over the memory (the default graph is the union of all graphs).

    \b
    Example:
      pcm sparql 'SELECT ?p ?text WHERE { ?p a sioc:Post ; sioc:content ?text } LIMIT 5'
    """
    from pcm.memory import Solutions

    if bool(query) == bool(query_file):
        raise UsageError("give a QUERY or --file")
    from pcm.conversations import read_text

    text = read_text(query_file) if query_file else query or ""
    with opened(ctx, memory_path, read_only=True) as memory:
        result = memory.sparql(text, limit=limit)
    fmt = "json" if as_json else out_format
    if isinstance(result, bool):
        emit_json({"boolean": result}) if fmt == "json" else echo("yes" if result else "no")
    elif isinstance(result, Solutions):
        rows = [{v: (t.value if t is not None else None) for v, t in zip(result.variables, r, strict=True)} for r in result.rows]
        if fmt == "json":
            emit_json({"variables": list(result.variables), "rows": rows})
        elif fmt == "csv":
            buf = io.StringIO()
            writer = csv.DictWriter(buf, fieldnames=list(result.variables))
            writer.writeheader()
            writer.writerows(rows)
            click.echo(buf.getvalue(), nl=False)
        else:
            echo(_table(list(result.variables), rows), newlines=True)
    else:
        import pyoxigraph as ox

        from pcm.rdfio import serialize

        data = serialize([ox.Quad(t.subject, t.predicate, t.object) for t in result], "ntriples")
        if fmt == "json":
            emit_json({"triples": [[str(t.subject), str(t.predicate), str(t.object)] for t in result]})
        else:
            sys.stdout.buffer.write(data)


def _table(columns: list[str], rows: list[dict[str, str | None]]) -> str:
    if not rows:
        return "(no results)"
    widths = {c: min(60, max(len(c), *(len(str(r.get(c) or "")) for r in rows))) for c in columns}

    def cell(c: str, v: object) -> str:
        s = "" if v is None else str(v).replace("\n", " ")
        return (s if len(s) <= widths[c] else s[: widths[c] - 1] + "…").ljust(widths[c])

    lines = [" | ".join(cell(c, c) for c in columns), "-+-".join("-" * widths[c] for c in columns)]
    lines += [" | ".join(cell(c, r.get(c)) for c in columns) for r in rows]
    lines.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(lines)


@main.command()
@memory_option
@json_option
@click.pass_context
@handle_errors
def stats(ctx: click.Context, memory_path: Path | None, as_json: bool) -> None:
    """Posts, sessions, entities by class, triples and graphs.

    \b
    Example:
      pcm stats --json
    """
    with opened(ctx, memory_path, read_only=True) as memory:
        s = memory.stats()
        drift = memory.ontology_drift
        curie = memory.curie
    if as_json:
        emit_json({**s.as_json(), "ontology_drift": drift.as_json() if drift else None})
        return
    echo(f"posts: {s.posts}   sessions: {s.sessions}   triples: {s.triples}")
    if s.status:
        echo("extraction: " + ", ".join(f"{k} {v}" for k, v in sorted(s.status.items())))
    echo("graphs: " + ", ".join(f"{k} {v['graphs']} ({v['triples']} triples)" for k, v in s.graphs.items()))
    if s.entities_by_class:
        echo("entities by class:")
        for cls, n in s.entities_by_class[:30]:
            echo(f"  {curie(cls):40} {n}")


@main.command()
@memory_option
@click.argument("iri")
@json_option
@click.pass_context
@handle_errors
def why(ctx: click.Context, memory_path: Path | None, iri: str, as_json: bool) -> None:
    """Show each utterance a fact or an entity came from, with session and time.

    IRI may be a full IRI, a CURIE (schema:..., pcm:...) or m:SLUG for one of this memory's individuals.

    \b
    Example:
      pcm why m:biscuit
    """
    with opened(ctx, memory_path, read_only=True) as memory:
        sources = memory.why(iri)
    if as_json:
        emit_json([s.as_json() for s in sources])
        return
    if not sources:
        echo("no source found: nothing in this memory mentions it")
        sys.exit(1)
    for s in sources:
        if s.text is not None:
            who = s.speaker or s.role or "?"
            echo(f"[{s.session} {s.source_id or ''} {s.time.isoformat() if s.time else ''}] {who}: {s.text}")
        elif s.file:
            echo(f"[imported from {s.file}] graph {s.graph}")
        else:
            echo(f"[graph {s.graph}]")


def _page_options(func: F) -> F:
    from pcm.limits import PAGE_OFFSET, PAGE_SIZE

    for option in reversed([
        click.option("--session", default=None, help="Only those of this session (its id or thread IRI)."),
        click.option("--since", default=None, help="Only those said at or after this time (ISO 8601)."),
        click.option("--until", default=None, help="Only those said before this time (ISO 8601)."),
        click.option("--limit", default=PAGE_SIZE.default, show_default=True,
                     help=f"How many ({PAGE_SIZE.low} to {PAGE_SIZE.high})."),
        click.option("--offset", default=PAGE_OFFSET.default, show_default=True,
                     help="How many to skip: the next_offset of the page before."),
    ]):
        func = option(func)
    return func


@main.command()
@memory_option
@_page_options
@json_option
@click.pass_context
@handle_errors
def messages(ctx: click.Context, memory_path: Path | None, session: str | None, since: str | None,
             until: str | None, limit: int, offset: int, as_json: bool) -> None:
    """List stored messages, oldest first, a page at a time (the same records as the HTTP API and MCP give).

    \b
    Example:
      pcm messages --session dana-2025-03-02 --json
      pcm messages --since 2025-03-01 --until 2025-04-01 --limit 20 --offset 20
    """
    with opened(ctx, memory_path, read_only=True) as memory:
        page = memory.messages(session=session, since=since, until=until, limit=limit, offset=offset)
    if as_json:
        emit_json(page.as_json())
        return
    for m in page.messages:
        when = m.time.isoformat(sep=" ") if m.time else "?"
        echo(f"[{m.session} {m.source_id or ''} {when}] {m.speaker or m.role}: {m.text}")
    more = f"; next: --offset {page.next_offset}" if page.next_offset is not None else ""
    echo(f"{len(page.messages)} of {page.total} message(s) from offset {page.offset}{more}")


@main.command()
@memory_option
@click.argument("post")
@json_option
@click.pass_context
@handle_errors
def message(ctx: click.Context, memory_path: Path | None, post: str, as_json: bool) -> None:
    """Show one stored message, by its post IRI or message id (`pcm forget --post` deletes it).

    \b
    Example:
      pcm message D1:3 --json
    """
    with opened(ctx, memory_path, read_only=True) as memory:
        found = memory.message(post)
    if as_json:
        emit_json(found.as_json())
        return
    echo(f"{found.post}\n[{found.session} {found.source_id or ''} {found.time or '?'}] "
         f"{found.speaker or found.role}: {found.text}")


@main.command()
@memory_option
@_page_options
@json_option
@click.pass_context
@handle_errors
def facts(ctx: click.Context, memory_path: Path | None, session: str | None, since: str | None,
          until: str | None, limit: int, offset: int, as_json: bool) -> None:
    """List the facts the memory holds, those said earliest first, a page at a time; session and time narrow the
    messages they came from. Each has an id for `pcm fact`.

    \b
    Example:
      pcm facts --session dana-2025-03-02 --json
    """
    with opened(ctx, memory_path, read_only=True) as memory:
        page = memory.facts(session=session, since=since, until=until, limit=limit, offset=offset)
    if as_json:
        emit_json(page.as_json())
        return
    for f in page.facts:
        echo(f"{f.text}\n  id {f.id}")
    more = f"; next: --offset {page.next_offset}" if page.next_offset is not None else ""
    echo(f"{len(page.facts)} of {page.total} fact(s) from offset {page.offset}{more}")


@main.command()
@memory_option
@click.argument("fact_id", metavar="ID")
@click.option("--delete", is_flag=True, help="Delete the fact (recorded in the history graph).")
@json_option
@click.pass_context
@handle_errors
def fact(ctx: click.Context, memory_path: Path | None, fact_id: str, delete: bool, as_json: bool) -> None:
    """Show one fact (its ID as `pcm facts` lists it) with the messages it came from; --delete deletes it.

    \b
    Example:
      pcm fact PGh0dHBz... --json
      pcm fact PGh0dHBz... --delete
    """
    server = running_server(ctx, memory_path, write=True) if delete else None
    if server is not None:
        with server:
            done: dict[str, Any] = server.delete_fact(fact_id)
    elif delete:
        with opened(ctx, memory_path) as memory:
            done = memory.delete_fact(fact_id).as_json()
    else:
        with opened(ctx, memory_path, read_only=True) as memory:
            shown = memory.fact(fact_id).as_json()
        if as_json:
            emit_json(shown)
        else:
            echo(shown["text"])
            for source in shown["sources"]:
                echo(f"  from {source['post'] or source['graph']} [{source['session'] or ''} {source['time'] or ''}]")
        return
    if as_json:
        emit_json(done)
    else:
        echo(f"deleted: {done['fact']['text']} (recorded in the history at {done['recorded']})")


@main.command()
@memory_option
@click.option("--post", default=None, help="Post IRI or the source's message id.")
@click.option("--session", default=None, help="Session id (as in the source) or thread IRI.")
@click.option("--purge/--no-purge", default=True, show_default=True,
              help="Also rewrite the files so the forgotten text leaves the disk (see `pcm purge`).")
@json_option
@click.pass_context
@handle_errors
def forget(ctx: click.Context, memory_path: Path | None, post: str | None, session: str | None, purge: bool,
           as_json: bool) -> None:
    """Forget an utterance or a whole session, with the facts extracted from it.

    Facts that another utterance also supports stay; values the utterance had replaced hold again; session
    summaries built from it are dropped in the same atomic update and rebuilt without it. Then the files are
    rewritten (--no-purge skips that). While `pcm serve` holds the memory the server forgets (with PCM_TOKEN), and
    leaves the files to a `pcm purge` once it is stopped, with a note.

    \b
    Example:
      pcm forget --post D1:3
      pcm forget --session dana-2025-03-02 --json
    """
    server = running_server(ctx, memory_path, write=True)
    if server is not None:  # the server forgets: its store, its side index and its summaries stay one
        with server:
            done = server.forget(post=post, session=session, purge=purge)
        if done.get("note"):
            echo(f"pcm: note: {done['note']}", err=True)
        if as_json:
            emit_json({"forgotten": done["posts"], "purged": done["purged"], "note": done.get("note"),
                       "quads_kept": None})
        else:
            echo(f"forgot {len(done['posts'])} post(s) through pcm serve at {server.info.url}")
        return
    failed: PcmError | None = None
    note = None
    report = None
    with opened(ctx, memory_path) as memory:
        posts = memory.forget(post=post, session=session)
        try:
            report = memory.purge() if purge else None
        except MemoryLockedError as error:  # a served memory: its server holds the files
            note = f"files not purged: {error}"
            echo(f"pcm: note: {note}", err=True)
        except (PcmError, OSError) as error:  # the forget itself holds: say so, and that the files still hold it
            from pcm.oserrors import resource_error

            failed = error if isinstance(error, PcmError) else resource_error(error) or PcmError(str(error))
            note = f"forgotten, but the purge failed ({failed}); the files still hold the text until `pcm purge` succeeds"
    if report is not None:
        _warn_unreadable_backups(report.backups_unreadable)
    if as_json:
        emit_json({"forgotten": posts, "purged": report is not None, "note": note,
                   **(report.as_json() if report is not None else {"quads_kept": None})})
    else:
        purged = f"; {_purge_summary(report)}" if report is not None else ""
        echo(f"forgot {len(posts)} post(s){purged}")
    if failed is not None:
        _fail(note or str(failed), failed.exit_code)


def _purge_summary(report: PurgeReport) -> str:
    removed = f", {len(report.backups_removed)} migration backup(s) holding it deleted" if report.backups_removed else ""
    if report.quads is None:
        return f"deleted from the memory's graphs on the server (its files are the engine's, not rewritten){removed}"
    return f"files rewritten ({report.quads} quads kept){removed}"


def _warn_unreadable_backups(names: list[str]) -> None:
    if names:
        echo(f"pcm: warning: could not read backup(s) {', '.join(names)} to check them for forgotten posts; "
                   "delete them by hand if they may hold any", err=True)


@main.command()
@memory_option
@json_option
@click.pass_context
@handle_errors
def purge(ctx: click.Context, memory_path: Path | None, as_json: bool) -> None:
    """Rewrite the memory's files so forgotten text leaves the disk.

    Forgetting removes data from every answer at once, but the store keeps old values in its files until they
    are rewritten, the side index keeps older table versions, the caches keep replies and embedded triples, and a
    migration backup keeps the store as it was. This rewrites the store (about 17 s per million quads here), drops
    old index versions, empties the caches, deletes the migration backups that hold a forgotten post and rewrites
    the others.
    It needs the memory to itself: stop a running `pcm serve` first.
    On an external store (PCM_STORE_URL) the server's files are its engine's: the forgotten data is already gone
    from the memory's graphs, everything else above is done, and the output says what is not guaranteed.

    \b
    Example:
      pcm purge --json
    """
    refuse_if_served(ctx, memory_path, "stop `pcm serve`, then run `pcm purge`")
    with opened(ctx, memory_path) as memory:
        if not as_json:
            echo("rewriting the store...", err=True)
        report = memory.purge()
    _warn_unreadable_backups(report.backups_unreadable)
    if as_json:
        emit_json({"purged": True, **report.as_json()})
    else:
        echo(f"purged: {_purge_summary(report)}; old index versions and caches dropped")
        for line in report.not_guaranteed:
            echo(f"not guaranteed: {line}")


@main.command()
@memory_option
@click.argument("text", required=False)
@click.option("--k", default=RECALL_K.default, show_default=True,
              help=f"How many posts ({RECALL_K.low} to {RECALL_K.high}).")
@click.option("--queries", "queries_file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Answer many: one question per line, or JSONL with a 'question' field; prints JSONL.")
@click.option("--role", default=None)
@click.option("--speaker", default=None)
@click.option("--session", default=None)
@click.option("--since", default=None, help="Only posts said at or after this time.")
@click.option("--until", default=None, help="Only posts said before this time.")
@click.option("--mode", type=click.Choice(["hybrid", "vector", "fts"]), default="hybrid", show_default=True)
@json_option
@click.pass_context
@handle_errors
def recall(ctx: click.Context, memory_path: Path | None, text: str | None, k: int, queries_file: Path | None,
           role: str | None, speaker: str | None, session: str | None, since: str | None, until: str | None,
           mode: str, as_json: bool) -> None:
    """Find the stored utterances that best match TEXT (hybrid vector + full-text search).

    \b
    Example:
      pcm recall "where did we go on holiday" --k 5 --json
    """
    if bool(text) == bool(queries_file):
        raise UsageError("give TEXT or --queries FILE")
    # the times as given: the memory reads them (in its zone when they have none), here or in a running server
    filters: dict[str, Any] = {"role": role, "speaker": speaker, "session": session, "mode": mode,
                               "since": since, "until": until}
    server = warm_server(ctx, memory_path)
    if server is not None:
        if queries_file:
            for question in _read_questions(queries_file):
                click.echo(json.dumps(server.recall(question, k, **filters), ensure_ascii=False))
            return
        found = server.recall(text or "", k, **filters)
        if as_json:
            emit_json(found)
        else:
            for h in found:
                echo(f"{h['score']:.3f}  [{h['session']} {h.get('source_id') or ''} {h.get('time') or '?'}] "
                           f"{h.get('speaker') or h.get('role')}: {h['text']}")
        return
    with opened(ctx, memory_path, read_only=True) as memory:
        if queries_file:
            for question in _read_questions(queries_file):
                hits = memory.recall(question, k, **filters)
                click.echo(json.dumps([h.as_json() for h in hits], ensure_ascii=False))
            return
        hits = memory.recall(text or "", k, **filters)
    if as_json:
        emit_json([h.as_json() for h in hits])
        return
    for h in hits:
        when = h.time.isoformat(sep=" ") if h.time else "?"
        echo(f"{h.score:.3f}  [{h.session} {h.source_id or ''} {when}] {h.speaker or h.role}: {h.text}")


def _read_questions(path: Path) -> Iterator[str]:
    from pcm.conversations import read_text
    from pcm.errors import InputError

    for n, line in enumerate(read_text(path).splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        if line.startswith("{"):
            try:
                yield str(json.loads(line)["question"])
            except (json.JSONDecodeError, KeyError, TypeError, RecursionError) as exc:
                raise InputError(f"{path.name}:{n}: expected a JSON object with a 'question' field") from exc
        else:
            yield line


@main.command()
@memory_option
@json_option
@click.pass_context
@handle_errors
def reindex(ctx: click.Context, memory_path: Path | None, as_json: bool) -> None:
    """Rebuild the side index (utterances and entities) from the store.

    When `pcm serve` holds the memory, the server rebuilds its own index (it needs the token) and this command
    follows its progress.

    \b
    Example:
      pcm reindex
    """
    server = running_server(ctx, memory_path, write=True)
    if server is not None:
        with server, progress_bar(None, "reindex") as bar:
            n = int(server.reindex(follow(bar)).get("indexed") or 0)
        where = f" through pcm serve at {server.info.url}"
    else:
        with opened(ctx, memory_path) as memory, progress_bar(memory.post_count(), "reindex") as bar:
            n = memory.reindex(progress=bar.update)
        where = ""
    if as_json:
        emit_json({"indexed": n})
    else:
        echo(f"reindexed {n} row(s){where}")


@main.command()
@memory_option
@click.option("--question", default="What is the name of my dog?", show_default=True)
@click.pass_context
@handle_errors
def demo(ctx: click.Context, memory_path: Path | None, question: str) -> None:
    """Create a memory, ingest the bundled sample conversations, show what was stored, answer a question.

    \b
    Example:
      pcm --memory /tmp/demo demo --question "Where did I travel in June?"
    """
    from pcm.conversations import parse_file, sample_paths
    from pcm.memory import Memory

    settings = settings_for(ctx, memory_path)
    if not (settings.memory / "memory.toml").exists():
        Memory.init(settings, owner="Dana Whitfield").close()
    conversations = [c for path in sample_paths() for c in parse_file(path)]
    echo(f"memory: {settings.memory}")
    echo(f"LLM: {settings.llm}" + ("" if settings.llm.enabled else " -> episodic mode (utterances stored and searchable; no fact extraction)"))
    with Memory.open(settings) as memory:
        with progress_bar(sum(len(c.utterances) for c in conversations), "ingest") as bar:
            report = memory.ingest(conversations, progress=bar.update)
        echo(f"ingested {report.added} utterance(s) from {report.conversations} sample conversation(s) ({report.skipped} already stored)")
        s = memory.stats()
        echo(f"stored: {s.posts} posts in {s.sessions} sessions, {s.triples} triples in {sum(g['graphs'] for g in s.graphs.values())} graphs")
        answer = memory.ask(question, k=3)
    echo()
    echo(f"Q: {question}")
    echo(f"A: {answer.answer}")
    echo(f"   (path: {answer.path}{'; ' + answer.note if answer.note else ''})")
    for p in answer.citations[:3]:
        when = p.time.isoformat() if p.time else None
        echo(f"   source: post {p.post} (message {p.source_id}, session {p.session}, {when}): {p.text}")


if __name__ == "__main__":
    main()

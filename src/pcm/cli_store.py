"""``pcm store``: the store a memory lives in. ``check URL`` tries a SPARQL server before a memory goes there;
``move TARGET`` moves a memory, every graph of it, to another store (a server, or its own embedded store)."""

from __future__ import annotations

from pathlib import Path

import click

from pcm.cli import emit_json, handle_errors, json_option, memory_option, progress_bar, settings_for
from pcm.terminal import echo

_ENGINES = ("auto", "oxigraph", "virtuoso", "generic")


@click.group()
def store() -> None:
    """The store a memory lives in: check a SPARQL server, move a memory between stores.

    \b
    Examples:
      pcm store check http://127.0.0.1:8890
      pcm --memory ~/mem store move http://127.0.0.1:7878
      pcm --memory ~/mem store move embedded
    """


@store.command()
@click.argument("url")
@click.option("--engine", type=click.Choice(_ENGINES), default=None,
              help="The engine profile to try (default: $PCM_STORE_ENGINE, else detected from the server).")
@json_option
@click.pass_context
@handle_errors
def check(ctx: click.Context, url: str, engine: str | None, as_json: bool) -> None:
    """Tell what works on the SPARQL server at URL, one line per check, before a memory is made on it or moved there.

    Credentials come from PCM_STORE_USER and PCM_STORE_PASSWORD, or PCM_STORE_TOKEN. It writes one scratch graph
    (to find out whether the account may write) and drops it again. Exit 0 when no check failed; otherwise the
    first failure's code (1: unreachable or permission denied, 8: a query refused or answered wrongly).

    \b
    Example:
      PCM_STORE_USER=dba PCM_STORE_PASSWORD=dba pcm store check http://127.0.0.1:8890
    """
    from pcm.store_check import check_store

    settings = settings_for(ctx, None)
    report = check_store(url, settings, engine=engine or settings.store_engine)
    if as_json:
        emit_json(report.as_json())
    else:
        width = max((len(c.name) for c in report.checks), default=0)
        for c in report.checks:
            echo(f"{c.status:<4}  {c.name:<{width}}  {c.detail}")
    if report.exit_code:
        ctx.exit(report.exit_code)


@store.command()
@memory_option
@click.argument("target")
@click.option("--engine", type=click.Choice(_ENGINES), default="auto", show_default=True,
              help="The target server's engine profile (auto: detected from the server).")
@click.option("--keep-source", is_flag=True,
              help="Leave the memory's graphs where they were (an embedded store is renamed oxigraph.moved).")
@json_option
@click.pass_context
@handle_errors
def move(ctx: click.Context, memory_path: Path | None, target: str, engine: str, keep_source: bool,
         as_json: bool) -> None:
    """Move the memory to another store: TARGET is a SPARQL server's URL, or `embedded` (its own store).

    Every post, fact, provenance record and history entry moves as it is (its export is the same before and after);
    the copy is checked against the source before memory.toml points at it, and the memory stays where it was if
    anything fails. Then the source's graphs are dropped (unless --keep-source) and the side index is reconciled
    with the new store. Stop `pcm serve` and any other writer first. Credentials: PCM_STORE_USER and
    PCM_STORE_PASSWORD (or PCM_STORE_TOKEN), for whichever server asks; `pcm store check URL` first says whether the
    target will do.

    \b
    Examples:
      pcm --memory ~/mem store move http://127.0.0.1:7878
      PCM_STORE_USER=dba PCM_STORE_PASSWORD=dba pcm --memory ~/mem store move http://127.0.0.1:8890
      pcm --memory ~/mem store move embedded
    """
    from pcm.memory import Memory

    settings = settings_for(ctx, memory_path)
    with progress_bar(None, "index") as bar:
        report = Memory.move_store(settings, target, engine=engine, keep_source=keep_source, progress=bar.update)
    if as_json:
        emit_json(report.as_json())
        return
    kept = "; the source keeps its copy (pcm no longer reads it)" if report.source_kept else ""
    echo(f"moved memory {settings.memory}: {report.quads} quad(s) in {report.graphs} graph(s) from {report.source} to "
         f"{report.target} ({report.engine}){kept}; side index: {report.index_added} added, "
         f"{report.index_removed} removed")


__all__ = ["store"]

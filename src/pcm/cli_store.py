"""``pcm store``: the store a memory lives in. ``check URL`` tries a SPARQL server before a memory goes there;
``move TARGET`` moves a memory, every graph of it, to another store (a server, or its own embedded store)."""

from __future__ import annotations

import click

from pcm.cli import emit_json, handle_errors, json_option, settings_for
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


__all__ = ["store"]

"""``pcm summary``: a session's summary, how it was made, and the posts it covers (see :mod:`pcm.summaries`)."""

from __future__ import annotations

from pathlib import Path

import click

from pcm.cli import emit_json, handle_errors, json_option, memory_option, opened
from pcm.errors import InputError, UsageError
from pcm.terminal import echo


@click.command()
@memory_option
@click.argument("session", required=False)
@click.option("--all", "list_all", is_flag=True, help="List every session that has a summary.")
@click.option("--refresh", is_flag=True,
              help="Summarise again from the first turn (with the configured LLM, else extractively).")
@json_option
@click.pass_context
@handle_errors
def summary(ctx: click.Context, memory_path: Path | None, session: str | None, list_all: bool, refresh: bool,
            as_json: bool) -> None:
    """Print the summary of SESSION (its id as in the source, or the thread IRI / m: CURIE): the text, the method,
    how many posts it covers and the time span they cover.

    \b
    Examples:
      pcm summary conv-26:session_1
      pcm summary conv-26:session_1 --refresh --json
      pcm summary --all
    """
    if bool(session) == list_all:
        raise UsageError("give a SESSION or --all")
    with opened(ctx, memory_path, read_only=not refresh) as memory:
        if list_all:
            rows = memory.summaries(refresh=refresh)
            if as_json:
                emit_json([r.as_json() for r in rows])
                return
            if not rows:
                echo("no session has a summary yet")
            for r in rows:
                first_line = r.text.splitlines()[0] if r.text else ""
                echo(f"{r.session_id or r.session}  [{r.method}, {r.covered} posts]  {first_line[:100]}")
            return
        thread = memory.find_session(session or "")
        if thread is None:
            raise InputError(f"no session {session!r} in this memory")
        found = memory.summary(thread, refresh=refresh)
        if found is None:
            raise InputError(f"session {session!r} has no summary yet; run `pcm summary {session} --refresh`")
        if as_json:
            emit_json(found.as_json())
            return
        stored, posts, first, last = found.stored, found.session_posts, found.covered_first, found.covered_last
        echo(stored.text, newlines=True)
        echo(f"-- {stored.method}"
                   + (f" ({stored.prompt_version})" if stored.prompt_version else "")
                   + f", covers {len(stored.covered)} of {posts} posts"
                   + (f", {first} to {last}" if first else ""), err=True)


__all__ = ["summary"]

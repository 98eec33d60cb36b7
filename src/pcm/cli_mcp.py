"""``pcm mcp``: serve the memory to an assistant over MCP on stdio (see :mod:`pcm.mcp_server`)."""

from __future__ import annotations

from pathlib import Path

import click

from pcm.cli import handle_errors, memory_option, opened, settings_for


@click.command()
@memory_option
@click.option("--read-only", is_flag=True, help="Open the memory read-only: remember and forget are refused.")
@click.pass_context
@handle_errors
def mcp(ctx: click.Context, memory_path: Path | None, read_only: bool) -> None:
    """Serve the memory over MCP (Model Context Protocol) on stdin/stdout, for an assistant to start.

    Tools: remember, recall, ask, why, forget, sparql (read-only), stats, list_messages, get_message, list_facts,
    get_fact, delete_fact. Resources: the ontology catalogue and the competency questions. The client that starts
    this command is the owner: every tool is allowed. (Over HTTP, MCP is served by the web front at /mcp, where
    remember, forget and delete_fact need the owner's token.) While `pcm serve` holds the memory, this command
    answers through the server's /mcp, writes with PCM_TOKEN.

    \b
    Claude Desktop (claude_desktop_config.json):
      {"mcpServers": {"pcm": {"command": "pcm", "args": ["--memory", "/home/me/pcm-memory", "mcp"]}}}
    """
    from pcm.mcp_server import run_stdio, run_stdio_through

    served = _running_server(ctx, memory_path)
    if served is not None:  # the server holds the memory and is its only writer: answer through its /mcp
        url, headers = served
        run_stdio_through(url, headers)
        return
    with opened(ctx, memory_path, read_only=read_only) as memory:
        run_stdio(memory)


def _running_server(ctx: click.Context, memory_path: Path | None) -> tuple[str, dict[str, str]] | None:
    """The MCP endpoint of the `pcm serve` holding this memory and the headers to reach it with (PCM_TOKEN, else
    the server's read token), or None."""
    from pcm.serve_link import SERVE_FILE

    settings = settings_for(ctx, memory_path)
    if not (settings.memory / SERVE_FILE).exists():
        return None
    from pcm.serve_file import discover

    info = discover(settings.memory)
    return None if info is None else (info.url + "/mcp", info.auth(settings.token))


__all__ = ["mcp"]

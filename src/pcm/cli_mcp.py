"""``pcm mcp``: serve the memory to an assistant over MCP on stdio (see :mod:`pcm.mcp_server`)."""

from __future__ import annotations

from pathlib import Path

import click

from pcm.cli import handle_errors, memory_option, opened


@click.command()
@memory_option
@click.option("--read-only", is_flag=True, help="Open the memory read-only: remember and forget are refused.")
@click.pass_context
@handle_errors
def mcp(ctx: click.Context, memory_path: Path | None, read_only: bool) -> None:
    """Serve the memory over MCP (Model Context Protocol) on stdin/stdout, for an assistant to start.

    Tools: remember, recall, ask, why, forget, sparql (read-only), stats. Resources: the ontology catalogue and
    the competency questions. The client that starts this command is the owner: every tool is allowed. (Over
    HTTP, MCP is served by the web front at /mcp, where remember and forget need the owner's token.)

    \b
    Claude Desktop (claude_desktop_config.json):
      {"mcpServers": {"pcm": {"command": "pcm", "args": ["--memory", "/home/me/pcm-memory", "mcp"]}}}
    """
    from pcm.mcp_server import run_stdio

    with opened(ctx, memory_path, read_only=read_only) as memory:
        run_stdio(memory)


__all__ = ["mcp"]

"""``pcm serve``: the click command (registered in :mod:`pcm.cli` by the lead)."""

from __future__ import annotations

import logging
import signal
import sys
from pathlib import Path
from types import FrameType

import click

from pcm.cli import emit_json, handle_errors, json_option, memory_option, settings_for
from pcm.endpoint.config import DEFAULT_BIND, MB, ServeConfig
from pcm.terminal import echo


def _log_to_stderr() -> None:
    """The server's own messages (the extraction worker's progress, one line per post) on stderr."""
    logger = logging.getLogger("pcm.endpoint")
    if logger.handlers:  # a second server in one process (tests) logs through the first one's handler
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("pcm serve: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


def _stop_on_sigterm() -> None:
    """SIGTERM ends the server like Ctrl-C does, so the engine is stopped and serve.json removed."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


@click.command()
@memory_option
@click.option("--bind", default=DEFAULT_BIND, show_default=True, help="HOST:PORT to listen on (port 0: any free).")
@click.option("--token", default=None, help="Bearer token required for writes (default: $PCM_TOKEN). Without one the server is read-only.")
@click.option("--read-token", default=None, help="Token required for reads beyond loopback (default: $PCM_READ_TOKEN; the write token also reads).")
@click.option("--public-read", is_flag=True, default=None, help="Beyond loopback, answer reads without a token (default: $PCM_PUBLIC_READ).")
@click.option("--cors", default=None, metavar="ORIGIN", help="Allow browser pages from ORIGIN (or *) to call the server. Off by default.")
@click.option("--query-timeout", type=float, default=None, help="Hard time limit per query in seconds (default: $PCM_QUERY_TIMEOUT, 10).")
@click.option("--update-timeout", type=float, default=60.0, show_default=True, help="Time limit per update or graph store write.")
@click.option("--max-body-mb", type=float, default=16.0, show_default=True, help="Largest request body accepted.")
@click.option("--max-result-mb", type=float, default=32.0, show_default=True, help="Largest query result returned.")
@click.option("--max-connections", type=int, default=None, help="Connections and requests at once before 503 (default: $PCM_SERVE_MAX_CONNECTIONS, 64).")
@click.option("--idle-timeout", type=int, default=None, help="Seconds an idle keep-alive connection stays open (default: $PCM_SERVE_IDLE_TIMEOUT, 60).")
@click.option("--head-timeout", type=float, default=None, help="Seconds a request head may take (default: $PCM_SERVE_HEAD_TIMEOUT, 10).")
@click.option("--body-timeout", type=float, default=None, help="Seconds a request body may stall (default: $PCM_SERVE_BODY_TIMEOUT, 30).")
@click.option("--max-head-bytes", type=int, default=None, help="Largest request head (default: $PCM_SERVE_MAX_HEAD_BYTES, 65536).")
@click.option("--bodies-in-flight-mb", type=int, default=None, help="Request bodies received at once before 503 (default: $PCM_SERVE_BODIES_IN_FLIGHT_MB, 64).")
@click.option("--verbose", "-v", is_flag=True, help="Log every request on stderr.")
@json_option
@click.pass_context
@handle_errors
def serve(ctx: click.Context, memory_path: Path | None, bind: str, token: str | None, read_token: str | None,
          public_read: bool | None, cors: str | None, query_timeout: float | None, update_timeout: float,
          max_body_mb: float, max_result_mb: float, max_connections: int | None, idle_timeout: int | None,
          head_timeout: float | None, body_timeout: float | None, max_head_bytes: int | None,
          bodies_in_flight_mb: int | None, verbose: bool, as_json: bool) -> None:
    """Serve the memory: SPARQL endpoint, JSON API for assistants, and the explorer in the browser.

    One process owns the memory while it runs; other pcm commands go through it. It listens on loopback only
    unless told otherwise, is read-only without a token, and stops any query at the time limit. Beyond loopback
    every request needs the read token (or the write token) unless --public-read opens reads on purpose; a
    browser asks for it (any user name, the token as the password).
    Over an external store (PCM_STORE_URL) it serves the JSON API, the explorer and MCP the same way, answers
    /query through the memory, and leaves updates and graph store writes to the store's own endpoints.
    When ingest queues extraction (PCM_EXTRACTION=queued, or auto with a model on this machine), the server
    extracts the waiting utterances' facts in the background, one at a time, and /api/stats shows the queue.

    \b
    Routes:
      /                      the explorer (SPARQL editor, entities, conversations, search, graph view)
      /query  /update        SPARQL 1.1 Protocol (updates need the token); /sparql takes both
      /store                 Graph Store Protocol (writes need the token)
      /api/ingest /api/ask /api/recall   JSON API for assistants, described at /openapi.json
      /api/reindex           POST (token) rebuilds the side index in the background; GET follows it
      /api/stats             what the memory holds (posts, sessions, triples, graphs), and the extraction queue
      /api/timings           the front's own time per request next to the engine's (also a Server-Timing header)

    \b
    Example:
      PCM_TOKEN=$(openssl rand -hex 16) pcm serve --memory ~/mem
      curl -H "Authorization: Bearer $PCM_TOKEN" -d '{"text": "I adopted a cat"}' localhost:7878/api/ingest
    """
    from pcm.endpoint.server import PcmServer

    settings = settings_for(
        ctx, memory_path, token=token, read_token=read_token, public_read=public_read, query_timeout=query_timeout,
        serve_max_connections=max_connections, serve_idle_timeout=idle_timeout, serve_head_timeout=head_timeout,
        serve_body_timeout=body_timeout, serve_max_head_bytes=max_head_bytes,
        serve_bodies_in_flight_mb=bodies_in_flight_mb,
    )
    config = ServeConfig(
        bind=bind,
        token=settings.token,
        read_token=settings.read_token,
        public_read=settings.public_read,
        cors=cors or "",
        query_timeout=settings.query_timeout,
        update_timeout=update_timeout,
        max_body=int(max_body_mb * MB),
        max_result=int(max_result_mb * MB),
        max_connections=settings.serve_max_connections,
        idle_timeout=settings.serve_idle_timeout,
        head_timeout=settings.serve_head_timeout,
        body_timeout=settings.serve_body_timeout,
        max_head=settings.serve_max_head_bytes,
        max_bodies_in_flight=settings.serve_bodies_in_flight_mb * MB,
    )
    server = PcmServer(settings, config, verbose=verbose)
    _stop_on_sigterm()
    _log_to_stderr()
    try:
        server.start()
        _announce(server.url, settings.memory, config, as_json, store=server.settings.store_url)
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()


def _announce(url: str, memory: Path, config: ServeConfig, as_json: bool, *, store: str = "") -> None:
    if as_json:
        emit_json({"url": url, "memory": str(memory), "writable": config.writable,
                   "reads_need_token": config.reads_need_token, "query": url + "/query",
                   "update": "" if store else url + "/update", "store": "" if store else url + "/store",
                   "explorer": url + "/", "external_store": store or None})
    else:
        mode = "writes need the token" if config.writable else "read-only (no token configured)"
        echo(f"pcm serve: memory {memory} at {url}/ ({mode})")
        if store:
            echo(f"  SPARQL reads {url}/query  API {url}/api/  store: the SPARQL server at {store} (updates go there)")
        else:
            echo(f"  SPARQL {url}/query  update {url}/update  graph store {url}/store  API {url}/api/")
    if not config.loopback and config.public_read:
        echo(f"pcm serve: warning: listening on {config.host}, not loopback, with --public-read: anyone who can "
             "reach this machine can read the memory", err=True)
    elif not config.loopback:
        echo(f"pcm serve: listening on {config.host}, not loopback: every request needs the read token", err=True)
    sys.stdout.flush()

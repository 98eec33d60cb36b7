"""``pcm serve``: SPARQL 1.1 Protocol and Graph Store endpoint, JSON API and memory explorer (docs/DESIGN.md §8).

The process that serves a memory owns it: Oxigraph's server runs as a child on loopback over the memory's store,
and pcm's front (:mod:`pcm.endpoint.app`) adds what a personal memory needs in front of it: the owner's token for
writes, hard limits on time, body and result size, no federation, the JSON API for assistants, and the explorer.
CLI commands find a running server with :func:`discover` and go through it instead of failing on the store lock.
"""

from pcm.endpoint.config import ServeConfig
from pcm.serve_file import SERVE_FILE, ServerInfo, discover

__all__ = ["SERVE_FILE", "PcmServer", "ServeConfig", "ServerInfo", "discover"]


def __getattr__(name: str) -> object:
    """``PcmServer`` is imported on first use: discovery must stay cheap for every CLI command."""
    if name == "PcmServer":
        from pcm.endpoint.server import PcmServer

        return PcmServer
    raise AttributeError(name)

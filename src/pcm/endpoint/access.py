"""Who may read through ``pcm serve``: on loopback anyone on this machine; beyond it, a holder of a token.

A server that listens beyond loopback (``--bind 0.0.0.0:7878``) would otherwise give every utterance to whoever
reaches the address (``GET /store`` dumps the whole memory). There every request but a CORS preflight shows the
read token or the write token (which allows reads too) before its body is read, on every path: SPARQL, the Graph
Store, the JSON API, MCP at ``/mcp`` and the explorer. ``--public-read`` opens reads on purpose.

How a request shows it: ``Authorization: Bearer <token>`` (API clients, MCP, pcm's own CLI), or HTTP Basic with the
token as the password and any user name. Basic is what a browser asks for by itself when the 401 names it, and then
sends with every request of the page, the explorer's own ``fetch`` calls included, so the explorer works beyond
loopback without a line of its code knowing about tokens. Writes still take only the bearer write token
(:meth:`pcm.endpoint.app.App._check_token`): a browser sends cached Basic credentials with requests another site's
page makes, so they must never be enough to write.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Mapping

from pcm.endpoint.config import ServeConfig

#: The 401's challenge: Basic first, so a browser asks for the token (any user name, the token as the password).
CHALLENGE = 'Basic realm="pcm", Bearer realm="pcm"'


def presented_token(authorization: str) -> str:
    """The token an ``Authorization`` header carries: a bearer token, or a Basic password; "" when none."""
    scheme, _, value = authorization.strip().partition(" ")
    scheme, value = scheme.lower(), value.strip()
    if scheme == "bearer":
        return value
    if scheme == "basic":
        try:
            return base64.b64decode(value, validate=True).decode("utf-8").partition(":")[2]
        except (binascii.Error, UnicodeDecodeError):
            return ""
    return ""


def may_read(config: ServeConfig, headers: Mapping[str, str]) -> bool:
    """Whether this request may read: always on loopback or with ``--public-read``, else with either token."""
    if not config.reads_need_token:
        return True
    given = presented_token(headers.get("Authorization") or "").encode()
    allowed = [t.encode() for t in (config.read_token, config.token) if t]
    # every token compared, so the time taken does not say which one came close
    return bool(given) and sum(hmac.compare_digest(given, t) for t in allowed) > 0

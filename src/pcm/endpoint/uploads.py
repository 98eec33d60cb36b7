"""RDF sent to the Graph Store (``PUT``/``POST /store``), held to the memory's RDF limits before the engine sees it.

The engine parses what it is sent with no bound of its own: a kilobyte of RDF/XML declaring nested entities makes
it allocate until the process dies, and a 16 MB body may carry one 16 MB literal. So the front reads the body
first, as :mod:`pcm.rdflimits` reads an import file (entities refused, triples counted, literals measured, as a
stream), and forwards it unchanged only when it holds. The engine still parses and stores it: this reading only
decides whether it may.
"""

from __future__ import annotations

import pyoxigraph as ox

from pcm.errors import InputError, InputTooLarge
from pcm.rdflimits import RdfLimits, checked_triples


def refuse_upload(body: bytes, content_type: str, limits: RdfLimits, *, base_iri: str) -> tuple[int, str] | None:
    """``(status, one-line message)`` when the body may not reach the engine: 413 over a limit, 400 for content
    refused (DTD entities, not parseable); None when it may.

    A media type pyoxigraph does not read is let through: the engine, the same parser, answers it with 415.
    """
    fmt = ox.RdfFormat.from_media_type(content_type)
    if fmt is None or not body:
        return None
    name = "the request body"
    try:
        for _ in checked_triples(body, fmt, limits, base_iri=base_iri, name=name):
            pass
    except InputTooLarge as exc:
        return 413, str(exc)
    except InputError as exc:
        return 400, str(exc)
    except (SyntaxError, ValueError, UnicodeDecodeError) as exc:
        return 400, f"{name} is not valid {fmt.name}: {' '.join(str(exc).split())[:300]}"
    return None

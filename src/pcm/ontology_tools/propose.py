"""``pcm ontology propose``: the terms the model reached for that the ontology lacks, as input for its next version.

Extraction records every vocabulary IRI it had to reject (``pcm:unknownTerm`` in the provenance graph, on the post
or on its extraction activity). Counted over a whole memory, with the utterances that provoked them, they show
where the ontology falls short of what people talk about: ``schema:RepairAction`` asked for by ten utterances about
garages is a candidate class; a one-off typo is not. Terms the current ontology defines by now are reported as
such (added since), ``http://schema.org/`` spellings are folded into ``https``, and the closest existing terms are
suggested, since many proposals are near-misses of a term that exists.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pcm.backend import Solutions
from pcm.namespaces import SCHEMA, SCHEMA_HTTP, VOCABULARY_NAMESPACES
from pcm.ontology import Ontology
from pcm.resources import render_query

if TYPE_CHECKING:
    from pcm.context import MemoryContext


@dataclass
class Proposal:
    term: str
    curie: str
    count: int = 0
    """Distinct posts that tried the term."""
    posts: list[str] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)
    """What was said, earliest first (at most the requested number)."""
    defined_now: bool = False
    similar: list[str] = field(default_factory=list)
    """Existing terms with a close name (CURIEs)."""

    def as_json(self) -> dict[str, object]:
        return dict(self.__dict__)


def collect_proposals(rows: Solutions, ontology: Ontology, *, examples: int = 3) -> list[Proposal]:
    """Group the rows of ``queries/unknown_terms.rq`` by term, most requested first."""
    said: dict[str, dict[str, tuple[str, str]]] = {}  # term -> post -> (time, content)
    for row in rows.dicts():
        term = _normalise(row["term"].value)
        post = row["post"].value if "post" in row else ""
        time = row["time"].value if "time" in row else "~"  # undated posts sort last
        content = row["content"].value if "content" in row else ""
        said.setdefault(term, {})
        if post and post not in said[term]:
            said[term][post] = (time, content)
    found: dict[str, Proposal] = {}
    for term, posts in said.items():
        ordered = sorted(posts.items(), key=lambda item: (item[1][0], item[0]))
        found[term] = Proposal(
            term,
            ontology.curie(term),
            posts=[post for post, _ in ordered],
            examples=[content for _, (_, content) in ordered if content][:examples],
        )
    for proposal in found.values():
        proposal.count = len(proposal.posts) or 1
        proposal.defined_now = ontology.defines(proposal.term)
        proposal.similar = [] if proposal.defined_now else similar_terms(proposal.term, ontology)
    return sorted(found.values(), key=lambda p: (-p.count, p.curie))


def proposals_for(memory: MemoryContext, *, examples: int = 3) -> list[Proposal]:
    """Proposals from an open memory (read-only is enough)."""
    rows = memory.store.select(render_query("unknown_terms"))
    return collect_proposals(rows, memory.ontology, examples=examples)


def similar_terms(term: str, ontology: Ontology, limit: int = 3) -> list[str]:
    """Declared terms whose local name is close to ``term``'s, in any vocabulary namespace (CURIEs)."""
    local = _local(term)
    names: dict[str, list[str]] = {}
    for iri in ontology.terms:
        names.setdefault(_local(iri).lower(), []).append(iri)
    close = difflib.get_close_matches(local.lower(), list(names), n=limit, cutoff=0.7)
    return [ontology.curie(iri) for name in close for iri in sorted(names[name])][:limit]


def render_text(proposals: list[Proposal]) -> str:
    if not proposals:
        return "no unknown terms recorded: extraction has not needed anything the ontology lacks"
    lines = []
    for p in proposals:
        status = " (defined now)" if p.defined_now else ""
        hint = f"; similar: {', '.join(p.similar)}" if p.similar else ""
        lines.append(f"{p.count:4d}  {p.curie}{status}{hint}")
        lines += [f"        \u201c{_short(e)}\u201d" for e in p.examples]
    return "\n".join(lines)


def _normalise(term: str) -> str:
    term = term.strip().strip("<>")
    return SCHEMA + term[len(SCHEMA_HTTP):] if term.startswith(SCHEMA_HTTP) else term


def _local(iri: str) -> str:
    namespace = next((ns for ns in VOCABULARY_NAMESPACES if iri.startswith(ns)), None)
    if namespace is not None:
        return iri[len(namespace):]
    return iri.rstrip("/#").rsplit("#", 1)[-1].rsplit("/", 1)[-1]


def _short(text: str, limit: int = 140) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"

"""What the explorer shows, as JSON: entity pages, conversation pages, the list of conversations, text search.

Every page is a few SELECTs (in ``explore/queries/``) over the memory's backend; this module only shapes rows
into pages, which :class:`pcm.memory.Memory` hands to the faces (``Memory.entity_page`` and its kin). Each fact carries the utterances it came from, because that is the point of the explorer: every
statement the memory holds can be traced to what was said.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pyoxigraph as ox

from pcm.backend import Backend, Solutions, Term, value_or_none
from pcm.errors import InputError, QueryError
from pcm.namespaces import PREFIXES, PROV
from pcm.naming import check_iri
from pcm.sparql import iri_term, literal_term, values_clause

_QUERIES = Path(__file__).resolve().parent / "queries"
#: Upper bounds on what one page asks for: an explorer page is for reading, not for dumping the memory.
FACT_ROWS = 2000
POST_ROWS = 2000
LIST_ROWS = 500
SEARCH_ROWS = 20


@cache
def _query_text(name: str) -> str:
    return (_QUERIES / f"{name}.rq").read_text(encoding="utf-8")


def render(name: str, **terms: str) -> str:
    """Fill ``{{name}}`` placeholders of ``explore/queries/<name>.rq`` with already-rendered SPARQL terms."""
    text = _query_text(name)
    for key, value in terms.items():
        text = text.replace("{{" + key + "}}", value)
    return text


@dataclass
class Explorer:
    """Read-only pages over one memory (its backend and its individuals' namespace)."""

    backend: Backend
    namespace: str
    timeout: float = 10.0

    def _select(self, name: str, **terms: str) -> list[dict[str, Term]]:
        result = self.backend.query(render(name, **terms), timeout=self.timeout)
        if not isinstance(result, Solutions):
            raise QueryError(f"explorer query {name} did not return solutions")
        return result.dicts()

    # -- terms -----------------------------------------------------------------------------------------------

    def curie(self, iri: str) -> str:
        """``m:biscuit`` for this memory's individuals, ``schema:Person`` for known vocabularies, else the IRI."""
        if iri.startswith(self.namespace) and len(iri) > len(self.namespace):
            return "m:" + iri[len(self.namespace) :]
        for prefix, ns in _prefixes_longest_first():
            if iri.startswith(ns) and len(iri) > len(ns):
                return f"{prefix}:{iri[len(ns):]}"
        return iri

    def term(self, term: Term, labels: dict[str, str] | None = None) -> dict[str, object]:
        """A term as JSON for the page: kind, value, and for IRIs a CURIE and a label when one is known."""
        if isinstance(term, ox.NamedNode):
            out: dict[str, object] = {"type": "uri", "value": term.value, "curie": self.curie(term.value)}
            if labels and term.value in labels:
                out["label"] = labels[term.value]
            return out
        if isinstance(term, ox.BlankNode):
            return {"type": "bnode", "value": term.value}
        if isinstance(term, ox.Literal):
            out = {"type": "literal", "value": term.value}
            if term.language:
                out["lang"] = term.language
            elif term.datatype.value != "http://www.w3.org/2001/XMLSchema#string":
                out["datatype"] = self.curie(term.datatype.value)
            return out
        return {"type": "triple", "value": str(term)}

    def labels(self, iris: Iterable[str]) -> dict[str, str]:
        """One label per IRI (for those that have one), fetched in chunks."""
        wanted = sorted({i for i in iris if _usable(i)})
        found: dict[str, str] = {}
        for start in range(0, len(wanted), 200):
            chunk = wanted[start : start + 200]
            for row in self._select("labels", values=values_clause("x", chunk)):
                found[row["x"].value] = row["label"].value
        return found

    # -- entity page ---------------------------------------------------------------------------------------------

    def entity(self, iri: str) -> dict[str, object]:
        """Types, labels, facts (each with its sources) and related entities of one IRI."""
        subject = _checked(iri)
        head = self._select("entity_head", iri=subject)
        rows = self._select("entity_facts", iri=subject, limit=str(FACT_ROWS))
        facts = _group_facts(rows)
        related = sorted({f["other"].value for f in facts.values() if isinstance(f["other"], ox.NamedNode)})
        types = sorted({r["type"].value for r in head if "type" in r})
        mentioned = sorted({r["mentioned"].value for r in head if "mentioned" in r})
        labels = self.labels([iri, *related, *types, *(f["p"].value for f in facts.values())])
        names = sorted({r["label"].value for r in head if "label" in r})
        return {
            "iri": iri,
            "curie": self.curie(iri),
            "label": labels.get(iri) or (names[0] if names else self.curie(iri)),
            "labels": names,
            "types": [self.term(ox.NamedNode(t), labels) for t in types],
            "facts": [
                {
                    "direction": f["dir"],
                    "predicate": self.term(f["p"], labels),
                    "value": self.term(f["other"], labels),
                    "sources": f["sources"],
                }
                for f in facts.values()
            ],
            "related": [self.term(ox.NamedNode(r), labels) for r in related if r != iri],
            "mentioned_in": mentioned,
            "truncated": len(rows) >= FACT_ROWS,
        }

    # -- conversations -------------------------------------------------------------------------------------------

    def conversations(self) -> list[dict[str, object]]:
        return [
            {
                "iri": r["thread"].value,
                "id": value_or_none(r.get("id")),
                "title": value_or_none(r.get("title")),
                "posts": int(r["posts"].value),
                "first": value_or_none(r.get("first")),
            }
            for r in self._select("conversations", limit=str(LIST_ROWS))
        ]

    def conversation(self, thread: str) -> dict[str, object]:
        """The posts of one thread in order, each with the facts its extraction graph holds."""
        term = _checked(thread)
        head = self._select("conversation_head", thread=term)
        posts = self._select("conversation_posts", thread=term, limit=str(POST_ROWS))
        if not posts and not any(head[0].values() if head else ()):
            raise InputError(f"no conversation {thread} in this memory")
        fact_rows = self._select("conversation_facts", thread=term, limit=str(FACT_ROWS))
        iris = {t.value for r in fact_rows for t in r.values() if isinstance(t, ox.NamedNode)}
        labels = self.labels(iris)
        by_post: dict[str, list[dict[str, object]]] = {}
        for r in fact_rows:
            by_post.setdefault(r["post"].value, []).append(
                {k: self.term(r[k], labels) for k in ("s", "p", "o")}
            )
        first = head[0] if head else {}
        return {
            "iri": thread,
            "id": value_or_none(first.get("id")),
            "title": value_or_none(first.get("title")),
            "created": value_or_none(first.get("created")),
            "posts": [_post_json(p, by_post.get(p["post"].value, [])) for p in posts],
        }

    # -- search without the side index -----------------------------------------------------------------------------

    def search_text(self, text: str, k: int = SEARCH_ROWS) -> dict[str, object]:
        """Substring search over utterances and entity labels: what the search box does when the index is off."""
        needle = literal_term(text)
        hits = [
            {
                "post": r["post"].value,
                "source_id": value_or_none(r.get("source_id")),
                "session": r["session"].value,
                "time": value_or_none(r.get("time")),
                "speaker": value_or_none(r.get("speaker")),
                "role": r["role"].value,
                "text": r["text"].value,
                "score": None,
            }
            for r in self._select("search_posts", text=needle, limit=str(k))
        ]
        entities = [
            {"iri": r["e"].value, "label": r["label"].value, "score": None, "how": "text"}
            for r in self._select(
                "search_entities", text=needle, namespace=literal_term(self.namespace), limit=str(k)
            )
        ]
        return {"mode": "text", "hits": hits, "entities": entities}


def _prefixes_longest_first() -> list[tuple[str, str]]:
    return sorted(PREFIXES.items(), key=lambda kv: -len(kv[1]))


def _usable(iri: str) -> bool:
    try:
        check_iri(iri)
    except ValueError:
        return False
    return True


def _checked(iri: str) -> str:
    try:
        return iri_term(iri)
    except ValueError as exc:
        raise InputError(f"not an IRI: {iri!r}") from exc


def _group_facts(rows: list[dict[str, Term]]) -> dict[tuple[str, str, str], dict]:
    """One entry per (direction, predicate, other end), with the distinct sources that support it."""
    facts: dict[tuple[str, str, str], dict] = {}
    for r in rows:
        if r["p"].value == PROV + "wasDerivedFrom":
            continue
        key = (r["dir"].value, r["p"].value, str(r["o"]))
        fact = facts.setdefault(key, {"dir": r["dir"].value, "p": r["p"], "other": r["o"], "sources": []})
        source = {
            "graph": r["graph"].value,
            "post": value_or_none(r.get("post")),
            "text": value_or_none(r.get("content")),
            "thread": value_or_none(r.get("thread")),
            "session": value_or_none(r.get("session")),
            "time": value_or_none(r.get("time")),
            "speaker": value_or_none(r.get("speaker")),
            "role": value_or_none(r.get("role")),
            "source_id": value_or_none(r.get("source_id")),
            "file": value_or_none(r.get("file")),
        }
        if source not in fact["sources"]:
            fact["sources"].append(source)
    return facts


def _post_json(row: dict[str, Term], facts: list[dict[str, object]]) -> dict[str, object]:
    return {
        "post": row["post"].value,
        "position": int(row["position"].value),
        "role": value_or_none(row.get("role")),
        "speaker": value_or_none(row.get("speaker")),
        "time": value_or_none(row.get("time")),
        "text": row["content"].value,
        "source_id": value_or_none(row.get("source_id")),
        "status": value_or_none(row.get("status")),
        "facts": facts,
    }

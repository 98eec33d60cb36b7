"""How a said sentence and what was learnt from it are written down (docs/DESIGN.md §3).

The conversation graph holds what was said (``sioc:Thread`` per session, ``sioc:Post`` per utterance). Each
extraction gets its own graph named after the post; its metadata (``prov:wasDerivedFrom`` the post,
``prov:wasGeneratedBy`` an activity) lives in the provenance graph. Entity-level ``prov:wasDerivedFrom`` sits
inside the extraction graph itself, so forgetting the utterance drops exactly what it alone supports.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import pyoxigraph as ox

from pcm.conversations import Utterance
from pcm.namespaces import (
    DCTERMS,
    FOAF,
    PCM,
    PROV,
    RDF,
    RDFS,
    SCHEMA,
    SIOC,
    XSD,
)
from pcm.naming import Naming

N = ox.NamedNode
A = N(RDF + "type")
LABEL = N(RDFS + "label")
STATUS = N(PCM + "extractionStatus")
REPORT = N(PCM + "extractionReport")

STATUSES = ("pending", "extracted", "failed", "skipped", "gated")


def dt_literal(value: datetime) -> ox.Literal:
    return ox.Literal(value.isoformat(), datatype=N(XSD + "dateTime"))


def int_literal(value: int) -> ox.Literal:
    return ox.Literal(str(value), datatype=N(XSD + "integer"))


@dataclass(frozen=True)
class PostRef:
    """Where one utterance lives once written."""

    iri: str
    session_iri: str
    graph: str  # its extraction graph


def agent_for(utterance: Utterance, naming: Naming) -> str:
    if utterance.role == "user":
        return naming.owner
    if utterance.role in ("assistant", "system"):
        return naming.assistant
    return naming.person(utterance.speaker or "someone")


def fixed_agent_quads(naming: Naming, owner_name: str) -> list[ox.Quad]:
    """The owner and the assistant, written once when the memory is created."""
    owner, assistant = N(naming.owner), N(naming.assistant)
    G_CONV = N(naming.layout.conversation)
    return [
        ox.Quad(owner, A, N(PCM + "MemoryOwner"), G_CONV),
        ox.Quad(owner, A, N(SCHEMA + "Person"), G_CONV),
        ox.Quad(owner, A, N(FOAF + "Person"), G_CONV),
        ox.Quad(owner, LABEL, ox.Literal(owner_name), G_CONV),
        ox.Quad(owner, N(SCHEMA + "name"), ox.Literal(owner_name), G_CONV),
        ox.Quad(assistant, A, N(PCM + "AssistantAgent"), G_CONV),
        ox.Quad(assistant, A, N(PROV + "SoftwareAgent"), G_CONV),
        ox.Quad(assistant, LABEL, ox.Literal("the assistant"), G_CONV),
    ]


def session_quads(naming: Naming, session_id: str, title: str | None, started: datetime | None) -> list[ox.Quad]:
    s = N(naming.session(session_id))
    G_CONV = N(naming.layout.conversation)
    quads = [
        ox.Quad(s, A, N(SIOC + "Thread"), G_CONV),
        ox.Quad(s, N(DCTERMS + "identifier"), ox.Literal(session_id), G_CONV),
    ]
    if title:
        quads.append(ox.Quad(s, N(DCTERMS + "title"), ox.Literal(title), G_CONV))
    if started:
        quads.append(ox.Quad(s, N(DCTERMS + "created"), dt_literal(started), G_CONV))
    return quads


def post_quads(naming: Naming, u: Utterance, previous: str | None) -> tuple[PostRef, list[ox.Quad]]:
    """The ``sioc:Post`` for one utterance, plus its pending extraction status."""
    key = naming.post_key(u.session, u.source_id, u.position)
    iri = naming.post(key)
    p = N(iri)
    G_CONV, G_PROV = N(naming.layout.conversation), N(naming.layout.provenance)
    ref = PostRef(iri, naming.session(u.session), naming.extraction_graph(iri))
    agent = agent_for(u, naming)
    quads = [
        ox.Quad(p, A, N(SIOC + "Post"), G_CONV),
        ox.Quad(p, N(SIOC + "content"), ox.Literal(u.content), G_CONV),
        ox.Quad(p, N(SIOC + "has_container"), N(ref.session_iri), G_CONV),
        ox.Quad(p, N(PCM + "role"), ox.Literal(u.role), G_CONV),
        ox.Quad(p, N(PCM + "position"), int_literal(u.position), G_CONV),
        ox.Quad(p, N(PROV + "wasAttributedTo"), N(agent), G_CONV),
        ox.Quad(p, STATUS, ox.Literal("pending"), G_PROV),
    ]
    if u.speaker:
        quads.append(ox.Quad(p, N(PCM + "speakerName"), ox.Literal(u.speaker), G_CONV))
    if u.timestamp:
        quads.append(ox.Quad(p, N(DCTERMS + "created"), dt_literal(u.timestamp), G_CONV))
    if u.source_id is not None:
        quads.append(ox.Quad(p, N(DCTERMS + "identifier"), ox.Literal(u.source_id), G_CONV))
    if previous:
        quads.append(ox.Quad(p, N(SIOC + "previous_by_date"), N(previous), G_CONV))
    if u.role == "other" and u.speaker:
        person = N(agent)
        quads += [
            ox.Quad(person, A, N(SCHEMA + "Person"), G_CONV),
            ox.Quad(person, A, N(FOAF + "Person"), G_CONV),
            ox.Quad(person, LABEL, ox.Literal(u.speaker), G_CONV),
            ox.Quad(person, N(SCHEMA + "name"), ox.Literal(u.speaker), G_CONV),
        ]
    return ref, quads


@dataclass(frozen=True)
class Activity:
    """What produced an extraction or an import: enough to re-run it or audit it."""

    kind: str  # "extraction" | "import"
    started: datetime
    model: str = ""
    prompt_version: str = ""
    ontology_version: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    source: str = ""  # for imports: the file name


def activity_quads(naming: Naming, activity: Activity, graph: str, derived_from: str | None) -> list[ox.Quad]:
    """Metadata of one extraction/import graph, in the provenance graph."""
    key = graph.rsplit(":", 1)[-1]
    act = N(naming.activity(activity.kind, key))
    g = N(graph)
    G_PROV = N(naming.layout.provenance)
    cls = "ExtractionActivity" if activity.kind == "extraction" else "ImportActivity"
    quads = [
        ox.Quad(g, A, N(PROV + "Entity"), G_PROV),
        ox.Quad(g, N(PROV + "wasGeneratedBy"), act, G_PROV),
        ox.Quad(act, A, N(PCM + cls), G_PROV),
        ox.Quad(act, N(PROV + "startedAtTime"), dt_literal(activity.started), G_PROV),
    ]
    if derived_from:
        quads.append(ox.Quad(g, N(PROV + "wasDerivedFrom"), N(derived_from), G_PROV))
        quads.append(ox.Quad(act, N(PROV + "used"), N(derived_from), G_PROV))
    for pred, value in (
        ("model", activity.model),
        ("promptVersion", activity.prompt_version),
        ("ontologyVersion", activity.ontology_version),
    ):
        if value:
            quads.append(ox.Quad(act, N(PCM + pred), ox.Literal(value), G_PROV))
    if activity.source:
        quads.append(ox.Quad(act, N(DCTERMS + "source"), ox.Literal(activity.source), G_PROV))
    if activity.input_tokens or activity.output_tokens:
        quads.append(ox.Quad(act, N(PCM + "inputTokens"), int_literal(activity.input_tokens), G_PROV))
        quads.append(ox.Quad(act, N(PCM + "outputTokens"), int_literal(activity.output_tokens), G_PROV))
    return quads


def entity_derivation_quads(subjects: Iterable[str], post_iri: str, graph: str) -> list[ox.Quad]:
    """``?entity prov:wasDerivedFrom ?post`` for each individual an extraction talks about (IBM PCM style)."""
    g, p = N(graph), N(post_iri)
    return [ox.Quad(N(s), N(PROV + "wasDerivedFrom"), p, g) for s in sorted(set(subjects))]

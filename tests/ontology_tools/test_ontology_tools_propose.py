"""`pcm ontology propose`: unknown terms recorded by extraction, counted with example utterances."""

from __future__ import annotations

from datetime import UTC, datetime

import pyoxigraph as ox
from click.testing import CliRunner

from pcm.cli_ontology import ontology as ontology_cli
from pcm.conversations import Conversation, Utterance
from pcm.layout import LEGACY_LAYOUT
from pcm.memory import Memory
from pcm.namespaces import PCM, PROV, SCHEMA
from pcm.ontology import load_ontology
from pcm.ontology_tools.propose import proposals_for, render_text, similar_terms
from pcm.settings import Settings

N = ox.NamedNode
UNKNOWN = N(PCM + "unknownTerm")
G = N(LEGACY_LAYOUT.provenance)


def record(memory: Memory) -> list[str]:
    """Three utterances; extraction tried schema:RepairAction for two (recorded in both supported shapes)."""
    said = ["The garage fixed my brakes.", "I repaired the fence myself.", "I bought a kettle."]
    utterances = [
        Utterance("s1", i, "user", text, timestamp=datetime(2024, 1, 1 + i, tzinfo=UTC)) for i, text in enumerate(said)
    ]
    posts = memory.ingest([Conversation("s1", utterances)]).posts
    activity = N(memory.naming.activity("extraction", "k2"))
    memory.store.write([
        ox.Quad(N(posts[0]), UNKNOWN, ox.Literal(SCHEMA + "RepairAction"), G),  # on the post, as a string
        ox.Quad(N(posts[0]), UNKNOWN, ox.Literal(SCHEMA + "mechanic"), G),
        ox.Quad(activity, UNKNOWN, N("http://schema.org/RepairAction"), G),  # on the activity, as an IRI, http
        ox.Quad(activity, N(PROV + "used"), N(posts[1]), G),
        ox.Quad(N(posts[2]), UNKNOWN, ox.Literal(SCHEMA + "BuyAction"), G),  # the ontology has it by now
    ])
    return posts


def test_proposals_are_counted_per_post_with_examples(memory: Memory) -> None:
    record(memory)
    found = {p.curie: p for p in proposals_for(memory.context, examples=5)}
    assert list(found) == ["schema:RepairAction", "schema:BuyAction", "schema:mechanic"]
    repair = found["schema:RepairAction"]
    assert repair.count == 2 and not repair.defined_now
    assert repair.examples == ["The garage fixed my brakes.", "I repaired the fence myself."]
    assert "pcm:RepairAction" in repair.similar
    assert found["schema:BuyAction"].defined_now and found["schema:BuyAction"].similar == []
    text = render_text(list(found.values()))
    assert "   2  schema:RepairAction; similar: pcm:RepairAction" in text
    assert "schema:BuyAction (defined now)" in text


def test_examples_are_limited(memory: Memory) -> None:
    record(memory)
    (repair, *_rest) = proposals_for(memory.context, examples=1)
    assert repair.examples == ["The garage fixed my brakes."]


def test_nothing_recorded_says_so(memory: Memory) -> None:
    assert proposals_for(memory.context) == []
    assert render_text([]).startswith("no unknown terms recorded")


def test_similar_terms_finds_near_misses() -> None:
    onto = load_ontology()
    assert similar_terms(SCHEMA + "petSpecies", onto)[0] == "pcm:petSpecies"
    assert similar_terms(PCM + "zzzzqqq", onto) == []


def test_cli_propose_reads_a_memory(settings: Settings) -> None:
    with Memory.init(settings, owner="Dana") as memory:
        record(memory)
    result = CliRunner().invoke(ontology_cli, ["propose", "--memory", str(settings.memory), "--json", "--limit", "1"],
                                env={"PCM_INDEX": "off"})
    assert result.exit_code == 0, result.output
    assert '"curie": "schema:RepairAction"' in result.output and "BuyAction" not in result.output

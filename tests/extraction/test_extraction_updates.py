"""Knowledge updates on people (shapes-declared single values) and forgetting the post that made one.

Sample 14 of the bundled conversations (Dana moves from Portland to Seattle and changes job) replayed with a scripted
model: the old home and employer move to the history graph with the superseding post and its time, ``pcm history``
shows them, queries see only the new values; forgetting the superseding post brings the old value back.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from pcm.cli_extract import history
from pcm.conversations import Conversation, Utterance
from pcm.extraction import extract_posts, fact_history
from pcm.extraction.history import restore_after_forget
from pcm.extraction.supersede import single_valued_properties
from pcm.layout import LEGACY_LAYOUT
from pcm.llm import ScriptedClient
from pcm.memory import Memory
from pcm.namespaces import PCM, PROV, RDF, SCHEMA
from pcm.ontology import Ontology
from pcm.settings import Settings
from tests.memory_template import memory_copy
from tests.snippets import PORTLAND, SEATTLE

T0 = datetime.fromisoformat("2025-09-01T19:30:00-07:00")
HOME = SCHEMA + "homeLocation"
WORKS = SCHEMA + "worksFor"

BALLARD = """m:owner schema:homeLocation m:ballard .
m:ballard a schema:Place ; rdfs:label "Ballard" ."""
HOME_ONLY = 'm:owner schema:homeLocation m:{0} .\nm:{0} a schema:City ; rdfs:label "{1}" .'


@pytest.fixture
def memory(template: Path, tmp_path: Path) -> Iterator[Memory]:
    with memory_copy(template, tmp_path) as opened:
        yield opened


def say(memory: Memory, *texts: str, days: int = 7) -> list[str]:
    """Posts ``days`` apart, in one session each (a knowledge update arrives in a later conversation)."""
    posts = []
    for i, text in enumerate(texts):
        u = Utterance(f"s{i}", 0, "user", text, timestamp=T0 + timedelta(days=days * i), source_id=f"m{i}")
        posts += memory.ingest([Conversation(f"s{i}", [u])]).posts
    return posts


def extract(memory: Memory, post: str, *replies: str):  # type: ignore[no-untyped-def]
    return extract_posts(memory.context, [post], client=ScriptedClient(replies), concurrency=1)


def values(memory: Memory, subject: str, prop: str) -> set[str]:
    rows = memory.store.select(f"SELECT ?o WHERE {{ <{subject}> <{prop}> ?o }}").rows
    return {row[0].value for row in rows if row[0] is not None}


def history_rows(memory: Memory) -> set[tuple[str, ...]]:
    """(object, superseded by, superseded at, said by) of every history record."""
    rows = memory.store.select(f"""SELECT ?o ?by ?at ?from WHERE {{ GRAPH <{LEGACY_LAYOUT.history}> {{
        ?h a <{RDF}Statement> ; <{RDF}object> ?o .
        OPTIONAL {{ ?h <{PCM}supersededBy> ?by }} OPTIONAL {{ ?h <{PCM}supersededAt> ?at }}
        OPTIONAL {{ ?h <{PROV}wasDerivedFrom> ?from }} }} }}""").rows
    return {tuple(t.value if t is not None else "" for t in row) for row in rows}


def history_subjects(memory: Memory) -> int:
    return len(memory.store.select(f"SELECT ?h WHERE {{ GRAPH <{LEGACY_LAYOUT.history}> {{ ?h a <{RDF}Statement> }} }}").rows)


def moved(memory: Memory) -> tuple[str, str, str]:
    ns = memory.manifest.namespace
    old, new = say(memory, "I live in Portland and work at Harbor Analytics.",
                   "We moved from Portland to Seattle; I start at Cascade Health next Monday.")
    extract(memory, old, PORTLAND)
    report = extract(memory, new, SEATTLE)
    assert report.extracted == 1 and report.supersessions == 2
    return ns, old, new


# ---------------------------------------------------------------------------------------------------- declarations


def test_people_hold_one_home_and_employer_other_subjects_do_not(onto: Ontology) -> None:
    single = single_valued_properties(onto)
    assert HOME in single and WORKS in single
    assert HOME not in single.everywhere and WORKS not in single.everywhere
    assert single.applies(HOME, [SCHEMA + "Person"]) and single.applies(WORKS, [SCHEMA + "Person"])
    assert not single.applies(HOME, [PCM + "Pet"]) and not single.applies(HOME, [])
    person_subclasses = onto.subclasses(SCHEMA + "Person") - {SCHEMA + "Person"}
    assert all(single.applies(HOME, [c]) for c in person_subclasses)
    # functional properties and shapes targeting every subject of the property stay single-valued everywhere
    assert {PCM + "petBreed", SCHEMA + "actionStatus"} <= single.strict
    assert single.applies(PCM + "petBreed", [])
    # laterValuesReplace: a later utterance replaces, but two employers in one utterance are not an error
    assert WORKS not in single.strict and HOME not in single.strict


def test_shape_targets_other_than_classes_are_not_read_as_everywhere(onto: Ontology, tmp_path: Path) -> None:
    (tmp_path / "s.ttl").write_text("""@prefix sh: <http://www.w3.org/ns/shacl#> . @prefix schema: <https://schema.org/> .
        [] sh:targetNode <https://example.org/x> ; sh:path schema:knows ; sh:maxCount 1 .
        [] sh:targetSubjectsOf schema:gender ; sh:path schema:gender ; sh:maxCount 1 .
        [] sh:targetClass schema:Person ; sh:property [ sh:path schema:jobTitle ; sh:maxCount 1 ] .""", encoding="utf-8")
    single = single_valued_properties(onto, shapes_dir=tmp_path)
    assert SCHEMA + "knows" not in single
    assert SCHEMA + "gender" in single.strict
    assert single.applies(SCHEMA + "jobTitle", [SCHEMA + "Person"]) and not single.applies(SCHEMA + "jobTitle", [])


# ---------------------------------------------------------------------------------------------------- sample 14


def test_a_move_and_a_new_job_move_the_old_values_to_history(memory: Memory) -> None:
    ns, old, new = moved(memory)
    owner = ns + "owner"
    assert values(memory, owner, HOME) == {ns + "seattle"}
    assert values(memory, owner, WORKS) == {ns + "cascade-health"}
    at = "2025-09-08T19:30:00-07:00"
    assert history_rows(memory) == {(ns + "portland", new, at, old), (ns + "harbor-analytics", new, at, old)}
    changes = [(v.predicate, v.value, v.current, v.superseded_by) for v in fact_history(memory.context, owner).versions]
    assert changes == [
        (HOME, ns + "portland", False, new), (HOME, ns + "seattle", True, None),
        (WORKS, ns + "harbor-analytics", False, new), (WORKS, ns + "cascade-health", True, None),
    ]


def test_pcm_history_shows_the_move(template: Path, tmp_path: Path) -> None:
    path = str(tmp_path / "memory")
    shutil.copytree(template, path)
    with Memory.open(Settings(memory=Path(path), index_enabled=False)) as memory:
        moved(memory)
    runner = CliRunner()
    env = {"PCM_INDEX": "off", "PCM_LLM": "none"}
    out = runner.invoke(history, ["--memory", path, "m:owner"], env=env, catch_exceptions=False)
    assert out.exit_code == 0, out.output
    assert "schema:homeLocation" in out.stdout and "m:portland" in out.stdout and "m:seattle" in out.stdout
    assert "superseded 2025-09-08T19:30:00-07:00" in out.stdout
    data = json.loads(runner.invoke(history, ["--memory", path, "m:owner", "--json"], env=env).stdout)
    assert [(c["value"].rsplit("/", 1)[-1], c["current"]) for c in data["changes"]][:2] == [
        ("portland", False), ("seattle", True)]


def test_home_of_a_non_person_stays_multi_valued(memory: Memory) -> None:
    ns = memory.manifest.namespace
    first, second = say(memory, "Biscuit's kennel is in Portland.", "Biscuit also has a kennel in Seattle.")
    pet = 'm:biscuit a pcm:Pet ; rdfs:label "Biscuit" ; schema:homeLocation m:{0} .\nm:{0} a schema:City ; rdfs:label "{0}" .'
    extract(memory, first, pet.format("portland"))
    report = extract(memory, second, pet.format("seattle"))
    assert report.supersessions == 0
    assert values(memory, ns + "biscuit", HOME) == {ns + "portland", ns + "seattle"}


def test_two_homes_in_one_utterance_are_sent_back_two_employers_are_kept(memory: Memory) -> None:
    ns = memory.manifest.namespace
    first, second = say(memory, "We moved from Portland to Seattle.", "I work at Cascade Health and at Harbor Analytics.")
    both_homes = SEATTLE.split("\n", 1)[1] + "\n" + PORTLAND.split("\n", 1)[1] + (
        "\nm:owner schema:homeLocation m:portland, m:seattle .")
    client = ScriptedClient([both_homes, BALLARD])
    report = extract_posts(memory.context, [first], client=client, concurrency=1)
    assert (report.extracted, report.repairs) == (1, 1)
    repair = client.requests[1][1][-1].content
    assert "[single-valued]" in repair and "schema:homeLocation" in repair
    two_jobs = """m:owner schema:worksFor m:cascade-health, m:harbor-analytics .
m:cascade-health a schema:Organization ; rdfs:label "Cascade Health" .
m:harbor-analytics a schema:Organization ; rdfs:label "Harbor Analytics" ."""
    report = extract(memory, second, two_jobs)
    assert report.repairs == 0 and report.supersessions == 0
    assert values(memory, ns + "owner", WORKS) == {ns + "cascade-health", ns + "harbor-analytics"}


def test_a_later_employer_replaces_both_earlier_ones(memory: Memory) -> None:
    ns = memory.manifest.namespace
    first, second = say(memory, "I work at Cascade Health and Harbor Analytics.", "I now work at Northwind only.")
    extract(memory, first, 'm:owner schema:worksFor m:cascade, m:harbor .\nm:cascade a schema:Organization ; '
            'rdfs:label "Cascade" .\nm:harbor a schema:Organization ; rdfs:label "Harbor" .')
    report = extract(memory, second, 'm:owner schema:worksFor m:northwind .\nm:northwind a schema:Organization ; '
                     'rdfs:label "Northwind" .')
    assert report.supersessions == 2
    assert values(memory, ns + "owner", WORKS) == {ns + "northwind"}
    memory.forget(post=second)  # both employers the first post gave come back
    assert values(memory, ns + "owner", WORKS) == {ns + "cascade", ns + "harbor"}
    assert history_subjects(memory) == 0


# ---------------------------------------------------------------------------------------------------- forgetting


def test_forgetting_the_superseding_post_restores_the_old_value(memory: Memory) -> None:
    ns, old, new = moved(memory)
    memory.forget(post=new)
    owner = ns + "owner"
    assert values(memory, owner, HOME) == {ns + "portland"}
    assert values(memory, owner, WORKS) == {ns + "harbor-analytics"}
    graph = memory.naming.extraction_graph(old)  # back in the graph of the post that said it
    assert memory.store.select(f"SELECT ?o WHERE {{ GRAPH <{graph}> {{ <{owner}> <{HOME}> ?o }} }}").rows
    assert history_subjects(memory) == 0
    assert fact_history(memory.context, owner).versions == []


def test_forgetting_the_old_values_post_brings_nothing_back(memory: Memory) -> None:
    ns, old, new = moved(memory)
    memory.forget(post=old)
    assert values(memory, ns + "owner", HOME) == {ns + "seattle"}
    assert values(memory, ns + "owner", WORKS) == {ns + "cascade-health"}
    assert history_subjects(memory) == 0  # what a forgotten post said does not survive in history


def test_the_newest_remaining_value_wins_and_the_others_stay_superseded_by_it(memory: Memory) -> None:
    ns = memory.manifest.namespace
    a, b, c = say(memory, "I live in Portland.", "We moved to Seattle.", "We are in Ballard now.")
    for post, reply in ((a, HOME_ONLY.format("portland", "Portland")), (b, HOME_ONLY.format("seattle", "Seattle")),
                        (c, BALLARD)):
        assert extract(memory, post, reply).extracted == 1
    assert values(memory, ns + "owner", HOME) == {ns + "ballard"}

    assert restore_after_forget(memory.context, [c]) == 0  # the post is still there: its values are not forgotten yet
    memory.forget(post=c)  # Seattle (said by b) superseded Portland; Ballard superseded Seattle
    assert values(memory, ns + "owner", HOME) == {ns + "seattle"}
    assert history_rows(memory) == {(ns + "portland", b, "2025-09-08T19:30:00-07:00", a)}


def test_forgetting_a_middle_post_leaves_the_latest_value_and_repoints_history(memory: Memory) -> None:
    ns = memory.manifest.namespace
    a, b, c = say(memory, "I live in Portland.", "We moved to Seattle.", "We are in Ballard now.")
    for post, reply in ((a, HOME_ONLY.format("portland", "Portland")), (b, HOME_ONLY.format("seattle", "Seattle")),
                        (c, BALLARD)):
        assert extract(memory, post, reply).extracted == 1
    memory.forget(post=b)
    assert values(memory, ns + "owner", HOME) == {ns + "ballard"}
    # Portland stays in the past, now superseded by the post that still holds (no record names the forgotten one)
    assert history_rows(memory) == {(ns + "portland", c, "2025-09-15T19:30:00-07:00", a)}


def test_an_older_utterance_extracted_late_comes_back_when_the_newer_is_forgotten(memory: Memory) -> None:
    ns = memory.manifest.namespace
    old, new = say(memory, "I live in Portland and work at Harbor Analytics.",
                   "We moved to Seattle; I work at Cascade Health now.")
    extract(memory, new, SEATTLE)
    report = extract(memory, old, PORTLAND)  # e.g. `pcm extract --all`: the older value goes straight to history
    assert report.supersessions == 2 and values(memory, ns + "owner", HOME) == {ns + "seattle"}
    memory.forget(post=new)
    assert values(memory, ns + "owner", HOME) == {ns + "portland"}
    assert history_subjects(memory) == 0

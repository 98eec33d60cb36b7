"""The prompt files: versioned, catalogue generated from the ontology (never typed), rules naming real terms."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from pcm.extraction.prompts import (
    CATALOGUE_BEGIN,
    CATALOGUE_END,
    NO_TOPIC_VOCABULARY,
    PROMPTS_DIR,
    committed_catalogue,
    extract_prompt,
    generated_catalogue,
    prompt_version,
    read_prompt,
    refresh_catalogue,
    repair_prompt,
    system_prompt,
    topic_vocabulary,
)
from pcm.namespaces import PREFIXES
from pcm.ontology import load_ontology


def test_committed_catalogue_equals_the_generated_one() -> None:
    """If this fails, the ontology changed: run `python -m pcm.extraction.prompts` and commit the prompt."""
    assert committed_catalogue() == generated_catalogue()


def test_prompt_files_carry_their_version_in_name_and_header() -> None:
    assert extract_prompt().version == "extract.v3" and repair_prompt().version == "repair.v1"
    extract, repair = prompt_version().split("+")
    assert extract.startswith("extract.v3@") and repair.startswith("repair.v1@")
    for name in ("extract.v3.md", "repair.v1.md"):
        assert (PROMPTS_DIR / name).read_text(encoding="utf-8").startswith(f"<!-- prompt: {name[:-3]} -->\n")


def test_the_rules_name_only_terms_the_ontology_defines() -> None:
    ontology = load_ontology()
    rules = extract_prompt().parts["system"].split(CATALOGUE_BEGIN)[0] + extract_prompt().parts["hints"]
    used = set(re.findall(r"\b([a-z]+):([A-Za-z][A-Za-z0-9]*)\b", rules))
    checked = {(p, local) for p, local in used if p in PREFIXES and p not in ("rdf", "rdfs", "xsd", "owl")}
    assert len(checked) > 40
    missing = sorted(f"{p}:{local}" for p, local in checked if not ontology.defines(PREFIXES[p] + local))
    assert missing == []


def test_the_rules_carry_the_papers_extraction_rules() -> None:
    rules = (extract_prompt().parts["system"] + extract_prompt().parts["hints"]).lower()
    for phrase in ("most specific", "pcm:repairaction and pcm:serviceevent", "xsd:date", "schema:agent",
                   "completedactionstatus", "potentialactionstatus", "no isolated nodes", "rdfs:label",
                   "reuse existing iris", "ob:", "rel:", "opencare:", "schema:repeatfrequency", "pcm:pet",
                   "pcm:socialmediaaccount", "pcm:clothing", "pcm:plant", "pcm:collection", "pcm:preference",
                   "prices", "quantities", "brands", "durations"):
        assert phrase in rules, phrase


def test_refresh_rewrites_only_the_catalogue_block(tmp_path: Path) -> None:
    copy = tmp_path / "extract.v3.md"
    shutil.copy(PROMPTS_DIR / "extract.v3.md", copy)
    text = copy.read_text(encoding="utf-8")
    start, end = text.index(CATALOGUE_BEGIN), text.index(CATALOGUE_END)
    copy.write_text(text[: start + len(CATALOGUE_BEGIN)] + "\nstale\n" + text[end:], encoding="utf-8")

    assert refresh_catalogue(copy) is True
    assert copy.read_text(encoding="utf-8") == text.replace(committed_catalogue(), generated_catalogue())
    assert refresh_catalogue(copy) is False
    assert read_prompt(copy).version == "extract.v3"


def test_system_prompt_holds_the_selected_catalogue_without_markers() -> None:
    catalogue = load_ontology().catalogue(["pets"])
    system = system_prompt(catalogue)
    assert catalogue in system and "## pets" in system and "## health" not in system
    assert CATALOGUE_BEGIN not in system and CATALOGUE_END not in system and "<!-- part:" not in system


def test_user_part_has_every_section_the_extractor_fills() -> None:
    keys = ("topics", "message_time", "date_hints", "speaker", "entities", "previous", "role", "utterance", "task")
    text = extract_prompt().render("user", **dict.fromkeys(keys, "X"))
    assert "{{" not in text and "<utterance>\nX\n</utterance>" in text
    assert "{{" not in repair_prompt().render("user", report="R")
    assert "{{" not in repair_prompt().render("json", report="R")


def test_the_json_system_prompt_swaps_only_the_output_and_example_sections() -> None:
    catalogue = load_ontology().catalogue(["pets"])
    turtle, json_ = system_prompt(catalogue, "turtle"), system_prompt(catalogue, "json")
    assert "Turtle only" in turtle and "Turtle" not in json_
    assert '{"@graph": []}' in json_ and '"schema:price": 549' in json_
    assert "m:buy-breville-barista-express a schema:BuyAction" not in json_
    rules = turtle[turtle.index("# What to extract"):turtle.index("# Example")]
    assert rules in json_ and json_.endswith(turtle[turtle.index("# Vocabulary"):])


def test_the_recorded_version_changes_when_the_prompt_text_changes(tmp_path: Path) -> None:
    """A regenerated catalogue keeps the file name: the digest is what tells a resumed run the prompt changed."""
    original = (PROMPTS_DIR / "extract.v3.md").read_text(encoding="utf-8")
    copy = tmp_path / "extract.v3.md"
    copy.write_text(original, encoding="utf-8")
    same = read_prompt(copy)
    copy.write_text(original.replace("<!-- catalogue:end -->", "- pcm:Example a new term\n<!-- catalogue:end -->"),
                    encoding="utf-8")
    edited = read_prompt(copy)
    assert same.digest == extract_prompt().digest
    assert edited.version == same.version and edited.digest != same.digest
    assert f"{extract_prompt().version}@{extract_prompt().digest}" in prompt_version()


def test_topic_notes_come_only_for_the_selected_areas_after_their_catalogue() -> None:
    blocks = "\n\n".join(load_ontology().catalogue(["pets"], compact=True).split("\n\n")[1:])
    vocabulary = topic_vocabulary(blocks, ("pets",))
    assert vocabulary.startswith("## pets\nclasses: pcm:Pet") and "Notation:" not in vocabulary
    assert vocabulary.endswith("Pets are pcm:Pet (pcm:hasPet, pcm:petSpecies, pcm:petBreed).")
    assert "rel:friendOf" not in vocabulary
    assert topic_vocabulary("", ()) == NO_TOPIC_VOCABULARY
    assert "Notes on these topics" not in system_prompt(load_ontology().catalogue(["people"], compact=True))

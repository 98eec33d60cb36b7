"""The prompt catalogue says which properties hold one value at a time, as the shapes declare it."""

from __future__ import annotations

from pathlib import Path

from pcm.namespaces import SCHEMA
from pcm.ontology import Ontology
from pcm.shape_limits import ValueLimit, value_limits


def line(catalogue: str, curie: str) -> str:
    return next(ln for ln in catalogue.splitlines() if ln.startswith(curie + " "))


def test_the_bundled_shapes_mark_home_and_employer_for_persons(onto: Ontology) -> None:
    text = onto.catalogue()
    assert "[single-valued for schema:Person]" in line(text, "schema:homeLocation")
    assert "[later values replace for schema:Person]" in line(text, "schema:worksFor")
    assert "[functional]" in line(text, "schema:actionStatus")
    assert "[" not in line(text, "schema:knows").split(" — ")[0]  # multi-valued on purpose: no mark


def test_the_compact_catalogue_is_unchanged_by_the_shapes(onto: Ontology, tmp_path: Path) -> None:
    assert onto.catalogue(compact=True) == onto.catalogue(compact=True, shapes_dir=tmp_path)
    assert "single-valued" not in onto.catalogue(compact=True)


def test_shapes_for_every_subject_and_for_several_classes(onto: Ontology, tmp_path: Path) -> None:
    (tmp_path / "s.ttl").write_text("""@prefix sh: <http://www.w3.org/ns/shacl#> . @prefix schema: <https://schema.org/> .
        @prefix pcmsh: <https://w3id.org/pcm/shapes#> .
        [] sh:targetSubjectsOf schema:knows ; sh:path schema:knows ; sh:maxCount 1 .
        [] sh:targetSubjectsOf schema:jobTitle ; sh:path schema:jobTitle ; pcmsh:laterValuesReplace true .
        [] sh:targetClass schema:Person, schema:Organization ; sh:path schema:homeLocation ; sh:maxCount 1 .
        [] sh:targetNode schema:x ; sh:path schema:worksFor ; sh:maxCount 1 .""", encoding="utf-8")
    limits = value_limits(tmp_path)
    assert limits[SCHEMA + "knows"] == ValueLimit(anywhere=True, strict=True)
    assert limits[SCHEMA + "jobTitle"] == ValueLimit(anywhere=True, strict=False)
    assert limits[SCHEMA + "homeLocation"].single_for == {SCHEMA + "Person", SCHEMA + "Organization"}
    assert limits[SCHEMA + "worksFor"].classes == frozenset()  # a node target is not read as a class
    text = onto.catalogue(shapes_dir=tmp_path)
    assert "[single-valued]" in line(text, "schema:knows")
    assert "[later values replace]" in line(text, "schema:jobTitle")
    assert "[single-valued for schema:Organization|schema:Person]" in line(text, "schema:homeLocation")
    assert "[" not in line(text, "schema:worksFor").split(" — ")[0]

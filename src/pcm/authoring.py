"""The front door of ``pcm ontology``: each authoring step (check, catalogue, docs, competency test, diff, migrate,
propose, deprecate, rename) as one call that returns a report with ``as_json`` and a text form.

Beside :class:`pcm.memory.Memory`, which is the front door to a memory, this is the front door to the files an
ontology author edits (the ontology, shapes, queries, prompts, migration scripts) and to the two steps that read or
move a memory for them (``diff`` against stored data, ``migrate``, ``propose``). A face parses its flags, makes one
call here and renders what it returns: it never reaches :mod:`pcm.ontology_tools` or :mod:`pcm.ontology` itself
(the ``faces`` import contract in pyproject.toml).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pcm.errors import UsageError
from pcm.manifest import MANIFEST
from pcm.settings import Settings

if TYPE_CHECKING:
    from pcm.memory import Memory
    from pcm.ontology import Ontology
    from pcm.ontology_tools.check import CheckReport
    from pcm.ontology_tools.competency import CompetencyReport
    from pcm.ontology_tools.diff import OntologyDiff
    from pcm.ontology_tools.migrate import MigrationReport
    from pcm.ontology_tools.rename import RenameResult


@dataclass
class Outcome:
    """What a step that has no report class of its own returns: its JSON, its text, and whether it passed (a face
    exits 1 when not)."""

    data: Any
    text: str
    ok: bool = True
    written: list[Path] = field(default_factory=list)

    def as_json(self) -> Any:
        return self.data


#: Where a step that opens a memory tells the person about it (the memory waits for a migration): a face prints it.
Note = Callable[[str], None]


@contextmanager
def _read(settings: Settings, note: Note | None) -> Iterator[Memory]:
    """The memory opened read-only, its pending migration (if any) told to ``note`` once, as every command does."""
    from pcm.memory import Memory

    with Memory.open(settings, read_only=True) as memory:
        if note is not None and memory.ontology_drift is not None:
            note(memory.ontology_drift.note(memory.settings.memory))
        yield memory


def load(ontology_dir: Path | None = None) -> Ontology:
    """The shipped ontology, or the one in ``ontology_dir`` (a folder or a file)."""
    from pcm.ontology import load_ontology
    from pcm.ontology_tools.diff import load_version

    return load_ontology() if ontology_dir is None else load_version(ontology_dir)


def check(
    *, ontology_dir: Path | None = None, shapes_dir: Path | None = None, queries_dir: Path | None = None,
    prompts: Sequence[Path] = (), vocab_dir: Path | None = None, reasoner: bool = True, catalog_file: Path | None = None,
) -> CheckReport:
    """``pcm ontology check``: parse, reason, lint, and check every term the shapes, queries and prompts use.
    ``prompts`` empty means every shipped prompt; ``vocab_dir`` None means ``../shared/vocab`` when present."""
    from pcm.ontology_tools.check import DEFAULT_VOCAB, run_check

    return run_check(
        ontology_dir=ontology_dir, shapes_dir=shapes_dir, queries_dir=queries_dir, prompts=list(prompts) or None,
        vocab_dir=vocab_dir if vocab_dir is not None else DEFAULT_VOCAB, reasoner=reasoner, catalog_file=catalog_file,
    )


def catalogue(
    *, areas: Sequence[str] = (), compact: bool = False, write: bool = False, check_only: bool = False,
    prompts_root: Path | None = None, ontology_dir: Path | None = None,
) -> Outcome:
    """``pcm ontology catalog``: the catalogue of types and properties the prompts include (of ``areas``, all when
    empty), or, with ``write``, the prompts' marked sections refreshed, or, with ``check_only``, the stale ones
    (``ok`` False when one is)."""
    from pcm.ontology_tools import catalog as cat

    if write and check_only:
        raise UsageError("give --write or --check, not both")
    onto = load(ontology_dir)
    files = cat.prompt_files(prompts_root)
    if write:
        changed = cat.write_prompts(onto, files)
        text = f"refreshed {len(changed)} of {len(files)} prompt file(s)" + "".join(f"\n  {p}" for p in changed)
        return Outcome({"prompts": [str(p) for p in files], "changed": [str(p) for p in changed]}, text + "\n",
                       written=changed)
    if check_only:
        stale = cat.stale_prompts(onto, files)
        text = ("stale catalogue (run `pcm ontology catalog --write`):" + "".join(f"\n  {p}" for p in stale)
                if stale else f"catalogue up to date in {len(files)} prompt file(s)")
        return Outcome({"prompts": [str(p) for p in files], "stale": [str(p) for p in stale]}, text + "\n",
                       ok=not stale)
    unknown = [a for a in areas if a not in onto.areas]
    if unknown:
        raise UsageError(f"unknown area(s) {', '.join(unknown)}; known: {', '.join(onto.areas)}")
    text = onto.catalogue(list(areas) or None, compact=compact)
    return Outcome({"areas": list(areas) or list(onto.areas), "compact": compact, "chars": len(text),
                    "approx_tokens": cat.approx_tokens(text), "text": text}, text)


def docs(out_dir: Path, *, formats: Sequence[str] = ("html", "md"), ontology_dir: Path | None = None,
         shapes_dir: Path | None = None) -> list[Path]:
    """``pcm ontology docs``: the HTML and Markdown reference written into ``out_dir``; the files written."""
    from pcm.ontology_tools.docs import write_docs

    return write_docs(load(ontology_dir), out_dir, formats=formats, shapes_dir=shapes_dir)


def competency(directory: Path | None = None, *, names: Sequence[str] = (), validate: bool = True) -> CompetencyReport:
    """``pcm ontology test``: the competency questions (all, or those ``names``) run against their fixtures."""
    from pcm.ontology_tools.competency import run_competency

    return run_competency(directory, names=list(names) or None, validate=validate)


def diff(old: Path, new: Path, *, memory: Settings | None = None, data_file: Path | None = None,
         memory_given: bool = False, note: Note | None = None) -> OntologyDiff:
    """``pcm ontology diff``: the changes between two ontology versions, breaking ones judged against the stored
    data of ``memory`` (read-only; skipped when it has none and was not named, ``memory_given`` False) or of an
    RDF dump ``data_file``."""
    from pcm.ontology_tools.diff import data_from_file, diff_ontologies, load_version

    if memory_given and data_file is not None:
        raise UsageError("give --memory or --data, not both")
    before, after = load_version(old), load_version(new)
    if data_file is not None:
        return diff_ontologies(before, after, data=data_from_file(data_file))
    if memory is None or (not memory_given and not (memory.memory / MANIFEST).exists()):
        return diff_ontologies(before, after)
    with _read(memory, note) as opened:
        return diff_ontologies(before, after, data=opened.store.select)


def migrate(
    settings: Settings, *, dry_run: bool = False, reextract: bool = False, allow_violations: bool = False,
    ontology_dir: Path | None = None, shapes_dir: Path | None = None, migrations_dir: Path | None = None,
    note: Note | None = None,
) -> MigrationReport:
    """``pcm ontology migrate``: the memory moved to the target ontology (default: the shipped one), or with
    ``dry_run`` only validated against the new shapes and the scripts listed.

    The real run opens the memory writable past the refusal of a memory whose ontology differs (that refusal is
    what sends a person here), holding the lock; ``memory.toml`` is read before anything so a rollback restores it.
    """
    from pcm.memory import Memory
    from pcm.ontology_tools import migrate as mig

    target = load(ontology_dir) if ontology_dir is not None else None
    if dry_run:
        with _read(settings, note) as memory:
            return mig.migrate(memory.context, dry_run=True, ontology=target, shapes_dir=shapes_dir,
                               migrations=migrations_dir, reextract=reextract, allow_violations=allow_violations)
    raw = (settings.memory / MANIFEST).read_bytes()
    with Memory.open(settings, migrating=True) as memory:
        return mig.migrate(memory.context, manifest_bytes=raw, ontology=target, shapes_dir=shapes_dir,
                           migrations=migrations_dir, reextract=reextract, allow_violations=allow_violations)


def propose(settings: Settings, *, examples: int = 3, limit: int = 50, note: Note | None = None) -> Outcome:
    """``pcm ontology propose``: the terms extraction wanted and the ontology lacks, most requested first."""
    from pcm.ontology_tools.propose import proposals_for, render_text

    with _read(settings, note) as memory:
        found = proposals_for(memory.context, examples=examples)[:limit]
    return Outcome([p.as_json() for p in found], render_text(found) + "\n")


def deprecated(*, ontology_dir: Path | None = None, from_version: str | None = None,
               migrations_dir: Path | None = None, script: bool = False) -> Outcome:
    """``pcm ontology deprecated``: the deprecated terms and their replacements; with ``from_version`` the
    migration script for the replaced ones written (to ``migrations_dir``, default the ontology folder's); with
    ``script`` only that script's text."""
    from pcm.ontology_tools.migrate import replacement_script, write_replacement_script

    onto = load(ontology_dir)
    if script:
        text = replacement_script(onto)
        return Outcome({"version": onto.version, "script": text}, text)
    terms = onto.deprecated()
    written = None
    if from_version is not None:
        target = migrations_dir or (ontology_dir / "migrations" if ontology_dir else None)
        written = write_replacement_script(onto, from_version, target)
    lines = [] if terms else ["no deprecated term"]
    lines += [f"{onto.curie(t.iri)} ({t.label}) -> {', '.join(onto.curie(r) for r in t.replaced_by) or 'no replacement'}"
              for t in terms]
    if from_version is not None:
        lines.append(f"wrote {written}" if written else "no replaced term: no migration script written")
    data = {"version": onto.version, "written": str(written) if written else None,
            "deprecated": [{"iri": t.iri, "curie": onto.curie(t.iri), "label": t.label,
                            "replaced_by": list(t.replaced_by)} for t in terms]}
    return Outcome(data, "\n".join(lines) + "\n", written=[written] if written else [])


def rename(
    old: str, new: str, *, ontology_dir: Path | None = None, shapes_dir: Path | None = None,
    queries_dirs: Sequence[Path] = (), prompts_root: Path | None = None, migrations_dir: Path | None = None,
    from_version: str | None = None, to_version: str | None = None, dry_run: bool = False,
) -> RenameResult:
    """``pcm ontology rename``: a term renamed in every file that writes it, the version bumped and the migration
    script written (nothing written with ``dry_run``)."""
    from pcm.ontology_tools.rename import rename_term

    return rename_term(old, new, ontology_dir=ontology_dir, shapes_dir=shapes_dir,
                       queries_dirs=list(queries_dirs) or None, prompts_root=prompts_root,
                       migrations=migrations_dir, from_version=from_version, to_version=to_version,
                       write=not dry_run)


__all__ = ["Outcome", "catalogue", "check", "competency", "deprecated", "diff", "docs", "load", "migrate",
           "propose", "rename"]

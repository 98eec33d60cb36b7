"""``pcm ontology …``: the ontology authoring workflow (issue 8) as a click group the main CLI registers.

Commands exit 0 when all is well and 1 when the thing they check fails (``check``, ``test``, ``catalog --check``,
``diff`` with a breaking change), after printing a report; errors the user can act on keep the exit codes of
:mod:`pcm.errors`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from pcm import authoring
from pcm.cli import emit_json, handle_errors, json_option, memory_option, settings_for
from pcm.errors import UsageError
from pcm.terminal import echo

_DIR = click.Path(path_type=Path, file_okay=False, exists=True)
_FILE = click.Path(path_type=Path, dir_okay=False, exists=True)


def _note(line: str) -> None:
    """A memory waiting for `pcm ontology migrate` is said so once, as every command says it."""
    echo(f"pcm: note: {line}", err=True)


@click.group(name="ontology")
def ontology() -> None:
    """Author the ontology: check it, generate its prompt catalogue and docs, test, diff, migrate, propose.

    \b
    Example:
      pcm ontology check
      pcm ontology catalog --check
      pcm ontology test
    """


@ontology.command()
@click.option("--ontology", "ontology_dir", type=_DIR, default=None, help="Ontology folder (default: the shipped one).")
@click.option("--shapes", "shapes_dir", type=_DIR, default=None, help="SHACL shapes folder.")
@click.option("--queries", "queries_dir", type=_DIR, default=None, help="Queries folder.")
@click.option("--prompt", "prompts", type=_FILE, multiple=True, help="Prompt file(s) (default: every prompt the package ships).")
@click.option("--vocab", "vocab_dir", type=_DIR, default=None,
              help="Published vocabularies as N-Quads (default: the term lists pcm ships).")
@click.option("--no-reasoner", is_flag=True, help="Skip HermiT (no consistency check).")
@click.option("--catalog", "catalog_file", type=_FILE, default=None,
              help="Catalog mapping owl:imports IRIs to local files (default: the ontology folder's "
                   "catalog-v001.xml or catalog.toml). Imports are never downloaded.")
@click.option("--info", "show_info", is_flag=True, help="Also print info findings (text output).")
@click.option("--tsv", "as_tsv", is_flag=True, help="Print the findings as TSV (Level, Rule Name, Where, Message).")
@json_option
@handle_errors
def check(ontology_dir: Path | None, shapes_dir: Path | None, queries_dir: Path | None, prompts: tuple[Path, ...],
          vocab_dir: Path | None, no_reasoner: bool, catalog_file: Path | None, show_info: bool, as_tsv: bool,
          as_json: bool) -> None:
    """Parse, reason (OWL 2 consistency, unsatisfiable classes), lint in the manner of `robot report`, and check
    every term shapes, queries, competency fixtures and prompts use. Exits 1 when an error is found.

    Findings have a severity (error, warning, info) and a rule name; --json and --tsv list them all.

    \b
    Examples:
      pcm ontology check
      pcm ontology check --vocab DIR    # other N-Quads term lists
    """
    if as_json and as_tsv:
        raise UsageError("give --json or --tsv, not both")
    report = authoring.check(ontology_dir=ontology_dir, shapes_dir=shapes_dir, queries_dir=queries_dir,
                             prompts=prompts, vocab_dir=vocab_dir, reasoner=not no_reasoner, catalog_file=catalog_file)
    if as_json:
        emit_json(report.as_json())
    elif as_tsv:
        echo(report.tsv(), nl=False, newlines=True)
    else:
        echo(report.text(info=show_info), newlines=True)
    if not report.ok:
        sys.exit(1)


@ontology.command()
@click.option("--areas", default=None, help="Comma-separated areas to list (default: all).")
@click.option("--compact", is_flag=True, help="Compact notation: properties grouped by domain, no comments.")
@click.option("--write", is_flag=True, help="Refresh the marked catalogue sections of every prompt file.")
@click.option("--check", "check_only", is_flag=True, help="Exit 1 listing the prompt files whose catalogue is stale.")
@click.option("--prompts-root", type=_DIR, default=None, help="Look for prompts/**/*.md under this folder instead.")
@click.option("--ontology", "ontology_dir", type=_DIR, default=None, help="Ontology folder (default: the shipped one).")
@json_option
@handle_errors
def catalog(areas: str | None, compact: bool, write: bool, check_only: bool, prompts_root: Path | None,
            ontology_dir: Path | None, as_json: bool) -> None:
    """Print the catalogue of types and properties the prompts include, or refresh / check it in the prompts.

    A prompt marks the generated part with `<!-- catalogue:begin -->` … `<!-- catalogue:end -->`; the begin marker
    may take `areas=a,b` and `compact`.

    \b
    Example:
      pcm ontology catalog --areas pets,plants --compact
      pcm ontology catalog --write
    """
    chosen = [a.strip() for a in areas.split(",") if a.strip()] if areas else []
    outcome = authoring.catalogue(areas=chosen, compact=compact, write=write, check_only=check_only,
                                  prompts_root=prompts_root, ontology_dir=ontology_dir)
    emit_json(outcome.as_json()) if as_json else echo(outcome.text, nl=False, newlines=True)
    if not outcome.ok:
        sys.exit(1)


@ontology.command()
@click.option("--out", "-o", "out_dir", type=click.Path(path_type=Path, file_okay=False), default=Path("ontology-docs"),
              show_default=True, help="Folder to write index.html and ontology.md into.")
@click.option("--format", "fmt", type=click.Choice(["html", "md", "both"]), default="both", show_default=True)
@click.option("--ontology", "ontology_dir", type=_DIR, default=None, help="Ontology folder (default: the shipped one).")
@click.option("--shapes", "shapes_dir", type=_DIR, default=None, help="SHACL shapes folder (default: the shipped one).")
@handle_errors
def docs(out_dir: Path, fmt: str, ontology_dir: Path | None, shapes_dir: Path | None) -> None:
    """Write an HTML and a Markdown reference: classes, properties, both hierarchies, the SHACL rules naming each
    term, deprecations, examples from the competency tests; HTML with a search box. Reproducible (no build time).

    \b
    Example:
      pcm ontology docs -o build/ontology && xdg-open build/ontology/index.html
    """
    formats = ("html", "md") if fmt == "both" else (fmt,)
    for path in authoring.docs(out_dir, formats=formats, ontology_dir=ontology_dir, shapes_dir=shapes_dir):
        echo(str(path))


@ontology.command(name="test")
@click.option("--dir", "directory", type=_DIR, default=None, help="Competency folder (default: queries/competency).")
@click.option("-k", "names", multiple=True, help="Run only these questions (by name).")
@click.option("--no-validate", is_flag=True, help="Do not check fixtures against the SHACL shapes.")
@json_option
@handle_errors
def test_(directory: Path | None, names: tuple[str, ...], no_validate: bool, as_json: bool) -> None:
    """Run the competency questions (query + fixture + expected results) and check every area is covered.

    \b
    Example:
      pcm ontology test -k pets
    """
    report = authoring.competency(directory, names=names, validate=not no_validate)
    emit_json(report.as_json()) if as_json else echo(report.text(), newlines=True)
    if not report.ok:
        sys.exit(1)


@ontology.command()
@click.argument("old", type=click.Path(path_type=Path, exists=True))
@click.argument("new", type=click.Path(path_type=Path, exists=True))
@memory_option
@click.option("--data", "data_file", type=_FILE, default=None, help="Check breaking changes against an RDF dump.")
@json_option
@click.pass_context
@handle_errors
def diff(ctx: click.Context, old: Path, new: Path, memory_path: Path | None, data_file: Path | None,
         as_json: bool) -> None:
    """Added, removed and changed terms and axioms between two ontology versions (folders or files).

    A removed, re-typed, re-ranged or narrowed term is breaking when stored data uses it: the memory (--memory, or
    the default one when it exists) or an RDF dump (--data). Exits 1 when a change is breaking.

    \b
    Example:
      pcm ontology diff old-ontology/ pcm_ontology/ --memory ~/mem
    """
    result = authoring.diff(old, new, memory=settings_for(ctx, memory_path) if data_file is None else None,
                            data_file=data_file, memory_given=memory_path is not None, note=_note)
    emit_json(result.as_json()) if as_json else echo(result.text(), newlines=True)
    if result.breaking:
        sys.exit(1)


@ontology.command()
@memory_option
@click.option("--dry-run", is_flag=True, help="Only validate against the new shapes and list the scripts.")
@click.option("--reextract", is_flag=True, help="Mark the posts whose facts break a rule as pending re-extraction.")
@click.option("--allow-violations", is_flag=True,
              help="Keep the migration even when facts still break a rule (by default it is rolled back, exit 7).")
@click.option("--strict", is_flag=True, hidden=True, help="The default now: kept so older scripts still run.")
@click.option("--ontology", "ontology_dir", type=_DIR, default=None, help="Target ontology (default: the shipped one).")
@click.option("--shapes", "shapes_dir", type=_DIR, default=None, help="Target shapes (default: the shipped ones).")
@click.option("--migrations", "migrations_dir", type=_DIR, default=None,
              help="Migration scripts (default: pcm_ontology/migrations).")
@json_option
@click.pass_context
@handle_errors
def migrate(ctx: click.Context, memory_path: Path | None, dry_run: bool, reextract: bool, allow_violations: bool,
            strict: bool, ontology_dir: Path | None, shapes_dir: Path | None, migrations_dir: Path | None,
            as_json: bool) -> None:
    """Move the memory to a new ontology version (or content): validate, back up, apply migration scripts
    atomically, record the new version and digest, validate again.

    A migration that leaves facts breaking a rule is rolled back (exit 7), listing each broken fact and whether
    re-extraction can repair it (a fact from a post) or not (an imported fact); --allow-violations keeps it.
    Until it runs, a memory whose ontology differs from this pcm's is read-only.

    \b
    Example:
      pcm ontology migrate --dry-run
      pcm ontology migrate --reextract --allow-violations
    """
    report = authoring.migrate(settings_for(ctx, memory_path), dry_run=dry_run, reextract=reextract,
                               allow_violations=allow_violations, ontology_dir=ontology_dir, shapes_dir=shapes_dir,
                               migrations_dir=migrations_dir, note=_note)
    emit_json(report.as_json()) if as_json else echo(report.text(), newlines=True)


@ontology.command()
@memory_option
@click.option("--examples", default=3, show_default=True, help="Example utterances per term.")
@click.option("--limit", default=50, show_default=True, help="Terms to list, most requested first.")
@json_option
@click.pass_context
@handle_errors
def propose(ctx: click.Context, memory_path: Path | None, examples: int, limit: int, as_json: bool) -> None:
    """The terms extraction tried to use that the ontology lacks, with counts and example utterances.

    \b
    Example:
      pcm ontology propose --examples 5
    """
    outcome = authoring.propose(settings_for(ctx, memory_path), examples=examples, limit=limit, note=_note)
    emit_json(outcome.as_json()) if as_json else echo(outcome.text, nl=False, newlines=True)


@ontology.command()
@click.option("--ontology", "ontology_dir", type=_DIR, default=None, help="Ontology folder (default: the shipped one).")
@click.option("--migration-from", "from_version", default=None,
              help="Write the migration script for replaced terms, from this (the previous) version to the ontology's.")
@click.option("--migrations", "migrations_dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Where to write it (default: the ontology folder's migrations/).")
@click.option("--script", "show_script", is_flag=True, help="Print the migration script instead of writing it.")
@json_option
@handle_errors
def deprecated(ontology_dir: Path | None, from_version: str | None, migrations_dir: Path | None, show_script: bool,
               as_json: bool) -> None:
    """List deprecated terms (owl:deprecated true) and their replacements (dcterms:isReplacedBy), and write the
    migration script that moves stored data from each replaced term to its replacement.

    Deprecated terms stay in the ontology, so stored data keeps validating, but leave the prompt catalogue and
    are marked in the docs.

    \b
    Example:
      pcm ontology deprecated
      pcm ontology deprecated --migration-from 0.1.0
    """
    outcome = authoring.deprecated(ontology_dir=ontology_dir, from_version=from_version,
                                   migrations_dir=migrations_dir, script=show_script)
    emit_json(outcome.as_json()) if as_json and not show_script else echo(outcome.text, nl=False, newlines=True)


@ontology.command()
@click.argument("old")
@click.argument("new")
@click.option("--ontology", "ontology_dir", type=_DIR, default=None, help="Ontology folder (default: the shipped one).")
@click.option("--shapes", "shapes_dir", type=_DIR, default=None, help="SHACL shapes folder.")
@click.option("--queries", "queries_dirs", type=_DIR, multiple=True,
              help="Queries folder(s), competency fixtures included (default: the shipped ones).")
@click.option("--prompts-root", type=_DIR, default=None, help="Look for prompts/**/*.md under this folder instead.")
@click.option("--migrations", "migrations_dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Where to write the migration script (default: the ontology folder's migrations/).")
@click.option("--migration-from", "from_version", default=None,
              help="The released version memories hold (default: the ontology's current version).")
@click.option("--to", "to_version", default=None,
              help="The version after the rename (default: the next minor version, unless already bumped).")
@click.option("--dry-run", is_flag=True, help="Show the diff and write nothing.")
@json_option
@handle_errors
def rename(old: str, new: str, ontology_dir: Path | None, shapes_dir: Path | None, queries_dirs: tuple[Path, ...],
           prompts_root: Path | None, migrations_dir: Path | None, from_version: str | None, to_version: str | None,
           dry_run: bool, as_json: bool) -> None:
    """Rename a term in the ontology, shapes, queries, competency fixtures and prompts, bump the version, and write
    the migration script that moves stored data to the new name; prints the diff.

    \b
    Example:
      pcm ontology rename pcm:petSpecies pcm:species --dry-run
      pcm ontology rename pcm:petSpecies pcm:species
    """
    result = authoring.rename(old, new, ontology_dir=ontology_dir, shapes_dir=shapes_dir, queries_dirs=queries_dirs,
                              prompts_root=prompts_root, migrations_dir=migrations_dir, from_version=from_version,
                              to_version=to_version, dry_run=dry_run)
    if as_json:
        emit_json({**result.as_json(), "diff": result.diff()})
        return
    echo(result.diff(), nl=False, newlines=True)
    echo("\n".join(result.summary()), newlines=True)

"""``pcm ontology migrate``: move a stored memory to a new ontology version, safely.

Steps, in order: re-validate the stored facts against the new shapes and ontology (what will need attention);
back the memory up (a RocksDB checkpoint of the local store, or an N-Quads dump of a remote one, plus
``memory.toml``); apply the SPARQL Update scripts of ``pcm_ontology/migrations/`` from the memory's version to the
new one, together with the new ontology graph and a record of the migration, as ONE update (atomic on Oxigraph);
bump the memory's ontology version; validate again. Any failure after the backup restores it (the store's own
transaction already undid a failed update on the local backend, so only the manifest is put back there). The posts
whose facts still break a rule are listed, and ``reextract`` marks them pending so the next extraction run redoes
them with the new ontology.

Migration scripts are named ``<from>-to-<to>.ru`` (several per step: ``<from>-to-<to>.<label>.ru``, applied in
name order); see ``pcm_ontology/migrations/README.md``.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pyoxigraph as ox
import rdflib

from pcm import resources
from pcm.backend import quads_to_insert_data
from pcm.errors import MemoryVersionError, PcmError, QueryError, UsageError, ValidationError
from pcm.layout import GRAPH_PREFIX, LEGACY_LAYOUT, ONTOLOGY, layout_of_graph
from pcm.manifest import MANIFEST, Manifest
from pcm.namespaces import (
    PCM,
    PROV,
    RDF,
    SIOC,
)
from pcm.ontology import Ontology, load_ontology, ontology_digest
from pcm.rdfbridge import to_rdflib
from pcm.resources import render_query
from pcm.sparql import values_clause

if TYPE_CHECKING:
    from pcm.context import MemoryContext
    from pcm.shapes import Validator

_NAME = re.compile(r"^(?P<source>\d+(?:\.\d+)*)-to-(?P<target>\d+(?:\.\d+)*)(?:\.(?P<label>[\w-]+))?\.ru$")
_PREFIX_LINE = re.compile(r"(?im)^\s*PREFIX\s+([A-Za-z][\w.-]*)?:\s*<([^>]*)>\s*$")
_BASE_LINE = re.compile(r"(?im)^\s*BASE\s*<")
_BATCH = 100  # fact graphs validated per pyshacl call
BACKUPS_DIR = "backups"


class MigrationError(PcmError):
    """A migration failed; the memory was restored from its backup."""


@dataclass(frozen=True)
class Migration:
    source: str
    target: str
    path: Path

    @property
    def name(self) -> str:
        return self.path.name


def migrations_dir() -> Path:
    return resources.ontology_dir() / "migrations"


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in version.split("."))


def load_migrations(directory: Path | None = None) -> list[Migration]:
    """Every ``*.ru`` script of the migrations folder; a badly named one is an error, not silently skipped."""
    folder = directory or migrations_dir()
    found = []
    for path in sorted(folder.glob("*.ru")) if folder.is_dir() else []:
        match = _NAME.match(path.name)
        if match is None:
            raise UsageError(f"migration {path.name}: name it <from>-to-<to>.ru or <from>-to-<to>.<label>.ru")
        if version_tuple(match["source"]) >= version_tuple(match["target"]):
            raise UsageError(f"migration {path.name}: it must go from an older version to a newer one")
        found.append(Migration(match["source"], match["target"], path))
    return sorted(found, key=lambda m: (version_tuple(m.source), version_tuple(m.target), m.name))


def plan_migrations(current: str, target: str, migrations: Iterable[Migration]) -> list[Migration]:
    """The scripts that take data at ``current`` to ``target``, in order; overlapping steps are refused.

    Versions without a script are steps that needed no data change (an added term, say).
    """
    low, high = version_tuple(current), version_tuple(target)
    steps = [m for m in migrations if version_tuple(m.source) >= low and version_tuple(m.target) <= high]
    reached, previous = low, None
    for step in steps:
        if previous is not None and (step.source, step.target) == (previous.source, previous.target):
            continue  # another part of the same step
        if version_tuple(step.source) < reached and previous is not None:
            raise UsageError(f"migrations {previous.name} and {step.name} overlap; keep one path between versions")
        reached, previous = version_tuple(step.target), step
    return steps


def pending_migrations(current: str, target: str, directory: Path | None = None) -> list[Migration]:
    """Scripts a memory at ``current`` needs before it may use ontology ``target`` (for :class:`Memory.open`)."""
    if not current or version_tuple(current) >= version_tuple(target):
        return []
    return plan_migrations(current, target, load_migrations(directory))


# ---------------------------------------------------------------------- scripts for replaced terms


def replacement_script(ontology: Ontology, replacements: dict[str, str] | None = None) -> str:
    """A migration script moving stored data from each replaced term to its replacement.

    ``replacements`` (old IRI -> new IRI) defaults to the deprecated terms with exactly one
    ``dcterms:isReplacedBy``. Each term is rewritten where data can hold it, in every graph but the ontology's: as a
    property, and as a value (a class after ``rdf:type``, an individual, the ``rdf:predicate`` of a superseded
    statement in the history graph). Empty when nothing is replaced.
    """
    pairs = replacements if replacements is not None else {
        t.iri: t.replaced_by[0] for t in ontology.deprecated() if len(t.replaced_by) == 1
    }
    if not pairs:
        return ""
    parts = []
    for old, new in sorted(pairs.items()):
        keep_out = f"FILTER(?g != {ONTOLOGY} && STRSTARTS(STR(?g), {GRAPH_PREFIX}))"
        parts.append(
            f"# {ontology.curie(old)} is replaced by {ontology.curie(new)}\n"
            f"DELETE {{ GRAPH ?g {{ ?s <{old}> ?o }} }} INSERT {{ GRAPH ?g {{ ?s <{new}> ?o }} }}\n"
            f"WHERE {{ GRAPH ?g {{ ?s <{old}> ?o }} {keep_out} }} ;\n"
            f"DELETE {{ GRAPH ?g {{ ?s ?p <{old}> }} }} INSERT {{ GRAPH ?g {{ ?s ?p <{new}> }} }}\n"
            f"WHERE {{ GRAPH ?g {{ ?s ?p <{old}> }} {keep_out} }}"
        )
    header = ("# Generated by pcm from the ontology's replaced terms (owl:deprecated + dcterms:isReplacedBy).\n"
              "# Review it, then run `pcm ontology migrate --dry-run` on a copy of a memory.\n")
    return header + " ;\n".join(parts) + "\n"


def write_replacement_script(
    ontology: Ontology, from_version: str, directory: Path | None = None, *, label: str = "replaced",
    replacements: dict[str, str] | None = None,
) -> Path | None:
    """Write :func:`replacement_script` as ``<from>-to-<version>.<label>.ru`` in the migrations folder (``None``
    when no term is replaced). An existing file is refused rather than overwritten."""
    if version_tuple(from_version) >= version_tuple(ontology.version):
        raise UsageError(f"--migration-from {from_version} must be older than the ontology's version {ontology.version}"
                         " (bump owl:versionInfo first)")
    text = replacement_script(ontology, replacements)
    if not text:
        return None
    folder = directory or migrations_dir()
    path = folder / f"{from_version}-to-{ontology.version}.{label}.ru"
    if path.exists():
        raise UsageError(f"{path} already exists; delete it or edit it by hand")
    folder.mkdir(parents=True, exist_ok=True)
    check_script_syntax(path, text)
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------------- is a migration due?


@dataclass(frozen=True)
class OntologyDrift:
    """How a memory's ontology differs from a target one (the one this pcm ships, when opening)."""

    memory_version: str
    target_version: str
    reason: str
    """``older`` or ``newer`` (the versions differ), or ``content`` (same version, different triples)."""
    memory_digest: str
    target_digest: str
    scripts: tuple[str, ...] = ()
    """Migration scripts waiting to run (``older`` only)."""

    def describe(self, where: Path | str) -> str:
        if self.reason == "newer":
            return f"memory {where} uses ontology {self.memory_version}, newer than this pcm's {self.target_version}"
        if self.reason == "older":
            pending = f", {len(self.scripts)} migration script(s) pending" if self.scripts else ""
            return f"memory {where} holds ontology {self.memory_version} data and this pcm ships {self.target_version}{pending}"
        return (f"memory {where} was written against ontology {self.memory_version or '?'} with other content than "
                f"this pcm's {self.target_version}")

    def refusal(self, where: Path | str) -> str:
        """The one line a writable open is refused with."""
        if self.reason == "newer":
            return f"{self.describe(where)}; upgrade pcm (reading still works)"
        return (f"{self.describe(where)}: it is read-only until `pcm ontology migrate` runs "
                "(preview with `pcm ontology migrate --dry-run`)")

    def note(self, where: Path | str) -> str:
        """The one line a read-only open prints: reads work, writes wait."""
        if self.reason == "newer":
            return f"{self.describe(where)}: reading only; upgrade pcm to write"
        return f"{self.describe(where)}: reading only; run `pcm ontology migrate` before writing"

    def as_json(self) -> dict[str, object]:
        return {"memory_version": self.memory_version, "target_version": self.target_version, "reason": self.reason,
                "memory_digest": self.memory_digest, "target_digest": self.target_digest,
                "scripts": list(self.scripts), "migration_needed": self.reason != "newer"}


def ontology_drift(
    manifest: Manifest, target: Ontology, stored_digest: Callable[[], str], migrations: Path | None = None
) -> OntologyDrift | None:
    """``None`` when the memory's data was written against ``target``, else how it differs.

    The version and digest recorded in ``memory.toml`` decide. A memory written before digests were recorded is
    compared by the content of its stored ontology graph (``stored_digest``): pcm used to keep that graph equal to
    the ontology it shipped, so it is what the data was last written against. Equal content needs no migration
    (nothing can be stranded); any difference does, and the migration then backs up and validates first.
    """
    version = manifest.ontology_version
    if version and version != target.version:
        newer = version_tuple(version) > version_tuple(target.version)
        scripts = () if newer else tuple(m.name for m in pending_migrations(version, target.version, migrations))
        return OntologyDrift(version, target.version, "newer" if newer else "older",
                             manifest.ontology_digest, target.digest, scripts)
    digest = manifest.ontology_digest or stored_digest()
    if digest != target.digest:
        return OntologyDrift(version, target.version, "content", digest, target.digest)
    return None


# ---------------------------------------------------------------------- validation of stored facts


@dataclass
class RuleViolations:
    """All violations of one rule (one shape, or one of the validator's Python rules)."""

    rule: str
    count: int = 0
    examples: list[str] = field(default_factory=list)
    graphs: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class BrokenFact:
    """One violation, located: the node and property it is about, the graphs holding it, and how to repair it."""

    rule: str
    focus: str
    path: str | None
    message: str
    graphs: tuple[str, ...]
    posts: tuple[str, ...]
    """The posts whose extraction graphs hold the fact: re-extracting them rebuilds it with the new ontology."""

    @property
    def reextractable(self) -> bool:
        """True when every graph holding the fact came from a post (an imported fact has no post to redo)."""
        return bool(self.graphs) and len(self.posts) == len(self.graphs)

    def line(self) -> str:
        where = f" {self.path}" if self.path else ""
        if self.reextractable:
            fix = "re-extractable from " + ", ".join(self.posts)
        else:
            kept = [g for g in self.graphs if not g.startswith((layout_of_graph(g) or LEGACY_LAYOUT).extraction_prefix)] or ["(no graph found)"]
            fix = "cannot be re-extracted (imported, no post): " + ", ".join(kept) + "; fix it by hand or re-import"
        return f"[{self.rule}] <{self.focus}>{where}: {self.message} -- {fix}"

    def as_json(self) -> dict[str, object]:
        return {"rule": self.rule, "focus": self.focus, "path": self.path, "message": self.message,
                "graphs": list(self.graphs), "posts": list(self.posts), "reextractable": self.reextractable}


@dataclass
class ValidationSummary:
    graphs_checked: int = 0
    rules: dict[str, RuleViolations] = field(default_factory=dict)
    posts: set[str] = field(default_factory=set)
    """Posts whose extraction graphs hold a violation: the candidates for re-extraction."""
    facts: list[BrokenFact] = field(default_factory=list)
    """Every violation, located (``lines`` shows the first ``FACTS_SHOWN``; the JSON has them all)."""

    FACTS_SHOWN = 50

    @property
    def violations(self) -> int:
        return sum(r.count for r in self.rules.values())

    @property
    def not_reextractable(self) -> int:
        return sum(not f.reextractable for f in self.facts)

    def lines(self) -> list[str]:
        out = [f"{self.graphs_checked} fact graph(s) checked, {self.violations} violation(s)"]
        for rule in sorted(self.rules.values(), key=lambda r: (-r.count, r.rule)):
            out.append(f"  {rule.rule}: {rule.count} in {len(rule.graphs)} graph(s)")
            out += [f"    e.g. {e}" for e in rule.examples]
        return out

    def fact_lines(self) -> list[str]:
        """One line per broken fact, saying whether re-extraction can repair it."""
        out = [f.line() for f in self.facts[: self.FACTS_SHOWN]]
        if len(self.facts) > self.FACTS_SHOWN:
            out.append(f"... and {len(self.facts) - self.FACTS_SHOWN} more (--json lists them all)")
        return out

    def as_json(self) -> dict[str, object]:
        return {
            "graphs_checked": self.graphs_checked,
            "violations": self.violations,
            "by_rule": {r.rule: {"count": r.count, "graphs": len(r.graphs), "examples": r.examples}
                        for r in self.rules.values()},
            "posts": sorted(self.posts),
            "facts": [f.as_json() for f in self.facts],
        }


def validate_memory(memory: MemoryContext, validator: Validator, *, examples: int = 3) -> ValidationSummary:
    """Validate every extraction and import graph, in batches, with existing nodes' types and labels as context.

    ``prov:wasDerivedFrom`` links are left out: pcm adds them itself after an extraction has been validated.
    Each violation is located in the graphs holding its focus node's statements with the violation's property
    (any statement about or pointing to the node when the property is not known).
    """
    summary = ValidationSummary()
    graphs = [g for g in memory.backend.named_graphs() if memory.naming.layout.is_fact_graph(g)]
    summary.graphs_checked = len(graphs)
    derived = ox.NamedNode(PROV + "wasDerivedFrom")
    for start in range(0, len(graphs), _BATCH):
        batch = graphs[start : start + _BATCH]
        quads = [q for g in batch for q in memory.backend.quads(g) if q.predicate != derived]
        where: dict[str, set[str]] = {}
        stated: dict[tuple[str, str], set[str]] = {}
        for q in quads:
            graph = q.graph_name.value
            for node in (q.subject, q.object):
                if isinstance(node, ox.NamedNode | ox.BlankNode):
                    where.setdefault(_node_id(node), set()).add(graph)
            stated.setdefault((_node_id(q.subject), q.predicate.value), set()).add(graph)  # type: ignore[arg-type]  # a delta's subjects are nodes, never triple terms
        delta = _rdflib_graph(quads)
        context = _context(memory, quads)
        report = validator.validate(delta, memory_namespace=memory.manifest.namespace, context=context)
        for v in report.violations:
            entry = summary.rules.setdefault(v.rule, RuleViolations(v.rule))
            entry.count += 1
            if len(entry.examples) < examples:
                entry.examples.append(v.message)
            touched = where.get(v.focus, set())
            entry.graphs |= touched
            summary.posts |= {p for g in touched if (p := memory.naming.post_of_graph(g))}
            holding = sorted(stated.get((v.focus, v.path or ""), touched))
            posts = tuple(p for g in holding if (p := memory.naming.post_of_graph(g)))
            summary.facts.append(BrokenFact(v.rule, v.focus, v.path, v.message, tuple(holding), posts))
    return summary


def _node_id(node: ox.NamedNode | ox.BlankNode) -> str:
    return node.value if isinstance(node, ox.NamedNode) else f"_:{node.value}"


def _rdflib_graph(quads: Sequence[ox.Quad]) -> rdflib.Graph:
    return to_rdflib(quads)  # term by term: an N-Triples round trip grew with the square of a literal's length


def _context(memory: MemoryContext, quads: Sequence[ox.Quad]) -> rdflib.Graph:
    nodes = sorted({n.value for q in quads for n in (q.subject, q.object)
                    if isinstance(n, ox.NamedNode) and memory.naming.is_individual(n.value)})
    context = rdflib.Graph()
    for start in range(0, len(nodes), 400):
        result = memory.backend.query(render_query("node_context", nodes=values_clause("n", nodes[start : start + 400])))
        if isinstance(result, list) and result:
            to_rdflib(result, context)
    return context


# ---------------------------------------------------------------------- the migration


@dataclass
class MigrationReport:
    from_version: str
    to_version: str
    scripts: list[str] = field(default_factory=list)
    dry_run: bool = False
    applied: bool = False
    backup: Path | None = None
    before: ValidationSummary | None = None
    after: ValidationSummary | None = None
    marked_pending: int = 0
    drift: OntologyDrift | None = None
    """How the memory's ontology differed from the target; ``None`` when it was already up to date."""

    @property
    def reextract(self) -> list[str]:
        final = self.after or self.before
        return sorted(final.posts) if final else []

    def text(self) -> str:
        mode = " (dry run: nothing written)" if self.dry_run else ""
        lines = [f"ontology migration {self.from_version or '?'} -> {self.to_version}{mode}"]
        if self.drift is None:
            lines.append("the memory's ontology is the target's (same version and content): nothing to migrate")
        elif self.drift.reason == "content":
            lines.append(f"same version, other content: digest {self.drift.memory_digest or '(none)'} -> "
                         f"{self.drift.target_digest}")
        lines.append("scripts: " + (", ".join(self.scripts) if self.scripts else "none"))
        if self.backup:
            lines.append(f"backup: {self.backup}")
        if self.before is not None:
            lines.append("stored facts against the new shapes, before:")
            lines += ["  " + line for line in self.before.lines()]
        if self.after is not None:
            lines.append("after:")
            lines += ["  " + line for line in self.after.lines()]
            if self.applied and self.after.facts:
                lines.append("broken facts kept (--allow-violations):")
                lines += ["  " + line for line in self.after.fact_lines()]
        if self.applied:
            lines.append(f"memory is now at ontology {self.to_version}")
        posts = self.reextract
        if self.marked_pending:
            lines.append(f"marked {self.marked_pending} post(s) pending: the next extraction run re-extracts them")
        elif posts:
            lines.append(f"{len(posts)} post(s) have facts that break a rule: re-extract them with --reextract")
        return "\n".join(lines)

    def as_json(self) -> dict[str, object]:
        return {
            "from_version": self.from_version,
            "to_version": self.to_version,
            "scripts": self.scripts,
            "dry_run": self.dry_run,
            "applied": self.applied,
            "backup": str(self.backup) if self.backup else None,
            "before": self.before.as_json() if self.before else None,
            "after": self.after.as_json() if self.after else None,
            "reextract": self.reextract,
            "marked_pending": self.marked_pending,
            "drift": self.drift.as_json() if self.drift else None,
        }


def migrate(
    memory: MemoryContext,
    *,
    ontology: Ontology | None = None,
    shapes_dir: Path | None = None,
    migrations: Path | None = None,
    data_version: str | None = None,
    manifest_bytes: bytes | None = None,
    dry_run: bool = False,
    reextract: bool = False,
    allow_violations: bool = False,
    validate: bool = True,
) -> MigrationReport:
    """Migrate an open memory to ``ontology`` (default: the shipped one). See the module docstring for the steps.

    A migration that leaves facts breaking a rule is rolled back (:class:`ValidationError` listing each broken
    fact and whether re-extraction can repair it) unless ``allow_violations``: a fact stranded by a renamed or
    removed term is not silently kept.
    """
    from pcm.shapes import Validator

    target = ontology or load_ontology()
    current = data_version if data_version is not None else memory.manifest.ontology_version
    if current and version_tuple(current) > version_tuple(target.version):
        raise MemoryVersionError(f"memory holds ontology {current}, newer than the target {target.version}")
    plan = pending_migrations(current, target.version, migrations)
    drift = ontology_drift(
        replace(memory.manifest, ontology_version=current), target,
        lambda: ontology_digest(memory.backend.quads(memory.naming.layout.ontology)), migrations,
    )
    report = MigrationReport(current, target.version, [m.name for m in plan], dry_run=dry_run, drift=drift)
    validator = Validator(target, shapes_dir) if validate else None
    if validator is not None:
        report.before = validate_memory(memory, validator)
    if dry_run or drift is None:
        return report
    if memory.read_only:
        raise UsageError("migrating needs the memory opened writable")
    update = build_update(plan, target, memory, current)
    check_update_syntax(update)
    backup = make_backup(memory, manifest_bytes, f"{current or 'none'}-to-{target.version}")
    report.backup = backup.path
    _apply(memory, update, backup, target, allow_violations, validator, report)
    if reextract and report.reextract:
        report.marked_pending = mark_pending(memory, report.reextract)
    return report


def _apply(
    memory: MemoryContext, update: str, backup: Backup, target: Ontology, allow_violations: bool,
    validator: Validator | None, report: MigrationReport,
) -> None:
    # without transactions, a failed update may have applied part of itself
    data_touched = not memory.backend.capabilities.transactions
    try:
        # scripts rewrite types and values the side index holds: the next open reconciles it, even if this process
        # dies before the manifest's new version (which the index's sync record also compares) is saved
        memory.store.mark_index_pending()
        memory.backend.update(update)
        data_touched = True
        memory.manifest.ontology_version = target.version
        memory.manifest.ontology_digest = target.digest
        memory.manifest.save(memory.settings.memory)
        if validator is not None:
            report.after = validate_memory(memory, validator)
            after = report.after
            if after.violations and not allow_violations:
                stuck = after.not_reextractable
                raise ValidationError(
                    f"{after.violations} violation(s) would remain after the migration ({stuck} in imported facts "
                    "that cannot be re-extracted); fix the migration scripts, or keep them with --allow-violations "
                    "(and --reextract to redo the posts)",
                    "\n".join(["broken facts after the migration:", *after.fact_lines()]),
                )
    except (QueryError, ValidationError) as error:  # the store refused the update, or its result breaks a rule
        restore_backup(memory, backup, data=data_touched)
        message = " ".join(str(error).split()) or type(error).__name__
        if isinstance(error, ValidationError):
            raise ValidationError(f"{message}; rolled back from {backup.path}", error.report) from error
        raise MigrationError(f"migration to ontology {target.version} failed and was rolled back from {backup.path}: {message}") from error
    except BaseException:
        restore_backup(memory, backup, data=data_touched)  # anything else (a bug, an interrupt) still rolls back,
        raise  # and goes on as it is
    report.applied = True


def build_update(plan: Sequence[Migration], target: Ontology, memory: MemoryContext, current: str) -> str:
    """One SPARQL Update: the scripts, then the new ontology graph, then a record of the migration.

    pyoxigraph accepts a prologue only at the start of a request, so each script's ``PREFIX`` lines are hoisted
    into one prologue (a prefix bound to two IRIs by two scripts is refused).
    """
    prefixes: dict[str, str] = {}
    bodies = []
    for step in plan:
        text = step.path.read_text(encoding="utf-8")
        check_script_syntax(step.path, text)
        if _BASE_LINE.search(text):
            raise UsageError(f"migration {step.name}: BASE is not supported; write full IRIs or PREFIX lines")
        for name, iri in _PREFIX_LINE.findall(text):
            if prefixes.get(name, iri) != iri:
                raise UsageError(f"migration {step.name}: prefix {name}: is bound to another IRI by an earlier script")
            prefixes[name] = iri
        body = _PREFIX_LINE.sub("", text).strip().rstrip(";").strip()
        if body:
            bodies.append(f"# {step.name}\n{body}")
    stamp = datetime.now(UTC)
    activity = memory.naming.activity("migration", f"{current or 'none'}-to-{target.version}-{stamp:%Y%m%dT%H%M%S%f}")
    provenance = ox.NamedNode(memory.naming.layout.provenance)
    record = [
        ox.Quad(ox.NamedNode(activity), ox.NamedNode(RDF + "type"), ox.NamedNode(PROV + "Activity"), provenance),
        ox.Quad(ox.NamedNode(activity), ox.NamedNode("http://www.w3.org/2000/01/rdf-schema#label"),
                ox.Literal(f"ontology migration {current or 'none'} -> {target.version}"), provenance),
        ox.Quad(ox.NamedNode(activity), ox.NamedNode(PCM + "ontologyVersion"), ox.Literal(target.version),
                provenance),
        ox.Quad(ox.NamedNode(activity), ox.NamedNode(PROV + "startedAtTime"),
                ox.Literal(stamp.isoformat(), datatype=ox.NamedNode("http://www.w3.org/2001/XMLSchema#dateTime")),
                provenance),
    ]
    if plan:
        record.append(ox.Quad(ox.NamedNode(activity), ox.NamedNode("http://www.w3.org/2000/01/rdf-schema#comment"),
                              ox.Literal("scripts: " + ", ".join(m.name for m in plan)), provenance))
    prologue = "".join(f"PREFIX {name}: <{iri}>\n" for name, iri in prefixes.items())
    operations = [*bodies, f"DROP SILENT GRAPH {ONTOLOGY}", quads_to_insert_data(target.quads(memory.naming.layout)),
                  quads_to_insert_data(record)]
    return prologue + " ;\n".join(operations)


_SYNTAX_AT = re.compile(r"^error at (\d+):(\d+):\s*(.*)$", re.S)


def check_script_syntax(path: Path, text: str) -> None:
    """Parse one script on its own, so a syntax error points into that file (``file:line:col: message``), not
    into the merged update the scripts become."""
    try:
        ox.Store().update(LEGACY_LAYOUT.render(text))
    except SyntaxError as error:
        detail = " ".join(str(error).split())
        found = _SYNTAX_AT.match(detail)
        where = f"{path}:{found[1]}:{found[2]}" if found else str(path)
        raise UsageError(f"{where}: {found[3] if found else detail} (migration script {path.name} does not parse)") from error
    except (OSError, RuntimeError):
        pass  # a runtime error on an empty store says nothing about the real one


def check_update_syntax(update: str) -> None:
    """Parse (and run) the update on an empty in-memory store, so a typo is reported before any backup or write."""
    try:
        ox.Store().update(LEGACY_LAYOUT.render(update))
    except SyntaxError as error:
        raise UsageError(f"migration scripts do not parse: {' '.join(str(error).split())}") from error
    except (OSError, RuntimeError):
        pass  # a runtime error on an empty store says nothing about the real one


# ---------------------------------------------------------------------- backup and restore


@dataclass(frozen=True)
class Backup:
    path: Path
    kind: str
    """``store`` (a pyoxigraph store directory) or ``nquads`` (a dump of a remote store)."""
    manifest: bytes


def make_backup(memory: MemoryContext, manifest_bytes: bytes | None, label: str) -> Backup:
    """A copy of the whole dataset and of ``memory.toml`` under ``<memory>/backups/``."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    path = memory.settings.memory / BACKUPS_DIR / f"{stamp}-ontology-{label}"
    path.mkdir(parents=True)
    manifest = manifest_bytes if manifest_bytes is not None else (memory.settings.memory / MANIFEST).read_bytes()
    (path / MANIFEST).write_bytes(manifest)
    backend = memory.backend
    if backend.capabilities.files is not None:
        backend.checkpoint(path / "oxigraph")
        return Backup(path, "store", manifest)
    (path / "dataset.nq").write_bytes(backend.dump(ox.RdfFormat.N_QUADS))
    return Backup(path, "nquads", manifest)


def restore_backup(memory: MemoryContext, backup: Backup, *, data: bool = True) -> None:
    """Put the dataset (when ``data``) and the manifest back as the backup holds them."""
    if data and backup.kind == "store" and memory.backend.capabilities.files is not None:
        memory.backend.replace_with(backup.path / "oxigraph")  # one crash-safe swap, not CLEAR ALL and reload
    elif data:
        if backup.kind == "store":
            source = ox.Store.read_only(str(backup.path / "oxigraph"))
            quads: Iterable[ox.Quad] = source
        else:
            quads = ox.parse(path=str(backup.path / "dataset.nq"), format=ox.RdfFormat.N_QUADS)
        # this memory's graphs only: a server may hold other memories (and Virtuoso keeps its own graphs there)
        graphs = memory.backend.named_graphs()
        for start in range(0, len(graphs), 500):
            memory.backend.update(" ;\n".join(f"DROP SILENT GRAPH <{g}>" for g in graphs[start : start + 500]))
        chunk: list[ox.Quad] = []
        for quad in quads:
            chunk.append(quad)
            if len(chunk) >= 50_000:
                memory.backend.extend(chunk)
                chunk = []
        memory.backend.extend(chunk)
    (memory.settings.memory / MANIFEST).write_bytes(backup.manifest)
    memory.manifest = Manifest.load(memory.settings.memory)


def purge_backups(memory: MemoryContext) -> tuple[list[Path], list[Path]]:
    """Make the migration backups forget too: delete those holding a post this memory no longer has, and rewrite
    the other store copies into fresh files (a copy of the store's files keeps what had been deleted before it was
    taken, whatever posts it holds). Returns the backups deleted and those that could not be read (kept)."""
    from pcm.backend_local import LocalBackend

    root = memory.settings.memory / BACKUPS_DIR
    deleted: list[Path] = []
    unreadable: list[Path] = []
    for backup in sorted(root.iterdir()) if root.is_dir() else []:
        try:
            copy = LocalBackend(backup / "oxigraph") if (backup / "oxigraph").is_dir() else None
            try:
                posts = _posts_in(copy.quads() if copy is not None else _dump_quads(backup))
                if set(posts) - memory.store.existing_posts(posts):
                    deleted.append(backup)
                elif copy is not None:
                    copy.compact()
            finally:
                if copy is not None:
                    copy.close()
        except (OSError, SyntaxError, ValueError):
            unreadable.append(backup)
    for backup in deleted:
        shutil.rmtree(backup)
    return deleted, unreadable


_TYPE = ox.NamedNode(RDF + "type")
_POST = ox.NamedNode(SIOC + "Post")


def _posts_in(quads: Iterable[ox.Quad]) -> list[str]:
    """The posts a backup holds (a function of its own, so the store's iterator is gone before a compaction)."""
    return sorted({q.subject.value for q in quads if q.predicate == _TYPE and q.object == _POST})


def _dump_quads(backup: Path) -> Iterable[ox.Quad]:
    dump = backup / "dataset.nq"
    return ox.parse(path=str(dump), format=ox.RdfFormat.N_QUADS) if dump.is_file() else ()


def mark_pending(memory: MemoryContext, posts: Sequence[str]) -> int:
    """Set the extraction status of ``posts`` to pending (one update per 200 posts)."""
    for start in range(0, len(posts), 200):
        parts = [op for post in posts[start : start + 200] for op in memory.store.set_status(post, "pending")]
        memory.backend.update(" ;\n".join(parts))
    return len(posts)


__all__ = [
    "Backup",
    "BrokenFact",
    "Migration",
    "MigrationError",
    "MigrationReport",
    "OntologyDrift",
    "RuleViolations",
    "ValidationSummary",
    "build_update",
    "load_migrations",
    "make_backup",
    "mark_pending",
    "migrate",
    "ontology_drift",
    "pending_migrations",
    "replacement_script",
    "write_replacement_script",
    "plan_migrations",
    "restore_backup",
    "validate_memory",
]

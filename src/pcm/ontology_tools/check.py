"""``pcm ontology check``: does the ontology parse, is it consistent, is it documented, and does everything that
names its terms (shapes, queries, prompts) name terms that exist?

Each problem is a :class:`Finding` with a stable code, so CI output can be grepped and tests can assert on it:

``parse``               a file is not valid Turtle, or the ontology has no version
``import``              an ``owl:imports`` the catalog does not map to a readable local file (never downloaded)
``reasoner``            HermiT could not run (no Java) or was skipped
``inconsistent``        HermiT finds no model of the ontology (with a minimal set of axioms causing it)
``unsatisfiable``       a named class can have no member (it is equivalent to owl:Nothing), with the axioms why
``missing-label`` / ``missing-comment`` / ``missing-area`` / ``unknown-area``
``missing-domain`` / ``missing-range``   an object or datatype property without one (own or inherited)
``range-kind``          a datatype property ranging over a class, or an object property over a datatype
``undefined-term``      a term under a vocabulary namespace (pcm:, schema:, foaf:, ...) the ontology does not declare
``nonstandard-term``    a term under a standard namespace that the published vocabulary does not define
``schema-http``         schema.org spelt http://schema.org/ (pcm spells it https)
``replaced-by``         a deprecated term's ``dcterms:isReplacedBy`` names an undeclared or deprecated term, or a
                        term that is not deprecated names a replacement
``deprecated-term``     a deprecated term used by shapes, queries or prompts, or by a term that is not deprecated
``duplicate-label``     two terms with the same label (error among pcm: terms of one kind; info for reused
                        vocabularies, whose labels are theirs)
``multiple-labels``     a term with two labels in one language
``annotation-whitespace`` a label or comment with leading, trailing or doubled whitespace
``version-mismatch``    ``owl:versionIRI`` does not end with ``owl:versionInfo``
``convention``          the ontology breaks a convention its files state under ``# Conventions`` (info: a stated
                        convention this check cannot verify)
``catalogue-marker``    malformed catalogue markers in a prompt
``stale-catalogue``     a prompt's catalogue section differs from what the ontology generates
"""

from __future__ import annotations

import difflib
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

import rdflib
from rdflib import OWL, RDF, RDFS, Literal, URIRef

from pcm import resources
from pcm.errors import InputError, PcmError
from pcm.namespaces import PCM, SCHEMA_HTTP, VOCABULARY_NAMESPACES, XSD, turtle_prefixes
from pcm.ontology import (
    AREAS_FILE,
    DATATYPE_PROPERTY,
    META_AREAS,
    OBJECT_PROPERTY,
    Ontology,
    Term,
    parse_turtle,
    read_areas,
)
from pcm.ontology_tools import catalog
from pcm.ontology_tools.competency import FIXTURE_NAMESPACE
from pcm.ontology_tools.explain import Explanation, explain_inconsistency, explain_unsatisfiable
from pcm.ontology_tools.imports import find_catalog, load_catalog, resolve_imports, without_imports
from pcm.ontology_tools.reasoner import run_hermit
from pcm.ontology_tools.usage import (
    TermUse,
    fixture_terms,
    markdown_terms,
    query_files,
    query_terms,
    shapes_terms,
)
from pcm.ontology_tools.vocab import StandardVocabularies, default_vocab_dir, load_vocabularies

ERROR = "error"
WARNING = "warning"
INFO = "info"
SEVERITIES = (ERROR, WARNING, INFO)
_AREA = URIRef(PCM + "area")
_DATATYPE_RANGES = frozenset({str(RDFS.Literal), str(RDF.langString), str(RDF.PlainLiteral), str(RDF.XMLLiteral)})
DEFAULT_VOCAB = object()
_PACKAGE_DIR = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Finding:
    code: str
    message: str
    where: str = ""
    """``file:line`` of the problem, or the CURIE of the term it is about."""
    severity: str = ERROR

    def text(self) -> str:
        where = f"{self.where}: " if self.where else ""
        return f"[{self.severity} {self.code}] {where}{self.message}"


@dataclass
class CheckReport:
    version: str = ""
    findings: list[Finding] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds per phase: parse, reasoner, lint, usage (shapes, queries, prompts)."""
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == ERROR]

    @property
    def ok(self) -> bool:
        return not self.errors

    def text(self, *, info: bool = False) -> str:
        """Errors and warnings, one a line, most severe first; info findings too when ``info``."""
        counts = ", ".join(f"{v} {k}" for k, v in self.counts.items())
        lines = [f"pcm ontology check: ontology {self.version or '?'} ({counts})"]
        shown = [f for f in self.ordered() if info or f.severity != INFO]
        lines += [f.text() for f in shown]
        timing = ", ".join(f"{k} {v:.2f}s" for k, v in self.timings.items())
        lines.append(f"time: {timing}, total {sum(self.timings.values()):.2f}s")
        warnings = sum(f.severity == WARNING for f in self.findings)
        infos = sum(f.severity == INFO for f in self.findings)
        hidden = f" ({infos} info finding(s): --info, --json or --tsv list them)" if infos and not info else ""
        verdict = "OK" if self.ok else f"FAILED: {len(self.errors)} error(s), {warnings} warning(s)"
        lines.append(verdict + hidden)
        return "\n".join(lines)

    def ordered(self) -> list[Finding]:
        """Findings by severity (errors first), then in the order the checks found them."""
        return sorted(self.findings, key=lambda f: SEVERITIES.index(f.severity))

    def tsv(self) -> str:
        """One finding a row, as ``robot report`` writes its TSV: severity, rule, where, message."""
        def cell(value: str) -> str:
            return " ".join(value.split())  # a tab or newline inside a cell would break the row

        rows = ["Level\tRule Name\tWhere\tMessage"]
        rows += [f"{f.severity.upper()}\t{f.code}\t{cell(f.where)}\t{cell(f.message)}" for f in self.ordered()]
        return "\n".join(rows) + "\n"

    def as_json(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "version": self.version,
            "counts": self.counts,
            "timings": self.timings,
            "findings": [asdict(f) for f in self.findings],
        }


def run_check(
    *,
    ontology_dir: Path | None = None,
    shapes_dir: Path | None = None,
    queries_dir: Path | None = None,
    prompts: Iterable[Path] | None = None,
    vocab_dir: Path | None | object = DEFAULT_VOCAB,
    reasoner: bool = True,
    workdir: Path | None = None,
    catalog_file: Path | None = None,
) -> CheckReport:
    """Run every check. Directories default to the shipped ones; ``vocab_dir`` to the shipped term lists
    (:data:`~pcm.ontology_tools.vocab.SHIPPED_VOCAB`).

    ``prompts`` defaults to every prompt the package ships (``pcm/prompts/``). ``workdir`` receives the reasoner's temporary
    files (a fresh temporary directory otherwise). ``owl:imports`` are read through ``catalog_file`` (default: the
    ontology folder's ``catalog-v001.xml`` or ``catalog.toml``) and given to the reasoner with the ontology.
    """
    report = CheckReport()
    clock = _Clock(report)
    folder = Path(ontology_dir or resources.ontology_dir())
    ontology = _parse(folder, report)
    clock.lap("parse")
    if ontology is None:
        return report
    report.version = ontology.version
    report.counts.update(terms=len(ontology.terms), classes=len(ontology.classes), properties=len(ontology.properties))
    reasoned = _with_imports(ontology, catalog_file or find_catalog(folder), report)
    clock.lap("imports")
    if reasoner:
        report.findings += _reason(ontology, reasoned, workdir)
    else:
        report.findings.append(Finding("reasoner", "skipped (--no-reasoner): consistency not checked", severity=WARNING))
    clock.lap("reasoner")
    directory = default_vocab_dir() if vocab_dir is DEFAULT_VOCAB else vocab_dir
    vocab = load_vocabularies(directory)  # type: ignore[arg-type]  # not the sentinel here: a Path or None
    if vocab.directory is None:
        report.findings.append(
            Finding("nonstandard-term", "no standard vocabularies given: only RDF and XSD terms were checked", severity=WARNING)
        )
    report.findings += lint_ontology(ontology, vocab)
    report.findings += lint_conventions(ontology, folder)
    clock.lap("lint")
    report.findings += _usage(ontology, vocab, shapes_dir, queries_dir, prompts, report)
    clock.lap("usage")
    return report


class _Clock:
    def __init__(self, report: CheckReport) -> None:
        self._report = report
        self._last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self._report.timings[name] = round(now - self._last, 3)
        self._last = now


# ---------------------------------------------------------------------- parse


def _parse(directory: Path, report: CheckReport) -> Ontology | None:
    """Parse every file on its own (so each broken file is named), then build the ontology without the cache."""
    files = sorted(Path(directory).glob("*.ttl"))
    if not files:
        report.findings.append(Finding("parse", f"no .ttl file in {directory}"))
        return None
    graph, errors = parse_turtle(files)
    report.findings.extend(Finding("parse", _first_line(error), where=name) for name, error in errors.items())
    if report.findings:
        return None
    try:
        return Ontology(graph, read_areas(directory) if (Path(directory) / AREAS_FILE).is_file() else None)
    except PcmError as error:
        report.findings.append(Finding("parse", str(error)))
        return None


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return " ".join(text.split()) if text else type(error).__name__


# ---------------------------------------------------------------------- reasoner


def _with_imports(ontology: Ontology, catalog_path: Path | None, report: CheckReport) -> rdflib.Graph:
    """The graph the reasoner gets: the ontology without its ``owl:imports`` triples plus the imported files'
    triples (so it reasons over the imports and has nothing to download). An unresolved import is one finding."""
    graph = without_imports(ontology.graph)
    if not any(True for _ in ontology.graph.triples((None, OWL.imports, None))):
        return graph
    try:
        catalog = load_catalog(catalog_path)
    except InputError as error:
        report.findings.append(Finding("import", str(error)))
        return graph
    resolved = resolve_imports(ontology.graph, catalog)
    report.findings += [Finding("import", reason, where=f"<{iri}>") for iri, reason in resolved.problems]
    report.counts["imports"] = len(resolved.resolved)
    graph += resolved.graph
    return graph


#: Unsatisfiable classes explained per check (each explanation costs several reasoner runs).
EXPLAINED = 3


def _reason(ontology: Ontology, graph: rdflib.Graph, workdir: Path | None) -> list[Finding]:
    try:
        result = run_hermit(graph, workdir)
    except PcmError as error:
        return [Finding("reasoner", str(error))]
    if not result.consistent:
        why = _explained(lambda: explain_inconsistency(graph, curie=ontology.curie, workdir=workdir))
        return [Finding("inconsistent", f"HermiT finds the ontology inconsistent: no model satisfies its axioms; {why}")]
    findings = []
    for number, iri in enumerate(result.unsatisfiable):
        message = "this class can have no member (HermiT: equivalent to owl:Nothing)"
        if number < EXPLAINED:
            message += "; " + _explained(partial(explain_unsatisfiable, graph, iri, curie=ontology.curie,
                                                 workdir=workdir))
        findings.append(Finding("unsatisfiable", message, where=ontology.curie(iri)))
    return findings


def _explained(explain: Callable[[], Explanation]) -> str:
    try:
        return explain().text()
    except PcmError as error:  # the reasoner failed on a part of the ontology: say so, keep the finding
        return f"no explanation ({error})"


# ---------------------------------------------------------------------- lint of the ontology itself


def lint_ontology(ontology: Ontology, vocab: StandardVocabularies) -> list[Finding]:
    """Documentation, areas, domains and ranges of every declared term, and every IRI the ontology writes."""
    findings: list[Finding] = []
    graph = ontology.graph
    datatypes = {str(s) for s in graph.subjects(RDF.type, RDFS.Datatype)} | _DATATYPE_RANGES
    for iri in sorted(ontology.terms, key=ontology.curie):
        term = ontology.terms[iri]
        subject, name = URIRef(iri), ontology.curie(iri)
        if not any(isinstance(v, Literal) and str(v).strip() for v in graph.objects(subject, RDFS.label)):
            findings.append(Finding("missing-label", "no rdfs:label", where=name))
        if not term.comment.strip():
            findings.append(Finding("missing-comment", "no rdfs:comment", where=name))
        area = graph.value(subject, _AREA)
        if term.kind != "individual" and area is None:
            findings.append(Finding("missing-area", "no pcm:area (the catalogue groups terms by it)", where=name))
        elif area is not None and str(area) not in ontology.areas and str(area) not in META_AREAS:
            findings.append(Finding("unknown-area", f"pcm:area {str(area)!r} is not declared in {AREAS_FILE}",
                                    where=name))
        if term.kind in (OBJECT_PROPERTY, DATATYPE_PROPERTY):
            findings += _lint_property(ontology, iri, datatypes)
        findings += _lint_deprecation(ontology, term)
    findings += _lint_iris(ontology, vocab)
    findings += _lint_labels(ontology)
    findings += _lint_version(ontology)
    return findings


def _lint_labels(ontology: Ontology) -> list[Finding]:
    """``robot report``'s label rules: one label per language, no label shared by two terms, no stray spaces."""
    findings: list[Finding] = []
    by_label: dict[tuple[str, str], list[str]] = {}
    for iri in sorted(ontology.terms, key=ontology.curie):
        subject, name = URIRef(iri), ontology.curie(iri)
        labels = [v for v in ontology.graph.objects(subject, RDFS.label) if isinstance(v, Literal)]
        languages = [v.language or "" for v in labels]
        for language in sorted({lang for lang in languages if languages.count(lang) > 1}):
            shown = ", ".join(sorted(repr(str(v)) for v in labels if (v.language or "") == language))
            findings.append(Finding("multiple-labels", f"{languages.count(language)} labels in language "
                                    f"{language or '(none)'}: {shown}", where=name))
        for predicate in (RDFS.label, RDFS.comment):
            for value in ontology.graph.objects(subject, predicate):
                text = str(value)
                if isinstance(value, Literal) and (text != text.strip() or "  " in text
                                                   or (predicate == RDFS.label and "\n" in text)):
                    findings.append(Finding("annotation-whitespace", f"{ontology.curie(str(predicate))} {text!r} has "
                                            "leading, trailing or doubled whitespace", where=name, severity=WARNING))
        for value in labels:
            if (value.language or "en") == "en":
                by_label.setdefault((str(value).strip(), ontology.terms[iri].kind), []).append(iri)
    equivalent = {(str(a), str(b)) for predicate in (OWL.equivalentClass, OWL.equivalentProperty)
                  for a, b in ontology.graph.subject_objects(predicate)}
    for (label, _kind), iris in sorted(by_label.items()):
        if len(iris) < 2 or all((a, b) in equivalent or (b, a) in equivalent for a in iris for b in iris if a < b):
            continue  # one label on equivalent terms names one thing
        own = [i for i in iris if i.startswith(PCM)]
        names = ", ".join(ontology.curie(i) for i in iris)
        if len(own) >= 2:
            findings.append(Finding("duplicate-label", f"label {label!r} is also on {names}",
                                    where=ontology.curie(own[0])))
        else:
            findings.append(Finding("duplicate-label", f"label {label!r} is shared by {names} (across vocabularies)",
                                    where=ontology.curie(iris[0]), severity=INFO))
    return findings


def _lint_version(ontology: Ontology) -> list[Finding]:
    """The version IRI must name the version ``owl:versionInfo`` states (``.../0.2.0`` with ``0.2.0``)."""
    from pcm.ontology import ONTOLOGY_IRI

    version_iri = ontology.graph.value(URIRef(ONTOLOGY_IRI), OWL.versionIRI)
    if version_iri is None:
        return [Finding("version-mismatch", "no owl:versionIRI on the ontology", where=f"<{ONTOLOGY_IRI}>",
                        severity=WARNING)]
    if not str(version_iri).rstrip("/").endswith("/" + ontology.version):
        return [Finding("version-mismatch", f"owl:versionIRI <{version_iri}> does not name owl:versionInfo "
                        f"{ontology.version!r}", where=f"<{ONTOLOGY_IRI}>")]
    return []


#: Conventions an ontology file may state under a ``# Conventions`` comment, that the check can verify: a pattern
#: matching the stated line, and the rule's name.
_CONVENTION_RULES: tuple[tuple[str, str], ...] = (
    (r"no disjoint", "no-disjointness"),
    (r"pcm: properties have rdfs:domain\s*/\s*rdfs:range", "pcm-domain-range"),
    (r"every class and property carries pcm:area", "area"),
)
_DISJOINTNESS = ("disjointWith", "AllDisjointClasses", "disjointUnionOf", "propertyDisjointWith",
                 "AllDisjointProperties")


def lint_conventions(ontology: Ontology, directory: Path) -> list[Finding]:
    """Check the conventions the ontology's files write down (``# Conventions`` then ``# - ...`` lines)."""
    findings: list[Finding] = []
    for path in sorted(Path(directory).glob("*.ttl")):
        lines = path.read_text(encoding="utf-8").splitlines()
        stated: list[tuple[int, str]] = []
        for start, line in enumerate(lines):
            if not re.fullmatch(r"#\s*Conventions:?", line.strip(), re.IGNORECASE):
                continue
            for number in range(start + 1, len(lines)):
                text = lines[number].strip()
                if text.startswith("# - "):
                    stated.append((number + 1, text[4:].strip()))
                elif stated and text.startswith("#   "):  # a bullet continued on the next line
                    stated[-1] = (stated[-1][0], f"{stated[-1][1]} {text[1:].strip()}")
                else:
                    break
        for number, convention in stated:
            rule = next((name for pattern, name in _CONVENTION_RULES if re.search(pattern, convention, re.I)), None)
            where = f"{path.name}:{number}"
            if rule is None:
                findings.append(Finding("convention", f"stated, not checked automatically: {convention}", where=where,
                                        severity=INFO))
            else:
                findings += [Finding("convention", f"{problem} (convention: {convention})", where=where)
                             for problem in _convention_problems(ontology, rule)]
    return findings


def _convention_problems(ontology: Ontology, rule: str) -> list[str]:
    graph = ontology.graph
    if rule == "no-disjointness":
        owl = "http://www.w3.org/2002/07/owl#"
        found = sorted({ontology.curie(str(s)) if isinstance(s, URIRef) else "an anonymous axiom"
                        for name in _DISJOINTNESS for s, p, o in graph if str(p) == owl + name or str(o) == owl + name})
        return [f"disjointness axiom on {name}" for name in found]
    if rule == "pcm-domain-range":
        out = []
        for iri, term in sorted(ontology.terms.items()):
            if iri.startswith(PCM) and term.kind in (OBJECT_PROPERTY, DATATYPE_PROPERTY):
                for predicate, label in ((RDFS.domain, "rdfs:domain"), (RDFS.range, "rdfs:range")):
                    if graph.value(URIRef(iri), predicate) is None:
                        out.append(f"{ontology.curie(iri)} has no {label} of its own")
        return out
    return []  # "area": missing-area already reports each term


def _lint_deprecation(ontology: Ontology, term: Term) -> list[Finding]:
    """A replacement must be a live declared term; a live term must not lean on a deprecated one."""
    name, findings = ontology.curie(term.iri), []
    if term.replaced_by and not term.deprecated:
        findings.append(Finding("replaced-by", "has dcterms:isReplacedBy but is not owl:deprecated true", where=name,
                                severity=WARNING))
    for other in term.replaced_by:
        if other not in ontology.terms:
            findings.append(Finding("replaced-by", f"is replaced by {ontology.curie(other)}, which the ontology does "
                                    "not declare", where=name))
        elif ontology.terms[other].deprecated:
            findings.append(Finding("replaced-by", f"is replaced by {ontology.curie(other)}, itself deprecated",
                                    where=name))
    if not term.deprecated:
        for role, iris in (("parent", term.parents), ("domain", term.domain), ("range", term.range)):
            for other in iris:
                if other in ontology.terms and ontology.terms[other].deprecated:
                    findings.append(Finding("deprecated-term", f"its {role} {ontology.curie(other)} is deprecated",
                                            where=name, severity=WARNING))
    return findings


def _lint_property(ontology: Ontology, iri: str, datatypes: set[str]) -> list[Finding]:
    term, name = ontology.terms[iri], ontology.curie(iri)
    inherited = [ontology.terms[p] for p in ontology.superproperties(iri) if p in ontology.terms]
    findings = []
    if not any(t.domain for t in inherited):
        findings.append(Finding("missing-domain", "no rdfs:domain or schema:domainIncludes (own or inherited)", where=name))
    ranges = next((t.range for t in [term, *inherited] if t.range), ())
    if not ranges:
        findings.append(Finding("missing-range", "no rdfs:range or schema:rangeIncludes (own or inherited)", where=name))

    def is_datatype(value: str) -> bool:
        return value.startswith(XSD) or value in datatypes

    if term.kind == DATATYPE_PROPERTY and any(not is_datatype(r) for r in ranges):
        shown = ", ".join(ontology.curie(r) for r in ranges if not is_datatype(r))
        findings.append(Finding("range-kind", f"a datatype property whose range is a class ({shown})", where=name))
    if term.kind == OBJECT_PROPERTY and any(is_datatype(r) for r in ranges):
        shown = ", ".join(ontology.curie(r) for r in ranges if is_datatype(r))
        findings.append(Finding("range-kind", f"an object property whose range is a datatype ({shown})", where=name))
    return findings


def _lint_iris(ontology: Ontology, vocab: StandardVocabularies) -> list[Finding]:
    """Every IRI written in the ontology files: declared if under a vocabulary namespace, real if standard."""
    findings = []
    iris = {str(n) for triple in ontology.graph for n in triple if isinstance(n, URIRef)}
    for iri in sorted(iris):
        problem = term_problem(iri, ontology, vocab)
        if problem is not None:
            findings.append(Finding(problem[0], problem[1], where=f"pcm_ontology ({ontology.curie(iri)})"))
    return findings


def term_problem(iri: str, ontology: Ontology, vocab: StandardVocabularies) -> tuple[str, str] | None:
    """``(code, message)`` when a written IRI is not a term pcm may use, else ``None``."""
    name = ontology.curie(iri)
    if iri.startswith(SCHEMA_HTTP):
        return "schema-http", f"{iri} uses http://schema.org/; pcm spells schema.org https://schema.org/"
    if iri.startswith(VOCABULARY_NAMESPACES) and not ontology.defines(iri):
        unknown = " (nor does its published vocabulary)" if vocab.is_unknown(iri) else ""
        return "undefined-term", f"{name} is not declared by the PCM ontology{unknown}{_did_you_mean(iri, ontology.terms, ontology)}"
    if vocab.is_unknown(iri):
        namespace = vocab.namespace_of(iri) or ""
        near = _did_you_mean(iri, [t for t in vocab.terms if t.startswith(namespace)], ontology)
        return "nonstandard-term", f"{name} is not defined by the published vocabulary <{namespace}>{near}"
    return None


def _did_you_mean(iri: str, candidates: Iterable[str], ontology: Ontology) -> str:
    """``; did you mean pcm:petSpecies?`` for a misspelt term (the closest declared names, case aside)."""
    namespace = re.match(r".*[#/]", iri)
    prefix = namespace.group(0) if namespace else ""
    local = {c[len(prefix):].lower(): c for c in candidates if c.startswith(prefix) and c != iri}
    found = difflib.get_close_matches(iri[len(prefix):].lower(), list(local), n=2, cutoff=0.75)
    return f"; did you mean {' or '.join(ontology.curie(local[f]) for f in found)}?" if found else ""


# ---------------------------------------------------------------------- shapes, queries, prompts


def _usage(
    ontology: Ontology,
    vocab: StandardVocabularies,
    shapes_dir: Path | None,
    queries_dir: Path | None,
    prompts: Iterable[Path] | None,
    report: CheckReport,
) -> list[Finding]:
    findings: list[Finding] = []
    root = resources.ontology_dir().resolve().parent
    shapes = sorted((shapes_dir or resources.shapes_dir()).glob("*.ttl"))
    uses: list[TermUse] = []
    for path in shapes:
        try:
            uses += shapes_terms([path])
        except Exception as error:  # rdflib's Turtle errors have no common base class
            findings.append(Finding("parse", _first_line(error), where=path.name))
    queries = query_files(queries_dir or resources.queries_dir())
    if queries_dir is None:  # modules may keep their SPARQL beside them (src/pcm/<module>/queries/)
        queries += [p for folder in sorted(_PACKAGE_DIR.rglob("queries")) if folder.is_dir() for p in query_files(folder)]
    uses += query_terms(queries)
    fixtures = sorted(p for p in (queries_dir or resources.queries_dir()).rglob("*.trig") if p.is_file())
    for path in fixtures:
        try:
            uses += fixture_terms([path], header=turtle_prefixes() + f"@prefix m: <{FIXTURE_NAMESPACE}> .\n")
        except SyntaxError as error:
            findings.append(Finding("parse", _first_line(error), where=_relative(path, root)))
    prompt_paths = catalog.prompt_files() if prompts is None else sorted(prompts)
    for path in prompt_paths:
        text = path.read_text(encoding="utf-8")
        try:
            spans = catalog.section_spans(text, str(path))
            if catalog.refreshed(text, ontology, str(path)) != text:
                findings.append(
                    Finding("stale-catalogue", "catalogue section is stale: run `pcm ontology catalog --write`",
                            where=_relative(path, root))
                )
        except InputError as error:
            findings.append(Finding("catalogue-marker", str(error)))
            spans = []
        uses += markdown_terms(text, path, skip=spans)
    report.counts.update(shapes=len(shapes), queries=len(queries), fixtures=len(fixtures), prompts=len(prompt_paths))
    seen: set[tuple[str, Path]] = set()
    for use in uses:
        if (use.iri, use.path) in seen:
            continue
        seen.add((use.iri, use.path))
        problem = term_problem(use.iri, ontology, vocab)
        if problem is not None:
            findings.append(Finding(problem[0], problem[1], where=use.where(root)))
        elif use.iri in ontology.terms and ontology.terms[use.iri].deprecated:
            instead = ", ".join(ontology.curie(r) for r in ontology.terms[use.iri].replaced_by)
            findings.append(Finding("deprecated-term", f"{ontology.curie(use.iri)} is deprecated"
                                    + (f"; use {instead}" if instead else ""), where=use.where(root), severity=WARNING))
    return findings


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root))
    except ValueError:
        return str(path)

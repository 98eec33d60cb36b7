"""``pcm ontology rename OLD NEW``: rename a term everywhere it is written, and write the data's migration script.

A term is written in the ontology files, the SHACL shapes, the SPARQL queries (competency questions with their
fixtures and expected results included) and the prompts. Renaming it by hand means finding each, and a missed one
surfaces later as an ``undefined-term`` or an empty answer. This rewrites every full IRI (``<...#old>``) and every
prefixed name (with pcm's shared prefixes or the file's own ``@prefix`` / ``PREFIX`` lines), regenerates the prompts'
catalogue sections, bumps ``owl:versionInfo`` when the ontology is still at the released version (a rename breaks
stored data), and writes the migration script that moves stored data to the new name. Python files are not
rewritten, only reported: code that names a term may mean something else by the same text.
"""

from __future__ import annotations

import difflib
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pcm import resources
from pcm.errors import UsageError
from pcm.namespaces import PREFIXES
from pcm.ontology import Ontology
from pcm.ontology_tools import catalog
from pcm.ontology_tools.diff import load_version
from pcm.ontology_tools.migrate import (
    migrations_dir,
    replacement_script,
    version_tuple,
    write_replacement_script,
)

_PREFIX_LINE = re.compile(r"(?i)(?:@prefix|\bPREFIX)\s+([A-Za-z][\w.-]*)?:\s*<([^>]*)>")
_VERSION_INFO = re.compile(r'(owl:versionInfo\s+")([^"]+)(")')
_TEXT_SUFFIXES = (".ttl", ".trig", ".rq", ".ru", ".json", ".md")


@dataclass
class RenameResult:
    old: str
    new: str
    from_version: str
    to_version: str
    changes: dict[Path, tuple[str, str]] = field(default_factory=dict)
    """file -> (text before, text after), for every file the rename changes."""
    script: tuple[Path, str] | None = None
    """The migration script written (or, in a dry run, that would be)."""
    python_mentions: list[str] = field(default_factory=list)
    """``file:line`` of Python source naming the old term: left for a person to judge."""
    written: bool = False

    def diff(self) -> str:
        """A unified diff of every change and of the new script, paths relative to the working directory."""
        out: list[str] = []
        for path, (before, after) in sorted(self.changes.items()):
            out += difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                        fromfile=f"a/{_shown(path)}", tofile=f"b/{_shown(path)}")
        if self.script is not None:
            out += difflib.unified_diff([], self.script[1].splitlines(keepends=True), fromfile="/dev/null",
                                        tofile=f"b/{_shown(self.script[0])}")
        return "".join(line if line.endswith("\n") else line + "\n" for line in out)

    def summary(self) -> list[str]:
        verb = "renamed" if self.written else "would rename (dry run)"
        lines = [f"{verb} <{self.old}> -> <{self.new}> in {len(self.changes)} file(s); ontology "
                 f"{self.from_version} -> {self.to_version}"]
        if self.script is not None:
            lines.append(f"migration script: {self.script[0]}")
        if self.python_mentions:
            lines.append("Python source still naming the old term (not changed): " + ", ".join(self.python_mentions))
        return lines

    def as_json(self) -> dict[str, object]:
        return {"old": self.old, "new": self.new, "from_version": self.from_version, "to_version": self.to_version,
                "files": [str(p) for p in sorted(self.changes)], "script": str(self.script[0]) if self.script else None,
                "python_mentions": self.python_mentions, "written": self.written}


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path).lstrip("/")


def expand(term: str) -> str:
    """A CURIE with one of pcm's prefixes, or ``<IRI>`` / an IRI, as a full IRI."""
    term = term.strip().removeprefix("<").removesuffix(">")
    prefix, sep, local = term.partition(":")
    if sep and prefix in PREFIXES and not local.startswith("//"):
        return PREFIXES[prefix] + local
    if "://" not in term:
        raise UsageError(f"{term!r}: give a CURIE with a known prefix ({', '.join(PREFIXES)}) or a full IRI")
    return term


def rename_text(text: str, old: str, new: str) -> str:
    """``text`` with every full IRI and prefixed name of ``old`` written as ``new`` (same style)."""
    text = text.replace(f"<{old}>", f"<{new}>")
    prefixes = {**PREFIXES, **{m.group(1) or "": m.group(2) for m in _PREFIX_LINE.finditer(text)}}
    for prefix, namespace in sorted(prefixes.items(), key=lambda item: -len(item[1])):
        if not (old.startswith(namespace) and len(old) > len(namespace)):
            continue
        local = old[len(namespace):]
        if new.startswith(namespace) and re.fullmatch(r"[A-Za-z_][\w-]*", new[len(namespace):]):
            replacement = f"{prefix}:{new[len(namespace):]}"
        else:
            replacement = f"<{new}>"
        pattern = re.compile(r"(?<![\w/.:#<-])" + re.escape(f"{prefix}:{local}") + r"(?![\w-]|\.[\w-])")
        text = pattern.sub(replacement.replace("\\", "\\\\"), text)  # a literal replacement
    return text


def next_minor(version: str) -> str:
    parts = [int(p) if p.isdigit() else 0 for p in version.split(".")] + [0, 0]
    return f"{parts[0]}.{parts[1] + 1}.0"


def rename_term(
    old_term: str,
    new_term: str,
    *,
    ontology_dir: Path | None = None,
    shapes_dir: Path | None = None,
    queries_dirs: Iterable[Path] | None = None,
    prompts_root: Path | None = None,
    migrations: Path | None = None,
    python_roots: Iterable[Path] | None = None,
    from_version: str | None = None,
    to_version: str | None = None,
    write: bool = True,
) -> RenameResult:
    """Rename ``old_term`` to ``new_term`` in every file that writes it (see the module docstring).

    ``from_version`` is the released version memories hold (default: the ontology's current one); ``to_version``
    the version after the rename (default: the current one when already newer, else the next minor version).
    """
    folder = Path(ontology_dir or resources.ontology_dir())
    before = load_version(folder)
    old, new = expand(old_term), expand(new_term)
    if old not in before.terms:
        raise UsageError(f"{before.curie(old)} is not declared by the ontology in {folder}")
    if new in before.terms:
        raise UsageError(f"{before.curie(new)} is already declared: merge the two by deprecating one instead")
    source = from_version or before.version
    if to_version is None:
        to_version = before.version if version_tuple(before.version) > version_tuple(source) else next_minor(source)
    if version_tuple(to_version) <= version_tuple(source):
        raise UsageError(f"the version after the rename ({to_version}) must be newer than {source}")

    result = RenameResult(old, new, source, to_version)
    texts: dict[Path, str] = {}
    roots = [folder, Path(shapes_dir or resources.shapes_dir()), *(queries_dirs or _default_queries())]
    for root in roots:
        for path in sorted(root.rglob("*") if root != folder else root.glob("*.ttl")):
            if path.is_file() and path.suffix in _TEXT_SUFFIXES and "migrations" not in path.parts[len(root.parts):]:
                texts[path] = path.read_text(encoding="utf-8")
    prompt_paths = catalog.prompt_files(prompts_root)
    for path in prompt_paths:
        texts[path] = path.read_text(encoding="utf-8")
    after = {path: rename_text(text, old, new) for path, text in texts.items()}
    for path in folder.glob("*.ttl"):
        bumped = _VERSION_INFO.sub(lambda m: m.group(1) + to_version + m.group(3), after[path])
        if bumped != after[path]:
            after[path] = bumped.replace(f"/{before.version}>", f"/{to_version}>")  # the owl:versionIRI
    renamed = _ontology_of({p: after[p] for p in folder.glob("*.ttl")})
    for path in prompt_paths:
        after[path] = catalog.refreshed(after[path], renamed, str(path))
    result.changes = {p: (texts[p], after[p]) for p in texts if after[p] != texts[p]}

    target = migrations or (migrations_dir() if ontology_dir is None else folder / "migrations")
    label = "rename-" + re.sub(r"[^\w-]", "-", old.rstrip("/#").rsplit("#", 1)[-1].rsplit("/", 1)[-1])
    script_path = target / f"{source}-to-{to_version}.{label}.ru"
    result.script = (script_path, replacement_script(renamed, {old: new}))
    if script_path.exists():
        raise UsageError(f"{script_path} already exists; delete it or edit it by hand")
    result.python_mentions = _python_mentions(old, python_roots)
    if write:
        for path, (_, text) in result.changes.items():
            path.write_text(text, encoding="utf-8")
        written = write_replacement_script(renamed, source, target, label=label, replacements={old: new})
        assert written == script_path
        result.written = True
    return result


def _default_queries() -> list[Path]:
    """The shipped queries folder and the ``queries/`` folders beside the modules (as ``check`` scans them)."""
    package = Path(__file__).resolve().parents[1]
    return [resources.queries_dir(), *sorted(p for p in package.rglob("queries") if p.is_dir())]


def _ontology_of(files: dict[Path, str]) -> Ontology:
    """The ontology the rewritten files describe (parsed from a scratch copy: nothing is written yet)."""
    with tempfile.TemporaryDirectory(prefix="pcm-rename-") as scratch:
        for path, text in files.items():
            (Path(scratch) / path.name).write_text(text, encoding="utf-8")
        return load_version(Path(scratch))


def _python_mentions(old: str, roots: Iterable[Path] | None) -> list[str]:
    if roots is None:
        package = Path(__file__).resolve().parents[1]
        roots = [package, package.parent.parent / "tests"]
    names = {f"<{old}>", old}
    names |= {f"{p}:{old[len(ns):]}" for p, ns in PREFIXES.items() if old.startswith(ns) and len(old) > len(ns)}
    found = []
    for root in roots:
        for path in sorted(Path(root).rglob("*.py")) if Path(root).is_dir() else []:
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if any(re.search(re.escape(n) + r"(?![\w-])", line) for n in names):
                    found.append(f"{path}:{number}")
    return found

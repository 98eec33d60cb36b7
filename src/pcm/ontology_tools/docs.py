"""``pcm ontology docs``: an HTML and a Markdown reference of the ontology, as pyLODE or Widoco would write one.

Both are generated from the loaded :class:`~pcm.ontology.Ontology`, so they cannot drift from it: metadata and
namespaces, a summary of the areas, the class hierarchy as a tree, then every term of every area with its label,
IRI, comment, parents and children, domain and range, the properties used on a class and those whose values it is,
inverses and equivalents. Examples come from the competency fixtures (``queries/competency/*.trig``): the first
statement that uses the term, and the competency questions whose queries name it, so every example shown is one a
test has run. Each term also lists the SHACL rules (``shapes/``) that name it, and a deprecated term is marked with
its replacement. The HTML is one self-contained page (inline CSS, a few lines of inline script for the search box,
no network). The output depends on the ontology, shapes and competency files only (no build time), so a rebuild of
an unchanged ontology is byte-identical.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from rdflib import OWL, Graph, URIRef

from pcm.namespaces import PREFIXES
from pcm.ontology import (
    ANNOTATION_PROPERTY,
    CLASS,
    DATATYPE_PROPERTY,
    INDIVIDUAL,
    OBJECT_PROPERTY,
    ONTOLOGY_IRI,
    Ontology,
    Term,
)
from pcm.ontology_tools.competency import competency_dir, load_questions
from pcm.ontology_tools.usage import sparql_terms

KIND_TITLES = {
    CLASS: "Classes",
    OBJECT_PROPERTY: "Object properties",
    DATATYPE_PROPERTY: "Datatype properties",
    ANNOTATION_PROPERTY: "Annotation properties",
    INDIVIDUAL: "Individuals",
}
_KIND_NAMES = {
    CLASS: "class",
    OBJECT_PROPERTY: "object property",
    DATATYPE_PROPERTY: "datatype property",
    ANNOTATION_PROPERTY: "annotation property",
    INDIVIDUAL: "individual",
}


@dataclass
class Examples:
    """What the competency suite shows of each term."""

    snippets: dict[str, tuple[str, str]] = field(default_factory=dict)
    """term IRI -> (question name, the first fixture statement that uses the term)."""
    questions: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    """term IRI -> [(question name, question text)] for every query that names the term."""


def collect_examples(ontology: Ontology, directory: Path | None = None) -> Examples:
    examples = Examples()
    folder = directory or competency_dir()
    if not folder.is_dir():
        return examples
    names = {ontology.curie(iri): iri for iri in ontology.terms}
    for question in load_questions(folder):
        for iri in sorted({u.iri for u in sparql_terms(question.query, Path(question.name))}):
            if iri in ontology.terms:
                examples.questions.setdefault(iri, []).append((question.name, question.question))
        for statement in _statements(question.fixture.read_text(encoding="utf-8")):
            for token in set(re.findall(r"[A-Za-z][\w-]*:[A-Za-z_][\w-]*", statement)):
                named = names.get(token)
                if named is not None and named not in examples.snippets:
                    examples.snippets[named] = (question.name, statement)
    return examples


def _statements(text: str) -> Iterable[str]:
    """Top-level Turtle statements of a fixture (GRAPH blocks included, one statement at a time)."""
    current: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or stripped.startswith("GRAPH") or stripped == "}":
            continue
        current.append(stripped)
        if stripped.endswith(" .") or stripped == ".":
            yield "\n    ".join(current)
            current = []


def shape_rules(directory: Path | None = None) -> dict[str, list[tuple[str, str]]]:
    """Term IRI -> [(rule id, message)] for every shape (``pcmsh:rule``) whose description names the term."""
    import rdflib
    from rdflib import BNode

    from pcm import resources

    graph = rdflib.Graph()
    for path in sorted(Path(directory or resources.shapes_dir()).glob("*.ttl")):
        graph.parse(path, format="turtle")
    rule = URIRef(_PCMSH + "rule")
    found: dict[str, list[tuple[str, str]]] = {}
    for shape, name in sorted(graph.subject_objects(rule), key=lambda pair: str(pair[1])):
        message = str(graph.value(shape, URIRef("http://www.w3.org/ns/shacl#message")) or "")
        named: set[str] = set()
        stack, seen = [shape], set()
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            for _, value in graph.predicate_objects(node):
                if isinstance(value, BNode):
                    stack.append(value)
                elif isinstance(value, URIRef) and not str(value).startswith(("http://www.w3.org/ns/shacl#", _PCMSH)):
                    named.add(str(value))
        for iri in named:
            found.setdefault(iri, []).append((str(name), message))
    return found


_PCMSH = "https://w3id.org/pcm/shapes#"


def write_docs(
    ontology: Ontology, out_dir: Path, *, formats: Iterable[str] = ("html", "md"), examples: Examples | None = None,
    shapes_dir: Path | None = None,
) -> list[Path]:
    """Write ``index.html`` and/or ``ontology.md`` into ``out_dir``; returns the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    model = _Model(ontology, examples if examples is not None else collect_examples(ontology), shape_rules(shapes_dir))
    written = []
    for fmt in formats:
        if fmt == "html":
            path = out_dir / "index.html"
            path.write_text(render_html(model), encoding="utf-8")
        elif fmt == "md":
            path = out_dir / "ontology.md"
            path.write_text(render_markdown(model), encoding="utf-8")
        else:
            raise ValueError(f"unknown docs format {fmt!r}")
        written.append(path)
    return written


# ---------------------------------------------------------------------- the shared model of the page


class _Model:
    """Everything both renderers need, computed once."""

    def __init__(self, ontology: Ontology, examples: Examples, rules: dict[str, list[tuple[str, str]]] | None = None) -> None:
        self.onto = ontology
        self.examples = examples
        self.rules = rules or {}
        graph = ontology.graph
        meta = URIRef(ONTOLOGY_IRI)
        self.title = str(graph.value(meta, URIRef("http://purl.org/dc/terms/title")) or "PCM ontology")
        self.description = str(graph.value(meta, URIRef("http://www.w3.org/2000/01/rdf-schema#comment")) or "")
        self.version_iri = str(graph.value(meta, OWL.versionIRI) or "")
        self.children: dict[str, list[str]] = {}
        self.used_on: dict[str, list[str]] = {}
        self.value_of: dict[str, list[str]] = {}
        self.members: dict[str, list[str]] = {}
        for iri, term in ontology.terms.items():
            for parent in term.parents:
                target = self.members if term.kind == INDIVIDUAL else self.children
                target.setdefault(parent, []).append(iri)
            if term.kind in (OBJECT_PROPERTY, DATATYPE_PROPERTY):
                for cls in term.domain:
                    self.used_on.setdefault(cls, []).append(iri)
                for cls in term.range:
                    self.value_of.setdefault(cls, []).append(iri)
        for lists in (self.children, self.used_on, self.value_of, self.members):
            for key in lists:
                lists[key].sort(key=ontology.curie)
        self.inverse = _pairs(graph, OWL.inverseOf)
        self.equivalent = _pairs(graph, OWL.equivalentClass) | _pairs(graph, OWL.equivalentProperty)
        self.areas = [a for a in ontology.areas if any(t.area == a for t in ontology.terms.values())]
        self.areas += sorted({t.area for t in ontology.terms.values()} - set(ontology.areas))

    def terms_of(self, area: str, kind: str) -> list[Term]:
        chosen = [t for t in self.onto.terms.values() if t.area == area and t.kind == kind]
        return sorted(chosen, key=lambda t: self.onto.curie(t.iri))

    def roots(self) -> list[str]:
        classes = self.onto.classes
        return sorted(
            (c for c in classes if not any(p in classes for p in self.onto.terms[c].parents)), key=self.onto.curie
        )

    def property_roots(self) -> list[str]:
        """Object and datatype properties with no declared superproperty: the tops of the property tree."""
        props = {i for i, t in self.onto.terms.items() if t.kind in (OBJECT_PROPERTY, DATATYPE_PROPERTY)}
        return sorted((p for p in props if not any(q in props for q in self.onto.terms[p].parents)), key=self.onto.curie)

    def facts(self, term: Term) -> list[tuple[str, list[str]]]:
        """(label, IRIs) rows describing a term, in display order; empty rows are dropped."""
        rows: list[tuple[str, list[str]]] = []
        if term.kind == INDIVIDUAL:
            rows.append(("type", list(term.parents)))
        else:
            rows.append(("subclass of" if term.kind == CLASS else "subproperty of", list(term.parents)))
            rows.append(("superclass of" if term.kind == CLASS else "superproperty of", self.children.get(term.iri, [])))
        if term.kind in (OBJECT_PROPERTY, DATATYPE_PROPERTY, ANNOTATION_PROPERTY):
            rows.append(("domain", list(term.domain)))
            rows.append(("range", list(term.range)))
        rows.append(("replaced by", list(term.replaced_by)))
        rows.append(("inverse of", sorted(self.inverse.get(term.iri, ()), key=self.onto.curie)))
        rows.append(("equivalent to", sorted(self.equivalent.get(term.iri, ()), key=self.onto.curie)))
        if term.kind == CLASS:
            rows.append(("properties used on it", self.used_on.get(term.iri, [])))
            rows.append(("value of", self.value_of.get(term.iri, [])))
            rows.append(("members", self.members.get(term.iri, [])))
        return [(label, values) for label, values in rows if values]

    def flags(self, term: Term) -> list[str]:
        found = [_KIND_NAMES[term.kind]]
        if term.deprecated:
            found.insert(0, "DEPRECATED: not offered to extraction; use its replacement")
        if term.iri in self.onto.functional_properties:
            found.append("functional: one value at a time")
        return found


def _pairs(graph: Graph, predicate: URIRef) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for left, right in graph.subject_objects(predicate):
        if isinstance(left, URIRef) and isinstance(right, URIRef):
            out.setdefault(str(left), set()).add(str(right))
            out.setdefault(str(right), set()).add(str(left))
    return out


def anchor(curie: str) -> str:
    """A fragment id for a term: ``schema:BuyAction`` → ``schema-BuyAction``."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", curie.strip("<>"))


# ---------------------------------------------------------------------- Markdown


def render_markdown(model: _Model) -> str:
    onto = model.onto
    lines = [f"# {model.title}", "", model.description, "", f"- IRI: <{ONTOLOGY_IRI}>", f"- Version: {onto.version}"]
    if model.version_iri:
        lines.append(f"- Version IRI: <{model.version_iri}>")
    lines += [f"- Content digest: `{onto.digest}`", "- Generated by `pcm ontology docs`", "", "## Namespaces", "",
              "| prefix | namespace |",
              "| --- | --- |"]
    lines += [f"| `{p}:` | <{ns}> |" for p, ns in PREFIXES.items()]
    lines += ["", "## Areas", "", "| area | classes | properties | individuals |", "| --- | --- | --- | --- |"]
    for area in model.areas:
        counts = _counts(model, area)
        lines.append(f"| [{area}](#area-{area}) | {counts[0]} | {counts[1]} | {counts[2]} |")
    lines += ["", "## Class hierarchy", ""]
    lines += _markdown_tree(model)
    lines += ["", "## Property hierarchy", ""]
    lines += _markdown_tree(model, properties=True)
    for area in model.areas:
        lines += ["", f'<a id="area-{area}"></a>', "", f"## Area: {area}"]
        for kind, title in KIND_TITLES.items():
            terms = model.terms_of(area, kind)
            if not terms:
                continue
            lines += ["", f"### {title}"]
            for term in terms:
                lines += _markdown_term(model, term)
    return "\n".join(lines).rstrip() + "\n"


def _markdown_tree(model: _Model, *, properties: bool = False) -> list[str]:
    lines: list[str] = []

    def walk(iri: str, depth: int, path: frozenset[str]) -> None:
        lines.append(f"{'  ' * depth}- {_md_link(model, iri)}")
        for child in model.children.get(iri, []):
            if child not in path:
                walk(child, depth + 1, path | {child})

    for root in model.property_roots() if properties else model.roots():
        walk(root, 0, frozenset({root}))
    return lines


def _markdown_term(model: _Model, term: Term) -> list[str]:
    curie = model.onto.curie(term.iri)
    heading = f"~~{curie}~~ (deprecated)" if term.deprecated else curie
    lines = ["", f'<a id="{anchor(curie)}"></a>', "", f"#### {heading}", "",
             f"**{term.label}** ({', '.join(model.flags(term))}) — <{term.iri}>", ""]
    if term.comment:
        lines += [term.comment, ""]
    for label, values in model.facts(term):
        lines.append(f"- {label}: {', '.join(_md_link(model, v) for v in values)}")
    for name, message in model.rules.get(term.iri, []):
        lines.append(f"- SHACL rule `{name}`: {message}")
    example = model.examples.snippets.get(term.iri)
    if example:
        lines += ["", f"Example (competency fixture `{example[0]}`):", "", "```turtle", example[1], "```"]
    questions = model.examples.questions.get(term.iri, [])
    if questions:
        lines += ["", "Competency questions: " + "; ".join(f"*{text}* (`{name}`)" for name, text in questions)]
    return lines


def _md_link(model: _Model, iri: str) -> str:
    curie = model.onto.curie(iri)
    return f"[`{curie}`](#{anchor(curie)})" if iri in model.onto.terms else f"`{curie}`"


# ---------------------------------------------------------------------- HTML

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,'Liberation Sans',sans-serif;margin:0;color:#1d2330;
line-height:1.45;background:#fafbfc}
header{background:#23395d;color:#fff;padding:1.4rem 2rem}header h1{margin:0 0 .3rem}header p{margin:.2rem 0}
header a{color:#cfe0ff}header code{background:#34507e;color:#fff}
.layout{display:flex;align-items:flex-start}
nav{position:sticky;top:0;max-height:100vh;overflow:auto;min-width:13rem;padding:1rem;background:#eef1f6;
border-right:1px solid #d7dce5;font-size:.92rem}nav a{display:block;color:#23395d;text-decoration:none;padding:.1rem 0}
main{padding:1rem 2rem;max-width:70rem;min-width:0;flex:1;overflow-wrap:anywhere}
h2{border-bottom:2px solid #23395d;padding-bottom:.2rem;margin-top:2.2rem}
table{border-collapse:collapse;margin:.6rem 0}td,th{border:1px solid #d7dce5;padding:.25rem .6rem;text-align:left}
th{background:#eef1f6}
.term{background:#fff;border:1px solid #d7dce5;border-radius:6px;padding:.7rem 1rem;margin:.8rem 0}
.term h4{margin:0;font-size:1.05rem}.term .iri{color:#5b6475;font-size:.85rem;word-break:break-all}
.deprecated{border-color:#c9a227;background:#fffbea}.deprecated h4{text-decoration:line-through}
.kind{display:inline-block;font-size:.75rem;background:#dbe7ff;color:#23395d;border-radius:3px;padding:0 .4rem;
margin-left:.4rem}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.15rem .8rem;margin:.5rem 0}dt{color:#5b6475}dd{margin:0}
code{background:#f1f3f7;padding:0 .2rem;border-radius:3px}pre{background:#f1f3f7;padding:.6rem;overflow:auto}
ul.tree{font-size:.92rem}ul.tree ul{margin:0;padding-left:1.2rem}
"""


def render_html(model: _Model) -> str:
    onto = model.onto
    esc = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{esc(model.title)} {esc(onto.version)}</title>",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<style>{_CSS}</style></head><body>",
        f"<header><h1>{esc(model.title)}</h1><p>{esc(model.description)}</p>",
        f'<p>IRI <a href="{esc(ONTOLOGY_IRI)}">{esc(ONTOLOGY_IRI)}</a> · version {esc(onto.version)}'
        f" · {len(onto.classes)} classes · {len(onto.properties)} properties · {len(onto.individuals)} individuals"
        f" · content digest <code>{esc(onto.digest[:19])}</code> · generated by <code>pcm ontology docs</code></p>"
        + (f'<p>version IRI <a href="{esc(model.version_iri)}">{esc(model.version_iri)}</a></p>' if model.version_iri
           else "")
        + '<p><input id="search" type="search" placeholder="Search terms (name, label, comment)" '
        'aria-label="Search terms" size="40"></p></header>',
        '<div class="layout"><nav><a href="#namespaces">Namespaces</a><a href="#areas">Areas</a>'
        '<a href="#hierarchy">Class hierarchy</a><a href="#property-hierarchy">Property hierarchy</a>',
    ]
    parts += [f'<a href="#area-{esc(a)}">{esc(a)}</a>' for a in model.areas]
    parts.append("</nav><main>")
    parts.append('<h2 id="namespaces">Namespaces</h2><table><tr><th>prefix</th><th>namespace</th></tr>')
    parts += [f"<tr><td><code>{esc(p)}:</code></td><td>{esc(ns)}</td></tr>" for p, ns in PREFIXES.items()]
    parts.append('</table><h2 id="areas">Areas</h2><table><tr><th>area</th><th>classes</th><th>properties</th>'
                 "<th>individuals</th></tr>")
    for area in model.areas:
        c, p, i = _counts(model, area)
        parts.append(f'<tr><td><a href="#area-{esc(area)}">{esc(area)}</a></td><td>{c}</td><td>{p}</td><td>{i}</td></tr>')
    parts.append('</table><h2 id="hierarchy">Class hierarchy</h2><ul class="tree">')
    parts += _html_tree(model)
    parts.append('</ul><h2 id="property-hierarchy">Property hierarchy</h2><ul class="tree">')
    parts += _html_tree(model, properties=True)
    parts.append("</ul>")
    for area in model.areas:
        parts.append(f'<h2 id="area-{esc(area)}">Area: {esc(area)}</h2>')
        for kind, title in KIND_TITLES.items():
            terms = model.terms_of(area, kind)
            if terms:
                parts.append(f"<h3>{esc(title)}</h3>")
                parts += [_html_term(model, t) for t in terms]
    parts.append(f"</main></div><script>{_SEARCH}</script></body></html>")
    return "\n".join(parts) + "\n"


def _html_tree(model: _Model, *, properties: bool = False) -> list[str]:
    out: list[str] = []

    def walk(iri: str, path: frozenset[str]) -> None:
        children = [c for c in model.children.get(iri, []) if c not in path]
        out.append(f"<li>{_html_link(model, iri)}")
        if children:
            out.append("<ul>")
            for child in children:
                walk(child, path | {child})
            out.append("</ul>")
        out.append("</li>")

    for root in model.property_roots() if properties else model.roots():
        walk(root, frozenset({root}))
    return out


def _html_term(model: _Model, term: Term) -> str:
    esc = html.escape
    curie = model.onto.curie(term.iri)
    kinds = "".join(f'<span class="kind">{esc(f)}</span>' for f in model.flags(term))
    parts = [
        f'<section class="term{" deprecated" if term.deprecated else ""}" id="{esc(anchor(curie))}">'
        f"<h4>{esc(curie)} — {esc(term.label)}{kinds}</h4>",
        f'<div class="iri">{esc(term.iri)}</div>',
    ]
    if term.comment:
        parts.append(f"<p>{esc(term.comment)}</p>")
    facts = model.facts(term)
    if facts:
        parts.append("<dl>")
        for label, values in facts:
            parts.append(f"<dt>{esc(label)}</dt><dd>{', '.join(_html_link(model, v) for v in values)}</dd>")
        parts.append("</dl>")
    rules = model.rules.get(term.iri, [])
    if rules:
        items = "".join(f"<li><code>{esc(name)}</code>: {esc(message)}</li>" for name, message in rules)
        parts.append(f"<p>SHACL rules:</p><ul>{items}</ul>")
    example = model.examples.snippets.get(term.iri)
    if example:
        parts.append(f"<p>Example (competency fixture <code>{esc(example[0])}</code>):</p><pre>{esc(example[1])}</pre>")
    questions = model.examples.questions.get(term.iri, [])
    if questions:
        items = "".join(f"<li>{esc(text)} (<code>{esc(name)}</code>)</li>" for name, text in questions)
        parts.append(f"<p>Competency questions:</p><ul>{items}</ul>")
    parts.append("</section>")
    return "".join(parts)


def _html_link(model: _Model, iri: str) -> str:
    curie = model.onto.curie(iri)
    if iri in model.onto.terms:
        return f'<a href="#{html.escape(anchor(curie))}"><code>{html.escape(curie)}</code></a>'
    return f"<code>{html.escape(curie)}</code>"


def _counts(model: _Model, area: str) -> tuple[int, int, int]:
    terms = [t for t in model.onto.terms.values() if t.area == area]
    classes = sum(t.kind == CLASS for t in terms)
    individuals = sum(t.kind == INDIVIDUAL for t in terms)
    return classes, len(terms) - classes - individuals, individuals


#: The search box: hide the term sections (and emptied area headings) whose text lacks every typed word.
_SEARCH = (
    "document.getElementById('search').addEventListener('input',function(e){"
    "var words=e.target.value.toLowerCase().split(/\\s+/).filter(Boolean);"
    "document.querySelectorAll('section.term').forEach(function(s){var t=s.textContent.toLowerCase();"
    "s.hidden=!words.every(function(w){return t.indexOf(w)>=0;});});});"
)

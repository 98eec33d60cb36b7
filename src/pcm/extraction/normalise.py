"""From what a model wrote to triples pcm can check: strip prose, complete prefixes, parse, re-home, refuse.

Models wrap Turtle in fences and chatter, forget @prefix lines, write ``http://schema.org/``, and invent their own
namespaces for individuals (``ex:biscuit``, ``:biscuit``, ``<http://example.org/dana>``). Small models also write
individuals in the ontology's own namespace, as the seed paper's examples do (``pcm:user``,
``pcm:silver-honda-civic``), and redeclare a known prefix with a wrong IRI (``@prefix pcm:
<https://pcm.org/ontology/>``). All of that is fixed here, deterministically, so that a repair round is spent only
on what needs the model's judgement: a known prefix is bound back to its namespace, undefined vocabulary IRIs used
as individuals move into the memory's namespace, and "the user" / "me" become the owner.

A reply is refused only for what it really breaks. Named-graph blocks and SPARQL keywords (an utterance cannot
write outside its own extraction graph) and output larger than the size cap refuse the whole reply. Triples that
declare ontology terms, name posts, sessions, activities or pcm graphs, or use pcm's own bookkeeping terms are
dropped (never stored) and the rest of the reply is kept; only a reply made of nothing else is refused, so that the
model hears why in its repair round. Vocabulary terms the ontology does not define are kept in the triples so that
validation reports them (with "did you mean" hints) and so that they are counted for the ontology workflow; they
are never silently dropped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache

import pyoxigraph as ox

from pcm.backend import Term, checked_triple
from pcm.catalogue_areas import RESERVED_AREAS
from pcm.extraction.jsonld import DATE_FORMS, AnswerProblem, answer_triples
from pcm.namespaces import (
    FOAF,
    OWL,
    PCM,
    PREFIXES,
    RDF,
    RDFS,
    SCHEMA,
    SCHEMA_HTTP,
    SH,
    VOCABULARY_NAMESPACES,
    XSD,
)
from pcm.naming import Naming, slugify
from pcm.ontology import Ontology

#: Largest model output considered at all (characters); beyond it the output is refused without a repair round.
MAX_OUTPUT_CHARS = 40_000
#: Most triples one utterance may produce.
MAX_TRIPLES = 300
#: Paths under the memory's namespace that name pcm's own records, never something an utterance talks about.
RESERVED_PATHS = ("post/", "session/", "activity/", "history/")
#: Where undeclared, unknown prefixes are parked while parsing; such IRIs are individuals and get re-homed.
PLACEHOLDER_NS = "https://pcm.invalid/llm-prefix/"
#: Local names by which models mean the memory's owner (``pcm:user``, ``ex:me``, ``:I``): they become ``m:owner``.
OWNER_ALIASES = frozenset({"user", "me", "i", "myself", "owner", "theuser", "the-user", "currentuser", "self"})

_SYSTEM_NAMESPACES = (RDF, RDFS, OWL, XSD, SH)
_KNOWN_NAMESPACES = VOCABULARY_NAMESPACES + _SYSTEM_NAMESPACES
_RDF_TYPE = RDF + "type"
#: What says who or what an individual is: an utterance may not change it for the owner or the assistant.
_IDENTITY = frozenset({_RDF_TYPE, RDFS + "label", SCHEMA + "name", FOAF + "name"})
_XSD_STRING = XSD + "string"
_DECLARING_PREDICATES = frozenset(
    {RDFS + "subClassOf", RDFS + "subPropertyOf", RDFS + "domain", RDFS + "range", RDFS + "isDefinedBy"}
)

_TOKENS = re.compile(
    r'(?P<string>"""(?:[^"\\]|\\.|"(?!""))*(?:"""|$)|' r"'''(?:[^'\\]|\\.|'(?!''))*(?:'''|$)|"
    r'"(?:[^"\\\n]|\\.)*"|' r"'(?:[^'\\\n]|\\.)*')|"
    r"(?P<iri><[^<>\"{}|^`\\\s]*>)|"
    r"(?P<comment>#[^\n]*)",
    re.DOTALL,
)
_PREFIX_DECL = re.compile(r"(?:@prefix|(?<![\w@])PREFIX)\s+([A-Za-z][\w.-]*)?:\s*<([^>]*)>", re.IGNORECASE)
_PREFIX_USE = re.compile(r"(?:^|(?<=[\s;,(\[^]))([A-Za-z][\w.-]*)?:", re.MULTILINE)
_UPDATE = re.compile(
    r"(?<![\w:.-])(INSERT\s+DATA|DELETE\s+DATA|DELETE\s+WHERE|INSERT\s*\{|DELETE\s*\{|DROP\s+(?:SILENT\s+)?"
    r"(?:GRAPH|ALL|DEFAULT|NAMED)|CLEAR\s+(?:SILENT\s+)?(?:GRAPH|ALL|DEFAULT|NAMED)|LOAD\s+<)",
    re.IGNORECASE,
)
_FENCE = re.compile(r"```[^\n`]*\n(.*?)(?:```|\Z)", re.DOTALL)
_LINE_NO = re.compile(r"\bline (\d+)")


class OutputProblem(Exception):
    """The output cannot be read at all (empty, too large, not Turtle). ``fatal``: no repair round is worth it."""

    def __init__(self, message: str, *, kind: str, fatal: bool = False) -> None:
        super().__init__(message)
        self.kind = kind
        self.fatal = fatal


@dataclass
class Normalised:
    """Triples ready for validation, plus what was refused and what the model tried that the ontology lacks."""

    triples: list[ox.Triple]
    problems: list[str] = field(default_factory=list)
    """Refusals (hostile or reserved content); any problem means the output is not stored."""
    unknown_terms: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    """What normalisation repaired by itself (prefixes added, dates typed, individuals re-homed)."""


def check_size(text: str, what_to_write: str) -> None:
    """Refuse an empty answer (the problem says ``what_to_write`` instead) and one over :data:`MAX_OUTPUT_CHARS` (no
    repair round is worth it), before any parser reads it: the same for every answer form."""
    if not text.strip():
        raise OutputProblem(f"the output was empty; {what_to_write}", kind="empty")
    if len(text) > MAX_OUTPUT_CHARS:
        raise OutputProblem(
            f"the output is {len(text)} characters, over the {MAX_OUTPUT_CHARS} cap for one utterance", kind="too-large",
            fatal=True,
        )


def normalise_output(text: str, *, namespace: str, ontology: Ontology) -> Normalised:
    """Turn a model's reply into canonical triples in the memory's namespace, or say why it cannot be used."""
    check_size(text, "write Turtle, or '# nothing to extract'")
    body = extract_turtle(text)
    notes: list[str] = []
    problems = _forbidden_syntax(text)
    if problems:
        return Normalised([], problems=problems)
    body = _rebind_prefixes(body, notes)
    header, problems = _prefix_header(body, namespace, notes)
    if problems:
        return Normalised([], problems=problems)
    return normalise_triples(_parse(header, body, namespace), namespace=namespace, ontology=ontology, notes=notes)


def normalise_json(text: str, *, namespace: str, ontology: Ontology) -> Normalised:
    """A constrained (JSON-LD-shaped) answer, read as JSON-LD and then normalised like Turtle's triples."""
    check_size(text, 'write {"@graph": [...]}')
    try:
        triples = answer_triples(text, namespace=namespace, ontology=ontology)
    except AnswerProblem as problem:
        raise OutputProblem(str(problem), kind="syntax") from problem
    return normalise_triples(triples, namespace=namespace, ontology=ontology, notes=[])


def normalise_triples(
    triples: list[ox.Triple], *, namespace: str, ontology: Ontology, notes: list[str]
) -> Normalised:
    """Parsed triples (from Turtle or JSON-LD) → canonical triples in the memory's namespace, or why not."""
    if len(triples) > MAX_TRIPLES:
        raise OutputProblem(
            f"the output has {len(triples)} triples, over the {MAX_TRIPLES} cap for one utterance", kind="too-large",
            fatal=True,
        )
    triples = _rehome([_https_schema(t) for t in triples], namespace, ontology, notes)
    triples = _without_identities(triples, namespace, notes)
    triples, refused = _drop_refused(triples, namespace, ontology, notes)
    result = Normalised(triples, notes=notes)
    result.problems = refused if refused and not triples else []
    result.triples = _canonical(_type_dates(triples, notes))
    result.unknown_terms = unknown_terms(result.triples, ontology)
    return result


# ---------------------------------------------------------------------------------------------------- text


def extract_turtle(text: str) -> str:
    """The Turtle inside a reply: the fenced blocks if there are any, else the text without leading/trailing prose."""
    blocks = _FENCE.findall(text)
    if blocks:
        return "\n".join(b.strip("\n") for b in blocks) + "\n"
    lines = text.strip().splitlines()
    while lines and _is_prose(lines[0]):
        lines.pop(0)
    while lines and _is_prose(lines[-1]):
        lines.pop()
    return "\n".join(lines) + "\n"


def _is_prose(line: str) -> bool:
    """A sentence, not Turtle: its first token at column 0 is a plain word (no ``prefix:``, IRI, ``_:``, ``[``)."""
    if not line.strip() or "{" in line or "}" in line:
        return False
    if line[0].isspace():
        return False
    first = line.split()[0]
    if first in ("a", "PREFIX", "BASE", "@prefix", "@base", ".", ";", ",", "[", "]", "(", ")"):
        return False
    return not (first[0] in "<_\"'#[(@" or ":" in first or first[0].isdigit())


def mask(text: str, *, keep_iris: bool = False) -> str:
    """``text`` with strings, comments (and IRIs unless ``keep_iris``) blanked out, line structure kept."""

    def blank(match: re.Match[str]) -> str:
        if keep_iris and match.group("iri"):
            return match.group(0)
        return re.sub(r"[^\n]", " ", match.group(0))

    return _TOKENS.sub(blank, text)


def _forbidden_syntax(text: str) -> list[str]:
    """Named graphs and SPARQL have no place in one utterance's triples (checked on the whole reply, prose too)."""
    code = mask(text)
    problems = []
    update = _UPDATE.search(code)
    if update:
        problems.append(
            f"the output contains SPARQL Update ({' '.join(update.group(1).split()).upper()}): "
            "write plain Turtle triples only"
        )
    if "{" in code or "}" in code:
        problems.append("the output contains a '{ ... }' block: named graphs (TriG) are not allowed, write plain Turtle triples")
    return problems


def _rebind_prefixes(body: str, notes: list[str]) -> str:
    """A known prefix declared with a wrong IRI (``@prefix pcm: <https://pcm.org/ontology/>``) is bound back.

    The model means pcm's namespace whatever IRI it invents for it; parsing its terms into that invented namespace
    would only turn every one of them into an unknown term.
    """
    masked = mask(body, keep_iris=True)
    out, last = [], 0
    for match in _PREFIX_DECL.finditer(masked):
        name, iri = match.group(1) or "", match.group(2)
        expected = PREFIXES.get(name)
        if expected is None or iri == expected or (name == "schema" and iri == SCHEMA_HTTP):
            continue
        start, end = match.span(2)
        out.append(body[last:start] + expected)
        last = end
        notes.append(f"bound prefix {name}: back to <{expected}> (the output declared <{iri}>)")
    return "".join(out) + body[last:] if out else body


def _prefix_header(body: str, namespace: str, notes: list[str]) -> tuple[str, list[str]]:
    """@prefix lines for prefixes used but not declared (one line, so parse errors keep their line numbers - 1)."""
    declared: dict[str, str] = {}
    problems: list[str] = []
    for name, iri in _PREFIX_DECL.findall(mask(body, keep_iris=True)):
        declared[name] = iri
        expected = PREFIXES.get(name)
        if expected is not None and iri != expected and not (name == "schema" and iri == SCHEMA_HTTP):
            problems.append(f"the output redefines prefix {name}: as <{iri}>; {name}: must be <{expected}>")
    used = {m.rstrip(".") for m in _PREFIX_USE.findall(mask(body))}
    missing = sorted(used - declared.keys() - {"_"})
    lines = []
    for name in missing:
        iri = PREFIXES.get(name) or (namespace if name == "m" else f"{PLACEHOLDER_NS}{name or 'default'}/")
        lines.append(f"@prefix {name}: <{iri}> .")
    if missing:
        notes.append("added prefixes " + ", ".join(f"{n}:" for n in missing))
    return " ".join(lines), problems


def _parse(header: str, body: str, namespace: str) -> list[ox.Triple]:
    document = header + "\n" + body
    try:
        quads = list(ox.parse(document.encode("utf-8"), format=ox.RdfFormat.TURTLE, base_iri=namespace))
    except SyntaxError as error:
        raise OutputProblem(_syntax_message(str(error), body), kind="syntax") from error
    except ValueError as error:
        raise OutputProblem(f"the output is not valid Turtle: {_one_line(str(error))}", kind="syntax") from error
    if any(isinstance(q.subject, ox.Triple) or isinstance(q.object, ox.Triple) for q in quads):
        # RDF 1.2's quoted and reified triples: a statement about a statement is not a fact of the utterance,
        # and nothing after this step (SHACL through rdflib, the stores' exports) takes one
        raise OutputProblem("the output contains a triple term (<< ... >> or <<( ... )>>): write plain Turtle "
                            "triples only", kind="syntax")
    return [ox.Triple(q.subject, q.predicate, q.object) for q in quads]


def _syntax_message(error: str, body: str) -> str:
    """The parser's message with line numbers of the model's own text, and the offending line quoted."""
    lines = body.splitlines()
    shifted = _LINE_NO.sub(lambda m: f"line {max(1, int(m.group(1)) - 1)}", _one_line(error))
    found = _LINE_NO.search(shifted)
    quoted = ""
    if found:
        n = int(found.group(1))
        if 1 <= n <= len(lines):
            quoted = f" — line {n} reads: {lines[n - 1].strip()[:160]}"
    return f"Turtle syntax error: {shifted}{quoted}"


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]


# ---------------------------------------------------------------------------------------------------- terms


def _rehome(triples: list[ox.Triple], namespace: str, ontology: Ontology, notes: list[str]) -> list[ox.Triple]:
    """Individuals the model named in its own namespaces (``ex:``, ``:``, example.org) move into the memory's."""
    subjects = {t.subject.value for t in triples if isinstance(t.subject, ox.NamedNode)}
    entity_objects = {
        t.object.value
        for t in triples
        if isinstance(t.object, ox.NamedNode) and t.predicate.value not in _link_properties(ontology)
    }
    declared = {t.subject.value for t in triples if isinstance(t.subject, ox.NamedNode) and _declares(t)}
    classes = {t.object.value for t in triples if t.predicate.value == _RDF_TYPE and isinstance(t.object, ox.NamedNode)}
    foreign = sorted(
        iri for iri in subjects | entity_objects
        if (_is_foreign(iri, namespace) and not iri.startswith("urn:"))
        or (iri not in declared | classes and _vocabulary_individual(iri, ontology))
    )
    taken: set[str] = set()
    renamed: dict[str, str] = {}
    for iri in foreign:
        if _local_name(iri).lower() in OWNER_ALIASES:
            renamed[iri] = Naming(namespace).owner
            continue
        slug = slugify(_local_name(iri))
        candidate, n = slug, 2
        while candidate in taken:
            candidate, n = f"{slug}-{n}", n + 1
        taken.add(candidate)
        renamed[iri] = namespace + candidate
    if renamed:
        notes.append(f"re-homed {len(renamed)} individual(s) into the memory's namespace")

    def fix(term: Term) -> Term:
        if isinstance(term, ox.NamedNode) and term.value in renamed:
            return ox.NamedNode(renamed[term.value])
        return term

    return [checked_triple(fix(t.subject), t.predicate, fix(t.object)) for t in triples]


def _https_schema(triple: ox.Triple) -> ox.Triple:
    """``http://schema.org/`` → ``https://schema.org/`` in every position, datatypes included."""
    from pcm.rdfio import normalise_term

    s, p, o = (normalise_term(x) for x in (triple.subject, triple.predicate, triple.object))
    return checked_triple(s, p, o)


def _declares(t: ox.Triple) -> bool:
    """Whether a triple declares a vocabulary term (its subject is then a term, not an individual)."""
    p, o = t.predicate.value, t.object
    if p in _DECLARING_PREDICATES or p.startswith(OWL):
        return True
    return p == _RDF_TYPE and isinstance(o, ox.NamedNode) and o.value.startswith((OWL, RDFS, RDF))


def _vocabulary_individual(iri: str, ontology: Ontology) -> bool:
    """An IRI in a vocabulary namespace that the ontology does not define, written where an individual goes.

    In the ontology's own namespace any such subject or object is an individual (``pcm:user``,
    ``pcm:silver-honda-civic``). In the other vocabularies only a lower-case name is (``schema:dana``): a
    capitalised one may be an enumeration member the ontology lacks (``schema:EventCancelled``), which validation
    reports as an unknown term instead.
    """
    if not iri.startswith(VOCABULARY_NAMESPACES) or ontology.defines(iri):
        return False
    if iri.startswith(PCM):
        return True
    name = _local_name(iri)
    return bool(name) and (name[0].islower() or name[0].isdigit())


def _is_foreign(iri: str, namespace: str) -> bool:
    return not iri.startswith(namespace) and not iri.startswith(_KNOWN_NAMESPACES) and not iri.startswith(SCHEMA_HTTP)


def _local_name(iri: str) -> str:
    if iri.startswith(PLACEHOLDER_NS):
        return iri[len(PLACEHOLDER_NS) :].split("/", 1)[-1] or "x"
    trimmed = iri.rstrip("/#")
    return re.split(r"[/#:]", trimmed)[-1] or "x"


def _without_identities(triples: list[ox.Triple], namespace: str, notes: list[str]) -> list[ox.Triple]:
    """The triples less the types and names an answer gives the owner or the assistant.

    Who they are is set when the memory is made. A small model asked to describe an utterance writes a node for
    the owner labelled with the utterance's text ("I am allergic to peanuts") and typed with whatever classes come
    to hand (schema:SportsTeam); kept, each utterance would give the owner another name and another kind.
    """
    naming = Naming(namespace)
    fixed = {naming.owner, naming.assistant}
    kept = [t for t in triples
            if not (isinstance(t.subject, ox.NamedNode) and t.subject.value in fixed and t.predicate.value in _IDENTITY)]
    if len(kept) < len(triples):
        notes.append(f"dropped {len(triples) - len(kept)} type(s) or name(s) given to m:owner or m:assistant: who they "
                     "are is the memory's, not an utterance's")
    return kept


@cache
def _link_properties(ontology: Ontology) -> frozenset[str]:
    """Properties whose IRI values are web addresses, not entities (``schema:url``): their objects are not re-homed."""
    return frozenset(
        iri for iri, term in ontology.terms.items() if XSD + "anyURI" in term.range or SCHEMA + "URL" in term.range
    )


def _drop_refused(
    triples: list[ox.Triple], namespace: str, ontology: Ontology, notes: list[str]
) -> tuple[list[ox.Triple], list[str]]:
    """The triples an utterance may write, and why the others were dropped (one line of a report per reason)."""
    kept: list[ox.Triple] = []
    reasons: dict[str, None] = {}
    for t in triples:
        why = _refusals([t], namespace, ontology)
        if why:
            reasons.update(dict.fromkeys(why))
        else:
            kept.append(t)
    if reasons and kept:
        notes.append(f"dropped {len(triples) - len(kept)} triple(s) an extraction may not write: " + "; ".join(reasons))
    return kept, list(reasons)


def _refusals(triples: list[ox.Triple], namespace: str, ontology: Ontology) -> list[str]:
    """Everything in the output that an utterance may never write; each becomes one line of the repair report."""
    problems: dict[str, None] = {}
    reserved = reserved_terms(ontology)
    for t in triples:
        for term in (t.subject, t.predicate, t.object):
            if isinstance(term, ox.NamedNode):
                why = _reserved_iri(term.value, namespace)
                if why:
                    problems[why] = None
        s, p, o = t.subject, t.predicate.value, t.object
        if isinstance(s, ox.NamedNode) and s.value.startswith(_KNOWN_NAMESPACES):
            problems[f"the output describes the vocabulary term {ontology.curie(s.value)}: "
                     "ontology terms may not be declared or changed by an extraction"] = None
        if p in _DECLARING_PREDICATES or p.startswith(OWL):
            problems[f"the output uses {ontology.curie(p)}, which declares ontology terms: not allowed"] = None
        if p == _RDF_TYPE and isinstance(o, ox.NamedNode) and o.value.startswith((OWL, RDFS, RDF)):
            problems[f"the output declares something a {ontology.curie(o.value)}: ontology terms may not be declared"] = None
        for used in (p, o.value if p == _RDF_TYPE and isinstance(o, ox.NamedNode) else None):
            if used in reserved:
                problems[f"{ontology.curie(used)} is pcm's own bookkeeping term and may not be written by an extraction"] = None
    return list(problems)


def _reserved_iri(iri: str, namespace: str) -> str | None:
    if iri.startswith("urn:pcm:"):
        return f"the output names <{iri}>, one of pcm's graphs: an extraction writes only into its own graph"
    if iri.startswith(namespace) and iri[len(namespace) :].startswith(RESERVED_PATHS):
        return f"the output refers to <{iri}>, a post, session or record of pcm: talk about the things said, not posts"
    return None


@cache
def reserved_terms(ontology: Ontology) -> frozenset[str]:
    """Terms of the conversation and provenance areas (sioc:content, pcm:extractionStatus, prov:wasDerivedFrom...)."""
    return frozenset(iri for iri, term in ontology.terms.items() if term.area in RESERVED_AREAS)


def _type_dates(triples: list[ox.Triple], notes: list[str]) -> list[ox.Triple]:
    """A date property with an untyped ISO 8601 string gets its date datatype (a sure fix, no repair round needed)."""
    out = []
    fixed = 0
    for t in triples:
        o = t.object
        if t.predicate.value in date_properties() and isinstance(o, ox.Literal) and o.datatype.value == _XSD_STRING:
            datatype = next((dt for pattern, dt in DATE_FORMS if pattern.fullmatch(o.value)), None)
            if datatype is not None:
                t = ox.Triple(t.subject, t.predicate, ox.Literal(o.value, datatype=ox.NamedNode(datatype)))
                fixed += 1
        out.append(t)
    if fixed:
        notes.append(f"typed {fixed} date literal(s)")
    return out


@cache
def date_properties() -> frozenset[str]:
    """The properties the shapes' date rule covers (``sh:targetSubjectsOf`` of the ``date-literal`` shape)."""
    import rdflib

    from pcm import resources
    from pcm.shapes import RULE_PREDICATE

    graph = rdflib.Graph()
    for path in sorted(resources.shapes_dir().glob("*.ttl")):
        graph.parse(path, format="turtle")
    found: set[str] = set()
    for shape in graph.subjects(RULE_PREDICATE, rdflib.Literal("date-literal")):
        found.update(str(p) for p in graph.objects(shape, rdflib.URIRef(SH + "targetSubjectsOf")))
    return frozenset(found)


def _canonical(triples: list[ox.Triple]) -> list[ox.Triple]:
    """Deduplicated, with literals in the store's canonical form ("1.0"^^xsd:decimal is stored as "1")."""
    store = ox.Store()
    store.extend([ox.Quad(t.subject, t.predicate, t.object, ox.DefaultGraph()) for t in triples])
    return [ox.Triple(q.subject, q.predicate, q.object) for q in store]


def unknown_terms(triples: Iterable[ox.Triple], ontology: Ontology) -> set[str]:
    """Vocabulary terms the output uses that the ontology does not define (counted for ``pcm ontology propose``)."""
    from pcm.shapes import BUILTIN_TERMS

    found: set[str] = set()
    for t in triples:
        p = t.predicate.value
        if p not in BUILTIN_TERMS and not ontology.defines(p):
            found.add(p)
        o = t.object
        if isinstance(o, ox.NamedNode) and o.value.startswith(VOCABULARY_NAMESPACES) and not ontology.defines(o.value):
            found.add(o.value)
    return found

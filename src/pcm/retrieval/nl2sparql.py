"""The NL→SPARQL prompt and the model's reply.

The prompt is a versioned file (``pcm/prompts/retrieval/nl2sparql.v2.md``) with three parts: ``system`` (the strategy after the
PCM paper: type first, subqueries for reference dates, COUNT(DISTINCT) for how-many, dates rather than durations,
participant rather than agent for "with whom"; few-shot examples written for our ontology; the vocabulary),
``user`` (the question's further vocabulary, the grounding and the question) and ``repair`` (what went wrong with
the last query). The vocabulary block between the catalogue markers is generated (``pcm ontology catalog
--write``); each call replaces it with the core areas, the same for every question (so a local model's prompt
cache keeps the whole system prompt), and the user turn adds the areas chosen for the question; or, in the whole
layout (``PCM_LLM_CATALOGUE``), with every area, and the user turn adds none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pcm.errors import LLMError
from pcm.llm.base import LLMClient, Message, Request
from pcm.prompts import PROMPTS_DIR as _ALL_PROMPTS
from pcm.prompts import PromptFile, around_catalogue, load
from pcm.retrieval.postprocess import Compute, ComputeError, parse_compute

if TYPE_CHECKING:
    from pcm.ontology import Ontology
    from pcm.retrieval.grounding import Grounding

PROMPTS_DIR = _ALL_PROMPTS / "retrieval"
PROMPT_FILE = "nl2sparql.v2.md"
OPERATION = "nl2sparql"

_FENCE = re.compile(r"```(?:sparql|SPARQL|rq)?[ \t]*\n(?P<body>.*?)```", re.DOTALL)
_NO_QUERY = re.compile(r"^\s*NO QUERY\s*:?\s*(?P<reason>.*)$", re.IGNORECASE | re.MULTILINE)
_QUERY_START = re.compile(r"(?im)^\s*(?:#pcm:compute|PREFIX|BASE|SELECT|ASK|CONSTRUCT|DESCRIBE)\b")


def prompt_file() -> PromptFile:
    return load(f"retrieval/{PROMPT_FILE}")


def prompt_version() -> str:
    """What an answer records of this prompt (its ``system``, ``user`` and ``repair`` parts): ``name.vN@digest``."""
    return prompt_file().ref


def system_prompt(catalogue: str, output: str = "sparql") -> str:
    """The system part with the vocabulary block replaced by ``catalogue`` (the areas chosen for the question).

    ``output="json"``: the prompt file's ``json`` part follows, asking for the constrained query form instead of
    SPARQL (see :mod:`pcm.retrieval.query_form`).
    """
    before, after = around_catalogue(prompt_file().parts["system"], PROMPT_FILE)
    prompt = before + catalogue.rstrip("\n") + "\n" + after.lstrip("\n")
    if output == "json":
        prompt = prompt.rstrip("\n") + "\n\n" + prompt_file().parts["json"]
    return prompt


def user_message(grounding: Grounding, ontology: Ontology) -> str:
    vocabulary = grounding.vocabulary.strip("\n")
    return prompt_file().render(
        "user",
        vocabulary=f"MORE VOCABULARY FOR THIS QUESTION:\n{vocabulary}\n\n" if vocabulary else "",
        namespace=grounding.namespace,
        date=f"{grounding.as_of.date().isoformat()} ({grounding.as_of:%A})",
        owner_name=grounding.owner_name,
        used=grounding.render_used(ontology),
        entities=grounding.render_entities(ontology),
        question=" ".join(grounding.question.split()),
    )


def repair_message(problem: str, hint: str) -> str:
    return prompt_file().render("repair", problem=problem.strip(), hint=hint.strip())


@dataclass(frozen=True)
class Draft:
    """One reply of the model: a query (with its compute line), or the reason it wrote none."""

    raw: str
    sparql: str | None
    compute: Compute | None = None
    no_query: str | None = None
    problem: str | None = None
    """Why the reply could not be used as it is (no query found, bad compute line): fed back as a repair."""


def parse_reply(text: str) -> Draft:
    """The query in a ```sparql block (or the bare query), its compute line, or ``NO QUERY: reason``."""
    fence = _FENCE.search(text)
    if fence is not None:
        sparql = fence.group("body").strip()
    else:
        no_query = _NO_QUERY.search(text)
        if no_query is not None:
            return Draft(text, None, no_query=no_query.group("reason").strip() or "the vocabulary cannot express it")
        start = _QUERY_START.search(text)
        if start is None:
            return Draft(text, None, problem="the reply holds no SPARQL query; write one ```sparql block")
        sparql = text[start.start() :].strip()
    try:
        compute = parse_compute(sparql)
    except ComputeError as error:
        return Draft(text, sparql, problem=f"bad compute line: {error}")
    return Draft(text, sparql, compute)


@dataclass(frozen=True)
class QueryForm:
    """Ask for the constrained JSON query form (compiled to SPARQL in code) instead of free SPARQL."""

    namespace: str
    ontology: Ontology


def ask_model(
    client: LLMClient, system: str, messages: list[Message], form: QueryForm | None = None, *, max_tokens: int
) -> tuple[Draft, int]:
    """One call of at most ``max_tokens`` (:attr:`AskConfig.query_tokens <pcm.settings.AskConfig.query_tokens>`; a
    query is a few hundred); returns the parsed reply and the prompt size in (approximate) tokens."""
    if form is None:
        completion = client.complete(
            Request(system=system, messages=messages, operation=OPERATION, max_tokens=max_tokens)
        )
    else:
        from pcm.retrieval.query_form import query_schema

        completion = client.complete(
            Request(system=system, messages=messages, operation=OPERATION, max_tokens=max_tokens,
            schema=query_schema(form.ontology)),
        )
    if completion.text is None:  # pragma: no cover - defensive: clients always return text
        raise LLMError(f"{client.name}: empty reply")
    draft = parse_reply(completion.text) if form is None else parse_form_reply(completion.text, form)
    return draft, prompt_tokens(system, messages)


def parse_form_reply(text: str, form: QueryForm) -> Draft:
    """A query form compiled to SPARQL, ``no_query``, or the problem to send back (a free SPARQL reply is read too:
    a server that refused the schema may still get a query written the other way)."""
    from pcm.retrieval.query_form import FormProblem, compile_form, parse_form

    if "{" not in text and (_FENCE.search(text) or _QUERY_START.search(text) or _NO_QUERY.search(text)):
        return parse_reply(text)
    try:
        parsed = parse_form(text)
        if isinstance(parsed.get("no_query"), str) and not parsed.get("where"):
            return Draft(text, None, no_query=parsed["no_query"].strip() or "the vocabulary cannot express it")
        return Draft(text, compile_form(parsed, namespace=form.namespace, ontology=form.ontology))
    except FormProblem as problem:
        return Draft(text, None, problem=f"the query form cannot be used: {problem}")


def prompt_tokens(system: str, messages: list[Message]) -> int:
    """Approximate tokens of a prompt (CURIE-dense text runs near 3.5 characters per token)."""
    return round((len(system) + sum(len(m.content) for m in messages)) / 3.5)


__all__ = [
    "Draft",
    "QueryForm",
    "parse_form_reply",
    "OPERATION",
    "ask_model",
    "parse_reply",
    "prompt_file",
    "prompt_tokens",
    "prompt_version",
    "repair_message",
    "system_prompt",
    "user_message",
]

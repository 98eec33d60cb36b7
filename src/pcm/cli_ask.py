"""``pcm ask``: answer a question from memory, citing the utterances it rests on (see :mod:`pcm.retrieval.ask`)."""

from __future__ import annotations

from pathlib import Path

import click

from pcm.answer_text import answer_text
from pcm.cli import emit_json, handle_errors, json_option, memory_option, opened, settings_for, warm_server
from pcm.limits import ASK_K
from pcm.settings import ASK_FRAMES, ASK_ORDERS
from pcm.terminal import echo


@click.command()
@memory_option
@click.argument("question")
@click.option("--k", default=ASK_K.default, show_default=True,
              help=f"How many utterances to recall when the graph has no answer ({ASK_K.low} to {ASK_K.high}).")
@click.option("--explain", is_flag=True, help="Show every query tried, its outcome, the facts used and timings.")
@click.option("--as-of", "as_of", default=None, help="The question's date (ISO 8601), for 'last month', 'how long ago'.")
@click.option("--plan/--no-plan", "plan", default=None,
              help="Force a search plan (sub-questions, steps) or never plan; default: the model decides for "
                   "questions with several parts.")
@click.option("--order", type=click.Choice(ASK_ORDERS), default=None,
              help="What a model tries first: graph (a SPARQL query), facts (the stored facts nearest the question), "
                   "auto (facts for a model on this machine) [env PCM_ASK_ORDER; default auto].")
@click.option("--frame", type=click.Choice(ASK_FRAMES), default=None,
              help="Read the question into a typed frame first and compute counts, totals, latest values, intervals "
                   "and relatives in code: on, off, auto (a model that constrains its output) "
                   "[env PCM_ASK_FRAME; default auto].")
@json_option
@click.pass_context
@handle_errors
def ask(ctx: click.Context, memory_path: Path | None, question: str, k: int, explain: bool, as_of: str | None,
        plan: bool | None, order: str | None, frame: str | None, as_json: bool) -> None:
    """Answer a question from memory, citing the utterances it rests on.

    With an LLM configured, the question is read into a typed frame (operation, subject, class, property, anchors,
    time window) and counts, totals, latest and current values, intervals and relatives are computed on the graph;
    other questions are answered from the stored facts or a SPARQL query (checked, bounded, repaired when it
    fails); otherwise pcm answers with the best matching utterances and says so.
    A question with several parts may be split into sub-questions with search plans (--plan forces it, --no-plan
    never plans); "why" and "what happened after" questions use event chains, questions about the conversations
    themselves use session summaries. ask never modifies the memory.

    \b
    Examples:
      pcm ask "What is my dog's name?"
      pcm ask "How many days after the party did Joanna fly home?" --explain
      pcm ask "Where did I travel last month?" --as-of 2025-07-15 --json
      pcm ask "Which shop fixed my car, and where did I fly after that?" --plan --explain
      pcm ask "How much did I pay for the espresso machine?" --order facts
      pcm ask "¿Cuánto gasté en total en mis compras?" --frame on --explain
    """
    server = warm_server(ctx, memory_path) if not (explain or order or frame) else None
    if server is not None:  # `pcm serve` holds the memory: it answers, with its own model and index
        data = server.ask(question, k=k, plan=plan, as_of=as_of)  # the Answer record's JSON, shown without pydantic
        llm = settings_for(ctx, memory_path).llm.enabled
        note = f"(answered by pcm serve at {server.url})"
    else:
        with opened(ctx, memory_path, read_only=True, ask_order=order, ask_frame=frame) as memory:
            data = memory.ask(question, k=k, as_of=as_of, explain=explain, plan=plan).as_json()
        llm, note = memory.settings.llm.enabled, ""
    if as_json:
        emit_json(data)
        return
    echo(answer_text(data, explain) + (f"\n{note}" if note else ""), newlines=True)
    _say_pending(len(data.get("pending") or []), llm)


def _say_pending(count: int, model: bool) -> None:
    """One line when cited utterances have no facts yet (queued extraction): the answer may change once they do.

    Only with a model configured: without one every utterance waits, and the answer's note already says so."""
    if count and model:
        are = "is" if count == 1 else "are"
        echo(f"{count} of the cited utterances {are} not yet extracted; run `pcm extract --pending`")


__all__ = ["ask"]

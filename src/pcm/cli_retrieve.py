"""``pcm retrieve``: the triples around the entities a question mentions, found by walking the graph
(WaterCircles, BeamSearch, A* or a mixture; see :mod:`pcm.retrieval.traversal`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from pcm.cli import emit_json, handle_errors, json_option, memory_option, opened
from pcm.errors import UsageError
from pcm.terminal import echo

ALGORITHM_CHOICES = ("wc", "bs", "astar", "wc+bs", "bs+astar", "astar+wc", "all", "events")
DIRECTION_CHOICES = ("causes", "effects", "before", "after", "both")


@click.command()
@memory_option
@click.argument("question")
@click.option("--algorithm", "-a", type=click.Choice(ALGORITHM_CHOICES), default=None,
              help="WaterCircles, BeamSearch, A*, a mixture, all three, or event chains (default: the configured one, wc).")
@click.option("--forbid", default="", metavar="KINDS",
              help="Vertex kinds walks may not cross: o (object), t (thesis), e (episodic), comma-separated.")
@click.option("--start", "starts", multiple=True, metavar="IRI",
              help="Start from this vertex (repeatable; m:slug works) instead of matching the question's entities.")
@click.option("--top", type=int, default=None,
              help="Keep the N triples most similar to the question (default 30; 0 keeps every triple found).")
@click.option("--no-sources", is_flag=True, help="Do not look up the utterances each triple came from.")
@click.option("--direction", type=click.Choice(DIRECTION_CHOICES), default="both",
              help="Event chains: walk to causes, effects, before, after, or all four (default both).")
@click.option("--depth", type=int, default=3, help="Event chains: at most this many steps (default 3).")
@json_option
@click.pass_context
@handle_errors
def retrieve(ctx: click.Context, memory_path: Path | None, question: str, algorithm: str | None, forbid: str,
             starts: tuple[str, ...], top: int | None, no_sources: bool, direction: str, depth: int,
             as_json: bool) -> None:
    """Walk the memory graph from the entities QUESTION mentions and print the triples that may answer it,
    the path each came from, and the utterances it was said in.

    \b
    Examples:
      pcm retrieve "Which shop repaired my Subaru?"
      pcm retrieve "Who came to the party at Portland park?" --algorithm wc+bs --forbid e
      pcm retrieve "How are the Trek bike and Rosewood Auto Repair connected?" -a astar --json
      pcm retrieve "Why did I miss my flight?" -a events --direction causes --depth 2
    """
    from pcm.errors import PcmError

    if top is not None and top < 0:
        raise UsageError("--top takes a positive number (0 keeps every triple found)")
    with opened(ctx, memory_path, read_only=True) as memory:
        start = [memory.expand_iri(s) for s in starts] or None
        if algorithm == "events":
            _events(memory, question, start, direction, depth, top, not no_sources, as_json)
            return
        try:
            result = memory.retrieve(question, start=start, algorithm=algorithm, forbid=forbid,
                                     top_n=-1 if top is None else (top or None), sources=not no_sources)
        except PcmError as exc:
            if start is None and "index" in str(exc):
                raise UsageError(f"{exc}; give start vertices with --start") from exc
            raise
        engine = memory.graph_engine()
        if as_json:
            emit_json(result.as_json(engine.text_of))
            return
        _print(result, engine.graph.labels)


def _events(memory: Any, question: str, start: list[str] | None, direction: str, depth: int, top: int | None,
            sources: bool, as_json: bool) -> None:
    """Event chains (``--algorithm events``): same output shape as the walks, the text made by the event walk."""
    result = memory.retrieve_events(question, start=start, direction=direction, depth=depth, k=top or 30,
                                    sources=sources)
    if as_json:
        emit_json(result.as_json())
        return
    _print(result, memory.graph_engine().graph.labels)


def _print(result: Any, labels: Any) -> None:
    """Starts, then each triple with its path and sources, then notes (on stderr)."""
    if result.matches:
        for m in result.matches:
            echo(f"start: {m.label} <{m.iri}>  (\"{m.mention}\", {m.how} {m.score:.2f})")
    elif result.starts:
        names = labels(result.starts)
        for s in result.starts:
            echo(f"start: {names[s]} <{s.value}>")
    if not result.found:
        echo("no triples found")
    for n, item in enumerate(result.found, 1):
        how = "+".join(sorted(item.algorithms)) + f" {item.role}"
        similarity = f", similarity {item.similarity:.2f}" if item.similarity is not None else ""
        echo(f"{n:3d}. {item.text}   [{how}{similarity}]")
        if item.path is not None and item.path.steps:
            echo(f"     path: {item.path.text(labels)}")
        for source in item.sources[:3]:
            when = source.time.isoformat() if source.time else None
            where = ", ".join(x for x in (source.session, when, source.speaker) if x)
            said = f'"{source.text}"' if source.text else source.file or source.post
            echo(f"     said: {said}" + (f" ({where})" if where else ""))
    for note in result.notes:
        echo(f"note: {note}", err=True)
    s = result.stats
    echo(f"({result.algorithm}: {s.queries} SPARQL queries, {s.ms:.0f} ms)", err=True)


__all__ = ["retrieve"]

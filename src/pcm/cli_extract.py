"""``pcm extract``, ``pcm history`` and ``pcm duplicates``: the command line of LLM extraction.

Registered in :mod:`pcm.cli` by the lead (``main.add_command(...)``); each command is a thin shell over
:mod:`pcm.extraction`.
"""

from __future__ import annotations

from pathlib import Path

import click

from pcm.cli import (
    emit_json,
    follow,
    handle_errors,
    json_option,
    memory_option,
    opened,
    progress_bar,
    running_server,
)
from pcm.errors import UsageError
from pcm.terminal import echo


@click.command(name="extract")
@memory_option
@click.option("--pending", is_flag=True, help="Posts never extracted (e.g. ingested without an LLM).")
@click.option("--failed", is_flag=True, help="Posts whose last extraction failed.")
@click.option("--gated", is_flag=True,
              help="Posts the small-talk gate kept from the model (PCM_EXTRACTION_GATE): extract them now, gate off.")
@click.option("--all", "all_", is_flag=True, help="Every post not yet extracted with this prompt and ontology version.")
@click.option("--force", is_flag=True, help="Re-extract even posts already extracted with the same versions.")
@click.option("--explain", is_flag=True,
              help="Also list, per post, what was left out of the model's answer (values not said, unlinked nodes).")
@json_option
@click.pass_context
@handle_errors
def extract(ctx: click.Context, memory_path: Path | None, pending: bool, failed: bool, gated: bool, all_: bool,
            force: bool, explain: bool, as_json: bool) -> None:
    """Extract facts from stored utterances with the configured LLM (PCM_LLM or --llm).

    Runs concurrent calls (PCM_LLM_CONCURRENCY), repairs invalid output (PCM_REPAIR_ROUNDS), and is resumable: an
    interrupted run is simply run again. What still fails keeps its post, marked failed with its last report.
    Values the words did not say (an address, a day for "in 2010") are left out and counted; --explain lists them,
    and each post's provenance keeps them (pcm:extractionReport).
    Utterances that state nothing (greetings, thanks, "sounds great") are not sent to the model: they are marked
    gated (PCM_EXTRACTION_GATE=off sends everything; --gated extracts the gated ones).

    \b
    Examples:
      pcm --llm anthropic:claude-sonnet-4-5 extract --pending
      pcm extract --failed --json
      pcm extract --all          # after an ontology or prompt upgrade
      pcm extract --gated        # the small talk the gate kept from the model
      pcm extract --pending --explain
    """
    chosen = [name for name, on in (("pending", pending), ("failed", failed), ("gated", gated), ("all", all_)) if on]
    if len(chosen) != 1:
        raise UsageError("give exactly one of --pending, --failed, --gated or --all")
    server = running_server(ctx, memory_path, write=True)
    if server is not None:  # the server is the memory's single writer: it extracts, with its own model
        with server, progress_bar(None, "extract") as bar:
            report = server.extract(chosen[0], force=force, on_progress=follow(bar))
        where = f" through pcm serve at {server.info.url}"
    else:
        with opened(ctx, memory_path) as memory, progress_bar(None, "extract") as bar:
            report = memory.extract_selection(
                chosen[0], force=force, progress=bar.update, total=lambda n: follow(bar)({"total": n})
            ).as_json()
        where = ""
    if as_json:
        emit_json(report)
        return
    echo(
        f"extracted {report['extracted']}, failed {report['failed']}, skipped {report['skipped']}, gated "
        f"{report['gated']} of {report['posts']} post(s){where}; "
        f"{report['calls']} LLM call(s), {report['repairs']} repair(s), "
        f"{report['input_tokens']} input / {report['output_tokens']} output tokens; "
        f"{report['merges']} merge(s), {report['supersessions']} knowledge update(s); "
        f"{report['ungrounded']} value(s) not in the words said left out"
    )
    if explain:
        for item in report["left_out"]:
            echo(f"  {item['post']}: {item['report']}")
    for item in report["failures"]:
        echo(f"  failed {item['post']}: {item['report']}", err=True)
    if report["unknown_terms"]:
        terms = ", ".join(f"{t} ({n})" for t, n in list(report["unknown_terms"].items())[:10])
        echo(f"terms the model wanted but the ontology lacks: {terms}")


@click.command(name="history")
@memory_option
@click.argument("iri")
@json_option
@click.pass_context
@handle_errors
def history(ctx: click.Context, memory_path: Path | None, iri: str, as_json: bool) -> None:
    """Show how the facts about an entity changed: past values, when and by what they were replaced.

    IRI may be a full IRI, a CURIE or m:SLUG for one of this memory's individuals.

    \b
    Example:
      pcm history m:owner
    """
    with opened(ctx, memory_path, read_only=True) as memory:
        full = memory.expand_iri(iri)
        result = memory.history(full)
        show_iri = memory.show_iri
    if as_json:
        emit_json(result.as_json())
        return
    if not result.changes:
        echo(f"no recorded change for {show_iri(full)}")
        return
    echo(show_iri(full))
    last = None
    for v in result.changes:
        if v.predicate != last:
            echo(f"  {show_iri(v.predicate)}")
            last = v.predicate
        value = show_iri(v.value) if "://" in v.value or v.value.startswith("urn:") else f'"{v.value}"'
        said = f"said {v.said_at or '?'}" + (f' ("{_short(v.said)}")' if v.said else "")
        if v.current:
            echo(f"    {value}  {said}  — current")
        else:
            by = f' by "{_short(v.superseded_by_text)}"' if v.superseded_by_text else ""
            echo(f"    {value}  {said}  — superseded {v.superseded_at or '?'}{by}")


@click.command(name="duplicates")
@memory_option
@json_option
@click.pass_context
@handle_errors
def duplicates(ctx: click.Context, memory_path: Path | None, as_json: bool) -> None:
    """List entities that may be the same thing (never merged automatically).

    \b
    Example:
      pcm duplicates --json
    """
    with opened(ctx, memory_path, read_only=True) as memory:
        pairs = memory.duplicates()
        show_iri = memory.show_iri
    if as_json:
        emit_json([p.as_json() for p in pairs])
        return
    if not pairs:
        echo("no likely duplicates")
        return
    for p in pairs:
        echo(
            f"{p.score:.2f}  {show_iri(p.a)} \"{p.label_a}\"  ~  {show_iri(p.b)} "
            f"\"{p.label_b}\"  ({p.reason})"
        )


def _short(text: str | None, limit: int = 70) -> str:
    one = " ".join((text or "").split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


COMMANDS = (extract, history, duplicates)

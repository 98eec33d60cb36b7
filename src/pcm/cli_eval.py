"""``pcm eval``: LoCoMo / LongMemEval end to end with an LLM judge, retrieval metrics, cost, latency, record/replay.

The work is in :mod:`pcm.evaluation.runner`; this module turns flags into clients and draws progress bars.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from pcm.cli import emit_json, handle_errors, json_option, settings_for
from pcm.evaluation.runner import Reporter
from pcm.terminal import echo


class _Bars(Reporter):
    """tqdm bars on stderr: questions for the whole run, utterances while an item is ingested."""

    def __init__(self) -> None:
        self.questions: Any = None
        self.ingest: Any = None

    def run_started(self, questions: int, done: int) -> None:
        from tqdm import tqdm

        self.questions = tqdm(total=questions, initial=done, desc="questions", unit="q", file=sys.stderr,
                              disable=None, dynamic_ncols=True)

    def ingest_started(self, item: str, utterances: int) -> None:
        from tqdm import tqdm

        self.ingest = tqdm(total=utterances, desc=f"ingest {item}", unit="utt", file=sys.stderr, disable=None,
                           dynamic_ncols=True, leave=False)

    def ingested(self, n: int) -> None:
        if self.ingest is not None:
            self.ingest.update(n)

    def ingest_finished(self) -> None:
        if self.ingest is not None:
            self.ingest.close()
            self.ingest = None

    def answered(self, n: int) -> None:
        if self.questions is not None:
            self.questions.update(n)

    def note(self, text: str) -> None:
        from tqdm import tqdm

        tqdm.write(text, file=sys.stderr)

    def close(self) -> None:
        self.ingest_finished()
        if self.questions is not None:
            self.questions.close()


@click.command("eval")
@click.argument("dataset", type=click.Choice(["locomo", "longmemeval"]))
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option("--limit", type=click.IntRange(min=1), default=None, help="At most N questions (in file order).")
@click.option("--types", "types", multiple=True,
              help="Only these LoCoMo categories (1-5 or multi-hop, temporal, open-domain, single-hop, adversarial) "
                   "or LongMemEval question types; repeat or separate with commas.")
@click.option("--llm", default=None, help="LLM that ingests and answers (default: pcm --llm / $PCM_LLM; none = episodic).")
@click.option("--judge-llm", "judge_llm", default=None, help="LLM that grades answers (default: the --llm model).")
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Run directory (default: ./pcm-eval/DATASET-FILESTEM); running again with it resumes.")
@click.option("--record", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Store every LLM exchange in this directory (for --replay).")
@click.option("--replay", type=click.Path(path_type=Path, file_okay=False, exists=True), default=None,
              help="Answer every LLM call from a --record directory: re-scores a run without any model.")
@json_option
@click.pass_context
@handle_errors
def eval_command(ctx: click.Context, dataset: str, file: Path, limit: int | None, types: tuple[str, ...],
                 llm: str | None, judge_llm: str | None, out: Path | None, record: Path | None,
                 replay: Path | None, as_json: bool) -> None:
    """Evaluate pcm on LoCoMo or LongMemEval: ingest, ask, judge; write results.jsonl and summaries.

    Each LoCoMo conversation and each LongMemEval question haystack gets a fresh memory under OUT/memories.
    Without an LLM the run is episodic: answers are recalled utterances, retrieval metrics and F1 are computed,
    and the LLM judge is skipped (J is n/a).

    \b
    Examples:
      pcm eval locomo ../shared/data/locomo/locomo-conv-26.json --llm none --out runs/locomo
      pcm eval longmemeval oracle.json --llm anthropic:claude-sonnet-4-5 --record runs/rec --out runs/lme
      pcm eval longmemeval oracle.json --replay runs/rec --out runs/lme-replay --json
    """
    from pcm.evaluation.runner import configure, run_eval

    config = configure(dataset, file, settings=settings_for(ctx, None, llm=llm), out=out, judge_llm=judge_llm,
                       record=record, replay=replay, limit=limit, types=types)
    bars = _Bars()
    try:
        summary = run_eval(config, bars)
    finally:
        bars.close()
    if as_json:
        emit_json(summary)
        return
    echo((config.out / "summary.md").read_text(encoding="utf-8"), newlines=True)
    echo(f"results: {config.out / 'results.jsonl'}")


__all__ = ["eval_command"]

"""``pcm eval``: LoCoMo and LongMemEval end to end (ingest, ask, judge), retrieval metrics, cost and latency.

Modules: :mod:`~pcm.evaluation.datasets` (items and questions), :mod:`~pcm.evaluation.metrics` (token F1, evidence
recall@k, percentiles), :mod:`~pcm.evaluation.judge` (LLM judges with the benchmarks' own prompts) and
:mod:`~pcm.evaluation.runner` (the resumable loop writing ``results.jsonl`` and the summaries).
"""

"""How a model reads questions into frames (:mod:`pcm.retrieval.frame`): each question's frame, its output
tokens and seconds, and whether the frame's computed operation answers it from the sample memory's graph.

Run: ``PCM_LLM=llamacpp:MODEL.gguf python benchmarks/bench_frame.py [--set FILE] [--limit N] [--memory DIR]``.
The sample memory (the bundled conversations with the hand-written facts of ``tests/fixtures/ask/extraction``)
is built into DIR once. Prints the frame schema's size in tokens (the model's tokenizer when it has one) and the
median output tokens and seconds per question.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the tests package: its sample memory and servers

from tests.retrieval.test_ask_support import build_sample_memory  # noqa: E402

from pcm.llm import make_client  # noqa: E402
from pcm.memory import Memory  # noqa: E402
from pcm.ontology import load_ontology  # noqa: E402
from pcm.retrieval.frame import FrameReplyError, Terms, frame_schema, read_frame, system_prompt  # noqa: E402
from pcm.retrieval.grounding import build_grounding, usage_stats  # noqa: E402
from pcm.retrieval.operations import COMPUTED, Operations  # noqa: E402
from pcm.retrieval.traversal import TraversalEngine  # noqa: E402
from pcm.settings import Settings  # noqa: E402

AS_OF = datetime(2025, 10, 1, tzinfo=UTC)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", type=Path, default=REPO / "tests" / "fixtures" / "ask" / "questions.json")
    parser.add_argument("--limit", type=int)
    parser.add_argument("--memory", type=Path)
    args = parser.parse_args()
    directory = args.memory or Path(tempfile.mkdtemp()) / "memory"
    if not (directory / "memory.toml").exists():
        build_sample_memory(directory, index=True).close()
    settings = Settings.from_env(memory=directory, index_enabled=True)
    client = make_client(settings)
    if client is None:
        raise SystemExit("set PCM_LLM to a model")
    memory = Memory.open(settings.with_(llm=None), read_only=True)
    ontology = load_ontology()
    terms = Terms.of(usage_stats(memory.context), ontology)
    schema = json.dumps(frame_schema(terms).schema)
    tokenize = getattr(getattr(client, "_llama", None), "tokenize", None)

    def tokens(text: str) -> int:
        return len(tokenize(text.encode("utf-8"), add_bos=False)) if tokenize else len(text) // 4

    print(f"frame schema: {tokens(schema)} tokens ({len(terms.classes)} classes, {len(terms.properties)} properties);"
          f" system prompt {tokens(system_prompt(terms))} tokens")
    questions = json.loads(args.set.read_text(encoding="utf-8"))[: args.limit]
    seconds: list[float] = []
    written: list[int] = []
    engine = TraversalEngine.for_memory(memory.context)
    for q in questions:
        question = str(q["question"])
        grounding = build_grounding(memory.context, question, as_of=AS_OF, ontology=ontology)
        before = client.usage.totals["output_tokens"]
        started = time.perf_counter()
        try:
            frame = read_frame(client, question, terms, as_of=AS_OF, owner_name=memory.manifest.owner,
                               entities=grounding.entities)
        except FrameReplyError as error:
            print(f"  {time.perf_counter() - started:5.1f} s  BAD FRAME ({error})  {question}")
            continue
        seconds.append(time.perf_counter() - started)
        after = client.usage.totals["output_tokens"]
        written.append(after - before)
        shown = {k: v for k, v in frame.as_json(ontology).items() if v}
        answer = ""
        if frame.op in COMPUTED:
            worked = Operations(memory.context, ontology, grounding.entities, AS_OF.date(),
                                lambda: engine.vectors).evaluate(frame)
            answer = worked.text[:90] if worked else "(not settled)"
        print(f"  {seconds[-1]:5.1f} s {written[-1]:3d} tok  {question}\n      {json.dumps(shown, ensure_ascii=False)}"
              + (f"\n      -> {answer}" if answer else ""), flush=True)
    engine.close()
    if seconds:
        print(f"questions {len(seconds)}: median {statistics.median(seconds):.1f} s, max {max(seconds):.1f} s; "
              f"median output tokens {statistics.median(written):.0f}")
    memory.close()


if __name__ == "__main__":
    main()

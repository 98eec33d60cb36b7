"""Extraction prompt size on the sample conversations, and whether the offered vocabulary still holds the gold facts.

Every utterance of the bundled samples (14 conversations) is extracted through the real pipeline by a scripted model
that answers with the gold Turtle of ``tests/fixtures/ask/extraction/<id>.ttl`` (nothing for the other utterances),
so the known-entities block grows as it would with a model. Printed:

* prompt tokens per extraction call (system + first user message), estimated as characters / 4 (what the run
  report's ``estimated_prompt_tokens`` uses) and as characters / 3.2 (closer to a BPE tokenizer on the catalogue's
  CURIEs and symbols): median, p90, max (issue target: median <= 3k);
* the prefix shared by consecutive prompts (what a server's or llama.cpp's prompt cache re-uses), and how many
  distinct system prompts the run sent (one: the system prompt is the same for every utterance, the utterance's
  own topic vocabulary travels in the user message);
* gold coverage: gold triples whose predicate or class lies outside the catalogue areas listed in their
  utterance's prompt (the model must find them without the catalogue's help), and gold answers (the fixture
  converted to the JSON answer shape) that the extraction JSON Schema of that prompt refuses (it lets only the
  prompt's known entities go without a type and a label);
* the extraction outcome with the scripted model (every gold utterance must be extracted, none failed);
* both catalogue layouts (``PCM_LLM_CATALOGUE``), for extraction (the run again, with a scripted model that
  declares a prefix cache) and for ask (the NL->SPARQL prompts of the 25-question gold set over the memory the run
  built): system prompt tokens, and uncached tokens per call, i.e. the tokens after the prefix the prompt shares
  with the previous one (what an in-process llama.cpp model re-reads). Counted with the model's tokenizer when
  ``--tokenizer PATH.gguf`` is given and llama-cpp-python is installed (only the vocabulary is loaded), else
  estimated as characters / 3.4 (the ratio Qwen2.5's tokenizer gives on these prompts).

Run: ``python benchmarks/bench_prompt_size.py [--tokenizer /path/to/model.gguf]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the tests package: its sample memory and servers

from tests.retrieval.test_ask_support import EXTRACTION, NOTHING, load_questions, utterance_ids  # noqa: E402

from pcm.conversations import parse_file, sample_paths  # noqa: E402
from pcm.extraction import extract_posts  # noqa: E402
from pcm.extraction.jsonld import as_answer, extraction_schema  # noqa: E402
from pcm.extraction.normalise import normalise_output  # noqa: E402
from pcm.llm import ScriptedClient  # noqa: E402
from pcm.llm.base import Message  # noqa: E402
from pcm.memory import Memory  # noqa: E402
from pcm.namespaces import RDF, RDFS  # noqa: E402
from pcm.ontology import load_ontology  # noqa: E402
from pcm.settings import Settings  # noqa: E402

#: Characters per token where no tokenizer is given (Qwen2.5's tokenizer on these prompts: 3.4-3.6).
CHARS_PER_TOKEN = 3.4

_AREA = re.compile(r"^## (\w+)$", re.MULTILINE)
#: A known entity's line in the user message (``- m:biscuit "Biscuit" (pcm:Pet)``).
_KNOWN = re.compile(r'^- (m:\S+) "', re.MULTILINE)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def common_prefix(a: str, b: str) -> int:
    return len(os.path.commonprefix([a, b]))


class PrefixCacheScriptedClient(ScriptedClient):
    """The scripted model, declaring what an in-process llama.cpp model declares (it gets the whole layout)."""

    prefix_cache = True


class Tokens:
    """Token counts of chat prompts: the model's tokenizer (vocabulary only) or a character estimate."""

    def __init__(self, gguf: str | None) -> None:
        self._llama = None
        if gguf:
            from llama_cpp import Llama

            self._llama = Llama(model_path=gguf, vocab_only=True, verbose=False)
        self.how = f"tokenizer of {Path(gguf).name}" if gguf else f"estimated as chars/{CHARS_PER_TOKEN}"

    def chat(self, system: str, user: str) -> list[int] | str:
        """The prompt as the model reads it (ChatML, Qwen's template); a string when there is no tokenizer."""
        text = f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"
        if self._llama is None:
            return text
        return list(self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def count(self, sequence: list[int] | str) -> float:
        return len(sequence) if self._llama is not None else len(sequence) / CHARS_PER_TOKEN

    def text(self, text: str) -> float:
        """Tokens of plain text (a model's answer), outside any chat template."""
        if self._llama is None:
            return len(text) / CHARS_PER_TOKEN
        return len(self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def layout(self, label: str, prompts: list[tuple[str, str]]) -> None:
        """System tokens and uncached tokens per call (after the prefix shared with the previous call)."""
        sequences = [self.chat(system, user) for system, user in prompts]
        uncached = [self.count(b[len(os.path.commonprefix([a, b])):])  # type: ignore[type-var]
                    for a, b in zip(sequences, sequences[1:], strict=False)]
        systems = sorted({system for system, _ in prompts}, key=len)
        system_tokens = " / ".join(f"{self.count(self.chat(system, '')):.0f}" for system in systems[:3])
        whole = statistics.median(self.count(q) for q in sequences)
        print(f"  {label}: system turn {system_tokens} tokens ({len(systems)} distinct); whole prompt median "
              f"{whole:.0f}; uncached per call: median {statistics.median(uncached):.0f}   "
              f"p90 {percentile(uncached, 0.9):.0f}   max {max(uncached):.0f}")


def run_extraction(root: Path, client_class: type[ScriptedClient], ids: dict[str, str], gold: dict[str, str]):  # type: ignore[no-untyped-def]
    """Ingest the samples into a fresh memory and extract them with the gold-replaying model; returns the memory
    (open), the report and the extraction prompts ``(message id, system, first user message)``."""
    memory = Memory.init(Settings(memory=root, index_enabled=False), owner="Dana Whitfield")
    memory.ingest([c for p in sample_paths() for c in parse_file(p)])
    prompts: list[tuple[str, str, str]] = []

    def respond(system: str, messages: list[Message], operation: str) -> str:
        match = re.search(r"<utterance>\s*(.*?)\s*</utterance>", messages[0].content, re.DOTALL)
        message_id = ids.get(" ".join(match.group(1).split()) if match else "", "")
        if operation == "extract":
            prompts.append((message_id, system, messages[0].content))
        return gold.get(message_id, NOTHING)

    posts = [p.iri for p in memory.store.posts()]
    client = client_class([respond] * (3 * len(posts)))
    report = extract_posts(memory.context, posts, client=client, concurrency=1, output="turtle")
    return memory, report, prompts


def ask_prompts(memory: Memory, *, whole: bool) -> list[tuple[str, str]]:
    """The first NL->SPARQL prompt of each gold question, in the gold set's order."""
    from datetime import UTC, datetime

    from pcm.retrieval.grounding import build_grounding
    from pcm.retrieval.nl2sparql import system_prompt, user_message

    ontology = load_ontology()
    as_of = datetime(2025, 10, 1, 12, 0, tzinfo=UTC)
    prompts = []
    for item in load_questions():
        grounding = build_grounding(memory.context, str(item["question"]), as_of=as_of, ontology=ontology, whole=whole)
        prompts.append((system_prompt(grounding.catalogue), user_message(grounding, ontology)))
    return prompts


def main() -> None:
    import jsonschema

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokenizer", help="a GGUF file whose tokenizer counts the layouts' tokens")
    counter = Tokens(parser.parse_args().tokenizer)
    ontology = load_ontology()
    root = Path(tempfile.mkdtemp(prefix="pcm-bench-prompt-"))
    try:
        ids = utterance_ids()
        gold = {p.stem: p.read_text(encoding="utf-8") for p in EXTRACTION.glob("*.ttl")}
        memory, report, prompts = run_extraction(root / "memory", ScriptedClient, ids, gold)
        ns = memory.manifest.namespace

        sizes = [len(s) + len(u) for _, s, u in prompts]
        systems = [len(s) for _, s, _ in prompts]
        prefixes = [common_prefix(a[1] + a[2], b[1] + b[2]) for a, b in zip(prompts, prompts[1:], strict=False)]
        print(f"extraction calls: {len(prompts)} (posts {report.posts}: extracted {report.extracted}, "
              f"failed {report.failed}, skipped {report.skipped}; repairs {report.repairs})")
        for label, divisor in (("chars/4", 4.0), ("chars/3.2", 3.2)):
            tokens = [n / divisor for n in sizes]
            print(f"prompt tokens ({label}): median {statistics.median(tokens):.0f}   p90 {percentile(tokens, 0.9):.0f}"
                  f"   max {max(tokens):.0f}   (system part median {statistics.median(systems) / divisor:.0f})")
        listed = Counter(a for _, system, user in prompts for a in _AREA.findall(system + user))
        per_prompt = statistics.median(len(_AREA.findall(s + u)) for _, s, u in prompts)
        print(f"catalogue areas per prompt: median {per_prompt}; "
              "listed in: " + ", ".join(f"{a} {n}" for a, n in listed.most_common()))
        print(f"distinct system prompts: {len({s for _, s, _ in prompts})} in {len(prompts)} calls")
        print(f"prefix shared with the previous prompt (chars/4): median {statistics.median(prefixes) / 4:.0f} "
              f"tokens, i.e. {100 * statistics.median(p / n for p, n in zip(prefixes, sizes[1:], strict=False)):.0f}%"
              " of the prompt")

        outside = refused = gold_triples = 0
        for message_id, system, user in prompts:
            if message_id not in gold:
                continue
            areas = tuple(_AREA.findall(system + user))
            offered = {t.iri for t in ontology.terms.values() if t.area in areas}
            triples = normalise_output(gold[message_id], namespace=ns, ontology=ontology).triples
            gold_triples += len(triples)
            for t in triples:
                term = t.object.value if t.predicate.value == RDF + "type" else t.predicate.value
                if term not in offered and term not in (RDFS + "label",):
                    outside += 1
                    print(f"  {message_id}: {ontology.curie(term)} is outside the offered areas {','.join(areas)}")
            schema = extraction_schema(ontology, known=_KNOWN.findall(user.split("PREVIOUS TURNS")[0])).schema
            answer = as_answer(triples, namespace=ns, ontology=ontology)
            errors = list(jsonschema.Draft202012Validator(schema).iter_errors(answer))
            if errors:
                refused += 1
                print(f"  {message_id}: the JSON Schema refuses the gold answer: {errors[0].message[:160]}")
        print(f"gold coverage: {gold_triples} gold triples in {len(gold)} utterances; {outside} outside the offered "
              f"catalogue; {refused} gold answers refused by the JSON Schema")
        print(f"gold extraction with the scripted model: {report.extracted} extracted, {report.failed} failed "
              f"({'no loss' if report.failed == 0 else 'LOSS: ' + json.dumps(report.failures[:3])})")

        whole_memory, whole_report, whole_prompts = run_extraction(root / "whole", PrefixCacheScriptedClient, ids, gold)
        whole_memory.close()
        print(f"catalogue layouts ({counter.how}; whole-layout run: {whole_report.extracted} extracted, "
              f"{whole_report.failed} failed):")
        print(" extraction, per utterance:")
        counter.layout("areas", [(s, u) for _, s, u in prompts])
        counter.layout("whole", [(s, u) for _, s, u in whole_prompts])
        print(f" ask (NL->SPARQL), per question of the {len(load_questions())}-question gold set:")
        counter.layout("areas", ask_prompts(memory, whole=False))
        counter.layout("whole", ask_prompts(memory, whole=True))
        memory.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

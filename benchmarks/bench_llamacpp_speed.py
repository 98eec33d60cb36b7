"""Raw speed of a GGUF model in llama-cpp-python: prefill, free generation, and generation under a grammar.

Never run in CI (needs llama-cpp-python and a GGUF file). Why: a 0.5B model decoding at ~4.5 tokens/s on two AVX2
cores is far below what the hardware gives; this separates the model's own speed from what pcm adds (the size of
the extraction grammar, prompt layout and cache reuse). Printed, per case: prompt tokens, tokens out, seconds, and
tokens per second. The grammar cases run twice: with llama-cpp-python's sampler chain (the grammar matched against
the whole vocabulary at every step) and with pcm's grammar-first path (``pcm.llm.grammar_first``: the greedy token
checked first), which also prints how many steps the one-token check decided and how many fell back.

Run: ``python benchmarks/bench_llamacpp_speed.py /work/models/qwen2.5-coder-0.5b.gguf --threads 2``
(``--grammar-only`` skips the prefill and free-generation rows but one).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from pcm.extraction.jsonld import extraction_grammar, extraction_schema, grammar_budget
from pcm.llm.grammar_first import fast_llama_class
from pcm.ontology import load_ontology

COUNT = "Count from 1 to 400, one number per line, nothing else."
JSON_ASK = ("Write a JSON-LD graph for: 'I bought a silver Honda Civic from Rosewood Auto on 2024-03-02 for $18,500; "
            "my dog Biscuit rode along.' Use @id values like m:civic.")


def timed(llama: Any, label: str, messages: list[dict[str, str]], max_tokens: int, same_as: str | None = None,
          **extra: Any) -> str:
    """Run one chat call and print its figures; ``same_as``: the answer the sampler chain gave, to compare."""
    llama.last_step = None
    started = time.perf_counter()
    reply = llama.create_chat_completion(messages=messages, max_tokens=max_tokens, temperature=0.0, seed=0, **extra)
    seconds = time.perf_counter() - started
    usage = reply["usage"]
    out = usage["completion_tokens"]
    text = str(reply["choices"][0]["message"]["content"])
    print(f"{label:<44} in {usage['prompt_tokens']:>5}  out {out:>4}  {seconds:7.2f} s  "
          f"{out / seconds if out > 1 else 0:6.2f} tok/s out  ({reply['choices'][0]['finish_reason']})"
          + (f"  one-token check {step.checked}, whole vocabulary {step.full}"
             if (step := getattr(llama, "last_step", None)) else "")
          + ("" if same_as is None else "  same answer" if text == same_as else "  DIFFERENT ANSWER"), flush=True)
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--tokens", type=int, default=96)
    parser.add_argument("--budget", type=int, default=0,
                        help="max_tokens the bounded extraction grammar is sized for (default: --tokens)")
    parser.add_argument("--grammar-only", action="store_true", help="skip the prefill and most free rows")
    args = parser.parse_args()
    from llama_cpp import Llama, LlamaGrammar

    started = time.perf_counter()
    options: dict[str, Any] = {"model_path": args.model, "n_ctx": args.context, "n_threads": args.threads,
                               "n_threads_batch": args.threads, "n_batch": args.batch, "seed": 0, "verbose": False}
    llama = Llama(**options)
    fast = fast_llama_class()(**options)
    print(f"loaded in {time.perf_counter() - started:.1f} s; threads {args.threads}, context {args.context}, "
          f"batch {args.batch}")
    ontology = load_ontology()
    schema = json.dumps(extraction_schema(ontology).schema)
    started = time.perf_counter()
    grammar = LlamaGrammar.from_json_schema(schema, verbose=False)
    print(f"extraction grammar built in {time.perf_counter() - started:.2f} s (schema {len(schema)} chars)")
    started = time.perf_counter()
    budget = args.budget or args.tokens
    bounded = LlamaGrammar.from_string(extraction_grammar(ontology, grammar_budget(budget)), verbose=False)
    print(f"bounded extraction grammar ({budget} tokens) built in {time.perf_counter() - started:.2f} s")
    small = LlamaGrammar.from_string('root ::= "{" [a-z0-9 ,:\\n"]* "}"', verbose=False)
    long_system = "You are a careful assistant.\n" + "\n".join(f"Rule {i}: be brief and exact." for i in range(300))
    count = [{"role": "user", "content": COUNT}]
    if not args.grammar_only:
        timed(llama, "prefill ~2.4k tokens (max_tokens 1)", [{"role": "system", "content": long_system}, *count], 1)
        timed(llama, "same prompt again (prefix cached)", [{"role": "system", "content": long_system}, *count], 1)
        timed(llama, "same system, new user message", [{"role": "system", "content": long_system},
                                                         {"role": "user", "content": COUNT + " Start now."}], 1)
        timed(llama, "free generation", count, args.tokens)
    timed(llama, "free generation (warm)", count, args.tokens)
    chain = timed(llama, "small grammar", count, args.tokens, grammar=small)
    timed(fast, "small grammar, grammar-first", count, args.tokens, chain, grammar=small)
    json_ask = [{"role": "user", "content": JSON_ASK}]
    if not args.grammar_only:
        timed(llama, "free JSON answer", json_ask, args.tokens)
    chain = timed(llama, "extraction-schema grammar", json_ask, args.tokens, grammar=grammar)
    timed(fast, "extraction-schema grammar, grammar-first", json_ask, args.tokens, chain, grammar=grammar)
    chain = timed(llama, "bounded extraction grammar", json_ask, args.tokens, grammar=bounded)
    timed(fast, "bounded extraction grammar, grammar-first", json_ask, args.tokens, chain, grammar=bounded)
    json_object = {"type": "json_object"}
    chain = timed(llama, "json_object response_format", json_ask, args.tokens, response_format=json_object)
    timed(fast, "json_object response_format, grammar-first", json_ask, args.tokens, chain,
          response_format=json_object)


if __name__ == "__main__":
    main()

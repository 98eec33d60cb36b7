"""Output tokens of one extraction answer: today's JSON form against the compact line form, on the same facts.

Why: a model in this process writes ~6 tokens a second on two cores, so an answer's length is most of an extraction
call's time (the JSON form measured 405-455 output tokens per fact-bearing utterance with Qwen2.5-Coder-1.5B, 40-70 s).
Each hand-written extraction of the sample conversations (``tests/fixtures/ask/extraction/*.ttl``) is read as the
extractor reads Turtle, then written in both forms as a model would write them: the JSON answer
(:func:`pcm.extraction.jsonld.as_answer`, one line with ``", "`` and ``": "``: a lower bound, since a model also
writes newlines and indentation) and the compact lines (:func:`pcm.extraction.compact.as_compact`). Each compact
answer is read back (:func:`pcm.extraction.compact.read_compact`) and must give the JSON answer's triples (new nodes
under the IRIs the compact reader mints from their labels): the facts are the same, only their spelling differs.

Counted with the model's tokenizer when ``--tokenizer PATH.gguf`` is given and llama-cpp-python is installed (only
the vocabulary is loaded), else estimated as characters / 3.4.

Run: ``python benchmarks/bench_output_form.py [--tokenizer /work/models/qwen2.5-coder-1.5b.gguf] [--show d03-m01]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import pyoxigraph as ox

from bench_prompt_size import Tokens  # the same tokenizer counts as the prompt-size benchmark
from pcm.extraction.compact import as_compact, bare_name, call_names, normalise_answer, read_compact
from pcm.extraction.jsonld import as_answer
from pcm.extraction.normalise import normalise_json, normalise_output
from pcm.namespaces import RDF
from pcm.naming import Naming
from pcm.ontology import Ontology, load_ontology

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "ask" / "extraction"
NS = "https://example.org/memory/"
def forms(turtle: str, ontology: Ontology) -> tuple[str, str, bool, int]:
    """``(JSON answer, compact answer, same triples, triples)`` of one hand-written extraction."""
    triples = normalise_output(turtle, namespace=NS, ontology=ontology).triples
    answer = json.dumps(as_answer(triples, namespace=NS, ontology=ontology), ensure_ascii=False)
    from_json = normalise_json(answer, namespace=NS, ontology=ontology).triples
    names = call_names(Naming(NS), Naming(NS).owner)
    typed = {t.subject.value for t in from_json if t.predicate.value == RDF + "type"}
    for t in from_json:  # the nodes an earlier utterance declared are offered to this one by name
        for term in (t.subject, t.object):
            local = bare_name(term.value, NS) if isinstance(term, ox.NamedNode) else None
            if local is not None and term.value not in typed:
                names.setdefault(local, term.value)
    text, handles = as_compact(from_json, namespace=NS, ontology=ontology, names=names)
    compact = read_compact(text, namespace=NS, ontology=ontology, names=names)
    from_compact = normalise_answer(compact, namespace=NS, ontology=ontology).triples
    renamed = {iri: compact.minted[handle] for iri, handle in handles.items()}
    return answer, text, _renamed(from_json, renamed) == _sorted(from_compact), len(from_json)


def _renamed(triples: list[ox.Triple], renamed: dict[str, str]) -> list[str]:
    def term(t: ox.NamedNode | ox.BlankNode | ox.Literal) -> ox.NamedNode | ox.BlankNode | ox.Literal:
        return ox.NamedNode(renamed[t.value]) if isinstance(t, ox.NamedNode) and t.value in renamed else t

    return _sorted([ox.Triple(term(t.subject), t.predicate, term(t.object)) for t in triples])  # type: ignore[arg-type]


def _sorted(triples: list[ox.Triple]) -> list[str]:
    return sorted(str(t) for t in triples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokenizer", help="a GGUF file whose tokenizer counts the answers' tokens")
    parser.add_argument("--show", nargs="*", default=[], help="print both forms of these fixtures (e.g. d03-m01)")
    args = parser.parse_args()
    counter = Tokens(args.tokenizer)
    ontology = load_ontology()
    rows = []
    for path in sorted(FIXTURES.glob("*.ttl")):
        answer, text, same, triples = forms(path.read_text(encoding="utf-8"), ontology)
        rows.append((path.stem, triples, counter.text(answer), counter.text(text), same))
        if path.stem in args.show:
            print(f"== {path.stem}\n{answer}\n\n{text}")
    print(f"output tokens per hand-written extraction ({len(rows)} utterances; {counter.how}):")
    print(f"  {'utterance':<10} {'triples':>7} {'json':>6} {'compact':>8} {'ratio':>6}  same triples")
    for stem, triples, json_tokens, compact_tokens, same in rows:
        print(f"  {stem:<10} {triples:>7} {json_tokens:>6.0f} {compact_tokens:>8.0f} "
              f"{compact_tokens / json_tokens:>6.2f}  {'yes' if same else 'NO'}")
    json_counts, compact_counts = [r[2] for r in rows], [r[3] for r in rows]
    print(f"  median: json {statistics.median(json_counts):.0f}, compact {statistics.median(compact_counts):.0f}; "
          f"max: json {max(json_counts):.0f}, compact {max(compact_counts):.0f}; total compact/json "
          f"{sum(compact_counts) / sum(json_counts):.2f}; per triple: json {sum(json_counts) / sum(r[1] for r in rows):.1f}"
          f", compact {sum(compact_counts) / sum(r[1] for r in rows):.1f}")
    print(f"  compact answers within 120 tokens: {sum(c <= 120 for c in compact_counts)}/{len(rows)}; "
          f"the same triples as the JSON form: {sum(r[4] for r in rows)}/{len(rows)}")


if __name__ == "__main__":
    main()

"""The in-process GGUF provider (``PCM_LLM=llamacpp:PATH``): settings, errors, and what reaches llama-cpp-python.

A real model runs only where llama-cpp-python is installed and ``PCM_TEST_GGUF`` names a GGUF file (weights are never
bundled); otherwise those tests skip and say why. The mapping tests hand the client a recording stand-in for
``llama_cpp.Llama`` (through the client's ``factory`` argument), so what pcm asks of the library is checked anyway.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from pcm.errors import LLMError, UsageError
from pcm.extraction.extractor import output_format
from pcm.llm import Message, make_client
from pcm.llm.base import JsonSchema, Request
from pcm.llm.llamacpp_client import LlamaCppClient
from pcm.settings import LLMSpec, Settings

SCHEMA = JsonSchema("answer", {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
HAVE_LLAMA = importlib.util.find_spec("llama_cpp") is not None
GGUF = os.environ.get("PCM_TEST_GGUF", "")


class RecordingLlama:
    """Records the constructor arguments and each chat call; answers like llama-cpp-python does."""

    made: list[dict[str, Any]] = []

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.calls: list[dict[str, Any]] = []
        RecordingLlama.made.append(kwargs)

    def set_cache(self, cache: Any) -> None:
        self.cache = cache

    def create_chat_completion(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        return {
            "choices": [{"message": {"role": "assistant", "content": '{"n": 3}'}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 42, "completion_tokens": 5},
        }


@pytest.fixture
def gguf(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.gguf"
    path.write_bytes(b"GGUF")
    return path


def test_the_spec_names_a_model_file() -> None:
    spec = LLMSpec.parse("llamacpp:/models/qwen.gguf")
    assert (spec.provider, spec.model, str(spec)) == ("llamacpp", "/models/qwen.gguf", "llamacpp:/models/qwen.gguf")
    with pytest.raises(UsageError, match="llamacpp:/path/to/model.gguf"):
        LLMSpec.parse("llamacpp:")


def test_threads_and_context_come_from_settings(gguf: Path) -> None:
    settings = Settings.from_env({"PCM_LLM": f"llamacpp:{gguf}", "PCM_LLM_THREADS": "3", "PCM_LLM_CONTEXT": "4096"})
    assert (settings.llm_threads, settings.llm_context) == (3, 4096)
    client = LlamaCppClient(model_path=str(gguf), threads=settings.llm_threads, context=settings.llm_context,
                            factory=RecordingLlama)
    made = RecordingLlama.made[-1]
    assert (made["n_threads"], made["n_ctx"], made["model_path"]) == (3, 4096, str(gguf))
    assert client.name == "llamacpp:tiny.gguf"


def test_the_prompt_state_cache_gets_its_size_from_settings(gguf: Path) -> None:
    """Ask alternates a long NL->SPARQL prompt with short answer prompts: the model keeps several prompts' states."""
    settings = Settings.from_env({"PCM_LLM": f"llamacpp:{gguf}", "PCM_LLM_PROMPT_CACHE_MB": "512"})
    made: list[int] = []
    client = LlamaCppClient(model_path=str(gguf), threads=1, context=512, factory=RecordingLlama,
                            prompt_cache_mb=settings.llm_prompt_cache_mb, prompt_cache=lambda n: made.append(n) or n)
    assert made == [512 << 20] and client._llama.cache == 512 << 20
    LlamaCppClient(model_path=str(gguf), threads=1, context=512, factory=RecordingLlama, prompt_cache_mb=0,
                   prompt_cache=lambda n: made.append(n))
    assert made == [512 << 20]  # 0: no cache beyond llama.cpp's reuse of the previous prompt
    assert Settings.from_env({}).llm_prompt_cache_mb == 2048


def test_a_missing_file_is_one_clear_line(tmp_path: Path) -> None:
    with pytest.raises(LLMError, match="no such model file"):
        LlamaCppClient(model_path=str(tmp_path / "absent.gguf"), threads=1, context=512, factory=RecordingLlama)


def test_without_llama_cpp_the_error_says_how_to_install_it(gguf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import llama_cpp now raises ImportError
    with pytest.raises(LLMError, match=r"pip install 'pcm\[local\]'.*GGML_NATIVE=OFF"):
        make_client(Settings(llm=LLMSpec.parse(f"llamacpp:{gguf}")))


def test_the_schema_becomes_a_grammar_request_and_the_prompt_keeps_its_order(gguf: Path) -> None:
    client = LlamaCppClient(model_path=str(gguf), threads=2, context=2048, factory=RecordingLlama,
                            grammar=lambda text: ("grammar of", text))
    completion = client.complete(Request(system="SYSTEM", messages=[Message.user("U")], operation="extract", schema=SCHEMA,
                                 max_tokens=100))
    assert (completion.text, completion.input_tokens, completion.output_tokens) == ('{"n": 3}', 42, 5)
    call = client._llama.calls[-1]
    assert call["grammar"] == ("grammar of", json.dumps(SCHEMA.schema))
    assert "response_format" not in call
    assert call["temperature"] == 0.0 and call["max_tokens"] == 100
    assert [m["role"] for m in call["messages"]] == ["system", "user"]  # stable part first
    client.complete(Request(system="SYSTEM", messages=[Message.user("U")], operation="answer"))
    assert "response_format" not in client._llama.calls[-1] and "grammar" not in client._llama.calls[-1]
    assert client.usage.as_dict()["extract"]["input_tokens"] == 42


def test_the_grammar_keeps_the_schemas_property_order(gguf: Path) -> None:
    """The converter writes properties in the order it reads them: a triple pattern must come out s, p, o."""
    from pcm.ontology import load_ontology
    from pcm.retrieval.query_form import query_schema

    texts: list[str] = []
    client = LlamaCppClient(model_path=str(gguf), threads=2, context=2048, factory=RecordingLlama,
                            grammar=lambda text: texts.append(text) or text)
    client.complete(Request(system="S", messages=[Message.user("U")], operation="nl2sparql", schema=query_schema(load_ontology())))
    sent = json.loads(texts[-1])
    assert list(sent["properties"])[:4] == ["no_query", "select", "distinct", "where"]
    assert list(sent["properties"]["where"]["items"]["properties"]) == ["s", "p", "o", "optional"]


class ResettingLlama(RecordingLlama):
    """Records whether anything drops the model's kept tokens (llama-cpp-python's ``reset``)."""

    resets = 0

    def reset(self) -> None:
        ResettingLlama.resets += 1


def test_consecutive_calls_share_one_model_object_that_keeps_its_prompt_tokens(gguf: Path) -> None:
    """llama-cpp-python re-reads only what follows the longest common token prefix of consecutive calls on one
    ``Llama`` object: the client must keep that object and never reset it, and send the system prompt (the part
    that is the same for every utterance) first, as every message of a repair round after it."""
    made = len(RecordingLlama.made)
    client = LlamaCppClient(model_path=str(gguf), threads=2, context=2048, factory=ResettingLlama)
    first = [Message.user("U1")]
    client.complete(Request(system="SYSTEM", messages=first, operation="extract"))
    client.complete(Request(system="SYSTEM", messages=[*first, Message.assistant("A"), Message.user("R")],
                    operation="repair"))
    client.complete(Request(system="SYSTEM", messages=[Message.user("U2")], operation="extract"))
    assert len(RecordingLlama.made) == made + 1 and ResettingLlama.resets == 0
    calls = client._llama.calls
    assert [c["messages"][0] for c in calls] == [{"role": "system", "content": "SYSTEM"}] * 3
    assert calls[1]["messages"][:2] == calls[0]["messages"]  # the repair round extends the first call's prompt


def test_auto_output_is_json_for_the_in_process_model(gguf: Path) -> None:
    client = LlamaCppClient(model_path=str(gguf), threads=1, context=512, factory=RecordingLlama)
    assert output_format("auto", client) == "json" and output_format("turtle", client) == "turtle"


@pytest.mark.skipif(not HAVE_LLAMA, reason="llama-cpp-python is not installed (pip install 'pcm[local]')")
@pytest.mark.skipif(not GGUF or not Path(GGUF).is_file(), reason="PCM_TEST_GGUF does not name a GGUF model file")
@pytest.mark.model
def test_a_real_model_answers_inside_the_schema() -> None:
    import jsonschema

    client = LlamaCppClient(model_path=GGUF, threads=os.cpu_count() or 2, context=2048)
    completion = client.complete(Request(system="Answer with JSON.", messages=[Message.user("Give n = 3.")],
                                 operation="extract", schema=SCHEMA, max_tokens=32))
    jsonschema.validate(json.loads(completion.text), SCHEMA.schema)
    client.close()


def test_a_long_in_process_call_prints_progress_without_claiming_tokens(gguf: Path) -> None:
    import threading

    lines: list[str] = []
    reported = threading.Event()

    class SlowLlama(RecordingLlama):
        def create_chat_completion(self, **kwargs: Any) -> dict[str, Any]:
            assert reported.wait(10), "no progress line during a long call"
            return super().create_chat_completion(**kwargs)

    def write(line: str) -> None:
        lines.append(line)
        reported.set()

    client = LlamaCppClient(model_path=str(gguf), threads=1, context=512, factory=SlowLlama, progress=write,
                            progress_after=0.05)
    client.complete(Request(system="S", messages=[Message.user("U")], operation="extract"))
    assert lines and "reading the prompt and writing its answer" in lines[0]


@pytest.mark.skipif(not HAVE_LLAMA, reason="llama-cpp-python is not installed (pip install 'pcm[local]')")
def test_the_generated_schemas_convert_to_llama_cpp_grammars() -> None:
    """llama-cpp-python's own response_format path falls back to plain JSON silently when a schema does not
    convert (an unanchored regex pattern did); the extraction and query schemas must convert."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    from pcm.extraction.jsonld import extraction_schema
    from pcm.ontology import load_ontology
    from pcm.retrieval.query_form import query_schema

    ontology = load_ontology()
    for schema in (extraction_schema(ontology), query_schema(ontology)):
        assert "root ::=" in json_schema_to_gbnf(json.dumps(schema.schema))


def test_a_schema_with_a_bounded_grammar_sends_that_grammar_sized_to_max_tokens(gguf: Path) -> None:
    """The extraction schema carries a GBNF grammar with a total budget; the client asks for it at the call's
    max_tokens (so every answer fits), builds it once per size, and never falls back to the JSON Schema."""
    sizes: list[int] = []

    def bounded(max_tokens: int) -> str:
        sizes.append(max_tokens)
        return f"root ::= [0-9]{{1,{max_tokens}}}"

    schema = JsonSchema("answer", SCHEMA.schema, grammar=bounded)
    client = LlamaCppClient(model_path=str(gguf), threads=1, context=512, factory=RecordingLlama,
                            grammar=lambda text: pytest.fail("the JSON Schema was converted"),
                            gbnf=lambda text: ("gbnf of", text))
    for _ in range(2):
        client.complete(Request(system="S", messages=[Message.user("U")], operation="extract", schema=schema, max_tokens=300))
    assert client._llama.calls[-1]["grammar"] == ("gbnf of", "root ::= [0-9]{1,300}")
    assert client._grammars == {"root ::= [0-9]{1,300}": ("gbnf of", "root ::= [0-9]{1,300}")}


def test_the_extraction_schema_carries_its_bounded_grammar() -> None:
    from pcm.extraction.jsonld import extraction_grammar, extraction_schema, grammar_budget
    from pcm.ontology import load_ontology

    ontology = load_ontology()
    schema = extraction_schema(ontology)
    assert schema.grammar is not None
    assert schema.grammar(500) == extraction_grammar(ontology, grammar_budget(500))
    offered = extraction_schema(ontology, known=("m:owner", "m:biscuit"))
    assert offered.grammar is not None
    grammar = offered.grammar(500)
    assert 'known ::= "\\"m:biscuit\\"" | "\\"m:owner\\""\n' in grammar
    assert 'new-name ::= "\\"m:" new-name-' in grammar  # new nodes open under any other name


def test_grammars_made_per_call_are_kept_only_for_the_last_few_calls(gguf: Path) -> None:
    """The extraction schema names the prompt's known entities, so its grammar (about a megabyte of text) differs
    from one utterance to the next: the client keeps the last few, built once each, not all of them."""
    from pcm.llm.llamacpp_client import GRAMMARS_KEPT

    built: list[str] = []

    def gbnf(text: str) -> str:
        built.append(text)
        return "built " + text

    client = LlamaCppClient(model_path=str(gguf), threads=2, context=2048, factory=RecordingLlama, gbnf=gbnf)
    for n in [*range(GRAMMARS_KEPT + 5), GRAMMARS_KEPT + 4, GRAMMARS_KEPT + 4]:
        schema = JsonSchema("answer", {"type": "object"}, grammar=lambda max_tokens, n=n: f"root ::= \"{n}\"")
        client.complete(Request(system="S", messages=[Message.user("U")], operation="extract", schema=schema))
        assert client._llama.calls[-1]["grammar"] == f"built root ::= \"{n}\""
    assert len(built) == GRAMMARS_KEPT + 5 and len(client._grammars) == GRAMMARS_KEPT


@pytest.mark.skipif(not HAVE_LLAMA, reason="llama-cpp-python is not installed (pip install 'pcm[local]')")
@pytest.mark.skipif(not GGUF or not Path(GGUF).is_file(), reason="PCM_TEST_GGUF does not name a GGUF model file")
@pytest.mark.model
def test_the_bounded_grammar_loads_in_llama_cpp() -> None:
    """llama.cpp's own GBNF parser reads the generated grammar (only the model's vocabulary is loaded)."""
    from llama_cpp import Llama, LlamaGrammar
    from llama_cpp._internals import LlamaSampler

    from pcm.extraction.jsonld import extraction_schema
    from pcm.ontology import load_ontology

    grammar = extraction_schema(load_ontology()).grammar
    assert grammar is not None
    vocabulary = Llama(model_path=GGUF, vocab_only=True, verbose=False)
    LlamaSampler().add_grammar(vocabulary._model, LlamaGrammar.from_string(grammar(3000), verbose=False))


needs_llama = pytest.mark.skipif(not HAVE_LLAMA, reason="llama-cpp-python is not installed (pip install 'pcm[local]')")
needs_gguf = pytest.mark.skipif(not GGUF or not Path(GGUF).is_file(),
                                reason="PCM_TEST_GGUF does not name a GGUF model file")


class AllowedTokens:
    """A stand-in for llama.cpp's grammar sampler: refuses (logit -inf) every token outside ``allowed``."""

    def __init__(self, allowed: set[int]) -> None:
        self.allowed = allowed
        self.sizes: list[int] = []
        self.accepted: list[int] = []
        self.resets = 0

    def apply(self, candidates: Any) -> None:
        array = candidates.contents
        self.sizes.append(array.size)
        for i in range(array.size):
            if array.data[i].id not in self.allowed:
                array.data[i].logit = float("-inf")

    def accept(self, token: int) -> None:
        self.accepted.append(token)

    def reset(self) -> None:
        self.resets += 1


def candidates(logits: list[float]) -> Any:
    """A ``llama_token_data_array *`` over ``logits`` (token i has logit i), as llama.cpp hands it to samplers;
    the backing array is kept on the returned pointer."""
    import ctypes

    import llama_cpp

    data = (llama_cpp.llama_token_data * len(logits))(
        *(llama_cpp.llama_token_data(i, logit, 0.0) for i, logit in enumerate(logits)))
    pointer = ctypes.pointer(llama_cpp.llama_token_data_array(
        data=ctypes.cast(data, llama_cpp.llama_token_data_p), size=len(logits), selected=-1, sorted=False))
    pointer._keep = data  # type: ignore[attr-defined]
    return pointer


def greedy(candidates: Any) -> int:
    """What llama.cpp's greedy sampler picks: the first candidate with the highest logit."""
    array = candidates.contents
    best = 0
    for i in range(1, array.size):
        if array.data[i].logit > array.data[best].logit:
            best = i
    return int(array.data[best].id)


@needs_llama
def test_a_grammatical_best_token_is_checked_alone() -> None:
    from pcm.llm.grammar_first import GrammarFirst

    grammar = AllowedTokens({1, 3})
    step = GrammarFirst(grammar)
    cur = candidates([0.5, 2.0, 1.0, 1.5])
    step.apply(cur)
    assert grammar.sizes == [1]  # the grammar never saw the whole vocabulary
    assert (cur.contents.size, greedy(cur)) == (1, 1)
    step.accept(1)
    assert grammar.accepted == [1] and (step.checked, step.full) == (1, 0)


@needs_llama
def test_a_refused_best_token_falls_back_to_the_grammar_over_every_token() -> None:
    from pcm.llm.grammar_first import GrammarFirst

    grammar = AllowedTokens({0, 2})
    step = GrammarFirst(grammar)
    cur = candidates([0.5, 2.0, 1.0, 1.5])
    step.apply(cur)
    assert grammar.sizes == [1, 4]
    assert (cur.contents.size, greedy(cur)) == (4, 2) and (step.checked, step.full) == (0, 1)


@needs_llama
def test_the_fast_step_picks_what_full_grammar_sampling_picks() -> None:
    """Random logits with many ties and random grammars: greedy after the fast step equals greedy after the
    grammar over every token (ties to the lowest index on both paths)."""
    import random

    from pcm.llm.grammar_first import GrammarFirst

    rng = random.Random(7)
    paths = set()
    for _ in range(300):
        logits = [float(rng.randint(-3, 3)) for _ in range(rng.randint(1, 12))]
        allowed = {i for i in range(len(logits)) if rng.random() < 0.4} or {rng.randrange(len(logits))}
        reference = candidates(logits)
        AllowedTokens(allowed).apply(reference)
        step = GrammarFirst(AllowedTokens(allowed))
        fast = candidates(logits)
        step.apply(fast)
        assert greedy(fast) == greedy(reference), (logits, allowed)
        paths.add((step.checked, step.full))
    assert paths == {(1, 0), (0, 1)}


def test_a_line_written_a_second_time_is_seen_across_token_boundaries() -> None:
    from pcm.llm.grammar_first import RepeatedLines

    pieces = {0: b"a b", 1: b" c\n", 2: b"d\n", 3: b"\n", 4: b"a b c", 5: b"\nx"}
    lines = RepeatedLines(pieces.__getitem__)
    for token in (0, 1, 2, 3):
        lines.accept(token)
    assert not lines.repeated  # blank lines are not lines of the answer
    lines.accept(4)
    assert not lines.repeated  # not yet a whole line
    lines.accept(5)
    assert lines.repeated
    lines.reset()
    assert not lines.repeated


@needs_llama
def test_after_a_repeated_line_the_answer_ends_where_the_grammar_lets_it() -> None:
    from pcm.llm.grammar_first import GrammarFirst, RepeatedLines

    end = 3
    pieces = {0: b"x\n", 1: b"y\n", end: b""}
    lines = RepeatedLines(pieces.__getitem__)
    step = GrammarFirst(AllowedTokens({0, 1}), lines, end)
    for token in (0, 1, 0):
        step.accept(token)
    cur = candidates([0.5, 2.0, 1.0, 1.5])
    step.apply(cur)  # the grammar refuses the end here: decoding goes on as before
    assert greedy(cur) == 1 and not step.ended_repeat
    step.grammar = AllowedTokens({0, 1, end})
    cur = candidates([0.5, 2.0, 1.0, 1.5])
    step.apply(cur)
    assert (cur.contents.size, greedy(cur), step.ended_repeat) == (1, end, True)


@needs_llama
def test_without_a_repeated_line_the_end_token_is_never_forced() -> None:
    from pcm.llm.grammar_first import GrammarFirst, RepeatedLines

    step = GrammarFirst(AllowedTokens({0, 1, 3}), RepeatedLines({0: b"x\n", 1: b"y\n"}.__getitem__), 3)
    for token in (0, 1):
        step.accept(token)
    cur = candidates([0.5, 2.0, 1.0, 1.5])
    step.apply(cur)
    assert greedy(cur) == 1 and not step.ended_repeat


def test_only_a_line_set_answer_asks_the_model_to_end_at_a_repeated_line(gguf: Path) -> None:
    client = LlamaCppClient(model_path=str(gguf), threads=1, context=512, factory=RecordingLlama,
                            gbnf=lambda text: text)
    seen = []
    for line_set in (True, False):
        schema = JsonSchema("lines", {}, grammar=lambda n: "root ::= [a-z]", line_set=line_set)
        client.complete(Request(system="S", messages=[Message.user("U")], operation="extract", schema=schema))
        seen.append(client._llama.end_at_repeated_line)
    client.complete(Request(system="S", messages=[Message.user("U")], operation="answer"))
    assert seen + [client._llama.end_at_repeated_line] == [True, False, False]


@needs_llama
def test_in_a_llama_cpp_chain_the_grammar_accepts_each_chosen_token_once() -> None:
    """The step sits in a real llama.cpp sampler chain: the chain's accept reaches the grammar exactly once, and
    freeing the chain leaves the Python-owned step alone."""
    import llama_cpp
    from llama_cpp._internals import LlamaSampler

    from pcm.llm.grammar_first import ChainStep, GrammarFirst

    grammar = AllowedTokens({0, 2})
    chain = LlamaSampler()
    ChainStep(GrammarFirst(grammar)).add_to(chain)
    chain.add_greedy()
    cur = candidates([0.5, 2.0, 1.0, 1.5])
    llama_cpp.llama_sampler_apply(chain.sampler, cur)
    token = cur.contents.data[cur.contents.selected].id
    llama_cpp.llama_sampler_accept(chain.sampler, token)
    llama_cpp.llama_sampler_reset(chain.sampler)
    assert (token, grammar.accepted, grammar.resets) == (2, [2], 1)
    chain.close()


@needs_llama
def test_a_llama_cpp_python_without_the_pieces_used_is_one_line_naming_its_version(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import llama_cpp

    from pcm.llm.grammar_first import check_support

    check_support()
    monkeypatch.delattr(llama_cpp, "llama_sampler_accept")
    monkeypatch.setattr(llama_cpp, "__version__", "9.9.9")
    with pytest.raises(LLMError, match=r"^llama-cpp-python 9\.9\.9 lacks llama_sampler_accept .*"
                                       r"PCM_LLM_FAST_GRAMMAR=0$"):
        check_support()


@needs_llama
def test_the_fast_path_is_on_unless_the_setting_turns_it_off() -> None:
    import llama_cpp

    from pcm.llm.grammar_first import GrammarFirstLlama
    from pcm.llm.llamacpp_client import _default_factory

    assert Settings.from_env({}).llm_fast_grammar is True
    assert Settings.from_env({"PCM_LLM_FAST_GRAMMAR": "0"}).llm_fast_grammar is False
    assert _default_factory(True) is GrammarFirstLlama and _default_factory(False) is llama_cpp.Llama


def both_paths(schema: JsonSchema, system: str, utterance: str, max_tokens: int) -> list[tuple[str, Any]]:
    """The answer of the model under ``schema`` with llama-cpp-python's sampler chain, then with the fast path."""
    answers = []
    for fast in (False, True):
        client = LlamaCppClient(model_path=GGUF, threads=os.cpu_count() or 2, context=2048, fast_grammar=fast)
        completion = client.complete(Request(system=system, messages=[Message.user(utterance)], operation="extract",
                                     schema=schema, max_tokens=max_tokens))
        answers.append((completion.text, getattr(client._llama, "last_step", None)))
        client.close()
    return answers


@needs_llama
@needs_gguf
@pytest.mark.model
def test_a_real_model_writes_the_same_answer_on_both_paths_under_a_small_grammar() -> None:
    """A grammar whose opening the model would not write unprompted, so both the one-token check and the fallback
    to the whole vocabulary are taken."""
    grammar = ('root ::= "ANSWER: {\\"colour\\": \\"" ("red" | "green" | "blue") "\\", \\"n\\": " [0-9]{1,3} '
               '", \\"note\\": \\"" [a-z ]{0,20} "\\"}"')
    schema = JsonSchema("answer", {"type": "object"}, grammar=lambda max_tokens: grammar)
    (old, _), (new, step) = both_paths(schema, "Answer in JSON.",
                                       "The sky is clear and I counted 17 birds. Give the colour and n.", 40)
    assert old == new and old.startswith('ANSWER: {"colour": "')
    assert step is not None and step.checked > 0 and step.full > 0


@needs_llama
@needs_gguf
@pytest.mark.model
def test_a_real_model_writes_the_same_extraction_on_both_paths() -> None:
    from pcm.extraction.jsonld import extraction_schema
    from pcm.ontology import load_ontology

    schema = extraction_schema(load_ontology())
    (old, _), (new, step) = both_paths(schema, "Extract what the user says as a JSON-LD graph.",
                                       "I bought a silver Honda Civic from Rosewood Auto; my dog Biscuit rode along.",
                                       48)
    assert old == new and old.startswith("{")
    assert step is not None and step.checked > 0


@needs_llama
def test_a_failing_fast_step_still_leaves_only_grammatical_tokens_to_greedy(monkeypatch: pytest.MonkeyPatch) -> None:
    """An exception inside a ctypes callback is reported (``sys.unraisablehook``), not raised, so the chain would go
    on to greedy; the whole-vocabulary grammar is applied first, so the chosen token is one the grammar allows."""
    import llama_cpp
    from llama_cpp._internals import LlamaSampler

    from pcm.llm.grammar_first import ChainStep, GrammarFirst

    class Broken(GrammarFirst):
        def apply(self, candidates: Any) -> None:
            raise RuntimeError("broken step")

    reported: list[BaseException | None] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda report: reported.append(report.exc_value))
    chain = LlamaSampler()
    ChainStep(Broken(AllowedTokens({0, 2}))).add_to(chain)
    chain.add_greedy()
    cur = candidates([0.5, 2.0, 1.0, 1.5])
    llama_cpp.llama_sampler_apply(chain.sampler, cur)
    assert cur.contents.data[cur.contents.selected].id == 2
    assert [str(error) for error in reported] == ["broken step"]
    chain.close()

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
from pcm.llm.base import JsonSchema
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
    completion = client.complete(system="SYSTEM", messages=[Message.user("U")], operation="extract", schema=SCHEMA,
                                 max_tokens=100)
    assert (completion.text, completion.input_tokens, completion.output_tokens) == ('{"n": 3}', 42, 5)
    call = client._llama.calls[-1]
    assert call["grammar"] == ("grammar of", json.dumps(SCHEMA.schema, sort_keys=True))
    assert "response_format" not in call
    assert call["temperature"] == 0.0 and call["max_tokens"] == 100
    assert [m["role"] for m in call["messages"]] == ["system", "user"]  # stable part first
    client.complete(system="SYSTEM", messages=[Message.user("U")], operation="answer")
    assert "response_format" not in client._llama.calls[-1] and "grammar" not in client._llama.calls[-1]
    assert client.usage.as_dict()["extract"]["input_tokens"] == 42


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
    client.complete(system="SYSTEM", messages=first, operation="extract")
    client.complete(system="SYSTEM", messages=[*first, Message.assistant("A"), Message.user("R")],
                    operation="repair")
    client.complete(system="SYSTEM", messages=[Message.user("U2")], operation="extract")
    assert len(RecordingLlama.made) == made + 1 and ResettingLlama.resets == 0
    calls = client._llama.calls
    assert [c["messages"][0] for c in calls] == [{"role": "system", "content": "SYSTEM"}] * 3
    assert calls[1]["messages"][:2] == calls[0]["messages"]  # the repair round extends the first call's prompt


def test_auto_output_is_json_for_the_in_process_model(gguf: Path) -> None:
    client = LlamaCppClient(model_path=str(gguf), threads=1, context=512, factory=RecordingLlama)
    assert output_format("auto", client) == "json" and output_format("turtle", client) == "turtle"


@pytest.mark.skipif(not HAVE_LLAMA, reason="llama-cpp-python is not installed (pip install 'pcm[local]')")
@pytest.mark.skipif(not GGUF or not Path(GGUF).is_file(), reason="PCM_TEST_GGUF does not name a GGUF model file")
def test_a_real_model_answers_inside_the_schema() -> None:
    import jsonschema

    client = LlamaCppClient(model_path=GGUF, threads=os.cpu_count() or 2, context=2048)
    completion = client.complete(system="Answer with JSON.", messages=[Message.user("Give n = 3.")],
                                 operation="extract", schema=SCHEMA, max_tokens=32)
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
    client.complete(system="S", messages=[Message.user("U")], operation="extract")
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
        client.complete(system="S", messages=[Message.user("U")], operation="extract", schema=schema, max_tokens=300)
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
    assert offered.grammar(500).endswith('known ::= "\\"m:biscuit\\"" | "\\"m:owner\\""\n')


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
        client.complete(system="S", messages=[Message.user("U")], operation="extract", schema=schema)
        assert client._llama.calls[-1]["grammar"] == f"built root ::= \"{n}\""
    assert len(built) == GRAMMARS_KEPT + 5 and len(client._grammars) == GRAMMARS_KEPT


@pytest.mark.skipif(not HAVE_LLAMA, reason="llama-cpp-python is not installed (pip install 'pcm[local]')")
@pytest.mark.skipif(not GGUF or not Path(GGUF).is_file(), reason="PCM_TEST_GGUF does not name a GGUF model file")
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

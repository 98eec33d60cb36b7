"""LLM clients against a local fake server speaking the Anthropic and OpenAI wire formats (see ``llm_wire``).

The network clients are the real ones (the anthropic SDK, httpx); only the server is fake. Waits between retries go
through an injected ``sleep`` that records the delay instead of sleeping, so the backoff maths is asserted exactly
and the tests stay fast.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest

from pcm.errors import LLMError, UsageError
from pcm.llm import (
    AnthropicClient,
    Completion,
    LLMClient,
    Message,
    OpenAICompatibleClient,
    ScriptedClient,
    Usage,
    make_client,
)
from pcm.llm.base import JsonSchema, Request
from pcm.llm.retry import parse_retry_after
from pcm.settings import DEFAULT_ANTHROPIC_MODEL, LLMSpec, Settings
from tests.llm_wire import FakeLLMServer, Received, Reply

PROVIDERS = ["anthropic", "openai"]
SYSTEM = "You extract facts as Turtle."
MESSAGES = [Message.user("I adopted a cat."), Message.assistant("Noted."), Message.user("Her name is Mia.")]
MODEL = "test-model"
KEY = "sk-test-123"

Connect = Callable[..., tuple[Any, list[float]]]


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake


@pytest.fixture
def connect(server: FakeLLMServer) -> Iterator[Connect]:
    """``connect(provider, **overrides) -> (client, sleeps)``: a real client aimed at the fake server."""
    clients: list[Any] = []

    def _connect(provider: str, **overrides: Any) -> tuple[Any, list[float]]:
        sleeps: list[float] = []
        kw: dict[str, Any] = {"model": MODEL, "timeout": 5.0, "max_retries": 3, "backoff": 0.01, "sleep": sleeps.append}
        kw.update(overrides)
        if provider == "anthropic":
            client: Any = AnthropicClient(api_key=kw.pop("api_key", KEY), base_url=server.url, **kw)
        else:
            client = OpenAICompatibleClient(api_key=kw.pop("api_key", KEY), base_url=server.openai_url, **kw)
        clients.append(client)
        return client, sleeps

    yield _connect
    for client in clients:
        client.close()


def _call(client: Any, operation: str = "extract", **kw: Any) -> Completion:
    return client.complete(Request(system=SYSTEM, messages=MESSAGES, operation=operation, **kw))


def _wire_messages(received: Received) -> list[dict[str, str]]:
    """The chat turns the server got, without the OpenAI system message."""
    messages = received.body["messages"]
    return [m for m in messages if m["role"] != "system"]


# --- success and what goes over the wire -------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_success_sends_temperature_zero_model_system_and_messages(
    provider: str, server: FakeLLMServer, connect: Connect
) -> None:
    server.push(Reply.ok("ex:mia a ex:Cat .", input_tokens=42, output_tokens=9))
    client, sleeps = connect(provider)

    completion = _call(client, max_tokens=321)

    assert completion.text == "ex:mia a ex:Cat ."
    assert (completion.model, completion.input_tokens, completion.output_tokens) == (MODEL, 42, 9)
    assert completion.stop_reason == ("end_turn" if provider == "anthropic" else "stop")
    [received] = server.requests
    body = received.body
    assert body["model"] == MODEL
    assert body["temperature"] == 0
    assert body["max_tokens"] == 321
    assert _wire_messages(received) == [{"role": m.role, "content": m.content} for m in MESSAGES]
    if provider == "anthropic":
        assert received.path == "/v1/messages"
        assert body["system"] == SYSTEM
        assert received.headers["x-api-key"] == KEY
        assert received.headers["anthropic-version"] == "2023-06-01"
        assert client.name == f"anthropic:{MODEL}"
    else:
        assert received.path == "/v1/chat/completions"
        assert body["messages"][0] == {"role": "system", "content": SYSTEM}
        assert received.headers["authorization"] == f"Bearer {KEY}"
        assert client.name == f"openai:{server.openai_url}#{MODEL}"
    assert client.usage.as_dict() == {"extract": {"calls": 1, "input_tokens": 42, "output_tokens": 9}}
    assert sleeps == []
    assert isinstance(client, LLMClient)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_empty_system_prompt_is_not_sent(provider: str, server: FakeLLMServer, connect: Connect) -> None:
    server.push(Reply.ok("hi"))
    client, _ = connect(provider)
    client.complete(Request(system="", messages=[Message.user("hello")], operation="answer"))
    body = server.requests[0].body
    assert "system" not in body
    assert [m["role"] for m in body["messages"]] == ["user"]


def test_openai_without_key_sends_no_authorization(server: FakeLLMServer, connect: Connect) -> None:
    server.push(Reply.ok("hi"))
    client, _ = connect("openai", api_key="")
    assert _call(client).text == "hi"
    assert "authorization" not in server.requests[0].headers


def test_openai_missing_usage_counts_zero_tokens(server: FakeLLMServer, connect: Connect) -> None:
    """Some local servers omit ``usage``: the call still succeeds and is counted."""
    server.push(Reply(json_body={"choices": [{"message": {"role": "assistant", "content": "ok"}}]}))
    client, _ = connect("openai")
    completion = _call(client)
    assert (completion.text, completion.input_tokens, completion.output_tokens) == ("ok", 0, 0)
    assert completion.model == MODEL
    assert client.usage.as_dict()["extract"]["calls"] == 1


# --- retries -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("status", [429, 500, 503, 529])
def test_transient_error_then_success_is_retried(
    provider: str, status: int, server: FakeLLMServer, connect: Connect
) -> None:
    server.push(Reply.error(status, "try later"), Reply.ok("fine"))
    client, sleeps = connect(provider)
    assert _call(client).text == "fine"
    assert len(server.requests) == 2
    assert len(sleeps) == 1
    assert server.requests[0].body == server.requests[1].body
    assert client.usage.as_dict()["extract"]["calls"] == 1


def test_anthropic_overloaded_error_body_is_retried(server: FakeLLMServer, connect: Connect) -> None:
    server.push(Reply.error(529, "Overloaded", error_type="overloaded_error"), Reply.ok("fine"))
    client, sleeps = connect("anthropic")
    assert _call(client).text == "fine"
    assert len(server.requests) == 2 and len(sleeps) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_retry_after_is_respected_and_capped(provider: str, server: FakeLLMServer, connect: Connect) -> None:
    server.push(
        Reply.error(429, "slow down", headers={"retry-after": "0.25"}),
        Reply.error(429, "slow down", headers={"retry-after": "1000"}),
        Reply.error(503, "busy", headers={"retry-after-ms": "40"}),
        Reply.ok("done"),
    )
    client, sleeps = connect(provider, max_wait=5.0)
    assert _call(client).text == "done"
    assert sleeps == pytest.approx([0.25, 5.0, 0.04])


@pytest.mark.parametrize("provider", PROVIDERS)
def test_backoff_is_exponential_with_small_jitter(provider: str, server: FakeLLMServer, connect: Connect) -> None:
    server.push(*[Reply.error(500, "oops")] * 3, Reply.ok("done"))
    client, sleeps = connect(provider, backoff=0.5)
    assert _call(client).text == "done"
    assert len(sleeps) == 3
    for index, delay in enumerate(sleeps):
        base = 0.5 * 2**index
        assert base <= delay <= base * 1.1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_retries_exhausted_raise_one_line_llm_error(provider: str, server: FakeLLMServer, connect: Connect) -> None:
    server.push(*[Reply.error(503, "still\nbusy")] * 5)
    client, sleeps = connect(provider, max_retries=2)
    with pytest.raises(LLMError, match=r"503.*3 attempt") as info:
        _call(client)
    assert "\n" not in str(info.value)
    assert len(server.requests) == 3
    assert len(sleeps) == 2
    assert client.usage.as_dict() == {}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_zero_retries_means_one_attempt(provider: str, server: FakeLLMServer, connect: Connect) -> None:
    """The SDK's own retries are off: a 500 with max_retries=0 is exactly one request."""
    server.push(Reply.error(500, "oops"), Reply.ok("never"))
    client, sleeps = connect(provider, max_retries=0)
    with pytest.raises(LLMError, match="500"):
        _call(client)
    assert len(server.requests) == 1 and sleeps == []


@pytest.mark.parametrize("provider", PROVIDERS)
def test_silence_past_the_deadline_is_reported_and_never_resent(
    provider: str, server: FakeLLMServer, connect: Connect
) -> None:
    server.push(Reply.ok("late", delay=1.0), Reply.ok("late", delay=1.0))
    client, sleeps = connect(provider, timeout=0.2, max_retries=3)
    with pytest.raises(LLMError, match=r"no reply for 0.2 s \(silence deadline\); not re-sent") as info:
        _call(client)
    assert "\n" not in str(info.value)
    assert len(server.requests) == 1  # the server may still be working on it: no second copy queued behind it
    assert sleeps == []


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_deadline_measures_silence_not_total_time(
    provider: str, server: FakeLLMServer, connect: Connect
) -> None:
    # 8 pieces 0.2 s apart: 1.4 s in all, never silent for the 1 s deadline.
    server.push(Reply.ok("abcdefghijklmnop", chunks=8, chunk_delay=0.2))
    client, _ = connect(provider, timeout=1.0, max_retries=0)
    completion = _call(client)
    assert completion.text == "abcdefghijklmnop"
    assert (completion.input_tokens, completion.output_tokens) == (11, 7)
    assert len(server.requests) == 1 and server.requests[0].body["stream"] is True


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_gateway_timeout_is_not_resent(provider: str, server: FakeLLMServer, connect: Connect) -> None:
    server.push(Reply.error(504, "upstream timed out"), Reply.ok("never"))
    client, sleeps = connect(provider)
    with pytest.raises(LLMError, match="504.*not re-sent"):
        _call(client)
    assert len(server.requests) == 1 and sleeps == []


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_long_wait_prints_progress_lines(provider: str, server: FakeLLMServer, connect: Connect) -> None:
    lines: list[str] = []
    reported = threading.Event()

    def write(line: str) -> None:
        lines.append(line)
        reported.set()

    def slow(_: Received) -> Reply:
        assert reported.wait(10), "no progress line while the server was silent"
        return Reply.ok("done")

    server.push(slow)
    client, _ = connect(provider, progress=write, progress_after=0.05)
    assert _call(client).text == "done"
    assert lines and "waiting for the first token" in lines[0] and client.name in lines[0]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_one_request_at_a_time_to_a_local_server(provider: str, server: FakeLLMServer, connect: Connect) -> None:
    first_in, second_in = threading.Event(), threading.Event()
    overlapped: list[bool] = []

    def first(_: Received) -> Reply:
        first_in.set()
        # Held open for up to 1 s: a second request arriving meanwhile would be a second one in flight.
        overlapped.append(second_in.wait(1.0))
        return Reply.ok("one")

    def second(_: Received) -> Reply:
        second_in.set()
        return Reply.ok("two")

    server.push(first, second)
    client, _ = connect(provider)
    assert client.local  # 127.0.0.1
    results: list[str] = []
    one = threading.Thread(target=lambda: results.append(_call(client).text))
    one.start()
    assert first_in.wait(10)
    two = threading.Thread(target=lambda: results.append(_call(client).text))
    two.start()
    one.join()
    two.join()
    assert overlapped == [False]
    assert sorted(results) == ["one", "two"] and len(server.requests) == 2


@pytest.mark.parametrize("provider", PROVIDERS)
def test_unreachable_server_is_retried_then_reported(provider: str) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sleeps: list[float] = []
    kw: dict[str, Any] = {"model": MODEL, "timeout": 2.0, "max_retries": 1, "sleep": sleeps.append}
    if provider == "anthropic":
        client: Any = AnthropicClient(api_key=KEY, base_url=f"http://127.0.0.1:{port}", **kw)
    else:
        client = OpenAICompatibleClient(base_url=f"http://127.0.0.1:{port}/v1", **kw)
    with pytest.raises(LLMError, match=rf"cannot reach http://127.0.0.1:{port}.*2 attempt"):
        _call(client)
    assert len(sleeps) == 1
    client.close()


# --- errors that retrying cannot fix -----------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("status", [401, 403])
def test_bad_key_is_not_retried_and_names_the_key(
    provider: str, status: int, server: FakeLLMServer, connect: Connect
) -> None:
    server.push(Reply.error(status, "invalid x-api-key"))
    client, sleeps = connect(provider)
    env = "ANTHROPIC_API_KEY" if provider == "anthropic" else "OPENAI_API_KEY"
    with pytest.raises(LLMError, match=rf"API key was refused.*{env}"):
        _call(client)
    assert len(server.requests) == 1 and sleeps == []


@pytest.mark.parametrize("provider", PROVIDERS)
def test_unknown_model_names_the_model(provider: str, server: FakeLLMServer, connect: Connect) -> None:
    server.push(Reply.error(404, "model: claude-nope"))
    client, sleeps = connect(provider, model="claude-nope")
    with pytest.raises(LLMError, match=r"unknown model 'claude-nope'"):
        _call(client)
    assert len(server.requests) == 1 and sleeps == []


def test_ollama_style_string_error_is_read(server: FakeLLMServer, connect: Connect) -> None:
    server.push(Reply(status=404, json_body={"error": "model \"llama9\" not found, try pulling it first"}))
    client, _ = connect("openai", model="llama9")
    with pytest.raises(LLMError, match=r"unknown model 'llama9'.*try pulling it first"):
        _call(client)


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    "reply",
    [
        Reply(raw=b"<html>\n<body>proxy says hi</body>\n</html>", content_type="text/html"),
        Reply(raw=b""),
        Reply(json_body={"id": "x", "unexpected": True}),
        Reply(json_body=["not", "an", "object"]),
        Reply(json_body={"choices": [], "content": None}),
    ],
    ids=["html", "empty", "missing-fields", "list", "empty-choices"],
)
def test_malformed_body_is_a_clear_error(
    provider: str, reply: Reply, server: FakeLLMServer, connect: Connect
) -> None:
    server.push(reply)
    client, sleeps = connect(provider)
    with pytest.raises(LLMError, match="malformed response") as info:
        _call(client)
    assert "\n" not in str(info.value)
    assert len(server.requests) == 1 and sleeps == []
    assert client.usage.as_dict() == {}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_other_client_error_is_not_retried(provider: str, server: FakeLLMServer, connect: Connect) -> None:
    server.push(Reply.error(400, "max_tokens: 999999 > 64000, the maximum"))
    client, sleeps = connect(provider)
    with pytest.raises(LLMError, match=r"request rejected \(HTTP 400: max_tokens"):
        _call(client)
    assert len(server.requests) == 1 and sleeps == []


@pytest.mark.parametrize("provider", PROVIDERS)
def test_model_refusing_temperature_falls_back_without_it(
    provider: str, server: FakeLLMServer, connect: Connect
) -> None:
    server.push(
        Reply.error(400, "`temperature` is deprecated for this model."), Reply.ok("first"), Reply.ok("second")
    )
    client, sleeps = connect(provider)
    assert _call(client).text == "first"
    assert _call(client).text == "second"
    assert [("temperature" in r.body) for r in server.requests] == [True, False, False]
    assert sleeps == []
    assert client.usage.as_dict()["extract"]["calls"] == 2


def test_retry_after_header_forms() -> None:
    future = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25 <= (parse_retry_after({"Retry-After": future}) or 0) <= 30
    assert parse_retry_after({"retry-after": "7"}) == 7.0
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


def test_anthropic_missing_key_says_what_to_do() -> None:
    with pytest.raises(LLMError, match=r"ANTHROPIC_API_KEY.*PCM_LLM=none"):
        AnthropicClient(api_key="", model=MODEL, timeout=1.0, max_retries=0)


# --- usage -------------------------------------------------------------------------------------------------------


def _completion(input_tokens: int, output_tokens: int) -> Completion:
    return Completion("x", "m", input_tokens, output_tokens, None)


def test_usage_counts_per_operation_and_totals() -> None:
    usage = Usage()
    usage.record("extract", _completion(10, 5))
    usage.record("extract", _completion(1, 2))
    usage.record("judge", _completion(100, 50))
    assert usage.as_dict() == {
        "extract": {"calls": 2, "input_tokens": 11, "output_tokens": 7},
        "judge": {"calls": 1, "input_tokens": 100, "output_tokens": 50},
    }
    assert usage.totals == {"calls": 3, "input_tokens": 111, "output_tokens": 57}
    snapshot = usage.as_dict()
    snapshot["extract"]["calls"] = 99
    assert usage.as_dict()["extract"]["calls"] == 2


def test_usage_is_thread_safe() -> None:
    usage = Usage()

    def work(operation: str) -> None:
        for _ in range(2000):
            usage.record(operation, _completion(1, 2))

    threads = [threading.Thread(target=work, args=(op,)) for op in ["a", "b", "a", "b", "a", "b", "a", "b"]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert usage.as_dict()["a"] == {"calls": 8000, "input_tokens": 8000, "output_tokens": 16000}
    assert usage.totals["calls"] == 16000


def test_message_role_is_checked() -> None:
    with pytest.raises(ValueError, match="role"):
        Message("system", "no: the system prompt is a separate argument")


# --- scripted client ---------------------------------------------------------------------------------------------


def test_scripted_replays_in_order_and_records_requests() -> None:
    client = ScriptedClient(["one", "two"])
    first = client.complete(Request(system="s1", messages=[Message.user("a")], operation="extract"))
    second = client.complete(Request(system="s2", messages=[Message.user("b")], operation="answer"))
    assert (first.text, second.text) == ("one", "two")
    assert client.requests == [("s1", [Message.user("a")], "extract"), ("s2", [Message.user("b")], "answer")]
    assert client.usage.as_dict() == {
        "extract": {"calls": 1, "input_tokens": 0, "output_tokens": 0},
        "answer": {"calls": 1, "input_tokens": 0, "output_tokens": 0},
    }
    assert client.remaining == 0
    assert isinstance(client, LLMClient)


def test_scripted_callable_computes_reply_from_request() -> None:
    def echo(system: str, messages: list[Message], operation: str) -> str:
        return f"{operation}|{system}|{messages[-1].content.upper()}"

    client = ScriptedClient(["fixed", echo])
    client.complete(Request(system="s", messages=[Message.user("x")], operation="extract"))
    reply = client.complete(Request(system="sys", messages=[Message.user("q")], operation="nl2sparql"))
    assert reply.text == "nl2sparql|sys|Q"


def test_scripted_exhaustion_is_an_llm_error() -> None:
    client = ScriptedClient(["only"])
    client.complete(Request(system="", messages=[Message.user("a")], operation="extract"))
    with pytest.raises(LLMError, match=r"ran out of scripted responses at call 2 \(operation 'repair'\)"):
        client.complete(Request(system="", messages=[Message.user("b")], operation="repair"))
    assert len(client.requests) == 2


def test_scripted_from_file(tmp_path: Path) -> None:
    path = tmp_path / "replies.json"
    path.write_text(json.dumps(["alpha", "beta"]), encoding="utf-8")
    client = ScriptedClient.from_file(path)
    texts = [client.complete(Request(system="", messages=[Message.user("q")], operation="answer")).text for _ in range(2)]
    assert texts == ["alpha", "beta"]
    assert client.name == f"scripted:{path}"


@pytest.mark.parametrize(
    ("content", "match"),
    [(None, "cannot read"), ("{not json", "not valid JSON"), ('{"a": 1}', "list of strings"), ("[1, 2]", "list of strings")],
)
def test_scripted_from_file_rejects_bad_files(tmp_path: Path, content: str | None, match: str) -> None:
    path = tmp_path / "replies.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(LLMError, match=match):
        ScriptedClient.from_file(path)


# --- make_client -------------------------------------------------------------------------------------------------


def test_make_client_none() -> None:
    assert make_client(Settings(llm=LLMSpec.parse("none"))) is None


def test_make_client_anthropic_uses_settings() -> None:
    settings = Settings(
        llm=LLMSpec.parse("anthropic"), anthropic_api_key=KEY, llm_timeout=12.5, llm_max_retries=7
    )
    client = make_client(settings)
    assert isinstance(client, AnthropicClient)
    assert client.name == f"anthropic:{DEFAULT_ANTHROPIC_MODEL}"
    assert client.timeout == 12.5 and client.retry.max_retries == 7
    client.close()


def test_make_client_anthropic_without_key_fails() -> None:
    with pytest.raises(LLMError, match="ANTHROPIC_API_KEY"):
        make_client(Settings(llm=LLMSpec.parse("anthropic:claude-haiku-4-5")))


def test_make_client_anthropic_talks_to_its_base_url(server: FakeLLMServer) -> None:
    server.push(Reply.ok("hello"))
    settings = Settings(llm=LLMSpec("anthropic", "claude-x", server.url), anthropic_api_key=KEY)
    client = make_client(settings)
    assert client is not None
    assert _call(client, operation="judge").text == "hello"
    assert server.requests[0].body["model"] == "claude-x"
    assert client.usage.as_dict()["judge"]["calls"] == 1


def test_make_client_openai(server: FakeLLMServer) -> None:
    server.push(Reply.ok("hello"))
    settings = Settings(
        llm=LLMSpec.parse(f"openai:{server.openai_url}#llama3.1"), openai_api_key="", llm_max_retries=2
    )
    client = make_client(settings)
    assert isinstance(client, OpenAICompatibleClient)
    assert client.name == f"openai:{server.openai_url}#llama3.1"
    assert client.retry.max_retries == 2
    assert _call(client).text == "hello"
    assert server.requests[0].body["model"] == "llama3.1"
    client.close()


def test_make_client_scripted(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text('["canned"]', encoding="utf-8")
    client = make_client(Settings(llm=LLMSpec.parse(f"scripted:{path}")))
    assert isinstance(client, ScriptedClient)
    assert _call(client).text == "canned"


def test_make_client_scripted_needs_a_path() -> None:
    with pytest.raises(LLMError, match="scripted:PATH"):
        make_client(Settings(llm=LLMSpec("scripted")))


def test_make_client_unknown_provider() -> None:
    with pytest.raises(UsageError, match="unknown LLM provider 'gemini'"):
        make_client(Settings(llm=LLMSpec("gemini", "x")))


# --- where the model runs ----------------------------------------------------------------------------------------


def test_anthropic_base_url_comes_from_the_environment(server: FakeLLMServer) -> None:
    server.push(Reply.ok("through the gateway"))
    settings = Settings.from_env({"PCM_LLM": "anthropic:claude-x", "ANTHROPIC_API_KEY": KEY,
                                  "ANTHROPIC_BASE_URL": server.url})
    client = make_client(settings)
    assert client is not None
    assert _call(client).text == "through the gateway"
    assert server.requests[0].path == "/v1/messages" and server.requests[0].headers["x-api-key"] == KEY


@pytest.mark.parametrize(
    ("url", "local"),
    [("http://127.0.0.1:8080/v1", True), ("http://localhost:11434/v1", True), ("http://[::1]:8000/v1", True),
     ("https://api.anthropic.com", False), ("http://192.168.1.5:11434/v1", False), ("https://llm.example.com", False)],
)
def test_local_servers_get_a_longer_silence_deadline(url: str, local: bool) -> None:
    from pcm.llm.manners import HOSTED_IDLE_TIMEOUT, LOCAL_IDLE_TIMEOUT, is_local

    assert is_local(url) is local
    client = OpenAICompatibleClient(base_url=url, model="m", timeout=None, max_retries=0)
    assert client.timeout == (LOCAL_IDLE_TIMEOUT if local else HOSTED_IDLE_TIMEOUT)
    client.close()
    configured = OpenAICompatibleClient(base_url=url, model="m", timeout=42.0, max_retries=0)
    assert configured.timeout == 42.0
    configured.close()


def test_a_server_that_ignores_stream_is_read_as_one_body(server: FakeLLMServer, connect: Connect) -> None:
    server.push(Reply.ok("whole", stream=False))
    client, _ = connect("openai")
    completion = _call(client)
    assert (completion.text, completion.input_tokens, completion.stop_reason) == ("whole", 11, "stop")


def test_a_server_refusing_stream_options_gets_none_after_one_refusal(
    server: FakeLLMServer, connect: Connect
) -> None:
    server.push(Reply.error(400, "unrecognized field: stream_options"), Reply.ok("fine"), Reply.ok("again"))
    client, _ = connect("openai")
    assert _call(client).text == "fine"
    assert _call(client).text == "again"
    assert "stream_options" in server.requests[0].body
    assert "stream_options" not in server.requests[1].body and "stream_options" not in server.requests[2].body


# --- constrained output --------------------------------------------------------------------------------------------

SCHEMA_ = JsonSchema("answer", {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
                     "Record the number.")


def test_openai_compatible_servers_get_response_format_json_schema(server: FakeLLMServer, connect: Connect) -> None:
    server.push(Reply.ok('{"n": 3}'))
    client, _ = connect("openai")
    assert _call(client, schema=SCHEMA_).text == '{"n": 3}'
    sent = server.requests[0].body["response_format"]
    assert sent["type"] == "json_schema"
    assert sent["json_schema"]["name"] == "answer" and sent["json_schema"]["schema"] == SCHEMA_.schema


BOUNDED = JsonSchema("answer", SCHEMA_.schema, grammar=lambda max_tokens: f"root ::= [0-9]{{1,{max_tokens}}}")
LLAMA_CPP_MODELS = {"object": "list", "data": [{"id": "qwen", "object": "model", "owned_by": "llamacpp"}]}


def test_a_llama_cpp_server_gets_the_bounded_grammar_instead_of_the_schema(
    server: FakeLLMServer, connect: Connect
) -> None:
    server.models = LLAMA_CPP_MODELS
    server.push(Reply.ok("3"), Reply.ok("4"))
    client, _ = connect("openai")
    assert _call(client, schema=BOUNDED, max_tokens=300).text == "3"
    assert _call(client, schema=BOUNDED, max_tokens=50).text == "4"
    posts = server.requests
    assert [r.body["grammar"] for r in posts] == ["root ::= [0-9]{1,300}", "root ::= [0-9]{1,50}"]
    assert all("response_format" not in r.body for r in posts)  # llama.cpp refuses both at once
    assert server.gets == ["/v1/models"]  # asked once


def test_other_servers_never_get_a_grammar_field_they_would_ignore(server: FakeLLMServer, connect: Connect) -> None:
    server.models = {"object": "list", "data": [{"id": "qwen", "object": "model", "owned_by": "library"}]}
    server.push(Reply.ok('{"n": 3}'))
    client, _ = connect("openai")
    _call(client, schema=BOUNDED)
    body = server.requests[-1].body
    assert "grammar" not in body and body["response_format"]["type"] == "json_schema"


def test_a_server_refusing_the_grammar_gets_the_schema_with_one_warning(
    server: FakeLLMServer, connect: Connect, caplog: pytest.LogCaptureFixture
) -> None:
    server.models = LLAMA_CPP_MODELS
    server.push(Reply.error(400, "Failed to parse grammar"), Reply.ok('{"n": 3}'), Reply.ok('{"n": 4}'))
    client, sleeps = connect("openai")
    with caplog.at_level("WARNING"):
        assert _call(client, schema=BOUNDED).text == '{"n": 3}'
        assert _call(client, schema=BOUNDED).text == '{"n": 4}'
    posts = [r.body for r in server.requests]
    assert "grammar" in posts[0] and all("grammar" not in b and "response_format" in b for b in posts[1:])
    assert len([r for r in caplog.records if "bounded grammar" in r.getMessage()]) == 1
    assert client.constrained is True and sleeps == []


def test_anthropic_gets_forced_tool_use_and_the_tool_input_is_the_text(server: FakeLLMServer, connect: Connect) -> None:
    server.push(Reply.ok('{"n": 3}', chunks=3))
    client, _ = connect("anthropic")
    completion = _call(client, schema=SCHEMA_)
    assert completion.text == '{"n": 3}' and completion.stop_reason == "tool_use"
    body = server.requests[0].body
    assert body["tools"] == [{"name": "answer", "description": "Record the number.", "input_schema": SCHEMA_.schema}]
    assert body["tool_choice"] == {"type": "tool", "name": "answer"}


@pytest.mark.parametrize(
    ("provider", "message", "field"),
    [("openai", "response_format json_schema is not supported", "response_format"),
     ("anthropic", "tool_choice: tools are not supported by this gateway", "tools")],
)
def test_a_server_rejecting_the_schema_falls_back_to_free_form_with_one_warning(
    provider: str, message: str, field: str, server: FakeLLMServer, connect: Connect,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server.push(Reply.error(400, message), Reply.ok('{"n": 3}'), Reply.ok('{"n": 4}'))
    client, sleeps = connect(provider)
    with caplog.at_level("WARNING"):
        assert _call(client, schema=SCHEMA_).text == '{"n": 3}'
        assert _call(client, schema=SCHEMA_).text == '{"n": 4}'
    assert field in server.requests[0].body
    assert all(field not in r.body for r in server.requests[1:])
    assert len([r for r in caplog.records if "free-form" in r.getMessage()]) == 1
    assert client.constrained is False and sleeps == []


def test_a_rejection_about_something_else_is_not_mistaken_for_the_schema(
    server: FakeLLMServer, connect: Connect
) -> None:
    server.push(Reply.error(400, "messages: too many turns"))
    client, _ = connect("openai")
    with pytest.raises(LLMError, match="too many turns"):
        _call(client, schema=SCHEMA_)
    assert len(server.requests) == 1


def test_the_scripted_client_records_the_schema_asked_for() -> None:
    client = ScriptedClient(['{"n": 1}', "free"])
    _call(client, schema=SCHEMA_)
    _call(client)
    assert client.schemas == [SCHEMA_, None]


def test_every_provider_pcm_llm_can_name_has_a_client() -> None:
    """The two tables (how ``PCM_LLM`` names a provider, how its client is built) list the same providers."""
    from pcm.llm.factory import PROVIDERS
    from pcm.settings import _SPEC_FORMS

    assert set(_SPEC_FORMS) == set(PROVIDERS)

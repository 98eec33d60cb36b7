"""The JSON API against its own description: ``/openapi.json`` is a valid OpenAPI 3.1 document, it describes every
``/api`` route the front serves, and every real answer (errors included) fits the schema the document gives for
that route, method and status. Also: idempotent ingest, the OpenAI-style messages body, one name per field.

A real server over a real memory, with the side index on (the tests' bag-of-words embedder, so recall, ask and
hybrid search answer in milliseconds).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import jsonschema
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as examples
from hypothesis import strategies as st
from openapi_spec_validator import validate as validate_spec

from pcm.endpoint.server import PcmServer
from pcm.settings import Settings
from tests.endpoint.test_endpoint_reindex import _follow, _patch
from tests.endpoint.test_endpoint_support import AUTH, POSTS, build_memory, serving

MAX_BODY = 64 * 1024


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return build_memory(tmp_path_factory.mktemp("openapi") / "memory").with_(index_enabled=True)


@pytest.fixture(scope="module")
def server(settings: Settings) -> Iterator[PcmServer]:
    with pytest.MonkeyPatch.context() as patch:
        _patch(patch)
        with serving(settings, max_body=MAX_BODY) as running:
            assert httpx.post(running.url + "/api/reindex", headers=AUTH).status_code == 202  # with this embedder
            assert _follow(running.url)["state"] == "done"
            yield running


@pytest.fixture(scope="module")
def document(url: str) -> dict[str, Any]:
    answer = httpx.get(url + "/openapi.json")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/json")
    return dict(answer.json())


class Checker:
    """Checks each answer against the document and remembers which (path, method, status) it has seen."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.seen: set[tuple[str, str, int]] = set()

    def schema_for(self, path: str, method: str, status: int) -> dict[str, Any]:
        operation = self.document["paths"].get(path, {}).get(method.lower())
        if operation is None:  # a path or method the API does not have: still the one error shape
            return {"$ref": "#/components/schemas/ErrorBody"}
        responses = operation["responses"]
        response = responses.get(str(status)) or responses["default"]
        content = response["content"]
        return dict((content.get("application/json") or content.get("application/x-ndjson")
                     or {"schema": {"type": "string"}})["schema"])

    def __call__(self, answer: httpx.Response, path: str | None = None) -> httpx.Response:
        method = answer.request.method
        path = path or answer.request.url.path
        schema = {**self.schema_for(path, method, answer.status_code), "components": self.document["components"]}
        if answer.headers["content-type"].startswith("application/x-ndjson"):  # streamed: every line fits
            lines = [json.loads(line) for line in answer.text.splitlines() if line.strip()]
            assert lines, path
            for line in lines:
                jsonschema.Draft202012Validator(schema).validate(line)
            self.seen.add((path, method, answer.status_code))
            return answer
        media_type = answer.headers["content-type"].split(";")[0]
        operation = self.document["paths"].get(path, {}).get(method.lower(), {})
        offered = operation.get("responses", {}).get(str(answer.status_code), {}).get("content", {})
        if media_type != "application/json" and media_type in offered:  # a documented text answer (a dump)
            assert answer.text, path
            self.seen.add((path, method, answer.status_code))
            return answer
        assert media_type == "application/json", (path, answer.status_code, answer.text)
        body = answer.json()
        jsonschema.Draft202012Validator(schema).validate(body)
        if answer.status_code >= 400:
            assert isinstance(body["error"], str) and body["error"], body
        self.seen.add((path, method, answer.status_code))
        return answer


@pytest.fixture
def check(document: dict[str, Any]) -> Checker:
    return Checker(document)


def posts(url: str) -> int:
    answer = httpx.post(url + "/query", data={"query": POSTS}, headers={"Accept": "application/sparql-results+json"})
    return int(answer.json()["results"]["bindings"][0]["n"]["value"])


# ------------------------------------------------------------------------------------------------ the document


def test_the_document_is_valid_openapi_31(document: dict[str, Any]) -> None:
    validate_spec(document)
    assert document["openapi"].startswith("3.1")


def test_the_document_describes_exactly_the_routes_served(server: PcmServer, document: dict[str, Any]) -> None:
    assert server.app is not None
    assert set(document["paths"]) == set(server.app.api_routes())
    for path, item in document["paths"].items():
        for method, operation in item.items():
            responses = operation["responses"]
            assert "default" in responses and {"403", "413", "500"} <= set(responses), (path, method)
            for status, response in responses.items():
                if status.startswith(("4", "5")) and status != "409":
                    assert response["content"]["application/json"]["schema"] == {
                        "$ref": "#/components/schemas/ErrorBody"
                    }, (path, method, status)
            if operation.get("security"):
                assert "401" in responses, (path, method)
    ingest = document["paths"]["/api/ingest"]["post"]
    assert any(p["name"] == "Idempotency-Key" and p["in"] == "header" for p in ingest["parameters"])


# ------------------------------------------------------------------------------------------------ real answers


def test_every_route_answers_as_documented(url: str, server: PcmServer, check: Checker,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    get: Callable[..., httpx.Response] = lambda path, **params: check(httpx.get(url + path, params=params, timeout=60))  # noqa: E731

    def post(path: str, **kwargs: Any) -> httpx.Response:
        return check(httpx.post(url + path, timeout=60, **kwargs), path)

    # every operation's success
    assert get("/api/health").json()["status"] == "ok"
    assert get("/api/info").json()["writable"] is True
    # other tests of the module ingest into the same server, in whatever order they run: counts are relative
    sessions = {c["id"] for c in get("/api/conversations").json()}
    stats = get("/api/stats").json()
    assert "dana-05-pets" in sessions and stats["posts"] == posts(url) >= 10
    assert stats["sessions"] == len(sessions) and stats["triples"] > 0 and stats["graphs"]
    assert get("/api/timings").status_code == 200
    get("/openapi.json")
    ingested = post("/api/ingest", json={"text": "Biscuit chewed a tennis ball today.", "session": "dog-notes"},
                    headers=AUTH)
    assert ingested.status_code == 200 and ingested.json()["stored"] == 1, ingested.text
    assert post("/api/ask", json={"question": "What did Biscuit chew?"}).status_code == 200
    assert get("/api/recall", q="tennis ball", k="3").status_code == 200
    assert get("/api/search", q="beagle").json()["mode"] == "hybrid"
    conversations = get("/api/conversations").json()
    assert {c["id"] for c in conversations} == sessions | {"dog-notes"}
    page = get("/api/conversation", id="dana-05-pets").json()
    biscuit = next(f["s"]["value"] for p in page["posts"] for f in p["facts"] if f["s"]["value"].endswith("biscuit"))
    assert get("/api/entity", iri=biscuit).json()["label"] == "Biscuit"
    assert get("/api/why", iri=biscuit).status_code == 200
    assert get("/api/history", iri=biscuit).json()["iri"] == biscuit
    for fmt, media_type in (("nquads", "application/n-quads"), ("trig", "application/trig"),
                            ("turtle", "text/turtle"), ("jsonld", "application/ld+json")):
        dump = get("/api/export", format=fmt)
        assert dump.headers["content-type"].startswith(media_type) and "biscuit" in dump.text, fmt
    # list, get and delete: messages and facts
    listed = get("/api/messages", limit="2").json()
    assert listed["total"] == posts(url) and len(listed["messages"]) == 2 and listed["next_offset"] == 2
    first = listed["messages"][0]["post"]
    assert get("/api/message", post=first).json() == listed["messages"][0]
    facts = get("/api/facts", limit="1000").json()["facts"]
    # a fact no other test of the module asks about (they ask about Biscuit, the beagle)
    unrelated = next(f for f in facts if "iscuit" not in f["subject"] + f["object"] + f["text"])
    assert get("/api/fact", id=unrelated["id"]).json() == unrelated
    delete = lambda path, **params: check(httpx.delete(url + path, params=params, headers=AUTH, timeout=60), path)  # noqa: E731
    assert delete("/api/fact", id=unrelated["id"]).json()["fact"] == unrelated
    assert delete("/api/fact", id=unrelated["id"]).status_code == 404
    noted = post("/api/ingest", json={"text": "A note to forget.", "session": "forget-me"}, headers=AUTH).json()
    assert delete("/api/message", post=noted["posts"][0]).json()["posts"] == noted["posts"]
    post("/api/ingest", json={"text": "Another note to forget.", "session": "forget-me"}, headers=AUTH)
    assert len(post("/api/forget", json={"session": "forget-me"}, headers=AUTH).json()["posts"]) == 1
    assert get("/api/reindex").status_code == 200
    assert post("/api/reindex", headers=AUTH).status_code == 202
    assert _follow(url)["state"] == "done"
    ns = server.memory.manifest.namespace if server.memory is not None else ""
    pet = (f'<{ns}kiwi> a <https://w3id.org/pcm/ontology#Pet> ; <http://www.w3.org/2000/01/rdf-schema#label> "Kiwi" .\n'
           f"<{ns}owner> <https://w3id.org/pcm/ontology#hasPet> <{ns}kiwi> .\n")
    imported = post("/api/import", json={"data": pet, "name": "kiwi.ttl"}, headers=AUTH).text.splitlines()
    assert (json.loads(imported[-1]).get("result") or {}).get("quads") == 3, imported
    assert json.loads(post("/api/extract", json={"selection": "pending"}, headers=AUTH).text.splitlines()[-1])["event"] \
        == "error"  # no model in this server: its one line, as an event

    # a second rebuild while one runs: 409 with the running job's state
    assert server.memory is not None
    release = threading.Event()
    real = server.memory.reindex
    monkeypatch.setattr(server.memory, "reindex", lambda progress=None: release.wait(30) and real(progress=progress))
    try:
        assert post("/api/reindex", headers=AUTH).status_code == 202
        assert post("/api/reindex", headers=AUTH).status_code == 409
    finally:
        release.set()
    assert _follow(url)["state"] == "done"

    # bad input, in the body and in the parameters: 400
    assert post("/api/ask", content=b"not json").status_code == 400
    assert post("/api/ask", json={"question": "x", "k": "five"}).status_code == 400
    assert post("/api/ask", json={"question": "x", "plan": "yes"}).status_code == 400
    assert post("/api/ingest", json={"text": 42}, headers=AUTH).status_code == 400
    assert post("/api/ingest", json={"messages": [{"role": "user"}]}, headers=AUTH).status_code == 400
    assert post("/api/ingest", json={"conversations": [], "format": "csv"}, headers=AUTH).status_code == 400
    assert get("/api/recall").status_code == 400
    assert get("/api/recall", q="x", k="0").status_code == 400
    assert get("/api/search", q="x", k="many").status_code == 400
    assert get("/api/entity", iri="not an iri").status_code == 400
    assert get("/api/history", iri="not an iri").status_code == 400
    assert get("/api/export", format="csv").status_code == 400
    assert get("/api/conversation").status_code == 400
    # no token, foreign Host, too large, no such path, wrong method
    assert post("/api/ingest", json={"text": "sneaky"}).status_code == 401
    assert post("/api/reindex", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert check(httpx.get(url + "/api/info", headers={"Host": "evil.example"}), "/api/info").status_code == 403
    assert post("/api/ingest", content=b"x" * (MAX_BODY + 1), headers=AUTH).status_code == 413
    chunked = post("/api/ask", content=iter([b'{"question": "', b"x" * MAX_BODY, b'"}']))
    assert chunked.status_code == 413
    assert get("/api/nothing-here").status_code == 404
    assert get("/api/ask").status_code == 405
    assert post("/api/recall").status_code == 405

    # what was seen: every operation's success, and each kind of error
    documented = {(p, m.upper(), int(s)) for p, item in check.document["paths"].items() for m, op in item.items()
                  for s in op["responses"] if s.startswith("2")}
    assert documented <= check.seen, documented - check.seen
    assert {400, 401, 403, 404, 405, 409, 413} <= {s for _, _, s in check.seen}


def test_a_read_only_server_without_the_index_answers_as_documented(tmp_path: Any, check: Checker) -> None:
    with serving(build_memory(tmp_path / "plain", facts=False), token="") as plain:
        refused = check(httpx.post(plain.url + "/api/ingest", json={"text": "hi"}, headers=AUTH), "/api/ingest")
        assert refused.status_code == 403
        no_index = check(httpx.get(plain.url + "/api/recall", params={"q": "dog"}))
        assert no_index.status_code == 400 and "side index" in no_index.json()["error"]
        assert check(httpx.post(plain.url + "/api/reindex", headers=AUTH), "/api/reindex").status_code == 403
        text = check(httpx.get(plain.url + "/api/search", params={"q": "beagle"})).json()
        assert text["mode"] == "text" and text["hits"]


# ------------------------------------------------------------------------------------------------ idempotent ingest


def ingest(url: str, check: Checker, body: object, key: str | None = None) -> dict[str, Any]:
    headers = {**AUTH, **({"Idempotency-Key": key} if key else {})}
    answer = check(httpx.post(url + "/api/ingest", json=body, headers=headers, timeout=60), "/api/ingest")
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def test_a_retry_with_the_same_idempotency_key_stores_nothing_new(url: str, check: Checker) -> None:
    body = {"text": "I booked the vet for Thursday.", "at": "2025-06-02T08:00:00"}
    before = posts(url)
    first = ingest(url, check, body, key="retry-1")
    again = ingest(url, check, body, key="retry-1")
    assert (first["stored"], first["duplicates"]) == (1, 0)
    assert (again["stored"], again["duplicates"], again["posts"]) == (0, 1, [])
    assert posts(url) == before + 1


def test_the_same_message_id_twice_is_one_post(url: str, check: Checker) -> None:
    body = {"text": "Owen starts school in September.", "id": "client-msg-7"}
    before = posts(url)
    assert ingest(url, check, body)["stored"] == 1
    assert ingest(url, check, body, key="ignored-when-the-body-has-an-id")["duplicates"] == 1
    assert posts(url) == before + 1


def test_different_messages_with_the_same_text_are_two_posts(url: str, check: Checker) -> None:
    before = posts(url)
    assert ingest(url, check, {"text": "ok", "session": "acks"}, key="ack-1")["stored"] == 1
    assert ingest(url, check, {"text": "ok", "session": "acks"}, key="ack-2")["stored"] == 1
    assert ingest(url, check, {"text": "ok", "session": "acks"})["stored"] == 1  # no id: a new message each time
    assert posts(url) == before + 3


def test_a_key_reused_for_another_message_is_refused_and_stores_nothing(url: str, check: Checker) -> None:
    ingest(url, check, {"text": "I drive a Golf"}, key="car-1")
    before = posts(url)
    refused = check(httpx.post(url + "/api/ingest", json={"text": "I drive a Polo"},
                               headers={**AUTH, "Idempotency-Key": "car-1"}), "/api/ingest")
    assert refused.status_code == 400 and "already used" in refused.json()["error"]
    assert posts(url) == before


def test_the_openai_messages_body_without_a_conversation_id(url: str, check: Checker) -> None:
    chat = {"model": "any", "messages": [{"role": "user", "content": "We adopted a kitten called Miso."},
                                         {"role": "assistant", "content": "Congratulations!"}]}
    before = posts(url)
    first = ingest(url, check, chat)
    again = ingest(url, check, chat)
    assert (first["stored"], again["stored"], again["duplicates"]) == (2, 0, 2)
    other = {"messages": [chat["messages"][0], {"role": "assistant", "content": "What a lovely name."}]}
    assert ingest(url, check, other)["stored"] == 2  # another chat, though its first turn has the same text
    assert posts(url) == before + 4


def test_a_growing_chat_under_one_key_stores_only_its_new_turns(url: str, check: Checker) -> None:
    turns = [{"role": "user", "content": "Remind me: the boiler service is due in May."},
             {"role": "assistant", "content": "Noted.", "id": "a-1"},
             {"role": "user", "content": [{"type": "text", "text": "And the car's MOT in June."}]}]
    assert ingest(url, check, {"messages": turns[:2]}, key="chat-42")["stored"] == 2
    grown = ingest(url, check, {"messages": turns}, key="chat-42")
    assert (grown["stored"], grown["duplicates"]) == (1, 2)


def test_a_jsonl_retry_stores_nothing_new(url: str, check: Checker) -> None:
    lines = "".join(json.dumps({"conversation_id": "lines", "id": f"l{i}", "role": "user", "content": f"note {i}"}) + "\n"
                    for i in range(3)).encode()
    headers = {**AUTH, "Content-Type": "application/x-ndjson"}
    first = check(httpx.post(url + "/api/ingest", content=lines, headers=headers), "/api/ingest").json()
    again = check(httpx.post(url + "/api/ingest", content=lines, headers=headers), "/api/ingest").json()
    assert (first["stored"], again["stored"], again["duplicates"]) == (3, 0, 3)


# ------------------------------------------------------------------------------------------------ one name per field


def test_the_text_of_a_message_is_text_in_every_answer(url: str, document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    for name in ("Message", "RecallHit", "ConversationPost", "Source"):
        assert "text" in schemas[name]["properties"] and "content" not in schemas[name]["properties"], name
    answer = httpx.post(url + "/api/ask", json={"question": "What breed is Biscuit?"}, timeout=60).json()
    assert answer["citations"] and all("text" in p and "content" not in p for p in answer["citations"])
    hits = httpx.get(url + "/api/recall", params={"q": "beagle"}).json()
    assert hits and all("text" in h for h in hits)


# ------------------------------------------------------------------------------------------------ any input


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
PARAMS = st.dictionaries(st.sampled_from(["q", "k", "iri", "id", "mode", "since", "role"]), st.text(max_size=12), max_size=4)


@examples(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(body=st.one_of(JSON, st.fixed_dictionaries({"question": JSON}, optional={"k": JSON, "plan": JSON})),
       params=PARAMS, path=st.sampled_from(["/api/recall", "/api/search", "/api/entity", "/api/why", "/api/history",
                             "/api/conversation"]))
def test_any_body_or_parameters_get_a_documented_answer(url: str, check: Checker, body: object,
                                                        params: dict[str, str], path: str) -> None:
    """Whatever a client sends, the answer is a success or a 400, and fits the document either way."""
    asked = check(httpx.post(url + "/api/ask", json=body, timeout=60), "/api/ask")
    assert asked.status_code in (200, 400), asked.text
    got = check(httpx.get(url + path, params=params, timeout=60))
    assert got.status_code in (200, 400), got.text

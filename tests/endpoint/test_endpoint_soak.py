"""A served memory used the way people use it: bursts of work separated by idle gaps longer than the engine's
keep-alive timeout, through real clients (httpx, SPARQLWrapper, rdflib, pcm's RemoteBackend).

The engine drops a keep-alive connection that stayed idle for its timeout by writing an unasked 500 on it; a
front that reuses such a connection answers 500 for a valid request, and loses the update it carried. Here the
engine's timeout is made short (the query time limit sets it: 1 s) so that every gap outlasts it. Every valid
request must be answered 2xx, and every update must be applied exactly once (counted at the end).
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
import rdflib

from pcm.backend_remote import RemoteBackend
from tests.endpoint.test_endpoint_support import AUTH, EX, POSTS, TOKEN, build_memory, serving

#: The query time limit, which is also the engine's idle timeout for keep-alive connections (whole seconds).
ENGINE_IDLE_S = 1.0
#: Each gap outlasts the engine's idle timeout: the point of the test is what happens after it.
GAP_S = ENGINE_IDLE_S + 0.6
ROUNDS = 4
COUNTER = EX + "counter"


def _counted_insert(round_no: int, client: str) -> str:
    return f'INSERT DATA {{ GRAPH <{EX}soak> {{ <{EX}write-{round_no}-{client}> <{COUNTER}> "{round_no}-{client}" }} }}'


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_idle_gaps_longer_than_the_engine_keepalive_lose_nothing(tmp_path: Path) -> None:
    from rdflib.plugins.stores.sparqlstore import SPARQLUpdateStore
    from SPARQLWrapper import JSON, POST, SPARQLWrapper

    settings = build_memory(tmp_path / "memory", facts=False)
    with serving(settings, query_timeout=ENGINE_IDLE_S) as server:
        assert server.engine is not None and server.engine.idle_timeout_s == ENGINE_IDLE_S
        url = server.url
        failures: list[str] = []
        sent: list[str] = []

        def check(label: str, response: httpx.Response) -> httpx.Response:
            if not 200 <= response.status_code < 300:
                failures.append(f"{label}: {response.status_code} {response.text[:200]}")
            return response

        http = httpx.Client(timeout=30)
        wrapper = SPARQLWrapper(url + "/query", updateEndpoint=url + "/update")
        wrapper.addCustomHttpHeader("Authorization", f"Bearer {TOKEN}")
        updater = SPARQLUpdateStore(url + "/query", url + "/update", headers=dict(AUTH))
        remote = RemoteBackend(url + "/query", token=TOKEN)
        try:
            for round_no in range(ROUNDS):
                # reads: plain HTTP (GET and POST), SPARQLWrapper, rdflib, the RemoteBackend
                for _ in range(3):
                    check("GET /query", http.get(url + "/query", params={"query": POSTS}))
                check("POST /query", http.post(url + "/query", data={"query": POSTS}))
                wrapper.resetQuery()
                wrapper.setMethod(POST)
                wrapper.setQuery(POSTS)
                wrapper.setReturnFormat(JSON)
                posts = wrapper.queryAndConvert()["results"]["bindings"][0]["n"]["value"]  # type: ignore[index]
                assert int(posts) == 10 + round_no  # the sample's ten, plus one ingested per round before this one
                assert len(list(rdflib.Graph(updater).query(POSTS))) == 1
                assert remote.query(POSTS) is not None
                # updates, one per client, each to be applied exactly once
                check("POST /update", http.post(url + "/update", content=_counted_insert(round_no, "httpx"),
                                                headers={**AUTH, "Content-Type": "application/sparql-update"}))
                sent.append(f"{round_no}-httpx")
                wrapper.resetQuery()
                wrapper.setMethod(POST)
                wrapper.setQuery(_counted_insert(round_no, "wrapper"))
                wrapper.query()
                sent.append(f"{round_no}-wrapper")
                updater.update(_counted_insert(round_no, "rdflib"))
                sent.append(f"{round_no}-rdflib")
                remote.update(_counted_insert(round_no, "remote"))
                sent.append(f"{round_no}-remote")
                # Graph Store: a write (counted too) and reads
                triple = f'<{EX}write-{round_no}-gsp> <{COUNTER}> "{round_no}-gsp" .\n'
                check("POST /store", http.post(url + "/store", params={"graph": EX + "soak"}, content=triple,
                                               headers={**AUTH, "Content-Type": "application/n-triples"}))
                sent.append(f"{round_no}-gsp")
                check("GET /store", http.get(url + "/store", params={"graph": EX + "soak"}))
                check("HEAD /store", http.head(url + "/store", params={"graph": EX + "soak"}))
                # the JSON API: a write through the memory (its own client to the engine) and reads
                said = {"text": f"Soak round {round_no}", "session": "soak", "at": f"2025-05-0{round_no + 1}T09:00:00"}
                check("POST /api/ingest", http.post(url + "/api/ingest", json=said, headers=AUTH))
                check("GET /api/conversation", http.get(url + "/api/conversation", params={"id": "soak"}))
                check("GET /api/conversations", http.get(url + "/api/conversations"))
                check("GET /api/info", http.get(url + "/api/info"))
                if round_no < ROUNDS - 1:
                    time.sleep(GAP_S)  # the idle gap itself: every pooled connection outlives the engine's timeout
            assert failures == []
            rows = http.get(
                url + "/query",
                params={"query": f"SELECT ?v WHERE {{ GRAPH <{EX}soak> {{ ?s <{COUNTER}> ?v }} }}"},
                headers={"Accept": "application/sparql-results+json"},
            ).json()["results"]["bindings"]
            applied = sorted(r["v"]["value"] for r in rows)
            assert applied == sorted(sent)  # every update applied, none twice
            posts = http.get(url + "/api/conversation", params={"id": "soak"}).json()["posts"]
            assert [p["text"] for p in posts] == [f"Soak round {i}" for i in range(ROUNDS)]
        finally:
            http.close()
            remote.close()

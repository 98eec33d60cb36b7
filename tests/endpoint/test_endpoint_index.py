"""``pcm serve`` with the side index on: hybrid recall, ask and the explorer's search through the server.

Slow (it loads the embedding model), so it lives apart from the other API tests.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.endpoint.test_endpoint_support import build_memory, serving


@pytest.mark.slow
def test_ask_and_recall_through_the_server_with_the_side_index(tmp_path: Path) -> None:
    settings = build_memory(tmp_path / "indexed", facts=False).with_(index_enabled=True)
    with serving(settings) as server:
        hits = httpx.get(server.url + "/api/recall", params={"q": "what kind of dog is Biscuit", "k": 3}, timeout=120)
        assert hits.status_code == 200, hits.text
        assert any("beagle" in h["text"] or "Biscuit" in h["text"] for h in hits.json())
        answer = httpx.post(server.url + "/api/ask", json={"question": "What is my dog's name?"}, timeout=120)
        assert answer.status_code == 200 and answer.json()["citations"]
        search = httpx.get(server.url + "/api/search", params={"q": "our vet"}, timeout=120).json()
        assert search["mode"] == "hybrid" and "Alvarez" in search["hits"][0]["text"]

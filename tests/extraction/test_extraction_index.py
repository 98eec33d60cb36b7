"""Extraction with the side index on: new entities reach the index, and its entity matching feeds the prompt."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from pcm.conversations import Conversation, Utterance
from pcm.extraction import extract_posts
from pcm.llm import ScriptedClient
from pcm.memory import Memory
from pcm.settings import Settings

T0 = datetime.fromisoformat("2025-03-03T17:10:00-08:00")


@pytest.mark.slow  # loads the real embedding model: the semantic match is the point of the test
def test_extracted_entities_are_indexed_and_matched_without_a_shared_word(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Memory.init(Settings(memory=tmp_path / "memory", index_enabled=True), owner="Dana Whitfield") as memory:
        ns = memory.manifest.namespace
        first = memory.ingest([Conversation("a", [Utterance("a", 0, "user", "I adopted a beagle called Biscuit.", timestamp=T0)])]).posts
        client = ScriptedClient([
            'm:biscuit a pcm:Pet ; rdfs:label "Biscuit" ; pcm:petBreed "beagle" .\nm:owner pcm:hasPet m:biscuit .',
            "# nothing to extract",
        ])
        assert extract_posts(memory.context, first, client=client).extracted == 1
        assert ns + "biscuit" in {m.iri for m in memory.index.match_entities("Biscuit", 3)}

        second = memory.ingest([Conversation("b", [Utterance("b", 0, "user", "My beagle loves long walks.", timestamp=T0)])]).posts
        embedder = memory.index.embedder
        embedded: list[str] = []
        encode = embedder.encode
        monkeypatch.setattr(embedder, "encode", lambda texts: embedded.extend(texts) or encode(texts))
        extract_posts(memory.context, second, client=client)
        assert "My beagle loves long walks." not in embedded  # matched with the vector ingest stored, not re-embedded
        known = client.requests[1][1][0].content.split("KNOWN ENTITIES")[1].split("PREVIOUS TURNS")[0]
        assert 'm:biscuit "Biscuit" (pcm:Pet)' in known  # another session, no label in the text: found by the index

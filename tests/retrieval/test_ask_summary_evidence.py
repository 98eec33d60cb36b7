"""Without an LLM, a question about a past conversation is answered with that session's summary, backed by the
session's turns that best match the question (best first), not only the few turns the summary is made from."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from pcm.conversations import Conversation, Utterance
from pcm.memory import Memory
from pcm.settings import Settings

CHAT = [
    "Can you write a children's book about dinosaurs?",
    "Chapter 1: The Mighty T-Rex. The T-Rex has a green scaly body and small arms.",
    "Please add a chapter about a flying dinosaur.",
    "Chapter 2: The Flying Pterodactyl soared over the volcano with leathery wings.",
    "Now one about a dinosaur that lived in the sea.",
    "Chapter 3: The Plesiosaur swam through the ocean; its scaly body was a bright blue.",
    "And a gentle plant eater, please.",
    "Chapter 4: The Cuddly Triceratops munched ferns all day long.",
    "Thanks, can you finish the story?",
    "The End: all the dinosaurs became friends and had a picnic.",
]
OTHER = ["I need a recipe for banana bread.", "Mash three ripe bananas, add flour, sugar and an egg, then bake."]


def test_a_detail_of_a_past_chat_is_cited_from_that_session(tmp_path: Path) -> None:
    with Memory.init(Settings(memory=tmp_path / "m"), owner="Dana") as memory:
        memory.ingest([
            Conversation(name, [Utterance(name, i, "user" if i % 2 == 0 else "assistant", text,
                                          timestamp=datetime(2025, 5, day, 10, i), source_id=f"{name}:{i}")
                                for i, text in enumerate(texts)])
            for name, texts, day in (("dinos", CHAT, 21), ("baking", OTHER, 22))
        ])
        question = "Going back to our previous chat about the dinosaur book: what color was the Plesiosaur?"
        result = memory.ask(question, k=10)
        assert result.path == "summary", result.render(explain=True)
        cited = [p.source_id for p in result.citations]
        assert "dinos:5" in cited  # the one turn that holds the answer
        ranked = [h.source_id for h in memory.recall(question, 10, session="dinos")]
        assert cited[: len(ranked)] == ranked  # best first, and every cited turn is from that chat
        assert all(s.startswith("dinos:") for s in cited)

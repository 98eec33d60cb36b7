"""Two memories open in one process share no cached state, and closing one releases everything it held.

Each memory's caches (query worker, traversal engine, LLM replies, memory versions, usage counts, sentence vectors)
live on its :class:`pcm.context.MemoryContext`, which the facade builds on open and closes on close; the pipelines
receive the context, never the facade.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from pcm.context import CACHE_DIR
from pcm.conversations import Conversation, Utterance
from pcm.llm.scripted import ScriptedClient
from pcm.memory import Memory
from pcm.retrieval.ask import ask
from pcm.retrieval.grounding import usage_stats
from pcm.retrieval.traversal import engine_for
from pcm.settings import Settings
from pcm.summaries.store import cached_vectors

AS_OF = datetime.fromisoformat("2025-06-01T12:00:00+00:00")
QUESTION = "What breed is Biscuit?"


def _memory(root: Path, name: str, owner: str) -> Memory:
    memory = Memory.init(Settings(memory=root / name, index_enabled=False, query_timeout=120), owner=owner)
    said = f"My dog Biscuit is a {'beagle' if name == 'a' else 'poodle'}."
    memory.ingest([Conversation("s", [Utterance("s", 0, "user", said, timestamp=AS_OF, source_id="u0")])])
    return memory


def _fill(memory: Memory, reply: str) -> None:
    """Run what fills every per-memory cache: a person's query, a question to a model, a walk, a vector."""
    memory.sparql("SELECT ?p WHERE { ?p a <http://rdfs.org/sioc/ns#Post> }")
    ask(memory.context, QUESTION, client=ScriptedClient([reply] * 8), as_of=AS_OF, plan=False)
    usage_stats(memory.context)
    engine_for(memory.context)
    cached_vectors(memory.context, [f"a sentence said to {memory.manifest.owner}"])


def test_two_memories_share_no_cached_state_and_close_releases_it(tmp_path: Path) -> None:
    a, b = _memory(tmp_path, "a", "Ann"), _memory(tmp_path, "b", "Bob")
    closed: list[Memory] = []
    try:
        _fill(a, "```sparql\nSELECT ?x WHERE { ?x ?p 'a' }\n```")
        _fill(b, "```sparql\nSELECT ?y WHERE { ?y ?p 'b' }\n```")
        ca, cb = a.context, b.context
        assert ca.runner is not None and cb.runner is not None and ca.runner is not cb.runner
        assert ca.engine is not None and cb.engine is not None and ca.engine is not cb.engine
        for slot in ("llm_replies", "versions", "usage", "text_vectors"):
            mine, theirs = getattr(ca, slot), getattr(cb, slot)
            assert mine and theirs and mine is not theirs, slot
        assert set(ca.llm_replies.values()).isdisjoint(cb.llm_replies.values())  # each memory kept its own replies
        assert set(ca.text_vectors).isdisjoint(cb.text_vectors)
        assert all(str(tmp_path / "a") in key for key in ca.usage) and all(str(tmp_path / "b") in key for key in cb.usage)

        worker = ca.runner._worker  # the query worker process a person's query started
        assert worker is not None and worker.alive
        a.close()
        closed.append(a)
        assert not ca.holds_state() and not worker.alive
        # the other memory keeps what it holds and still answers
        assert cb.holds_state() and cb.runner is not None and b.sparql("SELECT ?s WHERE { ?s ?p ?o } LIMIT 1").rows
        b.close()
        closed.append(b)
        assert not cb.holds_state()
    finally:
        for memory in (a, b):
            if memory not in closed:
                memory.close()


def test_a_purge_drops_the_caches_built_from_the_memorys_content(tmp_path: Path) -> None:
    memory = _memory(tmp_path, "a", "Ann")
    try:
        _fill(memory, "```sparql\nSELECT ?x WHERE { ?x ?p 'a' }\n```")
        memory.purge()
        context = memory.context
        assert context.runner is None and context.engine is None
        assert not (context.llm_replies or context.usage or context.versions or context.text_vectors)
        assert not (memory.settings.memory / CACHE_DIR).exists()
    finally:
        memory.close()

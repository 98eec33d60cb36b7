"""Forgetting a post that superseded values is ONE atomic update: the forget and the restore of what it replaced."""

from __future__ import annotations

import pytest

from pcm.extraction.history import forget_delta
from pcm.layout import HISTORY
from pcm.memory import Memory
from tests.extraction.test_extraction_updates import HOME, WORKS, history_subjects, moved, values


def count_updates(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    updates: list[str] = []
    real = memory.backend.update

    def spy(text: str, *args: object, **kwargs: object) -> object:
        updates.append(text)
        return real(text, *args, **kwargs)

    monkeypatch.setattr(memory.backend, "update", spy)
    return updates


def test_forgetting_the_superseding_post_is_one_update(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    ns, old, new = moved(memory)
    updates = count_updates(memory, monkeypatch)
    memory.forget(post=new)
    forget = [u for u in updates if "DROP SILENT GRAPH" in u]
    assert len(forget) == 1 and HISTORY in forget[0]  # the forget carries the restore
    rest = [u for u in updates if u not in forget]
    assert all(HISTORY not in u and "graph:extraction" not in u for u in rest)  # only summaries follow
    assert values(memory, ns + "owner", HOME) == {ns + "portland"}
    assert values(memory, ns + "owner", WORKS) == {ns + "harbor-analytics"}
    assert history_subjects(memory) == 0


def test_the_delta_is_computed_before_the_forget_and_treats_the_posts_as_gone(memory: Memory) -> None:
    ns, old, new = moved(memory)
    delta = forget_delta(memory.context, [new])
    assert delta.restored == 2 and len(delta.extra) == 2  # two values come back, two history records go
    graph = memory.naming.extraction_graph(old)
    assert {(q.object.value, q.graph_name.value) for q in delta.insert} == {
        (ns + "portland", graph), (ns + "harbor-analytics", graph)}
    assert delta.delete == []  # Seattle and Cascade Health live in the forgotten post's graph: dropped with it
    assert forget_delta(memory.context, [old]).insert == []  # the old post's values never come back


def test_a_failing_forget_changes_nothing(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    ns, old, new = moved(memory)
    before = set(memory.backend.quads())

    def crash(text: str, *args: object, **kwargs: object) -> None:
        raise RuntimeError("crash mid-forget")

    monkeypatch.setattr(memory.backend, "update", crash)
    with pytest.raises(RuntimeError):
        memory.forget(post=new)
    monkeypatch.undo()
    assert set(memory.backend.quads()) == before  # nothing half-done: no stale history, the post still there

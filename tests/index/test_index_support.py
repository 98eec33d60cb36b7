"""Two speakers' turns over three sessions, shared by the recall graph tests: the puppy of the first session is
named again, with its breed, in the second, so a walk from the question reaches the second hop."""

from pathlib import Path

from pcm.index import SideIndex

TURNS = [
    ("s1", "Bob", "We adopted a puppy from the shelter and named her Biscuit."),
    ("s1", "Alice", "Congratulations! My garden tomatoes are finally ripe."),
    ("s1", "Bob", "I ran twenty miles this morning, training for the marathon."),
    ("s1", "Alice", "The pottery class starts again on Monday."),
    ("s2", "Alice", "I glazed a blue bowl for the pottery show."),
    ("s2", "Bob", "The marathon is in three weeks and my knee still hurts."),
    ("s2", "Alice", "Rest that knee; the tomatoes will wait for you."),
    ("s2", "Bob", "The vet says Biscuit is a golden retriever mix."),
    ("s3", "Alice", "My sister moved to Lisbon for a job in robotics."),
    ("s3", "Bob", "I rode the trams of Lisbon all summer."),
    ("s3", "Alice", "She sends photos of the river every weekend."),
    ("s3", "Bob", "I bought new running shoes for the race."),
]
QUESTION = "What breed is the puppy Bob adopted?"


def turns_index(path: Path) -> SideIndex:
    """A side index of :data:`TURNS` with the hash embedder (bags of words: no model to load)."""
    from tests.index.test_index_attribution import _records
    from tests.index.test_index_side import HashEmbedder

    index = SideIndex.open(path / "index", embedder=HashEmbedder())
    index.upsert_posts(_records(TURNS))
    return index

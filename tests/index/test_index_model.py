"""The side index with the real embedding model (loaded once per module): lazy imports, vectors, and hybrid
recall beating each of its legs on a small labelled conversation written for this test."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

import pcm
from pcm.index import Embedder, PostRecord, SideIndex, get_embedder

PKG_ROOT = str(Path(pcm.__file__).resolve().parents[1])
pytestmark = pytest.mark.slow  # loads the model (about 10 s, once for the module)


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    model = get_embedder()
    model.encode(["load the model once for this module"])
    return model


def test_importing_and_opening_the_index_does_not_import_torch(tmp_path: Path) -> None:
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "from pathlib import Path; from pcm.index import SideIndex, get_embedder;"
        "idx = SideIndex.open(Path(sys.argv[2]), embedder=get_embedder());"
        "assert idx.recall('anything', mode='fts') == [];"
        "print('torch' in sys.modules, 'sentence_transformers' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, PKG_ROOT, str(tmp_path / "index")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert out.stdout.split() == ["False", "False"]


def test_vectors_are_unit_float32_and_match_sentence_transformers(embedder: Embedder) -> None:
    texts = ["Caroline: I went to a LGBTQ support group yesterday.", "hi", "", "Melanie: " + "pottery " * 300]
    vectors = embedder.encode(texts)
    assert vectors.shape == (4, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    reference = embedder._model.encode(texts, normalize_embeddings=True)  # the library's own path, float32
    assert np.all(np.sum(vectors * reference, axis=1) > 0.999)
    assert embedder.encode([]).shape == (0, 384)
    assert get_embedder() is get_embedder()
    assert (embedder.name, embedder.dim) == ("sentence-transformers/all-MiniLM-L6-v2", 384)


def test_single_texts_take_the_traced_path_with_the_same_vectors(embedder: Embedder) -> None:
    texts = ["Biscuit", "my sister's violin teacher", "What did Caroline paint last summer?", "x", "hello there"]
    reference = embedder._model.encode(texts, normalize_embeddings=True)
    singles = np.stack([embedder.encode([t])[0] for t in texts * 2])  # enough calls to trace the encoder
    pairs = embedder.encode(texts[:2])
    assert embedder._small is not None or embedder._small_calls < 0  # traced, or tracing failed and was given up
    assert np.all(np.sum(singles * np.concatenate([reference, reference]), axis=1) > 0.9999)
    assert np.all(np.sum(pairs * reference[:2], axis=1) > 0.9999)


def test_the_openmp_wait_policy_comes_from_settings(tmp_path: Path) -> None:
    from pcm.settings import Settings

    assert Settings().omp_wait_policy == "PASSIVE"
    assert Settings.from_env({"OMP_WAIT_POLICY": "ACTIVE"}).omp_wait_policy == "ACTIVE"
    code = (
        "import os, sys; sys.path.insert(0, sys.argv[1]);"
        "from pcm.index.embedder import get_embedder; from pcm.settings import Settings;"
        "get_embedder(Settings(omp_wait_policy='PASSIVE'))._ensure_loaded();"
        "print(os.environ.get('OMP_WAIT_POLICY'))"
    )
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run(
        [sys.executable, "-c", code, PKG_ROOT], capture_output=True, text=True, timeout=120, check=True, env=env
    )
    assert out.stdout.split()[-1] == "PASSIVE"  # applied before torch loaded its OpenMP runtime


# A conversation written for this test. Half the questions share rare words with their answer (full text wins,
# the embedding of a long turn dilutes them); half are paraphrases with no content word in common (vectors win).
TURNS = [
    ("s1", "Priya", "Morning Tom! Finally got the keys to the new flat on Wexley Road."),
    ("s1", "Tom", "Congrats! Is it far from the hospital where you work?"),
    ("s1", "Priya", "Ten minutes by bike, which is a relief after the night shifts in the cardiology ward."),
    ("s1", "Tom", "I spent the weekend fixing the carburettor on my old Vespa, grease everywhere."),
    ("s1", "Priya", "Ha, you and that scooter. Did it start in the end?"),
    ("s1", "Tom", "Second kick! Then it died again at the traffic lights."),
    ("s1", "Priya", "My cat Mochi knocked a whole shelf of plants onto the floor last night."),
    ("s1", "Tom", "Cats are chaos. Is the little monster alright?"),
    ("s1", "Priya", "She is fine, the ficus is not."),
    (
        "s1",
        "Tom",
        "I started learning the cello, lessons every Thursday with a retired teacher called Ingrid.",
    ),
    ("s1", "Priya", "Lovely! How long have you wanted to play?"),
    ("s1", "Tom", "Since I was a kid, honestly. My grandad had one in the attic."),
    ("s2", "Tom", "Which gym did you end up joining?"),
    ("s2", "Priya", "The one by the canal, mostly for the pool."),
    ("s2", "Priya", "I have been so tired lately, I can barely get out of bed before noon."),
    ("s2", "Tom", "Maybe see a doctor? That sounds like more than the shifts."),
    ("s2", "Priya", "My sister Anjali is getting married in Goa in December, I am her maid of honour."),
    ("s2", "Tom", "That is huge, are you writing a speech?"),
    ("s2", "Priya", "Trying to. I keep deleting the opening line."),
    ("s2", "Tom", "My sourdough starter finally bubbled, I named it Clint Yeastwood."),
    ("s2", "Priya", "That is the best name I have heard all year."),
    ("s2", "Tom", "I am thinking of quitting my job at the bank to retrain as a carpenter."),
    ("s2", "Priya", "Do it, you are always happiest when you are building something."),
    ("s2", "Tom", "We are flying to Reykjavik in March to chase the northern lights."),
    ("s2", "Priya", "Jealous! Who is going with you?"),
    ("s2", "Tom", "My cousin Leon and his girlfriend, they have been twice already."),
    ("s3", "Priya", "What do you usually cook when your parents visit?"),
    ("s3", "Tom", "Mum's dal, I make a huge pot and freeze the rest."),
    ("s3", "Priya", "I finally ran the half marathon, two hours and four minutes!"),
    ("s3", "Tom", "Amazing, how are your knees?"),
    ("s3", "Priya", "Sore, but I already signed up for the next one in Brighton."),
    ("s3", "Tom", "I burned the lasagne for my parents' anniversary dinner, smoke alarm and all."),
    ("s3", "Priya", "Oh no. Did they mind?"),
    ("s3", "Tom", "Dad said it was the best charcoal he had ever eaten."),
    ("s3", "Priya", "I am allergic to peanuts, so the wedding caterer has to change the whole menu."),
    ("s3", "Tom", "Better safe. Are they being helpful about it?"),
    ("s3", "Priya", "Very, they suggested a coconut and lime dessert instead."),
    ("s3", "Tom", "I have been feeling really lonely since Marco moved to Berlin."),
    (
        "s3",
        "Tom",
        "Work was a nightmare this week: the printer jammed twice, my manager booked three meetings on Friday "
        "afternoon, and my VPN token expired, so IT gave me a new one, serial KX-4471, which I will lose.",
    ),
    (
        "s3",
        "Priya",
        "The hospital canteen changed suppliers, the coffee got worse, parking went up again, and they "
        "moved the staff lockers to the basement next to the old Marsh wing.",
    ),
    (
        "s3",
        "Tom",
        "Saturday plan: gym in the morning, groceries, call grandma, then finally return the blue kettle "
        "to Hartley's hardware before they close at five.",
    ),
]
QUESTIONS = [  # (question, a phrase of the turn that answers it)
    # rare words shared with the answer
    ("What street is Priya's new flat on? Wexley Road", "Wexley Road"),
    ("Who teaches Tom the cello, Ingrid?", "called Ingrid"),
    ("What did Tom name his sourdough starter Clint Yeastwood?", "Clint Yeastwood"),
    ("Where is Tom flying in March, Reykjavik?", "flying to Reykjavik"),
    ("Where is the next half marathon Priya signed up for, Brighton?", "next one in Brighton"),
    ("What part of the Vespa did Tom fix, the carburettor?", "carburettor"),
    ("Which serial number is on Tom's VPN token, KX-4471?", "KX-4471"),
    ("Where are the staff lockers now, by the Marsh wing?", "Marsh wing"),
    ("Which hardware shop gets the kettle back, Hartley's?", "Hartley's"),
    # the answer is a reply that does not repeat the question (the full-text leg reads the turn before)
    ("How long has Tom wanted to play the cello?", "Since I was a kid"),
    ("Who is going to Reykjavik with Tom?", "cousin Leon"),
    ("Which gym did Priya join?", "by the canal"),
    ("What does Tom cook when his parents visit?", "Mum's dal"),
    # paraphrases: no content word in common with the answer
    ("Which animal lives with Priya?", "cat Mochi"),
    ("How is Priya's energy these days?", "so tired lately"),
    ("What food does Priya need to avoid?", "allergic to peanuts"),
    ("What new profession is Tom considering?", "retrain as a carpenter"),
    ("Tom misses a friend who left the country", "Marco moved to Berlin"),
    ("Which relative of Priya is having a ceremony abroad?", "sister Anjali"),
]


@pytest.fixture(scope="module")
def conversation(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> SideIndex:
    index = SideIndex.open(tmp_path_factory.mktemp("labelled") / "index", embedder=embedder)
    positions: dict[str, int] = {}
    records = []
    for i, (session, speaker, text) in enumerate(TURNS):
        position = positions[session] = positions.get(session, -1) + 1
        day = int(session[1:]) * 7
        records.append(
            PostRecord(
                f"urn:test:post:{i}",
                session,
                "user" if speaker == "Priya" else "other",
                speaker,
                datetime(2024, 5, day, 18, 30),
                text,
                f"T{i}",
                position,
            )
        )
    index.upsert_posts(records)
    yield index
    index.close()


def hits_at(index: SideIndex, mode: str, k: int) -> int:
    """Questions whose answering turn is among the top ``k``."""
    found = 0
    for question, phrase in QUESTIONS:
        (answer,) = [i for i, turn in enumerate(TURNS) if phrase in turn[2]]
        found += f"T{answer}" in {h.source_id for h in index.recall(question, k, mode=mode)}
    return found


def test_hybrid_recall_beats_each_leg_on_a_labelled_conversation(conversation: SideIndex) -> None:
    fts, vector, hybrid = (hits_at(conversation, mode, 3) for mode in ("fts", "vector", "hybrid"))
    assert hybrid > fts and hybrid > vector, (fts, vector, hybrid)
    assert hybrid >= len(QUESTIONS) - 4


def test_entity_matching_with_real_vectors_finds_meaning_and_never_misses_a_name(
    tmp_path: Path, embedder: Embedder
) -> None:
    from pcm.index import EntityRecord

    people = [
        EntityRecord("urn:e:mochi", "Mochi", (), ("schema:Animal",), "Mochi (Animal), Priya's cat"),
        EntityRecord(
            "urn:e:anjali", "Anjali", (), ("foaf:Person",), "Anjali (Person), Priya's sister, marrying in Goa"
        ),
        EntityRecord(
            "urn:e:clint",
            "Clint Yeastwood",
            (),
            ("schema:Thing",),
            "Clint Yeastwood (Thing), a sourdough starter",
        ),
        EntityRecord("urn:e:goa", "Goa", (), ("schema:Place",), "Goa (Place), a state in India"),
    ]
    with SideIndex.open(tmp_path / "index", embedder=embedder) as index:
        index.upsert_entities(people)
        assert index.match_entities("Priya's kitty", 1)[0].iri == "urn:e:mochi"
        assert index.match_entities("the bread yeast culture", 1)[0].iri == "urn:e:clint"
        for record in people:
            best = index.match_entities(record.label, 2)[0]
            assert best.iri == record.iri and best.how.startswith("exact")

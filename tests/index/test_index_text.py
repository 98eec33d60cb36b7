"""The side index's pure parts: what it writes into its columns, how it reads queries, how it ranks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest

from pcm.index import EntityMatch, EntityRecord, PostRecord, RecallHit
from pcm.index import entities as entity_ranking
from pcm.index import recall as ranking
from pcm.index.text import (
    date_words,
    embed_text,
    entity_digest,
    entity_search_text,
    exact_label,
    named_speakers,
    normalise_label,
    post_digest,
    search_text,
    sql_string,
    timestamp,
    vector_query,
)


def post(position: int, text: str, speaker: str | None = "Ann", role: str = "user") -> PostRecord:
    return PostRecord(
        f"urn:p:{position}",
        "s1",
        role,
        speaker,
        datetime(2023, 5, 8, 13, 56),
        text,
        f"D1:{position}",
        position,
    )


def test_a_post_is_embedded_with_its_speaker_and_searched_with_its_date_and_the_turn_it_answers() -> None:
    question = post(0, "How long have you been married?", speaker="Bob", role="other")
    answer = post(1, "Five years already!")
    assert embed_text(answer) == "Ann said: Five years already!"
    text = search_text(answer, question)
    assert text.splitlines() == [
        "Ann: Five years already! (8 May 2023)",
        "Ann: Five years already!",  # own words weigh more than the neighbour's
        "Bob: How long have you been married?",
    ]
    assert search_text(answer, None) == "Ann: Five years already! (8 May 2023)\nAnn: Five years already!"


def test_a_post_without_speaker_is_said_by_its_role_and_one_without_time_has_no_date() -> None:
    record = PostRecord("urn:p", "s", "assistant", None, None, "Sure.", None, 0)
    assert embed_text(record) == "assistant said: Sure."
    assert search_text(record, None) == "assistant: Sure.\nassistant: Sure."
    assert date_words(None) == ""


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("When did Melanie paint a sunrise?", "Melanie paint a sunrise"),
        ("What is Caroline's identity?", "Caroline identity"),
        ("How many children does Melanie have?", "children does Melanie have"),
        ("Which book did Caroline recommend?", "book did Caroline recommend"),
        ("Is it raining?", "it raining"),
        ("dog ate a sock", "dog ate a sock"),
        ("What?", "What"),
    ],
)
def test_the_vector_query_drops_question_words_auxiliaries_and_possessives(
    question: str, expected: str
) -> None:
    assert vector_query(question) == expected


def test_speakers_are_recognised_by_name_by_surname_and_by_a_capitalised_nickname() -> None:
    speakers = ["Caroline", "Melanie", "Bob Smith"]
    assert named_speakers("What did Caroline research?", speakers) == {"Caroline"}
    assert named_speakers("How long have Mel and her husband been married?", speakers) == {"Melanie"}
    assert named_speakers("did smith call back", speakers) == {"Bob Smith"}
    assert named_speakers("What do Melanie and Caroline share?", speakers) == {"Melanie", "Caroline"}
    # a lower-case word that merely starts like a name is not a nickname
    assert named_speakers("what did the assistant say about melons", speakers) == set()


def test_labels_compare_exactly_up_to_case_and_spaces_and_loosely_after_normalisation() -> None:
    assert exact_label("  Alice   SMITH ") == exact_label("alice smith")
    assert exact_label("Café") != exact_label("Cafe")
    assert normalise_label("The Café de Flore's") == normalise_label("cafe de flore")
    assert normalise_label("O'Brien") == "o brien"


def test_fingerprints_change_with_any_field_and_only_then() -> None:
    a = post(1, "hello")
    assert post_digest(a) == post_digest(post(1, "hello"))
    assert post_digest(a) != post_digest(post(1, "hello!"))
    assert post_digest(a) != post_digest(post(2, "hello"))
    e = EntityRecord("urn:e", "Rex", ("Rexy",), ("schema:Animal",), "Rex, a dog")
    assert entity_digest(e) != entity_digest(
        EntityRecord("urn:e", "Rex", (), ("schema:Animal",), "Rex, a dog")
    )
    assert entity_search_text(e).startswith("Rex ; Rexy")


def test_sql_strings_escape_quotes_and_times_order_naive_and_aware_alike() -> None:
    assert sql_string("O'Brien") == "'O''Brien'"
    naive = datetime(2024, 1, 1, 12, 0)
    assert timestamp(naive) == timestamp(naive.replace(tzinfo=UTC))
    assert timestamp(datetime(2024, 1, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))) < timestamp(naive)


def test_recall_hit_as_json_carries_the_promised_keys_and_an_iso_time() -> None:
    hit = RecallHit(post="urn:p", source_id="D1:3", session="conv:session_1", time=datetime(2023, 5, 8, 13, 56),
                    speaker="Ann", role="user", text="hi", score=0.5)
    data = hit.as_json()
    assert {"post", "source_id", "session", "time", "speaker", "text", "score", "role"} <= data.keys()
    assert data["time"] == "2023-05-08T13:56:00" and data["source_id"] == "D1:3"
    blank = RecallHit(post="urn:p", source_id=None, session="s", time=None, speaker=None, role="user", text="hi",
                      score=0.1)
    assert blank.as_json()["time"] is None


def test_rrf_rewards_agreement_and_weights_legs() -> None:
    fts = ranking.Leg(np.array([1, 2, 3]), np.array([3.0, 2.0, 1.0]), 1.0)
    vec = ranking.Leg(np.array([3, 4]), np.array([0.9, 0.8]), 0.5)
    fused = ranking.rrf([fts, vec], c=10)
    assert fused[3] == pytest.approx(1 / 13 + 0.5 / 11)
    assert sorted(fused, key=fused.__getitem__, reverse=True) == [
        3,
        1,
        2,
        4,
    ]  # found by both legs comes first


def test_the_speaker_prior_damps_other_speakers_inside_a_leg() -> None:
    named = np.array([False, True, False])
    factors = ranking.speaker_factors(3, named, 0.5)
    assert factors is not None and factors.tolist() == [0.5, 1.0, 0.5]
    leg = ranking.rank_leg(np.array([0, 1]), np.array([1.0, 0.8]), 1.0, factors)
    assert leg.slots.tolist() == [1, 0]
    assert ranking.speaker_factors(3, None, 0.5) is None


def test_recency_weights_decay_exponentially_over_min_max_normalised_ages() -> None:
    ts = np.array([0.0, 50.0, 100.0, np.nan])
    w = ranking.recency_weights(ts, 2.0)
    assert (
        w[2] == pytest.approx(1.0)
        and w[1] == pytest.approx(np.exp(-1.0))
        and w[0] == pytest.approx(np.exp(-2.0))
    )
    assert w[3] == pytest.approx(np.exp(-2.0))  # no time counts as the oldest
    assert ranking.recency_weights(np.array([5.0, 5.0]), 3.0).tolist() == [1.0, 1.0]
    assert ranking.recency_weights(ts, 0.0).tolist() == [1.0, 1.0, 1.0, 1.0]


def test_entity_scores_fall_in_tiers_so_an_exact_name_beats_any_vector() -> None:
    labels = {"urn:exact": "Alice Smith", "urn:norm": "Alice-Smith", "urn:near": "Alicia Smyth"}
    matches = entity_ranking.combine(
        exact=["urn:exact"],
        normalised=["urn:exact", "urn:norm"],
        fts=[("urn:near", 0.9), ("urn:norm", 0.3)],
        vector=[("urn:near", 0.99), ("urn:norm", 0.5)],
        label_of=labels.__getitem__,
        similarity=lambda iri: -0.3,  # the exact match's own vector is far from the mention
        k=5,
    )
    assert [m.iri for m in matches] == ["urn:exact", "urn:norm", "urn:near"]
    exact, norm, near = matches
    assert exact.how == "exact" and 0.9 <= exact.score <= 1.0
    assert norm.how == "normalised+fts+vector" and 0.8 <= norm.score < 0.9
    assert near.how == "fts+vector" and near.score < 0.8
    assert isinstance(near, EntityMatch)

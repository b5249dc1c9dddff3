"""[beyond] ``recall(..., min_score=…)``: a floor on the hits' scores, and ``known_at`` in
the JSON (docs/reference.md#result).

Every expectation is computed from the same recall without the floor, so the tests hold
on any ranker's scale (the baseline's is about 0-1, BM25's is not bounded).
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from memlib import RecallEngine, RemoteMemoryStore, render_recall_context
from memlib.errors import RemoteMemoryValidationError
from memlib.result import EMPTY_REASON_BELOW_MIN_SCORE, EMPTY_REASON_NO_MATCH, RecallResult
from memlib.sample import SAMPLE_AS_OF, open_sample_store

QUERY = "memory"  # three hits on the sample corpus, with three distinct scores
QUERY_ID = "q-floor"
NO_MATCH = "kubernetes"  # shares no term with the sample corpus
RANKERS = ("baseline", "bm25")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> RemoteMemoryStore:
    return open_sample_store(tmp_path_factory.mktemp("min-score"))


@pytest.fixture(params=RANKERS)
def engine(request: pytest.FixtureRequest, store: RemoteMemoryStore) -> RecallEngine:
    return RecallEngine(store, ranker=request.param)


def _recall(engine: RecallEngine, text: str = QUERY, **kwargs: Any) -> RecallResult:
    return engine.recall(text, limit=5, as_of=SAMPLE_AS_OF, query_id=QUERY_ID, **kwargs)


@pytest.fixture
def unfloored(engine: RecallEngine) -> RecallResult:
    base = _recall(engine)
    scores = [h.score for h in base.hits]
    # The tests below need floors strictly between hits: distinct, descending scores.
    assert len(scores) >= 3 and scores == sorted(set(scores), reverse=True), scores
    return base


def _dicts(result: RecallResult) -> list[dict[str, Any]]:
    return [h.to_dict() for h in result.hits]


@pytest.mark.parametrize("gap", [0, 1])
def test_a_floor_between_two_scores_keeps_exactly_the_hits_at_or_above_it(
    engine: RecallEngine, unfloored: RecallResult, gap: int
) -> None:
    above, below = unfloored.hits[gap].score, unfloored.hits[gap + 1].score
    floor = (above + below) / 2
    expected = [h.to_dict() for h in unfloored.hits if h.score >= floor]
    assert len(expected) == gap + 1  # the floor really falls inside the list

    result = _recall(engine, min_score=floor)

    assert _dicts(result) == expected  # same hits, same ranks, same breakdowns
    assert result.min_score == floor
    assert result.below_min_score == len(unfloored.hits) - len(expected)
    assert result.empty_reason is None
    # The floor filters the hits only: the scan is the same recall's.
    assert (result.searched_records, result.candidate_records) == (
        unfloored.searched_records,
        unfloored.candidate_records,
    )


def test_a_floor_equal_to_a_score_keeps_that_hit(
    engine: RecallEngine, unfloored: RecallResult
) -> None:
    last = unfloored.hits[-1]
    result = _recall(engine, min_score=last.score)
    assert _dicts(result) == _dicts(unfloored)
    assert result.below_min_score == 0
    middle = unfloored.hits[1]
    result = _recall(engine, min_score=middle.score)
    assert [h.memory_id for h in result.hits] == [h.memory_id for h in unfloored.hits[:2]]
    assert result.below_min_score == len(unfloored.hits) - 2


def test_a_numeric_string_is_the_number(engine: RecallEngine, unfloored: RecallResult) -> None:
    floor = unfloored.hits[1].score
    as_text = _recall(engine, min_score=repr(floor))
    assert as_text.to_json() == _recall(engine, min_score=floor).to_json()
    assert as_text.min_score == floor


def test_an_int_floor_is_a_float(engine: RecallEngine, unfloored: RecallResult) -> None:
    result = _recall(engine, min_score=-1)
    assert result.min_score == -1.0 and isinstance(result.min_score, float)
    assert _dicts(result) == _dicts(unfloored)
    assert result.below_min_score == 0
    payload = json.loads(result.to_json())
    assert payload["min_score"] == -1.0 and payload["below_min_score"] == 0
    assert payload["empty_reason"] is None


def test_a_floor_above_every_hit_drops_them_all(
    engine: RecallEngine, unfloored: RecallResult
) -> None:
    floor = math.nextafter(unfloored.hits[0].score, math.inf)
    result = _recall(engine, min_score=floor)
    assert result.hits == ()
    assert result.empty_reason == EMPTY_REASON_BELOW_MIN_SCORE == "below_min_score"
    assert result.below_min_score == len(unfloored.hits)
    assert render_recall_context(result) == ""
    payload = json.loads(result.to_json())
    assert payload["hits"] == []
    assert payload["empty_reason"] == "below_min_score"
    assert payload["min_score"] == floor
    assert payload["below_min_score"] == len(unfloored.hits)


def test_below_min_score_counts_only_the_top_limit(
    engine: RecallEngine, unfloored: RecallResult
) -> None:
    limit = len(unfloored.hits) - 1
    floor = math.nextafter(unfloored.hits[0].score, math.inf)
    result = engine.recall(
        QUERY, limit=limit, as_of=SAMPLE_AS_OF, query_id=QUERY_ID, min_score=floor
    )
    assert result.below_min_score == limit  # not every candidate: the hits it cut


def test_no_candidates_with_a_floor_is_no_matching_terms(engine: RecallEngine) -> None:
    plain = _recall(engine, NO_MATCH)
    assert plain.hits == () and plain.candidate_records == 0
    result = _recall(engine, NO_MATCH, min_score=0.5)
    assert result.hits == ()
    assert result.below_min_score == 0
    assert result.empty_reason == EMPTY_REASON_NO_MATCH == "no_matching_terms"
    payload = json.loads(result.to_json())
    assert payload["min_score"] == 0.5 and payload["below_min_score"] == 0
    assert payload["empty_reason"] == "no_matching_terms"


def test_the_json_without_a_floor_is_the_plain_recall(
    engine: RecallEngine, unfloored: RecallResult
) -> None:
    explicit = _recall(engine, min_score=None, known_at=None)
    assert explicit.to_json() == unfloored.to_json()
    payload = json.loads(unfloored.to_json())
    for key in ("min_score", "below_min_score", "known_at"):
        assert key not in payload
    # The floor's keys are the only difference a floor that drops nothing makes.
    floored = json.loads(_recall(engine, min_score=unfloored.hits[-1].score).to_json())
    assert {k: v for k, v in floored.items() if k not in ("min_score", "below_min_score")} == (
        payload
    )
    assert floored["min_score"] == unfloored.hits[-1].score
    assert floored["below_min_score"] == 0


def test_the_json_with_a_floor_carries_both_keys(
    engine: RecallEngine, unfloored: RecallResult
) -> None:
    floor = (unfloored.hits[0].score + unfloored.hits[1].score) / 2
    payload = json.loads(_recall(engine, min_score=floor).to_json())
    assert payload["min_score"] == floor
    assert payload["below_min_score"] == len(unfloored.hits) - 1
    assert [h["memory_id"] for h in payload["hits"]] == [unfloored.hits[0].memory_id]
    assert list(payload)[-1] == "empty_reason"  # the floor's keys come before it


def test_render_keeps_the_kept_hits(engine: RecallEngine, unfloored: RecallResult) -> None:
    result = _recall(engine, min_score=unfloored.hits[0].score)
    rendered = render_recall_context(result)
    assert unfloored.hits[0].memory_id in rendered
    assert all(h.memory_id not in rendered for h in unfloored.hits[1:])


@pytest.mark.parametrize(
    "floor",
    [math.nan, math.inf, -math.inf, "nan", "inf", "abc", "", " ", True, False, [0.5], {}, object()],
    ids=[
        "nan",
        "inf",
        "-inf",
        "str-nan",
        "str-inf",
        "abc",
        "empty",
        "blank",
        "True",
        "False",
        "list",
        "dict",
        "object",
    ],
)
def test_an_invalid_floor_is_a_one_line_validation_error(
    engine: RecallEngine, floor: object
) -> None:
    with pytest.raises(RemoteMemoryValidationError) as caught:
        _recall(engine, min_score=floor)
    message = str(caught.value)
    assert message and "\n" not in message
    assert "min_score" in message


def test_suggested_is_the_rankers_floor_or_a_one_line_error(
    engine: RecallEngine, unfloored: RecallResult
) -> None:
    suggested = getattr(engine.ranker, "suggested_min_score", None)
    if suggested is None:
        with pytest.raises(RemoteMemoryValidationError) as caught:
            _recall(engine, min_score="suggested")
        message = str(caught.value)
        assert "\n" not in message
        assert engine.ranker.name in message and "suggested" in message
    else:
        result = _recall(engine, min_score="suggested")
        assert result.min_score == suggested
        assert result.to_json() == _recall(engine, min_score=suggested).to_json()
        assert _dicts(result) == [h.to_dict() for h in unfloored.hits if h.score >= suggested]


def test_explain_agrees_with_the_floor(engine: RecallEngine, unfloored: RecallResult) -> None:
    floor = (unfloored.hits[0].score + unfloored.hits[1].score) / 2
    kept, dropped = unfloored.hits[0], unfloored.hits[1]
    common: dict[str, Any] = {"as_of": SAMPLE_AS_OF, "query_id": QUERY_ID, "min_score": floor}
    assert engine.explain(QUERY, kept.memory_id, **common).verdict == "hit"
    explanation = engine.explain(QUERY, dropped.memory_id, **common)
    assert explanation.verdict == "below_min_score"
    assert explanation.rank == dropped.rank
    assert explanation.min_score == floor


# -- known_at in the JSON ---------------------------------------------------------------


def test_known_at_is_in_the_json_only_when_given(
    engine: RecallEngine, unfloored: RecallResult
) -> None:
    later = "2026-08-10T08:00:01.5Z"  # after every sample record was stored
    result = _recall(engine, known_at=later)
    assert result.known_at == later
    payload = json.loads(result.to_json())
    assert payload["known_at"] == later
    assert "min_score" not in payload and "below_min_score" not in payload
    plain = json.loads(unfloored.to_json())
    assert "known_at" not in plain
    # The whole store is known then, so the key is the only difference.
    assert {k: v for k, v in payload.items() if k != "known_at"} == plain


def test_a_record_stored_at_known_at_is_known(
    engine: RecallEngine, store: RemoteMemoryStore, unfloored: RecallResult
) -> None:
    # "stored_at <= known_at" (stores/known_at.py): every sample record is stored at the
    # same instant, so known at that instant the store is whole.
    (stored_at,) = {r.stored_at for r in store.read_all()}
    result = _recall(engine, known_at=stored_at)
    assert result.known_at == stored_at
    assert _dicts(result) == _dicts(unfloored)
    assert result.searched_records == unfloored.searched_records
    hit = unfloored.hits[0].memory_id
    assert (
        engine.explain(
            QUERY, hit, as_of=SAMPLE_AS_OF, query_id=QUERY_ID, known_at=stored_at
        ).verdict
        == "hit"
    )


def test_known_at_before_the_store_existed(engine: RecallEngine) -> None:
    result = _recall(engine, known_at="2026-08-10T07:59:59Z")
    assert result.hits == () and result.searched_records == 0
    assert result.empty_reason == EMPTY_REASON_NO_MATCH
    payload = json.loads(result.to_json())
    assert payload["known_at"] == "2026-08-10T07:59:59Z"


def test_known_at_and_min_score_together(
    engine: RecallEngine, store: RemoteMemoryStore, unfloored: RecallResult
) -> None:
    (stored_at,) = {r.stored_at for r in store.read_all()}
    floor = math.nextafter(unfloored.hits[0].score, math.inf)
    payload = json.loads(_recall(engine, known_at=stored_at, min_score=floor).to_json())
    assert payload["known_at"] == stored_at
    assert payload["min_score"] == floor
    assert payload["below_min_score"] == len(unfloored.hits)
    assert payload["empty_reason"] == "below_min_score"

"""Properties of the pipeline under hypothesis (issue 7), 1,000 examples each.

- normalize is idempotent on its own output, and raises nothing but the contract's
  ``RemoteMemoryValidationError`` whatever it is given;
- records accept or refuse any input with the contract's errors only, and round-trip
  through their JSON line;
- the ranking does not depend on the order the store returns records in;
- ranks are 1..n without a gap, n = min(limit, candidates), in rank-key order;
- ``RecallResult.to_json()`` round-trips to ``to_dict()``.
"""

from __future__ import annotations

import json
import unicodedata
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from memlib import (
    MemoryKind,
    MemorySource,
    RemoteMemoryCorruptionError,
    RemoteMemoryValidationError,
    StoredMemory,
    build_recall_candidates,
    normalize_recall_query,
    render_recall_context,
    stable_rank_recall_candidates,
    user_scope_for,
)
from memlib.normalize import QUERY_MAX_CHARS, normalize_text, tokenize, tokenize_all
from memlib.rank import rank_key
from memlib.records import parse_timestamp
from memlib.result import RecallResult
from memlib.score import score_recall_candidate
from memlib.stores.jsonl._store import encode_record

EXAMPLES = 1_000
PROPERTY = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
SCOPE = user_scope_for("alice")
AS_OF = datetime(2026, 8, 10, 12, tzinfo=UTC)

# Characters that make Unicode normalisation interesting: case folding that expands
# (ß, ẞ, ﬁ, İ), titlecase digraphs, the iota subscript, compatibility forms that NFKC
# expands (﷽, ㌀, Ⅻ, ²), full-width letters, combining marks, Han, kana, Hangul, RTL
# marks, zero-width and exotic spaces, and lone surrogates (refused by the contract).
TRICKY = list(
    "ßẞﬁﬀİıǅǄǈͅΐΰ﷽㌀Ⅻ²₃ＡＢｃ１２ｶﾞ゙゚ᄀ가각é\u0301\u0308\u20dd分层记忆メモリ設計々〇"
    "ー・゠\u202e\u200b\u200d\ufeff\u00a0\u2028\u3000\t\n\r\x0b\x1c\x85 -_!?.,'\"<>&"
) + ["\ud800", "\udfff", "\U00020000", "\U0002f800", "\U0001d400", "ǰ", "ẖ", "ﬓ"]

texts = st.one_of(
    st.text(),
    st.text(alphabet=st.sampled_from(TRICKY), max_size=40),
    st.text(alphabet=st.one_of(st.sampled_from(TRICKY), st.characters()), max_size=60),
)


# -- normalize ----------------------------------------------------------------------------


@PROPERTY
@given(texts)
@example("ǅ")  # titlecase digraph: casefold then NFKC must agree with itself
@example("ͅ")  # iota subscript casefolds to ι
@example("ẞ ß ﬁ İ")
@example("﷽")
@example("\ufeff\u200b")
def test_normalize_text_is_idempotent(text: str) -> None:
    once = normalize_text(text)
    assert normalize_text(once) == once
    assert tokenize(once) == tokenize(text)
    assert tuple(sorted(set(tokenize_all(text)))) == tokenize(text)
    assert " ".join(once.split()) == once  # whitespace already collapsed


@PROPERTY
@given(texts, st.integers(min_value=1, max_value=10))
def test_normalize_recall_query_is_idempotent_on_its_output(text: str, limit: int) -> None:
    try:
        query = normalize_recall_query(text, user_scope=SCOPE, limit=limit, issued_at=AS_OF)
    except RemoteMemoryValidationError:
        return
    # NFKC can expand a query past the length limit (U+FDFA is 18 characters); the limit is
    # on what the caller sent, so only outputs within it can be sent back in.
    assume(len(query.normalized_text) <= QUERY_MAX_CHARS)
    again = normalize_recall_query(
        query.normalized_text, user_scope=SCOPE, limit=limit, issued_at=AS_OF
    )
    assert again.normalized_text == query.normalized_text
    assert again.terms == query.terms
    assert query.terms and list(query.terms) == sorted(set(query.terms))
    assert again.text == query.normalized_text  # already readable: nothing left to collapse
    assert unicodedata.is_normalized("NFKC", query.normalized_text)


def test_an_expanding_query_past_the_limit_is_refused_with_the_contract_error() -> None:
    query = normalize_recall_query("\ufdfa" * 120, user_scope=SCOPE, issued_at=AS_OF)
    assert len(query.text) == 120 and len(query.normalized_text) > QUERY_MAX_CHARS
    try:
        normalize_recall_query(query.normalized_text, user_scope=SCOPE, issued_at=AS_OF)
    except RemoteMemoryValidationError as exc:
        assert "2,000-character limit" in str(exc)
    else:
        raise AssertionError("a normalized text over the limit was accepted")


anything = st.one_of(
    texts,
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.binary(max_size=20),
    st.lists(st.text(max_size=5), max_size=3),
    st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2),
)


@PROPERTY
@given(anything, anything, st.one_of(st.none(), anything))
def test_normalize_raises_only_the_contract_error(text: Any, limit: Any, query_id: Any) -> None:
    try:
        query = normalize_recall_query(
            text, user_scope=SCOPE, limit=limit, query_id=query_id, issued_at=AS_OF
        )
    except RemoteMemoryValidationError as exc:
        message = str(exc)
        assert message and "\n" not in message
        return
    assert isinstance(text, str) and query.terms
    assert isinstance(limit, int) and not isinstance(limit, bool) and 1 <= limit <= 10
    assert query.query_id == query_id or query_id is None


# -- records --------------------------------------------------------------------------

timestamps = st.one_of(
    texts,
    st.datetimes(timezones=st.one_of(st.none(), st.timezones())).map(lambda d: d.isoformat()),
    st.sampled_from(
        [
            "2026-08-01T12:00:00Z",
            "2026-08-01T12:00:00.250+02:00",
            "yesterday",
            "0001-01-01T00:00:00+01:00",
            "9999-12-31T23:59:59-01:00",
            "2026-08-01",
        ]
    ),
)


@PROPERTY
@given(
    st.one_of(texts, st.just("m-1")),
    texts,
    texts,
    texts,
    timestamps,
    timestamps,
    st.sampled_from(["conversation", "profile", "note", MemoryKind.PROFILE]),
)
def test_records_raise_only_contract_errors_and_round_trip(
    memory_id: str,
    content: str,
    summary: str,
    title: str,
    captured_at: str,
    stored_at: str,
    kind: Any,
) -> None:
    try:
        record = StoredMemory(
            memory_id=memory_id,
            user_scope=SCOPE,
            kind=kind,
            content=content,
            summary=summary,
            source=MemorySource(
                source_id="s-1", source_type="t", title=title, captured_at=captured_at
            ),
            stored_at=stored_at,
        )
    except (RemoteMemoryValidationError, RemoteMemoryCorruptionError) as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    line = encode_record(record)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert StoredMemory.from_dict(json.loads(line)) == record
    assert parse_timestamp(record.captured_at) == parse_timestamp(captured_at)


@PROPERTY
@given(timestamps)
def test_parse_timestamp_raises_only_corruption(value: str) -> None:
    try:
        moment = parse_timestamp(value)
    except RemoteMemoryCorruptionError as exc:
        assert str(exc).startswith("invalid timestamp: ")
        return
    assert moment.tzinfo is UTC


# -- ranking -------------------------------------------------------------------------------

WORDS = ["layered", "memory", "design", "sqlite", "wal", "分层", "记忆", "café", "straße"]
MOMENTS = [AS_OF - timedelta(days=d) for d in (0, 0.5, 1, 1, 30, 400)] + [AS_OF + timedelta(days=2)]


_ROW = st.tuples(
    st.text(alphabet="abcz019-_", min_size=1, max_size=4),  # memory_id
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),  # content words
    st.sampled_from(WORDS),  # summary
    st.integers(min_value=0, max_value=len(MOMENTS) - 1),  # captured_at
    st.integers(min_value=0, max_value=5),  # 0 → PROFILE, else CONVERSATION
)


def _record(row: tuple[str, list[str], str, int, int]) -> StoredMemory:
    memory_id, words, summary, moment, kind = row
    return StoredMemory(
        memory_id=memory_id,
        user_scope=SCOPE,
        kind=MemoryKind.PROFILE if kind == 0 else MemoryKind.CONVERSATION,
        content=" ".join(words),
        summary=summary,
        source=MemorySource(
            source_id="s", source_type="t", title="t", captured_at=MOMENTS[moment].isoformat()
        ),
        stored_at="2026-08-10T08:00:00Z",
    )


corpora = st.tuples(
    st.lists(_ROW, max_size=12, unique_by=lambda row: row[0]).map(
        lambda rows: [_record(r) for r in rows]
    ),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join),
    st.integers(min_value=1, max_value=10),
)


def _rank(records: list[StoredMemory], text: str, limit: int) -> RecallResult:
    query = normalize_recall_query(
        text, user_scope=SCOPE, limit=limit, query_id="q-prop", issued_at=AS_OF
    )
    candidates = build_recall_candidates(query, records)
    hits = stable_rank_recall_candidates(query, candidates, as_of=AS_OF)
    return RecallResult(
        query=query, hits=hits, searched_records=len(records), candidate_records=len(candidates)
    )


def check_storage_order(
    records: list[StoredMemory], text: str, limit: int, rng: Any
) -> RecallResult:
    shuffled = list(records)
    rng.shuffle(shuffled)
    first, second = _rank(records, text, limit), _rank(shuffled, text, limit)
    assert first.hits == second.hits
    assert first.to_json() == second.to_json()
    assert render_recall_context(first) == render_recall_context(second)
    assert _rank(list(reversed(records)), text, limit).hits == first.hits
    return first


def check_ranks(records: list[StoredMemory], result: RecallResult, limit: int) -> None:
    query = result.query
    candidates = build_recall_candidates(query, records)
    assert [h.rank for h in result.hits] == list(range(1, len(result.hits) + 1))
    assert len(result.hits) == min(limit, len(candidates))
    by_id = {c.record.memory_id: c for c in candidates}
    keys = [rank_key((by_id[h.memory_id], h.score_breakdown)) for h in result.hits]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    # Every candidate left out ranks after the last one kept.
    if result.hits:
        kept = {h.memory_id for h in result.hits}
        for candidate in candidates:
            if candidate.record.memory_id not in kept:
                key = rank_key((candidate, score_recall_candidate(query, candidate, as_of=AS_OF)))
                assert key > keys[-1]
    assert all(h.scope.memory_kind is MemoryKind.CONVERSATION for h in result.hits)


def check_json(result: RecallResult) -> None:
    payload = result.to_json()
    assert json.loads(payload) == result.to_dict()
    assert json.dumps(json.loads(payload), indent=2, ensure_ascii=False) == payload
    for hit, data in zip(result.hits, json.loads(payload)["hits"], strict=True):
        assert data["score"] == hit.score == hit.score_breakdown.total
        assert data["source"] == data["provenance"] == hit.provenance.to_dict()


@PROPERTY
@given(corpora, st.randoms(use_true_random=False))
def test_ranking_properties(corpus: Any, rng: Any) -> None:
    """Three properties on the same 1,000 corpora (generation is the slow part):
    storage order does not matter; ranks are 1..n in rank-key order; to_json round-trips."""
    records, text, limit = corpus
    result = check_storage_order(records, text, limit, rng)
    check_ranks(records, result, limit)
    check_json(result)


def test_the_properties_can_fail() -> None:
    """A storage-order-dependent ranker is caught by the same comparison."""
    records = [
        StoredMemory(
            memory_id=i,
            user_scope=SCOPE,
            kind=MemoryKind.CONVERSATION,
            content="layered memory",
            summary="layered",
            source=MemorySource(
                source_id="s", source_type="t", title="t", captured_at="2026-08-09T12:00:00Z"
            ),
            stored_at="2026-08-10T08:00:00Z",
        )
        for i in ("b", "a")
    ]
    result = _rank(records, "layered memory", 1)
    assert [h.memory_id for h in result.hits] == ["a"]  # tie broken by memory_id, not order
    naive = build_recall_candidates(result.query, records)[0].record.memory_id
    assert naive == "b"  # storage order would have said "b"
    reordered = _rank(list(reversed(records)), "layered memory", 1)
    assert reordered.hits == result.hits
    two = _rank(records, "layered memory", 2).hits
    broken = RecallResult(
        query=result.query, hits=tuple(reversed(two)), searched_records=2, candidate_records=2
    )
    try:
        check_ranks(records, broken, 2)
    except AssertionError:
        pass
    else:
        raise AssertionError("check_ranks accepted ranks out of order")

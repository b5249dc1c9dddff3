"""SPEC §3.1: normalize → RecallQuery, the tokenizer, and the order of its checks."""

from __future__ import annotations

import unicodedata
from datetime import UTC, datetime, timedelta, timezone

import pytest

from memlib import RecallQuery, RemoteMemoryValidationError, normalize_recall_query, user_scope_for
from memlib.normalize import tokenize

SCOPE = user_scope_for("alice")


def _query(text, **kwargs):
    kwargs.setdefault("user_scope", SCOPE)
    kwargs.setdefault("limit", 5)
    kwargs.setdefault("query_id", "q-1")
    kwargs.setdefault("issued_at", datetime(2026, 8, 10, 12, tzinfo=UTC))
    return normalize_recall_query(text, **kwargs)


def test_english_case_and_whitespace():
    query = _query("  LAYERED   Memory  ")
    assert isinstance(query, RecallQuery)
    assert query.text == "LAYERED Memory"
    assert query.normalized_text == "layered memory"
    assert query.terms == ("layered", "memory")


def test_chinese_bigrams():
    query = _query("分层记忆")
    assert query.text == "分层记忆"
    assert set(query.terms) == {"分层", "层记", "记忆"}
    assert query.terms == tuple(sorted(query.terms))


def test_single_han_character_is_its_own_term():
    assert _query("记").terms == ("记",)
    assert _query("记 忆").terms == ("忆", "记")


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("café", {"café"}),
        ("cafe\u0301", {"café"}),  # decomposed: NFKC composes it
        ("straße", {"strasse"}),
        ("STRASSE", {"strasse"}),
        ("москва", {"москва"}),
        ("메모리", {"메모리"}),
        ("ＡＢＣ１２３", {"abc123"}),
        ("\U00020000\U00020001", {"\U00020000\U00020001"}),  # CJK Extension B
        ("\U00020000", {"\U00020000"}),
        (
            "\U00020000\U00020001\U0002a700",
            {"\U00020000\U00020001", "\U00020001\U0002a700"},
        ),  # B, C
        ("\U00030000记忆", {"\U00030000记", "记忆"}),  # Extension G next to a unified ideograph
        ("\U0002f800\U0002f801", {unicodedata.normalize("NFKC", "\U0002f800\U0002f801")}),
        ("\u3400\u3401\u3402", {"\u3400\u3401", "\u3401\u3402"}),  # Extension A
        ("メモリ設計", {"メモ", "モリ", "リ設", "設計"}),
        ("きおく", {"きお", "おく"}),
        ("llm记忆", {"llm", "记忆"}),
        ("记忆llm", {"记忆", "llm"}),
        ("learn-workbuddy", {"learn", "workbuddy"}),
        ("snake_case_id v2", {"snake_case_id", "v2"}),
        ("Café, straße & 分层记忆!", {"café", "strasse", "分层", "层记", "记忆"}),
    ],
)
def test_unicode_terms(text, terms):
    query = _query(text)
    assert set(query.terms) == terms
    assert len(query.terms) == len(terms)  # distinct
    assert list(query.terms) == sorted(query.terms)


def test_cjk_extension_bigram_is_one_term_of_two_characters():
    (term,) = _query("\U00020000\U00020001").terms
    assert len(term) == 2
    assert [unicodedata.name(ch) for ch in term] == [
        "CJK UNIFIED IDEOGRAPH-20000",
        "CJK UNIFIED IDEOGRAPH-20001",
    ]


def test_normalized_text_is_nfkc_casefold_collapsed():
    raw = "  ＬＡＹＥＲＥＤ\u3000 Straße\n\tMemory "
    query = _query(raw)
    assert query.text == "ＬＡＹＥＲＥＤ Straße Memory"  # readable: only whitespace touched
    expected = " ".join(unicodedata.normalize("NFKC", query.text).casefold().split())
    assert query.normalized_text == expected == "layered strasse memory"
    assert query.terms == ("layered", "memory", "strasse")


def test_there_are_no_stopwords():
    assert _query("the of and a").terms == ("a", "and", "of", "the")


def test_terms_are_distinct_and_sorted():
    query = _query("memory Memory MEMORY layered 记忆 记忆")
    assert query.terms == tuple(sorted(set(query.terms)))
    assert query.terms.count("memory") == 1


def test_tokenize_matches_query_terms():
    text = "Café LLM记忆 メモリ設計 learn-workbuddy"
    assert tokenize(text) == _query(text).terms


@pytest.mark.parametrize("text", ["", "   ", "\n\t  \u3000"])
def test_empty_query_is_rejected(text):
    with pytest.raises(RemoteMemoryValidationError) as info:
        _query(text)
    assert str(info.value) == "recall query must not be empty"


@pytest.mark.parametrize("text", ["!!!", "  ?!  ...  ", "— ・ ——", "。，、"])
def test_punctuation_only_query_is_rejected(text):
    with pytest.raises(RemoteMemoryValidationError) as info:
        _query(text)
    assert str(info.value) == "recall query has no searchable terms"


def test_query_with_lone_surrogates_is_rejected():
    # what sys.argv holds for a byte that is not UTF-8 (surrogateescape)
    with pytest.raises(RemoteMemoryValidationError, match="valid Unicode"):
        _query("memory\udcff")
    with pytest.raises(RemoteMemoryValidationError, match="query_id"):
        _query("memory", query_id="q-\udcff")


def test_query_length_limit():
    assert len(_query("a" * 2_000).text) == 2_000
    with pytest.raises(RemoteMemoryValidationError):
        _query("a" * 2_001)


@pytest.mark.parametrize("limit", [0, 11, -1, 100])
def test_limit_out_of_range(limit):
    with pytest.raises(RemoteMemoryValidationError) as info:
        _query("layered memory", limit=limit)
    assert str(info.value) == "limit must be between 1 and 10"


@pytest.mark.parametrize("limit", ["5x", "5", True, False, 5.0, None])
def test_limit_must_be_an_integer(limit):
    with pytest.raises(RemoteMemoryValidationError) as info:
        _query("layered memory", limit=limit)
    assert str(info.value) == "limit must be an integer"


@pytest.mark.parametrize("limit", [1, 10])
def test_limit_bounds_are_inclusive(limit):
    assert _query("layered memory", limit=limit).limit == limit


def test_terms_are_checked_before_limit():
    with pytest.raises(RemoteMemoryValidationError, match="no searchable terms"):
        _query("!!!", limit=0)
    with pytest.raises(RemoteMemoryValidationError, match="must not be empty"):
        _query("  ", limit="5x")


def test_query_id_is_kept_or_generated_uniquely():
    assert _query("memory", query_id="fixed-id").query_id == "fixed-id"
    a = _query("memory", query_id=None).query_id
    b = _query("memory", query_id=None).query_id
    assert a and b and a != b


def test_query_carries_scope_and_limit():
    query = _query("memory", user_scope=user_scope_for("bob"), limit=3)
    assert query.user_scope == user_scope_for("bob")
    assert query.limit == 3


@pytest.mark.parametrize(
    ("issued_at", "expected"),
    [
        (datetime(2026, 8, 10, 12), "2026-08-10T12:00:00Z"),  # naive → UTC
        (datetime(2026, 8, 10, 14, tzinfo=timezone(timedelta(hours=2))), "2026-08-10T12:00:00Z"),
        (datetime(2026, 8, 10, 12, tzinfo=UTC), "2026-08-10T12:00:00Z"),
    ],
)
def test_issued_at_is_utc(issued_at, expected):
    assert _query("memory", issued_at=issued_at).issued_at == expected


def test_issued_at_outside_the_representable_range_is_a_validation_error():
    far = datetime(1, 1, 1, 0, 30, tzinfo=timezone(timedelta(hours=1)))
    with pytest.raises(RemoteMemoryValidationError, match="as_of"):
        _query("memory", issued_at=far)
    assert (
        _query("memory", issued_at=datetime(5, 1, 1, tzinfo=UTC)).issued_at
        == "0005-01-01T00:00:00Z"
    )


def test_issued_at_defaults_to_now():
    before = datetime.now(UTC).replace(microsecond=0)
    query = normalize_recall_query("memory", user_scope=SCOPE, limit=5)
    after = datetime.now(UTC)
    issued = datetime.fromisoformat(query.issued_at)
    assert before <= issued <= after


def test_query_to_dict():
    query = _query("  LAYERED   Memory  ")
    assert query.to_dict() == {
        "query_id": "q-1",
        "text": "LAYERED Memory",
        "normalized_text": "layered memory",
        "terms": ["layered", "memory"],
        "user_scope": SCOPE,
        "limit": 5,
        "issued_at": "2026-08-10T12:00:00Z",
    }


def test_the_shipped_combining_marks_are_this_pythons() -> None:
    """memlib/data/combining_marks.txt spares a new process 135k unicodedata look-ups; it
    must say exactly what unicodedata says (else the tokenizer would cut differently)."""
    import unicodedata

    from memlib._tokens import combining_mark_ranges, shipped_mark_ranges

    version, ranges = shipped_mark_ranges()
    assert version == unicodedata.unidata_version, "regenerate memlib/data/combining_marks.txt"
    assert ranges == combining_mark_ranges()

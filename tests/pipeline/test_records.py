"""SPEC §1 (records, validation, user scope) and §6 (the error hierarchy)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from datetime import UTC, datetime, timedelta, timezone

import pytest

import memlib
from memlib import (
    MemoryKind,
    MemorySource,
    RemoteMemoryCorruptionError,
    RemoteMemoryDuplicateError,
    RemoteMemoryError,
    RemoteMemoryScopeError,
    RemoteMemoryStore,
    RemoteMemoryValidationError,
    StoredMemory,
    user_scope_for,
)

UTC_FORMAT = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")


def _source(**overrides):
    fields = {
        "source_id": "t-1",
        "source_type": "conversation_transcript",
        "title": "Layered memory",
        "captured_at": "2026-08-01T12:00:00Z",
    }
    fields.update(overrides)
    return MemorySource(**fields)


def _record(**overrides):
    fields = {
        "memory_id": "m-1",
        "user_scope": user_scope_for("alice"),
        "kind": MemoryKind.CONVERSATION,
        "content": "We agreed on a layered memory design.",
        "summary": "Layered memory.",
        "source": _source(),
        "stored_at": "2026-08-10T08:00:00Z",
    }
    fields.update(overrides)
    return StoredMemory(**fields)


# -- the public surface ---------------------------------------------------------------


def test_public_surface_of_spec_section_8_is_importable():
    names = [
        "MemoryKind",
        "MemorySource",
        "StoredMemory",
        "RemoteMemoryStore",
        "RecallEngine",
        "RecallQuery",
        "RecallCandidate",
        "RecallScoreBreakdown",
        "RecallHit",
        "RecallResult",
        "normalize_recall_query",
        "build_recall_candidates",
        "score_recall_candidate",
        "stable_rank_recall_candidates",
        "render_recall_context",
        "render_remote_profile",
        "RemoteMemoryError",
        "RemoteMemoryValidationError",
        "RemoteMemoryDuplicateError",
        "RemoteMemoryScopeError",
        "RemoteMemoryCorruptionError",
        "open_store",
    ]
    missing = [name for name in names if not hasattr(memlib, name)]
    assert missing == []


def test_memory_kind_values():
    assert [k.value for k in MemoryKind] == ["conversation", "profile", "retraction"]
    assert MemoryKind("profile") is MemoryKind.PROFILE


# -- §6 errors --------------------------------------------------------------------------


def test_error_hierarchy():
    assert issubclass(RemoteMemoryError, RuntimeError)
    assert issubclass(RemoteMemoryValidationError, RemoteMemoryError)
    assert issubclass(RemoteMemoryDuplicateError, RemoteMemoryValidationError)
    assert issubclass(RemoteMemoryScopeError, RemoteMemoryError)
    assert issubclass(RemoteMemoryCorruptionError, RemoteMemoryError)
    assert not issubclass(RemoteMemoryScopeError, RemoteMemoryValidationError)
    assert not issubclass(RemoteMemoryCorruptionError, RemoteMemoryValidationError)
    assert not issubclass(RemoteMemoryDuplicateError, RemoteMemoryCorruptionError)


def test_duplicate_error_message_names_the_id():
    assert str(RemoteMemoryDuplicateError("m-7")) == "duplicate memory_id: m-7"


# -- §1 records -------------------------------------------------------------------------


def test_records_are_frozen():
    record = _record()
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.content = "changed"
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.source.title = "changed"


def test_text_fields_collapse_whitespace():
    record = _record(content="  layered \n\t memory   design ", summary=" a\u00a0 b ")
    assert record.content == "layered memory design"
    assert record.summary == "a b"
    source = _source(title="  Layered\n\nmemory  ", source_id=" t-1 ")
    assert source.title == "Layered memory"
    assert source.source_id == "t-1"


@pytest.mark.parametrize("field", ["content", "summary"])
@pytest.mark.parametrize("value", ["", "   ", "\n\t "])
def test_empty_record_text_is_rejected(field, value):
    with pytest.raises(RemoteMemoryValidationError) as info:
        _record(**{field: value})
    assert str(info.value) == f"{field} must not be empty"


@pytest.mark.parametrize("field", ["source_id", "source_type", "title"])
def test_empty_source_text_is_rejected(field):
    with pytest.raises(RemoteMemoryValidationError) as info:
        _source(**{field: "  \n "})
    assert str(info.value) == f"{field} must not be empty"


@pytest.mark.parametrize(("field", "limit"), [("content", 20_000), ("summary", 2_000)])
def test_record_length_limits(field, limit):
    assert len(getattr(_record(**{field: "x" * limit}), field)) == limit
    with pytest.raises(RemoteMemoryValidationError) as info:
        _record(**{field: "x" * (limit + 1)})
    assert str(info.value) == f"{field} exceeds the {limit:,}-character teaching limit"


def test_content_limit_message_is_the_spec_one():
    with pytest.raises(
        RemoteMemoryValidationError, match=r"^content exceeds the 20,000-character teaching limit$"
    ):
        _record(content="y" * 20_001)


@pytest.mark.parametrize(
    ("field", "limit"), [("source_id", 500), ("source_type", 100), ("title", 1_000)]
)
def test_source_length_limits(field, limit):
    assert len(getattr(_source(**{field: "s" * limit}), field)) == limit
    with pytest.raises(RemoteMemoryValidationError) as info:
        _source(**{field: "s" * (limit + 1)})
    assert str(info.value) == f"{field} exceeds the {limit:,}-character teaching limit"


def test_length_limit_applies_after_whitespace_collapse():
    # 20,000 visible characters padded with whitespace are still within the limit.
    assert len(_record(content="   " + "x" * 20_000 + "\n\n").content) == 20_000


@pytest.mark.parametrize(
    "memory_id", ["m 1", "m\t1", "m\n1", " m-1", "m-1 ", "m\x001", "m\x1f1", "m\x7f1", "m\u00a01"]
)
def test_memory_id_with_whitespace_or_control_characters_is_rejected(memory_id):
    with pytest.raises(RemoteMemoryValidationError):
        _record(memory_id=memory_id)


def test_memory_id_length_bounds():
    assert _record(memory_id="a").memory_id == "a"
    assert _record(memory_id="a" * 200).memory_id == "a" * 200
    with pytest.raises(RemoteMemoryValidationError):
        _record(memory_id="a" * 201)
    with pytest.raises(RemoteMemoryValidationError, match="memory_id must not be empty"):
        _record(memory_id="")


def test_lone_surrogates_are_rejected_before_anything_is_written(tmp_path):
    # json.loads('"\\ud800"') gives a str that cannot be written as UTF-8.
    lone = json.loads('"a\\ud800b"')
    with pytest.raises(RemoteMemoryValidationError, match="content"):
        _record(content=lone)
    with pytest.raises(RemoteMemoryValidationError, match="title"):
        _source(title=lone)
    with pytest.raises(RemoteMemoryValidationError, match="memory_id"):
        _record(memory_id=lone)
    with pytest.raises(RemoteMemoryValidationError, match="user_id"):
        user_scope_for(lone)
    path = tmp_path / "records.jsonl"
    store = RemoteMemoryStore(path, user_id="alice")
    with pytest.raises(RemoteMemoryValidationError):
        store.append(
            kind=MemoryKind.CONVERSATION,
            memory_id="m-1",
            content=lone,
            summary="s",
            source=_source(),
        )
    assert not path.exists()
    assert _record(content="emoji \U0001f600 ok").content == "emoji \U0001f600 ok"


def test_unicode_memory_id_is_kept_verbatim():
    assert _record(memory_id="记忆-001").memory_id == "记忆-001"


# -- timestamps -------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["yesterday", "2026-13-01T00:00:00Z", "", "2026-08-01T12:00:00"])
def test_invalid_or_naive_timestamp_is_corruption(bad):
    with pytest.raises(RemoteMemoryCorruptionError) as info:
        _source(captured_at=bad)
    assert str(info.value) == f"invalid timestamp: {bad!r}"


def test_invalid_timestamp_message_is_the_spec_one():
    with pytest.raises(RemoteMemoryCorruptionError, match=r"^invalid timestamp: 'yesterday'$"):
        _source(captured_at="yesterday")
    with pytest.raises(RemoteMemoryCorruptionError, match=r"^invalid timestamp: 'yesterday'$"):
        _record(stored_at="yesterday")


def test_invalid_timestamp_is_refused_at_write_time_and_nothing_is_written(tmp_path):
    path = tmp_path / "users" / "a" / "records.jsonl"
    store = RemoteMemoryStore(path, user_id="alice")
    with pytest.raises(RemoteMemoryCorruptionError, match="invalid timestamp: 'yesterday'"):
        store.append(
            kind=MemoryKind.CONVERSATION,
            memory_id="m-1",
            content="c",
            summary="s",
            source={"source_id": "t", "source_type": "x", "title": "t", "captured_at": "yesterday"},
        )
    assert not path.exists()
    assert store.read_all() == ()


@pytest.mark.parametrize(
    ("given", "instant"),
    [
        ("2026-08-01T12:00:00Z", datetime(2026, 8, 1, 12, tzinfo=UTC)),
        ("2026-08-01T14:00:00+02:00", datetime(2026, 8, 1, 12, tzinfo=UTC)),
        ("2026-08-01T07:30:00-04:30", datetime(2026, 8, 1, 12, tzinfo=UTC)),
        ("2026-08-01T00:30:00+01:00", datetime(2026, 7, 31, 23, 30, tzinfo=UTC)),
        ("2026-08-01T12:00:00.250+00:00", datetime(2026, 8, 1, 12, 0, 0, 250_000, tzinfo=UTC)),
        (
            datetime(2026, 8, 1, 21, tzinfo=timezone(timedelta(hours=9))),
            datetime(2026, 8, 1, 12, tzinfo=UTC),
        ),
    ],
)
def test_timestamps_are_normalised_to_utc_z(given, instant):
    source = _source(captured_at=given)
    assert UTC_FORMAT.match(source.captured_at), source.captured_at
    assert datetime.fromisoformat(source.captured_at) == instant
    if instant.microsecond == 0:
        assert source.captured_at == instant.strftime("%Y-%m-%dT%H:%M:%SZ")
    else:
        assert "." in source.captured_at  # fractional seconds are kept
    record = _record(source=source, stored_at=given)
    assert record.stored_at == source.captured_at
    assert record.captured_at == source.captured_at


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("0005-01-01T00:00:00Z", "0005-01-01T00:00:00Z"),
        ("0999-12-31T23:59:59.5Z", "0999-12-31T23:59:59.5Z"),
        ("9999-12-31T23:59:59Z", "9999-12-31T23:59:59Z"),
    ],
)
def test_every_year_keeps_the_four_digit_utc_format(given, expected, tmp_path):
    assert _source(captured_at=given).captured_at == expected
    path = tmp_path / "records.jsonl"
    RemoteMemoryStore(path, user_id="alice").append(
        kind=MemoryKind.CONVERSATION,
        memory_id="m-1",
        content="c",
        summary="s",
        source=_source(captured_at=given),
    )
    (record,) = RemoteMemoryStore(path, user_id="alice").read_all()  # still readable
    assert record.source.captured_at == expected


@pytest.mark.parametrize("bad", ["0001-01-01T00:30:00+01:00", "9999-12-31T23:30:00-01:00"])
def test_timestamp_outside_the_representable_range_is_corruption(bad, tmp_path):
    with pytest.raises(RemoteMemoryCorruptionError) as info:
        _source(captured_at=bad)
    assert str(info.value) == f"invalid timestamp: {bad!r}"


def test_stored_at_and_captured_at_are_kept_apart():
    record = _record(
        stored_at="2026-08-10T08:00:00Z", source=_source(captured_at="2026-08-01T12:00:00Z")
    )
    assert record.stored_at == "2026-08-10T08:00:00Z"
    assert record.source.captured_at == "2026-08-01T12:00:00Z"
    assert record.to_dict()["stored_at"] != record.to_dict()["source"]["captured_at"]


# -- user scope -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "user_id", ["alice", "  Alice  ", "ALICE", "Straße", "用户-7", "bob@example.com"]
)
def test_user_scope_is_first_16_hex_of_sha256_of_stripped_casefolded_id(user_id):
    expected = hashlib.sha256(user_id.strip().casefold().encode("utf-8")).hexdigest()[:16]
    assert user_scope_for(user_id) == expected
    assert re.fullmatch(r"[0-9a-f]{16}", expected)
    assert (
        RemoteMemoryStore("/nonexistent/never/records.jsonl", user_id=user_id).user_scope
        == expected
    )


def test_user_scope_folds_case_and_space_but_not_spelling():
    assert user_scope_for(" Alice\n") == user_scope_for("alice")
    assert user_scope_for("STRASSE") == user_scope_for("straße")
    assert user_scope_for("alice") != user_scope_for("alicia")


@pytest.mark.parametrize("user_id", ["", "   ", "\n"])
def test_empty_user_id_is_a_validation_error(user_id, tmp_path):
    with pytest.raises(RemoteMemoryValidationError):
        user_scope_for(user_id)
    with pytest.raises(RemoteMemoryValidationError):
        RemoteMemoryStore(tmp_path / "records.jsonl", user_id=user_id)
    assert list(tmp_path.iterdir()) == []


def test_record_user_scope_must_be_16_hex_digits():
    for bad in ["", "alice", "ABCDEF0123456789", "0123456789abcde", "0123456789abcdef0"]:
        with pytest.raises(RemoteMemoryValidationError):
            _record(user_scope=bad)


# -- serialisation ----------------------------------------------------------------------


def test_record_round_trips_through_json():
    record = _record(content="分层记忆 — café & <tags>")
    data = json.loads(json.dumps(record.to_dict(), ensure_ascii=False))
    assert StoredMemory.from_dict(data) == record
    assert set(data) == {
        "memory_id",
        "user_scope",
        "kind",
        "content",
        "summary",
        "source",
        "stored_at",
    }
    assert data["kind"] == "conversation"
    assert data["source"] == {
        "source_id": "t-1",
        "source_type": "conversation_transcript",
        "title": "Layered memory",
        "captured_at": "2026-08-01T12:00:00Z",
    }


def test_source_given_as_mapping_becomes_a_memory_source():
    record = _record(
        source={
            "source_id": "t-9",
            "source_type": "x",
            "title": "T",
            "captured_at": "2026-08-01T12:00:00+00:00",
        }
    )
    assert isinstance(record.source, MemorySource)
    assert record.source.captured_at == "2026-08-01T12:00:00Z"


def test_unknown_kind_is_rejected():
    with pytest.raises(RemoteMemoryValidationError):
        _record(kind="note")


def test_retraction_must_name_its_target_and_only_a_retraction_may():
    with pytest.raises(RemoteMemoryValidationError):
        _record(kind=MemoryKind.RETRACTION)
    with pytest.raises(RemoteMemoryValidationError):
        _record(retracts="m-0")
    retraction = _record(kind=MemoryKind.RETRACTION, memory_id="r-1", retracts="m-0")
    assert retraction.to_dict()["retracts"] == "m-0"
    assert "retracts" not in _record().to_dict()

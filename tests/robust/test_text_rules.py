"""Text rules of issue 32 (items 6, 8a, 8c, 8d, 9a, 9b; docs/contract.md, "What one line
of JSON may be" and "Smaller input rules").

- U+0000: one rule on every backend. A new record holding it is refused at validation,
  with the same one-line ``RemoteMemoryValidationError`` on JSONL, SQLite and
  PostgreSQL (which cannot store it); ids holding it, given to ``source_neighbours``,
  ``records_by_id``, ``existing_ids`` or ``retraction_of``, are left out on every
  backend as any id the scope does not hold; a record an older version stored with it
  stays readable, and ``memlib doctor`` reports it.
- A new memory id is NFC and holds no invisible or format character; a user id is NFKC
  and holds none either. Ids that pass keep their scope and bytes; stored ids that do
  not stay readable and nameable, and the doctor reports them.
- ``min_score=10**400`` and an invalid ``known_at`` text are validation errors; an
  unknown field name is quoted with visible escapes, so every message is one line.

Names from the modules under test are imported inside the tests where a name is new.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.pgserver import pg_dsn, pg_url  # noqa: F401  (fixtures)

from memlib import (
    MemoryKind,
    MemorySource,
    RecallEngine,
    RemoteMemoryValidationError,
    StoredMemory,
    open_store,
    user_scope_for,
)
from memlib.sample import SAMPLE_AS_OF, fixed_clock, scope_path
from memlib.stores._base import MemoryStore

BACKENDS = ("jsonl", "sqlite", "postgresql")
Opener = Callable[..., MemoryStore]
NFC_CAFE = "caf\u00e9"
NFD_CAFE = "cafe\u0301"
SOURCE = {
    "source_id": "t-1",
    "source_type": "conversation_transcript",
    "title": "Transcript",
    "captured_at": "2026-08-01T12:00:00Z",
}
STORED_AT = "2026-08-02T12:00:00Z"


@pytest.fixture(params=BACKENDS)
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    opened: list[MemoryStore] = []
    url = request.getfixturevalue("pg_url") if request.param == "postgresql" else None

    def open_(user_id: str = "alice") -> MemoryStore:
        if request.param == "jsonl":
            where = f"jsonl:{scope_path(tmp_path, user_id)}"
        elif request.param == "sqlite":
            where = f"sqlite:{tmp_path / 'memory.db'}"
        else:
            assert url is not None
            where = url
        store = open_store(where, user_id=user_id, clock=fixed_clock())
        opened.append(store)
        return store

    yield open_
    for store in opened:
        store.close()


def _item(
    memory_id: str = "m-1", text: str = "layered memory design", **source: str
) -> dict[str, Any]:
    return {
        "kind": "conversation",
        "memory_id": memory_id,
        "content": f"{text} (content)",
        "summary": text,
        "source": {**SOURCE, **source},
    }


def _refused(call: Callable[[], object]) -> str:
    with pytest.raises(RemoteMemoryValidationError) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message and len(message.splitlines()) == 1
    return message


# -- U+0000 ----------------------------------------------------------------------------

NUL_ITEMS = {
    "content": (_item(text="layered\x00memory"), "content must not contain U+0000"),
    "title": (_item(title="Tran\x00script"), "title must not contain U+0000"),
    "source_id": (_item(source_id="t\x00-1"), "source_id must not contain U+0000"),
    "source_type": (_item(source_type="chat\x00"), "source_type must not contain U+0000"),
}


@pytest.mark.parametrize("field", list(NUL_ITEMS))
def test_nul_is_refused_alike_by_every_backend(opener: Opener, field: str) -> None:
    item, words = NUL_ITEMS[field]
    store = opener()
    store.append_many([_item("m-0")])
    assert _refused(lambda: store.append(**item)).startswith(words)
    assert _refused(lambda: store.append_many([_item("m-2"), item])).startswith(words)
    assert [r.memory_id for r in store.read_all()] == ["m-0"]


def test_nul_in_a_retraction_or_a_supersede_is_refused_alike(opener: Opener) -> None:
    store = opener()
    store.append_many([_item("m-1"), _item("m-2")])
    assert _refused(lambda: store.retract("m-1", reason="wrong\x00", source=SOURCE)) == (
        "reason must not contain U+0000 (the NUL character)"
    )
    assert _refused(
        lambda: store.retract("m-1", reason="wrong", source={**SOURCE, "title": "a\x00b"})
    ).startswith("title")
    assert _refused(
        lambda: store.supersede("m-2", _item("m-3", "new\x00text"), reason="newer")
    ).startswith("content")
    assert [r.memory_id for r in store.read_all()] == ["m-1", "m-2"]


def test_ids_holding_nul_are_left_out_alike_by_every_backend(opener: Opener) -> None:
    store = opener()
    store.append_many([_item("m-1"), _item("m-2")])
    asked = ["m-1", "m\x00-2", "\x00"]
    neighbours = getattr(store, "source_neighbours")(asked)  # noqa: B009
    assert set(neighbours) == {"m-1"} and neighbours["m-1"].next == "m-2"
    assert [r.memory_id for r in getattr(store, "records_by_id")(asked)] == ["m-1"]  # noqa: B009
    assert getattr(store, "existing_ids")(asked) == {"m-1"}  # noqa: B009
    assert store.retraction_of("m\x00-1") is None
    # Naming an id that cannot exist is the caller's mistake, said the same way everywhere.
    message = _refused(lambda: store.retract("m\x00-1", reason="r", source=SOURCE))
    assert "must not contain whitespace or control characters" in message
    engine = RecallEngine(store)
    assert _refused(lambda: engine.explain("layered", "m\x00-1", as_of=SAMPLE_AS_OF)).startswith(
        "memory_id must not contain"
    )
    result = engine.recall("layered\x00memory design", as_of=SAMPLE_AS_OF)
    assert [h.memory_id for h in result.hits][:1] in (["m-1"], ["m-2"])


def _write_old_store(path: Path, records: list[dict[str, Any]]) -> None:
    """A JSONL store as an older memlib wrote it, before the rules of issue 32."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    lines = "".join(
        json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records
    )
    path.write_text(lines, encoding="utf-8")
    path.chmod(0o600)


def _old_record(memory_id: str, text: str, scope: str, **source: str) -> dict[str, Any]:
    return {
        "memory_id": memory_id,
        "user_scope": scope,
        "kind": "conversation",
        "content": text,
        "summary": text,
        "source": {**SOURCE, **source},
        "stored_at": STORED_AT,
    }


OLD_IDS = {"nfd": NFD_CAFE, "zero width": "m\u200b-1", "bidi": "m\u202e-1", "tag": "m\U000e0041"}


def test_records_an_older_version_stored_stay_readable(tmp_path: Path) -> None:
    scope = user_scope_for("alice")
    path = scope_path(tmp_path, "alice")
    old = [_old_record("nul", "layered\x00memory", scope, title="a\x00b")] + [
        _old_record(memory_id, "layered memory", scope) for memory_id in OLD_IDS.values()
    ]
    _write_old_store(path, old)
    store = open_store(f"jsonl:{path}", user_id="alice", clock=fixed_clock())
    records = store.read_all()
    assert [r.to_dict() for r in records] == old  # nothing lost, nothing changed
    assert records[0].content == "layered\x00memory"
    result = RecallEngine(store).recall("layered memory", as_of=SAMPLE_AS_OF, limit=10)
    assert {h.memory_id for h in result.hits} == {r["memory_id"] for r in old}
    # An old id can still be named: retracted, superseded, explained.
    store.retract(NFD_CAFE, reason="wrong", source=SOURCE)
    new, _ = store.supersede("m\u200b-1", _item("m-2"), reason="newer")
    assert new.supersedes == "m\u200b-1"
    explained = RecallEngine(store).explain("layered memory", "m\u202e-1", as_of=SAMPLE_AS_OF)
    assert explained.memory_id == "m\u202e-1"
    # A stored record keeps its bytes when read back through the slow path too.
    slow = StoredMemory.from_dict({**old[0], "retracts": None})
    assert slow.content == "layered\x00memory" and slow.source.title == "a\x00b"


def test_doctor_reports_records_that_break_the_text_rules(tmp_path: Path) -> None:
    from memlib.stores.jsonl._doctor import check_store

    scope = user_scope_for("alice")
    path = scope_path(tmp_path, "alice")
    _write_old_store(
        path,
        [
            _old_record("ok", "layered memory", scope),
            _old_record("nul", "layered\x00memory", scope),
            _old_record(NFD_CAFE, "layered memory", scope),
            _old_record("m\u200b-1", "layered memory", scope),
            _old_record("src", "layered memory", scope, source_id="t\x00"),
        ],
    )
    report = check_store(path)
    assert report.records == 5
    found = [(p.kind, p.line) for p in report.problems]
    assert found == [("text", 2), ("text", 3), ("text", 4), ("text", 5)]
    messages = [p.message for p in report.problems]
    assert all("\n" not in m for m in messages)
    assert "content" in messages[0] and "U+0000" in messages[0]
    assert "NFC" in messages[1] and NFC_CAFE in messages[1]
    assert "U+200B" in messages[2]
    assert "source_id" in messages[3] and "U+0000" in messages[3]


# -- ids and user ids: NFC, visible ---------------------------------------------------------


def test_a_new_memory_id_must_be_nfc(opener: Opener) -> None:
    store = opener()
    message = _refused(lambda: store.append(**_item(NFD_CAFE)))
    assert message == (f"memory_id must be in Unicode NFC form: 'cafe\\u0301' is {NFC_CAFE} in NFC")
    store.append(**_item(NFC_CAFE))
    assert [r.memory_id for r in store.read_all()] == [NFC_CAFE]
    # The NFD spelling is another id, which no store holds: it cannot be shown alike.
    assert getattr(store, "existing_ids")([NFD_CAFE]) == set()  # noqa: B009


@pytest.mark.parametrize(
    "memory_id",
    [
        "m\u200b1",
        "m\u200d1",
        "m\ufeff",
        "\u202em-1",
        "m\u2066x\u2069",
        "m\u00ad1",
        "m\U000e0041",
        "m\ufe0f",
        "\u3164",
        "m\u034f1",
        "m\x001",
    ],
)
def test_a_new_memory_id_holds_no_invisible_or_format_character(
    opener: Opener, memory_id: str
) -> None:
    store = opener()
    message = _refused(lambda: store.append(**_item(memory_id)))
    hidden = next(c for c in memory_id if c not in "m1-x")
    assert message.startswith("memory_id must not contain")
    assert f"holds U+{ord(hidden):04X}" in message or "control characters" in message
    assert store.read_all() == ()


def test_every_write_path_holds_new_ids_to_the_rule(opener: Opener) -> None:
    store = opener()
    store.append(**_item("m-1"))
    assert _refused(lambda: store.append_many([_item("m-2"), _item(NFD_CAFE)])).startswith(
        "memory_id must be in Unicode NFC form"
    )
    assert _refused(
        lambda: store.retract("m-1", reason="r", source=SOURCE, retraction_id="r\u200b")
    ).startswith("memory_id must not contain invisible")
    assert _refused(lambda: store.supersede("m-1", _item(NFD_CAFE), reason="r")).startswith(
        "memory_id must be in Unicode NFC form"
    )
    assert [r.memory_id for r in store.read_all()] == ["m-1"]


def test_the_constructor_holds_the_rule_and_ascii_ids_keep_their_fast_path() -> None:
    from memlib.records import record_from_item

    scope = user_scope_for("alice")
    for memory_id in ("m-1", NFC_CAFE, "分层-1", "ｍ-1", "👩🏽"):
        assert record_from_item(_item(memory_id), scope, STORED_AT).memory_id == memory_id
    with pytest.raises(RemoteMemoryValidationError, match="NFC"):
        StoredMemory(
            memory_id=NFD_CAFE,
            user_scope=scope,
            kind=MemoryKind.CONVERSATION,
            content="c",
            summary="s",
            source=MemorySource(**SOURCE),
            stored_at=STORED_AT,
        )
    with pytest.raises(RemoteMemoryValidationError, match="U\\+0000"):
        MemorySource(**{**SOURCE, "title": "a\x00"})


USER_IDS = {
    "nfd": (
        unicodedata.normalize("NFD", "jos\u00e9"),
        "user_id must be in Unicode NFKC form: 'jose\\u0301' is jos\u00e9 in NFKC",
    ),
    "fullwidth": (
        "\uff41\uff4c\uff49\uff43\uff45",
        "user_id must be in Unicode NFKC form: "
        "'\\uff41\\uff4c\\uff49\\uff43\\uff45' is alice in NFKC",
    ),
    "zero width": (
        "alice\u200b",
        "user_id must not contain invisible or format characters: 'alice\\u200b' holds U+200B",
    ),
    "bidi": (
        "\u202ealice",
        "user_id must not contain invisible or format characters: '\\u202ealice' holds U+202E",
    ),
    "nul": (
        "alice\x00",
        "user_id must not contain invisible or format characters: 'alice\\x00' holds U+0000",
    ),
}


@pytest.mark.parametrize("name", list(USER_IDS))
def test_a_user_id_is_nfkc_and_visible(name: str) -> None:
    user_id, words = USER_IDS[name]
    assert _refused(lambda: user_scope_for(user_id)) == words


@pytest.mark.parametrize("name", list(USER_IDS))
def test_every_backend_refuses_such_a_user_id(opener: Opener, name: str) -> None:
    user_id, words = USER_IDS[name]
    assert _refused(lambda: opener(user_id)) == words


def test_user_ids_that_pass_keep_their_scope() -> None:
    # The scope is sha256 of the stripped, casefolded id, as before issue 32.
    import hashlib

    for user_id in ("alice", " Alice ", "jos\u00e9", "分层", "Émile", "o'brien", "a b"):
        expected = hashlib.sha256(user_id.strip().casefold().encode()).hexdigest()[:16]
        assert user_scope_for(user_id) == expected
    assert user_scope_for("ALICE") == user_scope_for("alice")


# -- one-line messages, typed errors ---------------------------------------------------


def test_unknown_field_names_are_quoted_on_one_line() -> None:
    message = _refused(lambda: MemorySource.from_dict({**SOURCE, "bad\nkey": "x"}))
    assert message == "source has unknown fields: 'bad\\nkey'"
    message = _refused(
        lambda: MemorySource.from_dict(
            {**SOURCE, "url": "x", "a\u2028b": "y", "z\u200b": "w", "c\u034f": "v"}
        )
    )
    assert message == ("source has unknown fields: 'a\\u2028b', 'c\\u034f', url, 'z\\u200b'")
    record = {
        "memory_id": "m-1",
        "user_scope": user_scope_for("alice"),
        "kind": "profile",
        "content": "c",
        "summary": "s",
        "source": SOURCE,
        "stored_at": STORED_AT,
        "x\r\ny": 1,
    }
    assert _refused(lambda: StoredMemory.from_dict(record)) == (
        "record has unknown fields: 'x\\r\\ny'"
    )


def test_a_huge_min_score_is_a_validation_error(opener: Opener) -> None:
    store = opener()
    store.append(**_item())
    engine = RecallEngine(store)
    for floor in (10**400, -(10**400), "1e400"):
        assert (
            _refused(
                lambda f=floor: engine.recall(  # type: ignore[misc]
                    "layered", as_of=SAMPLE_AS_OF, min_score=f
                )
            )
            == "min_score must be a finite number"
        )


def test_an_invalid_known_at_text_is_a_validation_error(opener: Opener) -> None:
    store = opener()
    store.append(**_item())
    engine = RecallEngine(store)
    for text in (
        "yesterday",
        "2026-13-01T00:00:00Z",
        "2026-08-01T12:00:00",
        "2026-08-01T12:00:00.1234567Z",
        "bad\ntext",
    ):
        message = _refused(
            lambda t=text: engine.recall(  # type: ignore[misc]
                "layered", as_of=SAMPLE_AS_OF, known_at=t
            )
        )
        assert message.startswith("known_at: invalid timestamp: ")
        assert (
            _refused(
                lambda t=text: engine.explain(  # type: ignore[misc]
                    "layered", "m-1", as_of=SAMPLE_AS_OF, known_at=t
                )
            )
            == message
        )
    assert engine.recall("layered", as_of=SAMPLE_AS_OF, known_at="2026-12-01T00:00:00Z").hits

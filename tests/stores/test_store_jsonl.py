"""The JSONL store (docs/reference.md "Stores"): durability, uniqueness, scope, corruption,
incremental reads."""

from __future__ import annotations

import fcntl
import json
import multiprocessing
import os
import stat
import threading
import time
from pathlib import Path

import pytest

import memlib.stores._files as files_module
import memlib.stores.jsonl._store as jsonl_module
from memlib import (
    MemoryKind,
    RecallEngine,
    RemoteMemoryCorruptionError,
    RemoteMemoryDuplicateError,
    RemoteMemoryScopeError,
    RemoteMemoryStore,
    RemoteMemoryValidationError,
    StoredMemory,
    open_store,
)
from memlib.sample import (
    SAMPLE_AS_OF,
    SAMPLE_STORED_AT,
    fixed_clock,
    open_sample_store,
    sample_records,
)


def _lines(path: Path) -> list[bytes]:
    data = path.read_bytes()
    assert data == b"" or data.endswith(b"\n")
    return data.splitlines(keepends=True)


def _compact(record: StoredMemory) -> bytes:
    return (json.dumps(record.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n").encode()


# -- format, provenance, restart ----------------------------------------------------------


def test_provenance_survives_a_restart(store, store_path, make_item):
    written = store.append_many(
        [
            make_item("m-1", "Layered memory", "We agreed on layered memory.", days_before=3),
            make_item(
                "m-2", "分层记忆", "讨论分层记忆的边界。", days_before=2, kind=MemoryKind.PROFILE
            ),
        ]
    )
    again = RemoteMemoryStore(store_path, user_id="alice")
    records = again.read_all()
    assert records == written
    assert records[0].source.source_id == "src-m-1"
    assert records[0].source.captured_at == written[0].source.captured_at
    assert records[0].stored_at == "2026-08-10T08:00:00Z"  # the store's clock, not captured_at
    assert records[1].kind is MemoryKind.PROFILE
    assert again.latest_profile() == written[1]


def test_append_returns_the_stored_record(store, make_item):
    item = make_item("m-1", "  Layered   memory ", "content")
    record = store.append(**item)
    assert isinstance(record, StoredMemory)
    assert record.memory_id == "m-1"
    assert record.user_scope == store.user_scope
    assert record.summary == "Layered memory"
    assert record.source == item["source"]
    assert store.read_all() == (record,)


def test_lines_are_compact_utf8_json_one_per_record(store, store_path, make_item):
    written = store.append_many([make_item("m-1", "café 分层记忆", "ß"), make_item("m-2")])
    lines = _lines(store_path)
    assert lines == [_compact(r) for r in written]
    assert "分层记忆".encode() in lines[0]  # ensure_ascii=False
    for line in lines:
        data = json.loads(line)
        assert data["user_scope"] == store.user_scope
        assert line == (json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def test_read_all_keeps_append_order_and_records_filters_by_kind(store, make_item):
    store.append(**make_item("z-1"))
    store.append(**make_item("a-2", kind=MemoryKind.PROFILE))
    store.append(**make_item("m-3"))
    assert [r.memory_id for r in store.read_all()] == ["z-1", "a-2", "m-3"]
    assert [r.memory_id for r in store.records(MemoryKind.CONVERSATION)] == ["z-1", "m-3"]
    assert [r.memory_id for r in store.records("profile")] == ["a-2"]


def test_open_store_by_url(tmp_path, make_item):
    path = tmp_path / "u" / "records.jsonl"
    store = open_store(f"jsonl:{path}", user_id="alice")
    store.append(**make_item("m-1"))
    assert [r.memory_id for r in open_store(path, user_id="alice").read_all()] == ["m-1"]
    assert [r.memory_id for r in RemoteMemoryStore(path, user_id="Alice").read_all()] == ["m-1"]
    with pytest.raises(RemoteMemoryValidationError):
        open_store(f"nosuchscheme:{path}", user_id="alice")


# -- nothing is created by reading --------------------------------------------------------


def test_reading_creates_nothing(tmp_path):
    path = tmp_path / "root" / "users" / "abc" / "records.jsonl"
    store = RemoteMemoryStore(path, user_id="alice")
    assert store.read_all() == ()
    assert store.records() == ()
    assert store.latest_profile() is None
    result = RecallEngine(store).recall("layered memory", as_of=SAMPLE_AS_OF)
    assert result.hits == () and result.searched_records == 0
    open_store(f"jsonl:{path}", user_id="bob").read_all()
    assert list(tmp_path.iterdir()) == []


def test_failed_write_creates_nothing(tmp_path, make_item):
    path = tmp_path / "root" / "records.jsonl"
    store = RemoteMemoryStore(path, user_id="alice")
    with pytest.raises(RemoteMemoryValidationError):
        store.append(**make_item("m-1", summary="   "))
    with pytest.raises(RemoteMemoryValidationError):
        store.append(**make_item("m 1"))
    assert list(tmp_path.iterdir()) == []


# -- file modes, the lock, one O_APPEND write ----------------------------------------------


def test_files_are_created_with_mode_0600(tmp_path, make_item):
    path = tmp_path / "deep" / "users" / "x" / "records.jsonl"
    old = os.umask(0)  # the mode must come from the code, not from a friendly umask
    try:
        RemoteMemoryStore(path, user_id="alice").append(**make_item("m-1"))
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    lock = path.with_name("records.jsonl.lock")
    assert lock.exists()
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600


class _Spy:
    """Stands in for a module inside memlib.stores.jsonl._store and logs selected calls."""

    def __init__(self, real, log, names):
        self._real, self._log, self._names = real, log, names

    def __getattr__(self, name):
        attr = getattr(self._real, name)
        if name not in self._names:
            return attr

        def wrapper(*args, **kwargs):
            result = attr(*args, **kwargs)
            self._log.append((name, args, result))
            return result

        return wrapper


@pytest.fixture
def syscalls(monkeypatch):
    log: list[tuple] = []
    spy = _Spy(os, log, {"open", "write", "fsync", "ftruncate", "close"})
    monkeypatch.setattr(jsonl_module, "os", spy)
    monkeypatch.setattr(files_module, "os", spy)  # where the store's files are opened
    monkeypatch.setattr(jsonl_module, "fcntl", _Spy(fcntl, log, {"flock"}))
    return log


@pytest.mark.parametrize("count", [1, 3])
def test_one_write_of_whole_lines_on_an_o_append_descriptor_under_the_lock(
    store, store_path, make_item, syscalls, count
):
    store.append(**make_item("m-0"))
    before = store_path.read_bytes()
    syscalls.clear()
    items = [make_item(f"m-{i}") for i in range(1, count + 1)]
    written = store.append_many(items) if count > 1 else (store.append(**items[0]),)
    # Files are opened by name inside their (already opened) folder.
    opened = {
        call[2]: (os.path.basename(call[1][0]), call[1][1])
        for call in syscalls
        if call[0] == "open"
    }
    fd_of = {path: fd for fd, (path, _) in opened.items()}
    records_fd, lock_fd = fd_of[store_path.name], fd_of[store_path.name + ".lock"]
    assert opened[records_fd][1] & os.O_APPEND
    names = [(c[0], c[1][0]) for c in syscalls]
    writes = [c for c in syscalls if c[0] == "write"]
    assert len(writes) == 1
    assert writes[0][1][0] == records_fd
    payload = bytes(writes[0][1][1])
    assert payload == b"".join(_compact(r) for r in written)
    assert payload.count(b"\n") == count and payload.endswith(b"\n")
    locks = [c for c in syscalls if c[0] == "flock"]
    assert locks and locks[0][1] == (lock_fd, fcntl.LOCK_EX)
    lock_at = names.index(("flock", lock_fd))
    write_at = names.index(("write", records_fd))
    fsync_at = names.index(("fsync", records_fd))
    close_lock_at = names.index(("close", lock_fd))
    assert lock_at < write_at < fsync_at < close_lock_at
    assert store_path.read_bytes() == before + payload


def test_writers_wait_for_the_lock(store, store_path, make_item):
    store.append(**make_item("m-0"))
    lock_path = store_path.with_name("records.jsonl.lock")
    other = RemoteMemoryStore(store_path, user_id="alice")
    errors: list[BaseException] = []

    def append() -> None:
        try:
            other.append(**make_item("m-1"))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    with open(lock_path, "r+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        thread = threading.Thread(target=append)
        thread.start()
        time.sleep(0.3)
        assert thread.is_alive()
        stored = RemoteMemoryStore(store_path, user_id="alice").read_all()
        assert [r.memory_id for r in stored] == ["m-0"]
        fcntl.flock(handle, fcntl.LOCK_UN)
    thread.join(5)
    assert not thread.is_alive() and errors == []
    assert [r.memory_id for r in store.read_all()] == ["m-0", "m-1"]


# -- duplicates and all-or-nothing batches ------------------------------------------------


def test_duplicate_is_refused_and_nothing_written(store, store_path, make_item):
    store.append(**make_item("m-1"))
    before = store_path.read_bytes()
    with pytest.raises(RemoteMemoryDuplicateError) as info:
        store.append(**make_item("m-1", "another summary"))
    assert str(info.value) == "duplicate memory_id: m-1"
    assert isinstance(info.value, RemoteMemoryValidationError)
    # another store object on the same file knows too, without having read first
    with pytest.raises(RemoteMemoryDuplicateError, match="duplicate memory_id: m-1"):
        RemoteMemoryStore(store_path, user_id="alice").append(**make_item("m-1"))
    assert store_path.read_bytes() == before


def test_duplicate_across_kinds_and_within_a_batch(store, store_path, make_item):
    store.append(**make_item("m-1"))
    with pytest.raises(RemoteMemoryDuplicateError):
        store.append(**make_item("m-1", kind=MemoryKind.PROFILE))
    with pytest.raises(RemoteMemoryDuplicateError, match="m-2"):
        store.append_many([make_item("m-2"), make_item("m-3"), make_item("m-2")])
    stored = RemoteMemoryStore(store_path, user_id="alice").read_all()
    assert [r.memory_id for r in stored] == ["m-1"]


@pytest.mark.parametrize(
    "bad",
    [
        {"summary": ""},
        {"memory_id": "has space"},
        {"memory_id": "m-1"},  # duplicate of the stored record
        {"content": "x" * 20_001},
    ],
)
def test_append_many_is_all_or_nothing(store, store_path, make_item, bad):
    store.append(**make_item("m-1"))
    before = (store_path.read_bytes(), store_path.stat().st_mtime_ns)
    good = [make_item("m-2"), make_item("m-3")]
    broken = {**make_item("m-4"), **bad}
    with pytest.raises(RemoteMemoryValidationError):
        store.append_many([*good, broken])
    assert (store_path.read_bytes(), store_path.stat().st_mtime_ns) == before
    assert [r.memory_id for r in store.read_all()] == ["m-1"]
    # the refused batch left no trace in the writer's memory either
    assert [r.memory_id for r in store.append_many(good)] == ["m-2", "m-3"]
    stored = RemoteMemoryStore(store_path, user_id="alice").read_all()
    assert [r.memory_id for r in stored] == ["m-1", "m-2", "m-3"]


def test_append_many_shares_one_stored_at(make_store):
    store = make_store()
    written = store.append_many(sample_records())
    assert {r.stored_at for r in written} == {"2026-08-10T08:00:00Z"}
    assert SAMPLE_STORED_AT.strftime("%Y-%m-%dT%H:%M:%SZ") == "2026-08-10T08:00:00Z"
    assert [r.memory_id for r in written] == [i["memory_id"] for i in sample_records()]


def test_empty_append_many_writes_nothing(tmp_path):
    path = tmp_path / "x" / "records.jsonl"
    assert RemoteMemoryStore(path, user_id="alice").append_many([]) == ()
    assert not path.exists()


# -- torn tail ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tail",
    [
        b'{"memory_id":"torn","user_scope":"',
        b"\xe5\x88",  # half a UTF-8 character
        None,  # a whole valid record that never got its "\n"
    ],
)
def test_torn_tail_is_ignored_by_readers_and_truncated_by_the_next_writer(
    store, store_path, make_item, tail
):
    store.append_many([make_item("m-1"), make_item("m-2")])
    good = store_path.read_bytes()
    if tail is None:
        tail = _compact(StoredMemory(**{**store.read_all()[0].__dict__, "memory_id": "torn"}))[:-1]
    with open(store_path, "ab") as handle:
        handle.write(tail)
    fresh = RemoteMemoryStore(store_path, user_id="alice")
    assert [r.memory_id for r in fresh.read_all()] == ["m-1", "m-2"]
    assert [r.memory_id for r in store.read_all()] == ["m-1", "m-2"]
    assert fresh.latest_profile() is None
    writer = RemoteMemoryStore(store_path, user_id="alice", clock=fixed_clock())
    record = writer.append(**make_item("torn" if b"torn" in tail else "m-3"))
    assert store_path.read_bytes() == good + _compact(record)
    assert [r.memory_id for r in fresh.read_all()] == ["m-1", "m-2", record.memory_id]
    assert [r.memory_id for r in store.read_all()] == ["m-1", "m-2", record.memory_id]


def test_file_holding_only_a_torn_line(store_path, make_item):
    store_path.parent.mkdir(parents=True)
    store_path.write_bytes(b'{"memory_id":"never-acknowledged"')
    store = RemoteMemoryStore(store_path, user_id="alice", clock=fixed_clock())
    assert store.read_all() == ()
    record = store.append(**make_item("m-1"))
    assert store_path.read_bytes() == _compact(record)


# -- corruption -----------------------------------------------------------------------------


def _three_records(store, make_item):
    store.append_many([make_item("m-1"), make_item("m-2"), make_item("m-3")])


@pytest.mark.parametrize(
    ("line_number", "replacement"),
    [
        (2, b"this is not json\n"),
        (2, b"\n"),
        (2, b'{"memory_id": "m-x"}\n'),  # JSON, not a record
        (2, b"[1, 2, 3]\n"),
        (1, b"\xff\xfe not utf-8\n"),
        (3, b"{broken\n"),  # a complete last line is not a torn tail
    ],
)
def test_corrupt_line_raises_naming_its_line_number(
    store, store_path, make_item, line_number, replacement
):
    _three_records(store, make_item)
    lines = _lines(store_path)
    lines[line_number - 1] = replacement
    store_path.write_bytes(b"".join(lines))
    reader = RemoteMemoryStore(store_path, user_id="alice")
    for _ in range(2):  # never skipped: the second read fails the same way
        with pytest.raises(RemoteMemoryCorruptionError, match=rf"\bline {line_number}\b"):
            reader.read_all()
    with pytest.raises(RemoteMemoryCorruptionError, match=rf"\bline {line_number}\b"):
        RecallEngine(reader).recall("summary", as_of=SAMPLE_AS_OF)


def test_bad_timestamp_on_disk_is_corruption_naming_the_line(store, store_path, make_item):
    _three_records(store, make_item)
    lines = _lines(store_path)
    data = json.loads(lines[1])
    data["source"]["captured_at"] = "yesterday"
    lines[1] = (json.dumps(data) + "\n").encode()
    store_path.write_bytes(b"".join(lines))
    with pytest.raises(RemoteMemoryCorruptionError) as info:
        RemoteMemoryStore(store_path, user_id="alice").read_all()
    assert "line 2" in str(info.value) and "yesterday" in str(info.value)


def test_duplicate_line_on_disk_is_corruption(store, store_path, make_item):
    _three_records(store, make_item)
    lines = _lines(store_path)
    store_path.write_bytes(b"".join([*lines, lines[0]]))
    with pytest.raises(RemoteMemoryCorruptionError, match=r"\bline 4\b"):
        RemoteMemoryStore(store_path, user_id="alice").read_all()


def test_writer_refuses_to_append_to_a_corrupt_file(store, store_path, make_item):
    _three_records(store, make_item)
    lines = _lines(store_path)
    lines[1] = b"garbage\n"
    store_path.write_bytes(b"".join(lines))
    before = store_path.read_bytes()
    with pytest.raises(RemoteMemoryCorruptionError, match=r"\bline 2\b"):
        RemoteMemoryStore(store_path, user_id="alice").append(**make_item("m-4"))
    assert store_path.read_bytes() == before


def test_corruption_after_an_incremental_read_names_the_absolute_line(store, store_path, make_item):
    _three_records(store, make_item)
    reader = RemoteMemoryStore(store_path, user_id="alice")
    assert len(reader.read_all()) == 3
    good = _compact(StoredMemory(**{**reader.read_all()[0].__dict__, "memory_id": "m-5"}))
    with open(store_path, "ab") as handle:
        handle.write(b"not json\n" + good)
    with pytest.raises(RemoteMemoryCorruptionError, match=r"\bline 4\b"):
        reader.read_all()


# -- scope ---------------------------------------------------------------------------------


def test_store_for_another_user_refuses_the_file(store, store_path, make_item):
    store.append(**make_item("m-1"))
    before = store_path.read_bytes()
    bob = RemoteMemoryStore(store_path, user_id="bob")
    assert bob.user_scope != store.user_scope
    with pytest.raises(RemoteMemoryScopeError) as info:
        bob.read_all()
    assert str(info.value) == "memory m-1 belongs to another user scope"
    with pytest.raises(RemoteMemoryScopeError):
        bob.latest_profile()
    with pytest.raises(RemoteMemoryScopeError):
        RecallEngine(bob).recall("summary", as_of=SAMPLE_AS_OF)
    with pytest.raises(RemoteMemoryScopeError):
        bob.append(**make_item("m-2"))
    assert store_path.read_bytes() == before


def test_a_foreign_line_inside_a_file_is_refused(store, store_path, make_item, tmp_path):
    store.append(**make_item("m-1"))
    bob = RemoteMemoryStore(tmp_path / "bob.jsonl", user_id="bob", clock=fixed_clock())
    foreign = bob.append(**make_item("b-1"))
    with open(store_path, "ab") as handle:
        handle.write(_compact(foreign))
    with pytest.raises(RemoteMemoryScopeError, match="b-1"):
        RemoteMemoryStore(store_path, user_id="alice").read_all()
    with pytest.raises(RemoteMemoryScopeError, match="b-1"):
        store.read_all()


# -- incremental reading -----------------------------------------------------------------


def test_reader_sees_appends_by_another_store_object(store, store_path, make_item):
    reader = RemoteMemoryStore(store_path, user_id="alice")
    assert reader.read_all() == ()
    store.append(**make_item("m-1"))
    assert [r.memory_id for r in reader.read_all()] == ["m-1"]
    store.append_many([make_item("m-2"), make_item("m-3", kind=MemoryKind.PROFILE)])
    assert [r.memory_id for r in reader.read_all()] == ["m-1", "m-2", "m-3"]
    profile = reader.latest_profile()
    assert profile is not None
    assert profile.memory_id == "m-3"
    # and the reader, turned writer, knows every id without rereading by hand
    with pytest.raises(RemoteMemoryDuplicateError):
        reader.append(**make_item("m-2"))
    reader.append(**make_item("m-4"))
    assert [r.memory_id for r in store.read_all()] == ["m-1", "m-2", "m-3", "m-4"]


def test_reader_parses_only_the_appended_lines(store, store_path, make_item, monkeypatch):
    store.append_many([make_item(f"m-{i}") for i in range(20)])
    reader = RemoteMemoryStore(store_path, user_id="alice")
    assert len(reader.read_all()) == 20
    parsed: list[str] = []
    original = vars(StoredMemory)["from_dict"].__func__  # the classmethod's plain function

    def counting(cls, data):
        parsed.append(data.get("memory_id"))
        return original(cls, data)

    monkeypatch.setattr(StoredMemory, "from_dict", classmethod(counting))
    assert len(reader.read_all()) == 20
    assert parsed == []
    store.append(**make_item("m-new"))
    assert [r.memory_id for r in reader.read_all()][-1] == "m-new"
    assert parsed == ["m-new"]


def _append_in_child(path: str, memory_id: str) -> None:
    store = RemoteMemoryStore(path, user_id="alice")
    store.append(
        kind="conversation",
        memory_id=memory_id,
        content="from a child process",
        summary="child",
        source={
            "source_id": "child",
            "source_type": "test",
            "title": "child",
            "captured_at": "2026-08-09T12:00:00Z",
        },
    )


def test_reader_sees_appends_by_another_process(store, store_path, make_item):
    store.append(**make_item("m-1"))
    assert len(store.read_all()) == 1
    context = multiprocessing.get_context("fork")
    child = context.Process(target=_append_in_child, args=(str(store_path), "child-1"))
    child.start()
    child.join(20)
    assert child.exitcode == 0
    assert [r.memory_id for r in store.read_all()] == ["m-1", "child-1"]
    with pytest.raises(RemoteMemoryDuplicateError):
        store.append(**make_item("child-1"))
    store.append(**make_item("m-2"))
    stored = RemoteMemoryStore(store_path, user_id="alice").read_all()
    assert [r.memory_id for r in stored] == ["m-1", "child-1", "m-2"]


def test_reader_rereads_a_replaced_or_shrunk_file(
    store, store_path, make_item, make_store, tmp_path
):
    store.append_many([make_item("m-1"), make_item("m-2"), make_item("m-3")])
    reader = RemoteMemoryStore(store_path, user_id="alice")
    assert len(reader.read_all()) == 3
    # replaced by another file (another inode), e.g. restored from a backup
    other_path = tmp_path / "other" / "records.jsonl"
    other = make_store(other_path)
    other.append_many([make_item("x-1"), make_item("x-2")])
    os.replace(other_path, store_path)
    assert [r.memory_id for r in reader.read_all()] == ["x-1", "x-2"]
    # shrunk in place (same inode)
    first = _lines(store_path)[0]
    with open(store_path, "r+b") as handle:
        handle.truncate(len(first))
    assert [r.memory_id for r in reader.read_all()] == ["x-1"]


def test_retraction_by_another_store_object_is_seen_incrementally(tmp_path):
    reader = open_sample_store(tmp_path / "root")
    engine = RecallEngine(reader)
    profile = reader.latest_profile()
    assert profile is not None
    assert profile.memory_id == "profile-002"
    before = engine.recall("layered memory", limit=10, as_of=SAMPLE_AS_OF, query_id="q")
    assert before.hits[0].memory_id == "conversation-003"
    writer = RemoteMemoryStore(reader.path, user_id="alice")
    source = {
        "source_id": "m",
        "source_type": "manual",
        "title": "t",
        "captured_at": "2026-08-10T09:00:00Z",
    }
    writer.retract("profile-002", reason="outdated", source=source)
    writer.retract("conversation-003", reason="wrong", source=source)
    profile = reader.latest_profile()
    assert profile is not None
    assert profile.memory_id == "profile-001"
    after = engine.recall("layered memory", limit=10, as_of=SAMPLE_AS_OF, query_id="q")
    assert "conversation-003" not in [h.memory_id for h in after.hits]
    assert after.retracted_records == 1
    assert after.searched_records == before.searched_records - 1
    fresh = RecallEngine(RemoteMemoryStore(reader.path, user_id="alice"))
    again = fresh.recall("layered memory", limit=10, as_of=SAMPLE_AS_OF, query_id="q")
    assert again.to_json() == after.to_json()

"""The JSONL store's vectors file (issue 15, item 3): derived, checked, never trusted blindly.

``records.jsonl.vectors`` keeps one row per embedded conversation record — its line in
the log, a digest of that line, the vector. Whatever happens to the file or the log
(a retraction, a replaced, truncated or restored log, a flipped bit, a torn row,
another scope's file, a read-only folder, two writers at once), a reader uses a row
only for the very line it was made from: no wrong vector, no retracted vector's bytes.
Every expected score is computed here from the records' contents with the same
``HashingEmbedder``, independently of the store.
"""

from __future__ import annotations

import contextlib
import errno
import multiprocessing
import os
import shutil
import stat
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.index_files import older_format

from memlib import (
    RecallEngine,
    RemoteMemoryDuplicateError,
    RemoteMemoryStore,
    RemoteMemoryUnsafePathError,
)
from memlib._vectors import DenseScores, VectorState, pack
from memlib.errors import RemoteMemoryVectorModelError
from memlib.normalize import normalize_recall_query
from memlib.rankers.embeddings import HashingEmbedder
from memlib.sample import SAMPLE_AS_OF, fixed_clock
from memlib.stores._files import failure
from memlib.stores.jsonl import _index as jsonl_index
from memlib.stores.jsonl import _vectors as jsonl_vectors
from memlib.stores.jsonl._doctor import (
    check_store,
    describe_vectors,
    repair_vectors_file,
    vector_lines,
)

USER = "alice"
EMBEDDER = HashingEmbedder(64)
OTHER = HashingEmbedder(32)
WORDS = (
    "amber",
    "river",
    "lantern",
    "quiet",
    "harbor",
    "copper",
    "garden",
    "notes",
    "meeting",
    "budget",
    "travel",
    "window",
    "orbit",
    "cedar",
    "tea",
    "kettle",
)
SOURCE = {
    "source_id": "s-1",
    "source_type": "test",
    "title": "t",
    "captured_at": "2026-08-01T12:00:00Z",
}


def _text(i: int, tag: str = "") -> str:
    words = " ".join(WORDS[(i * k + len(tag)) % len(WORDS)] for k in (1, 3, 5, 7))
    return f"record {i} {tag} {words}"


def _item(i: int, tag: str = "", kind: str = "conversation") -> dict[str, Any]:
    return {
        "kind": kind,
        "memory_id": f"m{tag}-{i:04d}",
        "content": _text(i, tag),
        "summary": f"summary {i}",
        "source": SOURCE,
    }


def _open(path: Path, embedder: Any = None, user: str = USER) -> RemoteMemoryStore:
    return RemoteMemoryStore(path, user_id=user, clock=fixed_clock(), embedder=embedder)


def _vectors_of(path: Path) -> Path:
    return path.with_name(path.name + ".vectors")


def _dense(
    store: RemoteMemoryStore, text: str = "amber river", embedder: Any = EMBEDDER
) -> DenseScores:
    query = normalize_recall_query(
        text, user_scope=store.user_scope, limit=5, query_id="q", issued_at=SAMPLE_AS_OF
    )
    return store.dense_scores(
        query, embedder.encode([text])[0], model=embedder.name, dimension=embedder.dimension
    )


def _expected(store: RemoteMemoryStore, text: str = "amber river") -> dict[str, float]:
    """Each searched conversation record's score, from the content the log holds now."""
    retracted = {r.retracts for r in store.read_all() if r.retracts}
    records = [
        r
        for r in store.read_all()
        if r.kind.value == "conversation" and r.memory_id not in retracted
    ]
    if not records:
        return {}
    scores = EMBEDDER.encode([r.content for r in records]) @ EMBEDDER.encode([text])[0]
    return {r.memory_id: float(s) for r, s in zip(records, scores, strict=True)}


def _assert_never_wrong(store: RemoteMemoryStore, text: str = "amber river") -> DenseScores:
    """Every score given is the right one for the record the log holds now."""
    expected = _expected(store, text)
    scores = _dense(store, text)
    assert len(set(scores.ids)) == len(scores.ids) == len(scores.scores)
    for memory_id, score in zip(scores.ids, scores.scores.tolist(), strict=True):
        assert memory_id in expected, memory_id
        assert score == pytest.approx(expected[memory_id], abs=1e-5), memory_id
    assert scores.missing == len(expected) - len(scores.ids)
    return scores


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture
def log(folder: Path) -> Path:
    """12 conversation records with vectors, a profile, and one retraction."""
    path = folder / "records.jsonl"
    store = _open(path, EMBEDDER)
    store.append_many([_item(i) for i in range(8)])
    store.append(**_item(8))
    store.append_many([_item(i) for i in range(9, 12)] + [_item(99, kind="profile")])
    store.retract("m-0003", reason="wrong", source=SOURCE)
    return path


# -- writing -------------------------------------------------------------------------------


def test_appended_vectors_are_stored_and_a_new_object_reads_them(log: Path) -> None:
    vectors = _vectors_of(log)
    assert stat.S_IMODE(vectors.stat().st_mode) == 0o600
    fd = os.open(vectors, os.O_RDONLY)
    try:
        header, start = jsonl_vectors.read_header(fd, _open(log).user_scope)
    finally:
        os.close(fd)
    assert (header.model, header.dimension) == (EMBEDDER.name, EMBEDDER.dimension)
    # Fixed-size rows, one per searched record: the retracted one's went with it.
    size = vectors.stat().st_size
    assert (size - start) % header.row_bytes == 0
    assert (size - start) // header.row_bytes == 11
    raw = vectors.read_bytes()
    for i in range(12):
        assert (pack(EMBEDDER.encode([_text(i)])[0]) in raw) == (i != 3)
    for store in (_open(log), _open(log, EMBEDDER)):
        assert store.vector_state() == VectorState(EMBEDDER.name, 64, 11, 0)
        scores = _assert_never_wrong(store)
        assert sorted(scores.ids) == sorted(f"m-{i:04d}" for i in range(12) if i != 3)
        assert store.records_without_vectors(5) == ()


def test_a_retraction_leaves_no_byte_of_the_vector(log: Path) -> None:
    reader = _open(log)
    assert len(_dense(reader).ids) == 11  # cached in this process
    gone = pack(EMBEDDER.encode([_text(5)])[0])
    kept = pack(EMBEDDER.encode([_text(6)])[0])
    assert gone in _vectors_of(log).read_bytes()
    _open(log).retract("m-0005", reason="wrong", source=SOURCE)
    raw = _vectors_of(log).read_bytes()
    assert gone not in raw and kept in raw
    assert [p.name for p in log.parent.iterdir() if p.name.endswith(".tmp")] == []
    assert "m-0005" not in _assert_never_wrong(reader).ids
    assert reader.vector_state() == VectorState(EMBEDDER.name, 64, 10, 0)
    # Stored again by a backfill? It is not a searched record any more.
    assert reader.put_vectors(EMBEDDER.name, 64, {"m-0005": gone}) == 0
    assert gone not in _vectors_of(log).read_bytes()


def test_another_model_is_refused_before_anything_is_written(log: Path) -> None:
    before = _files(log.parent)
    other = _open(log, OTHER)
    with pytest.raises(RemoteMemoryVectorModelError, match="memlib embed --rebuild"):
        other.append(**_item(50))
    with pytest.raises(RemoteMemoryVectorModelError, match="memlib embed --rebuild"):
        other.append_many([_item(51), _item(52)])
    with pytest.raises(RemoteMemoryVectorModelError, match="memlib embed --rebuild"):
        other.put_vectors(OTHER.name, 32, {"m-0001": pack(OTHER.encode(["x"])[0])})
    with pytest.raises(RemoteMemoryVectorModelError, match="memlib embed --rebuild"):
        _dense(_open(log), embedder=OTHER)
    assert _files(log.parent) == before
    assert len(_open(log).read_all()) == 14


def test_backfill_appends_and_a_replaced_vector_rewrites(folder: Path) -> None:
    path = folder / "records.jsonl"
    store = _open(path)
    store.append_many([_item(i) for i in range(10)])
    assert not _vectors_of(path).exists()
    while batch := store.records_without_vectors(3):
        packed = {r.memory_id: pack(EMBEDDER.encode([r.content])[0]) for r in batch}
        assert store.put_vectors(EMBEDDER.name, 64, packed) == len(batch)
    header_bytes = len(
        jsonl_vectors.encode_header(jsonl_vectors.Header(store.user_scope, EMBEDDER.name, 64))
    )
    row = jsonl_vectors.row_bytes(64)
    assert _vectors_of(path).stat().st_size == header_bytes + 10 * row  # appended, no repeats
    old = pack(EMBEDDER.encode([_text(4)])[0])
    new = pack(EMBEDDER.encode(["tea kettle"])[0])
    assert store.put_vectors(EMBEDDER.name, 64, {"m-0004": new}) == 1
    raw = _vectors_of(path).read_bytes()
    assert old not in raw and new in raw and len(raw) == header_bytes + 10 * row
    assert _dense(_open(path), "tea kettle").of(["m-0004"])["m-0004"] == pytest.approx(1.0)
    with pytest.raises(Exception, match="not 256"):
        store.put_vectors(EMBEDDER.name, 64, {"m-0001": b"\0" * 12})


# -- the log changed under the file --------------------------------------------------------


def _same_ids_other_content(log: Path, changed: set[int]) -> None:
    """Replace the log by one with the same records, but ``changed`` with other content."""
    other = log.parent.parent / "other"
    other.mkdir(mode=0o700)
    store = _open(other / "records.jsonl")
    items = [_item(i) for i in range(12)]
    for i in changed:
        items[i]["content"] = f"other words entirely {i} kettle"
    store.append_many(items[:8])
    store.append(**items[8])
    store.append_many(items[9:] + [_item(99, kind="profile")])
    store.retract("m-0003", reason="wrong", source=SOURCE)
    os.rename(other / "records.jsonl", log)


def test_a_replaced_log_never_gets_a_wrong_vector(log: Path) -> None:
    cached = _open(log)
    assert len(_dense(cached).ids) == 11
    _same_ids_other_content(log, changed={1, 5, 9})
    for store in (cached, _open(log)):
        scores = _assert_never_wrong(store)
        assert sorted(scores.ids) == sorted(
            f"m-{i:04d}" for i in range(12) if i not in (1, 3, 5, 9)
        )
        assert store.vector_state() == VectorState(EMBEDDER.name, 64, 8, 3)
        assert [r.memory_id for r in store.records_without_vectors(10)] == [
            "m-0001",
            "m-0005",
            "m-0009",
        ]
    state = check_store(log, user_id=USER).vectors_file
    assert state is not None and state.status == "stale" and state.rows - state.used == 3


def test_a_truncated_log_does_not_use_the_rows_of_cut_records(log: Path) -> None:
    raw = log.read_bytes()
    lines = raw.split(b"\n")
    keep = 6  # m-0000 … m-0005; the retraction of m-0003 is cut too, not its removed row
    with open(log, "r+b") as handle:
        handle.truncate(sum(len(line) + 1 for line in lines[:keep]))
    kept = [f"m-{i:04d}" for i in (0, 1, 2, 4, 5)]
    store = _open(log)
    assert sorted(_assert_never_wrong(store).ids) == kept
    assert store.vector_state() == VectorState(EMBEDDER.name, 64, 5, 1)
    # Other records are appended where the cut ones were: the old rows name other lines.
    _open(log).append_many([_item(i, "new") for i in range(4)])
    store = _open(log)
    assert sorted(_assert_never_wrong(store).ids) == kept
    assert store.vector_state() == VectorState(EMBEDDER.name, 64, 5, 5)
    report = check_store(log, user_id=USER)
    assert report.healthy and report.vectors_file is not None
    assert report.vectors_file.status == "stale" and report.vectors_file.used == 5
    cut = pack(EMBEDDER.encode([_text(8)])[0])
    assert cut in _vectors_of(log).read_bytes()
    assert repair_vectors_file(report) == (5, 6)
    assert cut not in _vectors_of(log).read_bytes()
    report = check_store(log, user_id=USER)
    assert report.vectors_file is not None and report.vectors_file.status == "fresh"
    assert sorted(_assert_never_wrong(_open(log)).ids) == kept


# -- the file damaged or foreign -----------------------------------------------------------


def test_any_flipped_bit_never_gives_a_wrong_score(log: Path) -> None:
    pristine = _vectors_of(log).read_bytes()
    _, rows_start = jsonl_vectors.decode_header(pristine, _open(log).user_scope)
    for at in range(len(pristine)):
        flipped = bytearray(pristine)
        flipped[at] ^= 1 << (at % 8)
        _vectors_of(log).write_bytes(bytes(flipped))
        store = _open(log)
        scores = _assert_never_wrong(store)
        # A flip in the header costs the file, one in a row that row only.
        assert len(scores.ids) == (0 if at < rows_start else 10), at
    _vectors_of(log).write_bytes(pristine)
    assert len(_assert_never_wrong(_open(log)).ids) == 11


def test_a_damaged_row_is_dropped_by_the_next_retraction(log: Path) -> None:
    data = bytearray(_vectors_of(log).read_bytes())
    damaged = pack(EMBEDDER.encode([_text(7)])[0])
    at = bytes(data).index(damaged)
    data[at + 5] ^= 0x40
    _vectors_of(log).write_bytes(bytes(data))
    store = _open(log)
    assert "m-0007" not in _assert_never_wrong(store).ids
    assert [r.memory_id for r in store.records_without_vectors(5)] == ["m-0007"]
    state = check_store(log, user_id=USER).vectors_file
    assert state is not None and (state.status, state.damaged) == ("stale", 1)
    store.retract("m-0001", reason="wrong", source=SOURCE)
    raw = _vectors_of(log).read_bytes()
    assert bytes(data[at : at + 256]) not in raw  # the damaged row went too
    state = check_store(log, user_id=USER).vectors_file
    assert state is not None and state.status == "fresh" and state.rows == 9


def test_a_torn_last_row_is_ignored_and_cut_by_the_next_writer(log: Path) -> None:
    with open(_vectors_of(log), "ab") as handle:
        handle.write(b"\x07" * 100)
    store = _open(log)
    assert len(_assert_never_wrong(store).ids) == 11
    state = check_store(log, user_id=USER).vectors_file
    assert state is not None and (state.status, state.torn_bytes) == ("stale", 100)
    assert any(
        "torn last row of 100 bytes" in line
        for line in vector_lines(check_store(log, user_id=USER))
    )
    _open(log, EMBEDDER).append(**_item(20))
    assert len(_assert_never_wrong(_open(log)).ids) == 12
    state = check_store(log, user_id=USER).vectors_file
    assert state is not None and state.status == "fresh" and state.rows == 12


@pytest.mark.parametrize("damage", ["header-bit", "cut-in-header", "not-ours", "bob's file"])
def test_an_unreadable_or_foreign_file_is_not_used(log: Path, tmp_path: Path, damage: str) -> None:
    data = _vectors_of(log).read_bytes()
    if damage == "header-bit":
        data = data[:30] + bytes([data[30] ^ 4]) + data[31:]
    elif damage == "cut-in-header":
        data = data[:20]
    elif damage == "not-ours":
        data = b"something else entirely\n" * 50
    else:
        bob = tmp_path / "bob"
        bob.mkdir(mode=0o700)
        store = _open(bob / "records.jsonl", EMBEDDER, user="bob")
        # Bob's records have alice's ids and contents: only the scope tells them apart.
        store.append_many([_item(i) for i in range(12)])
        data = _vectors_of(bob / "records.jsonl").read_bytes()
    _vectors_of(log).write_bytes(data)
    store = _open(log)
    scores = _assert_never_wrong(store)
    assert (list(scores.ids), scores.missing) == ([], 11)
    assert store.vector_state() == VectorState(None, 0, 0, 11)
    assert len(store.records_without_vectors(20)) == 11
    report = check_store(log, user_id=USER)
    assert report.healthy and report.vectors_file is not None
    assert report.vectors_file.status == "unreadable"
    if damage == "bob's file":
        assert "another user scope" in report.vectors_file.reason
    assert any(
        line.startswith("vectors file: unreadable, not used:") for line in vector_lines(report)
    )
    # An embedder's next append starts the file again; doctor --repair would remove it.
    _open(log, EMBEDDER).append(**_item(20))
    assert _open(log).vector_state() == VectorState(EMBEDDER.name, 64, 1, 11)


def test_a_link_at_the_vectors_path_is_refused(log: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.bin"
    victim.write_bytes(_vectors_of(log).read_bytes())
    _vectors_of(log).unlink()
    _vectors_of(log).symlink_to(victim)
    before = log.read_bytes()
    with pytest.raises(RemoteMemoryUnsafePathError, match="symbolic link"):
        _dense(_open(log))
    with pytest.raises(RemoteMemoryUnsafePathError, match="symbolic link"):
        _open(log, EMBEDDER).append(**_item(30))
    with pytest.raises(RemoteMemoryUnsafePathError, match="symbolic link"):
        _open(log).retract("m-0002", reason="wrong", source=SOURCE)
    assert log.read_bytes() == before  # refused before the log was written
    assert victim.read_bytes() != b"" and _vectors_of(log).is_symlink()
    # Lexical recall does not touch the file.
    assert RecallEngine(_open(log)).recall("amber", limit=3, as_of=SAMPLE_AS_OF).hits


# -- reading only --------------------------------------------------------------------------


def test_a_read_only_folder_still_recalls(log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = _files(log.parent)
    expected = sorted(_dense(_open(log)).top(5))
    if os.geteuid() == 0:  # root writes anyway: make every creation fail as EROFS would
        for module in (jsonl_index, jsonl_vectors):
            real = module.open_private

            def read_only(name: str, flags: int, real: Callable[..., int] = real, **kw: Any) -> int:
                if flags & (os.O_CREAT | os.O_WRONLY | os.O_RDWR):
                    raise failure(
                        f"cannot open {name}", OSError(errno.EROFS, "Read-only file system")
                    )
                return real(name, flags, **kw)

            monkeypatch.setattr(module, "open_private", read_only)
    log.parent.chmod(0o500)
    try:
        store = _open(log, EMBEDDER)
        assert sorted(_dense(store).top(5)) == expected
        assert store.vector_state() == VectorState(EMBEDDER.name, 64, 11, 0)
        assert RecallEngine(store).recall("amber river", limit=3, as_of=SAMPLE_AS_OF).hits
        check_store(log, user_id=USER)
    finally:
        log.parent.chmod(0o700)
    assert _files(log.parent) == before


def test_warm_scores_read_nothing_again_and_an_append_reads_only_its_rows(
    log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole: list[int] = []
    tails: list[int] = []
    real_whole = jsonl_vectors.VectorTable._read_whole
    real_tail = jsonl_vectors.VectorTable._read_tail

    def count_whole(self: Any, *args: Any) -> Any:
        whole.append(1)
        return real_whole(self, *args)

    def count_tail(self: Any, *args: Any) -> Any:
        tails.append(1)
        return real_tail(self, *args)

    monkeypatch.setattr(jsonl_vectors.VectorTable, "_read_whole", count_whole)
    monkeypatch.setattr(jsonl_vectors.VectorTable, "_read_tail", count_tail)
    reader = _open(log)
    first = _dense(reader)
    for _ in range(3):
        again = _dense(reader)
        assert list(again.ids) == list(first.ids)
        assert np.array_equal(again.scores, first.scores)
    assert (len(whole), len(tails)) == (1, 0)
    _open(log, EMBEDDER).append_many([_item(40), _item(41)])
    assert len(_assert_never_wrong(reader).ids) == 13
    assert (len(whole), len(tails)) == (1, 1)


# -- several processes ---------------------------------------------------------------------


def _writer(path: str, who: int, barrier: Any, errors: Any) -> None:
    try:
        store = RemoteMemoryStore(path, user_id=USER, embedder=EMBEDDER)
        barrier.wait(timeout=60)
        for k in range(15):
            own: dict[str, Any] = {
                "kind": "conversation",
                "memory_id": f"w{who}-{k}",
                "source": SOURCE,
                "content": f"writer {who} round {k} {WORDS[(who + k) % 16]}",
                "summary": "own",
            }
            shared = {**own, "memory_id": f"shared-{k}", "summary": "shared"}
            store.append(**own)
            # Every writer tries; one wins, the others are refused whole.
            with contextlib.suppress(RemoteMemoryDuplicateError):
                store.append_many([{**own, "memory_id": f"w{who}-{k}-b"}, shared])
        if who == 0:
            store.retract("w0-3", reason="wrong", source=SOURCE)
    except BaseException:  # noqa: BLE001 (reported to the parent)
        errors.put(traceback.format_exc())


def test_two_processes_appending_keep_every_vector(folder: Path) -> None:
    path = folder / "records.jsonl"
    ctx = multiprocessing.get_context("fork")
    barrier, errors = ctx.Barrier(3), ctx.Queue()
    procs = [
        ctx.Process(target=_writer, args=(str(path), who, barrier, errors)) for who in range(3)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=300)
    assert errors.empty(), errors.get()
    assert all(proc.exitcode == 0 for proc in procs)
    store = _open(path)
    records = [r for r in store.read_all() if r.kind.value == "conversation"]
    assert len(records) == 3 * 15 + 15 * 2  # each own record, each batch that won
    assert store.vector_state() == VectorState(EMBEDDER.name, 64, len(records) - 1, 0)
    scores = _assert_never_wrong(store)
    assert len(scores.ids) == len(records) - 1
    # No row of a refused batch, none repeated: exactly one row per searched record.
    state = check_store(path, user_id=USER).vectors_file
    assert state is not None and state.status == "fresh" and state.rows == len(records) - 1


# -- the index file's digests --------------------------------------------------------------


def _bigger_log(folder: Path) -> Path:
    path = folder / "records.jsonl"
    store = _open(path, EMBEDDER)
    for start in range(0, 1_200, 400):
        store.append_many([_item(i) for i in range(start, start + 400)])
    store.retract("m-0007", reason="wrong", source=SOURCE)
    return path


def test_index_file_format_3_keeps_the_line_digests(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _bigger_log(folder)
    assert _open(path).write_index_file()
    built = _open(path)
    monkeypatch.setattr(RemoteMemoryStore, "INDEX_WRITE_MIN", 10**12)
    built._refresh()
    parsed: list[int] = []
    real = RemoteMemoryStore._parse_line

    def counted(store: RemoteMemoryStore, raw: bytes, line: int) -> Any:
        parsed.append(line)
        return real(store, raw, line)

    monkeypatch.setattr(RemoteMemoryStore, "_parse_line", counted)
    loaded = _open(path)
    assert loaded.vector_state() == VectorState(EMBEDDER.name, 64, 1_199, 0)
    assert len(parsed) < 5  # from the index file: the retraction only
    lines = path.read_bytes().split(b"\n")[:-1]
    digests = [jsonl_vectors.line_digest(line) for line in lines]
    assert list(loaded._cache.digests) == digests
    monkeypatch.setattr(RemoteMemoryStore, "_parse_line", real)
    _open(path).index_path.unlink()
    assert list(_open(path)._refresh().digests) == digests  # read from the log: the same
    top = _dense(loaded).top(10)
    assert top == _dense(_open(path)).top(10)


def test_a_format_2_index_file_is_rebuilt_and_vectors_still_match(folder: Path) -> None:
    path = _bigger_log(folder)
    assert _open(path).write_index_file()
    index = _open(path).index_path
    index.write_bytes(older_format(index.read_bytes(), 2))
    state = check_store(path, user_id=USER).index
    assert state is not None and state.status == "invalid" and "format 2" in state.reason
    store = _open(path)
    assert store.vector_state() == VectorState(EMBEDDER.name, 64, 1_199, 0)
    assert store.write_index_file()
    state = check_store(path, user_id=USER).index
    assert state is not None and state.status == "fresh"
    assert _open(path).vector_state() == VectorState(EMBEDDER.name, 64, 1_199, 0)


# -- doctor --------------------------------------------------------------------------------


def test_doctor_reports_the_vectors_and_changes_nothing(log: Path, folder: Path) -> None:
    before = _files(folder)
    report = check_store(log, user_id=USER)
    assert _files(folder) == before
    assert report.vectors == VectorState(EMBEDDER.name, 64, 11, 0)
    assert vector_lines(report) == [
        f"vectors file: fresh (11 rows, {EMBEDDER.name}, 64 dimensions)",
        f"vectors: 11 stored, 0 missing ({EMBEDDER.name}, 64 dimensions)",
    ]
    assert repair_vectors_file(report) is None
    _open(log).append(**_item(60))  # no embedder: one missing
    report = check_store(log, user_id=USER)
    assert describe_vectors(report.vectors) == (  # type: ignore[arg-type]
        f"vectors: 11 stored, 1 missing ({EMBEDDER.name}, 64 dimensions)"
    )
    _vectors_of(log).unlink()
    report = check_store(log, user_id=USER)
    assert vector_lines(report) == [
        "vectors file: absent",
        "vectors: none stored, 12 records without one",
    ]
    assert _open(log).vector_state() == VectorState(None, 0, 0, 12)


def test_doctor_repair_removes_an_unreadable_file(log: Path) -> None:
    _vectors_of(log).write_bytes(b"MEMLIBVE" + b"\xff" * 40)
    report = check_store(log, user_id=USER)
    assert report.vectors_file is not None and report.vectors_file.status == "unreadable"
    assert repair_vectors_file(report) == (0, 0)
    assert not _vectors_of(log).exists()
    assert check_store(log, user_id=USER).vectors_file == jsonl_vectors.VectorFileState("absent")


def test_a_copied_folder_keeps_its_vectors(log: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(log.parent, copy)
    store = _open(copy / "records.jsonl")
    assert store.vector_state() == VectorState(EMBEDDER.name, 64, 11, 0)
    assert len(_assert_never_wrong(store).ids) == 11


def test_the_doctor_command_reports_and_repairs_the_vectors_file(
    log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from memlib.cli import main

    assert main(["--user", USER, "doctor", str(log)]) == 0
    out = capsys.readouterr().out
    assert f"vectors file: fresh (11 rows, {EMBEDDER.name}, 64 dimensions)\n" in out
    assert "status: healthy" in out
    # Cut the log after m-0005: the rows of the records cut are no longer used.
    lines = log.read_bytes().split(b"\n")
    with open(log, "r+b") as handle:
        handle.truncate(sum(len(line) + 1 for line in lines[:6]))
    assert main(["--user", USER, "doctor", str(log)]) == 0
    assert "vectors file: 6 of 11 rows not used" in capsys.readouterr().out
    assert main(["--user", USER, "doctor", str(log), "--repair"]) == 0
    out = capsys.readouterr().out
    assert "repaired: rewrote the vectors file, kept 5 rows, dropped 6\n" in out
    assert "vectors file: fresh (5 rows" in out and "nothing to do" not in out
    assert main(["--user", USER, "doctor", str(log), "--repair"]) == 0
    assert "repair: no torn tail, nothing to do" in capsys.readouterr().out

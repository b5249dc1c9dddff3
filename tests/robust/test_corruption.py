"""Damaged stores (issue 7): a typed error naming the line or path, and nothing rewritten.

Every case builds a damaged store on disk, snapshots the bytes of its whole folder, and
then reads it every way a caller can (``read_all``, ``records``, ``latest_profile``, a
recall, an append): each raises the contract's error, again on the second try (nothing
was skipped and remembered as read), and the folder's bytes are the same afterwards.

Also here: file modes (stores and lock files 0600, folders 0700) and ``memlib doctor``,
which reports the same damage without changing a byte and, with ``--repair``, cuts only
a torn tail after writing a backup.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memlib import (
    MemoryKind,
    RecallEngine,
    RemoteMemoryCorruptionError,
    RemoteMemoryError,
    RemoteMemoryScopeError,
    RemoteMemoryStore,
    open_store,
    user_scope_for,
)
from memlib.cli import main as cli_main
from memlib.stores.jsonl._doctor import check_store, repair_torn_tail

USER = "alice"
SCOPE = user_scope_for(USER)
ROOT = Path(__file__).resolve().parents[2]


def _source(n: int = 1, captured_at: str = "2026-08-01T12:00:00Z") -> dict[str, str]:
    return {
        "source_id": f"t-{n}",
        "source_type": "conversation_transcript",
        "title": "layered memory",
        "captured_at": captured_at,
    }


def _record(
    memory_id: str, *, kind: str = "conversation", scope: str = SCOPE, **changes: Any
) -> dict[str, Any]:
    record = {
        "memory_id": memory_id,
        "user_scope": scope,
        "kind": kind,
        "content": f"layered memory content of {memory_id}",
        "summary": f"summary {memory_id}",
        "source": _source(),
        "stored_at": "2026-08-10T08:00:00Z",
    }
    record.update(changes)
    return record


def _line(record: dict[str, Any]) -> bytes:
    return (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def _write_store(folder: Path, lines: list[bytes]) -> Path:
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = folder / "records.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, b"".join(lines))
    os.close(fd)
    return path


def snapshot(folder: Path) -> dict[str, Any]:
    """Every entry under ``folder``: file bytes, folder marker, link target, mode."""
    out: dict[str, Any] = {}
    for path in sorted(folder.rglob("*")):
        key = str(path.relative_to(folder))
        st = path.lstat()
        if path.is_symlink():
            out[key] = ("link", os.readlink(path))
        elif path.is_dir():
            out[key] = ("dir", stat.S_IMODE(st.st_mode))
        else:
            out[key] = ("file", path.read_bytes(), stat.S_IMODE(st.st_mode))
    return out


GOOD = [_line(_record("m-1")), _line(_record("m-2")), _line(_record("m-3"))]

# name → (lines, error type, message fragment)
LINE_CASES: dict[str, tuple[list[bytes], type[RemoteMemoryError], str]] = {
    "bad middle line": (
        [GOOD[0], b'{"memory_id": "m-2", this is not json}\n', GOOD[2]],
        RemoteMemoryCorruptionError,
        "invalid JSON at line 2: ",
    ),
    "truncated middle line": (
        [GOOD[0], GOOD[1][: len(GOOD[1]) // 2] + b"\n", GOOD[2]],
        RemoteMemoryCorruptionError,
        "invalid JSON at line 2: ",
    ),
    "blank line": (
        [GOOD[0], b"\n", GOOD[2]],
        RemoteMemoryCorruptionError,
        "invalid JSON at line 2: ",
    ),
    "file of one newline": ([b"\n"], RemoteMemoryCorruptionError, "invalid JSON at line 1: "),
    "invalid utf-8": (
        [GOOD[0], GOOD[1], _line(_record("m-3")).replace(b"content", b"cont\xffent", 1)],
        RemoteMemoryCorruptionError,
        "invalid JSON at line 3: ",
    ),
    "bad captured_at": (
        [GOOD[0], _line(_record("m-2", source=_source(captured_at="yesterday"))), GOOD[2]],
        RemoteMemoryCorruptionError,
        "invalid JSON at line 2: invalid timestamp: 'yesterday'",
    ),
    "naive stored_at": (
        [GOOD[0], GOOD[1], _line(_record("m-3", stored_at="2026-08-10T08:00:00"))],
        RemoteMemoryCorruptionError,
        "invalid JSON at line 3: invalid timestamp: '2026-08-10T08:00:00'",
    ),
    "unknown kind": (
        [_line(_record("m-1", kind="note")), GOOD[1]],
        RemoteMemoryCorruptionError,
        "invalid JSON at line 1: unknown memory kind: 'note'",
    ),
    "missing field": (
        [GOOD[0], _line({k: v for k, v in _record("m-2").items() if k != "summary"})],
        RemoteMemoryCorruptionError,
        "invalid JSON at line 2: record is missing summary",
    ),
    "unknown field": (
        [GOOD[0], _line(_record("m-2", extra="x"))],
        RemoteMemoryCorruptionError,
        "invalid JSON at line 2: record has unknown fields: extra",
    ),
    "not an object": (
        [GOOD[0], b'["m-2"]\n'],
        RemoteMemoryCorruptionError,
        "invalid JSON at line 2: ",
    ),
    "empty content": (
        [GOOD[0], _line(_record("m-2", content="   "))],
        RemoteMemoryCorruptionError,
        "invalid JSON at line 2: content must not be empty",
    ),
    "duplicate id": (
        [GOOD[0], GOOD[1], GOOD[0]],
        RemoteMemoryCorruptionError,
        "invalid JSON at line 3: duplicate memory_id m-1",
    ),
    "foreign scope": (
        [GOOD[0], _line(_record("m-2", scope=user_scope_for("bob"))), GOOD[2]],
        RemoteMemoryScopeError,
        "memory m-2 belongs to another user scope",
    ),
    "retraction with a foreign scope": (
        [
            GOOD[0],
            _line(_record("r-1", kind="retraction", scope=user_scope_for("bob"), retracts="m-1")),
        ],
        RemoteMemoryScopeError,
        "memory r-1 belongs to another user scope",
    ),
}


def _readers(store: RemoteMemoryStore) -> dict[str, Callable[[], Any]]:
    return {
        "read_all": store.read_all,
        "records(conversation)": lambda: store.records(MemoryKind.CONVERSATION),
        "records(profile)": lambda: store.records(MemoryKind.PROFILE),
        "latest_profile": store.latest_profile,
        "recall": lambda: RecallEngine(store).recall("layered memory"),
        "append": lambda: store.append(
            kind="conversation", memory_id="new", content="c", summary="s", source=_source()
        ),
    }


@pytest.mark.parametrize("case", list(LINE_CASES))
def test_a_damaged_line_is_a_typed_error_naming_it_and_nothing_changes(
    tmp_path: Path, case: str
) -> None:
    lines, error, fragment = LINE_CASES[case]
    folder = tmp_path / "users" / SCOPE
    _write_store(folder, lines)
    before = snapshot(tmp_path)
    store = RemoteMemoryStore(folder / "records.jsonl", user_id=USER)
    for name, read in _readers(store).items():
        for attempt in range(2):  # the second try meets the same line: nothing was skipped
            with pytest.raises(error) as caught:
                read()
            assert fragment in str(caught.value), (name, attempt, str(caught.value))
            assert "\n" not in str(caught.value)
        fresh = RemoteMemoryStore(folder / "records.jsonl", user_id=USER)
        with pytest.raises(error, match="line|scope"):
            _readers(fresh)[name]()
    after = snapshot(tmp_path)
    # The append took the lock, so the lock file may now exist (empty, 0600); the
    # records file and everything else are byte for byte what they were.
    lock = str((folder / "records.jsonl.lock").relative_to(tmp_path))
    assert after.pop(lock, ("file", b"", 0o600)) == ("file", b"", 0o600)
    assert after == before


def test_a_torn_tail_is_the_documented_exception_not_an_error(tmp_path: Path) -> None:
    """A truncated file (last line without \\n) reads as the complete lines before it.

    SPEC §2: such a line is a write whose fsync never returned; readers ignore it and
    only the next writer, under the lock, cuts it. Reading changes nothing, and the
    doctor names it.
    """
    folder = tmp_path / "users" / SCOPE
    path = _write_store(folder, [GOOD[0], GOOD[1], GOOD[2][:-30]])
    before = snapshot(tmp_path)
    store = RemoteMemoryStore(path, user_id=USER)
    assert [r.memory_id for r in store.read_all()] == ["m-1", "m-2"]
    assert RecallEngine(store).recall("layered memory").searched_records == 2
    assert snapshot(tmp_path) == before
    report = check_store(path)
    assert [p.kind for p in report.problems] == ["torn_tail"]
    assert f"{len(GOOD[2]) - 30} bytes after line 2" in report.problems[0].message
    assert snapshot(tmp_path) == before


def test_an_empty_file_is_an_empty_store_and_stays_empty(tmp_path: Path) -> None:
    folder = tmp_path / "users" / SCOPE
    path = _write_store(folder, [])
    before = snapshot(tmp_path)
    store = RemoteMemoryStore(path, user_id=USER)
    assert store.read_all() == () and store.latest_profile() is None
    result = RecallEngine(store).recall("layered memory")
    assert result.hits == () and result.searched_records == 0
    assert snapshot(tmp_path) == before and path.read_bytes() == b""
    assert check_store(path).healthy


def test_a_records_path_that_is_a_folder(tmp_path: Path) -> None:
    path = tmp_path / "users" / SCOPE / "records.jsonl"
    path.mkdir(parents=True)
    before = snapshot(tmp_path)
    store = RemoteMemoryStore(path, user_id=USER)
    for name, read in _readers(store).items():
        with pytest.raises(RemoteMemoryCorruptionError) as caught:
            read()
        assert str(path) in str(caught.value), name
        assert "not a regular file" in str(caught.value) or "is a folder" in str(caught.value)
    after = snapshot(tmp_path)
    lock = str(path.relative_to(tmp_path)) + ".lock"
    assert after.pop(lock, ("file", b"", 0o600)) == ("file", b"", 0o600)
    assert after == before


def _lock_is_a_folder(lock: Path) -> None:
    lock.mkdir()


def _lock_is_a_dangling_link(lock: Path) -> None:
    lock.symlink_to(lock.parent / "missing-folder" / "x.lock")


def _lock_is_a_link_loop(lock: Path) -> None:
    lock.symlink_to(lock)


def _lock_is_mode_000(lock: Path) -> None:
    lock.write_bytes(b"")
    lock.chmod(0)


LOCK_CASES: dict[str, Callable[[Path], None]] = {
    "folder": _lock_is_a_folder,
    "dangling link": _lock_is_a_dangling_link,
    "link loop": _lock_is_a_link_loop,
}
if os.geteuid() != 0:  # root opens a mode-000 file anyway
    LOCK_CASES["mode 000"] = _lock_is_mode_000


@pytest.mark.parametrize("case", list(LOCK_CASES))
def test_a_lock_file_that_cannot_be_opened(tmp_path: Path, case: str) -> None:
    folder = tmp_path / "users" / SCOPE
    path = _write_store(folder, GOOD)
    LOCK_CASES[case](folder / "records.jsonl.lock")
    before = snapshot(tmp_path)
    store = RemoteMemoryStore(path, user_id=USER)
    assert len(store.read_all()) == 3  # readers take no lock
    with pytest.raises(RemoteMemoryError) as caught:
        store.append(
            kind="conversation", memory_id="m-4", content="c", summary="s", source=_source()
        )
    message = str(caught.value)
    assert str(folder / "records.jsonl.lock") in message and "\n" not in message
    assert snapshot(tmp_path) == before
    assert [r.memory_id for r in RemoteMemoryStore(path, user_id=USER).read_all()] == [
        "m-1",
        "m-2",
        "m-3",
    ]


def test_a_parent_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "users").write_bytes(b"not a folder")
    path = tmp_path / "users" / SCOPE / "records.jsonl"
    before = snapshot(tmp_path)
    store = RemoteMemoryStore(path, user_id=USER)
    with pytest.raises(RemoteMemoryError) as caught:
        store.read_all()
    assert str(path) in str(caught.value)
    with pytest.raises(RemoteMemoryError) as caught:
        store.append(
            kind="conversation", memory_id="m-4", content="c", summary="s", source=_source()
        )
    assert str(tmp_path / "users") in str(caught.value)
    assert snapshot(tmp_path) == before


# -- SQLite ------------------------------------------------------------------------------


def test_sqlite_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "memlib.sqlite"
    path.write_bytes(b"this is not an SQLite database, just text " * 200)
    before = snapshot(tmp_path)
    store = open_store(f"sqlite:{path}", user_id=USER)
    with pytest.raises(RemoteMemoryCorruptionError, match="cannot open SQLite store") as caught:
        store.read_all()
    assert str(path) in str(caught.value)
    assert snapshot(tmp_path) == before


def test_sqlite_a_damaged_record_row_names_the_store(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "memlib.sqlite"
    store = open_store(f"sqlite:{path}", user_id=USER)
    for n in (1, 2):
        store.append(
            kind="conversation",
            memory_id=f"m-{n}",
            content="layered memory",
            summary="s",
            source=_source(),
        )
    store.close()
    conn = sqlite3.connect(path)
    (text,) = conn.execute("SELECT body FROM records WHERE memory_id = 'm-2'").fetchone()
    body = json.loads(text)
    body["source"]["captured_at"] = "yesterday"
    conn.execute("UPDATE records SET body = ? WHERE memory_id = 'm-2'", (json.dumps(body),))
    conn.commit()
    conn.close()
    store = open_store(f"sqlite:{path}", user_id=USER)
    for read in (store.read_all, lambda: RecallEngine(store).recall("layered memory")):
        with pytest.raises(
            RemoteMemoryCorruptionError, match="invalid timestamp: 'yesterday'"
        ) as caught:
            read()
        assert str(path) in str(caught.value)
    store.close()


# -- file modes ----------------------------------------------------------------------------


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("umask", [0o022, 0o000])
def test_jsonl_store_and_lock_files_are_0600_and_its_folder_0700(
    tmp_path: Path, umask: int
) -> None:
    old = os.umask(umask)
    try:
        path = tmp_path / "root" / "users" / SCOPE / "records.jsonl"
        store = RemoteMemoryStore(path, user_id=USER)
        store.append(
            kind="conversation", memory_id="m-1", content="c", summary="s", source=_source()
        )
    finally:
        os.umask(old)
    assert _mode(path) == 0o600
    assert _mode(path.with_name("records.jsonl.lock")) == 0o600
    assert _mode(path.parent) == 0o700
    assert check_store(path).healthy


@pytest.mark.parametrize("backend", ["jsonl", "sqlite"])
def test_every_folder_a_store_creates_is_0700(tmp_path: Path, backend: str) -> None:
    root = tmp_path / "root"
    path = root / "users" / SCOPE / ("records.jsonl" if backend == "jsonl" else "memlib.sqlite")
    store = open_store(f"{backend}:{path}", user_id=USER)
    store.append(kind="conversation", memory_id="m-1", content="c", summary="s", source=_source())
    store.close()
    created = [root, root / "users", root / "users" / SCOPE]
    assert {str(p): oct(_mode(p)) for p in created} == {str(p): "0o700" for p in created}


def test_sqlite_database_and_its_wal_and_shm_files_are_0600(tmp_path: Path) -> None:
    path = tmp_path / "db" / "memlib.sqlite"
    store = open_store(f"sqlite:{path}", user_id=USER)
    store.append(kind="conversation", memory_id="m-1", content="c", summary="s", source=_source())
    files = sorted(p.name for p in path.parent.iterdir())
    assert files == ["memlib.sqlite", "memlib.sqlite-shm", "memlib.sqlite-wal"]
    assert {name: _mode(path.parent / name) for name in files} == dict.fromkeys(files, 0o600)
    assert _mode(path.parent) == 0o700
    store.close()


# -- memlib doctor -------------------------------------------------------------------------


def doctor(
    *args: str, user: str | None = None, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    argv = (["--user", user] if user else []) + ["doctor", *args]
    code = cli_main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def _healthy_store(tmp_path: Path) -> Path:
    path = tmp_path / "users" / SCOPE / "records.jsonl"
    store = RemoteMemoryStore(path, user_id=USER)
    store.append_many(
        [
            {
                "kind": "conversation",
                "memory_id": "m-1",
                "content": "layered memory",
                "summary": "s",
                "source": _source(),
            },
            {
                "kind": "profile",
                "memory_id": "p-1",
                "content": "Prefers short answers.",
                "summary": "profile",
                "source": _source(),
            },
        ]
    )
    store.retract("m-1", reason="wrong", source=_source(2))
    return path


def test_doctor_reports_a_healthy_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _healthy_store(tmp_path)
    before = snapshot(tmp_path)
    code, out, err = doctor(str(path), capsys=capsys)
    assert code == 0 and err == ""
    assert "3 valid records (1 conversation, 1 profile, 1 retraction)" in out
    assert "status: healthy" in out and f"user scopes: {SCOPE} (3)" in out
    assert doctor(f"jsonl:{path}", user=USER, capsys=capsys)[0] == 0
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("case", list(LINE_CASES))
def test_doctor_names_every_damaged_line_and_changes_nothing(
    tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = LINE_CASES[case][0]
    path = _write_store(tmp_path / "users" / SCOPE, lines)
    before = snapshot(tmp_path)
    code, out, err = doctor(str(path), capsys=capsys)
    assert code == 1 and err == ""
    problems = [line for line in out.splitlines() if line.startswith("problem: ")]
    assert problems and "status: " in out and "healthy" not in out
    line_no = {"foreign scope": 2, "retraction with a foreign scope": 2}.get(case)
    if line_no is None:
        line_no = int(LINE_CASES[case][2].split("line ")[1].split(":")[0])
    assert any(f"line {line_no}" in p for p in problems), problems
    # --repair on a file without a torn tail changes nothing either.
    code, out, err = doctor(str(path), "--repair", capsys=capsys)
    assert code == 1 and "no torn tail, nothing to do" in out
    assert snapshot(tmp_path) == before


def test_doctor_finds_every_problem_not_only_the_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        GOOD[0],
        b"{oops\n",
        _line(_record("m-9", scope=user_scope_for("bob"))),
        GOOD[0],
        _line(_record("r-1", kind="retraction", retracts="ghost")),
        _line(_record("r-2", kind="retraction", retracts="r-1")),
        _line(_record("m-5", kind="memo")),
        GOOD[1][:-9],
    ]
    path = _write_store(tmp_path / "users" / SCOPE, lines)
    path.chmod(0o644)
    before = snapshot(tmp_path)
    report = check_store(path)
    found = [(p.kind, p.line) for p in report.problems]
    assert found == [
        ("permissions", None),
        ("parse", 2),
        ("scope", 3),
        ("duplicate", 4),
        ("parse", 7),
        ("retraction", 5),
        ("retraction", 6),
        ("torn_tail", None),
    ]
    assert "mode 0644; expected 0600" in report.problems[0].message
    assert "duplicate memory_id m-1 (first at line 1)" in report.problems[3].message
    code, out, _ = doctor(str(path), capsys=capsys)
    assert code == 1 and "status: 8 problems" in out
    assert snapshot(tmp_path) == before


def test_doctor_checks_the_scope_of_the_user(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write_store(tmp_path / "some-folder", GOOD)
    code, out, _ = doctor(str(path), user="bob", capsys=capsys)
    assert code == 1 and out.count(f"not {user_scope_for('bob')} (user 'bob')") == 3
    assert doctor(str(path), user="ALICE ", capsys=capsys)[0] == 0  # stripped, casefolded


def test_doctor_reports_paths_it_cannot_check_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "users" / SCOPE
    (folder / "records.jsonl").mkdir(parents=True)
    code, out, _ = doctor(str(folder / "records.jsonl"), capsys=capsys)
    assert code == 1 and "problem: path is a folder, not a records file" in out
    code, out, _ = doctor(str(tmp_path / "missing.jsonl"), capsys=capsys)
    assert code == 1 and f"problem: no such file: {tmp_path / 'missing.jsonl'}" in out
    code, out, err = doctor("sqlite:/x/y.sqlite", capsys=capsys)
    assert code == 1 and out == "" and err.count("\n") == 1 and "JSONL store files only" in err
    assert not (tmp_path / "missing.jsonl").exists()


def test_doctor_reports_loose_modes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _healthy_store(tmp_path)
    path.chmod(0o644)
    path.parent.chmod(0o755)
    path.with_name("records.jsonl.lock").chmod(0o666)
    code, out, _ = doctor(str(path), capsys=capsys)
    assert code == 1
    assert "records file" in out and "mode 0644; expected 0600" in out
    assert "folder" in out and "mode 0755; expected 0700" in out
    assert "lock file" in out and "mode 0666; expected 0600" in out
    assert _mode(path) == 0o644  # reported, not changed


def test_doctor_repair_cuts_only_the_torn_tail_after_a_backup(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "users" / SCOPE
    good = [GOOD[0], b"{damaged middle line}\n", GOOD[2]]
    path = _write_store(folder, [*good, GOOD[1][:-7]])
    original = path.read_bytes()
    code, out, _ = doctor(str(path), capsys=capsys)
    assert code == 1 and "torn tail" in out and path.read_bytes() == original
    code, out, err = doctor(str(path), "--repair", capsys=capsys)
    assert err == "" and "repaired: cut a torn tail of" in out
    assert path.read_bytes() == b"".join(good)  # the damaged middle line is untouched
    backups = sorted(folder.glob("records.jsonl.torn-*.bak"))
    assert len(backups) == 1 and backups[0].read_bytes() == original
    assert _mode(backups[0]) == 0o600
    # Still unhealthy: the middle line is reported, the torn tail is gone.
    assert code == 1 and "problem: line 2: invalid JSON" in out and "problem: torn tail" not in out
    # A second repair has nothing to do and writes no second backup.
    code, out, _ = doctor(str(path), "--repair", capsys=capsys)
    assert "no torn tail" in out and len(list(folder.glob("*.bak"))) == 1


def test_doctor_repair_makes_a_torn_store_healthy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _healthy_store(tmp_path)
    whole = path.read_bytes()
    with open(path, "ab") as handle:
        handle.write(b'{"memory_id":"half')
    assert doctor(str(path), capsys=capsys)[0] == 1
    code, out, _ = doctor(str(path), "--repair", capsys=capsys)
    assert code == 0 and "status: healthy" in out and path.read_bytes() == whole
    assert repair_torn_tail(path) is None  # nothing left to cut


def test_doctor_repair_waits_for_the_writer_lock(tmp_path: Path) -> None:
    """--repair takes the store's own lock: while a writer holds it, nothing is cut."""
    import fcntl

    from memlib.stores.jsonl import _doctor as doctor_module

    path = _healthy_store(tmp_path)
    with open(path, "ab") as handle:
        handle.write(b'{"half')
    before = snapshot(tmp_path)
    fd = os.open(path.with_name("records.jsonl.lock"), os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    old = doctor_module.LOCK_WAIT_SECONDS
    doctor_module.LOCK_WAIT_SECONDS = 0.2
    try:
        with pytest.raises(doctor_module.RepairError, match="the store is busy"):
            repair_torn_tail(path)
    finally:
        doctor_module.LOCK_WAIT_SECONDS = old
        os.close(fd)
    assert snapshot(tmp_path) == before


def test_doctor_from_the_command_line(tmp_path: Path) -> None:
    path = _write_store(tmp_path / "users" / SCOPE, [GOOD[0], b"nope\n"])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WORKBUDDY_", "MEMLIB_"))}
    done = subprocess.run(
        [sys.executable, "-m", "memlib", "doctor", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=60,
    )
    assert done.returncode == 1 and done.stderr == ""
    assert "problem: line 2: invalid JSON" in done.stdout and "Traceback" not in done.stdout

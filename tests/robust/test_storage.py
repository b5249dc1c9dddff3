"""When the storage under a store fails (issue 13): typed errors, nothing acknowledged lost.

A full disk, a read-only file system or server, a lock held by someone else, a killed
connection: each comes back as a ``RemoteMemoryError`` subclass whose one line names the
cause — never a ``sqlite3`` or ``psycopg`` traceback — and afterwards the store still
holds every record it acknowledged, recall works, and a write succeeds once the cause
is gone. SQLite is filled two ways: ``PRAGMA max_page_count`` (no privileges needed) and
a real ``ENOSPC`` on a small tmpfs (mounting needs root, which CI has; without it those
tests skip and say why). PostgreSQL fills a tablespace on a small tmpfs.

The SQLite store also refuses, as the JSONL store does, a database (or ``-wal``,
``-shm``, ``-journal``) that is a link, a FIFO, another account's file or writable by
others, and a folder that is a link or writable by others: nothing is created or changed.
"""

from __future__ import annotations

import errno
import json
import os
import pwd
import sqlite3
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.pgserver import pg_dsn, pg_url  # noqa: F401  (fixtures)

from memlib import (
    RecallEngine,
    RemoteMemoryCorruptionError,
    RemoteMemoryError,
    RemoteMemoryStorageError,
    RemoteMemoryUnsafePathError,
    open_store,
)
from memlib.stores.sql._postgres import PostgresMemoryStore
from memlib.stores.sql._sqlite import SqliteMemoryStore

USER = "alice"
NOBODY = 65534  # "owned by another user" when the tests run as root


def _item(memory_id: str, size: int = 2_000) -> dict[str, Any]:
    return {
        "kind": "conversation",
        "memory_id": memory_id,
        # Distinct words per record: every write adds pages, so the disk does fill.
        "content": f"storage record {memory_id} "
        + " ".join(f"w{memory_id.replace('-', '')}x{n}" for n in range(size // 12)),
        "summary": f"storage {memory_id}",
        "source": {
            "source_id": "s",
            "source_type": "storage_test",
            "title": "storage",
            "captured_at": "2026-08-09T12:00:00Z",
        },
    }


def _one_line(exc: BaseException, *words: str) -> str:
    message = str(exc)
    assert "\n" not in message, message
    for word in words:
        assert word in message, message
    return message


def _fill(store: Any, prefix: str, limit: int = 5_000) -> tuple[list[str], RemoteMemoryError]:
    """Append until the store refuses; (acknowledged ids, the error)."""
    acked: list[str] = []
    for n in range(limit):
        memory_id = f"{prefix}-{n}"
        try:
            if n % 3 == 2:  # batches too: a refused batch must leave none of its records
                batch = [_item(f"{memory_id}-{j}") for j in range(3)]
                store.append_many(batch)
                acked.extend(item["memory_id"] for item in batch)
            else:
                store.append(**_item(memory_id))
                acked.append(memory_id)
        except RemoteMemoryError as exc:
            return acked, exc
    raise AssertionError(f"{limit} appends and the storage never filled up")


def _check_intact(url: str, acked: list[str]) -> None:
    """A fresh store holds exactly what was acknowledged, and recall works on it."""
    store = open_store(url, user_id=USER)
    try:
        assert [r.memory_id for r in store.read_all()] == acked
        result = RecallEngine(store).recall("storage record", limit=3)
        assert result.searched_records == len(acked) and len(result.hits) == min(3, len(acked))
    finally:
        store.close()


def _integrity(path: Path) -> None:
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        conn.close()


# -- a small tmpfs -----------------------------------------------------------------------


def _mount(where: Path, size: str, *options: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root; the max_page_count tests cover disk full")
    result = subprocess.run(
        [
            "mount",
            "-t",
            "tmpfs",
            "-o",
            ",".join((f"size={size}", "mode=0700", *options)),
            "tmpfs",
            str(where),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")


def _umount(where: Path) -> None:
    if subprocess.run(["umount", str(where)], check=False).returncode != 0:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs, private to this user."""
    where = tmp_path / "disk"
    where.mkdir(mode=0o700)
    _mount(where, "2m")
    try:
        yield where
    finally:
        _umount(where)


def _fill_disk(folder: Path, leave: int) -> Path:
    """A ballast file taking all of ``folder``'s file system but about ``leave`` bytes."""
    ballast = folder / "ballast"
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        chunk = b"\0" * 65536
        while True:
            try:
                os.write(fd, chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break
        os.ftruncate(fd, max(0, os.fstat(fd).st_size - leave))
    finally:
        os.close(fd)
    return ballast


# -- SQLite: disk full -------------------------------------------------------------------


def test_sqlite_max_page_count_is_a_typed_disk_full_and_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "db" / "memlib.sqlite"
    url = f"sqlite:{path}"
    store = open_store(url, user_id=USER)
    assert isinstance(store, SqliteMemoryStore)
    for n in range(5):
        store.append(**_item(f"before-{n}"))
    conn = store._connection(create=True)
    assert conn is not None
    (pages,) = conn.execute("PRAGMA page_count").fetchone()
    conn.execute(f"PRAGMA max_page_count = {pages + 40}")

    acked, error = _fill(store, "fill")
    assert isinstance(error, RemoteMemoryStorageError), repr(error)
    _one_line(error, "disk full", str(path))
    everything = [f"before-{n}" for n in range(5)] + acked
    _check_intact(url, everything)
    assert [r.memory_id for r in store.read_all()] == everything  # the same connection too
    _integrity(path)

    conn.execute(f"PRAGMA max_page_count = {pages * 100}")  # space freed
    store.append(**_item("after"))
    _check_intact(url, [*everything, "after"])
    store.close()


def test_sqlite_enospc_on_a_tmpfs_is_a_typed_error_and_loses_nothing(small_disk: Path) -> None:
    path = small_disk / "db" / "memlib.sqlite"
    url = f"sqlite:{path}"
    store = open_store(url, user_id=USER)
    for n in range(5):
        store.append(**_item(f"before-{n}"))
    ballast = _fill_disk(small_disk, leave=96 * 1024)

    acked, error = _fill(store, "fill")
    assert isinstance(error, RemoteMemoryStorageError), repr(error)
    _one_line(error, "disk full", str(path))
    everything = [f"before-{n}" for n in range(5)] + acked
    assert [r.memory_id for r in store.read_all()] == everything
    _check_intact(url, everything)

    ballast.unlink()  # space freed
    store.append(**_item("after"))
    store.close()
    _check_intact(url, [*everything, "after"])
    _integrity(path)


def test_sqlite_first_write_on_a_full_disk_is_a_typed_error(small_disk: Path) -> None:
    _fill_disk(small_disk, leave=0)
    path = small_disk / "memlib.sqlite"
    store = open_store(f"sqlite:{path}", user_id=USER)
    with pytest.raises(RemoteMemoryError) as caught:
        store.append(**_item("first"))
    _one_line(caught.value, str(path))
    assert "No space left on device" in str(caught.value) or "disk full" in str(caught.value)


# -- JSONL: disk full ----------------------------------------------------------------------


def test_jsonl_enospc_names_the_cause_and_loses_nothing(small_disk: Path) -> None:
    # A nearly full disk first gives a short write; the store used to report
    # "short write … 985 of 1153 bytes" instead of the reason.
    path = small_disk / "st" / "records.jsonl"
    url = f"jsonl:{path}"
    store = open_store(url, user_id=USER)
    for n in range(5):
        store.append(**_item(f"before-{n}"))
    ballast = _fill_disk(small_disk, leave=24 * 1024)

    acked, error = _fill(store, "fill")
    assert isinstance(error, RemoteMemoryStorageError), repr(error)
    _one_line(error, "no space left on device (ENOSPC)", str(path))
    everything = [f"before-{n}" for n in range(5)] + acked
    assert path.read_bytes().endswith(b"\n")  # the refused write was cut back
    _check_intact(url, everything)

    ballast.unlink()
    store.append(**_item("after"))
    _check_intact(url, [*everything, "after"])


def _memlib(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memlib", *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )


def test_cli_on_a_full_sqlite_store_prints_one_line_and_fails(small_disk: Path) -> None:
    path = small_disk / "memlib.sqlite"
    url = f"sqlite:{path}"
    store = open_store(url, user_id=USER)
    store.append(**_item("before"))
    store.close()
    ballast = _fill_disk(small_disk, leave=0)

    batch = "".join(
        json.dumps(
            {
                "memory_id": f"cli-{n}",
                "content": " ".join(f"cliword{n}x{k}" for k in range(400)),
                "summary": "s",
                "source": {
                    "source_id": "a",
                    "source_type": "b",
                    "title": "t",
                    "captured_at": "2026-01-01T00:00:00Z",
                },
            }
        )
        + "\n"
        for n in range(40)
    )
    result = _memlib("--user", USER, "--store", url, "append", stdin=batch)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memlib: error:"), result.stderr
    assert "disk full" in lines[0] and str(path) in lines[0], lines[0]

    # A new process cannot even read: SQLite must create the -shm file of a WAL
    # database first. It says so in one line, and reads again once there is room.
    recalled = _memlib("--user", USER, "--store", url, "recall", "storage record")
    assert recalled.returncode != 0 and "Traceback" not in recalled.stderr
    assert recalled.stderr.count("\n") == 1 and "disk full" in recalled.stderr
    ballast.unlink()
    recalled = _memlib("--user", USER, "--store", url, "recall", "storage record")
    assert recalled.returncode == 0, recalled.stderr
    assert "before" in recalled.stdout and "cli-" not in recalled.stdout


def test_sqlite_read_only_file_system_is_a_typed_error(tmp_path: Path) -> None:
    """The store seen through a read-only bind mount of its folder, a writer open beside."""
    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root")
    real, view = tmp_path / "real", tmp_path / "view"
    real.mkdir(mode=0o700)
    view.mkdir(mode=0o700)
    writer = open_store(f"sqlite:{real / 'memlib.sqlite'}", user_id=USER)
    writer.append(**_item("before"))
    subprocess.run(["mount", "--bind", str(real), str(view)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(view)], check=True)
        url = f"sqlite:{view / 'memlib.sqlite'}"
        store = open_store(url, user_id=USER)
        assert [r.memory_id for r in store.read_all()] == ["before"]
        with pytest.raises(RemoteMemoryStorageError) as caught:
            store.append(**_item("refused"))
        _one_line(caught.value, "read-only", str(view))
        assert [r.memory_id for r in store.read_all()] == ["before"]
        store.close()
        writer.close()  # the -shm goes with the last writer: now even a read is refused
        with pytest.raises(RemoteMemoryStorageError) as caught:
            open_store(url, user_id=USER).read_all()
        _one_line(caught.value, "read-only", str(view))
    finally:
        writer.close()
        _umount(view)
    writer = open_store(f"sqlite:{real / 'memlib.sqlite'}", user_id=USER)
    writer.append(**_item("after"))
    assert [r.memory_id for r in writer.read_all()] == ["before", "after"]
    writer.close()


def test_sqlite_locked_by_another_connection_is_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "memlib.sqlite"
    url = f"sqlite:{path}"
    open_store(url, user_id=USER).append(**_item("before"))
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        store = open_store(url, user_id=USER, busy_timeout=0)
        with pytest.raises(RemoteMemoryStorageError) as caught:
            store.append(**_item("refused"))
        _one_line(caught.value, "locked", str(path))
        assert [r.memory_id for r in store.read_all()] == ["before"]
    finally:
        other.execute("ROLLBACK")
        other.close()
    store.append(**_item("after"))
    assert [r.memory_id for r in store.read_all()] == ["before", "after"]


# -- SQLite: planted links and foreign files ---------------------------------------------


def _snapshot(root: Path) -> dict[str, tuple[int, int, bytes | str]]:
    """Every entry under ``root`` (not following links): mode, owner and content."""
    out: dict[str, tuple[int, int, bytes | str]] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            full = Path(folder, name)
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                content: bytes | str = os.readlink(full)
            elif stat.S_ISREG(st.st_mode):
                content = full.read_bytes()
            else:
                content = b""
            out[str(full.relative_to(root))] = (st.st_mode, st.st_uid, content)
    return out


def _plant(case: str, tmp_path: Path) -> Path:
    """A store folder with one hostile thing in it; the database path."""
    folder = tmp_path / "store"
    folder.mkdir(mode=0o700)
    db = folder / "memlib.sqlite"
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"important\n")
    if case in ("link-db", "link-wal", "link-shm", "link-journal"):
        suffix = "" if case == "link-db" else "-" + case.split("-")[1]
        if suffix:  # a real store next to the planted sibling
            open_store(f"sqlite:{db}", user_id=USER).append(**_item("before"))
            for name in ("memlib.sqlite-wal", "memlib.sqlite-shm"):
                (folder / name).unlink(missing_ok=True)
        os.symlink(victim, folder / f"memlib.sqlite{suffix}")
    elif case == "fifo-db":
        os.mkfifo(db, 0o600)
    elif case == "foreign-db":
        open_store(f"sqlite:{db}", user_id=USER).append(**_item("before"))
        os.chown(db, NOBODY, NOBODY)
    elif case == "shared-db":
        open_store(f"sqlite:{db}", user_id=USER).append(**_item("before"))
        os.chmod(db, 0o666)
    elif case == "shared-folder":
        folder.chmod(0o777)
    elif case == "link-folder":
        real = tmp_path / "elsewhere"
        real.mkdir(mode=0o700)
        folder.rmdir()
        os.symlink(real, folder)
    else:
        raise AssertionError(case)
    return db


PLANTED = [
    "link-db",
    "link-wal",
    "link-shm",
    "link-journal",
    "fifo-db",
    "foreign-db",
    "shared-db",
    "shared-folder",
    "link-folder",
]


def _try_store(db: str, action: str, out: str) -> None:
    """In a child process, so that a FIFO which blocks the open fails the test, not hangs it."""
    store = open_store(f"sqlite:{db}", user_id=USER)
    try:
        if action == "read":
            store.read_all()
        else:
            store.append(**_item("planted"))
    except RemoteMemoryUnsafePathError as exc:
        Path(out).write_text(f"refused: {exc}", encoding="utf-8")
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        Path(out).write_text(f"other: {exc!r}", encoding="utf-8")
    else:
        Path(out).write_text("accepted", encoding="utf-8")


@pytest.mark.parametrize("action", ["read", "write"])
@pytest.mark.parametrize("case", PLANTED)
def test_sqlite_refuses_planted_links_and_foreign_files(
    tmp_path: Path, case: str, action: str
) -> None:
    if os.geteuid() != 0 and case == "foreign-db":
        pytest.skip("giving a file to another uid needs root")
    db = _plant(case, tmp_path)
    before = _snapshot(tmp_path)
    out = tmp_path.parent / f"{tmp_path.name}-outcome.txt"
    # Not a timing assertion: the limit only keeps a hanging open from stalling the run.
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.path[:0] = sys.argv[4:]; from test_storage import _try_store; "
            "_try_store(sys.argv[1], sys.argv[2], sys.argv[3])",
            str(db),
            action,
            str(out),
            str(Path(__file__).parent),
            str(Path(__file__).parents[1]),
        ],
        check=False,
        timeout=120,
    )
    outcome = out.read_text(encoding="utf-8")
    assert outcome.startswith("refused: refusing to use"), outcome
    assert "\n" not in outcome
    assert _snapshot(tmp_path) == before, "a refused store changed a file"
    assert (tmp_path / "victim.txt").read_bytes() == b"important\n"


# -- pathological JSON bodies ------------------------------------------------------------

BODIES = {"nested": "[" * 5_000 + "]" * 5_000, "long integer": '{"memory_id": ' + "9" * 5_000 + "}"}


@pytest.mark.parametrize("body", list(BODIES))
def test_sqlite_a_pathological_body_is_a_corruption_error(tmp_path: Path, body: str) -> None:
    path = tmp_path / "memlib.sqlite"
    store = open_store(f"sqlite:{path}", user_id=USER)
    store.append(**_item("bad"))
    conn = sqlite3.connect(path)
    conn.execute("UPDATE records SET body = ? WHERE memory_id = 'bad'", (BODIES[body],))
    conn.commit()
    conn.close()
    with pytest.raises(RemoteMemoryCorruptionError) as caught:
        open_store(f"sqlite:{path}", user_id=USER).read_all()
    _one_line(caught.value, str(path))


@pytest.mark.parametrize("body", list(BODIES))
def test_postgres_a_pathological_body_is_a_corruption_error(pg_url: str, body: str) -> None:  # noqa: F811
    import psycopg

    from memlib.stores.sql._postgres import split_url

    store = open_store(pg_url, user_id=USER)
    store.append(**_item("bad"))
    dsn, schema = split_url(pg_url)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            f"UPDATE {schema}.records SET body = %s WHERE memory_id = 'bad'", (BODIES[body],)
        )
    with pytest.raises(RemoteMemoryCorruptionError) as caught:
        store.read_all()
    _one_line(caught.value)
    store.close()


# -- PostgreSQL --------------------------------------------------------------------------


def _with_options(url: str, options: str) -> str:
    from urllib.parse import quote

    return f"{url}&options={quote(options)}"


def test_postgres_read_only_server_is_a_typed_error(pg_url: str) -> None:  # noqa: F811
    store = open_store(pg_url, user_id=USER)
    store.append(**_item("before"))
    store.close()
    read_only = open_store(
        _with_options(pg_url, "-c default_transaction_read_only=on"), user_id=USER
    )
    with pytest.raises(RemoteMemoryStorageError) as caught:
        read_only.append(**_item("refused"))
    _one_line(caught.value, "read-only")
    assert [r.memory_id for r in read_only.read_all()] == ["before"]
    assert len(RecallEngine(read_only).recall("storage record").hits) == 1
    read_only.close()
    _check_intact(pg_url, ["before"])


def test_postgres_db_init_on_a_read_only_server_is_a_typed_error(pg_dsn: str) -> None:  # noqa: F811
    from memlib.stores.sql._postgres import init_schema

    url = _with_options(f"{pg_dsn}?schema=never_created", "-c default_transaction_read_only=on")
    with pytest.raises(RemoteMemoryStorageError) as caught:
        init_schema(url)
    _one_line(caught.value, "read-only", "never_created")


def test_postgres_lock_timeout_is_a_typed_error(pg_url: str) -> None:  # noqa: F811
    import psycopg

    from memlib.stores.sql._postgres import split_url

    store = open_store(pg_url, user_id=USER)
    store.append(**_item("before"))
    dsn, schema = split_url(pg_url)
    holder = psycopg.connect(dsn)
    try:
        holder.execute(f"SELECT * FROM {schema}.scope_stats FOR UPDATE").fetchall()
        waiting = open_store(_with_options(pg_url, "-c lock_timeout=50"), user_id=USER)
        with pytest.raises(RemoteMemoryStorageError) as caught:
            waiting.append(**_item("refused"))
        _one_line(caught.value, "lock timeout")
    finally:
        holder.rollback()
        holder.close()
    waiting.append(**_item("after"))
    waiting.close()
    store.close()
    _check_intact(pg_url, ["before", "after"])


def _terminate(store: Any, dsn: str) -> None:
    import psycopg

    pid = store._connection().info.backend_pid
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (pid,))


def test_postgres_a_killed_connection_is_a_typed_error_then_reconnects(pg_url: str) -> None:  # noqa: F811
    from memlib.stores.sql._postgres import split_url

    dsn, _ = split_url(pg_url)
    store = open_store(pg_url, user_id=USER)
    assert isinstance(store, PostgresMemoryStore)
    store.append(**_item("before"))
    calls = [
        ("read", store.read_all),
        ("write", lambda: store.append(**_item("refused"))),
        ("read", lambda: RecallEngine(store).recall("storage record")),
        ("read", lambda: store.existing_ids(["before"])),
    ]
    for action, call in calls:
        _terminate(store, dsn)
        with pytest.raises(RemoteMemoryStorageError) as caught:
            call()
        _one_line(caught.value, f"cannot {action}", "connection lost")
        assert [r.memory_id for r in store.read_all()] == ["before"]  # connects again
    store.append(**_item("after"))
    store.close()
    _check_intact(pg_url, ["before", "after"])


def test_postgres_disk_full_tablespace_is_a_typed_error(pg_url: str) -> None:  # noqa: F811
    import psycopg

    from memlib.stores.sql._postgres import split_url

    if os.environ.get("MEMLIB_PG_DSN"):
        pytest.skip("a tablespace on a tmpfs needs the tests' own local cluster")
    try:
        postgres = pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("no postgres account to own the tablespace")
    dsn, schema = split_url(pg_url)
    assert schema is not None
    # In /tmp, not under pytest's 0700 folder: the server (user postgres) must reach it.
    where = Path(tempfile.mkdtemp(prefix="memlib-tablespace-"))
    try:
        _mount(where, "2m", f"uid={postgres.pw_uid}", f"gid={postgres.pw_gid}")
    except BaseException:
        where.rmdir()
        raise
    space = f"ts_{schema}"
    try:
        (where / "ts").mkdir(mode=0o700)
        os.chown(where / "ts", postgres.pw_uid, postgres.pw_gid)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"CREATE TABLESPACE {space} LOCATION '{where / 'ts'}'")
            for table in ("records", "postings", "scope_stats"):
                conn.execute(f"ALTER TABLE {schema}.{table} SET TABLESPACE {space}")
            for (index,) in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE schemaname = %s", (schema,)
            ).fetchall():
                conn.execute(f"ALTER INDEX {schema}.{index} SET TABLESPACE {space}")
        store = open_store(pg_url, user_id=USER)
        for n in range(5):
            store.append(**_item(f"before-{n}"))
        ballast = _fill_disk(where, leave=256 * 1024)

        acked, error = _fill(store, "fill")
        assert isinstance(error, RemoteMemoryStorageError), repr(error)
        _one_line(error, "disk full", schema)
        everything = [f"before-{n}" for n in range(5)] + acked
        _check_intact(pg_url, everything)

        ballast.unlink()  # space freed
        store.append(**_item("after"))
        store.close()
        _check_intact(pg_url, [*everything, "after"])
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            conn.execute(f"DROP TABLESPACE IF EXISTS {space}")
        _umount(where)
        where.rmdir()

"""The SQLite dialect of the SQL store [beyond]: one file, many readers, one writer.

``open_store("sqlite:PATH", user_id=...)``: ``sqlite3`` in WAL mode with
``synchronous=FULL`` (a commit is on disk when ``append`` returns); terms are cut by
memlib's tokenizer, not FTS5's (which cuts CJK text differently). Nothing is created
until the first write; an older schema is upgraded on open. SQLite follows links: every
file it opens by name is checked first (``_check_files``)."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from datetime import datetime
from pathlib import Path
from typing import Any

from ..._vectors import Embedder
from ...errors import (
    RemoteMemoryCorruptionError,
    RemoteMemoryError,
    RemoteMemoryStorageError,
    RemoteMemoryValidationError,
)
from ...records import StoredMemory
from .._base import Clock, make_private_folders
from .._files import DIR_MODE, check_folder, check_path, open_private
from ._common import RecordRow, Run, SqlMemoryStore, driver_error
from ._known_at import SqlKnownAt
from ._schema import SCHEMA_VERSION, SQLITE

_RUN = "<i8"
# The files SQLite opens by name next to the database (WAL mode, or a rollback journal
# left by an older writer).
_SIBLINGS = ("-wal", "-shm", "-journal")

# SQLite's primary result codes (the low byte of an extended code) → the cause named.
_STORAGE_CAUSES = {
    sqlite3.SQLITE_FULL: "disk full",
    sqlite3.SQLITE_READONLY: "read-only",
    **dict.fromkeys((sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED), "locked by another connection"),
    sqlite3.SQLITE_IOERR: "I/O error",
    sqlite3.SQLITE_CANTOPEN: "cannot open the file",
    **dict.fromkeys((sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH), "permission denied"),
    sqlite3.SQLITE_NOMEM: "out of memory",
    sqlite3.SQLITE_NOLFS: "file too large",
    sqlite3.SQLITE_TOOBIG: "too big for SQLite",
    sqlite3.SQLITE_PROTOCOL: "locking protocol error",
}
_CORRUPT = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_FORMAT)


def sqlite_path(url: str | os.PathLike[str]) -> Path:
    """``sqlite:PATH`` or ``sqlite:///ABS/PATH`` → the file's path."""
    text = os.fspath(url)
    if text.startswith("sqlite:"):
        text = text.removeprefix("sqlite:").removeprefix("//")
    if not text:
        raise RemoteMemoryValidationError("sqlite store URL needs a path: sqlite:PATH")
    return Path(text)


def _is_locked(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


def _sqlite_error(path: Path, action: str, exc: sqlite3.Error) -> RemoteMemoryError:
    """``exc`` as memlib's error: one line, ``cannot ACTION SQLite store PATH: CAUSE (…)``."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = None if code is None else code & 0xFF
    where = f"cannot {action} SQLite store {path}"
    if primary in _CORRUPT or (
        primary is None
        and isinstance(exc, sqlite3.DatabaseError)
        and not isinstance(exc, sqlite3.OperationalError)
    ):
        return driver_error(where, str(exc), corrupt=True)
    cause = _STORAGE_CAUSES.get(primary) if primary is not None else None
    detail = str(exc)
    if primary in (sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN):
        # A full disk met while growing the -shm or -wal file is reported as an I/O
        # error (SQLITE_IOERR_SHMSIZE …), a read-only one as "unable to open": SQLite
        # keeps errno to itself, so ask the file system.
        detail = f"{exc}, {getattr(exc, 'sqlite_errorname', code)}"
        cause = _disk_problem(path.parent) or cause
    if cause is None and _is_locked(exc):
        cause = "locked by another connection"
    return driver_error(where, detail, cause)


def _disk_problem(folder: Path) -> str | None:
    try:
        st = os.statvfs(folder)
    except OSError:
        return None
    if st.f_flag & os.ST_RDONLY:
        return "read-only file system"
    if st.f_bavail == 0 or (st.f_files > 0 and st.f_favail == 0):
        return "disk full"
    return None


def _rollback(conn: sqlite3.Connection) -> None:
    """End the open transaction, if SQLite has not already rolled it back itself. Called
    while another error is on its way up: a rollback that fails too must not hide it."""
    if conn.in_transaction:
        with suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


class SqliteMemoryStore(SqlMemoryStore):
    """``SqliteMemoryStore("sqlite:PATH" | PATH, user_id="alice")``."""

    backend = "sqlite"
    schema_label = "SQLite store"
    _newer = "the SQLite store has schema version {}"

    # A list parameter is a JSON array: one parameter, however long the list.
    ANY = "IN (SELECT value FROM json_each(?))"
    # json_valid first: a body SQLite cannot parse (nested past its depth limit) must not
    # make the write fail inside the index; reading it is memlib's, a corruption error.
    SOURCE_ID = (
        "CASE WHEN json_valid({a}.body) THEN json_extract({a}.body, '$.source.source_id') END"
    )
    # "+user_scope": look the ids up by rowid; with the plain column SQLite would
    # rather walk the scope's whole index and test every row against the list.
    SCOPE_OF_IDS = "+user_scope"
    # Without statistics SQLite 3.40 walks records_recent and sorts: every record of the
    # scope read (3.3 s at 1M) for the few profiles the partial index holds (0.1 ms).
    PROFILE_INDEX = "INDEXED BY records_scope_kind"
    META = "memlib_meta"
    HAS_META = "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'memlib_meta'"
    SCHEMA = SQLITE
    RUN_FORMAT = _RUN
    _TERM_RUNS = "FROM terms t JOIN postings p ON p.term_id = t.id WHERE t.user_scope = ?"
    RUNS_OF_TERMS = f"SELECT p.docs {_TERM_RUNS} AND t.term {{any}}"
    ALL_RUNS = f"SELECT t.term, p.docs {_TERM_RUNS} ORDER BY t.term, p.first_id"
    TF_RUNS_OF_TERMS = (
        f"SELECT t.term, p.docs, p.tfs, p.lengths {_TERM_RUNS} AND t.term {{any}} "
        "ORDER BY t.term, p.first_id"
    )
    RUNS_HOLDING = (
        f"SELECT t.term, p.first_id, p.docs, p.tfs, p.lengths {_TERM_RUNS} AND t.term {{any}} "
        "AND p.first_id = "
        "(SELECT max(first_id) FROM postings WHERE term_id = t.id AND first_id <= ?)"
    )
    _TERM_ID = "(SELECT id FROM terms WHERE user_scope = ? AND term = ?)"
    SET_RUN = (
        f"UPDATE postings SET docs = ?, tfs = ?, lengths = ? WHERE term_id = {_TERM_ID} "
        "AND first_id = ?"
    )
    DROP_RUN = f"DELETE FROM postings WHERE term_id = {_TERM_ID} AND first_id = ?"

    def __init__(
        self,
        url: str | os.PathLike[str],
        *,
        user_id: str,
        clock: Clock | None = None,
        busy_timeout: float = 30.0,
        embedder: Embedder | None = None,
        project: str | None = None,
    ) -> None:
        super().__init__(user_id=user_id, clock=clock, embedder=embedder, project=project)
        self.path = sqlite_path(url)
        self._location = str(self.path)
        self._busy_timeout = busy_timeout

    def _forget(self) -> None:
        super()._forget()
        self._term_ids: dict[str, int] = {}  # committed term ids of this scope
        self._new_terms: dict[str, int] = {}  # those the open write made
        self._write_cache: sqlite3.Connection | None = None  # the connection that has it

    def __repr__(self) -> str:
        return f"SqliteMemoryStore(user_scope={self._key!r})"

    def known_at_view(self, known_at: datetime) -> SqlKnownAt:
        """The store as it stood at ``known_at``, read through its indexes (here, not in
        ``SqlMemoryStore``: ``SqlKnownAt`` reads through that class)."""
        return SqlKnownAt(self, known_at)

    def _open(self, *, create: bool) -> sqlite3.Connection | None:
        self._check_files()
        if create:
            self._create_file()
        elif not self.path.exists():
            return None
        with self._failures("open"):
            conn = sqlite3.connect(
                self.path, timeout=self._busy_timeout, isolation_level=None, check_same_thread=False
            )
            try:
                self._enable_wal(conn)
                conn.execute("PRAGMA synchronous = FULL")
                conn.execute("PRAGMA foreign_keys = ON")
                # A deleted row's bytes are zeroed, not left in the page: a retracted
                # record's vector leaves no trace in the file.
                conn.execute("PRAGMA secure_delete = ON")
                version = self._version(conn)
                if version == 0 and not create:
                    conn.close()  # a file that is not (yet) a memlib store reads as empty
                    return None
                if version != SCHEMA_VERSION:  # create, upgrade an older one, refuse a newer one
                    self._writing(conn)
                    conn.execute("BEGIN IMMEDIATE")
                    try:
                        self._migrate(conn)
                        conn.execute("COMMIT")
                    except BaseException:
                        _rollback(conn)
                        raise
            except BaseException:
                conn.close()
                raise
        return conn

    def _writing(self, conn: sqlite3.Connection) -> None:
        """A writing connection gets a 128 MiB page cache (a batch's term inserts stay in
        memory); a reading one keeps SQLite's 2 MiB: a recall reads its runs once, through
        the OS's cache as fast, and a fresh process's peak memory does not grow by them."""
        if self._write_cache is not conn:
            conn.execute("PRAGMA cache_size = -131072")
            self._write_cache = conn

    def schema_version(self) -> int:
        """The file's schema version (0: no store yet), read without upgrading it: what
        ``memlib db status`` reports and ``db init`` upgrades from."""
        self._check_files()
        if not self.path.exists():
            return 0
        uri = f"{self.path.resolve().as_uri()}?mode=ro"
        with self._failures("read"):
            conn = sqlite3.connect(uri, uri=True, timeout=self._busy_timeout)
            try:
                return self._version(conn)
            finally:
                conn.close()

    def init_schema(self) -> tuple[int, int]:
        before = self.schema_version()
        conn = self._connection(create=True)
        with self._failures("read"):
            return before, self._version(conn)

    def _check_files(self) -> None:
        """Refuse a planted link, FIFO or foreign file before SQLite opens any by name."""
        path = str(self.path)
        check_path(path)
        for suffix in _SIBLINGS:
            check_path(path + suffix, folder_too=False)

    def _create_file(self) -> None:
        """The database file, created private; its folders too, through the same rules."""
        folder = self.path.parent
        try:
            try:
                fd = open_private(str(self.path), os.O_RDWR | os.O_CREAT)
            except FileNotFoundError:
                make_private_folders(folder, DIR_MODE)
                check_folder(str(folder))
                fd = open_private(str(self.path), os.O_RDWR | os.O_CREAT)
        except FileNotFoundError:
            raise RemoteMemoryError(f"cannot create {self.path}: no such folder") from None
        except OSError as exc:  # the folders: a full or read-only disk, no permission
            raise RemoteMemoryStorageError(f"cannot create {self.path}: {exc.strerror}") from None
        os.close(fd)

    def _enable_wal(self, conn: sqlite3.Connection) -> None:
        # Switching a new file to WAL needs an exclusive lock, and SQLite answers
        # "database is locked" at once instead of waiting out busy_timeout when several
        # first writers race for it: wait here, within the same timeout.
        deadline = time.monotonic() + self._busy_timeout
        while True:
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if not _is_locked(exc) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.005)

    @contextmanager
    def _failures(self, action: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise _sqlite_error(self.path, action, exc) from None

    @contextmanager
    def _transaction(self, conn: sqlite3.Connection, *, write: bool) -> Iterator[None]:
        with self._failures("write" if write else "read"):
            if write:
                self._writing(conn)
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield
                if write:
                    conn.execute("COMMIT")
            except BaseException:
                self._end(conn)
                raise
        if not write:
            # A read-only transaction: ending it by rollback is a commit, and never
            # fails on one that SQLite already ended after an I/O error.
            self._end(conn)

    def _end(self, conn: sqlite3.Connection) -> None:
        """Close a transaction that failed; a connection left inside one is dropped."""
        _rollback(conn)
        if conn.in_transaction:
            self.close()

    def _many(self, values: Iterable[Any]) -> str:
        return json.dumps(list(values))

    def _append_batch(
        self, batch: Sequence[StoredMemory], vectors: Mapping[str, bytes] | None = None
    ) -> None:
        self._new_terms = {}
        super()._append_batch(batch, vectors)
        # Only committed term ids are remembered: a rolled-back id may be reused.
        self._term_ids.update(self._new_terms)

    def _vector_rows(self, conn: sqlite3.Connection) -> Iterator[tuple[str, bytes]]:
        """Two scans matched as they go, the memory ids from the scope's unique index and the
        vectors by record id: a join reads every record's page, bodies and all, into this
        process's page cache (at 100k records 85 MB more, and slower)."""
        scope = self._key
        # "+id": sorted after the index scan, not read in id order from the table
        names = conn.execute(
            "SELECT id, memory_id FROM records WHERE user_scope = ? ORDER BY +id", (scope,)
        )
        sql = "SELECT record_id, vector FROM vectors WHERE user_scope = ? ORDER BY record_id"
        for row_id, blob in conn.execute(sql, (scope,)):
            for name_id, memory_id in names:
                if name_id == row_id:
                    yield memory_id, blob
                    break
            else:
                raise RemoteMemoryCorruptionError(
                    f"a stored vector names record {row_id}, missing from {self.path}"
                )

    def _vectors_deleted(self, conn: sqlite3.Connection) -> None:
        # The log still holds the pages as they were before the delete: checkpoint it
        # into the file (whose pages secure_delete zeroed) and truncate it. Best effort
        # and brief: a reader holding an old snapshot makes it wait, not fail the write.
        try:
            with suppress(sqlite3.Error):
                conn.execute("PRAGMA busy_timeout = 1000")
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        finally:
            with suppress(sqlite3.Error):
                conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout * 1000)}")

    def _insert_records(
        self, conn: sqlite3.Connection, rows: Sequence[RecordRow]
    ) -> dict[str, int]:
        (next_id,) = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM records").fetchone()
        try:
            conn.executemany(
                "INSERT INTO records (id, user_scope, memory_id, kind, captured_ts, captured_us, "
                "retracts, body, tokens, content_tokens, stored_us) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(row_id, self._key, *row) for row_id, row in enumerate(rows, next_id)],
            )
        except sqlite3.IntegrityError:
            # Another writer's row won the race for an id: not possible under BEGIN
            # IMMEDIATE, but the constraint is the last word. Nothing of the batch is kept.
            return {}
        return {row[0]: row_id for row_id, row in enumerate(rows, next_id)}

    def _add_runs(self, conn: sqlite3.Connection, scope: str, runs: Sequence[Run]) -> None:
        ids = self._term_ids_of(conn, scope, [run[0] for run in runs])
        conn.executemany(
            "INSERT INTO postings (term_id, first_id, docs, tfs, lengths) VALUES (?, ?, ?, ?, ?)",
            [(ids[term], *rest) for term, *rest in runs],
        )

    def _term_ids_of(
        self, conn: sqlite3.Connection, scope: str, terms: Sequence[str]
    ) -> dict[str, int]:
        """Term ids for ``terms`` in ``scope``, creating the missing ones (in the transaction)."""
        # Cached for this store's scope only (an upgrade indexes every scope).
        own = scope == self._key
        known, new = (self._term_ids, self._new_terms) if own else ({}, {})
        out = {term: tid for term in terms if (tid := known.get(term) or new.get(term))}
        missing = [term for term in terms if term not in out]
        if not missing:
            return out
        sql = f"SELECT term, id FROM terms WHERE user_scope = ? AND term {self.ANY}"
        for term, tid in conn.execute(sql, (scope, self._many(missing))):
            out[term] = new[term] = tid
        create = [term for term in missing if term not in out]
        if create:
            (next_id,) = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM terms").fetchone()
            rows = [(next_id + i, scope, term) for i, term in enumerate(create)]
            conn.executemany("INSERT INTO terms VALUES (?, ?, ?)", rows)
            for tid, _, term in rows:
                out[term] = new[term] = tid
        return out

"""The SQLite store [beyond]: one file, many readers, one writer at a time (SPEC §2).

``open_store("sqlite:PATH", user_id=...)``. Standard library ``sqlite3`` only. The file
is in WAL mode with ``synchronous=FULL``: a commit is on disk when ``append`` returns.
Every write is one ``BEGIN IMMEDIATE`` transaction that checks the shared write rules
(``BaseMemoryStore.check_batch``), inserts the records and their terms, and commits —
or leaves nothing behind. ``UNIQUE(user_scope, memory_id)`` backs the duplicate rule.

Candidates come from a term table kept with memlib's own tokenizer in the same
transaction as the record (FTS5 tokenizers cut CJK text differently, so their matches
would not be the reference's). A term's postings are stored as packed runs of record
ids, one row per term per written batch: a bulk import writes a row per distinct term
instead of a row per (term, record), which is what made it slow (schema version 2;
version 1 stores are converted on open). A retraction removes the target from its
terms' runs in the transaction that records it; the record itself is never changed.
Nothing is created until the first write: a missing file reads as an empty store.

The file is named by the caller and opened by SQLite, which follows links: before
SQLite opens it, the database, its ``-wal``, ``-shm`` and ``-journal`` siblings and
their folder pass ``files.check_path`` (no link, no FIFO, nobody else's, nobody else may
write), and the file is created through ``files.open_private``. Every failure of SQLite
itself comes back as a memlib error naming its cause (``_sqlite_error``): disk full,
read-only, locked, I/O error as ``RemoteMemoryStorageError``, a damaged file as
``RemoteMemoryCorruptionError``. SQLite rolls a transaction back by itself after some
of these (a full disk, an I/O error), so a rollback is issued only while one is open.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from itertools import chain
from pathlib import Path
from typing import Any

from ..candidates import CandidateScan
from ..errors import (
    RemoteMemoryCorruptionError,
    RemoteMemoryDuplicateError,
    RemoteMemoryError,
    RemoteMemoryScopeError,
    RemoteMemoryStorageError,
    RemoteMemoryValidationError,
)
from ..index import (
    candidates_for,
    count_matches,
    micros_of,
    pack_docs,
    record_stats,
    run_without,
    runs_by_term,
    term_stats,
    top_of_matches,
    unpack_docs,
)
from ..normalize import RecallQuery
from ..records import MemoryKind, StoredMemory, record_json
from ..safejson import loads
from .base import BaseMemoryStore, Clock, latest_profile_of, make_private_folders
from .files import DIR_MODE, check_folder, check_path, open_private

__all__ = ["SCHEMA_VERSION", "SqliteMemoryStore", "init_schema", "sqlite_path"]

SCHEMA_VERSION = 2
FILE_MODE = 0o600
_CHUNK = 500  # host parameters per IN (...) list
# The files SQLite opens by name next to the database (WAL mode, or a rollback journal
# left by an older writer).
_SIBLINGS = ("-wal", "-shm", "-journal")

# SQLite's primary result codes (the low byte of an extended code) → the cause named.
_STORAGE_CAUSES = {
    sqlite3.SQLITE_FULL: "disk full",
    sqlite3.SQLITE_READONLY: "read-only",
    sqlite3.SQLITE_BUSY: "locked by another connection",
    sqlite3.SQLITE_LOCKED: "locked by another connection",
    sqlite3.SQLITE_IOERR: "I/O error",
    sqlite3.SQLITE_CANTOPEN: "cannot open the file",
    sqlite3.SQLITE_PERM: "permission denied",
    sqlite3.SQLITE_AUTH: "permission denied",
    sqlite3.SQLITE_NOMEM: "out of memory",
    sqlite3.SQLITE_NOLFS: "file too large",
    sqlite3.SQLITE_TOOBIG: "too big for SQLite",
    sqlite3.SQLITE_PROTOCOL: "locking protocol error",
}
_CORRUPT = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_FORMAT)


def pack_ids(ids: Iterable[int]) -> bytes:
    """Record ids (ascending) as little-endian int64: the ``postings.docs`` format."""
    return pack_docs(ids, "<i8")


def unpack_ids(blob: bytes) -> array[int]:
    return unpack_docs(blob, "<i8")


def _postings_as_runs(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE postings_runs (term_id INTEGER NOT NULL, first_id INTEGER NOT NULL, "
        "docs BLOB NOT NULL, PRIMARY KEY (term_id, first_id)) WITHOUT ROWID"
    )
    runs: list[tuple[int, int, bytes]] = []
    current: int | None = None
    ids: list[int] = []
    for term_id, record_id in conn.execute(
        "SELECT term_id, record_id FROM postings ORDER BY term_id, record_id"
    ):
        if term_id != current:
            if ids:
                runs.append((current, ids[0], pack_ids(ids)))  # type: ignore[arg-type]
            current, ids = term_id, []
        ids.append(record_id)
    if ids:
        runs.append((current, ids[0], pack_ids(ids)))  # type: ignore[arg-type]
    conn.executemany("INSERT INTO postings_runs VALUES (?, ?, ?)", runs)
    conn.execute("DROP TABLE postings")
    conn.execute("ALTER TABLE postings_runs RENAME TO postings")
    # The top-k walk reads a large group newest first.
    conn.execute("CREATE INDEX IF NOT EXISTS records_recent ON records (user_scope, captured_ts)")


# Each entry upgrades the schema from version i to i + 1: a script, or a function.
_MIGRATIONS: tuple[str | Callable[[sqlite3.Connection], None], ...] = (
    """
    CREATE TABLE IF NOT EXISTS records (
        id          INTEGER PRIMARY KEY,          -- append order
        user_scope  TEXT NOT NULL,
        memory_id   TEXT NOT NULL,
        kind        TEXT NOT NULL,
        captured_ts REAL NOT NULL,                -- captured_at.timestamp(), as rank_key
        captured_us INTEGER NOT NULL,             -- captured_at in microseconds, exact
        retracts    TEXT,
        body        TEXT NOT NULL,                -- the record's JSON, as in JSONL
        UNIQUE (user_scope, memory_id)
    );
    CREATE INDEX IF NOT EXISTS records_scope_kind ON records (user_scope, kind)
        WHERE kind <> 'conversation';
    CREATE INDEX IF NOT EXISTS records_retracts ON records (user_scope, retracts)
        WHERE retracts IS NOT NULL;
    CREATE TABLE IF NOT EXISTS terms (
        id         INTEGER PRIMARY KEY,
        user_scope TEXT NOT NULL,
        term       TEXT NOT NULL,
        UNIQUE (user_scope, term)
    );
    CREATE TABLE IF NOT EXISTS postings (
        term_id   INTEGER NOT NULL,
        record_id INTEGER NOT NULL,
        PRIMARY KEY (term_id, record_id)
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS scope_stats (
        user_scope     TEXT PRIMARY KEY,
        searched       INTEGER NOT NULL DEFAULT 0,
        retracted      INTEGER NOT NULL DEFAULT 0,
        tokens         INTEGER NOT NULL DEFAULT 0,
        content_tokens INTEGER NOT NULL DEFAULT 0
    );
    """,
    # 2: postings as packed runs of record ids, one row per term per batch.
    _postings_as_runs,
)


def sqlite_path(url: str | os.PathLike[str]) -> Path:
    """``sqlite:PATH`` or ``sqlite:///ABS/PATH`` → the file's path."""
    text = os.fspath(url)
    if text.startswith("sqlite:"):
        text = text[len("sqlite:"):]
        text = text.removeprefix("//")
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
    if primary in _CORRUPT or (primary is None and isinstance(exc, sqlite3.DatabaseError)
                               and not isinstance(exc, sqlite3.OperationalError)):
        return RemoteMemoryCorruptionError(f"{where}: {exc}")
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
    if cause is not None:
        return RemoteMemoryStorageError(f"{where}: {cause} ({detail})")
    return RemoteMemoryError(f"{where}: {exc}")


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
    """End the open transaction, if SQLite has not already rolled it back itself.

    Called while another error is on its way up: a rollback that fails too (the disk
    went away) must not hide it. The caller drops a connection still in a transaction.
    """
    if conn.in_transaction:
        with suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


def _version(conn: sqlite3.Connection) -> int:
    row = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'memlib_meta'"
    ).fetchone()
    if row is None:
        return 0
    row = conn.execute("SELECT value FROM memlib_meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row else 0


def init_schema(conn: sqlite3.Connection) -> tuple[int, int]:
    """Create or upgrade the schema; ``(version before, version after)``."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        before = _version(conn)
        if before > SCHEMA_VERSION:
            raise RemoteMemoryError(
                f"the SQLite store has schema version {before}; this memlib knows up to "
                f"{SCHEMA_VERSION}: upgrade memlib"
            )
        conn.execute(
            "CREATE TABLE IF NOT EXISTS memlib_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
        )
        for step in _MIGRATIONS[before:]:
            if callable(step):
                step(conn)
                continue
            for statement in step.split(";"):
                if statement.strip():
                    conn.execute(statement)
        conn.execute(
            "INSERT INTO memlib_meta (key, value) VALUES ('schema_version', ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (str(SCHEMA_VERSION),),
        )
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise
    return before, SCHEMA_VERSION


def _chunks(items: Sequence[Any], size: int = _CHUNK) -> Iterable[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


class _State:
    """The write rules' view of the store, fetched once per batch inside the transaction."""

    def __init__(self, conn: sqlite3.Connection, scope: str, batch: Sequence[StoredMemory]):
        ids = list({r.memory_id for r in batch} | {r.retracts for r in batch if r.retracts})
        self.kinds: dict[str, MemoryKind] = {}
        self.rows: dict[str, tuple[int, str]] = {}  # target id → (row id, body)
        self.retracted: set[str] = set()
        for part in _chunks(ids):
            marks = ",".join("?" * len(part))
            for memory_id, kind, row_id, body in conn.execute(
                f"SELECT memory_id, kind, id, body FROM records WHERE user_scope = ? "
                f"AND memory_id IN ({marks})", (scope, *part),
            ):
                self.kinds[memory_id] = MemoryKind(kind)
                self.rows[memory_id] = (row_id, body)
            for (target,) in conn.execute(
                f"SELECT retracts FROM records WHERE user_scope = ? AND retracts IN ({marks})",
                (scope, *part),
            ):
                self.retracted.add(target)

    def kind_of(self, memory_id: str) -> MemoryKind | None:
        return self.kinds.get(memory_id)

    def is_retracted(self, memory_id: str) -> bool:
        return memory_id in self.retracted


class SqliteMemoryStore(BaseMemoryStore):
    """``SqliteMemoryStore("sqlite:PATH" | PATH, user_id="alice")``."""

    backend = "sqlite"

    def __init__(
        self, url: str | os.PathLike[str], *, user_id: str, clock: Clock | None = None,
        busy_timeout: float = 30.0,
    ) -> None:
        super().__init__(user_id=user_id, clock=clock)
        self.path = sqlite_path(url)
        self._busy_timeout = busy_timeout
        self._conn: sqlite3.Connection | None = None
        self._term_ids: dict[str, int] = {}  # committed term ids of this scope

    def __repr__(self) -> str:
        return f"SqliteMemoryStore(user_scope={self.user_scope!r})"

    # -- connection -------------------------------------------------------------------

    def _connect(self, *, create: bool) -> sqlite3.Connection | None:
        if self._conn is not None:
            return self._conn
        self._check_files()
        if not create and not self.path.exists():
            return None
        if create:
            self._create_file()
        try:
            conn = sqlite3.connect(
                self.path, timeout=self._busy_timeout, isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise _sqlite_error(self.path, "open", exc) from None
        try:
            self._enable_wal(conn)
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA cache_size = -131072")  # 128 MiB: term inserts stay in memory
            version = _version(conn)
            if version == 0 and not create:
                conn.close()  # a file that is not (yet) a memlib store reads as empty
                return None
            if version != SCHEMA_VERSION:
                init_schema(conn)  # creates, upgrades an older one, refuses a newer one
        except BaseException as exc:
            conn.close()
            if isinstance(exc, sqlite3.Error):
                raise _sqlite_error(self.path, "open", exc) from None
            raise
        self._conn = conn
        return conn

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

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @contextmanager
    def _failures(self, action: str) -> Iterator[None]:
        """SQLite's errors inside the block as memlib's, naming the cause."""
        try:
            yield
        except sqlite3.Error as exc:
            raise _sqlite_error(self.path, action, exc) from None

    def _end(self, conn: sqlite3.Connection) -> None:
        """Close a transaction that failed; a connection left inside one is dropped."""
        _rollback(conn)
        if conn.in_transaction:
            self.close()

    # -- reading ----------------------------------------------------------------------

    def _parse(self, body: str) -> StoredMemory:
        try:
            record = StoredMemory.from_dict(loads(body))
        except (ValueError, TypeError, RemoteMemoryValidationError,
                RemoteMemoryCorruptionError) as exc:
            # ValueError: invalid JSON, or JSON past safejson's depth and number limits.
            raise RemoteMemoryCorruptionError(f"invalid record in {self.path}: {exc}") from None
        if record.user_scope != self.user_scope:
            raise RemoteMemoryScopeError(f"memory {record.memory_id} belongs to another user scope")
        return record

    def _bodies(self, sql: str, params: Sequence[Any]) -> tuple[StoredMemory, ...]:
        conn = self._connect(create=False)
        if conn is None:
            return ()
        with self._failures("read"):
            rows = conn.execute(sql, params).fetchall()
        return tuple(self._parse(body) for (body,) in rows)

    def read_all(self) -> tuple[StoredMemory, ...]:
        return self._bodies(
            "SELECT body FROM records WHERE user_scope = ? ORDER BY id", (self.user_scope,)
        )

    def records(self, kind: MemoryKind | str | None = None) -> tuple[StoredMemory, ...]:
        if kind is None:
            return self.read_all()
        return self._bodies(
            "SELECT body FROM records WHERE user_scope = ? AND kind = ? ORDER BY id",
            (self.user_scope, MemoryKind(kind).value),
        )

    def latest_profile(self) -> StoredMemory | None:
        return latest_profile_of(self._bodies(
            "SELECT body FROM records WHERE user_scope = ? AND kind <> 'conversation' ORDER BY id",
            (self.user_scope,),
        ))

    def _stats(self, conn: sqlite3.Connection) -> tuple[int, int, int, int]:
        row = conn.execute(
            "SELECT searched, retracted, tokens, content_tokens FROM scope_stats "
            "WHERE user_scope = ?", (self.user_scope,),
        ).fetchone()
        return tuple(row) if row else (0, 0, 0, 0)  # type: ignore[return-value]

    def _matches(self, conn: sqlite3.Connection, terms: Sequence[str]) -> tuple[Any, Any]:
        """``(record ids, matched-term counts)`` of every record sharing a term with ``terms``."""
        runs: list[bytes] = []
        for part in _chunks(list(terms)):
            marks = ",".join("?" * len(part))
            runs.extend(row[0] for row in conn.execute(
                f"SELECT p.docs FROM terms t JOIN postings p ON p.term_id = t.id "
                f"WHERE t.user_scope = ? AND t.term IN ({marks})",
                (self.user_scope, *part),
            ))
        return count_matches(runs, "<i8")

    def _scan(self, query: RecallQuery, *, top: bool) -> CandidateScan:
        conn = self._connect(create=False)
        if conn is None:
            return CandidateScan((), 0, 0, 0, 0, 0)
        with self._failures("read"):
            conn.execute("BEGIN")  # one snapshot for the counts and the candidates
        try:
            if query.user_scope != self.user_scope:
                row = conn.execute(
                    "SELECT memory_id FROM records WHERE user_scope = ? ORDER BY id LIMIT 1",
                    (self.user_scope,),
                ).fetchone()
                if row is not None:
                    raise RemoteMemoryScopeError(f"memory {row[0]} belongs to another user scope")
            searched, retracted, tokens, content_tokens = self._stats(conn)
            ids, matched = self._matches(conn, query.terms)
            if top:
                records, count = self._top(conn, query, ids, matched, searched)
            else:
                records = self._bodies_of(conn, ids)
                count = len(records)
        except sqlite3.Error as exc:
            raise _sqlite_error(self.path, "read", exc) from None
        finally:
            # A read-only transaction: ending it by rollback is a commit, and never fails
            # on one that SQLite already ended after an I/O error.
            self._end(conn)
        return CandidateScan(
            candidates=candidates_for(query, records),
            searched_records=searched,
            candidate_records=count,
            retracted_records=retracted,
            searched_token_count=tokens,
            searched_content_token_count=content_tokens,
        )

    def _bodies_of(self, conn: sqlite3.Connection, ids: Sequence[int]) -> tuple[StoredMemory, ...]:
        """The records of ``ids`` (this scope's only), in append order."""
        if not len(ids):
            return ()
        return tuple(self._parse(body) for (body,) in conn.execute(
            "SELECT body FROM records WHERE +user_scope = ? "
            "AND id IN (SELECT value FROM json_each(?)) ORDER BY id",
            (self.user_scope, json.dumps([int(i) for i in ids])),
        ))

    def _top(
        self, conn: sqlite3.Connection, query: RecallQuery, ids: Any, matched: Any,
        searched: int,
    ) -> tuple[Sequence[StoredMemory], int]:
        columns = "SELECT id, captured_ts, captured_us, memory_id FROM records WHERE "
        # "+user_scope": look the ids up by rowid; with the plain column SQLite would
        # rather walk the scope's whole index and test every row against the list.
        by_id = columns + "+user_scope = ? AND id IN (SELECT value FROM json_each(?))"
        limit = query.limit

        def lookup(members: Sequence[int]) -> list[Any]:
            packed = json.dumps(members)
            rows = conn.execute(
                by_id + " ORDER BY captured_ts DESC LIMIT ?", (self.user_scope, packed, limit),
            ).fetchall()
            if len(rows) == limit and len(members) > limit:
                rows = conn.execute(  # every tie with the last one kept
                    by_id + " AND captured_ts >= ?", (self.user_scope, packed, rows[-1][1]),
                ).fetchall()
            return rows

        def newest_first(budget: int) -> Iterable[Any]:
            # Index records_recent; the cursor is read only as far as the walk goes.
            return conn.execute(columns + "user_scope = ? ORDER BY captured_ts DESC",
                                (self.user_scope,))

        kept = top_of_matches(ids, matched, query, searched, lookup, newest_first)
        bodies = dict(conn.execute(
            "SELECT id, body FROM records WHERE +user_scope = ? "
            "AND id IN (SELECT value FROM json_each(?))",
            (self.user_scope, json.dumps(kept)),
        )) if kept else {}
        return tuple(self._parse(bodies[row_id]) for row_id in kept), len(ids)

    def posting_rows(self, terms: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """``[{"term", "records", "memory_ids"}]`` from the term table, for a notebook.

        The same shape as ``InvertedIndex.posting_rows``: every term of the scope
        (sorted) or the ``terms`` asked for, in that order.
        """
        conn = self._connect(create=False)
        found: dict[str, list[int]] = {}
        with self._failures("read"):
            if conn is not None:
                for term, blob in conn.execute(
                    "SELECT t.term, p.docs FROM terms t JOIN postings p ON p.term_id = t.id "
                    "WHERE t.user_scope = ? ORDER BY t.term, p.first_id", (self.user_scope,),
                ):
                    found.setdefault(term, []).extend(unpack_ids(blob))
            every = sorted({i for ids in found.values() for i in ids})
            names = dict(conn.execute(
                "SELECT id, memory_id FROM records WHERE +user_scope = ? "
                "AND id IN (SELECT value FROM json_each(?))", (self.user_scope, json.dumps(every)),
            )) if conn is not None and every else {}
        wanted = sorted(found) if terms is None else list(terms)
        return [
            {"term": term, "records": len(found.get(term, ())),
             "memory_ids": [names[i] for i in found.get(term, ())]}
            for term in wanted
        ]

    def scan_candidates(self, query: RecallQuery) -> CandidateScan:
        """Every candidate, as the reference scan gives them, found through the term table."""
        return self._scan(query, top=False)

    def scan_top_candidates(self, query: RecallQuery) -> CandidateScan:
        """Only the baseline ranker's top ``query.limit`` candidates; exact counts."""
        return self._scan(query, top=True)

    def existing_ids(self, memory_ids: Sequence[str]) -> set[str]:
        """Which of ``memory_ids`` this scope already holds."""
        conn = self._connect(create=False)
        if conn is None:
            return set()
        found: set[str] = set()
        with self._failures("read"):
            for part in _chunks(list(memory_ids)):
                marks = ",".join("?" * len(part))
                found.update(row[0] for row in conn.execute(
                    "SELECT memory_id FROM records WHERE user_scope = ? "
                    f"AND memory_id IN ({marks})",
                    (self.user_scope, *part),
                ))
        return found

    # -- writing ----------------------------------------------------------------------

    def _append_batch(self, batch: Sequence[StoredMemory]) -> None:
        conn = self._connect(create=True)
        assert conn is not None
        scope = self.user_scope
        new_terms: dict[str, int] = {}
        with self._failures("write"):
            conn.execute("BEGIN IMMEDIATE")
        try:
            state = _State(conn, scope, batch)
            self.check_batch(batch, state)
            (next_id,) = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM records").fetchone()
            rows = []
            d_retracted = 0
            conversations: list[tuple[int, StoredMemory]] = []
            for row_id, record in enumerate(batch, next_id):
                captured = record.captured_datetime
                rows.append((
                    row_id, scope, record.memory_id, record.kind.value, captured.timestamp(),
                    micros_of(captured), record.retracts, record_json(record),
                ))
                if record.kind is MemoryKind.CONVERSATION:
                    conversations.append((row_id, record))
            conn.executemany("INSERT INTO records VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
            stats = term_stats(record for _, record in conversations)
            pending = [
                (row_id, tokens)
                for (row_id, _), (tokens, _) in zip(conversations, stats, strict=True)
            ]
            d_searched = len(pending)
            d_tokens = sum(len(tokens) for tokens, _ in stats)
            d_content = sum(content for _, content in stats)
            term_id = self._term_resolver(
                conn, set(chain.from_iterable(tokens for tokens, _ in stats)), new_terms
            )
            # One run per term for the whole batch, its ids ascending (append order).
            conn.executemany("INSERT INTO postings VALUES (?, ?, ?)", [
                (tid, unpack_ids(docs[:8])[0], docs)  # first_id: its first id
                for tid, docs in runs_by_term(pending, term_id, "<i8")
            ])
            # Retractions: the target leaves the postings (and the counts) in this same
            # transaction. Its own record row stays as it was written.
            batch_rows = {r.memory_id: (next_id + i, r) for i, r in enumerate(batch)}
            for record in batch:
                if record.kind is not MemoryKind.RETRACTION or record.retracts is None:
                    continue
                target = record.retracts
                if target in batch_rows:
                    row_id, target_record = batch_rows[target]
                elif target in state.rows:
                    row_id, body = state.rows[target]
                    target_record = self._parse(body)
                else:
                    continue
                if target_record.kind is not MemoryKind.CONVERSATION:
                    continue
                terms, n_tokens, n_content = record_stats(target_record)
                ids = self._term_resolver(conn, terms, new_terms)
                for term in terms:
                    self._drop_posting(conn, ids[term], row_id)
                d_searched -= 1
                d_retracted += 1
                d_tokens -= n_tokens
                d_content -= n_content
            conn.execute(
                "INSERT INTO scope_stats VALUES (?, ?, ?, ?, ?) ON CONFLICT (user_scope) "
                "DO UPDATE SET searched = searched + excluded.searched, "
                "retracted = retracted + excluded.retracted, tokens = tokens + excluded.tokens, "
                "content_tokens = content_tokens + excluded.content_tokens",
                (scope, d_searched, d_retracted, d_tokens, d_content),
            )
            conn.execute("COMMIT")
        except BaseException as exc:
            self._end(conn)
            if isinstance(exc, sqlite3.IntegrityError):
                # Another writer's row won the race for an id (not possible under BEGIN
                # IMMEDIATE, but the constraint is the last word).
                raise RemoteMemoryDuplicateError([r.memory_id for r in batch]) from None
            if isinstance(exc, sqlite3.Error):
                raise _sqlite_error(self.path, "write", exc) from None
            raise
        # Only committed term ids are remembered: a rolled-back id may be reused.
        self._term_ids.update(new_terms)

    def _drop_posting(self, conn: sqlite3.Connection, term_id: int, row_id: int) -> None:
        """Take ``row_id`` out of the run of ``term_id`` that holds it."""
        found = conn.execute(
            "SELECT p.first_id, p.docs FROM postings p JOIN terms t ON t.id = p.term_id "
            "WHERE t.user_scope = ? AND p.term_id = ? AND p.first_id <= ? "
            "ORDER BY p.first_id DESC LIMIT 1",
            (self.user_scope, term_id, row_id),
        ).fetchone()
        if found is None:
            return
        first_id, blob = found
        rest = run_without(blob, row_id, "<i8")
        if rest is None:
            return
        if rest:
            conn.execute(
                "UPDATE postings SET docs = ? WHERE term_id = ? AND first_id = ?",
                (rest, term_id, first_id),
            )
        else:
            conn.execute(
                "DELETE FROM postings WHERE term_id = ? AND first_id = ?", (term_id, first_id)
            )

    def _term_resolver(
        self, conn: sqlite3.Connection, terms: set[str], new_terms: dict[str, int]
    ) -> dict[str, int]:
        """Term ids for ``terms`` in this scope, creating the missing ones (in the transaction)."""
        known = self._term_ids
        out: dict[str, int] = {}
        missing = []
        for term in terms:
            tid = known.get(term)
            if tid is None:
                tid = new_terms.get(term)
            if tid is None:
                missing.append(term)
            else:
                out[term] = tid
        if missing:
            for part in _chunks(missing):
                marks = ",".join("?" * len(part))
                for term, tid in conn.execute(
                    f"SELECT term, id FROM terms WHERE user_scope = ? AND term IN ({marks})",
                    (self.user_scope, *part),
                ):
                    out[term] = tid
                    new_terms[term] = tid
            create = [t for t in missing if t not in out]
            if create:
                (next_id,) = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM terms").fetchone()
                rows = [(next_id + i, self.user_scope, t) for i, t in enumerate(create)]
                conn.executemany("INSERT INTO terms VALUES (?, ?, ?)", rows)
                for tid, _, term in rows:
                    out[term] = tid
                    new_terms[term] = tid
        return out

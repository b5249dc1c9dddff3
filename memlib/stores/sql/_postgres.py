"""The PostgreSQL dialect of the SQL store [beyond]: a memory service shared by many agents.

``open_store("postgresql://user@host:5432/db?schema=memlib", user_id=...)``; ``schema``
(default ``memlib``) is memlib's own URL parameter, taken out before libpq. ``memlib
--store URL db init`` creates and upgrades the schema; a store refuses one not initialised
or newer than it knows. psycopg 3 is imported only when a PostgreSQL store is opened."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from ..._vectors import Embedder
from ...errors import (
    RemoteMemoryCorruptionError,
    RemoteMemoryError,
    RemoteMemoryStorageError,
    RemoteMemoryValidationError,
)
from .._base import Clock
from ._common import RecordRow, Run, SqlMemoryStore, driver_error
from ._schema import POSTGRES, SCHEMA_VERSION

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
# Records per batch above which they are staged by COPY (tests lower it).
_STAGE_FROM = 64
# A ``RecordRow``'s columns and their types.
_COLUMNS = "memory_id, kind, captured_ts, captured_us, retracts, body, tokens, content_tokens"
_TYPES = ("text", "text", "float8", "int8", "text", "text", "int4", "int4")
# What starts a binary COPY stream: the signature, then flags (4 bytes) and the length
# of a header extension (4 bytes) that is skipped.
_COPY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
_COPY_HEADER = len(_COPY_SIGNATURE) + 8

# SQLSTATE (exact, then its two-character class) → the cause named. Classes 08 and 57P
# (connection failure, server shutdown, pg_terminate_backend) mean the connection is gone.
_CAUSES = {
    "53100": "disk full",
    "53200": "out of memory",
    "53300": "too many connections",
    "53": "out of resources",
    "25006": "read-only",
    "55P03": "locked: lock timeout",
    "57014": "statement cancelled or timed out",
    "40001": "conflict with a concurrent transaction",
    "40P01": "deadlock",
    **dict.fromkeys(("57P01", "57P02", "08"), "connection lost"),
    "57P03": "server not accepting connections",
    **dict.fromkeys(("58", "HV"), "I/O error"),
}
_CORRUPTION = {"XX001": "data corrupted", "XX002": "index corrupted"}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _pg_error(exc: Exception, where: str) -> RemoteMemoryError:
    """A psycopg error as memlib's: ``WHERE: CAUSE (server's first line)``."""
    state = getattr(exc, "sqlstate", None) or ""
    detail = _first_line(exc)
    if state in _CORRUPTION:
        return driver_error(where, detail, _CORRUPTION[state], corrupt=True)
    cause = _CAUSES.get(state) or _CAUSES.get(state[:2])
    if cause is None and not state and isinstance(exc, _psycopg().OperationalError):
        cause = "connection lost"  # raised by libpq itself: no SQLSTATE
    return driver_error(where, f"PostgreSQL error: {detail}" if cause is None else detail, cause)


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise RemoteMemoryError(
            "the PostgreSQL backend needs psycopg: pip install 'memlib[postgres]'"
        ) from None
    return psycopg


def split_url(url: str) -> tuple[str, str | None]:
    """``(libpq URL without memlib's parameters, schema or None)``."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise RemoteMemoryValidationError(f"not a PostgreSQL URL: {url!r}")
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((value for key, value in reversed(query) if key == "schema"), None)
    kept = [(key, value) for key, value in query if key != "schema"]
    # libpq decodes %XX only: a space must stay %20, never the "+" of a form.
    return urlunsplit(parts._replace(query=urlencode(kept, quote_via=quote))), schema


def _connect(dsn: str, connect_timeout: float) -> Any:
    psycopg = _psycopg()
    try:
        return psycopg.connect(dsn, autocommit=True, connect_timeout=int(connect_timeout))
    except psycopg.Error as exc:
        message = f"cannot connect to PostgreSQL: {_first_line(exc)}"
        raise RemoteMemoryStorageError(message) from None


def init_schema(
    url: str, *, schema: str | None = None, connect_timeout: float = 10
) -> tuple[int, int]:
    return PostgresMemoryStore(
        url, user_id="memlib-db-init", schema=schema, connect_timeout=connect_timeout
    ).init_schema()


def _copy_in(conn: Any, target: str, types: list[str], rows: Iterable[Sequence[Any]]) -> None:
    """Write ``rows`` into ``target`` (a table and its columns) by binary COPY."""
    with conn.cursor().copy(f"COPY {target} FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(types)
        for row in rows:
            copy.write_row(row)


def _copied_pairs(chunks: Iterable[Any], where: str) -> Iterator[tuple[str, bytes]]:
    """``(text, bytea)`` rows of a binary COPY stream, whatever its chunking (libpq gives
    one row per chunk, the header with the first)."""
    buffer, started = b"", False
    for chunk in chunks:
        buffer = buffer + bytes(chunk) if buffer else bytes(chunk)
        pos, end = 0, len(buffer)
        if not started:
            if end < _COPY_HEADER:
                continue
            if not buffer.startswith(_COPY_SIGNATURE):
                raise RemoteMemoryCorruptionError(f"not a binary COPY stream from {where}")
            pos = _COPY_HEADER + int.from_bytes(buffer[_COPY_HEADER - 4 : _COPY_HEADER], "big")
            if end < pos:
                continue
            started = True
        while pos + 2 <= end:
            fields = int.from_bytes(buffer[pos : pos + 2], "big", signed=True)
            if fields == -1:  # the trailer
                pos += 2
                continue
            if fields != 2:
                raise RemoteMemoryCorruptionError(f"a vector row of {fields} fields from {where}")
            if pos + 6 > end:
                break
            text_end = pos + 6 + int.from_bytes(buffer[pos + 2 : pos + 6], "big")
            if text_end + 4 > end:
                break
            stop = text_end + 4 + int.from_bytes(buffer[text_end : text_end + 4], "big")
            if stop > end:
                break
            yield buffer[pos + 6 : text_end].decode("utf-8"), buffer[text_end + 4 : stop]
            pos = stop
        buffer = buffer[pos:]
    if buffer or not started:
        raise RemoteMemoryCorruptionError(f"a binary COPY stream from {where} ends mid-row")


class PostgresMemoryStore(SqlMemoryStore):
    """``PostgresMemoryStore("postgresql://…[?schema=NAME]", user_id="alice")``."""

    backend = "postgresql"

    PARAM = "%s"
    ANY = "= ANY(%s)"
    SOURCE_ID = "(({a}.body)::jsonb -> 'source' ->> 'source_id')"
    META = "{s}meta"
    HAS_META = "SELECT to_regclass('{s}meta')"
    SCHEMA = POSTGRES
    RUN_FORMAT = ">i8"  # int8send's byte order
    RUNS_OF_TERMS = "SELECT record_ids FROM {s}postings WHERE user_scope = ? AND term {any}"
    ALL_RUNS = (
        "SELECT term, record_ids FROM {s}postings WHERE user_scope = ? ORDER BY term, first_id"
    )
    TF_RUNS_OF_TERMS = (
        "SELECT term, record_ids, tfs, lengths FROM {s}postings WHERE user_scope = ? "
        "AND term {any} ORDER BY term, first_id"
    )
    RUNS_HOLDING = (
        "SELECT DISTINCT ON (term) term, first_id, record_ids, tfs, lengths FROM {s}postings "
        "WHERE user_scope = ? AND term {any} AND first_id <= ? ORDER BY term, first_id DESC"
    )
    _RUN_KEY = "WHERE user_scope = ? AND term = ? AND first_id = ?"
    SET_RUN = f"UPDATE {{s}}postings SET record_ids = ?, tfs = ?, lengths = ? {_RUN_KEY}"
    DROP_RUN = f"DELETE FROM {{s}}postings {_RUN_KEY}"

    def __init__(
        self,
        url: str,
        *,
        user_id: str,
        clock: Clock | None = None,
        schema: str | None = None,
        connect_timeout: float = 10,
        connection: Any = None,
        embedder: Embedder | None = None,
        project: str | None = None,
    ) -> None:
        """``connection``: an open autocommit psycopg connection to share (not closed here)."""
        super().__init__(user_id=user_id, clock=clock, embedder=embedder, project=project)
        self._dsn, from_url = split_url(url)
        self.schema = schema or from_url or "memlib"
        if not _SCHEMA_NAME.fullmatch(self.schema):
            raise RemoteMemoryValidationError(
                f"schema name must be lower-case letters, digits and _: {self.schema!r}"
            )
        self.schema_label = f"PostgreSQL schema {self.schema}"
        self._newer = f"{self.schema_label} has version {{}}"
        self._prefix = f"{self.schema}."
        self._location = f"{self.schema}.records"
        self._connect_timeout = connect_timeout
        self._shared = connection

    def __repr__(self) -> str:
        return f"PostgresMemoryStore(user_scope={self._key!r}, schema={self.schema!r})"

    def _open(self, *, create: bool) -> Any:
        shared = self._shared is not None
        conn = self._shared if shared else _connect(self._dsn, self._connect_timeout)
        if not conn.autocommit:
            raise RemoteMemoryValidationError(
                "a shared PostgreSQL connection must be in autocommit mode"
            )
        try:
            with self._failures("open"):
                version = self._version(conn)
            if version > SCHEMA_VERSION:
                raise self._too_new(version)
            if version < SCHEMA_VERSION:
                raise RemoteMemoryError(
                    f"PostgreSQL schema {self.schema} is not initialised (version {version}, "
                    f"need {SCHEMA_VERSION}): run `memlib --store URL db init`"
                )
        except BaseException:
            if not shared:
                conn.close()
            raise
        return conn

    def refresh_statistics(self) -> None:
        """ANALYZE what a bulk write grew: until autovacuum gets to a table the planner
        guesses, and scanned a scope for a neighbour lookup (4.9 ms against 0.5 ms at 10k)
        and sorted every vector on disk to load them (1.2 s against 0.26 s at 100k)."""
        conn = self._connection()
        if conn is None:
            return
        with self._failures("analyze"):
            for table in ("records", "postings", "vectors"):
                conn.execute(f"ANALYZE {self._prefix}{table}")

    def _alive(self, conn: Any) -> bool:
        return not conn.closed

    def _release(self, conn: Any) -> None:
        if conn is not self._shared:
            conn.close()

    @contextmanager
    def _own_connection(self, action: str) -> Iterator[Any]:
        """A connection of its own, for the schema itself (``_open`` needs it current)."""
        conn = _connect(self._dsn, self._connect_timeout)
        try:
            with self._failures(action):
                yield conn
        finally:
            conn.close()

    def init_schema(self) -> tuple[int, int]:
        with self._own_connection("initialise") as conn, conn.transaction():
            # One initialiser at a time per database.
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"memlib:{self.schema}",))
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {self.schema}")
            return self._migrate(conn)

    def schema_version(self) -> int:
        """The schema's version (0: not initialised), read without needing it current."""
        with self._own_connection("read") as conn:
            return self._version(conn)

    @contextmanager
    def _failures(self, action: str) -> Iterator[None]:
        try:
            yield
        except _psycopg().Error as exc:
            # A connection left closed or broken is dropped: the next call connects again.
            # Nothing is retried: a write whose COMMIT got no answer may have landed.
            conn = self._conn
            if conn is not None and (conn.closed or getattr(conn, "broken", False)):
                self.close()
            raise _pg_error(exc, f"cannot {action} PostgreSQL schema {self.schema}") from None

    @contextmanager
    def _transaction(self, conn: Any, *, write: bool) -> Iterator[None]:
        with self._failures("write" if write else "read"), conn.transaction():
            if not write:
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            yield

    def _blobs(self, conn: Any) -> Any:
        return conn.cursor(binary=True)

    def _vector_rows(self, conn: Any) -> Iterable[tuple[str, bytes]]:
        """The scope's vectors by binary ``COPY``: no result held whole beside the matrix (a
        client-side one was 1.5 GB at 1M records of 384 dimensions) and no driver row per
        vector (a server-side cursor took 6.9 s at 1M against 5.8 s: docs/benchmarks.md)."""
        rows = self._q(
            "SELECT r.memory_id, v.vector FROM {s}vectors v JOIN {s}records r "
            "ON r.id = v.record_id WHERE v.user_scope = ? ORDER BY v.record_id"
        )
        statement = f"COPY ({rows}) TO STDOUT (FORMAT BINARY)"
        with conn.cursor().copy(statement, (self._key,)) as copy:
            yield from _copied_pairs(copy, self._location)

    def _insert_records(self, conn: Any, rows: Sequence[RecordRow]) -> dict[str, int]:
        if len(rows) > _STAGE_FROM:
            # A big batch goes in by binary COPY (several times faster than unnesting
            # arrays) into a table of this transaction, and on from there.
            typed = ", ".join(f"{c} {t}" for c, t in zip(_COLUMNS.split(", "), _TYPES, strict=True))
            conn.execute(
                f"CREATE TEMP TABLE memlib_incoming ({typed}, ord bigserial) ON COMMIT DROP"
            )
            _copy_in(conn, f"memlib_incoming ({_COLUMNS})", list(_TYPES), rows)
            source = "memlib_incoming AS t"
            params: tuple[Any, ...] = (self._key,)
        else:
            arrays = ", ".join(f"%s::{t}[]" for t in _TYPES)
            source = f"unnest({arrays}) WITH ORDINALITY AS t({_COLUMNS}, ord)"
            params = (self._key, *(list(column) for column in zip(*rows, strict=True)))
        inserted = conn.cursor(binary=True).execute(
            f"INSERT INTO {self.schema}.records (user_scope, {_COLUMNS}) SELECT %s, {_COLUMNS} "
            f"FROM {source} ORDER BY t.ord "
            "ON CONFLICT (user_scope, memory_id) DO NOTHING RETURNING id, memory_id",
            params,
        )
        return {memory_id: row_id for row_id, memory_id in inserted.fetchall()}

    def _add_vectors(self, conn: Any, rows: Sequence[tuple[int, bytes]]) -> None:
        target, scope = f"{self.schema}.vectors (record_id, user_scope, vector)", self._key
        _copy_in(conn, target, ["int8", "text", "bytea"], ((r, scope, blob) for r, blob in rows))

    def _add_runs(self, conn: Any, scope: str, runs: Sequence[Run]) -> None:
        target = f"{self.schema}.postings (user_scope, term, first_id, record_ids, tfs, lengths)"
        types = ["text", "text", "int8", "bytea", "bytea", "bytea"]
        _copy_in(conn, target, types, ((scope, *run) for run in runs))

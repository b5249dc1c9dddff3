"""The PostgreSQL store [beyond]: a remote memory service shared by many agents (SPEC §2).

``open_store("postgresql://user@host:5432/db?schema=memlib", user_id=...)``. The schema
is created and upgraded by ``memlib --store URL db init`` (versioned in ``meta``); a
store refuses to work on a schema that was not initialised or is newer than it knows.
``schema`` (default ``memlib``) is memlib's own URL parameter and is taken out of the
URL before it reaches libpq.

Every statement names the user scope in its ``WHERE`` clause: one database serves many
users, and no query can see another scope's rows. A write is one transaction that locks
the scope's ``scope_stats`` row (writers of one scope queue there, so the shared write
rules see a state that cannot change under them), checks the batch, inserts the records
with ``INSERT … ON CONFLICT DO NOTHING`` — a row that did not go in is a duplicate, and
the whole batch is rolled back — and adds the records' terms to the term index: one
packed run of record ids per term per batch (a big batch's rows reach the INSERT by
binary ``COPY`` into a table of the transaction). A recall reads the runs of its terms,
counts matches itself and looks up only the records the bounded top-k walk needs, as
the SQLite store does.

psycopg 3 is imported only when a PostgreSQL store is opened. Its errors never reach
the caller as they are: each comes back as one line naming the cause (``_pg_error``) —
disk full, read-only, a lock or statement timeout, a lost connection, an I/O error as
``RemoteMemoryStorageError``, damaged data as ``RemoteMemoryCorruptionError``. A failed
write has been rolled back by the server; a lost connection is dropped, and the next
call opens a new one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from itertools import chain
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

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
from .base import BaseMemoryStore, Clock, latest_profile_of

__all__ = ["DEFAULT_SCHEMA", "SCHEMA_VERSION", "PostgresMemoryStore", "init_schema", "split_url"]

SCHEMA_VERSION = 2
DEFAULT_SCHEMA = "memlib"
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
# Records per batch above which they are staged by COPY (tests lower it).
_STAGE_FROM = 64

# Each entry upgrades the schema from version i to i + 1; "{s}" is the schema name.
_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE {s}.records (
            id          bigserial PRIMARY KEY,           -- append order
            user_scope  text NOT NULL,
            memory_id   text COLLATE "C" NOT NULL,
            kind        text NOT NULL,
            captured_ts double precision NOT NULL,       -- captured_at.timestamp(), as rank_key
            captured_us bigint NOT NULL,                 -- captured_at in microseconds, exact
            retracts    text COLLATE "C",
            body        text NOT NULL,                   -- the record's JSON, as in JSONL
            UNIQUE (user_scope, memory_id)
        )""",
        (
            "CREATE INDEX records_scope_kind ON {s}.records (user_scope, kind) "
            "WHERE kind <> 'conversation'"
        ),
        (
            "CREATE INDEX records_retracts ON {s}.records (user_scope, retracts) "
            "WHERE retracts IS NOT NULL"
        ),
        """CREATE TABLE {s}.postings (
            user_scope text NOT NULL,
            term       text COLLATE "C" NOT NULL,
            record_id  bigint NOT NULL,
            PRIMARY KEY (user_scope, term, record_id)
        )""",
        """CREATE TABLE {s}.scope_stats (
            user_scope     text PRIMARY KEY,
            searched       bigint NOT NULL DEFAULT 0,
            retracted      bigint NOT NULL DEFAULT 0,
            tokens         bigint NOT NULL DEFAULT 0,
            content_tokens bigint NOT NULL DEFAULT 0
        )""",
    ),
    # Version 2: one postings row per (term, batch) holding the batch's record ids, not
    # one per (term, record). A 10k-record batch writes about 15× fewer rows; a recall
    # reads a common term's ids from a few runs and counts matches itself, and finds a
    # big group's most recent records through records_recent instead of joining every
    # candidate (the SQLite store's layout and walk).
    (
        """CREATE TABLE {s}.posting_runs (
            user_scope text NOT NULL,
            term       text COLLATE "C" NOT NULL,
            first_id   bigint NOT NULL,      -- the smallest id the run was written with
            record_ids bytea NOT NULL,       -- ascending ids, 8 bytes each, big-endian
            PRIMARY KEY (user_scope, term, first_id)
        )""",
        """INSERT INTO {s}.posting_runs
            SELECT user_scope, term, min(record_id),
                   string_agg(int8send(record_id), ''::bytea ORDER BY record_id)
            FROM {s}.postings GROUP BY user_scope, term""",
        "DROP TABLE {s}.postings",
        "ALTER TABLE {s}.posting_runs RENAME TO postings",
        "CREATE INDEX records_recent ON {s}.records (user_scope, captured_ts)",
    ),
)
# How a run's ids are packed (``memlib.index.pack_docs``): int8send's byte order.
_RUN = ">i8"


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
    "57P01": "connection lost",
    "57P02": "connection lost",
    "57P03": "server not accepting connections",
    "08": "connection lost",
    "58": "I/O error",
    "HV": "I/O error",
}
_CORRUPTION = {"XX001": "data corrupted", "XX002": "index corrupted"}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _pg_error(exc: Exception, where: str) -> RemoteMemoryError:
    """A psycopg error as memlib's: ``WHERE: CAUSE (server's first line)``."""
    psycopg = _psycopg()
    state = getattr(exc, "sqlstate", None) or ""
    detail = _first_line(exc)
    if state in _CORRUPTION:
        return RemoteMemoryCorruptionError(f"{where}: {_CORRUPTION[state]} ({detail})")
    cause = _CAUSES.get(state) or _CAUSES.get(state[:2])
    if cause is None and not state and isinstance(exc, psycopg.OperationalError):
        cause = "connection lost"  # raised by libpq itself: no SQLSTATE
    if cause is not None:
        return RemoteMemoryStorageError(f"{where}: {cause} ({detail})")
    return RemoteMemoryError(f"{where}: PostgreSQL error: {detail}")


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
    schema = None
    kept = []
    for key, value in query:
        if key == "schema":
            schema = value
        else:
            kept.append((key, value))
    # libpq decodes %XX only: a space must stay %20, never the "+" of a form.
    return urlunsplit(parts._replace(query=urlencode(kept, quote_via=quote))), schema


def _check_schema_name(name: str) -> str:
    if not _SCHEMA_NAME.fullmatch(name):
        raise RemoteMemoryValidationError(
            f"schema name must be lower-case letters, digits and _: {name!r}"
        )
    return name


def _connect(dsn: str, connect_timeout: float) -> Any:
    psycopg = _psycopg()
    try:
        return psycopg.connect(dsn, autocommit=True, connect_timeout=int(connect_timeout))
    except psycopg.Error as exc:
        message = f"cannot connect to PostgreSQL: {_first_line(exc)}"
        raise RemoteMemoryStorageError(message) from None


def _version(conn: Any, schema: str) -> int:
    row = conn.execute("SELECT to_regclass(%s)", (f"{schema}.meta",)).fetchone()
    if row[0] is None:
        return 0
    row = conn.execute(f"SELECT value FROM {schema}.meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row else 0


def init_schema(
    url: str, *, schema: str | None = None, connect_timeout: float = 10
) -> tuple[int, int]:
    """Create or upgrade memlib's schema; ``(version before, version after)``."""
    dsn, from_url = split_url(url)
    name = _check_schema_name(schema or from_url or DEFAULT_SCHEMA)
    psycopg = _psycopg()
    conn = _connect(dsn, connect_timeout)
    try:
        with conn.transaction():
            # One initialiser at a time per database.
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"memlib:{name}",))
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {name}")
            before = _version(conn, name)
            if before > SCHEMA_VERSION:
                raise RemoteMemoryError(
                    f"PostgreSQL schema {name} has version {before}; this memlib knows up to "
                    f"{SCHEMA_VERSION}: upgrade memlib"
                )
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {name}.meta "
                "(key text PRIMARY KEY, value text NOT NULL)"
            )
            for statements in _MIGRATIONS[before:]:
                for statement in statements:
                    conn.execute(statement.format(s=name))
            conn.execute(
                f"INSERT INTO {name}.meta (key, value) VALUES ('schema_version', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(SCHEMA_VERSION),),
            )
    except psycopg.Error as exc:
        raise _pg_error(exc, f"cannot initialise PostgreSQL schema {name}") from None
    finally:
        conn.close()
    return before, SCHEMA_VERSION


class _State:
    """The write rules' view of the store, read inside the writing transaction."""

    def __init__(self, store: PostgresMemoryStore, conn: Any, batch: Sequence[StoredMemory]):
        s = store.schema
        ids = list({r.memory_id for r in batch} | {r.retracts for r in batch if r.retracts})
        self.kinds: dict[str, MemoryKind] = {}
        self.rows: dict[str, tuple[int, str]] = {}
        self.retracted: set[str] = set()
        for memory_id, kind, row_id, body, target in conn.execute(
            f"SELECT memory_id, kind, id, body, NULL FROM {s}.records "
            "WHERE user_scope = %s AND memory_id = ANY(%s) "
            f"UNION ALL SELECT NULL, NULL, NULL, NULL, retracts FROM {s}.records "
            "WHERE user_scope = %s AND retracts = ANY(%s)",
            (store.user_scope, ids, store.user_scope, ids),
        ):
            if target is not None:
                self.retracted.add(target)
            else:
                self.kinds[memory_id] = MemoryKind(kind)
                self.rows[memory_id] = (row_id, body)

    def kind_of(self, memory_id: str) -> MemoryKind | None:
        return self.kinds.get(memory_id)

    def is_retracted(self, memory_id: str) -> bool:
        return memory_id in self.retracted


class PostgresMemoryStore(BaseMemoryStore):
    """``PostgresMemoryStore("postgresql://…[?schema=NAME]", user_id="alice")``."""

    backend = "postgresql"

    def __init__(
        self, url: str, *, user_id: str, clock: Clock | None = None, schema: str | None = None,
        connect_timeout: float = 10, connection: Any = None,
    ) -> None:
        """``connection``: an open autocommit psycopg connection to share (not closed here)."""
        super().__init__(user_id=user_id, clock=clock)
        self._dsn, from_url = split_url(url)
        self.schema = _check_schema_name(schema or from_url or DEFAULT_SCHEMA)
        self._connect_timeout = connect_timeout
        self._conn: Any = None
        self._shared = connection

    def __repr__(self) -> str:
        return f"PostgresMemoryStore(user_scope={self.user_scope!r}, schema={self.schema!r})"

    # -- connection -------------------------------------------------------------------

    def _connection(self) -> Any:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        psycopg = _psycopg()
        shared = self._shared is not None
        conn = self._shared if shared else _connect(self._dsn, self._connect_timeout)
        if not conn.autocommit:
            raise RemoteMemoryValidationError(
                "a shared PostgreSQL connection must be in autocommit mode"
            )
        try:
            version = _version(conn, self.schema)
        except psycopg.Error as exc:
            if not shared:
                conn.close()
            raise _pg_error(exc, f"cannot open PostgreSQL schema {self.schema}") from None
        if version != SCHEMA_VERSION:
            if conn is not self._shared:
                conn.close()
            if version > SCHEMA_VERSION:
                raise RemoteMemoryError(
                    f"PostgreSQL schema {self.schema} has version {version}; this memlib "
                    f"knows up to {SCHEMA_VERSION}: upgrade memlib"
                )
            raise RemoteMemoryError(
                f"PostgreSQL schema {self.schema} is not initialised (version {version}, "
                f"need {SCHEMA_VERSION}): run `memlib --store URL db init`"
            )
        self._conn = conn
        return conn

    def close(self) -> None:
        if self._conn is not None:
            if self._conn is not self._shared:
                self._conn.close()
            self._conn = None

    @contextmanager
    def _failures(self, action: str) -> Iterator[None]:
        """psycopg's errors inside the block as memlib's, naming the cause.

        A connection the error left closed or broken is dropped here, so that the next
        call connects again instead of failing the same way forever. Nothing is retried:
        a write whose COMMIT got no answer may or may not have landed.
        """
        psycopg = _psycopg()
        try:
            yield
        except psycopg.Error as exc:
            conn = self._conn
            if conn is not None and (conn.closed or getattr(conn, "broken", False)):
                self.close()
            raise _pg_error(exc, f"cannot {action} PostgreSQL schema {self.schema}") from None

    # -- reading ----------------------------------------------------------------------

    def _parse(self, body: str) -> StoredMemory:
        try:
            record = StoredMemory.from_dict(loads(body))
        except (ValueError, TypeError, RemoteMemoryValidationError,
                RemoteMemoryCorruptionError) as exc:
            # ValueError: invalid JSON, or JSON past safejson's depth and number limits.
            raise RemoteMemoryCorruptionError(
                f"invalid record in {self.schema}.records: {exc}"
            ) from None
        if record.user_scope != self.user_scope:
            raise RemoteMemoryScopeError(f"memory {record.memory_id} belongs to another user scope")
        return record

    def _read(self, sql: str, params: Sequence[Any]) -> tuple[StoredMemory, ...]:
        conn = self._connection()
        with self._failures("read"):
            rows = conn.execute(sql.format(s=self.schema), params).fetchall()
        return tuple(self._parse(body) for (body,) in rows)

    def read_all(self) -> tuple[StoredMemory, ...]:
        return self._read(
            "SELECT body FROM {s}.records WHERE user_scope = %s ORDER BY id", (self.user_scope,)
        )

    def records(self, kind: MemoryKind | str | None = None) -> tuple[StoredMemory, ...]:
        if kind is None:
            return self.read_all()
        return self._read(
            "SELECT body FROM {s}.records WHERE user_scope = %s AND kind = %s ORDER BY id",
            (self.user_scope, MemoryKind(kind).value),
        )

    def latest_profile(self) -> StoredMemory | None:
        return latest_profile_of(self._read(
            "SELECT body FROM {s}.records WHERE user_scope = %s AND kind <> 'conversation' "
            "ORDER BY id", (self.user_scope,),
        ))

    def _scan(self, query: RecallQuery, *, top: bool) -> CandidateScan:
        conn = self._connection()
        s, scope = self.schema, self.user_scope
        with self._failures("read"), conn.transaction():
            # One snapshot for the counts and the candidates.
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            if query.user_scope != scope:
                row = conn.execute(
                    f"SELECT memory_id FROM {s}.records WHERE user_scope = %s "
                    "ORDER BY id LIMIT 1", (scope,),
                ).fetchone()
                if row is not None:
                    raise RemoteMemoryScopeError(f"memory {row[0]} belongs to another user scope")
            stats = conn.execute(
                f"SELECT searched, retracted, tokens, content_tokens FROM {s}.scope_stats "
                "WHERE user_scope = %s", (scope,),
            ).fetchone()
            searched, retracted, tokens, content_tokens = (int(v) for v in stats or (0,) * 4)
            runs = [bytes(blob) for (blob,) in conn.cursor(binary=True).execute(
                f"SELECT record_ids FROM {s}.postings WHERE user_scope = %s AND term = ANY(%s)",
                (scope, list(query.terms)),
            )]
            ids, matched = count_matches(runs, _RUN)
            if top:
                records = self._top(conn, query, ids, matched, searched)
            else:
                records = self._bodies(conn, [int(i) for i in ids])
        return CandidateScan(
            candidates=candidates_for(query, records),
            searched_records=searched,
            candidate_records=len(ids),
            retracted_records=retracted,
            searched_token_count=tokens,
            searched_content_token_count=content_tokens,
        )

    def _bodies(self, conn: Any, ids: Sequence[int]) -> tuple[StoredMemory, ...]:
        """The records of ``ids`` (this scope's only), in the order of ``ids``."""
        if not ids:
            return ()
        bodies = dict(conn.execute(
            f"SELECT id, body FROM {self.schema}.records WHERE user_scope = %s AND id = ANY(%s)",
            (self.user_scope, list(ids)),
        ).fetchall())
        return tuple(self._parse(bodies[row_id]) for row_id in ids)

    def _top(
        self, conn: Any, query: RecallQuery, ids: Any, matched: Any, searched: int
    ) -> tuple[StoredMemory, ...]:
        columns = f"SELECT id, captured_ts, captured_us, memory_id FROM {self.schema}.records "
        scope, limit = self.user_scope, query.limit

        def lookup(members: Sequence[int]) -> list[Any]:
            by_id = columns + "WHERE user_scope = %s AND id = ANY(%s)"
            rows = conn.execute(
                by_id + " ORDER BY captured_ts DESC LIMIT %s", (scope, list(members), limit),
            ).fetchall()
            if len(rows) == limit and len(members) > limit:
                rows = conn.execute(  # every tie with the last one kept
                    by_id + " AND captured_ts >= %s", (scope, list(members), rows[-1][1]),
                ).fetchall()
            return rows

        def newest_first(budget: int) -> list[Any]:
            return conn.execute(  # index records_recent
                columns + "WHERE user_scope = %s ORDER BY captured_ts DESC LIMIT %s",
                (scope, budget + 2),
            ).fetchall()

        kept = top_of_matches(ids, matched, query, searched, lookup, newest_first)
        return self._bodies(conn, kept)

    def scan_candidates(self, query: RecallQuery) -> CandidateScan:
        """Every candidate, as the reference scan gives them, found through the term index."""
        return self._scan(query, top=False)

    def scan_top_candidates(self, query: RecallQuery) -> CandidateScan:
        """Only the baseline ranker's top ``query.limit`` candidates; exact counts."""
        return self._scan(query, top=True)

    def existing_ids(self, memory_ids: Sequence[str]) -> set[str]:
        """Which of ``memory_ids`` this scope already holds."""
        conn = self._connection()
        with self._failures("read"):
            rows = conn.execute(
                f"SELECT memory_id FROM {self.schema}.records WHERE user_scope = %s "
                "AND memory_id = ANY(%s)", (self.user_scope, list(memory_ids)),
            ).fetchall()
        return {row[0] for row in rows}

    # -- writing ----------------------------------------------------------------------

    def _append_batch(self, batch: Sequence[StoredMemory]) -> None:
        conn = self._connection()
        with self._failures("write"), conn.transaction():
            self._write(conn, batch)

    def _write(self, conn: Any, batch: Sequence[StoredMemory]) -> None:
        s, scope = self.schema, self.user_scope
        # Creates the scope's row or locks it: writers of one scope queue here.
        conn.execute(
            f"INSERT INTO {s}.scope_stats (user_scope) VALUES (%s) "
            "ON CONFLICT (user_scope) DO UPDATE SET user_scope = excluded.user_scope", (scope,)
        )
        state = _State(self, conn, batch)
        self.check_batch(batch, state)
        rows = []
        for record in batch:
            captured = record.captured_datetime
            rows.append((
                record.memory_id, record.kind.value, captured.timestamp(),
                micros_of(captured), record.retracts, record_json(record),
            ))
        if len(rows) > _STAGE_FROM:
            # A big batch goes in by binary COPY (several times faster than unnesting
            # arrays) into a table of this transaction, and on from there.
            conn.execute(
                "CREATE TEMP TABLE memlib_incoming (memory_id text, kind text, ts float8, "
                "us int8, retracts text, body text, ord bigserial) ON COMMIT DROP"
            )
            with conn.cursor().copy(
                "COPY memlib_incoming (memory_id, kind, ts, us, retracts, body) "
                "FROM STDIN (FORMAT BINARY)"
            ) as copy:
                copy.set_types(["text", "text", "float8", "int8", "text", "text"])
                for row in rows:
                    copy.write_row(row)
            source = "memlib_incoming AS t"
            params: tuple[Any, ...] = (scope,)
        else:
            source = (
                "unnest(%s::text[], %s::text[], %s::float8[], %s::int8[], %s::text[], %s::text[]) "
                "WITH ORDINALITY AS t(memory_id, kind, ts, us, retracts, body, ord)"
            )
            params = (scope, *(list(column) for column in zip(*rows, strict=True)))
        inserted = conn.cursor(binary=True).execute(
            f"INSERT INTO {s}.records (user_scope, memory_id, kind, captured_ts, captured_us, "
            f"retracts, body) SELECT %s, t.memory_id, t.kind, t.ts, t.us, t.retracts, t.body "
            f"FROM {source} ORDER BY t.ord "
            "ON CONFLICT (user_scope, memory_id) DO NOTHING RETURNING id, memory_id",
            params,
        ).fetchall()
        if len(inserted) != len(batch):
            # Another writer's row won the race for these ids; the transaction rolls back.
            taken = {memory_id for _, memory_id in inserted}
            raise RemoteMemoryDuplicateError(
                [r.memory_id for r in batch if r.memory_id not in taken]
            )
        row_of = {memory_id: row_id for row_id, memory_id in inserted}
        conversations = [r for r in batch if r.kind is MemoryKind.CONVERSATION]
        stats = term_stats(conversations)
        d_searched, d_retracted = len(conversations), 0
        d_tokens = sum(len(tokens) for tokens, _ in stats)
        d_content = sum(content for _, content in stats)
        pending = [
            (row_of[r.memory_id], tokens)
            for r, (tokens, _) in zip(conversations, stats, strict=True)
        ]
        terms = list(set(chain.from_iterable(tokens for _, tokens in pending)))
        with conn.cursor().copy(
            f"COPY {s}.postings (user_scope, term, first_id, record_ids) FROM STDIN (FORMAT BINARY)"
        ) as copy:
            copy.set_types(["text", "text", "int8", "bytea"])
            # One run per term for the batch.
            for number, run in runs_by_term(pending, {t: i for i, t in enumerate(terms)}, _RUN):
                copy.write_row((scope, terms[number], unpack_docs(run[:8], _RUN)[0], run))
        for record in batch:
            if record.kind is not MemoryKind.RETRACTION or record.retracts is None:
                continue
            target = state.rows.get(record.retracts)
            if target is None:
                continue
            row_id, body = target
            target_record = self._parse(body)
            if target_record.kind is not MemoryKind.CONVERSATION:
                continue
            target_terms, n_tokens, n_content = record_stats(target_record)
            self._drop_postings(conn, target_terms, row_id)
            d_searched -= 1
            d_retracted += 1
            d_tokens -= n_tokens
            d_content -= n_content
        conn.execute(
            f"UPDATE {s}.scope_stats SET searched = searched + %s, retracted = retracted + %s, "
            "tokens = tokens + %s, content_tokens = content_tokens + %s WHERE user_scope = %s",
            (d_searched, d_retracted, d_tokens, d_content, scope),
        )

    def _drop_postings(self, conn: Any, terms: set[str], row_id: int) -> None:
        """Take ``row_id`` out of the run of each of ``terms`` that holds it."""
        s = self.schema
        # A term's runs cover ascending, disjoint id ranges: the one that can hold
        # row_id is the last to start at or before it.
        for term, first_id, blob in conn.cursor(binary=True).execute(
            f"SELECT DISTINCT ON (term) term, first_id, record_ids FROM {s}.postings "
            "WHERE user_scope = %s AND term = ANY(%s) AND first_id <= %s "
            "ORDER BY term, first_id DESC", (self.user_scope, list(terms), row_id),
        ).fetchall():
            rest = run_without(bytes(blob), row_id, _RUN)
            if rest is None:
                continue
            key = (self.user_scope, term, first_id)
            if rest:
                conn.execute(
                    f"UPDATE {s}.postings SET record_ids = %s "
                    "WHERE user_scope = %s AND term = %s AND first_id = %s",
                    (rest, *key),
                )
            else:
                conn.execute(
                    f"DELETE FROM {s}.postings "
                    "WHERE user_scope = %s AND term = %s AND first_id = %s",
                    key,
                )

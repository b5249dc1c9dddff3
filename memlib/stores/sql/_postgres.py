"""The PostgreSQL dialect of the SQL store [beyond]: a memory service shared by many agents.

``open_store("postgresql://user@host:5432/db?schema=memlib", user_id=...)``; ``schema``
(default ``memlib``) is memlib's own URL parameter, taken out before libpq. ``memlib
--store URL db init`` creates and upgrades the schema; a store refuses one not initialised
or newer than it knows. psycopg 3 is imported only when a PostgreSQL store is opened."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from ..._vectors import DenseScores, Embedder, check_model, exact_dot, require_numpy
from ...errors import (
    RemoteMemoryCorruptionError,
    RemoteMemoryError,
    RemoteMemoryStorageError,
    RemoteMemoryValidationError,
)
from ...normalize import RecallQuery
from ...records import StoredMemory
from .._base import Clock
from ._common import RecordRow, Run, SqlMemoryStore, driver_error
from ._known_at import SqlKnownAt
from ._schema import POSTGRES, SCHEMA_VERSION

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
# Records per batch above which they are staged by COPY (tests lower it).
_STAGE_FROM = 64
# A ``RecordRow``'s columns and their types.
_COLUMNS = (
    "memory_id, kind, captured_ts, captured_us, retracts, body, tokens, content_tokens, stored_us"
)
_TYPES = ("text", "text", "float8", "int8", "text", "text", "int4", "int4", "int8")
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


# [beyond] pgvector (issue 36). Where the server has it, ``db init`` gives ``vectors`` an
# ``embedding`` column beside the packed bytes and dense search runs in the database: a new
# process reads the best rows, never every vector. A trigger fills the column from the
# bytes, so every writer keeps it in step (``put_vectors``, an older memlib), and a deleted
# vector takes it along. Exact by default; ``db init --hnsw`` adds an approximate index.
_PGVECTOR = (
    "SELECT default_version, installed_version FROM pg_available_extensions WHERE name = 'vector'"
)
_EMBEDDING = (
    "ALTER TABLE {s}vectors ADD COLUMN IF NOT EXISTS embedding {v}vector",
    # An exact search reads every embedding: it stays in the row, the bytes go out of it.
    "ALTER TABLE {s}vectors ALTER COLUMN embedding SET STORAGE MAIN",
    "ALTER TABLE {s}vectors ALTER COLUMN vector SET STORAGE EXTERNAL",
    # Little-endian float32 bytes as a vector, bit for bit (subnormals and -0 included).
    "CREATE OR REPLACE FUNCTION {s}embedding_of(b bytea) RETURNS {v}vector "
    "LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ SELECT ARRAY(SELECT "
    "((1 - 2 * (w >> 31 & 1)) * CASE WHEN w >> 23 & 255 = 0 THEN (w & 8388607) * 2::float8 ^ -149 "
    "ELSE ((w & 8388607) | 8388608) * 2::float8 ^ ((w >> 23 & 255) - 150) END)::real "
    "FROM (SELECT (get_byte(b, i + 3)::int8 << 24) | (get_byte(b, i + 2) << 16) "
    "| (get_byte(b, i + 1) << 8) | get_byte(b, i) AS w "
    "FROM generate_series(0, length(b) - 4, 4) AS i) AS t)::{v}vector $$",
    # A row written with its embedding (``_add_vectors``) keeps it.
    "CREATE OR REPLACE FUNCTION {s}vectors_embedding() RETURNS trigger LANGUAGE plpgsql AS $$ "
    "BEGIN IF TG_OP = 'UPDATE' OR NEW.embedding IS NULL THEN "
    "NEW.embedding := {s}embedding_of(NEW.vector); END IF; RETURN NEW; END $$",
    "DROP TRIGGER IF EXISTS vectors_embedding ON {s}vectors",
    "CREATE TRIGGER vectors_embedding BEFORE INSERT OR UPDATE OF vector ON {s}vectors "
    "FOR EACH ROW EXECUTE FUNCTION {s}vectors_embedding()",
    "UPDATE {s}vectors SET embedding = {s}embedding_of(vector) WHERE embedding IS NULL",
)
# An index per dimension: a column of every dimension has none of its own. A graph built
# with pgvector's default ef_construction (64) stops improving with ef_search at 1M records:
# recall@10 0.83 at 1M clustered vectors, 0.95 with 128, 1.00 with 256 at ef_search 200
# (its build 1.4 times as long; docs/benchmarks.md).
_HNSW = (
    "CREATE INDEX IF NOT EXISTS vectors_hnsw_{d} ON {s}vectors "
    "USING hnsw ((embedding::{v}vector({d})) {v}vector_ip_ops) WITH (ef_construction = 256) "
    "WHERE {v}vector_dims(embedding) = {d}"
)


def _fit_graph(conn: Any, prefix: str, dimension: int) -> None:
    """Raise this session's ``maintenance_work_mem`` to the HNSW graph's size: pgvector
    builds it in memory, and once it outgrows the setting (64 MB by default) it goes on
    on disk many times slower (1M records of 384 dimensions: not done in 21 minutes)."""
    sql = f"SELECT count(*) FROM {prefix}vectors WHERE embedding IS NOT NULL"
    (rows,) = conn.execute(sql).fetchone()
    # An element as pgvector's build keeps it (src/hnsw.h): the vector, 2m = 32 neighbours
    # on layer 0 and about 2 above, 16 bytes each, its own header; and a quarter more.
    wanted_kb = int(rows * (4 * dimension + 8 + 34 * 16 + 128) * 1.25) // 1024 + 1
    (current_kb,) = conn.execute(
        "SELECT setting::bigint FROM pg_settings WHERE name = 'maintenance_work_mem'"
    ).fetchone()
    if wanted_kb > current_kb:
        conn.execute(f"SET maintenance_work_mem = '{wanted_kb}kB'")


_SEARCH = (
    "SELECT e.extversion, EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = "
    "to_regclass(%(vectors)s) AND a.attname = 'embedding' AND NOT a.attisdropped), "
    "ARRAY(SELECT substr(i.relname, 14)::int FROM pg_class i JOIN pg_namespace n ON "
    "n.oid = i.relnamespace WHERE n.nspname = %(schema)s AND i.relname ~ '^vectors_hnsw_[0-9]+$'), "
    "e.extnamespace::regnamespace::text || '.' "
    "FROM pg_extension e WHERE e.extname = 'vector'"
)
# The nearest rows of the scope first, then their ids (not a join of every row).
_NEAREST = (
    "SELECT r.memory_id, n.vector, n.d, r.body FROM (SELECT v.record_id, v.vector, {distance} AS d "
    "FROM {s}vectors v WHERE v.user_scope = %(scope)s{where} ORDER BY d{limit}) AS n "
    "JOIN {s}records r ON r.id = n.record_id ORDER BY n.d"
)
# What a search found: memory_id → vector, memory_id → body.
_Found = tuple[dict[str, Any], dict[str, str]]
# Rows read beyond the k asked for, so that the client's rounding rarely needs a second read.
_MARGIN = 64
# HNSW's candidate list, at least: recall@10 against exact at 1M clustered synthetic vectors
# of 384 dimensions, 0.985 at 100, 1.000 at 200 (6.0 and 6.2 ms a search).
_EF_SEARCH = 200
# Rows BLAS scores together (OpenBLAS: 4 at a time, the last few alone).
_BLOCK = 8


@dataclass(frozen=True)
class DenseSearch:
    """Where a PostgreSQL store's dense path runs: in the database with pgvector
    ``version`` (None: in the client), exactly or by an HNSW index for ``hnsw`` dimensions."""

    version: str | None = None
    hnsw: frozenset[int] = frozenset()
    prefix: str = ""  # pgvector's schema, "public.": its names are written qualified

    @property
    def iterates(self) -> bool:
        """Whether an HNSW scan goes on until it has found enough rows of the scope
        (``hnsw.iterative_scan``, pgvector 0.8)."""
        major, minor, *_ = (int(part) for part in f"{self.version or 0}.0".split("."))
        return (major, minor) >= (0, 8)

    def describe(self) -> str:
        if self.version is None:
            return "in the client"
        how = "exact"
        if self.hnsw:
            dims = ", ".join(str(d) for d in sorted(self.hnsw))
            how += f"; HNSW index, approximate, for {dims} dimensions"
        return f"pgvector {self.version} in the database ({how})"


def float32_scores(rows: Any, wanted: Any) -> Any:
    """``rows @ wanted`` as the client's whole matrix scores those rows: BLAS rounds a row
    scored in a block of rows differently from one scored alone (the last of a matrix), so
    the rows are padded to whole blocks."""
    np = require_numpy()
    matrix = np.asarray(rows, dtype=np.float32).reshape(-1, len(wanted))
    n = len(matrix)
    padded = np.zeros((n + -n % _BLOCK, len(wanted)), dtype=np.float32)
    padded[:n] = matrix
    return (padded @ wanted)[:n]


def _pgvector_bytes(packed: bytes) -> bytes:
    """A packed vector in pgvector's binary form: dimension, 0, big-endian float32."""
    np = require_numpy()
    flat = np.frombuffer(packed, dtype="<f4")
    big_endian: bytes = flat.astype(">f4").tobytes()
    return len(flat).to_bytes(2, "big") + b"\0\0" + big_endian


class _ServerScores(DenseScores):
    """``DenseScores`` searched by pgvector. ``top`` reads the best rows from the server
    and scores them as the client's matrix would, keeping its ties; ``of`` and ``exact``
    read the rows asked for. ``ids``, ``scores``, ``missing`` and ``vector_of`` (what a
    ``known_at`` view reads) load the whole matrix, as the client's path does."""

    _store: PostgresMemoryStore
    _wanted: Any
    _hnsw: bool
    _load_whole: Callable[[], DenseScores]
    _rows: dict[str, Any]
    _bodies: dict[str, str]

    def __init__(
        self, store: PostgresMemoryStore, wanted: Any, hnsw: bool, whole: Callable[[], DenseScores]
    ) -> None:
        object.__setattr__(self, "_store", store)
        object.__setattr__(self, "_wanted", wanted)
        object.__setattr__(self, "_hnsw", hnsw)
        object.__setattr__(self, "_load_whole", whole)
        object.__setattr__(self, "_rows", {})  # memory_id → vector, as read
        object.__setattr__(self, "_bodies", {})  # memory_id → body, as the search read it

    def __repr__(self) -> str:
        return f"_ServerScores({self._store!r}, hnsw={self._hnsw})"

    def top(self, k: int) -> list[tuple[str, float]]:
        if k <= 0:
            return []
        store = self._store
        conn = store._connection()
        return self._top_of(
            store._nearest(conn, store._dense_search(conn), self._wanted, k, hnsw=self._hnsw), k
        )

    def top_soon(self, k: int) -> Callable[[], list[tuple[str, float]]]:
        """The search runs on the store's second connection in a thread (it waits on the
        server, without the GIL) while the caller reads its lexical path on the first; a
        new process connects it there too. A store given a connection to share searches
        on that one, when asked."""
        store = self._store
        if k <= 0 or store._shared is not None:
            return super().top_soon(k)
        search = store._dense_search(store._connection())
        found: list[Any] = []

        def search_rows() -> None:
            try:
                conn = store._search_connection()
                found.append(store._nearest(conn, search, self._wanted, k, hnsw=self._hnsw))
            except BaseException as exc:  # raised where the rows are asked for
                found.append(exc)

        thread = threading.Thread(target=search_rows, name="memlib-dense-search", daemon=True)
        thread.start()

        def rows() -> list[tuple[str, float]]:
            thread.join()
            if isinstance(found[0], BaseException):
                raise found[0]
            return self._top_of(found[0], k)

        return rows

    def _top_of(self, found: _Found, k: int) -> list[tuple[str, float]]:
        rows, bodies = found
        self._rows.update(rows)
        self._bodies.update(bodies)
        return DenseScores(list(rows), float32_scores(list(rows.values()), self._wanted), 0).top(k)

    def records(
        self, memory_ids: Sequence[str], fetch: Callable[[Sequence[str]], Sequence[StoredMemory]]
    ) -> Sequence[StoredMemory]:
        held = self._bodies
        found = {m: self._store._parse(held[m]) for m in memory_ids if m in held}
        found.update((r.memory_id, r) for r in fetch([m for m in memory_ids if m not in held]))
        return [found[m] for m in memory_ids if m in found]

    def of(self, memory_ids: Sequence[str]) -> dict[str, float]:
        rows = self._read(memory_ids)
        scores = float32_scores(list(rows.values()), self._wanted)
        return {m: float(s) for m, s in zip(rows, scores, strict=True)}

    def exact(self, memory_ids: Sequence[str], query_vector: Any) -> dict[str, float]:
        return {m: exact_dot(v, query_vector) for m, v in self._read(memory_ids).items()}

    def _read(self, memory_ids: Sequence[str]) -> dict[str, Any]:
        """The vectors of those of ``memory_ids`` that have one, in their order."""
        rows: dict[str, Any] = self._rows
        wanted = [m for m in dict.fromkeys(memory_ids) if m not in rows]
        if wanted:
            rows.update(self._store._vectors_by_id(wanted))
        return {m: rows[m] for m in memory_ids if m in rows}

    @cached_property
    def _whole(self) -> DenseScores:
        return self._load_whole()

    @property
    def ids(self) -> Sequence[str]:
        return self._whole.ids

    @property
    def scores(self) -> Any:
        return self._whole.scores

    @property
    def missing(self) -> int:
        return self._whole.missing

    @property
    def vector_of(self) -> Any:
        return self._whole.vector_of

    @property
    def positions(self) -> Mapping[str, int] | None:
        return self._whole.positions


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

    def known_at_view(self, known_at: datetime) -> SqlKnownAt:
        """The store as it stood at ``known_at``, read through its indexes (here, not in
        ``SqlMemoryStore``: ``SqlKnownAt`` reads through that class)."""
        return SqlKnownAt(self, known_at)

    def _forget(self) -> None:
        super()._forget()
        # (connection, where its dense path runs): read once per connection.
        self._search: tuple[Any, DenseSearch] | None = None
        # A second connection, opened by the first dense search in the database.
        self._searcher: Any = None

    def _search_connection(self) -> Any:
        """The connection the dense searches run on beside the store's own."""
        if self._searcher is None or self._searcher.closed:
            self._searcher = _connect(self._dsn, self._connect_timeout)
        return self._searcher

    def close(self) -> None:
        super().close()
        searcher, self._searcher = self._searcher, None
        if searcher is not None:
            searcher.close()

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
            versions = self._migrate(conn)
            self._enable_pgvector(conn)
            return versions

    def _enable_pgvector(self, conn: Any) -> None:
        """The ``embedding`` column, its trigger and the existing vectors' values, where the
        server has pgvector; a user not allowed to create the extension keeps the client's
        search (``db status`` says why)."""
        available = conn.execute(_PGVECTOR).fetchone()
        if available is None:
            return
        if available[1] is None:
            try:
                with conn.transaction():  # a savepoint: the schema's transaction goes on
                    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            except _psycopg().errors.InsufficientPrivilege:
                return
        sql = "SELECT extnamespace::regnamespace::text || '.' FROM pg_extension WHERE extname = %s"
        (prefix,) = conn.execute(sql, ("vector",)).fetchone()
        for statement in _EMBEDDING:
            conn.execute(statement.format(s=self._prefix, v=prefix))

    def build_hnsw(self) -> tuple[int, ...]:
        """An HNSW index (approximate search) for each dimension of the stored vectors;
        those dimensions."""
        with self._own_connection("index") as conn:
            search = self._read_search(conn)
            if search.version is None:
                raise RemoteMemoryError(
                    f"{self.schema_label} has no pgvector column: HNSW needs pgvector "
                    "and `memlib --store URL db init` run with it"
                )
            sql = f"SELECT DISTINCT vector_dimension FROM {self._prefix}scope_stats "
            found = conn.execute(sql + "WHERE vector_model IS NOT NULL ORDER BY 1").fetchall()
            for (dimension,) in found:
                _fit_graph(conn, self._prefix, int(dimension))
                conn.execute(_HNSW.format(s=self._prefix, d=int(dimension), v=search.prefix))
        return tuple(int(d) for (d,) in found)

    def describe_dense_search(self) -> tuple[str, bool]:
        """Where dense search runs (and why not in the database when it does not); whether
        the server offers pgvector at all."""
        with self._own_connection("read") as conn:
            search = self._read_search(conn)
            available, installed = conn.execute(_PGVECTOR).fetchone() or (None, None)
        if search.version is not None:
            return search.describe(), True
        if installed is not None:
            why = f"pgvector {installed} is installed: run `memlib db init` to use it"
        elif available is not None:
            why = (
                f"pgvector {available} is available, not installed: a privileged user can "
                "run CREATE EXTENSION vector, then `memlib db init`"
            )
        else:
            why = "the server has no pgvector"
        return f"{search.describe()} ({why})", available is not None

    def _read_search(self, conn: Any) -> DenseSearch:
        params = {"vectors": f"{self._prefix}vectors", "schema": self.schema}
        row = conn.execute(_SEARCH, params).fetchone()
        if row is None or not row[1]:
            return DenseSearch()
        return DenseSearch(row[0], frozenset(row[2]), row[3])

    def _dense_search(self, conn: Any) -> DenseSearch:
        known = self._search
        if known is None or known[0] is not conn:
            with self._failures("read"):
                known = self._search = (conn, self._read_search(conn))
        return known[1]

    def dense_scores(
        self, query: RecallQuery, vector: Any, *, model: str, dimension: int
    ) -> DenseScores:
        """In the database where it has the pgvector column (``_ServerScores``), else as
        every SQL store does: the whole matrix in the client."""

        def whole() -> DenseScores:
            return SqlMemoryStore.dense_scores(
                self, query, vector, model=model, dimension=dimension
            )

        conn = self._connection()
        search = self._dense_search(conn)
        if search.version is None:
            return whole()
        with self._failures("read"):
            self._check_query_scope(conn, query)
            _, stored_model, stored_dimension, _ = self._vector_stats(conn)
        if stored_model is None:
            return whole()
        check_model(stored_model, stored_dimension, model, dimension)
        np = require_numpy()
        wanted = np.asarray(vector, dtype=np.float32).reshape(-1)
        if wanted.shape != (dimension,):
            return whole()  # which refuses it
        return _ServerScores(self, wanted, dimension in search.hnsw, whole)

    def _nearest(
        self, conn: Any, search: DenseSearch, wanted: Any, k: int, *, hnsw: bool
    ) -> _Found:
        """The vectors and bodies of the ``k`` records (and a margin) nearest ``wanted`` by
        inner product, best first, read on ``conn``. Exact: every row the client could rank in its
        ``k`` best, its rounding (float32 sums differ by up to about dimension × 2⁻²⁴)
        included."""
        np = require_numpy()
        d = len(wanted)
        params: dict[str, Any] = {
            "q": "[" + ",".join(map(repr, wanted.tolist())) + "]",
            "scope": self._key,
            "n": k + _MARGIN,
        }
        v = search.prefix
        if hnsw:
            distance = f"v.embedding::{v}vector({d}) OPERATOR({v}<#>) %(q)s::{v}vector({d})"
            where = f" AND {v}vector_dims(v.embedding) = {d}"
        else:
            distance, where = f"v.embedding OPERATOR({v}<#>) %(q)s::{v}vector", ""
        nearest = _NEAREST.format(
            s=self._prefix, distance=distance, where=where, limit=" LIMIT %(n)s"
        )
        with self._transaction(conn, write=False, failing=conn):
            if hnsw:
                ef_search = min(max(k + _MARGIN, _EF_SEARCH), 1000)  # pgvector's bounds
                conn.execute(f"SET LOCAL hnsw.ef_search = {ef_search}")
                if search.iterates:  # else the scope's rows among the ef_search found
                    conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            rows = self._blobs(conn).execute(nearest, params).fetchall()
            slack = d * 2.0**-21 * float(np.linalg.norm(wanted))
            if not hnsw and len(rows) == k + _MARGIN and rows[-1][2] - rows[k - 1][2] <= slack:
                params["bound"] = rows[k - 1][2] + slack
                where = f" AND {distance} <= %(bound)s"
                near = _NEAREST.format(s=self._prefix, distance=distance, where=where, limit="")
                rows = self._blobs(conn).execute(near, params).fetchall()
        return {m: np.frombuffer(blob, dtype="<f4") for m, blob, _, _ in rows}, {
            m: body for m, _, _, body in rows
        }

    def _vectors_by_id(self, memory_ids: Sequence[str]) -> dict[str, Any]:
        np = require_numpy()
        sql = (
            f"SELECT r.memory_id, v.vector FROM {self._prefix}vectors v JOIN {self._prefix}records"
            " r ON r.id = v.record_id WHERE r.user_scope = %s AND r.memory_id = ANY(%s)"
        )
        conn = self._connection()
        with self._transaction(conn, write=False):
            rows = self._blobs(conn).execute(sql, (self._key, list(memory_ids))).fetchall()
        return {m: np.frombuffer(blob, dtype="<f4") for m, blob in rows}

    def schema_version(self) -> int:
        """The schema's version (0: not initialised), read without needing it current."""
        with self._own_connection("read") as conn:
            return self._version(conn)

    @contextmanager
    def _failures(self, action: str, failing: Any = None) -> Iterator[None]:
        """psycopg's errors as memlib's, for the store's connection (or ``failing``, its
        search connection)."""
        try:
            yield
        except _psycopg().Error as exc:
            # A connection left closed or broken is dropped: the next call connects again.
            # Nothing is retried: a write whose COMMIT got no answer may have landed.
            conn = self._conn if failing is None else failing
            if conn is not None and (conn.closed or getattr(conn, "broken", False)):
                if conn is self._conn:
                    self.close()
                elif conn is self._searcher:
                    self._searcher = None
                    conn.close()
            raise _pg_error(exc, f"cannot {action} PostgreSQL schema {self.schema}") from None

    @contextmanager
    def _transaction(self, conn: Any, *, write: bool, failing: Any = None) -> Iterator[None]:
        with self._failures("write" if write else "read", failing), conn.transaction():
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
        columns, types = "record_id, user_scope, vector", ["int8", "text", "bytea"]
        values: Iterable[tuple[Any, ...]] = ((r, self._key, blob) for r, blob in rows)
        if self._dense_search(conn).version is not None:
            # The embedding too, in pgvector's binary form: the trigger's decoding in SQL
            # costs the server about 0.2 ms a vector.
            columns, types = f"{columns}, embedding", [*types, "bytea"]
            values = ((*row, _pgvector_bytes(row[2])) for row in values)
        _copy_in(conn, f"{self.schema}.vectors ({columns})", types, values)

    def _add_runs(self, conn: Any, scope: str, runs: Sequence[Run]) -> None:
        target = f"{self.schema}.postings (user_scope, term, first_id, record_ids, tfs, lengths)"
        types = ["text", "text", "int8", "bytea", "bytea", "bytea"]
        _copy_in(conn, target, types, ((scope, *run) for run in runs))

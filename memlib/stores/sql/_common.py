"""The SQL store, written once (docs/reference.md "Stores"; its tables, posting runs and
vectors: docs/contract.md). ``SqliteMemoryStore`` and ``PostgresMemoryStore`` supply only
the dialect. A write is one transaction (``_write``); every query of a scope's rows names
the scope in its ``WHERE`` clause."""

from __future__ import annotations

import copy
from abc import ABCMeta, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from itertools import chain
from typing import Any, ClassVar, TypeVar, overload

from ..._capabilities import ScoreBound
from ..._retrieval import (
    candidates_for,
    count_matches,
    micros_of,
    record_stats,
    term_stats,
    top_of_matches,
    unpack_docs,
)
from ..._retrieval.postings import (
    MergedRuns,
    RunCache,
    merge_runs,
    numpy_or_none,
    postings_numpy,
    run_columns_without,
    run_postings,
    tf_length_runs_by_term,
)
from ..._safejson import loads
from ..._vectors import (
    DenseScores,
    Embedder,
    VectorState,
    check_model,
    check_previous,
    check_sizes,
    reads_pairs,
    require_numpy,
    unpack,
)
from ...candidates import CandidateScan, LexicalPostings, PostingsMoved, RecallCandidate
from ...errors import (
    RemoteMemoryCorruptionError,
    RemoteMemoryDuplicateError,
    RemoteMemoryError,
    RemoteMemoryScopeError,
    RemoteMemoryStorageError,
    RemoteMemoryValidationError,
)
from ...normalize import RecallQuery
from ...records import MemoryKind, StoredMemory, parse_timestamp, project_name, record_json
from .._base import Clock, IndexedMemoryStore, latest_profile_of
from .._sources import SourceNeighbours
from ._schema import DERIVED, SCHEMA_VERSION

# What reading a stored body may raise: invalid JSON, or past safejson's limits.
_BAD_BODY = (ValueError, TypeError, RemoteMemoryValidationError, RemoteMemoryCorruptionError)
_BY_IDS = "FROM {s}records WHERE {scope_of_ids} = ? AND id {any}"  # this scope's, by row id
# The most docs a prefetch reads the bodies of with their rows (hybrid's pool is 500).
_BODIES_WITH_ROWS = 1_024
# Whether the scope's counts are still those a view's postings are of (a subquery, so
# that a view's first read checks them in the same round trip).
_SAME_COUNTS = (
    "(SELECT searched = ? AND retracted = ? AND tokens = ? AND content_tokens = ? "
    "FROM {s}scope_stats WHERE user_scope = ?)"
)
_VECTOR_COLUMNS = "vector_model, vector_dimension, vector_changes, vector_resets"
_CLAIM = (
    "INSERT INTO {s}scope_stats (user_scope) VALUES (?) "
    "ON CONFLICT (user_scope) DO UPDATE SET user_scope = excluded.user_scope"
)
# Adds (searched, retracted, tokens, content tokens) to a scope's counts.
_COUNT = (
    "UPDATE {s}scope_stats SET searched = searched + ?, retracted = retracted + ?, "
    "tokens = tokens + ?, content_tokens = content_tokens + ? WHERE user_scope = ?"
)
# A record ``r`` of the scope that no retraction names.
_LIVE = (
    "NOT EXISTS (SELECT 1 FROM {s}records t "
    "WHERE t.user_scope = r.user_scope AND t.retracts = r.memory_id)"
)

# A posting run as written: (term, its first record id, the ids packed, parallel to them
# the term's frequency in each and their two lengths, ``retrieval.postings.LENGTHS``).
Run = tuple[str, int, bytes, bytes, bytes]

# A run's three columns as read: ids, term frequencies, lengths.
_RunColumns = tuple[bytes, bytes, bytes]

# A records row as the dialects insert it (after the scope): memory_id, kind, captured_ts,
# captured_us, retracts, body, a conversation's length in terms, all / without stopwords,
# stored_us.
RecordRow = tuple[str, str, float, int, str | None, str, int | None, int | None, int]
# A batch's conversation records as written: (row id, record, (terms, content length)).
_Indexed = list[tuple[int, StoredMemory, tuple[Sequence[str], int]]]


def driver_error(
    where: str, detail: str, cause: str | None = None, *, corrupt: bool = False
) -> RemoteMemoryError:
    """A database failure as memlib's one-line error, ``WHERE: CAUSE (DETAIL)``."""
    text = f"{where}: {detail}" if cause is None else f"{where}: {cause} ({detail})"
    if corrupt:
        return RemoteMemoryCorruptionError(text)
    if cause is not None:
        return RemoteMemoryStorageError(text)
    return RemoteMemoryError(text)


def _micros(stored_at: str) -> int:
    return micros_of(parse_timestamp(stored_at))


def _known(at: int | None) -> tuple[str, tuple[int, ...]]:
    """The condition (and its parameter) that a row was stored by ``at`` (microseconds;
    None: at any time), for a ``known_at`` view."""
    return ("", ()) if at is None else (" AND stored_us <= ?", (at,))


def _storable(memory_ids: Iterable[Any]) -> list[Any]:
    """``memory_ids`` without those holding U+0000, which no stored id holds and PostgreSQL
    refuses as a parameter: left out as any id the scope does not hold is."""
    return [m for m in memory_ids if not (type(m) is str and "\x00" in m)]


_T = TypeVar("_T")


class _Prefetched(Sequence[_T]):
    """One column of the records a ranking keeps, by doc, filled by ``prefetch``: reading
    another is a bug, said as such (a fallback would read the row per doc it avoids)."""

    def __init__(self, size: int, column: str) -> None:
        self._size, self._column = size, column
        self.values: dict[int, _T] = {}

    def __len__(self) -> int:
        return self._size

    @overload
    def __getitem__(self, doc: int) -> _T: ...

    @overload
    def __getitem__(self, doc: slice) -> Sequence[_T]: ...

    def __getitem__(self, doc: int | slice) -> _T | Sequence[_T]:
        if isinstance(doc, slice):
            return [self[d] for d in range(*doc.indices(self._size))]
        try:
            return self.values[doc]
        except KeyError:
            raise RemoteMemoryError(
                f"the {self._column} of doc {doc} was read before prefetch() named it"
            ) from None


class _State:
    """The write rules' view of the store, read once per batch inside the transaction."""

    def __init__(self) -> None:
        self.kinds: dict[str, MemoryKind] = {}
        self.rows: dict[str, tuple[int, str]] = {}  # stored id → (row id, body)
        self.retracted: set[str] = set()

    def kind_of(self, memory_id: str) -> MemoryKind | None:
        return self.kinds.get(memory_id)

    def is_retracted(self, memory_id: str) -> bool:
        return memory_id in self.retracted


class SqlMemoryStore(IndexedMemoryStore, metaclass=ABCMeta):
    """A ``MemoryStore`` over SQL; a subclass is the dialect (see the module docstring).

    SQL written here is a template: ``?`` a parameter, ``{s}`` the schema prefix,
    ``{any}`` after a column "is one of the list parameter" (bound with ``_many``),
    ``{scope_of_ids}`` the scope column as a look-up by record id wants it.
    """

    # -- dialect: SQL text ----------------------------------------------------------------
    PARAM: ClassVar[str] = "?"
    ANY: ClassVar[str]
    SCOPE_OF_IDS: ClassVar[str] = "user_scope"
    # How the profile query names the partial index of non-conversation records, where
    # a dialect's planner would not pick it alone.
    PROFILE_INDEX: ClassVar[str] = ""
    META: ClassVar[str]  # the table holding schema_version
    HAS_META: ClassVar[str]  # () → a row whose first value is not NULL if META exists
    SCHEMA: ClassVar[tuple[str, ...]]  # the CREATE statements (``_schema``)
    RUN_FORMAT: ClassVar[str]  # how a run packs its ids (``memlib._retrieval.pack_docs``)
    RUNS_OF_TERMS: ClassVar[str]  # the term index, parameters → rows: (scope, terms) → (run,)
    ALL_RUNS: ClassVar[str]  # (scope) → (term, run), each term's runs by first id
    # (scope, terms, record id) → (term, first id, run, tfs, lengths) of each term's run
    # that could hold the id: the last to start at or before it (runs are disjoint).
    RUNS_HOLDING: ClassVar[str]
    SET_RUN: ClassVar[str]  # (run, tfs, lengths, scope, term, first id)
    TF_RUNS_OF_TERMS: ClassVar[str]  # (scope, terms) → (term, run, tfs, lengths), by first id
    DROP_RUN: ClassVar[str]  # (scope, term, first id)
    _REBUILD_PAGE: ClassVar[int] = 5_000  # records an upgrade indexes at a time
    # A record's ``source.source_id`` as the dialect reads it from ``{a}.body``,
    # the very expression of the ``records_source`` index (so that the index answers).
    SOURCE_ID: ClassVar[str]

    schema_label: str  # how ``memlib db`` names the schema
    _newer: str  # "… has version {}": a schema newer than this memlib knows
    _prefix = ""  # "{s}": what table names are qualified with
    _location: str  # where the records are, for a corruption message

    def __init__(
        self,
        *,
        user_id: str,
        clock: Clock | None = None,
        embedder: Embedder | None = None,
        project: str | None = None,
    ) -> None:
        super().__init__(user_id=user_id, clock=clock, embedder=embedder, project=project)
        self._sql: dict[str, str] = {}
        self._forget()

    def _forget(self) -> None:
        """What this store opened or read for its key: a copy for another project starts
        afresh (``in_project``)."""
        self._conn: Any = None
        # The scope's vectors as dense_scores last read them, reused while scope_stats says
        # the same: ((vector counter, model, dimension), ids, matrix, memory_id → row).
        self._dense: tuple[tuple[int, str, int], tuple[str, ...], Any, dict[str, int]] | None = None
        # (vector_resets, record id): records_without_vectors found none before that id.
        self._unvectored_from: tuple[int, int] | None = None
        self._runs = RunCache(None)  # the runs recalls read, while scope_stats agrees

    def in_project(self, project: str | None) -> SqlMemoryStore:
        other = copy.copy(self)
        other.project = None if project is None else project_name(project)
        other._forget()
        return other

    def projects(self) -> tuple[str | None, ...]:
        """The user's projects: a project's key in ``user_scope`` is ``scope/project``."""
        prefix = self.user_scope + "/"  # 17 characters
        sql = "SELECT user_scope FROM {s}scope_stats WHERE substr(user_scope, 1, 17) = ?"
        found = (key[len(prefix) :] for (key,) in self._read(sql, prefix))
        return (None, *sorted(found))

    # -- dialect: connection, transactions, errors -----------------------------------------

    @abstractmethod
    def _open(self, *, create: bool) -> Any:
        """A new connection to a schema of this version; None: nothing stored yet."""

    def _alive(self, conn: Any) -> bool:
        return True

    def _release(self, conn: Any) -> None:
        conn.close()

    @abstractmethod
    def _failures(self, action: str) -> AbstractContextManager[None]:
        """The driver's errors inside the block as memlib's one-line error, naming the cause."""

    @abstractmethod
    def _transaction(self, conn: Any, *, write: bool) -> AbstractContextManager[None]:
        """One transaction: a write holds the scope's write lock; a read one snapshot."""

    @abstractmethod
    def init_schema(self) -> tuple[int, int]:
        """Create or upgrade memlib's schema; ``(version before, version after)``."""

    @abstractmethod
    def schema_version(self) -> int:
        """The schema's version; 0 when there is none yet."""

    # -- dialect: writing ------------------------------------------------------------------

    @abstractmethod
    def _insert_records(self, conn: Any, rows: Sequence[RecordRow]) -> dict[str, int]:
        """Insert the batch's rows, ids ascending in batch order: ``{memory_id: id}``; a row
        missing from the answer did not go in (another writer's row holds its id)."""

    @abstractmethod
    def _add_runs(self, conn: Any, scope: str, runs: Sequence[Run]) -> None:
        """Add one posting run per term of a batch of ``scope``."""

    def _many(self, values: Iterable[Any]) -> Any:
        """``values`` as the parameter of ``{any}``."""
        return list(values)

    def _blobs(self, conn: Any) -> Any:
        """Where to run a query whose rows hold runs (PostgreSQL reads them in binary)."""
        return conn

    def _add_vectors(self, conn: Any, rows: Sequence[tuple[int, bytes]]) -> None:
        """Insert ``(record id, packed vector)`` rows of records this batch wrote."""
        conn.cursor().executemany(
            self._q("INSERT INTO {s}vectors (record_id, user_scope, vector) VALUES (?, ?, ?)"),
            [(row_id, self._key, blob) for row_id, blob in rows],
        )

    @abstractmethod
    def _vector_rows(self, conn: Any) -> Iterable[tuple[str, bytes]]:
        """``(memory_id, packed vector)`` of the scope's vectors, by record id."""

    def _vectors_deleted(self, conn: Any) -> None:
        """After a commit that deleted vectors: their copies elsewhere (SQLite's log) go."""

    def _q(self, template: str) -> str:
        sql = self._sql.get(template)
        if sql is None:
            names = {"s": self._prefix, "any": self.ANY, "profile_index": self.PROFILE_INDEX}
            sql = template.replace("?", self.PARAM).format(scope_of_ids=self.SCOPE_OF_IDS, **names)
            self._sql[template] = sql
        return sql

    def _run(self, conn: Any, sql: str, *params: Any) -> Any:
        return conn.execute(self._q(sql), params)

    def _read(self, sql: str, *params: Any) -> list[Any]:
        """The rows of one read of the store; none before it exists."""
        conn = self._connection()
        if conn is None:
            return []
        with self._failures("read"):
            return list(self._run(conn, sql, *params).fetchall())

    def _connection(self, *, create: bool = False) -> Any:
        if self._conn is None or not self._alive(self._conn):
            self._conn = self._open(create=create)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._release(self._conn)
            self._conn = None

    def _version(self, conn: Any) -> int:
        meta = self._run(conn, self.HAS_META).fetchone()
        if meta is None or meta[0] is None:
            return 0
        sql = f"SELECT value FROM {self.META} WHERE key = 'schema_version'"
        row = self._run(conn, sql).fetchone()
        return int(row[0]) if row else 0

    def _too_new(self, version: int) -> RemoteMemoryError:
        known = f"this memlib knows up to {SCHEMA_VERSION}: upgrade memlib"
        return RemoteMemoryError(f"{self._newer.format(version)}; {known}")

    def _migrate(self, conn: Any) -> tuple[int, int]:
        """Bring the schema to ``SCHEMA_VERSION``, inside the dialect's exclusive transaction
        (which a second process opening the same old store waits for, then finds done)."""
        before = self._version(conn)
        if before > SCHEMA_VERSION:
            raise self._too_new(before)
        if before == SCHEMA_VERSION:
            return before, before
        kept = self._drop_derived(conn, before) if before else []
        for statement in self.SCHEMA:
            conn.execute(statement.format(s=self._prefix))
        if before:
            self._rebuild(conn, kept)
        upsert = "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
        sql = f"INSERT INTO {self.META} (key, value) VALUES ('schema_version', ?) {upsert}"
        self._run(conn, sql, str(SCHEMA_VERSION))
        return before, SCHEMA_VERSION

    def _drop_derived(self, conn: Any, before: int) -> list[Any]:
        """Drop what an older schema derived from the bodies and give ``records`` the
        columns it lacks; the scopes' vector columns of ``scope_stats``, which are not."""
        kept = []
        if before >= 4:  # the version that added vectors and their columns
            sql = f"SELECT user_scope, {_VECTOR_COLUMNS} FROM {{s}}scope_stats"
            kept = self._run(conn, sql).fetchall()
        for statement in DERIVED:
            conn.execute(statement.format(s=self._prefix))
        have = {d[0] for d in self._run(conn, "SELECT * FROM {s}records LIMIT 0").description}
        # schema 3's lengths and schema 7's stored_us, missing before them
        added = (("tokens", "integer"), ("content_tokens", "integer"), ("stored_us", "bigint"))
        for column, kind in added:
            if column not in have:
                self._run(conn, f"ALTER TABLE {{s}}records ADD COLUMN {column} {kind}")
        return kept

    def _rebuild(self, conn: Any, kept: list[Any]) -> None:
        """Every record's ``stored_us`` and every scope's lengths, runs and counts from the
        bodies, a page at a time in id order (each term's runs cover ascending, disjoint id
        ranges), and ``kept``."""
        sql = f"INSERT INTO {{s}}scope_stats (user_scope, {_VECTOR_COLUMNS}) VALUES (?, ?, ?, ?, ?)"
        conn.cursor().executemany(self._q(sql), kept)
        sql = "SELECT user_scope, retracts FROM {s}records WHERE retracts IS NOT NULL"
        retracted = set(self._run(conn, sql))
        page_sql = "SELECT id, user_scope, body FROM {s}records WHERE id > ? ORDER BY id LIMIT ?"
        last = 0
        while page := self._run(conn, page_sql, last, self._REBUILD_PAGE).fetchall():
            last = int(page[-1][0])
            by_scope: dict[str, list[tuple[int, StoredMemory]]] = {}
            stored: dict[int, tuple[int, int | None, int | None]] = {}  # row → its columns
            for row_id, scope, body in page:
                record = self._parse_any(body)
                rows = by_scope.setdefault(scope, [])
                stored[int(row_id)] = (_micros(record.stored_at), None, None)
                if record.kind is MemoryKind.CONVERSATION:
                    rows.append((int(row_id), record))
            for scope, rows in by_scope.items():
                stats = term_stats(record for _, record in rows)
                both = list(zip(rows, stats, strict=True))
                for (row_id, _), (terms, n) in both:
                    stored[row_id] = (stored[row_id][0], len(terms), n)
                live = [
                    (row_id, tokens, n)
                    for (row_id, record), (tokens, n) in both
                    if (scope, record.memory_id) not in retracted
                ]
                self._claim_scope(conn, scope)
                self._add_postings(conn, scope, live)
                tokens = sum(len(terms) for _, terms, _ in live)
                content = sum(n for *_, n in live)
                self._run(conn, _COUNT, len(live), len(rows) - len(live), tokens, content, scope)
            sql = "UPDATE {s}records SET stored_us = ?, tokens = ?, content_tokens = ? WHERE id = ?"
            conn.cursor().executemany(
                self._q(sql), [(*columns, row_id) for row_id, columns in stored.items()]
            )

    def _parse(self, body: str) -> StoredMemory:
        return self._check_owner(self._parse_any(body))

    def _records_where(self, condition: str, *params: Any) -> tuple[StoredMemory, ...]:
        sql = f"SELECT body FROM {{s}}records WHERE user_scope = ?{condition} ORDER BY id"
        return tuple(self._parse(body) for (body,) in self._read(sql, self._key, *params))

    def read_all(self) -> tuple[StoredMemory, ...]:
        return self._records_where("")

    def records(self, kind: MemoryKind | str | None = None) -> tuple[StoredMemory, ...]:
        if kind is None:
            return self.read_all()
        return self._records_where(" AND kind = ?", MemoryKind(kind).value)

    def latest_profile(self) -> StoredMemory | None:
        return self._latest_profile()

    def _latest_profile(self, at: int | None = None) -> StoredMemory | None:
        """The latest profile (of the records stored by ``at``, in microseconds)."""
        # Profiles and retractions only: through records_scope_kind, never a scan of the
        # scope (every session start and profile read asks this).
        sql = (
            "SELECT body FROM {s}records {profile_index} "
            "WHERE user_scope = ? AND kind <> 'conversation'"
        )
        known, by = _known(at)
        rows = self._read(sql + known + " ORDER BY id", self._key, *by)
        return latest_profile_of(self._parse(body) for (body,) in rows)

    def retraction_of(self, memory_id: str) -> StoredMemory | None:
        """The retraction naming ``memory_id``, through the ``retracts`` index."""
        if not _storable([memory_id]):
            return None
        found = self._records_where(" AND retracts = ?", memory_id)
        return found[0] if found else None

    def _by_memory_ids(
        self, columns: str, memory_ids: Iterable[str], at: int | None = None
    ) -> list[Any]:
        sql = f"SELECT {columns} FROM {{s}}records WHERE user_scope = ? AND memory_id {{any}}"
        known, by = _known(at)
        return self._read(sql + known, self._key, self._many(memory_ids), *by)

    def existing_ids(self, memory_ids: Sequence[str]) -> set[str]:
        return self._existing_ids(memory_ids)

    def _existing_ids(self, memory_ids: Sequence[str], at: int | None = None) -> set[str]:
        return {m for (m,) in self._by_memory_ids("memory_id", _storable(memory_ids), at)}

    def records_by_id(self, memory_ids: Sequence[str]) -> list[StoredMemory]:
        return self._records_by_id(memory_ids)

    def _records_by_id(
        self, memory_ids: Sequence[str], at: int | None = None
    ) -> list[StoredMemory]:
        """The scope's records of those of ``memory_ids`` that exist (stored by ``at``), in
        the order asked."""
        memory_ids = _storable(memory_ids)
        if not memory_ids:
            return []
        rows = self._by_memory_ids("memory_id, body", set(memory_ids), at)
        found = {memory_id: self._parse(body) for memory_id, body in rows}
        return [found[m] for m in memory_ids if m in found]

    def source_neighbours(self, memory_ids: Sequence[str]) -> dict[str, SourceNeighbours]:
        return self._source_neighbours(memory_ids)

    def _source_neighbours(
        self, memory_ids: Sequence[str], at: int | None = None
    ) -> dict[str, SourceNeighbours]:
        """Each asked searched conversation record's neighbours in its source (``_sources``):
        one statement, each neighbour one probe of the ``records_source`` index. ``at``: of
        the records stored by then, as their retractions stored by then left them."""
        memory_ids = _storable(memory_ids)
        conn = self._connection() if memory_ids else None
        if conn is None:
            return {}
        with self._failures("read"):
            found = self._neighbours_of(conn, memory_ids, at)
        return {m: SourceNeighbours(*found[m]) for m in memory_ids if m in found}

    def _neighbours_of(
        self, conn: Any, memory_ids: Iterable[str], at: int | None = None
    ) -> dict[str, tuple[str | None, str | None]]:
        """``memory_id → (turn before, turn after)`` on ``conn`` (in its transaction)."""
        ids = self._many(set(memory_ids))
        # each live test below takes ``at`` twice: its record's and its retraction's
        by = () if at is None else (at, at)
        sql = self._neighbours_sql(at is not None)
        rows = self._run(conn, sql, *by, *by, self._key, ids, *by)
        return {m: (before, after) for m, before, after in rows}

    def _neighbours_sql(self, known: bool = False) -> str:
        def live(a: str) -> str:
            # known at T: stored by then, and no retraction stored by then names it
            stored, retracted = f"{a}.stored_us <= ? AND ", f" AND x_{a}.stored_us <= ?"
            return (
                f"{stored if known else ''}NOT EXISTS (SELECT 1 FROM {{s}}records x_{a} "
                f"WHERE x_{a}.user_scope = {a}.user_scope AND x_{a}.retracts = {a}.memory_id"
                f"{retracted if known else ''})"
            )

        def beside(a: str, op: str, order: str) -> str:
            return (
                f"(SELECT {a}.memory_id FROM {{s}}records {a} WHERE {a}.user_scope = r.user_scope "
                f"AND {a}.kind = 'conversation' AND {self.SOURCE_ID.format(a=a)} = "
                f"{self.SOURCE_ID.format(a='r')} AND {a}.id {op} r.id AND {live(a)} "
                f"ORDER BY {a}.id {order} LIMIT 1)"
            )

        return (
            f"SELECT r.memory_id, {beside('p', '<', 'DESC')}, {beside('n', '>', 'ASC')} "
            "FROM {s}records r WHERE r.user_scope = ? AND r.kind = 'conversation' "
            f"AND r.memory_id {{any}} AND {live('r')}"
        )

    def _scan(self, query: RecallQuery, *, top: ScoreBound | None) -> CandidateScan:
        def read(conn: Any) -> tuple[tuple[int, ...], list[bytes]]:
            counts, listed = self._counts(conn, query), self._many(query.terms)
            rows = self._run(self._blobs(conn), self.RUNS_OF_TERMS, self._key, listed)
            return counts, [bytes(r) for (r,) in rows]

        return self._scan_of(query, top, read)

    def _scan_of(
        self,
        query: RecallQuery,
        top: ScoreBound | None,
        read: Callable[[Any], tuple[tuple[int, ...], Sequence[bytes]]],
    ) -> CandidateScan:
        """The scan of the counts and the query's runs (ids only) that ``read`` gives."""
        conn = self._connection()
        if conn is None:
            return CandidateScan((), 0, 0, 0, 0, 0)
        with self._transaction(conn, write=False):  # one snapshot for counts and candidates
            (searched, retracted, tokens, content_tokens), runs = read(conn)
            ids, matched = count_matches(runs, self.RUN_FORMAT)
            if top is None:
                records = self._bodies_of(conn, ids)
            else:
                records = self._top(conn, query, ids, matched, searched, top)
        candidates = candidates_for(query, records)
        return CandidateScan(candidates, searched, len(ids), retracted, tokens, content_tokens)

    def _bodies_of(self, conn: Any, ids: Iterable[Any]) -> tuple[StoredMemory, ...]:
        """The records of ``ids`` (this scope's only), in the order of ``ids``."""
        wanted = [int(i) for i in ids]
        if not wanted:
            return ()
        sql = f"SELECT id, body {_BY_IDS}"
        bodies = dict(self._run(conn, sql, self._key, self._many(wanted)))
        return tuple(self._parse(bodies[i]) for i in wanted if i in bodies)

    def _top(
        self, conn: Any, query: RecallQuery, ids: Any, matched: Any, searched: int, top: ScoreBound
    ) -> tuple[StoredMemory, ...]:
        scope, limit = self._key, query.limit
        columns = "SELECT id, captured_ts, captured_us, memory_id "
        by_ids = columns + _BY_IDS
        first = self._q(by_ids + " ORDER BY captured_ts DESC LIMIT ?")
        ties = self._q(by_ids + " AND captured_ts >= ?")
        recent = self._q(
            columns + "FROM {s}records WHERE user_scope = ? ORDER BY captured_ts DESC LIMIT ?"
        )

        def lookup(members: Sequence[int]) -> list[Any]:
            listed = self._many(members)
            rows = conn.execute(first, (scope, listed, limit)).fetchall()
            if len(rows) == limit and len(members) > limit:
                # every tie with the last one kept
                rows = conn.execute(ties, (scope, listed, rows[-1][1])).fetchall()
            return list(rows)

        def newest_first(budget: int) -> Iterable[Any]:
            # Index records_recent; the walk reads at most budget + 2 rows.
            return conn.execute(recent, (scope, budget + 2))  # type: ignore[no-any-return]

        kept = top_of_matches(ids, matched, query, searched, lookup, newest_first, top)
        return self._bodies_of(conn, kept)

    def lexical_postings(
        self, query: RecallQuery, terms: Sequence[str], *, fresh: bool = False
    ) -> LexicalPostings:
        """``LexicalScanning``: the postings of the query's terms as of one moment, docs in
        id order. No record row is read here: ``prefetch`` reads the docs a ranking keeps,
        ``candidates_of`` the hits. Warm, nothing is read here at all: the runs come
        decoded from the ``RunCache``, and the view's first read checks that
        ``scope_stats`` still holds the counts they are of (``PostingsMoved`` if not;
        ``fresh``: read them first)."""
        with self._runs_checked():
            counts, merged, candidates, scratch, unchecked = self._merged(query, terms, fresh)
        return self._postings_of(query, terms, counts, merged, candidates, scratch, unchecked)

    @contextmanager
    def _runs_checked(self) -> Iterator[None]:
        """A run whose columns do not line up (ValueError) as the corruption it is."""
        try:
            yield
        except ValueError:
            raise RemoteMemoryCorruptionError(
                f"posting runs and their term frequencies or lengths differ in {self._location}"
            ) from None

    def _postings_of(
        self,
        query: RecallQuery,
        terms: Sequence[str],
        counts: tuple[int, ...],
        merged: MergedRuns,
        candidates: tuple[int, Callable[[], Sequence[int]]] | None,
        scratch: dict[Any, Any] | None,
        unchecked: bool = False,
    ) -> LexicalPostings:
        """``LexicalPostings`` of ``merged`` (None ``candidates``: every doc is one);
        ``unchecked``: ``counts`` are checked against ``scope_stats`` at the first read."""
        scope = self._key
        searched, retracted, tokens, content_tokens = counts
        row_ids = merged.row_ids
        size = len(row_ids)
        count, candidate_docs = candidates or (size, lambda: range(size))
        timestamps: _Prefetched[float] = _Prefetched(size, "timestamp")
        ids: _Prefetched[str] = _Prefetched(size, "memory id")

        bodies: dict[int, str] = {}  # by row id, read with a small prefetch (never changed)
        check = [True] if unchecked else []  # emptied once the counts are checked

        def read(columns: str, row_ids: list[int]) -> list[Any]:
            """This scope's rows of ``row_ids``. The first read of an unchecked view also
            says, in the same statement, whether ``scope_stats`` still holds ``counts``."""
            sql = f"SELECT {columns} {_BY_IDS}"
            if not check:
                return self._read(sql, scope, self._many(row_ids)) if row_ids else []
            rows = []
            if row_ids:
                sql = f"SELECT {columns}, {_SAME_COUNTS} {_BY_IDS}"
                rows = self._read(sql, *counts, scope, scope, self._many(row_ids))
            held = bool(rows[0][-1]) if rows else self._stats_now() == counts
            if not held:
                self._runs = RunCache(None)
                raise PostingsMoved(partial(self.lexical_postings, fresh=True))
            check.clear()
            return [row[:-1] for row in rows]

        def prefetch(docs: Sequence[int]) -> None:
            wanted = {row_ids[d]: d for d in docs if d not in ids.values}
            if not wanted:
                return
            # A ranking keeps about the docs it names, so their bodies come in the same
            # statement (one round trip less on a server); a pool of every doc sharing a
            # stopword with the question does not.
            with_bodies = len(wanted) <= _BODIES_WITH_ROWS
            columns = "id, captured_ts, memory_id" + (", body" if with_bodies else "")
            rows = read(columns, sorted(wanted))
            for row_id, captured_ts, memory_id, *body in rows:
                doc = wanted.pop(int(row_id))
                timestamps.values[doc] = float(captured_ts)
                ids.values[doc] = memory_id
                if body:
                    bodies[int(row_id)] = body[0]
            if wanted:
                raise RemoteMemoryCorruptionError(
                    f"a posting names record {min(wanted)}, missing from {self._location}"
                )

        def candidates_of(docs: Sequence[int]) -> tuple[RecallCandidate, ...]:
            wanted = [int(row_ids[d]) for d in docs]
            unread = [i for i in wanted if i not in bodies]
            if unread or check:
                bodies.update(read("id, body", unread))
            records = [self._parse(bodies[i]) for i in wanted if i in bodies]
            return candidates_for(query, records)

        return LexicalPostings(
            terms=tuple(terms),
            postings=merged.postings,
            live=b"\x01" * size,
            tokens=merged.tokens,
            content_tokens=merged.content_tokens,
            timestamps=timestamps,
            ids=ids,
            searched_records=searched,
            candidate_records=count,
            retracted_records=retracted,
            searched_token_count=tokens,
            searched_content_token_count=content_tokens,
            candidate_docs=candidate_docs,
            candidates_of=candidates_of,
            prefetch=prefetch,
            scratch=scratch,
        )

    def _term_runs(
        self, query: RecallQuery, *, every: bool = False
    ) -> tuple[tuple[int, ...], RunCache, list[str], dict[str, list[_RunColumns]]]:
        """As of one moment: the scope's counts, their ``RunCache``, the query's terms it
        lacks (``every``: all of them) and their runs. Warm, one read of ``scope_stats``."""
        conn = self._connection()
        if conn is None:
            return (0, 0, 0, 0), RunCache(None), list(query.terms), {}
        with self._failures("read"):
            got = self._read_runs(conn, query, every=every)
            # Each statement its own snapshot: the runs read are of the counts read before
            # them if those have not moved since (every change of the postings moves them).
            if not got[2] or self._counts(conn, query)[:2] == got[0][:2]:
                return got
        with self._transaction(conn, write=False):
            return self._read_runs(conn, query, every=every)

    def _read_runs(
        self, conn: Any, query: RecallQuery, *, every: bool
    ) -> tuple[tuple[int, ...], RunCache, list[str], dict[str, list[_RunColumns]]]:
        """``_term_runs`` on ``conn``; ``every``: read the runs of every term."""
        counts = self._counts(conn, query)
        if self._runs.key != counts:
            # Searched and retracted together move on every change of the postings (an
            # append adds to their sum, a retraction to retracted), never back.
            self._runs = RunCache(counts)
        cache = self._runs
        read = list(query.terms) if every else cache.missing(query.terms)
        return counts, cache, read, self._tf_runs(conn, read)

    def _tf_runs(self, conn: Any, terms: Sequence[str]) -> dict[str, list[_RunColumns]]:
        """``terms``' runs, each term's by first id, with their three columns."""
        found: dict[str, list[_RunColumns]] = {}
        if terms:
            sql = self.TF_RUNS_OF_TERMS
            rows = self._run(self._blobs(conn), sql, self._key, self._many(terms))
            for term, run, tfs, lengths in rows:
                found.setdefault(term, []).append((bytes(run), bytes(tfs), bytes(lengths)))
        return found

    def _merged(
        self, query: RecallQuery, terms: Sequence[str], fresh: bool
    ) -> tuple[
        tuple[int, ...],
        MergedRuns,
        tuple[int, Callable[[], Sequence[int]]] | None,
        dict[Any, Any] | None,
        bool,
    ]:
        """The scope's counts and the query's runs merged, as of one moment, how many docs
        are candidates and which (None: every doc), the rankers' scratch for those runs
        and whether the counts are unchecked (``_term_runs``). Through the ``RunCache``
        once numpy is in."""
        cache = self._runs
        # Every term held (of this scope's query): the view's first read checks the counts.
        unchecked = not fresh and query.user_scope == self.user_scope and cache.key is not None
        unchecked = unchecked and not cache.missing(query.terms)
        read: list[str] = []
        found: dict[str, list[_RunColumns]] = {}
        if unchecked:
            counts = cache.key
        else:
            counts, cache, read, found = self._term_runs(query)
        fmt = self.RUN_FORMAT
        total = sum(run_postings(term_runs, fmt) for term_runs in found.values())
        if len(read) < len(query.terms) or postings_numpy(total) is not None:
            np, records = numpy_or_none(), sum(counts[:2])
            got = cache.merged(np, found, read, query.terms, terms, fmt, records)
            if got is not None:
                merged, count, candidate_docs = got
                return counts, merged, (count, candidate_docs), cache.scratch, unchecked
            if len(read) < len(query.terms):  # what it held is no help: read them all
                counts, _, _, found = self._term_runs(query, every=True)
        return counts, merge_runs(found, terms, fmt), None, None, False

    def _check_query_scope(self, conn: Any, query: RecallQuery, at: int | None = None) -> None:
        """The reference refuses a query of another scope as soon as it sees a record (one
        stored by ``at``)."""
        if query.user_scope != self.user_scope:
            known, by = _known(at)
            sql = f"SELECT memory_id FROM {{s}}records WHERE user_scope = ?{known} ORDER BY id"
            sql += " LIMIT 1"
            row = self._run(conn, sql, self._key, *by).fetchone()
            if row is not None:
                raise RemoteMemoryScopeError(f"memory {row[0]} belongs to another user scope")

    def _stats(self, conn: Any) -> tuple[Any, ...]:
        """The scope's ``scope_stats``: searched, retracted, tokens, content_tokens, then
        the vectors' model, dimension, changes and resets (zeros: nothing written yet)."""
        sql = f"SELECT searched, retracted, tokens, content_tokens, {_VECTOR_COLUMNS} "
        row = self._run(conn, sql + "FROM {s}scope_stats WHERE user_scope = ?", self._key)
        return tuple(row.fetchone() or (0, 0, 0, 0, None, 0, 0, 0))

    def _stats_now(self) -> tuple[int, ...]:
        """The scope's four counts (``_stats``), read alone."""
        sql = "SELECT searched, retracted, tokens, content_tokens FROM {s}scope_stats"
        rows = self._read(sql + " WHERE user_scope = ?", self._key)
        return tuple(int(v) for v in rows[0]) if rows else (0, 0, 0, 0)

    def _counts(self, conn: Any, query: RecallQuery) -> tuple[int, ...]:
        self._check_query_scope(conn, query)
        return tuple(int(v) for v in self._stats(conn)[:4])

    def _vector_stats(self, conn: Any) -> tuple[int, str | None, int, int]:
        searched, *_, model, dimension, changes, _ = self._stats(conn)
        return int(searched), model, int(dimension), int(changes)

    def vector_state(self) -> VectorState:
        """The model of the scope's vectors, how many there are, how many are missing."""
        conn = self._connection()
        if conn is None:
            return VectorState(None, 0, 0, 0)
        with self._transaction(conn, write=False):
            searched, model, dimension, _ = self._vector_stats(conn)
            sql = "SELECT count(*) FROM {s}vectors WHERE user_scope = ?"
            (stored,) = self._run(conn, sql, self._key).fetchone()
        return VectorState(model, dimension, int(stored), searched - int(stored))

    def dense_scores(
        self, query: RecallQuery, vector: Any, *, model: str, dimension: int
    ) -> DenseScores:
        """Dot product of ``vector`` with every stored vector of the scope. Warm, this reads
        one row of ``scope_stats``: the matrix is reused while no write touched them."""
        np = require_numpy()
        wanted = np.asarray(vector, dtype=np.float32).reshape(-1)
        if wanted.shape != (dimension,):
            raise RemoteMemoryValidationError(
                f"query vector has {wanted.size} dimensions, not {dimension}"
            )
        conn = self._connection()
        if conn is None:
            return DenseScores((), np.zeros(0, dtype=np.float32), 0)
        with self._failures("read"):
            self._check_query_scope(conn, query)
            searched, stored_model, stored_dimension, changes = self._vector_stats(conn)
            if stored_model is None:
                return DenseScores((), np.zeros(0, dtype=np.float32), searched)
            check_model(stored_model, stored_dimension, model, dimension)
            cached = self._dense
            if cached is None or cached[0] != (changes, stored_model, stored_dimension):
                with self._transaction(conn, write=False):  # the counter and its vectors
                    searched, stored_model, stored_dimension, changes = self._vector_stats(conn)
                    if stored_model is None:  # dropped in between
                        return DenseScores((), np.zeros(0, dtype=np.float32), searched)
                    check_model(stored_model, stored_dimension, model, dimension)
                    cached = self._load_vectors(conn, stored_model, stored_dimension, changes)
        _, ids, matrix, positions = cached
        scores = matrix @ wanted if ids else np.zeros(0, dtype=np.float32)
        return DenseScores(
            ids, scores, searched - len(ids), vector_of=matrix.__getitem__, positions=positions
        )

    def _load_vectors(
        self, conn: Any, model: str, dimension: int, changes: int
    ) -> tuple[tuple[int, str, int], tuple[str, ...], Any, dict[str, int]]:
        """The scope's vectors as one matrix, kept as ``self._dense``."""
        ids: list[str] = []
        packed = bytearray()  # the matrix's own buffer: no second copy of every vector
        for memory_id, blob in self._vector_rows(conn):
            ids.append(memory_id)
            packed += blob
        try:
            matrix = unpack(memoryview(packed), dimension)
        except RemoteMemoryError:
            matrix = None
        if matrix is None or len(matrix) != len(ids):
            raise RemoteMemoryCorruptionError(
                f"stored vectors are not of {dimension} dimensions in {self._location}"
            )
        positions = {memory_id: i for i, memory_id in enumerate(ids)}
        self._dense = ((changes, model, dimension), tuple(ids), matrix, positions)
        return self._dense

    def records_without_vectors(self, limit: int) -> tuple[StoredMemory, ...]:
        """Up to ``limit`` searched conversation records with no vector, oldest first."""
        conn = self._connection()
        if conn is None or limit <= 0:
            return ()
        with self._transaction(conn, write=False):
            resets = int(self._stats(conn)[-1])
            # A backfill asks again and again: start where the last answer started. The
            # records before it keep their vectors unless vector_resets moved (drop_vectors,
            # a pair vector a retraction took) or they were retracted (and left); a scope's
            # new records take higher ids (its writers queue).
            hint = self._unvectored_from
            start = hint[1] if hint is not None and hint[0] == resets else 0
            sql = (
                "SELECT r.id, r.body FROM {s}records r WHERE r.user_scope = ? "
                "AND r.id >= ? AND r.kind = 'conversation' "
                "AND NOT EXISTS (SELECT 1 FROM {s}vectors v WHERE v.record_id = r.id) "
                f"AND {_LIVE} ORDER BY r.id LIMIT ?"
            )
            rows = self._run(conn, sql, self._key, start, limit).fetchall()
        if rows:
            self._unvectored_from = (resets, int(rows[0][0]))
        return tuple(self._parse(body) for _, body in rows)

    def put_vectors(
        self,
        model: str,
        dimension: int,
        vectors: Mapping[str, bytes],
        *,
        previous: Mapping[str, str | None] | None = None,
    ) -> int:
        """Store packed vectors of the scope's searched conversation records, replacing
        any they had; how many were stored. A pair vector only where ``previous`` names its
        record's turn before as it is in this transaction (docs/contract.md)."""
        if not model or dimension <= 0:
            raise RemoteMemoryValidationError("a vector model needs a name and a dimension")
        check_previous(model, previous)
        check_sizes(vectors, dimension, model)
        conn = self._connection()
        if conn is None:
            return 0  # no store yet: no record to hold a vector
        with self._transaction(conn, write=True):
            self._claim_scope(conn, self._key)
            _, stored_model, stored_dimension, _ = self._vector_stats(conn)
            check_model(stored_model, stored_dimension, model, dimension)
            if not vectors:
                return 0
            sql = (
                "SELECT r.id, r.memory_id FROM {s}records r WHERE r.user_scope = ? "
                f"AND r.kind = 'conversation' AND r.memory_id {{any}} AND {_LIVE}"
            )
            rows = self._run(conn, sql, self._key, self._many(vectors)).fetchall()
            if previous is not None and rows:  # pair vectors: still the turn before?
                current = self._neighbours_of(conn, [m for _, m in rows if m in previous])
                rows = [
                    (row_id, memory_id)
                    for row_id, memory_id in rows
                    if memory_id in current and current[memory_id][0] == previous[memory_id]
                ]
            if not rows:
                return 0
            conn.cursor().executemany(
                self._q(
                    "INSERT INTO {s}vectors (record_id, user_scope, vector) VALUES (?, ?, ?) "
                    "ON CONFLICT (record_id) DO UPDATE SET vector = excluded.vector"
                ),
                [(row_id, self._key, vectors[memory_id]) for row_id, memory_id in rows],
            )
            self._vectors_changed(conn, None if stored_model else (model, dimension))
        return len(rows)

    def drop_vectors(self) -> int:
        """Remove every vector of the scope and its recorded model."""
        conn = self._connection()
        if conn is None:
            return 0
        with self._transaction(conn, write=True):
            self._claim_scope(conn, self._key)
            sql = "DELETE FROM {s}vectors WHERE user_scope = ?"
            dropped = self._run(conn, sql, self._key).rowcount
            self._vectors_changed(conn, None, reset=True, drop=True)
        self._dense = None
        if dropped:
            self._vectors_deleted(conn)
        return int(dropped)

    def _vectors_changed(
        self, conn: Any, model: tuple[str, int] | None, *, reset: bool = False, drop: bool = False
    ) -> None:
        """Bump the scope's change counter; record ``model`` when it is the first, forget
        it on ``drop``. ``reset``: vectors of live records went, so a backfill starts over."""
        sets, params = "vector_changes = vector_changes + 1", ()
        if reset:
            sets += ", vector_resets = vector_resets + 1"
        if drop or model is not None:
            sets += ", vector_model = ?, vector_dimension = ?"
            params = model or (None, 0)  # type: ignore[assignment]
        sql = f"UPDATE {{s}}scope_stats SET {sets} WHERE user_scope = ?"
        self._run(conn, sql, *params, self._key)

    def _parse_any(self, body: str) -> StoredMemory:
        """A stored record of any scope (an upgrade reads them all)."""
        try:
            return StoredMemory.from_dict(loads(body))
        except _BAD_BODY as exc:
            raise RemoteMemoryCorruptionError(
                f"invalid record in {self._location}: {exc}"
            ) from None

    def posting_rows(self, terms: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """``[{"term", "records", "memory_ids"}]`` of every term of the scope (sorted) or
        of ``terms``, for a notebook: the shape of ``InvertedIndex.posting_rows``."""
        found: dict[str, list[int]] = {}
        for term, run in self._read(self.ALL_RUNS, self._key):
            found.setdefault(term, []).extend(unpack_docs(bytes(run), self.RUN_FORMAT))
        every = sorted({i for ids in found.values() for i in ids})
        sql = f"SELECT id, memory_id {_BY_IDS}"
        names = dict(self._read(sql, self._key, self._many(every))) if every else {}
        rows = []
        for term in sorted(found) if terms is None else terms:
            ids = found.get(term, [])
            rows.append({"term": term, "records": len(ids), "memory_ids": [names[i] for i in ids]})
        return rows

    def _append_batch(
        self, batch: Sequence[StoredMemory], vectors: Mapping[str, bytes] | None = None
    ) -> None:
        conn = self._connection(create=True)
        with self._transaction(conn, write=True):
            deleted = self._write(conn, batch, vectors)
        if deleted:
            self._vectors_deleted(conn)

    def _claim_scope(self, conn: Any, scope: str) -> None:
        """Create the scope's stats row or lock it: writers of one scope queue here."""
        self._run(conn, _CLAIM, scope)

    def _state(self, conn: Any, batch: Sequence[StoredMemory]) -> _State:
        ids = self._many({r.memory_id for r in batch} | {r.retracts for r in batch if r.retracts})
        state = _State()
        sql = (
            "SELECT memory_id, kind, id, body, NULL FROM {s}records "
            "WHERE user_scope = ? AND memory_id {any} "
            "UNION ALL SELECT NULL, NULL, NULL, NULL, retracts FROM {s}records "
            "WHERE user_scope = ? AND retracts {any}"
        )
        rows = self._run(conn, sql, *(self._key, ids) * 2)
        for memory_id, kind, row_id, body, target in rows:
            if target is not None:
                state.retracted.add(target)
            else:
                state.kinds[memory_id] = MemoryKind(kind)
                state.rows[memory_id] = (row_id, body)
        return state

    def _write(
        self, conn: Any, batch: Sequence[StoredMemory], vectors: Mapping[str, bytes] | None
    ) -> int:
        """Write ``batch`` (and its ``vectors``) in the open transaction; returns how many
        stored vectors its retractions deleted."""
        self._claim_scope(conn, self._key)
        new_model = self._vector_model(conn, vectors)
        state = self._state(conn, batch)
        self.check_batch(batch, state)
        successors = self._pair_successors(conn, batch, state)
        indexed = self._insert_batch(conn, batch)
        self._add_postings(conn, self._key, [(row, *stats) for row, _, stats in indexed])
        here, before, gone_tokens, gone_content = self._retract(conn, batch, indexed, state)
        gone = len(here) + len(before)
        tokens = sum(len(terms) for *_, (terms, _) in indexed) - gone_tokens
        content = sum(n for *_, (_, n) in indexed) - gone_content
        self._run(conn, _COUNT, len(indexed) - gone, gone, tokens, content, self._key)
        # Vectors: the batch's searched conversations gain theirs; the stored records it
        # retracts lose theirs, in this transaction.
        added = [
            (row_id, vectors[record.memory_id])
            for row_id, record, _ in indexed
            if vectors and record.memory_id in vectors and record.memory_id not in here
        ]
        if added:
            self._add_vectors(conn, added)
        deleted = self._delete_vectors(conn, "record_id {any}", before)
        # live successors whose pair vector embedded a retracted turn
        named = "record_id IN (SELECT id FROM {s}records WHERE user_scope = ? AND memory_id {any})"
        unpaired = self._delete_vectors(conn, named, successors, self._key)
        if added or deleted or unpaired:
            self._vectors_changed(conn, new_model if added else None, reset=bool(unpaired))
        return deleted + unpaired

    def _vector_model(
        self, conn: Any, vectors: Mapping[str, bytes] | None
    ) -> tuple[str, int] | None:
        """Check a batch's ``vectors`` before anything of it is written (another model's
        vectors never join the scope's); the model to record if the scope has none yet."""
        if vectors is None:
            return None
        assert self.embedder is not None  # ``_vectors_of`` embeds only with one
        name, dimension = self.embedder.name, self.embedder.dimension
        _, stored_model, stored_dimension, _ = self._vector_stats(conn)
        check_model(stored_model, stored_dimension, name, dimension)
        check_sizes(vectors, dimension, name)
        return (name, dimension) if stored_model is None else None

    def _insert_batch(self, conn: Any, batch: Sequence[StoredMemory]) -> _Indexed:
        """Insert the batch's rows; its conversation records, in batch order."""
        conversations = [r for r in batch if r.kind is MemoryKind.CONVERSATION]
        stats = term_stats(conversations)
        lengths = {r.memory_id: (len(t), n) for r, (t, n) in zip(conversations, stats, strict=True)}
        rows: list[RecordRow] = []
        for r in batch:
            at = r.captured_datetime
            row = (r.memory_id, r.kind.value, at.timestamp(), micros_of(at), r.retracts)
            length = lengths.get(r.memory_id, (None, None))
            rows.append((*row, record_json(r), *length, _micros(r.stored_at)))
        row_of = self._insert_records(conn, rows)
        if len(row_of) != len(rows):
            # Another writer's row won the race for these ids; the transaction rolls back.
            raise RemoteMemoryDuplicateError([row[0] for row in rows if row[0] not in row_of])
        return [(row_of[r.memory_id], r, s) for r, s in zip(conversations, stats, strict=True)]

    def _add_postings(
        self, conn: Any, scope: str, indexed: Sequence[tuple[int, Sequence[str], int]]
    ) -> None:
        """One run per term of ``(row id, terms, content length)``, ids ascending."""
        terms = list(set(chain.from_iterable(tokens for _, tokens, _ in indexed)))
        fmt = self.RUN_FORMAT
        runs = [
            (terms[n], unpack_docs(run[:8], fmt)[0], run, tfs, lengths)
            for n, run, tfs, lengths in tf_length_runs_by_term(
                [(row_id, tokens) for row_id, tokens, _ in indexed],
                [(len(tokens), content) for _, tokens, content in indexed],
                {term: n for n, term in enumerate(terms)},
                fmt,
            )
        ]
        if runs:
            self._add_runs(conn, scope, runs)

    def _retract(
        self, conn: Any, batch: Sequence[StoredMemory], indexed: _Indexed, state: _State
    ) -> tuple[set[str], list[int], int, int]:
        """Take each conversation the batch retracts, stored or in the batch, out of the
        postings; the batch's own retracted ids, the row ids of the stored ones, and the
        lengths they took out of the counts."""
        in_batch = {record.memory_id: (row_id, record) for row_id, record, _ in indexed}
        here: set[str] = set()
        before: list[int] = []
        tokens = content = 0
        for record in batch:
            target = record.retracts
            if record.kind is not MemoryKind.RETRACTION or target is None:
                continue
            if target in in_batch:
                row_id, target_record = in_batch[target]
                here.add(target)
            elif target in state.rows:
                row_id, body = state.rows[target]
                target_record = self._parse(body)
                if target_record.kind is not MemoryKind.CONVERSATION:
                    continue
                before.append(row_id)
            else:
                continue
            target_terms, n_tokens, n_content = record_stats(target_record)
            self._drop_from_runs(conn, target_terms, row_id)
            tokens += n_tokens
            content += n_content
        return here, before, tokens, content

    def _delete_vectors(self, conn: Any, where: str, values: Sequence[Any], *params: Any) -> int:
        """Delete the scope's vectors ``where`` ``{any}`` is ``values``; how many went."""
        if not values:
            return 0
        sql = "DELETE FROM {s}vectors WHERE user_scope = ? AND " + where
        return int(self._run(conn, sql, self._key, *params, self._many(values)).rowcount)

    def _pair_successors(
        self, conn: Any, batch: Sequence[StoredMemory], state: _State
    ) -> list[str]:
        """When the scope keeps pair vectors: the turn after each stored record ``batch``
        retracts, as its source orders them before the batch (once the batch is in, a
        retracted record has left that order and its successor cannot be found from it)."""
        targets = {
            record.retracts
            for record in batch
            if record.kind is MemoryKind.RETRACTION and record.retracts in state.rows
        }
        if not targets:
            return []
        _, model, _, _ = self._vector_stats(conn)
        if not reads_pairs(model):
            return []
        return [
            after for _, after in self._neighbours_of(conn, targets).values() if after is not None
        ]

    def _drop_from_runs(self, conn: Any, terms: set[str], row_id: int) -> None:
        """Take ``row_id`` out of the run of each of ``terms`` that holds it."""
        scope, fmt = self._key, self.RUN_FORMAT
        holding = self._run(self._blobs(conn), self.RUNS_HOLDING, scope, self._many(terms), row_id)
        for term, first_id, run, tfs, lengths in holding.fetchall():
            rest = run_columns_without(bytes(run), bytes(tfs), bytes(lengths), row_id, fmt)
            if rest is None:
                continue
            if rest[0]:
                self._run(conn, self.SET_RUN, *rest, scope, term, first_id)
            else:
                self._run(conn, self.DROP_RUN, scope, term, first_id)

"""The SQL store, written once: writes, the write rules' state, scans and the top-k walk.

``SqlMemoryStore`` is memlib's storage algorithm for a relational database (SPEC §2);
``SqliteMemoryStore`` and ``PostgresMemoryStore`` are its two dialects. A dialect
supplies only what differs between the databases — how to connect and hold a
transaction, its placeholders and list parameters, the SQL of its term index, how a
batch of records goes in, how its driver's errors read, and its schema's DDL — as the
class attributes and methods marked *dialect* below.

Tables, in both: ``records`` (one row per record, its JSON in ``body``, ``id`` in
append order), ``scope_stats`` (the counts a recall reports, per scope) and ``postings``
(per term, packed runs of record ids: one run per term per written batch, and parallel
to each a run of the term's frequency in those records; schema 3). A conversation's row
also holds its searchable text's length in terms, all and without stopwords; since
schema 5 each run carries those two lengths of each of its records too (``lengths``,
``retrieval.postings.LENGTHS``), so that ``lexical_postings`` numbers and measures the
candidates from the runs alone and reads a record row only for the few docs a ranking
keeps (``prefetch``) and the hits. A write is one transaction: claim the scope's stats
row (PostgreSQL writers of one scope queue there; SQLite already holds the database's
write lock), check the batch against the stored state, insert the records and one run
per term, take every retracted record out of its terms' runs — a record retracted in
the same batch too — and add to the counts.
A recall reads its terms' runs, counts matches itself and looks up only the records
the bounded top-k walk needs. Every query of a scope's rows names the scope in its
``WHERE`` clause.

Schema 4 keeps embeddings (``vectors.py``) in ``vectors``: one row per searched
conversation record that has one (``record_id`` is its ``records.id``), the packed
float32 vector as a blob, the scope in the row. ``scope_stats`` holds the model and
dimension of the scope's vectors, ``vector_changes``, a counter that every write
touching the scope's vectors bumps in its transaction, and ``vector_resets``, bumped by
``drop_vectors``. A store object keeps the scope's vectors as one numpy matrix and
reuses it while ``vector_changes`` (one small row, read by any process) has not moved.
An append's vectors go in with its records, in its transaction; a retraction deletes
its target's vector in the same transaction. A scope of pair vectors
(``vectors.reads_pairs``) also loses there the vector of each target's successor in its
source, which embedded the target's text, and bumps ``vector_resets``: that successor is
missing again, wherever a backfill had got to. ``put_vectors`` stores a pair vector only
while its record's turn before is still the one it embedded, read in its own transaction.

Schema 5 adds ``postings.lengths``: written with the run, shortened with it when a
retraction takes a record out, and computed by the upgrade from ``records.tokens`` /
``content_tokens`` for the runs written before (``_backfill_run_lengths``).
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from array import array as _array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from itertools import chain
from typing import Any, ClassVar, TypeVar, overload

from ..._retrieval import (
    candidates_for,
    count_matches,
    index_tokens,
    micros_of,
    pack_docs,
    record_stats,
    term_stats,
    top_of_matches,
    unpack_docs,
)
from ..._retrieval.postings import (
    merge_runs,
    pack_lengths,
    run_columns_without,
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
from ...candidates import CandidateScan, LexicalPostings, RecallCandidate, searchable_text
from ...errors import (
    RemoteMemoryCorruptionError,
    RemoteMemoryDuplicateError,
    RemoteMemoryError,
    RemoteMemoryScopeError,
    RemoteMemoryStorageError,
    RemoteMemoryValidationError,
)
from ...normalize import RecallQuery
from ...rankers.base import ScoreBound
from ...records import MemoryKind, StoredMemory, record_json
from .._base import Clock, IndexedMemoryStore, latest_profile_of
from .._sources import SourceNeighbours

__all__ = [
    "SCHEMA_VERSION", "Clock", "Migration", "RecordRow", "Run", "SqlMemoryStore", "driver_error",
]

SCHEMA_VERSION = 6

# A schema upgrade from version i to i + 1: statements ("{s}" is the schema prefix), or
# a function of the connection for what SQL alone cannot say.
Migration = tuple[str, ...] | Callable[[Any], None]
# A posting run as written: (term, the first record id in it, the ids packed, the term's
# frequency in each of them packed the same way, parallel to the ids, and each one's
# two lengths packed as ``retrieval.postings.LENGTHS``).
Run = tuple[str, int, bytes, bytes, bytes]

# The columns of a records row in the order the dialects insert them (after the scope):
# memory_id, kind, captured_ts, captured_us, retracts, body, and for a conversation its
# searchable text's length in terms with repeats, all / without stopwords (else None).
RecordRow = tuple[str, str, float, int, str | None, str, int | None, int | None]


def driver_error(
    where: str, detail: str, cause: str | None = None, *, corrupt: bool = False
) -> RemoteMemoryError:
    """A database failure as memlib's one-line error: ``WHERE: CAUSE (DETAIL)``.

    Damaged data is a ``RemoteMemoryCorruptionError``; a failure with a named cause
    (disk full, read-only, locked, connection lost …) a ``RemoteMemoryStorageError``;
    anything else a plain ``RemoteMemoryError``, ``WHERE: DETAIL``.
    """
    text = f"{where}: {detail}" if cause is None else f"{where}: {cause} ({detail})"
    if corrupt:
        return RemoteMemoryCorruptionError(text)
    if cause is not None:
        return RemoteMemoryStorageError(text)
    return RemoteMemoryError(text)


def _storable(memory_ids: Iterable[Any]) -> list[Any]:
    """``memory_ids`` without those holding U+0000: no stored id holds it (it was always
    refused), and PostgreSQL refuses a parameter with it, so they are left out here as
    any id the scope does not hold is, the same on every backend."""
    return [m for m in memory_ids if not (type(m) is str and "\x00" in m)]


_T = TypeVar("_T")


class _Prefetched(Sequence[_T]):
    """One column of the records a ranking keeps, by doc: filled by ``prefetch``, read
    after it. Reading a doc that was not prefetched is a bug of the reader, said as such
    (a silent fallback would read a row per doc, what the column exists to avoid)."""

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
    MIGRATIONS: ClassVar[tuple[Migration, ...]]
    RUN_FORMAT: ClassVar[str]  # how a run packs its ids (``memlib._retrieval.pack_docs``)
    # The term index. Parameters: (scope, terms) → (run,)
    RUNS_OF_TERMS: ClassVar[str]
    # (scope) → (term, run), each term's runs by first id
    ALL_RUNS: ClassVar[str]
    # (scope, terms, record id) → (term, first id, run, tfs, lengths) for each term's run
    # that could hold the id: runs of a term cover ascending, disjoint id ranges, so the
    # last to start at or before it.
    RUNS_HOLDING: ClassVar[str]
    SET_RUN: ClassVar[str]  # (run, tfs, lengths, scope, term, first id)
    # (scope, terms) → (term, run, tfs, lengths), each term's runs by first id
    TF_RUNS_OF_TERMS: ClassVar[str]
    # Schema 3's backfill: () → (term, run, *key) of every run of every scope, by first
    # id; SET_TFS (tfs, *key).
    EVERY_RUN: ClassVar[str]
    SET_TFS: ClassVar[str]
    # Schema 5's backfill pages through every run of every scope by its primary key:
    # RUN_PAGE (*key, LIMIT) → (*key, run), the runs after ``key``; FIRST_RUN_KEY sorts
    # before any; SET_LENGTHS (lengths, *key).
    RUN_PAGE: ClassVar[str]
    FIRST_RUN_KEY: ClassVar[tuple[Any, ...]]
    SET_LENGTHS: ClassVar[str]
    _BACKFILL_PAGE: ClassVar[int] = 1_000  # runs per page (tests lower it)
    DROP_RUN: ClassVar[str]  # (scope, term, first id)
    # Schema 6: a record's ``source.source_id`` as the dialect reads it from ``{a}.body``,
    # the very expression of the ``records_source`` index (so that the index answers).
    SOURCE_ID: ClassVar[str]

    schema_label: str  # how ``memlib db`` names the schema
    _prefix = ""  # "{s}": what table names are qualified with
    _location: str  # where the records are, for a corruption message

    def __init__(
        self, *, user_id: str, clock: Clock | None = None, embedder: Embedder | None = None
    ) -> None:
        super().__init__(user_id=user_id, clock=clock, embedder=embedder)
        self._conn: Any = None
        self._sql: dict[str, str] = {}
        # The scope's vectors as dense_scores last read them: ((changes, model,
        # dimension), memory_ids, matrix), reused while scope_stats says the same.
        # (vector counter, model, dimension), ids, matrix, memory_id → row: one load a change.
        self._dense: tuple[tuple[int, str, int], tuple[str, ...], Any, dict[str, int]] | None = (
            None)
        # (vector_resets, record id): records_without_vectors found none before that id.
        self._unvectored_from: tuple[int, int] | None = None

    # -- dialect: connection, transactions, errors -----------------------------------------

    @abstractmethod
    def _open(self, *, create: bool) -> Any:
        """A new connection to a schema of this version; None: nothing stored yet."""

    def _alive(self, conn: Any) -> bool:
        return True

    def _release(self, conn: Any) -> None:
        conn.close()

    @abstractmethod
    def _driver_error(self) -> type[Exception]:
        """The base class of the driver's errors."""

    @abstractmethod
    def _error(self, action: str, exc: Exception) -> RemoteMemoryError:
        """``exc``, met while doing ``action``, as memlib's one-line error."""

    @abstractmethod
    def _transaction(self, conn: Any, *, write: bool) -> AbstractContextManager[None]:
        """One transaction: a write holds the scope's write lock; a read one snapshot."""

    @abstractmethod
    def _has_meta(self, conn: Any) -> bool:
        """Whether the table ``META`` exists."""

    @abstractmethod
    def _schema_has(self, version: int) -> str:
        """The start of "newer than this memlib knows" for this store."""

    @abstractmethod
    def init_schema(self) -> tuple[int, int]:
        """Create or upgrade memlib's schema; ``(version before, version after)``."""

    @abstractmethod
    def schema_version(self) -> int:
        """The schema's version; 0 when there is none yet."""

    # -- dialect: writing ------------------------------------------------------------------

    @abstractmethod
    def _insert_records(self, conn: Any, rows: Sequence[RecordRow]) -> dict[str, int]:
        """Insert the batch's rows, ids ascending in batch order: ``{memory_id: id}``.

        A row missing from the answer did not go in: another writer's row holds its id.
        """

    @abstractmethod
    def _add_runs(self, conn: Any, runs: Sequence[Run]) -> None:
        """Add one posting run per term of the batch."""

    def _many(self, values: Iterable[Any]) -> Any:
        """``values`` as the parameter of ``{any}``."""
        return list(values)

    def _blobs(self, conn: Any) -> Any:
        """Where to run a query whose rows hold runs (PostgreSQL reads them in binary)."""
        return conn

    def _add_vectors(self, conn: Any, rows: Sequence[tuple[int, bytes]]) -> None:
        """Insert ``(record id, packed vector)`` rows of records this batch wrote."""
        conn.cursor().executemany(self._q(
            "INSERT INTO {s}vectors (record_id, user_scope, vector) VALUES (?, ?, ?)"
        ), [(row_id, self.user_scope, blob) for row_id, blob in rows])

    VECTOR_ROWS = (
        "SELECT r.memory_id, v.vector FROM {s}vectors v JOIN {s}records r "
        "ON r.id = v.record_id WHERE v.user_scope = ? ORDER BY v.record_id"
    )

    def _vector_rows(self, conn: Any) -> Iterable[tuple[str, bytes]]:
        """``(memory_id, packed vector)`` of the scope's vectors, by record id."""
        return self._blobs(conn).execute(self._q(self.VECTOR_ROWS), (self.user_scope,))

    def _vectors_deleted(self, conn: Any) -> None:
        """Called after a commit that deleted vectors: what the database keeps of them
        elsewhere (SQLite's write-ahead log) goes too."""

    # -- the algorithm ---------------------------------------------------------------------

    def _q(self, template: str) -> str:
        sql = self._sql.get(template)
        if sql is None:
            sql = self._sql[template] = template.replace("?", self.PARAM).format(
                s=self._prefix, any=self.ANY, scope_of_ids=self.SCOPE_OF_IDS,
                profile_index=self.PROFILE_INDEX,
            )
        return sql

    def _connection(self, *, create: bool = False) -> Any:
        if self._conn is None or not self._alive(self._conn):
            self._conn = self._open(create=create)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._release(self._conn)
            self._conn = None

    @contextmanager
    def _failures(self, action: str) -> Iterator[None]:
        """The driver's errors inside the block as memlib's, naming the cause."""
        try:
            yield
        except self._driver_error() as exc:
            raise self._error(action, exc) from None

    def _version(self, conn: Any) -> int:
        if not self._has_meta(conn):
            return 0
        row = conn.execute(
            self._q(f"SELECT value FROM {self.META} WHERE key = 'schema_version'")
        ).fetchone()
        return int(row[0]) if row else 0

    def _too_new(self, version: int) -> RemoteMemoryError:
        return RemoteMemoryError(
            f"{self._schema_has(version)}; this memlib knows up to {SCHEMA_VERSION}: "
            "upgrade memlib"
        )

    def _migrate(self, conn: Any) -> tuple[int, int]:
        """Bring the schema to ``SCHEMA_VERSION``, inside the dialect's exclusive transaction."""
        before = self._version(conn)
        if before > SCHEMA_VERSION:
            raise self._too_new(before)
        conn.execute(self._q(
            f"CREATE TABLE IF NOT EXISTS {self.META} (key text PRIMARY KEY, value text NOT NULL)"
        ))
        for version, step in enumerate(self.MIGRATIONS[before:], before + 1):
            if callable(step):
                step(conn)
            else:
                for statement in step:
                    conn.execute(statement.format(s=self._prefix))
            if version == 3 and before > 0:
                self._backfill_term_frequencies(conn)
            if version == 5 and before > 0:
                self._backfill_run_lengths(conn)
        conn.execute(self._q(
            f"INSERT INTO {self.META} (key, value) VALUES ('schema_version', ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
        ), (str(SCHEMA_VERSION),))
        return before, SCHEMA_VERSION

    # -- reading ---------------------------------------------------------------------------

    def _parse(self, body: str) -> StoredMemory:
        try:
            record = StoredMemory.from_dict(loads(body))
        except (ValueError, TypeError, RemoteMemoryValidationError,
                RemoteMemoryCorruptionError) as exc:
            # ValueError: invalid JSON, or JSON past safejson's depth and number limits.
            raise RemoteMemoryCorruptionError(
                f"invalid record in {self._location}: {exc}"
            ) from None
        if record.user_scope != self.user_scope:
            raise RemoteMemoryScopeError(f"memory {record.memory_id} belongs to another user scope")
        return record

    def _records_where(self, condition: str, *params: Any) -> tuple[StoredMemory, ...]:
        conn = self._connection()
        if conn is None:
            return ()
        with self._failures("read"):
            rows = conn.execute(self._q(
                f"SELECT body FROM {{s}}records WHERE user_scope = ?{condition} ORDER BY id"
            ), (self.user_scope, *params)).fetchall()
        return tuple(self._parse(body) for (body,) in rows)

    def read_all(self) -> tuple[StoredMemory, ...]:
        return self._records_where("")

    def records(self, kind: MemoryKind | str | None = None) -> tuple[StoredMemory, ...]:
        if kind is None:
            return self.read_all()
        return self._records_where(" AND kind = ?", MemoryKind(kind).value)

    def latest_profile(self) -> StoredMemory | None:
        # Profiles and retractions only: through records_scope_kind, never a scan of the
        # scope (every session start and profile read asks this).
        conn = self._connection()
        if conn is None:
            return None
        with self._failures("read"):
            rows = conn.execute(self._q(
                "SELECT body FROM {s}records {profile_index} "
                "WHERE user_scope = ? AND kind <> 'conversation' ORDER BY id"
            ), (self.user_scope,)).fetchall()
        return latest_profile_of(self._parse(body) for (body,) in rows)

    def retraction_of(self, memory_id: str) -> StoredMemory | None:
        """The retraction naming ``memory_id``, through the ``retracts`` index."""
        if not _storable([memory_id]):
            return None
        found = self._records_where(" AND retracts = ?", memory_id)
        return found[0] if found else None

    def existing_ids(self, memory_ids: Sequence[str]) -> set[str]:
        """Which of ``memory_ids`` this scope already holds."""
        memory_ids = _storable(memory_ids)
        conn = self._connection()
        if conn is None:
            return set()
        with self._failures("read"):
            rows = conn.execute(self._q(
                "SELECT memory_id FROM {s}records WHERE user_scope = ? AND memory_id {any}"
            ), (self.user_scope, self._many(memory_ids))).fetchall()
        return {row[0] for row in rows}

    def records_by_id(self, memory_ids: Sequence[str]) -> list[StoredMemory]:
        """The scope's records of those of ``memory_ids`` that exist, in the order asked."""
        memory_ids = _storable(memory_ids)
        conn = self._connection()
        if conn is None or not memory_ids:
            return []
        with self._failures("read"):
            rows = conn.execute(self._q(
                "SELECT memory_id, body FROM {s}records WHERE user_scope = ? AND memory_id {any}"
            ), (self.user_scope, self._many(set(memory_ids)))).fetchall()
        found = {memory_id: self._parse(body) for memory_id, body in rows}
        return [found[m] for m in memory_ids if m in found]

    def source_neighbours(self, memory_ids: Sequence[str]) -> dict[str, SourceNeighbours]:
        """Each asked searched conversation record's neighbours in its source (``sources.py``):
        one statement, each neighbour one probe of the ``records_source`` index, then
        the retraction check through ``records_retracts``."""
        memory_ids = _storable(memory_ids)
        conn = self._connection()
        if conn is None or not memory_ids:
            return {}
        with self._failures("read"):
            found = self._neighbours_of(conn, memory_ids)
        return {m: SourceNeighbours(*found[m]) for m in memory_ids if m in found}

    def _neighbours_of(
        self, conn: Any, memory_ids: Iterable[str]
    ) -> dict[str, tuple[str | None, str | None]]:
        """``memory_id → (turn before, turn after)`` on ``conn`` (in its transaction)."""
        rows = conn.execute(self._q(self._neighbours_sql()), (
            self.user_scope, self._many(set(memory_ids)),
        )).fetchall()
        return {memory_id: (before, after) for memory_id, before, after in rows}

    def _neighbours_sql(self) -> str:
        def live(a: str) -> str:
            return (f"NOT EXISTS (SELECT 1 FROM {{s}}records x_{a} WHERE x_{a}.user_scope = "
                    f"{a}.user_scope AND x_{a}.retracts = {a}.memory_id)")

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
        conn = self._connection()
        if conn is None:
            return CandidateScan((), 0, 0, 0, 0, 0)
        scope = self.user_scope
        with self._transaction(conn, write=False):  # one snapshot for counts and candidates
            self._check_query_scope(conn, query)
            stats = conn.execute(self._q(
                "SELECT searched, retracted, tokens, content_tokens FROM {s}scope_stats "
                "WHERE user_scope = ?"
            ), (scope,)).fetchone()
            searched, retracted, tokens, content_tokens = (int(v) for v in stats or (0,) * 4)
            runs = [bytes(run) for (run,) in self._blobs(conn).execute(
                self._q(self.RUNS_OF_TERMS), (scope, self._many(query.terms))
            )]
            ids, matched = count_matches(runs, self.RUN_FORMAT)
            if top is None:
                records = self._bodies_of(conn, ids)
            else:
                records = self._top(conn, query, ids, matched, searched, top)
        return CandidateScan(
            candidates=candidates_for(query, records),
            searched_records=searched,
            candidate_records=len(ids),
            retracted_records=retracted,
            searched_token_count=tokens,
            searched_content_token_count=content_tokens,
        )

    def _bodies_of(self, conn: Any, ids: Iterable[Any]) -> tuple[StoredMemory, ...]:
        """The records of ``ids`` (this scope's only), in the order of ``ids``."""
        wanted = [int(i) for i in ids]
        if not wanted:
            return ()
        bodies = dict(conn.execute(self._q(
            "SELECT id, body FROM {s}records WHERE {scope_of_ids} = ? AND id {any}"
        ), (self.user_scope, self._many(wanted))).fetchall())
        return tuple(self._parse(bodies[i]) for i in wanted if i in bodies)

    def _top(
        self, conn: Any, query: RecallQuery, ids: Any, matched: Any, searched: int,
        bound: ScoreBound,
    ) -> tuple[StoredMemory, ...]:
        scope, limit = self.user_scope, query.limit
        columns = "SELECT id, captured_ts, captured_us, memory_id FROM {s}records WHERE "
        by_ids = columns + "{scope_of_ids} = ? AND id {any}"
        first = self._q(by_ids + " ORDER BY captured_ts DESC LIMIT ?")
        ties = self._q(by_ids + " AND captured_ts >= ?")
        recent = self._q(columns + "user_scope = ? ORDER BY captured_ts DESC LIMIT ?")

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

        kept = top_of_matches(ids, matched, query, searched, lookup, newest_first, bound)
        return self._bodies_of(conn, kept)

    def lexical_postings(self, query: RecallQuery, terms: Sequence[str]) -> LexicalPostings:
        """``LexicalScanning``: the postings (with tf) of the query's terms, read in one
        snapshot; doc numbers are the candidates (every record holding a query term,
        all searched: a retracted record has left the runs) in id order.

        Everything but the tie-breaks comes from the runs: no record row is read here.
        ``timestamps`` / ``ids`` are read by ``prefetch`` for the docs a ranking keeps,
        in one query; the bodies by ``candidates_of`` for the hits.
        """
        conn = self._connection()
        scope = self.user_scope
        found: dict[str, list[tuple[bytes, bytes, bytes]]] = {}
        stats: Any = None
        if conn is not None:
            with self._failures("read"), self._transaction(conn, write=False):
                self._check_query_scope(conn, query)
                stats = conn.execute(self._q(
                    "SELECT searched, retracted, tokens, content_tokens FROM {s}scope_stats "
                    "WHERE user_scope = ?"
                ), (scope,)).fetchone()
                for term, run, tfs, lengths in self._blobs(conn).execute(
                    self._q(self.TF_RUNS_OF_TERMS), (scope, self._many(query.terms))
                ):
                    found.setdefault(term, []).append((bytes(run), bytes(tfs), bytes(lengths)))
        searched, retracted, tokens, content_tokens = (int(v) for v in stats or (0,) * 4)
        try:
            merged = merge_runs(found, terms, self.RUN_FORMAT)
        except ValueError:
            raise RemoteMemoryCorruptionError(
                f"posting runs and their term frequencies or lengths differ in {self._location}"
            ) from None
        del found
        row_ids = merged.row_ids
        count = len(row_ids)
        timestamps: _Prefetched[float] = _Prefetched(count, "timestamp")
        ids: _Prefetched[str] = _Prefetched(count, "memory id")

        def prefetch(docs: Sequence[int]) -> None:
            wanted = {row_ids[d]: d for d in docs if d not in ids.values}
            if not wanted:
                return
            reader = self._connection()
            with self._failures("read"):
                rows = reader.execute(self._q(
                    "SELECT id, captured_ts, memory_id FROM {s}records "
                    "WHERE {scope_of_ids} = ? AND id {any}"
                ), (scope, self._many(sorted(wanted)))).fetchall()
            for row_id, captured_ts, memory_id in rows:
                doc = wanted.pop(int(row_id))
                timestamps.values[doc] = float(captured_ts)
                ids.values[doc] = memory_id
            if wanted:
                raise RemoteMemoryCorruptionError(
                    f"a posting names record {min(wanted)}, missing from {self._location}"
                )

        def candidates_of(docs: Sequence[int]) -> tuple[RecallCandidate, ...]:
            if not docs:
                return ()
            reader = self._connection()
            with self._failures("read"):
                return candidates_for(query, self._bodies_of(reader, [row_ids[d] for d in docs]))

        return LexicalPostings(
            terms=tuple(terms),
            postings=merged.postings,
            live=b"\x01" * count,
            tokens=merged.tokens,
            content_tokens=merged.content_tokens,
            timestamps=timestamps,
            ids=ids,
            searched_records=searched,
            candidate_records=count,
            retracted_records=retracted,
            searched_token_count=tokens,
            searched_content_token_count=content_tokens,
            candidate_docs=lambda: range(count),
            candidates_of=candidates_of,
            prefetch=prefetch,
        )

    # -- stored embeddings (VectorStoring) ---------------------------------------------------

    def _check_query_scope(self, conn: Any, query: RecallQuery) -> None:
        """The reference refuses a query of another scope as soon as it sees a record."""
        if query.user_scope != self.user_scope:
            row = conn.execute(self._q(
                "SELECT memory_id FROM {s}records WHERE user_scope = ? ORDER BY id LIMIT 1"
            ), (self.user_scope,)).fetchone()
            if row is not None:
                raise RemoteMemoryScopeError(f"memory {row[0]} belongs to another user scope")

    def _vector_stats(self, conn: Any) -> tuple[int, str | None, int, int]:
        """``(searched, model, dimension, changes)`` of the scope (zeros: none yet)."""
        row = conn.execute(self._q(
            "SELECT searched, vector_model, vector_dimension, vector_changes "
            "FROM {s}scope_stats WHERE user_scope = ?"
        ), (self.user_scope,)).fetchone()
        if row is None:
            return 0, None, 0, 0
        return int(row[0]), row[1], int(row[2]), int(row[3])

    def vector_state(self) -> VectorState:
        """The model of the scope's vectors, how many there are, how many are missing."""
        conn = self._connection()
        if conn is None:
            return VectorState(None, 0, 0, 0)
        with self._failures("read"), self._transaction(conn, write=False):
            searched, model, dimension, _ = self._vector_stats(conn)
            (stored,) = conn.execute(self._q(
                "SELECT count(*) FROM {s}vectors WHERE user_scope = ?"
            ), (self.user_scope,)).fetchone()
        return VectorState(model, dimension, int(stored), searched - int(stored))

    def dense_scores(
        self, query: RecallQuery, vector: Any, *, model: str, dimension: int
    ) -> DenseScores:
        """Dot product of ``vector`` with every stored vector of the scope's searched
        records. Warm, this reads one row of ``scope_stats``: the matrix read last time
        is reused while no write has touched the scope's vectors since."""
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
        return DenseScores(ids, scores, searched - len(ids), vector_of=matrix.__getitem__,
                           positions=positions)

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
            row = conn.execute(self._q(
                "SELECT vector_resets FROM {s}scope_stats WHERE user_scope = ?"
            ), (self.user_scope,)).fetchone()
            resets = int(row[0]) if row else 0
            # A backfill asks again and again: start where the last answer started.
            # Every record before it had a vector then and still has one unless
            # drop_vectors ran or a retraction took a successor's pair vector (both bump
            # vector_resets) or it was retracted (and left); a scope's new records always
            # take higher ids (its writers queue).
            hint = self._unvectored_from
            start = hint[1] if hint is not None and hint[0] == resets else 0
            rows = conn.execute(self._q(
                "SELECT r.id, r.body FROM {s}records r WHERE r.user_scope = ? "
                "AND r.id >= ? AND r.kind = 'conversation' "
                "AND NOT EXISTS (SELECT 1 FROM {s}vectors v WHERE v.record_id = r.id) "
                "AND NOT EXISTS (SELECT 1 FROM {s}records t "
                "WHERE t.user_scope = r.user_scope AND t.retracts = r.memory_id) "
                "ORDER BY r.id LIMIT ?"
            ), (self.user_scope, start, limit)).fetchall()
        if rows:
            self._unvectored_from = (resets, int(rows[0][0]))
        return tuple(self._parse(body) for _, body in rows)

    def put_vectors(
        self, model: str, dimension: int, vectors: Mapping[str, bytes],
        *, previous: Mapping[str, str | None] | None = None,
    ) -> int:
        """Store packed vectors of the scope's searched conversation records, replacing
        any they had; other ids are skipped. Returns how many were stored.

        Pair vectors (``reads_pairs(model)``) are stored only where ``previous`` names
        the record's turn before as it is in this write's transaction: a retraction that
        committed after the embedding changed what the vector should have embedded."""
        if not model or dimension <= 0:
            raise RemoteMemoryValidationError("a vector model needs a name and a dimension")
        check_previous(model, previous)
        check_sizes(vectors, dimension, model)
        conn = self._connection()
        if conn is None:
            return 0  # no store yet: no record to hold a vector
        with self._transaction(conn, write=True):
            self._claim_scope(conn)
            _, stored_model, stored_dimension, _ = self._vector_stats(conn)
            check_model(stored_model, stored_dimension, model, dimension)
            if not vectors:
                return 0
            rows = conn.execute(self._q(
                "SELECT r.id, r.memory_id FROM {s}records r WHERE r.user_scope = ? "
                "AND r.kind = 'conversation' AND r.memory_id {any} "
                "AND NOT EXISTS (SELECT 1 FROM {s}records t "
                "WHERE t.user_scope = r.user_scope AND t.retracts = r.memory_id)"
            ), (self.user_scope, self._many(vectors))).fetchall()
            if previous is not None and rows:  # pair vectors: still the turn before?
                current = self._neighbours_of(conn, [m for _, m in rows if m in previous])
                rows = [(row_id, memory_id) for row_id, memory_id in rows
                        if memory_id in current and current[memory_id][0] == previous[memory_id]]
            if not rows:
                return 0
            conn.cursor().executemany(self._q(
                "INSERT INTO {s}vectors (record_id, user_scope, vector) VALUES (?, ?, ?) "
                "ON CONFLICT (record_id) DO UPDATE SET vector = excluded.vector"
            ), [(row_id, self.user_scope, vectors[memory_id]) for row_id, memory_id in rows])
            self._vectors_changed(conn, None if stored_model else (model, dimension))
        return len(rows)

    def drop_vectors(self) -> int:
        """Remove every vector of the scope and its recorded model."""
        conn = self._connection()
        if conn is None:
            return 0
        with self._transaction(conn, write=True):
            self._claim_scope(conn)
            dropped = conn.execute(self._q(
                "DELETE FROM {s}vectors WHERE user_scope = ?"
            ), (self.user_scope,)).rowcount
            conn.execute(self._q(
                "UPDATE {s}scope_stats SET vector_model = NULL, vector_dimension = 0, "
                "vector_changes = vector_changes + 1, vector_resets = vector_resets + 1 "
                "WHERE user_scope = ?"
            ), (self.user_scope,))
        self._dense = None
        if dropped:
            self._vectors_deleted(conn)
        return int(dropped)

    def _vectors_changed(
        self, conn: Any, model: tuple[str, int] | None, *, reset: bool = False
    ) -> None:
        """Bump the scope's change counter; record ``model`` when it is the first.
        ``reset``: vectors of live records went, so a backfill starts over too."""
        if reset:
            conn.execute(self._q(
                "UPDATE {s}scope_stats SET vector_resets = vector_resets + 1 "
                "WHERE user_scope = ?"
            ), (self.user_scope,))
        if model is None:
            conn.execute(self._q(
                "UPDATE {s}scope_stats SET vector_changes = vector_changes + 1 "
                "WHERE user_scope = ?"
            ), (self.user_scope,))
        else:
            conn.execute(self._q(
                "UPDATE {s}scope_stats SET vector_changes = vector_changes + 1, "
                "vector_model = ?, vector_dimension = ? WHERE user_scope = ?"
            ), (*model, self.user_scope))

    def _backfill_term_frequencies(self, conn: Any) -> None:
        """Schema 3 on a store written before it: each conversation's lengths and each
        posting's term frequency, computed from the stored bodies (every scope)."""
        last = 0
        while True:
            chunk = conn.execute(self._q(
                "SELECT id, body FROM {s}records WHERE kind = 'conversation' AND id > ? "
                "ORDER BY id LIMIT 5000"
            ), (last,)).fetchall()
            if not chunk:
                break
            last = int(chunk[-1][0])
            updates = []
            for row_id, body in chunk:
                (tokens, content), = term_stats((self._parse_any(body),))
                updates.append((len(tokens), content, row_id))
            conn.cursor().executemany(self._q(
                "UPDATE {s}records SET tokens = ?, content_tokens = ? WHERE id = ?"
            ), updates)
        fmt = self.RUN_FORMAT
        counts: dict[int, dict[str, int]] = {}  # record id → its term frequencies
        every = self._blobs(conn).execute(self._q(self.EVERY_RUN)).fetchall()
        for term, run, *key in every:
            ids = unpack_docs(bytes(run), fmt)
            if not ids:
                continue
            if len(counts) > 20_000:
                # Runs come by first id: no later run holds an id below this one's first.
                for stale in [i for i in counts if i < ids[0]]:
                    del counts[stale]
            missing = [i for i in ids if i not in counts]
            if missing:
                for row_id, body in conn.execute(self._q(
                    "SELECT id, body FROM {s}records WHERE id >= ? AND id <= ?"
                ), (min(missing), max(missing))).fetchall():
                    if int(row_id) not in counts:
                        text = searchable_text(self._parse_any(body))
                        tf: dict[str, int] = {}
                        for token in index_tokens(text):
                            tf[token] = tf.get(token, 0) + 1
                        counts[int(row_id)] = tf
            try:
                tfs = pack_docs((counts[i][term] for i in ids), fmt)
            except KeyError:
                raise RemoteMemoryCorruptionError(
                    f"a posting of {term!r} names a record without it in {self._location}"
                ) from None
            conn.execute(self._q(self.SET_TFS), (tfs, *key))

    def _backfill_run_lengths(self, conn: Any) -> None:
        """Schema 5 on a store written before it: each run's ``lengths``, from the
        records' ``tokens`` / ``content_tokens`` (every scope).

        Every conversation's two lengths are read first into two arrays indexed by
        record id (8 bytes an id), then the runs are rewritten a page at a time in key
        order: neither the records nor the runs are ever all in memory at once.
        """
        missing = 0xFFFF_FFFF  # not a conversation: no run may name it
        tokens, content = _array("I"), _array("I")
        last = 0
        while True:
            chunk = conn.execute(self._q(
                "SELECT id, tokens, content_tokens FROM {s}records "
                "WHERE kind = 'conversation' AND id > ? ORDER BY id LIMIT 50000"
            ), (last,)).fetchall()
            if not chunk:
                break
            last = int(chunk[-1][0])
            if last >= len(tokens):
                grow = last + 1 - len(tokens)
                tokens.extend(_array("I", [missing]) * grow)
                content.extend(_array("I", [missing]) * grow)
            for row_id, n_tokens, n_content in chunk:
                if n_tokens is None or n_content is None:
                    raise RemoteMemoryCorruptionError(
                        f"record {row_id} has no lengths in {self._location}"
                    )
                tokens[row_id], content[row_id] = n_tokens, n_content
        fmt, key = self.RUN_FORMAT, self.FIRST_RUN_KEY
        page = self._q(self.RUN_PAGE)
        while True:
            runs = self._blobs(conn).execute(page, (*key, self._BACKFILL_PAGE)).fetchall()
            if not runs:
                break
            updates = []
            for *run_key, run in runs:
                try:
                    pairs = [(tokens[i], content[i]) for i in unpack_docs(bytes(run), fmt)]
                except IndexError:  # an id past every conversation's
                    pairs = [(missing, missing)]
                if any(n_tokens == missing for n_tokens, _ in pairs):
                    raise RemoteMemoryCorruptionError(
                        f"a posting names a record that is no conversation in {self._location}"
                    )
                updates.append((pack_lengths(pairs), *run_key))
            conn.cursor().executemany(self._q(self.SET_LENGTHS), updates)
            key = tuple(runs[-1][:-1])

    def _parse_any(self, body: str) -> StoredMemory:
        """A stored record of any scope (a migration reads them all)."""
        try:
            return StoredMemory.from_dict(loads(body))
        except (ValueError, TypeError, RemoteMemoryValidationError,
                RemoteMemoryCorruptionError) as exc:
            raise RemoteMemoryCorruptionError(
                f"invalid record in {self._location}: {exc}"
            ) from None

    def posting_rows(self, terms: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """``[{"term", "records", "memory_ids"}]`` from the term index, for a notebook.

        The same shape as ``InvertedIndex.posting_rows``: every term of the scope
        (sorted) or the ``terms`` asked for, in that order.
        """
        conn = self._connection()
        found: dict[str, list[int]] = {}
        with self._failures("read"):
            if conn is not None:
                for term, run in self._blobs(conn).execute(
                    self._q(self.ALL_RUNS), (self.user_scope,)
                ):
                    found.setdefault(term, []).extend(unpack_docs(bytes(run), self.RUN_FORMAT))
            every = sorted({i for ids in found.values() for i in ids})
            names = dict(conn.execute(self._q(
                "SELECT id, memory_id FROM {s}records WHERE {scope_of_ids} = ? AND id {any}"
            ), (self.user_scope, self._many(every))).fetchall()) if every else {}
        wanted = sorted(found) if terms is None else list(terms)
        return [
            {"term": term, "records": len(found.get(term, ())),
             "memory_ids": [names[i] for i in found.get(term, ())]}
            for term in wanted
        ]

    # -- writing ---------------------------------------------------------------------------

    def _append_batch(
        self, batch: Sequence[StoredMemory], vectors: Mapping[str, bytes] | None = None
    ) -> None:
        conn = self._connection(create=True)
        with self._transaction(conn, write=True):
            deleted = self._write(conn, batch, vectors)
        if deleted:
            self._vectors_deleted(conn)

    def _claim_scope(self, conn: Any) -> None:
        """Create the scope's stats row or lock it: writers of one scope queue here."""
        conn.execute(self._q(
            "INSERT INTO {s}scope_stats (user_scope) VALUES (?) "
            "ON CONFLICT (user_scope) DO UPDATE SET user_scope = excluded.user_scope"
        ), (self.user_scope,))

    def _state(self, conn: Any, batch: Sequence[StoredMemory]) -> _State:
        ids = self._many({r.memory_id for r in batch} | {r.retracts for r in batch if r.retracts})
        state = _State()
        for memory_id, kind, row_id, body, target in conn.execute(self._q(
            "SELECT memory_id, kind, id, body, NULL FROM {s}records "
            "WHERE user_scope = ? AND memory_id {any} "
            "UNION ALL SELECT NULL, NULL, NULL, NULL, retracts FROM {s}records "
            "WHERE user_scope = ? AND retracts {any}"
        ), (self.user_scope, ids, self.user_scope, ids)):
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
        scope = self.user_scope
        self._claim_scope(conn)
        new_model: tuple[str, int] | None = None
        if vectors is not None:
            # Before anything of the batch is written: another model's vectors never
            # join the scope's.
            if self.embedder is None:
                raise RemoteMemoryValidationError("vectors need the store's embedder")
            _, stored_model, stored_dimension, _ = self._vector_stats(conn)
            check_model(stored_model, stored_dimension, self.embedder.name,
                        self.embedder.dimension)
            check_sizes(vectors, self.embedder.dimension, self.embedder.name)
            if stored_model is None:
                new_model = (self.embedder.name, self.embedder.dimension)
        state = self._state(conn, batch)
        self.check_batch(batch, state)
        successors = self._pair_successors(conn, batch, state)
        stats = term_stats(r for r in batch if r.kind is MemoryKind.CONVERSATION)
        lengths = iter(stats)
        rows: list[RecordRow] = []
        for record in batch:
            captured = record.captured_datetime
            n_tokens: int | None = None
            n_content: int | None = None
            if record.kind is MemoryKind.CONVERSATION:
                tokens, n_content = next(lengths)
                n_tokens = len(tokens)
            rows.append((
                record.memory_id, record.kind.value, captured.timestamp(), micros_of(captured),
                record.retracts, record_json(record), n_tokens, n_content,
            ))
        row_of = self._insert_records(conn, rows)
        if len(row_of) != len(rows):
            # Another writer's row won the race for these ids; the transaction rolls back.
            raise RemoteMemoryDuplicateError([row[0] for row in rows if row[0] not in row_of])
        row_ids = [row_of[record.memory_id] for record in batch]
        conversations = [
            (row_id, record) for row_id, record in zip(row_ids, batch, strict=True)
            if record.kind is MemoryKind.CONVERSATION
        ]
        pending = [
            (row_id, tokens) for (row_id, _), (tokens, _) in zip(conversations, stats, strict=True)
        ]
        d_searched, d_retracted = len(pending), 0
        d_tokens = sum(len(tokens) for tokens, _ in stats)
        d_content = sum(content for _, content in stats)
        # One run per term for the whole batch, its ids ascending (append order).
        terms = list(set(chain.from_iterable(tokens for _, tokens in pending)))
        fmt = self.RUN_FORMAT
        runs = tf_length_runs_by_term(
            pending, [(len(tokens), content) for tokens, content in stats],
            {term: n for n, term in enumerate(terms)}, fmt,
        )
        if runs:
            self._add_runs(conn, [
                (terms[n], unpack_docs(run[:8], fmt)[0], run, tfs, lengths)
                for n, run, tfs, lengths in runs
            ])
        # Retractions: the target leaves the postings (and the counts) in this same
        # transaction, whether it was stored before or is in this batch. Its own record
        # row stays as it was written.
        in_batch = {
            record.memory_id: (row_id, record)
            for row_id, record in zip(row_ids, batch, strict=True)
        }
        retracted_here: set[str] = set()  # conversations of this batch it retracts too
        retracted_before: list[int] = []  # row ids of stored conversations it retracts
        for record in batch:
            if record.kind is not MemoryKind.RETRACTION or record.retracts is None:
                continue
            target = record.retracts
            if target in in_batch:
                row_id, target_record = in_batch[target]
            elif target in state.rows:
                row_id, body = state.rows[target]
                target_record = self._parse(body)
            else:
                continue
            if target_record.kind is not MemoryKind.CONVERSATION:
                continue
            if target in in_batch:
                retracted_here.add(target)
            else:
                retracted_before.append(row_id)
            target_terms, n_tokens, n_content = record_stats(target_record)
            self._drop_from_runs(conn, target_terms, row_id)
            d_searched -= 1
            d_retracted += 1
            d_tokens -= n_tokens
            d_content -= n_content
        conn.execute(self._q(
            "UPDATE {s}scope_stats SET searched = searched + ?, retracted = retracted + ?, "
            "tokens = tokens + ?, content_tokens = content_tokens + ? WHERE user_scope = ?"
        ), (d_searched, d_retracted, d_tokens, d_content, scope))
        # Vectors: the batch's searched conversations gain theirs; the stored records it
        # retracts lose theirs, in this transaction.
        added = [
            (row_id, vectors[record.memory_id]) for row_id, record in conversations
            if vectors and record.memory_id in vectors and record.memory_id not in retracted_here
        ]
        if added:
            self._add_vectors(conn, added)
        deleted = 0
        if retracted_before:
            deleted = int(conn.execute(self._q(
                "DELETE FROM {s}vectors WHERE user_scope = ? AND record_id {any}"
            ), (scope, self._many(retracted_before))).rowcount)
        unpaired = 0  # live successors whose pair vector embedded a retracted turn
        if successors:
            unpaired = int(conn.execute(self._q(
                "DELETE FROM {s}vectors WHERE user_scope = ? AND record_id IN "
                "(SELECT id FROM {s}records WHERE user_scope = ? AND memory_id {any})"
            ), (scope, scope, self._many(successors))).rowcount)
        if added or deleted or unpaired:
            self._vectors_changed(conn, new_model if added else None, reset=bool(unpaired))
        return deleted + unpaired

    def _pair_successors(
        self, conn: Any, batch: Sequence[StoredMemory], state: _State
    ) -> list[str]:
        """When the scope keeps pair vectors: the turn after each stored record ``batch``
        retracts, as its source orders them before the batch (once the batch is in, a
        retracted record has left that order and its successor cannot be found from it)."""
        targets = {
            record.retracts for record in batch
            if record.kind is MemoryKind.RETRACTION and record.retracts in state.rows
        }
        if not targets:
            return []
        _, model, _, _ = self._vector_stats(conn)
        if not reads_pairs(model):
            return []
        return [after for _, after in self._neighbours_of(conn, targets).values()
                if after is not None]

    def _drop_from_runs(self, conn: Any, terms: set[str], row_id: int) -> None:
        """Take ``row_id`` out of the run of each of ``terms`` that holds it."""
        scope = self.user_scope
        for term, first_id, run, tfs, lengths in self._blobs(conn).execute(
            self._q(self.RUNS_HOLDING), (scope, self._many(terms), row_id)
        ).fetchall():
            rest = run_columns_without(
                bytes(run), bytes(tfs), bytes(lengths), row_id, self.RUN_FORMAT
            )
            if rest is None:
                continue
            if rest[0]:
                conn.execute(self._q(self.SET_RUN), (*rest, scope, term, first_id))
            else:
                conn.execute(self._q(self.DROP_RUN), (scope, term, first_id))

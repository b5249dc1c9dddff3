"""[beyond] A SQL store as it stood at a past time T (``known_at``), without reading its
scope: the record reads ask for ``stored_us ≤ T``, and a recall reads the store's runs and
counts of now less what was stored after T (a range of the index ``records_stored``, which
holds the lengths too), plus the records that a retraction stored after T took out of them
(few: read through ``records_retracts``, cut into terms again). ``stored_at`` may go back
in id order (an import replays it), so what was stored after T is a set of ids, not a tail.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..._capabilities import ScoreBound
from ..._retrieval import micros_of, term_stats
from ..._retrieval.postings import (
    merge_runs,
    pack_docs,
    pack_lengths,
    postings_numpy,
    run_postings,
    unpack_docs,
)
from ...candidates import CandidateScan, LexicalPostings
from ...normalize import RecallQuery
from ...records import MemoryKind, StoredMemory
from .._known_at import KnownAtVectorStore
from .._sources import SourceNeighbours

if TYPE_CHECKING:
    from ._common import SqlMemoryStore

# A run's three columns: ids, term frequencies, lengths (``retrieval.postings.LENGTHS``).
_Run = tuple[bytes, bytes, bytes]
# A doc's two lengths, packed: one 8-byte unit.
_LENGTH = 8


@dataclass(frozen=True)
class _Cut:
    """What T takes from the scope as it is now, read in one snapshot."""

    key: tuple[int, int]  # the scope's (searched, retracted) then: moved by every write
    later: array[int]  # the rows stored after T, ascending
    counts: tuple[int, int, int, int]  # at T: searched, retracted, tokens, content tokens
    # Searched at T, retracted since: (row id, each term's frequency, its lengths packed).
    revived: tuple[tuple[int, Counter[str], bytes], ...]
    revived_ids: frozenset[str]
    targets: frozenset[str]  # what any retraction names
    retracted_later: frozenset[str]  # what a retraction stored after T names


class _SearchedAt(Container[str]):
    """Whether a record is searched at T, for the ids the dense path asks about only:
    those with a vector now (searched now), retraction targets and their turns after."""

    def __init__(self, cut: _Cut, later: frozenset[str]) -> None:
        self._cut, self._later = cut, later

    def __contains__(self, memory_id: object) -> bool:
        cut = self._cut
        if memory_id in cut.targets:
            return memory_id in cut.revived_ids
        return memory_id not in self._later


class SqlKnownAt(KnownAtVectorStore):
    """``store`` at ``known_at``: ``KnownAtVectorStore``'s reads, answered by SQL."""

    def __init__(self, store: SqlMemoryStore, known_at: datetime) -> None:
        self._db = store
        self._at = micros_of(known_at)
        self._cut: _Cut | None = None
        # the conversation records stored after T, by name (the dense path), and its cut
        self._later: tuple[_Cut, frozenset[str]] | None = None
        super().__init__(store, known_at)

    def _read(self, store: Any) -> None:
        """Nothing is read up front: each read asks the store for T's share."""

    def read_all(self) -> tuple[StoredMemory, ...]:
        return self._db._records_where(" AND stored_us <= ?", self._at)

    def records(self, kind: MemoryKind | str | None = None) -> tuple[StoredMemory, ...]:
        if kind is None:
            return self.read_all()
        sql = " AND kind = ? AND stored_us <= ?"
        return self._db._records_where(sql, MemoryKind(kind).value, self._at)

    def latest_profile(self) -> StoredMemory | None:
        return self._db._latest_profile(self._at)

    def existing_ids(self, memory_ids: Sequence[str]) -> set[str]:
        return self._db._existing_ids(memory_ids, self._at)

    def records_by_id(self, memory_ids: Sequence[str]) -> list[StoredMemory]:
        return self._db._records_by_id(memory_ids, self._at)

    def source_neighbours(self, memory_ids: Sequence[str]) -> dict[str, SourceNeighbours]:
        return self._db._source_neighbours(memory_ids, self._at)

    def _check_scope(self, query: RecallQuery) -> None:
        db = self._db
        conn = db._connection()
        if conn is not None:
            with db._failures("read"):
                db._check_query_scope(conn, query, self._at)

    def _scan(self, query: RecallQuery, *, top: ScoreBound | None) -> CandidateScan:
        def read(conn: Any) -> tuple[tuple[int, ...], list[bytes]]:
            counts, runs = self._runs_at(conn, query)
            return counts, [ids for ((ids, _, _),) in runs.values()]

        return self._db._scan_of(query, top, read)

    def lexical_postings(self, query: RecallQuery, terms: Sequence[str]) -> LexicalPostings:
        db = self._db
        conn = db._connection()
        counts: tuple[int, ...] = (0, 0, 0, 0)
        runs: dict[str, list[_Run]] = {}
        if conn is not None:
            with db._transaction(conn, write=False):  # one snapshot for counts and runs
                counts, runs = self._runs_at(conn, query)
        with db._runs_checked():
            merged = merge_runs(runs, terms, db.RUN_FORMAT)
        return db._postings_of(query, terms, counts, merged, None, None)

    def _runs_at(
        self, conn: Any, query: RecallQuery
    ) -> tuple[tuple[int, ...], dict[str, list[_Run]]]:
        """The counts at T and the query's terms' runs at T, one run a term, on ``conn``
        (in its transaction)."""
        db = self._db
        db._check_query_scope(conn, query, self._at)
        cut = self._cut_of(conn, tuple(int(v) for v in db._stats(conn)[:4]))
        found = db._tf_runs(conn, list(dict.fromkeys(query.terms)))
        with db._runs_checked():
            return cut.counts, cut_runs(found, query.terms, cut, db.RUN_FORMAT)

    def _cut_of(self, conn: Any, now: tuple[int, ...]) -> _Cut:
        """T's ``_Cut`` of the scope whose counts are ``now``, on ``conn``: the one held
        while they have not moved."""
        key = (now[0], now[1])
        if self._cut is not None and self._cut.key == key:
            return self._cut
        db, at, scope = self._db, self._at, self._db._key
        sql = (
            "SELECT retracts, stored_us FROM {s}records "
            "WHERE user_scope = ? AND retracts IS NOT NULL"
        )
        retractions = db._run(conn, sql, scope).fetchall()
        before = {target for target, us in retractions if us <= at}
        after = frozenset(target for target, us in retractions if us > at)
        targets = after.union(before)
        found: list[Any] = []
        if targets:
            sql = (
                "SELECT memory_id, stored_us, tokens, content_tokens FROM {s}records "
                "WHERE user_scope = ? AND kind = 'conversation' AND memory_id {any}"
            )
            found = db._run(conn, sql, scope, db._many(targets)).fetchall()
        known = {m for m, us, _, _ in found if us <= at}
        # Stored after T and retracted since: in no run and no count of now.
        gone = [(tokens, content) for _, us, tokens, content in found if us > at]
        revived_ids = frozenset((after - before) & known)
        revived = self._revived(conn, revived_ids)
        sql = "SELECT id FROM {s}records WHERE user_scope = ? AND stored_us > ?"
        # In stored order, which is mostly id order: sorting it is a linear pass.
        later = array("q", sorted(row_id for (row_id,) in db._run(conn, sql, scope, at)))
        sql = (
            "SELECT count(tokens), coalesce(sum(tokens), 0), coalesce(sum(content_tokens), 0) "
            "FROM {s}records WHERE user_scope = ? AND stored_us > ?"
        )
        n, tokens, content = (int(v) for v in db._run(conn, sql, scope, at).fetchone())
        lengths = [unpack_docs(packed, "<u4") for _, _, packed in revived]
        counts = (
            now[0] - n + len(gone) + len(revived),
            len(before & known),
            now[2] - tokens + sum(t for t, _ in gone) + sum(pair[0] for pair in lengths),
            now[3] - content + sum(c for _, c in gone) + sum(pair[1] for pair in lengths),
        )
        self._cut = _Cut(key, later, counts, revived, revived_ids, targets, after)
        return self._cut

    def _revived(
        self, conn: Any, memory_ids: frozenset[str]
    ) -> tuple[tuple[int, Counter[str], bytes], ...]:
        """The rows of ``memory_ids``, cut into terms as the runs hold them."""
        if not memory_ids:
            return ()
        db = self._db
        sql = "SELECT id, body FROM {s}records WHERE user_scope = ? AND memory_id {any}"
        rows = sorted(db._run(conn, sql, db._key, db._many(memory_ids)).fetchall())
        stats = term_stats(db._parse(body) for _, body in rows)
        return tuple(
            (int(row_id), Counter(tokens), pack_lengths([(len(tokens), content)]))
            for (row_id, _), (tokens, content) in zip(rows, stats, strict=True)
        )

    def _at_t(self) -> tuple[Container[str], frozenset[str], int]:
        db = self._db
        conn = db._connection()
        if conn is None:
            return frozenset(), frozenset(), 0
        with db._transaction(conn, write=False):
            cut = self._cut_of(conn, tuple(int(v) for v in db._stats(conn)[:4]))
            if self._later is None or self._later[0] is not cut:
                sql = (
                    "SELECT memory_id FROM {s}records WHERE user_scope = ? AND stored_us > ? "
                    "AND kind = 'conversation'"
                )
                names = frozenset(m for (m,) in db._run(conn, sql, db._key, self._at))
                self._later = (cut, names)
        return _SearchedAt(cut, self._later[1]), cut.retracted_later, cut.counts[0]


def cut_runs(
    found: Mapping[str, Sequence[_Run]], terms: Sequence[str], cut: _Cut, fmt: str
) -> dict[str, list[_Run]]:
    """Each of ``terms``' runs at T as one: ``found`` (the runs of now) without the docs
    stored after T, with the docs ``cut`` revives, ids ascending. ValueError when a run's
    columns do not line up."""
    total = sum(run_postings(runs, fmt) for runs in found.values())
    np = postings_numpy(total + len(cut.later))
    out: dict[str, list[_Run]] = {}
    for term in dict.fromkeys(terms):
        extra = [(row_id, tfs[term], n) for row_id, tfs, n in cut.revived if term in tfs]
        runs = found.get(term, ())
        if runs or extra:
            one = (
                _cut_plain(runs, cut.later, extra, fmt)
                if np is None
                else _cut_numpy(np, runs, cut.later, extra, fmt)
            )
            out[term] = [one]
    return out


def _cut_numpy(
    np: Any, runs: Sequence[_Run], later: array[int], extra: list[tuple[int, int, bytes]], fmt: str
) -> _Run:
    ids = np.frombuffer(b"".join([i for i, _, _ in runs]), dtype=fmt)
    tfs = np.frombuffer(b"".join([f for _, f, _ in runs]), dtype=fmt)
    lengths = np.frombuffer(b"".join([n for _, _, n in runs]), dtype="<u8")
    if len(later) and len(ids):
        keep = ~np.isin(ids, np.frombuffer(later, dtype=np.int64))
        ids, tfs, lengths = ids[keep], tfs[keep], lengths[keep]
    if extra:
        ids = np.concatenate([ids, np.array([e[0] for e in extra], dtype=fmt)])
        tfs = np.concatenate([tfs, np.array([e[1] for e in extra], dtype=fmt)])
        added = np.frombuffer(b"".join([e[2] for e in extra]), dtype="<u8")
        lengths = np.concatenate([lengths, added])
        order = np.argsort(ids, kind="stable")
        ids, tfs, lengths = ids[order], tfs[order], lengths[order]
    # (numpy gives the native byte order to what it concatenates)
    return ids.astype(fmt).tobytes(), tfs.astype(fmt).tobytes(), lengths.tobytes()


def _cut_plain(
    runs: Sequence[_Run], later: array[int], extra: list[tuple[int, int, bytes]], fmt: str
) -> _Run:
    kept = list(extra)
    for ids, tfs, lengths in runs:
        pairs = zip(unpack_docs(ids, fmt), unpack_docs(tfs, fmt), strict=True)
        for at, (row_id, tf) in enumerate(pairs):
            k = bisect_left(later, row_id)
            if k == len(later) or later[k] != row_id:
                kept.append((row_id, tf, lengths[at * _LENGTH : (at + 1) * _LENGTH]))
    kept.sort()
    return (
        pack_docs([row_id for row_id, _, _ in kept], fmt),
        pack_docs([tf for _, tf, _ in kept], fmt),
        b"".join([n for _, _, n in kept]),
    )

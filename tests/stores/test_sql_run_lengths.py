"""Schema 5: every posting run of a SQL store carries its records' lengths, and a lexical
recall reads no record row but the hits' and the few a ranking keeps.

The lengths in the runs must equal the ``records`` table's after appends (small batches
and numpy-inverted ones), after retractions (of stored records and within a batch),
and after an upgrade, which rebuilds them from the bodies (every scope, a page of
records at a time). A recall
through ``lexical_postings`` is counted row by row: a connection wrapper counts the rows
each statement on ``records`` returns.
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy  # noqa: F401  (loaded, so the forced numpy paths below take it)
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.pgserver import pg_dsn, pg_url  # noqa: F401  (fixtures)

import memlib._retrieval.postings as postings_module
import memlib.stores.sql._common as sql_common
from memlib import (
    MemoryKind,
    RecallEngine,
    RemoteMemoryCorruptionError,
    RemoteMemoryError,
    StoredMemory,
    open_store,
)
from memlib._retrieval import index_terms
from memlib._retrieval.postings import (
    LENGTHS,
    merge_runs,
    pack_docs,
    pack_lengths,
    run_columns_without,
    tf_length_runs_by_term,
    tf_runs_by_term,
    unpack_docs,
)
from memlib.candidates import searchable_text
from memlib.normalize import normalize_recall_query
from memlib.rankers.bm25 import scoring_terms
from memlib.rankers.embeddings import HashingEmbedder
from memlib.sample import SAMPLE_AS_OF, fixed_clock, sample_records
from memlib.stores.sql._common import SqlMemoryStore
from memlib.stores.sql._schema import SCHEMA_VERSION
from memlib.stores.sql._sqlite import SqliteMemoryStore

USER = "alice"
SOURCE = {
    "source_id": "s",
    "source_type": "run_lengths_test",
    "title": "lengths",
    "captured_at": "2026-08-09T12:00:00Z",
}
QUERIES = ("layered memory", "the memory of the store", "sqlite persistence", "the of", "分层")
RANKERS = ("bm25", "bm25+stopwords")


def _item(memory_id: str, content: str, summary: str = "") -> dict[str, Any]:
    return {
        "kind": "conversation",
        "memory_id": memory_id,
        "content": content,
        "summary": summary or content[:30],
        "source": SOURCE,
    }


def _generated(count: int, prefix: str) -> list[dict[str, Any]]:
    """Records of different lengths, stopwords and repeats (tf > 1) among them."""
    words = ("memory", "the", "layered", "of", "store", "sqlite", "persistence", "记忆")
    return [
        _item(
            f"{prefix}-{i:04d}",
            " ".join(words[(i * j) % len(words)] for j in range(1 + i % 13)),
            summary=f"the {words[i % len(words)]} {i}",
        )
        for i in range(count)
    ]


def _retract(store: Any, memory_id: str) -> None:
    store.retract(memory_id, reason="wrong", source=SOURCE)


# -- reading the raw tables --------------------------------------------------------------


def _postings_rows(store: Any) -> list[tuple[Any, ...]]:
    """``(key, ids bytes, tfs bytes, lengths bytes)`` of every run of every scope."""
    conn = store._connection()
    if isinstance(store, SqliteMemoryStore):
        rows = conn.execute("SELECT term_id, first_id, docs, tfs, lengths FROM postings").fetchall()
        return sorted(((t, f), bytes(d), bytes(tf), bytes(n)) for t, f, d, tf, n in rows)
    columns = "user_scope, term, first_id, record_ids, tfs, lengths"
    sql = f"SELECT {columns} FROM {store.schema}.postings"
    rows = conn.cursor(binary=True).execute(sql).fetchall()
    return sorted(((s, t, f), bytes(d), bytes(tf), bytes(n)) for s, t, f, d, tf, n in rows)


def _record_lengths(store: Any) -> dict[int, tuple[int, int]]:
    table = "records" if isinstance(store, SqliteMemoryStore) else f"{store.schema}.records"
    rows = (
        store._connection()
        .execute(f"SELECT id, tokens, content_tokens FROM {table} WHERE kind = 'conversation'")
        .fetchall()
    )
    return {int(i): (int(t), int(c)) for i, t, c in rows}


def _check_lengths_in_step(store: Any) -> int:
    """Every run's lengths are its records' (from ``records``); returns the postings seen."""
    lengths = _record_lengths(store)
    seen = 0
    for key, ids, _, packed in _postings_rows(store):
        docs = unpack_docs(ids, store.RUN_FORMAT)
        flat = unpack_docs(packed, LENGTHS)
        assert len(flat) == 2 * len(docs), key
        assert [(flat[2 * k], flat[2 * k + 1]) for k in range(len(docs))] == [
            lengths[i] for i in docs
        ], key
        seen += len(docs)
    return seen


def _recalls(store: Any) -> list[str]:
    return [
        RecallEngine(store, ranker=ranker)
        .recall(q, limit=4, as_of=SAMPLE_AS_OF, query_id="q")
        .to_json()
        for ranker in RANKERS
        for q in QUERIES
    ]


# -- writes keep the lengths in step ------------------------------------------------------


def test_run_lengths_follow_appends_and_retractions(
    sql_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reference: Any = open_store(
        f"jsonl:{tmp_path / 'ref.jsonl'}", user_id=USER, clock=fixed_clock()
    )
    store: Any = open_store(sql_url, user_id=USER, clock=fixed_clock())
    assert isinstance(store, SqlMemoryStore)
    stores = (reference, store)

    def both(action: Any) -> None:
        for target in stores:
            action(target)

    both(lambda s: s.append_many(sample_records()))
    both(lambda s: s.append_many(_generated(40, "small")))  # inverted by a dict
    assert _check_lengths_in_step(store) > 100
    monkeypatch.setattr(postings_module, "NUMPY_MIN_BATCH", 0)
    monkeypatch.setattr(postings_module, "NUMPY_IMPORT_BATCH", 0)
    both(lambda s: s.append_many(_generated(300, "big")))  # inverted by numpy
    before = _check_lengths_in_step(store)
    # First, middle and last of a batch's runs, and a record alone in some of its runs.
    for memory_id in ("big-0000", "big-0150", "big-0299", "small-0007", "conversation-002"):
        both(lambda s, m=memory_id: _retract(s, m))
    after = _check_lengths_in_step(store)
    assert after < before
    # A batch that writes a record and retracts it (append_many refuses retractions).
    for target in stores:
        stored_at = target._now()
        kept, gone = (
            target._record(_item(m, f"the layered memory {m} of it"), stored_at)
            for m in ("batch-kept", "batch-gone")
        )
        retraction = StoredMemory(
            memory_id="retract-batch-gone",
            user_scope=target.user_scope,
            kind=MemoryKind.RETRACTION,
            content="wrong",
            summary="Retracts batch-gone",
            source=kept.source,
            stored_at=stored_at,
            retracts="batch-gone",
        )
        target._append_batch((kept, gone, retraction))
    kept_text = searchable_text(store.records_by_id(["batch-kept"])[0])
    assert _check_lengths_in_step(store) == after + len(index_terms(kept_text))
    for numpy_min in (0, 10**9):  # merged by numpy, then by a dict
        monkeypatch.setattr(postings_module, "NUMPY_MIN_POSTINGS", numpy_min)
        assert _recalls(store) == _recalls(reference)
    store.close()


# -- an upgrade rebuilds the runs from the bodies -----------------------------------------


def _two_scopes(url: str) -> list[Any]:
    stores = [open_store(url, user_id=user, clock=fixed_clock()) for user in (USER, "bob")]
    for n, store in enumerate(stores):
        store.append_many(sample_records())
        store.append_many(_generated(60 + 10 * n, "g"))
        _retract(store, "conversation-002")
        _retract(store, f"g-{n:04d}")
    return stores


def _postings_by_term(store: Any) -> dict[tuple[str, str], bytes]:
    """Every term's runs of every scope joined in id order: ids, tfs and lengths alike
    (how the ids are cut into runs is the writes' batches, which an upgrade cannot know)."""
    if isinstance(store, SqliteMemoryStore):
        rows = (
            store._connection()
            .execute(
                "SELECT t.user_scope, t.term, p.docs, p.tfs, p.lengths FROM postings p "
                "JOIN terms t ON t.id = p.term_id ORDER BY p.first_id"
            )
            .fetchall()
        )
    else:
        rows = (
            store._connection()
            .cursor(binary=True)
            .execute(
                "SELECT user_scope, term, record_ids, tfs, lengths FROM "
                f"{store.schema}.postings ORDER BY first_id"
            )
            .fetchall()
        )
    joined: dict[tuple[str, str], list[bytes]] = {}
    for scope, term, *columns in rows:
        parts = joined.setdefault((scope, term), [b"", b"", b""])
        for k, column in enumerate(columns):
            parts[k] += bytes(column)
    return {key: b"|".join(parts) for key, parts in joined.items()}


def _downgrade(store: Any, version: int) -> None:
    meta = "memlib_meta" if isinstance(store, SqliteMemoryStore) else f"{store.schema}.meta"
    store._connection().execute(
        f"UPDATE {meta} SET value = '{version}' WHERE key = 'schema_version'"
    )
    store.close()


def _upgraded(url: str, users: tuple[str, ...]) -> list[Any]:
    if url.startswith("postgresql"):
        from memlib.stores._admin import init_store_schema

        with pytest.raises(RemoteMemoryError, match="version 4, need 7.*db init"):
            open_store(url, user_id=USER).read_all()
        assert init_store_schema(url)[1:] == (4, 7)
    return [open_store(url, user_id=user) for user in users]


def test_an_upgrade_rebuilds_runs_lengths_and_counts_page_by_page(
    sql_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    stores = _two_scopes(sql_url)
    before = [_recalls(store) for store in stores]
    index_before = _postings_by_term(stores[0])
    for store in stores:
        _downgrade(store, 4)
    monkeypatch.setattr(SqlMemoryStore, "_REBUILD_PAGE", 7)  # many pages, scopes mixed
    reopened = _upgraded(sql_url, (USER, "bob"))
    assert _postings_by_term(reopened[0]) == index_before  # the first read upgrades
    assert reopened[0].schema_version() == SCHEMA_VERSION == 7
    assert _check_lengths_in_step(reopened[0]) > 0
    assert [_recalls(store) for store in reopened] == before
    for store in reopened:
        store.close()


def test_an_upgrade_refuses_a_damaged_body_and_changes_nothing(sql_url: str) -> None:
    store: Any = open_store(sql_url, user_id=USER, clock=fixed_clock())
    store.append_many(sample_records())
    sqlite = isinstance(store, SqliteMemoryStore)
    prefix = "" if sqlite else f"{store.schema}."
    conn = store._connection()
    conn.execute(f"UPDATE {prefix}records SET body = '{{}}' WHERE id = 2")
    count = f"SELECT count(*) FROM {prefix}postings"
    (runs,) = conn.execute(count).fetchone()
    _downgrade(store, 4)
    with pytest.raises(RemoteMemoryCorruptionError, match="invalid record"):
        _upgraded(sql_url, (USER,))[0].read_all()
    if sqlite:
        conn = sqlite3.connect(sql_url.removeprefix("sqlite:"))
    else:
        import psycopg

        from memlib.stores.sql._postgres import split_url

        conn = psycopg.connect(split_url(sql_url)[0])
    meta = "memlib_meta" if sqlite else f"{prefix}meta"
    assert conn.execute(f"SELECT value FROM {meta}").fetchone() == ("4",)
    assert conn.execute(count).fetchone() == (runs,)
    conn.close()


def test_a_newer_schema_is_refused(sql_url: str) -> None:
    store: Any = open_store(sql_url, user_id=USER)
    store.append_many(sample_records()[:2])
    conn = store._connection()
    meta = "memlib_meta" if isinstance(store, SqliteMemoryStore) else f"{store.schema}.meta"
    newer = SCHEMA_VERSION + 1
    conn.execute(f"UPDATE {meta} SET value = '{newer}' WHERE key = 'schema_version'")
    store.close()
    with pytest.raises(
        RemoteMemoryError,
        match=f"version {newer}; this memlib knows up to {SCHEMA_VERSION}: upgrade",
    ):
        open_store(sql_url, user_id=USER).read_all()


# -- a recall reads the hits' rows and the pool's, no other ------------------------------

_RECORDS = re.compile(r"\brecords\b")
_EVERY = re.compile("")


class _Counted:
    """A cursor whose rows are counted into ``log[-1]``."""

    def __init__(self, cursor: Any, log: list[list[Any]]) -> None:
        self._cursor, self._log = cursor, log

    def fetchall(self) -> list[Any]:
        rows = self._cursor.fetchall()
        self._log[-1][1] += len(rows)
        return list(rows)

    def fetchone(self) -> Any:
        row = self._cursor.fetchone()
        self._log[-1][1] += row is not None
        return row

    def __iter__(self) -> Iterator[Any]:
        for row in self._cursor:
            self._log[-1][1] += 1
            yield row


class _Cursors:
    def __init__(self, cursor: Any, log: list[list[Any]], logged: re.Pattern[str]) -> None:
        self._cursor, self._log, self._logged = cursor, log, logged

    def execute(self, sql: Any, *args: Any, **kwargs: Any) -> Any:
        result = self._cursor.execute(sql, *args, **kwargs)
        if self._logged.search(str(sql)):
            self._log.append([" ".join(str(sql).split()), 0])
            return _Counted(result, self._log)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


class _Counting(_Cursors):
    """A connection that logs each statement matching ``logged`` (on ``records``) with
    the rows it returned."""

    def cursor(self, *args: Any, **kwargs: Any) -> _Cursors:
        return _Cursors(self._cursor.cursor(*args, **kwargs), self._log, self._logged)


def _counting_reader(
    url: str, log: list[list[Any]], logged: re.Pattern[str] = _RECORDS, embedder: Any = None
) -> Any:
    if url.startswith("sqlite:"):
        store: Any = open_store(url, user_id=USER, embedder=embedder)
        store.read_all()  # connects
        store._conn = _Counting(store._conn, log, logged)
        return store
    import psycopg

    from memlib.stores.sql._postgres import split_url

    conn = psycopg.connect(split_url(url)[0], autocommit=True)
    return open_store(url, user_id=USER, connection=_Counting(conn, log, logged), embedder=embedder)


def _many_candidates(store: Any) -> None:
    """400 records holding "the", one in 8 "memory" too, each of another length: the
    best totals (through "memory") are far apart."""
    store.append_many(
        [
            _item(
                f"m-{i:03d}",
                ("memory " if i % 8 == 0 else "") + " ".join(f"w{i}x{j}" for j in range(i % 200)),
                summary=f"the {i}",
            )
            for i in range(400)
        ]
    )


@pytest.mark.parametrize(
    ("numpy_min", "ranker", "pool"),
    [
        # numpy scores every record holding a scoring term and keeps the best 3 and those
        # within rounding of the third: a handful
        (0, "bm25", 12),
        (0, "bm25+stopwords", 12),
        # plain Python keeps every record holding a scoring term ("memory": 50 of them)
        (10**9, "bm25+stopwords", 50),
    ],
)
@pytest.mark.parametrize("bodies_with_rows", [1_024, 0])
def test_a_lexical_recall_reads_only_the_pool_and_the_hits(
    sql_url: str,
    tmp_path: Path,
    numpy_min: int,
    ranker: str,
    pool: int,
    bodies_with_rows: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(postings_module, "NUMPY_MIN_POSTINGS", numpy_min)
    monkeypatch.setattr(sql_common, "_BODIES_WITH_ROWS", bodies_with_rows)
    reference = open_store(f"jsonl:{tmp_path / 'ref.jsonl'}", user_id=USER, clock=fixed_clock())
    writer = open_store(sql_url, user_id=USER, clock=fixed_clock())
    for store in (reference, writer):
        _many_candidates(store)
    log: list[list[Any]] = []
    reader = _counting_reader(sql_url, log)
    for limit in (1, 3):
        log.clear()
        got = RecallEngine(reader, ranker=ranker).recall(
            "the memory", limit=limit, as_of=SAMPLE_AS_OF, query_id="q"
        )
        expected = RecallEngine(reference, ranker=ranker).recall(
            "the memory", limit=limit, as_of=SAMPLE_AS_OF, query_id="q"
        )
        assert got.to_json() == expected.to_json()
        assert got.candidate_records == 400 and len(got.hits) == limit
        # The pool's tie-breaks, with the bodies when the pool is small enough; else one
        # statement more for the hits' bodies.
        assert limit <= log[0][1] <= pool and "captured_ts" in log[0][0], log
        if bodies_with_rows:
            assert len(log) == 1 and "body" in log[0][0], log
        else:
            assert len(log) == 2 and "body" not in log[0][0], log
            assert log[1][1] == limit and "body" in log[1][0], log
    reader.close()
    writer.close()


@pytest.mark.parametrize("ranker", ["bm25", "bm25+stopwords", "hybrid"])
def test_a_warm_recall_is_one_statement_that_checks_its_counts(
    sql_url: str, tmp_path: Path, ranker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Warm, the runs held are used unchecked and the first read of records also says
    whether scope_stats moved; if it did, the recall is redone from fresh postings
    (hybrid: with its dense path, whose vectors a warm recall checks apart)."""
    monkeypatch.setattr(postings_module, "NUMPY_MIN_POSTINGS", 0)  # the run cache's path
    embedder = HashingEmbedder(64) if ranker == "hybrid" else None
    reference = open_store(
        f"jsonl:{tmp_path / 'ref.jsonl'}", user_id=USER, clock=fixed_clock(), embedder=embedder
    )
    writer = open_store(sql_url, user_id=USER, clock=fixed_clock(), embedder=embedder)
    for store in (reference, writer):
        _many_candidates(store)
    log: list[list[Any]] = []
    reader = _counting_reader(sql_url, log, _EVERY, embedder)

    def recall(text: str) -> str:
        log.clear()
        got = RecallEngine(reader, ranker=ranker).recall(
            text, limit=3, as_of=SAMPLE_AS_OF, query_id="q"
        )
        expected = RecallEngine(reference, ranker=ranker).recall(
            text, limit=3, as_of=SAMPLE_AS_OF, query_id="q"
        )
        assert got.to_json() == expected.to_json()
        return got.to_json()

    for text, matches in (("the memory", True), ("zebra", False)):
        before = recall(text)  # cold: counts, runs, then records
        assert len(log) >= 2, log
        assert recall(text) == before
        # Warm: one statement, the counts checked with the records read (alone when the
        # postings match none); hybrid also checks its vectors and reads the dense path's.
        counts = [s for s, _ in log if "searched" in s and "vector_model" not in s]
        assert len(counts) == 1 and ("records" in counts[0]) == matches, log
        assert len(log) == 1 or ranker == "hybrid", log
        for store in (reference, writer):  # a new best record for the reader to find
            store.append_many([_item(f"new-{len(text)}", f"{text} {text}", summary=text)])
        after = recall(text)
        assert after != before and len(log) > 2, log  # the check, then read again
        assert "new-" in json.loads(after)["hits"][0]["memory_id"]
    reader.close()
    writer.close()


def test_timestamps_and_ids_are_read_by_prefetch_only(sql_url: str) -> None:
    writer = open_store(sql_url, user_id=USER, clock=fixed_clock())
    writer.append_many(sample_records())
    log: list[list[Any]] = []
    reader = _counting_reader(sql_url, log)
    query = normalize_recall_query(
        "layered memory", user_scope=reader.user_scope, limit=3, issued_at=SAMPLE_AS_OF
    )
    log.clear()
    view = reader.lexical_postings(query, scoring_terms(query, stopwords=False))
    assert log == []  # the runs alone: no records row
    assert view.candidate_records == len(view.live) == len(view.tokens) > 2
    with pytest.raises(RemoteMemoryError, match="timestamp of doc 0 was read before prefetch"):
        view.timestamps[0]
    view.prefetch([0, 2])
    view.prefetch([2, 0])  # known already: no second read
    assert [row for _, row in log] == [2]
    first, third = view.candidates_of([0, 2])
    assert [row for _, row in log] == [2]  # their bodies came with them
    assert (view.ids[0], view.ids[2]) == (first.memory_id, third.memory_id)
    (second,) = view.candidates_of([1])  # not prefetched: its body read now
    assert [row for _, row in log] == [2, 1] and "body" in log[1][0]
    assert second.memory_id not in (first.memory_id, third.memory_id)
    assert view.timestamps[2] == third.captured_at.timestamp()
    with pytest.raises(RemoteMemoryError, match="memory id of doc 1 was read before prefetch"):
        view.ids[1]
    reader.close()
    writer.close()


# -- the packing functions --------------------------------------------------------------

_ids = st.one_of(
    st.lists(st.integers(1, 600), min_size=1, max_size=60, unique=True),  # one store: dense
    st.lists(st.integers(1, 2**40), min_size=1, max_size=30, unique=True),  # sparse
)


@st.composite
def _runs(draw: Any) -> tuple[dict[int, tuple[int, int]], dict[str, list[tuple[int, int]]]]:
    """Records (id → lengths) and, per term, its (id, tf) postings ascending."""
    ids = sorted(draw(_ids))
    lengths = {i: (draw(st.integers(0, 5000)), draw(st.integers(0, 5000))) for i in ids}
    terms: dict[str, list[tuple[int, int]]] = {}
    for i in ids:
        for term in draw(st.sets(st.sampled_from("abcde"), min_size=1)):
            terms.setdefault(term, []).append((i, draw(st.integers(1, 9))))
    return lengths, terms


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(data=_runs(), dtype=st.sampled_from(["<i8", ">i8"]), cuts=st.integers(1, 4))
def test_merge_runs_numbers_and_measures_the_candidates(
    data: tuple[dict[int, tuple[int, int]], dict[str, list[tuple[int, int]]]], dtype: str, cuts: int
) -> None:
    lengths, postings = data
    runs: dict[str, list[tuple[bytes, bytes, bytes]]] = {}
    for term, pairs in postings.items():
        for k in range(cuts):  # a term's runs: ascending, disjoint pieces
            piece = pairs[k * len(pairs) // cuts : (k + 1) * len(pairs) // cuts]
            if piece:
                runs.setdefault(term, []).append(
                    (
                        pack_docs((i for i, _ in piece), dtype),
                        pack_docs((tf for _, tf in piece), dtype),
                        pack_lengths(lengths[i] for i, _ in piece),
                    )
                )
    asked = ["a", "c", "z", "b"]
    row_ids = sorted(lengths)
    doc = {i: d for d, i in enumerate(row_ids)}
    saved = postings_module.NUMPY_MIN_POSTINGS
    try:
        for threshold in (0, 10**9):
            postings_module.NUMPY_MIN_POSTINGS = threshold
            merged = merge_runs(runs, asked, dtype)
            assert list(merged.row_ids) == row_ids
            assert list(merged.tokens) == [lengths[i][0] for i in row_ids]
            assert list(merged.content_tokens) == [lengths[i][1] for i in row_ids]
            assert [(list(d), list(f)) for d, f in merged.postings] == [
                ([doc[i] for i, _ in postings.get(t, [])], [tf for _, tf in postings.get(t, [])])
                for t in asked
            ]
            assert all(type(v) is int for v in (*merged.tokens, *merged.row_ids))
    finally:
        postings_module.NUMPY_MIN_POSTINGS = saved


def test_merge_runs_refuses_runs_that_do_not_line_up() -> None:
    run = pack_docs([1, 2], "<i8")
    with pytest.raises(ValueError, match="differ"):
        merge_runs(
            {"a": [(run, pack_docs([1], "<i8"), pack_lengths([(1, 1), (2, 2)]))]}, ["a"], "<i8"
        )
    with pytest.raises(ValueError, match="differ"):
        merge_runs({"a": [(run, pack_docs([1, 1], "<i8"), pack_lengths([(1, 1)]))]}, ["a"], "<i8")


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(
    texts=st.lists(st.lists(st.sampled_from("abcdefg"), max_size=8), max_size=40),
    dtype=st.sampled_from(["<i8", ">i8"]),
)
def test_length_runs_are_the_same_by_numpy_or_by_dict(texts: list[list[str]], dtype: str) -> None:
    docs = [(10 + 3 * n, terms) for n, terms in enumerate(texts)]
    lengths = [(len(terms), n) for n, terms in enumerate(texts)]
    number_of = {t: n for n, t in enumerate("abcdefg")}
    saved = (postings_module.NUMPY_MIN_BATCH, postings_module.NUMPY_IMPORT_BATCH)
    try:
        postings_module.NUMPY_MIN_BATCH = postings_module.NUMPY_IMPORT_BATCH = 0
        assert "numpy" in sys.modules
        by_numpy = tf_length_runs_by_term(docs, lengths, number_of, dtype)
        numpy_tfs = tf_runs_by_term(docs, number_of, dtype)
        postings_module.NUMPY_MIN_BATCH = postings_module.NUMPY_IMPORT_BATCH = 10**9
        by_dict = tf_length_runs_by_term(docs, lengths, number_of, dtype)
        assert tf_runs_by_term(docs, number_of, dtype) == numpy_tfs
    finally:
        postings_module.NUMPY_MIN_BATCH, postings_module.NUMPY_IMPORT_BATCH = saved
    assert by_numpy == by_dict
    assert [run[:3] for run in by_dict] == numpy_tfs
    length_of = dict(zip((doc for doc, _ in docs), lengths, strict=True))
    for _, ids, _, packed in by_dict:
        flat = unpack_docs(packed, LENGTHS)
        assert [(flat[2 * k], flat[2 * k + 1]) for k in range(len(flat) // 2)] == [
            length_of[i] for i in unpack_docs(ids, dtype)
        ]


def test_a_doc_leaves_all_three_columns_of_its_run() -> None:
    ids, tfs = pack_docs([3, 5, 9], ">i8"), pack_docs([1, 2, 3], ">i8")
    lengths = pack_lengths([(30, 3), (50, 5), (90, 9)])
    assert run_columns_without(ids, tfs, lengths, 5, ">i8") == (
        pack_docs([3, 9], ">i8"),
        pack_docs([1, 3], ">i8"),
        pack_lengths([(30, 3), (90, 9)]),
    )
    assert run_columns_without(ids, tfs, lengths, 4, ">i8") is None
    only = run_columns_without(
        pack_docs([3], ">i8"), pack_docs([1], ">i8"), pack_lengths([(30, 3)]), 3, ">i8"
    )
    assert only == (b"", b"", b"")


# -- SQLite reads the vectors' memory ids from the index, not the records' pages --------


def test_sqlite_vector_rows_are_the_join(tmp_path: Path) -> None:
    from memlib._vectors import pack
    from memlib.rankers.embeddings import HashingEmbedder

    url = f"sqlite:{tmp_path / 'v.db'}"
    embedder = HashingEmbedder()
    store: Any = open_store(url, user_id=USER, clock=fixed_clock(), embedder=embedder)
    other: Any = open_store(url, user_id="bob", clock=fixed_clock(), embedder=embedder)
    for target in (store, other):  # interleaved ids of two scopes
        target.append_many(_generated(30, "v"))
        target.append_many(sample_records())
    _retract(store, "v-0003")
    conn = store._connection()
    rows = list(store._vector_rows(conn))
    assert len(rows) > 30 and "v-0003" not in [m for m, _ in rows]
    joined = conn.execute(
        "SELECT r.memory_id, v.vector FROM vectors v JOIN records r ON r.id = v.record_id "
        "WHERE v.user_scope = ? ORDER BY v.record_id",
        (store.user_scope,),
    )
    assert rows == [(m, bytes(b)) for m, b in joined]
    # A vector row of this scope naming another scope's record is refused, not matched.
    (bob_id,) = conn.execute(
        "SELECT id FROM records WHERE user_scope = ? AND kind = 'profile' LIMIT 1",
        (other.user_scope,),
    ).fetchone()
    conn.execute(
        "INSERT INTO vectors (record_id, user_scope, vector) VALUES (?, ?, ?)",
        (bob_id, store.user_scope, pack(embedder.encode(["x"])[0])),
    )
    with pytest.raises(RemoteMemoryCorruptionError, match=f"names record {bob_id}, missing"):
        list(store._vector_rows(conn))
    store.close()
    other.close()

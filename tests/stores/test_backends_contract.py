"""The store contract, run against every backend: JSONL, SQLite and PostgreSQL.

Each test gets ``opener(user_id="alice")``: a function that opens a *new* store object
on the same location (the same file, database or schema), so restarts, a second writer
and a second user can be tested the same way on every backend. PostgreSQL runs on the
session's throwaway cluster (tests/support/pgserver.py) with a fresh schema per test.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.pgserver import pg_dsn, pg_url  # noqa: F401  (fixtures)

from memlib import (
    MemoryKind,
    MemorySource,
    RecallEngine,
    RemoteMemoryCorruptionError,
    RemoteMemoryDuplicateError,
    RemoteMemoryError,
    RemoteMemoryScopeError,
    RemoteMemoryValidationError,
    open_store,
)
from memlib.candidates import scan_recall_candidates
from memlib.normalize import normalize_recall_query
from memlib.rank import stable_rank_recall_candidates
from memlib.sample import SAMPLE_AS_OF, fixed_clock, sample_records, scope_path
from memlib.stores._base import MemoryStore

BACKENDS = ("jsonl", "sqlite", "postgresql")
Opener = Callable[..., MemoryStore]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def opener(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Opener]:
    opened: list[MemoryStore] = []
    if backend == "postgresql":
        url = request.getfixturevalue("pg_url")

    def open_(user_id: str = "alice", **options: Any) -> MemoryStore:
        options.setdefault("clock", fixed_clock())
        if backend == "jsonl":
            store = open_store(f"jsonl:{scope_path(tmp_path, user_id)}", user_id=user_id, **options)
        elif backend == "sqlite":
            store = open_store(f"sqlite:{tmp_path / 'memory.db'}", user_id=user_id, **options)
        else:
            store = open_store(url, user_id=user_id, **options)
        opened.append(store)
        return store

    yield open_
    for store in opened:
        store.close()


def _source(n: str = "1", captured_at: str = "2026-08-01T12:00:00Z") -> MemorySource:
    return MemorySource(
        source_id=f"t-{n}",
        source_type="conversation_transcript",
        title=f"Transcript {n}",
        captured_at=captured_at,
    )


def _item(
    memory_id: str,
    text: str = "layered memory design",
    *,
    kind: MemoryKind = MemoryKind.CONVERSATION,
    captured_at: str = "2026-08-01T12:00:00Z",
) -> dict[str, Any]:
    return {
        "kind": kind,
        "memory_id": memory_id,
        "content": f"{text} (content)",
        "summary": text,
        "source": _source(memory_id, captured_at),
    }


RETRACT_SOURCE = MemorySource(
    source_id="r-1",
    source_type="manual_retraction",
    title="Retraction",
    captured_at="2026-08-10T00:00:00Z",
)


def reference_json(store: MemoryStore, text: str, limit: int = 5) -> str:
    """The reference: full scan over read_all(), baseline score, stable rank."""
    from memlib.result import RecallResult

    query = normalize_recall_query(
        text, user_scope=store.user_scope, limit=limit, query_id="q-1", issued_at=SAMPLE_AS_OF
    )
    scan = scan_recall_candidates(query, store.read_all())
    hits = stable_rank_recall_candidates(query, scan.candidates, as_of=SAMPLE_AS_OF)
    return RecallResult(
        query, hits, scan.searched_records, scan.candidate_records, scan.retracted_records
    ).to_json()


# -- append, read back, restart ---------------------------------------------------------


def test_empty_store_reads_empty(opener: Opener) -> None:
    store = opener()
    assert store.read_all() == ()
    assert store.latest_profile() is None
    assert store.records(MemoryKind.CONVERSATION) == ()
    result = RecallEngine(store).recall("layered memory", as_of=SAMPLE_AS_OF, query_id="q")
    assert (result.hits, result.searched_records, result.candidate_records) == ((), 0, 0)
    assert result.empty_reason == "no_matching_terms"


def test_append_reads_back_in_order_and_survives_restart(opener: Opener) -> None:
    store = opener()
    assert len(store.user_scope) == 16
    one = store.append(**_item("m-1", "first   record"))
    assert one.summary == "first record" and one.stored_at == "2026-08-10T08:00:00Z"
    many = store.append_many([_item("m-2"), _item("m-3", kind=MemoryKind.PROFILE)])
    assert [r.memory_id for r in store.read_all()] == ["m-1", "m-2", "m-3"]
    assert store.read_all() == (one, *many)
    assert store.records(MemoryKind.PROFILE) == (many[1],)
    assert store.records("conversation") == (one, many[0])
    store.close()
    again = opener()
    assert again.read_all() == (one, *many)
    assert again.append(**_item("m-4")).memory_id == "m-4"
    assert [r.memory_id for r in opener().read_all()] == ["m-1", "m-2", "m-3", "m-4"]


def test_records_written_by_another_store_object_are_seen(opener: Opener) -> None:
    first, second = opener(), opener()
    assert first.read_all() == () and second.read_all() == ()
    first.append(**_item("m-1"))
    assert [r.memory_id for r in second.read_all()] == ["m-1"]
    with pytest.raises(RemoteMemoryDuplicateError, match="^duplicate memory_id: m-1$"):
        second.append(**_item("m-1"))
    second.append(**_item("m-2"))
    result = RecallEngine(first).recall("layered", as_of=SAMPLE_AS_OF, query_id="q")
    assert [h.memory_id for h in result.hits] == ["m-1", "m-2"]


# -- duplicates and validation: all or nothing -----------------------------------------


def test_duplicate_ids_are_refused_and_nothing_is_written(opener: Opener) -> None:
    store = opener()
    store.append(**_item("m-1"))
    with pytest.raises(RemoteMemoryDuplicateError) as info:
        store.append_many([_item("m-2"), _item("m-1"), _item("m-3")])
    assert str(info.value) == "duplicate memory_id: m-1"
    assert isinstance(info.value, RemoteMemoryValidationError)
    with pytest.raises(RemoteMemoryDuplicateError, match="^duplicate memory_id: m-4, m-5$"):
        store.append_many([_item("m-4"), _item("m-5"), _item("m-4"), _item("m-5")])
    assert [r.memory_id for r in opener().read_all()] == ["m-1"]


def test_an_invalid_item_writes_nothing(opener: Opener) -> None:
    store = opener()
    bad = _item("m-2")
    bad["summary"] = "   "
    with pytest.raises(RemoteMemoryValidationError, match="^summary must not be empty$"):
        store.append_many([_item("m-1"), bad])
    with pytest.raises(RemoteMemoryValidationError, match="use retract"):
        store.append_many([_item("m-3", kind=MemoryKind.RETRACTION)])
    assert opener().read_all() == ()


# -- scope --------------------------------------------------------------------------------


def test_each_user_sees_only_its_own_scope(opener: Opener) -> None:
    alice, bob = opener("alice"), opener("bob")
    assert alice.user_scope != bob.user_scope
    alice.append(**_item("m-1", "alice likes layered memory"))
    bob.append(**_item("m-1", "bob likes layered memory"))  # same id, other scope: fine
    assert [r.summary for r in alice.read_all()] == ["alice likes layered memory"]
    assert [r.summary for r in bob.read_all()] == ["bob likes layered memory"]
    result = RecallEngine(bob).recall("alice layered", as_of=SAMPLE_AS_OF, query_id="q")
    assert [h.snippet for h in result.hits] == ["bob likes layered memory"]
    assert result.searched_records == 1


def test_a_query_of_another_scope_is_refused(opener: Opener) -> None:
    alice = opener("alice")
    alice.append(**_item("m-1"))
    query = normalize_recall_query(
        "layered",
        user_scope=opener("bob").user_scope,
        limit=5,
        query_id="q",
        issued_at=SAMPLE_AS_OF,
    )
    for scan in (alice.scan_candidates, alice.scan_top_candidates):  # type: ignore[attr-defined]
        with pytest.raises(
            RemoteMemoryScopeError, match="^memory m-1 belongs to another user scope$"
        ):
            scan(query)


def test_jsonl_refuses_a_record_of_another_scope_in_its_file(tmp_path: Path) -> None:
    path = scope_path(tmp_path, "alice")
    bob = open_store(f"jsonl:{path}", user_id="bob", clock=fixed_clock())
    bob.append(**_item("m-1"))
    alice = open_store(f"jsonl:{path}", user_id="alice")
    with pytest.raises(RemoteMemoryScopeError, match="^memory m-1 belongs to another user scope$"):
        alice.read_all()
    with pytest.raises(RemoteMemoryScopeError):
        RecallEngine(alice).recall("layered", as_of=SAMPLE_AS_OF)


# -- retraction and profiles ----------------------------------------------------------


def test_retraction_hides_a_record_and_is_counted(opener: Opener) -> None:
    store = opener()
    store.append_many([_item("m-1"), _item("m-2", captured_at="2026-08-05T00:00:00Z")])
    retraction = store.retract("m-2", reason="was wrong", source=RETRACT_SOURCE)
    assert (retraction.kind, retraction.retracts, retraction.memory_id) == (
        MemoryKind.RETRACTION,
        "m-2",
        "retract-m-2",
    )
    result = RecallEngine(store).recall("layered", as_of=SAMPLE_AS_OF, query_id="q")
    assert [h.memory_id for h in result.hits] == ["m-1"]
    counts = (result.searched_records, result.candidate_records, result.retracted_records)
    assert counts == (1, 1, 1)
    assert [r.memory_id for r in opener().read_all()] == ["m-1", "m-2", "retract-m-2"]
    with pytest.raises(RemoteMemoryValidationError, match="^memory m-2 is already retracted$"):
        store.retract("m-2", reason="again", source=RETRACT_SOURCE, retraction_id="r-again")
    with pytest.raises(RemoteMemoryValidationError, match="^memory m-2 is already retracted$"):
        store.retract("m-2", reason="again", source=RETRACT_SOURCE)
    with pytest.raises(RemoteMemoryDuplicateError, match="^duplicate memory_id: retract-m-2$"):
        store.retract("m-1", reason="clash", source=RETRACT_SOURCE, retraction_id="retract-m-2")
    with pytest.raises(
        RemoteMemoryValidationError, match="^cannot retract unknown memory_id: nope$"
    ):
        store.retract("nope", reason="?", source=RETRACT_SOURCE)
    with pytest.raises(
        RemoteMemoryValidationError, match="^cannot retract a retraction: retract-m-2$"
    ):
        store.retract("retract-m-2", reason="?", source=RETRACT_SOURCE)
    assert reference_json(opener(), "layered") == reference_json(store, "layered")


def test_latest_profile_is_the_greatest_not_retracted(opener: Opener) -> None:
    store = opener()
    store.append_many(
        [
            _item("p-b", "profile b", kind=MemoryKind.PROFILE, captured_at="2026-08-02T00:00:00Z"),
            _item("p-a", "profile a", kind=MemoryKind.PROFILE, captured_at="2026-08-02T00:00:00Z"),
            _item(
                "p-old", "profile old", kind=MemoryKind.PROFILE, captured_at="2026-07-01T00:00:00Z"
            ),
            _item("m-1", "a conversation", captured_at="2026-09-01T00:00:00Z"),
        ]
    )
    profile = store.latest_profile()
    assert profile is not None
    assert profile.memory_id == "p-b"  # same captured_at: the greater id
    store.retract("p-b", reason="stale", source=RETRACT_SOURCE)
    profile = opener().latest_profile()
    assert profile is not None
    assert profile.memory_id == "p-a"
    store.retract("p-a", reason="stale", source=RETRACT_SOURCE)
    store.retract("p-old", reason="stale", source=RETRACT_SOURCE)
    assert opener().latest_profile() is None
    # Profiles never enter conversation recall.
    result = RecallEngine(store).recall("profile", as_of=SAMPLE_AS_OF, query_id="q")
    assert (result.hits, result.searched_records) == ((), 1)


# -- recall results -----------------------------------------------------------------

QUERIES = (
    "layered memory",
    "分层记忆 设计",
    "Café Torstraße",
    "recall embedding reranker memory",
    "メモリ設計",
    "llm记忆 LoCoMo",
    "sqlite wal jsonl append",
    "nothing-matches-this",
)


def test_sample_corpus_recall_is_the_reference_on_every_backend(opener: Opener) -> None:
    store = opener()
    store.append_many(sample_records())
    store.retract("conversation-006", reason="duplicate of 005", source=RETRACT_SOURCE)
    reopened = opener()
    for text in QUERIES:
        for limit in (1, 3, 10):
            expected = reference_json(reopened, text, limit)
            for result in (
                RecallEngine(store).recall(text, limit=limit, as_of=SAMPLE_AS_OF, query_id="q-1"),
                RecallEngine(reopened).recall(
                    text, limit=limit, as_of=SAMPLE_AS_OF, query_id="q-1"
                ),
            ):
                assert result.to_json() == expected, (text, limit)


def test_sample_recall_is_byte_identical_across_backends(
    backend: str, opener: Opener, tmp_path: Path
) -> None:
    reference = open_store(
        f"jsonl:{tmp_path / 'reference' / 'records.jsonl'}", user_id="alice", clock=fixed_clock()
    )
    reference.append_many(sample_records())
    store = opener()
    store.append_many(sample_records())
    assert store.read_all() == reference.read_all()
    result = RecallEngine(store).recall(
        "layered memory", as_of=SAMPLE_AS_OF, query_id="demo-query-001"
    )
    expected = reference_json(reference, "layered memory")
    assert result.to_json() == expected.replace('"q-1"', '"demo-query-001"')
    assert json.loads(result.to_json())["hits"][0]["score_breakdown"]["total"] == 0.995161


def test_open_store_urls(tmp_path: Path) -> None:
    from memlib.stores.jsonl._store import RemoteMemoryStore
    from memlib.stores.sql._sqlite import SqliteMemoryStore

    assert isinstance(open_store(f"jsonl:{tmp_path / 'a.jsonl'}", user_id="a"), RemoteMemoryStore)
    assert isinstance(open_store(f"sqlite:{tmp_path / 'a.db'}", user_id="a"), SqliteMemoryStore)
    assert isinstance(open_store(f"sqlite://{tmp_path / 'b.db'}", user_id="a"), SqliteMemoryStore)
    assert not (tmp_path / "a.db").exists()  # nothing is created before the first write
    with pytest.raises(RemoteMemoryValidationError, match="unknown store scheme 'mysql'"):
        open_store("mysql://x", user_id="a")


def test_sqlite_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(RemoteMemoryCorruptionError, match="cannot open SQLite store"):
        open_store(f"sqlite:{path}", user_id="a").read_all()


def test_postgres_schema_must_be_initialised(pg_dsn: str) -> None:  # noqa: F811
    store = open_store(f"{pg_dsn}?schema=never_initialised", user_id="a")
    with pytest.raises(RemoteMemoryError, match="not initialised.*memlib --store URL db init"):
        store.read_all()


def test_db_init_command(pg_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    from support.pgserver import drop_schema

    from memlib.cli import main

    url = f"{pg_dsn}?schema=cli_init_test"
    try:
        assert main(["--store", url, "db", "init"]) == 0
        assert main(["--store", url, "db", "init"]) == 0
        assert main(["--store", url, "db", "status"]) == 0
        assert capsys.readouterr().out.splitlines() == [
            "PostgreSQL schema cli_init_test: created schema version 7",
            "PostgreSQL schema cli_init_test: schema version 7, nothing to do",
            "PostgreSQL schema cli_init_test: schema version 7",
            "dense search: in the client (the server has no pgvector)",
        ]
        store = open_store(url, user_id="alice", clock=fixed_clock())
        store.append_many(sample_records())
        assert len(store.read_all()) == 15
        store.close()
    finally:
        drop_schema(pg_dsn, "cli_init_test")
    db = f"sqlite:{tmp_path / 'x.db'}"
    assert main(["--store", db, "db", "init"]) == 0
    assert main(["--store", db, "db", "init"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "SQLite store: created schema version 7",
        "SQLite store: schema version 7, nothing to do",
    ]


def test_db_init_upgrades_a_version_1_postgresql_schema(pg_dsn: str) -> None:  # noqa: F811
    """Version 1 kept one postings row per (term, record); version 2 one run per batch."""
    from support.pgserver import drop_schema

    from memlib._retrieval import unpack_docs
    from memlib.stores._admin import init_store_schema
    from memlib.stores.sql._postgres import PostgresMemoryStore

    url = f"{pg_dsn}?schema=upgrade_test"
    try:
        init_store_schema(url)
        store = open_store(url, user_id="alice", clock=fixed_clock())
        assert isinstance(store, PostgresMemoryStore)
        store.append_many(sample_records())
        store.retract("conversation-002", reason="wrong", source=sample_records()[0]["source"])
        engine = RecallEngine(store)
        queries = ("layered memory", "sqlite persistence", "分层")
        before = [
            engine.recall(q, limit=5, as_of=SAMPLE_AS_OF, query_id="q").to_json() for q in queries
        ]
        conn = store._connection()
        runs = (
            conn.cursor(binary=True)
            .execute("SELECT user_scope, term, record_ids FROM upgrade_test.postings")
            .fetchall()
        )
        pairs = [
            (scope, term, record_id)
            for scope, term, blob in runs
            for record_id in unpack_docs(bytes(blob), ">i8")
        ]
        assert len(pairs) > len(runs) > 0
        # Back to version 1, as an older memlib wrote it.
        conn.execute("DROP TABLE upgrade_test.postings")
        conn.execute("DROP INDEX upgrade_test.records_recent")
        conn.execute(
            'CREATE TABLE upgrade_test.postings (user_scope text NOT NULL, term text COLLATE "C" '
            "NOT NULL, record_id bigint NOT NULL, PRIMARY KEY (user_scope, term, record_id))"
        )
        conn.cursor().executemany("INSERT INTO upgrade_test.postings VALUES (%s, %s, %s)", pairs)
        conn.execute("UPDATE upgrade_test.meta SET value = '1' WHERE key = 'schema_version'")
        store.close()
        with pytest.raises(RemoteMemoryError, match="version 1, need 7"):
            open_store(url, user_id="alice").read_all()
        assert init_store_schema(url)[1:] == (1, 7)
        reopened = open_store(url, user_id="alice")
        assert isinstance(reopened, PostgresMemoryStore)
        engine = RecallEngine(reopened)
        after = [
            engine.recall(q, limit=5, as_of=SAMPLE_AS_OF, query_id="q").to_json() for q in queries
        ]
        assert after == before
        assert reopened._connection().execute(
            "SELECT count(*) FROM upgrade_test.postings"
        ).fetchone()[0] == len(runs)
        reopened.close()
    finally:
        drop_schema(pg_dsn, "upgrade_test")


def test_a_version_1_sqlite_store_is_converted_on_open(tmp_path: Path) -> None:
    """Version 1 kept one postings row per (term, record); version 2 packs runs."""
    import sqlite3

    from memlib._retrieval import unpack_docs
    from memlib.stores.sql._sqlite import SqliteMemoryStore

    path = tmp_path / "old.db"
    store = open_store(f"sqlite:{path}", user_id="alice", clock=fixed_clock())
    store.append_many(sample_records())
    store.retract("conversation-002", reason="wrong", source=sample_records()[0]["source"])
    engine = RecallEngine(store)
    before = [
        engine.recall(q, limit=5, as_of=SAMPLE_AS_OF, query_id="q").to_json()
        for q in ("layered memory", "sqlite persistence", "分层")
    ]
    store.close()
    # Turn the file back into version 1, as an older memlib wrote it.
    conn = sqlite3.connect(path, isolation_level=None)
    pairs = [
        (term_id, doc)
        for term_id, blob in conn.execute("SELECT term_id, docs FROM postings")
        for doc in unpack_docs(blob, SqliteMemoryStore.RUN_FORMAT)
    ]
    assert pairs
    conn.executescript(
        "DROP TABLE postings; CREATE TABLE postings (term_id INTEGER NOT NULL, "
        "record_id INTEGER NOT NULL, PRIMARY KEY (term_id, record_id)) WITHOUT ROWID;"
        "UPDATE memlib_meta SET value = '1' WHERE key = 'schema_version';"
    )
    conn.executemany("INSERT INTO postings VALUES (?, ?)", pairs)
    conn.close()
    reopened = open_store(f"sqlite:{path}", user_id="alice")
    engine = RecallEngine(reopened)
    after = [
        engine.recall(q, limit=5, as_of=SAMPLE_AS_OF, query_id="q").to_json()
        for q in ("layered memory", "sqlite persistence", "分层")
    ]
    assert after == before
    version = (
        sqlite3.connect(path)
        .execute("SELECT value FROM memlib_meta WHERE key = 'schema_version'")
        .fetchone()
    )
    assert version == ("7",)
    reopened.close()


def test_sqlite_posting_rows_are_the_jsonl_index(tmp_path: Path) -> None:
    from memlib.stores.jsonl._store import RemoteMemoryStore
    from memlib.stores.sql._sqlite import SqliteMemoryStore

    jsonl = open_store(f"jsonl:{tmp_path / 'a.jsonl'}", user_id="alice", clock=fixed_clock())
    sqlite = open_store(f"sqlite:{tmp_path / 'a.db'}", user_id="alice", clock=fixed_clock())
    assert isinstance(jsonl, RemoteMemoryStore)
    assert isinstance(sqlite, SqliteMemoryStore)
    for store in (jsonl, sqlite):
        store.append_many(sample_records())
        store.retract("conversation-003", reason="wrong", source=sample_records()[0]["source"])

    # The JSONL index keeps a retracted record's postings and clears its live flag;
    # SQLite takes it out of its runs. Without it, the two are the same sets.
    def live(rows: list[dict[str, Any]], keep_empty: bool) -> list[dict[str, Any]]:
        out = []
        for row in rows:
            ids = [i for i in row["memory_ids"] if i != "conversation-003"]
            if ids or keep_empty:
                out.append({"term": row["term"], "records": len(ids), "memory_ids": ids})
        return out

    rows = sqlite.posting_rows()
    assert len(rows) > 50 and rows == live(jsonl.index.posting_rows(), keep_empty=False)
    assert all("conversation-003" not in row["memory_ids"] for row in rows)
    asked = ["layered", "memory", "nope"]
    assert sqlite.posting_rows(asked) == live(jsonl.index.posting_rows(asked), keep_empty=True)
    sqlite.close()


# -- schema 3: term frequencies and lengths for BM25 from the index ----------------------

_BM25_QUERIES = (
    "layered memory",
    "sqlite persistence",
    "分层",
    "the memory of the store",
    "the of",
)


def _bm25_recalls(store: MemoryStore) -> list[str]:
    return [
        RecallEngine(store, ranker=ranker)
        .recall(q, limit=5, as_of=SAMPLE_AS_OF, query_id="q")
        .to_json()
        for ranker in ("bm25", "bm25+stopwords")
        for q in _BM25_QUERIES
    ]


def _reference_bm25_recalls(store: MemoryStore) -> list[str]:
    from memlib.rank import rank_scored_candidates
    from memlib.rankers import get_ranker
    from memlib.result import RecallResult

    out = []
    for name in ("bm25", "bm25+stopwords"):
        for q in _BM25_QUERIES:
            ranker = get_ranker(name)
            query = normalize_recall_query(
                q, user_scope=store.user_scope, limit=5, query_id="q", issued_at=SAMPLE_AS_OF
            )
            scan = scan_recall_candidates(query, store.read_all())
            breakdowns = ranker.score_candidates(query, scan, as_of=SAMPLE_AS_OF)
            hits = rank_scored_candidates(
                query, list(zip(scan.candidates, breakdowns, strict=True))
            )
            out.append(
                RecallResult(
                    query,
                    hits,
                    scan.searched_records,
                    scan.candidate_records,
                    scan.retracted_records,
                ).to_json()
            )
    return out


def _load_for_bm25(store: MemoryStore) -> None:
    records = sample_records()
    store.append_many(records)
    store.append_many(
        [
            {**records[0], "memory_id": f"extra-{i}", "content": text, "summary": "the memory"}
            for i, text in enumerate(
                (
                    "memory memory memory of the store",
                    "the of the of",
                    "layered layered memory",
                    "persistence the sqlite",
                )
            )
        ]
    )
    store.retract("conversation-002", reason="wrong", source=records[0]["source"])
    store.retract("extra-1", reason="wrong", source=records[0]["source"])


def test_a_version_2_sqlite_store_gains_term_frequencies_on_open(tmp_path: Path) -> None:
    """Version 2 had no term frequencies nor lengths; opening it computes them from the
    bodies, and bm25 recalls from the index are byte-identical before and after."""
    import sqlite3

    from memlib.stores._base import LexicalScanning

    path = tmp_path / "v2.db"
    store = open_store(f"sqlite:{path}", user_id="alice", clock=fixed_clock())
    _load_for_bm25(store)
    assert isinstance(store, LexicalScanning)
    before = _bm25_recalls(store)
    assert before == _reference_bm25_recalls(store)
    store.close()
    conn = sqlite3.connect(path, isolation_level=None)
    lengths_before = conn.execute(
        "SELECT id, tokens, content_tokens FROM records ORDER BY id"
    ).fetchall()
    # Back to version 2, as the previous memlib wrote it.
    conn.executescript(
        "DROP INDEX records_stored; ALTER TABLE records DROP COLUMN stored_us;"
        "ALTER TABLE postings DROP COLUMN tfs; ALTER TABLE records DROP COLUMN tokens;"
        "ALTER TABLE records DROP COLUMN content_tokens;"
        "UPDATE memlib_meta SET value = '2' WHERE key = 'schema_version';"
    )
    conn.close()
    reopened = open_store(f"sqlite:{path}", user_id="alice")
    assert _bm25_recalls(reopened) == before
    reopened.close()
    conn = sqlite3.connect(path)
    assert conn.execute(
        "SELECT value FROM memlib_meta WHERE key = 'schema_version'"
    ).fetchone() == ("7",)
    assert (
        conn.execute("SELECT id, tokens, content_tokens FROM records ORDER BY id").fetchall()
        == lengths_before
    )
    conn.close()


def test_db_init_upgrades_a_version_2_postgresql_schema(pg_dsn: str) -> None:  # noqa: F811
    """``memlib db init`` computes version 3's term frequencies and lengths from the
    bodies; bm25 recalls are byte-identical before and after."""
    from support.pgserver import drop_schema

    from memlib.stores._admin import init_store_schema

    url = f"{pg_dsn}?schema=upgrade_tf_test"
    try:
        init_store_schema(url)
        store = open_store(url, user_id="alice", clock=fixed_clock())
        _load_for_bm25(store)
        before = _bm25_recalls(store)
        assert before == _reference_bm25_recalls(store)
        conn = store._connection()  # type: ignore[attr-defined]
        lengths_query = "SELECT id, tokens, content_tokens FROM upgrade_tf_test.records ORDER BY id"
        lengths_before = conn.execute(lengths_query).fetchall()
        conn.execute("ALTER TABLE upgrade_tf_test.postings DROP COLUMN tfs")
        conn.execute(
            "ALTER TABLE upgrade_tf_test.records DROP COLUMN tokens, DROP COLUMN content_tokens"
        )
        conn.execute("UPDATE upgrade_tf_test.meta SET value = '2' WHERE key = 'schema_version'")
        store.close()
        with pytest.raises(RemoteMemoryError, match="version 2, need 7"):
            open_store(url, user_id="alice").read_all()
        assert init_store_schema(url)[1:] == (2, 7)
        reopened = open_store(url, user_id="alice")
        assert _bm25_recalls(reopened) == before
        conn = reopened._connection()  # type: ignore[attr-defined]
        assert conn.execute(lengths_query).fetchall() == lengths_before
        reopened.close()
    finally:
        drop_schema(pg_dsn, "upgrade_tf_test")

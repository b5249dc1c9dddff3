"""Schema 6 of the SQL stores: ``records_source``, the index ``source_neighbours`` reads.

The statement must search that index on both dialects (a plan that scans the scope would
answer right and cost O(records) at a million), and a schema-5 store must gain the index
by the usual upgrade path: on open for SQLite, by ``db init`` for PostgreSQL.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from support.pgserver import pg_dsn, pg_url  # noqa: F401  (fixtures)

from memlib import RemoteMemoryError, open_store
from memlib.stores._sources import SourceNeighbours, source_neighbours_of
from memlib.stores.sql._common import SqlMemoryStore
from memlib.stores.sql._schema import SCHEMA_VERSION


def turns(count: int, sources: int) -> list[dict[str, Any]]:
    return [
        {
            "kind": "conversation",
            "memory_id": f"s{i % sources}:{i}",
            "content": f"turn {i}",
            "summary": f"turn {i}",
            "source": {
                "source_id": f"s{i % sources}",
                "source_type": "transcript",
                "title": "session",
                "captured_at": "2026-01-01T00:00:00Z",
            },
        }
        for i in range(count)
    ]


RETRACTION_SOURCE = {
    "source_id": "user",
    "source_type": "user_request",
    "title": "retract",
    "captured_at": "2026-01-02T00:00:00Z",
}


def filled(store: Any) -> dict[str, SourceNeighbours]:
    store.append_many(turns(300, 7))
    store.retract("s3:10", reason="wrong", source=RETRACTION_SOURCE)
    ids = [f"s{i % 7}:{i}" for i in range(300)]
    expected = source_neighbours_of(store.read_all(), ids)
    assert expected["s3:17"] == SourceNeighbours("s3:3", "s3:24")  # s3:10 skipped
    assert store.source_neighbours(ids) == expected
    return expected


def test_sqlite_searches_the_source_index(tmp_path: Path) -> None:
    store = open_store(f"sqlite:{tmp_path / 'm.db'}", user_id="alice")
    assert isinstance(store, SqlMemoryStore)
    filled(store)
    conn = sqlite3.connect(tmp_path / "m.db")
    plan = [
        row[3]
        for row in conn.execute(
            "EXPLAIN QUERY PLAN " + store._q(store._neighbours_sql()),
            (store.user_scope, json.dumps(["s1:1"])),
        )
    ]
    assert sum("USING INDEX records_source" in step for step in plan) == 2, plan
    assert not any(step.startswith("SCAN") and "json_each" not in step for step in plan), plan
    store.close()


def test_postgresql_searches_the_source_index(pg_url: str) -> None:  # noqa: F811
    store = open_store(pg_url, user_id="alice")
    assert isinstance(store, SqlMemoryStore)
    filled(store)
    conn = store._connection()
    conn.execute("ANALYZE")
    conn.execute("SET enable_seqscan = off")  # a few hundred rows: make the index's use show
    try:
        plan = "\n".join(
            row[0]
            for row in conn.execute(
                "EXPLAIN " + store._q(store._neighbours_sql()), (store.user_scope, ["s1:1"])
            )
        )
    finally:
        conn.execute("RESET enable_seqscan")
    assert plan.count("records_source") == 2, plan
    store.close()


def test_a_version_5_sqlite_store_gains_the_source_index_on_open(tmp_path: Path) -> None:
    path = tmp_path / "v5.db"
    store = open_store(f"sqlite:{path}", user_id="alice")
    expected = filled(store)
    store.close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(
        "DROP INDEX records_source;UPDATE memlib_meta SET value = '5' WHERE key = 'schema_version';"
    )
    conn.close()
    reopened = open_store(f"sqlite:{path}", user_id="alice")
    assert isinstance(reopened, SqlMemoryStore)
    assert reopened.source_neighbours(list(expected)) == expected  # the first read upgrades
    assert reopened.schema_version() == SCHEMA_VERSION == 7
    names = {
        row[0]
        for row in sqlite3.connect(path).execute(
            "SELECT name FROM sqlite_master WHERE type = 'index'"
        )
    }
    assert "records_source" in names
    reopened.close()


def test_db_init_gives_a_version_5_postgresql_schema_the_source_index(
    pg_dsn: str,  # noqa: F811
) -> None:
    from support.pgserver import drop_schema

    from memlib.stores._admin import init_store_schema

    url = f"{pg_dsn}?schema=sources_upgrade_test"
    try:
        init_store_schema(url)
        store = open_store(url, user_id="alice")
        assert isinstance(store, SqlMemoryStore)
        expected = filled(store)
        conn = store._connection()
        conn.execute("DROP INDEX sources_upgrade_test.records_source")
        conn.execute(
            "UPDATE sources_upgrade_test.meta SET value = '5' WHERE key = 'schema_version'"
        )
        store.close()
        with pytest.raises(RemoteMemoryError, match="version 5, need 7.*db init"):
            open_store(url, user_id="alice").read_all()
        assert init_store_schema(url)[1:] == (5, 7)
        reopened = open_store(url, user_id="alice")
        assert isinstance(reopened, SqlMemoryStore)
        assert reopened.source_neighbours(list(expected)) == expected
        indexes = {
            row[0]
            for row in reopened._connection().execute(
                "SELECT indexname FROM pg_indexes WHERE schemaname = 'sources_upgrade_test'"
            )
        }
        assert "records_source" in indexes
        reopened.close()
    finally:
        drop_schema(pg_dsn, "sources_upgrade_test")

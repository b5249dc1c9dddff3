"""A store of every schema version memlib has written, opened by today's memlib.

Each fixture in ``tests/fixtures/sql/`` was written by the memlib of that version
(README.md there says how) with ``make_fixture.py``. Opened now, it is upgraded — on
open for SQLite, by ``db init`` for PostgreSQL — and must then answer exactly as a store
that today's memlib wrote with the same script: records, profile, retractions, source
neighbours, vectors and every recall's ``to_json()``.
"""

from __future__ import annotations

import runpy
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from support.pgserver import drop_schema, pg_dsn  # noqa: F401  (fixtures)

from memlib import RecallEngine, RemoteMemoryError, open_store
from memlib.sample import SAMPLE_AS_OF
from memlib.stores._admin import init_store_schema
from memlib.stores.sql._schema import SCHEMA_VERSION

FIXTURES = Path(__file__).parents[1] / "fixtures" / "sql"
MAKE = runpy.run_path(str(FIXTURES / "make_fixture.py"))
QUERIES = ("layered memory", "分层记忆", "embedding reranker", "sqlite persistence", "the")
RANKERS = ("baseline", "bm25", "bm25+stopwords")


def _version(fixture: Path) -> int:
    return int(fixture.stem.split("-v")[1][0])


def _answers(url: str, user: str) -> dict[str, Any]:
    store: Any = open_store(url, user_id=user)
    records = store.read_all()
    conversations = [r.memory_id for r in records if r.kind.value == "conversation"]
    state = store.vector_state()
    dense = None
    if state.model is not None:
        scores = store.dense_scores(
            _query(store), [1.0, 0.5, -0.25, 2.0], model=MAKE["MODEL"], dimension=MAKE["DIMENSION"]
        )
        dense = (list(scores.ids), [float(x) for x in scores.scores], scores.missing)
    answers = {
        "records": records,
        "profile": store.latest_profile(),
        "retractions": store.records("retraction"),
        "retraction_of": [store.retraction_of(m) for m in conversations],
        "neighbours": store.source_neighbours(conversations),
        "vectors": (state, dense),
        "recalls": [
            RecallEngine(store, ranker=ranker)
            .recall(q, limit=5, as_of=SAMPLE_AS_OF, query_id="q")
            .to_json()
            for ranker in RANKERS
            for q in QUERIES
        ],
    }
    assert store.schema_version() == SCHEMA_VERSION
    store.close()
    return answers


def _query(store: Any) -> Any:
    from memlib.normalize import normalize_recall_query

    return normalize_recall_query(
        "layered memory", user_scope=store.user_scope, limit=5, query_id="q", issued_at=SAMPLE_AS_OF
    )


def _same_as_fresh(old: str, fresh: str, version: int) -> None:
    MAKE["main"](fresh, vectors=version >= 4)  # the version that began to keep them
    for user in ("alice", "bob"):
        upgraded, expected = _answers(old, user), _answers(fresh, user)
        assert upgraded == expected
    assert len(expected["records"]) == 3  # bob's; alice's have a retraction and profiles


def _sqlite_copy(fixture: Path, path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.executescript(fixture.read_text(encoding="utf-8"))
    conn.close()
    path.chmod(0o600)


@pytest.mark.parametrize("fixture", sorted(FIXTURES.glob("sqlite-v*.sql")), ids=lambda p: p.stem)
def test_a_sqlite_store_of_each_version_is_upgraded_on_open(fixture: Path, tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _sqlite_copy(fixture, path)
    meta = "SELECT value FROM memlib_meta WHERE key = 'schema_version'"
    assert sqlite3.connect(path).execute(meta).fetchone() == (str(_version(fixture)),)
    _same_as_fresh(f"sqlite:{path}", f"sqlite:{tmp_path / 'fresh.db'}", _version(fixture))
    assert sqlite3.connect(path).execute(meta).fetchone() == (str(SCHEMA_VERSION),)


@pytest.mark.parametrize("fixture", sorted(FIXTURES.glob("postgres-v*.sql")), ids=lambda p: p.stem)
def test_a_postgresql_schema_of_each_version_is_upgraded_by_db_init(
    fixture: Path,
    pg_dsn: str,  # noqa: F811
) -> None:
    import psycopg

    name = f"fixture_{fixture.stem.replace('-', '_')}"
    version = _version(fixture)
    try:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(fixture.read_text(encoding="utf-8").replace("memlib_fixture", name))
        old = f"{pg_dsn}?schema={name}"
        if version < SCHEMA_VERSION:
            with pytest.raises(RemoteMemoryError, match=f"version {version}, need 7.*db init"):
                open_store(old, user_id="alice").read_all()
        assert init_store_schema(old)[1:] == (version, SCHEMA_VERSION)
        assert init_store_schema(old)[1:] == (SCHEMA_VERSION, SCHEMA_VERSION)
        _same_as_fresh(old, f"{pg_dsn}?schema={name}_fresh", version)
    finally:
        drop_schema(pg_dsn, name)
        drop_schema(pg_dsn, f"{name}_fresh")


def test_two_openers_of_an_old_sqlite_store_upgrade_it_once(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _sqlite_copy(FIXTURES / "sqlite-v1.sql", path)
    answers: list[Any] = []
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def open_and_read() -> None:
        try:
            start.wait()
            answers.append(_answers(f"sqlite:{path}", "alice"))
        except BaseException as exc:  # noqa: BLE001  (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=open_and_read) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    MAKE["main"](f"sqlite:{tmp_path / 'fresh.db'}", vectors=False)
    assert answers[0] == answers[1] == _answers(f"sqlite:{tmp_path / 'fresh.db'}", "alice")


def test_db_status_reads_an_old_sqlite_store_without_upgrading_it_and_db_init_upgrades_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from memlib.cli import main

    path = tmp_path / "old.db"
    _sqlite_copy(sorted(FIXTURES.glob("sqlite-v*.sql"))[0], path)
    before = path.read_bytes()
    assert main(["--store", f"sqlite:{path}", "db", "status"]) == 0
    assert capsys.readouterr().out == "SQLite store: schema version 1\n"
    assert path.read_bytes() == before
    assert main(["--store", f"sqlite:{path}", "db", "init"]) == 0
    assert capsys.readouterr().out == (
        f"SQLite store: upgraded schema from version 1 to {SCHEMA_VERSION}\n"
    )
    assert main(["--store", f"sqlite:{path}", "db", "status"]) == 0
    assert capsys.readouterr().out == f"SQLite store: schema version {SCHEMA_VERSION}\n"

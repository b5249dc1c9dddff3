"""Pair vectors on the SQL stores: ``put_vectors(previous=)`` and retractions.

A pair vector embeds a record with the turn before it in its source. ``put_vectors``
stores one only while that turn is still the record's turn before (read in the write's
own transaction), and a retraction in a scope of pair vectors also deletes, in its
transaction, the vector of the retracted turn's successor: it embedded the retracted
text. The successor then reads as missing, so ``memlib embed`` pairs it again.

The stores are opened without an embedder: every vector here is written by the test.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from support.pgserver import pg_dsn, pg_url  # noqa: F401  (fixtures)

from memlib import RemoteMemoryValidationError, open_store
from memlib._vectors import pack, pair_text, query_vector
from memlib.normalize import normalize_recall_query
from memlib.rankers.embeddings import HashingEmbedder, PairEmbedder
from memlib.sample import SAMPLE_AS_OF, fixed_clock
from memlib.stores.sql._common import SqlMemoryStore

TURNS = HashingEmbedder(64)
PAIRS = PairEmbedder(TURNS)

# Two sources, interleaved in append order.
ORDER = ("a:1", "b:1", "a:2", "a:3", "b:2", "a:4")
REMOVAL = {
    "source_id": "user",
    "source_type": "user_request",
    "title": "retract",
    "captured_at": "2026-01-02T00:00:00Z",
}


def _source(name: str) -> dict[str, str]:
    return {
        "source_id": name,
        "source_type": "transcript",
        "title": f"session {name}",
        "captured_at": "2026-01-01T00:00:00Z",
    }


def _item(memory_id: str) -> dict[str, Any]:
    text = f"turn {memory_id} about {'tea' if memory_id.startswith('a') else 'coffee'}"
    return {
        "kind": "conversation",
        "memory_id": memory_id,
        "content": text,
        "summary": text,
        "source": _source(memory_id.split(":")[0]),
    }


@pytest.fixture
def opener(sql_url: str) -> Iterator[Any]:
    """Opens another store object on the same database (as another process would)."""
    opened: list[Any] = []

    def open_one() -> Any:
        store = open_store(sql_url, user_id="alice", clock=fixed_clock())
        assert isinstance(store, SqlMemoryStore) and store.embedder is None
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        store.close()


def _filled(opener: Any) -> Any:
    store = opener()
    store.append_many([_item(m) for m in ORDER])
    return store


def _content(store: Any, memory_id: str | None) -> str | None:
    if memory_id is None:
        return None
    (record,) = store.records_by_id([memory_id])
    return str(record.content)


def _pair(store: Any, memory_id: str, previous: str | None) -> bytes:
    """The pair vector of ``memory_id`` embedded with ``previous`` as its turn before."""
    text = pair_text(_content(store, previous), str(_content(store, memory_id)))
    return pack(PAIRS.encode([text])[0])


def _put_pairs(store: Any, memory_ids: Sequence[str]) -> int:
    """Embed ``memory_ids`` with their turn before as it is now, and store them."""
    neighbours = store.source_neighbours(memory_ids)
    previous = {m: n.previous for m, n in neighbours.items()}
    vectors = {m: _pair(store, m, before) for m, before in previous.items()}
    return int(store.put_vectors(PAIRS.name, PAIRS.dimension, vectors, previous=previous))


def _dense_ids(store: Any, embedder: Any = PAIRS) -> list[str]:
    query = normalize_recall_query(
        "tea", user_scope=store.user_scope, limit=5, query_id="q", issued_at=SAMPLE_AS_OF
    )
    scores = store.dense_scores(
        query, query_vector(embedder, "tea"), model=embedder.name, dimension=embedder.dimension
    )
    return sorted(scores.ids)


def _missing(store: Any) -> list[str]:
    return [r.memory_id for r in store.records_without_vectors(100)]


def _raw_vectors(store: Any, sql_url: str) -> bytes:
    """Every byte the backend keeps of vectors: SQLite's file and its log, or the table."""
    if sql_url.startswith("sqlite:"):
        path = Path(sql_url.removeprefix("sqlite:"))
        return b"".join(p.read_bytes() for p in sorted(path.parent.iterdir()) if p.is_file())
    rows = (
        store._connection()
        .cursor(binary=True)
        .execute(f"SELECT vector FROM {store.schema}.vectors")
        .fetchall()
    )
    return b"".join(bytes(row[0]) for row in rows)


def _retract_together(store: Any, memory_ids: Sequence[str]) -> None:
    """One batch of several retractions (the public API writes one a batch)."""
    stored_at = store._now()
    store._append_batch(
        tuple(
            store._retraction(m, "wrong", REMOVAL, None, stored_at, f"Retracts {m}")
            for m in memory_ids
        )
    )


# -- put_vectors ------------------------------------------------------------------------------


def test_pairs_need_previous_and_turns_refuse_it(opener: Any) -> None:
    store = _filled(opener)
    vectors = {"a:2": _pair(store, "a:2", "a:1")}
    with pytest.raises(RemoteMemoryValidationError, match="previous turn"):
        store.put_vectors(PAIRS.name, PAIRS.dimension, vectors)
    with pytest.raises(RemoteMemoryValidationError, match="previous turn"):
        store.put_vectors(TURNS.name, TURNS.dimension, vectors, previous={"a:2": "a:1"})
    assert store.vector_state().stored == 0 and store.vector_state().model is None
    # Turn vectors without ``previous``: as before.
    assert store.put_vectors(TURNS.name, TURNS.dimension, vectors) == 1


def test_a_stale_previous_is_skipped(opener: Any) -> None:
    store = _filled(opener)
    vectors = {m: _pair(store, m, None) for m in ("a:1", "a:2", "a:3", "a:4", "b:2")}
    stored = store.put_vectors(
        PAIRS.name,
        PAIRS.dimension,
        vectors,
        previous={
            "a:1": None,  # right: the first turn of its source
            "a:2": "a:1",  # right
            "a:3": "b:1",  # another source's turn
            "b:2": None,  # it has a turn before
            # a:4: not named, skipped
        },
    )
    assert stored == 2
    assert _dense_ids(store) == ["a:1", "a:2"]
    assert store.vector_state().missing == 4
    assert _missing(store) == ["b:1", "a:3", "b:2", "a:4"]


def test_a_retraction_between_the_embedding_and_the_put_skips_the_successor(opener: Any) -> None:
    store = _filled(opener)
    ids = list(ORDER)
    neighbours = store.source_neighbours(ids)
    previous = {m: n.previous for m, n in neighbours.items()}
    vectors = {m: _pair(store, m, before) for m, before in previous.items()}
    opener().retract("a:2", reason="wrong", source=REMOVAL)  # lands in between
    assert store.put_vectors(PAIRS.name, PAIRS.dimension, vectors, previous=previous) == 4
    assert _dense_ids(store) == ["a:1", "a:4", "b:1", "b:2"]
    assert _missing(store) == ["a:3"]
    assert _put_pairs(store, ["a:3"]) == 1  # now with a:1 before it
    assert store.vector_state().missing == 0


# -- retractions ------------------------------------------------------------------------------


def test_retracting_a_middle_turn_deletes_its_successors_pair(opener: Any, sql_url: str) -> None:
    store = _filled(opener)
    assert _put_pairs(store, ORDER[:-1]) == 5
    # The backfill's hint now points past a:3 (the first missing is a:4).
    assert _missing(store) == ["a:4"]
    before = _dense_ids(store)  # the matrix, cached by this store object
    assert before == ["a:1", "a:2", "a:3", "b:1", "b:2"]
    gone = [_pair(store, "a:2", "a:1"), _pair(store, "a:3", "a:2")]
    kept = _pair(store, "a:1", None)
    assert all(vector in _raw_vectors(store, sql_url) for vector in (*gone, kept))

    other = opener()
    other.retract("a:2", reason="wrong", source=REMOVAL)
    assert _dense_ids(store) == ["a:1", "b:1", "b:2"]
    state = store.vector_state()
    assert (state.model, state.stored, state.missing) == (PAIRS.name, 3, 2)
    assert _missing(store) == ["a:3", "a:4"]  # a:3 found again, before the hint
    raw = _raw_vectors(store, sql_url)
    assert not any(vector in raw for vector in gone) and kept in raw
    if sql_url.startswith("sqlite:"):
        path = sql_url.removeprefix("sqlite:")
        conn = sqlite3.connect(path)
        tables = [bytes(v) for (v,) in conn.execute("SELECT vector FROM vectors")]
        conn.close()
        assert not any(vector in tables for vector in gone)

    # The old pair is refused, the new one (a:1 before a:3) stored.
    assert (
        store.put_vectors(PAIRS.name, PAIRS.dimension, {"a:3": gone[1]}, previous={"a:3": "a:2"})
        == 0
    )
    assert _put_pairs(store, ["a:3", "a:4"]) == 2
    assert _missing(store) == [] and store.vector_state().missing == 0
    assert _dense_ids(other) == ["a:1", "a:3", "a:4", "b:1", "b:2"]


def test_a_successors_pair_alone_leaves_no_trace(opener: Any, sql_url: str) -> None:
    # The retracted turn has no vector: only its successor's goes, and that alone must
    # refresh the cached matrices and wipe the bytes (the log's too).
    store = _filled(opener)
    assert _put_pairs(store, ["a:1", "a:3", "b:2"]) == 3
    assert _dense_ids(store) == ["a:1", "a:3", "b:2"]
    gone = _pair(store, "a:3", "a:2")
    assert gone in _raw_vectors(store, sql_url)
    opener().retract("a:2", reason="wrong", source=REMOVAL)
    assert _dense_ids(store) == ["a:1", "b:2"]
    assert gone not in _raw_vectors(store, sql_url)
    assert _missing(store) == ["b:1", "a:3", "a:4"]


def test_retracting_a_last_turn_deletes_only_its_own(opener: Any) -> None:
    store = _filled(opener)
    assert _put_pairs(store, ORDER) == 6
    store.retract("a:4", reason="wrong", source=REMOVAL)
    assert _dense_ids(store) == ["a:1", "a:2", "a:3", "b:1", "b:2"]
    assert _missing(store) == []
    # The first turn of a source: its successor's pair loses its turn before.
    store.retract("b:1", reason="wrong", source=REMOVAL)
    assert _dense_ids(store) == ["a:1", "a:2", "a:3"]
    assert _missing(store) == ["b:2"]
    assert store.source_neighbours(["b:2"])["b:2"].previous is None
    assert _put_pairs(store, ["b:2"]) == 1


def test_a_supersede_is_a_retraction(opener: Any) -> None:
    store = _filled(opener)
    assert _put_pairs(store, ORDER) == 6
    replacement = {**_item("a:2b"), "content": "turn a:2 corrected"}
    store.supersede("a:2", replacement, reason="corrected")
    assert _dense_ids(store) == ["a:1", "a:4", "b:1", "b:2"]
    assert _missing(store) == ["a:3", "a:2b"]
    assert store.source_neighbours(["a:3"])["a:3"].previous == "a:1"
    assert _put_pairs(store, ["a:3", "a:2b"]) == 2
    assert store.vector_state().missing == 0


def test_two_retractions_in_one_batch_delete_through_the_chain(opener: Any) -> None:
    store = _filled(opener)
    assert _put_pairs(store, ORDER) == 6
    _retract_together(store, ["a:2", "a:3"])
    # a:2 and a:3 retracted; a:4 embedded a:3's text.
    assert _dense_ids(store) == ["a:1", "b:1", "b:2"]
    assert _missing(store) == ["a:4"]
    assert store.source_neighbours(["a:4"])["a:4"].previous == "a:1"
    assert _put_pairs(store, ["a:4"]) == 1
    assert _dense_ids(store) == ["a:1", "a:4", "b:1", "b:2"]


def test_turn_vectors_keep_the_successors_vector(opener: Any) -> None:
    store = _filled(opener)
    vectors = {m: pack(TURNS.encode([str(_content(store, m))])[0]) for m in ORDER}
    assert store.put_vectors(TURNS.name, TURNS.dimension, vectors) == 6
    before = _dense_ids(store, TURNS)
    opener().retract("a:2", reason="wrong", source=REMOVAL)
    assert _dense_ids(store, TURNS) == [m for m in before if m != "a:2"]
    assert _missing(store) == []
    state = store.vector_state()
    assert (state.model, state.stored, state.missing) == (TURNS.name, 5, 0)

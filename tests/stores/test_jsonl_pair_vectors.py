"""The JSONL store's pair vectors: each kept only while its record's turn before stands.

A pair vector (``vectors.reads_pairs``) embeds a conversation record together with the
turn before it in its source. So ``put_vectors`` keeps one only when, under the lock,
the record's turn before is still the one it embedded, and a retraction takes out, in
the same locked rewrite, its target's row and its successor's (that vector embedded the
retracted text): the successor shows as missing until it is embedded again with its new
turn before. Every vector here is written by the test itself (no embedder on the store),
with ``PairEmbedder(HashingEmbedder(64))``; every expected score is computed here from
the records' texts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memlib import MemoryKind, MemorySource, RemoteMemoryStore
from memlib._vectors import DenseScores, pack, pair_text, query_vector
from memlib.errors import RemoteMemoryValidationError
from memlib.normalize import normalize_recall_query
from memlib.rankers.embeddings import HashingEmbedder, PairEmbedder
from memlib.records import StoredMemory
from memlib.sample import SAMPLE_AS_OF, fixed_clock
from memlib.stores.jsonl import _index as jsonl_index

USER = "alice"
TURNS = HashingEmbedder(64)
PAIRS = PairEmbedder(TURNS)
MANUAL = MemorySource(
    source_id="manual",
    source_type="manual_retraction",
    title="Retraction",
    captured_at="2026-08-10T00:00:00Z",
)
WORDS = (
    "amber",
    "river",
    "lantern",
    "quiet",
    "harbor",
    "copper",
    "garden",
    "notes",
    "meeting",
    "budget",
    "travel",
    "window",
    "orbit",
    "cedar",
    "tea",
    "kettle",
)
# Two sources, interleaved: a turn's neighbours are never simply the lines beside it.
ORDER = ("a0", "b0", "a1", "a2", "b1", "a3", "b2")


def source(name: str) -> MemorySource:
    return MemorySource(
        source_id=name,
        source_type="conversation_transcript",
        title=f"Session {name}",
        captured_at="2026-08-01T12:00:00Z",
    )


def item(memory_id: str, src: str | None = None) -> dict[str, Any]:
    n = sum(map(ord, memory_id))
    words = " ".join(WORDS[(n * k) % len(WORDS)] for k in (1, 3, 5, 7))
    return {
        "kind": MemoryKind.CONVERSATION,
        "memory_id": memory_id,
        "content": f"turn {memory_id} {words}",
        "summary": f"turn {memory_id}",
        "source": source(src or memory_id[0]),
    }


def open_store(log: Path) -> RemoteMemoryStore:
    return RemoteMemoryStore(log, user_id=USER, clock=fixed_clock())


@pytest.fixture
def log(folder: Path) -> Path:
    path = folder / "records.jsonl"
    open_store(path).append_many([item(m) for m in ORDER])
    return path


def content(store: RemoteMemoryStore, memory_id: str) -> str:
    (record,) = store.records_by_id([memory_id])
    return record.content


def pair_of(store: RemoteMemoryStore, memory_id: str, previous: str | None) -> bytes:
    """The pair vector of ``memory_id`` embedded with ``previous`` as its turn before."""
    before = None if previous is None else content(store, previous)
    return pack(PAIRS.encode([pair_text(before, content(store, memory_id))])[0])


def put_pairs(
    store: RemoteMemoryStore,
    memory_ids: Iterable[str],
    previous: dict[str, str | None] | None = None,
) -> int:
    """Pair vectors of ``memory_ids`` made with ``previous`` (default: the store's
    turns before now), stored with that ``previous``."""
    ids = list(memory_ids)
    if previous is None:
        now = store.source_neighbours(ids)
        previous = {m: now[m].previous for m in ids}
    vectors = {m: pair_of(store, m, previous[m]) for m in ids}
    return store.put_vectors(PAIRS.name, PAIRS.dimension, vectors, previous=previous)


def dense(store: RemoteMemoryStore, model: Any = PAIRS) -> DenseScores:
    query = normalize_recall_query(
        "amber river", user_scope=store.user_scope, limit=5, query_id="q", issued_at=SAMPLE_AS_OF
    )
    return store.dense_scores(
        query, query_vector(model, "amber river"), model=model.name, dimension=model.dimension
    )


def stored(store: RemoteMemoryStore) -> set[str]:
    return set(dense(store).ids)


def without(store: RemoteMemoryStore) -> list[str]:
    return [r.memory_id for r in store.records_without_vectors(100)]


def check_scores(store: RemoteMemoryStore, pairs: dict[str, str | None]) -> None:
    """Each stored vector scores as the pair ``memory_id → turn before`` says."""
    scores = dense(store)
    query = query_vector(PAIRS, "amber river")
    assert set(scores.ids) == set(pairs)
    for memory_id, previous in pairs.items():
        vector = np.frombuffer(pair_of(store, memory_id, previous), dtype="<f4")
        assert scores.of([memory_id])[memory_id] == pytest.approx(float(vector @ query), abs=1e-6)


def retraction(store: RemoteMemoryStore, target: str) -> StoredMemory:
    return StoredMemory(
        memory_id=f"retract-{target}",
        user_scope=store.user_scope,
        kind=MemoryKind.RETRACTION,
        content="wrong",
        summary=f"Retracts {target}",
        source=MANUAL,
        stored_at="2026-08-10T00:00:00Z",
        retracts=target,
    )


def no_trace(log: Path, vectors: Sequence[bytes]) -> None:
    data = log.with_name(log.name + ".vectors").read_bytes()
    for vector in vectors:
        assert vector not in data


ALL_PREVIOUS: dict[str, str | None] = {
    "a0": None,
    "a1": "a0",
    "a2": "a1",
    "a3": "a2",
    "b0": None,
    "b1": "b0",
    "b2": "b1",
}


@pytest.fixture
def paired(log: Path) -> RemoteMemoryStore:
    """The store with every turn's pair vector."""
    store = open_store(log)
    assert put_pairs(store, ORDER) == len(ORDER)
    check_scores(store, ALL_PREVIOUS)
    return store


# -- put_vectors ------------------------------------------------------------------------


def test_pairs_need_previous_and_turns_refuse_it(log: Path) -> None:
    store = open_store(log)
    vector = pair_of(store, "a1", "a0")
    with pytest.raises(RemoteMemoryValidationError, match="previous turn"):
        store.put_vectors(PAIRS.name, PAIRS.dimension, {"a1": vector})
    with pytest.raises(RemoteMemoryValidationError, match="pair vectors only"):
        store.put_vectors(TURNS.name, TURNS.dimension, {"a1": vector}, previous={"a1": "a0"})
    assert store.vector_state().model is None  # nothing written
    assert store.put_vectors(TURNS.name, TURNS.dimension, {"a1": vector}) == 1


def test_a_stale_previous_is_skipped(log: Path) -> None:
    store = open_store(log)
    previous: dict[str, str | None] = {
        "a1": "a0",  # right
        "a2": "a0",  # wrong: a1 is its turn before
        "b0": None,  # right: first of its source
        "b1": None,  # wrong: b0 is
        "a3": "a2",  # right, but its vector is not given
        "x9": None,  # no such record
    }
    vectors = {m: pair_of(store, m, p) for m, p in previous.items() if m not in ("a3", "x9")}
    vectors["a0"] = pair_of(store, "a0", None)  # right, but missing from previous
    assert store.put_vectors(PAIRS.name, PAIRS.dimension, vectors, previous=previous) == 2
    check_scores(store, {"a1": "a0", "b0": None})
    assert without(store) == ["a0", "a2", "b1", "a3", "b2"]


def test_a_retraction_between_embedding_and_put_skips_the_pair(log: Path) -> None:
    store = open_store(log)
    made = {m: pair_of(store, m, p) for m, p in ALL_PREVIOUS.items()}
    # Another writer (another process) retracts a1 after the embedding, before the put.
    open_store(log).retract("a1", reason="wrong", source=MANUAL)
    count = store.put_vectors(PAIRS.name, PAIRS.dimension, made, previous=ALL_PREVIOUS)
    assert count == len(ORDER) - 2  # a1 retracted, a2's pair embedded it
    check_scores(store, {m: p for m, p in ALL_PREVIOUS.items() if m not in ("a1", "a2")})
    assert without(store) == ["a2"]
    assert put_pairs(store, ["a2"]) == 1
    check_scores(store, {**{m: p for m, p in ALL_PREVIOUS.items() if m != "a1"}, "a2": "a0"})


# -- retraction ---------------------------------------------------------------------------


def test_retracting_a_middle_turn_takes_its_successors_pair(
    log: Path, paired: RemoteMemoryStore
) -> None:
    store = paired
    gone = [pair_of(store, "a1", "a0"), pair_of(store, "a2", "a1")]
    store.retract("a1", reason="wrong", source=MANUAL)
    kept = {m: p for m, p in ALL_PREVIOUS.items() if m not in ("a1", "a2")}
    check_scores(store, kept)
    no_trace(log, gone)
    state = store.vector_state()
    assert (state.model, state.stored, state.missing) == (PAIRS.name, 5, 1)
    assert dense(store).missing == 1
    assert without(store) == ["a2"]
    assert store.vectors_file_state().status == "fresh"  # rewritten, not left stale
    # Embedded again with its new turn before; the old one is refused.
    assert put_pairs(store, ["a2"], {"a2": "a1"}) == 0
    assert put_pairs(store, ["a2"]) == 1
    check_scores(store, {**kept, "a2": "a0"})
    assert without(store) == []
    # A fresh reader of the files sees the same.
    check_scores(open_store(log), {**kept, "a2": "a0"})


def test_retracting_the_first_turn_takes_the_second(paired: RemoteMemoryStore) -> None:
    paired.retract("b0", reason="wrong", source=MANUAL)
    check_scores(paired, {m: p for m, p in ALL_PREVIOUS.items() if m not in ("b0", "b1")})
    assert without(paired) == ["b1"]
    assert put_pairs(paired, ["b1"], {"b1": None}) == 1


def test_retracting_the_last_turn_takes_only_its_own(log: Path, paired: RemoteMemoryStore) -> None:
    paired.retract("a3", reason="wrong", source=MANUAL)
    check_scores(paired, {m: p for m, p in ALL_PREVIOUS.items() if m != "a3"})
    no_trace(log, [pair_of(paired, "a3", "a2")])
    assert without(paired) == []


def test_a_supersede_is_a_retraction(log: Path, paired: RemoteMemoryStore) -> None:
    new, _ = paired.supersede("a1", item("a1-new", "a"), reason="corrected")
    check_scores(paired, {m: p for m, p in ALL_PREVIOUS.items() if m not in ("a1", "a2")})
    no_trace(log, [pair_of(paired, "a2", "a1")])
    assert without(paired) == ["a2", "a1-new"]
    # The new record is last in its source: after a3.
    assert paired.source_neighbours(["a2", "a1-new"])["a1-new"].previous == "a3"
    assert put_pairs(paired, ["a2", "a1-new"]) == 2
    check_scores(
        paired, {**{m: p for m, p in ALL_PREVIOUS.items() if m != "a1"}, "a2": "a0", "a1-new": "a3"}
    )


def test_two_retractions_in_one_batch_go_through_the_chain(
    log: Path, paired: RemoteMemoryStore
) -> None:
    # a1 and its successor a2 at once: a3's pair embedded a2, so it goes too.
    paired._append_batch((retraction(paired, "a1"), retraction(paired, "a2")))
    check_scores(paired, {m: p for m, p in ALL_PREVIOUS.items() if m not in ("a1", "a2", "a3")})
    no_trace(log, [pair_of(paired, "a3", "a2")])
    assert without(paired) == ["a3"]
    assert paired.source_neighbours(["a3"])["a3"].previous == "a0"
    assert put_pairs(paired, ["a3"]) == 1


def test_retractions_in_two_sources_in_one_batch(paired: RemoteMemoryStore) -> None:
    paired._append_batch((retraction(paired, "a0"), retraction(paired, "b1")))
    check_scores(
        paired, {m: p for m, p in ALL_PREVIOUS.items() if m not in ("a0", "a1", "b1", "b2")}
    )
    assert without(paired) == ["a1", "b2"]


def test_turn_vectors_lose_only_the_retracted_records(log: Path) -> None:
    store = open_store(log)
    vectors = {m: pack(TURNS.encode([content(store, m)])[0]) for m in ORDER}
    assert store.put_vectors(TURNS.name, TURNS.dimension, vectors) == len(ORDER)
    store.retract("a1", reason="wrong", source=MANUAL)
    store._append_batch((retraction(store, "b0"), retraction(store, "b1")))
    left = [m for m in ORDER if m not in ("a1", "b0", "b1")]
    assert sorted(dense(store, TURNS).ids) == sorted(left)
    assert without(store) == []
    no_trace(log, [vectors["a1"], vectors["b0"], vectors["b1"]])
    for m in left:  # untouched, a2 included
        assert vectors[m] in log.with_name(log.name + ".vectors").read_bytes()


# -- another process's view -----------------------------------------------------------------


def test_another_store_object_sees_the_successor_missing(
    log: Path, paired: RemoteMemoryStore
) -> None:
    other = open_store(log)
    check_scores(other, ALL_PREVIOUS)  # read before the retraction: table and index cached
    paired.retract("a1", reason="wrong", source=MANUAL)
    kept = {m: p for m, p in ALL_PREVIOUS.items() if m not in ("a1", "a2")}
    check_scores(other, kept)
    assert without(other) == ["a2"]
    assert other.vector_state().missing == 1
    # The other way round: a retraction by the other object, read from the log's tail.
    other.retract("b1", reason="wrong", source=MANUAL)
    kept = {m: p for m, p in kept.items() if m not in ("b1", "b2")}
    check_scores(paired, kept)
    assert without(paired) == ["a2", "b2"]
    # A pair made by the stale view (b2 after b1) is refused by the other's put.
    assert (
        paired.put_vectors(
            PAIRS.name, PAIRS.dimension, {"b2": pair_of(paired, "b2", "b1")}, previous={"b2": "b1"}
        )
        == 0
    )
    assert put_pairs(other, ["a2", "b2"]) == 2
    check_scores(paired, {**kept, "a2": "a0", "b2": "b0"})


def test_a_retraction_over_damaged_source_links_still_takes_the_successor(
    log: Path, paired: RemoteMemoryStore
) -> None:
    assert paired.write_index_file()
    index = log.with_name(log.name + ".index")
    file = jsonl_index._open_file(str(index))
    assert file is not None
    at, nbytes, _ = jsonl_index._places(jsonl_index._parse_header(file), file)["source_after"]
    assert nbytes
    data = bytearray(index.read_bytes())
    data[at : at + nbytes] = b"\xff" * nbytes  # every doc: "no turn after"
    writer, putter = open_store(log), open_store(log)
    for store in (writer, putter):  # the index file loaded, its source sections unread
        assert store.existing_ids(["a1"]) == {"a1"}
    index.write_bytes(bytes(data))
    writer.retract("a1", reason="wrong", source=MANUAL)
    kept = {m: p for m, p in ALL_PREVIOUS.items() if m not in ("a1", "a2")}
    check_scores(open_store(log), kept)
    # put_vectors checks each pair against links it has to read too.
    for previous, count in (("a1", 0), ("a0", 1)):
        vector = pair_of(putter, "a2", previous)
        assert (
            putter.put_vectors(
                PAIRS.name, PAIRS.dimension, {"a2": vector}, previous={"a2": previous}
            )
            == count
        )
    check_scores(open_store(log), {**kept, "a2": "a0"})

"""The JSONL store answers ``source_neighbours`` from its index (``retrieval/neighbours.py``).

``test_source_neighbours.py`` holds every backend to the reference; here the JSONL store
is held to it along the paths only it has: a new store object that loaded the index
file (its source sections read only when first asked), one that caught up on a tail
(retractions of covered and of tail records among it), one that read the log alone, an
index file of the format before sources (5), a source section damaged after load, and
one long source. None of them may parse a record to answer.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from memlib import MemoryKind, MemorySource, RemoteMemoryStore
from memlib.stores import _base as base
from memlib.stores._known_at import KnownAtStore, store_known_at
from memlib.stores._sources import SourceNeighbours, source_neighbours_of
from memlib.stores.jsonl import _index as jsonl_index
from memlib.stores.jsonl._doctor import check_store

USER = "alice"
MANUAL = MemorySource(
    source_id="manual",
    source_type="manual_retraction",
    title="Retraction",
    captured_at="2026-08-10T00:00:00Z",
)


def turn(memory_id: str, source: str, kind: MemoryKind = MemoryKind.CONVERSATION) -> dict[str, Any]:
    return {
        "kind": kind,
        "memory_id": memory_id,
        "content": f"turn {memory_id} of {source}",
        "summary": f"turn {memory_id}",
        "source": MemorySource(
            source_id=source,
            source_type="conversation_transcript",
            title=f"Session {source}",
            captured_at="2026-08-01T12:00:00Z",
        ),
    }


def index_of(log: Path) -> Path:
    return log.with_name(log.name + ".index")


def fill(
    store: RemoteMemoryStore, rng: random.Random, start: int, count: int, sources: Sequence[str]
) -> list[str]:
    """``count`` turns over ``sources`` (and a profile now and then), in small batches."""
    made: list[str] = []
    batch: list[dict[str, Any]] = []
    for i in range(start, start + count):
        batch.append(turn(f"t{i:05d}", rng.choice(sources)))
        made.append(f"t{i:05d}")
        if i % 17 == 0:
            batch.append(turn(f"p{i:05d}", "profile", MemoryKind.PROFILE))
        if len(batch) >= rng.randint(1, 6):
            store.append_many(batch)
            batch = []
    if batch:
        store.append_many(batch)
    return made


def reference(log: Path, ids: Sequence[str]) -> dict[str, SourceNeighbours]:
    """The reference over every record, read by a store object of its own."""
    store = RemoteMemoryStore(log, user_id=USER)
    return source_neighbours_of(store.read_all(), ids)


def no_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Answering by reading or parsing records (the slow, O(records) path) fails."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("source_neighbours parsed records")

    monkeypatch.setattr(RemoteMemoryStore, "read_all", refuse)
    monkeypatch.setattr(RemoteMemoryStore, "_load_docs", refuse)
    monkeypatch.setattr(base, "source_neighbours_of", refuse)


@pytest.fixture
def log(folder: Path) -> Path:
    """A log of 600 turns over five sources, some retracted, its index file written."""
    path = folder / "records.jsonl"
    store = RemoteMemoryStore(path, user_id=USER)
    rng = random.Random(7)
    made = fill(store, rng, 0, 600, ["a", "b", "c", "d", "e"])
    for target in rng.sample(made, 60) + ["t00000", "t00599"]:
        if store.source_neighbours([target]):
            store.retract(target, reason="wrong", source=MANUAL)
    assert store.write_index_file()
    return path


def all_ids(log: Path) -> list[str]:
    ids = [r.memory_id for r in RemoteMemoryStore(log, user_id=USER).read_all()]
    return ids + ["unknown", "retract-nothing"]


def sources_unread(store: RemoteMemoryStore) -> bool:
    """Whether the store's index still holds its index file's source sections unread."""
    return store.index._sources._links is None


def test_a_new_reader_answers_from_the_index_file(
    log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = all_ids(log)
    expected = reference(log, ids)
    assert len(expected) > 400
    reader = RemoteMemoryStore(log, user_id=USER)
    assert reader.index.searched == len(expected)  # loaded from the file…
    assert sources_unread(reader)  # …and its sources not read at load
    no_parsing(monkeypatch)
    assert reader.source_neighbours(ids) == expected
    assert not sources_unread(reader)
    assert reader.source_neighbours(ids[:3]) == {m: expected[m] for m in ids[:3] if m in expected}


def test_a_recall_leaves_the_sources_unread(log: Path) -> None:
    from memlib import RecallEngine

    reader = RemoteMemoryStore(log, user_id=USER)
    assert RecallEngine(reader).recall("turn of a", limit=3).hits
    assert sources_unread(reader)


def test_a_reader_that_caught_up_on_a_tail_answers_from_its_index(
    log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reader = RemoteMemoryStore(log, user_id=USER)
    assert reader.source_neighbours(["t00001"])  # loaded, its sources read
    writer = RemoteMemoryStore(log, user_id=USER)
    rng = random.Random(11)
    tail = fill(writer, rng, 600, 120, ["a", "c", "new-1", "new-2"])
    covered = [m for m in all_ids(log) if m.startswith("t") and int(m[1:]) < 600]
    for target in rng.sample(tail[:-1], 15) + rng.sample(covered, 15):
        if writer.source_neighbours([target]):
            writer.retract(target, reason="wrong", source=MANUAL)
    writer.supersede(tail[-1], turn("t09999", "new-1"), reason="corrected")
    ids = all_ids(log)
    expected = reference(log, ids)
    assert index_of(log).exists()
    fresh = RemoteMemoryStore(log, user_id=USER)  # the index file, then the tail
    assert sources_unread(fresh)
    no_parsing(monkeypatch)
    assert fresh.source_neighbours(ids) == expected
    assert reader.source_neighbours(ids) == expected  # links read before the tail came
    # Written again, the file holds the tail's links (and new sources' names) too.
    monkeypatch.undo()
    assert fresh.write_index_file()
    no_parsing(monkeypatch)
    again = RemoteMemoryStore(log, user_id=USER)
    assert again.index.searched == len(expected) and sources_unread(again)
    assert again.source_neighbours(ids) == expected


def test_a_reader_of_the_log_alone_answers_from_its_index(
    log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index_of(log).unlink()
    ids = all_ids(log)
    expected = reference(log, ids)
    index_of(log).unlink(missing_ok=True)
    no_parsing(monkeypatch)
    reader = RemoteMemoryStore(log, user_id=USER)
    assert reader.source_neighbours(ids) == expected
    assert not index_of(log).exists()  # the whole log was its tail


def test_an_index_file_of_the_format_before_sources_is_rebuilt(
    log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = all_ids(log)
    expected = reference(log, ids)
    # A real format-4 file: the sections of then, without the sources.
    with monkeypatch.context() as then:
        then.setattr(jsonl_index, "FORMAT", 4)
        then.setattr(
            jsonl_index,
            "SECTIONS",
            tuple(
                (name, code)
                for name, code in jsonl_index.SECTIONS
                if not name.startswith("source_")
            ),
        )
        index_of(log).unlink()
        assert RemoteMemoryStore(log, user_id=USER).write_index_file()
    state = check_store(log, user_id=USER).index
    assert state is not None and state.status == "invalid", state
    assert "format 4" in state.reason
    reader = RemoteMemoryStore(log, user_id=USER)
    assert reader.source_neighbours(ids) == expected
    assert reader.write_index_file()
    state = check_store(log, user_id=USER).index
    assert state is not None and state.status == "fresh", state
    no_parsing(monkeypatch)
    assert RemoteMemoryStore(log, user_id=USER).source_neighbours(ids) == expected


@pytest.mark.parametrize("section", ["source_before", "source_names", "source_last"])
def test_a_source_section_damaged_after_load_is_never_used(log: Path, section: str) -> None:
    ids = all_ids(log)
    expected = reference(log, ids)
    index = index_of(log)
    data = bytearray(index.read_bytes())
    file = jsonl_index._open_file(str(index))
    assert file is not None
    places = jsonl_index._places(jsonl_index._parse_header(file), file)
    at, nbytes, _ = places[section]
    assert nbytes
    data[at] ^= 0x01
    reader = RemoteMemoryStore(log, user_id=USER)
    assert sources_unread(reader)
    index.write_bytes(bytes(data))
    state = check_store(log, user_id=USER).index
    assert state is not None and state.status == "invalid" and "damaged" in state.reason
    assert reader.source_neighbours(ids) == expected  # rebuilt from the log
    assert RemoteMemoryStore(log, user_id=USER).source_neighbours(ids) == expected


def test_a_long_source_with_retracted_runs(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = folder / "records.jsonl"
    store = RemoteMemoryStore(log, user_id=USER)
    turns = [f"t{i:05d}" for i in range(5_000)]
    items = [turn(m, "long" if i % 50 else "short") for i, m in enumerate(turns)]
    for start in range(0, len(items), 500):
        store.append_many(items[start : start + 500])
    long = [m for i, m in enumerate(turns) if i % 50]
    rng = random.Random(3)
    gone = set(long[:3]) | set(long[-2:]) | set(long[1000:1400]) | set(rng.sample(long, 300))
    # Some retracted before the index file is written, the rest in its tail.
    for n, target in enumerate(sorted(gone)):
        store.retract(target, reason="wrong", source=MANUAL)
        if n == 250:
            assert store.write_index_file()
    ids = all_ids(log)
    expected = reference(log, ids)
    survivors = [m for m in long if m not in gone]
    assert expected[survivors[0]] == SourceNeighbours(None, survivors[1])
    assert expected[survivors[-1]] == SourceNeighbours(survivors[-2], None)
    assert expected[long[999]] == SourceNeighbours(
        survivors[survivors.index(long[999]) - 1], survivors[survivors.index(long[999]) + 1]
    )
    assert len(expected) == 5_000 - len(gone)
    assert store.source_neighbours(ids) == expected  # the writer's own index
    view = store_known_at(store, store.read_all()[-1].stored_at)
    assert isinstance(view, KnownAtStore)  # the JSONL prefix view is one
    assert view.source_neighbours(ids) == expected
    no_parsing(monkeypatch)
    fresh = RemoteMemoryStore(log, user_id=USER)  # index file, then a tail of retractions
    assert fresh.source_neighbours(ids) == expected
    chosen = rng.sample(ids, 1_000)
    assert fresh.source_neighbours(chosen) == {m: expected[m] for m in chosen if m in expected}

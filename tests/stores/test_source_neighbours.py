"""Each conversation record's neighbours in its source, on every backend (``stores/sources.py``).

The reference is held to hand-written expectations first; then every backend (JSONL,
SQLite, PostgreSQL), a reopened store object and the ``known_at`` view are held to the
reference after each step of seeded random histories: batches that interleave sources,
retractions of first, middle and last turns, supersedes, profiles.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from support.locations import BACKENDS, Location, location
from support.pgserver import pg_dsn, pg_url  # noqa: F401  (fixtures)

from memlib import MemoryKind, MemorySource
from memlib.records import StoredMemory, format_timestamp, user_scope_for
from memlib.stores._base import MemoryStore, SourceOrdering, neighbours_in_source
from memlib.stores._known_at import store_known_at
from memlib.stores._sources import SourceNeighbours, source_neighbours_of

START = datetime(2026, 9, 1, tzinfo=UTC)


class Ticker:
    """A store clock that moves one second per write, so ``known_at`` can cut anywhere."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


Opener = Callable[..., MemoryStore]


@pytest.fixture(params=BACKENDS)
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Location]:
    yield from location(request, tmp_path)


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


MANUAL = MemorySource(
    source_id="manual",
    source_type="manual_retraction",
    title="Retraction",
    captured_at="2026-08-10T00:00:00Z",
)


def N(previous: str | None, next_: str | None) -> SourceNeighbours:  # noqa: N802
    return SourceNeighbours(previous, next_)


def test_the_reference_by_hand() -> None:
    store_records: list[StoredMemory] = []

    def add(item: dict[str, Any]) -> None:
        source = item["source"]
        store_records.append(
            StoredMemory(
                memory_id=item["memory_id"],
                user_scope=user_scope_for("alice"),
                kind=item["kind"],
                content=item["content"],
                summary=item["summary"],
                source=source,
                stored_at="2026-09-01T00:00:00Z",
            )
        )

    # s1: a1 a2 a3 a4, s2: b1 b2, interleaved as they were appended
    for memory_id, source in (
        ("a1", "s1"),
        ("b1", "s2"),
        ("a2", "s1"),
        ("a3", "s1"),
        ("b2", "s2"),
        ("a4", "s1"),
    ):
        add(turn(memory_id, source))
    add(turn("p1", "s1", MemoryKind.PROFILE))
    ids = ["a1", "a2", "a3", "a4", "b1", "b2", "p1", "nope"]
    assert source_neighbours_of(store_records, ids) == {
        "a1": N(None, "a2"),
        "a2": N("a1", "a3"),
        "a3": N("a2", "a4"),
        "a4": N("a3", None),
        "b1": N(None, "b2"),
        "b2": N("b1", None),
    }
    # retracting a2 and a4 joins a1 to a3 and makes a3 the last turn
    for target in ("a2", "a4"):
        store_records.append(
            StoredMemory(
                memory_id=f"retract-{target}",
                user_scope=user_scope_for("alice"),
                kind=MemoryKind.RETRACTION,
                content="gone",
                summary="gone",
                source=MANUAL,
                stored_at="2026-09-01T00:00:00Z",
                retracts=target,
            )
        )
    assert source_neighbours_of(store_records, ids + ["retract-a2"]) == {
        "a1": N(None, "a3"),
        "a3": N("a1", None),
        "b1": N(None, "b2"),
        "b2": N("b1", None),
    }


def test_every_backend_keeps_append_order_not_id_order(opener: Opener) -> None:
    store = opener()
    assert isinstance(store, SourceOrdering)
    store.append_many([turn("z9", "s1"), turn("a1", "s1"), turn("m5", "s2")])
    store.append(**turn("b0", "s1"))
    assert store.source_neighbours(["a1", "b0", "z9", "m5"]) == {
        "z9": N(None, "a1"),
        "a1": N("z9", "b0"),
        "b0": N("a1", None),
        "m5": N(None, None),
    }
    store.retract("a1", reason="wrong", source=MANUAL)
    assert store.source_neighbours(["z9", "a1", "b0"]) == {"z9": N(None, "b0"), "b0": N("z9", None)}
    reopened = opener()
    assert isinstance(reopened, SourceOrdering)
    assert reopened.source_neighbours(["b0"]) == {"b0": N("z9", None)}


def test_other_users_turns_are_not_neighbours(opener: Opener) -> None:
    alice, bob = opener("alice"), opener("bob")
    assert isinstance(alice, SourceOrdering)
    assert isinstance(bob, SourceOrdering)
    alice.append(**turn("a1", "shared"))
    bob.append(**turn("b1", "shared"))
    alice.append(**turn("a2", "shared"))
    assert alice.source_neighbours(["a1", "a2", "b1"]) == {"a1": N(None, "a2"), "a2": N("a1", None)}
    assert bob.source_neighbours(["b1", "a1"]) == {"b1": N(None, None)}


def random_history(store: MemoryStore, rng: random.Random, steps: int) -> Iterator[None]:
    """Writes to ``store``, yielding after each one."""
    sources = ["s1", "s2", "s3"]
    live: list[str] = []
    made = 0
    for _ in range(steps):
        roll = rng.random()
        if roll < 0.55 or len(live) < 3:
            batch = []
            for _ in range(rng.randint(1, 4)):
                made += 1
                batch.append(turn(f"t{made}", rng.choice(sources)))
            if rng.random() < 0.1:
                made += 1
                batch.append(turn(f"p{made}", "profile", MemoryKind.PROFILE))
            store.append_many(batch)
            live += [item["memory_id"] for item in batch if item["kind"] is MemoryKind.CONVERSATION]
        elif roll < 0.85:
            target = live.pop(rng.randrange(len(live)))
            store.retract(target, reason="not so", source=MANUAL)
        else:
            target = live.pop(rng.randrange(len(live)))
            made += 1
            new = turn(f"t{made}", rng.choice(sources))
            store.supersede(target, new, reason="corrected")
            live.append(new["memory_id"])
        yield


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_backend_answers_as_the_reference(opener: Opener, seed: int) -> None:
    store = opener(clock=Ticker())
    assert isinstance(store, SourceOrdering)
    rng = random.Random(seed)
    for _ in random_history(store, rng, 40):
        records = store.read_all()
        ids = [r.memory_id for r in records] + ["unknown"]
        rng.shuffle(ids)
        expected = source_neighbours_of(records, ids)
        assert store.source_neighbours(ids) == expected
    reopened = opener()  # a new store object, from disk
    assert isinstance(reopened, SourceOrdering)
    assert reopened.source_neighbours(ids) == expected
    assert neighbours_in_source(store, ids) == expected


@pytest.mark.parametrize("seed", [4])
def test_known_at_sees_the_neighbours_of_its_instant(opener: Opener, seed: int) -> None:
    store = opener(clock=Ticker())
    for _ in random_history(store, random.Random(seed), 30):
        pass
    records = store.read_all()
    ids = [r.memory_id for r in records]
    instants = sorted({r.stored_at for r in records})
    for instant in instants[:: max(1, len(instants) // 6)]:
        then = [r for r in records if r.stored_at <= instant]
        view = store_known_at(store, instant)
        assert isinstance(view, SourceOrdering)
        assert view.source_neighbours(ids) == source_neighbours_of(then, ids), instant
    assert format_timestamp(START) < instants[0]

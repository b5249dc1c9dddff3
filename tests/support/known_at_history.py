"""A store's history for the ``known_at`` view tests (JSONL's and SQL's): turns of three
sources, profiles, retractions and supersedes of earlier turns (middle turns too: their
neighbours and pair texts change), at instants with ties and fractions; and every read of
a view, to compare a store's own view with the generic ``KnownAtVectorStore``."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memlib import MemoryKind, MemorySource, RecallEngine
from memlib._vectors import Embedder
from memlib.errors import RemoteMemoryValidationError
from memlib.rankers.embeddings import HashingEmbedder, PairEmbedder
from memlib.stores._known_at import KnownAtVectorStore, store_known_at

USER = "alice"
T0 = datetime(2026, 8, 10, 8, tzinfo=UTC)
AS_OF = datetime(2026, 8, 20, 12, tzinfo=UTC)
RANKERS = ("baseline", "bm25", "bm25+stopwords", "hybrid")
QUERIES = ("layered memory design", "the sqlite wal and the agent", "café recall")
WORDS = ("memory", "layered", "sqlite", "wal", "recall", "agent", "design", "the", "café")
NOTE = MemorySource(
    source_id="r", source_type="note", title="Withdrawn", captured_at="2026-08-10T08:00:00Z"
)
EMBEDDERS: dict[str, Embedder] = {
    "turns": HashingEmbedder(64),
    "pairs": PairEmbedder(HashingEmbedder(64)),
}


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def item(memory_id: str, rng: random.Random, source: str, kind: str = "conversation") -> Any:
    text = " ".join(rng.choices(WORDS, k=rng.randint(1, 5)))
    captured = T0 - timedelta(days=rng.randint(0, 30), seconds=rng.randint(0, 3))
    return {
        "kind": kind,
        "memory_id": memory_id,
        "content": f"{text} (notes)",
        "summary": text,
        "source": MemorySource(
            source_id=source,
            source_type="conversation_transcript",
            title=f"Transcript {source}",
            captured_at=captured.isoformat(),
        ),
    }


def history(
    store: Any,
    clock: Clock,
    steps: Sequence[float],
    after_step: Callable[[int], object] | None = None,
) -> None:
    """Each step moves the clock by its seconds (negative: back) and writes; ``after_step``
    is called with each step's number."""
    rng = random.Random(36)
    live: list[str] = []
    serial = 0
    for step, seconds in enumerate(steps):
        clock.now += timedelta(seconds=seconds)
        items = []
        for _ in range(rng.randint(1, 4)):
            serial += 1
            profile = rng.random() < 0.15
            source = "me" if profile else f"s-{rng.randint(0, 2)}"
            items.append(item(f"r-{serial}", rng, source, "profile" if profile else "conversation"))
        store.append_many(items)
        live += [i["memory_id"] for i in items]
        if step >= 2:
            clock.now += timedelta(seconds=rng.choice((0, 1)))
            target = live.pop(rng.randrange(len(live)))
            if rng.random() < 0.5:
                store.retract(target, reason="withdrawn", source=NOTE)
            else:
                serial += 1
                kind = store.records_by_id([target])[0].kind.value
                new = item(f"r-{serial}", rng, f"s-{rng.randint(0, 2)}", kind)
                store.supersede(target, new, reason="corrected")
                live.append(new["memory_id"])
        if after_step is not None:
            after_step(step)


def instants(store: Any) -> list[datetime]:
    """Before everything, at every write, a hair before and after each, and after all."""
    times = sorted({datetime.fromisoformat(r.stored_at) for r in store.read_all()})
    tiny = timedelta(microseconds=1)
    found = {times[0] - timedelta(days=1), times[-1] + timedelta(days=1)}
    for t in times:
        found |= {t - tiny, t, t + tiny}
    return sorted(found)


def answers(view: Any, ids: list[str]) -> dict[Any, Any]:
    """Every read of ``view``: the recalls of each ranker and each record read."""
    out: dict[Any, Any] = {
        (ranker, text): RecallEngine(view, ranker=ranker)
        .recall(text, limit=4, as_of=AS_OF, query_id="q")
        .to_json()
        for ranker in RANKERS
        for text in QUERIES
    }
    out["read_all"] = view.read_all()
    for kind in (None, *MemoryKind):
        out["records", kind] = view.records(kind)
    out["profile"] = view.latest_profile()
    out["retractions"] = [view.retraction_of(m) for m in ids]
    out["existing"] = view.existing_ids(ids)
    out["by_id"] = view.records_by_id(ids[::-1])
    out["neighbours"] = view.source_neighbours(ids)
    out["vector_state"] = view.vector_state()
    return out


def refused_alike(store: Any, instant: datetime) -> None:
    """Every write to the store's own view at ``instant`` is refused with the generic
    class's words."""
    new = item("new", random.Random(0), "s-0")
    writes: dict[str, Callable[[Any], Any]] = {
        "append": lambda s: s.append(**new),
        "append_many": lambda s: s.append_many([new]),
        "retract": lambda s: s.retract("r-1", reason="x", source=NOTE),
        "supersede": lambda s: s.supersede("r-1", new, reason="x"),
        "put_vectors": lambda s: s.put_vectors("m", 2, {}),
        "drop_vectors": lambda s: s.drop_vectors(),
        "records_without_vectors": lambda s: s.records_without_vectors(5),
    }
    for name, write in writes.items():
        words = []
        for view in (store_known_at(store, instant), KnownAtVectorStore(store, instant)):
            with pytest.raises(RemoteMemoryValidationError) as refused:
                write(view)
            words.append(str(refused.value))
        assert words[0] == words[1] and "read-only" in words[0], name


def same_as_generic(store: Any, reopen: Callable[[], Any], view_class: type) -> None:
    """At every instant, the store's own view (a ``view_class``) and one of the store opened
    anew answer every read as the generic ``KnownAtVectorStore`` does."""
    ids = [r.memory_id for r in store.read_all()] + ["unknown"]
    moments = instants(store)
    assert len(moments) > 3
    for instant in moments:
        view = store_known_at(store, instant)
        assert isinstance(view, view_class)
        expected = answers(KnownAtVectorStore(store, instant), ids)
        assert answers(view, ids) == expected, instant
        # A new store each time too: the view must not lean on what the store read before.
        assert answers(store_known_at(reopen(), instant), ids) == expected, instant

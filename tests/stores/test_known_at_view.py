"""Issue 36, item 4: a JSONL store's own ``known_at`` view (the log prefix stored by then,
cut from its reader's index) answers every read as the generic ``KnownAtVectorStore``
over the same store does — recalls with every ranker to the byte, at every instant, for
a reader of the log, of an index file, and of an index file and a tail; a store whose
``stored_at`` goes back falls back to the generic class; the view is read-only alike."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from memlib import MemoryKind, MemorySource, RecallEngine, RemoteMemoryStore
from memlib._vectors import Embedder
from memlib.errors import RemoteMemoryValidationError
from memlib.rankers.embeddings import HashingEmbedder, PairEmbedder
from memlib.stores._known_at import KnownAtVectorStore, store_known_at
from memlib.stores.jsonl import _index as jsonl_index
from memlib.stores.jsonl._doctor import check_store
from memlib.stores.jsonl._store import JsonlKnownAt

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


def _item(memory_id: str, rng: random.Random, source: str, kind: str = "conversation") -> Any:
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


def _history(store: RemoteMemoryStore, clock: Clock, *, index_file_at: int | None) -> None:
    """Turns of three sources, profiles, and retractions and supersedes of earlier turns
    (middle turns too: their neighbours and pair texts change), at instants with ties and
    fractions; the index file written after step ``index_file_at``."""
    rng = random.Random(36)
    live: list[str] = []
    serial = 0
    steps = (0, 1, 0.5, 3600, 0, 7200, 0.000001, 86400, 60, 1)
    for step, seconds in enumerate(steps):
        clock.now += timedelta(seconds=seconds)
        items = []
        for _ in range(rng.randint(1, 4)):
            serial += 1
            profile = rng.random() < 0.15
            source = "me" if profile else f"s-{rng.randint(0, 2)}"
            items.append(
                _item(f"r-{serial}", rng, source, "profile" if profile else "conversation")
            )
        store.append_many(items)
        live += [item["memory_id"] for item in items]
        if step >= 2:
            clock.now += timedelta(seconds=rng.choice((0, 1)))
            target = live.pop(rng.randrange(len(live)))
            if rng.random() < 0.5:
                store.retract(target, reason="withdrawn", source=NOTE)
            else:
                serial += 1
                kind = store.records_by_id([target])[0].kind.value
                new = _item(f"r-{serial}", rng, f"s-{rng.randint(0, 2)}", kind)
                store.supersede(target, new, reason="corrected")
                live.append(new["memory_id"])
        if step == index_file_at:
            assert store.write_index_file()


def _instants(store: RemoteMemoryStore) -> list[datetime]:
    """Before everything, at every write, a hair before and after each, and after all."""
    times = sorted({datetime.fromisoformat(r.stored_at) for r in store.read_all()})
    tiny = timedelta(microseconds=1)
    found = {times[0] - timedelta(days=1), times[-1] + timedelta(days=1)}
    for t in times:
        found |= {t - tiny, t, t + tiny}
    return sorted(found)


READERS = ("writer", "file", "file+tail", "log")


@pytest.fixture(scope="module", params=sorted(EMBEDDERS))
def logs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Callable[[], RemoteMemoryStore]]:
    """``reader → open()``: new readers of an index file covering the whole log, of one
    covering its first half (and the tail), and of the log alone; and the last writer."""
    embedder = EMBEDDERS[request.param]
    whole, half, bare = (tmp_path_factory.mktemp(n) / "records.jsonl" for n in READERS[1:])
    for log, at in ((whole, 9), (half, 4)):
        clock = Clock()
        writer = RemoteMemoryStore(log, user_id=USER, clock=clock, embedder=embedder)
        _history(writer, clock, index_file_at=at)
    for name in ("records.jsonl", "records.jsonl.vectors"):
        bare.with_name(name).write_bytes(whole.with_name(name).read_bytes())
    opened = {
        name: partial(RemoteMemoryStore, log, user_id=USER, embedder=embedder)
        for name, log in (("log", bare), ("file", whole), ("file+tail", half))
    }
    return {"writer": lambda: writer, **opened}


def _answers(view: Any, ids: list[str]) -> dict[Any, Any]:
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


@pytest.mark.parametrize("reader", READERS)
def test_the_view_answers_as_the_generic_class_at_every_instant(
    logs: dict[str, Callable[[], RemoteMemoryStore]], reader: str
) -> None:
    store = logs[reader]()
    ids = [r.memory_id for r in store.read_all()] + ["unknown"]
    for instant in _instants(store):
        view = store_known_at(store, instant)
        assert isinstance(view, JsonlKnownAt)
        generic = KnownAtVectorStore(store, instant)
        # A new reader each time too: the view must not lean on what a recall read before.
        fresh = store_known_at(logs[reader](), instant)
        expected = _answers(generic, ids)
        assert _answers(view, ids) == expected, instant
        assert _answers(fresh, ids) == expected, instant


def test_a_store_whose_stored_at_goes_back_falls_back(tmp_path: Path) -> None:
    log = tmp_path / "records.jsonl"
    clock = Clock()
    store = RemoteMemoryStore(log, user_id=USER, clock=clock, embedder=EMBEDDERS["turns"])
    rng = random.Random(1)
    then = T0 + timedelta(hours=1, minutes=30)
    for n, hours in enumerate((0, 2, 1, 3)):  # the third is stored before the second
        clock.now = T0 + timedelta(hours=hours)
        store.append_many([_item(f"r-{n}", rng, "s-0")])
        assert (store.known_at_view(then) is None) == (n >= 2), n
    store.retract("r-0", reason="withdrawn", source=NOTE)
    assert store.write_index_file()
    for reader in (store, RemoteMemoryStore(log, user_id=USER, embedder=EMBEDDERS["turns"])):
        assert reader.known_at_view(then) is None
        view = store_known_at(reader, then)
        assert type(view) is KnownAtVectorStore
        assert [r.memory_id for r in view.read_all()] == ["r-0", "r-2"]  # not a prefix
        hits = RecallEngine(reader).recall(_words(reader, "r-2"), as_of=AS_OF, known_at=then).hits
        assert "r-2" in [h.memory_id for h in hits] and "r-1" not in [h.memory_id for h in hits]


def _words(store: RemoteMemoryStore, memory_id: str) -> str:
    return store.records_by_id([memory_id])[0].summary


def test_the_view_is_read_only_with_the_generic_words(
    logs: dict[str, Callable[[], RemoteMemoryStore]],
) -> None:
    store = logs["file"]()
    instant = _instants(store)[5]
    item = _item("new", random.Random(0), "s-0")
    writes: dict[str, Callable[[Any], Any]] = {
        "append": lambda s: s.append(**item),
        "append_many": lambda s: s.append_many([item]),
        "retract": lambda s: s.retract("r-1", reason="x", source=NOTE),
        "supersede": lambda s: s.supersede("r-1", item, reason="x"),
        "put_vectors": lambda s: s.put_vectors("m", 2, {}),
        "drop_vectors": lambda s: s.drop_vectors(),
        "records_without_vectors": lambda s: s.records_without_vectors(5),
    }
    before = log_bytes = store.path.read_bytes()
    for name, write in writes.items():
        words = []
        for view in (store_known_at(store, instant), KnownAtVectorStore(store, instant)):
            with pytest.raises(RemoteMemoryValidationError) as refused:
                write(view)
            words.append(str(refused.value))
        assert words[0] == words[1] and "read-only" in words[0], name
    assert store.path.read_bytes() == before == log_bytes


def test_an_index_file_of_the_format_before_stored_at_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "records.jsonl"
    clock = Clock()
    store = RemoteMemoryStore(log, user_id=USER, clock=clock)
    _history(store, clock, index_file_at=None)
    ids = [r.memory_id for r in store.read_all()]
    instant = _instants(store)[len(ids)]
    expected = _answers(KnownAtVectorStore(store, instant), ids)
    # A real format-5 file: the sections of then, without ``stored``.
    with monkeypatch.context() as then:
        then.setattr(jsonl_index, "FORMAT", 5)
        then.setattr(
            jsonl_index, "SECTIONS", tuple(s for s in jsonl_index.SECTIONS if s[0] != "stored")
        )
        assert RemoteMemoryStore(log, user_id=USER).write_index_file()
    state = check_store(log, user_id=USER).index
    assert state is not None and state.status == "invalid" and "format 5" in state.reason
    reader = RemoteMemoryStore(log, user_id=USER)
    assert _answers(store_known_at(reader, instant), ids) == expected
    assert reader.write_index_file()
    state = check_store(log, user_id=USER).index
    assert state is not None and state.status == "fresh", state
    view = store_known_at(RemoteMemoryStore(log, user_id=USER), instant)
    assert isinstance(view, JsonlKnownAt)
    assert _answers(view, ids) == expected


@pytest.mark.parametrize("section", ["postings", "source_before"])
def test_an_index_file_damaged_after_load_is_read_again(tmp_path: Path, section: str) -> None:
    # A section read only when first needed (a term's list, the sources) found damaged
    # under a view: the view is cut again from the log, and answers the same.
    log = tmp_path / "records.jsonl"
    clock = Clock()
    store = RemoteMemoryStore(log, user_id=USER, clock=clock, embedder=EMBEDDERS["pairs"])
    _history(store, clock, index_file_at=9)
    ids = [r.memory_id for r in store.read_all()]
    instant = _instants(store)[len(ids)]
    expected = _answers(KnownAtVectorStore(store, instant), ids)
    view = store_known_at(RemoteMemoryStore(log, user_id=USER), instant)
    assert isinstance(view, JsonlKnownAt)
    index = log.with_name("records.jsonl.index")
    file = jsonl_index._open_file(str(index))
    assert file is not None
    at = jsonl_index._places(jsonl_index._parse_header(file), file)[section][0]
    data = bytearray(index.read_bytes())
    data[at] ^= 0x01
    index.write_bytes(bytes(data))
    assert _answers(view, ids) == expected

"""Issue 36, item 4: a JSONL store's own ``known_at`` view (the log prefix stored by then,
cut from its reader's index) answers every read as the generic ``KnownAtVectorStore``
over the same store does — recalls with every ranker to the byte, at every instant, for
a reader of the log, of an index file, and of an index file and a tail; a store whose
``stored_at`` goes back falls back to the generic class; the view is read-only alike."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from pathlib import Path

import pytest
from support.known_at_history import (
    AS_OF,
    EMBEDDERS,
    NOTE,
    T0,
    USER,
    Clock,
    answers,
    history,
    instants,
    item,
    refused_alike,
    same_as_generic,
)

from memlib import RecallEngine, RemoteMemoryStore
from memlib.stores._known_at import KnownAtVectorStore, store_known_at
from memlib.stores.jsonl import _index as jsonl_index
from memlib.stores.jsonl._doctor import check_store
from memlib.stores.jsonl._store import JsonlKnownAt

STEPS = (0, 1, 0.5, 3600, 0, 7200, 0.000001, 86400, 60, 1)


def _index_file_at(store: RemoteMemoryStore, at: int | None, step: int) -> None:
    if step == at:
        assert store.write_index_file()


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
        history(writer, clock, STEPS, partial(_index_file_at, writer, at))
    for name in ("records.jsonl", "records.jsonl.vectors"):
        bare.with_name(name).write_bytes(whole.with_name(name).read_bytes())
    opened = {
        name: partial(RemoteMemoryStore, log, user_id=USER, embedder=embedder)
        for name, log in (("log", bare), ("file", whole), ("file+tail", half))
    }
    return {"writer": lambda: writer, **opened}


@pytest.mark.parametrize("reader", READERS)
def test_the_view_answers_as_the_generic_class_at_every_instant(
    logs: dict[str, Callable[[], RemoteMemoryStore]], reader: str
) -> None:
    same_as_generic(logs[reader](), logs[reader], JsonlKnownAt)


def test_a_store_whose_stored_at_goes_back_falls_back(tmp_path: Path) -> None:
    log = tmp_path / "records.jsonl"
    clock = Clock()
    store = RemoteMemoryStore(log, user_id=USER, clock=clock, embedder=EMBEDDERS["turns"])
    rng = random.Random(1)
    then = T0 + timedelta(hours=1, minutes=30)
    for n, hours in enumerate((0, 2, 1, 3)):  # the third is stored before the second
        clock.now = T0 + timedelta(hours=hours)
        store.append_many([item(f"r-{n}", rng, "s-0")])
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
    instant = instants(store)[5]
    before = store.path.read_bytes()
    refused_alike(store, instant)
    assert store.path.read_bytes() == before


def test_an_index_file_of_the_format_before_stored_at_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "records.jsonl"
    clock = Clock()
    store = RemoteMemoryStore(log, user_id=USER, clock=clock)
    history(store, clock, STEPS)
    ids = [r.memory_id for r in store.read_all()]
    instant = instants(store)[len(ids)]
    expected = answers(KnownAtVectorStore(store, instant), ids)
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
    assert answers(store_known_at(reader, instant), ids) == expected
    assert reader.write_index_file()
    state = check_store(log, user_id=USER).index
    assert state is not None and state.status == "fresh", state
    view = store_known_at(RemoteMemoryStore(log, user_id=USER), instant)
    assert isinstance(view, JsonlKnownAt)
    assert answers(view, ids) == expected


@pytest.mark.parametrize("section", ["postings", "source_before"])
def test_an_index_file_damaged_after_load_is_read_again(tmp_path: Path, section: str) -> None:
    # A section read only when first needed (a term's list, the sources) found damaged
    # under a view: the view is cut again from the log, and answers the same.
    log = tmp_path / "records.jsonl"
    clock = Clock()
    store = RemoteMemoryStore(log, user_id=USER, clock=clock, embedder=EMBEDDERS["pairs"])
    history(store, clock, STEPS, partial(_index_file_at, store, 9))
    ids = [r.memory_id for r in store.read_all()]
    instant = instants(store)[len(ids)]
    expected = answers(KnownAtVectorStore(store, instant), ids)
    view = store_known_at(RemoteMemoryStore(log, user_id=USER), instant)
    assert isinstance(view, JsonlKnownAt)
    index = log.with_name("records.jsonl.index")
    file = jsonl_index._open_file(str(index))
    assert file is not None
    at = jsonl_index._places(jsonl_index._parse_header(file), file)[section][0]
    data = bytearray(index.read_bytes())
    data[at] ^= 0x01
    index.write_bytes(bytes(data))
    assert answers(view, ids) == expected

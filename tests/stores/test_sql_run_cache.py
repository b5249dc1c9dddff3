"""A SQL store keeps the runs its lexical recalls read, decoded and numbered
(``memlib._retrieval.postings.RunCache``), while ``scope_stats`` says the scope's postings
are as they were: a warm recall reads none of the runs, and checks that row in its read of
the records.

Each test holds the answers to those of a JSONL store given the same writes, byte for
byte: after writes through another store object on the same file or schema (the cache of
the reader must go), after a term numbered below those held, with a budget too small for a
query's terms, and on a scope whose ids are too far apart to be numbered by row id.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy  # noqa: F401  (loaded, so the forced numpy paths below take it)
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.pgserver import pg_dsn, pg_url  # noqa: F401  (fixtures)

import memlib._retrieval.postings as postings_module
from memlib import MemoryKind, RecallEngine, StoredMemory, open_store
from memlib._retrieval import index_terms
from memlib._retrieval.postings import RunCache, pack_docs, pack_lengths
from memlib.sample import SAMPLE_AS_OF, fixed_clock, sample_records

USER = "alice"
SOURCE = {
    "source_id": "s",
    "source_type": "run_cache_test",
    "title": "cache",
    "captured_at": "2026-08-09T12:00:00Z",
}
QUERIES = ("layered memory", "the memory of the store", "sqlite persistence", "late early")
RANKERS = ("bm25", "bm25+stopwords")


def _item(memory_id: str, content: str) -> dict[str, Any]:
    return {
        "kind": "conversation",
        "memory_id": memory_id,
        "content": content,
        "summary": content[:30],
        "source": SOURCE,
    }


def _generated(count: int, prefix: str, extra: str = "") -> list[dict[str, Any]]:
    words = ("memory", "the", "layered", "of", "store", "sqlite", "persistence")
    return [
        _item(
            f"{prefix}-{i:04d}",
            " ".join(words[(i * j) % len(words)] for j in range(1 + i % 11)) + extra,
        )
        for i in range(count)
    ]


def _recalls(store: Any, queries: tuple[str, ...] = QUERIES) -> list[str]:
    return [
        RecallEngine(store, ranker=ranker)
        .recall(q, limit=5, as_of=SAMPLE_AS_OF, query_id="q")
        .to_json()
        for ranker in RANKERS
        for q in queries
    ]


@pytest.fixture
def numpy_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """numpy for every query, however few its postings: the run cache's path."""
    monkeypatch.setattr(postings_module, "NUMPY_MIN_POSTINGS", 0)


@pytest.fixture
def stores(sql_url: str, tmp_path: Path) -> Iterator[tuple[Any, Any, Any]]:
    """(JSONL reference, writer, reader): the last two on the same ``sql_url``; closed
    after the test, whatever it asserted."""
    reference = open_store(f"jsonl:{tmp_path / 'ref.jsonl'}", user_id=USER, clock=fixed_clock())
    writer = open_store(sql_url, user_id=USER, clock=fixed_clock())
    reader = open_store(sql_url, user_id=USER, clock=fixed_clock())
    yield reference, writer, reader
    for store in (reference, writer, reader):
        store.close()


def _append_and_retract(store: Any, kept_id: str, gone_id: str) -> None:
    """One batch: a record, another, and the retraction of the second (searched moves
    by one and back; retracted by one)."""
    stored_at = store._now()
    kept, gone = (
        store._record(_item(m, f"the layered memory {m}"), stored_at) for m in (kept_id, gone_id)
    )
    retraction = StoredMemory(
        memory_id=f"retract-{gone_id}",
        user_scope=store.user_scope,
        kind=MemoryKind.RETRACTION,
        content="wrong",
        summary=f"Retracts {gone_id}",
        source=kept.source,
        stored_at=stored_at,
        retracts=gone_id,
    )
    store._append_batch((kept, gone, retraction))


@pytest.mark.usefixtures("numpy_paths")
def test_a_write_through_another_store_object_reaches_a_warm_reader(
    stores: tuple[Any, Any, Any],
) -> None:
    reference, writer, reader = stores
    for target in (reference, writer):
        target.append_many(sample_records())
        target.append_many(_generated(60, "first"))
    assert _recalls(reader) == _recalls(reference)
    held = reader._runs
    assert held.terms and held.key == reader._stats(reader._connection())[:4]
    assert _recalls(reader) == _recalls(reference)  # warm: from what it holds
    assert reader._runs is held

    steps = (
        lambda s: s.append_many(_generated(30, "second", " layered memory store")),
        lambda s: s.retract("first-0004", reason="wrong", source=SOURCE),
        lambda s: s.retract("second-0002", reason="wrong", source=SOURCE),
        lambda s: _append_and_retract(s, "batch-kept", "batch-gone"),
    )
    for step in steps:
        before = _recalls(reader)
        for target in (reference, writer):
            step(target)
        after = _recalls(reader)
        assert after == _recalls(reference)
        assert after != before  # each write changed an answer the reader had cached
        assert reader._runs is not held
        held = reader._runs


@pytest.mark.usefixtures("numpy_paths")
def test_a_term_numbered_below_those_held_renumbers_them(stores: tuple[Any, Any, Any]) -> None:
    reference, writer, reader = stores
    for target in (reference, writer):
        target.append_many(_generated(40, "early", " early"))
        target.append_many(_generated(40, "late", " late"))
    first = _recalls(reader, ("late",))
    base = reader._runs.base
    assert _recalls(reader, ("early", "late early", "late")) == _recalls(
        reference, ("early", "late early", "late")
    )
    assert first == _recalls(reference, ("late",))
    assert reader._runs.base < base  # "early" came in below: what was held moved up


@pytest.mark.usefixtures("numpy_paths")
def test_a_budget_smaller_than_a_query_lets_older_terms_go(
    stores: tuple[Any, Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    reference, writer, reader = stores
    for target in (reference, writer):
        target.append_many(sample_records())
        target.append_many(_generated(80, "many"))
    monkeypatch.setattr(postings_module, "RUN_CACHE_POSTINGS", 60)
    peak = 0
    for query in QUERIES * 2:
        assert _recalls(reader, (query,)) == _recalls(reference, (query,))
        held = reader._runs
        # Past the budget only while the last query's own terms are all it holds.
        assert held.postings <= 60 or set(held.terms) <= index_terms(query)
        assert held.postings == sum(len(docs) for docs, _ in held.terms.values())
        peak = max(peak, held.postings)
    assert peak > 60  # "the memory of the store" alone is past it


@pytest.mark.usefixtures("numpy_paths")
def test_a_scope_whose_ids_are_far_apart_is_read_as_before(
    sql_url: str, stores: tuple[Any, Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postings_module, "DENSE_SLACK", 0)
    reference, writer, reader = stores
    others = [open_store(sql_url, user_id=f"other{k}", clock=fixed_clock()) for k in range(5)]
    for item in _generated(30, "mixed"):  # each of alice's ids five others apart
        for target in (reference, writer, *others):
            target.append_many([item])
    assert _recalls(reader) == _recalls(reference)
    assert not reader._runs.tokens  # nothing numbered: every recall reads its runs
    for store in others:
        store.close()


@pytest.mark.usefixtures("numpy_paths")
def test_without_the_cache_a_fresh_reader_merges_by_dict(
    stores: tuple[Any, Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    reference, writer, reader = stores
    for target in (reference, writer):
        target.append_many(sample_records())
        target.append_many(_generated(40, "few"))
    monkeypatch.setattr(postings_module, "NUMPY_MIN_POSTINGS", 10**9)
    assert _recalls(reader) == _recalls(reference)
    assert not reader._runs.terms


# -- the cache alone: each query's postings, lengths and candidates, as the ids say ------

_ids = st.lists(st.integers(1, 400), min_size=1, max_size=60, unique=True)


@settings(max_examples=120, deadline=None, derandomize=True, database=None)
@given(
    data=st.data(), dtype=st.sampled_from(["<i8", ">i8"]), budget=st.sampled_from([5, 40, 10**6])
)
def test_the_cache_numbers_what_each_query_asks(
    data: st.DataObject, dtype: str, budget: int
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(postings_module, "RUN_CACHE_POSTINGS", budget)
        _queries_on_one_cache(data, dtype)


def _queries_on_one_cache(data: st.DataObject, dtype: str) -> None:
    np = postings_module.numpy_or_none()
    lengths = {i: (i % 7, i % 5) for i in range(1, 401)}
    vocabulary = {t: sorted(data.draw(_ids)) for t in "abcdef"}
    cache = RunCache(("k",))
    for _ in range(4):
        asked = data.draw(st.lists(st.sampled_from("abcdefz"), min_size=1, max_size=4, unique=True))
        read = cache.missing(asked)
        runs = {
            t: [
                (
                    pack_docs(vocabulary[t], dtype),
                    pack_docs((i % 3 + 1 for i in vocabulary[t]), dtype),
                    pack_lengths(lengths[i] for i in vocabulary[t]),
                )
            ]
            for t in read
            if t in vocabulary
        }
        got = cache.merged(np, runs, read, asked, asked, dtype, 400)
        assert got is not None
        merged, count, docs = got
        for term, (term_docs, tfs) in zip(asked, merged.postings, strict=True):
            ids = [merged.row_ids[d] for d in term_docs]
            assert ids == vocabulary.get(term, [])
            assert list(tfs) == [i % 3 + 1 for i in ids]
            assert [(merged.tokens[d], merged.content_tokens[d]) for d in term_docs] == [
                lengths[i] for i in ids
            ]
        union = sorted({i for t in asked for i in vocabulary.get(t, [])})
        assert count == len(union)
        assert [merged.row_ids[d] for d in docs()] == union

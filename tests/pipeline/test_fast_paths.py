"""The write path's fast paths agree with the plain code they stand in for (issue 5).

A bulk import pays per record for validation, the JSON line and the index. Each of
those has an inlined or batched version; hypothesis holds every one of them equal to
the straightforward version — the same record or the same error message, the same
bytes, the same index.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any
from unittest.mock import patch

import numpy  # noqa: F401  (loaded, so the forced numpy paths below take it)
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import memlib._retrieval.postings as postings
from memlib import MemoryKind, MemorySource, StoredMemory, user_scope_for
from memlib._retrieval import InvertedIndex, index_tokens
from memlib.errors import RemoteMemoryCorruptionError, RemoteMemoryValidationError
from memlib.normalize import tokenize_all
from memlib.records import (
    MEMORY_ID_MAX,
    _memory_id,
    format_timestamp,
    normalize_timestamp,
    parse_timestamp,
    record_from_item,
)
from memlib.stores.jsonl._store import encode_record

PROPERTY = settings(
    max_examples=500, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
SCOPE = user_scope_for("alice")
STORED_AT = "2026-08-10T12:00:00Z"

TRICKY = list('ab Z_9-é\u0301ß分层记忆\t\n\x85\u00a0\u2028\u3000\x00\x1f\x7f\x9f<&"\\') + [
    "\ud800",
    "\U00020000",
]
texts = st.one_of(
    st.text(max_size=30),
    st.text(alphabet=st.sampled_from(TRICKY), max_size=30),
    st.sampled_from(["hello world", "  padded  text ", "", " ", "x" * 2_001]),
)
timestamps = st.one_of(
    st.datetimes(timezones=st.one_of(st.none(), st.timezones())).map(lambda d: d.isoformat()),
    st.datetimes(timezones=st.just(__import__("datetime").UTC)).map(format_timestamp),
    st.sampled_from(
        [
            "2026-08-01T12:00:00Z",
            "2026-02-30T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-08-01T24:00:00Z",
            "2026-08-01T12:00:00.5Z",
            "2026-08-01T12:00:00.50Z",
            "2026-08-01T12:00:00.000001Z",
            "2026-08-01T12:00:00.1234567Z",
            "0000-01-01T00:00:00Z",
            "２０２６-08-01T12:00:00Z",
            "2026-08-01T12:00:00+00:00",
            "2026-08-01 12:00:00Z",
        ]
    ),
    st.text(max_size=25),
)
ids = st.one_of(
    st.text(max_size=12),
    st.text(alphabet=st.sampled_from(TRICKY), min_size=1, max_size=8),
    st.sampled_from(["m-1", "x" * MEMORY_ID_MAX, "x" * (MEMORY_ID_MAX + 1), "a\u200bb", "a\xa0b"]),
)
kinds = st.sampled_from(
    [
        "conversation",
        "profile",
        "retraction",
        "note",
        MemoryKind.PROFILE,
        MemoryKind.CONVERSATION,
        3,
    ]
)


def _slow(item: dict[str, Any]) -> StoredMemory:
    source = item["source"]
    return StoredMemory(
        memory_id=item["memory_id"],
        user_scope=SCOPE,
        kind=item["kind"],
        content=item["content"],
        summary=item["summary"],
        source=source if isinstance(source, MemorySource) else MemorySource.from_dict(source),
        stored_at=STORED_AT,
    )


def _outcome(build: Any, item: Any) -> tuple[str, Any]:
    try:
        return "ok", build(item)
    except (RemoteMemoryValidationError, RemoteMemoryCorruptionError) as exc:
        return type(exc).__name__, str(exc)


@PROPERTY
@given(ids, kinds, texts, texts, texts, texts, texts, timestamps)
@example("m-1", "conversation", "a  b", "s", "id", "type", "t", "2026-02-30T00:00:00Z")
@example("m 1", "conversation", "a", "s", "id", "type", "t", "2026-08-01T12:00:00Z")
@example("m-1", "profile", "a", "s\ud800", "id", "type", "t", "2026-08-01T12:00:00Z")
@example("m-1", "profile", 5, "s", "id", "type", "t", "2026-08-01T12:00:00Z")
@example("m-1", "profile", b"a b", "s", "id", "type", "t", "2026-08-01T12:00:00Z")
@example("m-1", "profile", "a\u3000b", "s", "id", "type", "t", "2026-08-01T12:00:00Z")
@example("m-1", "profile", " a", "s", "id", "type", "t", "2026-08-01T12:00:00Z")
def test_record_from_item_is_the_constructor(
    memory_id: Any,
    kind: Any,
    content: Any,
    summary: Any,
    source_id: Any,
    source_type: Any,
    title: Any,
    captured_at: Any,
) -> None:
    item = {
        "kind": kind,
        "memory_id": memory_id,
        "content": content,
        "summary": summary,
        "source": {
            "source_id": source_id,
            "source_type": source_type,
            "title": title,
            "captured_at": captured_at,
        },
    }
    fast = _outcome(lambda i: record_from_item(i, SCOPE, STORED_AT), item)
    slow = _outcome(_slow, item)
    assert fast == slow
    if fast[0] == "ok":
        assert type(fast[1].kind) is MemoryKind and fast[1].to_dict() == slow[1].to_dict()


@PROPERTY
@given(
    st.datetimes(
        min_value=__import__("datetime").datetime(2, 1, 1),
        max_value=__import__("datetime").datetime(9998, 12, 31),
        timezones=st.one_of(st.just(__import__("datetime").UTC), st.timezones()),
    )
)
@example(__import__("datetime").datetime(999, 1, 2, 3, 4, 5, 100_000, __import__("datetime").UTC))
def test_format_timestamp_is_the_written_form(moment: Any) -> None:
    # The form spelled out field by field: what isoformat-and-strip must give.
    utc = moment.astimezone(__import__("datetime").UTC)
    text = (
        f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T"
        f"{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}"
    )
    if utc.microsecond:
        text += "." + f"{utc.microsecond:06d}".rstrip("0")
    assert format_timestamp(moment) == text + "Z"


@PROPERTY
@given(timestamps)
def test_normalize_timestamp_fast_path_is_parse_then_format(value: str) -> None:
    def slow(v: str) -> str:
        return format_timestamp(parse_timestamp(v))

    assert _outcome(normalize_timestamp, value) == _outcome(slow, value)


@PROPERTY
@given(ids)
def test_memory_id_check_is_the_character_rule(value: str) -> None:
    refused = any(ch.isspace() or ord(ch) < 32 or 0x7F <= ord(ch) < 0xA0 for ch in value) or any(
        "\ud800" <= ch <= "\udfff" for ch in value
    )
    refused = refused or not value or len(value) > MEMORY_ID_MAX
    try:
        _memory_id(value)
    except RemoteMemoryValidationError:
        assert refused
    else:
        assert not refused


@PROPERTY
@given(ids, texts, texts, texts, st.booleans())
def test_encode_record_is_json_dumps(
    memory_id: str, content: str, summary: str, title: str, retraction: bool
) -> None:
    try:
        record = StoredMemory(
            memory_id=memory_id,
            user_scope=SCOPE,
            kind=MemoryKind.RETRACTION if retraction else MemoryKind.CONVERSATION,
            content=content,
            summary=summary,
            source=MemorySource(
                source_id='s"1\\',
                source_type="t",
                title=title,
                captured_at="2026-08-01T12:00:00.25Z",
            ),
            stored_at=STORED_AT,
            retracts="m\u00e9-0" if retraction else None,
        )
    except RemoteMemoryValidationError:
        return
    expected = json.dumps(record.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n"
    assert encode_record(record) == expected.encode("utf-8")


@PROPERTY
@given(st.text(max_size=60), st.text(alphabet=st.sampled_from(list("aZ_9 -.,!é分\t")), max_size=60))
def test_index_tokens_are_tokenize_all(text: str, ascii_ish: str) -> None:
    for value in (text, ascii_ish):
        assert list(index_tokens(value)) == list(tokenize_all(value))


def _snapshot(index: InvertedIndex) -> dict[str, Any]:
    return {
        "postings": {t: list(p) for t, p in index.postings.items()},
        "ids": index.ids,
        "doc_of": index.doc_of,
        "kinds": bytes(index.kinds),
        "live": bytes(index.live),
        "timestamps": list(index.timestamps),
        "micros": list(index.micros),
        "retracted": index.retracted,
        "searched": index.searched,
        "retracted_conversations": index.retracted_conversations,
        "tokens": list(index.tokens),
        "content": list(index.content_tokens),
        "token_count": index.token_count,
        "content_token_count": index.content_token_count,
    }


words = st.sampled_from(
    ["the", "pottery", "class", "of", "分层", "记忆", "Émile", "a", "x_1", "!!"]
)


@settings(
    max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    st.lists(st.tuples(st.lists(words, max_size=12), st.integers(0, 9)), min_size=1, max_size=40),
    st.integers(1, 40),
)
def test_batched_index_equals_one_record_at_a_time(
    rows: list[tuple[list[str], int]], split: int
) -> None:
    records: list[StoredMemory] = []
    for n, (content_words, kind_pick) in enumerate(rows):
        if (
            kind_pick == 0
            and records
            and records[0].kind is MemoryKind.CONVERSATION
            and not any(r.retracts == records[0].memory_id for r in records)
        ):
            records.append(
                StoredMemory(
                    memory_id=f"retract-{n}",
                    user_scope=SCOPE,
                    kind=MemoryKind.RETRACTION,
                    content="wrong",
                    summary="Retracts",
                    stored_at=STORED_AT,
                    source=MemorySource("s", "t", "t", "2026-08-01T12:00:00Z"),
                    retracts=records[0].memory_id,
                )
            )
            continue
        records.append(
            StoredMemory(
                memory_id=f"m-{n}",
                user_scope=SCOPE,
                kind=MemoryKind.PROFILE if kind_pick == 1 else MemoryKind.CONVERSATION,
                content=" ".join(content_words) or "!!",
                summary=f"turn {n % 3}",
                stored_at=STORED_AT,
                source=MemorySource("s", "t", "t", f"2026-08-{1 + n % 28:02d}T12:00:00.{n + 1}Z"),
            )
        )
    one = InvertedIndex()
    for record in records:
        one.add_many([record])
        one.settle()  # one record at a time: the dict path
    batched = InvertedIndex()
    # numpy, however small (and whether or not this process has imported it yet)
    with (
        patch.object(postings, "NUMPY_MIN_BATCH", 0),
        patch.object(postings, "NUMPY_IMPORT_BATCH", 0),
    ):
        batched.add_many(records[:split])
        batched.settle()
        batched.add_many(records[split:])
        assert _snapshot(batched) == _snapshot(one)
    assert all(list(p) == sorted(set(p)) for p in batched.postings.values())


@PROPERTY
@given(st.lists(st.lists(words, max_size=8), max_size=30))
def test_runs_by_term_with_and_without_numpy(words_by_doc: list[list[str]]) -> None:
    texts = [(3 * n + 1, [w.lower() for w in ws]) for n, ws in enumerate(words_by_doc)]
    number_of = {t: i for i, t in enumerate(sorted({t for _, ts in texts for t in ts}))}
    expected: dict[int, list[int]] = {}
    for doc, terms in texts:
        for term in sorted(set(terms)):
            expected.setdefault(number_of[term], []).append(doc)
    for dtype in ("u4", "<i8", ">i8"):
        plain = postings.tf_runs_by_term(texts, number_of, dtype)
        assert [(n, list(postings.unpack_docs(run, dtype))) for n, run, _ in plain] == sorted(
            expected.items()
        )
        for number, run, tfs in plain:  # a retraction takes one doc out of a run
            held = expected[number]
            rest = postings.run_columns_without(run, tfs, b"", held[0], dtype)
            assert rest is not None and rest[0] == postings.pack_docs(held[1:], dtype)
            absent = -1 if dtype != "u4" else 2**31
            assert postings.run_columns_without(run, tfs, b"", absent, dtype) is None
        with (
            patch.object(postings, "NUMPY_MIN_BATCH", 0),
            patch.object(postings, "NUMPY_IMPORT_BATCH", 0),
        ):
            assert postings.tf_runs_by_term(texts, number_of, dtype) == plain
        # Matches counted from the runs: each doc's number of distinct terms.
        runs = [run for _, run, _ in plain]
        docs, counts = postings.count_matches(runs, dtype)
        with patch.object(postings, "NUMPY_MIN_POSTINGS", 0):
            np_docs, np_counts = postings.count_matches(runs, dtype)
        want = {doc: len(set(terms)) for doc, terms in texts if terms}
        assert dict(zip(list(docs), list(counts), strict=True)) == want
        assert [int(d) for d in np_docs] == list(docs)
        assert [int(c) for c in np_counts] == list(counts)


# -- rankers: only the hits get their signals built ------------------------------------


class _FakeModel:
    """Deterministic 8-d unit vectors from a text's bytes (no model needed)."""

    name, dimension, pairs = "fake-8", 8, False

    def encode(self, texts: Sequence[str]) -> Any:
        import numpy as np

        rows = []
        for text in texts:
            seed = sum(text.encode("utf-8")) % 7  # few distinct vectors: ties on purpose
            vector = np.arange(1, 9, dtype=np.float32) ** (seed % 3 + 1) + seed
            rows.append(vector / np.linalg.norm(vector))
        return np.stack(rows) if rows else np.zeros((0, 8), dtype=np.float32)


class _EveryCandidate:
    """A ranker that offers only ``score_candidates``: the engine's other path."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name = inner, inner.name

    def score_candidates(self, query: Any, scan: Any, *, as_of: Any) -> Any:
        return self.inner.score_candidates(query, scan, as_of=as_of)


@settings(
    max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    st.lists(
        st.tuples(st.lists(words, min_size=1, max_size=6), st.integers(0, 3), st.integers(0, 2)),
        min_size=1,
        max_size=25,
    ),
    st.lists(words, min_size=1, max_size=4),
    st.integers(1, 10),
)
def test_score_top_gives_the_result_of_scoring_every_candidate(
    rows: list[tuple[list[str], int, int]], query_words: list[str], limit: int
) -> None:
    import tempfile
    from datetime import UTC, datetime

    from memlib import RecallEngine
    from memlib.rankers.bm25 import Bm25Ranker, Bm25StopwordsRanker
    from memlib.rankers.hybrid import HybridRanker
    from memlib.stores.jsonl._store import RemoteMemoryStore

    with tempfile.TemporaryDirectory() as root:
        store = RemoteMemoryStore(f"{root}/r.jsonl", user_id="alice")
        store.append_many(
            [
                {
                    "kind": "conversation",
                    "memory_id": f"m-{n}",
                    "content": " ".join(ws),
                    "summary": "turn",
                    "source": {
                        "source_id": f"s-{session}",
                        "source_type": "t",
                        "title": "t",
                        "captured_at": f"2026-08-0{1 + day}T12:00:00Z",
                    },
                }
                for n, (ws, day, session) in enumerate(rows)
            ]
        )
        text = " ".join(query_words)
        if not any(ch.isalnum() for ch in text):
            return
        as_of = datetime(2026, 8, 10, tzinfo=UTC)
        for ranker in (Bm25Ranker(), Bm25StopwordsRanker(), HybridRanker(model=_FakeModel())):
            fast = RecallEngine(store, ranker=ranker).recall(
                text, limit=limit, as_of=as_of, query_id="q"
            )
            full = RecallEngine(store, ranker=_EveryCandidate(ranker)).recall(
                text, limit=limit, as_of=as_of, query_id="q"
            )
            if isinstance(ranker, HybridRanker):
                # The stored-vector path (no vector stored here: each one computed at
                # recall) says where its candidates came from; the rest is identical.
                assert fast.retrieval is not None
                assert fast.retrieval["dense"] == 0
                assert fast.retrieval["lexical"] == fast.retrieval["unembedded"]
                fast = dataclasses.replace(fast, retrieval=None)
            assert fast.to_json() == full.to_json()


@PROPERTY
@given(
    ids,
    st.sampled_from(["conversation", "profile", "retraction", "x"]),
    texts,
    texts,
    texts,
    timestamps,
    st.sampled_from([SCOPE, "ABCDEF0123456789", "abc", 7]),
    st.sampled_from([STORED_AT, "2026-02-30T00:00:00Z", "2026-08-10T12:00:00+02:00", None]),
    st.booleans(),
)
def test_from_dict_fast_path_is_the_checked_path(
    memory_id: Any,
    kind: Any,
    content: Any,
    summary: Any,
    title: Any,
    captured_at: Any,
    scope: Any,
    stored_at: Any,
    retracts: bool,
) -> None:
    from types import MappingProxyType

    data: dict[str, Any] = {
        "memory_id": memory_id,
        "user_scope": scope,
        "kind": kind,
        "content": content,
        "summary": summary,
        "stored_at": stored_at,
        "source": {
            "source_id": "s-1",
            "source_type": "t",
            "title": title,
            "captured_at": captured_at,
        },
    }
    if retracts:
        data["retracts"] = "m-0"
    # A read-only mapping is not a plain dict: it always takes the checked path.
    fast = _outcome(StoredMemory.from_dict, data)
    slow = _outcome(lambda d: StoredMemory.from_dict(MappingProxyType(d)), data)
    assert fast == slow


def test_a_fresh_process_imports_numpy_only_for_long_postings(tmp_path: Any) -> None:
    """Importing numpy costs a new process about 70 ms: a recall over a few thousand
    postings counts them in Python; past NUMPY_IMPORT_POSTINGS it pays for numpy."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from memlib import RecallEngine, open_store\n"
        "from memlib._retrieval import postings\n"
        "postings.NUMPY_IMPORT_POSTINGS = int(sys.argv[2])\n"
        "store = open_store('jsonl:' + sys.argv[1], user_id='u')\n"
        "if not store.read_all():\n"
        "    store.append_many([{'kind': 'conversation', 'memory_id': f'm{i}',\n"
        "        'content': f'common words here {i}', 'summary': 'common',\n"
        "        'source': {'source_id': 's', 'source_type': 't', 'title': 't',\n"
        "                   'captured_at': '2026-08-01T00:00:00Z'}} for i in range(1500)])\n"
        "for ranker in ('baseline', 'bm25+stopwords'):\n"
        "    RecallEngine(store, ranker=ranker).recall('common words', limit=3)\n"
        "print('numpy' in sys.modules)\n"
    )
    path = str(tmp_path / "records.jsonl")
    run = [sys.executable, "-c", script, path]
    # Fill the store first, in its own process (a batch of 1,500 may invert with numpy).
    subprocess.run([*run, "100000"], check=True, capture_output=True, text=True)
    below = subprocess.run([*run, "100000"], check=True, capture_output=True, text=True)
    above = subprocess.run([*run, "1000"], check=True, capture_output=True, text=True)
    assert below.stdout.strip() == "False"
    assert above.stdout.strip() == "True"


@settings(max_examples=200, deadline=None, database=None)
@given(
    st.lists(st.lists(st.integers(0, 50), max_size=5), min_size=0, max_size=6),
    st.lists(
        st.tuples(
            st.sampled_from(["get", "add", "has", "batch"]),
            st.integers(0, 8),
            st.lists(st.integers(0, 50), max_size=3),
        ),
        max_size=25,
    ),
)
def test_packed_lists_behave_as_a_dict_of_lists(
    lists: list[list[int]], operations: list[tuple[str, int, list[int]]]
) -> None:
    """The postings and term frequencies of a loaded index file (``_PackedLists`` over one
    ``_TermSource``, read per term) answer every mapping operation as the dicts of arrays
    they stand for, catch-up appends (one by one and in batches) included."""
    from array import array as _array
    from collections import Counter

    from memlib._retrieval.inverted import _append, _PackedLists, _TermSource
    from memlib._retrieval.strings import PackedStrings, pack_strings

    terms = [f"t{i}" for i in range(len(lists))]  # sorted, as an index file's are
    fetched: list[int] = []

    def fetch(n: int) -> tuple[Any, Any]:
        fetched.append(n)
        return _array("I", lists[n]), _array("I", [v + 100 for v in lists[n]])

    source = _TermSource(PackedStrings(*pack_strings(terms)), fetch)
    lazy = (_PackedLists(source, 0), _PackedLists(source, 1))
    plain: tuple[dict[str, Any], dict[str, Any]] = (
        {t: _array("I", v) for t, v in zip(terms, lists, strict=True)},
        {t: _array("I", [x + 100 for x in v]) for t, v in zip(terms, lists, strict=True)},
    )
    for op, n, values in operations:
        term = f"t{n}"
        tfs = [v + 100 for v in values]
        for which in (0, 1):
            mine, theirs = lazy[which], plain[which]
            wanted = (values, tfs)[which]
            if op == "get":
                got = mine.get(term)
                assert (None if got is None else list(got)) == (
                    None if term not in theirs else list(theirs[term])
                )
            elif op == "add":
                _append(mine, term, wanted)
                _append(theirs, term, wanted)
            elif op == "batch":  # records holding this term and the next, as a tail's
                batch = [(doc, Counter({term: doc + 100, f"t{n + 1}": 1})) for doc in values]
                mine.add_batch(batch)
                for doc, counts in batch:
                    for name, tf in counts.items():
                        _append(theirs, name, [(doc, tf)[which]])
            else:
                assert (term in mine) == (term in theirs)
    for mine, theirs in zip(lazy, plain, strict=True):
        assert len(mine) == len(theirs)
        assert sorted(mine) == sorted(theirs)
        assert {t: list(mine[t]) for t in mine} == {t: list(v) for t, v in theirs.items()}
    assert len(fetched) == len(set(fetched))  # each term read from the file once


@settings(max_examples=150, deadline=None, database=None)
@given(
    st.lists(
        st.floats(0, 50, width=32) | st.sampled_from([0.0, 1e-7, 3.0]), min_size=2, max_size=300
    ),
    st.integers(1, 20),
)
def test_near_top_is_the_sorted_cut(values: list[float], k: int) -> None:
    import numpy as np

    from memlib.rankers import bm25

    total = np.array(values, dtype=np.float32)
    positive = sorted((v for v in total.tolist() if v > 0), reverse=True)
    if len(positive) <= k:
        return  # the caller asks only when more than k records hold a term
    kth = positive[k - 1]
    floor = kth - bm25._MARGIN * max(1.0, abs(kth))
    got = bm25._near_top(np, total, k)
    assert got.tolist() == np.flatnonzero(total >= floor).tolist()


@settings(max_examples=200, deadline=None, database=None)
@given(
    st.lists(  # per doc: (tf of each term, 0 = absent), length, live, day
        st.tuples(
            st.lists(st.integers(0, 3) | st.just(70_000), min_size=3, max_size=3),
            st.integers(3, 40),
            st.booleans(),
            st.integers(0, 9),
        ),
        min_size=1,
        max_size=60,
    ),
    st.integers(1, 8),
    st.sampled_from([0, 2, 8, 10**9]),
    st.sampled_from([64 << 20, 1]),
    st.sampled_from([1e-5, 100.0]),
)
def test_numpy_top_docs_are_the_plain_ones(
    docs: list[tuple[list[int], int, bool, int]],
    limit: int,
    dense_share: int,
    scratch_bytes: int,
    margin: float,
) -> None:
    """bm25's numpy path (dense terms or scattered postings, its scratch kept or let go,
    retracted docs; a margin of 100 puts the floor below 0, letting every doc in) gives
    the plain path's top and scores, cold and warm."""
    from array import array
    from datetime import UTC, datetime

    from memlib.candidates import LexicalPostings
    from memlib.normalize import normalize_recall_query
    from memlib.rankers import bm25

    terms = ("amber", "river", "lantern")
    query = normalize_recall_query(
        " ".join(terms),
        user_scope=SCOPE,
        limit=limit,
        query_id="q",
        issued_at=datetime(2026, 8, 10, tzinfo=UTC),
    )
    live = bytearray(int(alive) for _, _, alive, _ in docs)
    holding = [d for d, (tfs, _, alive, _) in enumerate(docs) if alive and any(tfs)]
    searched = sum(live)
    if not searched:
        return
    scratch: dict[Any, Any] = {}
    view = LexicalPostings(
        terms=terms,
        postings=tuple(
            (
                array("I", [d for d, (tfs, *_) in enumerate(docs) if tfs[t]]),
                array("I", [tfs[t] for tfs, *_ in docs if tfs[t]]),
            )
            for t in range(len(terms))
        ),
        live=live,
        tokens=array("I", [length for _, length, _, _ in docs]),
        content_tokens=array("I", [length for _, length, _, _ in docs]),
        timestamps=array("d", [float(day) for *_, day in docs]),
        ids=[f"m-{d:03d}" for d in range(len(docs))],
        searched_records=searched,
        candidate_records=len(holding),
        retracted_records=len(docs) - searched,
        searched_token_count=sum(n for _, n, alive, _ in docs if alive),
        searched_content_token_count=sum(n for _, n, alive, _ in docs if alive),
        candidate_docs=lambda: holding,
        candidates_of=lambda docs: (),
        scratch=scratch,
    )

    def top(numpy_from: int) -> Any:
        with (
            patch.object(postings, "NUMPY_MIN_POSTINGS", numpy_from),
            patch.object(postings, "NUMPY_IMPORT_POSTINGS", 0),
        ):
            return bm25.bm25_top_docs(query, view, k1=0.6, b=0.25, stopwords=False, limit=limit)

    with (
        patch.object(bm25, "DENSE_SHARE", dense_share),
        patch.object(postings, "SCRATCH_BYTES", scratch_bytes),
        patch.object(bm25, "_MARGIN", margin),
    ):
        plain = top(10**9)
        assert top(0) == plain
        assert top(0) == plain  # warm: from the scratch, when it kept anything
    assert scratch.get("bm25", 0) <= max(scratch_bytes, 4 * 2 * len(docs))


@pytest.mark.parametrize("dense_share", [0, 8, 10**9])
def test_warm_saturations_and_bitsets_follow_appends_and_retractions(
    tmp_path: Any, dense_share: int
) -> None:
    """What bm25 keeps between queries of a warm process (per-term saturations, or a
    dense term's part of every total and its tfs, and candidate bitsets in the index's
    ``scratch``) is never used once an append or a retraction changed what it was derived
    from: every answer is the full scan's."""
    from datetime import UTC, datetime

    from memlib import RecallEngine
    from memlib.rankers import bm25
    from memlib.rankers.bm25 import Bm25Ranker, Bm25StopwordsRanker
    from memlib.stores.jsonl._store import RemoteMemoryStore

    vocabulary = ["amber", "river", "the", "lantern", "quiet", "harbor", "of", "copper"]

    def item(n: int) -> dict[str, Any]:
        words = " ".join(
            vocabulary[(n * k) % len(vocabulary)] for k in (1, 2, 3, 5, 7)[: 2 + n % 4]
        )
        return {
            "kind": "conversation",
            "memory_id": f"m-{n}",
            "content": words,
            "summary": "turn",
            "source": {
                "source_id": f"s-{n}",
                "source_type": "t",
                "title": "t",
                "captured_at": f"2026-08-0{1 + n % 8}T12:00:00Z",
            },
        }

    store = RemoteMemoryStore(tmp_path / "r.jsonl", user_id="alice")
    store.append_many([item(n) for n in range(300)])
    as_of = datetime(2026, 8, 10, tzinfo=UTC)
    queries = ("amber river the", "quiet harbor lantern copper", "the of")

    def check() -> None:
        for ranker in (Bm25Ranker(), Bm25StopwordsRanker()):
            for text in queries:
                fast = RecallEngine(store, ranker=ranker).recall(
                    text, limit=7, as_of=as_of, query_id="q"
                )
                full = RecallEngine(store, ranker=_EveryCandidate(ranker)).recall(
                    text, limit=7, as_of=as_of, query_id="q"
                )
                assert fast.to_json() == full.to_json()

    with (
        patch.object(postings, "NUMPY_MIN_POSTINGS", 0),
        patch.object(postings, "NUMPY_IMPORT_POSTINGS", 0),
        patch.object(bm25, "DENSE_SHARE", dense_share),
    ):
        check()
        assert store.index.scratch  # the warm path kept something
        store.append_many([item(n) for n in range(300, 340)])
        check()
        store.retract("m-3", reason="wrong", source=item(3)["source"])
        check()
        store.append_many([item(n) for n in range(340, 360)])
        check()
        # Longer records holding no query term: the lists stay, the average length moves.
        store.append_many([{**item(n), "content": "zebra " * 40} for n in range(360, 400)])
        check()

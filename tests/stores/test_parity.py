"""Parity, the test that matters most: every backend and every indexed path returns
``to_json()`` byte-identical to the reference scan (SPEC §2, §3.2).

Hypothesis generates corpora — English, Chinese, Japanese, mixed, accents; ties on
purpose (repeated texts, repeated instants, ids that sort differently from append
order); profiles; retractions — and queries. For each example the records go into the
backend under a fresh user scope (one SQLite file and one PostgreSQL schema serve the
whole module), then for every query:

    reference  = scan_recall_candidates(query, store.read_all()) → score → stable rank
    full scan  = store.scan_candidates(query) → score → stable rank   (other rankers' path)
    engine     = RecallEngine(store).recall(...)      (the baseline's bounded top-k walk)

must give the same JSON, with fixed query_id and as_of. At least 300 examples per backend.
"""

from __future__ import annotations

import itertools
import os
import tempfile
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy  # noqa: F401  (loaded, so the forced numpy paths below take it)
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.pgserver import fresh_schema, pg_dsn  # noqa: F401  (fixture)

import memlib._retrieval.postings as postings_module
from memlib import MemoryKind, MemorySource, RecallEngine, open_store
from memlib._retrieval import index_terms
from memlib.candidates import scan_recall_candidates
from memlib.normalize import normalize_recall_query, tokenize
from memlib.rank import stable_rank_recall_candidates
from memlib.result import RecallResult
from memlib.sample import fixed_clock
from memlib.stores._base import MemoryStore

EXAMPLES = 300

WORDS = (
    "memory",
    "layered",
    "sqlite",
    "wal",
    "recall",
    "agent",
    "profile",
    "design",
    "jsonl",
    "append",
    "Memory",
    "MEMORY",
    "café",
    "Torstraße",
    "strasse",
    "москва",
    "메모리",
    "learn-workbuddy",
    "llm记忆",
    "v2_index",
    "42",
    "记忆",
    "分层记忆",
    "远程记忆",
    "设计",
    "大阪出差",
    "酒店",
    "记",
    "メモリ設計",
    "レビュー",
)
INSTANTS = (
    "2026-08-09T12:00:00Z",
    "2026-08-09T12:00:00Z",
    "2026-08-09T12:00:00.5Z",
    "2026-08-01T00:00:00Z",
    "2026-07-15T08:30:00+02:00",
    "2025-12-31T23:59:59.999999Z",
    "2026-08-10T12:00:00Z",
    "2026-09-01T00:00:00Z",  # at and after as_of: recency 1
)
AS_OFS = (
    datetime(2026, 8, 10, 12, 0, tzinfo=UTC),
    datetime(2026, 8, 10, 12, 0, 0, 250_000, tzinfo=UTC),
    datetime(2027, 1, 1, tzinfo=UTC),
)
ID_STEMS = ("a", "b", "m", "z", "m-1", "M", "记忆", "x_9")


def _phrases(
    words: tuple[str, ...], seed: int, longest: int, extra: tuple[str, ...] = ()
) -> tuple[str, ...]:
    """Fixed phrases of 1–``longest`` words (one draw each: generation stays cheap)."""
    import random

    rng = random.Random(seed)
    out = [*words, *extra]
    for _ in range(600):
        out.append(" ".join(rng.choice(words) for _ in range(rng.randint(2, longest))))
    return tuple(out)


PHRASES = _phrases(WORDS, 12, 5)
texts = st.sampled_from(PHRASES)


@st.composite
def _corpora(
    draw: Any, phrases: Any, most_records: int, most_retracted: int, most_queries: int
) -> dict[str, Any]:
    n = draw(st.integers(0, most_records))
    shared_text = draw(phrases)  # reused on purpose: identical records tie on every key
    items = []
    for i in range(n):
        kind = draw(st.sampled_from((MemoryKind.CONVERSATION,) * 4 + (MemoryKind.PROFILE,)))
        summary = shared_text if draw(st.booleans()) else draw(phrases)
        content = shared_text if draw(st.integers(0, 3)) == 0 else draw(phrases)
        stem = draw(st.sampled_from(ID_STEMS))
        items.append(
            {
                "kind": kind,
                "memory_id": f"{stem}{n - i}",  # ids sort unlike append order
                "content": content,
                "summary": summary,
                "source": MemorySource(
                    source_id=f"s-{i}",
                    source_type="conversation_transcript",
                    title=f"t{i}",
                    captured_at=draw(st.sampled_from(INSTANTS)),
                ),
            }
        )
    # Distinct ids (the stem + position already are); retract a subset, in some order.
    ids = [item["memory_id"] for item in items]
    retract = (
        draw(st.lists(st.sampled_from(ids), unique=True, max_size=most_retracted)) if ids else []
    )
    queries = draw(
        st.lists(
            st.tuples(phrases, st.integers(1, 10), st.sampled_from(AS_OFS)),
            min_size=1,
            max_size=most_queries,
        )
    )
    return {"items": items, "retract": retract, "queries": queries}


def corpora() -> Any:
    return _corpora(texts, 14, 3, 2)


def reference_json(
    store: MemoryStore, text: str, limit: int, as_of: datetime, *, full_scan: bool = False
) -> str:
    """The stages by hand over the reference scan, or (``full_scan``) over the store's own
    every-candidate scan, which rankers other than the baseline rely on."""
    query = normalize_recall_query(
        text, user_scope=store.user_scope, limit=limit, query_id="q-parity", issued_at=as_of
    )
    if full_scan:
        scan = store.scan_candidates(query)
    else:
        scan = scan_recall_candidates(query, store.read_all())
    hits = stable_rank_recall_candidates(query, scan.candidates, as_of=as_of)
    return RecallResult(
        query, hits, scan.searched_records, scan.candidate_records, scan.retracted_records
    ).to_json()


def load(store: MemoryStore, corpus: dict[str, Any]) -> None:
    if corpus["items"]:
        store.append_many(corpus["items"])
    retract_source = MemorySource(
        source_id="r",
        source_type="manual_retraction",
        title="r",
        captured_at="2026-08-10T00:00:00Z",
    )
    for target in corpus["retract"]:
        store.retract(target, reason="wrong", source=retract_source)


SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ],
)


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    # Parity is about answers, not durability: on tmpfs when there is one, the fsync of
    # each write costs nothing and the examples run several times faster.
    shm = Path("/dev/shm")
    base = str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="memlib-parity-", dir=base) as folder:
        yield Path(folder)


@pytest.fixture(scope="module")
def backends(workdir: Path, pg_dsn: str) -> Iterator[dict[str, Any]]:  # noqa: F811
    """One SQLite file, one PostgreSQL schema and one connection for the whole module."""
    import psycopg
    from support.pgserver import drop_schema

    name = fresh_schema(pg_dsn)
    conn = psycopg.connect(pg_dsn, autocommit=True)
    try:
        yield {
            "pg_url": f"{pg_dsn}?schema={name}",
            "pg_conn": conn,
            "sqlite_url": f"sqlite:{workdir / 'parity.db'}",
        }
    finally:
        conn.close()
        drop_schema(pg_dsn, name)


def _open_all(
    workdir: Path, backends: dict[str, Any], user: str, **options: Any
) -> dict[str, MemoryStore]:
    return {
        "jsonl": open_store(f"jsonl:{workdir / user / 'records.jsonl'}", user_id=user, **options),
        "sqlite": open_store(backends["sqlite_url"], user_id=user, **options),
        "postgresql": open_store(
            backends["pg_url"], user_id=user, connection=backends["pg_conn"], **options
        ),
    }


@SETTINGS
@given(corpus=corpora(), numpy_path=st.booleans(), staged=st.booleans())
def test_parity_every_backend(
    workdir: Path, backends: dict[str, Any], corpus: dict[str, Any], numpy_path: bool, staged: bool
) -> None:
    """Each example runs on all three backends: 300 examples per backend.

    ``numpy_path`` and ``staged`` take the paths meant for big inputs on small ones:
    numpy counting, and PostgreSQL's batches staged by COPY.
    """
    import memlib.stores.sql._postgres as postgres_module

    user = f"user-{uuid.uuid4().hex}"
    writers = _open_all(workdir, backends, user, clock=fixed_clock())
    readers = _open_all(workdir, backends, user)  # a second client, as after a restart
    saved = postings_module.NUMPY_MIN_POSTINGS
    saved_stage = postgres_module._STAGE_FROM
    postings_module.NUMPY_MIN_POSTINGS = 0 if numpy_path else saved
    postgres_module._STAGE_FROM = 0 if staged else saved_stage
    try:
        for store in writers.values():
            load(store, corpus)
        reference = writers["jsonl"].read_all()
        for name, reader in readers.items():
            assert reader.read_all() == reference, name
            assert reader.latest_profile() == writers["jsonl"].latest_profile(), name
        for text, limit, as_of in corpus["queries"]:
            expected = reference_json(writers["jsonl"], text, limit, as_of)
            for name in writers:
                full = reference_json(writers[name], text, limit, as_of, full_scan=True)
                assert full == expected, name
                top = RecallEngine(readers[name]).recall(
                    text, limit=limit, as_of=as_of, query_id="q-parity"
                )
                assert top.to_json() == expected, name
    finally:
        postings_module.NUMPY_MIN_POSTINGS = saved
        postgres_module._STAGE_FROM = saved_stage
        for store in (*writers.values(), *readers.values()):
            store.close()


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(text=st.text(max_size=60) | st.lists(st.sampled_from(WORDS)).map(" ".join))
def test_index_terms_are_the_tokenizer_terms(text: str) -> None:
    assert index_terms(text) == set(tokenize(text))


def test_large_corpus_takes_the_numpy_path_and_stays_exact(workdir: Path) -> None:
    """A few thousand records: posting lists long enough for numpy, many ties, limit 10."""
    user = f"user-{uuid.uuid4().hex}"
    path = workdir / user / "records.jsonl"
    store = open_store(f"jsonl:{path}", user_id=user, clock=fixed_clock())
    start = datetime(2026, 1, 1, tzinfo=UTC)
    words = ("memory", "layered", "recall", "记忆", "agent", "design", "sqlite")
    items = []
    for i, combo in zip(range(1500), itertools.cycle(itertools.product(words, repeat=3))):
        items.append(
            {
                "kind": "conversation",
                "memory_id": f"r{i:05d}",
                "content": " ".join(combo),
                "summary": combo[0],
                "source": {
                    "source_id": f"s{i}",
                    "source_type": "t",
                    "title": "t",
                    "captured_at": (start + timedelta(hours=i % 97)).isoformat(),
                },
            }
        )
    store.append_many(items)
    for target in ("r00007", "r00100", "r01499"):
        store.retract(
            target,
            reason="x",
            source={
                "source_id": "r",
                "source_type": "t",
                "title": "t",
                "captured_at": "2026-08-01T00:00:00Z",
            },
        )
    as_of = datetime(2026, 1, 5, tzinfo=UTC)
    saved = postings_module.NUMPY_MIN_POSTINGS
    try:
        for threshold in (0, 10**9):  # numpy, then the dict count
            postings_module.NUMPY_MIN_POSTINGS = threshold
            texts = (
                "memory",
                "memory layered recall",
                "记忆 agent",
                "sqlite design layered memory",
            )
            for text in texts:
                for limit in (1, 10):
                    expected = reference_json(store, text, limit, as_of)
                    assert (
                        RecallEngine(store)
                        .recall(text, limit=limit, as_of=as_of, query_id="q-parity")
                        .to_json()
                        == expected
                    )
    finally:
        postings_module.NUMPY_MIN_POSTINGS = saved


# -- lexical rankers scored from the JSONL index's postings (LexicalScanning) ------------

LEXICAL_RANKERS = ("bm25", "bm25+stopwords")
# Stopwords (whole queries of them too) and repeats (tf > 1) next to the words above.
LEXICAL_WORDS = (*WORDS, "the", "of", "and", "is", "to", "a", "memory memory", "记忆 记忆 记忆")


LEXICAL_PHRASES = _phrases(
    LEXICAL_WORDS, 15, 7, extra=("the of", "and the a", "zzz-nothing", "the zzz")
)


def lexical_corpora() -> Any:
    return _corpora(st.sampled_from(LEXICAL_PHRASES), 16, 4, 3)


def lexical_reference_json(
    store: MemoryStore, ranker_name: str, text: str, limit: int, as_of: datetime
) -> str:
    """Today's ranker over the reference scan: every candidate scored, then stage 4."""
    from memlib.rank import rank_scored_candidates
    from memlib.rankers import get_ranker

    ranker = get_ranker(ranker_name)
    query = normalize_recall_query(
        text, user_scope=store.user_scope, limit=limit, query_id="q-parity", issued_at=as_of
    )
    scan = scan_recall_candidates(query, store.read_all())
    breakdowns = ranker.score_candidates(query, scan, as_of=as_of)
    hits = rank_scored_candidates(query, list(zip(scan.candidates, breakdowns, strict=True)))
    return RecallResult(
        query, hits, scan.searched_records, scan.candidate_records, scan.retracted_records
    ).to_json()


def _lexical_answers_match(
    stores: dict[str, MemoryStore], reference: MemoryStore, queries: Any
) -> None:
    from memlib.stores._base import LexicalScanning

    for text, limit, as_of in queries:
        for ranker in LEXICAL_RANKERS:
            expected = lexical_reference_json(reference, ranker, text, limit, as_of)
            for name, store in stores.items():
                assert isinstance(store, LexicalScanning), name
                got = RecallEngine(store, ranker=ranker).recall(
                    text, limit=limit, as_of=as_of, query_id="q-parity"
                )
                assert got.to_json() == expected, (name, ranker, text, limit)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ],
)
@given(corpus=lexical_corpora(), numpy_path=st.booleans())
def test_lexical_rankers_from_the_index_match_the_reference(
    workdir: Path, backends: dict[str, Any], corpus: dict[str, Any], numpy_path: bool
) -> None:
    """bm25 / bm25+stopwords from the index's postings (term frequencies, lengths) give
    the reference's ``to_json()``: the JSONL writer, a new reader, and a reader loaded
    from the index file; SQLite and PostgreSQL writers and new readers; numpy or plain
    Python."""
    from memlib.stores.jsonl._store import RemoteMemoryStore

    user = f"user-{uuid.uuid4().hex}"
    path = workdir / user / "records.jsonl"
    writer = RemoteMemoryStore(path, user_id=user, clock=fixed_clock())
    sql_writers = {
        name: store
        for name, store in _open_all(workdir, backends, user, clock=fixed_clock()).items()
        if name != "jsonl"
    }
    sql_readers = {
        f"{name} reader": store
        for name, store in _open_all(workdir, backends, user).items()
        if name != "jsonl"
    }
    saved = postings_module.NUMPY_MIN_POSTINGS
    postings_module.NUMPY_MIN_POSTINGS = 0 if numpy_path else 10**9
    try:
        load(writer, corpus)
        for store in sql_writers.values():
            load(store, corpus)
        stores: dict[str, MemoryStore] = {
            "writer": writer,
            "reader": RemoteMemoryStore(path, user_id=user),
            **sql_writers,
            **sql_readers,
        }
        if corpus["items"] and writer.write_index_file():
            stores["from index file"] = RemoteMemoryStore(path, user_id=user)
        _lexical_answers_match(stores, writer, corpus["queries"])
    finally:
        postings_module.NUMPY_MIN_POSTINGS = saved
        for store in (*sql_writers.values(), *sql_readers.values()):
            store.close()


def test_lexical_rankers_large_corpus_many_ties(workdir: Path, backends: dict[str, Any]) -> None:
    """Thousands of records, repeated texts (ties on every key), stopwords, retractions:
    the numpy top-k with its margin and the plain-Python path both give the reference,
    from the JSONL index file and from SQLite and PostgreSQL."""
    from memlib.stores.jsonl._store import RemoteMemoryStore

    user = f"user-{uuid.uuid4().hex}"
    path = workdir / user / "records.jsonl"
    store = RemoteMemoryStore(path, user_id=user, clock=fixed_clock())
    sql_stores = {
        name: other
        for name, other in _open_all(workdir, backends, user, clock=fixed_clock()).items()
        if name != "jsonl"
    }
    start = datetime(2026, 1, 1, tzinfo=UTC)
    words = ("memory", "layered", "the", "记忆", "of", "design", "sqlite")
    items = []
    for i, combo in zip(range(2500), itertools.cycle(itertools.product(words, repeat=4))):
        items.append(
            {
                "kind": "conversation",
                "memory_id": f"r{i:05d}",
                "content": " ".join(combo),
                "summary": combo[i % 4],
                "source": {
                    "source_id": f"s{i}",
                    "source_type": "t",
                    "title": "t",
                    "captured_at": (start + timedelta(hours=i % 41)).isoformat(),
                },
            }
        )
    for target_store in (store, *sql_stores.values()):
        target_store.append_many(items)
        for target in ("r00007", "r00100", "r02499"):
            target_store.retract(
                target,
                reason="x",
                source={
                    "source_id": "r",
                    "source_type": "t",
                    "title": "t",
                    "captured_at": "2026-08-01T00:00:00Z",
                },
            )
    store.write_index_file()
    queries = [
        (text, limit, datetime(2026, 1, 2, tzinfo=UTC))
        for text in (
            "memory",
            "memory layered the",
            "记忆 of",
            "the",
            "the of",
            "sqlite design layered memory 记忆",
            "the zzz",
            "zzz",
        )
        for limit in (1, 3, 10)
    ]
    saved = postings_module.NUMPY_MIN_POSTINGS
    try:
        for threshold in (0, 10**9):
            postings_module.NUMPY_MIN_POSTINGS = threshold
            _lexical_answers_match(
                {
                    "writer": store,
                    "from index file": RemoteMemoryStore(path, user_id=user),
                    **sql_stores,
                },
                store,
                queries,
            )
    finally:
        postings_module.NUMPY_MIN_POSTINGS = saved
        for other in sql_stores.values():
            other.close()

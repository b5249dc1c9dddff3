"""[beyond] Pair vectors end to end (docs/retrieval.md, step j): what a store keeps, what
``memlib embed`` fills in, what ``hybrid`` makes of them, and the evaluation's own path.

Each searched conversation record's stored vector must be the embedding of its pair text
(the turn before it in its source + the turn) as the reference neighbours say, after
batches, single appends, retractions and supersedes, on every backend. The store-level
rules (a stale pair refused, a successor's pair dropped with a retraction) have their
own tests per backend (tests/stores/test_*_pair_vectors.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.locations import BACKENDS, Location, location
from support.pgserver import pg_dsn, pg_url  # noqa: F401  (fixtures)

from memlib import MemoryKind, MemorySource, RecallEngine, RemoteMemoryValidationError, open_store
from memlib._vectors import DenseScores, pair_text
from memlib.cli import main
from memlib.eval.locomo import ConversationVectors, LocomoConversation, LocomoQuestion, rank_hits
from memlib.normalize import normalize_recall_query
from memlib.rankers.embeddings import (
    E5_PAIR_DEVIATION,
    E5_PAIR_MEAN,
    HashingEmbedder,
    PairEmbedder,
    get_embedder,
)
from memlib.rankers.hybrid import PAIR_BM25_WEIGHT, PAIR_CONTEXT_WEIGHT, HybridRanker
from memlib.records import user_scope_for
from memlib.sample import SAMPLE_AS_OF, fixed_clock, scope_path
from memlib.stores._sources import source_neighbours_of

TURNS = HashingEmbedder(64)
PAIRS = PairEmbedder(TURNS)
WORDS = [
    "garden",
    "tomato",
    "rain",
    "hiking",
    "trail",
    "coffee",
    "jazz",
    "piano",
    "lesson",
    "paris",
    "train",
    "ticket",
    "cake",
    "sister",
    "dog",
    "vet",
    "museum",
    "novel",
]
RETRACTION = {
    "source_id": "r",
    "source_type": "manual_retraction",
    "title": "r",
    "captured_at": "2026-08-20T00:00:00Z",
}


@pytest.fixture(params=BACKENDS)
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Location]:
    yield from location(request, tmp_path)


def turn(n: int, session: int) -> dict[str, Any]:
    text = f"we {WORDS[n % len(WORDS)]} {WORDS[(5 * n + 3) % len(WORDS)]}"
    return {
        "kind": MemoryKind.CONVERSATION,
        "memory_id": f"t-{n}",
        "content": text,
        "summary": text,
        "source": MemorySource(
            source_id=f"session-{session}",
            source_type="transcript",
            title=f"Session {session}",
            captured_at=f"2026-08-{1 + n % 27:02d}T12:00:00Z",
        ),
    }


def history(store: Any) -> None:
    """Two sessions interleaved in batches, single appends, a retraction, a supersede."""
    store.append_many([turn(n, 1 + n % 2) for n in range(8)])
    store.append(**turn(8, 1))
    store.append_many([turn(9, 2), turn(10, 1)])
    store.retract("t-4", reason="not so", source=RETRACTION)  # a middle turn of session 1
    store.supersede("t-3", turn(11, 2), reason="corrected")  # session 2 loses t-3
    store.retract("t-10", reason="not so", source=RETRACTION)  # the last turn of session 1


def expected_vectors(store: Any) -> dict[str, Any]:
    """Each searched record's pair vector, from the reference neighbours."""
    records = store.read_all()
    content = {r.memory_id: r.content for r in records}
    around = source_neighbours_of(records, list(content))
    return {
        m: PAIRS.encode([pair_text(content.get(n.previous or ""), content[m])])[0]
        for m, n in around.items()
    }


def stored_scores(store: Any, probe: Any) -> dict[str, float]:
    query = normalize_recall_query("probe", user_scope=store.user_scope, limit=1)
    scores = store.dense_scores(query, probe, model=PAIRS.name, dimension=PAIRS.dimension)
    assert scores.missing == 0
    return {m: float(s) for m, s in zip(scores.ids, scores.scores, strict=True)}


def assert_pairs_stored(store: Any) -> None:
    expected = expected_vectors(store)
    for seed in (1, 2):
        probe = np.random.default_rng(seed).standard_normal(PAIRS.dimension).astype(np.float32)
        got = stored_scores(store, probe)
        assert got.keys() == expected.keys()
        for memory_id, vector in expected.items():
            assert got[memory_id] == pytest.approx(float(vector @ probe), abs=1e-5), memory_id


def test_a_store_with_a_pair_embedder_keeps_each_turn_with_the_one_before(opener: Location) -> None:
    store = opener("alice", embedder=PAIRS)
    history(store)
    assert store.vector_state().model == "memlib-hashing-64+pair"
    assert_pairs_stored(store)
    # t-5 followed t-3 in session 2 until the supersede: its pair now reads t-1.
    assert store.source_neighbours(["t-5"])["t-5"].previous == "t-1"
    assert_pairs_stored(opener("alice"))  # a new store object, from disk


def test_embed_fills_pairs_and_refills_a_successor_a_retraction_emptied(
    opener: Location, capsys: pytest.CaptureFixture[str]
) -> None:
    url = opener.url_for("alice")
    plain = opener("alice")
    plain.append_many([turn(n, 1 + n % 2) for n in range(8)])
    assert (
        main(
            [
                "--store",
                url,
                "--user",
                "alice",
                "--embedder",
                "hashing+pair",
                "embed",
                "--batch-size",
                "3",
            ]
        )
        == 0
    )
    assert "embedded 8 records with memlib-hashing-64+pair" in capsys.readouterr().out
    assert_pairs_stored(opener("alice"))
    plain.retract("t-2", reason="not so", source=RETRACTION)  # no embedder: t-4 left empty
    state = opener("alice").vector_state()
    assert (state.stored, state.missing) == (6, 1)
    assert main(["--store", url, "--user", "alice", "embed"]) == 0  # the recorded model
    assert "embedded 1 records" in capsys.readouterr().out
    assert_pairs_stored(opener("alice"))


def test_hybrid_reads_a_pair_and_the_next_pair(opener: Location) -> None:
    store = opener("alice", embedder=PAIRS)
    history(store)
    result = RecallEngine(store, ranker="hybrid").recall(
        "we garden rain", limit=5, as_of=SAMPLE_AS_OF, query_id="q"
    )
    assert result.hits
    expected = expected_vectors(store)
    around = store.source_neighbours([h.memory_id for h in result.hits])
    question = PAIRS.encode_query(["we garden rain"])[0]
    for hit in result.hits:
        parts = {s.name: s for s in hit.score_breakdown.signals}
        cosine = float(expected[hit.memory_id] @ question)
        after = around[hit.memory_id].next
        following = cosine if after is None else float(expected[after] @ question)
        assert parts["cosine"].value == pytest.approx(cosine, abs=1e-5)
        assert parts["next_cosine"].value == pytest.approx(following, abs=1e-5)
        assert parts["dense"].value == pytest.approx(
            (cosine + following) / 2 / (4 * 0.25), abs=1e-5
        )
        assert (parts["bm25"].weight, parts["context"].weight) == (
            PAIR_BM25_WEIGHT,
            PAIR_CONTEXT_WEIGHT,
        )
        assert parts["dense"].weight == pytest.approx(1 - PAIR_BM25_WEIGHT)


def test_pair_answers_are_identical_on_every_backend(
    tmp_path: Path,
    pg_url: str,  # noqa: F811
) -> None:
    urls = (f"jsonl:{scope_path(tmp_path, 'alice')}", f"sqlite:{tmp_path / 'm.db'}", pg_url)
    stores = [open_store(u, user_id="alice", clock=fixed_clock(), embedder=PAIRS) for u in urls]
    for store in stores:
        history(store)
    for text in ("we garden rain", "we jazz piano", "dog vet museum"):
        answers = {
            RecallEngine(store, ranker="hybrid")
            .recall(text, limit=6, as_of=SAMPLE_AS_OF, query_id="q")
            .to_json()
            for store in stores
        }
        assert len(answers) == 1, text
    for store in stores:
        store.close()


def test_the_evaluation_reads_pairs_as_a_store_does(tmp_path: Path) -> None:
    """``memlib eval`` scores through ``ConversationVectors``: the same hits as a store."""
    items = [turn(n, 1 + n % 3) for n in range(30)]
    store = open_store(
        f"jsonl:{scope_path(tmp_path, 'alice')}",
        user_id="alice",
        clock=fixed_clock(),
        embedder=PAIRS,
    )
    records = store.append_many(items)
    conversation = LocomoConversation(
        sample_id="c",
        user_scope=user_scope_for("alice"),
        records=records,
        questions=(),
        as_of=SAMPLE_AS_OF,
    )
    index = ConversationVectors(records, PAIRS)
    ranker = HybridRanker(model=PAIRS)
    for n, text in enumerate(("we garden rain", "we jazz piano", "museum novel dog")):
        question = LocomoQuestion(question_id=f"q{n}", question=text, category=1, evidence=("t-1",))
        hits = rank_hits(ranker, index, conversation, question, 5)
        via_store = RecallEngine(store, ranker=ranker).recall(
            text, limit=5, as_of=SAMPLE_AS_OF, query_id=f"q{n}"
        )
        assert [h.to_dict() for h in hits] == [h.to_dict() for h in via_store.hits], text


def test_pair_vectors_without_neighbours_are_refused_in_one_line() -> None:
    ranker = HybridRanker(model=PAIRS)
    with pytest.raises(RemoteMemoryValidationError, match="turn before"):
        ranker.score_stored(
            normalize_recall_query("we garden", user_scope=user_scope_for("a"), limit=3),
            lambda q, terms: _empty_postings(q),
            lambda *a, **k: DenseScores([], np.zeros(0), 0),
            lambda ids: [],
            embedder=PAIRS,
            as_of=SAMPLE_AS_OF,
            limit=3,
        )


def _empty_postings(query: Any) -> Any:
    from memlib._retrieval import InvertedIndex, lexical_from_index

    return lexical_from_index(InvertedIndex(), query, [], lambda docs: [])


def test_pair_embedder_names() -> None:
    e5 = get_embedder("e5-pair")
    assert isinstance(e5, PairEmbedder)
    assert (e5.name, e5.dimension) == ("multilingual-e5-small+pair", 384)
    assert (e5.similarity_mean, e5.similarity_deviation) == (E5_PAIR_MEAN, E5_PAIR_DEVIATION)
    assert get_embedder("multilingual-e5-small+pair").name == e5.name
    assert get_embedder("hashing+pair").name == "memlib-hashing-64+pair"
    with pytest.raises(RemoteMemoryValidationError, match="pairs of pairs"):
        get_embedder("e5-pair+pair")
    with pytest.raises(RemoteMemoryValidationError, match="unknown embedder"):
        get_embedder("+pair")


def test_the_suggested_floor_follows_the_stores_vectors(opener: Location) -> None:
    pairs = opener("alice", embedder=PAIRS)
    pairs.append_many([turn(n, 1) for n in range(3)])
    turns = opener("bob", embedder=TURNS)
    turns.append_many([turn(n, 1) for n in range(3)])
    ranker = HybridRanker()
    assert RecallEngine(pairs, ranker="hybrid", min_score="suggested").min_score == (
        ranker.pair_suggested_min_score
    )
    assert (
        RecallEngine(
            opener("alice"),
            ranker="hybrid",  # no embedder: the recorded model
            min_score="suggested",
        ).min_score
        == ranker.pair_suggested_min_score
    )
    assert RecallEngine(turns, ranker="hybrid", min_score="suggested").min_score == (
        ranker.suggested_min_score
    )
    result = RecallEngine(pairs, ranker="hybrid").recall(
        "we garden", as_of=SAMPLE_AS_OF, query_id="q", min_score="suggested"
    )
    assert result.min_score == ranker.pair_suggested_min_score
    assert ranker.pair_suggested_min_score != ranker.suggested_min_score


def test_the_pair_floor_is_the_calibrated_one() -> None:
    report = json.loads(
        (
            Path(__file__).resolve().parents[2] / "reports" / "abstention-pairs-dev-split.json"
        ).read_text(encoding="utf-8")
    )
    assert report["embedder"] == "e5-pair"
    assert report["suggested_floors"]["hybrid"] == HybridRanker().pair_suggested_min_score


def test_a_scan_cannot_serve_pair_vectors(tmp_path: Path) -> None:
    """The reference path scores a scan, which knows no record's turn before."""
    store = open_store(
        f"jsonl:{scope_path(tmp_path, 'alice')}", user_id="alice", clock=fixed_clock()
    )
    store.append_many([turn(n, 1) for n in range(3)])
    query = normalize_recall_query("we garden", user_scope=store.user_scope, limit=3)
    ranker = HybridRanker(model=PAIRS)
    assert ranker.reads_pairs and not HybridRanker(model=TURNS).reads_pairs
    with pytest.raises(RemoteMemoryValidationError, match="store that keeps them"):
        ranker.score_candidates(query, store.scan_candidates(query), as_of=SAMPLE_AS_OF)


def test_a_backend_that_keeps_no_vectors_refuses_pairs_before_writing() -> None:
    """A backend of one's own (``read_all`` and ``_append_batch``, no vectors) opened with
    a pair embedder says so in one line, and nothing of the batch is written."""
    from memlib.stores._base import BaseMemoryStore

    class ListStore(BaseMemoryStore):
        backend = "list"

        def __init__(self, **options: Any) -> None:
            super().__init__(**options)
            self.rows: list[Any] = []

        def read_all(self) -> tuple[Any, ...]:
            return tuple(self.rows)

        def _append_batch(self, batch: Any, vectors: Any = None) -> None:
            self.rows.extend(batch)

    plain = ListStore(user_id="u", clock=fixed_clock(), embedder=TURNS)
    plain.append(**turn(0, 1))  # turn vectors: a backend may ignore them, as before
    assert [r.memory_id for r in plain.read_all()] == [turn(0, 1)["memory_id"]]
    store = ListStore(user_id="u", clock=fixed_clock(), embedder=PAIRS)
    with pytest.raises(
        RemoteMemoryValidationError,
        match=r"pair vectors \(.*\+pair\) need a store that keeps vectors "
        r".*ListStore does not",
    ):
        store.append(**turn(0, 1))
    assert store.read_all() == ()

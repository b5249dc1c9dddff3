"""Leave one conversation out (``memlib.eval.crossval``): every figure is the folds'.

Run on the packaged Chinese check set (two conversations) with ``bm25``, whose grid is
k1 x b: what is checked is the protocol — each fold's choice is the best on the other
conversation, CV is the mean of the held-out figures, the interval holds it and does
not move between runs — not the figures themselves.
"""

from __future__ import annotations

from typing import Any

import pytest

from memlib.eval.crossval import (
    BOOTSTRAP_SAMPLES,
    bootstrap_interval,
    cross_validate,
    format_crossval,
)
from memlib.eval.locomo import evaluate_ranker, load_locomo
from memlib.rankers import get_ranker
from memlib.rankers.bm25 import Bm25Ranker
from memlib.sample import chinese_check_set_path


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    return cross_validate(load_locomo(chinese_check_set_path()), "bm25")


def test_each_fold_chooses_on_the_other_conversation_and_cv_is_their_mean(report) -> None:
    conversations = load_locomo(chinese_check_set_path())
    assert [f["held_out"] for f in report["folds"]] == [c.sample_id for c in conversations]
    base = get_ranker("bm25")
    assert isinstance(base, Bm25Ranker)
    for fold, train in zip(report["folds"], reversed(conversations), strict=True):
        # Every setting measured again on the training conversation, each once.
        r10 = [
            evaluate_ranker([train], base.with_params(**p))["overall"]["R@10"]
            for p in report["grid"]
        ]
        assert fold["train"] == r10[report["grid"].index(fold["chosen"])] == max(r10)
    held = [f["held_out_metrics"]["R@10"] for f in report["folds"]]
    assert report["cross_validated"]["R@10"] == round(sum(held) / len(held), 4)


def test_the_interval_holds_the_figure_and_is_the_same_every_run(report) -> None:
    low, high = report["cross_validated"]["R@10_interval_95"]
    assert low < report["cross_validated"]["R@10"] < high
    assert high - low > 0.02  # 69 questions: far from exact
    again = cross_validate(load_locomo(chinese_check_set_path()), "bm25")
    assert again["cross_validated"]["R@10_interval_95"] == [low, high]
    line = next(x for x in format_crossval({"bm25": report}).splitlines() if x.startswith("bm25 "))
    assert f"{low:.3f}-{high:.3f}" in line


def test_bootstrap_interval_of_constant_folds_is_the_constant_and_narrows_with_data() -> None:
    assert bootstrap_interval([[0.5] * 10, [0.5] * 3]) == [0.5, 0.5]
    few = [[0.0, 1.0] * 5, [1.0, 0.0, 1.0] * 3]
    many = [[0.0, 1.0] * 500, [1.0, 0.0, 1.0] * 300]
    (a, b), (c, d) = bootstrap_interval(few), bootstrap_interval(many)
    assert d - c < b - a
    assert a < (0.5 + 2 / 3) / 2 < b
    assert BOOTSTRAP_SAMPLES >= 1000

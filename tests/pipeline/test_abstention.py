"""Score-floor calibration (``benchmarks/abstention.py``): figures by hand, then on tiny
LoCoMo-format conversations written here (never the real data).

The hand-made ``QuestionScores`` make every figure checkable on paper; the conversations
check what only ranking can show: own recalls are ``rank_question``'s, the unfloored row
is ``evaluate_ranker``'s, a foreign recall searches the next conversation (the last
wraps to the first) and, with no shared word, has no candidate and abstains.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.abstention import (
    QuestionScores,
    abstention_curve,
    cross_validate,
    curve_from_scores,
    figures_at,
    floor_grid,
    headline_questions,
    questions_of,
    round_down_2sig,
    score_questions,
    suggest_floor,
    top_scores,
)
from memlib.errors import RemoteMemoryValidationError
from memlib.eval.locomo import (
    ConversationIndex,
    LocomoConversation,
    evaluate_ranker,
    parse_locomo,
    rank_hits,
    rank_question,
)
from memlib.rankers import get_ranker

ROOT = Path(__file__).resolve().parents[2]

# -- by hand ------------------------------------------------------------------------------

HAND = (
    QuestionScores(evidence=2, found=(5.0, 2.0), own_top=5.0, foreign_top=3.0),
    QuestionScores(evidence=1, found=(), own_top=4.0, foreign_top=None),  # no foreign hit
    QuestionScores(evidence=2, found=(1.0,), own_top=6.0, foreign_top=1.5),
)


def _row(floor: float | None, foreign: float, r10: float, h10: float, own: float) -> dict:
    return {
        "floor": floor,
        "foreign_abstain": foreign,
        "own_r10": r10,
        "own_h10": h10,
        "own_abstain": own,
    }


def test_figures_at_each_floor_by_hand() -> None:
    # No floor: only the recall with no foreign candidate abstains; R@10 = (1 + 0 + ½) / 3.
    assert figures_at(HAND, None) == _row(None, 0.3333, 0.5, 0.6667, 0.0)
    # 2.0 drops the third question's only evidence hit (1.0) and its foreign top (1.5).
    assert figures_at(HAND, 2.0) == _row(2.0, 0.6667, 0.3333, 0.3333, 0.0)
    # A hit scoring exactly the floor is kept (foreign 3.0 at 3.0); evidence 2.0 is not.
    assert figures_at(HAND, 3.0) == _row(3.0, 0.6667, 0.1667, 0.3333, 0.0)
    assert figures_at(HAND, 5.5) == _row(5.5, 1.0, 0.0, 0.0, 0.6667)


def test_a_floor_above_every_score_abstains_on_everything() -> None:
    above = max(top_scores(HAND)) + 0.5
    curve = curve_from_scores("hand", HAND, floors=[above])
    assert curve["rows"][-1] == _row(above, 1.0, 0.0, 0.0, 1.0)


def test_the_curve_starts_with_the_unfloored_row() -> None:
    curve = curve_from_scores("hand", HAND, floors=[3.0, 2.0, 3.0])
    assert [r["floor"] for r in curve["rows"]] == [None, 2.0, 3.0]  # sorted, no repeat
    assert curve["rows"][0] == curve["unfloored"] == figures_at(HAND, None)
    assert curve["n"] == 3 and curve["ranker"] == "hand"


def test_the_grid_is_quantiles_of_top_scores_and_round_numbers() -> None:
    assert top_scores(HAND) == [1.5, 3.0, 4.0, 5.0, 6.0]  # the foreign None is no score
    grid = floor_grid(HAND)
    assert grid == sorted(set(grid))
    assert grid[0] == 1.5 and grid[-1] == 6.0  # the 0 % and 100 % quantiles
    # Top scores up to 6 give round numbers in steps of 0.1, free of float noise.
    assert {1.5, 2.3, 4.4, 6.0} <= set(grid) and 2.3000000000000003 not in grid
    assert len(grid) == 46
    assert floor_grid([QuestionScores(1, (), None, None)]) == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0.5234, 0.52),
        (7.83, 7.8),
        (0.52, 0.52),
        (5.960509, 5.9),
        (123.4, 120.0),
        (0.0999, 0.099),
        (0.0, 0.0),
        (-0.0123, -0.013),
        (9.99, 9.9),
    ],
)
def test_round_down_to_two_significant_digits(value: float, expected: float) -> None:
    assert round_down_2sig(value) == expected


# Unfloored R@10 = (1 + 1 + 1 + 0) / 4 = 0.75. Above 0.45 the third question keeps one of
# its two turns (0.625); above 0.6379 the second loses its turn (0.375).
SUGGEST = (
    QuestionScores(evidence=1, found=(0.8,), own_top=0.8, foreign_top=0.7),
    QuestionScores(evidence=1, found=(0.6379,), own_top=0.6379, foreign_top=0.5),
    QuestionScores(evidence=2, found=(0.9, 0.45), own_top=0.9, foreign_top=None),
    QuestionScores(evidence=1, found=(), own_top=0.3, foreign_top=0.62),
)


def test_the_suggestion_is_the_largest_keeping_floor_rounded_down() -> None:
    curve = curve_from_scores("hand", SUGGEST, floors=[0.5, 0.6, 0.7])
    suggestion = suggest_floor(curve, keep=0.8)
    # 0.6379 keeps 0.625 / 0.75 ≥ 0.8; rounded to the nearest (0.64) it would not.
    assert suggestion["largest_floor"] == 0.6379
    assert suggestion["floor"] == 0.63
    assert suggestion["largest_grid_floor"] == 0.6
    # Figures recomputed at 0.63: foreign tops 0.5, None and 0.62 abstain; 0.3 own too.
    assert suggestion["foreign_abstain"] == 0.75 and suggestion["own_abstain"] == 0.25
    assert suggestion["own_r10"] == 0.625 and suggestion["own_r10_unfloored"] == 0.75
    assert suggestion["own_r10_ratio"] == 0.8333
    assert {k: suggestion[k] for k in figures_at(SUGGEST, 0.63)} == figures_at(SUGGEST, 0.63)
    # Keeping everything leaves the lowest evidence score as the largest floor.
    assert suggest_floor(curve, keep=1.0)["floor"] == 0.45


def test_leave_one_conversation_out_by_hand() -> None:
    curve = curve_from_scores("hand", SUGGEST, conversations=[("a", 2), ("b", 2)])
    checked = cross_validate(curve, keep=0.8)
    first, second = checked["folds"]
    # Chosen on questions 3-4 (R@10 0.5, keep 0.4): 0.45; questions 1-2 keep everything.
    assert first == {
        "held_out": "a",
        "floor": 0.45,
        "n": 2,
        "foreign_abstain": 0.0,
        "own_r10": 1.0,
        "own_h10": 1.0,
        "own_abstain": 0.0,
        "own_r10_unfloored": 1.0,
        "own_r10_ratio": 1.0,
    }
    # Chosen on questions 1-2 (R@10 1.0, keep 0.8): 0.6379 → 0.63, which drops 0.45.
    assert second == {
        "held_out": "b",
        "floor": 0.63,
        "n": 2,
        "foreign_abstain": 1.0,
        "own_r10": 0.25,
        "own_h10": 0.5,
        "own_abstain": 0.5,
        "own_r10_unfloored": 0.5,
        "own_r10_ratio": 0.5,
    }
    # Pooled: (1 + 1 + ½ + 0) / 4 against 0.75 unfloored.
    assert checked["pooled"] == {
        "foreign_abstain": 0.5,
        "own_r10": 0.625,
        "own_h10": 0.75,
        "own_abstain": 0.25,
        "own_r10_unfloored": 0.75,
        "own_r10_ratio": 0.8333,
    }
    with pytest.raises(RemoteMemoryValidationError, match="2\\+ conversations"):
        cross_validate(curve_from_scores("hand", SUGGEST))
    with pytest.raises(RemoteMemoryValidationError, match="do not add up"):
        curve_from_scores("hand", SUGGEST, conversations=[("a", 3)])


def test_no_suggestion_without_evidence_found_and_bad_keep() -> None:
    nothing = curve_from_scores("hand", [QuestionScores(1, (), 1.0, 2.0)])
    suggestion = suggest_floor(nothing)
    assert suggestion["floor"] is None and suggestion["own_r10_ratio"] is None
    with pytest.raises(RemoteMemoryValidationError, match="keep"):
        suggest_floor(curve_from_scores("hand", SUGGEST), keep=1.5)


# -- on tiny conversations ----------------------------------------------------------------


def _sample(
    sample_id: str,
    speakers: tuple[str, str],
    lines: list[str],
    qa: list[tuple[str, list[str], int]],
) -> dict[str, Any]:
    turns = [
        {"speaker": speakers[i % 2], "dia_id": f"D1:{i + 1}", "text": text}
        for i, text in enumerate(lines)
    ]
    return {
        "sample_id": sample_id,
        "conversation": {
            "speaker_a": speakers[0],
            "speaker_b": speakers[1],
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": turns,
        },
        "qa": [
            {"question": q, "answer": "x", "evidence": ev, "category": cat} for q, ev, cat in qa
        ],
    }


def tiny_conversations() -> tuple[LocomoConversation, ...]:
    return parse_locomo(
        [
            _sample(
                "conv-a",
                ("Ann", "Bob"),
                [
                    "Hi Bob, how was your week?",
                    "I adopted a puppy named Biscuit.",
                    "My pottery teacher moved to Lisbon.",
                    "I practise the violin every evening.",
                ],
                [
                    ("Bob's puppy name?", ["D1:2"], 4),
                    ("Where did the pottery teacher move?", ["D1:3"], 4),
                    ("Which puppy and which teacher came up?", ["D1:2", "D1:3"], 1),
                    ("What did Bob adopt?", ["D1:2"], 5),  # adversarial: not a headline question
                ],
            ),
            _sample(
                "conv-b",
                ("Cat", "Dan"),
                ["Our sailing teacher lives in Lisbon.", "The boat needs new sails before summer."],
                [("Where does the sailing teacher live?", ["D1:1"], 4)],
            ),
            _sample(
                "conv-c",
                ("Eve", "Fay"),
                ["I ran my first marathon in April.", "I will play violin at the spring concert."],
                [("Who plays violin at the concert?", ["D1:2"], 4)],
            ),
        ]
    )


def test_own_recalls_are_rank_questions_and_found_are_evidence_scores() -> None:
    conversations = tiny_conversations()
    ranker = get_ranker("bm25+stopwords")
    scores = score_questions(conversations, ranker)
    flat = [(c, q) for c in conversations for q in headline_questions(c)]
    assert len(scores) == len(flat) == 5  # the category-5 question is left out
    for (conversation, question), got in zip(flat, scores, strict=True):
        index = ConversationIndex(conversation.records)
        hits = rank_hits(ranker, index, conversation, question, 10)
        assert tuple(h.memory_id for h in hits) == rank_question(
            ranker, index, conversation, question, 10
        )
        assert got.found == tuple(h.score for h in hits if h.memory_id in question.evidence)
        assert got.own_top == hits[0].score and got.evidence == len(question.evidence)


def test_foreign_recalls_search_the_next_conversation_and_wrap_around() -> None:
    scores = score_questions(tiny_conversations(), "bm25+stopwords")
    # conv-a's questions go to conv-b, whose "sailing teacher" is the only shared word.
    assert scores[0].foreign_top is None  # bob, puppy, name: no candidate in conv-b
    assert scores[1].foreign_top > 0 and scores[2].foreign_top > 0  # type: ignore[operator]
    # conv-b's question goes to conv-c, which shares only "the": a candidate that a
    # ranker ignoring stopwords scores 0.
    assert scores[3].foreign_top == 0
    # conv-c's question goes back to conv-a, which mentions the violin; conv-b does not.
    assert scores[4].foreign_top > 0  # type: ignore[operator]
    # With no floor only the recall with no candidate abstains; any floor drops a 0.
    assert figures_at(scores, None)["foreign_abstain"] == 0.2
    assert figures_at(scores, 1e-6)["foreign_abstain"] == 0.4


@pytest.mark.parametrize("name", ["baseline", "bm25"])
def test_the_unfloored_row_is_evaluate_rankers_figure(name: str) -> None:
    conversations = tiny_conversations()
    calls: list[int] = []
    curve = abstention_curve(conversations, name, progress=calls.append)
    overall = evaluate_ranker(conversations, name, ks=(10,))["overall"]
    assert curve["unfloored"]["own_r10"] == overall["R@10"]
    assert curve["unfloored"]["own_h10"] == overall["H@10"]
    assert curve["n"] == overall["n"] == len(calls) == 5 and set(calls) == {1}
    assert curve["conversations"] == [
        {"sample_id": "conv-a", "questions": 3},
        {"sample_id": "conv-b", "questions": 1},
        {"sample_id": "conv-c", "questions": 1},
    ]
    # Every floor in the grid keeps at most what no floor keeps, and the curve falls.
    r10 = [r["own_r10"] for r in curve["rows"][1:]]
    assert r10 == sorted(r10, reverse=True) and r10[0] <= overall["R@10"]
    # The best top score is a floor (the 100 % quantile) where a recall still keeps a hit;
    # the round numbers past it abstain on everything.
    best = max(top_scores(questions_of(curve)))
    (at_best,) = [r for r in curve["rows"] if r["floor"] == best]
    assert min(at_best["own_abstain"], at_best["foreign_abstain"]) < 1.0
    assert all(
        r["own_abstain"] == r["foreign_abstain"] == 1.0
        for r in curve["rows"]
        if r["floor"] is not None and r["floor"] > best
    )


def test_the_curve_survives_json_and_suggests_the_same() -> None:
    curve = abstention_curve(tiny_conversations(), "bm25")
    loaded = json.loads(json.dumps(curve))
    assert loaded == curve
    assert questions_of(loaded) == score_questions(tiny_conversations(), "bm25")
    assert suggest_floor(loaded, keep=0.5) == suggest_floor(curve, keep=0.5)


def test_hybrid_with_the_hashing_embedder_matches_evaluate_ranker() -> None:
    pytest.importorskip("numpy")
    from memlib.rankers.embeddings import HashingEmbedder
    from memlib.rankers.hybrid import HybridRanker

    ranker = HybridRanker(model=HashingEmbedder())
    conversations = tiny_conversations()
    curve = abstention_curve(conversations, ranker)
    overall = evaluate_ranker(conversations, ranker, ks=(10,))["overall"]
    assert curve["ranker"] == "hybrid" and curve["unfloored"]["own_r10"] == overall["R@10"]
    # The dense path reaches every record, so no foreign recall lacks a candidate.
    assert all(q.foreign_top is not None for q in questions_of(curve))


def test_one_conversation_is_refused() -> None:
    with pytest.raises(RemoteMemoryValidationError, match="at least 2 conversations"):
        score_questions(tiny_conversations()[:1], "bm25")


def _benchmark(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.abstention", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_benchmark_writes_a_report_it_can_reread(tmp_path: Path) -> None:
    data = tmp_path / "tiny.json"
    data.write_text(
        json.dumps([_sample("conv-x", ("A", "B"), ["puppy Biscuit"], [("puppy?", ["D1:1"], 4)])]),
        encoding="utf-8",
    )
    out = tmp_path / "report.json"
    refused = _benchmark("--rankers", "bm25", "--data", str(data), "--out", str(out))
    assert refused.returncode == 2 and not out.exists()
    assert refused.stderr.strip().splitlines() == [
        "error: abstention needs at least 2 conversations (foreign recalls use the next one)"
    ]
    refused = _benchmark("--data", str(data), "--out", str(out), "--keep", "2")
    assert refused.returncode == 2 and refused.stderr.startswith("error: keep must be in")
    samples = [
        _sample(
            "conv-a",
            ("Ann", "Bob"),
            ["I adopted a puppy named Biscuit.", "The teacher moved to Lisbon."],
            [
                ("What is the puppy's name?", ["D1:1"], 4),
                ("Where did the teacher move?", ["D1:2"], 4),
            ],
        ),
        _sample(
            "conv-b",
            ("Cat", "Dan"),
            ["Our teacher sails a boat."],
            [("Who sails a boat?", ["D1:1"], 4)],
        ),
    ]
    data.write_text(json.dumps(samples), encoding="utf-8")
    done = _benchmark(
        "--rankers", "baseline", "bm25", "--data", str(data), "--out", str(out), "--quiet"
    )
    assert done.returncode == 0, done.stderr[-2000:]
    printed = done.stdout
    report = json.loads(out.read_text(encoding="utf-8"))
    assert list(report["rankers"]) == ["baseline", "bm25"]
    for name, entry in report["rankers"].items():
        assert entry["suggestion"] == suggest_floor(entry["curve"], report["keep"])
        assert entry["cross_validated"] == cross_validate(entry["curve"], report["keep"])
        assert report["suggested_floors"][name] == entry["suggestion"]["floor"]
        assert f"{name} (n = 3)" in printed
    assert "<- suggested" in printed and report["data"]["questions"] == 3


def _floors(name: str) -> dict[str, Any]:
    floors: dict[str, Any] = json.loads(
        (ROOT / "reports" / f"{name}.json").read_text(encoding="utf-8")
    )["suggested_floors"]
    return floors


def test_the_rankers_suggest_the_floors_of_the_committed_reports() -> None:
    """``min_score="suggested"`` is what the calibration chose, not a number typed apart:
    on turn vectors (every ranker) and on pair vectors (hybrid, ``--embedder e5-pair``)."""
    from memlib.rankers import ranker_names

    suggested = {
        name: getattr(get_ranker(name), "suggested_min_score", None) for name in ranker_names()
    }
    assert suggested == _floors("abstention-dev-split")
    from memlib.rankers.embeddings import get_embedder

    def hybrid_on(embedder: str) -> float:
        ranker = get_ranker("hybrid").with_model(get_embedder(embedder))  # type: ignore[attr-defined]
        return float(ranker.suggested_min_score_for(None))

    assert {"hybrid": hybrid_on("e5-pair")} == _floors("abstention-pairs-dev-split")
    assert hybrid_on("e5") == suggested["hybrid"]

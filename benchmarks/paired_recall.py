"""Paired differences between rankers on the LoCoMo dev split (a one-off study, issue 37).

    .venv/bin/python -m benchmarks.paired_recall [--data PATH] [--out FILE]

Every question of categories 1–4 is ranked by each configuration at its shipped settings
(the settings every leave-one-conversation-out fold chose for hybrid, on turn and on pair
vectors), and the per-question difference of R@10 (and of session any@10) between two
configurations is bootstrapped: each conversation's questions drawn again with
replacement, 2,000 draws, a fixed seed; the 95% interval is the 2.5th–97.5th percentile.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import LOCOMO_DEV
from memlib.cli.evaluate import named_rankers
from memlib.eval.locomo import (
    HEADLINE_CATEGORIES,
    conversation_rows,
    load_locomo,
    question_recall,
    session_of,
)

DRAWS, SEED = 2_000, 20261205
CONFIGS = {  # label: (ranker, embedder)
    "baseline": ("baseline", None),
    "bm25+stopwords": ("bm25+stopwords", None),
    "hybrid": ("hybrid", "e5"),
    "hybrid e5-pair": ("hybrid", "e5-pair"),
}
PAIRS = (
    ("hybrid e5-pair", "hybrid"),
    ("hybrid e5-pair", "bm25+stopwords"),
    ("hybrid", "bm25+stopwords"),
    ("bm25+stopwords", "baseline"),
)
Scores = list[list[tuple[float, float]]]  # per conversation, per question: R@10, Sany@10


def scores(data: Path, ranker: str, embedder: str | None) -> Scores:
    model = named_rankers([ranker], embedder)[ranker]
    out = []
    for conversation in load_locomo(data):
        folds = []
        for category, evidence, ranked in conversation_rows(conversation, model, depth=10):
            if category in HEADLINE_CATEGORIES:
                reached = {session_of(e) for e in evidence} & {session_of(m) for m in ranked}
                folds.append(
                    (question_recall((category, evidence, ranked), 10), float(bool(reached)))
                )
        out.append(folds)
    return out


def paired(a: Scores, b: Scores, metric: int) -> dict[str, Any]:
    folds = [
        [x[metric] - y[metric] for x, y in zip(fa, fb, strict=True)]
        for fa, fb in zip(a, b, strict=True)
    ]
    n = sum(len(f) for f in folds)
    rng, draws = random.Random(SEED), []
    for _ in range(DRAWS):
        total = sum(f[int(rng.random() * len(f))] for f in folds for _ in f)
        draws.append(total / n)
    draws.sort()
    return {
        "difference": round(sum(map(sum, folds)) / n, 4),
        "interval_95": [
            round(draws[int(0.025 * DRAWS) - 1], 4),
            round(draws[int(0.975 * DRAWS) - 1], 4),
        ],
        "share_of_draws_at_or_below_0": round(sum(d <= 0 for d in draws) / DRAWS, 4),
        "questions": n,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--data", type=Path, default=LOCOMO_DEV)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    by_config = {}
    for label, (ranker, embedder) in CONFIGS.items():
        print(f"ranking with {label}", file=sys.stderr)
        by_config[label] = scores(args.data, ranker, embedder)
    report: dict[str, Any] = {"data": str(args.data.name), "draws": DRAWS, "seed": SEED}
    report["means"] = {
        label: {
            metric: round(sum(q[i] for f in s for q in f) / sum(map(len, s)), 4)
            for i, metric in enumerate(("R@10", "Sany@10"))
        }
        for label, s in by_config.items()
    }
    report["paired"] = [
        {"a": a, "b": b, "metric": metric, **paired(by_config[a], by_config[b], i)}
        for a, b in PAIRS
        for i, metric in enumerate(("R@10", "Sany@10"))
    ]
    text = json.dumps(report, indent=2) + "\n"
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Check /tmp/h6.diff's hybrid against the study: run with the patched copy first on the path.

    cd /work/main && PYTHONPATH=/tmp/h6work .venv/bin/python studies/retrieval_ideas/verify_patch.py [--cv]

Ranks every question through memlib's own eval (conversation_rows) with the patched ranker
on the study's cached vectors, and compares each top 10 with the study's A1 re-ranking
over every candidate at w_period 0.3 (after 0). --cv also runs memlib.eval.crossval over
hybrid's own grid with the patch (20 settings: slow)."""

from __future__ import annotations

import sys

import memlib
from common import KIND, CachedE5, build_features, conversations, metrics, pair_model, shipped_ranker, write
from idea_a import rerank
from memlib.eval.crossval import cross_validate
from memlib.eval.locomo import conversation_rows

assert "/tmp/h6work" in memlib.__file__, memlib.__file__

if __name__ == "__main__":
    base = CachedE5()
    model = pair_model(base) if KIND == "pair" else base
    ranker = shipped_ranker(model)
    features = build_features()
    convs = conversations()
    rows, same, n = [], 0, 0
    for conv, feats in zip(convs, features["conversations"], strict=True):
        got = conversation_rows(conv, ranker, depth=10)
        rows += got
        for row, q in zip(got, feats["questions"], strict=True):
            study = rerank(feats, q, {"w_period": 0.3, "after": 0, "pool": 10**6})[:10]
            same += tuple(study) == row[2]
            n += 1
    report = {"patched": metrics(rows), "same_top10_as_study": same, "questions": n}
    print(report["patched"]["overall"], same, n, file=sys.stderr)
    if "--cv" in sys.argv:
        report["crossval"] = cross_validate(convs, ranker, ks=(5, 10))
        print(report["crossval"]["cross_validated"], file=sys.stderr)
    write("verify_patch.json", report)

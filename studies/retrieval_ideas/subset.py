"""R@10 of the questions that name a period (and of the rest), shipped against A1 at 0.3.

    cd /work/main && .venv/bin/python studies/retrieval_ideas/subset.py     (writes subset.json)"""

from datetime import UTC, datetime

from common import build_features, write
from idea_a import rerank
from memlib.eval.locomo import question_recall
from timewords import periods

if __name__ == "__main__":
    features = build_features()
    out: dict = {}
    for conv in features["conversations"]:
        as_of = datetime.fromtimestamp(conv["as_of"], UTC)
        for q in conv["questions"]:
            group = "names a period" if periods(q["question"], as_of) else "names none"
            keys = [f"{group}, category {q['category']}"]
            keys += [f"{group}, categories 1-4"] if q["category"] != 5 else []
            ev = tuple(q["evidence"])
            shipped = question_recall((0, ev, tuple(c["id"] for c in q["candidates"][:10])), 10)
            a1 = rerank(conv, q, {"w_period": 0.3, "after": 0, "pool": 10**6})[:10]
            for key in keys:
                s = out.setdefault(key, {"n": 0, "shipped": 0.0, "A1 0.3": 0.0})
                s["n"] += 1
                s["shipped"] += shipped
                s["A1 0.3"] += question_recall((0, ev, tuple(a1)), 10)
    for s in out.values():
        s["shipped"] = round(s["shipped"] / s["n"], 3)
        s["A1 0.3"] = round(s["A1 0.3"] / s["n"], 3)
    write("subset.json", dict(sorted(out.items())))
    for k, v in sorted(out.items()):
        print(k, v)

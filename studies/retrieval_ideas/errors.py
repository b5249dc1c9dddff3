"""Step 1: where the shipped configuration (hybrid on pair vectors) misses, by category.

    cd /work/main && .venv/bin/python studies/retrieval_ideas/errors.py     (writes errors.json)"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Any

from common import build_features, metrics, shipped_rows, write
from memlib.eval.locomo import CATEGORY_NAMES, question_recall, session_of
from timewords import asks_when, periods, speaks_of_time


def _rank_band(rank: int | None) -> str:
    if rank is None:
        return "not a candidate"
    for top, name in ((20, "11-20"), (50, "21-50"), (100, "51-100")):
        if rank <= top:
            return name
    return ">100"


def _quote(text: str, words: int = 14) -> str:
    parts = text.split()
    return " ".join(parts[:words]) + (" …" if len(parts) > words else "")


def _ts(iso: str) -> datetime:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).astimezone(UTC)


def _evidence_profile(q: dict[str, Any]) -> dict[str, Any]:
    sessions = {session_of(e) for e in q["evidence"]}
    turns = sorted(
        (int(session_of(e)[1:]), int(e.rsplit(":", 1)[1])) for e in q["evidence"]
    )
    adjacent = any(
        a[0] == b[0] and b[1] - a[1] <= 2 for a, b in zip(turns, turns[1:], strict=False)
    )
    return {"turns": len(q["evidence"]), "sessions": len(sessions), "adjacent": adjacent}


def analyse(features: dict[str, Any]) -> dict[str, Any]:  # noqa: C901 (a study)
    by_cat: dict[int, dict[str, Any]] = {}
    examples: dict[int, list[dict[str, Any]]] = {}
    for conv in features["conversations"]:
        content = {r["id"]: r for r in conv["records"]}
        as_of = datetime.fromtimestamp(conv["as_of"], UTC)
        for q in conv["questions"]:
            cat = q["category"]
            s = by_cat.setdefault(
                cat,
                {
                    "missed_evidence_rank": Counter(),
                    "evidence_turns": Counter(),
                    "evidence_sessions": Counter(),
                    "R@10_by_sessions": {},
                    "asks_when": Counter(),
                    "names_period": Counter(),
                    "evidence_speaks_of_time": Counter(),
                    "evidence_in_named_period": Counter(),
                    "adjacent_evidence": Counter(),
                },
            )
            ranks = {c["id"]: i + 1 for i, c in enumerate(q["candidates"])}
            top = [c["id"] for c in q["candidates"][:10]]
            row = (cat, tuple(q["evidence"]), tuple(top))
            r10 = question_recall(row, 10)
            prof = _evidence_profile(q)
            s["evidence_turns"][min(prof["turns"], 4)] += 1
            s["evidence_sessions"][min(prof["sessions"], 3)] += 1
            s["R@10_by_sessions"].setdefault(min(prof["sessions"], 3), []).append(r10)
            s["adjacent_evidence"][prof["adjacent"]] += 1
            when = asks_when(q["question"])
            named = periods(q["question"], as_of)
            s["asks_when"][when] += 1
            s["names_period"][bool(named)] += 1
            missed = [e for e in q["evidence"] if e not in top]
            for e in q["evidence"]:
                hit = "hit" if e in top else "missed"
                s["evidence_speaks_of_time"][f"{hit}, {speaks_of_time(content[e]['content'])}"] += 1
                if named:
                    at = _ts(content[e]["captured_at"])
                    inside = any(a <= at < b for a, b in named)
                    s["evidence_in_named_period"][f"{hit}, {inside}"] += 1
            for e in missed:
                s["missed_evidence_rank"][_rank_band(ranks.get(e))] += 1
            if missed and len(examples.setdefault(cat, [])) < 8:
                examples[cat].append(
                    {
                        "question": q["question"],
                        "R@10": round(r10, 3),
                        "missed": [
                            {
                                "id": e,
                                "rank": ranks.get(e),
                                "session_date": content[e]["captured_at"][:10],
                                "text": _quote(content[e]["content"]),
                            }
                            for e in missed[:2]
                        ],
                        "top1": _quote(content[top[0]]["content"]) if top else None,
                    }
                )
    out = {}
    for cat, s in sorted(by_cat.items()):
        out[f"{cat} {CATEGORY_NAMES[cat]}"] = {
            **{k: dict(sorted(v.items(), key=str)) for k, v in s.items() if isinstance(v, Counter)},
            "R@10_by_sessions": {
                str(k): {"n": len(v), "R@10": round(sum(v) / len(v), 3)}
                for k, v in sorted(s["R@10_by_sessions"].items())
            },
            "examples": examples.get(cat, []),
        }
    return out


if __name__ == "__main__":
    features = build_features()
    rows = [r for conv in shipped_rows(features) for r in conv]
    write("errors.json", {"shipped": metrics(rows), "by_category": analyse(features)})

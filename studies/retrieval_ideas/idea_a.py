"""Idea A: time-aware re-ranking without an LLM, on the shipped configuration's top 50.

    total' = total + w_period * [the turn's session date falls in a period the question
                                names, or up to `after` days past its end]
                   + w_when   * [the question asks for a time and the turn speaks of time]

(timewords.py: "in June", "in May 2023", "on 8 May 2023", "in 2022", "last week"; "when…",
"what year…", "how long ago…"; a turn's "yesterday", "last week", month names, years…)
Each family cross-validated over its grid (5 folds, leave one conversation out) and paired
against the shipped configuration.   cd /work/main && .venv/bin/python studies/retrieval_ideas/idea_a.py"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from common import POOL, build_features, crossval, rank_key, write
from timewords import asks_when, periods, speaks_of_time


_RECORDS: dict[str, dict[str, tuple[datetime, bool]]] = {}


def _records(conv: dict[str, Any]) -> dict[str, tuple[datetime, bool]]:
    """Each turn's session date and whether it speaks of time (once per conversation)."""
    if conv["sample_id"] not in _RECORDS:
        _RECORDS[conv["sample_id"]] = {
            r["id"]: (
                datetime.fromisoformat(r["captured_at"].replace("Z", "+00:00")).astimezone(UTC),
                speaks_of_time(r["content"]),
            )
            for r in conv["records"]
        }
    return _RECORDS[conv["sample_id"]]


_QUESTIONS: dict[str, tuple[bool, list[tuple[datetime, datetime]]]] = {}


def _question(conv: dict[str, Any], q: dict[str, Any]) -> tuple[bool, list[tuple[datetime, datetime]]]:
    if q["id"] not in _QUESTIONS:
        as_of = datetime.fromtimestamp(conv["as_of"], UTC)
        _QUESTIONS[q["id"]] = (asks_when(q["question"]), periods(q["question"], as_of))
    return _QUESTIONS[q["id"]]


def rerank(conv: dict[str, Any], q: dict[str, Any], p: dict[str, float]) -> list[str]:
    w_period, w_when, after = p.get("w_period", 0.0), p.get("w_when", 0.0), p.get("after", 0)
    cands = q["candidates"]
    if not (w_period or w_when):
        return [c["id"] for c in cands[:10]]
    records = _records(conv)
    when, named = _question(conv, q)
    spans = [(a, b + timedelta(days=after)) for a, b in named]
    pool = []
    for c in cands[: int(p.get("pool", POOL))]:
        at, timely = records[c["id"]]
        bonus = w_period * any(a <= at < b for a, b in spans) + w_when * (when and timely)
        pool.append((rank_key(c, c["total"] + bonus), c["id"]))
    pool.sort()
    return [m for _, m in pool] + [c["id"] for c in cands[len(pool) :]]


WEIGHTS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5)
PERIOD_WEIGHTS = (*WEIGHTS, 0.75, 1.0)
GRIDS = {
    "shipped (reference)": [{}],
    "A1 period (session date in the named period)": [
        {"w_period": w, "after": after} for after in (0, 31) for w in PERIOD_WEIGHTS if w or not after
    ],
    "A1 over every candidate (as a ranker would)": [
        {"w_period": w, "after": after, "pool": 10**6} for after in (0, 31) for w in PERIOD_WEIGHTS if w or not after
    ],
    "A2 when (time words for a when-question)": [{"w_when": w} for w in WEIGHTS],
    "A1+A2": [
        {"w_period": wp, "w_when": ww, "after": 31} for wp in PERIOD_WEIGHTS for ww in WEIGHTS
    ],
}


def coverage(features: dict[str, Any]) -> dict[str, Any]:
    """How many questions each signal can touch, per category."""
    out: dict[str, dict[str, int]] = {}
    for conv in features["conversations"]:
        for q in conv["questions"]:
            when, named = _question(conv, q)
            c = out.setdefault(str(q["category"]), {"n": 0, "asks_when": 0, "names_period": 0})
            c["n"] += 1
            c["asks_when"] += when
            c["names_period"] += bool(named)
    return out


if __name__ == "__main__":
    features = build_features()
    report: dict[str, Any] = {"pool": POOL, "coverage": coverage(features), "families": {}}
    for name, grid in GRIDS.items():
        report["families"][name] = crossval(features, rerank, grid)
    write("idea_a.json", report)

"""Exercises of ``04_score.ipynb``, graded on the edition's sample corpus (the zh
edition's notebook opens the Chinese one as ``zh_store``)."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

from ...sample import SAMPLE_AS_OF
from ..language import tr
from ..views import score_view
from . import Exercise, Verdict, right, wrong
from ._common import as_number, shape_error
from .n02_normalize import edition_store

RECORD = "conversation-009"
# Queries that find conversation-009, per edition; the one of 04.2 is all in its text.
HALF_QUERY = "conversation memory"
HALF_QUERY_ZH = "对话记忆"
TOTAL_QUERY = "conversation memory retained"
TOTAL_QUERY_ZH = "对话记忆 复查"


def _row(query: str, as_of: datetime) -> Any:
    return score_view(edition_store(), query, as_of, 10).set_index("memory_id").loc[RECORD]


def _half_recency(answer: Any) -> Verdict:
    if not isinstance(answer, datetime):
        kind = type(answer).__name__
        raise shape_error(
            f"the answer should be a datetime, not {kind}",
            f"答案应当是一个 datetime，而不是 {kind}",
        )
    if answer.tzinfo is None:
        return wrong(
            "a naive datetime has no timezone: add tzinfo=UTC",
            zh="naive datetime 没有时区：加上 tzinfo=UTC",
        )
    query = tr(HALF_QUERY, HALF_QUERY_ZH)
    recency = float(_row(query, answer)["recency"])
    if recency == 0.5:
        return right(
            f"at {answer.isoformat()} {RECORD} is 30 days old: recency 1/(1+30/30) = 0.5",
            zh=f"在 {answer.isoformat()}，{RECORD} 的年龄正好 30 天：新近度 1/(1+30/30) = 0.5",
        )
    captured = datetime.fromisoformat(
        str(_row(query, answer)["captured_at"]).replace("Z", "+00:00")
    )
    age = (answer - captured) / timedelta(days=1)
    if recency > 0.5:
        return wrong(
            f"at that moment it is {age:g} days old, recency {recency}: too early — "
            "recency is 0.5 at an age of exactly 30 days",
            zh=f"那一刻它的年龄是 {age:g} 天，新近度 {recency}：太早了——恰好 30 天时新近度才是 0.5",
        )
    if math.isclose(age, 30, abs_tol=1):
        return wrong(
            f"{age:g} days: close, but the age counts from the captured time of day "
            "(09:00 UTC), to the second",
            zh=f"{age:g} 天：很接近，但年龄从事件时间（09:00 UTC）算起，精确到秒",
        )
    return wrong(
        f"at that moment it is {age:g} days old, recency {recency}: too late",
        zh=f"那一刻它的年龄是 {age:g} 天，新近度 {recency}：太晚了",
    )


def _total(answer: Any) -> Verdict:
    value = as_number(answer)
    row = _row(tr(TOTAL_QUERY, TOTAL_QUERY_ZH), SAMPLE_AS_OF)
    total, recency = float(row["total"]), float(row["recency"])
    terms = int(row["query_term_count"])
    if math.isclose(value, total, abs_tol=5e-7):
        return right(
            f"0.85 × {row['lexical_coverage']:g} + 0.15 × {recency} = {total}",
            zh=f"0.85 × {row['lexical_coverage']:g} + 0.15 × {recency} = {total}，与评分明细一致",
        )
    if math.isclose(value, 0.85 * row["lexical_coverage"] + recency, abs_tol=5e-6):
        return wrong(
            "recency is weighted too: it contributes 0.15 × recency, not recency",
            zh="新近度也要乘权重：它贡献的是 0.15 × recency，而不是 recency",
        )
    if any(
        math.isclose(value, 0.85 * held / terms + 0.15 * recency, abs_tol=5e-6)
        for held in range(terms)
    ):
        return wrong(
            f"count the matched terms again: look for each of the {terms} query terms in "
            "its summary and content, printed at the top of the exercises",
            zh=f"再数一遍匹配的词项：在练习开头打印出的 summary 和 content 里逐个查找这 "
            f"{terms} 个查询词项",
        )
    if math.isclose(value, 0.85 + 0.15, abs_tol=5e-6):
        return wrong(
            f"{RECORD} is not fresh: its recency at SAMPLE_AS_OF is below 1 "
            "(the score table above has it)",
            zh=f"{RECORD} 并不新：它在 SAMPLE_AS_OF 时的新近度小于 1（上面的评分表里有）",
        )
    if math.isclose(value, total, abs_tol=5e-3):
        return wrong(
            "nearly: give it to 6 decimals, as the breakdown rounds it",
            zh="差一点：保留 6 位小数，和评分明细的取整一致",
        )
    return wrong(
        "coverage × 0.85 plus recency × 0.15: which part is off?",
        zh="覆盖率 × 0.85 加上新近度 × 0.15：哪一部分算错了？",
    )


Exercise(
    id="04.1",
    title="the as_of at which conversation-009's recency is exactly 0.5",
    grade=_half_recency,
    hints=(
        "recency = 1 / (1 + age_days / 30): solve for recency = 0.5.",
        f"{RECORD} was captured at 2026-06-15T09:00:00Z.",
    ),
    hints_zh=(
        "recency = 1 / (1 + age_days / 30)：令 recency = 0.5 解出 age_days。",
        f"{RECORD} 的事件时间（captured_at）是 2026-06-15T09:00:00Z。",
    ),
    solution=(
        "# Exercise 04.1 — solution\nfrom datetime import UTC, datetime\n\n"
        "answer = datetime(2026, 7, 15, 9, 0, tzinfo=UTC)"
    ),
    wrong_answers=(
        (datetime(2026, 7, 15, 9, 0), "naive"),
        (datetime(2026, 7, 15, 12, 0, tzinfo=SAMPLE_AS_OF.tzinfo), "to the second"),
        (datetime(2026, 7, 1, tzinfo=SAMPLE_AS_OF.tzinfo), "too early"),
        (datetime(2026, 9, 1, tzinfo=SAMPLE_AS_OF.tzinfo), "too late"),
        ("2026-07-15", "should be a datetime"),
    ),
).register()

Exercise(
    id="04.2",
    title="conversation-009's total for “conversation memory retained”, by hand",
    grade=_total,
    hints=(
        f"How many of the query's terms does {RECORD} hold? Its summary and content are "
        "printed at the top of the exercises: look for each term there.",
        "Its recency at SAMPLE_AS_OF is the same as in the score table above: the age does "
        "not depend on the query.",
    ),
    hints_zh=(
        f"查询的词项中 {RECORD} 包含几个？它的 summary 和 content 打印在练习的开头："
        "逐个在里面查找。",
        "它在 SAMPLE_AS_OF 时的新近度与上面评分表中的相同：年龄与查询无关。",
    ),
    solution=(
        "# Exercise 04.2 — solution\n"
        "# every term of the query is in its text: coverage 1; recency from the score table\n"
        "answer = 0.85 * 1 + 0.15 * 0.348331"
    ),
    wrong_answers=(
        (1.198331, "weighted too"),
        (0.618917, "count the matched terms"),
        (1.0, "not fresh"),
        (0.9, "6 decimals"),
        ("0.9", "should be a number"),
    ),
).register()

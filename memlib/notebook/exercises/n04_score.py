"""Exercises of ``04_score.ipynb``, graded on the edition's sample corpus (the zh
edition's notebook opens the Chinese one as ``zh_store``)."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

from ...sample import SAMPLE_AS_OF
from ..language import tr
from ..views import score_view
from . import Verdict, exercise, right, wrong
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


@exercise(
    "04.1",
    "the as_of at which conversation-009's recency is exactly 0.5",
    hints=(
        "recency = 1 / (1 + age_days / 30): solve for recency = 0.5.",
        f"{RECORD} was captured at 2026-06-15T09:00:00Z.",
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
)
def _half_recency(answer: Any) -> Verdict:
    if not isinstance(answer, datetime):
        raise shape_error("the answer should be a datetime, not {kind}", kind=type(answer).__name__)
    if answer.tzinfo is None:
        return wrong("a naive datetime has no timezone: add tzinfo=UTC")
    query = tr(HALF_QUERY, HALF_QUERY_ZH)
    recency = float(_row(query, answer)["recency"])
    if recency == 0.5:
        return right(
            "at {answer} {record} is 30 days old: recency 1/(1+30/30) = 0.5",
            answer=answer.isoformat(),
            record=RECORD,
        )
    captured = datetime.fromisoformat(
        str(_row(query, answer)["captured_at"]).replace("Z", "+00:00")
    )
    age = (answer - captured) / timedelta(days=1)
    if recency > 0.5:
        return wrong(
            "at that moment it is {age:g} days old, recency {recency}: too early — "
            "recency is 0.5 at an age of exactly 30 days",
            age=age,
            recency=recency,
        )
    if math.isclose(age, 30, abs_tol=1):
        return wrong(
            "{age:g} days: close, but the age counts from the captured time of day "
            "(09:00 UTC), to the second",
            age=age,
        )
    return wrong(
        "at that moment it is {age:g} days old, recency {recency}: too late",
        age=age,
        recency=recency,
    )


@exercise(
    "04.2",
    "conversation-009's total for “conversation memory retained”, by hand",
    hints=(
        f"How many of the query's terms does {RECORD} hold? Its summary and content are "
        "printed at the top of the exercises: look for each term there.",
        "Its recency at SAMPLE_AS_OF is the same as in the score table above: the age does "
        "not depend on the query.",
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
)
def _total(answer: Any) -> Verdict:
    value = as_number(answer)
    row = _row(tr(TOTAL_QUERY, TOTAL_QUERY_ZH), SAMPLE_AS_OF)
    total, recency = float(row["total"]), float(row["recency"])
    terms = int(row["query_term_count"])
    if math.isclose(value, total, abs_tol=5e-7):
        return right(
            "0.85 × {lexical_coverage:g} + 0.15 × {recency} = {total}",
            lexical_coverage=row["lexical_coverage"],
            recency=recency,
            total=total,
        )
    if math.isclose(value, 0.85 * row["lexical_coverage"] + recency, abs_tol=5e-6):
        return wrong("recency is weighted too: it contributes 0.15 × recency, not recency")
    if any(
        math.isclose(value, 0.85 * held / terms + 0.15 * recency, abs_tol=5e-6)
        for held in range(terms)
    ):
        return wrong(
            "count the matched terms again: look for each of the {terms} query terms "
            "in its summary and content, printed at the top of the exercises",
            terms=terms,
        )
    if math.isclose(value, 0.85 + 0.15, abs_tol=5e-6):
        return wrong(
            "{record} is not fresh: its recency at SAMPLE_AS_OF is below 1 (the score "
            "table above has it)",
            record=RECORD,
        )
    if math.isclose(value, total, abs_tol=5e-3):
        return wrong("nearly: give it to 6 decimals, as the breakdown rounds it")
    return wrong("coverage × 0.85 plus recency × 0.15: which part is off?")

"""Exercises of ``05_stable_rank.ipynb``."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from ...errors import RemoteMemoryError
from ...records import parse_timestamp
from ...sample import SAMPLE_AS_OF
from ..fixtures import conversation_store
from ..views import deciding_key, rank_keys_view
from . import Exercise, Verdict, exercise, right, wrong
from ._common import sample_store

ORDER_QUERY = "retention conversation memory reranker"
# The query of the notebook's tie-breaker cases; the rows of 05.2 are ranked for it.
TIES_QUERY = "ranking ties need explicit stable keys"
ALL_SIX = "Ranking ties need explicit stable keys."


def _ids(answer: Any) -> list[str]:
    if isinstance(answer, str) or not isinstance(answer, Sequence) or not all(
        isinstance(item, str) for item in answer
    ):
        raise TypeError("the answer should be a list of memory ids (strings), in rank order")
    return list(answer)


def _order(answer: Any) -> Verdict:
    given = _ids(answer)
    frame = rank_keys_view(sample_store(), ORDER_QUERY, SAMPLE_AS_OF, 10)
    expected = list(frame["memory_id"])
    if given == expected:
        keys = ", ".join(k for k in frame["ahead_of_next_by"] if k)
        return right(f"{len(expected)} candidates in rank order; each pair is decided by: {keys}")
    extra = [m for m in given if m not in expected]
    if extra:
        return wrong(f"{', '.join(extra)} share(s) no term with the query, so it is no candidate "
                     "and gets no rank — only summary and content are searched, not the title")
    missing = [m for m in expected if m not in given]
    if missing:
        return wrong(f"{len(missing)} candidate(s) missing: every record that shares one term "
                     f"is ranked, and limit 10 cuts none of these {len(expected)}")
    if len(set(given)) != len(given):
        return wrong("a memory id appears twice: each candidate has exactly one rank")
    rows = {row["memory_id"]: row for row in frame.to_dict("records")}
    newest_first = sorted(expected, key=lambda m: (-parse_timestamp(rows[m]["captured_at"])
                                                   .timestamp(), m))
    if given == newest_first:
        return wrong("that is newest first: recency weighs 0.15, the share of query terms 0.85 "
                     "— coverage comes first")
    position = next(i for i, (g, e) in enumerate(zip(given, expected, strict=True)) if g != e)
    ahead, behind = rows[expected[position]], rows[given[position]]
    key = deciding_key(ahead, behind)
    detail = {
        "total": f" (total {ahead['total']:.6f} against {behind['total']:.6f})",
        "memory_id": " — they tie on total, coverage and captured_at, and ids sort ascending",
    }.get(key, "")
    return wrong(f"{given[position]} cannot be rank {position + 1}: {expected[position]} beats "
                 f"it on {key}{detail}")


def _rows(answer: Any) -> list[tuple[str, str, str]]:
    shape = ("the answer should be two rows (memory_id, captured_at, text), "
             "like the rows of `cases`")
    if isinstance(answer, str) or not isinstance(answer, Sequence) or len(answer) != 2:
        raise TypeError(shape)
    rows = []
    for row in answer:
        if (isinstance(row, str) or not isinstance(row, Sequence) or len(row) != 3
                or not all(isinstance(cell, str) for cell in row)):
            raise TypeError(shape)
        rows.append((row[0], row[1], row[2]))
    return rows


def _captured_at_decides(answer: Any) -> Verdict:
    rows = _rows(answer)
    with tempfile.TemporaryDirectory(prefix="memlib-grader-") as root:
        try:
            store = conversation_store(root, "pair", rows)
        except RemoteMemoryError as exc:
            return wrong(f"the store refuses these rows: {exc}")
        frame = rank_keys_view(store, TIES_QUERY, SAMPLE_AS_OF, 10)
    if len(frame) < 2:
        return wrong(f"only {len(frame)} of the two records shares a term with "
                     f"“{TIES_QUERY}”: both must be candidates to be ranked")
    first, second = frame.to_dict("records")[:2]
    gap = abs(parse_timestamp(first["captured_at"]) - parse_timestamp(second["captured_at"]))
    if gap < timedelta(days=1):
        return wrong(f"these were captured {gap} apart, less than a day: that is the case "
                     "above — find a pair a day or more apart")
    key = first["ahead_of_next_by"]
    if key == "captured_at":
        both_later = all(parse_timestamp(r["captured_at"]) >= SAMPLE_AS_OF
                         for r in (first, second))
        why = ("both were captured after as_of, so both have recency 1.0 and the same total"
               if both_later else
               "both are so old that a day changes recency by less than 6-decimal rounding")
        return right(f"{first['memory_id']} ranks first on captured_at: {why}")
    if first["lexical_coverage"] != second["lexical_coverage"]:
        return wrong(f"`{key}` decides: the texts cover different shares of the query — give "
                     "both the same text, so that only the dates differ")
    return wrong(f"`total` decides ({first['total']:.6f} against {second['total']:.6f}): a day "
                 "or more apart, their recency differs by far more than 6-decimal rounding "
                 "hides. For which dates is recency the same whatever the day? (notebook 04)")


exercise(Exercise(
    id="05.1",
    title=f"the rank order of “{ORDER_QUERY}”",
    grade=_order,
    hints=(
        "First find the candidates: which conversation records hold conversation, memory, "
        "reranker or retention in their summary or content? (Titles are not searched.)",
        "Then sort by the share of the four terms each covers (0.85 of the total); among equal "
        "shares the more recent one has the higher total.",
        "Two records here have the same text terms and the same captured_at: the last key, "
        "memory_id ascending, orders them.",
    ),
    solution=('# Exercise 05.1 — solution\nanswer = ["conversation-009", "conversation-003", '
              '"conversation-005", "conversation-006",\n          "conversation-008"]'),
    wrong_answers=(
        (["conversation-003", "conversation-005", "conversation-006", "conversation-008",
          "conversation-009"], "newest first"),
        (["conversation-009", "conversation-003", "conversation-006", "conversation-005",
          "conversation-008"], "ids sort ascending"),
        (["conversation-009", "conversation-003", "conversation-005", "conversation-006"],
         "missing"),
        (["conversation-009", "conversation-003", "conversation-005", "conversation-006",
          "conversation-008", "conversation-013"], "no term"),
        (["conversation-009", "conversation-005", "conversation-003", "conversation-006",
          "conversation-008"], "beats it on total"),
        ("conversation-009", "list of memory ids"),
    ),
))

exercise(Exercise(
    id="05.2",
    title="a pair a day or more apart that captured_at decides",
    grade=_captured_at_decides,
    hints=(
        "captured_at is consulted only when the totals are equal to 6 decimals, and the "
        "totals include 0.15 × recency. Same text, so coverage is equal: what is left is "
        "recency.",
        "Notebook 04: a record captured after as_of has its age clamped to 0. What recency "
        "does it get?",
        "Capture both after SAMPLE_AS_OF (2026-08-10T12:00:00Z), on different days.",
    ),
    solution=("# Exercise 05.2 — solution\nanswer = [\n"
              '    ("later-a", "2026-08-11T08:00:00Z", ALL_SIX),  # both after as_of\n'
              '    ("later-b", "2026-08-12T08:00:00Z", ALL_SIX),\n'
              "]"),
    wrong_answers=(
        ([("captured-a", "2026-08-05T08:00:00Z", ALL_SIX),
          ("captured-b", "2026-08-05T08:00:01Z", ALL_SIX)], "less than a day"),
        ([("early-a", "2026-08-01T08:00:00Z", ALL_SIX),
          ("early-b", "2026-08-03T08:00:00Z", ALL_SIX)], "`total` decides"),
        ([("later-a", "2026-08-11T08:00:00Z", "Ranking ties need keys."),
          ("later-b", "2026-08-12T08:00:00Z", ALL_SIX)], "same text"),
        ([("bad-a", "yesterday", ALL_SIX), ("bad-b", "2026-08-12T08:00:00Z", ALL_SIX)],
         "refuses"),
        ([("only-a", "2026-08-11T08:00:00Z", ALL_SIX),
          ("only-b", "2026-08-12T08:00:00Z", "Osaka hotels.")], "shares a term"),
        ("captured_at", "two rows"),
    ),
))

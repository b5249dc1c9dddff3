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
from ..language import tr
from ..views import deciding_key, rank_keys_view
from . import Verdict, exercise, right, wrong
from ._common import sample_store, shape_error

ORDER_QUERY = "retention conversation memory reranker"
# The query of the notebook's tie-breaker cases; the rows of 05.2 are ranked for it.
TIES_QUERY = "ranking ties need explicit stable keys"
ALL_SIX = "Ranking ties need explicit stable keys."


def _strings(value: Any, count: int | None = None) -> bool:
    """Whether ``value`` is a sequence (not a str) of strings, ``count`` of them if given."""
    return (
        not isinstance(value, str)
        and isinstance(value, Sequence)
        and (count is None or len(value) == count)
        and all(isinstance(item, str) for item in value)
    )


def _ids(answer: Any) -> list[str]:
    if not _strings(answer):
        raise shape_error("the answer should be a list of memory ids (strings), in rank order")
    return list(answer)


def _conversations(*numbers: int) -> list[str]:
    return [f"conversation-{number:03d}" for number in numbers]


@exercise(
    "05.1",
    f"the rank order of “{ORDER_QUERY}”",
    hints=(
        "First find the candidates: which conversation records hold conversation, memory, "
        "reranker or retention in their summary or content? (Titles are not searched.)",
        "Then sort by the share of the four terms each covers (0.85 of the total); among equal "
        "shares the more recent one has the higher total.",
        "Two records here have the same text terms and the same captured_at: the last key, "
        "memory_id ascending, orders them.",
    ),
    solution=(
        '# Exercise 05.1 — solution\nanswer = ["conversation-009", "conversation-003", '
        '"conversation-005", "conversation-006",\n          "conversation-008"]'
    ),
    wrong_answers=(
        (_conversations(3, 5, 6, 8, 9), "newest first"),
        (_conversations(9, 3, 6, 5, 8), "ids sort ascending"),
        (_conversations(9, 3, 5, 6), "missing"),
        (_conversations(9, 3, 5, 6, 8, 13), "no term"),
        (_conversations(9, 5, 3, 6, 8), "beats it on total"),
        ("conversation-009", "list of memory ids"),
    ),
)
def _order(answer: Any) -> Verdict:
    given = _ids(answer)
    frame = rank_keys_view(sample_store(), ORDER_QUERY, SAMPLE_AS_OF, 10)
    expected = list(frame["memory_id"])
    if given == expected:
        keys = ", ".join(k for k in frame["ahead_of_next_by"] if k)
        return right(
            "{n_expected} candidates in rank order; each pair is decided by: {keys}",
            n_expected=len(expected),
            keys=keys,
        )
    extra = [m for m in given if m not in expected]
    if extra:
        return wrong(
            "{extra} share(s) no term with the query, so it is no candidate and gets "
            "no rank — only summary and content are searched, not the title",
            extra=", ".join(extra),
        )
    missing = [m for m in expected if m not in given]
    if missing:
        return wrong(
            "{n_missing} candidate(s) missing: every record that shares one term is "
            "ranked, and limit 10 cuts none of these {n_expected}",
            n_missing=len(missing),
            n_expected=len(expected),
        )
    if len(set(given)) != len(given):
        return wrong("a memory id appears twice: each candidate has exactly one rank")
    rows = {row["memory_id"]: row for row in frame.to_dict("records")}
    newest_first = sorted(
        expected, key=lambda m: (-parse_timestamp(rows[m]["captured_at"]).timestamp(), m)
    )
    if given == newest_first:
        return wrong(
            "that is newest first: recency weighs 0.15, the share of query terms 0.85 "
            "— coverage comes first"
        )
    position = next(i for i, (g, e) in enumerate(zip(given, expected, strict=True)) if g != e)
    ahead, behind = rows[expected[position]], rows[given[position]]
    key = deciding_key(ahead, behind)
    detail = {
        "total": " (total {ahead:.6f} against {behind:.6f})",
        "memory_id": " — they tie on total, coverage and captured_at, and ids sort ascending",
    }.get(key, "")
    return wrong(
        "{given} cannot be rank {rank}: {expected} beats it on {key}{detail}",
        given=given[position],
        rank=position + 1,
        expected=expected[position],
        key=key,
        detail=tr(detail, ahead=ahead["total"], behind=behind["total"]),
    )


def _rows(answer: Any) -> list[tuple[str, str, str]]:
    if (
        isinstance(answer, str)
        or not isinstance(answer, Sequence)
        or len(answer) != 2
        or not all(_strings(row, 3) for row in answer)
    ):
        raise shape_error(
            "the answer should be two rows (memory_id, captured_at, text), like the rows of `cases`"
        )
    return [(row[0], row[1], row[2]) for row in answer]


@exercise(
    "05.2",
    "a pair a day or more apart that captured_at decides",
    hints=(
        "captured_at is consulted only when the totals are equal to 6 decimals, and the "
        "totals include 0.15 × recency. Same text, so coverage is equal: what is left is "
        "recency.",
        "Notebook 04: a record captured after as_of has its age clamped to 0. What recency "
        "does it get?",
        "Capture both after SAMPLE_AS_OF (2026-08-10T12:00:00Z), on different days.",
    ),
    solution=(
        "# Exercise 05.2 — solution\nanswer = [\n"
        '    ("later-a", "2026-08-11T08:00:00Z", ALL_SIX),  # both after as_of\n'
        '    ("later-b", "2026-08-12T08:00:00Z", ALL_SIX),\n'
        "]"
    ),
    wrong_answers=(
        (
            [
                ("captured-a", "2026-08-05T08:00:00Z", ALL_SIX),
                ("captured-b", "2026-08-05T08:00:01Z", ALL_SIX),
            ],
            "less than a day",
        ),
        (
            [
                ("early-a", "2026-08-01T08:00:00Z", ALL_SIX),
                ("early-b", "2026-08-03T08:00:00Z", ALL_SIX),
            ],
            "`total` decides",
        ),
        (
            [
                ("later-a", "2026-08-11T08:00:00Z", "Ranking ties need keys."),
                ("later-b", "2026-08-12T08:00:00Z", ALL_SIX),
            ],
            "same text",
        ),
        ([("bad-a", "yesterday", ALL_SIX), ("bad-b", "2026-08-12T08:00:00Z", ALL_SIX)], "refuses"),
        (
            [
                ("only-a", "2026-08-11T08:00:00Z", ALL_SIX),
                ("only-b", "2026-08-12T08:00:00Z", "Osaka hotels."),
            ],
            "shares a term",
        ),
        ("captured_at", "two rows"),
    ),
)
def _captured_at_decides(answer: Any) -> Verdict:
    rows = _rows(answer)
    with tempfile.TemporaryDirectory(prefix="memlib-grader-") as root:
        try:
            store = conversation_store(root, "pair", rows)
        except RemoteMemoryError as exc:
            return wrong("the store refuses these rows: {exc}", exc=exc)
        frame = rank_keys_view(store, TIES_QUERY, SAMPLE_AS_OF, 10)
    if len(frame) < 2:
        return wrong(
            "only {found} of the two records shares a term with “{ties_query}”: both "
            "must be candidates to be ranked",
            found=len(frame),
            ties_query=TIES_QUERY,
        )
    first, second = frame.to_dict("records")[:2]
    gap = abs(parse_timestamp(first["captured_at"]) - parse_timestamp(second["captured_at"]))
    if gap < timedelta(days=1):
        return wrong(
            "these were captured {gap} apart, less than a day: that is the case above "
            "— find a pair a day or more apart",
            gap=gap,
        )
    key = first["ahead_of_next_by"]
    if key == "captured_at":
        both_later = all(parse_timestamp(r["captured_at"]) >= SAMPLE_AS_OF for r in (first, second))
        why = (
            "both were captured after as_of, so both have recency 1.0 and the same total"
            if both_later
            else "both are so old that a day changes recency by less than 6-decimal rounding"
        )
        return right(
            "{memory_id} ranks first on captured_at: {why}",
            memory_id=first["memory_id"],
            why=tr(why),
        )
    if first["lexical_coverage"] != second["lexical_coverage"]:
        return wrong(
            "`{key}` decides: the texts cover different shares of the query — give "
            "both the same text, so that only the dates differ",
            key=key,
        )
    return wrong(
        "`total` decides ({first:.6f} against {second:.6f}): a day or more apart, "
        "their recency differs by far more than 6-decimal rounding hides. For which "
        "dates is recency the same whatever the day? (notebook 04)",
        first=first["total"],
        second=second["total"],
    )

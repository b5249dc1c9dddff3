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
from . import Exercise, Verdict, right, wrong
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
        raise shape_error(
            "the answer should be a list of memory ids (strings), in rank order",
            "答案应是按名次排列的 memory id（字符串）列表",
        )
    return list(answer)


def _order(answer: Any) -> Verdict:
    given = _ids(answer)
    frame = rank_keys_view(sample_store(), ORDER_QUERY, SAMPLE_AS_OF, 10)
    expected = list(frame["memory_id"])
    if given == expected:
        keys = ", ".join(k for k in frame["ahead_of_next_by"] if k)
        return right(
            f"{len(expected)} candidates in rank order; each pair is decided by: {keys}",
            zh=f"{len(expected)} 个候选的顺序正确；相邻两项依次由这些排序键决定：{keys}",
        )
    extra = [m for m in given if m not in expected]
    if extra:
        return wrong(
            f"{', '.join(extra)} share(s) no term with the query, so it is no candidate "
            "and gets no rank — only summary and content are searched, not the title",
            zh=f"{', '.join(extra)} 与查询没有共同的词项，不是候选，也就没有名次——"
            "只检索 summary 和 content，不检索标题",
        )
    missing = [m for m in expected if m not in given]
    if missing:
        return wrong(
            f"{len(missing)} candidate(s) missing: every record that shares one term "
            f"is ranked, and limit 10 cuts none of these {len(expected)}",
            zh=f"缺少 {len(missing)} 个候选：与查询有一个共同词项的记录都会参与排序，"
            f"limit 10 不会截掉这 {len(expected)} 个中的任何一个",
        )
    if len(set(given)) != len(given):
        return wrong(
            "a memory id appears twice: each candidate has exactly one rank",
            zh="有一个 memory id 出现了两次：每个候选只有一个名次",
        )
    rows = {row["memory_id"]: row for row in frame.to_dict("records")}
    newest_first = sorted(
        expected, key=lambda m: (-parse_timestamp(rows[m]["captured_at"]).timestamp(), m)
    )
    if given == newest_first:
        return wrong(
            "that is newest first: recency weighs 0.15, the share of query terms 0.85 "
            "— coverage comes first",
            zh="这是从新到旧的顺序：新近度的权重是 0.15，查询词项的覆盖比例是 0.85——覆盖率优先",
        )
    position = next(i for i, (g, e) in enumerate(zip(given, expected, strict=True)) if g != e)
    ahead, behind = rows[expected[position]], rows[given[position]]
    key = deciding_key(ahead, behind)
    detail = {
        "total": f" (total {ahead['total']:.6f} against {behind['total']:.6f})",
        "memory_id": " — they tie on total, coverage and captured_at, and ids sort ascending",
    }.get(key, "")
    detail_zh = {
        "total": f"（total {ahead['total']:.6f} 对 {behind['total']:.6f}）",
        "memory_id": "——二者的 total、coverage 和 captured_at 都并列，memory_id 按升序排列",
    }.get(key, "")
    return wrong(
        f"{given[position]} cannot be rank {position + 1}: {expected[position]} beats "
        f"it on {key}{detail}",
        zh=f"{given[position]} 不可能排第 {position + 1} 名：{expected[position]} 在 "
        f"{key} 上胜过它{detail_zh}",
    )


def _rows(answer: Any) -> list[tuple[str, str, str]]:
    shape = (
        "the answer should be two rows (memory_id, captured_at, text), like the rows of `cases`",
        "答案应是两行 (memory_id, captured_at, text)，格式与 `cases` 的行相同",
    )
    if isinstance(answer, str) or not isinstance(answer, Sequence) or len(answer) != 2:
        raise shape_error(*shape)
    if not all(_strings(row, 3) for row in answer):
        raise shape_error(*shape)
    return [(row[0], row[1], row[2]) for row in answer]


def _captured_at_decides(answer: Any) -> Verdict:
    rows = _rows(answer)
    with tempfile.TemporaryDirectory(prefix="memlib-grader-") as root:
        try:
            store = conversation_store(root, "pair", rows)
        except RemoteMemoryError as exc:
            return wrong(f"the store refuses these rows: {exc}", zh=f"存储拒绝了这些行：“{exc}”")
        frame = rank_keys_view(store, TIES_QUERY, SAMPLE_AS_OF, 10)
    if len(frame) < 2:
        return wrong(
            f"only {len(frame)} of the two records shares a term with "
            f"“{TIES_QUERY}”: both must be candidates to be ranked",
            zh=f"两条记录中只有 {len(frame)} 条与“{TIES_QUERY}”有共同词项："
            "两条都必须是候选，才会参与排序",
        )
    first, second = frame.to_dict("records")[:2]
    gap = abs(parse_timestamp(first["captured_at"]) - parse_timestamp(second["captured_at"]))
    if gap < timedelta(days=1):
        return wrong(
            f"these were captured {gap} apart, less than a day: that is the case "
            "above — find a pair a day or more apart",
            zh=f"这两条的事件时间只相差 {gap}，不到一天：那是上面的例子——"
            "请找一对相隔一天或更久的记录",
        )
    key = first["ahead_of_next_by"]
    if key == "captured_at":
        both_later = all(parse_timestamp(r["captured_at"]) >= SAMPLE_AS_OF for r in (first, second))
        why = (
            "both were captured after as_of, so both have recency 1.0 and the same total"
            if both_later
            else "both are so old that a day changes recency by less than 6-decimal rounding"
        )
        why_zh = (
            "两条的事件时间都晚于 as_of，新近度都是 1.0，total 也相同"
            if both_later
            else "两条都很旧，相差一天对新近度的影响小于 6 位小数的舍入"
        )
        return right(
            f"{first['memory_id']} ranks first on captured_at: {why}",
            zh=f"{first['memory_id']} 凭 captured_at 排在前面：{why_zh}",
        )
    if first["lexical_coverage"] != second["lexical_coverage"]:
        return wrong(
            f"`{key}` decides: the texts cover different shares of the query — give "
            "both the same text, so that only the dates differ",
            zh=f"决定顺序的是 `{key}`：两段文本覆盖查询的比例不同——"
            "给两条相同的文本，让它们只有日期不同",
        )
    return wrong(
        f"`total` decides ({first['total']:.6f} against {second['total']:.6f}): a day "
        "or more apart, their recency differs by far more than 6-decimal rounding "
        "hides. For which dates is recency the same whatever the day? (notebook 04)",
        zh=f"决定顺序的是 `total`（{first['total']:.6f} 对 {second['total']:.6f}）："
        "相隔一天或更久，新近度之差远大于 6 位小数舍入所能掩盖的。"
        "什么样的日期，无论哪一天新近度都相同？（笔记本 04）",
    )


def _conversations(*numbers: int) -> list[str]:
    return [f"conversation-{number:03d}" for number in numbers]


Exercise(
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
    hints_zh=(
        "先找出候选：哪些对话记录的 summary 或 content 中含有 conversation、memory、"
        "reranker 或 retention？（标题不参与检索。）",
        "再按每条记录覆盖这四个词项的比例排序（占总分的 0.85）；比例相同时，较新的记录总分更高。",
        "这里有两条记录的文本词项相同，captured_at 也相同：由最后一个排序键——"
        "memory_id 升序——决定先后。",
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
).register()

Exercise(
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
    hints_zh=(
        "只有总分在 6 位小数内相等时，才会比较 captured_at；而总分包含 0.15 × 新近度。"
        "文本相同，覆盖率就相等：剩下的只有新近度。",
        "笔记本 04：事件时间晚于 as_of 的记录，年龄被截断为 0。它的新近度是多少？",
        "让两条记录的事件时间都晚于 SAMPLE_AS_OF（2026-08-10T12:00:00Z），且落在不同的日子。",
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
).register()

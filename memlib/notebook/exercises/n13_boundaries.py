"""Exercises of ``13_boundaries_and_review.ipynb``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...sample import SAMPLE_AS_OF
from .._common import course_data
from ..boundaries import BOUNDARIES, CHECKLIST, RESULT_ITEMS, audit_result, tampered_results
from . import Exercise, Verdict, right, wrong
from ._common import sample_store, shape_error


@dataclass(frozen=True)
class Situation:
    """A question an agent meets, the core object it is about, and why that decides."""

    text: str
    about: str  # a ``Boundary.core_object``: the owner is looked up, never typed in
    why: str
    why_zh: str


# From memlib/data/boundaries.json. A wrong reply gives ``why``: what the situation is about,
# and which column of §1's table to read it against. It never names the owning chapter
# (tests/course/test_findings_11_14).
SITUATIONS: dict[str, Situation] = {
    label: Situation(**row) for label, row in course_data("boundaries")["situations"].items()
}
CHAPTERS = tuple(b.chapter for b in BOUNDARIES)


def owner_of(situation: Situation) -> str:
    """The chapter whose core object the situation is about (from the boundary table)."""
    return next(b.chapter for b in BOUNDARIES if b.core_object == situation.about)


def _labelled(answer: Any, what: str) -> dict[str, Any]:
    if not isinstance(answer, Mapping):
        kind = type(answer).__name__
        raise shape_error(
            f"the answer should be a dict like {what}, not {kind}",
            f"答案应是形如 {what} 的 dict，而不是 {kind}",
        )
    return {str(key).strip().upper(): value for key, value in answer.items()}


def _chapter(value: Any) -> str | None:
    """``"s09"``, ``"S9"``, ``"09"`` or ``9`` as ``"s09"``; None when it is none of these."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return f"s{value:02d}"
    if isinstance(value, str):
        match = re.fullmatch(r"s?(\d{1,2})", value.strip().lower())
        if match:
            return f"s{int(match.group(1)):02d}"
    return None


def _owners(answer: Any) -> Verdict:
    given = _labelled(answer, '{"A": "s09", "B": …}')
    missing = [label for label in SITUATIONS if label not in given]
    if missing:
        return wrong(
            f"give a chapter for each of {', '.join(SITUATIONS)}: missing {', '.join(missing)}",
            zh=f"请为 {', '.join(SITUATIONS)} 各给出一章：缺少 {', '.join(missing)}",
        )
    problems: list[str] = []
    problems_zh: list[str] = []
    for label, situation in SITUATIONS.items():
        chapter = _chapter(given[label])
        if chapter not in CHAPTERS:
            problems.append(
                f"{label}: {given[label]!r} is not a chapter of the table ({', '.join(CHAPTERS)})"
            )
            problems_zh.append(f"{label}：{given[label]!r} 不是表中的章节（{', '.join(CHAPTERS)}）")
        elif chapter != owner_of(situation):
            problems.append(f"{label}: not {chapter} — {situation.why}")
            problems_zh.append(f"{label}：不是 {chapter}——{situation.why_zh}")
    if problems:
        more = " …" if len(problems) > 2 else ""
        return wrong("; ".join(problems[:2]) + more, zh="；".join(problems_zh[:2]) + more)
    owners = ", ".join(f"{label} {owner_of(s)}" for label, s in SITUATIONS.items())
    return right(
        owners + ": each question goes to the chapter whose core object it is about",
        zh=owners + "：每个问题都归它所涉及的核心对象所在的那一章",
    )


Exercise(
    id="13.1",
    title="which chapter owns each situation",
    grade=_owners,
    hints=(
        "For each situation ask the table's question column: is it about this turn, this "
        "project, this user, long-term history, or a huge tool output?",
        "A preference stated for every project belongs to the user (s11); a decision from "
        "months ago is history that only a recall brings back (s12).",
        'The answer is a dict of five labels, e.g. {"A": "s09", "B": "s10", …}.',
    ),
    hints_zh=(
        "对每个情境，问一问表中“回答什么问题”那一列：它关于这一轮、这个项目、这个用户、"
        "长期历史，还是一个巨大的工具输出？",
        "对所有项目都适用的偏好属于用户（s11）；几个月前的决定是历史，"
        "只有召回才能把它找回来（s12）。",
        '答案是一个含五个标签的 dict，例如 {"A": "s09", "B": "s10", …}。',
    ),
    solution=(
        "# Exercise 13.1 — solution\n"
        'answer = {"A": "s09", "B": "s10", "C": "s11", "D": "s12", "E": "s13"}'
    ),
    wrong_answers=(
        ({"A": "s09", "B": "s10", "C": "s12", "D": "s12", "E": "s13"}, "C: not s12"),
        ({"A": "s12", "B": "s10", "C": "s11", "D": "s12", "E": "s13"}, "this very session"),
        ({"A": "s09", "B": "s11", "C": "s11", "D": "s12", "E": "s13"}, "fact of one project"),
        ({"A": "s09", "B": "s10", "C": "s11", "D": "s12", "E": "s12"}, "huge output"),
        ({"A": "s09", "B": "s10", "C": "s11", "D": "s12"}, "missing E"),
        ({"A": "s09", "B": "s10", "C": "s11", "D": "s12", "E": "s14"}, "not a chapter"),
        ("s12", "should be a dict"),
    ),
).register()


def _violated(answer: Any) -> Verdict:
    given = _labelled(answer, '{"A": 4, "B": …}')
    results = tampered_results(sample_store(), SAMPLE_AS_OF)
    missing = [label for label in results if label not in given]
    if missing:
        return wrong(
            f"give an item number for each of {', '.join(results)}: missing {', '.join(missing)}",
            zh=f"请为 {', '.join(results)} 各给出一个条目编号：缺少 {', '.join(missing)}",
        )
    numbers = [item.number for item in CHECKLIST]
    titles_zh = {item.number: item.zh for item in CHECKLIST}
    # The audit's facts stay in English in both editions: they are the library's own output.
    problems: list[str] = []
    problems_zh: list[str] = []
    found: list[str] = []
    found_zh: list[str] = []
    for label, result in results.items():
        audit = audit_result(result)
        failing = [n for n, (ok, _) in audit.items() if not ok]
        number = given[label]
        if isinstance(number, bool) or not isinstance(number, int):
            raise shape_error(
                f"{label} should be an item number (an int), not {number!r}",
                f"{label} 应是一个条目编号（int），而不是 {number!r}",
            )
        if number not in numbers:
            problems.append(
                f"{label}: the checklist items are numbered {numbers[0]} to {numbers[-1]}"
            )
            problems_zh.append(f"{label}：检查清单的条目编号是 {numbers[0]} 到 {numbers[-1]}")
        elif number in failing:
            found.append(f"{label} breaks item {number} ({audit[number][1]})")
            found_zh.append(
                f"{label} 违反第 {number} 项“{titles_zh[number]}”（{audit[number][1]}）"
            )
        elif number in audit:
            problems.append(f"{label}: item {number} holds for this result — {audit[number][1]}")
            problems_zh.append(
                f"{label}：第 {number} 项“{titles_zh[number]}”对这个结果成立——{audit[number][1]}"
            )
        else:
            problems.append(
                f"{label}: item {number} cannot be seen in one result (it needs "
                f"the model's query or the store before and after); look at "
                f"items {RESULT_ITEMS[0]}–{RESULT_ITEMS[-1]}"
            )
            problems_zh.append(
                f"{label}：第 {number} 项无法从单个结果看出（它需要模型写的"
                f"查询，或存储在召回前后的状态）；请看第 "
                f"{RESULT_ITEMS[0]}–{RESULT_ITEMS[-1]} 项"
            )
    if problems:
        more = " …" if len(problems) > 2 else ""
        return wrong("; ".join(problems[:2]) + more, zh="；".join(problems_zh[:2]) + more)
    return right("; ".join(found), zh="；".join(found_zh))


Exercise(
    id="13.2",
    title="which checklist item each broken result violates",
    grade=_violated,
    hints=(
        "One result alone can show items 2 to 8. Go down them for each table: normalized "
        "terms, the three counts, query_id, scope and source, the sum of contributions, "
        "the order of the ranks, the number of hits against the limit.",
        "A: compare the two rows field by field — what decides between two equal totals? "
        "B: add lexical_contribution and recency_contribution. C: read the query's limit.",
        'The answer is a dict of item numbers, e.g. {"A": 4, "B": 5, "C": 6}.',
    ),
    hints_zh=(
        "单个结果能看出第 2 到第 8 项。对每张表逐项检查：规范化的词项、三个计数、"
        "query_id、作用域与来源、各项贡献之和、排名顺序、命中数与 limit 的比较。",
        "A：逐字段比较两行——两个相等的总分靠什么分先后？"
        "B：把 lexical_contribution 和 recency_contribution 相加。C：看查询的 limit。",
        '答案是一个条目编号的 dict，例如 {"A": 4, "B": 5, "C": 6}。',
    ),
    solution='# Exercise 13.2 — solution\nanswer = {"A": 7, "B": 6, "C": 8}',
    wrong_answers=(
        ({"A": 4, "B": 6, "C": 8}, "A: item 4 holds"),
        ({"A": 7, "B": 3, "C": 8}, "B: item 3 holds"),
        ({"A": 7, "B": 6, "C": 9}, "cannot be seen in one result"),
        ({"A": 7, "B": 6, "C": 12}, "numbered 1 to 9"),
        ({"A": 7, "B": 6}, "missing C"),
        ([7, 6, 8], "should be a dict"),
    ),
).register()

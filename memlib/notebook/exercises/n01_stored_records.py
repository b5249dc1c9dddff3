"""Exercises of ``01_stored_records.ipynb``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ...records import MemorySource, user_scope_for
from . import Exercise, Verdict, right, wrong
from ._common import as_int, as_text

OSAKA = "2026-08-10T09:30:00+09:00"
USERS = ("Straße", "STRASSE", "strasse ", "Strasse-1")


def _captured_at(answer: Any) -> Verdict:
    text = as_text(answer, "captured_at").strip()
    kept = MemorySource(
        "transcript-osaka", "conversation_transcript", "Osaka trip", OSAKA
    ).captured_at
    if text == kept:
        return right(
            f"{OSAKA} is {kept}: the store keeps every instant in UTC, with a Z",
            zh=f"{OSAKA} 即 {kept}：存储把每个时刻都保存为 UTC，并以 Z 结尾",
        )
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return wrong(
            f"{text!r} is not a timestamp: write it as YYYY-MM-DDTHH:MM:SSZ",
            zh=f"{text!r} 不是时间戳：请写成 YYYY-MM-DDTHH:MM:SSZ",
        )
    expected = datetime.fromisoformat(kept.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        return wrong(
            "a timestamp without a timezone is refused: the store writes UTC as Z",
            zh="没有时区的时间戳会被拒绝：存储把 UTC 写成 Z",
        )
    if moment == expected:
        return wrong(
            "the right instant, but the store writes it in UTC with a final Z (not an offset)",
            zh="时刻对了，但存储把它写成 UTC，末尾是 Z（而不是时区偏移）",
        )
    hours = (moment - expected).total_seconds() / 3600
    if hours == 9:
        return wrong(
            "that is the Osaka clock time: +09:00 means the clock runs 9 hours "
            "ahead of UTC, so UTC is 9 hours earlier",
            zh="这是大阪的钟面时间：+09:00 表示当地时钟比 UTC 快 9 小时，所以 UTC 要早 9 小时",
        )
    if hours == 18:
        return wrong(
            "you added the 9 hours; +09:00 means UTC is 9 hours earlier, so subtract",
            zh="你加上了 9 小时；+09:00 表示 UTC 早 9 小时，所以应当减去",
        )
    return wrong(
        f"that instant is {hours:+g} hours from the one captured: subtract the offset "
        "from the local time",
        zh=f"这个时刻与 captured_at 所指的时刻相差 {hours:+g} 小时：用当地时间减去时区偏移",
    )


def _scopes(answer: Any) -> Verdict:
    as_int(answer)
    scopes = {user_scope_for(user) for user in USERS}
    if answer == len(scopes):
        return right(
            f"{len(USERS)} ids, {len(scopes)} scopes: strip and casefold make "
            "Straße, STRASSE and 'strasse ' one user; Strasse-1 is another",
            zh=f"{len(USERS)} 个 id，{len(scopes)} 个作用域：strip 和 casefold 让 "
            "Straße、STRASSE 和 'strasse ' 成为同一个用户；Strasse-1 是另一个",
        )
    if answer == len(USERS):
        return wrong(
            "a scope is computed from the id after stripping spaces and case-folding: "
            "find the ids that become equal",
            zh="作用域由去掉首尾空白并 casefold 之后的 id 计算：找出变得相同的 id",
        )
    if answer == len(scopes) + 1:
        return wrong(
            "casefold() turns ß into ss (lower() does not), so Straße is strasse",
            zh="casefold() 把 ß 变成 ss（lower() 不会），所以 Straße 就是 strasse",
        )
    if answer == 1:
        return wrong(
            "Strasse-1 keeps its -1 after strip and casefold: it is someone else",
            zh="Strasse-1 经过 strip 和 casefold 后仍保留 -1：它是另一个人",
        )
    return wrong(
        f"there are {len(USERS)} ids; group those that are equal after strip() and casefold()",
        zh=f"共有 {len(USERS)} 个 id；把 strip() 和 casefold() 之后相同的归为一组",
    )


Exercise(
    id="01.1",
    title="the captured_at the store keeps for an Osaka timestamp",
    grade=_captured_at,
    hints=(
        "Look at the Berlin example at the top: which form did +02:00 become?",
        "+09:00 means local time is 9 hours ahead of UTC.",
    ),
    hints_zh=("看顶部的柏林示例：+02:00 变成了什么形式？", "+09:00 表示当地时间比 UTC 快 9 小时。"),
    solution='# Exercise 01.1 — solution\nanswer = "2026-08-10T00:30:00Z"',
    wrong_answers=(
        ("2026-08-10T09:30:00Z", "9 hours earlier"),
        ("2026-08-10T18:30:00Z", "subtract"),
        ("2026-08-10T00:30:00+00:00", "final Z"),
        ("2026-08-10 09:30", "without a timezone"),
        ("yesterday", "not a timestamp"),
    ),
).register()

Exercise(
    id="01.2",
    title="how many scopes four user ids make",
    grade=_scopes,
    hints=(
        "The scope is the first 16 hex digits of sha256(user_id.strip().casefold()).",
        "Try 'Straße'.casefold() and 'Straße'.lower() in a cell.",
    ),
    hints_zh=(
        "作用域是 sha256(user_id.strip().casefold()) 的前 16 个十六进制位。",
        "在一个单元格里试试 'Straße'.casefold() 和 'Straße'.lower()。",
    ),
    solution="# Exercise 01.2 — solution\nanswer = 2",
    wrong_answers=(
        (4, "stripping spaces"),
        (3, "casefold"),
        (1, "someone else"),
        ("2", "whole number"),
    ),
).register()

"""Exercises of ``09_failures_and_concurrency.ipynb``."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...errors import RemoteMemoryError
from ...sample import SAMPLE_AS_OF, SAMPLE_QUERY, SAMPLE_USER_ID, fixed_clock
from ...stores.jsonl._store import RemoteMemoryStore
from ..fixtures import conversation_item
from ..views import recall
from . import Exercise, Verdict, right, wrong
from ._common import sample_store, shape_error

LIMIT_MESSAGE = "limit must be an integer"
USER_MESSAGE = "user_id must not be empty"
HANDLES = ("outcome", "lines", "records")


def _refusal(action: Any) -> RemoteMemoryError | None:
    try:
        action()
    except RemoteMemoryError as exc:
        return exc
    return None


def _two_refusals(answer: Any) -> Verdict:
    if not isinstance(answer, Mapping) or set(answer) != {"limit", "user_id"}:
        raise shape_error(
            'the answer should be a dict {"limit": ..., "user_id": ...}',
            '答案应是一个 dict {"limit": ..., "user_id": ...}',
        )
    limit, user_id = answer["limit"], answer["user_id"]
    if isinstance(limit, str):
        return wrong(
            "the limit is a string: the table above has that case — find a value of another type",
            zh="limit 是字符串：上面的表格已有这种情况——找一个其他类型的值",
        )
    if isinstance(limit, bool):
        return wrong(
            "True is in the table above: find a value that is neither a string nor a bool",
            zh="True 已在上面的表格里：找一个既不是字符串、也不是 bool 的值",
        )
    refused = _refusal(lambda: recall(sample_store(), SAMPLE_QUERY, SAMPLE_AS_OF, limit))
    if refused is None:
        return wrong(
            f"recall accepts limit={limit!r}: nothing is refused",
            zh=f"recall 接受 limit={limit!r}：什么都没有被拒绝",
        )
    if str(refused) != LIMIT_MESSAGE:
        return wrong(
            f"recall refuses limit={limit!r} with “{refused}”: that is an integer out "
            "of range — use a value that is not an int at all",
            zh=f"recall 以“{refused}”拒绝了 limit={limit!r}：这是超出范围的整数"
            "——请用一个根本不是 int 的值",
        )
    with tempfile.TemporaryDirectory(prefix="memlib-grader-") as root:
        path = Path(root) / "records.jsonl"
        opened = _refusal(lambda: RemoteMemoryStore(path, user_id=user_id).read_all())
    if opened is None:
        return wrong(
            f"a store opens for user_id={user_id!r}: every user id with a visible "
            "character is someone's",
            zh=f"user_id={user_id!r} 时存储能打开：只要含有可见字符，用户 id 就属于某个人",
        )
    if str(opened) != USER_MESSAGE:
        return wrong(
            f"opening refuses user_id={user_id!r} with “{opened}”, not “{USER_MESSAGE}”",
            zh=f"打开存储时以“{opened}”拒绝了 user_id={user_id!r}，而不是“{USER_MESSAGE}”",
        )
    return right(
        f"limit={limit!r} and user_id={user_id!r} are refused as "
        f"{type(refused).__name__}s, before anything is read or written",
        zh=f"在读写任何东西之前，limit={limit!r} 和 user_id={user_id!r} 就都以 "
        f"{type(refused).__name__} 被拒绝了",
    )


def _handles() -> dict[str, Any]:
    """The two-handle scenario of 09.2, run on a new file."""
    with tempfile.TemporaryDirectory(prefix="memlib-grader-") as root:
        path = Path(root) / "two-handles" / "records.jsonl"
        first = RemoteMemoryStore(path, user_id=SAMPLE_USER_ID, clock=fixed_clock())
        second = RemoteMemoryStore(path, user_id=SAMPLE_USER_ID, clock=fixed_clock())
        first.read_all()
        second.read_all()
        first.append(**conversation_item("conversation-020"))
        refused = _refusal(lambda: second.append(**conversation_item("conversation-020")))
        second.append(**conversation_item("conversation-021"))
        return {
            "outcome": "ok" if refused is None else type(refused).__name__,
            "lines": len(path.read_bytes().splitlines()),
            "records": len(second.read_all()),
        }


def _two_handles(answer: Any) -> Verdict:
    if not isinstance(answer, Mapping) or not set(HANDLES) <= set(answer):
        raise shape_error(
            'the answer should be a dict {"outcome": ..., "lines": ..., "records": ...}',
            '答案应是一个 dict {"outcome": ..., "lines": ..., "records": ...}',
        )
    want = _handles()
    outcome = answer["outcome"]
    if isinstance(outcome, type):
        outcome = outcome.__name__
    if outcome != want["outcome"]:
        if outcome == "ok":
            return wrong(
                "second read the store before first wrote, but each append takes the "
                "lock and brings its ids up to date from the file before it checks: "
                "second sees first's line",
                zh="second 在 first 写入之前读过存储，但每次 append 都会先取得锁，"
                "再从文件更新自己的 id，然后才检查：second 能看到 first 写的那一行",
            )
        if outcome == "RemoteMemoryValidationError":
            return wrong(
                "it is a validation error, but a more precise class says which rule was broken",
                zh="这确实是校验错误，但有一个更精确的类说明违反了哪条规则",
            )
        return wrong(
            f"{outcome!r} is not what second.append raises: “ok”, or the class name of the error",
            zh=f"second.append 抛出的不是 {outcome!r}：请回答“ok”，或错误的类名",
        )
    lines, records = answer["lines"], answer["records"]
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (lines, records)):
        return wrong("lines and records are whole numbers", zh="lines 和 records 都是整数")
    if lines != want["lines"]:
        if lines > want["lines"]:
            return wrong(
                "a refused append writes nothing: the duplicate is refused inside the "
                "lock, before the write",
                zh="被拒绝的 append 什么也不写：重复的 id 在锁内、写入之前就被拒绝",
            )
        return wrong(
            "count again: every append that was not refused is one line",
            zh="再数一遍：每次没有被拒绝的 append 都是一行",
        )
    if records != want["records"]:
        return wrong(
            "a handle reads the file again on every read_all: second returns every "
            "line, first's included",
            zh="句柄每次 read_all 都会重新读取文件：second 返回每一行，包括 first 写的那一行",
        )
    return right(
        f"{want['outcome']} inside the lock, {want['lines']} lines: the check and the "
        "write happen under one lock, against the file as it is",
        zh=f"在锁内抛出 {want['outcome']}，共 {want['lines']} 行："
        "检查和写入在同一把锁下进行，针对的是文件的当前内容",
    )


Exercise(
    id="09.1",
    title="a limit that is not an integer, a user id that is empty",
    grade=_two_refusals,
    hints=(
        "normalize checks the type of limit before its range: which values are not an int?",
        "A user id is refused when it has no visible character — the id is stripped first.",
    ),
    hints_zh=(
        "normalize 先检查 limit 的类型，再检查范围：哪些值不是 int？",
        "没有可见字符的用户 id 会被拒绝——id 会先去掉首尾空白。",
    ),
    solution='# Exercise 09.1 — solution\nanswer = {"limit": 2.0, "user_id": "   "}',
    wrong_answers=(
        ({"limit": "5x", "user_id": "   "}, "is a string"),
        ({"limit": True, "user_id": "   "}, "neither a string nor a bool"),
        ({"limit": 11, "user_id": "   "}, "out of range"),
        ({"limit": 5, "user_id": "   "}, "accepts"),
        ({"limit": 2.0, "user_id": "bob"}, "opens for"),
        ((2.0, "   "), "should be a dict"),
    ),
).register()

Exercise(
    id="09.2",
    title="two handles on one file append the same id",
    grade=_two_handles,
    hints=(
        "Each handle keeps its own cache of the file, as two processes would.",
        "An append takes the lock, then refreshes its ids from the file, then checks, then "
        "writes: what does second find when it refreshes?",
        "A refused append leaves the file as it was.",
    ),
    hints_zh=(
        "每个句柄都有自己的文件缓存，就像两个进程一样。",
        "一次 append 先取得锁，再从文件刷新 id，然后检查，最后写入：second 刷新时看到了什么？",
        "被拒绝的 append 不改动文件。",
    ),
    solution=(
        "# Exercise 09.2 — solution\n"
        'answer = {"outcome": "RemoteMemoryDuplicateError", "lines": 2, "records": 2}'
    ),
    wrong_answers=(
        ({"outcome": "ok", "lines": 3, "records": 3}, "brings its ids up to date"),
        ({"outcome": "RemoteMemoryDuplicateError", "lines": 3, "records": 3}, "writes nothing"),
        ({"outcome": "RemoteMemoryDuplicateError", "lines": 2, "records": 1}, "reads the file"),
        ({"outcome": "RemoteMemoryValidationError", "lines": 2, "records": 2}, "more precise"),
        ({"outcome": "ok"}, "should be a dict"),
    ),
).register()

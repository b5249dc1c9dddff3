"""Exercises of ``08_profile.ipynb``."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ...errors import RemoteMemoryError
from ...records import MemoryKind, MemorySource
from ...sample import fixed_clock, open_sample_store
from ...stores._base import MemoryStore
from ...stores.jsonl._store import RemoteMemoryStore
from ..views import recall
from . import Exercise, Verdict, right, wrong
from ._common import as_function, missing_keys, shape_error

# 08.2: a fresh sample store, two retractions, then a session that starts on SESSION_DAY.
RETRACTED = ("profile-001", "conversation-005")
SESSION_DAY = datetime(2026, 8, 1, 12, 0, tzinfo=UTC)
SESSION_QUERY = "embedding reranker"
SESSION_LIMIT = 5
PREDICTED = ("injected", "hits", "searched_records", "retracted_records")
# The zh edition's names of the two stores 08.1 is run on.
_LABELS_ZH = {
    "a copy of store as it stands": "当前 store 的副本",
    "a fresh sample store": "一个全新的样例存储",
}
_REQUEST = MemorySource(
    source_id="grader-request",
    source_type="user_request",
    title="Withdraw a record",
    captured_at="2026-08-10T07:00:00Z",
)


def _copy_of(store: Any, folder: Path) -> RemoteMemoryStore:
    """A JSONL store over a byte copy of ``store``'s file: the learner's store is only read."""
    if not isinstance(store, RemoteMemoryStore):
        raise shape_error(
            "store= should be the notebook's JSONL store", "store= 应是笔记本中的 JSONL 存储"
        )
    target = folder / "records.jsonl"
    folder.mkdir(parents=True)
    if store.path.exists():
        target.write_bytes(store.path.read_bytes())
    return RemoteMemoryStore(target, user_id=store.user_id, clock=fixed_clock())


def _withdraws_every_profile(
    action: Callable[[MemoryStore], Any], copy: RemoteMemoryStore, label: str
) -> Verdict | None:
    """What is wrong after ``action`` ran on ``copy`` (None when nothing is)."""
    label_zh = _LABELS_ZH.get(label, label)
    before_bytes = copy.path.read_bytes() if copy.path.exists() else b""
    before = copy.read_all()
    try:
        action(copy)
    except RemoteMemoryError as exc:
        if "already retracted" in str(exc):
            return wrong(
                f"on {label}: {exc} — retract only the profiles that still stand "
                "(store.latest_profile() names the one injected now)",
                zh=f"在{label_zh}上：“{exc}”——只撤回仍然有效的用户画像"
                "（store.latest_profile() 给出当前注入的那一个）",
            )
        return wrong(
            f"on {label} your function raised {type(exc).__name__}: {exc}",
            zh=f"在{label_zh}上，你的函数抛出了 {type(exc).__name__}：“{exc}”",
        )
    after_bytes = copy.path.read_bytes() if copy.path.exists() else b""
    if not after_bytes.startswith(before_bytes):
        return wrong(
            f"on {label} the file lost or changed lines: a store is never edited — "
            "retract(...) appends a record that withdraws another",
            zh=f"在{label_zh}上，文件丢失或改动了已有的行：存储从不被编辑——"
            "retract(...) 追加一条记录来撤回另一条",
        )
    added = copy.read_all()[len(before) :]
    appended = [r.memory_id for r in added if r.kind is not MemoryKind.RETRACTION]
    if appended:
        return wrong(
            f"on {label} your function appended {', '.join(appended)}: only a "
            "retraction withdraws a record",
            zh=f"在{label_zh}上，你的函数追加了 {', '.join(appended)}："
            "只有 RETRACTION 类型的记录才能撤回另一条记录",
        )
    kinds = {r.memory_id: r.kind for r in before}
    conversations = [
        r.retracts
        for r in added
        if r.retracts is not None and kinds.get(r.retracts) is MemoryKind.CONVERSATION
    ]
    if conversations:
        return wrong(
            f"on {label} you retracted {', '.join(conversations)}: a conversation is "
            "never injected at session start — it is gone from the hits, and the "
            "profile block is unchanged",
            zh=f"在{label_zh}上，你撤回了 {', '.join(conversations)}："
            "对话记录从不在会话启动时注入——它从命中里消失了，画像块却没有变化",
        )
    latest = copy.latest_profile()
    if latest is not None:
        withdrew = [r.retracts for r in added if r.retracts is not None]
        after = f"after retracting {', '.join(withdrew)}, " if withdrew else ""
        after_zh = f"撤回 {', '.join(withdrew)} 之后，" if withdrew else ""
        return wrong(
            f"on {label}, {after}{latest.memory_id} still stands, so it is injected: "
            "the latest standing profile takes the place of a retracted one",
            zh=f"在{label_zh}上，{after_zh}{latest.memory_id} 仍然有效，所以注入的是它："
            "仍然有效的最新用户画像会顶替被撤回的那一个",
        )
    return None


def _inject_no_profile(answer: Any, store: Any = None) -> Verdict:
    as_function(answer, "takes a store and acts on it", "接收一个存储，并对它进行操作")
    with tempfile.TemporaryDirectory(prefix="memlib-grader-") as root:
        copies = {}
        if store is not None:
            copies["a copy of store as it stands"] = _copy_of(store, Path(root) / "yours")
        copies["a fresh sample store"] = open_sample_store(Path(root) / "fresh")
        for label, copy in copies.items():
            verdict = _withdraws_every_profile(answer, copy, label)
            if verdict is not None:
                return verdict
    where = "either copy" if len(copies) > 1 else "the copy"
    where_zh = "两份副本中都" if len(copies) > 1 else "副本中"
    return right(
        f"no profile stands in {where}: the session block is the empty string, and "
        "every profile is still in the file",
        zh=f"{where_zh}没有仍然有效的用户画像：会话启动时的块是空字符串，"
        "而每个用户画像都还在文件里",
    )


def _session() -> dict[str, Any]:
    """What 08.2 asks about, computed: the scenario run on a fresh sample store."""
    with tempfile.TemporaryDirectory(prefix="memlib-grader-") as root:
        store = open_sample_store(root)
        for memory_id in RETRACTED:
            store.retract(memory_id, reason="Withdrawn for the exercise.", source=_REQUEST)
        latest = store.latest_profile()
        result = recall(store, SESSION_QUERY, SESSION_DAY, SESSION_LIMIT)
    return {
        "injected": None if latest is None else latest.memory_id,
        "hits": [h.memory_id for h in result.hits],
        "searched_records": result.searched_records,
        "retracted_records": result.retracted_records,
    }


def _session_prediction(answer: Any) -> Verdict:
    missing = missing_keys(answer, PREDICTED)
    if missing is not None:
        return missing
    want = _session()
    injected = answer["injected"]
    if injected != want["injected"]:
        if injected is None:
            return wrong(
                "the profile block takes no as_of: a session gets the latest standing "
                "snapshot, even one captured after the day the session starts",
                zh="画像块不接受 as_of：会话拿到的是仍然有效的最新快照，"
                "哪怕它的事件时间晚于会话启动的那一天",
            )
        if injected in RETRACTED:
            return wrong(
                f"{injected} is retracted: it is never injected again",
                zh=f"{injected} 已被撤回：它不会再被注入",
            )
        return wrong(
            f"{injected!r} is not the latest profile that still stands",
            zh=f"{injected!r} 不是仍然有效的最新用户画像",
        )
    hits = answer["hits"]
    if isinstance(hits, str) or not isinstance(hits, (list, tuple)):
        return wrong(
            "“hits” should be the list of memory ids recall returns, in rank order",
            zh="“hits” 应当是召回返回的 memory id 列表，按名次排列",
        )
    if list(hits) != want["hits"]:
        retracted_hits = [h for h in hits if h in RETRACTED]
        if retracted_hits:
            return wrong(
                f"{', '.join(retracted_hits)} is retracted: a retracted record is never a hit",
                zh=f"{', '.join(retracted_hits)} 已被撤回：被撤回的记录永远不会是命中",
            )
        return wrong(
            f"the hits are not {list(hits)}: which conversations share a term with "
            f"“{SESSION_QUERY}” and still stand?",
            zh=f"命中不是 {list(hits)}：哪些对话记录与“{SESSION_QUERY}”有共同词项，并且仍然有效？",
        )
    searched, retracted = answer["searched_records"], answer["retracted_records"]
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (searched, retracted)):
        return wrong(
            "searched_records and retracted_records are whole numbers",
            zh="searched_records 和 retracted_records 都是整数",
        )
    if searched != want["searched_records"]:
        if searched > want["searched_records"]:
            return wrong(
                "searched_records counts the conversation records that still stand: "
                "a retracted one is left out before the search",
                zh="searched_records 统计的是仍然有效的对话记录：被撤回的那条在检索之前就被排除了",
            )
        return wrong(
            "the retracted profile was never among the searched records: profiles "
            "are not searched at all",
            zh="被撤回的用户画像本来就不在被检索的记录中：用户画像根本不参与检索",
        )
    if retracted != want["retracted_records"]:
        return wrong(
            "retracted_records counts the withdrawn conversation records only: a "
            "profile is never searched, so its retraction is not counted",
            zh="retracted_records 只统计被撤回的对话记录：用户画像从不参与检索，所以它的撤回不计入",
        )
    return right(
        "the profile block ignores as_of and retractions only remove: "
        f"{want['searched_records']} searched, {want['retracted_records']} retracted",
        zh="画像块不看 as_of，撤回只会移除："
        f"检索了 {want['searched_records']} 条，撤回了 {want['retracted_records']} 条",
    )


Exercise(
    id="08.1",
    title="a function that makes any store inject no profile",
    grade=_inject_no_profile,
    hints=(
        "Nothing is ever deleted: what withdraws a record is store.retract(memory_id, "
        "reason=..., source=...).",
        "Retracting the injected profile makes the next latest one the injected profile; and "
        "retracting a record twice is an error.",
        "Loop: while store.latest_profile() is not None, retract it.",
    ),
    hints_zh=(
        "什么都不会被删除：撤回一条记录用 store.retract(memory_id, reason=..., source=...)。",
        "撤回当前注入的用户画像后，次新的那个就成为被注入的画像；而同一条记录撤回两次会报错。",
        "循环：只要 store.latest_profile() 不是 None，就撤回它。",
    ),
    solution=(
        "# Exercise 08.1 — solution\n"
        "def withdraw_every_profile(store):\n"
        "    # Each retraction exposes the next latest snapshot, so retract until none "
        "stands.\n"
        "    while (profile := store.latest_profile()) is not None:\n"
        '        store.retract(profile.memory_id, reason="The user asked to start without '
        'a profile.",\n'
        "                      source=request)\n"
        "\n\n"
        "answer = withdraw_every_profile"
    ),
    wrong_answers=(
        (lambda s: s.retract("profile-002", reason="r", source=_REQUEST), "profile-001 still"),
        (lambda s: s.retract("profile-001", reason="r", source=_REQUEST), "profile-002 still"),
        (lambda s: s.retract("conversation-003", reason="r", source=_REQUEST), "never injected"),
        (lambda s: s.path.write_bytes(b""), "lost or changed lines"),
        (
            lambda s: [
                s.retract(m, reason="r", source=_REQUEST)
                for m in ("profile-002", "profile-001", "profile-002")
            ],
            "already retracted",
        ),
        ("profile-001", "takes a store"),
    ),
).register()

# 08.2's answer, of which each wrong answer below changes one value.
_SESSION = {
    "injected": "profile-002",
    "hits": ["conversation-006"],
    "searched_records": 12,
    "retracted_records": 1,
}

Exercise(
    id="08.2",
    title="a session after two retractions, predicted",
    grade=_session_prediction,
    hints=(
        "Two roads: the profile block (latest standing profile, no query, no as_of) and the "
        "recall (conversation records that stand, scored at as_of).",
        "A retraction removes its target from both roads; the counts of the recall count "
        "conversation records only.",
        "Which conversations hold “embedding” or “reranker”? The records table of 01 or 03 "
        "has their text.",
    ),
    hints_zh=(
        "两条路径：画像块（仍然有效的最新用户画像，不看查询，也不看 as_of）和召回"
        "（仍然有效的对话记录，在 as_of 时刻评分）。",
        "撤回会把目标从两条路径上同时移除；召回的计数只统计对话记录。",
        "哪些对话记录含有“embedding”或“reranker”？笔记本 01 或 03 的记录表列出了它们的文本。",
    ),
    solution=(
        "# Exercise 08.2 — solution\n"
        'answer = {"injected": "profile-002", "hits": ["conversation-006"], '
        '"searched_records": 12,\n'
        '          "retracted_records": 1}'
    ),
    wrong_answers=(
        ({**_SESSION, "injected": None}, "takes no as_of"),
        ({**_SESSION, "hits": ["conversation-005", "conversation-006"]}, "never a hit"),
        ({**_SESSION, "searched_records": 13}, "left out before the search"),
        ({**_SESSION, "searched_records": 11}, "not searched at all"),
        ({**_SESSION, "retracted_records": 2}, "not counted"),
        ({"injected": "profile-001"}, "needs the keys"),
        ({**_SESSION, "injected": "profile-001", "hits": []}, "is retracted"),
        (["profile-002"], "should be a dict"),
    ),
).register()

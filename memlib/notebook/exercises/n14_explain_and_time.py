"""Exercises of ``14_explain_and_time.ipynb``."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ...engine import RecallEngine
from ...errors import RemoteMemoryError
from ...records import MemoryKind, StoredMemory
from ...result import RecallHit
from ...sample import SAMPLE_AS_OF, fixed_clock, open_sample_store
from ...stores._base import MemoryStore
from ...stores.jsonl._store import RemoteMemoryStore
from .._common import QUERY_ID
from ..history import LATER_AS_OF, RETENTION_ITEM, history_store
from . import Exercise, Verdict, right, wrong
from ._common import as_function, as_number, missing_keys, shape_error

# 14.1: a fresh sample store; conversation-006 for "embedding reranker" at limit 1.
TIE_QUERY = "embedding reranker"
TIE_RECORD = "conversation-006"
EXPLAINED = ("verdict", "rank", "deciding")
# 14.2: the notebook's history, as known at KNOWN_AT.
PAST_QUERY = "layered memory design"
KNOWN_AT = datetime(2026, 8, 11, 9, 30, tzinfo=UTC)
PAST_LIMIT = 3
# 14.3: replace conversation-009 by RETENTION_ITEM, stored at REPLACED_AT.
REPLACED = "conversation-009"
REPLACED_AT = datetime(2026, 8, 11, 12, 0, tzinfo=UTC)
RETENTION_QUERY = "conversation memory kept"
# 14.4: a floor for PAST_QUERY over the whole history.
FLOOR_LIMIT = 5


# -- 14.1 -------------------------------------------------------------------------------------


def _tie_explained() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="memlib-grader-") as root:
        said = RecallEngine(open_sample_store(root)).explain(
            TIE_QUERY, TIE_RECORD, limit=1, as_of=SAMPLE_AS_OF, query_id=QUERY_ID
        )
    return {"verdict": said.verdict, "rank": said.rank, "deciding": said.deciding}


def _predict_explain(answer: Any) -> Verdict:
    missing = missing_keys(answer, EXPLAINED)
    if missing is not None:
        return missing
    want = _tie_explained()
    verdict = answer["verdict"]
    if verdict != want["verdict"]:
        if verdict == "no_shared_term":
            return wrong(
                f"{TIE_RECORD} holds both “embedding” and “reranker”: it is a "
                "candidate, and it was scored",
                zh=f"{TIE_RECORD} 含有 “embedding” 和 “reranker” 两个词：它是候选，也被评了分",
            )
        if verdict in ("retracted", "superseded"):
            return wrong(
                "nothing is retracted or superseded in a fresh sample store",
                zh="全新的样例存储里没有任何记录被撤回或取代",
            )
        if verdict == "hit":
            return wrong(
                "limit=1 keeps one hit, and it is not this record",
                zh="limit=1 只保留一条命中，而它不是这条记录",
            )
        return wrong(
            f"{verdict!r} is not the verdict: which stage does a scored candidate "
            "reach when another one takes the only place?",
            zh=f"{verdict!r} 不是这个判定：被评了分、却被另一条记录占去唯一名额的"
            "候选停在哪个阶段？",
        )
    rank = answer["rank"]
    if rank != want["rank"]:
        return wrong(
            f"rank {rank!r}: count the candidates that hold both terms; this one is "
            "the last of them",
            zh=f"名次 {rank!r}：数一数同时含有两个词的候选；这一条是其中最后一名",
        )
    deciding = str(answer["deciding"])
    if not deciding.startswith("memory_id"):
        if deciding.startswith(("recency", "captured_at")):
            return wrong(
                "conversation-005 and conversation-006 were captured at the same "
                "instant: their recency and captured_at are equal",
                zh="conversation-005 与 conversation-006 的事件时间（captured_at）相同："
                "它们的新近度和 captured_at 都相等",
            )
        if deciding.startswith(("lexical", "lexical_coverage")):
            return wrong(
                "both records cover both terms: their coverage is equal",
                zh="两条记录都覆盖了两个词：覆盖率相等",
            )
        return wrong(
            f"{deciding!r} did not decide: the totals are equal, so stage 4's "
            "tie-breakers are read in order — which is the first that differs?",
            zh=f"决定因素不是 {deciding!r}：两者总分相等，于是按顺序比较第 4 阶段的"
            "并列规则——第一个不同的是哪一个？",
        )
    return right(
        "a perfect tie down to the last key: memory_id, the one key that is unique, "
        "puts conversation-005 first",
        zh="一直平到最后一个键：唯一的键 memory_id 让 conversation-005 排在前面",
    )


# -- 14.2 -------------------------------------------------------------------------------------


def _later_hits(
    store: MemoryStore, query: str, limit: int, **options: Any
) -> tuple[RecallHit, ...]:
    """A recall at ``LATER_AS_OF`` with the notebooks' query id (``options``: known_at …)."""
    engine = RecallEngine(store)
    return engine.recall(query, limit=limit, as_of=LATER_AS_OF, query_id=QUERY_ID, **options).hits


def _known_hits() -> list[str]:
    with tempfile.TemporaryDirectory(prefix="memlib-grader-") as root:
        hits = _later_hits(history_store(root), PAST_QUERY, PAST_LIMIT, known_at=KNOWN_AT)
    return [h.memory_id for h in hits]


def _predict_known_at(answer: Any) -> Verdict:
    if isinstance(answer, str) or not isinstance(answer, list | tuple):
        raise shape_error(
            "the answer should be the list of hit memory ids, in rank order",
            "答案应是命中的 memory_id 列表，按名次排列",
        )
    hits = list(answer)
    want = _known_hits()
    if hits == want:
        return right(
            "at 09:30 on 11 August the supersede had happened, the café retraction "
            "and the late import had not: known_at filters by stored_at alone",
            zh="8 月 11 日 09:30 时，取代已经发生，咖啡馆那条的撤回和迟到的导入"
            "还没有发生：known_at 只按 stored_at 过滤",
        )
    if "conversation-015" in hits:
        return wrong(
            "conversation-015 was stored on 12 August, after known_at: it did not "
            "exist yet, however old its captured_at",
            zh="conversation-015 是 8 月 12 日才存储的，晚于 known_at：那时它还不存在，"
            "不管它的 captured_at 有多早",
        )
    if "conversation-001" in hits:
        return wrong(
            "conversation-001 was superseded at 09:00, before known_at: its "
            "retraction was already stored",
            zh="conversation-001 在 09:00 被取代，早于 known_at：它的撤回记录已经存储",
        )
    if "conversation-008" not in hits:
        return wrong(
            "conversation-008 was retracted at 10:00, after known_at: at 09:30 it still stood",
            zh="conversation-008 在 10:00 才被撤回，晚于 known_at：09:30 时它仍然有效",
        )
    if "conversation-014" not in hits:
        return wrong(
            "conversation-014 was stored at 09:00, before known_at, and it shares "
            "“memory”; captured the day before as_of, it is very recent",
            zh="conversation-014 在 09:00 存储，早于 known_at，并且含有 “memory”；"
            "它的事件时间在 as_of 前一天，非常新",
        )
    return wrong(
        f"the right records, but not in rank order (or not {PAST_LIMIT} of them): "
        "score them at as_of, the later clock",
        zh=f"记录对了，但名次顺序不对（或不是 {PAST_LIMIT} 条）：按 as_of 这个较晚的时钟给它们评分",
    )


# -- 14.3 -------------------------------------------------------------------------------------


def _copy_of(folder: Path) -> RemoteMemoryStore:
    store = open_sample_store(folder)
    return RemoteMemoryStore(store.path, user_id=store.user_id, clock=fixed_clock(REPLACED_AT))


def _replace_retention(answer: Any) -> Verdict:
    as_function(answer, "takes a store and acts on it", "接收一个存储，并对它进行操作")
    new_id = RETENTION_ITEM["memory_id"]
    with tempfile.TemporaryDirectory(prefix="memlib-grader-") as root:
        store = _copy_of(Path(root))
        before = store.read_all()
        try:
            answer(store)
        except RemoteMemoryError as exc:
            return wrong(
                f"your function raised {type(exc).__name__}: {exc}",
                zh=f"你的函数抛出了 {type(exc).__name__}: {exc}",
            )
        verdict = _replaced(store, before, new_id)
    return verdict


def _replaced(store: MemoryStore, before: tuple[Any, ...], new_id: str) -> Verdict:
    added = store.read_all()[len(before) :]
    by_id = {r.memory_id: r for r in added}
    retractions = [r for r in added if r.kind is MemoryKind.RETRACTION]
    if new_id not in by_id:
        if retractions:
            return wrong(
                f"{REPLACED} is withdrawn, but nothing replaces it: where is {new_id}?",
                zh=f"{REPLACED} 被撤回了，却没有东西取代它：{new_id} 在哪里？",
            )
        return wrong(
            f"{new_id} was not written: pass the prepared item to the store",
            zh=f"{new_id} 没有写入：把准备好的条目交给存储",
        )
    if not any(r.retracts == REPLACED for r in retractions):
        others = [r.retracts for r in retractions]
        if others:
            return wrong(
                f"you replaced {', '.join(map(str, others))}, not {REPLACED}",
                zh=f"你取代的是 {', '.join(map(str, others))}，而不是 {REPLACED}",
            )
        return wrong(
            f"{REPLACED} still stands: append adds a record beside it, and recall now shows both",
            zh=f"{REPLACED} 仍然有效：append 只是在旁边添加一条记录，召回会同时显示两条",
        )
    new = by_id[new_id]
    link = next(r for r in retractions if r.retracts == REPLACED)
    if new.supersedes != REPLACED or link.superseded_by != new_id:
        return wrong(
            "the two records do not name each other: a retract and an append are two "
            "writes, and nothing links them — supersede writes both in one batch, "
            "linked both ways",
            zh="两条记录没有互相指向：retract 和 append 是两次写入，没有任何链接——"
            "supersede 在一个批次里写入两者，并双向链接",
        )
    now = [h.memory_id for h in _later_hits(store, RETENTION_QUERY, 5)]
    then = [h.memory_id for h in _later_hits(store, RETENTION_QUERY, 5, known_at=SAMPLE_AS_OF)]
    if REPLACED in now or new_id not in now or REPLACED not in then:
        return wrong(
            "recall should show the new record now and the old one before the change",
            zh="召回现在应显示新记录，而在变更之前应显示旧记录",
        )
    return right(
        f"{new_id} supersedes {REPLACED}: recall shows it, known_at before the change "
        f"still shows {REPLACED}, and explain names the successor",
        zh=f"{new_id} 取代了 {REPLACED}：召回显示新记录，变更之前的 known_at 仍显示 "
        f"{REPLACED}，explain 会说出后继记录",
    )


# -- 14.4 -------------------------------------------------------------------------------------


def _floor_facts() -> list[tuple[str, float, float]]:
    """The unfloored hits of 14.4's recall: (memory_id, score, lexical coverage)."""
    with tempfile.TemporaryDirectory(prefix="memlib-grader-") as root:
        hits = _later_hits(history_store(root), PAST_QUERY, FLOOR_LIMIT)
    return [(h.memory_id, h.score, h.score_breakdown.lexical_coverage) for h in hits]


def _full_coverage_floor(answer: Any) -> Verdict:
    if answer == "suggested":
        return wrong(
            "the suggested floor (0.33 for the baseline) is tuned on LoCoMo to keep "
            "98% of its recall: here it keeps weak partial matches — pick your own",
            zh="建议下限（baseline 为 0.33）是在 LoCoMo 上为保留 98% 召回率而调的："
            "在这里它会留下弱的部分匹配——自己选一个",
        )
    floor = as_number(answer, "min_score")
    facts = _floor_facts()
    full = [m for m, _, coverage in facts if coverage == 1.0]
    lowest_full = min(score for _, score, coverage in facts if coverage == 1.0)
    partial = [score for _, score, coverage in facts if coverage < 1.0]
    kept = [m for m, score, _ in facts if score >= floor]
    if kept == full:
        return right(
            f"every hit under {floor:g} covers fewer terms: with all three terms the "
            "lexical part alone is 0.85, and recency adds at most 0.15",
            zh=f"低于 {floor:g} 的命中覆盖的词都更少：三个词全中时词面部分就有 0.85，"
            "新近度最多再加 0.15",
        )
    if floor > lowest_full:
        return wrong(
            f"{floor:g} drops a hit that matches all three terms "
            f"(the lowest of them scores {lowest_full:.6f})",
            zh=f"{floor:g} 丢掉了一条三个词全中的命中（其中最低的得分是 {lowest_full:.6f}）",
        )
    return wrong(
        f"{floor:g} keeps partial matches (the best of them scores {max(partial):.6f}): raise it",
        zh=f"{floor:g} 留下了部分匹配（其中最高的得分是 {max(partial):.6f}）：再调高一些",
    )


Exercise(
    id="14.1",
    title="explain a record tied out of the only place",
    grade=_predict_explain,
    hints=(
        "explain names the first stage that stopped the record. Does conversation-006 share a "
        "term with “embedding reranker”? Is it retracted?",
        "Compare conversation-005 and conversation-006 key by key: total, lexical_coverage, "
        "captured_at, memory_id (notebook 05).",
        'Confirm in a scratch cell: history.explain(fresh_store, "embedding reranker", '
        '"conversation-006", SAMPLE_AS_OF, 1) on a new open_sample_store.',
    ),
    hints_zh=(
        "explain 给出第一个拦下记录的阶段。conversation-006 与 “embedding reranker” "
        "有共同词项吗？"
        "它被撤回了吗？",
        "逐个键比较 conversation-005 和 conversation-006：total、lexical_coverage、"
        "captured_at、memory_id（笔记本 05）。",
        "在草稿单元格里确认：对一个新的 open_sample_store 调用 history.explain(fresh_store, "
        '"embedding reranker", "conversation-006", SAMPLE_AS_OF, 1)。',
    ),
    solution=(
        "# Exercise 14.1 — solution\n"
        'answer = {"verdict": "below_cut", "rank": 2,\n'
        '          "deciding": "memory_id (tie-breaker)"}'
    ),
    wrong_answers=(
        ({"verdict": "no_shared_term", "rank": None, "deciding": None}, "it is a candidate"),
        ({"verdict": "retracted", "rank": 2, "deciding": None}, "nothing is retracted"),
        ({"verdict": "hit", "rank": 1, "deciding": None}, "keeps one hit"),
        ({"verdict": "below_cut", "rank": 3, "deciding": "memory_id"}, "count the candidates"),
        ({"verdict": "below_cut", "rank": 2, "deciding": "recency"}, "same instant"),
        (
            {"verdict": "below_cut", "rank": 2, "deciding": "lexical_coverage (tie-breaker)"},
            "coverage is equal",
        ),
        ({"verdict": "below_cut"}, "needs the keys"),
        ("below_cut", "should be a dict"),
    ),
).register()

Exercise(
    id="14.2",
    title="recall the history as known at 09:30 on 11 August",
    grade=_predict_known_at,
    hints=(
        "known_at keeps the records and retractions with stored_at at or before it; as_of "
        "only scores. List the three later writes with their stored_at.",
        "At 09:30: the supersede (09:00) is in, the retraction of conversation-008 (10:00) and "
        "the import of conversation-015 (12 August) are not.",
        'Confirm with history.known_at_view(store, "layered memory design", LATER_AS_OF, 3, '
        "[...]) in a scratch cell.",
    ),
    hints_zh=(
        "known_at 保留 stored_at 不晚于它的记录和撤回；as_of 只影响评分。"
        "把后来的三次写入连同它们的 stored_at 列出来。",
        "在 09:30：取代（09:00）已经发生，conversation-008 的撤回（10:00）和 "
        "conversation-015 的导入（8 月 12 日）还没有。",
        '在草稿单元格里用 history.known_at_view(store, "layered memory design", '
        "LATER_AS_OF, 3, [...]) 确认。",
    ),
    solution=(
        "# Exercise 14.2 — solution\n"
        'answer = ["conversation-003", "conversation-014", "conversation-008"]'
    ),
    wrong_answers=(
        (["conversation-003", "conversation-015", "conversation-014"], "stored on 12 August"),
        (["conversation-003", "conversation-001", "conversation-008"], "superseded at 09:00"),
        (["conversation-003", "conversation-014", "conversation-009"], "still stood"),
        (["conversation-003", "conversation-008", "conversation-009"], "stored at 09:00"),
        (["conversation-014", "conversation-003", "conversation-008"], "rank order"),
        ("conversation-003", "list of hit memory ids"),
    ),
).register()


def _withdraw(store: MemoryStore) -> StoredMemory:
    """A wrong answer to 14.3, alone or before an append: only the retraction."""
    return store.retract(REPLACED, reason="r", source=RETENTION_ITEM["source"])


Exercise(
    id="14.3",
    title="replace a memory and keep its history",
    grade=_replace_retention,
    hints=(
        "Replacing is two facts: the new record, and the old one withdrawn. Written apart, "
        "they could be half done, and nothing would link them.",
        "store.supersede(old_id, new_item, reason=...) writes both in one batch and links "
        "them: new.supersedes and the retraction's superseded_by.",
        'def replace(store): store.supersede("conversation-009", RETENTION_ITEM, reason="...")',
    ),
    hints_zh=(
        "取代包含两个事实：新记录，以及旧记录被撤回。分开写入可能只完成一半，而且两者之间没有任何链接。",
        "store.supersede(old_id, new_item, reason=...) 在一个批次里写入两者并建立链接："
        "new.supersedes 和撤回记录的 superseded_by。",
        '例如：def replace(store): store.supersede("conversation-009", RETENTION_ITEM, '
        'reason="...")',
    ),
    solution=(
        "# Exercise 14.3 — solution\n"
        "def replace_retention(store):\n"
        "    # One batch: the new record and the old one's retraction, naming each other.\n"
        '    store.supersede("conversation-009", RETENTION_ITEM,\n'
        '                    reason="The retention period changed to six months.")\n'
        "\n\n"
        "answer = replace_retention"
    ),
    wrong_answers=(
        (lambda s: s.append(**RETENTION_ITEM), "still stands"),
        (lambda s: (_withdraw(s), s.append(**RETENTION_ITEM)), "do not name each other"),
        (_withdraw, "nothing replaces it"),
        (
            lambda s: s.supersede("conversation-001", dict(RETENTION_ITEM), reason="r"),
            "not conversation-009",
        ),
        ("conversation-009", "takes a store"),
    ),
).register()

Exercise(
    id="14.4",
    title="a floor that keeps only the full matches",
    grade=_full_coverage_floor,
    hints=(
        "With the baseline, total = 0.85 × coverage + 0.15 × recency. What is the least a "
        "record that matches all three terms can score? The most one that matches two?",
        'history.floor_view(store, "layered memory design", LATER_AS_OF, 5, [None]) shows '
        "the scores; any floor between the best partial and the worst full match works.",
    ),
    hints_zh=(
        "对 baseline，total = 0.85 × 覆盖率 + 0.15 × 新近度。三个词全中的记录最少能得多少分？"
        "只中两个词的最多能得多少分？",
        'history.floor_view(store, "layered memory design", LATER_AS_OF, 5, [None]) 给出分数；'
        "介于最好的部分匹配与最差的完全匹配之间的任何下限都可以。",
    ),
    solution=(
        "# Exercise 14.4 — solution\n"
        "answer = 0.85  # full coverage alone gives 0.85; two of three terms at most 0.7167"
    ),
    wrong_answers=(
        (0.3, "keeps partial matches"),
        (0.99, "drops a hit"),
        ("suggested", "tuned on LoCoMo"),
        ("0.85", "should be a number"),
    ),
).register()

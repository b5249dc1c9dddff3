"""Exercises of ``00_tour.ipynb``."""

from __future__ import annotations

from typing import Any

from ...errors import RemoteMemoryError
from ...sample import SAMPLE_AS_OF
from ..views import rank_keys_view, recall
from . import Exercise, Verdict, right, wrong
from ._common import as_text, sample_store, terms_of

TARGET = "conversation-010"


def _top_hit(answer: Any) -> Verdict:
    text = as_text(answer, "the query", "查询")
    try:
        hits = recall(sample_store(), text, SAMPLE_AS_OF, 10).hits
    except RemoteMemoryError as exc:
        return wrong(f"recall refuses this query: {exc}", zh=f"召回拒绝了这个查询：{exc}")
    if not hits:
        return wrong(
            f"no record shares a term with {text!r} (its terms: "
            f"{', '.join(terms_of(text))}): use words from the record's title",
            zh=f"没有任何记录与 {text!r} 有共同词项"
            f"（它的词项：{', '.join(terms_of(text))}）。请用目标记录标题中的词",
        )
    ids = [h.memory_id for h in hits]
    if ids[0] == TARGET:
        return right(
            f"{TARGET} ranks first of {len(ids)} hit(s)",
            zh=f"{TARGET} 在 {len(ids)} 个命中中排第一",
        )
    if TARGET in ids:
        return wrong(
            f"{TARGET} is a hit, but at rank {ids.index(TARGET) + 1}: {ids[0]} beats it — "
            f"use more words only {TARGET} has",
            zh=f"{TARGET} 是命中，但排在第 {ids.index(TARGET) + 1} 位，"
            f"{ids[0]} 排在它前面。多用一些只有 {TARGET} 才有的词",
        )
    return wrong(
        f"{TARGET} is not among the hits (top: {ids[0]}): none of the terms "
        f"{', '.join(terms_of(text))} is in it",
        zh=f"{TARGET} 不在命中之中（第一名：{ids[0]}）：词项 "
        f"{', '.join(terms_of(text))} 没有一个出现在它里面",
    )


Exercise(
    id="00.1",
    title="a query whose top hit is conversation-010",
    grade=_top_hit,
    hints=(
        "Look at the title of conversation-010 in the records table at the top.",
        "Hits are ranked by the share of query terms a record holds: pick words that "
        "conversation-010 has and the others do not.",
        "Chinese text is cut into overlapping pairs of characters, so 记忆 is one term.",
    ),
    hints_zh=(
        "看顶部记录表中 conversation-010 的标题。",
        "命中按记录包含查询词项的比例排序：挑 conversation-010 有、其他记录没有的词。",
        "中文文本会被切成相互重叠的二元字符，所以 记忆 是一个词项。",
    ),
    solution='# Exercise 00.1 — solution\nanswer = "llm记忆 LoCoMo"',
    wrong_answers=(
        ("kubernetes autoscaling", "no record shares a term"),
        ("layered memory", "is not among the hits"),
        ("memory evaluation", "at rank"),
        (42, "should be a string"),
        ("   ", "refuses this query"),
    ),
).register()


STAGES = ("normalize", "candidate", "score", "stable rank", "render")
# The names the zh edition gives the stages (its map, its contents, its takeaways).
STAGES_ZH = {
    "normalize": "规范化",
    "candidate": "候选",
    "score": "评分",
    "stable rank": "稳定排序",
    "render": "渲染",
}
_SPELLINGS = {
    "rank": "stable rank",
    "ranking": "stable rank",
    "stable_rank": "stable rank",
    "stable ranking": "stable rank",
    "candidates": "candidate",
    "scoring": "score",
    "rendering": "render",
    "normalise": "normalize",
    "normalization": "normalize",
    **{zh: en for en, zh in STAGES_ZH.items()},
    "候选构造": "candidate",
    "排序": "stable rank",
    "打分": "score",
}
TIE_QUERY = "embedding reranker"


def _deciding_stage(answer: Any) -> Verdict:
    text = " ".join(as_text(answer, "the stage", "阶段名").lower().split())
    # 稳定 排序 is 稳定排序: Chinese is written without spaces.
    stage = _SPELLINGS.get(text, _SPELLINGS.get(text.replace(" ", ""), text))
    if stage not in STAGES:
        return wrong(
            f"{text!r} is not a stage: name one of {', '.join(STAGES)}",
            zh=f"{text!r} 不是一个阶段：请从 {'、'.join(STAGES_ZH.values())}"
            f"（英文名 {', '.join(STAGES)}）中选一个",
        )
    keys = rank_keys_view(sample_store(), TIE_QUERY, SAMPLE_AS_OF, 10)
    first, second = keys.loc[0], keys.loc[1]
    # The stage that decides is the one whose output first differs between the two records.
    decided_by = "score" if keys.loc[0, "ahead_of_next_by"] == "total" else "stable rank"
    if stage == decided_by:
        return right(
            f"{first['memory_id']} and {second['memory_id']} tie on total "
            f"({first['total']:.6f}); the stable rank's last key, "
            f"{keys.loc[0, 'ahead_of_next_by']}, orders them",
            zh=f"{first['memory_id']} 与 {second['memory_id']} 的 total 并列"
            f"（{first['total']:.6f}）；由稳定排序的并列规则决定先后：最后比较的是 "
            f"{keys.loc[0, 'ahead_of_next_by']}",
        )
    reasons = {
        "score": f"both totals are {first['total']:.6f}: the score cannot tell them apart",
        "candidate": "both are candidates; being a candidate says nothing about order",
        "normalize": "normalize sees only the query, never a record",
        "render": "render prints the hits in the order it is given",
    }
    reasons_zh = {
        "score": f"两者的 total 都是 {first['total']:.6f}：评分无法区分它们",
        "candidate": "两者都是候选；成为候选与先后顺序无关",
        "normalize": "规范化只看查询，从不看记录",
        "render": "渲染按收到的顺序输出命中",
    }
    return wrong(
        reasons.get(stage, f"{stage} is not where the order is decided"),
        zh=reasons_zh.get(stage, f"{STAGES_ZH[stage]}不是决定顺序的阶段"),
    )


Exercise(
    id="00.2",
    title="which stage puts conversation-005 before conversation-006",
    grade=_deciding_stage,
    hints=(
        f"Run the explorer with the query {TIE_QUERY!r} and compare the two hits' totals.",
        "When two totals are equal, something must still decide which hit comes first, "
        "the same way on every run.",
    ),
    hints_zh=(
        f"用查询 {TIE_QUERY!r} 运行探索器，比较两个命中的 total。",
        "两个 total 相等时，仍要有某样东西决定哪个命中在前，而且每次运行结果都一样。",
    ),
    solution='# Exercise 00.2 — solution\nanswer = "stable rank"',
    wrong_answers=(
        ("score", "cannot tell them apart"),
        ("candidate", "says nothing about order"),
        ("render", "in the order it is given"),
        ("the database", "is not a stage"),
        (3, "should be a string"),
    ),
).register()

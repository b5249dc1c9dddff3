"""Exercises of ``00_tour.ipynb``."""

from __future__ import annotations

from typing import Any

from ...errors import RemoteMemoryError
from ...sample import SAMPLE_AS_OF
from ..language import tr
from ..views import rank_keys_view, recall
from . import Verdict, exercise, right, wrong
from ._common import as_text, sample_store, terms_of

TARGET = "conversation-010"


@exercise(
    "00.1",
    "a query whose top hit is conversation-010",
    hints=(
        "Look at the title of conversation-010 in the records table at the top.",
        "Hits are ranked by the share of query terms a record holds: pick words that "
        "conversation-010 has and the others do not.",
        "Chinese text is cut into overlapping pairs of characters, so 记忆 is one term.",
    ),
    solution='# Exercise 00.1 — solution\nanswer = "llm记忆 LoCoMo"',
    wrong_answers=(
        ("kubernetes autoscaling", "no record shares a term"),
        ("layered memory", "is not among the hits"),
        ("memory evaluation", "at rank"),
        (42, "should be a string"),
        ("   ", "refuses this query"),
    ),
)
def _top_hit(answer: Any) -> Verdict:
    text = as_text(answer, "the query")
    try:
        hits = recall(sample_store(), text, SAMPLE_AS_OF, 10).hits
    except RemoteMemoryError as exc:
        return wrong("recall refuses this query: {exc}", exc=exc)
    if not hits:
        return wrong(
            "no record shares a term with {text!r} (its terms: {terms}): use words "
            "from the record's title",
            text=text,
            terms=", ".join(terms_of(text)),
        )
    ids = [h.memory_id for h in hits]
    if ids[0] == TARGET:
        return right("{target} ranks first of {hits} hit(s)", target=TARGET, hits=len(ids))
    if TARGET in ids:
        return wrong(
            "{target} is a hit, but at rank {rank}: {top} beats it — use more words only "
            "{target} has",
            target=TARGET,
            rank=ids.index(TARGET) + 1,
            top=ids[0],
        )
    return wrong(
        "{target} is not among the hits (top: {top}): none of the terms {terms} is in it",
        target=TARGET,
        top=ids[0],
        terms=", ".join(terms_of(text)),
    )


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


@exercise(
    "00.2",
    "which stage puts conversation-005 before conversation-006",
    hints=(
        f"Run the explorer with the query {TIE_QUERY!r} and compare the two hits' totals.",
        "When two totals are equal, something must still decide which hit comes first, "
        "the same way on every run.",
    ),
    solution='# Exercise 00.2 — solution\nanswer = "stable rank"',
    wrong_answers=(
        ("score", "cannot tell them apart"),
        ("candidate", "says nothing about order"),
        ("render", "in the order it is given"),
        ("the database", "is not a stage"),
        (3, "should be a string"),
    ),
)
def _deciding_stage(answer: Any) -> Verdict:
    text = " ".join(as_text(answer, "the stage").lower().split())
    # 稳定 排序 is 稳定排序: Chinese is written without spaces.
    stage = _SPELLINGS.get(text, _SPELLINGS.get(text.replace(" ", ""), text))
    if stage not in STAGES:
        return wrong(
            "{text!r} is not a stage: name one of {stages}",
            text=text,
            stages=", ".join(STAGES),
            stages_zh="、".join(STAGES_ZH.values()),
        )
    keys = rank_keys_view(sample_store(), TIE_QUERY, SAMPLE_AS_OF, 10)
    first, second = keys.loc[0], keys.loc[1]
    # The stage that decides is the one whose output first differs between the two records.
    decided_by = "score" if keys.loc[0, "ahead_of_next_by"] == "total" else "stable rank"
    if stage == decided_by:
        return right(
            "{first} and {second} tie on total ({total:.6f}); the stable "
            "rank's last key, {key}, orders them",
            first=first["memory_id"],
            second=second["memory_id"],
            total=first["total"],
            key=keys.loc[0, "ahead_of_next_by"],
        )
    reasons = {
        "score": "both totals are {total:.6f}: the score cannot tell them apart",
        "candidate": "both are candidates; being a candidate says nothing about order",
        "normalize": "normalize sees only the query, never a record",
        "render": "render prints the hits in the order it is given",
    }
    return wrong(
        reasons.get(stage, "{stage} is not where the order is decided"),
        total=first["total"],
        stage=tr(stage, STAGES_ZH[stage]),
    )

"""Exercises of ``12_backends_and_scale.ipynb``."""

from __future__ import annotations

from typing import Any

from ...engine import RecallEngine
from ...rankers.baseline import upper_bound
from ...sample import SAMPLE_AS_OF
from . import Exercise, Verdict, right, wrong
from ._common import as_int, sample_store

# 12.1: a query of TERMS terms whose limit-th best total so far is BEST.
TERMS = 5
BEST = 0.55
# 12.2: a query whose terms' posting lists overlap.
QUERY = "embedding reranker memory"


def largest_skipped_group() -> int:
    """The largest matched-term count ``m`` whose bound the best total already beats."""
    return max(m for m in range(TERMS + 1) if upper_bound(m, TERMS) < BEST)


def _skipped(answer: Any) -> Verdict:
    m = as_int(answer, "the number of matched terms", "an int")
    expected = largest_skipped_group()
    if m == expected:
        return right(
            f"a record matching {m} of {TERMS} terms reaches at most "
            f"{upper_bound(m, TERMS)} < {BEST}; one matching {m + 1} could reach "
            f"{upper_bound(m + 1, TERMS)}",
            zh=f"匹配 {TERMS} 个词项中 {m} 个的记录最多得到 "
            f"{upper_bound(m, TERMS)} < {BEST}；匹配 {m + 1} 个的记录可能得到 "
            f"{upper_bound(m + 1, TERMS)}",
        )
    if not 0 <= m <= TERMS:
        return wrong(
            f"a record matches between 0 and {TERMS} of the query's {TERMS} terms",
            zh=f"一条记录匹配查询 {TERMS} 个词项中的 0 到 {TERMS} 个",
        )
    if m > expected:
        return wrong(
            f"too bold: a record matching {m} terms could reach "
            f"0.85·{m}/{TERMS} + 0.15 = {upper_bound(m, TERMS)}, which beats "
            f"{BEST}, so its group must still be visited",
            zh=f"太大胆了：匹配 {m} 个词项的记录可能得到 "
            f"0.85·{m}/{TERMS} + 0.15 = {upper_bound(m, TERMS)}，超过 "
            f"{BEST}，所以这一组仍须访问",
        )
    terms = "term" if m + 1 == 1 else "terms"
    return wrong(
        f"too cautious: a record matching {m + 1} {terms} reaches at most "
        f"{upper_bound(m + 1, TERMS)} (recency 1), below {BEST}: that group "
        "can be skipped too",
        zh=f"太谨慎了：匹配 {m + 1} 个词项的记录最多得到 "
        f"{upper_bound(m + 1, TERMS)}（新近度为 1），低于 {BEST}：那一组也可以跳过",
    )


def candidate_count() -> tuple[int, int, int, int]:
    """``QUERY``'s candidate and searched records, and the sum and the largest of its
    terms' posting lists (a term recalled alone has its posting list as candidates)."""
    engine = RecallEngine(sample_store())
    result = engine.recall(QUERY, as_of=SAMPLE_AS_OF, query_id="grader")
    lists = [
        engine.recall(term, as_of=SAMPLE_AS_OF, query_id="grader").candidate_records
        for term in result.query.terms
    ]
    return result.candidate_records, result.searched_records, sum(lists), max(lists)


def _candidates(answer: Any) -> Verdict:
    n = as_int(answer, "the number of candidate records", "an int")
    expected, searched, total, largest = candidate_count()
    if n == expected:
        return right(
            f"{expected}: the union of the posting lists; {total - expected} "
            "record(s) sit in two lists and count once",
            zh=f"{expected}：倒排列表的并集；有 {total - expected} "
            "条记录同时在两个列表中，只算一次",
        )
    if n == total:
        return wrong(
            "that is the sum of the posting lists' lengths: a record in two lists "
            "is one candidate (take the union, not the sum)",
            zh="这是各倒排列表长度之和：在两个列表中的记录只是一个候选（取并集，不是求和）",
        )
    if n == largest:
        return wrong(
            "that is the longest posting list alone: a record holding any one "
            "term of the query is a candidate",
            zh="这只是最长的那个倒排列表：含有查询中任一词项的记录都是候选",
        )
    if n == searched:
        return wrong(
            f"{searched} is searched_records (every conversation record); "
            "candidates are those that share at least one term",
            zh=f"{searched} 是 searched_records（全部对话记录）；候选是至少共享一个词项的记录",
        )
    return wrong(
        f"not the candidate count: list the records of each term of {QUERY!r} "
        "(posting_rows) and count the distinct ids",
        zh=f"这不是候选数：列出 {QUERY!r} 每个词项的记录（posting_rows），数一数不同的 id",
    )


Exercise(
    id="12.1",
    title="which groups the top-k walk never scores",
    grade=_skipped,
    hints=(
        "A record matching m of q terms scores at most 0.85·m/q + 0.15 (recency ≤ 1).",
        f"Compute that bound for q = {TERMS} and m = 1, 2, 3, … and compare each with "
        f"{BEST}: the walk stops before the first group whose bound is below it.",
        "The answer is the largest m whose bound is strictly below the best total.",
    ),
    hints_zh=(
        "匹配 q 个词项中 m 个的记录最多得到 0.85·m/q + 0.15（新近度 ≤ 1）。",
        f"对 q = {TERMS} 和 m = 1, 2, 3, … 计算这个上界，并逐一与 {BEST} 比较："
        "遍历遇到第一个上界低于它的组就停下，不再为它评分。",
        "答案是上界严格低于当前最佳总分的最大 m。",
    ),
    solution="# Exercise 12.1 — solution\nanswer = 2",
    wrong_answers=(
        (3, "too bold"),
        (1, "too cautious"),
        (0, "too cautious"),
        (7, "between 0 and"),
        (2.0, "should be an int"),
    ),
).register()

Exercise(
    id="12.2",
    title="candidates from posting lists",
    grade=_candidates,
    hints=(
        "A candidate is a searched record that holds at least one of the query's terms.",
        f"jsonl.index.posting_rows(terms) lists, per term of {QUERY!r}, the records holding it.",
        "Count each memory_id once, even when it is in two posting lists.",
    ),
    hints_zh=(
        "候选是至少含有查询中一个词项的被检索记录。",
        f"jsonl.index.posting_rows(terms) 按 {QUERY!r} 的每个词项列出含有它的记录。",
        "每个 memory_id 只算一次，即使它出现在两个倒排列表中。",
    ),
    solution="# Exercise 12.2 — solution\nanswer = 5",
    wrong_answers=(
        (7, "sum of the posting lists"),
        (3, "longest posting list"),
        (13, "searched_records"),
        (1, "not the candidate count"),
        ("5", "should be an int"),
    ),
).register()

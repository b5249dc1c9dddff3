"""Exercises of ``11_rankers.ipynb``."""

from __future__ import annotations

import math
from typing import Any

from ..._tokens import english_stopwords
from ...engine import RecallEngine
from ...errors import RemoteMemoryError
from ...sample import SAMPLE_AS_OF
from . import Exercise, Verdict, right, wrong
from ._common import as_number, as_text, sample_store, terms_of

# 11.2: the idf weight of this term, which DF of the N searched records hold.
TERM = "the"


def _top(text: str, ranker: str) -> str | None:
    hits = (
        RecallEngine(sample_store(), ranker=ranker)
        .recall(text, limit=1, as_of=SAMPLE_AS_OF, query_id="grader")
        .hits
    )
    return hits[0].memory_id if hits else None


def _disagree(answer: Any) -> Verdict:
    text = as_text(answer, "the query")
    try:
        plain = _top(text, "bm25")
    except RemoteMemoryError as exc:
        return wrong(f"recall refuses this query: {exc}", zh=f"召回拒绝了这个查询：{exc}")
    terms = terms_of(text)
    if plain is None:
        return wrong(
            f"no record shares a term with {text!r} (its terms: {', '.join(terms)}): "
            "use words of the sample records",
            zh=f"没有记录与 {text!r} 共享词项（它的词项：{', '.join(terms)}）：请用示例记录里的词",
        )
    stop = english_stopwords()
    if all(t in stop for t in terms):
        return wrong(
            f"{text!r} has only stopwords, so bm25+stopwords scores all of them "
            "(nothing else is left): add one word that names a topic",
            zh=f"{text!r} 只有停用词，bm25+stopwords 只好对它们全部评分"
            "（别的都不剩）：加一个指明主题的词",
        )
    if not any(t in stop for t in terms):
        return wrong(
            f"{text!r} has no stopword: both rankers score the same terms and "
            f"agree ({plain} first). Add common words such as 'the' or 'a'",
            zh=f"{text!r} 没有停用词：两个排序器对同样的词项评分，结果一致"
            f"（{plain} 排第一）。加上 'the' 或 'a' 这样的常用词",
        )
    filtered = _top(text, "bm25+stopwords")
    if plain == filtered:
        return wrong(
            f"both rank {plain} first: pick stopwords that another record holds "
            "many of, or fewer topic words",
            zh=f"两者都把 {plain} 排在第一：选另一条记录含有很多的停用词，或者少用主题词",
        )
    return right(
        f"bm25 ranks {plain} first (its stopwords count), bm25+stopwords ranks {filtered} first",
        zh=f"bm25 把 {plain} 排第一（它的停用词也计分），bm25+stopwords 把 {filtered} 排第一",
    )


def idf_weight() -> tuple[float, int, int]:
    """The ``bm25`` weight of ``TERM`` as the library computes it, with N and df."""
    # Recalled alone, the term is in every hit, and every record holding it is a candidate.
    result = RecallEngine(sample_store(), ranker="bm25").recall(
        TERM, limit=1, as_of=SAMPLE_AS_OF, query_id="grader"
    )
    weight = next(
        s.weight for s in result.hits[0].score_breakdown.signals if s.name == f"bm25[{TERM}]"
    )
    return weight, result.searched_records, result.candidate_records


def _idf(answer: Any) -> Verdict:
    as_number(answer, "the weight")
    weight, n, df = idf_weight()

    def near(value: float) -> bool:
        return bool(abs(answer - value) <= 5e-4)

    if near(weight):
        return right(
            f"idf({TERM}) = ln(1 + ({n} − {df} + 0.5)/({df} + 0.5)) = {weight:.4f}: "
            "low, because most records hold it",
            zh=f"idf({TERM}) = ln(1 + ({n} − {df} + 0.5)/({df} + 0.5)) = {weight:.4f}："
            "很低，因为大多数记录都含有它",
        )
    if near(math.log(n / df)):
        return wrong(
            "that is the textbook idf ln(N/df); BM25 adds 0.5 to both counts and "
            "1 inside the logarithm",
            zh="这是教科书上的 idf ln(N/df)；BM25 给两个计数都加 0.5，并在对数内加 1",
        )
    if near(math.log((n - df + 0.5) / (df + 0.5))):
        return wrong(
            "the formula has 1 + inside the logarithm, so a term in most records "
            "still gets a small positive weight instead of a negative one",
            zh="公式的对数内有 1 +，所以出现在大多数记录中的词项仍得到一个小的正权重，而不是负权重",
        )
    for other_n in (15, n + 2):
        if near(math.log(1 + (other_n - df + 0.5) / (df + 0.5))):
            return wrong(
                f"N is the number of searched records ({n} conversation records), "
                "not every stored record: profiles are never searched",
                zh=f"N 是被检索的记录数（{n} 条对话记录），不是全部存储记录：用户画像从不参与检索",
            )
    if near(math.log(1 + (df + 0.5) / (n - df + 0.5))):
        return wrong(
            "df and N − df are swapped: the rarer the term, the larger its weight",
            zh="df 与 N − df 颠倒了：词项越少见，权重越大",
        )
    return wrong(
        f"not the weight BM25 gives {TERM!r}: put N = {n} and df = {df} into "
        "ln(1 + (N − df + 0.5)/(df + 0.5))",
        zh=f"这不是 BM25 给 {TERM!r} 的权重：把 N = {n} 和 df = {df} 代入 "
        "ln(1 + (N − df + 0.5)/(df + 0.5))",
    )


Exercise(
    id="11.1",
    title="a query on which stopwords change the top hit",
    grade=_disagree,
    hints=(
        "bm25 scores every query term; bm25+stopwords leaves the stopwords out of the "
        "scoring. They can only disagree when the query holds both kinds of word.",
        "Take one topic word that several records share (memory, recall, …), then add a "
        "stopword that one of those records repeats more than the others.",
        "Try it in the explorer: its bm25 and bm25+stopwords columns side by side.",
    ),
    hints_zh=(
        "bm25 对每个查询词项评分；bm25+stopwords 评分时去掉停用词。"
        "只有查询同时含有这两类词时，它们才可能不一致。",
        "取一个几条记录共有的主题词（memory、recall……），再加一个其中某条记录"
        "比其他记录重复得更多的停用词。",
        "在探索器里试一试：它的 bm25 和 bm25+stopwords 两列并排显示。",
    ),
    solution='# Exercise 11.1 — solution\nanswer = "the memory"',
    wrong_answers=(
        ("layered memory", "no stopword"),
        ("the", "only stopwords"),
        ("kubernetes autoscaling", "no record shares a term"),
        ("the layered memory design", "both rank"),
        ("!!!", "refuses this query"),
        (42, "should be a string"),
    ),
).register()

Exercise(
    id="11.2",
    title="the idf weight of 'the'",
    grade=_idf,
    hints=(
        "idf(t) = ln(1 + (N − df + 0.5)/(df + 0.5)), with N the number of searched "
        "records and df the number of them that hold t.",
        "N = 13: the conversation records (profiles are never searched); df = 8.",
        "math.log is the natural logarithm: answer = math.log(1 + 5.5 / 8.5).",
    ),
    hints_zh=(
        "idf(t) = ln(1 + (N − df + 0.5)/(df + 0.5))，其中 N 是被检索的记录数，"
        "df 是其中含有 t 的记录数。",
        "N = 13：对话记录（用户画像从不参与检索）；df = 8。",
        "math.log 是自然对数：answer = math.log(1 + 5.5 / 8.5)。",
    ),
    solution="# Exercise 11.2 — solution\nanswer = 0.499",
    wrong_answers=(
        (math.log(13 / 8), "textbook idf"),
        (math.log(5.5 / 8.5), "1 + inside the logarithm"),
        (math.log(1 + 7.5 / 8.5), "not every stored record"),
        (math.log(1 + 8.5 / 5.5), "swapped"),
        (1.0, "not the weight"),
        ("0.499", "should be a number"),
    ),
).register()

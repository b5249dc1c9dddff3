"""Exercises of ``03_candidates.ipynb``.

Both are graded on the edition's sample corpus (``edition_store``): the zh edition asks
them of the Chinese corpus, which its notebook opens as ``zh_store``.
"""

from __future__ import annotations

from typing import Any

from ...errors import RemoteMemoryError
from ...sample import SAMPLE_AS_OF
from ..language import tr
from ..views import candidates_view, recall
from . import Exercise, Verdict, right, wrong
from ._common import as_text, shape_error, terms_of
from .n02_normalize import edition_store

TARGET = "conversation-009"
# The query of 03.2 in each edition: a term only a profile and one conversation share,
# and a term a few conversations share.
COUNTED_QUERY = "Berlin memory"
COUNTED_QUERY_ZH = "柏林 远程"


def _title() -> str:
    """The target's title in the edition's corpus (“Retention policy”, “保留策略”)."""
    return next(r.source.title for r in edition_store().read_all() if r.memory_id == TARGET)


def _only_candidate(answer: Any) -> Verdict:
    text = as_text(answer, "the query", "查询")
    try:
        terms = terms_of(text)
    except RemoteMemoryError as exc:
        return wrong(f"normalize refuses it: {exc}", zh=f"规范化拒绝了它：{exc}")
    view = candidates_view(edition_store(), text, SAMPLE_AS_OF, 10)
    chosen = set(view.loc[view["decision"] == "candidate", "memory_id"])
    if len(terms) != 2:
        return wrong(
            f"{text!r} has {len(terms)} term(s) ({', '.join(terms)}): use exactly two",
            zh=f"{text!r} 有 {len(terms)} 个词项（{'、'.join(terms)}）：恰好用两个",
        )
    if chosen == {TARGET}:
        return right(
            f"{', '.join(terms)}: {TARGET} is the only candidate — found by its text, "
            "not its title",
            zh=f"{'、'.join(terms)}：{TARGET} 是唯一的候选——靠它的正文找到，而不是标题",
        )
    title = _title()
    if TARGET not in chosen and set(terms) & set(terms_of(title)):
        return wrong(
            f"{TARGET}'s title is “{title}”, but titles are not searched: only "
            "summary + content, and those say something else",
            zh=f"{TARGET} 的标题是“{title}”，但标题不参与检索：只检索 "
            "summary + content，而你用的词不在其中",
        )
    if TARGET not in chosen:
        return wrong(
            f"{TARGET} shares none of {', '.join(terms)}: read its summary and content",
            zh=f"{TARGET} 不包含 {'、'.join(terms)} 中的任何一个：读一读它的 summary 和 content",
        )
    others = sorted(chosen - {TARGET})
    return wrong(
        f"{', '.join(others)} also share(s) a term: choose words only {TARGET} has",
        zh=f"{'、'.join(others)} 也有共同词项：选只有 {TARGET} 才有的词",
    )


def _counts(answer: Any) -> Verdict:
    if (
        not isinstance(answer, (tuple, list))
        or len(answer) != 2
        or not all(isinstance(n, int) and not isinstance(n, bool) for n in answer)
    ):
        raise shape_error(
            "the answer should be two whole numbers: (searched, candidates)",
            "答案应当是两个整数：(searched, candidates)",
        )
    query = tr(COUNTED_QUERY, COUNTED_QUERY_ZH)
    result = recall(edition_store(), query, SAMPLE_AS_OF, 10)
    expected = (result.searched_records, result.candidate_records)
    searched, candidates = answer
    if tuple(answer) == expected:
        return right(
            f"searched {expected[0]}, candidates {expected[1]}: profiles are never "
            "searched, and one shared term is enough",
            zh=f"检索了 {expected[0]} 条，候选 {expected[1]} 条：用户画像从不参与检索，"
            "而且一个共同词项就足够",
        )
    if searched != expected[0]:
        return wrong(
            "searched_records counts the conversation records of the scope only — "
            "profiles are never searched",
            zh="searched_records 只统计该作用域内的对话记录——用户画像从不参与检索",
        )
    if candidates > expected[1]:
        return wrong(
            "a profile mentions Berlin, but a profile is never a candidate",
            zh="有一份用户画像提到了柏林，但用户画像永远不会成为候选",
        )
    terms = terms_of(query)
    return wrong(
        "a candidate needs only ONE shared term with the query: count every record "
        f"that says {' or '.join(terms)}",
        zh=f"候选只需与查询有「一个」共同词项：数出每一条含有 {' 或 '.join(terms)} 的记录",
    )


Exercise(
    id="03.1",
    title="a two-term query whose only candidate is conversation-009",
    grade=_only_candidate,
    hints=(
        "conversation-009 is titled “Retention policy”. Which of its fields are searched?",
        "Read its summary and content in the records table of 01 (or with the explorer) and "
        "pick two words no other conversation uses.",
    ),
    hints_zh=(
        "conversation-009 的标题是“保留策略”。它的哪些字段参与检索？",
        "用上面的探索器（中文样例语料）读它的 summary 和 content，挑两个其他对话记录都没有的"
        "二字词；中文的查询也会被切成二元字符，所以两个二字词之间要留空格。",
    ),
    solution=(
        "# Exercise 03.1 — solution\n"
        "from memlib.notebook.language import tr\n\n"
        "# graded on this edition's corpus: the English one, or the Chinese one (zh_store)\n"
        'answer = tr("retained year", "复查 快照")'
    ),
    wrong_answers=(
        ("retention policy", "titles are not searched"),
        ("conversation memory", "also share"),
        ("retained", "use exactly two"),
        ("osaka hotel", "shares none of"),
        (7, "should be a string"),
    ),
).register()

Exercise(
    id="03.2",
    title="searched_records and candidate_records of “Berlin memory”",
    grade=_counts,
    hints=(
        "searched_records counts what candidate building examined; which kinds does it examine?",
        "Look for each of the two terms in every conversation record; profile-002 says Berlin.",
    ),
    hints_zh=(
        "searched_records 统计的是构建候选时检查过的记录；它检查哪些种类的记录？",
        "在每条对话记录里分别找这两个词项；profile-002 提到了柏林。",
    ),
    solution="# Exercise 03.2 — solution\nanswer = (13, 3)",
    wrong_answers=(
        ((15, 4), "never searched"),
        ((13, 4), "never a candidate"),
        ((13, 1), "only ONE shared term"),
        ("13, 3", "two whole numbers"),
    ),
).register()

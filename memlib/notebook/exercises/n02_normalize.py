"""Exercises of ``02_normalize.ipynb``."""

from __future__ import annotations

import functools
from typing import Any

from ...errors import RemoteMemoryError
from ...sample import SAMPLE_AS_OF, open_sample_store
from ...stores._base import MemoryStore
from ..language import language
from ..views import candidates_view
from . import Exercise, Verdict, right, wrong
from ._common import as_text, private_folder, sample_store, shape_error, terms_of

TARGET = ("layered", "memory", "分层", "层记", "记忆")
FULL_WIDTH = "ＬＬＭ記憶"
FOUND = "conversation-010"


@functools.cache
def _chinese_store() -> MemoryStore:
    return open_sample_store(private_folder("memlib-grader-zh-"), lang="zh")


def edition_store() -> MemoryStore:
    """The sample corpus the edition's exercises are about: the Chinese one in the zh
    edition (its notebooks open it as ``zh_store``), else the English one."""
    return _chinese_store() if language() == "zh" else sample_store()


def _one_query(answer: Any) -> Verdict:
    text = as_text(answer, "the query", "查询")
    try:
        got = terms_of(text)
    except RemoteMemoryError as exc:
        return wrong(f"normalize refuses it: {exc}", zh=f"规范化拒绝了它：{exc}")
    if sorted(got) == sorted(TARGET):
        return right(f"{text!r} → {', '.join(got)}", zh=f"{text!r} 得到词项 {', '.join(got)}")
    missing = [t for t in TARGET if t not in got]
    extra = [t for t in got if t not in TARGET]
    if "层记" in missing and {"分层", "记忆"} <= set(got):
        return wrong(
            "分层 and 记忆 are there but 层记 is not: a space cut the Chinese run in two; "
            "bigrams overlap only inside one run",
            zh="有 分层 和 记忆，却没有 层记：一个空格把中文片段切成了两段；"
            "二元字符只在同一个片段内部重叠",
        )
    if extra:
        return wrong(
            f"extra term(s) {', '.join(extra)}: every character run you type becomes "
            "a term (the hyphen and the space separate, they are not terms)",
            zh=f"多出了词项 {', '.join(extra)}：你输入的每个字符片段都会成为词项"
            "（连字符和空格只起分隔作用，本身不是词项）",
        )
    return wrong(
        f"missing term(s) {', '.join(missing)}; your query gives {', '.join(got)}",
        zh=f"缺少词项 {', '.join(missing)}；你的查询得到的是 {', '.join(got)}",
    )


def _as_terms(answer: Any) -> tuple[str, ...]:
    if isinstance(answer, str) or not isinstance(answer, (tuple, list)):
        raise shape_error(
            "the answer should be a tuple of terms, like ('a', 'b')",
            "答案应当是由词项组成的 tuple，例如 ('a', 'b')",
        )
    if not all(isinstance(t, str) for t in answer):
        raise shape_error("every term should be a string", "每个词项都应当是字符串")
    return tuple(answer)


def _found_through(terms: tuple[str, ...]) -> tuple[str, str]:
    """Which records of the edition's corpus ``terms`` find, and through which terms
    (in English, in Chinese)."""
    view = candidates_view(edition_store(), " ".join(terms), SAMPLE_AS_OF, 10)
    found = list(view.loc[view["decision"] == "candidate"].itertuples())
    return (
        "; ".join(f"{row.memory_id} through {row.matched_terms} only" for row in found),
        "；".join(f"{row.memory_id}，只通过 {row.matched_terms}" for row in found),
    )


def _full_width_terms(answer: Any) -> Verdict:
    guess = _as_terms(answer)
    got = terms_of(FULL_WIDTH)
    if sorted(guess) == sorted(got):
        found, found_zh = _found_through(got)
        return right(
            f"{FULL_WIDTH} → {', '.join(got)}. NFKC does not turn 記憶 into 记忆 "
            f"(they are different characters), so it finds {found}",
            zh=f"{FULL_WIDTH} → {', '.join(got)}。NFKC 不会把 記憶 变成 记忆"
            f"（它们是不同的字符），所以在中文样例语料中它找到 {found_zh}",
        )
    if "记忆" in guess:
        return wrong(
            "NFKC folds full-width forms, not traditional or Japanese characters into "
            "simplified ones: 記憶 stays 記憶",
            zh="NFKC 折叠的是全角形式，不会把繁体字或日文汉字转成简体：記憶 仍是 記憶",
        )
    if any(any("Ａ" <= ch <= "ｚ" for ch in t) for t in guess):
        return wrong(
            "NFKC folds the full-width letters ＬＬＭ to ASCII first",
            zh="NFKC 会先把全角字母 ＬＬＭ 折叠成 ASCII",
        )
    if any(t != t.casefold() for t in guess):
        return wrong(
            "after NFKC comes casefold(): the letters are lower case",
            zh="NFKC 之后是 casefold()：字母都是小写",
        )
    if any(len(t) > 2 and any("\u4e00" <= ch <= "\u9fff" for ch in t) for t in guess):
        return wrong(
            "letters touching a Han run are their own term; the Han run gives bigrams",
            zh="紧挨着汉字片段的字母自成一个词项；汉字片段给出二元字符",
        )
    if "記" in guess or "憶" in guess:
        return wrong(
            "a run of two Han characters gives one bigram, not single characters",
            zh="两个汉字组成的片段给出一个二元字符，而不是单个汉字",
        )
    return wrong(
        f"not quite: write the terms as a tuple of strings ({len(got)} of them)",
        zh=f"还不对：把词项写成由字符串组成的 tuple（共 {len(got)} 个）",
    )


Exercise(
    id="02.1",
    title="one query with exactly five given terms",
    grade=_one_query,
    hints=(
        "The terms ('layered', 'memory') come from two words in any case or width.",
        "分层, 层记 and 记忆 are the overlapping bigrams of one Chinese run of four characters.",
    ),
    hints_zh=(
        "词项 ('layered', 'memory') 来自两个单词，大小写和全角半角不限。",
        "分层、层记 和 记忆 是一个四字中文片段的相互重叠的二元字符。",
    ),
    solution='# Exercise 02.1 — solution\nanswer = "Layered-MEMORY 分层记忆"',
    wrong_answers=(
        ("layered memory 分层 记忆", "cut the Chinese run"),
        ("the layered memory 分层记忆", "extra term"),
        ("layered 分层记忆", "missing term"),
        ("!!!", "refuses it"),
    ),
).register()

Exercise(
    id="02.2",
    title="the terms of ＬＬＭ記憶",
    grade=_full_width_terms,
    hints=(
        "Apply the rules in order: NFKC, casefold, then cut into terms.",
        "Letters and Han characters are cut apart; a Han run of two gives one bigram.",
    ),
    hints_zh=(
        "按顺序应用规则：NFKC，casefold，然后切成词项。",
        "字母和汉字会被切开；两个汉字的片段给出一个二元字符。",
    ),
    solution='# Exercise 02.2 — solution\nanswer = ("llm", "記憶")',
    wrong_answers=(
        (("llm", "记忆"), "stays 記憶"),
        (("ＬＬＭ", "記憶"), "full-width letters"),
        (("LLM", "記憶"), "casefold"),
        (("llm記憶",), "own term"),
        (("llm", "記", "憶"), "one bigram"),
        ("llm 記憶", "tuple of terms"),
    ),
).register()

"""Exercises of ``02_normalize.ipynb``."""

from __future__ import annotations

import functools
from typing import Any

from ...errors import RemoteMemoryError
from ...sample import SAMPLE_AS_OF, open_sample_store
from ...stores._base import MemoryStore
from ..language import language, tr
from ..views import candidates_view
from . import Verdict, exercise, right, wrong
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


@exercise(
    "02.1",
    "one query with exactly five given terms",
    hints=(
        "The terms ('layered', 'memory') come from two words in any case or width.",
        "分层, 层记 and 记忆 are the overlapping bigrams of one Chinese run of four characters.",
    ),
    solution='# Exercise 02.1 — solution\nanswer = "Layered-MEMORY 分层记忆"',
    wrong_answers=(
        ("layered memory 分层 记忆", "cut the Chinese run"),
        ("the layered memory 分层记忆", "extra term"),
        ("layered 分层记忆", "missing term"),
        ("!!!", "refuses it"),
    ),
)
def _one_query(answer: Any) -> Verdict:
    text = as_text(answer, "the query")
    try:
        got = terms_of(text)
    except RemoteMemoryError as exc:
        return wrong("normalize refuses it: {exc}", exc=exc)
    if sorted(got) == sorted(TARGET):
        return right("{text!r} → {got}", text=text, got=", ".join(got))
    missing = [t for t in TARGET if t not in got]
    extra = [t for t in got if t not in TARGET]
    if "层记" in missing and {"分层", "记忆"} <= set(got):
        return wrong(
            "分层 and 记忆 are there but 层记 is not: a space cut the Chinese run in two; "
            "bigrams overlap only inside one run"
        )
    if extra:
        return wrong(
            "extra term(s) {extra}: every character run you type becomes a term (the "
            "hyphen and the space separate, they are not terms)",
            extra=", ".join(extra),
        )
    return wrong(
        "missing term(s) {missing}; your query gives {got}",
        missing=", ".join(missing),
        got=", ".join(got),
    )


def _as_terms(answer: Any) -> tuple[str, ...]:
    if isinstance(answer, str) or not isinstance(answer, (tuple, list)):
        raise shape_error("the answer should be a tuple of terms, like ('a', 'b')")
    if not all(isinstance(t, str) for t in answer):
        raise shape_error("every term should be a string")
    return tuple(answer)


def _found_through(terms: tuple[str, ...]) -> str:
    """Which records of the edition's corpus ``terms`` find, and through which terms."""
    view = candidates_view(edition_store(), " ".join(terms), SAMPLE_AS_OF, 10)
    found = view.loc[view["decision"] == "candidate"].itertuples()
    return tr("; ", "；").join(
        tr("{id} through {terms} only", id=row.memory_id, terms=row.matched_terms) for row in found
    )


@exercise(
    "02.2",
    "the terms of ＬＬＭ記憶",
    hints=(
        "Apply the rules in order: NFKC, casefold, then cut into terms.",
        "Letters and Han characters are cut apart; a Han run of two gives one bigram.",
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
)
def _full_width_terms(answer: Any) -> Verdict:
    guess = _as_terms(answer)
    got = terms_of(FULL_WIDTH)
    if sorted(guess) == sorted(got):
        return right(
            "{full_width} → {got}. NFKC does not turn 記憶 into 记忆 (they are different "
            "characters), so it finds {found}",
            full_width=FULL_WIDTH,
            got=", ".join(got),
            found=_found_through(got),
        )
    if "记忆" in guess:
        return wrong(
            "NFKC folds full-width forms, not traditional or Japanese characters into "
            "simplified ones: 記憶 stays 記憶"
        )
    if any(any("Ａ" <= ch <= "ｚ" for ch in t) for t in guess):
        return wrong("NFKC folds the full-width letters ＬＬＭ to ASCII first")
    if any(t != t.casefold() for t in guess):
        return wrong("after NFKC comes casefold(): the letters are lower case")
    if any(len(t) > 2 and any("\u4e00" <= ch <= "\u9fff" for ch in t) for t in guess):
        return wrong("letters touching a Han run are their own term; the Han run gives bigrams")
    if "記" in guess or "憶" in guess:
        return wrong("a run of two Han characters gives one bigram, not single characters")
    return wrong(
        "not quite: write the terms as a tuple of strings ({count} of them)", count=len(got)
    )

"""Exercises of ``02_normalize.ipynb``."""

from __future__ import annotations

from typing import Any

from ...errors import RemoteMemoryError
from . import Exercise, Verdict, exercise, right, wrong
from ._common import as_text, terms_of

TARGET = ("layered", "memory", "分层", "层记", "记忆")
FULL_WIDTH = "ＬＬＭ記憶"


def _one_query(answer: Any) -> Verdict:
    text = as_text(answer, "the query")
    try:
        got = terms_of(text)
    except RemoteMemoryError as exc:
        return wrong(f"normalize refuses it: {exc}")
    if sorted(got) == sorted(TARGET):
        return right(f"{text!r} → {', '.join(got)}")
    missing = [t for t in TARGET if t not in got]
    extra = [t for t in got if t not in TARGET]
    if "层记" in missing and {"分层", "记忆"} <= set(got):
        return wrong("分层 and 记忆 are there but 层记 is not: a space cut the Chinese run in two; "
                     "bigrams overlap only inside one run")
    if extra:
        return wrong(f"extra term(s) {', '.join(extra)}: every character run you type becomes "
                     "a term (the hyphen and the space separate, they are not terms)")
    return wrong(f"missing term(s) {', '.join(missing)}; your query gives {', '.join(got)}")


def _as_terms(answer: Any) -> tuple[str, ...]:
    if isinstance(answer, str) or not isinstance(answer, (tuple, list)):
        raise TypeError("the answer should be a tuple of terms, like ('a', 'b')")
    if not all(isinstance(t, str) for t in answer):
        raise TypeError("every term should be a string")
    return tuple(answer)


def _full_width_terms(answer: Any) -> Verdict:
    guess = _as_terms(answer)
    got = terms_of(FULL_WIDTH)
    if sorted(guess) == sorted(got):
        return right(f"{FULL_WIDTH} → {', '.join(got)}. NFKC does not turn 記憶 into 记忆 "
                     "(they are different characters), so it finds conversation-010 only "
                     "through llm")
    if "记忆" in guess:
        return wrong("NFKC folds full-width forms, not traditional or Japanese characters into "
                     "simplified ones: 記憶 stays 記憶")
    if any(any("Ａ" <= ch <= "ｚ" for ch in t) for t in guess):
        return wrong("NFKC folds the full-width letters ＬＬＭ to ASCII first")
    if any(t != t.casefold() for t in guess):
        return wrong("after NFKC comes casefold(): the letters are lower case")
    if any(len(t) > 2 and any("\u4e00" <= ch <= "\u9fff" for ch in t) for t in guess):
        return wrong("letters touching a Han run are their own term; the Han run gives bigrams")
    if "記" in guess or "憶" in guess:
        return wrong("a run of two Han characters gives one bigram, not single characters")
    return wrong(f"not quite: write the terms as a tuple of strings ({len(got)} of them)")


exercise(Exercise(
    id="02.1",
    title="one query with exactly five given terms",
    grade=_one_query,
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
))

exercise(Exercise(
    id="02.2",
    title="the terms of ＬＬＭ記憶",
    grade=_full_width_terms,
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
))

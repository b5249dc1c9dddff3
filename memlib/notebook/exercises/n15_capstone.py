"""Exercises of ``15_capstone.ipynb``, and the bundled example they grade.

The capstone's notebook writes its notes and questions in its own cells, so a learner can
replace them; the graders hold the same example in ``memlib/data/capstone.json`` (one per
edition: the zh notebook's notes are in Chinese), and a test keeps the two equal. Every
expected value is computed from the library over that example: ``RecallEngine.recall`` for
the hits and ``memlib.eval.locomo.question_recall`` for each question's R@k, as the
notebook does.
The truth of a question (the notes that answer it) is the one thing written by hand: it
is a judgement of the notes, not a result of the memory.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from statistics import mean
from typing import Any

from ...engine import RecallEngine
from ...eval.locomo import question_recall
from ...sample import fixed_clock
from ...stores import open_store
from ...stores._base import MemoryStore
from .._common import course_data
from ..language import language
from ..views import HYBRID_HASHING, explored_rankers
from . import Exercise, Verdict, right, wrong
from ._common import as_number, missing_keys, private_folder

# The notebook's fixed clocks: the "now" of every recall, and the store's own clock.
AS_OF = datetime(2026, 9, 1, 12, tzinfo=UTC)
STORED_AT = datetime(2026, 9, 1, 8, tzinfo=UTC)
USER_ID = "me"
QUERY_ID = "capstone"
LIMIT = 3  # the hits the agent reads, and the k of R@k, in 15.2 and 15.3
TOLERANCE = 0.005  # a share rounded to two places is still the share

Note = tuple[str, str, str]  # (memory_id, captured_at, text)

_EXAMPLE = course_data("capstone")
NOTES: Mapping[str, tuple[Note, ...]] = {
    lang: tuple((memory_id, at, text) for memory_id, at, text in notes)
    for lang, notes in _EXAMPLE["notes"].items()
}
QUESTIONS: Mapping[str, Mapping[str, tuple[str, ...]]] = {
    lang: {question: tuple(truth) for question, truth in questions.items()}
    for lang, questions in _EXAMPLE["questions"].items()
}

# 15.1: a question the learner writes the truth of.
NEW_QUESTION = {"en": "What is planned for October?", "zh": "十月有什么安排？"}
NEW_TRUTH = ("note-01", "note-08")


def note_items(notes: Sequence[Note]) -> list[dict[str, Any]]:
    """The notes as ``append_many`` items, as the notebook writes them."""
    return [
        {
            "kind": "conversation",
            "memory_id": memory_id,
            "content": text,
            "summary": text[:2000],
            "source": {
                "source_id": memory_id,
                "source_type": "note",
                "title": "my notes",
                "captured_at": captured_at,
            },
        }
        for memory_id, captured_at, text in notes
    ]


@functools.cache
def example_store(lang: str) -> MemoryStore:
    """The bundled example of edition ``lang`` in a private folder, removed at exit."""
    path = Path(private_folder()) / "notes.jsonl"
    store = open_store(f"jsonl:{path}", user_id=USER_ID, clock=fixed_clock(STORED_AT))
    store.append_many(note_items(NOTES[lang]))
    return store


def rankers() -> dict[str, Any]:
    """The rankers 15.3 chooses from, by the notebook's labels (no model download)."""
    return explored_rankers()


def ranked_ids(
    store: MemoryStore,
    question: str,
    *,
    ranker: Any = "baseline",
    limit: int = LIMIT,
    min_score: float | None = None,
) -> tuple[str, ...]:
    hits = (
        RecallEngine(store, ranker=ranker)
        .recall(question, limit=limit, as_of=AS_OF, query_id=QUERY_ID, min_score=min_score)
        .hits
    )
    return tuple(hit.memory_id for hit in hits)


def recall_at_k(
    store: MemoryStore,
    questions: Mapping[str, Sequence[str]],
    *,
    ranker: Any = "baseline",
    limit: int = LIMIT,
    min_score: float | None = None,
    k: int | None = None,
) -> dict[str, float]:
    """R@k and H@k (k = ``limit`` unless given) over ``questions``, the hits returned,
    and the share of them that answer (precision), for one configuration."""
    k = limit if k is None else k
    shares, returned, answering = [], 0, 0
    for question, truth in questions.items():
        ranked = ranked_ids(store, question, ranker=ranker, limit=limit, min_score=min_score)
        shares.append(question_recall((0, tuple(truth), ranked), k))
        returned += len(ranked)
        answering += len(set(ranked) & set(truth))
    return {
        "R": mean(shares),
        "H": mean(1.0 if share else 0.0 for share in shares),
        "returned": float(returned),
        "precision": answering / returned if returned else 0.0,
    }


def _close(value: float, want: float) -> bool:
    return abs(value - want) <= TOLERANCE


# -- 15.1 -------------------------------------------------------------------------------------


def _ids(answer: Any) -> list[str]:
    if isinstance(answer, str) or not isinstance(answer, list | tuple | set | frozenset):
        raise TypeError("the answer should be a list of memory ids, e.g. ['note-01']")
    return [str(item) for item in answer]


def _write_truth(answer: Any) -> Verdict:
    ids = _ids(answer)
    lang = language()
    known = {memory_id for memory_id, _, _ in NOTES[lang]}
    unknown = sorted(set(ids) - known)
    if unknown:
        return wrong(
            f"the bundled notes have no {', '.join(unknown)}: copy the ids from the notes table",
            zh=f"示例笔记里没有 {', '.join(unknown)}：从笔记表里复制 id",
        )
    if not ids:
        return wrong(
            "an empty truth: every question you keep needs at least one note that answers it",
            zh="真值为空：保留的每个问题都至少需要一条回答它的笔记",
        )
    given, truth = set(ids), set(NEW_TRUTH)
    if given == truth:
        return right(
            "both notes that mention October answer it; judged by reading, before any recall",
            zh="两条提到十月的笔记都回答了它；这是读笔记判断的，在任何召回之前",
        )
    store = example_store(lang)
    recalled = set(ranked_ids(store, NEW_QUESTION[lang]))
    extra = ", ".join(sorted(given - truth))
    if given == recalled:
        return wrong(
            f"that is what recall returns, not what answers the question ({extra} only "
            "share words with it). Truth taken from recall makes R@k 1.0 by construction",
            zh=f"这是召回返回的结果，而不是回答问题的笔记（{extra} 只是和它共享了词语）。"
            "从召回结果抄来的真值会让 R@k 天然等于 1.0",
        )
    missing = sorted(truth - given)
    if missing:
        return wrong(
            f"{len(missing)} more note(s) answer it: read every note for what happens in October",
            zh=f"还有 {len(missing)} 条笔记回答它：把每条笔记里十月要做的事都找出来",
        )
    return wrong(
        f"not an answer to it: {extra}. Keep only the notes that answer it",
        zh=f"这些笔记并不回答它：{extra}。只保留回答它的笔记",
    )


# -- 15.2 -------------------------------------------------------------------------------------


def _report_recall(answer: Any) -> Verdict:
    value = as_number(answer, "R@3")
    lang = language()
    store = example_store(lang)
    got = recall_at_k(store, QUESTIONS[lang])
    if _close(value, got["R"]):
        return right(
            f"R@{LIMIT} = {got['R']:.4f}: the mean over the questions of the share of each "
            "one's notes found in its top 3",
            zh=f"R@{LIMIT} = {got['R']:.4f}：对所有问题求平均，每个问题取它的笔记在前 3 条中"
            "所占的比例",
        )
    if 1 < value <= 100:
        return wrong(
            f"R@k is a share between 0 and 1: {value:g} looks like a percentage",
            zh=f"R@k 是 0 到 1 之间的比例：{value:g} 看起来是百分数",
        )
    if value > 1 or value < 0:
        return wrong(
            f"R@k is a share between 0 and 1, not {value:g}",
            zh=f"R@k 是 0 到 1 之间的比例，而不是 {value:g}",
        )
    if _close(value, got["H"]):
        return wrong(
            f"that is H@{LIMIT}, the share of questions with at least one answer found; "
            f"R@{LIMIT} gives a question with two notes and one found 0.5",
            zh=f"这是 H@{LIMIT}，即至少找到一个答案的问题所占的比例；R@{LIMIT} 对两条笔记只找到"
            "一条的问题记 0.5",
        )
    if _close(value, got["precision"]):
        return wrong(
            "that is the share of the hits that answer (precision); R@k is the share of "
            "the answers that are hits",
            zh="这是命中中回答了问题的比例（精确率）；R@k 是答案中被命中的比例",
        )
    for k in (1, 5, 10):
        if _close(value, recall_at_k(store, QUESTIONS[lang], limit=k)["R"]):
            return wrong(
                f"that is R@{k}: recall with limit={LIMIT} and count the top {LIMIT}",
                zh=f"这是 R@{k}：用 limit={LIMIT} 召回，统计前 {LIMIT} 条",
            )
    return wrong(
        f"{value:g} is not R@{LIMIT} of the baseline: average the R@{LIMIT} column of "
        "per_question(engine)",
        zh=f"{value:g} 不是 baseline 的 R@{LIMIT}：对 per_question(engine) 的 R@{LIMIT} 列求平均",
    )


# -- 15.3 -------------------------------------------------------------------------------------


def _choose(answer: Any) -> Verdict:
    missing = missing_keys(answer, ("ranker", "min_score"))
    if missing is not None:
        return missing
    name, floor = answer["ranker"], answer["min_score"]
    choices = rankers()
    if name == "hybrid":
        return wrong(
            f"plain 'hybrid' loads the e5 model (a download); choose {HYBRID_HASHING!r}, "
            "the same ranker with the offline hashing embedder",
            zh=f"单写 'hybrid' 会加载 e5 模型（需要下载）；请选 {HYBRID_HASHING!r}，"
            "即使用离线哈希嵌入器的同一个排序器",
        )
    if name not in choices:
        return wrong(
            f"no ranker {name!r} here; choose one of {', '.join(map(repr, choices))}",
            zh=f"这里没有排序器 {name!r}；请从 {', '.join(map(repr, choices))} 中选",
        )
    if floor is not None:
        floor = as_number(floor, "min_score")
    lang = language()
    store, questions = example_store(lang), QUESTIONS[lang]
    best = max(recall_at_k(store, questions, ranker=r)["R"] for r in choices.values())
    plain = recall_at_k(store, questions, ranker=choices[name])
    chosen = recall_at_k(store, questions, ranker=choices[name], min_score=floor)
    if chosen["R"] < plain["R"]:
        return wrong(
            f"min_score {floor:g} drops notes that answer: R@{LIMIT} falls from "
            f"{plain['R']:.4f} to {chosen['R']:.4f}. A floor is on its ranker's own scale",
            zh=f"min_score {floor:g} 丢掉了回答问题的笔记：R@{LIMIT} 从 {plain['R']:.4f} 降到 "
            f"{chosen['R']:.4f}。下限要按所选排序器自己的分数尺度来定",
        )
    if chosen["R"] < best:
        return wrong(
            f"{name} finds R@{LIMIT} = {chosen['R']:.4f}; another ranker finds {best:.4f} "
            "on these questions",
            zh=f"{name} 的 R@{LIMIT} = {chosen['R']:.4f}；"
            f"在这些问题上另一个排序器能达到 {best:.4f}",
        )
    spared = int(plain["returned"] - chosen["returned"])
    return right(
        f"{name}: R@{LIMIT} = {chosen['R']:.4f}, the best here, with "
        f"{int(chosen['returned'])} hits for the model to read ({spared} spared by the floor)",
        zh=f"{name}：R@{LIMIT} = {chosen['R']:.4f}，这里最好；模型要读 "
        f"{int(chosen['returned'])} 条命中（下限省掉了 {spared} 条）",
    )


Exercise(
    id="15.1",
    title="write the truth of a question",
    grade=_write_truth,
    hints=(
        "Read the notes table of section 1, not a recall: which notes say what happens in October?",
        "A question may have several notes that answer it. A note that only shares a word "
        "(“what”, “is”) with the question does not answer it.",
        'answer = ["note-..", "note-.."]: the two notes that name October.',
    ),
    hints_zh=(
        "读第 1 节的笔记表，而不是召回结果：哪些笔记说了十月要做的事？",
        "一个问题可以有好几条回答它的笔记。只和问题共享一个词（“什么”“有”）的笔记并不回答它。",
        'answer = ["note-..", "note-.."]：提到十月的那两条笔记。',
    ),
    solution=(
        "# Exercise 15.1 — solution\n"
        'answer = ["note-01", "note-08"]  # the next bike service and the MOT, both in October'
    ),
    wrong_answers=(
        (["note-01"], "more note(s) answer it"),
        (["note-01", "note-08", "note-05"], "not an answer to it: note-05"),
        (["note-01", "note-99"], "have no note-99"),
        ([], "empty truth"),
        ("note-01", "list of memory ids"),
    ),
).register()

Exercise(
    id="15.2",
    title="report R@3 of the baseline",
    grade=_report_recall,
    hints=(
        "R@k of one question is the share of its notes found in its top k; R@k of a set of "
        "questions is the mean of those shares.",
        "per_question(engine) has one R@3 per question: a question with two notes and one "
        "of them found counts 0.5, not 1.",
        'answer = per_question(engine)["R@3"].mean()',
    ),
    hints_zh=(
        "一个问题的 R@k 是它的笔记在前 k 条里所占的比例；一组问题的 R@k 是这些比例的平均值。",
        "per_question(engine) 给每个问题一个 R@3：两条笔记只找到一条的问题记 0.5，而不是 1。",
        '对 R@3 这一列求平均：answer = per_question(engine)["R@3"].mean()',
    ),
    solution=(
        "# Exercise 15.2 — solution\n"
        "# The mean of each question's share of its notes in its top 3 (question_recall).\n"
        'answer = per_question(engine)["R@3"].mean()'
    ),
    wrong_answers=(
        (58.33, "percentage"),
        (-0.5, "between 0 and 1"),
        (0.05, "is not R@3"),
        ("0.58", "should be a number"),
    ),
).register()

Exercise(
    id="15.3",
    title="choose the ranker and the floor",
    grade=_choose,
    hints=(
        "Read the tuning table at limit 3: which ranker finds the most of the truth? Then "
        "look at what a floor does to its R@3 and to the hits returned.",
        "A floor is on its ranker's scale: bm25's totals are not bounded by 1, and "
        "bm25+stopwords gives 0 to a note that shares only stopwords.",
        'answer = {"ranker": "<a label of views.explored_rankers()>", "min_score": None or '
        "a number}",
    ),
    hints_zh=(
        "看 limit 3 的调参表：哪个排序器找到的真值最多？"
        "再看下限对它的 R@3 和返回命中数有什么影响。",
        "下限用的是所选排序器自己的尺度：bm25 的总分不以 1 为上限，bm25+stopwords 给只共享停用词"
        "的笔记打 0 分。",
        'answer = {"ranker": "<views.explored_rankers() 中的一个名字>", '
        '"min_score": None 或一个数}',
    ),
    solution=(
        "# Exercise 15.3 — solution\n"
        "# The best R@3 of the table; among equals, the fewest hits for the model to read.\n"
        'at_3 = tuning[tuning["limit"] == 3].sort_values(\n'
        '    ["R@k", "hits returned"], ascending=[False, True], kind="stable")\n'
        "best = at_3.iloc[0]\n"
        'answer = {"ranker": best["ranker"],\n'
        '          "min_score": None if best["min_score"] == "—" else best["min_score"]}'
    ),
    wrong_answers=(
        ({"ranker": "baseline", "min_score": None}, "another ranker finds"),
        ({"ranker": "baseline", "min_score": 0.9}, "drops notes that answer"),
        ({"ranker": "hybrid", "min_score": None}, "loads the e5 model"),
        ({"ranker": "bm42", "min_score": None}, "no ranker 'bm42'"),
        ({"ranker": "bm25"}, "missing: min_score"),
        ("bm25", "should be a dict"),
    ),
).register()

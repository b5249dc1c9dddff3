"""Exercises of ``15_capstone.ipynb``, and the bundled example they grade.

The graders hold the notebook's notes and questions in ``memlib/data/capstone.json`` (one
per edition; a test keeps the two equal) and compute every expected value from the
library, as the notebook does. Only the truth of a question (the notes that answer it) is
written by hand: it is a judgement of the notes, not a result of the memory.
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
from . import Verdict, exercise, right, wrong
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


@exercise(
    "15.1",
    "write the truth of a question",
    hints=(
        "Read the notes table of section 1, not a recall: which notes say what happens in October?",
        "A question may have several notes that answer it. A note that only shares a word "
        "(“what”, “is”) with the question does not answer it.",
        'answer = ["note-..", "note-.."]: the two notes that name October.',
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
)
def _write_truth(answer: Any) -> Verdict:
    ids = _ids(answer)
    lang = language()
    known = {memory_id for memory_id, _, _ in NOTES[lang]}
    unknown = sorted(set(ids) - known)
    if unknown:
        return wrong(
            "the bundled notes have no {unknown}: copy the ids from the notes table",
            unknown=", ".join(unknown),
        )
    if not ids:
        return wrong(
            "an empty truth: every question you keep needs at least one note that answers it"
        )
    given, truth = set(ids), set(NEW_TRUTH)
    if given == truth:
        return right(
            "both notes that mention October answer it; judged by reading, before any recall"
        )
    store = example_store(lang)
    recalled = set(ranked_ids(store, NEW_QUESTION[lang]))
    extra = ", ".join(sorted(given - truth))
    if given == recalled:
        return wrong(
            "that is what recall returns, not what answers the question ({extra} only "
            "share words with it). Truth taken from recall makes R@k 1.0 by "
            "construction",
            extra=extra,
        )
    missing = sorted(truth - given)
    if missing:
        return wrong(
            "{n_missing} more note(s) answer it: read every note for what happens in October",
            n_missing=len(missing),
        )
    return wrong("not an answer to it: {extra}. Keep only the notes that answer it", extra=extra)


# -- 15.2 -------------------------------------------------------------------------------------


@exercise(
    "15.2",
    "report R@3 of the baseline",
    hints=(
        "R@k of one question is the share of its notes found in its top k; R@k of a set of "
        "questions is the mean of those shares.",
        "per_question(engine) has one R@3 per question: a question with two notes and one "
        "of them found counts 0.5, not 1.",
        'answer = per_question(engine)["R@3"].mean()',
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
)
def _report_recall(answer: Any) -> Verdict:
    value = as_number(answer, "R@3")
    lang = language()
    store = example_store(lang)
    got = recall_at_k(store, QUESTIONS[lang])
    if _close(value, got["R"]):
        return right(
            "R@{limit} = {R:.4f}: the mean over the questions of the share of each "
            "one's notes found in its top 3",
            limit=LIMIT,
            R=got["R"],
        )
    if 1 < value <= 100:
        return wrong(
            "R@k is a share between 0 and 1: {value:g} looks like a percentage", value=value
        )
    if value > 1 or value < 0:
        return wrong("R@k is a share between 0 and 1, not {value:g}", value=value)
    if _close(value, got["H"]):
        return wrong(
            "that is H@{limit}, the share of questions with at least one answer found; "
            "R@{limit} gives a question with two notes and one found 0.5",
            limit=LIMIT,
        )
    if _close(value, got["precision"]):
        return wrong(
            "that is the share of the hits that answer (precision); R@k is the share "
            "of the answers that are hits"
        )
    for k in (1, 5, 10):
        if _close(value, recall_at_k(store, QUESTIONS[lang], limit=k)["R"]):
            return wrong(
                "that is R@{k}: recall with limit={limit} and count the top {limit}",
                k=k,
                limit=LIMIT,
            )
    return wrong(
        "{value:g} is not R@{limit} of the baseline: average the R@{limit} column of "
        "per_question(engine)",
        value=value,
        limit=LIMIT,
    )


# -- 15.3 -------------------------------------------------------------------------------------


@exercise(
    "15.3",
    "choose the ranker and the floor",
    hints=(
        "Read the tuning table at limit 3: which ranker finds the most of the truth? Then "
        "look at what a floor does to its R@3 and to the hits returned.",
        "A floor is on its ranker's scale: bm25's totals are not bounded by 1, and "
        "bm25+stopwords gives 0 to a note that shares only stopwords.",
        'answer = {"ranker": "<a label of views.explored_rankers()>", "min_score": None or '
        "a number}",
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
)
def _choose(answer: Any) -> Verdict:
    missing = missing_keys(answer, ("ranker", "min_score"))
    if missing is not None:
        return missing
    name, floor = answer["ranker"], answer["min_score"]
    choices = rankers()
    if name == "hybrid":
        return wrong(
            "plain 'hybrid' loads the e5 model (a download); choose "
            "{hybrid_hashing!r}, the same ranker with the offline hashing embedder",
            hybrid_hashing=HYBRID_HASHING,
        )
    if name not in choices:
        return wrong(
            "no ranker {name!r} here; choose one of {rankers}",
            name=name,
            rankers=", ".join(map(repr, choices)),
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
            "min_score {floor:g} drops notes that answer: R@{limit} falls from {R:.4f} "
            "to {after:.4f}. A floor is on its ranker's own scale",
            floor=floor,
            limit=LIMIT,
            R=plain["R"],
            after=chosen["R"],
        )
    if chosen["R"] < best:
        return wrong(
            "{name} finds R@{limit} = {R:.4f}; another ranker finds {best:.4f} on these questions",
            name=name,
            limit=LIMIT,
            R=chosen["R"],
            best=best,
        )
    spared = int(plain["returned"] - chosen["returned"])
    return right(
        "{name}: R@{limit} = {R:.4f}, the best here, with {hits} hits for the model to "
        "read ({spared} spared by the floor)",
        name=name,
        limit=LIMIT,
        R=chosen["R"],
        hits=int(chosen["returned"]),
        spared=spared,
    )

"""Exercises of ``03_candidates.ipynb``."""

from __future__ import annotations

from typing import Any

from ...errors import RemoteMemoryError
from ...sample import SAMPLE_AS_OF
from ..views import candidates_view, recall
from . import Exercise, Verdict, exercise, right, wrong
from ._common import as_text, sample_store, terms_of

TARGET = "conversation-009"
TITLE_TERMS = {"retention", "policy"}
COUNTED_QUERY = "Berlin memory"


def _only_candidate(answer: Any) -> Verdict:
    text = as_text(answer, "the query")
    try:
        terms = terms_of(text)
    except RemoteMemoryError as exc:
        return wrong(f"normalize refuses it: {exc}")
    view = candidates_view(sample_store(), text, SAMPLE_AS_OF, 10)
    chosen = set(view.loc[view["decision"] == "candidate", "memory_id"])
    if len(terms) != 2:
        return wrong(f"{text!r} has {len(terms)} term(s) ({', '.join(terms)}): use exactly two")
    if chosen == {TARGET}:
        return right(f"{', '.join(terms)}: {TARGET} is the only candidate — found by its text, "
                     "not its title")
    if TARGET not in chosen and set(terms) & TITLE_TERMS:
        return wrong(f"{TARGET}'s title is “Retention policy”, but titles are not searched: only "
                     "summary + content, and those say something else")
    if TARGET not in chosen:
        return wrong(f"{TARGET} shares none of {', '.join(terms)}: read its summary and content")
    others = sorted(chosen - {TARGET})
    return wrong(f"{', '.join(others)} also share(s) a term: choose words only {TARGET} has")


def _counts(answer: Any) -> Verdict:
    if (not isinstance(answer, (tuple, list)) or len(answer) != 2
            or not all(isinstance(n, int) and not isinstance(n, bool) for n in answer)):
        raise TypeError("the answer should be two whole numbers: (searched, candidates)")
    result = recall(sample_store(), COUNTED_QUERY, SAMPLE_AS_OF, 10)
    expected = (result.searched_records, result.candidate_records)
    searched, candidates = answer
    if tuple(answer) == expected:
        return right(f"searched {expected[0]}, candidates {expected[1]}: profiles are never "
                     "searched, and one shared term is enough")
    if searched != expected[0]:
        return wrong("searched_records counts the conversation records of the scope only — "
                     "profiles are never searched")
    if candidates > expected[1]:
        return wrong("a profile mentions Berlin, but a profile is never a candidate")
    return wrong("a candidate needs only ONE shared term with the query: count every record "
                 "that says memory or Berlin")


exercise(Exercise(
    id="03.1",
    title="a two-term query whose only candidate is conversation-009",
    grade=_only_candidate,
    hints=(
        "conversation-009 is titled “Retention policy”. Which of its fields are searched?",
        "Read its summary and content in the records table of 01 (or with the explorer) and "
        "pick two words no other conversation uses.",
    ),
    solution='# Exercise 03.1 — solution\nanswer = "retained year"',
    wrong_answers=(
        ("retention policy", "titles are not searched"),
        ("conversation memory", "also share"),
        ("retained", "use exactly two"),
        ("osaka hotel", "shares none of"),
    ),
))

exercise(Exercise(
    id="03.2",
    title="searched_records and candidate_records of “Berlin memory”",
    grade=_counts,
    hints=(
        "searched_records counts what candidate building examined; which kinds does it examine?",
        "Look for each of the two terms in every conversation record; profile-002 says Berlin.",
    ),
    solution="# Exercise 03.2 — solution\nanswer = (13, 3)",
    wrong_answers=(((15, 4), "never searched"), ((13, 4), "never a candidate"),
                   ((13, 1), "only ONE shared term"), ("13, 3", "two whole numbers")),
))

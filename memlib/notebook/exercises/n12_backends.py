"""Exercises of ``12_backends_and_scale.ipynb``."""

from __future__ import annotations

from typing import Any

from ...engine import RecallEngine
from ...rankers.baseline import upper_bound
from ...sample import SAMPLE_AS_OF
from . import Exercise, Verdict, exercise, right, wrong
from ._common import sample_store

# 12.1: a query of TERMS terms whose limit-th best total so far is BEST.
TERMS = 5
BEST = 0.55
# 12.2: a query whose terms' posting lists overlap.
QUERY = "embedding reranker memory"


def _as_int(answer: Any, what: str) -> int:
    if isinstance(answer, bool) or not isinstance(answer, int):
        raise TypeError(f"{what} should be an int, not {type(answer).__name__}")
    return answer


def largest_skipped_group() -> int:
    """The largest matched-term count ``m`` whose bound the best total already beats."""
    return max(m for m in range(TERMS + 1) if upper_bound(m, TERMS) < BEST)


def _skipped(answer: Any) -> Verdict:
    m = _as_int(answer, "the number of matched terms")
    expected = largest_skipped_group()
    if m == expected:
        return right(f"a record matching {m} of {TERMS} terms reaches at most "
                     f"{upper_bound(m, TERMS)} < {BEST}; one matching {m + 1} could reach "
                     f"{upper_bound(m + 1, TERMS)}")
    if not 0 <= m <= TERMS:
        return wrong(f"a record matches between 0 and {TERMS} of the query's {TERMS} terms")
    if m > expected:
        return wrong(f"too bold: a record matching {m} terms could reach "
                     f"0.85·{m}/{TERMS} + 0.15 = {upper_bound(m, TERMS)}, which beats "
                     f"{BEST}, so its group must still be visited")
    terms = "term" if m + 1 == 1 else "terms"
    return wrong(f"too cautious: a record matching {m + 1} {terms} reaches at most "
                 f"{upper_bound(m + 1, TERMS)} (recency 1), below {BEST}: that group "
                 "can be skipped too")


def candidate_count() -> tuple[int, int, int, int]:
    """``QUERY``'s candidate and searched records, and the sum and the largest of its
    terms' posting lists (a term recalled alone has its posting list as candidates)."""
    engine = RecallEngine(sample_store())
    result = engine.recall(QUERY, as_of=SAMPLE_AS_OF, query_id="grader")
    lists = [engine.recall(term, as_of=SAMPLE_AS_OF, query_id="grader").candidate_records
             for term in result.query.terms]
    return result.candidate_records, result.searched_records, sum(lists), max(lists)


def _candidates(answer: Any) -> Verdict:
    n = _as_int(answer, "the number of candidate records")
    expected, searched, total, largest = candidate_count()
    if n == expected:
        return right(f"{expected}: the union of the posting lists; {total - expected} "
                     "record(s) sit in two lists and count once")
    if n == total:
        return wrong("that is the sum of the posting lists' lengths: a record in two lists "
                     "is one candidate (take the union, not the sum)")
    if n == largest:
        return wrong("that is the longest posting list alone: a record holding any one "
                     "term of the query is a candidate")
    if n == searched:
        return wrong(f"{searched} is searched_records (every conversation record); "
                     "candidates are those that share at least one term")
    return wrong(f"not the candidate count: list the records of each term of {QUERY!r} "
                 "(posting_rows) and count the distinct ids")


exercise(Exercise(
    id="12.1",
    title="which groups the top-k walk never scores",
    grade=_skipped,
    hints=(
        "A record matching m of q terms scores at most 0.85·m/q + 0.15 (recency ≤ 1).",
        f"Compute that bound for q = {TERMS} and m = 1, 2, 3, … and compare each with "
        f"{BEST}: the walk stops before the first group whose bound is below it.",
        "The answer is the largest m whose bound is strictly below the best total.",
    ),
    solution="# Exercise 12.1 — solution\nanswer = 2",
    wrong_answers=(
        (3, "too bold"),
        (1, "too cautious"),
        (0, "too cautious"),
        (7, "between 0 and"),
        (2.0, "should be an int"),
    ),
))

exercise(Exercise(
    id="12.2",
    title="candidates from posting lists",
    grade=_candidates,
    hints=(
        "A candidate is a searched record that holds at least one of the query's terms.",
        f"jsonl.index.posting_rows(terms) lists, per term of {QUERY!r}, the records "
        "holding it.",
        "Count each memory_id once, even when it is in two posting lists.",
    ),
    solution="# Exercise 12.2 — solution\nanswer = 5",
    wrong_answers=(
        (7, "sum of the posting lists"),
        (3, "longest posting list"),
        (13, "searched_records"),
        (1, "not the candidate count"),
        ("5", "should be an int"),
    ),
))

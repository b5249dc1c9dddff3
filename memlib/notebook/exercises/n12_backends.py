"""Exercises of ``12_backends_and_scale.ipynb``."""

from __future__ import annotations

from typing import Any

from ...engine import RecallEngine
from ...rankers.baseline import upper_bound
from ...sample import SAMPLE_AS_OF
from . import Verdict, exercise, right, wrong
from ._common import as_int, sample_store

# 12.1: a query of TERMS terms whose limit-th best total so far is BEST.
TERMS = 5
BEST = 0.55
# 12.2: a query whose terms' posting lists overlap.
QUERY = "embedding reranker memory"


def largest_skipped_group() -> int:
    """The largest matched-term count ``m`` whose bound the best total already beats."""
    return max(m for m in range(TERMS + 1) if upper_bound(m, TERMS) < BEST)


@exercise(
    "12.1",
    "which groups the top-k walk never scores",
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
)
def _skipped(answer: Any) -> Verdict:
    m = as_int(answer, "the number of matched terms", "an int")
    expected = largest_skipped_group()
    if m == expected:
        return right(
            "a record matching {m} of {terms} terms reaches at most {upper_bound} < "
            "{best}; one matching {next} could reach {next_bound}",
            m=m,
            terms=TERMS,
            upper_bound=upper_bound(m, TERMS),
            best=BEST,
            next=m + 1,
            next_bound=upper_bound(m + 1, TERMS),
        )
    if not 0 <= m <= TERMS:
        return wrong(
            "a record matches between 0 and {terms} of the query's {terms} terms", terms=TERMS
        )
    if m > expected:
        return wrong(
            "too bold: a record matching {m} terms could reach 0.85·{m}/{terms} + 0.15 "
            "= {upper_bound}, which beats {best}, so its group must still be visited",
            m=m,
            terms=TERMS,
            upper_bound=upper_bound(m, TERMS),
            best=BEST,
        )
    terms = "term" if m + 1 == 1 else "terms"
    return wrong(
        "too cautious: a record matching {next} {terms} reaches at most {upper_bound} "
        "(recency 1), below {best}: that group can be skipped too",
        next=m + 1,
        terms=terms,
        upper_bound=upper_bound(m + 1, TERMS),
        best=BEST,
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


@exercise(
    "12.2",
    "candidates from posting lists",
    hints=(
        "A candidate is a searched record that holds at least one of the query's terms.",
        f"jsonl.index.posting_rows(terms) lists, per term of {QUERY!r}, the records holding it.",
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
)
def _candidates(answer: Any) -> Verdict:
    n = as_int(answer, "the number of candidate records", "an int")
    expected, searched, total, largest = candidate_count()
    if n == expected:
        return right(
            "{expected}: the union of the posting lists; {shared} record(s) sit in two "
            "lists and count once",
            expected=expected,
            shared=total - expected,
        )
    if n == total:
        return wrong(
            "that is the sum of the posting lists' lengths: a record in two lists is "
            "one candidate (take the union, not the sum)"
        )
    if n == largest:
        return wrong(
            "that is the longest posting list alone: a record holding any one term of "
            "the query is a candidate"
        )
    if n == searched:
        return wrong(
            "{searched} is searched_records (every conversation record); candidates "
            "are those that share at least one term",
            searched=searched,
        )
    return wrong(
        "not the candidate count: list the records of each term of {query!r} "
        "(posting_rows) and count the distinct ids",
        query=QUERY,
    )

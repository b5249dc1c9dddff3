"""Exercises of ``11_rankers.ipynb``."""

from __future__ import annotations

import math
from typing import Any

from ..._tokens import english_stopwords
from ...engine import RecallEngine
from ...errors import RemoteMemoryError
from ...sample import SAMPLE_AS_OF
from . import Verdict, exercise, right, wrong
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


@exercise(
    "11.1",
    "a query on which stopwords change the top hit",
    hints=(
        "bm25 scores every query term; bm25+stopwords leaves the stopwords out of the "
        "scoring. They can only disagree when the query holds both kinds of word.",
        "Take one topic word that several records share (memory, recall, …), then add a "
        "stopword that one of those records repeats more than the others.",
        "Try it in the explorer: its bm25 and bm25+stopwords columns side by side.",
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
)
def _disagree(answer: Any) -> Verdict:
    text = as_text(answer, "the query")
    try:
        plain = _top(text, "bm25")
    except RemoteMemoryError as exc:
        return wrong("recall refuses this query: {exc}", exc=exc)
    terms = terms_of(text)
    if plain is None:
        return wrong(
            "no record shares a term with {text!r} (its terms: {terms}): use words of "
            "the sample records",
            text=text,
            terms=", ".join(terms),
        )
    stop = english_stopwords()
    if all(t in stop for t in terms):
        return wrong(
            "{text!r} has only stopwords, so bm25+stopwords scores all of them "
            "(nothing else is left): add one word that names a topic",
            text=text,
        )
    if not any(t in stop for t in terms):
        return wrong(
            "{text!r} has no stopword: both rankers score the same terms and agree "
            "({plain} first). Add common words such as 'the' or 'a'",
            text=text,
            plain=plain,
        )
    filtered = _top(text, "bm25+stopwords")
    if plain == filtered:
        return wrong(
            "both rank {plain} first: pick stopwords that another record holds many "
            "of, or fewer topic words",
            plain=plain,
        )
    return right(
        "bm25 ranks {plain} first (its stopwords count), bm25+stopwords ranks {filtered} first",
        plain=plain,
        filtered=filtered,
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


@exercise(
    "11.2",
    "the idf weight of 'the'",
    hints=(
        "idf(t) = ln(1 + (N − df + 0.5)/(df + 0.5)), with N the number of searched "
        "records and df the number of them that hold t.",
        "N = 13: the conversation records (profiles are never searched); df = 8.",
        "math.log is the natural logarithm: answer = math.log(1 + 5.5 / 8.5).",
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
)
def _idf(answer: Any) -> Verdict:
    as_number(answer, "the weight")
    weight, n, df = idf_weight()

    def near(value: float) -> bool:
        return bool(abs(answer - value) <= 5e-4)

    if near(weight):
        return right(
            "idf({term}) = ln(1 + ({n} − {df} + 0.5)/({df} + 0.5)) = {weight:.4f}: "
            "low, because most records hold it",
            term=TERM,
            n=n,
            df=df,
            weight=weight,
        )
    if near(math.log(n / df)):
        return wrong(
            "that is the textbook idf ln(N/df); BM25 adds 0.5 to both counts and 1 "
            "inside the logarithm"
        )
    if near(math.log((n - df + 0.5) / (df + 0.5))):
        return wrong(
            "the formula has 1 + inside the logarithm, so a term in most records still "
            "gets a small positive weight instead of a negative one"
        )
    for other_n in (15, n + 2):
        if near(math.log(1 + (other_n - df + 0.5) / (df + 0.5))):
            return wrong(
                "N is the number of searched records ({n} conversation records), not "
                "every stored record: profiles are never searched",
                n=n,
            )
    if near(math.log(1 + (df + 0.5) / (n - df + 0.5))):
        return wrong("df and N − df are swapped: the rarer the term, the larger its weight")
    return wrong(
        "not the weight BM25 gives {term!r}: put N = {n} and df = {df} into ln(1 + (N "
        "− df + 0.5)/(df + 0.5))",
        term=TERM,
        n=n,
        df=df,
    )

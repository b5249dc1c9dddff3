"""The seed ranker of the chapter: 0.85 × term coverage + 0.15 × recency
(docs/reference.md "Score").

Recency is never above 1, so a record matching ``m`` of ``q`` terms scores at most
0.85 · m/q + 0.15: what an index needs to walk the matches best group first and stop
early (``ScoreBound``).
"""

from __future__ import annotations

from datetime import datetime

from ..candidates import CandidateScan
from ..normalize import RecallQuery
from ..score import (
    DECIMALS,
    LEXICAL_WEIGHT,
    RECENCY_WEIGHT,
    RecallScoreBreakdown,
    recency_of,
    score_recall_candidate,
)


def upper_bound(matched: int, term_count: int) -> float:
    """The greatest total a record matching ``matched`` terms can reach (recency = 1)."""
    return round(LEXICAL_WEIGHT * (matched / term_count) + RECENCY_WEIGHT * 1.0, DECIMALS)


class BaselineRanker:
    """Coverage and recency, weighted (a ``ScoreBound``: an index may walk for it)."""

    name = "baseline"
    # The min_score "suggested" gives: calibrated on LoCoMo dev (docs/abstention.md).
    suggested_min_score = 0.33

    def score_candidates(
        self, query: RecallQuery, scan: CandidateScan, *, as_of: datetime
    ) -> tuple[RecallScoreBreakdown, ...]:
        return tuple(score_recall_candidate(query, c, as_of=as_of) for c in scan.candidates)

    def exact_total(
        self, matched: int, term_count: int, captured: datetime, as_of: datetime
    ) -> float:
        """The baseline ``total`` (docs/reference.md "Score"), as ``score_recall_candidate``
        computes it."""
        coverage = matched / term_count
        lexical = LEXICAL_WEIGHT * coverage
        recent = RECENCY_WEIGHT * recency_of(captured, as_of)
        return round(lexical + recent, DECIMALS)

    def upper_bound(self, matched: int, term_count: int) -> float:
        return upper_bound(matched, term_count)

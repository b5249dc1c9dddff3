"""The seed ranker of the chapter: 0.85 × term coverage + 0.15 × recency
(docs/reference.md "Score"); its bound for an index's walk is ``score.BaselineBound``."""

from __future__ import annotations

from datetime import datetime

from ..candidates import CandidateScan
from ..normalize import RecallQuery
from ..score import BaselineBound, RecallScoreBreakdown, score_recall_candidate


def upper_bound(matched: int, term_count: int) -> float:
    """The greatest total a record matching ``matched`` terms can reach (recency = 1)."""
    return BaselineBound().upper_bound(matched, term_count)


class BaselineRanker(BaselineBound):
    """Coverage and recency, weighted (a ``ScoreBound``: an index may walk for it)."""

    name = "baseline"
    # The min_score "suggested" gives: calibrated on LoCoMo dev (docs/abstention.md).
    suggested_min_score = 0.34

    def score_candidates(
        self, query: RecallQuery, scan: CandidateScan, *, as_of: datetime
    ) -> tuple[RecallScoreBreakdown, ...]:
        return tuple(score_recall_candidate(query, c, as_of=as_of) for c in scan.candidates)

"""The seed ranker of the chapter: 0.85 × term coverage + 0.15 × recency (SPEC §3.3)."""

from __future__ import annotations

from datetime import datetime

from ..candidates import CandidateScan
from ..normalize import RecallQuery
from ..score import RecallScoreBreakdown, score_recall_candidate

__all__ = ["BaselineRanker"]


class BaselineRanker:
    name = "baseline"

    def score_candidates(
        self, query: RecallQuery, scan: CandidateScan, *, as_of: datetime
    ) -> tuple[RecallScoreBreakdown, ...]:
        return tuple(score_recall_candidate(query, c, as_of=as_of) for c in scan.candidates)

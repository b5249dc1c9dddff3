"""The ranker interface (SPEC §7).

A ranker turns the candidates of one recall into one explained breakdown each. It
never sorts: the stable tie-breakers of stage 4 are the same for every ranker.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, runtime_checkable

from ..candidates import CandidateScan
from ..normalize import RecallQuery
from ..score import RecallScoreBreakdown

__all__ = ["Ranker"]


@runtime_checkable
class Ranker(Protocol):
    name: str

    def score_candidates(
        self, query: RecallQuery, scan: CandidateScan, *, as_of: datetime
    ) -> tuple[RecallScoreBreakdown, ...]:
        """One breakdown per ``scan.candidates``, in the same order."""
        ...

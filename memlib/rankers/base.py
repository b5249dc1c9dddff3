"""Helpers every ranker shares; the capability protocols live in ``memlib._capabilities``."""

from __future__ import annotations

import heapq
from collections.abc import Collection, Sequence

from .._capabilities import DenseScoring, LexicalScoring, Ranker, ScoreBound, TopScoring
from ..candidates import CandidateScan
from ..score import DECIMALS

__all__ = ["DenseScoring", "LexicalScoring", "Ranker", "ScoreBound", "TopScoring", "top_positions"]


def top_positions(
    scan: CandidateScan,
    totals: Sequence[float],
    per_term: Sequence[Collection[str]],
    terms: Sequence[str],
    limit: int,
) -> list[int]:
    """Positions of the top ``limit`` candidates by stage 4's key (``rank.rank_key``), from
    unrounded ``totals`` and the scoring terms each holds (rounded as ``ranker_breakdown``)."""
    candidates = scan.candidates

    def key(i: int) -> tuple[float, float, float, str]:
        candidate = candidates[i]
        matched = sum(t in per_term[i] for t in terms)
        return (
            -round(totals[i], DECIMALS),
            -round(matched / len(terms), DECIMALS),
            -candidate.captured_at.timestamp(),
            candidate.record.memory_id,
        )

    return heapq.nsmallest(limit, range(len(candidates)), key=key)
